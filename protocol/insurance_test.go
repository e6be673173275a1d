package protocol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/pay"
)

// insBindRequest is an insurance.bind request on the card rail paying
// premium (the schedule's for limit when premium is 0) to payee (the
// pool's when "").
func insBindRequest(h *harness, subject string, limit, premium int64, payee string) *InsuranceBindRequest {
	if premium == 0 {
		sch, _ := h.insurance.withDefaults()
		premium = sch.Premium(limit)
	}
	if payee == "" {
		sch, _ := h.insurance.withDefaults()
		payee = sch.Payee
	}
	return &InsuranceBindRequest{Subject: subject, LimitMinor: limit,
		Spend: h.spend("insurance.bind", railCard, premium, func(in *pay.Instruction) { in.Payee = payee })}
}

// insBind binds a policy of limit on subject; it must be active.
func insBind(t *testing.T, h *harness, subject string, limit int64) *PolicyBound {
	t.Helper()
	p, err := h.svc.InsuranceBind(t.Context(), h.call(), insBindRequest(h, subject, limit, 0, ""))
	if err != nil {
		t.Fatalf("bind %d on %s: %v", limit, subject, err)
	}
	if p.Status != "active" {
		t.Fatalf("policy %+v, want active", p)
	}
	return p
}

// insFundPool deposits minor into the insurance pool (as the seller: the
// pool's funding is nobody's custody).
func insFundPool(t *testing.T, h *harness, minor int64) {
	t.Helper()
	s := h.seller()
	m, err := h.svc.CustodyDeposit(t.Context(), s.call(), &CustodySpendRequest{Spend: h.spendAs(s, "custody.deposit", railWire, minor,
		func(in *pay.Instruction) { in.Payee = DefaultInsurancePayee })})
	if err != nil || m.Status != string(pay.StatusSettled) {
		t.Fatalf("fund the pool with %d: %+v, %v", minor, m, err)
	}
}

// insState is a claim, its policy and the money around them in one line.
func insState(t *testing.T, h *harness, claimID, policyID string) string {
	t.Helper()
	s := "claim none"
	if claimID != "" {
		c, err := h.svc.ClaimGet(t.Context(), h.call(), &ClaimRef{ClaimID: claimID})
		if err != nil {
			s = "claim get: " + code(err)
		} else {
			s = fmt.Sprintf("claim %s paid=%d", c.Status, c.PaidMinor)
		}
	}
	p, err := h.svc.InsuranceGet(t.Context(), h.call(), &PolicyRef{PolicyID: policyID})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s; policy %s claimed=%d paid=%d; pool=%d buyer=%d", s, p.Status, p.ClaimedMinor, p.PaidMinor,
		dspBalance(t, h, poolAccount), dspBalance(t, h, availableAccount(h.agent)))
}

