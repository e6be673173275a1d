package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// The helpers prefixed trn (transition) are shared by the state-machine
// tests of session, meter, custody, stake and the scheduler.

// trnStep is one transition of a namespace's state machine. The steps of
// a table run in order over one harness, each as a named subtest.
type trnStep struct {
	name string
	// do makes the transition and returns the object's state after it,
	// read back through the surface (also after a refusal).
	do func(t *testing.T) (string, error)
	// code is the problem code the transition is refused with; "" when
	// it is allowed.
	code string
	// reason, when set, is the gate reason of a denial: do's error is a
	// *Refused whose denial lists it.
	reason string
	// state is the state after the transition; "" skips the check.
	state string
	// types are the record entry types the transition appends, in order.
	types []string
	// same: the transition changes nothing in the store (a replay). A
	// refusal with a problem code always must, except a gate denial or a
	// rail decline, which are recorded.
	same bool
}

// trnRun runs steps in order, then after (an invariant) after each one.
// It stops at the first step that fails, since the later ones build on it.
func trnRun(t *testing.T, h *harness, steps []trnStep, after func(t *testing.T)) {
	t.Helper()
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			before, n := h.dump(), h.size()
			state, err := s.do(t)
			if got := code(err); got != s.code {
				t.Fatalf("code %q, want %q", got, s.code)
			}
			if s.reason != "" {
				trnWantDenied(t, err, s.reason)
			}
			if s.state != "" && state != s.state {
				t.Errorf("state %q, want %q", state, s.state)
			}
			if diff := cmp.Diff(s.types, h.typesSince(n), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("record entries (-want +got):\n%s", diff)
			}
			if s.same || (s.code != "" && s.reason == "" && s.code != pay.CodeDenied && s.code != pay.CodeDeclined) {
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("the store changed (-before +after):\n%s", diff)
				}
			}
			if after != nil {
				after(t)
			}
		})
		if !ok {
			break
		}
	}
}

// trnWantDenied checks that err is the gate's denial, for reason among
// others.
func trnWantDenied(t *testing.T, err error, reason string) {
	t.Helper()
	var r *Refused
	if !errors.As(err, &r) || r.Result.Denial == nil {
		t.Fatalf("err = %v, want a *Refused denial", err)
	}
	if !slices.ContainsFunc(r.Result.Denial.Reasons, func(g gate.Reason) bool { return g.Code == reason }) {
		t.Errorf("denial reasons %+v, want %s among them", r.Result.Denial.Reasons, reason)
	}
}

// trnReplay checks that again is a replay of first: marked, and the same
// bytes.
func trnReplay(t *testing.T, first, again Replayer) {
	t.Helper()
	if first.WasReplayed() || !again.WasReplayed() {
		t.Errorf("replayed: first %v, again %v; want false, true", first.WasReplayed(), again.WasReplayed())
	}
	a, err := json.Marshal(first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(again)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("a replay answers other bytes:\nfirst %s\nagain %s", a, b)
	}
}

// trnApprove approves a held intent as the harness's operator.
func trnApprove(t *testing.T, h *harness, intentID string, held *pay.Held) (*pay.Result, error) {
	t.Helper()
	if held == nil {
		t.Fatalf("intent %s was not held for approval", intentID)
	}
	return h.pay.Approve(t.Context(), pay.ApproveRequest{IntentID: intentID, Challenge: held.Challenge,
		MandateID: held.MandateID, Rationale: "approved by the test", Acknowledged: true},
		pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "approved by the test"})
}

// trnPeriod returns the mandate's current period as mandate.get shows it.
func trnPeriod(t *testing.T, h *harness) string {
	t.Helper()
	v, err := h.svc.MandateGet(t.Context(), h.call(), &MandateRef{MandateID: h.claims.ID})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("reserved=%d settled=%d", v.Period.ReservedMinor, v.Period.SettledMinor)
}

