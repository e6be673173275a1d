package pay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// opStore records, in order, each Update ("sync") and UpdateDeferred
// ("deferred") that returned nil.
type opStore struct {
	store.Store
	mu  sync.Mutex
	ops []string
}

func (s *opStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.note("sync")
	}
	return err
}

func (s *opStore) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	err := store.UpdateDeferred(ctx, s.Store, fn)
	if err == nil {
		s.note("deferred")
	}
	return err
}

func (s *opStore) note(op string) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

func (s *opStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

// TestDecisionDeferredOnlyOnALogSharingRail checks how a payment's
// transactions commit. On a rail that keeps its books in the service's
// store log (settle.LogSharer), the deciding transaction is deferred, and
// whatever the outcome, the last commit before the answer is synchronous,
// so nothing is answered from a decision that is not durable. On any other
// rail every commit is synchronous.
func TestDecisionDeferredOnlyOnALogSharingRail(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shared   bool
		latency  bool // the rail takes time: it cannot answer in the decision's transaction
		minor    int64
		replay   bool
		conflict bool // the same key, another payment: answered 409
		want     []string
	}{
		// decision; the rail's ledger and the outcome, one commit
		// (settle.TxnSettler)
		{"settled, shared log, latency", true, true, 1250, false, false, []string{"deferred", "sync"}},
		// decision, barrier
		{"held, shared log, latency", true, true, 10_000, false, false, []string{"deferred", "sync"}},
		{"denied, shared log, latency", true, true, 60_000, false, false, []string{"deferred", "sync"}},
		{"replayed, shared log, latency", true, true, 1250, true, false, []string{"deferred", "sync"}},
		// decision, the rail's ledger and the outcome, one commit
		// (settle.InstantSettler); a decision not sent is one commit too
		{"settled, shared log, at once", true, false, 1250, false, false, []string{"sync"}},
		{"held, shared log, at once", true, false, 10_000, false, false, []string{"sync"}},
		{"denied, shared log, at once", true, false, 60_000, false, false, []string{"sync"}},
		{"replayed, shared log, at once", true, false, 1250, true, false, []string{"sync"}},
		// decision, rail ledger, outcome
		// a conflict's deciding transaction commits nothing; the barrier
		// makes what it read durable before the answer
		{"conflict, shared log, latency", true, true, 1250, false, true, []string{"sync"}},
		{"conflict, shared log, at once", true, false, 1250, false, true, []string{"sync"}},
		{"settled, own log", false, false, 1250, false, false, []string{"sync", "sync", "sync"}},
		{"held, own log", false, false, 10_000, false, false, []string{"sync"}},
		{"replayed, own log", false, false, 1250, true, false, []string{"sync"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ops := &opStore{Store: h.st}
			_, recKey, _ := ed25519.GenerateKey(rand.Reader)
			lg, err := audit.Open(t.Context(), ops, recKey, &audit.Options{Now: h.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			o := &fake.Options{Store: ops, SharedLog: tc.shared, Now: h.clock.Now}
			if tc.latency {
				o.MinLatency, o.Sleep = time.Millisecond, noSleep
			}
			h.rail, err = fake.New("sandbox-card", o)
			if err != nil {
				t.Fatal(err)
			}
			h.opts.Store, h.opts.Log = ops, lg
			h.svc = h.newService()
			in := h.instruction("k-1", tc.minor, nil)
			if tc.replay || tc.conflict {
				if _, err := h.pay(in); err != nil {
					t.Fatal(err)
				}
			}
			ops.take()
			if tc.conflict {
				if _, err := h.pay(h.instruction("k-1", tc.minor+1, nil)); !errors.Is(err, ErrIdempotencyConflict) {
					t.Fatalf("Pay = %v, want ErrIdempotencyConflict", err)
				}
				if got := ops.take(); !slices.Equal(got, tc.want) {
					t.Errorf("commits = %q, want %q", got, tc.want)
				}
				return
			}
			res, err := h.pay(in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Replayed != tc.replay {
				t.Errorf("Replayed = %v, want %v", res.Replayed, tc.replay)
			}
			if got := ops.take(); !slices.Equal(got, tc.want) {
				t.Errorf("commits = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReplayOfEveryOutcome checks that a replay answers what the first
// request was answered, for outcomes stored under the idempotency key
// (held, denied) and for those rebuilt from the intent (settled, failed:
// see finalIdem), and that the sweep forgets both kinds after retention.
func TestReplayOfEveryOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		minor  int64
		refund bool // refund part of it before the replay
		want   Outcome
		stored bool // the outcome is in the idempotency record
	}{
		{"settled", 1250, false, OutcomeSettled, false},
		{"settled, then partly refunded", 1250, true, OutcomeSettled, false},
		{"failed", 2500, false, OutcomeFailed, false},
		{"held", 10_000, false, OutcomeHeld, true},
		{"denied", 60_000, false, OutcomeDenied, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{rail: &fake.Options{DeclineAbove: 2000}})
			in := h.instruction(fmt.Sprintf("k-%d", tc.minor), tc.minor, nil)
			first, err := h.pay(in)
			if err != nil {
				t.Fatal(err)
			}
			if first.Outcome != tc.want {
				t.Fatalf("outcome %s, want %s", first.Outcome, tc.want)
			}
			var rec *idemRecord
			if err := h.st.View(t.Context(), func(r store.Reader) error {
				rec, err = getIdem(r, RoutePay, h.caller.KeyID, in.IdempotencyKey)
				return err
			}); err != nil || rec == nil {
				t.Fatalf("idempotency record: %v %v", rec, err)
			}
			if got := rec.Result != nil; got != tc.stored {
				t.Errorf("outcome stored in the idempotency record: %v, want %v", got, tc.stored)
			}
			if tc.refund {
				part := int64(250)
				if _, err := h.svc.Refund(t.Context(), RefundRequest{IntentID: first.IntentID, AmountMinor: &part}, opCall("op-alice")); err != nil {
					t.Fatal(err)
				}
			}
			again, err := h.pay(in)
			if err != nil {
				t.Fatal(err)
			}
			checkReplay(t, first, again)
			h.clock.Add(7*24*time.Hour + time.Second)
			if n, err := h.svc.SweepIdempotency(t.Context()); err != nil || n != 1 {
				t.Fatalf("sweep after retention: %d, %v; want 1", n, err)
			}
		})
	}
}

// noSleep is a rail's Sleep that returns at once: the rail has latency,
// and so answers after the decision commits, but the test does not wait.
func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }
