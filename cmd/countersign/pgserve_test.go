package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestServeOnPostgres runs the reference server on PostgreSQL (--store):
// a payment settles, and after a restart on the same database the record
// continues and verifies.
func TestServeOnPostgres(t *testing.T) {
	base := os.Getenv("COUNTERSIGN_TEST_POSTGRES")
	if base == "" {
		t.Skip("set COUNTERSIGN_TEST_POSTGRES (e.g. postgres://postgres@127.0.0.1:5432/test) to run the server on PostgreSQL")
	}
	schema := fmt.Sprintf("cs_serve_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	storeURL := base + sep + "schema=" + schema
	dir := t.TempDir()
	url, stop := startServe(t, dir, "--sandbox-latency", "off", "--store", storeURL)
	sandbox := filepath.Join(dir, "sandbox")
	pay := cli(t, "pay", "--url", url, "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
		"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", filepath.Join(sandbox, sandboxMandate),
		"--payee", "acct:seller.example", "--amount", "1250", "--currency", "USD", "--rail", "sandbox-card")
	if pay.status != 200 {
		t.Fatalf("pay on PostgreSQL: %s", pay.out)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	// The Pebble directory was never made: the state is in the database.
	if _, err := os.Stat(filepath.Join(dir, storeDir)); !os.IsNotExist(err) {
		t.Errorf("a Pebble store was created beside PostgreSQL: %v", err)
	}
	url, stop = startServe(t, dir, "--sandbox-latency", "off", "--store", storeURL)
	defer stop()
	cred := strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxCredential)))
	_, b := get(t, url+"/audit?limit=100", "Authorization", "Bearer "+cred)
	var page struct{ Data []struct{ Type string } }
	if err := json.Unmarshal(b, &page); err != nil {
		t.Fatal(err)
	}
	var started, settled int
	for _, e := range page.Data {
		switch e.Type {
		case "system.started":
			started++
		case "payment.settled":
			settled++
		}
	}
	if started != 2 || settled != 1 {
		t.Errorf("after a restart on PostgreSQL the record has %d starts and %d settlements, want 2 and 1", started, settled)
	}
	v := cli(t, "audit", "verify", "--url", url, "--credential", filepath.Join(sandbox, sandboxCredential), "--key", filepath.Join(dir, recordPubFile))
	if v.code != 0 {
		t.Errorf("audit verify over PostgreSQL: %s", v.out)
	}
}
