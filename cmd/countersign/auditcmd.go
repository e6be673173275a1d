package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/store/pgstore"
)

const auditSynopsis = `audit verify|checkpoint|bench [flags]

  verify      --data DIR | --url URL [--credential FILE] [--key record.pub] [--signatures]
              Checks the whole record: seq continuity, hash links, entry
              hashes and the Merkle tree against a signed checkpoint; with
              --signatures every entry's Ed25519 signature too.
              --data reads a stopped server's data directory; --url reads
              a running server over HTTP.
  checkpoint  --data DIR | --url URL [--credential FILE]
              Prints the latest signed checkpoint (a C2SP signed note).
  bench       --data DIR [--writers 64] [--count N] [--acks]
              Appends synthetic entries with concurrent writers and reports
              the rate. With --acks it prints "seq hash" for every entry
              whose transaction was acknowledged (used by crash tests).`

func cmdAudit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", auditSynopsis)
		return errUsage
	}
	switch args[0] {
	case "verify":
		return cmdAuditVerify(ctx, args[1:], stdout, stderr)
	case "checkpoint":
		return cmdAuditCheckpoint(ctx, args[1:], stdout, stderr)
	case "bench":
		return cmdAuditBench(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintf(stdout, "Usage: countersign %s\n", auditSynopsis)
		return nil
	default:
		fmt.Fprintf(stderr, "countersign audit: unknown command %q\nUsage: countersign %s\n", args[0], auditSynopsis)
		return errUsage
	}
}

// source is where an audit command reads the record from.
type source struct {
	data, url, key, credential string
}

func (s *source) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&s.data, "data", "", "data `directory` of a stopped server")
	fs.StringVar(&s.url, "url", "", "base `URL` of a running server")
	fs.StringVar(&s.key, "key", "", "record verifier key `file` (default <data>/record.pub; required with --url unless ./countersign-data/record.pub exists)")
	fs.StringVar(&s.credential, "credential", "", "agent credential `file` for --url (the record is read with an agent credential)")
}

// fetcher returns the record reader for --url, with the --credential.
func (s *source) fetcher() (*audit.HTTPFetcher, error) {
	f := &audit.HTTPFetcher{BaseURL: s.url}
	if s.credential != "" {
		b, err := os.ReadFile(s.credential)
		if err != nil {
			return nil, fmt.Errorf("--credential: %w", err)
		}
		f.Credential = strings.TrimSpace(string(b))
	}
	return f, nil
}

func (s *source) check() error {
	if (s.data == "") == (s.url == "") {
		return errors.New("give exactly one of --data DIR or --url URL")
	}
	return nil
}

// verifier returns the record verifier key, origin and public key.
func (s *source) verifier() (vkey, origin string, pub ed25519.PublicKey, err error) {
	path := s.key
	if path == "" {
		dir := s.data
		if dir == "" {
			dir = "countersign-data"
		}
		path = filepath.Join(dir, recordPubFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", nil, fmt.Errorf("record verifier key: %w (pass --key FILE)", err)
	}
	vkey = strings.TrimSpace(string(b))
	origin, pub, err = parseVerifierKey(vkey)
	return vkey, origin, pub, err
}

// openData opens a data directory's store and record for reading.
func openData(ctx context.Context, dir string, pub ed25519.PublicKey, origin string) (*audit.Log, func(), error) {
	path := filepath.Join(dir, storeDir)
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("no store in %s: %w", dir, err)
	}
	st, err := pebblestore.Open(path, &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w (is a server still running on it? use --url)", path, err)
	}
	lg, err := audit.OpenReader(ctx, st, pub, &audit.Options{Origin: origin})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return lg, func() { st.Close() }, nil
}

func cmdAuditVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var src source
	fs := newFlagSet("audit verify", "audit verify --data DIR | --url URL [--key FILE] [--signatures]", stderr)
	src.register(fs)
	sigs := fs.Bool("signatures", false, "depth full: also the canonical form of every entry, the signatures of entries signed on their own, and the checkpoint signature")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := src.check(); err != nil {
		return err
	}
	vkey, origin, pub, err := src.verifier()
	if err != nil {
		return err
	}
	prog := newProgress(stderr)
	start := time.Now()
	var n uint64
	var root string
	if src.data != "" {
		lg, closeFn, err := openData(ctx, src.data, pub, origin)
		if err != nil {
			return err
		}
		defer closeFn()
		if n, err = lg.Size(ctx); err != nil {
			return err
		}
		depth := audit.Hashes
		if *sigs {
			depth = audit.Full
		}
		if n > 0 {
			if err := lg.Verify(ctx, 1, n, depth, prog.update); err != nil {
				prog.done()
				return err
			}
		}
		root = "checked against the stored tree"
	} else {
		f, err := src.fetcher()
		if err != nil {
			return err
		}
		rep, err := audit.VerifyRemote(ctx, vkey, f, &audit.RemoteOptions{Signatures: *sigs, Progress: prog.update})
		prog.done()
		if err != nil {
			return err
		}
		n, root = rep.Verified, rep.Checkpoint.RootHash
	}
	prog.done()
	el := time.Since(start)
	depth := "hashes+merkle"
	if *sigs {
		depth = "full (canonical form, signatures)"
	}
	rate := float64(n) / el.Seconds()
	fmt.Fprintf(stdout, "ok: %d entries verified, depth %s, root %s, %.2fs (%.0f entries/s)\n", n, depth, root, el.Seconds(), rate)
	return nil
}

