package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// dspWorld is the seller's side of a dispute: the counterparty as an
// agent here, with custody and a stake that accepted terms put up, and
// the buyer's obligation under those terms, cleared on the seller's
// signed evidence.
type dspWorld struct {
	seller     *party
	stakeID    string
	termsID    string
	obl        *ObligationCreated
	evidenceID string
}

// dspSetup builds a dspWorld: the seller deposits 5,000 and stakes 3,000
// for 48 hours; the terms ask 2,500 on rail for a report, floor sign.
func dspSetup(t *testing.T, h *harness, rail string) dspWorld {
	t.Helper()
	ctx := t.Context()
	w := dspWorld{seller: h.seller()}
	if _, err := h.svc.CustodyDeposit(ctx, w.seller.call(), &CustodySpendRequest{Spend: h.spendAs(w.seller, "custody.deposit", railCard, 5_000,
		func(in *pay.Instruction) { in.Payee = DefaultCustodyPayee })}); err != nil {
		t.Fatal(err)
	}
	stk, err := h.svc.StakePost(ctx, w.seller.call(), &StakePostRequest{Amount: pay.Amount{Minor: 3_000, Currency: "USD"},
		LockedUntil: h.clock.Now().Add(48 * time.Hour), Purpose: "bond", IdempotencyKey: "stk-1"})
	if err != nil {
		t.Fatal(err)
	}
	w.stakeID = stk.ID
	w.termsID = oblTerms(t, h, TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2_500, Currency: "USD"}, Rail: rail,
		Description: "a report", EvidenceFloor: ClassSign, StakeID: stk.ID, ValidUntil: h.clock.Now().Add(24 * time.Hour)})
	w.obl, err = h.svc.ObligationCreate(ctx, h.call(), oblRequest(h, rail, 2_500, ClassSign, time.Hour,
		func(in *pay.Instruction) { in.TermsID = w.termsID }))
	if err != nil {
		t.Fatal(err)
	}
	sub := oblMustSubmit(t, h, w.obl.ObligationID, ClassSign, "report v1")
	if sub.Clearing.Status != ClearingCleared {
		t.Fatalf("the seller's signature did not clear: %s", clrLine(sub.Clearing))
	}
	w.evidenceID = sub.Evidence.ID
	return w
}

// dspPaid is a settled /pay payment of minor on rail.
func dspPaid(h *harness, rail string, minor int64) string {
	h.t.Helper()
	return mdtMustPay(h, rail, minor, pay.OutcomeSettled, nil).IntentID
}

// dspOpen opens a dispute as the buyer; claim 0 is all that remains.
func dspOpen(t *testing.T, h *harness, subject string, claim int64) *Dispute {
	t.Helper()
	d, err := h.svc.DisputeOpen(t.Context(), h.call(), &DisputeOpenRequest{Subject: subject, Reason: "not as agreed", ClaimMinor: claim})
	if err != nil {
		t.Fatalf("open a dispute on %s: %v", subject, err)
	}
	return d
}

// dspResolveReq is an operator's resolution; refund nil is the claim.
func dspResolveReq(id, outcome string, refund *int64, slash int64) *DisputeResolveRequest {
	return &DisputeResolveRequest{DisputeID: id, Outcome: outcome, RefundMinor: refund, SlashMinor: slash,
		Override: Override{Rationale: "the operator read both sides"}}
}

// dspResolve resolves a dispute as the operator.
func dspResolve(h *harness, id, outcome string, refund *int64, slash int64) (*Dispute, error) {
	return h.svc.DisputeResolve(h.t.Context(), h.opCall("the operator read both sides"), dspResolveReq(id, outcome, refund, slash))
}

// dspRefund is a resolution's refundMinor.
func dspRefund(v int64) *int64 { return &v }

