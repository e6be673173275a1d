package protocol

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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

// TestDeclineHeld declines, as an operator, one held intent of each kind
// the protocol places (a hold, a meter, an obligation, a custody
// withdrawal): the object reads declined, its entry follows pay's
// approval.declined in the same transaction, whatever it had reserved
// comes back, and the intent's proof of enforcement still verifies.
func TestDeclineHeld(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold places the held object; it returns its intent and what
		// its 202 answer said.
		hold func(t *testing.T, h *harness) (intentID string, held *pay.Held)
		// status reads the object's status after the decline.
		status      func(t *testing.T, h *harness, intentID string) string
		wantStatus  string
		wantEntries []string
		// after checks the books, when the object had any.
		after func(t *testing.T, h *harness)
	}{
		{
			name: "hold",
			hold: func(t *testing.T, h *harness) (string, *pay.Held) {
				p, err := h.svc.HoldPlace(t.Context(), h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 20_000, nil), TTLSeconds: 3600})
				if err != nil || !p.IsAccepted() {
					t.Fatalf("place: %+v, %v", p, err)
				}
				return p.IntentID, p.Approval
			},
			status: func(t *testing.T, h *harness, id string) string {
				hd, err := h.svc.HoldGet(t.Context(), h.call(), &HoldRef{HoldID: "hold_" + id[len("int_"):]})
				if err != nil {
					t.Fatal(err)
				}
				return string(hd.Status)
			},
			wantStatus: string(HoldDeclined), wantEntries: []string{"approval.declined", "protocol.hold.decline"},
		},
		{
			name: "meter",
			hold: func(t *testing.T, h *harness) (string, *pay.Held) {
				m, err := h.svc.MeterOpen(t.Context(), h.call(), &MeterOpenRequest{Spend: h.spend("meter.open", railCard, 20_000, nil), UnitPriceMinor: 10, TTLSeconds: 3600})
				if err != nil || !m.IsAccepted() {
					t.Fatalf("open: %+v, %v", m, err)
				}
				return m.IntentID, m.Approval
			},
			status: func(t *testing.T, h *harness, id string) string {
				m, err := h.svc.MeterGet(t.Context(), h.call(), &MeterRef{MeterID: "mtr_" + id[len("int_"):]})
				if err != nil {
					t.Fatal(err)
				}
				return m.Status
			},
			wantStatus: MeterDeclined, wantEntries: []string{"approval.declined", "protocol.meter.decline"},
		},
		{
			name: "obligation",
			hold: func(t *testing.T, h *harness) (string, *pay.Held) {
				o := oblCreate(t, h, railCard, 20_000, ClassSelf)
				if o.Status != ObligationPendingApproval {
					t.Fatalf("created %+v", o)
				}
				return o.IntentID, o.Approval
			},
			status: func(t *testing.T, h *harness, id string) string {
				ref := &ObligationRef{ObligationID: "obl_" + id[len("int_"):]}
				o, err := h.svc.ObligationGet(t.Context(), h.call(), ref)
				if err != nil {
					t.Fatal(err)
				}
				c, err := h.svc.ClearingStatus(t.Context(), h.call(), ref)
				if err != nil {
					t.Fatal(err)
				}
				return string(o.Status) + "/" + string(c.Status)
			},
			wantStatus:  string(ObligationDeclined) + "/" + string(ClearingDeclined),
			wantEntries: []string{"approval.declined", "protocol.obligation.decline"},
		},
		{
			name: "custody withdrawal",
			hold: func(t *testing.T, h *harness) (string, *pay.Held) {
				for range 2 {
					if _, err := h.svc.CustodyDeposit(t.Context(), h.call(), cusSpend(h, "custody.deposit", "", 9_000)); err != nil {
						t.Fatal(err)
					}
				}
				w, err := h.svc.CustodyWithdraw(t.Context(), h.call(), cusSpend(h, "custody.withdraw", "acct:dest.example", 15_000))
				if err != nil || !w.IsAccepted() {
					t.Fatalf("withdraw = %+v, %v; want held", w, err)
				}
				if got := cusState(t, h); got != "available=3000 withdrawing=15000 refunding=0 staked=0" {
					t.Fatalf("held: %s", got)
				}
				return w.IntentID, w.Approval
			},
			status: func(t *testing.T, h *harness, id string) string {
				in, err := h.pay.Intent(t.Context(), h.caller, id)
				if err != nil {
					t.Fatal(err)
				}
				return string(in.Status)
			},
			wantStatus: string(pay.StatusDeclined), wantEntries: []string{"approval.declined", "protocol.custody.withdraw.decline"},
			after: func(t *testing.T, h *harness) {
				if got := cusState(t, h); got != "available=18000 withdrawing=0 refunding=0 staked=0" {
					t.Errorf("declined: %s", got)
				}
				cusBooks(t, h)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			id, held := tc.hold(t, h)
			if held == nil {
				t.Fatal("held without its approval material")
			}
			n := h.size()
			d, err := h.pay.Decline(t.Context(), pay.DeclineRequest{IntentID: id, MandateID: held.MandateID},
				pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "not what this agent is for"})
			if err != nil || d.Status != pay.StatusDeclined {
				t.Fatalf("decline: %+v, %v", d, err)
			}
			if diff := cmp.Diff(tc.wantEntries, h.typesSince(n)); diff != "" {
				t.Errorf("entries of the decline (-want +got):\n%s", diff)
			}
			if got := tc.status(t, h, id); got != tc.wantStatus {
				t.Errorf("status %s, want %s", got, tc.wantStatus)
			}
			if tc.after != nil {
				tc.after(t, h)
			}
			p, err := h.svc.ProofGet(t.Context(), h.call(), &ProofGetRequest{IntentID: id})
			if err != nil || p.Status != pay.StatusDeclined {
				t.Fatalf("proof: %+v, %v", p, err)
			}
			if v := VerifyProof(h.log.VerifierKey(), prfMarshal(t, p)); !v.Valid {
				t.Errorf("the proof of a declined intent does not verify: %+v", v)
			}
		})
	}
}