// TestInsuranceQuote: the premium is the schedule's rate of the limit,
// rounded up, at least its minimum; a limit above the schedule's is
// refused; quoting changes nothing.
func TestInsuranceQuote(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule InsuranceSchedule
		payee    string
		rate     int64
		quotes   map[int64]int64 // limit -> premium
		tooLarge int64
	}{
		{"default schedule", InsuranceSchedule{}, DefaultInsurancePayee, 300,
			map[int64]int64{1: 100, 2_000: 100, 3_333: 100, 3_334: 101, 10_000: 300, 10_001: 301, 10_000_000: 300_000}, 10_000_001},
		{"custom schedule", InsuranceSchedule{Payee: "acct:pool.example", RateBps: 500, MinPremiumMinor: 50, MaxLimitMinor: 20_000}, "acct:pool.example", 500,
			map[int64]int64{500: 50, 1_000: 50, 1_001: 51, 20_000: 1_000}, 20_001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{insurance: tc.schedule})
			ctx := t.Context()
			o := oblCleared(t, h, railWire, 2_000)
			for limit, premium := range tc.quotes {
				before := h.dump()
				q, err := h.svc.InsuranceQuote(ctx, h.call(), &InsuranceQuoteRequest{Subject: o.ObligationID, LimitMinor: limit})
				if err != nil {
					t.Fatalf("quote %d: %v", limit, err)
				}
				want := &InsuranceQuote{Subject: o.ObligationID, Limit: pay.Amount{Minor: limit, Currency: "USD"},
					Premium: pay.Amount{Minor: premium, Currency: "USD"}, Payee: tc.payee, RateBps: tc.rate}
				if diff := cmp.Diff(want, q); diff != "" {
					t.Errorf("quote of %d (-want +got):\n%s", limit, diff)
				}
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("a quote changed the store:\n%s", diff)
				}
			}
			for _, c := range []struct {
				name    string
				subject string
				limit   int64
				want    string
			}{
				{"a limit above the schedule's", o.ObligationID, tc.tooLarge, CodeInsuranceInvalid},
				{"an unknown subject", "obl_nope", 1_000, CodeEvidenceSubject},
			} {
				t.Run(c.name, func(t *testing.T) {
					refusedUnchanged(t, h, c.want, func() error {
						_, err := h.svc.InsuranceQuote(ctx, h.call(), &InsuranceQuoteRequest{Subject: c.subject, LimitMinor: c.limit})
						return err
					})
				})
			}
			t.Run("bind what was quoted", func(t *testing.T) {
				q, err := h.svc.InsuranceQuote(ctx, h.call(), &InsuranceQuoteRequest{Subject: o.ObligationID, LimitMinor: 1_001})
				if err != nil {
					t.Fatal(err)
				}
				p, err := h.svc.InsuranceBind(ctx, h.call(), &InsuranceBindRequest{Subject: o.ObligationID, LimitMinor: 1_001,
					Spend: h.spend("insurance.bind", railCard, q.Premium.Minor, func(in *pay.Instruction) { in.Payee = q.Payee })})
				if err != nil || p.Status != "active" || p.Premium != q.Premium {
					t.Fatalf("bound %+v, %v", p, err)
				}
				if got := dspBalance(t, h, poolAccount); got != q.Premium.Minor {
					t.Errorf("pool %d, want the premium %d", got, q.Premium.Minor)
				}
			})
		})
	}
}