// dspBalance is an account's USD balance in the ledger.
func dspBalance(t *testing.T, h *harness, account string) int64 {
	t.Helper()
	var b int64
	err := h.st.View(t.Context(), func(r store.Reader) error {
		var err error
		b, err = ledger.Balance(r, account, "USD")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dspBooks checks the ledger and the record.
func dspBooks(t *testing.T, h *harness) {
	t.Helper()
	if err := h.st.View(t.Context(), func(r store.Reader) error { return ledger.Check(r) }); err != nil {
		t.Errorf("ledger: %v", err)
	}
	if err := h.log.Verify(t.Context(), 1, 0, audit.Full, nil); err != nil {
		t.Errorf("record: %v", err)
	}
}

// dspRefunds is what the buyer's intent shows of its refunds.
func dspRefunds(t *testing.T, h *harness, intentID string) string {
	t.Helper()
	in, err := h.pay.Intent(t.Context(), h.caller, intentID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range in.Refunds {
		ids = append(ids, fmt.Sprint(r.Minor))
	}
	return fmt.Sprintf("%s refunded=%d refunds=[%s] entries=%d", in.Status, in.RefundedMinor, strings.Join(ids, " "),
		oblCount(t, h, "payment.refunded", intentID))
}

// dspLine is a dispute in one line.
func dspLine(d *Dispute) string {
	s := string(d.Status)
	if r := d.Resolution; r != nil {
		s += fmt.Sprintf(" %s refund=%d/%s slashed=%d claims=%d", r.Outcome, r.RefundMinor, r.RefundStatus, r.SlashedMinor, len(r.Claims))
	}
	return s
}

// dspGet reads a dispute as the buyer, in one line.
func dspGet(t *testing.T, h *harness, id string) string {
	t.Helper()
	d, err := h.svc.DisputeGet(t.Context(), h.call(), &DisputeRef{DisputeID: id})
	if err != nil {
		return "get: " + code(err)
	}
	return dspLine(d)
}

// dspStranger is a caller acting for an agent that is party to nothing.
func dspStranger() Call {
	return AgentCall(pay.Caller{KeyID: "ak_01JSTRANGER00000000000000", Agents: []string{oblStranger()}, Credential: gate.CredentialAPIKey}, "req_stranger")
}

// TestDeliveryLifecycle records a delivery for a cleared obligation (and
// refuses the records that break a rule), accepts it, and has the
// operator dispute it even once accepted; an agent cannot.
func TestDeliveryLifecycle(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := oblCleared(t, h, railCard, 2_000)
	evs, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: o.ObligationID})
	if err != nil || len(evs.Evidence) != 1 {
		t.Fatalf("evidence %+v, %v", evs, err)
	}
	ev := evs.Evidence[0].ID
	paid := dspPaid(h, railWire, 1_000)
	other := oblMustSubmit(t, h, paid, ClassSelf, "about the payment").Evidence.ID
	denied, err := mdtPay(h, railWire, 60_000, nil)
	if err != nil || denied.Outcome != pay.OutcomeDenied {
		t.Fatalf("pay above the cap: %+v, %v", denied, err)
	}
	awaiting := oblCreate(t, h, railCard, 1_000, ClassSelf)
	var dlv *DeliveryReport
	record := func(c Call, subject string, ids ...string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			d, err := h.svc.DeliveryRecord(ctx, c, &DeliveryRecordRequest{Subject: subject, Description: "report v1", EvidenceIDs: ids})
			if err == nil && subject == o.ObligationID {
				dlv = d
				if !strings.HasPrefix(d.ID, "dlv_") || d.IntentID != o.IntentID || d.Agent != h.agent || d.AgentKeyID != h.caller.KeyID ||
					!cmp.Equal(d.EvidenceIDs, ids) || len(d.Entries) != 1 {
					t.Errorf("recorded %+v", d)
				}
			}
			return dlvState(t, h, dlv), err
		}
	}
	get := func(c Call, id func() string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := h.svc.DeliveryGet(ctx, c, &DeliveryRef{DeliveryID: id()})
			return dlvState(t, h, dlv), err
		}
	}
	accept := func(c Call) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := h.svc.DeliveryAccept(ctx, c, &DeliveryRef{DeliveryID: dlv.ID})
			return dlvState(t, h, dlv), err
		}
	}
	dispute := func(c Call, id func() string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			req := &DeliveryDisputeRequest{DeliveryID: id(), Reason: "the report is empty", Override: Override{Rationale: "the report is empty"}}
			var err error
			if c.Operator == nil {
				_, err = h.svc.Call(ctx, "delivery.dispute", c, req)
			} else {
				var d *Dispute
				d, err = h.svc.DeliveryDispute(ctx, c, req)
				if err == nil && (d.OpenedBy != "operator" || d.DeliveryID != id() || d.Claimant != h.agent || d.ClaimantKeyID != h.caller.KeyID ||
					d.Claim.Minor != 2_000 || d.Status != DisputeOpen) {
					t.Errorf("dispute %+v", d)
				}
			}
			return dlvState(t, h, dlv), err
		}
	}
	dlvID := func() string { return dlv.ID }
	op := h.opCall("the report is empty")
	trnRun(t, h, []trnStep{
		{name: "record with evidence about another subject", do: record(h.call(), o.ObligationID, other), code: CodeDeliveryInvalid, state: "none"},
		{name: "record with unknown evidence", do: record(h.call(), o.ObligationID, "evd_nope"), code: CodeDeliveryInvalid, state: "none"},
		{name: "record for a denied payment", do: record(h.call(), denied.IntentID), code: CodeDeliveryInvalid, state: "none"},
		{name: "record for another key's subject", do: record(trnOtherKey(h), o.ObligationID), code: CodeEvidenceSubject, state: "none"},
		{name: "record for an unknown subject", do: record(h.call(), "obl_nope"), code: CodeEvidenceSubject, state: "none"},
		{name: "record", do: record(h.call(), o.ObligationID, ev), state: "recorded", types: []string{"protocol.delivery.record"}},
		{name: "record again", do: record(h.call(), o.ObligationID), code: CodeDeliveryExists, state: "recorded"},
		{name: "get", do: get(h.call(), dlvID), state: "recorded", same: true},
		{name: "get as another key", do: get(trnOtherKey(h), dlvID), code: CodeDeliveryNotFound, state: "recorded"},
		{name: "get unknown", do: get(h.call(), func() string { return "dlv_nope" }), code: CodeDeliveryNotFound, state: "recorded"},
		{name: "accept as another key", do: accept(trnOtherKey(h)), code: CodeDeliveryNotFound, state: "recorded"},
		{name: "accept", do: accept(h.call()), state: "accepted", types: []string{"protocol.delivery.accept"}},
		{name: "accept again", do: accept(h.call()), code: CodeDeliveryState, state: "accepted"},
		{name: "an agent disputes it", do: dispute(h.call(), dlvID), code: contract.CodeOperatorUnauthorized, state: "accepted"},
		{name: "the operator disputes an unknown delivery", do: dispute(op, func() string { return "dlv_nope" }), code: CodeDeliveryNotFound, state: "accepted"},
		{name: "the operator disputes it once accepted", do: dispute(op, dlvID), state: "disputed",
			types: []string{"protocol.delivery.dispute", "protocol.dispute.open"}},
		{name: "the operator disputes it again", do: dispute(op, dlvID), code: CodeDisputeExists, state: "disputed"},
		{name: "the agent opens a dispute on its subject", do: func(t *testing.T) (string, error) {
			_, err := h.svc.DisputeOpen(ctx, h.call(), &DisputeOpenRequest{Subject: o.ObligationID, Reason: "again"})
			return dlvState(t, h, dlv), err
		}, code: CodeDisputeExists, state: "disputed"},
		{name: "accept once disputed", do: accept(h.call()), code: CodeDeliveryState, state: "disputed"},
	}, nil)

	t.Run("a delivery for an obligation still awaiting evidence", func(t *testing.T) {
		d, err := h.svc.DeliveryRecord(ctx, h.call(), &DeliveryRecordRequest{Subject: awaiting.ObligationID, Description: "early"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Status != DeliveryRecorded || d.EvidenceIDs == nil {
			t.Errorf("recorded %+v", d)
		}
		refusedUnchanged(t, h, CodeDisputeUnsettled, func() error {
			_, err := h.svc.DeliveryDispute(ctx, op, &DeliveryDisputeRequest{DeliveryID: d.ID, Reason: "nothing came",
				Override: Override{Rationale: "nothing came yet"}})
			return err
		})
	})
	t.Run("the disputed delivery names its dispute", func(t *testing.T) {
		d, err := h.svc.DeliveryGet(ctx, h.call(), &DeliveryRef{DeliveryID: dlv.ID})
		if err != nil {
			t.Fatal(err)
		}
		dsp, err := h.svc.DisputeGet(ctx, h.call(), &DisputeRef{DisputeID: d.DisputeID})
		if err != nil || dsp.DeliveryID != dlv.ID || dsp.Subject != o.ObligationID || d.AcceptedAt == nil || len(d.Entries) != 3 {
			t.Errorf("delivery %+v, dispute %+v, %v", d, dsp, err)
		}
	})
}

// dlvState is a delivery's status as delivery.get shows it ("none" before
// it exists).
func dlvState(t *testing.T, h *harness, d *DeliveryReport) string {
	t.Helper()
	if d == nil {
		return "none"
	}
	got, err := h.svc.DeliveryGet(t.Context(), h.call(), &DeliveryRef{DeliveryID: d.ID})
	if err != nil {
		return "get: " + code(err)
	}
	return string(got.Status)
}

// TestDisputeOpen: a dispute opens on a settled payment or a cleared
// obligation of the caller, seeking at most what remains refundable (all
// of it by default), once per subject; everything else is refused with
// nothing changed. Only its parties see it.
func TestDisputeOpen(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	paid := dspPaid(h, railWire, 3_000)
	part := dspPaid(h, railCard, 3_000)
	if _, err := cusRefund(t, h, part, 1_000); err != nil {
		t.Fatal(err)
	}
	awaiting := oblCreate(t, h, railCard, 1_000, ClassSelf)
	cancelled := oblCreate(t, h, railWire, 1_000, ClassSelf)
	if _, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: cancelled.ObligationID}); err != nil {
		t.Fatal(err)
	}
	held := mdtMustPay(h, railWire, 20_000, pay.OutcomeHeld, nil).IntentID
	cleared := oblCleared(t, h, railCard, 2_000)
	open := func(subject string, claim int64) func() error {
		return func() error {
			_, err := h.svc.DisputeOpen(ctx, h.call(), &DisputeOpenRequest{Subject: subject, Reason: "not as agreed", ClaimMinor: claim})
			return err
		}
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"an obligation awaiting evidence", open(awaiting.ObligationID, 0), CodeDisputeUnsettled},
		{"a cancelled obligation", open(cancelled.ObligationID, 0), CodeDisputeUnsettled},
		{"a payment held for approval", open(held, 0), CodeDisputeUnsettled},
		{"a claim above the payment", open(paid, 3_001), CodeDisputeInvalid},
		{"a claim above what remains refundable", open(part, 2_001), CodeDisputeInvalid},
		{"an unknown subject", open("int_nope", 0), CodeEvidenceSubject},
		{"another key's payment", func() error {
			_, err := h.svc.DisputeOpen(ctx, trnOtherKey(h), &DisputeOpenRequest{Subject: paid, Reason: "not as agreed"})
			return err
		}, CodeEvidenceSubject},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedUnchanged(t, h, tc.want, tc.run) })
	}
	var first *Dispute
	for _, tc := range []struct {
		name    string
		subject string
		claim   int64
		want    int64
	}{
		{"a settled payment, all of it", paid, 0, 3_000},
		{"a partly refunded payment, what remains", part, 0, 2_000},
		{"a cleared obligation, part of it", cleared.ObligationID, 500, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := h.size()
			d := dspOpen(t, h, tc.subject, tc.claim)
			if first == nil {
				first = d
			}
			want := &Dispute{ID: d.ID, Status: DisputeOpen, Subject: tc.subject, IntentID: d.IntentID, Claimant: h.agent, ClaimantKeyID: h.caller.KeyID,
				OpenedBy: "agent", Reason: "not as agreed", Claim: pay.Amount{Minor: tc.want, Currency: "USD"}, CreatedAt: h.clock.Now(),
				UpdatedAt: h.clock.Now(), Entries: d.Entries}
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("dispute (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(d.ID, "dsp_") || !strings.HasPrefix(d.IntentID, "int_") || len(d.Entries) != 1 {
				t.Errorf("ids %s %s, entries %v", d.ID, d.IntentID, d.Entries)
			}
			if diff := cmp.Diff([]string{"protocol.dispute.open"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			got, err := h.svc.DisputeGet(ctx, h.call(), &DisputeRef{DisputeID: d.ID})
			if err != nil || !cmp.Equal(got, d) {
				t.Errorf("get %+v, %v", got, err)
			}
			refusedUnchanged(t, h, CodeDisputeExists, open(tc.subject, 0))
		})
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"get as a stranger", func() error {
			_, err := h.svc.DisputeGet(ctx, dspStranger(), &DisputeRef{DisputeID: first.ID})
			return err
		}, CodeDisputeNotFound},
		{"get unknown", func() error {
			_, err := h.svc.DisputeGet(ctx, h.call(), &DisputeRef{DisputeID: "dsp_nope"})
			return err
		}, CodeDisputeNotFound},
		{"respond without a respondent", func() error {
			_, err := h.svc.DisputeRespond(ctx, h.call(), &DisputeRespondRequest{DisputeID: first.ID, Text: "mine"})
			return err
		}, CodeDisputeNotParty},
		{"respond as a stranger", func() error {
			_, err := h.svc.DisputeRespond(ctx, dspStranger(), &DisputeRespondRequest{DisputeID: first.ID, Text: "mine"})
			return err
		}, CodeDisputeNotFound},
		{"resolve as an agent", func() error {
			_, err := h.svc.Call(ctx, "dispute.resolve", h.call(), dspResolveReq(first.ID, ForClaimant, nil, 0))
			return err
		}, contract.CodeOperatorUnauthorized},
		{"resolve unknown", func() error {
			_, err := dspResolve(h, "dsp_nope", ForClaimant, nil, 0)
			return err
		}, CodeDisputeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedUnchanged(t, h, tc.want, tc.run) })
	}
}