// trnOtherKey is a caller with another agent key for the same agent.
func trnOtherKey(h *harness) Call {
	c := h.caller
	c.KeyID = "ak_01JZZZZZZZZZZZZZZZZZZZZZZZ"
	return AgentCall(c, "req_other")
}

// sesState is a session's state as session.get shows it.
func sesState(t *testing.T, h *harness, id string) string {
	t.Helper()
	ses, err := h.svc.SessionGet(t.Context(), h.call(), &SessionRef{SessionID: id})
	if err != nil {
		return "get: " + code(err)
	}
	return fmt.Sprintf("%s used=%d remaining=%d", ses.Status, ses.UsedMinor, ses.RemainingMinor)
}

// sesHold places a hold on the wire rail under a session.
func sesHold(t *testing.T, h *harness, sessionID string, minor int64) (*HoldPlaced, error) {
	t.Helper()
	return h.svc.HoldPlace(t.Context(), h.call(), &HoldPlaceRequest{TTLSeconds: 3600,
		Spend: h.spend("hold.place", railWire, minor, func(in *pay.Instruction) { in.SessionID = sessionID })})
}

// TestSessionTransitions walks a session through every transition an
// agent makes: open (and its refusals), spends counted against it, a
// denial past its budget, a released hold giving its amount back, close,
// and what is refused after.
func TestSessionTransitions(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	other := h.claims
	other.ID, other.Agent = "mdt-other", hex.EncodeToString(pub)
	otherMandate := h.signMandate(other)

	var sesID, holdID string
	open := func(mandate string, budget, ttl int64) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			ses, err := h.svc.SessionOpen(ctx, h.call(), &SessionOpenRequest{Mandate: mandate, BudgetMinor: budget, TTLSeconds: ttl, Purpose: "a task"})
			if err != nil {
				return "", err
			}
			if ses.BudgetMinor != budget || ses.Agent != h.agent || ses.MandateID != h.claims.ID || len(ses.Entries) != 1 ||
				!ses.ExpiresAt.Equal(h.clock.Now().Add(time.Duration(ttl)*time.Second)) {
				t.Errorf("opened %+v", ses)
			}
			sesID = ses.ID
			return sesState(t, h, sesID), nil
		}
	}
	hold := func(minor int64) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			p, err := sesHold(t, h, sesID, minor)
			if err == nil {
				holdID = p.HoldID
			}
			return sesState(t, h, sesID), err
		}
	}
	holdTypes := []string{"gate.decision", "payment.authorized", "protocol.hold.place"}
	deniedTypes := []string{"gate.decision", "protocol.hold.place"}
	trnRun(t, h, []trnStep{
		{name: "open above the period cap", do: open(h.mandate, h.claims.PerPeriodCapMinor+1, 3600), code: pay.CodeSessionInvalid},
		{name: "open under another agent's mandate", do: open(otherMandate, 10_000, 3600), code: pay.CodeUnauthorized},
		{name: "open for less than a minute", do: open(h.mandate, 10_000, 59), code: pay.CodeSessionInvalid},
		{name: "open longer than allowed", do: open(h.mandate, 10_000, int64(pay.MaxSessionTTL/time.Second)+1), code: pay.CodeSessionInvalid},
		{name: "open", do: open(h.mandate, 12_000, 3600), state: "open used=0 remaining=12000", types: []string{"protocol.session.open"}},
		{name: "get as another key", do: func(t *testing.T) (string, error) {
			_, err := h.svc.SessionGet(ctx, trnOtherKey(h), &SessionRef{SessionID: sesID})
			return "", err
		}, code: pay.CodeSessionNotFound},
		{name: "close as another key", do: func(t *testing.T) (string, error) {
			_, err := h.svc.SessionClose(ctx, trnOtherKey(h), &SessionRef{SessionID: sesID})
			return "", err
		}, code: pay.CodeSessionNotFound},
		{name: "hold under it", do: hold(5_000), state: "open used=5000 remaining=7000", types: holdTypes},
		{name: "deposit under it", do: func(t *testing.T) (string, error) {
			_, err := h.svc.CustodyDeposit(ctx, h.call(), &CustodySpendRequest{Spend: h.spend("custody.deposit", railWire, 5_000,
				func(in *pay.Instruction) { in.Payee, in.SessionID = DefaultCustodyPayee, sesID })})
			return sesState(t, h, sesID), err
		}, state: "open used=10000 remaining=2000",
			types: []string{"gate.decision", "protocol.custody.deposit", "payment.settled", "protocol.custody.deposit.settle"}},
		{name: "hold beyond what remains", do: hold(3_000), code: pay.CodeDenied, reason: gate.CodeSessionExhausted,
			state: "open used=10000 remaining=2000", types: deniedTypes},
		{name: "release the hold", do: func(t *testing.T) (string, error) {
			_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: holdID})
			return sesState(t, h, sesID), err
		}, state: "open used=5000 remaining=7000", types: []string{"payment.voided", "protocol.hold.release"}},
		{name: "hold within what was given back", do: hold(3_000), state: "open used=8000 remaining=4000", types: holdTypes},
		{name: "hold under an unknown session", do: func(t *testing.T) (string, error) {
			_, err := sesHold(t, h, "ses_unknown", 1_000)
			return "", err
		}, code: pay.CodeDenied, reason: gate.CodeSessionUnknown, types: deniedTypes},
		{name: "close", do: func(t *testing.T) (string, error) {
			ses, err := h.svc.SessionClose(ctx, h.call(), &SessionRef{SessionID: sesID})
			if err == nil && len(ses.Entries) != 2 {
				t.Errorf("closed session's entries %v, want 2", ses.Entries)
			}
			return sesState(t, h, sesID), err
		}, state: "closed used=8000 remaining=4000", types: []string{"protocol.session.close"}},
		{name: "hold after close", do: hold(1_000), code: pay.CodeDenied, reason: gate.CodeSessionExpired,
			state: "closed used=8000 remaining=4000", types: deniedTypes},
		{name: "close twice", do: func(t *testing.T) (string, error) {
			_, err := h.svc.SessionClose(ctx, h.call(), &SessionRef{SessionID: sesID})
			return sesState(t, h, sesID), err
		}, code: pay.CodeSessionClosed, state: "closed used=8000 remaining=4000"},
		{name: "close unknown", do: func(t *testing.T) (string, error) {
			_, err := h.svc.SessionClose(ctx, h.call(), &SessionRef{SessionID: "ses_unknown"})
			return "", err
		}, code: pay.CodeSessionNotFound},
		{name: "release the hold after close", do: func(t *testing.T) (string, error) {
			_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: holdID})
			return sesState(t, h, sesID), err
		}, state: "closed used=5000 remaining=7000", types: []string{"payment.voided", "protocol.hold.release"}},
		{name: "sweep after its end", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Hour)
			rep, err := h.svc.Sweep(ctx)
			if rep.SessionsExpired != 0 {
				t.Errorf("sweep %+v: a closed session does not expire", rep)
			}
			return sesState(t, h, sesID), err
		}, state: "closed used=5000 remaining=7000", same: true},
	}, nil)
}

