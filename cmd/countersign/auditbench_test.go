package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign/audit"
)

// TestAuditBenchPostgres appends with audit bench to a record in
// PostgreSQL (--store): every acknowledged entry is in the record, which
// verifies in full.
func TestAuditBenchPostgres(t *testing.T) {
	storeURL := pgTestStore(t, "cs_auditbench")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	args := []string{"--data", dir, "--store", storeURL, "--writers", "8", "--count", "200", "--acks"}
	if err := cmdAuditBench(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("audit bench: %v (%s)", err, errOut.String())
	}
	if acks := strings.Count(out.String(), "\n"); acks != 200 {
		t.Fatalf("%d entries acknowledged, want 200", acks)
	}
	st := openTestStore(t, storeURL)
	lg := recordReader(t, dir, st)
	ctx := t.Context()
	size, err := lg.Size(ctx)
	if err != nil || size != 200 {
		t.Fatalf("record of %d entries (%v), want 200", size, err)
	}
	if err := lg.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
}