// TestDisputeStakeAndResolution: a dispute of an obligation under terms
// that name the seller's stake holds that stake (stake.disputed even
// after its lock) until an operator resolves it; only the seller responds,
// once; the resolution for the claimant refunds exactly once through the
// operator refund path and slashes into the buyer's custody; a resolved
// dispute is final, and the rest of the stake is the seller's again.
func TestDisputeStakeAndResolution(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			w := dspSetup(t, h, rail)
			var d *Dispute
			stakeState := func(t *testing.T) string {
				t.Helper()
				st, err := h.svc.StakeGet(ctx, w.seller.call(), &StakeRef{StakeID: w.stakeID})
				if err != nil {
					t.Fatal(err)
				}
				return fmt.Sprintf("stake %s slashed=%d seller=%d buyer=%d", st.Status, st.SlashedMinor,
					dspBalance(t, h, availableAccount(h.ev.cp)), dspBalance(t, h, availableAccount(h.agent)))
			}
			state := func(t *testing.T) string {
				t.Helper()
				return dspGet(t, h, d.ID) + "; " + stakeState(t) + "; " + dspRefunds(t, h, w.obl.IntentID)
			}
			step := func(run func(t *testing.T) error) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					err := run(t)
					return state(t), err
				}
			}
			respond := func(c Call) func(t *testing.T) (string, error) {
				return step(func(t *testing.T) error {
					_, err := h.svc.DisputeRespond(ctx, c, &DisputeRespondRequest{DisputeID: d.ID, Text: "the report was full", EvidenceIDs: []string{w.evidenceID}})
					return err
				})
			}
			release := step(func(t *testing.T) error {
				_, err := h.svc.StakeRelease(ctx, w.seller.call(), &StakeRef{StakeID: w.stakeID})
				return err
			})
			resolve := func(outcome string, refund *int64, slash int64) func(t *testing.T) (string, error) {
				return step(func(t *testing.T) error {
					_, err := dspResolve(h, d.ID, outcome, refund, slash)
					return err
				})
			}
			refunded := "settled refunded=0 refunds=[] entries=0"
			trnRun(t, h, []trnStep{
				{name: "open", do: func(t *testing.T) (string, error) {
					d = dspOpen(t, h, w.obl.ObligationID, 0)
					if d.StakeID != w.stakeID || d.Respondent != h.ev.cp || d.Claim.Minor != 2_500 {
						t.Errorf("dispute %+v", d)
					}
					return state(t), nil
				}, state: "open; stake locked slashed=0 seller=2000 buyer=0; " + refunded, types: []string{"protocol.dispute.open"}},
				{name: "release while locked", do: release, code: CodeStakeLocked, state: "open; stake locked slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "the lock ends", do: step(func(t *testing.T) error {
					h.clock.Add(48 * time.Hour)
					rep, err := h.svc.Sweep(ctx)
					if rep != (SweepReport{StakesUnlocked: 1}) {
						t.Errorf("sweep %+v", rep)
					}
					return err
				}), state: "open; stake releasable slashed=0 seller=2000 buyer=0; " + refunded, types: []string{"protocol.stake.unlock"}},
				{name: "release while disputed", do: release, code: CodeStakeDisputed, state: "open; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "the buyer responds", do: respond(h.call()), code: CodeDisputeNotParty, state: "open; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "the operator responds", do: func(t *testing.T) (string, error) {
					_, err := h.svc.Call(ctx, "dispute.respond", h.opCall("answering for the seller"), &DisputeRespondRequest{DisputeID: d.ID, Text: "x"})
					return state(t), err
				}, code: contract.CodeAuthMissing, state: "open; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "the seller responds", do: respond(w.seller.call()), state: "responded; stake releasable slashed=0 seller=2000 buyer=0; " + refunded,
					types: []string{"protocol.dispute.respond"}},
				{name: "the seller responds again", do: respond(w.seller.call()), code: CodeDisputeInvalid,
					state: "responded; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "resolve slashing more than the stake", do: resolve(ForClaimant, nil, 3_001), code: CodeDisputeInvalid,
					state: "responded; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "resolve for the respondent with a refund", do: resolve(ForRespondent, dspRefund(1), 0), code: CodeDisputeInvalid,
					state: "responded; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "resolve for the respondent with a slash", do: resolve(ForRespondent, nil, 1), code: CodeDisputeInvalid,
					state: "responded; stake releasable slashed=0 seller=2000 buyer=0; " + refunded},
				{name: "resolve for the claimant", do: resolve(ForClaimant, dspRefund(2_000), 1_000),
					state: "resolved claimant refund=2000/refunded slashed=1000 claims=0; stake releasable slashed=1000 seller=2000 buyer=1000; " +
						"partially_refunded refunded=2000 refunds=[2000] entries=1",
					types: []string{"protocol.stake.slash", "protocol.dispute.resolve", "protocol.obligation.refund", "protocol.dispute.refund",
						"payment.refunded", "protocol.obligation.refund"}},
				{name: "resolve again", do: resolve(ForClaimant, nil, 0), code: CodeDisputeResolved,
					state: "resolved claimant refund=2000/refunded slashed=1000 claims=0; stake releasable slashed=1000 seller=2000 buyer=1000; " +
						"partially_refunded refunded=2000 refunds=[2000] entries=1"},
				{name: "respond once resolved", do: respond(w.seller.call()), code: CodeDisputeResolved,
					state: "resolved claimant refund=2000/refunded slashed=1000 claims=0; stake releasable slashed=1000 seller=2000 buyer=1000; " +
						"partially_refunded refunded=2000 refunds=[2000] entries=1"},
				{name: "sweep", do: step(func(t *testing.T) error {
					rep, err := h.svc.Sweep(ctx)
					if rep != (SweepReport{}) {
						t.Errorf("sweep %+v", rep)
					}
					return err
				}), state: "resolved claimant refund=2000/refunded slashed=1000 claims=0; stake releasable slashed=1000 seller=2000 buyer=1000; " +
					"partially_refunded refunded=2000 refunds=[2000] entries=1", same: true},
				{name: "the seller releases the rest", do: release,
					state: "resolved claimant refund=2000/refunded slashed=1000 claims=0; stake released slashed=1000 seller=4000 buyer=1000; " +
						"partially_refunded refunded=2000 refunds=[2000] entries=1", types: []string{"protocol.stake.release"}},
			}, func(t *testing.T) { dspBooks(t, h) })

			t.Run("both parties see it", func(t *testing.T) {
				for _, c := range []Call{h.call(), w.seller.call()} {
					got, err := h.svc.DisputeGet(ctx, c, &DisputeRef{DisputeID: d.ID})
					if err != nil || got.Response == nil || got.Response.Text != "the report was full" || got.Response.AgentKeyID != w.seller.caller.KeyID ||
						got.Resolution.Operator != "op-test" || got.Resolution.Rationale != "the operator read both sides" || got.Resolution.RefundID == "" {
						t.Errorf("get %+v, %v", got, err)
					}
				}
			})
			t.Run("the rail refunded once", func(t *testing.T) {
				if n, sum := oblRailEntries(t, h, rail, fake.KindRefund, w.obl.IntentID); n != 1 || sum != 2_000 {
					t.Errorf("the rail refunded %d in %d refunds, want 2000 in 1", sum, n)
				}
			})
		})
	}
}

