package protocol

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// clrState is an obligation's clearing state in one line, as
// clearing.status shows it.
func clrState(t *testing.T, h *harness, id string) string {
	t.Helper()
	c, err := h.svc.ClearingStatus(t.Context(), h.call(), &ObligationRef{ObligationID: id})
	if err != nil {
		return "status: " + code(err)
	}
	return clrLine((*Clearing)(c))
}

func clrLine(c *Clearing) string {
	s := fmt.Sprintf("%s admissible=%v achieved=%v", c.Status, c.Admissible, c.Achieved)
	if c.Problem != nil {
		s += fmt.Sprintf(" problem=%s awaited=%s achieved=%v", c.Problem.Code, c.Problem.Awaited, c.Problem.Achieved)
	}
	if c.Receipt != nil {
		s += fmt.Sprintf(" receipt=%d", c.Receipt.Amount.Minor)
	}
	return s
}

// clrKill engages or releases the kill switch.
func clrKill(t *testing.T, h *harness, engaged bool) {
	t.Helper()
	if _, err := h.pay.SetKillSwitch(t.Context(), engaged, pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "the test freezes settlement"}); err != nil {
		t.Fatal(err)
	}
}

// clrPaidOnce checks that an obligation's money moved exactly once: one
// payment.settled entry, one capture (card) or payment (wire) at the rail.
func clrPaidOnce(t *testing.T, h *harness, rail, intentID string, minor int64) {
	t.Helper()
	if n := oblCount(t, h, "payment.settled", intentID); n != 1 {
		t.Errorf("%d payment.settled entries, want 1", n)
	}
	n, sum := oblRailEntries(t, h, rail, oblMoneyKind(rail), intentID)
	if n != 1 || sum != minor {
		t.Errorf("the rail moved %d in %d entries, want %d in 1", sum, n, minor)
	}
	if err := oblRail(h, rail).CheckLedger(t.Context()); err != nil {
		t.Error(err)
	}
}

