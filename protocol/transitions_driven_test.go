package protocol

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// The tests here drive the rows of the hold, obligation and clearing
// machines that only a rail's refusal reaches: a declined hold.capture, a
// refund the rail refuses after it was started, and a capture of unknown
// outcome declined when it is resumed.

// drvFaults is a card rail whose faults a test scripts as it goes: set
// replaces the hook (nil: no faults).
type drvFaults struct {
	mu    sync.Mutex
	fault func(fake.Op, any) error
}

func (f *drvFaults) set(fault func(fake.Op, any) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fault = fault
}

func (f *drvFaults) config() harnessConfig {
	return harnessConfig{card: func(o *fake.Options) {
		o.Fault = func(op fake.Op, req any) error {
			f.mu.Lock()
			fault := f.fault
			f.mu.Unlock()
			if fault == nil {
				return nil
			}
			return fault(op, req)
		}
	}}
}

// drvDecline is the card's refusal of a capture.
var drvDecline = &settle.DeclineError{Code: "do_not_honor", Message: "declined by the test"}

// drvMoved is the money the card rail moved under an intent's key: its
// settled captures and payments, less its refunds.
func drvMoved(t *testing.T, h *harness, intentID string) int64 {
	t.Helper()
	entries, err := h.card.Ledger(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var moved int64
	for _, e := range entries {
		if e.Key != intentID {
			continue
		}
		switch e.Kind {
		case fake.KindCapture, fake.KindPayment:
			if e.Status == settle.StatusSettled {
				moved += e.Amount
			}
		case fake.KindRefund:
			moved -= e.Amount
		}
	}
	if err := h.card.CheckLedger(t.Context()); err != nil {
		t.Error(err)
	}
	return moved
}

// TestHoldCaptureDeclined: the card declines a hold's capture (hold
// capturing -failed-> failed). hold.capture answers the decline, the hold
// is failed with nothing captured, the whole reservation is back in the
// mandate's budget, the rail moved nothing, and the record has the
// capture and its failure; a repeat of the capture answers the same
// decline without asking the rail again.
func TestHoldCaptureDeclined(t *testing.T) {
	for _, tc := range []struct {
		name    string
		capture int64
	}{
		{"all of it", 5_000},
		{"part of it", 3_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f drvFaults
			h := newHarness(t, f.config())
			ctx := t.Context()
			placed, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 5_000, nil), TTLSeconds: 3600})
			if err != nil || placed.Status != HoldHeld || !placed.RailAuthorization {
				t.Fatalf("placed = %+v, %v", placed, err)
			}
			var captures atomic.Int32
			f.set(func(op fake.Op, _ any) error {
				if op != fake.OpCapture {
					return nil
				}
				captures.Add(1)
				return drvDecline
			})
			n := h.size()
			req := &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: tc.capture, IdempotencyKey: "cap"}
			_, err = h.svc.HoldCapture(ctx, h.call(), req)
			var refused *Refused
			if !errors.As(err, &refused) || refused.Result.Outcome != pay.OutcomeFailed {
				t.Fatalf("declined capture: %v", err)
			}
			if want := []string{"payment.capture_requested", "protocol.hold.capture", "payment.failed", "protocol.hold.fail"}; !cmp.Equal(want, h.typesSince(n)) {
				t.Errorf("entries of the declined capture: %v, want %v", h.typesSince(n), want)
			}
			got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
			if err != nil || got.Status != HoldFailed || got.CapturedMinor != 0 || got.Receipt != nil {
				t.Fatalf("hold after the decline: %+v, %v", got, err)
			}
			if p := trnPeriod(t, h); p != "reserved=0 settled=0" {
				t.Errorf("mandate period after the decline: %s", p)
			}
			if moved := drvMoved(t, h, placed.IntentID); moved != 0 {
				t.Errorf("the rail moved %d", moved)
			}
			// The repeat answers the decline from the intent.
			n = h.size()
			_, err = h.svc.HoldCapture(ctx, h.call(), req)
			if !errors.As(err, &refused) || refused.Result.Outcome != pay.OutcomeFailed || !refused.Result.Replayed {
				t.Errorf("repeated capture: %v", err)
			}
			if got := captures.Load(); got != 1 {
				t.Errorf("the rail was asked to capture %d times", got)
			}
			if got := h.typesSince(n); len(got) != 0 {
				t.Errorf("a repeat appended %v", got)
			}
			// Its capture was asked for: it can no longer be released.
			refusedUnchanged(t, h, pay.CodeHoldCaptured, func() error {
				_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
				return err
			})
		})
	}
}

