package fake_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// TestSettleInTxn checks SettleInTxn against Settle: where it returns a
// step, the step run in the caller's transaction records what Settle
// would have, answers what Settle would have, and records nothing when
// that transaction does not commit; where a fault of the simulation
// happens around the ledger's write, or the ledger is not in the caller's
// log, it returns no step and Settle's answer, with the faults drawn once.
func TestSettleInTxn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       fake.Options
		amount     int64
		abort      bool   // the caller's transaction fails after the step
		otherStore bool   // the caller's store is not the rail's
		wantStep   bool   // a step is returned
		wantClass  string // of the answer: the step's, else SettleInTxn's
		recorded   string // what Lookup finds afterwards: a status, or unknownkey
	}{
		{name: "settled", opts: fake.Options{SharedLog: true}, amount: 100,
			wantStep: true, wantClass: "ok", recorded: "settled"},
		{name: "declined", opts: fake.Options{SharedLog: true, DeclineAbove: 50}, amount: 100,
			wantStep: true, wantClass: "declined", recorded: "declined"},
		{name: "caller's transaction fails", opts: fake.Options{SharedLog: true}, amount: 100,
			abort: true, wantStep: true, wantClass: "ok", recorded: "unknownkey"},
		{name: "own log", opts: fake.Options{}, amount: 100,
			wantClass: "ok", recorded: "settled"},
		{name: "the caller's store is another", opts: fake.Options{SharedLog: true}, amount: 100,
			otherStore: true, wantClass: "ok", recorded: "settled"},
		{name: "unavailable", opts: fake.Options{SharedLog: true, Fault: fake.FailNext(fake.OpSettle, 1, settle.ErrUnavailable)}, amount: 100,
			wantClass: "unavailable", recorded: "unknownkey"},
		{name: "response lost after acting", opts: fake.Options{SharedLog: true, Fault: fake.FailNext(fake.OpSettle, 1, fake.AfterMove(settle.ErrUnknownOutcome))}, amount: 100,
			wantClass: "unknown", recorded: "settled"},
		{name: "request lost", opts: fake.Options{SharedLog: true, UnknownOutcomeRate: 1, UnknownOutcomeMode: fake.UnknownBefore}, amount: 100,
			wantClass: "unknown", recorded: "unknownkey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st := &memstore.Store{} // retries spuriously: the step runs more than once
			o := tc.opts
			o.Store = st
			rail := newRail(t, "test-card", &o)
			req := payReq("int_1", tc.amount)
			caller := store.Store(st)
			if tc.otherStore {
				caller = &memstore.Store{}
			}
			step, got, err := rail.SettleInTxn(ctx, caller, req)
			if (step != nil) != tc.wantStep {
				t.Fatalf("step returned = %v, want %v", step != nil, tc.wantStep)
			}
			if step != nil {
				if got != (settle.Settlement{}) || err != nil {
					t.Fatalf("a step and an answer: %+v, %v", got, err)
				}
				got, err = runStep(t, st, step, tc.abort)
			}
			if c := class(err); c != tc.wantClass {
				t.Errorf("answer %+v, %v: class %s, want %s", got, err, c, tc.wantClass)
			}
			checkRecorded(t, rail, req.Key, tc.recorded)
			if tc.abort || step == nil {
				return
			}
			checkAsSettle(t, tc.opts, req, got, err)
		})
	}
}

