package pay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
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

// TestDecline refuses held payments: each case holds one, prepares the
// service, sends one decline and checks the answer, the intent's status,
// the entries the decline appended and that no money moved.
func TestDecline(t *testing.T) {
	ctx := context.Background()
	same := func(held *Held) DeclineRequest {
		return DeclineRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID}
	}
	with := func(edit func(*DeclineRequest)) func(*Held) DeclineRequest {
		return func(held *Held) DeclineRequest { r := same(held); edit(&r); return r }
	}
	other := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		name    string
		claims  func(*MandateClaims)
		prepare func(t *testing.T, h *harness, held *Held)
		req     func(*Held) DeclineRequest
		// wantErr is matched with errors.Is; nil means declined.
		wantErr     error
		wantStatus  Status
		wantEntries []string // what the decline appended
	}{
		{name: "held", req: same, wantStatus: StatusDeclined, wantEntries: []string{"approval.declined"}},
		{name: "without the challenge", req: with(func(r *DeclineRequest) { r.Challenge = "" }),
			wantStatus: StatusDeclined, wantEntries: []string{"approval.declined"}},
		{name: "kill switch engaged", prepare: func(t *testing.T, h *harness, _ *Held) {
			if _, err := h.svc.SetKillSwitch(ctx, true, opCall("op-alice")); err != nil {
				t.Fatal(err)
			}
		}, req: same, wantStatus: StatusDeclined, wantEntries: []string{"approval.declined"}},
		{name: "mandate revoked", prepare: func(t *testing.T, h *harness, held *Held) {
			if _, err := h.svc.RevokeMandate(ctx, held.MandateID, opCall("op-alice")); err != nil {
				t.Fatal(err)
			}
		}, req: same, wantStatus: StatusDeclined, wantEntries: []string{"approval.declined"}},
		{name: "one of two approvals in", claims: func(c *MandateClaims) { c.Approvals = 2 },
			prepare: func(t *testing.T, h *harness, held *Held) {
				res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
				if err != nil || res.Outcome != OutcomeHeld {
					t.Fatalf("first approval: %+v %v", res, err)
				}
			}, req: same, wantStatus: StatusDeclined, wantEntries: []string{"approval.declined"}},
		{name: "another challenge", req: with(func(r *DeclineRequest) { r.Challenge = other }),
			wantErr: ErrApprovalMismatch, wantStatus: StatusPendingApproval},
		{name: "another mandate", req: with(func(r *DeclineRequest) { r.MandateID = "mdt-other" }),
			wantErr: ErrApprovalMismatch, wantStatus: StatusPendingApproval},
		{name: "no mandate", req: with(func(r *DeclineRequest) { r.MandateID, r.Challenge = "", "" }),
			wantErr: ErrApprovalMismatch, wantStatus: StatusPendingApproval},
		{name: "not a challenge", req: with(func(r *DeclineRequest) { r.Challenge = "AAAA" }),
			wantErr: contract.ErrInvalid, wantStatus: StatusPendingApproval},
		{name: "window passed, not swept yet", prepare: func(t *testing.T, h *harness, _ *Held) { h.clock.Add(25 * time.Hour) },
			req: same, wantErr: ErrApprovalExpired, wantStatus: StatusExpired, wantEntries: []string{"approval.expired"}},
		{name: "expired by the sweep", prepare: func(t *testing.T, h *harness, _ *Held) {
			h.clock.Add(25 * time.Hour)
			if n, err := h.svc.ExpireApprovals(ctx); err != nil || n != 1 {
				t.Fatalf("sweep: %d %v", n, err)
			}
		}, req: same, wantErr: ErrApprovalExpired, wantStatus: StatusExpired},
		{name: "approved", prepare: func(t *testing.T, h *harness, held *Held) {
			res, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
			if err != nil || res.Outcome != OutcomeSettled {
				t.Fatalf("approve: %+v %v", res, err)
			}
		}, req: same, wantErr: ErrNotPending, wantStatus: StatusSettled},
		{name: "unknown intent", req: with(func(r *DeclineRequest) { r.IntentID = "int_01JABCDEFGHJKMNPQRSTVWXYZ0" }),
			wantErr: ErrIntentNotFound, wantStatus: StatusPendingApproval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{claims: tc.claims})
			held := h.hold("d1", 20_000)
			if tc.prepare != nil {
				tc.prepare(t, h, held)
			}
			moved, _ := h.rail.Count(ctx)
			before := len(h.entryTypes())
			call := OperatorCall{Operator: "op-bob", RequestID: "req_decline", Rationale: "the vendor is not one of ours"}
			got, err := h.svc.Decline(ctx, tc.req(held), call)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil {
					t.Fatalf("Decline = %+v, %v; want %v", got, err, tc.wantErr)
				}
			} else if err != nil || got == nil || got.IntentID != held.IntentID || got.Status != StatusDeclined ||
				got.MandateID != held.MandateID || got.DeclinedBy != "op-bob" || !got.DeclinedAt.Equal(h.clock.Now()) {
				t.Fatalf("Decline = %+v, %v", got, err)
			}
			in, err := h.svc.Intent(ctx, h.caller, held.IntentID)
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != tc.wantStatus {
				t.Errorf("status %s, want %s", in.Status, tc.wantStatus)
			}
			if added := h.entryTypes()[before:]; !slices.Equal(added, tc.wantEntries) {
				t.Errorf("appended %v, want %v", added, tc.wantEntries)
			}
			if n, _ := h.rail.Count(ctx); n != moved {
				t.Errorf("the rail saw %d payments, then %d: a decline moves no money", moved, n)
			}
			if tc.wantErr != nil {
				return
			}
			e := h.lastEntry()
			var data struct {
				MandateID         string `json:"mandateId"`
				ApprovalsRequired int    `json:"approvalsRequired"`
			}
			if e.Seq != got.AuditSeq || e.IntentID != held.IntentID || e.Actor != (audit.Actor{Kind: "operator", ID: "op-bob"}) ||
				e.Rationale != call.Rationale || e.RequestID != call.RequestID || json.Unmarshal(e.Data, &data) != nil ||
				data.MandateID != held.MandateID || data.ApprovalsRequired != held.ApprovalsRequired {
				t.Errorf("entry %+v does not record the decline %+v", e, got)
			}
			if in.ReservedMinor != 0 || in.Approval.Declined == nil || in.Approval.Declined.AuditSeq != e.Seq {
				t.Errorf("declined intent: reserved %d, decline %+v", in.ReservedMinor, in.Approval.Declined)
			}
			page, err := h.svc.Held(ctx, "", 10)
			if err != nil || len(page.Data) != 0 {
				t.Errorf("held list after the decline: %+v %v", page, err)
			}
		})
	}
}