func cmdAuditCheckpoint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var src source
	fs := newFlagSet("audit checkpoint", "audit checkpoint --data DIR | --url URL [--key FILE]", stderr)
	src.register(fs)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := src.check(); err != nil {
		return err
	}
	var cp audit.Checkpoint
	if src.url != "" {
		f, err := src.fetcher()
		if err != nil {
			return err
		}
		if cp, err = f.Checkpoint(ctx); err != nil {
			return err
		}
	} else {
		// A checkpoint is a signature, so reading one from a data
		// directory needs the record key that lives there.
		key, _, err := keyfile.ReadEd25519(filepath.Join(src.data, recordKeyFile))
		if err != nil {
			return fmt.Errorf("signing a checkpoint needs the record key: %w (or use --url against the running server)", err)
		}
		st, err := pebblestore.Open(filepath.Join(src.data, storeDir), &pebblestore.Options{Logger: quietLogger()})
		if err != nil {
			return fmt.Errorf("open %s: %w (is a server still running on it? use --url)", src.data, err)
		}
		defer st.Close()
		lg, err := audit.Open(ctx, st, key, &audit.Options{Origin: dataOrigin(src.data, "", key.Public().(ed25519.PublicKey))})
		if err != nil {
			return err
		}
		if cp, err = lg.Checkpoint(ctx); err != nil {
			return err
		}
	}
	fmt.Fprint(stdout, cp.Note)
	return nil
}

func cmdAuditBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("audit bench", "audit bench --data DIR [--store URL] [--writers 64] [--count N] [--acks]", stderr)
	dir := fs.String("data", "", "data `directory` (created if missing; must not be in use by a server)")
	storeURL := fs.String("store", "", "append to the record in this PostgreSQL database (a postgres:// `URL`, as serve --store takes it) instead of Pebble in <data>/store")
	writers := fs.Int("writers", 64, "concurrent appenders, each committing its own transaction")
	count := fs.Int("count", 100000, "entries to append in all")
	acks := fs.Bool("acks", false, `print "seq hash" for every acknowledged entry`)
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *dir == "" || *writers < 1 || *count < 1 {
		fs.Usage()
		return errUsage
	}
	key, _, err := loadRecordKey(*dir, "", false)
	if err != nil {
		return err
	}
	origin := dataOrigin(*dir, "", key.Public().(ed25519.PublicKey))
	vkey, err := recordVerifierKey(origin, key)
	if err != nil {
		return err
	}
	if err := writePublicFile(filepath.Join(*dir, recordPubFile), []byte(vkey+"\n")); err != nil {
		return err
	}
	st, err := openStore(ctx, serveConfig{store: *storeURL, data: *dir},
		&pebblestore.Options{Logger: quietLogger()}, &pgstore.Options{Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer st.Close()
	lg, err := audit.Open(ctx, st, key, &audit.Options{Origin: origin})
	if err != nil {
		return err
	}
	var (
		next atomic.Int64
		mu   sync.Mutex // serialises ack lines on stdout
		wg   sync.WaitGroup
		errs = make(chan error, *writers)
	)
	data := json.RawMessage(`{"bench":true,"note":"synthetic entry appended by countersign audit bench"}`)
	start := time.Now()
	for w := 0; w < *writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(*count) {
				var e audit.Entry
				err := lg.Update(ctx, func(txn store.Txn) error {
					var err error
					e, err = lg.Append(txn, audit.Record{
						Type:  "bench.append",
						Actor: audit.Actor{Kind: "system", ID: "audit-bench"},
						Data:  data,
					})
					return err
				})
				if err != nil {
					errs <- err
					return
				}
				if *acks {
					mu.Lock()
					fmt.Fprintf(stdout, "%d %s\n", e.Seq, e.Hash)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Fprintf(stderr, "appended %d entries with %d writers in %.2fs: %.0f entries/s\n", *count, *writers, el.Seconds(), float64(*count)/el.Seconds())
	return nil
}

// progress draws a progress bar on a terminal and nothing otherwise (the
// command prints one summary line at the end either way).
type progress struct {
	w    io.Writer
	tty  bool
	last time.Time
	used bool
}

func newProgress(w io.Writer) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

func (p *progress) update(done, total uint64) {
	if !p.tty || total == 0 || (time.Since(p.last) < 100*time.Millisecond && done != total) {
		return
	}
	p.last = time.Now()
	p.used = true
	const width = 40
	filled := int(done * width / total)
	fmt.Fprintf(p.w, "\rverifying [%s%s] %d/%d (%d%%)", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), done, total, done*100/total)
}

func (p *progress) done() {
	if p.used {
		fmt.Fprintln(p.w)
		p.used = false
	}
}