// TestSessionExpiry: a session ends at its TTL; the sweep records its
// expiry, and from then on it is denied, and closing it is refused.
func TestSessionExpiry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	var sesID string
	sweep := func(want SweepReport) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			rep, err := h.svc.Sweep(ctx)
			if rep != want {
				t.Errorf("sweep %+v, want %+v", rep, want)
			}
			return sesState(t, h, sesID), err
		}
	}
	trnRun(t, h, []trnStep{
		{name: "open", do: func(t *testing.T) (string, error) {
			ses, err := h.svc.SessionOpen(ctx, h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: 9_000, TTLSeconds: 60})
			if err != nil {
				return "", err
			}
			sesID = ses.ID
			return sesState(t, h, sesID), nil
		}, state: "open used=0 remaining=9000", types: []string{"protocol.session.open"}},
		{name: "hold under it", do: func(t *testing.T) (string, error) {
			_, err := sesHold(t, h, sesID, 2_000)
			return sesState(t, h, sesID), err
		}, state: "open used=2000 remaining=7000", types: []string{"gate.decision", "payment.authorized", "protocol.hold.place"}},
		{name: "sweep before the end", do: func(t *testing.T) (string, error) {
			h.clock.Add(59 * time.Second)
			return sweep(SweepReport{})(t)
		}, state: "open used=2000 remaining=7000", same: true},
		{name: "sweep at the end", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Second)
			return sweep(SweepReport{SessionsExpired: 1})(t)
		}, state: "expired used=2000 remaining=7000", types: []string{"protocol.session.expire"}},
		{name: "sweep again", do: sweep(SweepReport{}), state: "expired used=2000 remaining=7000", same: true},
		{name: "hold after expiry", do: func(t *testing.T) (string, error) {
			_, err := sesHold(t, h, sesID, 1_000)
			return sesState(t, h, sesID), err
		}, code: pay.CodeDenied, reason: gate.CodeSessionExpired, state: "expired used=2000 remaining=7000",
			types: []string{"gate.decision", "protocol.hold.place"}},
		{name: "close after expiry", do: func(t *testing.T) (string, error) {
			_, err := h.svc.SessionClose(ctx, h.call(), &SessionRef{SessionID: sesID})
			return sesState(t, h, sesID), err
		}, code: pay.CodeSessionClosed, state: "expired used=2000 remaining=7000"},
	}, nil)
}

