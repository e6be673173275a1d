package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRun builds countersign and drives "countersign mcp --data" over
// stdio, as the example does.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the countersign binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "countersign")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/countersign").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "mcp", "--data", t.TempDir(), "--console-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &mcp.CommandTransport{Command: cmd}, &out); err != nil {
		t.Fatal(err)
	}
	want := `mandate: 50000 per payment, approval from 10001
pay 12.50: settled
the same call again: replayed true, same intent true
pay 250.00: approval_pending (approve at true)
pay 900.00: error true, intent.denied, action stop
quote: ready; buy: settled
recall: blue mugs remembered true
`
	got := out.String()
	if i := bytes.IndexByte(out.Bytes(), '\n'); i >= 0 {
		got = got[i+1:] // the tool count changes with the contract
	}
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
