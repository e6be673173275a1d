package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
)

// privatePostgres starts a PostgreSQL server of the test's own (initdb in
// a temporary directory, a free port on 127.0.0.1), so that the test may
// restart it without disturbing other tests on the shared database. It
// needs the server's binaries (Debian: the postgresql package, which
// .ci/run installs) and, when run as root, the postgres user to run them
// as; the test is skipped where they are missing. restart stops the
// server, dropping every connection, and starts it again; it returns once
// the server accepts connections.
func privatePostgres(t *testing.T) (connURL string, restart func()) {
	t.Helper()
	if os.Getenv("COUNTERSIGN_TEST_POSTGRES") == "" {
		t.Skip("set COUNTERSIGN_TEST_POSTGRES to run the PostgreSQL tests (this one starts a server of its own)")
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Strings(found)
	if len(found) == 0 {
		t.Skip("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
	}
	bin := filepath.Dir(found[len(found)-1])
	var asUser []string
	dir, err := os.MkdirTemp("", "countersign-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user to run PostgreSQL as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) {
		t.Helper()
		argv := append(append(append([]string{}, asUser...), filepath.Join(bin, name)), args...)
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync")
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", port, dir)
	run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start")
	t.Cleanup(func() {
		argv := append(append([]string{}, asUser...), filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
		_ = exec.Command(argv[0], argv[1:]...).Run()
	})
	var mu sync.Mutex // one restart at a time
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port), func() {
		mu.Lock()
		defer mu.Unlock()
		run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-m", "fast", "-w", "restart")
	}
}

// TestReplicasSurvivePostgresRestart restarts the database under three
// replicas in the middle of a load of payments, several times: while it
// is down, requests fail closed (503 unavailable, retry-as-is, with
// Retry-After); the servers recover by themselves when it returns; and
// then nothing acknowledged is lost, nothing settled twice, every key
// replays its first answer, and the record verifies. It runs on rails with
// latency, and on rails that answer at once (one commit a payment).
func TestReplicasSurvivePostgresRestart(t *testing.T) {
	connURL, restart := privatePostgres(t)
	for _, tc := range []struct{ name, schema, latency string }{
		{"rail latency", "cs_restart", "1ms-4ms"},
		{"rails answer at once", "cs_restart_instant", "off"},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplicasSurvivePostgresRestart(t, connURL, tc.schema, tc.latency, restart) })
	}
}

func testReplicasSurvivePostgresRestart(t *testing.T, connURL, schema, latency string, restart func()) {
	rs := startReplicas(t, 3, connURL+"?schema="+schema+"&pool_max_conns=8", "--sandbox-latency", latency,
		"--agent-rate", "100000", "--agent-burst", "100000", "--breaker-after", "100000")
	load := newPayLoad(t, rs.sandbox(), "pgrestart", 1200)
	answers, restarts := failoverLoad(t, rs, load, 3, func(*rand.Rand) { restart() })
	rs.revive(t)
	load.checkReplays(t, answers, rs.url(0), rs.url(1), rs.url(2))
	for i, p := range rs.all() {
		if p.cmd.ProcessState != nil {
			t.Errorf("replica %d exited during the restarts: %v", i, p.cmd.ProcessState)
		}
		p.term()
	}
	st := openTestStore(t, connURL+"?schema="+schema)
	settled, answered, size := checkExactlyOnce(t, st, recordReader(t, rs.dir, st), answers)
	if answered != settled {
		t.Fatalf("%d settlements, %d settled answers: with no approvals they must be equal", settled, answered)
	}
	t.Logf("%d database restarts under 3 replicas; %d payments; %d answered 503 retry-as-is meanwhile; %d settled; %d record entries verify",
		restarts, len(answers), load.unavailable.Load(), settled, size)
	if restarts < 2 {
		t.Fatalf("only %d database restarts happened under load", restarts)
	}
}