// TestSettleInTxnReplay: a second call under the same key, by step or by
// Settle, answers the payment recorded by the first, and the ledger holds
// one payment.
func TestSettleInTxnReplay(t *testing.T) {
	ctx := t.Context()
	st := &memstore.Store{}
	rail := newRail(t, "test-card", &fake.Options{SharedLog: true, Store: st})
	req := payReq("int_1", 100)
	inTxn := func() settle.Settlement {
		t.Helper()
		step, _, err := rail.SettleInTxn(ctx, st, req)
		if step == nil || err != nil {
			t.Fatalf("no step: %v", err)
		}
		var got settle.Settlement
		if err := st.Update(ctx, func(tx store.Txn) error {
			got, err = step(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	first := inTxn()
	if again := inTxn(); again != first {
		t.Errorf("replay by step = %+v, want %+v", again, first)
	}
	if again, err := rail.Settle(ctx, req); err != nil || again != first {
		t.Errorf("replay by Settle = %+v, %v; want %+v", again, err, first)
	}
	if n := count(t, rail); n != 1 {
		t.Errorf("%d payments in the ledger, want 1", n)
	}
	mustCheck(t, rail)
}

// TestSettleInTxnLatency: the call's latency is spent before the step is
// returned, in Settle's two halves, and a wait cut short leaves nothing recorded and the
// outcome unknown, as a request lost on the wire.
func TestSettleInTxnLatency(t *testing.T) {
	for _, cut := range []bool{false, true} {
		var slept []time.Duration
		st := &memstore.Store{}
		rail := newRail(t, "test-card", &fake.Options{Store: st, SharedLog: true, MinLatency: 40 * time.Millisecond,
			Sleep: func(ctx context.Context, d time.Duration) error {
				slept = append(slept, d)
				if cut {
					return context.DeadlineExceeded
				}
				return nil
			}})
		step, _, err := rail.SettleInTxn(t.Context(), st, payReq("int_1", 100))
		want := []time.Duration{20 * time.Millisecond, 20 * time.Millisecond} // as Settle's two halves
		if cut {
			want = want[:1]
		}
		if !slices.Equal(slept, want) {
			t.Errorf("cut %v: slept %v, want %v", cut, slept, want)
		}
		if cut {
			if step != nil || class(err) != "unknown" {
				t.Errorf("cut: step %v, %v; want none, an unknown outcome", step != nil, err)
			}
			if n := count(t, rail); n != 0 {
				t.Errorf("cut: %d payments recorded, want none", n)
			}
			continue
		}
		if step == nil || err != nil {
			t.Errorf("step %v, %v; want a step", step != nil, err)
		}
	}
}

// settleInCallerTxn settles req with SettleInTxn's step in a transaction
// of st that fails once after the step, then in one that commits (which
// the store may run more than once), and returns the committed answer.
func settleInCallerTxn(t *testing.T, st store.Store, r *fake.Rail, req settle.SettleRequest) (settle.Settlement, error) {
	t.Helper()
	step, s, err := r.SettleInTxn(t.Context(), st, req)
	if step == nil {
		t.Fatalf("no step: %v", err)
	}
	abort := errors.New("the caller's transaction fails")
	if err := st.Update(t.Context(), func(tx store.Txn) error {
		if _, err := step(tx); err != nil {
			return err
		}
		return abort
	}); !errors.Is(err, abort) && err != nil {
		return settle.Settlement{}, err
	}
	var answer error
	if err := st.Update(t.Context(), func(tx store.Txn) error {
		s, answer = step(tx)
		return nil // the rail's answer is the caller's to record
	}); err != nil {
		t.Fatal(err)
	}
	return s, answer
}

// TestPrepareInTxn checks PrepareInTxn: on a rail that answers at once it
// returns a step that records and answers what Settle would, and records
// nothing unless the caller's transaction commits; preparing alone draws
// no fault, waits for nothing and records nothing; a rail with latency or
// chance, or not in the caller's store, prepares nothing.
func TestPrepareInTxn(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       fake.Options
		amount     int64
		run        bool // the step runs in the caller's transaction
		abort      bool // which then fails
		otherStore bool
		wantStep   bool
		wantClass  string
		recorded   string // what Lookup finds afterwards
	}{
		{name: "settled", opts: fake.Options{SharedLog: true}, amount: 100, run: true,
			wantStep: true, wantClass: "ok", recorded: "settled"},
		{name: "pending on a deferred rail", opts: fake.Options{SharedLog: true, Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}},
			amount: 100, run: true, wantStep: true, wantClass: "ok", recorded: "pending"},
		{name: "declined above its limit", opts: fake.Options{SharedLog: true, DeclineAbove: 50}, amount: 100, run: true,
			wantStep: true, wantClass: "declined", recorded: "declined"},
		{name: "declined payee", opts: fake.Options{SharedLog: true, DeclinePayees: []string{"acct:seller.example"}}, amount: 100, run: true,
			wantStep: true, wantClass: "declined", recorded: "declined"},
		{name: "prepared, never sent", opts: fake.Options{SharedLog: true}, amount: 100,
			wantStep: true, recorded: "unknownkey"},
		{name: "caller's transaction fails", opts: fake.Options{SharedLog: true}, amount: 100, run: true, abort: true,
			wantStep: true, wantClass: "ok", recorded: "unknownkey"},
		{name: "latency", opts: fake.Options{SharedLog: true, MinLatency: time.Millisecond}, amount: 100, recorded: "unknownkey"},
		{name: "scripted faults", opts: fake.Options{SharedLog: true, Fault: func(fake.Op, any) error { return nil }}, amount: 100, recorded: "unknownkey"},
		{name: "random declines", opts: fake.Options{SharedLog: true, DeclineRate: 0.5}, amount: 100, recorded: "unknownkey"},
		{name: "random returns", opts: fake.Options{SharedLog: true, PendingDeclineRate: 0.5, Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}},
			amount: 100, recorded: "unknownkey"},
		{name: "random unavailability", opts: fake.Options{SharedLog: true, UnavailableRate: 0.5}, amount: 100, recorded: "unknownkey"},
		{name: "random unknown outcomes", opts: fake.Options{SharedLog: true, UnknownOutcomeRate: 0.5}, amount: 100, recorded: "unknownkey"},
		{name: "own log", opts: fake.Options{}, amount: 100, recorded: "unknownkey"},
		{name: "the caller's store is another", opts: fake.Options{SharedLog: true}, amount: 100, otherStore: true, recorded: "unknownkey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st := &memstore.Store{} // retries spuriously: the step runs more than once
			o := tc.opts
			o.Store = st
			draws, sleeps := 0, 0
			o.Rand = func() float64 { draws++; return 0.99 }
			o.Sleep = func(context.Context, time.Duration) error { sleeps++; return nil }
			rail := newRail(t, "test-card", &o)
			req := payReq("int_1", tc.amount)
			caller := store.Store(st)
			if tc.otherStore {
				caller = &memstore.Store{}
			}
			step := rail.PrepareInTxn(ctx, caller, req)
			if (step != nil) != tc.wantStep {
				t.Fatalf("step returned = %v, want %v", step != nil, tc.wantStep)
			}
			if draws != 0 || sleeps != 0 {
				t.Errorf("preparing drew %d numbers and slept %d times, want none", draws, sleeps)
			}
			var got settle.Settlement
			var err error
			if tc.run {
				got, err = runStep(t, st, step, tc.abort)
				if c := class(err); c != tc.wantClass {
					t.Errorf("answer %+v, %v: class %s, want %s", got, err, c, tc.wantClass)
				}
			}
			checkRecorded(t, rail, req.Key, tc.recorded)
			if !tc.run || tc.abort {
				return
			}
			checkAsSettle(t, tc.opts, req, got, err)
		})
	}
}