// TestInsuranceBind: a policy binds with exactly the quoted premium paid
// to the pool (active once it settles, the pool credited), once per
// subject; a repeat answers the first answer; every bind that breaks a
// rule is refused with nothing changed.
func TestInsuranceBind(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := oblCleared(t, h, railCard, 5_000)
	cancelled := oblCreate(t, h, railWire, 1_000, ClassSelf)
	if _, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: cancelled.ObligationID}); err != nil {
		t.Fatal(err)
	}
	bind := func(c Call, req *InsuranceBindRequest) func() error {
		return func() error {
			_, err := h.svc.InsuranceBind(ctx, c, req)
			return err
		}
	}
	for _, tc := range []struct {
		name string
		req  func() *InsuranceBindRequest
		call Call
		want string
	}{
		{"a premium too small", func() *InsuranceBindRequest { return insBindRequest(h, o.ObligationID, 3_000, 99, "") }, h.call(), CodeInsurancePremium},
		{"a premium too large", func() *InsuranceBindRequest { return insBindRequest(h, o.ObligationID, 3_000, 101, "") }, h.call(), CodeInsurancePremium},
		{"a premium in another currency", func() *InsuranceBindRequest {
			r := insBindRequest(h, o.ObligationID, 3_000, 0, "")
			r.Spend = h.spend("insurance.bind", railCard, 100, func(in *pay.Instruction) { in.Payee, in.Amount.Currency = DefaultInsurancePayee, "EUR" })
			return r
		}, h.call(), CodeInsurancePremium},
		{"paying the custody account", func() *InsuranceBindRequest {
			return insBindRequest(h, o.ObligationID, 3_000, 0, DefaultCustodyPayee)
		}, h.call(), CodeCustodyWrongPayee},
		{"paying the seller", func() *InsuranceBindRequest {
			return insBindRequest(h, o.ObligationID, 3_000, 0, "acct:seller.example")
		}, h.call(), CodeCustodyWrongPayee},
		{"a limit above the schedule's", func() *InsuranceBindRequest {
			return insBindRequest(h, o.ObligationID, 10_000_001, 0, "")
		}, h.call(), CodeInsuranceInvalid},
		{"an unknown subject", func() *InsuranceBindRequest { return insBindRequest(h, "int_nope", 1_000, 0, "") }, h.call(), CodeEvidenceSubject},
		{"another key's subject", func() *InsuranceBindRequest { return insBindRequest(h, o.ObligationID, 1_000, 0, "") }, trnOtherKey(h), CodeEvidenceSubject},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedUnchanged(t, h, tc.want, bind(tc.call, tc.req())) })
	}
	t.Run("a cancelled obligation", func(t *testing.T) {
		// Decided with the premium: a denial, recorded, nothing reserved.
		_, err := h.svc.InsuranceBind(ctx, h.call(), insBindRequest(h, cancelled.ObligationID, 1_000, 0, ""))
		trnWantDenied(t, err, ReasonNothingToCover)
	})

	req := insBindRequest(h, o.ObligationID, 3_000, 0, "")
	var first *PolicyBound
	t.Run("bind", func(t *testing.T) {
		n := h.size()
		var err error
		first, err = h.svc.InsuranceBind(ctx, h.call(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := InsurancePolicy{ID: "pol_" + strings.TrimPrefix(first.IntentID, "int_"), Status: "active", IntentID: first.IntentID,
			Subject: o.ObligationID, Limit: pay.Amount{Minor: 3_000, Currency: "USD"}, Premium: pay.Amount{Minor: 100, Currency: "USD"},
			CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(), Entries: first.Entries}
		if diff := cmp.Diff(want, first.InsurancePolicy); diff != "" {
			t.Errorf("policy (-want +got):\n%s", diff)
		}
		if first.IsAccepted() || first.WasReplayed() || first.Approval != nil || len(first.Entries) != 4 {
			t.Errorf("bound %+v", first)
		}
		if diff := cmp.Diff([]string{"gate.decision", "protocol.insurance.bind", "payment.settled", "protocol.insurance.settle"}, h.typesSince(n)); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if got := dspBalance(t, h, poolAccount); got != 100 {
			t.Errorf("pool %d, want the premium 100", got)
		}
		got, err := h.svc.InsuranceGet(ctx, h.call(), &PolicyRef{PolicyID: first.ID})
		if err != nil || !cmp.Equal(*got, first.InsurancePolicy) {
			t.Errorf("get %+v, %v", got, err)
		}
	})
	t.Run("bind again", func(t *testing.T) {
		before := h.dump()
		again, err := h.svc.InsuranceBind(ctx, h.call(), req)
		if err != nil {
			t.Fatal(err)
		}
		trnReplay(t, first, again)
		if diff := cmp.Diff(before, h.dump()); diff != "" {
			t.Errorf("a replay changed the store:\n%s", diff)
		}
	})
	t.Run("the same key, another limit", func(t *testing.T) {
		other := *req
		other.LimitMinor = 2_000 // the same premium
		refusedUnchanged(t, h, pay.CodeIdempotencyConflict, bind(h.call(), &other))
	})
	t.Run("a second policy on the subject", func(t *testing.T) {
		n := h.size()
		_, err := h.svc.InsuranceBind(ctx, h.call(), insBindRequest(h, o.ObligationID, 1_000, 0, ""))
		if code(err) != pay.CodeDenied {
			t.Fatalf("second bind: %v, want %s", err, pay.CodeDenied)
		}
		trnWantDenied(t, err, ReasonAlreadyCovered)
		if diff := cmp.Diff([]string{"gate.decision", "protocol.insurance.bind"}, h.typesSince(n)); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if got := dspBalance(t, h, poolAccount); got != 100 {
			t.Errorf("pool %d after a denied bind, want 100", got)
		}
	})
	t.Run("bind again once claimed on", func(t *testing.T) {
		// The Replayer contract: a repeat answers the first answer's
		// bytes, whatever became of the policy since.
		d := dspOpen(t, h, o.ObligationID, 0)
		if _, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: first.ID, DisputeID: d.ID, AmountMinor: 1_000}); err != nil {
			t.Fatal(err)
		}
		before := h.dump()
		again, err := h.svc.InsuranceBind(ctx, h.call(), req)
		if err != nil {
			t.Fatal(err)
		}
		trnReplay(t, first, again)
		if diff := cmp.Diff(before, h.dump()); diff != "" {
			t.Errorf("a replay changed the store:\n%s", diff)
		}
	})
	for _, tc := range []struct {
		name string
		call Call
		id   string
	}{
		{"get as another key", trnOtherKey(h), ""},
		{"get unknown", h.call(), "pol_nope"},
		{"get an obligation as a policy", h.call(), "pol_" + strings.TrimPrefix(o.IntentID, "int_")},
		{"get by intent id", h.call(), "int_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := tc.id
			switch id {
			case "":
				id = first.ID
			case "int_":
				id = first.IntentID
			}
			refusedUnchanged(t, h, CodePolicyNotFound, func() error {
				_, err := h.svc.InsuranceGet(ctx, tc.call, &PolicyRef{PolicyID: id})
				return err
			})
		})
	}
}

