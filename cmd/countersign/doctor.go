package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/webhook"
	"github.com/countersign/countersign/x402/evm"
)

const doctorSynopsis = `doctor [--data DIR] [--url URL [--key record.pub] [--credential FILE]] [--record-key FILE] [--json]

Checks a data directory or a running server and prints, one line each,
"ok", "warn" or "FAIL", what was found and, when not ok, how to fix it.

With --data (default countersign-data, or $COUNTERSIGN_DATA as for serve)
it checks the directory of a stopped server: its permissions, every key and
secret file in it (mode, owner, whether it parses), that the store opens,
that the record verifies to its head at full depth, that the record key
signed it, that the system clock is not behind the record, and free disk.
The store is only read; a store locked by a running server is reported,
and --url checks that server instead.

With --url it checks a running server: that /healthz answers, that the
served checkpoint verifies with the record's verifier key (--key, default
<data>/record.pub when --data is given, else ./countersign-data/record.pub
if it exists), and that the server's clock (its Date header) is within 5 s
of this host's. The checkpoint route needs an agent credential (--credential;
default <data>/sandbox/agent-credential.txt when --data is given). With
--data as well, the directory's files and disk are checked and the served
checkpoint must be signed by the directory's record key; the store, which
the server holds, is not opened.

Exit status: 0 when every check is ok or warn, 1 when any check FAILs.`

// Check outcomes, as printed.
const (
	doctorOK   = "ok"
	doctorWarn = "warn"
	doctorFail = "FAIL"
)

// doctorMaxSkew is how far the server's clock (its Date header) may be
// from this host's before the server clock check fails.
const doctorMaxSkew = 5 * time.Second

// doctorNow is the clock the doctor compares with the record and with a
// server's Date header; tests replace it.
var doctorNow = time.Now

// doctorStatfs reports the free and total space of the file system holding
// path; tests replace it.
var doctorStatfs = statfsUsage

// doctorCheck is one finding, as printed and as --json encodes it.
type doctorCheck struct {
	Check   string `json:"check"`
	Status  string `json:"status"`
	Finding string `json:"finding"`
	Fix     string `json:"fix"`
}

// doctor collects the checks of one run.
type doctor struct {
	checks []doctorCheck
	client *http.Client
	uid    int
}

func (d *doctor) add(check, status, finding, fix string) {
	if status == doctorOK {
		fix = ""
	}
	d.checks = append(d.checks, doctorCheck{Check: check, Status: status, Finding: finding, Fix: fix})
}

func (d *doctor) failed() int {
	n := 0
	for _, c := range d.checks {
		if c.Status == doctorFail {
			n++
		}
	}
	return n
}

func cmdDoctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlagSet("doctor", doctorSynopsis, stderr)
	defData := "countersign-data"
	if v := os.Getenv("COUNTERSIGN_DATA"); v != "" {
		defData = v
	}
	data := flags.String("data", defData, "data `directory` to check (a stopped server's; with --url, the running server's)")
	url := flags.String("url", "", "base `URL` of a running server to check")
	key := flags.String("key", "", "record verifier key `file` for --url (default <data>/record.pub)")
	cred := flags.String("credential", "", "agent credential `file` for --url: the checkpoint route needs one (default <data>/sandbox/agent-credential.txt with --data)")
	recordKey := flags.String("record-key", os.Getenv("COUNTERSIGN_RECORD_KEY"), "record signing key `file`, if the server is given one outside the data directory (default <data>/keys/record.jwk.json)")
	asJSON := flags.Bool("json", false, "print the checks as a JSON array of {check, status, finding, fix}")
	if err := parseFlags(flags, args, false); err != nil {
		return err
	}
	dataGiven := false
	flags.Visit(func(f *flag.Flag) {
		if f.Name == "data" {
			dataGiven = true
		}
	})

	d := &doctor{client: &http.Client{Timeout: 10 * time.Second}, uid: os.Getuid()}
	switch {
	case *url == "":
		d.checkData(ctx, *data, *recordKey, true)
	case dataGiven:
		d.checkData(ctx, *data, *recordKey, false)
		d.checkURL(ctx, *url, *key, *cred, *data, *recordKey)
	default:
		d.checkURL(ctx, *url, *key, *cred, "", *recordKey)
	}

	if *asJSON {
		b, err := json.MarshalIndent(d.checks, "", "  ")
		if err != nil {
			return err
		}
		if _, err := stdout.Write(append(b, '\n')); err != nil {
			return err
		}
	} else {
		for _, c := range d.checks {
			fmt.Fprintf(stdout, "%-4s  %s: %s\n", c.Status, c.Check, c.Finding)
			if c.Fix != "" {
				fmt.Fprintf(stdout, "      fix: %s\n", c.Fix)
			}
		}
	}
	if n := d.failed(); n > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", n, len(d.checks))
	}
	return nil
}

// ---- data directory ----

