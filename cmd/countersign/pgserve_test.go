package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeOnPostgres runs the reference server on PostgreSQL (--store):
// a payment settles, and after a restart on the same database the record
// continues and verifies.
func TestServeOnPostgres(t *testing.T) {
	storeURL := pgTestStore(t, "cs_serve")
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