// TestClearingStatus walks an obligation with floor att through evidence
// of every class below it (pending, the achieved classes maximal) to the
// att evidence that clears it, reading clearing.status (always 200) and
// attempting clearing (202 while pending) along the way; a cleared
// obligation answers cleared again without a second settlement.
func TestClearingStatus(t *testing.T) {
	if _, ok := any(&ClearingState{}).(Acceptor); ok {
		t.Error("ClearingState implements Acceptor: clearing.status would answer 202")
	}
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			req := oblRequest(h, rail, 2_500, ClassAtt, time.Hour, nil)
			req.Counterparty = h.ev.cp
			o, err := h.svc.ObligationCreate(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			id := o.ObligationID
			var attID string
			var receipt *pay.Receipt
			status := func(t *testing.T) (string, error) {
				c, err := h.svc.ClearingStatus(ctx, h.call(), &ObligationRef{ObligationID: id})
				if err != nil {
					return "", err
				}
				if c.ObligationID != id || c.EvidenceFloor != ClassAtt || !c.Deadline.Equal(req.Deadline) {
					t.Errorf("clearing.status %+v", c)
				}
				if c.Problem != nil && (c.Problem.Status != 202 || c.Problem.Type != "https://cs.test/problems/clearing.pending" || c.Problem.Detail == "") {
					t.Errorf("problem %+v", c.Problem)
				}
				return clrLine((*Clearing)(c)), nil
			}
			attempt := func(wantAccepted bool) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					c, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: id})
					if err != nil {
						return "", err
					}
					if c.IsAccepted() != wantAccepted {
						t.Errorf("IsAccepted %v, want %v", c.IsAccepted(), wantAccepted)
					}
					if receipt != nil && !cmp.Equal(c.Receipt, receipt) {
						t.Errorf("receipt %+v, want the first %+v", c.Receipt, receipt)
					}
					if attID != "" && c.EvidenceID != attID {
						t.Errorf("cleared on %q, want %q", c.EvidenceID, attID)
					}
					return clrLine(c), nil
				}
			}
			submit := func(class EvidenceClass, wantAccepted bool) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					sub, err := oblSubmit(t, h, id, class, "step "+string(class))
					if err != nil {
						return "", err
					}
					if sub.IsAccepted() != wantAccepted || sub.Clearing == nil {
						t.Errorf("IsAccepted %v, want %v (%+v)", sub.IsAccepted(), wantAccepted, sub.Clearing)
					}
					if class == ClassAtt {
						attID, receipt = sub.Evidence.ID, sub.Clearing.Receipt
						if sub.Clearing.EvidenceID != attID {
							t.Errorf("cleared on %q, want the att evidence %q", sub.Clearing.EvidenceID, attID)
						}
					}
					return clrLine(sub.Clearing), nil
				}
			}
			pending := func(achieved string) string {
				return fmt.Sprintf("pending admissible=false achieved=%s problem=clearing.pending awaited=att achieved=%s", achieved, achieved)
			}
			cleared := "cleared admissible=true achieved=[att] receipt=2500"
			evidence := []string{"protocol.evidence.submit"}
			trnRun(t, h, []trnStep{
				{name: "status before any evidence", do: status, state: pending("[]"), same: true},
				{name: "attempt before any evidence", do: attempt(true), state: pending("[]"), same: true},
				{name: "self", do: submit(ClassSelf, true), state: pending("[self]"), types: evidence},
				{name: "sign", do: submit(ClassSign, true), state: pending("[sign]"), types: evidence},
				{name: "wit", do: submit(ClassWit, true), state: pending("[wit]"), types: evidence},
				{name: "rec", do: submit(ClassRec, true), state: pending("[wit rec]"), types: evidence},
				{name: "status below the floor", do: status, state: pending("[wit rec]"), same: true},
				{name: "attempt below the floor", do: attempt(true), state: pending("[wit rec]"), same: true},
				{name: "att clears", do: submit(ClassAtt, false), state: cleared, types: append(evidence, oblClearTypes...)},
				{name: "status once cleared", do: status, state: cleared, same: true},
				{name: "attempt once cleared", do: attempt(false), state: cleared, same: true},
				{name: "proof once cleared", do: submit(ClassProof, false), state: "cleared admissible=true achieved=[proof] receipt=2500", types: evidence},
				{name: "attempt after more evidence", do: attempt(false), state: "cleared admissible=true achieved=[proof] receipt=2500", same: true},
			}, nil)
			clrPaidOnce(t, h, rail, o.IntentID, 2_500)
			if got := oblState(t, h, id); got != "settled reserved=0 settled=2500" {
				t.Errorf("state %s", got)
			}
		})
	}
}