// TestDeclineTwice: a second decline, by the same operator or another,
// answers the first one's and records nothing; an approval after it is
// not pending.
func TestDeclineTwice(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	held := h.hold("d2", 20_000)
	req := DeclineRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID}
	first, err := h.svc.Decline(ctx, req, opCall("op-alice"))
	if err != nil {
		t.Fatal(err)
	}
	entries := len(h.entryTypes())
	h.clock.Add(time.Minute)
	for _, tc := range []struct {
		name string
		req  DeclineRequest
		op   string
	}{
		{"the same request", req, "op-alice"},
		{"another operator, without the challenge", DeclineRequest{IntentID: held.IntentID, MandateID: held.MandateID}, "op-bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			again, err := h.svc.Decline(ctx, tc.req, opCall(tc.op))
			if err != nil || *again != *first {
				t.Fatalf("second decline = %+v, %v; want %+v", again, err, first)
			}
		})
	}
	if _, err := h.svc.Decline(ctx, DeclineRequest{IntentID: held.IntentID, MandateID: "mdt-other"}, opCall("op-bob")); !errors.Is(err, ErrApprovalMismatch) {
		t.Errorf("second decline naming another mandate: %v, want ErrApprovalMismatch", err)
	}
	if _, err := h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID,
		Acknowledged: true}, opCall("op-bob")); !errors.Is(err, ErrNotPending) {
		t.Errorf("approval of a declined intent: %v, want ErrNotPending", err)
	}
	if n := len(h.entryTypes()); n != entries {
		t.Errorf("the repeats appended %d entries", n-entries)
	}
}

// TestDeclineReleasesBudget: what a held payment reserved of the
// mandate's period cap is spendable again once it is declined.
func TestDeclineReleasesBudget(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{claims: func(c *MandateClaims) { c.PerPeriodCapMinor = 25_000 }})
	held := h.hold("b1", 20_000)
	res, err := h.pay(h.instruction("b2", 9_000, nil))
	if err != nil || res.Outcome != OutcomeDenied || res.Denial.Reasons[0].Code != gate.CodePeriodCap {
		t.Fatalf("9,000 beside 20,000 held under a cap of 25,000: %+v %v", res, err)
	}
	if _, err := h.svc.Decline(ctx, DeclineRequest{IntentID: held.IntentID, MandateID: held.MandateID}, opCall("op-alice")); err != nil {
		t.Fatal(err)
	}
	res, err = h.pay(h.instruction("b3", 9_000, nil))
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatalf("9,000 after the decline: %+v %v", res, err)
	}
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