// TestDisputeResolveRefusals: a resolution that breaks a rule is refused
// with nothing changed.
func TestDisputeResolveRefusals(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	w := dspSetup(t, h, railCard)
	staked := dspOpen(t, h, w.obl.ObligationID, 0)
	plain := dspOpen(t, h, dspPaid(h, railWire, 1_000), 0)
	for _, tc := range []struct {
		name    string
		id      string
		outcome string
		refund  *int64
		slash   int64
		want    string
	}{
		{"slash without a stake", plain.ID, ForClaimant, nil, 1, CodeDisputeInvalid},
		{"slash more than the stake", staked.ID, ForClaimant, nil, 3_001, CodeDisputeInvalid},
		{"the respondent's with a refund", staked.ID, ForRespondent, dspRefund(100), 0, CodeDisputeInvalid},
		{"the respondent's with a slash", staked.ID, ForRespondent, dspRefund(0), 100, CodeDisputeInvalid},
		{"the respondent's with a slash and no stake", plain.ID, ForRespondent, nil, 1, CodeDisputeInvalid},
		{"unknown dispute", "dsp_nope", ForClaimant, nil, 0, CodeDisputeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedUnchanged(t, h, tc.want, func() error {
				_, err := dspResolve(h, tc.id, tc.outcome, tc.refund, tc.slash)
				return err
			})
		})
	}
}