// TestClearingFloors: evidence clears an obligation exactly when its class
// satisfies the floor (wit and rec never satisfy each other).
func TestClearingFloors(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	for _, tc := range []struct {
		floor, class EvidenceClass
		clears       bool
	}{
		{ClassSelf, ClassSelf, true},
		{ClassSign, ClassSelf, false},
		{ClassSign, ClassSign, true},
		{ClassSign, ClassWit, true},
		{ClassWit, ClassRec, false},
		{ClassRec, ClassWit, false},
		{ClassRec, ClassRec, true},
		{ClassWit, ClassAtt, true},
		{ClassRec, ClassAtt, true},
		{ClassAtt, ClassWit, false},
		{ClassAtt, ClassProof, true},
		{ClassProof, ClassAtt, false},
		{ClassPote, ClassProof, false},
		{ClassPote, ClassPote, true},
		{ClassProof, ClassPote, true},
	} {
		t.Run(fmt.Sprintf("floor %s, %s evidence", tc.floor, tc.class), func(t *testing.T) {
			req := oblRequest(h, railWire, 1_000, tc.floor, time.Hour, nil)
			req.Counterparty = h.ev.cp
			o, err := h.svc.ObligationCreate(t.Context(), h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			sub := oblMustSubmit(t, h, o.ObligationID, tc.class, "done")
			if got := sub.Clearing.Status == ClearingCleared; got != tc.clears {
				t.Errorf("cleared %v, want %v (%s)", got, tc.clears, clrLine(sub.Clearing))
			}
			if !tc.clears && (sub.Clearing.Problem == nil || sub.Clearing.Problem.Awaited != tc.floor || !sub.IsAccepted()) {
				t.Errorf("pending clearing %s", clrLine(sub.Clearing))
			}
		})
	}
}

// TestClearingNotFound: clearing reads and attempts only the caller's
// obligations.
func TestClearingNotFound(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := oblCreate(t, h, railWire, 1_000, ClassSelf)
	paid := dspPaid(h, railWire, 1_000)
	for _, tc := range []struct {
		name string
		call Call
		id   string
	}{
		{"another agent key's", trnOtherKey(h), o.ObligationID},
		{"unknown", h.call(), "obl_01JZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"a payment, not an obligation", h.call(), "obl_" + strings.TrimPrefix(paid, "int_")},
		{"an intent id", h.call(), o.IntentID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := &ObligationRef{ObligationID: tc.id}
			refusedUnchanged(t, h, CodeObligationNotFound, func() error { _, err := h.svc.ClearingStatus(ctx, tc.call, ref); return err })
			refusedUnchanged(t, h, CodeObligationNotFound, func() error { _, err := h.svc.ClearingAttempt(ctx, tc.call, ref); return err })
		})
	}
}

// TestClearingDeadline: at its deadline an obligation can no longer
// clear — clearing.attempt answers obligation.deadline_passed even before
// the scheduler has run, whatever evidence there is, and moves no money;
// the sweep then expires it (protocol.obligation.expire) and releases
// its reservation and the rail's authorization, across a restart too.
func TestClearingDeadline(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				// before runs at creation, after at the deadline, before the sweep.
				before, after func(t *testing.T, h *harness, id string)
				restart       bool
			}{
				{name: "no evidence"},
				{name: "evidence below the floor", before: func(t *testing.T, h *harness, id string) {
					oblMustSubmit(t, h, id, ClassSelf, "started")
				}},
				{name: "admissible evidence at the deadline", after: func(t *testing.T, h *harness, id string) {
					// Evidence for an obligation that can never clear is refused.
					refusedUnchanged(t, h, CodeDeadlinePassed, func() error {
						_, err := oblSubmit(t, h, id, ClassSign, "too late")
						return err
					})
				}},
				{name: "admissible evidence frozen until past the deadline", before: func(t *testing.T, h *harness, id string) {
					clrKill(t, h, true)
					if sub := oblMustSubmit(t, h, id, ClassSign, "done"); sub.Clearing.Status != ClearingPending {
						t.Fatalf("clearing %s", clrLine(sub.Clearing))
					}
				}, after: func(t *testing.T, h *harness, id string) { clrKill(t, h, false) }},
				{name: "restarted before the sweep", restart: true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h := newHarness(t, harnessConfig{})
					ctx := t.Context()
					o := oblCreate(t, h, rail, 2_000, ClassSign)
					if tc.before != nil {
						tc.before(t, h, o.ObligationID)
					}
					if tc.restart {
						h.restart()
					}
					attempt := func() error {
						_, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
						return err
					}
					h.clock.Add(time.Hour - time.Microsecond)
					before := h.dump()
					if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
						t.Errorf("sweep a moment before the deadline = %+v, %v", rep, err)
					}
					if diff := cmp.Diff(before, h.dump()); diff != "" {
						t.Errorf("a sweep with nothing due changed the store:\n%s", diff)
					}
					h.clock.Add(time.Microsecond)
					if tc.after != nil {
						tc.after(t, h, o.ObligationID)
					}
					t.Run("attempt at the deadline, before the sweep", func(t *testing.T) {
						refusedUnchanged(t, h, CodeDeadlinePassed, attempt)
					})
					if tc.restart {
						h.restart()
					}
					n := h.size()
					if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{HoldsExpired: 1}) {
						t.Fatalf("sweep at the deadline = %+v, %v", rep, err)
					}
					if diff := cmp.Diff([]string{"payment.hold_expired", "protocol.obligation.expire"}, h.typesSince(n)); diff != "" {
						t.Errorf("entries of the expiry (-want +got):\n%s", diff)
					}
					if got := oblState(t, h, o.ObligationID); got != "expired reserved=0 settled=0" {
						t.Errorf("state %s", got)
					}
					if got, want := oblRailAuth(t, h, rail, o.IntentID), map[string]string{railCard: string(settle.AuthVoided), railWire: "none"}[rail]; got != want {
						t.Errorf("rail authorization %s, want %s", got, want)
					}
					if n, _ := oblRailEntries(t, h, rail, oblMoneyKind(rail), o.IntentID); n != 0 || oblCount(t, h, "payment.settled", o.IntentID) != 0 {
						t.Errorf("an expired obligation moved money")
					}
					if st := clrState(t, h, o.ObligationID); !strings.HasPrefix(st, string(ClearingExpired)+" ") {
						t.Errorf("clearing.status %s, want expired", st)
					}
					t.Run("attempt once expired", func(t *testing.T) { refusedUnchanged(t, h, CodeDeadlinePassed, attempt) })
					t.Run("cancel once expired", func(t *testing.T) {
						refusedUnchanged(t, h, CodeDeadlinePassed, func() error {
							_, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
							return err
						})
					})
					t.Run("sweep again", func(t *testing.T) {
						before := h.dump()
						if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
							t.Errorf("second sweep = %+v, %v", rep, err)
						}
						if diff := cmp.Diff(before, h.dump()); diff != "" {
							t.Errorf("a second sweep changed the store:\n%s", diff)
						}
					})
					cusBooks(t, h)
				})
			}
		})
	}
}

