package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	bin "encoding/binary" // crash_test.go declares binary
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// doctorServe provisions dir the way "countersign serve" does in sandbox
// mode (newServer: record key, sandbox keys and credentials, store, record)
// and serves it on an httptest server, as the serve tests build one. It
// returns the server's handler and base URL and a stop function that
// closes the server and the store; stop is also registered as a cleanup.
func doctorServe(t *testing.T, dir string) (http.Handler, string, func()) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	var cfg serveConfig
	fs := newFlagSet("serve", serveSynopsis, io.Discard)
	cfg.register(fs)
	if err := fs.Parse([]string{"--data", dir, "--sandbox-latency", "off"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := newServer(ctx, cfg, ts.Listener.Addr().String(), logger, io.Discard)
	if err != nil {
		cancel()
		ts.Close()
		t.Fatal(err)
	}
	ts.Config.Handler = srv.http.Handler
	ts.Start()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ts.Close()
		srv.close()
		cancel()
	}
	t.Cleanup(stop)
	return srv.http.Handler, ts.URL, stop
}

// doctorProvision returns a data directory provisioned by a sandbox server
// that has been stopped again: what a first "countersign serve" leaves.
func doctorProvision(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "countersign-data")
	_, _, stop := doctorServe(t, dir)
	stop()
	return dir
}