// TestDisputeResolveForRespondent: resolved for the respondent, nothing
// moves (no refund, no slash), filed claims are rejected, and the stake is
// free again.
func TestDisputeResolveForRespondent(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	w := dspSetup(t, h, railCard)
	pol := insBind(t, h, w.obl.ObligationID, 2_000)
	d := dspOpen(t, h, w.obl.ObligationID, 0)
	clm, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: pol.ID, DisputeID: d.ID, AmountMinor: 1_500})
	if err != nil {
		t.Fatal(err)
	}
	balances := func() string {
		return fmt.Sprintf("buyer=%d seller=%d stake=%d pool=%d; %s", dspBalance(t, h, availableAccount(h.agent)),
			dspBalance(t, h, availableAccount(h.ev.cp)), dspBalance(t, h, stakeAccount(h.ev.cp, w.stakeID)), dspBalance(t, h, poolAccount),
			dspRefunds(t, h, w.obl.IntentID))
	}
	before, n := balances(), h.size()
	got, err := dspResolve(h, d.ID, ForRespondent, dspRefund(0), 0)
	if err != nil {
		t.Fatal(err)
	}
	if line := dspLine(got); line != "resolved respondent refund=0/none slashed=0 claims=1" || got.Resolution.Claims[0] != clm.ID {
		t.Errorf("resolution %s %+v", line, got.Resolution)
	}
	if diff := cmp.Diff([]string{"protocol.claim.reject", "protocol.dispute.resolve"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if after := balances(); after != before {
		t.Errorf("a resolution for the respondent moved money: %s, was %s", after, before)
	}
	c, err := h.svc.ClaimGet(ctx, h.call(), &ClaimRef{ClaimID: clm.ID})
	if err != nil || c.Status != ClaimRejected || c.PaidMinor != 0 {
		t.Errorf("claim %+v, %v", c, err)
	}
	p, err := h.svc.InsuranceGet(ctx, h.call(), &PolicyRef{PolicyID: pol.ID})
	if err != nil || p.ClaimedMinor != 0 || p.PaidMinor != 0 {
		t.Errorf("policy %+v, %v", p, err)
	}
	h.clock.Add(48 * time.Hour)
	if st, err := h.svc.StakeRelease(ctx, w.seller.call(), &StakeRef{StakeID: w.stakeID}); err != nil || st.Status != StakeReleased || st.SlashedMinor != 0 {
		t.Errorf("release after the resolution: %+v, %v", st, err)
	}
	if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
		t.Errorf("sweep %+v, %v", rep, err)
	}
	dspBooks(t, h)
}

