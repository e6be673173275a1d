package memory

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

func TestRememberRecallConsolidate(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
	if a.Seal.ContentDigest == "" || a.Seal.Entry.Type != EntryRecorded || a.SupersededAt != nil {
		t.Fatalf("record: %+v", a)
	}
	txA := f.clock.Now()
	f.clock.Advance(time.Hour)
	b := f.mustRemember("ns", fact{subject: "user:1", body: "lives in Berlin", from: t0})
	if len(b.Edges) != 1 || b.Edges[0] != (Edge{EdgeSupersedes, a.ID}) {
		t.Fatalf("edges of the new record: %+v", b.Edges)
	}
	now := f.clock.Now()
	// Now, at now: Berlin.
	p, err := f.recall("ns", RecallRequest{Subject: "user:1", ValidAt: &now, TxAt: &now})
	if err != nil || len(p.Data) != 1 || p.Data[0].ID != b.ID || string(p.Data[0].Body) != `"lives in Berlin"` {
		t.Fatalf("recall now: %+v %v", p.Data, err)
	}
	// Valid yesterday, as known now: the remainder of Paris, clipped at t0.
	yesterday := t0.Add(-24 * time.Hour)
	p, err = f.recall("ns", RecallRequest{Subject: "user:1", ValidAt: &yesterday, TxAt: &now})
	if err != nil || len(p.Data) != 1 || string(p.Data[0].Body) != `"lives in Paris"` || p.Data[0].ID == a.ID {
		t.Fatalf("recall yesterday as of now: %+v %v", p.Data, err)
	}
	rem := p.Data[0]
	if rem.ValidTo == nil || !rem.ValidTo.Equal(t0) || rem.Edges[0] != (Edge{EdgeDerivedFrom, a.ID}) {
		t.Fatalf("remainder: %+v", rem)
	}
	// Valid now, as known before Berlin: Paris itself (no look-ahead).
	p, err = f.recall("ns", RecallRequest{Subject: "user:1", ValidAt: &now, TxAt: &txA})
	if err != nil || len(p.Data) != 1 || p.Data[0].ID != a.ID || p.Data[0].SupersededAt == nil {
		t.Fatalf("recall as of txA: %+v %v", p.Data, err)
	}
	if v := Verify(f.svc.VerifierKey(), mustJSON(t, p)); !v.Holds || v.Records != 1 {
		t.Fatalf("verify page: %+v", v)
	}
	// Before anything was recorded: nothing.
	early := t0.Add(-time.Hour)
	p, err = f.recall("ns", RecallRequest{ValidAt: &now, TxAt: &early})
	if err != nil || len(p.Data) != 0 {
		t.Fatalf("recall before the first record: %+v %v", p.Data, err)
	}
}

func TestRememberIdempotent(t *testing.T) {
	f := newFixture(t, nil)
	a := f.mustRemember("ns", fact{subject: "s", body: "x", key: "one"})
	b := f.mustRemember("ns", fact{subject: "s", body: "x", key: "one"})
	if a.ID != b.ID {
		t.Fatalf("replay made a new record: %s, %s", a.ID, b.ID)
	}
	_, err := f.remember("ns", fact{subject: "s", body: "y", key: "one"})
	if !errors.Is(err, ErrIdempotencyReuse) {
		t.Fatalf("another body under the same key: %v", err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
