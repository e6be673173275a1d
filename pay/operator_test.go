package pay

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

func opCall(id string) OperatorCall {
	return OperatorCall{Operator: id, RequestID: "req_" + id, Rationale: "checked the invoice with finance"}
}

func (h *harness) hold(key string, minor int64) *Held {
	h.t.Helper()
	res, err := h.pay(h.instruction(key, minor, nil))
	if err != nil || res.Outcome != OutcomeHeld {
		h.t.Fatalf("want held: %+v %v", res, err)
	}
	return res.Held
}

func TestApprove(t *testing.T) {
	ctx := context.Background()
	t.Run("one approval settles; replay of the agent's request still answers held", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		held := h.hold("a1", 20_000)
		res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge,
			MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
		if err != nil || res.Outcome != OutcomeSettled || res.Receipt.Amount.Minor != 20_000 {
			t.Fatalf("approve: %+v %v", res, err)
		}
		replay, err := h.pay(h.instruction("a1", 20_000, nil))
		if err != nil || replay.Outcome != OutcomeHeld || !replay.Replayed {
			t.Fatalf("replay after approval: %+v %v", replay, err)
		}
		if _, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge,
			MandateID: held.MandateID, Acknowledged: true}, opCall("op-bob")); !errors.Is(err, ErrNotPending) {
			t.Fatalf("second approval of a settled intent: %v", err)
		}
	})
	t.Run("acknowledgement required above a threshold", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		held := h.hold("a2", 20_000)
		res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID}, opCall("op-alice"))
		if err != nil || res.Outcome != OutcomeHeld || res.Held.ApprovalsReceived != 0 {
			t.Fatalf("unacknowledged approval: %+v %v", res, err)
		}
		if n, _ := h.rail.Count(ctx); n != 0 {
			t.Fatal("money moved without acknowledgement")
		}
	})
	t.Run("two distinct operators needed", func(t *testing.T) {
		h := newHarness(t, harnessConfig{claims: func(c *MandateClaims) { c.Approvals = 2 }})
		held := h.hold("a3", 20_000)
		req := ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID, Acknowledged: true}
		for i, op := range []string{"op-alice", "op-alice"} {
			res, err := h.svc.Approve(ctx, req, opCall(op))
			if err != nil || res.Outcome != OutcomeHeld || res.Held.ApprovalsReceived != 1 || res.Held.ApprovalsRequired != 2 {
				t.Fatalf("approval %d by %s: %+v %v", i, op, res, err)
			}
		}
		res, err := h.svc.Approve(ctx, req, opCall("op-bob"))
		if err != nil || res.Outcome != OutcomeSettled {
			t.Fatalf("second distinct operator: %+v %v", res, err)
		}
	})
	t.Run("wrong challenge or mandate", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		held := h.hold("a4", 20_000)
		// Not a challenge at all: a malformed request (400).
		for _, c := range []string{"AAAA", "!!", held.Challenge + "A", held.Challenge[:42]} {
			req := ApproveRequest{IntentID: held.IntentID, Challenge: c, MandateID: held.MandateID, Acknowledged: true}
			var ve *contract.ValidationError
			if _, err := h.svc.Approve(ctx, req, opCall("op-alice")); !errors.As(err, &ve) || ve.Errors[0].Field != "challenge" {
				t.Fatalf("%+v: %v, want a validation error at challenge", req, err)
			}
		}
		// A challenge, but not this payment's, or another mandate: 409.
		other := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
		for _, req := range []ApproveRequest{
			{IntentID: held.IntentID, Challenge: other, MandateID: held.MandateID, Acknowledged: true},
			{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: "other", Acknowledged: true},
		} {
			if _, err := h.svc.Approve(ctx, req, opCall("op-alice")); !errors.Is(err, ErrApprovalMismatch) {
				t.Fatalf("%+v: %v", req, err)
			}
		}
		if _, err := h.svc.Approve(ctx, ApproveRequest{IntentID: "int_01JABCDEFGHJKMNPQRSTVWXYZ0", Challenge: held.Challenge,
			MandateID: held.MandateID}, opCall("op-alice")); !errors.Is(err, ErrIntentNotFound) {
			t.Fatalf("unknown intent: %v", err)
		}
	})
	t.Run("expired window releases the reservation", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		held := h.hold("a5", 20_000)
		h.clock.Add(24 * time.Hour)
		if n, err := h.svc.ExpireApprovals(ctx); err != nil || n != 1 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		_, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
		if !errors.Is(err, ErrApprovalExpired) {
			t.Fatalf("approve expired: %v", err)
		}
		in, _ := h.svc.Intent(ctx, h.caller, held.IntentID)
		if in.Status != StatusExpired || in.ReservedMinor != 0 {
			t.Fatalf("intent after expiry: %s reserved %d", in.Status, in.ReservedMinor)
		}
	})
	t.Run("kill switch and revocation block approval", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		held := h.hold("a6", 20_000)
		req := ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID, Acknowledged: true}
		if _, err := h.svc.SetKillSwitch(ctx, true, opCall("op-alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Approve(ctx, req, opCall("op-alice")); !errors.Is(err, ErrFrozen) {
			t.Fatalf("approve while frozen: %v", err)
		}
		if _, err := h.svc.SetKillSwitch(ctx, false, opCall("op-alice")); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.RevokeMandate(ctx, held.MandateID, opCall("op-alice")); err != nil {
			t.Fatal(err)
		}
		var ue *UnauthorizedError
		if _, err := h.svc.Approve(ctx, req, opCall("op-alice")); !errors.As(err, &ue) || ue.Reason != ReasonMandateRevoked {
			t.Fatalf("approve under a revoked mandate: %v", err)
		}
		if n, _ := h.rail.Count(ctx); n != 0 {
			t.Fatal("money moved")
		}
	})
	t.Run("held list", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		for _, k := range []string{"h1", "h2", "h3"} {
			h.hold(k, 20_000)
		}
		page, err := h.svc.Held(ctx, "", 2)
		if err != nil || len(page.Data) != 2 || !page.HasMore || page.Data[0].Reasons[0].Code != gate.CodeConfirmThreshold {
			t.Fatalf("page 1: %+v %v", page, err)
		}
		page, err = h.svc.Held(ctx, *page.NextCursor, 2)
		if err != nil || len(page.Data) != 1 || page.HasMore {
			t.Fatalf("page 2: %+v %v", page, err)
		}
	})
}

