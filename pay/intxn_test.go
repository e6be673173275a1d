package pay

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// failingStepRail is a fake rail whose in-transaction settlement fails
// after the rail's write, the first fails times: as the outcome's
// transaction would fail for a reason of the store's.
type failingStepRail struct {
	*fake.Rail
	fails int
}

func (r *failingStepRail) SettleInTxn(ctx context.Context, st store.Store, req settle.SettleRequest) (func(store.Txn) (settle.Settlement, error), settle.Settlement, error) {
	step, s, err := r.Rail.SettleInTxn(ctx, st, req)
	return r.failing(step), s, err
}

func (r *failingStepRail) PrepareInTxn(ctx context.Context, st store.Store, req settle.SettleRequest) func(store.Txn) (settle.Settlement, error) {
	return r.failing(r.Rail.PrepareInTxn(ctx, st, req))
}

func (r *failingStepRail) failing(step func(store.Txn) (settle.Settlement, error)) func(store.Txn) (settle.Settlement, error) {
	if step == nil || r.fails == 0 {
		return step
	}
	r.fails--
	return func(tx store.Txn) (settle.Settlement, error) {
		if _, err := step(tx); err != nil {
			return settle.Settlement{}, err
		}
		return settle.Settlement{}, fmt.Errorf("the outcome's transaction: %w", store.ErrUnavailable)
	}
}

