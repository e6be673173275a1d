package operator_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

func newJournal(t *testing.T, clk *fakeClock) (*operator.RefusalJournal, *audit.Log) {
	t.Helper()
	st := memstore.New(nil)
	t.Cleanup(func() { st.Close() })
	lg, err := audit.Open(context.Background(), st, ed25519.NewKeyFromSeed(make([]byte, 32)), nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := operator.NewRefusalJournal(lg, &operator.RefusalJournalOptions{
		Now: clk.Now, Interval: time.Minute, KeyEvery: 6 * time.Second, KeyBurst: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return j, lg
}

func entries(t *testing.T, lg *audit.Log) []audit.Entry {
	t.Helper()
	ctx := context.Background()
	n, err := lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for e, err := range lg.Entries(ctx, 1, n) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestRefusalJournal(t *testing.T) {
	ctx := context.Background()
	clk := newClock(t0)
	j, lg := newJournal(t, clk)
	req := httptest.NewRequest("POST", "/operator/kill-switch/"+strings.Repeat("x", 5000), nil)
	req.Header.Set("X-Request-Id", strings.Repeat("\x01", 10)) // not a valid id: never stored

	// 1,000 refusals that prove no identity write nothing when they happen.
	for i := range 1000 {
		reasons := []operator.Reason{operator.ReasonMissingHeader, operator.ReasonMalformedHeader, operator.ReasonUnknownKey}
		j.Refused(ctx, req, "operator.kill_switch", reasons[i%3], fmt.Sprintf("attacker-%d", i))
	}
	if got := entries(t, lg); len(got) != 0 {
		t.Fatalf("unauthenticated refusals wrote %d entries, want 0", len(got))
	}

	// A trusted key's refusals are recorded one by one up to its burst,
	// then counted.
	for range 5 {
		j.Refused(ctx, req, "operator.kill_switch", operator.ReasonBadSignature, "op-alice")
	}
	got := entries(t, lg)
	if len(got) != 3 {
		t.Fatalf("5 refusals by a trusted key over a burst of 3 wrote %d entries, want 3", len(got))
	}
	var one struct {
		OperationID, Method, Path, Reason, KeyID string
	}
	if err := json.Unmarshal(got[0].Data, &one); err != nil {
		t.Fatal(err)
	}
	if got[0].Type != operator.EntryRefused || one.KeyID != "op-alice" || one.Reason != "bad_signature" ||
		one.OperationID != "operator.kill_switch" || len(one.Path) > 260 || got[0].RequestID != "" {
		t.Errorf("refused entry = %s %+v (request id %q), want a bounded op-alice bad_signature entry with no request id",
			got[0].Type, one, got[0].RequestID)
	}

	// Within the interval a flush writes one summary; a second writes none.
	wrote, err := j.Flush(ctx)
	if err != nil || !wrote {
		t.Fatalf("first Flush = %v, %v; want a summary", wrote, err)
	}
	j.Refused(ctx, req, "operator.approve", operator.ReasonMissingHeader, "")
	if wrote, err := j.Flush(ctx); err != nil || wrote {
		t.Fatalf("second Flush within the interval = %v, %v; want nothing written", wrote, err)
	}
	got = entries(t, lg)
	if len(got) != 4 || got[3].Type != operator.EntryRefusalSummary {
		t.Fatalf("entries after flush: %d, last %q; want 4 ending in a summary", len(got), got[len(got)-1].Type)
	}
	var sum struct {
		Count         uint64
		Reasons       map[string]uint64
		Operations    map[string]uint64
		OverRateByKey map[string]uint64
	}
	if err := json.Unmarshal(got[3].Data, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Count != 1002 || sum.Reasons["missing_header"] != 334 || sum.Reasons["bad_signature"] != 2 ||
		sum.Operations["operator.kill_switch"] != 1002 || sum.OverRateByKey["op-alice"] != 2 {
		t.Errorf("summary = %+v", sum)
	}
	if strings.Contains(string(got[3].Data), "attacker") {
		t.Errorf("summary stores an unauthenticated key id: %s", got[3].Data)
	}

	// After the interval the pending refusal is summarised; the key's
	// bucket has refilled.
	clk.Add(time.Minute)
	if wrote, err := j.Flush(ctx); err != nil || !wrote {
		t.Fatalf("Flush after the interval = %v, %v; want a summary", wrote, err)
	}
	j.Refused(ctx, req, "operator.approve", operator.ReasonReplayedNonce, "op-alice")
	if n := len(entries(t, lg)); n != 6 {
		t.Errorf("entries = %d, want 6 (a refilled key records again)", n)
	}
	// Close writes what is pending whatever the interval, and nothing when
	// nothing is.
	j.Refused(ctx, req, "operator.approve", operator.ReasonUnknownKey, "x")
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(entries(t, lg)); n != 7 {
		t.Errorf("entries after Close = %d, want 7", n)
	}
	s := j.Stats()
	if s.Recorded != 4 || s.Summaries != 3 || s.ByReason[operator.ReasonMissingHeader] != 335 {
		t.Errorf("stats = %+v", s)
	}
}

func TestReasonIdentifiesKey(t *testing.T) {
	for _, r := range operator.Reasons() {
		want := r != operator.ReasonMissingHeader && r != operator.ReasonMalformedHeader && r != operator.ReasonUnknownKey
		if got := r.IdentifiesKey(); got != want {
			t.Errorf("%s.IdentifiesKey() = %v, want %v", r, got, want)
		}
	}
}
