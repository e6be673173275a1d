package protocol

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
			wantTypes := []string{"gate.decision", "protocol.hold.place"}
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
			_ = time.Second
		})
	}
}
