package metrics_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/metrics"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// Hook the metrics into the record, observe a request, and scrape them.
// A server serves m.Handler() on a listener of its own, for the operator.
func Example() {
	ctx := context.Background()
	m := metrics.New(nil)

	// Every entry the record commits is counted: a gate decision by its
	// outcome, and every entry by its type.
	lg, err := audit.Open(ctx, memstore.New(nil), ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)),
		&audit.Options{Committed: m.ObserveEntries})
	if err != nil {
		log.Fatal(err)
	}
	defer lg.Close()
	err = lg.Update(ctx, func(txn store.Txn) error {
		_, err := lg.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_1"},
			Data: json.RawMessage(`{"outcome":"allow","stage":"policy"}`)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	// What httpserver does for every request of an operation.
	observe := m.RequestObserver("pay.create")
	observe(200, 12*time.Millisecond)

	// A store driver reports its commits.
	m.ObserveStoreCommit(4, 3*time.Millisecond, nil)

	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"countersign_gate_decisions_total", "countersign_record_entries_total",
			"countersign_http_requests_total", "countersign_store_commit_group_size_count"} {
			if strings.HasPrefix(line, p) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// countersign_gate_decisions_total{outcome="allow"} 1
	// countersign_gate_decisions_total{outcome="confirm"} 0
	// countersign_gate_decisions_total{outcome="deny"} 0
	// countersign_gate_decisions_total{outcome="other"} 0
	// countersign_http_requests_total{code="2xx",operation="pay.create"} 1
	// countersign_record_entries_total{type="gate.decision"} 1
	// countersign_record_entries_total{type="other"} 0
	// countersign_store_commit_group_size_count 1
}