// TestSessionEndsBeforeSweep: past its TTL a session is denied at once,
// whether or not the sweep has run yet.
func TestSessionEndsBeforeSweep(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ses, err := h.svc.SessionOpen(t.Context(), h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: 9_000, TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Add(60 * time.Second)
	_, err = sesHold(t, h, ses.ID, 1_000)
	trnWantDenied(t, err, gate.CodeSessionExpired)
	// The sweep has not run: nothing was counted, and the session reads
	// expired already, as the gate treats it.
	if got := sesState(t, h, ses.ID); got != "expired used=0 remaining=9000" {
		t.Errorf("state %q", got)
	}
}

// TestSessionGivesBack: whatever ends a reservation under a session
// without settling it gives the amount back to the session: the
// uncaptured rest of a hold, a rail's decline, a hold's expiry, an
// approval window passing.
func TestSessionGivesBack(t *testing.T) {
	h := newHarness(t, harnessConfig{card: cusDeclining})
	ctx := t.Context()
	ses, err := h.svc.SessionOpen(ctx, h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: 40_000, TTLSeconds: 3 * 86400})
	if err != nil {
		t.Fatal(err)
	}
	under := func(in *pay.Instruction) { in.SessionID = ses.ID }
	var holdID string
	var held *pay.Held
	trnRun(t, h, []trnStep{
		{name: "hold", do: func(t *testing.T) (string, error) {
			p, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 5_000, under), TTLSeconds: 3600})
			if err == nil {
				holdID = p.HoldID
			}
			return sesState(t, h, ses.ID), err
		}, state: "open used=5000 remaining=35000",
			types: []string{"gate.decision", "protocol.hold.place", "payment.authorized", "protocol.hold.authorize"}},
		{name: "capture part of it", do: func(t *testing.T) (string, error) {
			_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: holdID, AmountMinor: 2_000, IdempotencyKey: "c1"})
			return sesState(t, h, ses.ID), err
		}, state: "open used=2000 remaining=38000",
			types: []string{"payment.capture_requested", "protocol.hold.capture", "payment.settled", "protocol.hold.settle"}},
		{name: "a hold the rail declines", do: func(t *testing.T) (string, error) {
			_, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: h.spend("hold.place", railCard, 3_000,
				func(in *pay.Instruction) { in.Payee, in.SessionID = cusDeclinedPayee, ses.ID })})
			return sesState(t, h, ses.ID), err
		}, code: pay.CodeDeclined, state: "open used=2000 remaining=38000",
			types: []string{"gate.decision", "protocol.hold.place", "payment.failed", "protocol.hold.fail"}},
		{name: "a hold that expires", do: func(t *testing.T) (string, error) {
			_, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 4_000, under), TTLSeconds: 60})
			if err != nil {
				return "", err
			}
			if got := sesState(t, h, ses.ID); got != "open used=6000 remaining=34000" {
				t.Errorf("held: %s", got)
			}
			h.clock.Add(time.Minute)
			if rep, err := h.svc.Sweep(ctx); err != nil || rep.HoldsExpired != 1 {
				t.Errorf("sweep = %+v, %v", rep, err)
			}
			return sesState(t, h, ses.ID), err
		}, state: "open used=2000 remaining=38000",
			types: []string{"gate.decision", "payment.authorized", "protocol.hold.place", "payment.hold_expired", "protocol.hold.expire"}},
		{name: "a hold held for approval", do: func(t *testing.T) (string, error) {
			p, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 20_000, under), TTLSeconds: 3600})
			if err == nil {
				held = p.Approval
			}
			return sesState(t, h, ses.ID), err
		}, state: "open used=22000 remaining=18000", types: []string{"gate.decision", "protocol.hold.place"}},
		{name: "its approval window passes", do: func(t *testing.T) (string, error) {
			h.clock.Add(24 * time.Hour)
			n, err := h.pay.ExpireApprovals(ctx)
			if n != 1 || held == nil {
				t.Errorf("%d approvals expired, want 1", n)
			}
			return sesState(t, h, ses.ID), err
		}, state: "open used=2000 remaining=38000", types: []string{"approval.expired", "protocol.hold.expire"}},
	}, nil)
}