// TestApproveWithoutChallenge: the operator's approval may leave the
// challenge out (the held list cannot show it); the mandate id still has
// to be the intent's.
func TestApproveWithoutChallenge(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	held := h.hold("w1", 20_000)
	for _, mandate := range []string{"", "mdt-other"} {
		if _, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, MandateID: mandate, Acknowledged: true}, opCall("op-alice")); !errors.Is(err, ErrApprovalMismatch) {
			t.Fatalf("approval naming mandate %q: %v, want ErrApprovalMismatch", mandate, err)
		}
	}
	res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatalf("approval without the challenge: %+v %v", res, err)
	}
}

func TestRefund(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	res, err := h.pay(h.instruction("r1", 5_000, nil))
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatal(res, err)
	}
	id := res.IntentID
	part := int64(2_000)
	rr, err := h.svc.Refund(ctx, RefundRequest{IntentID: id, AmountMinor: &part}, opCall("op-alice"))
	if err != nil || rr.RefundedMinor != 2_000 || rr.RemainingMinor != 3_000 || rr.Status != StatusPartiallyRefunded {
		t.Fatalf("partial: %+v %v", rr, err)
	}
	over := int64(3_001)
	if _, err := h.svc.Refund(ctx, RefundRequest{IntentID: id, AmountMinor: &over}, opCall("op-alice")); !errors.Is(err, ErrRefundExceeds) {
		t.Fatalf("over-refund: %v", err)
	}
	rr, err = h.svc.Refund(ctx, RefundRequest{IntentID: id}, opCall("op-alice"))
	if err != nil || rr.RefundedMinor != 5_000 || rr.RemainingMinor != 0 || rr.Status != StatusRefunded {
		t.Fatalf("rest: %+v %v", rr, err)
	}
	if _, err := h.svc.Refund(ctx, RefundRequest{IntentID: id}, opCall("op-alice")); !errors.Is(err, ErrRefundRefused) {
		t.Fatalf("refund of a refunded intent: %v", err)
	}
	if err := h.rail.CheckLedger(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRefundIrreversibleAndUnknown(t *testing.T) {
	ctx := context.Background()
	t.Run("irreversible rail refuses", func(t *testing.T) {
		h := newHarness(t, harnessConfig{rail: &fake.Options{Facts: settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}},
			claims: func(c *MandateClaims) { c.IrreversibleConfirmAboveMinor = 100_000 }})
		res, err := h.pay(h.instruction("i1", 1_000, func(in *Instruction) { in.Terms.Reversibility = gate.Irreversible }))
		if err != nil || res.Outcome != OutcomeSettled {
			t.Fatal(res, err)
		}
		if _, err := h.svc.Refund(ctx, RefundRequest{IntentID: res.IntentID}, opCall("op-alice")); !errors.Is(err, ErrRefundRefused) {
			t.Fatalf("irreversible refund: %v", err)
		}
	})
	t.Run("unknown outcome is finished by reconcile, never twice", func(t *testing.T) {
		h := newHarness(t, harnessConfig{rail: &fake.Options{Fault: fake.FailNext(fake.OpRefund, 1, fake.AfterMove(nil))}})
		res, err := h.pay(h.instruction("u1", 1_000, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.Refund(ctx, RefundRequest{IntentID: res.IntentID}, opCall("op-alice")); !errors.Is(err, ErrRailUnavailable) {
			t.Fatalf("refund with lost answer: %v", err)
		}
		if _, err := h.svc.Refund(ctx, RefundRequest{IntentID: res.IntentID}, opCall("op-alice")); !errors.Is(err, ErrRefundRefused) {
			t.Fatalf("second refund while the first is unresolved: %v", err)
		}
		rep, err := h.newService().Reconcile(ctx)
		if err != nil || rep.RefundsDone != 1 {
			t.Fatalf("reconcile: %+v %v", rep, err)
		}
		in, _ := h.svc.Intent(ctx, h.caller, res.IntentID)
		if in.Status != StatusRefunded || in.RefundedMinor != 1_000 || in.PendingRefund != nil {
			t.Fatalf("intent %+v", in)
		}
		if err := h.rail.CheckLedger(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestApproveWhileSettling checks the answer to an approval of an intent
// another request is settling: ErrInFlight (409, retry as is), worded
// about the intent, not about an idempotency key.
func TestApproveWhileSettling(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	if !h.svc.claim("int_busy") {
		t.Fatal("claim")
	}
	defer h.svc.release("int_busy")
	_, err := h.svc.Approve(t.Context(), ApproveRequest{IntentID: "int_busy", Challenge: base64.RawURLEncoding.EncodeToString(make([]byte, 32))}, opCall("op-alice"))
	if !errors.Is(err, ErrInFlight) {
		t.Fatalf("Approve of a busy intent = %v, want ErrInFlight", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "int_busy") || strings.Contains(msg, "idempotency") {
		t.Errorf("message %q should name the intent and not an idempotency key", msg)
	}
}