// TestSettleInTxnAllOrNothing: on a rail that settles in the outcome's
// transaction, the rail's entry and the outcome commit together or not at
// all. When that transaction fails, the rail has no record of the
// payment, the intent stays settling with its outcome marked unknown, and
// the reconciler sends it again under the same key and settles it once.
func TestSettleInTxnAllOrNothing(t *testing.T) {
	ctx := t.Context()
	// A rail with latency answers after the decision commits
	// (SettleInTxn), not in its transaction (PrepareInTxn).
	h := newHarness(t, harnessConfig{rail: &fake.Options{SharedLog: true, MinLatency: time.Millisecond, Sleep: noSleep}})
	h.wrapRail = func(r *fake.Rail) settle.Rail { return &failingStepRail{Rail: r, fails: 1} }
	h.svc = h.newService()
	_, err := h.pay(h.instruction("k-1", 1250, nil))
	if !errors.Is(err, ErrRailUnavailable) {
		t.Fatalf("Pay = %v, want ErrRailUnavailable", err)
	}
	var id string
	if err := h.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyIntent), store.PrefixEnd([]byte(keyIntent)), false)
		defer it.Close()
		for it.Next() {
			id = string(it.Key()[len(keyIntent):])
		}
		return it.Err()
	}); err != nil {
		t.Fatal(err)
	}
	in, err := h.svc.Intent(ctx, h.caller, id)
	if err != nil || in.Status != StatusSettling || in.UnknownOutcome == nil {
		t.Fatalf("intent after the failed outcome: %+v, %v; want settling, outcome unknown", in, err)
	}
	if _, err := h.rail.Lookup(ctx, id); !errors.Is(err, settle.ErrUnknownKey) {
		t.Fatalf("the rail's record after the failed outcome: %v, want none", err)
	}
	rep, err := h.svc.Reconcile(ctx)
	if err != nil || rep.Settled != 1 {
		t.Fatalf("Reconcile = %+v, %v; want one settled", rep, err)
	}
	in, err = h.svc.Intent(ctx, h.caller, id)
	if err != nil || in.Status != StatusSettled {
		t.Fatalf("intent after reconcile: %+v, %v", in, err)
	}
	if n, err := h.rail.Count(ctx); err != nil || n != 1 {
		t.Fatalf("the rail holds %d payments (%v), want 1", n, err)
	}
	if err := h.rail.CheckLedger(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestInstantSettleAllOrNothing: on a rail that answers at once
// (settle.InstantSettler), the decision, the rail's entry and the
// outcome are one transaction. When the rail's answer in it is not
// definite, none of it commits: the payment is decided again and sent the
// long way, with one decision in the record. There it settles, or, when
// that answer is not definite either, stays settling, its outcome
// unknown, until the reconciler settles it once.
func TestInstantSettleAllOrNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fails   int // steps that fail after the rail's write
		wantErr error
	}{
		{"the long way settles", 1, nil},
		{"the long way fails too", 2, ErrRailUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			h := newHarness(t, harnessConfig{})
			var rail *failingStepRail
			h.wrapRail = func(r *fake.Rail) settle.Rail {
				rail = &failingStepRail{Rail: r, fails: tc.fails}
				return rail
			}
			h.svc = h.newService()
			res, err := h.pay(h.instruction("k-1", 1250, nil))
			if !errors.Is(err, tc.wantErr) || err == nil && res.Outcome != OutcomeSettled {
				t.Fatalf("Pay = %+v, %v; want settled or %v", res, err, tc.wantErr)
			}
			if rail.fails != 0 {
				t.Fatal("the payment was not prepared in the decision's transaction")
			}
			decisions := 0
			for _, typ := range h.entryTypes() {
				if typ == "gate.decision" {
					decisions++
				}
			}
			if decisions != 1 {
				t.Errorf("%d decisions in the record (%q), want 1", decisions, h.entryTypes())
			}
			page, err := h.svc.Settling(ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != nil {
				if len(page.Data) != 1 {
					t.Fatalf("settling list %+v, want the payment", page)
				}
				if n, err := h.rail.Count(ctx); err != nil || n != 0 {
					t.Fatalf("the rail holds %d payments (%v) before reconciling, want 0", n, err)
				}
				rep, err := h.svc.Reconcile(ctx)
				if err != nil || rep.Settled != 1 {
					t.Fatalf("Reconcile = %+v, %v; want one settled", rep, err)
				}
			} else if len(page.Data) != 0 {
				t.Fatalf("settling list %+v, want empty", page)
			}
			if n, err := h.rail.Count(ctx); err != nil || n != 1 {
				t.Fatalf("the rail holds %d payments (%v), want 1", n, err)
			}
			if err := h.rail.CheckLedger(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestInstantRailNotSentUnlessAllowed: on a rail that answers at once,
// a payment denied or held for approval is prepared but never sent; the
// held one, approved, is sent once, the long way.
func TestInstantRailNotSentUnlessAllowed(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessConfig{})
	if res, err := h.pay(h.instruction("big", 60_000, nil)); err != nil || res.Outcome != OutcomeDenied {
		t.Fatalf("denial: %+v, %v", res, err)
	}
	held := h.hold("held", 20_000)
	if n, err := h.rail.Count(ctx); err != nil || n != 0 {
		t.Fatalf("the rail holds %d payments (%v), want none", n, err)
	}
	res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge,
		MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatalf("approval: %+v, %v", res, err)
	}
	if n, err := h.rail.Count(ctx); err != nil || n != 1 {
		t.Fatalf("the rail holds %d payments (%v), want 1", n, err)
	}
}

// TestRailAnswersOnBothLedgers runs each class of the rail's answer on a
// rail with a ledger of its own commits and on one that settles in the
// outcome's transaction (settle.TxnSettler), and checks that both record
// the same outcome, that the rail's books agree with it, and that an
// unknown outcome is finished once by the reconciler.
func TestRailAnswersOnBothLedgers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		rail     func() fake.Options // fresh each run: FailNext counts its calls
		minor    int64
		deferred bool // the rail's finality, and the instruction's terms
		wantErr  error
		want     Outcome // after Pay, or after Reconcile when wantErr is set
		status   settle.Status
	}{
		{name: "settled", minor: 1250, want: OutcomeSettled, status: settle.StatusSettled},
		{name: "pending", minor: 1250, deferred: true, want: OutcomeSettled, status: settle.StatusPending},
		{name: "declined", rail: func() fake.Options { return fake.Options{DeclineAbove: 2000} }, minor: 2500, want: OutcomeFailed, status: settle.StatusDeclined},
		{name: "unknown after acting", rail: func() fake.Options {
			return fake.Options{Fault: fake.FailNext(fake.OpSettle, 1, fake.AfterMove(settle.ErrUnknownOutcome))}
		},
			minor: 1250, wantErr: ErrRailUnavailable, want: OutcomeSettled, status: settle.StatusSettled},
		{name: "request lost", rail: func() fake.Options {
			return fake.Options{Fault: fake.FailNext(fake.OpSettle, 1, settle.ErrUnknownOutcome)}
		},
			minor: 1250, wantErr: ErrRailUnavailable, want: OutcomeSettled, status: settle.StatusSettled},
	} {
		for _, kind := range []struct {
			name            string
			shared, latency bool
		}{
			{"own commits", false, false},
			{"outcome's transaction", true, true},   // SettleInTxn
			{"decision's transaction", true, false}, // PrepareInTxn, where no fault is drawn
		} {
			t.Run(tc.name+"/"+kind.name, func(t *testing.T) {
				ctx := t.Context()
				var o fake.Options
				if tc.rail != nil {
					o = tc.rail()
				}
				o.SharedLog = kind.shared
				if kind.latency {
					o.MinLatency, o.Sleep = time.Millisecond, noSleep
				}
				if tc.deferred {
					o.Facts = settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}
				}
				h := newHarness(t, harnessConfig{rail: &o})
				res, err := h.pay(h.instruction("k-1", tc.minor, func(in *Instruction) {
					if tc.deferred {
						in.Terms.Finality = gate.FinalityDeferred
					}
				}))
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Pay = %+v, %v; want %v", res, err, tc.wantErr)
				}
				if tc.wantErr != nil {
					rep, err := h.svc.Reconcile(ctx)
					if err != nil || rep.Settled != 1 {
						t.Fatalf("Reconcile = %+v, %v; want one settled", rep, err)
					}
					if res, err = h.pay(h.instruction("k-1", tc.minor, nil)); err != nil {
						t.Fatalf("replay after reconcile: %v", err)
					}
				}
				if res.Outcome != tc.want {
					t.Errorf("outcome %s, want %s", res.Outcome, tc.want)
				}
				l, err := h.rail.Lookup(ctx, res.IntentID)
				if l.Status != tc.status {
					t.Errorf("the rail holds %q (%v), want %q", l.Status, err, tc.status)
				}
				if n, err := h.rail.Count(ctx); err != nil || n != 1 {
					t.Errorf("the rail holds %d payments (%v), want 1", n, err)
				}
				if err := h.rail.CheckLedger(ctx); err != nil {
					t.Error(err)
				}
			})
		}
	}
}