// TestInsuranceBindHeldForApproval: a premium at or above the confirm
// threshold waits for a person (202); the policy is not in force (claims
// refused) and covers the subject already (a second bind is denied);
// approved, it settles into the pool and is active.
func TestInsuranceBindHeldForApproval(t *testing.T) {
	h := newHarness(t, harnessConfig{insurance: InsuranceSchedule{MinPremiumMinor: 12_000}})
	ctx := t.Context()
	subject := dspPaid(h, railWire, 3_000)
	req := insBindRequest(h, subject, 3_000, 0, "") // the minimum premium, 12,000
	p, err := h.svc.InsuranceBind(ctx, h.call(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a second policy while the first waits", func(t *testing.T) {
		_, err := h.svc.InsuranceBind(ctx, h.call(), insBindRequest(h, subject, 1_000, 0, ""))
		trnWantDenied(t, err, ReasonAlreadyCovered)
	})
	d := dspOpen(t, h, subject, 0)
	if p.Status != string(pay.StatusPendingApproval) || !p.IsAccepted() || p.Approval == nil || p.Premium.Minor != 12_000 {
		t.Fatalf("bound %+v", p)
	}
	if got := dspBalance(t, h, poolAccount); got != 0 {
		t.Errorf("pool %d before the premium settled", got)
	}
	t.Run("claim before approval", func(t *testing.T) {
		refusedUnchanged(t, h, CodeClaimPolicy, func() error {
			_, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: p.ID, DisputeID: d.ID, AmountMinor: 1_000})
			return err
		})
	})
	n := h.size()
	if res, err := trnApprove(t, h, p.IntentID, p.Approval); err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatalf("approve: %+v, %v", res, err)
	}
	if diff := cmp.Diff([]string{"approval.granted", "protocol.insurance.approve", "payment.settled", "protocol.insurance.settle"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries of the approval (-want +got):\n%s", diff)
	}
	if got := insState(t, h, "", p.ID); got != "claim none; policy active claimed=0 paid=0; pool=12000 buyer=0" {
		t.Errorf("state %s", got)
	}
	again, err := h.svc.InsuranceBind(ctx, h.call(), req)
	if err != nil || !again.WasReplayed() || again.Status != string(pay.StatusPendingApproval) {
		t.Errorf("replay %+v, %v", again, err)
	}
	c, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: p.ID, DisputeID: d.ID, AmountMinor: 1_000})
	if err != nil || c.Status != ClaimFiled {
		t.Errorf("claim after approval %+v, %v", c, err)
	}
}

