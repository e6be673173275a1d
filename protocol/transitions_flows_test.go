package protocol

import (
	"testing"
	"time"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// TestObligationEndings drives the obligation's and its clearing's
// endings the other tests leave out: the approval window passing, the
// rail declining the authorization, and the rail declining the capture.
func TestObligationEndings(t *testing.T) {
	t.Run("approval window passes", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		o := oblCreate(t, h, railCard, 20_000, ClassSelf)
		if o.Status != ObligationPendingApproval {
			t.Fatalf("created %+v", o)
		}
		h.clock.Add(25 * time.Hour)
		if _, err := h.pay.ExpireApprovals(t.Context()); err != nil {
			t.Fatal(err)
		}
		got, err := h.svc.ObligationGet(t.Context(), h.call(), &ObligationRef{ObligationID: o.ObligationID})
		if err != nil || got.Status != ObligationExpired {
			t.Fatalf("after the window: %+v, %v", got, err)
		}
	})
	t.Run("authorization declined", func(t *testing.T) {
		h := newHarness(t, harnessConfig{card: cusDeclining})
		_, err := h.svc.ObligationCreate(t.Context(), h.call(), oblRequest(h, railCard, 5_000, ClassSelf, time.Hour,
			func(in *pay.Instruction) { in.Payee = cusDeclinedPayee }))
		if code(err) != pay.CodeDeclined {
			t.Fatalf("create: %v, want %s", err, pay.CodeDeclined)
		}
	})
	t.Run("capture declined", func(t *testing.T) {
		h := newHarness(t, harnessConfig{card: func(o *fake.Options) {
			o.Fault = func(op fake.Op, _ any) error {
				if op == fake.OpCapture {
					return &settle.DeclineError{Code: "do_not_honor", Message: "declined by the test"}
				}
				return nil
			}
		}})
		o := oblCreate(t, h, railCard, 5_000, ClassSelf)
		sub := oblMustSubmit(t, h, o.ObligationID, ClassSelf, "delivered")
		if sub.Clearing == nil || sub.Clearing.Status != ClearingFailed {
			t.Fatalf("submitted: %+v", sub.Clearing)
		}
		got, err := h.svc.ObligationGet(t.Context(), h.call(), &ObligationRef{ObligationID: o.ObligationID})
		if err != nil || got.Status != ObligationFailed {
			t.Fatalf("after the decline: %+v, %v", got, err)
		}
	})
}
