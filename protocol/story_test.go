package protocol

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// TestStoryInProcess walks the part-2 story through the Go API: a seller
// with a stake agrees terms, the buyer's obligation waits in the PENDING
// band until the seller's signed evidence clears it, then the delivery is
// disputed and resolved for the buyer: refund, slash, claim paid.
func TestStoryInProcess(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	seller := h.seller()

	// The seller funds custody and posts a stake.
	if _, err := h.svc.CustodyDeposit(ctx, seller.call(), &CustodySpendRequest{Spend: h.spendAs(seller, "custody.deposit", railCard, 5_000,
		func(in *pay.Instruction) { in.Payee = DefaultCustodyPayee })}); err != nil {
		t.Fatal(err)
	}
	stk, err := h.svc.StakePost(ctx, seller.call(), &StakePostRequest{Amount: pay.Amount{Minor: 3_000, Currency: "USD"},
		LockedUntil: h.clock.Now().Add(48 * time.Hour), Purpose: "bond", IdempotencyKey: "stk-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The insurance pool is funded.
	if _, err := h.svc.CustodyDeposit(ctx, seller.call(), &CustodySpendRequest{Spend: h.spendAs(seller, "custody.deposit", railCard, 4_000,
		func(in *pay.Instruction) { in.Payee = DefaultInsurancePayee })}); err != nil {
		t.Fatal(err)
	}

	// negotiate: our offer, the seller's counter, accepted here.
	body := TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2_000, Currency: "USD"}, Rail: railCard,
		Description: "a report", EvidenceFloor: ClassSign, StakeID: stk.ID, ValidUntil: h.clock.Now().Add(24 * time.Hour)}
	neg, err := h.svc.NegotiateOffer(ctx, h.call(), &NegotiateOfferRequest{Counterparty: h.ev.cp, Terms: body})
	if err != nil {
		t.Fatal(err)
	}
	counter := body
	counter.Amount.Minor = 2_500
	msg, err := OfferSigningBytes(neg.ID, 2, h.agent, h.ev.cp, counter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: neg.ID, From: SideCounterparty, Terms: counter,
		Signature: base64.RawURLEncoding.EncodeToString(ed25519.Sign(h.ev.cpKey, msg))}); err != nil {
		t.Fatal(err)
	}
	acc, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: neg.ID})
	if err != nil {
		t.Fatal(err)
	}
	termsID := acc.Terms.ID

	// An instruction that does not match the terms is denied.
	_, err = h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 2_000,
		func(in *pay.Instruction) { in.TermsID = termsID }), EvidenceFloor: ClassSign, Deadline: h.clock.Now().Add(time.Hour)})
	if code(err) != pay.CodeDenied {
		t.Fatalf("mismatching spend: %v, want intent.denied", err)
	}
	obl, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 2_500,
		func(in *pay.Instruction) { in.TermsID = termsID }), EvidenceFloor: ClassSign, Deadline: h.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if obl.Status != ObligationAwaiting {
		t.Fatalf("obligation %s", obl.Status)
	}
	// Below the floor: pending.
	stmt := `{"subject":"` + obl.ObligationID + `","delivered":"report v1"}`
	sub, err := h.svc.EvidenceSubmit(ctx, h.call(), &EvidenceSubmitRequest{Subject: obl.ObligationID, Class: ClassSelf, Statement: json.RawMessage(stmt)})
	if err != nil {
		t.Fatal(err)
	}
	if !sub.IsAccepted() || sub.Clearing.Problem.Code != CodeClearingPending || sub.Clearing.Problem.Awaited != ClassSign {
		t.Fatalf("self evidence: %+v", sub.Clearing)
	}
	// The seller's signature clears it.
	sub, err = h.svc.EvidenceSubmit(ctx, h.call(), &EvidenceSubmitRequest{Subject: obl.ObligationID, Class: ClassSign, Statement: json.RawMessage(stmt),
		Signature: h.ev.sign(t, h.ev.cpKey, obl.ObligationID, stmt)})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Clearing.Status != ClearingCleared || sub.Clearing.Receipt == nil {
		t.Fatalf("sign evidence: %+v", sub.Clearing)
	}

	// Insurance on the obligation.
	q, err := h.svc.InsuranceQuote(ctx, h.call(), &InsuranceQuoteRequest{Subject: obl.ObligationID, LimitMinor: 2_000})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := h.svc.InsuranceBind(ctx, h.call(), &InsuranceBindRequest{Subject: obl.ObligationID, LimitMinor: 2_000,
		Spend: h.spend("insurance.bind", railCard, q.Premium.Minor, func(in *pay.Instruction) { in.Payee = q.Payee })})
	if err != nil {
		t.Fatal(err)
	}
	if pol.Status != "active" {
		t.Fatalf("policy %s", pol.Status)
	}

	// Delivery, disputed by the operator, resolved for the buyer.
	dlv, err := h.svc.DeliveryRecord(ctx, h.call(), &DeliveryRecordRequest{Subject: obl.ObligationID, Description: "report v1", EvidenceIDs: []string{sub.Evidence.ID}})
	if err != nil {
		t.Fatal(err)
	}
	dsp, err := h.svc.DeliveryDispute(ctx, h.opCall("the report is empty"), &DeliveryDisputeRequest{DeliveryID: dlv.ID, Reason: "empty report",
		Override: Override{Rationale: "the report is empty"}})
	if err != nil {
		t.Fatal(err)
	}
	if dsp.StakeID != stk.ID || dsp.Respondent != h.ev.cp {
		t.Fatalf("dispute %+v", dsp)
	}
	if _, err := h.svc.StakeRelease(ctx, seller.call(), &StakeRef{StakeID: stk.ID}); code(err) != CodeStakeLocked && code(err) != CodeStakeDisputed {
		t.Fatalf("release under dispute: %v", err)
	}
	if _, err := h.svc.DisputeRespond(ctx, seller.call(), &DisputeRespondRequest{DisputeID: dsp.ID, Text: "it was full"}); err != nil {
		t.Fatal(err)
	}
	clm, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: pol.ID, DisputeID: dsp.ID, AmountMinor: 1_500})
	if err != nil {
		t.Fatal(err)
	}
	refund := int64(2_500)
	res, err := h.svc.DisputeResolve(ctx, h.opCall("the report was empty"), &DisputeResolveRequest{DisputeID: dsp.ID, Outcome: ForClaimant,
		RefundMinor: &refund, SlashMinor: 1_000, Override: Override{Rationale: "the report was empty"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resolution.RefundStatus != RefundDone || res.Resolution.SlashedMinor != 1_000 {
		t.Fatalf("resolution %+v", res.Resolution)
	}
	c, err := h.svc.ClaimGet(ctx, h.call(), &ClaimRef{ClaimID: clm.ID})
	if err != nil || c.Status != ClaimPaid {
		t.Fatalf("claim %+v %v", c, err)
	}
	b, err := h.svc.CustodyBalance(ctx, h.call(), &CustodyBalanceRequest{})
	if err != nil || b.Balances[0].AvailableMinor != 2_500 {
		t.Fatalf("buyer custody %+v %v (want slash 1000 + claim 1500)", b, err)
	}
	if err := h.st.View(ctx, func(r store.Reader) error { return ledger.Check(r) }); err != nil {
		t.Fatal(err)
	}
	if err := h.log.Verify(ctx, 1, 0, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	t.Log(h.typesSince(0))
}

// TestClearingAfterApproval: evidence that arrives while an obligation
// waits for a person is kept, and the first sweep after the approval
// clears the obligation once, on either rail.
func TestClearingAfterApproval(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			obl, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", rail, 20_000, nil),
				EvidenceFloor: ClassSign, Counterparty: h.ev.cp, Deadline: h.clock.Now().Add(time.Hour)})
			if err != nil || obl.Status != ObligationPendingApproval {
				t.Fatalf("create = %+v, %v", obl, err)
			}
			stmt := `{"subject":"` + obl.ObligationID + `","delivered":"all of it"}`
			sub, err := h.svc.EvidenceSubmit(ctx, h.call(), &EvidenceSubmitRequest{Subject: obl.ObligationID, Class: ClassSign,
				Statement: json.RawMessage(stmt), Signature: h.ev.sign(t, h.ev.cpKey, obl.ObligationID, stmt)})
			if err != nil || sub.Clearing.Status != ClearingPendingApproval {
				t.Fatalf("evidence while pending = %+v, %v", sub, err)
			}
			if _, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: obl.IntentID, Challenge: obl.Approval.Challenge,
				MandateID: obl.Approval.MandateID, Rationale: "checked the report", Acknowledged: true},
				pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "checked the report"}); err != nil {
				t.Fatal(err)
			}
			rep, err := h.svc.Sweep(ctx)
			if err != nil || rep.ObligationsCleared != 1 {
				t.Fatalf("sweep = %+v, %v", rep, err)
			}
			st, err := h.svc.ClearingStatus(ctx, h.call(), &ObligationRef{ObligationID: obl.ObligationID})
			if err != nil || st.Status != ClearingCleared || st.EvidenceID != sub.Evidence.ID {
				t.Fatalf("after the sweep = %+v, %v", st, err)
			}
			if rep, err := h.svc.Sweep(ctx); err != nil || rep.ObligationsCleared != 0 {
				t.Fatalf("second sweep = %+v, %v", rep, err)
			}
		})
	}
}