// checkRecorded checks what the rail's ledger holds under key (a status,
// or unknownkey) and that the ledger is consistent.
func checkRecorded(t *testing.T, rail *fake.Rail, key, want string) {
	t.Helper()
	l, err := rail.Lookup(t.Context(), key)
	recorded := string(l.Status)
	if errors.Is(err, settle.ErrUnknownKey) {
		recorded = "unknownkey"
	}
	if recorded != want {
		t.Errorf("recorded %q (%v), want %q", recorded, err, want)
	}
	mustCheck(t, rail)
}

// checkAsSettle checks that a step answered what Settle answers on a rail
// of the same name and options that never saw the key: the same
// settlement, reference and all.
func checkAsSettle(t *testing.T, opts fake.Options, req settle.SettleRequest, got settle.Settlement, err error) {
	t.Helper()
	opts.Store = &memstore.Store{}
	want, werr := newRail(t, "test-card", &opts).Settle(t.Context(), req)
	if diff := cmp.Diff(want, got); diff != "" || class(werr) != class(err) {
		t.Errorf("step answered %v (%v), Settle %v (-Settle +step):\n%s", got, err, werr, diff)
	}
}

// runStep runs step in a transaction of st that writes an outcome of the
// caller's own and commits, or fails after the step when abort is set,
// and returns the step's answer.
func runStep(t *testing.T, st store.Store, step func(store.Txn) (settle.Settlement, error), abort bool) (got settle.Settlement, err error) {
	t.Helper()
	failure := errors.New("the caller's own failure")
	uerr := st.Update(t.Context(), func(tx store.Txn) error {
		got, err = step(tx)
		if err := tx.Set([]byte("caller/outcome"), []byte("x")); err != nil {
			return err
		}
		if abort {
			return failure
		}
		return nil
	})
	if abort != (uerr != nil) {
		t.Fatalf("Update = %v", uerr)
	}
	return got, err
}

// TestSandboxInstant: the sandbox's rails, sharing the caller's store,
// answer at once only with their latency off, and decline the sandbox's
// decline payee in the step as Settle does.
func TestSandboxInstant(t *testing.T) {
	for _, noLatency := range []bool{false, true} {
		st := &memstore.Store{}
		rails, err := fake.NewSandbox(&fake.SandboxOptions{Store: st, SharedLog: true, NoLatency: noLatency})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rails {
			req := payReq("int_1", 100)
			req.Payee = fake.SandboxDeclinePayee
			step := r.PrepareInTxn(t.Context(), st, req)
			if (step != nil) != noLatency {
				t.Fatalf("%s, latency off %v: step %v", r.Name(), noLatency, step != nil)
			}
			if step == nil {
				continue
			}
			_, err := runStep(t, st, step, false)
			var de *settle.DeclineError
			want := r.Name() + " declines every payment to " + fake.SandboxDeclinePayee
			if !errors.As(err, &de) || de.Code != fake.CodeDoNotHonor || de.Message != want {
				t.Errorf("%s: step answered %v, want %s %q", r.Name(), err, fake.CodeDoNotHonor, want)
			}
			checkRecorded(t, r, req.Key, "declined")
		}
	}
}