// checkData runs the data directory checks; withStore also opens the store
// and checks the record, the record key against it, and the clock.
func (d *doctor) checkData(ctx context.Context, dir, recordKeyPath string, withStore bool) {
	if !d.checkDir(dir) {
		return
	}
	own := d.checkFiles(dir, recordKeyPath)
	d.checkTree(dir, own)
	if withStore {
		d.checkStore(ctx, dir, recordKeyPath)
	}
	d.checkDisk(dir)
}

// checkDir checks that dir exists and is not writable by others. It
// returns false when there is nothing more to check.
func (d *doctor) checkDir(dir string) bool {
	const name = "data directory"
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.add(name, doctorFail, dir+" does not exist",
			fmt.Sprintf("pass --data with the directory the server uses, or create it by starting the server once: countersign serve --data %s", dir))
		return false
	case err != nil:
		d.add(name, doctorFail, err.Error(), "make "+dir+" readable by the user who runs the server, and run doctor as that user")
		return false
	case !info.IsDir():
		d.add(name, doctorFail, dir+" is not a directory", "pass --data with the server's data directory")
		return false
	}
	perm := info.Mode().Perm()
	finding := fmt.Sprintf("%s exists, mode %04o", dir, perm)
	if perm&0o022 != 0 {
		d.add(name, doctorFail, finding+", writable by "+whoCan(perm, 0o020, 0o002)+": they could replace keys or the store",
			"chmod go-w "+dir)
		return true
	}
	if uid, ok := fileUID(info); ok && uid != d.uid {
		d.add(name, doctorWarn, fmt.Sprintf("%s, owned by %s, not by you (%s)", finding, userName(uid), userName(d.uid)),
			"run doctor as the user the server runs as (or chown -R that user "+dir+")")
		return true
	}
	d.add(name, doctorOK, finding+", owned by you, not writable by group or others", "")
	return true
}

// fileKind says how the doctor reads a file it knows.
type fileKind int

const (
	kindPrivateJWK  fileKind = iota // a private JWK (record, identity, operator, agent key)
	kindCredential                  // an agent bearer credential
	kindSealKey                     // 32 random bytes, base64url
	kindWalletKey                   // the x402 wallet: a secp256k1 key in hex
	kindSecret                      // an unknown file in keys/: treated as secret
	kindOperatorSet                 // public JWK Set of operator keys
	kindVerifierKey                 // record.pub
)

// knownFile is one key or secret file of a data directory.
type knownFile struct {
	path, rel, what string
	kind            fileKind
}

func (k knownFile) secret() bool { return k.kind <= kindSecret }

// keyFiles lists the key and secret files serve writes into dir (see
// record.go, identitycmd.go, sandbox.go, loadSealKey), plus anything else
// found in dir/keys, and recordKeyPath when it lies outside dir.
func keyFiles(dir, recordKeyPath string) []knownFile {
	var out []knownFile
	add := func(path, rel, what string, kind fileKind) {
		out = append(out, knownFile{path: path, rel: rel, what: what, kind: kind})
	}
	for _, sub := range []string{"keys", sandboxDirName} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			n := e.Name()
			path, rel := filepath.Join(dir, sub, n), sub+"/"+n
			switch {
			case sub == "keys" && n == filepath.Base(recordKeyFile):
				add(path, rel, "record signing key", kindPrivateJWK)
			case sub == "keys" && (n == filepath.Base(identityKeyFile) || strings.HasPrefix(n, "identity-") && strings.HasSuffix(n, ".jwk.json")):
				add(path, rel, "ADP identity key", kindPrivateJWK)
			case sub == "keys" && n == "webhook-seal.key":
				add(path, rel, "seal key of webhook secrets and merchant credentials", kindSealKey)
			case sub == "keys" && n == x402WalletFile:
				add(path, rel, "x402 wallet key", kindWalletKey)
			case strings.HasSuffix(n, ".jwk.json"):
				what := "private key"
				switch n {
				case sandboxOperatorKey:
					what = "sandbox operator key"
				case sandboxAgentKey:
					what = "sandbox agent key"
				case "seller.jwk.json":
					what = "sandbox seller agent key"
				}
				add(path, rel, what, kindPrivateJWK)
			case strings.HasSuffix(n, "-credential.txt"):
				add(path, rel, "agent credential", kindCredential)
			case sub == sandboxDirName && n == sandboxOperatorSet:
				add(path, rel, "trusted operator public keys", kindOperatorSet)
			case sub == sandboxDirName && n == recordPubFile:
				add(path, rel, "copy of the record verifier key", kindVerifierKey)
			case sub == "keys" && !strings.HasSuffix(n, ".tmp"):
				add(path, rel, "file in keys/ that serve does not write", kindSecret)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, recordPubFile)); err == nil {
		add(filepath.Join(dir, recordPubFile), recordPubFile, "record verifier key", kindVerifierKey)
	}
	if recordKeyPath != "" {
		abs, err1 := filepath.Abs(recordKeyPath)
		inDir, err2 := filepath.Abs(filepath.Join(dir, recordKeyFile))
		if err1 != nil || err2 != nil || abs != inDir {
			add(recordKeyPath, recordKeyPath, "record signing key (--record-key)", kindPrivateJWK)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].rel < out[j].rel })
	return out
}

