package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/countersign/countersign/audit"
)

// builtBinary builds the countersign binary once per test run.
var builtBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "countersign-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "countersign")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}
	bin, err := builtBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestCrashDuringAppends SIGKILLs the binary in the middle of a stream of
// concurrent appends, several times, and checks after each restart that
// every entry the process acknowledged is present with the same hash and
// that the whole record verifies, signatures included.
//
// The kill point is chosen by counting acknowledgements, not by time, so
// the test does not depend on the machine's speed.
func TestCrashDuringAppends(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 42))
	acked := map[uint64]string{}
	const cycles = 4
	for cycle := 0; cycle < cycles; cycle++ {
		killAfter := 200 + rng.IntN(1500)
		cmd := exec.Command(bin, "audit", "bench", "--data", dir, "--writers", "16", "--count", "100000000", "--acks")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			seq, hash, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				t.Fatalf("cycle %d: bad ack line %q", cycle, sc.Text())
			}
			s, err := strconv.ParseUint(seq, 10, 64)
			if err != nil {
				t.Fatalf("cycle %d: bad ack line %q", cycle, sc.Text())
			}
			if prev, dup := acked[s]; dup {
				t.Fatalf("cycle %d: seq %d acknowledged twice (%s, then %s)", cycle, s, prev, hash)
			}
			acked[s] = hash
			n++
			if n == killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		// Lines already written before the kill are acknowledgements too.
		for sc.Scan() {
			if seq, hash, ok := strings.Cut(sc.Text(), " "); ok {
				s, _ := strconv.ParseUint(seq, 10, 64)
				acked[s] = hash
			}
		}
		_ = cmd.Wait()
		if n < killAfter {
			t.Fatalf("cycle %d: process ended after %d acks before the kill: %s", cycle, n, stderr.String())
		}
		checkAcked(t, dir, acked)
	}
	out, err := exec.Command(bin, "audit", "verify", "--data", dir, "--signatures").CombinedOutput()
	if err != nil {
		t.Fatalf("audit verify after %d kills: %v\n%s", cycles, err, out)
	}
	t.Logf("%d kills, %d acknowledged entries, %s", cycles, len(acked), strings.TrimSpace(string(out)))
}

// openStoppedRecord opens the record in the data directory of a stopped
// server, verified with its own record key, for a test to read; the
// caller closes it.
func openStoppedRecord(t *testing.T, dir string) (*audit.Log, func()) {
	t.Helper()
	_, origin, pub, err := (&source{data: dir}).verifier()
	if err != nil {
		t.Fatal(err)
	}
	lg, closeFn, err := openData(context.Background(), dir, pub, origin)
	if err != nil {
		t.Fatal(err)
	}
	return lg, closeFn
}

// checkAcked opens the data directory and checks every acknowledged entry.
func checkAcked(t *testing.T, dir string, acked map[uint64]string) {
	t.Helper()
	ctx := context.Background()
	lg, closeFn := openStoppedRecord(t, dir)
	defer closeFn()
	size, err := lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq, hash := range acked {
		if seq > size {
			t.Fatalf("acknowledged seq %d lost: record has %d entries", seq, size)
		}
		e, err := lg.Get(ctx, seq)
		if err != nil {
			t.Fatalf("acknowledged seq %d: %v", seq, err)
		}
		if e.Hash != hash {
			t.Fatalf("seq %d: hash %s, acknowledged %s", seq, e.Hash, hash)
		}
	}
	if err := lg.Verify(ctx, 1, size, audit.Hashes, nil); err != nil {
		t.Fatalf("record does not verify after the kill: %v", err)
	}
}