// TestClaimLifecycle files a claim on an active policy for the caller's
// dispute about its subject (refusing the claims that break a rule with
// nothing changed), then resolves the dispute for the claimant: the claim
// is paid from the pool into the claimant's custody, once.
func TestClaimLifecycle(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := oblCleared(t, h, railCard, 5_000)
	pol := insBind(t, h, o.ObligationID, 3_000)
	insFundPool(t, h, 9_000)
	d := dspOpen(t, h, o.ObligationID, 0)
	otherSubject := dspPaid(h, railWire, 2_000)
	otherPol := insBind(t, h, otherSubject, 1_000)
	otherDispute := dspOpen(t, h, otherSubject, 0)
	var clm *Claim
	file := func(c Call, policy, dispute string, minor int64) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			got, err := h.svc.ClaimFile(ctx, c, &ClaimFileRequest{PolicyID: policy, DisputeID: dispute, AmountMinor: minor})
			if err == nil && clm == nil {
				clm = got
				want := &Claim{ID: got.ID, Status: ClaimFiled, PolicyID: pol.ID, DisputeID: d.ID, Agent: h.agent, AgentKeyID: h.caller.KeyID,
					Amount: pay.Amount{Minor: minor, Currency: "USD"}, CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(), Entries: got.Entries}
				if diff := cmp.Diff(want, got); diff != "" || !strings.HasPrefix(got.ID, "clm_") || len(got.Entries) != 1 {
					t.Errorf("claim (-want +got):\n%s", diff)
				}
			}
			id := ""
			if clm != nil {
				id = clm.ID
			}
			return insState(t, h, id, pol.ID), err
		}
	}
	trnRun(t, h, []trnStep{
		{name: "an unknown policy", do: file(h.call(), "pol_nope", d.ID, 1_000), code: CodePolicyNotFound,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "another key's policy", do: file(trnOtherKey(h), pol.ID, d.ID, 1_000), code: CodePolicyNotFound,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "an unknown dispute", do: file(h.call(), pol.ID, "dsp_nope", 1_000), code: CodeDisputeNotFound,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "a dispute about another subject", do: file(h.call(), pol.ID, otherDispute.ID, 1_000), code: CodeClaimInvalid,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "the other policy for this dispute", do: file(h.call(), otherPol.ID, d.ID, 500), code: CodeClaimInvalid,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "more than the limit", do: file(h.call(), pol.ID, d.ID, 3_001), code: CodeClaimExceedsLimit,
			state: "claim none; policy active claimed=0 paid=0; pool=9200 buyer=0"},
		{name: "file", do: file(h.call(), pol.ID, d.ID, 2_000), state: "claim filed paid=0; policy active claimed=2000 paid=0; pool=9200 buyer=0",
			types: []string{"protocol.claim.file"}},
		{name: "file again on the dispute", do: file(h.call(), pol.ID, d.ID, 500), code: CodeClaimExists,
			state: "claim filed paid=0; policy active claimed=2000 paid=0; pool=9200 buyer=0"},
		{name: "get as another key", do: func(t *testing.T) (string, error) {
			_, err := h.svc.ClaimGet(ctx, trnOtherKey(h), &ClaimRef{ClaimID: clm.ID})
			return insState(t, h, clm.ID, pol.ID), err
		}, code: CodeClaimNotFound, state: "claim filed paid=0; policy active claimed=2000 paid=0; pool=9200 buyer=0"},
		{name: "the dispute is resolved for the claimant", do: func(t *testing.T) (string, error) {
			got, err := dspResolve(h, d.ID, ForClaimant, dspRefund(0), 0)
			if err == nil && (dspLine(got) != "resolved claimant refund=0/none slashed=0 claims=1" || got.Resolution.Claims[0] != clm.ID) {
				t.Errorf("resolution %s %+v", dspLine(got), got.Resolution)
			}
			return insState(t, h, clm.ID, pol.ID), err
		}, state: "claim paid paid=2000; policy active claimed=2000 paid=2000; pool=7200 buyer=2000",
			types: []string{"protocol.claim.pay", "protocol.dispute.resolve"}},
		{name: "file again once paid", do: file(h.call(), pol.ID, d.ID, 500), code: CodeClaimExists,
			state: "claim paid paid=2000; policy active claimed=2000 paid=2000; pool=7200 buyer=2000"},
		{name: "sweep", do: func(t *testing.T) (string, error) {
			rep, err := h.svc.Sweep(ctx)
			if rep != (SweepReport{}) {
				t.Errorf("sweep %+v", rep)
			}
			return insState(t, h, clm.ID, pol.ID), err
		}, state: "claim paid paid=2000; policy active claimed=2000 paid=2000; pool=7200 buyer=2000", same: true},
	}, func(t *testing.T) { dspBooks(t, h) })
}

// TestClaimFiledAfterResolution: a claim on a dispute already resolved
// for the claimant is paid at once; one resolved for the respondent is
// claim.dispute_lost.
func TestClaimFiledAfterResolution(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	insFundPool(t, h, 9_000)
	won, lost := oblCleared(t, h, railCard, 3_000), oblCleared(t, h, railWire, 3_000)
	wonPol, lostPol := insBind(t, h, won.ObligationID, 2_000), insBind(t, h, lost.ObligationID, 2_000)
	wonDsp, lostDsp := dspOpen(t, h, won.ObligationID, 0), dspOpen(t, h, lost.ObligationID, 0)
	if _, err := dspResolve(h, wonDsp.ID, ForClaimant, dspRefund(0), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := dspResolve(h, lostDsp.ID, ForRespondent, nil, 0); err != nil {
		t.Fatal(err)
	}
	t.Run("won", func(t *testing.T) {
		n := h.size()
		c, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: wonPol.ID, DisputeID: wonDsp.ID, AmountMinor: 1_500})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != ClaimPaid || c.PaidMinor != 1_500 || len(c.Entries) != 2 {
			t.Errorf("claim %+v", c)
		}
		if diff := cmp.Diff([]string{"protocol.claim.file", "protocol.claim.pay"}, h.typesSince(n)); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if got := insState(t, h, c.ID, wonPol.ID); got != "claim paid paid=1500; policy active claimed=1500 paid=1500; pool=7700 buyer=1500" {
			t.Errorf("state %s", got)
		}
	})
	t.Run("lost", func(t *testing.T) {
		refusedUnchanged(t, h, CodeClaimDisputeLost, func() error {
			_, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: lostPol.ID, DisputeID: lostDsp.ID, AmountMinor: 1_500})
			return err
		})
	})
	dspBooks(t, h)
}

