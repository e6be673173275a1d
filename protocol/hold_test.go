package protocol

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/settle/fake"

	"github.com/countersign/countersign/pay"
)

// TestHoldLifecycle walks a hold through place, capture and the refused
// transitions after it, on a rail that authorizes and on one that does
// not.
func TestHoldLifecycle(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			n := h.size()
			placed, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", rail, 5_000, nil), TTLSeconds: 3600})
			if err != nil {
				t.Fatal(err)
			}
			if placed.Status != HoldHeld || placed.RailAuthorization != (rail == railCard) {
				t.Fatalf("placed = %+v", placed)
			}
			var wantTypes []string
			if rail == railCard {
				wantTypes = []string{"gate.decision", "protocol.hold.place", "payment.authorized", "protocol.hold.authorize"}
			} else {
				wantTypes = []string{"gate.decision", "payment.authorized", "protocol.hold.place"}
			}
			if diff := cmp.Diff(wantTypes, h.typesSince(n)); diff != "" {
				t.Errorf("entries of place (-want +got):\n%s", diff)
			}
			// Capture more than held: refused, nothing changed.
			before := h.dump()
			_, err = h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 5_001, IdempotencyKey: "c1"})
			if code(err) != pay.CodeCaptureExceeds {
				t.Fatalf("over-capture: %v", err)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Fatalf("a refused capture changed the store:\n%s", diff)
			}
			n = h.size()
			c, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "c1"})
			if err != nil {
				t.Fatal(err)
			}
			if c.CapturedMinor != 3_000 || c.ReleasedMinor != 2_000 || c.Receipt.Amount.Minor != 3_000 || c.WasReplayed() {
				t.Fatalf("captured = %+v", c)
			}
			if diff := cmp.Diff([]string{"payment.capture_requested", "protocol.hold.capture", "payment.settled", "protocol.hold.settle"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries of capture (-want +got):\n%s", diff)
			}
			again, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "c1"})
			if err != nil || !again.WasReplayed() || !cmp.Equal(again.Receipt, c.Receipt) {
				t.Fatalf("replay = %+v, %v", again, err)
			}
			for _, tc := range []struct {
				name string
				run  func() error
				want string
			}{
				{"other amount same key", func() error {
					_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 10, IdempotencyKey: "c1"})
					return err
				}, pay.CodeIdempotencyConflict},
				{"second capture", func() error {
					_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 10, IdempotencyKey: "c2"})
					return err
				}, pay.CodeHoldCaptured},
				{"release captured", func() error {
					_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
					return err
				}, pay.CodeHoldCaptured},
				{"unknown hold", func() error {
					_, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: "hold_nope"})
					return err
				}, pay.CodeHoldNotFound},
			} {
				before := h.dump()
				if got := code(tc.run()); got != tc.want {
					t.Errorf("%s: code %q, want %q", tc.name, got, tc.want)
				}
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("%s changed the store:\n%s", tc.name, diff)
				}
			}
			got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
			if err != nil || got.Status != HoldStatusCaptured || got.CapturedMinor != 3_000 {
				t.Fatalf("get = %+v, %v", got, err)
			}
		})
	}
}