// TestClearingKillSwitch: admissible evidence that arrives while the kill
// switch is engaged is stored, and the clearing it triggers stays pending
// with the problem settlement.frozen; an explicit attempt is refused
// frozen with nothing changed; once released, one attempt clears it, and
// the money moves exactly once.
func TestClearingKillSwitch(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			o := oblCreate(t, h, rail, 3_000, ClassSelf)
			attempt := func(t *testing.T) (string, error) {
				c, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
				if err != nil {
					return clrState(t, h, o.ObligationID), err
				}
				return clrLine(c), nil
			}
			trnRun(t, h, []trnStep{
				{name: "engage", do: func(t *testing.T) (string, error) {
					clrKill(t, h, true)
					return clrState(t, h, o.ObligationID), nil
				}, state: "pending admissible=false achieved=[] problem=clearing.pending awaited=self achieved=[]", types: []string{"operator.kill_switch"}},
				{name: "admissible evidence while frozen", do: func(t *testing.T) (string, error) {
					sub, err := oblSubmit(t, h, o.ObligationID, ClassSelf, "done")
					if err != nil {
						return "", err
					}
					if !sub.IsAccepted() || sub.Clearing.Problem.Status != 202 || sub.Clearing.Problem.Type != "https://cs.test/problems/"+pay.CodeFrozen {
						t.Errorf("clearing %+v, problem %+v", sub.Clearing, sub.Clearing.Problem)
					}
					return clrLine(sub.Clearing), nil
				}, state: "pending admissible=true achieved=[self] problem=settlement.frozen awaited=self achieved=[self]", types: []string{"protocol.evidence.submit"}},
				{name: "status while frozen", do: func(t *testing.T) (string, error) { return clrState(t, h, o.ObligationID), nil },
					state: "awaiting_evidence admissible=true achieved=[self]", same: true},
				{name: "attempt while frozen", do: attempt, code: pay.CodeFrozen, state: "awaiting_evidence admissible=true achieved=[self]"},
				{name: "release", do: func(t *testing.T) (string, error) {
					clrKill(t, h, false)
					return clrState(t, h, o.ObligationID), nil
				}, state: "awaiting_evidence admissible=true achieved=[self]", types: []string{"operator.kill_switch"}},
				{name: "attempt", do: attempt, state: "cleared admissible=true achieved=[self] receipt=3000", types: oblClearTypes},
				{name: "attempt again", do: attempt, state: "cleared admissible=true achieved=[self] receipt=3000", same: true},
			}, nil)
			clrPaidOnce(t, h, rail, o.IntentID, 3_000)
		})
	}
}