// TestClaimPoolShort: a payable claim the pool cannot cover waits; sweeps
// pay payable claims oldest first as soon as the pool can, each once, and
// never more than the claim; a restart loses none.
func TestClaimPoolShort(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	a, b := oblCleared(t, h, railCard, 3_000), oblCleared(t, h, railWire, 3_000)
	polA, polB := insBind(t, h, a.ObligationID, 2_000), insBind(t, h, b.ObligationID, 2_000) // the pool holds the premiums: 200
	dspA, dspB := dspOpen(t, h, a.ObligationID, 0), dspOpen(t, h, b.ObligationID, 0)
	clmA, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: polA.ID, DisputeID: dspA.ID, AmountMinor: 2_000})
	if err != nil {
		t.Fatal(err)
	}
	clmB, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: polB.ID, DisputeID: dspB.ID, AmountMinor: 1_800})
	if err != nil {
		t.Fatal(err)
	}
	state := func(t *testing.T) string {
		t.Helper()
		return insState(t, h, clmA.ID, polA.ID) + " | " + insState(t, h, clmB.ID, polB.ID)
	}
	sweep := func(want SweepReport) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			rep, err := h.svc.Sweep(ctx)
			if rep != want {
				t.Errorf("sweep %+v, want %+v", rep, want)
			}
			return state(t), err
		}
	}
	line := func(a, b string, pool, buyer int64) string {
		return fmt.Sprintf("claim %s; policy active claimed=2000 paid=%d; pool=%d buyer=%d | claim %s; policy active claimed=1800 paid=%d; pool=%d buyer=%d",
			a, map[bool]int64{true: 2_000}[strings.HasPrefix(a, "paid")], pool, buyer, b, map[bool]int64{true: 1_800}[strings.HasPrefix(b, "paid")], pool, buyer)
	}
	trnRun(t, h, []trnStep{
		{name: "both disputes resolved for the claimant", do: func(t *testing.T) (string, error) {
			for _, d := range []*Dispute{dspA, dspB} {
				if _, err := dspResolve(h, d.ID, ForClaimant, dspRefund(0), 0); err != nil {
					return "", err
				}
			}
			return state(t), nil
		}, state: line("payable paid=0", "payable paid=0", 200, 0),
			types: []string{"protocol.claim.payable", "protocol.dispute.resolve", "protocol.claim.payable", "protocol.dispute.resolve"}},
		{name: "sweep with the pool short", do: sweep(SweepReport{}), state: line("payable paid=0", "payable paid=0", 200, 0), same: true},
		{name: "the pool can pay one", do: func(t *testing.T) (string, error) {
			insFundPool(t, h, 2_000)
			h.restart()
			return state(t), nil
		}, state: line("payable paid=0", "payable paid=0", 2_200, 0),
			types: []string{"gate.decision", "protocol.custody.deposit", "payment.settled", "protocol.custody.deposit.settle"}},
		{name: "sweep pays the oldest", do: sweep(SweepReport{ClaimsPaid: 1}), state: line("paid paid=2000", "payable paid=0", 200, 2_000),
			types: []string{"protocol.claim.pay"}},
		{name: "sweep again", do: sweep(SweepReport{}), state: line("paid paid=2000", "payable paid=0", 200, 2_000), same: true},
		{name: "the pool can pay the other", do: func(t *testing.T) (string, error) {
			insFundPool(t, h, 5_000)
			return state(t), nil
		}, state: line("paid paid=2000", "payable paid=0", 5_200, 2_000),
			types: []string{"gate.decision", "protocol.custody.deposit", "payment.settled", "protocol.custody.deposit.settle"}},
		{name: "sweep pays it", do: sweep(SweepReport{ClaimsPaid: 1}), state: line("paid paid=2000", "paid paid=1800", 3_400, 3_800),
			types: []string{"protocol.claim.pay"}},
		{name: "sweep once all are paid", do: sweep(SweepReport{}), state: line("paid paid=2000", "paid paid=1800", 3_400, 3_800), same: true},
	}, func(t *testing.T) { dspBooks(t, h) })
}