// TestDisputeRefundRefusedByRail: a dispute resolved for the claimant
// whose refund the rail refuses once it was started (captured or settled
// or cleared -refund_refused-> the same), on a captured hold and on a
// cleared obligation. The refund is refused, nothing moves back, the
// subject stays as it was (captured, settled, cleared), the resolution
// reads refused, and the sweep does not retry it.
func TestDisputeRefundRefusedByRail(t *testing.T) {
	for _, tc := range []struct {
		name string
		// settled makes the subject: its id and its intent's.
		settled func(t *testing.T, h *harness) (subject, intentID string)
		// state is the subject's own state.
		state func(t *testing.T, h *harness, subject string) string
		want  string
		// entry is the type of the subject's entries of the refund: one
		// as it starts (with the dispute's), one as the rail refuses it.
		entry string
	}{
		{
			name: "a captured hold",
			settled: func(t *testing.T, h *harness) (string, string) {
				placed, err := h.svc.HoldPlace(t.Context(), h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 4_000, nil), TTLSeconds: 3600})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.svc.HoldCapture(t.Context(), h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "cap"}); err != nil {
					t.Fatal(err)
				}
				return placed.IntentID, placed.IntentID
			},
			state: func(t *testing.T, h *harness, intentID string) string {
				hid, _ := prefixID(intentID, "int_", "hold_")
				got, err := h.svc.HoldGet(t.Context(), h.call(), &HoldRef{HoldID: hid})
				if err != nil {
					return "get: " + code(err)
				}
				return string(got.Status) + " captured=" + itoa(int(got.CapturedMinor))
			},
			want:  "captured captured=3000",
			entry: "protocol.hold.refund",
		},
		{
			name: "a cleared obligation",
			settled: func(t *testing.T, h *harness) (string, string) {
				o := oblCleared(t, h, railCard, 3_000)
				return o.ObligationID, o.IntentID
			},
			state: func(t *testing.T, h *harness, id string) string {
				return oblState(t, h, id) + " clearing=" + clrState(t, h, id)
			},
			want:  "settled reserved=0 settled=3000 clearing=cleared admissible=true achieved=[self] receipt=3000",
			entry: "protocol.obligation.refund",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f drvFaults
			h := newHarness(t, f.config())
			ctx := t.Context()
			subject, intentID := tc.settled(t, h)
			if got := tc.state(t, h, subject); got != tc.want {
				t.Fatalf("before the dispute: %s, want %s", got, tc.want)
			}
			d := dspOpen(t, h, subject, 0)
			var refunds atomic.Int32
			f.set(func(op fake.Op, _ any) error {
				if op != fake.OpRefund {
					return nil
				}
				refunds.Add(1)
				return &settle.DeclineError{Code: "refund_declined", Message: "the issuer refuses the refund"}
			})
			n := h.size()
			got, err := dspResolve(h, d.ID, ForClaimant, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if r := got.Resolution; r.RefundStatus != RefundRefused || r.RefundID == "" || r.RefundMinor != 3_000 {
				t.Errorf("resolution %+v", r)
			}
			if diff := cmp.Diff([]string{"protocol.dispute.resolve", tc.entry, "protocol.dispute.refund", tc.entry}, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if got := refunds.Load(); got != 1 {
				t.Errorf("the rail was asked to refund %d times", got)
			}
			if got := dspRefunds(t, h, intentID); got != "settled refunded=0 refunds=[] entries=0" {
				t.Errorf("intent %s", got)
			}
			if got := tc.state(t, h, subject); got != tc.want {
				t.Errorf("after the refused refund: %s, want %s", got, tc.want)
			}
			if moved := drvMoved(t, h, intentID); moved != 3_000 {
				t.Errorf("the rail moved %d, want 3000 (nothing back)", moved)
			}
			before := h.dump()
			if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
				t.Errorf("sweep %+v, %v", rep, err)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a sweep retried a refused refund:\n%s", diff)
			}
			if line := dspGet(t, h, d.ID); line != "resolved claimant refund=3000/refused slashed=0 claims=0" {
				t.Errorf("dispute %s", line)
			}
			if got := refunds.Load(); got != 1 {
				t.Errorf("the rail was asked to refund %d times", got)
			}
			dspBooks(t, h)
		})
	}
}