// TestDisputeRefundFrozen: a resolution for the claimant while the kill
// switch is engaged is recorded with its refund pending; sweeps under the
// kill switch do not refund; after release (and a restart) one sweep
// refunds it exactly once, and later sweeps do nothing.
func TestDisputeRefundFrozen(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			paid := dspPaid(h, rail, 3_000)
			d := dspOpen(t, h, paid, 2_000)
			clrKill(t, h, true)
			sweep := func(want SweepReport) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					rep, err := h.svc.Sweep(ctx)
					if rep != want {
						t.Errorf("sweep %+v, want %+v", rep, want)
					}
					return dspGet(t, h, d.ID) + "; " + dspRefunds(t, h, paid), err
				}
			}
			trnRun(t, h, []trnStep{
				{name: "resolve while frozen", do: func(t *testing.T) (string, error) {
					got, err := dspResolve(h, d.ID, ForClaimant, nil, 0)
					if err == nil && (got.Resolution.RefundStatus != RefundPending || got.Resolution.RefundID != "") {
						t.Errorf("resolution %+v", got.Resolution)
					}
					return dspGet(t, h, d.ID) + "; " + dspRefunds(t, h, paid), err
				}, state: "resolved claimant refund=2000/pending slashed=0 claims=0; settled refunded=0 refunds=[] entries=0",
					types: []string{"protocol.dispute.resolve", "operator.refused"}},
				{name: "sweep while frozen", do: sweep(SweepReport{}),
					state: "resolved claimant refund=2000/pending slashed=0 claims=0; settled refunded=0 refunds=[] entries=0",
					same:  true}, // not even a refusal: the sweep waits for the release
				{name: "release and restart", do: func(t *testing.T) (string, error) {
					clrKill(t, h, false)
					h.restart()
					return dspGet(t, h, d.ID) + "; " + dspRefunds(t, h, paid), nil
				}, state: "resolved claimant refund=2000/pending slashed=0 claims=0; settled refunded=0 refunds=[] entries=0",
					types: []string{"operator.kill_switch"}},
				{name: "sweep", do: sweep(SweepReport{DisputeRefunds: 1}),
					state: "resolved claimant refund=2000/refunded slashed=0 claims=0; partially_refunded refunded=2000 refunds=[2000] entries=1",
					types: []string{"protocol.dispute.refund", "payment.refunded"}},
				{name: "sweep again", do: sweep(SweepReport{}),
					state: "resolved claimant refund=2000/refunded slashed=0 claims=0; partially_refunded refunded=2000 refunds=[2000] entries=1", same: true},
			}, func(t *testing.T) { dspBooks(t, h) })
			if n, sum := oblRailEntries(t, h, rail, fake.KindRefund, paid); n != 1 || sum != 2_000 {
				t.Errorf("the rail refunded %d in %d refunds, want 2000 in 1", sum, n)
			}
		})
	}
}