// TestClearingUnknownOutcome loses the card rail's answer to the capture
// after it captured: the obligation stays clearing (never failed, never
// cancellable), and a retried clearing.attempt — or the reconciler after a
// restart — finishes it; the rail captured exactly once.
func TestClearingUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name string
		// lose runs the clearing whose capture answer is lost.
		lose func(t *testing.T, h *harness, id string)
		// finish runs what finishes it.
		finish func(t *testing.T, h *harness, id string)
	}{
		{"triggered by evidence, finished by an attempt", func(t *testing.T, h *harness, id string) {
			sub := oblMustSubmit(t, h, id, ClassSelf, "done")
			if sub.Clearing.Status == ClearingCleared || sub.Clearing.Problem == nil || sub.Clearing.Problem.Code != pay.CodeRailUnavailable {
				t.Errorf("clearing with a lost answer: %s", clrLine(sub.Clearing))
			}
		}, nil},
		{"an attempt, finished by another", func(t *testing.T, h *harness, id string) {
			clrKill(t, h, true)
			oblMustSubmit(t, h, id, ClassSelf, "done")
			clrKill(t, h, false)
			_, err := h.svc.ClearingAttempt(t.Context(), h.call(), &ObligationRef{ObligationID: id})
			if code(err) != pay.CodeRailUnavailable {
				t.Errorf("attempt with a lost answer: %v, want %s", err, pay.CodeRailUnavailable)
			}
		}, nil},
		{"triggered by evidence, finished by the reconciler", func(t *testing.T, h *harness, id string) {
			oblMustSubmit(t, h, id, ClassSelf, "done")
		}, func(t *testing.T, h *harness, id string) {
			h.restart()
			if got := oblState(t, h, id); got != "settled reserved=0 settled=2000" {
				t.Errorf("after the reconciler: %s", got)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fault func(fake.Op, any) error
			var mu sync.Mutex
			h := newHarness(t, harnessConfig{card: func(o *fake.Options) {
				o.Fault = func(op fake.Op, req any) error {
					mu.Lock()
					f := fault
					mu.Unlock()
					if f == nil {
						return nil
					}
					return f(op, req)
				}
			}})
			ctx := t.Context()
			o := oblCreate(t, h, railCard, 2_000, ClassSelf)
			mu.Lock()
			fault = fake.FailNext(fake.OpCapture, 1, fake.AfterMove(nil))
			mu.Unlock()
			tc.lose(t, h, o.ObligationID)
			if got := oblState(t, h, o.ObligationID); got != "clearing reserved=2000 settled=0" {
				t.Errorf("after the lost answer: %s", got)
			}
			if st := clrState(t, h, o.ObligationID); st != "clearing admissible=true achieved=[self]" {
				t.Errorf("clearing.status after the lost answer: %s", st)
			}
			refusedUnchanged(t, h, CodeObligationCleared, func() error {
				_, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
				return err
			})
			if tc.finish != nil {
				tc.finish(t, h, o.ObligationID)
			}
			h.clock.Add(2 * time.Hour) // past the deadline: a capture under way still finishes
			c, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
			if err != nil || c.Status != ClearingCleared || c.Receipt == nil || c.Receipt.Amount.Minor != 2_000 {
				t.Fatalf("retried attempt: %+v, %v", c, err)
			}
			if got := oblState(t, h, o.ObligationID); got != "settled reserved=0 settled=2000" {
				t.Errorf("after the retry: %s", got)
			}
			clrPaidOnce(t, h, railCard, o.IntentID, 2_000)
		})
	}
}