// doctorCopy copies the directory tree src to dst, keeping modes.
func doctorCopy(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		if e.IsDir() {
			return os.MkdirAll(target, info.Mode().Perm())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

func doctorRun(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"doctor"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// doctorFakeDisk makes the disk check see plenty of space, so the tests do
// not depend on the machine's disk, and returns a restore function.
func doctorFakeDisk(t *testing.T, u diskUsage) {
	t.Helper()
	prev := doctorStatfs
	doctorStatfs = func(string) (diskUsage, error) { return u, nil }
	t.Cleanup(func() { doctorStatfs = prev })
}

var doctorPlentyOfDisk = diskUsage{avail: 50 << 30, total: 100 << 30, device: "/dev/test", mount: "/"}

// doctorTamper flips one byte in the canonical body of record entry seq,
// through the store API under the audit key layout (audit/codec.go:
// "audit/e/" + seq as 8 bytes big-endian).
func doctorTamper(t *testing.T, dir string, seq uint64) {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key := bin.BigEndian.AppendUint64([]byte("audit/e/"), seq)
	err = st.Update(context.Background(), func(txn store.Txn) error {
		v, err := txn.Get(key)
		if err != nil {
			return err
		}
		v[len(v)-3] ^= 0x20 // inside the body's last member, the entry type
		return txn.Set(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// doctorLines returns the status lines of a text report, fix lines folded
// into the line before.
func doctorLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(l, "      fix: ") && len(lines) > 0 {
			lines[len(lines)-1] += "\n" + l
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

func TestDoctorData(t *testing.T) {
	template := doctorProvision(t)
	doctorFakeDisk(t, doctorPlentyOfDisk)

	type tc struct {
		name  string
		setup func(t *testing.T, dir string)
		now   func() time.Time
		disk  *diskUsage
		args  []string // default --data DIR
		code  int
		want  []string // substrings of the output; DIR is the data directory
		check func(t *testing.T, dir, out string)
	}
	allOK := func(t *testing.T, _ string, out string) {
		for _, l := range doctorLines(out) {
			if !strings.HasPrefix(l, "ok    ") {
				t.Errorf("a fresh data directory should pass every check, got:\n%s", l)
			}
		}
	}
	for _, c := range []tc{
		{
			name: "fresh provisioned directory passes",
			code: 0,
			want: []string{
				"ok    data directory: DIR exists, mode 0700, owned by you",
				"ok    file keys/record.jwk.json: record signing key, mode 0600, parses (Ed25519, kid record-",
				"ok    file keys/identity.jwk.json: ADP identity key, mode 0600, parses (Ed25519",
				"ok    file keys/webhook-seal.key: seal key of webhook secrets and merchant credentials, mode 0600, parses (32 bytes)",
				"ok    file record.pub: record verifier key, mode 0644, parses (origin countersign.local/record/",
				"ok    file sandbox/agent-credential.txt: agent credential, mode 0600, parses (agent key ak_",
				"ok    file sandbox/agent.jwk.json: sandbox agent key, mode 0600, parses (Ed25519",
				"ok    file sandbox/operator.jwk.json: sandbox operator key, mode 0600, parses (Ed25519, kid op-sandbox)",
				"ok    file sandbox/operators.jwks.json: trusted operator public keys, mode 0644, parses (1 operator key(s))",
				"ok    file sandbox/seller-credential.txt: agent credential",
				"ok    file sandbox/seller.jwk.json: sandbox seller agent key",
				"ok    permissions: none of the other",
				"ok    store: DIR/store opens (Pebble)",
				"ok    record: 5 entries verify to head seq 5 at full depth (hashes, links, canonical form, Merkle tree, signed checkpoint) in ",
				"entries/s\n",
				"ok    record key: DIR/keys/record.jwk.json (key ",
				") signed the record to its head, seq 5; record.pub names the same key",
				"ok    clock: the system clock (",
				"after the newest entry (seq 5 at ",
				"ok    disk: 50.0 GiB free of 100.0 GiB (50.0 %) on /dev/test",
			},
			check: allOK,
		},
		{
			name: "json",
			args: []string{"--json"},
			code: 0,
			check: func(t *testing.T, dir, out string) {
				var checks []map[string]string
				if err := json.Unmarshal([]byte(out), &checks); err != nil {
					t.Fatalf("--json is not a JSON array: %v\n%s", err, out)
				}
				names := map[string]bool{}
				for _, c := range checks {
					if len(c) != 4 || c["status"] != "ok" || c["fix"] != "" || c["finding"] == "" {
						t.Errorf("check %v: want {check, status ok, finding, fix \"\"}", c)
					}
					names[c["check"]] = true
				}
				for _, n := range []string{"data directory", "file keys/record.jwk.json", "store", "record", "record key", "clock", "disk"} {
					if !names[n] {
						t.Errorf("--json has no %q check: %s", n, out)
					}
				}
			},
		},
		{
			name:  "world-readable record key",
			setup: func(t *testing.T, dir string) { doctorChmod(t, filepath.Join(dir, recordKeyFile), 0o644) },
			code:  1,
			want: []string{
				"FAIL  file keys/record.jwk.json: record signing key, mode 0644, readable by group and others: the secret must be the server user's alone",
				"      fix: chmod 600 DIR/keys/record.jwk.json\n",
			},
		},
		{
			name: "group-readable credential",
			setup: func(t *testing.T, dir string) {
				doctorChmod(t, filepath.Join(dir, sandboxDirName, sandboxCredential), 0o640)
			},
			code: 1,
			want: []string{
				"FAIL  file sandbox/agent-credential.txt: agent credential, mode 0640, readable by the group:",
				"      fix: chmod 600 DIR/sandbox/agent-credential.txt\n",
			},
		},
		{
			name:  "world-writable data directory",
			setup: func(t *testing.T, dir string) { doctorChmod(t, dir, 0o777) },
			code:  1,
			want:  []string{"FAIL  data directory: DIR exists, mode 0777, writable by group and others", "      fix: chmod go-w DIR\n"},
		},
		{
			name:  "world-writable store file",
			setup: func(t *testing.T, dir string) { doctorChmod(t, filepath.Join(dir, "identity.json"), 0o666) },
			code:  1,
			want:  []string{"FAIL  permissions: 1 of the other ", "writable by others: DIR/identity.json", "      fix: chmod -R go-w DIR\n"},
		},
		{
			name: "seal key that does not parse",
			setup: func(t *testing.T, dir string) {
				if err := os.WriteFile(filepath.Join(dir, "keys", "webhook-seal.key"), []byte("not a key\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			code: 1,
			want: []string{"FAIL  file keys/webhook-seal.key: seal key of webhook secrets and merchant credentials, mode 0600, does not parse: want 32 bytes in base64url",
				"fix: restore DIR/keys/webhook-seal.key from your backup"},
		},
		{
			name:  "tampered entry",
			setup: func(t *testing.T, dir string) { doctorTamper(t, dir, 3) },
			code:  1,
			want: []string{
				"FAIL  record: tampered at seq 3 of 5: entry hash does not match the stored entry (entries 1..2 verify)",
				"      fix: entry 3 was changed after it was written",
				"ok    record key:", // the head is intact and signed
			},
		},
		{
			name: "another record key",
			setup: func(t *testing.T, dir string) {
				p := filepath.Join(dir, recordKeyFile)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				_, priv, _ := ed25519.GenerateKey(rand.Reader)
				if err := keyfile.Write(p, priv, "record-other"); err != nil {
					t.Fatal(err)
				}
			},
			code: 1,
			want: []string{"ok    record: 5 entries verify", "FAIL  record key: DIR/keys/record.jwk.json is key ", " but DIR/record.pub names key "},
		},
		{
			name: "another record key and no record.pub",
			setup: func(t *testing.T, dir string) {
				p := filepath.Join(dir, recordKeyFile)
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				_, priv, _ := ed25519.GenerateKey(rand.Reader)
				if err := keyfile.Write(p, priv, "record-other"); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(dir, recordPubFile)); err != nil {
					t.Fatal(err)
				}
			},
			code: 1,
			// Without record.pub the record is checked with the wrong key.
			want: []string{"FAIL  record: ", "FAIL  record key: the record's head (seq 5) is not signed by DIR/keys/record.jwk.json"},
		},
		{
			name: "clock before the newest entry",
			now:  func() time.Time { return time.Now().Add(-time.Hour) },
			code: 1,
			want: []string{"FAIL  clock: the system clock (", "behind the newest entry (seq 5 at ", "new entries would be dated before old ones",
				"      fix: set the system clock right"},
		},
		{
			name: "implausible clock",
			now:  func() time.Time { return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) },
			code: 1,
			want: []string{"FAIL  clock: the system clock says 2001-01-01T00:00:00Z, which is not plausible"},
		},
		{
			name: "disk nearly full",
			disk: &diskUsage{avail: 50 << 20, total: 10 << 30, device: "/dev/test", mount: "/srv"},
			code: 1,
			want: []string{"FAIL  disk: 50 MiB free of 10.0 GiB (0.5 %) on /dev/test (mounted at /srv)", "      fix: free at least 974 MiB on /dev/test (mounted at /srv)\n"},
		},
		{
			name: "disk low",
			disk: &diskUsage{avail: 5 << 30, total: 100 << 30, device: "/dev/test", mount: "/"},
			code: 0,
			want: []string{"warn  disk: 5.0 GiB free of 100.0 GiB (5.0 %) on /dev/test", "      fix: free at least 5120 MiB on /dev/test"},
		},
		{
			name:  "no store",
			setup: func(t *testing.T, dir string) { doctorRemove(t, filepath.Join(dir, storeDir)) },
			code:  1,
			want:  []string{"FAIL  store: no store at DIR/store", "fix: start the server once to create it (countersign serve --data DIR)"},
		},
		{
			name: "empty store directory is not opened",
			setup: func(t *testing.T, dir string) {
				doctorRemove(t, filepath.Join(dir, storeDir))
				if err := os.Mkdir(filepath.Join(dir, storeDir), 0o700); err != nil {
					t.Fatal(err)
				}
			},
			code: 1,
			want: []string{"FAIL  store: DIR/store holds no database (no Pebble manifest)"},
			check: func(t *testing.T, dir, _ string) {
				if entries, _ := os.ReadDir(filepath.Join(dir, storeDir)); len(entries) != 0 {
					t.Errorf("doctor wrote into the empty store directory: %v", entries)
				}
			},
		},
		{
			name: "missing data directory",
			args: []string{"--data", "DIR/nothing-here"},
			code: 1,
			want: []string{"FAIL  data directory: DIR/nothing-here does not exist", "fix: pass --data with the directory the server uses"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "countersign-data")
			doctorCopy(t, template, dir)
			if c.setup != nil {
				c.setup(t, dir)
			}
			if c.now != nil {
				prev := doctorNow
				doctorNow = c.now
				t.Cleanup(func() { doctorNow = prev })
			}
			if c.disk != nil {
				doctorFakeDisk(t, *c.disk)
			}
			args := []string{"--data", dir}
			if c.args != nil {
				args = append(args, c.args...)
				for i, a := range args {
					args[i] = strings.ReplaceAll(a, "DIR", dir)
				}
			}
			code, out, errOut := doctorRun(args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out, errOut)
			}
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "DIR", dir); !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if c.check != nil {
				c.check(t, dir, out)
			}
			if code == 1 && !strings.Contains(errOut, "countersign: doctor: ") {
				t.Errorf("a failing doctor should say so on stderr: %q", errOut)
			}
		})
	}
}

func doctorChmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func doctorRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func TestDoctorURL(t *testing.T) {
	doctorFakeDisk(t, doctorPlentyOfDisk)
	dir := filepath.Join(t.TempDir(), "countersign-data")
	h, base, _ := doctorServe(t, dir)
	pub := filepath.Join(dir, recordPubFile)
	cred := filepath.Join(dir, sandboxDirName, sandboxCredential)

	// A server whose clock is an hour fast: the same handler, its Date
	// header replaced (net/http keeps a Date the handler set).
	skewed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	}))
	defer skewed.Close()

	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()

	// A verifier key file that is not one.
	badPub := filepath.Join(t.TempDir(), "bad.pub")
	if err := os.WriteFile(badPub, []byte("countersign.local/record/0000+00000000+AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A directory with another record key than the server's.
	other := filepath.Join(t.TempDir(), "other-data")
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	if err := keyfile.Write(filepath.Join(other, recordKeyFile), priv, "record-other"); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{
			name: "running server with its data directory passes",
			args: []string{"--url", base, "--data", dir},
			code: 0,
			want: []string{
				"ok    data directory: ",
				"ok    file keys/record.jwk.json: ",
				"ok    health: GET " + base + "/healthz answered 200 {\"status\":\"ok\"}",
				"ok    server clock: the server's Date (",
				"ok    checkpoint: the served checkpoint (origin countersign.local/record/",
				"verifies with " + pub,
				"ok    served record key: the server signs with " + filepath.Join(dir, recordKeyFile),
			},
		},
		{
			name: "url with key and credential",
			args: []string{"--url", base, "--key", pub, "--credential", cred},
			code: 0,
			want: []string{"ok    health: ", "ok    server clock: ", "ok    checkpoint: the served checkpoint"},
		},
		{
			name: "url with a malformed verifier key",
			args: []string{"--url", base, "--key", badPub, "--credential", cred},
			code: 1,
			want: []string{"FAIL  checkpoint: cannot read the verifier key " + badPub + ": ", "      fix: pass --key FILE (the deployment's record.pub)"},
		},
		{
			name: "url with a credential the server refuses",
			args: []string{"--url", base, "--key", pub, "--credential", badPub},
			code: 1,
			want: []string{"FAIL  checkpoint: the server refused the credential in " + badPub + " (401 Unauthorized)"},
		},
		{
			name: "url without a credential",
			args: []string{"--url", base, "--key", pub},
			code: 0,
			want: []string{"warn  checkpoint: GET " + base + "/audit/checkpoint needs an agent credential (401 Unauthorized)", "      fix: pass --credential FILE"},
		},
		{
			name: "server clock off",
			args: []string{"--url", skewed.URL, "--data", dir},
			code: 1,
			want: []string{"FAIL  server clock: the server's clock (Date: ", " ahead of this host's", "more than 5s", "      fix: synchronise the clocks",
				"ok    checkpoint: "},
		},
		{
			name: "server signing with another key than the directory's",
			args: []string{"--url", base, "--data", other, "--key", pub, "--credential", cred},
			code: 1,
			want: []string{"ok    checkpoint: ", "FAIL  served record key: the server at " + base + " does not sign with " + filepath.Join(other, recordKeyFile)},
		},
		{
			name: "server down",
			args: []string{"--url", downURL},
			code: 1,
			want: []string{"FAIL  health: GET " + downURL + "/healthz: ", "      fix: start the server (countersign serve), or check --url"},
		},
		{
			name: "store locked by the running server",
			args: []string{"--data", dir},
			code: 0,
			want: []string{"warn  store: " + filepath.Join(dir, storeDir) + " is locked: a server (or another countersign command) is using it",
				"      fix: stop the server, or check the running server instead: countersign doctor --url http://127.0.0.1:8080 --data " + dir},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := doctorRun(c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(strings.Join(c.args, " "), "--url") {
				for _, l := range doctorLines(out) {
					if name, _, _ := strings.Cut(l[6:], ":"); name == "store" || name == "record" || name == "record key" || name == "clock" {
						t.Errorf("with --url the store the server holds is not opened: %s", l)
					}
				}
			}
		})
	}
}

func TestDoctorDiskFinding(t *testing.T) {
	for _, c := range []struct {
		u                    diskUsage
		status, finding, fix string
	}{
		{diskUsage{avail: 50 << 30, total: 100 << 30, device: "/dev/sda1", mount: "/"}, doctorOK, "50.0 GiB free of 100.0 GiB (50.0 %) on /dev/sda1 (mounted at /)", ""},
		{diskUsage{avail: 99 << 20, total: 10 << 30, device: "/dev/sda1", mount: "/"}, doctorFail, "99 MiB free of 10.0 GiB (1.0 %) on /dev/sda1 (mounted at /)", "free at least 925 MiB on /dev/sda1 (mounted at /)"},
		{diskUsage{avail: 100 << 20, total: 2 << 30, device: "/dev/sda1", mount: "/"}, doctorWarn, "100 MiB free of 2.0 GiB (4.9 %) on /dev/sda1 (mounted at /)", "free at least 924 MiB on /dev/sda1 (mounted at /)"},
		{diskUsage{avail: 5 << 30, total: 100 << 30, device: "/dev/sda1", mount: "/"}, doctorWarn, "5.0 GiB free of 100.0 GiB (5.0 %) on /dev/sda1 (mounted at /)", "free at least 5120 MiB on /dev/sda1 (mounted at /)"},
		{diskUsage{avail: 1 << 30, total: 10 << 30, device: "/dev/sda1", mount: "/"}, doctorOK, "1.0 GiB free of 10.0 GiB (10.0 %) on /dev/sda1 (mounted at /)", ""},
		{diskUsage{avail: 200 << 20, total: 500 << 20, device: "tmpfs", mount: "/tmp"}, doctorWarn, "200 MiB free of 500 MiB (40.0 %) on tmpfs (mounted at /tmp)",
			"move the data directory to a file system with at least 1 GiB free (tmpfs (mounted at /tmp) is 500 MiB in all)"},
	} {
		status, finding, fix := diskFinding(c.u)
		if status != c.status || finding != c.finding || fix != c.fix {
			t.Errorf("diskFinding(%+v) =\n  %s | %s | %s\nwant\n  %s | %s | %s", c.u, status, finding, fix, c.status, c.finding, c.fix)
		}
	}
}

func TestDoctorExposure(t *testing.T) {
	for mode, want := range map[os.FileMode]string{
		0o644: "readable by group and others",
		0o604: "readable by others",
		0o660: "readable and writable by the group",
		0o646: "readable by the group and readable and writable by others",
	} {
		if got := exposure(mode); got != want {
			t.Errorf("exposure(%04o) = %q, want %q", mode, got, want)
		}
	}
}

func TestDoctorStatfs(t *testing.T) {
	u, err := statfsUsage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if u.total == 0 || u.avail > u.total || u.device == "" || u.mount == "" {
		t.Fatalf("statfs of a temporary directory: %+v", u)
	}
	if got := unescapeMount(`/mnt/my\040disk`); got != "/mnt/my disk" {
		t.Fatalf("unescapeMount: %q", got)
	}
}