// checkFiles prints one line per key or secret file and returns the paths
// it covered, so the permission sweep does not report them twice.
func (d *doctor) checkFiles(dir, recordKeyPath string) map[string]bool {
	own := make(map[string]bool)
	for _, f := range keyFiles(dir, recordKeyPath) {
		own[filepath.Clean(f.path)] = true
		d.checkFile(f)
	}
	return own
}

func (d *doctor) checkFile(f knownFile) {
	name := "file " + f.rel
	info, err := os.Stat(f.path)
	if err != nil {
		d.add(name, doctorFail, f.what+": "+err.Error(), "make "+f.path+" readable by the user who runs the server")
		return
	}
	perm := info.Mode().Perm()
	desc := fmt.Sprintf("%s, mode %04o", f.what, perm)
	if f.secret() {
		if perm&0o077 != 0 {
			d.add(name, doctorFail, desc+", "+exposure(perm)+": the secret must be the server user's alone",
				"chmod 600 "+f.path)
			return
		}
		if uid, ok := fileUID(info); ok && uid != d.uid {
			d.add(name, doctorFail, fmt.Sprintf("%s, owned by %s, not by you (%s)", desc, userName(uid), userName(d.uid)),
				"run doctor as the user the server runs as, or give the file to that user: chown USER "+f.path)
			return
		}
	} else if perm&0o022 != 0 {
		d.add(name, doctorFail, desc+", writable by "+whoCan(perm, 0o020, 0o002)+": they could substitute keys",
			"chmod go-w "+f.path)
		return
	}
	detail, err := parseKeyFile(f)
	if err != nil {
		d.add(name, doctorFail, desc+", does not parse: "+err.Error(), parseFix(f))
		return
	}
	if f.kind == kindSecret {
		d.add(name, doctorWarn, desc+", "+detail, "move it out of "+filepath.Dir(f.path)+" if it is not a key the server uses")
		return
	}
	d.add(name, doctorOK, desc+", "+detail, "")
}

// parseKeyFile reads a key or secret file and describes it, without
// printing any secret.
func parseKeyFile(f knownFile) (string, error) {
	switch f.kind {
	case kindPrivateJWK:
		k, err := keyfile.Read(f.path)
		if err != nil {
			return "", unwrapKeyfile(err)
		}
		alg := "P-256"
		if _, ok := k.Signer.(ed25519.PrivateKey); ok {
			alg = "Ed25519"
		} else if _, ok := k.Signer.(*ecdsa.PrivateKey); !ok {
			alg = fmt.Sprintf("%T", k.Signer)
		}
		if k.KeyID != "" {
			return fmt.Sprintf("parses (%s, kid %s)", alg, k.KeyID), nil
		}
		return fmt.Sprintf("parses (%s)", alg), nil
	case kindCredential:
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		id, _, err := auth.ParseCredential(strings.TrimSpace(string(b)))
		if err != nil {
			return "", errors.New("not a credential (svc_ak_...)")
		}
		return "parses (agent key " + id + ")", nil
	case kindSealKey:
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		key, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(string(b)), "="))
		if err != nil || len(key) != webhook.SealKeySize {
			return "", fmt.Errorf("want %d bytes in base64url", webhook.SealKeySize)
		}
		return fmt.Sprintf("parses (%d bytes)", len(key)), nil
	case kindWalletKey:
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		k, err := evm.ParseKey(strings.TrimSpace(string(b)))
		if err != nil {
			return "", errors.New("not a secp256k1 private key in hex")
		}
		return "parses (address " + k.Address().String() + ")", nil
	case kindOperatorSet:
		keys, err := operator.ReadKeySet(f.path)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("parses (%d operator key(s))", len(keys)), nil
	case kindVerifierKey:
		origin, pub, err := readVerifierFile(f.path)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("parses (origin %s, key %s)", origin, keyTag(pub)), nil
	default:
		b, err := os.ReadFile(f.path)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("readable (%d bytes), not parsed", len(b)), nil
	}
}

// unwrapKeyfile drops the "(file PATH)" keyfile adds: the line names it.
func unwrapKeyfile(err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, " (file "); i > 0 {
		msg = msg[:i]
	}
	return errors.New(msg)
}

func parseFix(f knownFile) string {
	switch {
	case f.rel == recordKeyFile || f.kind == kindPrivateJWK && strings.HasPrefix(f.what, "record"):
		return "restore " + f.path + " from your backup; a new record key would start a second, unrelated chain of signatures"
	case f.kind == kindCredential:
		return "issue a new credential (countersign agents create --data DIR, or POST /operator/agents) and replace " + f.path
	case f.kind == kindSealKey:
		return "restore " + f.path + " from your backup: webhook secrets and merchant credentials sealed with it cannot be opened without it"
	case f.kind == kindVerifierKey:
		return "delete " + f.path + " and start the server: it rewrites the file from its record key"
	default:
		return "restore " + f.path + " from your backup, or replace it with a file of the right format"
	}
}