// TestClearingResumedCaptureDeclined: a clearing's capture whose request
// is lost (the rail never saw it) leaves the obligation clearing; the
// next evidence resumes the capture under the same key, and the rail
// declines it (clearing clearing -clear-> failed). The evidence is
// stored, its answer's clearing is failed, the obligation failed with its
// reservation released, the rail moved nothing, and clearing.attempt
// refuses from then on.
func TestClearingResumedCaptureDeclined(t *testing.T) {
	var f drvFaults
	h := newHarness(t, f.config())
	ctx := t.Context()
	o := oblCreate(t, h, railCard, 2_000, ClassSelf)
	var captures atomic.Int32
	f.set(func(op fake.Op, _ any) error {
		if op != fake.OpCapture {
			return nil
		}
		if captures.Add(1) == 1 {
			return settle.ErrUnknownOutcome // lost on the way: the rail never acted
		}
		return drvDecline
	})
	sub := oblMustSubmit(t, h, o.ObligationID, ClassSelf, "done")
	if sub.Clearing.Status == ClearingCleared || sub.Clearing.Problem == nil || sub.Clearing.Problem.Code != pay.CodeRailUnavailable {
		t.Fatalf("clearing with a lost request: %s", clrLine(sub.Clearing))
	}
	if got := oblState(t, h, o.ObligationID); got != "clearing reserved=2000 settled=0" {
		t.Fatalf("after the lost request: %s", got)
	}
	if st := clrState(t, h, o.ObligationID); st != "clearing admissible=true achieved=[self]" {
		t.Fatalf("clearing.status after the lost request: %s", st)
	}
	n := h.size()
	sub = oblMustSubmit(t, h, o.ObligationID, ClassSelf, "done, again")
	if got := clrLine(sub.Clearing); got != "failed admissible=true achieved=[self]" {
		t.Errorf("clearing of the resumed capture: %s", got)
	}
	if want := []string{"protocol.evidence.submit", "payment.failed", "protocol.obligation.fail"}; !cmp.Equal(want, h.typesSince(n)) {
		t.Errorf("entries of the resumed capture: %v, want %v", h.typesSince(n), want)
	}
	if got := captures.Load(); got != 2 {
		t.Errorf("the rail was asked to capture %d times, want 2", got)
	}
	if got := oblState(t, h, o.ObligationID); got != "failed reserved=0 settled=0" {
		t.Errorf("after the decline: %s", got)
	}
	if st := clrState(t, h, o.ObligationID); st != "failed admissible=true achieved=[self]" {
		t.Errorf("clearing.status after the decline: %s", st)
	}
	if moved := drvMoved(t, h, o.IntentID); moved != 0 {
		t.Errorf("the rail moved %d", moved)
	}
	if n := oblCount(t, h, "payment.settled", o.IntentID); n != 0 {
		t.Errorf("%d payment.settled entries", n)
	}
	refusedUnchanged(t, h, CodeObligationClosed, func() error {
		_, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
		return err
	})
	if got := captures.Load(); got != 2 {
		t.Errorf("the rail was asked to capture %d times after the decline", got)
	}
}
