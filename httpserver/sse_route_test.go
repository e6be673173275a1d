package httpserver

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// The audit.stream route of the real model: a stream through the whole
// pipeline, and a malformed Last-Event-ID answered as a problem.
func TestAuditStreamRoute(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	l, err := audit.Open(t.Context(), st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, nil)
	defer hub.Close()
	for range 2 {
		err := l.Update(t.Context(), func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "system", ID: "t"}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(Config{BaseURL: testBase, Sandbox: true, Audit: l, AuditHub: hub, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ContractChecked(t, h))
	defer srv.Close()

	get := func(ctx context.Context, query, lastEventID string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/audit/stream"+query, nil)
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := get(ctx, "?after=0", "1")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contract.MediaEventStream {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if ev, err := newSSEReader(resp.Body).next(); err != nil || ev.ID != "2" {
		t.Fatalf("first event after Last-Event-ID 1: %+v, %v", ev, err)
	}
	cancel()

	resp = get(t.Context(), "", "x")
	var p contract.Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || p.Code != contract.CodeRequestValidation || len(p.Errors) != 1 || p.Errors[0].Field != "Last-Event-ID" {
		t.Errorf("malformed Last-Event-ID: %d %+v", resp.StatusCode, p)
	}
}