// checkTree sweeps dir for directories and files other people could write,
// skipping the files checkFiles already reported.
func (d *doctor) checkTree(dir string, own map[string]bool) {
	const name = "permissions"
	var failDirs, failFiles, warnFiles []string
	n := 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 || own[filepath.Clean(path)] {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		n++
		perm := info.Mode().Perm()
		switch {
		case e.IsDir() && perm&0o022 != 0:
			failDirs = append(failDirs, path)
		case !e.IsDir() && perm&0o002 != 0:
			failFiles = append(failFiles, path)
		case !e.IsDir() && perm&0o020 != 0:
			warnFiles = append(warnFiles, path)
		}
		return nil
	})
	if err != nil {
		d.add(name, doctorFail, "cannot read every file of "+dir+": "+err.Error(),
			"run doctor as the user the server runs as, and make "+dir+" readable by that user")
		return
	}
	switch {
	case len(failDirs)+len(failFiles) > 0:
		bad := append(failDirs, failFiles...)
		d.add(name, doctorFail, fmt.Sprintf("%d of the other %d files and directories writable by others: %s", len(bad), n, listSome(bad)),
			"chmod -R go-w "+dir)
	case len(warnFiles) > 0:
		d.add(name, doctorWarn, fmt.Sprintf("%d of the other %d files writable by the group: %s", len(warnFiles), n, listSome(warnFiles)),
			"chmod -R g-w "+dir+" (and start the server with umask 022 or 077)")
	default:
		d.add(name, doctorOK, fmt.Sprintf("none of the other %d files and directories is writable by group or others", n), "")
	}
}

func listSome(paths []string) string {
	const most = 3
	if len(paths) <= most {
		return strings.Join(paths, ", ")
	}
	return strings.Join(paths[:most], ", ") + fmt.Sprintf(" and %d more", len(paths)-most)
}

// checkStore opens the store, then checks the record, the record key and
// the clock over it, and closes it.
func (d *doctor) checkStore(ctx context.Context, dir, recordKeyPath string) {
	const name = "store"
	path := filepath.Join(dir, storeDir)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		d.add(name, doctorFail, "no store at "+path,
			"start the server once to create it (countersign serve --data "+dir+"), or restore "+path+" from your backup")
		return
	}
	if !hasPebbleDB(path) {
		// Opening would create an empty database: a doctor writes nothing.
		d.add(name, doctorFail, path+" holds no database (no Pebble manifest)",
			"restore "+path+" from your backup; starting the server on it would begin an empty record")
		return
	}
	st, err := pebblestore.Open(path, &pebblestore.Options{Logger: quietLogger(), CacheSize: 8 << 20})
	if err != nil {
		if storeLocked(err) {
			d.add(name, doctorWarn, path+" is locked: a server (or another countersign command) is using it, so the record was not checked",
				"stop the server, or check the running server instead: countersign doctor --url http://127.0.0.1:8080 --data "+dir)
			return
		}
		d.add(name, doctorFail, "does not open: "+err.Error(),
			"make "+path+" readable and writable by the server's user; if it is damaged, restore it from your backup")
		return
	}
	defer st.Close()
	d.add(name, doctorOK, path+" opens (Pebble); the doctor only reads it and closes it after these checks", "")

	// The record is verified with public material: record.pub, else the
	// public half of the record key.
	key, keyErr := readRecordKey(dir, recordKeyPath)
	origin, pub, pubErr := readVerifierFile(filepath.Join(dir, recordPubFile))
	if pubErr != nil {
		if key == nil {
			d.add("record", doctorFail, "neither "+filepath.Join(dir, recordPubFile)+" nor a record key to verify the record with",
				"restore "+filepath.Join(dir, recordPubFile)+" (the record's verifier key), or pass --record-key FILE")
			return
		}
		pub = key.Public().(ed25519.PublicKey)
		origin = dataOrigin(dir, "", pub)
	}
	lg, err := audit.OpenReader(ctx, st, pub, &audit.Options{Origin: origin, Logger: quietLogger()})
	if err != nil {
		d.add("record", doctorFail, "cannot open: "+err.Error(), "check "+filepath.Join(dir, recordPubFile))
		return
	}
	defer lg.Close()
	size, sizeOK := d.checkRecord(ctx, lg, dir)
	d.checkRecordKey(ctx, st, dir, recordKeyPath, key, keyErr, pubErr == nil, origin, pub, size)
	if sizeOK {
		d.checkClock(ctx, lg, size)
	}
}

// hasPebbleDB reports whether path holds a Pebble database (its manifest
// marker, or the CURRENT file of older formats).
func hasPebbleDB(path string) bool {
	entries, err := os.ReadDir(path)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n := e.Name(); n == "CURRENT" || strings.HasPrefix(n, "marker.manifest.") {
			return true
		}
	}
	return false
}