// TestHoldUnknownOutcomes loses the rail's answers after it acted, on
// the authorization and on the capture: the hold stays where it was (no
// definite answer is ever taken for a failure), a retry with the same
// request or the reconciler after a restart finishes it, and the rail
// captures exactly once.
func TestHoldUnknownOutcomes(t *testing.T) {
	var fault func(fake.Op, any) error
	h := newHarness(t, harnessConfig{card: func(o *fake.Options) {
		o.Fault = func(op fake.Op, req any) error {
			if fault == nil {
				return nil
			}
			return fault(op, req)
		}
	}})
	ctx := t.Context()
	fault = fake.FailNext(fake.OpAuthorize, 1, fake.AfterMove(nil))
	req := &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 4_000, nil), TTLSeconds: 3600}
	if _, err := h.svc.HoldPlace(ctx, h.call(), req); code(err) != pay.CodeRailUnavailable {
		t.Fatalf("lost authorization answer: %v", err)
	}
	// A restart: the reconciler looks the authorization up and records it.
	h.restart()
	placed, err := h.svc.HoldPlace(ctx, h.call(), req)
	if err != nil || placed.Status != HoldHeld || !placed.WasReplayed() {
		t.Fatalf("after reconcile: %+v, %v", placed, err)
	}
	fault = fake.FailNext(fake.OpCapture, 1, fake.AfterMove(nil))
	capReq := &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 2_500, IdempotencyKey: "cap"}
	if _, err := h.svc.HoldCapture(ctx, h.call(), capReq); code(err) != pay.CodeRailUnavailable {
		t.Fatalf("lost capture answer: %v", err)
	}
	got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
	if err != nil || got.Status != HoldCapturing {
		t.Fatalf("hold after a lost capture answer: %+v, %v", got, err)
	}
	c, err := h.svc.HoldCapture(ctx, h.call(), capReq)
	if err != nil || c.CapturedMinor != 2_500 {
		t.Fatalf("retried capture: %+v, %v", c, err)
	}
	entries, err := h.card.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	captures := 0
	for _, e := range entries {
		if e.Kind == fake.KindCapture {
			captures++
			if e.Amount != 2_500 {
				t.Errorf("captured %d", e.Amount)
			}
		}
	}
	if captures != 1 {
		t.Fatalf("%d captures on the rail", captures)
	}
	if err := h.card.CheckLedger(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHoldHeldForApproval: a hold at or above the mandate's confirm
// threshold waits for a person (202); capture and release are refused
// until then, with nothing changed; the approval places it (on the card
// rail through the rail's authorization); a replay of the placing request
// keeps answering what it answered first.
func TestHoldHeldForApproval(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			req := &HoldPlaceRequest{Spend: h.spend("hold.place", rail, 20_000, nil), TTLSeconds: 3600}
			placed, err := h.svc.HoldPlace(ctx, h.call(), req)
			if err != nil || placed.Status != HoldPendingApproval || !placed.IsAccepted() || placed.Approval == nil || placed.Amount.Minor != 20_000 {
				t.Fatalf("placed = %+v, %v", placed, err)
			}
			for _, tc := range []struct {
				name string
				run  func() error
			}{
				{"capture", func() error {
					_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 1, IdempotencyKey: "c"})
					return err
				}},
				{"release", func() error {
					_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
					return err
				}},
			} {
				before := h.dump()
				if got := code(tc.run()); got != pay.CodeHoldNotAuthorized {
					t.Errorf("%s before approval: %q", tc.name, got)
				}
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("%s before approval changed the store:\n%s", tc.name, diff)
				}
			}
			n := h.size()
			res, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: placed.IntentID, Challenge: placed.Approval.Challenge,
				MandateID: placed.Approval.MandateID, Rationale: "checked with the guest", Acknowledged: true},
				pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "checked with the guest"})
			if err != nil || res.Outcome != pay.OutcomeAuthorized {
				t.Fatalf("approve = %+v, %v", res, err)
			}
			want := []string{"approval.granted", "payment.authorized", "protocol.hold.approve"}
			if rail == railCard {
				want = []string{"approval.granted", "protocol.hold.approve", "payment.authorized", "protocol.hold.authorize"}
			}
			if diff := cmp.Diff(want, h.typesSince(n)); diff != "" {
				t.Errorf("entries of the approval (-want +got):\n%s", diff)
			}
			got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
			if err != nil || got.Status != HoldHeld || got.RailAuthorization != (rail == railCard) {
				t.Fatalf("hold after approval = %+v, %v", got, err)
			}
			again, err := h.svc.HoldPlace(ctx, h.call(), req)
			if err != nil || !again.WasReplayed() || again.Status != HoldPendingApproval {
				t.Fatalf("replay = %+v, %v", again, err)
			}
		})
	}
}

// TestHoldConcurrentCapturesOneKey sends the same capture at once from
// several callers: the rail captures once, and every answer is the
// capture's receipt or pay.in_flight (retry as is), never a decline for
// money that moved. Before the intent was claimed ahead of the capture's
// transaction, a replay arriving between that commit and the rail call
// resumed it and the rail was asked to capture twice.
func TestHoldConcurrentCapturesOneKey(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			placed, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", rail, 5_000, nil), TTLSeconds: 3600})
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			answers := make([]*HoldCaptured, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					answers[i], errs[i] = h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "c1"})
				})
			}
			wg.Wait()
			var receipt *pay.Receipt
			for i := range n {
				switch {
				case errs[i] == nil:
					if receipt != nil && !cmp.Equal(receipt, answers[i].Receipt) {
						t.Errorf("two receipts for one capture: %+v, %+v", receipt, answers[i].Receipt)
					}
					receipt = answers[i].Receipt
				case code(errs[i]) != pay.CodeInFlight:
					t.Errorf("capture %d: %v", i, errs[i])
				}
			}
			if receipt == nil || receipt.Amount.Minor != 3_000 {
				t.Fatalf("no capture answered its receipt: %+v", receipt)
			}
			// Retried as is once the first is done: the receipt again.
			again, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "c1"})
			if err != nil || !cmp.Equal(again.Receipt, receipt) {
				t.Fatalf("retry: %+v, %v", again, err)
			}
			got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: placed.HoldID})
			if err != nil || got.Status != HoldStatusCaptured || got.CapturedMinor != 3_000 {
				t.Fatalf("get = %+v, %v", got, err)
			}
		})
	}
}