// TestClearingConcurrentAttempts: many attempts racing on one admissible
// obligation capture it once; each answers cleared or in flight.
func TestClearingConcurrentAttempts(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			o := oblCreate(t, h, rail, 2_000, ClassSelf)
			clrKill(t, h, true)
			oblMustSubmit(t, h, o.ObligationID, ClassSelf, "done")
			clrKill(t, h, false)
			errs := make([]error, 8)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() {
					c, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
					if err == nil && c.Status != ClearingCleared {
						err = fmt.Errorf("status %s", c.Status)
					}
					errs[i] = err
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil && code(err) != pay.CodeInFlight {
					t.Errorf("attempt: %v", err)
				}
			}
			if st := clrState(t, h, o.ObligationID); st != "cleared admissible=true achieved=[self] receipt=2000" {
				t.Errorf("state %s", st)
			}
			clrPaidOnce(t, h, rail, o.IntentID, 2_000)
		})
	}
}

// TestClearingReadyAfterApproval is the scheduler's part of clearing: evidence
// that arrives while an obligation waits for approval is stored (pending,
// not ready), and once the approval has reserved it, the next sweep
// clears it, once, across a restart too. A sweep that cannot clear it —
// the kill switch engaged, the deadline passed — neither counts it nor
// forgets it.
func TestClearingReadyAfterApproval(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				// between runs after the approval, before the first sweep,
				// which must report first.
				between func(t *testing.T, h *harness)
				first   SweepReport
				// then runs after the first sweep, before the second, which
				// must report second; the obligation ends as final.
				then   func(t *testing.T, h *harness)
				second SweepReport
				final  string
			}{
				{name: "swept", first: SweepReport{ObligationsCleared: 1}, final: "settled reserved=0 settled=20000"},
				{name: "restarted before the sweep", between: func(t *testing.T, h *harness) { h.restart() },
					first: SweepReport{ObligationsCleared: 1}, final: "settled reserved=0 settled=20000"},
				{name: "frozen at the first sweep", between: func(t *testing.T, h *harness) { clrKill(t, h, true) },
					then: func(t *testing.T, h *harness) { clrKill(t, h, false) }, second: SweepReport{ObligationsCleared: 1},
					final: "settled reserved=0 settled=20000"},
				{name: "past the deadline at the first sweep", between: func(t *testing.T, h *harness) { h.clock.Add(time.Hour) },
					first: SweepReport{HoldsExpired: 1}, final: "expired reserved=0 settled=0"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h := newHarness(t, harnessConfig{})
					ctx := t.Context()
					o := oblCreate(t, h, rail, 20_000, ClassSelf)
					sub := oblMustSubmit(t, h, o.ObligationID, ClassSelf, "done early")
					if sub.Clearing.Status != ClearingPendingApproval || sub.IsAccepted() {
						t.Errorf("clearing before approval: %s", clrLine(sub.Clearing))
					}
					if _, err := trnApprove(t, h, o.IntentID, o.Approval); err != nil {
						t.Fatal(err)
					}
					if got := oblState(t, h, o.ObligationID); got != "awaiting_evidence reserved=20000 settled=0" {
						t.Errorf("after approval: %s", got)
					}
					if tc.between != nil {
						tc.between(t, h)
					}
					n := h.size()
					if rep, err := h.svc.Sweep(ctx); err != nil || rep != tc.first {
						t.Errorf("first sweep %+v, %v; want %+v", rep, err, tc.first)
					}
					if tc.first.ObligationsCleared == 1 {
						if diff := cmp.Diff(oblClearTypes, h.typesSince(n)); diff != "" {
							t.Errorf("entries of the sweep (-want +got):\n%s", diff)
						}
					}
					if tc.then != nil {
						tc.then(t, h)
					}
					if rep, err := h.svc.Sweep(ctx); err != nil || rep != tc.second {
						t.Errorf("second sweep %+v, %v; want %+v", rep, err, tc.second)
					}
					if got := oblState(t, h, o.ObligationID); got != tc.final {
						t.Errorf("state %s, want %s", got, tc.final)
					}
					before := h.dump()
					if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
						t.Errorf("last sweep %+v, %v", rep, err)
					}
					if diff := cmp.Diff(before, h.dump()); diff != "" {
						t.Errorf("a sweep with nothing due changed the store:\n%s", diff)
					}
					if strings.HasPrefix(tc.final, string(ObligationSettled)) {
						clrPaidOnce(t, h, rail, o.IntentID, 20_000)
					}
				})
			}
		})
	}
}