// TestClaimList: claim.list pages the caller's claims oldest first, by
// status; another key sees none.
func TestClaimList(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	insFundPool(t, h, 9_000)
	var ids []string
	status := map[string]string{}
	for i, outcome := range []string{"", ForClaimant, ForRespondent, "", ForClaimant} {
		o := oblCleared(t, h, railWire, 2_000)
		p := insBind(t, h, o.ObligationID, 1_000)
		d := dspOpen(t, h, o.ObligationID, 0)
		c, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: p.ID, DisputeID: d.ID, AmountMinor: int64(100 * (i + 1))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
		status[c.ID] = ClaimFiled
		if outcome != "" {
			if _, err := dspResolve(h, d.ID, outcome, dspRefund(0), 0); err != nil {
				t.Fatal(err)
			}
			status[c.ID] = map[string]string{ForClaimant: ClaimPaid, ForRespondent: ClaimRejected}[outcome]
		}
	}
	list := func(t *testing.T, c Call, st string, limit int) []string {
		t.Helper()
		var got []string
		cursor := ""
		for range 10 {
			p, err := h.svc.ClaimList(ctx, c, &ClaimListRequest{Status: st, Cursor: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Claims) > limit {
				t.Errorf("page of %d, limit %d", len(p.Claims), limit)
			}
			for _, clm := range p.Claims {
				got = append(got, clm.ID)
				if clm.Status != status[clm.ID] {
					t.Errorf("%s is %s, want %s", clm.ID, clm.Status, status[clm.ID])
				}
				one, err := h.svc.ClaimGet(ctx, c, &ClaimRef{ClaimID: clm.ID})
				if err != nil || !cmp.Equal(one, &clm) {
					t.Errorf("get %+v, %v; listed %+v", one, err, clm)
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
		status string
		limit  int
		want   []string
	}{
		{"", 2, ids},
		{"", 100, ids},
		{ClaimFiled, 1, []string{ids[0], ids[3]}},
		{ClaimPaid, 20, []string{ids[1], ids[4]}},
		{ClaimRejected, 20, []string{ids[2]}},
		{ClaimPayable, 20, nil},
	} {
		t.Run(fmt.Sprintf("status %q limit %d", tc.status, tc.limit), func(t *testing.T) {
			if diff := cmp.Diff(tc.want, list(t, h.call(), tc.status, tc.limit), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("another key", func(t *testing.T) {
		if got := list(t, trnOtherKey(h), "", 20); len(got) != 0 {
			t.Errorf("another key lists %v", got)
		}
	})
}

// TestClaimPolicyVoid: a policy whose premium was refunded is void (the
// premium leaves the pool); a claim on it is claim.policy_inactive.
func TestClaimPolicyVoid(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := oblCleared(t, h, railCard, 3_000)
	p := insBind(t, h, o.ObligationID, 2_000)
	d := dspOpen(t, h, o.ObligationID, 0)
	if _, err := cusRefund(t, h, p.IntentID, 0); err != nil {
		t.Fatal(err)
	}
	if got := insState(t, h, "", p.ID); got != "claim none; policy void claimed=0 paid=0; pool=0 buyer=0" {
		t.Errorf("state %s", got)
	}
	refusedUnchanged(t, h, CodeClaimPolicy, func() error {
		_, err := h.svc.ClaimFile(ctx, h.call(), &ClaimFileRequest{PolicyID: p.ID, DisputeID: d.ID, AmountMinor: 1_000})
		return err
	})
	t.Run("no new policy once disputed", func(t *testing.T) {
		_, err := h.svc.InsuranceBind(ctx, h.call(), insBindRequest(h, o.ObligationID, 1_000, 0, ""))
		trnWantDenied(t, err, ReasonNothingToCover)
	})
	dspBooks(t, h)
}