// TestSessionEndsWithItsMandate: a session never outlives its mandate.
func TestSessionEndsWithItsMandate(t *testing.T) {
	var end time.Time
	h := newHarness(t, harnessConfig{claims: func(c *pay.MandateClaims) {
		c.ExpiresAt = c.IssuedAt.Add(3 * time.Hour)
		end = c.ExpiresAt
	}})
	ses, err := h.svc.SessionOpen(t.Context(), h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: h.claims.PerPeriodCapMinor, TTLSeconds: 86400})
	if err != nil {
		t.Fatal(err)
	}
	if !ses.ExpiresAt.Equal(end) {
		t.Errorf("session ends %v, want the mandate's end %v", ses.ExpiresAt, end)
	}
}

// TestSessionBudgetUnderConcurrency: holds racing for a session's budget
// never count past it: exactly as many are allowed as fit.
func TestSessionBudgetUnderConcurrency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ses, err := h.svc.SessionOpen(t.Context(), h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: 10_000, TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]*HoldPlaceRequest, 10)
	for i := range reqs {
		reqs[i] = &HoldPlaceRequest{TTLSeconds: 3600,
			Spend: h.spend("hold.place", railWire, 2_000, func(in *pay.Instruction) { in.SessionID = ses.ID })}
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { _, errs[i] = h.svc.HoldPlace(t.Context(), h.call(), req) })
	}
	wg.Wait()
	held := 0
	for _, err := range errs {
		switch {
		case err == nil:
			held++
		default:
			trnWantDenied(t, err, gate.CodeSessionExhausted)
		}
	}
	if held != 5 {
		t.Errorf("%d holds allowed, want 5", held)
	}
	if got := sesState(t, h, ses.ID); got != "open used=10000 remaining=0" {
		t.Errorf("state %s", got)
	}
}