// TestDisputeRefundRefused: on an irreversible rail the resolution's
// refund is refused for good and recorded so; nothing is retried.
func TestDisputeRefundRefused(t *testing.T) {
	h := newHarness(t, harnessConfig{card: func(o *fake.Options) { o.Facts.Reversibility = settle.Irreversible }})
	ctx := t.Context()
	paid := mdtMustPay(h, railCard, 3_000, pay.OutcomeSettled, func(in *pay.Instruction) { in.Terms.Reversibility = gate.Irreversible }).IntentID
	d := dspOpen(t, h, paid, 0)
	n := h.size()
	got, err := dspResolve(h, d.ID, ForClaimant, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Resolution; r.RefundStatus != RefundRefused || r.RefundError == "" || r.RefundID != "" {
		t.Errorf("resolution %+v", r)
	}
	if diff := cmp.Diff([]string{"protocol.dispute.resolve", "protocol.dispute.refund"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if got := dspRefunds(t, h, paid); got != "settled refunded=0 refunds=[] entries=0" {
		t.Errorf("intent %s", got)
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
}

// TestDisputeList: dispute.list pages the disputes an identity of the
// caller is a party to (as claimant or respondent), oldest first, by
// status.
func TestDisputeList(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	w := dspSetup(t, h, railCard)
	a := dspOpen(t, h, dspPaid(h, railWire, 1_000), 0)
	b := dspOpen(t, h, w.obl.ObligationID, 0)
	c := dspOpen(t, h, dspPaid(h, railWire, 1_000), 0)
	e := dspOpen(t, h, dspPaid(h, railCard, 1_000), 0)
	if _, err := dspResolve(h, c.ID, ForRespondent, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.DisputeRespond(ctx, w.seller.call(), &DisputeRespondRequest{DisputeID: b.ID, Text: "it was full"}); err != nil {
		t.Fatal(err)
	}
	list := func(t *testing.T, call Call, agent string, status DisputeStatus, limit int) []string {
		t.Helper()
		var got []string
		cursor := ""
		for range 10 {
			p, err := h.svc.DisputeList(ctx, call, &DisputeListRequest{Agent: agent, Status: status, Cursor: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Disputes) > limit {
				t.Errorf("page of %d, limit %d", len(p.Disputes), limit)
			}
			for _, d := range p.Disputes {
				got = append(got, d.ID)
				if status != "" && d.Status != status {
					t.Errorf("%s is %s, listed as %s", d.ID, d.Status, status)
				}
			}
			if p.NextCursor == "" {
				return got
			}
			cursor = p.NextCursor
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	for _, tc := range []struct {
		name   string
		call   Call
		agent  string
		status DisputeStatus
		limit  int
		want   []string
	}{
		{"the buyer, pages of 1", h.call(), "", "", 1, []string{a.ID, b.ID, c.ID, e.ID}},
		{"the buyer, pages of 3", h.call(), h.agent, "", 3, []string{a.ID, b.ID, c.ID, e.ID}},
		{"the buyer's open ones", h.call(), "", DisputeOpen, 1, []string{a.ID, e.ID}},
		{"the buyer's responded ones", h.call(), "", DisputeResponded, 20, []string{b.ID}},
		{"the buyer's resolved ones", h.call(), "", DisputeResolved, 20, []string{c.ID}},
		{"the seller, as respondent", w.seller.call(), "", "", 20, []string{b.ID}},
		{"a stranger", dspStranger(), "", "", 20, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, list(t, tc.call, tc.agent, tc.status, tc.limit), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("another identity's disputes", func(t *testing.T) {
		refusedUnchanged(t, h, CodeCustodyAgent, func() error {
			_, err := h.svc.DisputeList(ctx, h.call(), &DisputeListRequest{Agent: h.ev.cp})
			return err
		})
	})
}

// TestDisputeMoneyConservation runs a seeded random sequence of the
// part-2 operations — obligations created, cleared, cancelled and left
// to expire; payments; disputes opened and resolved either way, with
// refunds and slashes; policies bound and claims filed; the pool funded;
// the kill switch engaged and released; sweeps — and checks after every
// few steps that the ledger balances, no intent is refunded beyond what
// it settled, no policy pays beyond its limit, and the record verifies.
func TestDisputeMoneyConservation(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(seed, 0x636c656172))
			w := dspSetup(t, h, railCard)
			rails := []string{railCard, railWire}
			var open, settled []string // obligations created; settled subjects
			var disputes []*Dispute
			resolved := map[string]bool{}   // dispute ids
			policies := map[string]string{} // subject -> policy
			limits := map[string]int64{}    // policy -> limit
			frozen := false
			done := map[string]int{} // successful operations by name
			pick := func(list []string) string { return list[rng.IntN(len(list))] }
			ops := []struct {
				name   string
				weight int
				run    func(i int) bool
			}{
				{"create", 15, func(int) bool {
					o, err := h.svc.ObligationCreate(ctx, h.call(), oblRequest(h, rails[rng.IntN(2)], 500+rng.Int64N(4_000), ClassSelf,
						time.Duration(1+rng.IntN(3))*time.Hour, nil))
					if err == nil {
						open = append(open, o.ObligationID)
					}
					return err == nil
				}},
				{"evidence", 15, func(i int) bool {
					if len(open) == 0 {
						return false
					}
					k := rng.IntN(len(open))
					id := open[k]
					sub, err := oblSubmit(t, h, id, ClassSelf, fmt.Sprint("step ", i))
					if err != nil || sub.Clearing.Status != ClearingCleared {
						return false
					}
					open = append(open[:k], open[k+1:]...)
					settled = append(settled, id)
					return true
				}},
				{"cancel", 5, func(int) bool {
					if len(open) == 0 {
						return false
					}
					_, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: pick(open)})
					return err == nil
				}},
				{"pay", 10, func(int) bool {
					res, err := mdtPay(h, rails[rng.IntN(2)], 500+rng.Int64N(4_000), nil)
					if err != nil || res.Outcome != pay.OutcomeSettled {
						return false
					}
					settled = append(settled, res.IntentID)
					return true
				}},
				{"dispute", 10, func(int) bool {
					if len(settled) == 0 {
						return false
					}
					subject := pick(settled)
					if len(policies) > 0 && rng.IntN(2) == 0 {
						// Often a covered subject, so claims have disputes to name.
						var covered []string
						for sub := range policies {
							covered = append(covered, sub)
						}
						slices.Sort(covered)
						subject = covered[rng.IntN(len(covered))]
					}
					d, err := h.svc.DisputeOpen(ctx, h.call(), &DisputeOpenRequest{Subject: subject, Reason: "random"})
					if err == nil {
						disputes = append(disputes, d)
					}
					return err == nil
				}},
				{"resolve", 12, func(int) bool {
					var live []*Dispute
					for _, d := range disputes {
						if !resolved[d.ID] {
							live = append(live, d)
						}
					}
					if len(live) == 0 {
						return false
					}
					d := live[rng.IntN(len(live))]
					outcome, refund, slash := ForRespondent, (*int64)(nil), int64(0)
					if rng.IntN(3) > 0 {
						outcome, refund = ForClaimant, dspRefund(rng.Int64N(d.Claim.Minor+1))
						if d.StakeID != "" {
							slash = rng.Int64N(1_500)
						}
					}
					_, err := dspResolve(h, d.ID, outcome, refund, slash)
					if err == nil {
						resolved[d.ID] = true
					}
					return err == nil
				}},
				{"bind", 8, func(int) bool {
					if len(settled) == 0 {
						return false
					}
					// Cover is bought before a dispute, up to the subject's amount.
					subject := pick(settled)
					var amount int64
					if id, ok := prefixID(subject, "obl_", "int_"); ok {
						in, err := h.pay.Intent(ctx, h.caller, id)
						if err != nil {
							return false
						}
						amount = in.Amount.Minor
					} else if in, err := h.pay.Intent(ctx, h.caller, subject); err == nil {
						amount = in.Amount.Minor
					} else {
						return false
					}
					limit := 1 + rng.Int64N(amount)
					q, err := h.svc.InsuranceQuote(ctx, h.call(), &InsuranceQuoteRequest{Subject: subject, LimitMinor: limit})
					if err != nil {
						return false
					}
					p, err := h.svc.InsuranceBind(ctx, h.call(), &InsuranceBindRequest{Subject: subject, LimitMinor: limit,
						Spend: h.spend("insurance.bind", rails[rng.IntN(2)], q.Premium.Minor, func(in *pay.Instruction) { in.Payee = q.Payee })})
					if err == nil && p.Status == "active" {
						policies[subject], limits[p.ID] = p.ID, limit
					}
					return err == nil
				}},
				{"claim", 8, func(int) bool {
					var covered []*Dispute
					for _, d := range disputes {
						if _, ok := policies[d.Subject]; ok {
							covered = append(covered, d)
						}
					}
					if len(covered) == 0 {
						return false
					}
					d := covered[rng.IntN(len(covered))]
					pol := policies[d.Subject]
					_, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: pol, DisputeID: d.ID, AmountMinor: 1 + rng.Int64N(limits[pol]+200)})
					return err == nil
				}},
				{"fund the pool", 5, func(int) bool {
					_, err := h.svc.CustodyDeposit(ctx, w.seller.call(), &CustodySpendRequest{Spend: h.spendAs(w.seller, "custody.deposit", rails[rng.IntN(2)],
						500+rng.Int64N(2_000), func(in *pay.Instruction) { in.Payee = DefaultInsurancePayee })})
					return err == nil
				}},
				{"kill switch", 4, func(int) bool {
					frozen = !frozen
					clrKill(t, h, frozen)
					return true
				}},
				{"sweep", 8, func(int) bool {
					h.clock.Add(time.Duration(rng.IntN(90)) * time.Minute)
					if _, err := h.svc.Sweep(ctx); err != nil {
						t.Fatalf("sweep: %v", err)
					}
					return true
				}},
			}
			total := 0
			for _, op := range ops {
				total += op.weight
			}
			for i := range 150 {
				if frozen && rng.IntN(3) == 0 {
					frozen = false
					clrKill(t, h, false)
				}
				n := rng.IntN(total)
				for _, op := range ops {
					if n < op.weight {
						if op.run(i) {
							done[op.name]++
						}
						break
					}
					n -= op.weight
				}
				if i%15 == 14 {
					dspConserved(t, h, policies)
				}
			}
			if frozen {
				clrKill(t, h, false)
			}
			h.clock.Add(4 * time.Hour)
			if _, err := h.svc.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			dspConserved(t, h, policies)
			for _, rail := range []string{railCard, railWire} {
				if err := oblRail(h, rail).CheckLedger(ctx); err != nil {
					t.Error(err)
				}
			}
			for _, name := range []string{"create", "evidence", "pay", "dispute", "resolve", "bind", "claim"} {
				if done[name] == 0 {
					t.Errorf("the sequence never managed a %s: %v", name, done)
				}
			}
			t.Logf("done %v", done)
		})
	}
}

// dspConserved checks the money invariants: the ledger balances, every
// intent's refunds stay within what it settled, and every policy pays at
// most its limit; and the record verifies.
func dspConserved(t *testing.T, h *harness, policies map[string]string) {
	t.Helper()
	ctx := t.Context()
	dspBooks(t, h)
	err := h.pay.IntentsOf(ctx, h.caller.KeyID, time.Time{}, h.clock.Now().Add(time.Hour), func(in *pay.Intent) bool {
		if in.RefundedMinor > in.SettledMinor() {
			t.Errorf("intent %s refunded %d of %d settled", in.ID, in.RefundedMinor, in.SettledMinor())
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, pol := range policies {
		p, err := h.svc.InsuranceGet(ctx, h.call(), &PolicyRef{PolicyID: pol})
		if err != nil {
			t.Fatal(err)
		}
		if p.PaidMinor > p.Limit.Minor || p.ClaimedMinor > p.Limit.Minor {
			t.Errorf("policy %s paid %d, claimed %d, limit %d", p.ID, p.PaidMinor, p.ClaimedMinor, p.Limit.Minor)
		}
	}
	if b := dspBalance(t, h, poolAccount); b < 0 {
		t.Errorf("pool balance %d", b)
	}
}

// TestDisputeRefundRailFault: a resolution's refund whose rail answer is
// lost is started (in_progress), not retried by the sweep — the refund
// exists and belongs to the money path — and the reconciler finishes it,
// exactly once.
func TestDisputeRefundRailFault(t *testing.T) {
	h := newHarness(t, harnessConfig{card: func(o *fake.Options) { o.Fault = fake.FailNext(fake.OpRefund, 1, fake.AfterMove(nil)) }})
	ctx := t.Context()
	paid := dspPaid(h, railCard, 3_000)
	d := dspOpen(t, h, paid, 1_000)
	n := h.size()
	got, err := dspResolve(h, d.ID, ForClaimant, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Resolution; r.RefundStatus != RefundProgress || r.RefundID == "" {
		t.Errorf("resolution %+v", r)
	}
	if diff := cmp.Diff([]string{"protocol.dispute.resolve", "protocol.dispute.refund"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	before := h.dump()
	if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
		t.Errorf("sweep %+v, %v", rep, err)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the sweep touched a started refund:\n%s", diff)
	}
	if _, err := h.pay.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if line := dspGet(t, h, d.ID); line != "resolved claimant refund=1000/refunded slashed=0 claims=0" {
		t.Errorf("dispute %s", line)
	}
	if got := dspRefunds(t, h, paid); got != "partially_refunded refunded=1000 refunds=[1000] entries=1" {
		t.Errorf("intent %s", got)
	}
	if n, sum := oblRailEntries(t, h, railCard, fake.KindRefund, paid); n != 1 || sum != 1_000 {
		t.Errorf("the rail refunded %d in %d refunds, want 1000 in 1", sum, n)
	}
	dspBooks(t, h)
}

// TestDisputeStakeOfTwo: a stake two disputes name stays held until both
// are resolved; slashes across them never take more than it holds.
func TestDisputeStakeOfTwo(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	w := dspSetup(t, h, railWire)
	second, err := h.svc.ObligationCreate(ctx, h.call(), oblRequest(h, railWire, 2_500, ClassSign, time.Hour,
		func(in *pay.Instruction) { in.TermsID = w.termsID }))
	if err != nil {
		t.Fatal(err)
	}
	if sub := oblMustSubmit(t, h, second.ObligationID, ClassSign, "report v2"); sub.Clearing.Status != ClearingCleared {
		t.Fatalf("clearing %s", clrLine(sub.Clearing))
	}
	d1, d2 := dspOpen(t, h, w.obl.ObligationID, 0), dspOpen(t, h, second.ObligationID, 0)
	if d1.StakeID != w.stakeID || d2.StakeID != w.stakeID {
		t.Fatalf("stakes %q %q, want %q", d1.StakeID, d2.StakeID, w.stakeID)
	}
	h.clock.Add(48 * time.Hour)
	release := func() error {
		_, err := h.svc.StakeRelease(ctx, w.seller.call(), &StakeRef{StakeID: w.stakeID})
		return err
	}
	if _, err := dspResolve(h, d1.ID, ForClaimant, dspRefund(0), 2_000); err != nil {
		t.Fatal(err)
	}
	t.Run("release while the other dispute is open", func(t *testing.T) { refusedUnchanged(t, h, CodeStakeDisputed, release) })
	t.Run("slash more than is left", func(t *testing.T) {
		refusedUnchanged(t, h, CodeDisputeInvalid, func() error {
			_, err := dspResolve(h, d2.ID, ForClaimant, dspRefund(0), 1_001)
			return err
		})
	})
	if _, err := dspResolve(h, d2.ID, ForClaimant, dspRefund(0), 1_000); err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.StakeGet(ctx, w.seller.call(), &StakeRef{StakeID: w.stakeID})
	if err != nil || st.Status != StakeSlashed || st.SlashedMinor != 3_000 {
		t.Errorf("stake %+v, %v", st, err)
	}
	t.Run("release once slashed", func(t *testing.T) { refusedUnchanged(t, h, CodeStakeReleased, release) })
	if got := dspBalance(t, h, availableAccount(h.agent)); got != 3_000 {
		t.Errorf("buyer custody %d, want the 3000 slashed", got)
	}
	dspBooks(t, h)
}