// storeLocked tells a store held by another process (or this one) from
// other failures to open it.
func storeLocked(err error) bool {
	if strings.Contains(err.Error(), "lock held by current process") {
		return true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return false // the lock file could not be created: permissions
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EWOULDBLOCK)
}

// readRecordKey reads the record key: recordKeyPath, else the data
// directory's default. A missing default file is (nil, nil).
func readRecordKey(dir, recordKeyPath string) (ed25519.PrivateKey, error) {
	path := recordKeyPath
	if path == "" {
		path = filepath.Join(dir, recordKeyFile)
	}
	key, _, err := keyfile.ReadEd25519(path)
	if err != nil {
		if recordKeyPath == "" && errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return key, nil
}

// checkRecord verifies the record from 1 to its head at full depth. It
// returns the head seq and whether it could be read.
func (d *doctor) checkRecord(ctx context.Context, lg *audit.Log, dir string) (uint64, bool) {
	const name = "record"
	size, err := lg.Size(ctx)
	if err != nil {
		d.add(name, doctorFail, "cannot read the head: "+err.Error(), "restore "+filepath.Join(dir, storeDir)+" from your backup")
		return 0, false // the head is unreadable: no clock check either
	}
	if size == 0 {
		d.add(name, doctorOK, "the record is empty (head seq 0): nothing to verify yet", "")
		return 0, true
	}
	start := time.Now()
	err = lg.Verify(ctx, 1, size, audit.Full, nil)
	el := time.Since(start)
	if err != nil {
		var te *audit.TamperError
		if errors.As(err, &te) {
			if te.Seq == 0 {
				d.add(name, doctorFail, "the head record (size and newest hash) is damaged: "+te.Reason,
					"keep this copy for investigation and restore "+filepath.Join(dir, storeDir)+" from your backup; do not start the server on it")
				return size, true
			}
			finding := fmt.Sprintf("tampered at seq %d of %d: %s (entries 1..%d verify)", te.Seq, size, te.Reason, te.Seq-1)
			if te.Seq == 1 && strings.Contains(te.Reason, "signature") {
				finding += "; or the verifier key is not this record's (see the record key check)"
			}
			d.add(name, doctorFail, finding,
				fmt.Sprintf("entry %d was changed after it was written: keep this copy for investigation, restore %s from a backup taken after seq %d was written, and do not start the server on this one",
					te.Seq, filepath.Join(dir, storeDir), size))
			return size, true
		}
		d.add(name, doctorFail, "does not verify: "+err.Error(), "restore "+filepath.Join(dir, storeDir)+" from your backup")
		return size, true
	}
	d.add(name, doctorOK, fmt.Sprintf("%d entries verify to head seq %d at full depth (hashes, links, canonical form, Merkle tree, signed checkpoint) in %s, %.0f entries/s",
		size, size, el.Round(time.Microsecond), float64(size)/math.Max(el.Seconds(), 1e-9)), "")
	return size, true
}

// checkRecordKey checks that the record key signed the record's head (the
// check audit.Open makes, which writes nothing) and that record.pub names
// the same key.
func (d *doctor) checkRecordKey(ctx context.Context, st *pebblestore.Store, dir, recordKeyPath string,
	key ed25519.PrivateKey, keyErr error, havePub bool, origin string, pub ed25519.PublicKey, size uint64) {
	const name = "record key"
	path := recordKeyPath
	if path == "" {
		path = filepath.Join(dir, recordKeyFile)
	}
	switch {
	case keyErr != nil:
		d.add(name, doctorFail, "cannot read "+path+": "+unwrapKeyfile(keyErr).Error(),
			"restore "+path+" from your backup; a new record key would start a second, unrelated chain of signatures")
		return
	case key == nil:
		d.add(name, doctorWarn, "no record key at "+path+" (a production server is given one with --record-key)",
			"pass --record-key FILE to check the key the server signs with")
		return
	}
	kpub := key.Public().(ed25519.PublicKey)
	if havePub && !kpub.Equal(pub) {
		d.add(name, doctorFail, fmt.Sprintf("%s is key %s but %s names key %s", path, keyTag(kpub), filepath.Join(dir, recordPubFile), keyTag(pub)),
			"if "+path+" is the key that wrote the record, start the server (it rewrites record.pub); otherwise restore the right key from your backup")
		return
	}
	lg, err := audit.Open(ctx, st, key, &audit.Options{Origin: origin, Logger: quietLogger()})
	if errors.Is(err, audit.ErrKeyMismatch) {
		d.add(name, doctorFail, fmt.Sprintf("the record's head (seq %d) is not signed by %s (key %s)", size, path, keyTag(kpub)),
			"start the server with --record-key naming the key that wrote this record; if "+path+" is that key, the record was tampered with (see the record check)")
		return
	}
	if err != nil {
		d.add(name, doctorFail, "the record does not open with "+path+": "+err.Error(), "check --record-key and record.pub")
		return
	}
	lg.Close()
	if size == 0 {
		d.add(name, doctorOK, fmt.Sprintf("%s parses (key %s); the record is empty, so nothing it signed yet", path, keyTag(kpub)), "")
		return
	}
	d.add(name, doctorOK, fmt.Sprintf("%s (key %s) signed the record to its head, seq %d; record.pub names the same key, origin %s",
		path, keyTag(kpub), size, origin), "")
}

// checkClock checks that the system clock is plausible and not behind the
// newest entry's time.
func (d *doctor) checkClock(ctx context.Context, lg *audit.Log, size uint64) {
	const name = "clock"
	now := doctorNow().UTC()
	fix := "set the system clock right and keep it synchronised (NTP, e.g. timedatectl set-ntp true) before starting the server"
	if now.Year() < 2024 {
		d.add(name, doctorFail, "the system clock says "+now.Format(time.RFC3339)+", which is not plausible", fix)
		return
	}
	if size == 0 {
		d.add(name, doctorOK, "the system clock says "+now.Format(time.RFC3339)+"; the record holds no entry to compare with", "")
		return
	}
	e, err := lg.Get(ctx, size)
	if err != nil {
		d.add(name, doctorWarn, fmt.Sprintf("cannot read the newest entry (seq %d): %v", size, err), "see the record check")
		return
	}
	at, err := time.Parse("2006-01-02T15:04:05.000000Z", e.At)
	if err != nil {
		d.add(name, doctorWarn, fmt.Sprintf("the newest entry (seq %d) has an unreadable time %q", size, e.At), "see the record check")
		return
	}
	if now.Before(at) {
		d.add(name, doctorFail, fmt.Sprintf("the system clock (%s) is %s behind the newest entry (seq %d at %s): new entries would be dated before old ones",
			now.Format(time.RFC3339), at.Sub(now).Round(time.Second), size, e.At), fix)
		return
	}
	d.add(name, doctorOK, fmt.Sprintf("the system clock (%s) is %s after the newest entry (seq %d at %s)",
		now.Format(time.RFC3339), now.Sub(at).Round(time.Second), size, e.At), "")
}

// ---- disk ----

// diskUsage is the free and total space of a file system.
type diskUsage struct {
	avail, total  uint64
	device, mount string
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

func (d *doctor) checkDisk(dir string) {
	u, err := doctorStatfs(dir)
	if err != nil {
		d.add("disk", doctorWarn, "cannot read the free space of "+dir+": "+err.Error(), "check the free space yourself: df -h "+dir)
		return
	}
	status, finding, fix := diskFinding(u)
	d.add("disk", status, finding, fix)
}

// diskFinding grades free space: FAIL below 100 MiB, warn below 1 GiB or
// 10 % of the file system.
func diskFinding(u diskUsage) (status, finding, fix string) {
	pct := 0.0
	if u.total > 0 {
		pct = float64(u.avail) * 100 / float64(u.total)
	}
	where := u.device
	if u.mount != "" && u.mount != u.device {
		where += " (mounted at " + u.mount + ")"
	}
	finding = fmt.Sprintf("%s free of %s (%.1f %%) on %s", fmtBytes(u.avail), fmtBytes(u.total), pct, where)
	switch {
	case u.avail < 100*mib:
		status = doctorFail
	case u.avail < gib || u.avail < u.total/10:
		status = doctorWarn
	default:
		return doctorOK, finding, ""
	}
	target := max(uint64(gib), u.total/10)
	if target > u.total {
		return status, finding, fmt.Sprintf("move the data directory to a file system with at least 1 GiB free (%s is %s in all)", where, fmtBytes(u.total))
	}
	need := (target - u.avail + mib - 1) / mib
	return status, finding, fmt.Sprintf("free at least %d MiB on %s", need, where)
}

func fmtBytes(n uint64) string {
	if n >= gib {
		return fmt.Sprintf("%.1f GiB", float64(n)/gib)
	}
	return fmt.Sprintf("%d MiB", n/mib)
}

// mountOf returns the device and mount point of the file system holding
// path: the longest mount point of /proc/self/mountinfo that contains it.
// Without mountinfo it returns the path itself.
func mountOf(path string) (device, mount string) {
	abs, err := filepath.Abs(path)
	if err == nil {
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
	} else {
		abs = path
	}
	device, mount = abs, abs
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return device, mount
	}
	defer f.Close()
	best := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if !(abs == mp || mp == "/" || strings.HasPrefix(abs, mp+"/")) || len(mp) < best {
			continue
		}
		src := mp
		for i, fl := range fields {
			if fl == "-" && i+2 < len(fields) {
				src = unescapeMount(fields[i+2])
				break
			}
		}
		best, device, mount = len(mp), src, mp
	}
	return device, mount
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ---- running server ----

// checkURL checks a running server; dir, when not empty, is its data
// directory, whose record key the served checkpoint must verify with.
func (d *doctor) checkURL(ctx context.Context, base, keyPath, credPath, dir, recordKeyPath string) {
	base = strings.TrimRight(base, "/")
	date, received, ok := d.checkHealth(ctx, base)
	if !ok {
		return
	}
	d.checkServerClock(date, received)

	if keyPath == "" {
		switch {
		case dir != "":
			keyPath = filepath.Join(dir, recordPubFile)
		default:
			if _, err := os.Stat(filepath.Join("countersign-data", recordPubFile)); err == nil {
				keyPath = filepath.Join("countersign-data", recordPubFile)
			}
		}
	}
	if credPath == "" && dir != "" {
		if p := filepath.Join(dir, sandboxDirName, sandboxCredential); fileExists(p) {
			credPath = p
		}
	}
	cp, ok := d.checkCheckpoint(ctx, base, keyPath, credPath)
	if ok && dir != "" {
		d.checkServedKey(base, cp, dir, recordKeyPath)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkHealth asks /healthz and returns the response's Date header and the
// local time the response arrived; ok is false when there was no answer.
func (d *doctor) checkHealth(ctx context.Context, base string) (date string, received time.Time, ok bool) {
	const name = "health"
	u := base + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		d.add(name, doctorFail, "bad --url: "+err.Error(), "pass the server's base URL, e.g. --url http://127.0.0.1:8080")
		return "", time.Time{}, false
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	if err != nil {
		d.add(name, doctorFail, "GET "+u+": "+err.Error(),
			"start the server (countersign serve), or check --url: scheme, host and port of its --addr or --base-url")
		return "", time.Time{}, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	el := time.Since(start).Round(time.Millisecond)
	date, received = resp.Header.Get("Date"), doctorNow()
	if resp.StatusCode != http.StatusOK {
		d.add(name, doctorFail, fmt.Sprintf("GET %s answered %s: %s", u, resp.Status, strings.TrimSpace(string(body))),
			"check that --url is a Countersign server, and read its log")
		return date, received, true
	}
	var health struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &health) != nil || health.Status != "ok" {
		d.add(name, doctorWarn, fmt.Sprintf("GET %s answered 200 but not {\"status\":\"ok\"}: %s", u, strings.TrimSpace(string(body))),
			"check that --url is a Countersign server, and read its log")
		return date, received, true
	}
	d.add(name, doctorOK, fmt.Sprintf("GET %s answered 200 {\"status\":\"ok\"} in %s", u, el), "")
	return date, received, true
}

// checkServerClock compares the server's Date header with this host's
// clock at the time the response arrived.
func (d *doctor) checkServerClock(v string, local time.Time) {
	const name = "server clock"
	if v == "" {
		d.add(name, doctorWarn, "the server sent no Date header, so its clock cannot be compared",
			"check the server host's clock yourself (timedatectl status)")
		return
	}
	date, err := http.ParseTime(v)
	if err != nil {
		d.add(name, doctorWarn, fmt.Sprintf("the server's Date header %q does not parse", v), "check the server host's clock yourself (timedatectl status)")
		return
	}
	// Date has whole seconds: compare with this clock truncated the same way.
	skew := date.Sub(local.Truncate(time.Second))
	dir := "ahead of"
	if skew < 0 {
		dir = "behind"
	}
	abs := skew.Abs()
	if abs > doctorMaxSkew {
		d.add(name, doctorFail, fmt.Sprintf("the server's clock (Date: %s) is %s %s this host's (%s), more than %s",
			v, abs, dir, local.UTC().Format(time.RFC1123), doctorMaxSkew),
			"synchronise the clocks of the server host and this host (NTP, e.g. timedatectl set-ntp true): the record's entries carry the server's time")
		return
	}
	rel := abs.String() + " " + dir
	if abs == 0 {
		rel = "the same second as"
	}
	d.add(name, doctorOK, fmt.Sprintf("the server's Date (%s) is %s this host's clock, within %s", v, rel, doctorMaxSkew), "")
}

// checkCheckpoint fetches the served checkpoint and verifies it with the
// record's verifier key.
func (d *doctor) checkCheckpoint(ctx context.Context, base, keyPath, credPath string) (audit.Checkpoint, bool) {
	const name = "checkpoint"
	u := base + "/audit/checkpoint"
	f := &audit.HTTPFetcher{BaseURL: base, Client: d.client}
	if credPath != "" {
		b, err := os.ReadFile(credPath)
		if err != nil {
			d.add(name, doctorFail, "cannot read the credential: "+err.Error(), "pass --credential FILE holding an agent credential")
			return audit.Checkpoint{}, false
		}
		f.Credential = strings.TrimSpace(string(b))
	}
	cp, err := f.Checkpoint(ctx)
	var he *audit.HTTPError
	var ue *url.Error
	switch {
	case errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden) && credPath == "":
		d.add(name, doctorWarn, "GET "+u+" needs an agent credential ("+he.Status+"), so the checkpoint was not checked",
			"pass --credential FILE (an agent credential; a sandbox server wrote DIR/sandbox/agent-credential.txt), or --data DIR")
		return cp, false
	case errors.As(err, &he) && (he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden):
		d.add(name, doctorFail, "the server refused the credential in "+credPath+" ("+he.Status+")",
			"pass --credential FILE with a credential this server issued and has not revoked")
		return cp, false
	case errors.As(err, &he):
		d.add(name, doctorFail, fmt.Sprintf("GET %s answered %s: %s", u, he.Status, he.Body),
			"read the server's log")
		return cp, false
	case errors.As(err, &ue):
		d.add(name, doctorFail, "GET "+u+": "+err.Error(), "check that the server is still running")
		return cp, false
	}
	if err != nil || cp.Note == "" {
		d.add(name, doctorFail, "GET "+u+" did not answer a checkpoint", "check that --url is a Countersign server")
		return cp, false
	}
	if keyPath == "" {
		d.add(name, doctorWarn, fmt.Sprintf("served a checkpoint of %s at tree size %d, not verified: no verifier key", cp.Origin, cp.TreeSize),
			"pass --key FILE (the deployment's record.pub), or --data DIR of the server")
		return cp, true
	}
	b, err := os.ReadFile(keyPath)
	if err != nil {
		d.add(name, doctorFail, "cannot read the verifier key: "+err.Error(), "pass --key FILE (the deployment's record.pub)")
		return cp, true
	}
	vkey := strings.TrimSpace(string(b))
	if _, _, err := audit.ParseVerifierKey(vkey); err != nil {
		d.add(name, doctorFail, "cannot read the verifier key "+keyPath+": "+err.Error(), "pass --key FILE (the deployment's record.pub)")
		return cp, true
	}
	if err := audit.VerifyCheckpoint(vkey, cp); err != nil {
		d.add(name, doctorFail, fmt.Sprintf("the served checkpoint (origin %s, tree size %d) does not verify with %s: %v", cp.Origin, cp.TreeSize, keyPath, err),
			"if "+keyPath+" is this deployment's record.pub, the server signs with another record key (check its --record-key and --origin); otherwise pass --key with the right record.pub")
		return cp, true
	}
	d.add(name, doctorOK, fmt.Sprintf("the served checkpoint (origin %s, tree size %d) verifies with %s", cp.Origin, cp.TreeSize, keyPath), "")
	return cp, true
}

// checkServedKey checks that the served checkpoint is signed by the record
// key of the data directory.
func (d *doctor) checkServedKey(base string, cp audit.Checkpoint, dir, recordKeyPath string) {
	const name = "served record key"
	path := recordKeyPath
	if path == "" {
		path = filepath.Join(dir, recordKeyFile)
	}
	key, err := readRecordKey(dir, recordKeyPath)
	if err != nil || key == nil {
		d.add(name, doctorWarn, "no record key to compare with at "+path,
			"pass --record-key FILE (the key the server was started with)")
		return
	}
	pub := key.Public().(ed25519.PublicKey)
	vkey, err := recordVerifierKey(dataOrigin(dir, "", pub), key)
	if err == nil {
		err = audit.VerifyCheckpoint(vkey, cp)
	}
	if err != nil {
		d.add(name, doctorFail, fmt.Sprintf("the server at %s does not sign with %s (key %s): its checkpoint of %s does not verify with it",
			base, path, keyTag(pub), cp.Origin),
			"pass --data with the directory this server runs on, or restart the server with --data "+dir+" (or --record-key "+path+")")
		return
	}
	d.add(name, doctorOK, fmt.Sprintf("the server signs with %s (key %s, origin %s)", path, keyTag(pub), cp.Origin), "")
}

// ---- helpers ----

// exposure says what group and others may do with a file of mode perm,
// e.g. "readable by group and others".
func exposure(perm fs.FileMode) string {
	access := func(bits fs.FileMode) string {
		var acc []string
		for _, a := range []struct {
			bit  fs.FileMode
			name string
		}{{4, "readable"}, {2, "writable"}, {1, "executable"}} {
			if bits&a.bit != 0 {
				acc = append(acc, a.name)
			}
		}
		return strings.Join(acc, " and ")
	}
	g, o := access(perm>>3&7), access(perm&7)
	switch {
	case g != "" && g == o:
		return g + " by group and others"
	case g != "" && o != "":
		return g + " by the group and " + o + " by others"
	case g != "":
		return g + " by the group"
	default:
		return o + " by others"
	}
}

// whoCan names who, besides the owner, holds the permission bits
// groupBits and otherBits of perm.
func whoCan(perm fs.FileMode, groupBits, otherBits fs.FileMode) string {
	switch g, o := perm&groupBits != 0, perm&otherBits != 0; {
	case g && o:
		return "group and others"
	case g:
		return "the group"
	default:
		return "others"
	}
}

func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}
