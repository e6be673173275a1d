package httpserver_test

// The part-2 story over HTTP: protocol/story_test.go (TestStoryInProcess)
// walked through real requests against the reference wiring of the
// matrix (newMatrixStack: a signed record, agent keys, the operator
// verifier, the money path on the sandbox card rail, the deployment's
// identity), served on a real listener. Two agent identities, each with
// its own key, credential and mandate, act with their bearer credentials;
// the overrides are signed by a trusted operator key.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// storyParty is an agent identity of the deployment: its Ed25519 key (the
// agent id is its public key), the agent credential that acts for it
// alone, and a mandate for it.
type storyParty struct {
	name    string
	key     ed25519.PrivateKey
	agent   string
	cred    string
	mandate string
	seq     int // idempotency keys minted so far
}

// spend is a payment instruction under p's mandate on the sandbox card
// rail, citing termsID when set, signed by p for the protocol method.
func (p *storyParty) spend(t testing.TB, method, payee string, minor int64, termsID string) pay.Instruction {
	t.Helper()
	p.seq++
	in := pay.Instruction{
		IdempotencyKey: fmt.Sprintf("story-%s-%s-%d", p.name, method, p.seq), Payee: payee,
		Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "protocol story", TermsID: termsID,
		Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: p.agent, Mandate: p.mandate},
	}
	if err := protocol.SignSpend(method, &in, p.key); err != nil {
		t.Fatal(err)
	}
	return in
}

// storyClient sends real HTTP requests to the server.
type storyClient struct {
	t    *testing.T
	base string // the listener's URL
	c    *http.Client
	op   *operator.Signer
}

// send makes one request and returns the status and body. With opID
// set, the operator signs exactly the request that goes out, as that
// operation.
func (c *storyClient) send(method, target string, body []byte, header http.Header, opID string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), method, c.base+target, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = header
	if opID != "" {
		if err := c.op.Sign(req, opID, body); err != nil {
			c.t.Fatal(err)
		}
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res.StatusCode, b
}

// call posts body to a protocol method, as p's credential or, with p nil,
// as the operator (a signed override). It fails the test unless the
// status is want, and decodes the answer into out (when not nil).
func (c *storyClient) call(p *storyParty, id string, body any, want int, out any) []byte {
	c.t.Helper()
	m, ok := protocol.Lookup(id)
	if !ok {
		c.t.Fatalf("no protocol method %s", id)
	}
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	h := http.Header{"Content-Type": {contract.MediaJSON}}
	who, opID := "operator", m.ID()
	if p != nil {
		h.Set("Authorization", "Bearer "+p.cred)
		who, opID = p.name, ""
	}
	status, res := c.send(http.MethodPost, m.Path(), b, h, opID)
	if status != want {
		c.t.Fatalf("%s as %s: status %d, want %d\n%s", id, who, status, want, res)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			c.t.Fatalf("%s: %v\n%s", id, err, res)
		}
	}
	return res
}

// get reads a route as p.
func (c *storyClient) get(p *storyParty, target string, out any) {
	c.t.Helper()
	status, b := c.send(http.MethodGet, target, nil, http.Header{"Authorization": {"Bearer " + p.cred}}, "")
	if status != http.StatusOK {
		c.t.Fatalf("GET %s: %d\n%s", target, status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		c.t.Fatalf("GET %s: %v\n%s", target, err, b)
	}
}

// TestStoryOverHTTP walks TestStoryInProcess over HTTP: a seller with a
// stake agrees terms with a buyer through a negotiation, the buyer's
// obligation waits in the PENDING band until the seller's signed evidence
// clears it, then the delivery is disputed by an operator and resolved
// for the buyer: refund, slash, insurance claim paid. Afterwards the
// record verifies with its public key as served, money is conserved (the
// custody ledger checks, and what the rail moved is what the record
// says), and the served contract lists every protocol namespace.
func TestStoryOverHTTP(t *testing.T) {
	ctx := t.Context()
	k := newMatrixKeys(t)
	st := memstore.New(nil)
	stack := newMatrixStack(t, st, k)
	srv := httptest.NewServer(stack.h)
	t.Cleanup(srv.Close)
	c := &storyClient{t: t, base: srv.URL, c: srv.Client(), op: mustSigner(t)(k.ops[0].signer(matrixClock, matrixBase))}
	now := matrixClock()

	party := func(name string) *storyParty {
		pub, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		p := &storyParty{name: name, key: key, agent: hex.EncodeToString(pub)}
		iss, err := stack.keys.Create(ctx, auth.CreateRequest{Name: "story-" + name, AgentIDs: []string{p.agent}},
			audit.Actor{Kind: "operator", ID: k.ops[0].kid}, "req_story")
		if err != nil {
			t.Fatal(err)
		}
		p.cred = iss.Credential
		if p.mandate, err = pay.SignMandate(pay.MandateClaims{
			ID: "mdt-story-" + name, Agent: p.agent, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(30 * 24 * time.Hour),
			Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000,
			Period: gate.Day, Rails: []string{fake.SandboxCard}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
		}, k.ops[0].priv, k.ops[0].kid); err != nil {
			t.Fatal(err)
		}
		return p
	}
	buyer, seller := party("buyer"), party("seller")
	usd := func(minor int64) pay.Amount { return pay.Amount{Minor: minor, Currency: "USD"} }

	// The seller funds its custody and posts a stake out of it.
	var moved protocol.CustodyMoved
	c.call(seller, "custody.deposit", protocol.CustodySpendRequest{Spend: seller.spend(t, "custody.deposit", protocol.DefaultCustodyPayee, 5_000, "")}, 200, &moved)
	if moved.Status != string(pay.StatusSettled) || moved.Agent != seller.agent {
		t.Fatalf("seller's deposit: %+v", moved)
	}
	var stk protocol.StakePosted
	c.call(seller, "stake.post", protocol.StakePostRequest{Amount: usd(3_000), LockedUntil: now.Add(48 * time.Hour),
		Purpose: "bond for the report", IdempotencyKey: "story-stake"}, 200, &stk)
	if stk.Status != protocol.StakeLocked {
		t.Fatalf("stake: %+v", stk)
	}
	// The insurance pool is funded by a deposit to its payee.
	c.call(seller, "custody.deposit", protocol.CustodySpendRequest{Spend: seller.spend(t, "custody.deposit", protocol.DefaultInsurancePayee, 4_000, "")}, 200, &moved)
	if moved.Status != string(pay.StatusSettled) {
		t.Fatalf("pool deposit: %+v", moved)
	}

	// negotiate: the buyer's offer (signed by the deployment's identity),
	// the seller's counter (signed with its key), accepted by the buyer.
	body := protocol.TermsBody{Payee: "acct:seller.example", Amount: usd(2_000), Rail: fake.SandboxCard, Description: "a report",
		EvidenceFloor: protocol.ClassSign, StakeID: stk.ID, ValidUntil: now.Add(24 * time.Hour)}
	var neg protocol.Negotiation
	c.call(buyer, "negotiate.offer", protocol.NegotiateOfferRequest{Counterparty: seller.agent, Terms: body}, 200, &neg)
	if neg.Status != protocol.NegotiationOpen || len(neg.Offers) != 1 || neg.Offers[0].From != protocol.SideUs {
		t.Fatalf("offer: %+v", neg)
	}
	counter := body
	counter.Amount.Minor = 2_500
	msg, err := protocol.OfferSigningBytes(neg.ID, 2, buyer.agent, seller.agent, counter)
	if err != nil {
		t.Fatal(err)
	}
	counterSig := base64.RawURLEncoding.EncodeToString(ed25519.Sign(seller.key, msg))
	c.call(buyer, "negotiate.counter", protocol.NegotiateCounterRequest{NegotiationID: neg.ID, From: protocol.SideCounterparty, Terms: counter,
		Signature: counterSig}, 200, &neg)
	if len(neg.Offers) != 2 || neg.Offers[1].From != protocol.SideCounterparty || neg.Offers[1].Signer != seller.agent {
		t.Fatalf("counter: %+v", neg)
	}
	var acc protocol.NegotiationAccepted
	c.call(buyer, "negotiate.accept", protocol.NegotiateAcceptRequest{NegotiationID: neg.ID}, 200, &acc)
	terms := acc.Terms
	if terms.Status != protocol.TermsStatusAccepted || terms.Amount != usd(2_500) || terms.StakeID != stk.ID || acc.Negotiation.TermsID != terms.ID {
		t.Fatalf("accepted: %+v", acc)
	}
	// Both signatures are over the same bytes, and verify offline.
	signing, err := base64.RawURLEncoding.DecodeString(terms.SigningBytes)
	if err != nil || !bytes.Equal(signing, msg) {
		t.Fatalf("the terms' signing bytes are not the counter-offer's: %v", err)
	}
	for who, signer := range map[string]struct {
		pub ed25519.PublicKey
		sig string
	}{"seller": {seller.key.Public().(ed25519.PublicKey), terms.CounterpartySignature}, "deployment": {k.identity.Public().(ed25519.PublicKey), terms.OurSignature}} {
		raw, err := base64.RawURLEncoding.DecodeString(signer.sig)
		if err != nil || !ed25519.Verify(signer.pub, signing, raw) {
			t.Errorf("the %s's signature over the terms does not verify: %v", who, err)
		}
	}

	// An instruction that does not match the terms is denied by the gate.
	deadline := now.Add(time.Hour)
	status, denied := c.send(http.MethodPost, "/protocol/obligation/create", mustJSON(t, protocol.ObligationCreateRequest{
		Spend: buyer.spend(t, "obligation.create", "acct:seller.example", 2_000, terms.ID), EvidenceFloor: protocol.ClassSign, Deadline: deadline}),
		http.Header{"Content-Type": {contract.MediaJSON}, "Authorization": {"Bearer " + buyer.cred}}, "")
	var refusal struct {
		Code    string `json:"code"`
		Reasons []struct {
			Code string `json:"code"`
		} `json:"reasons"`
	}
	if err := json.Unmarshal(denied, &refusal); err != nil || status != http.StatusForbidden || refusal.Code != pay.CodeDenied ||
		len(refusal.Reasons) != 1 || refusal.Reasons[0].Code != protocol.ReasonTermsMismatch {
		t.Fatalf("mismatching spend: %d %v\n%s", status, err, denied)
	}
	var obl protocol.ObligationCreated
	c.call(buyer, "obligation.create", protocol.ObligationCreateRequest{Spend: buyer.spend(t, "obligation.create", "acct:seller.example", 2_500, terms.ID),
		EvidenceFloor: protocol.ClassSign, Deadline: deadline}, 200, &obl)
	if obl.Status != protocol.ObligationAwaiting {
		t.Fatalf("obligation: %+v", obl)
	}

	// The buyer's own word is below the floor: 202, clearing.pending.
	stmt := `{"subject":"` + obl.ObligationID + `","delivered":"report v1"}`
	raw := c.call(buyer, "evidence.submit", protocol.EvidenceSubmitRequest{Subject: obl.ObligationID, Class: protocol.ClassSelf,
		Statement: json.RawMessage(stmt)}, 202, nil)
	var pending struct {
		Clearing struct {
			Status  protocol.ClearingStatus `json:"status"`
			Problem struct {
				Type     string   `json:"type"`
				Status   int      `json:"status"`
				Code     string   `json:"code"`
				Awaited  string   `json:"awaited"`
				Achieved []string `json:"achieved"`
			} `json:"problem"`
		} `json:"clearing"`
	}
	if err := json.Unmarshal(raw, &pending); err != nil {
		t.Fatal(err)
	}
	if p := pending.Clearing.Problem; pending.Clearing.Status != protocol.ClearingPending || p.Code != protocol.CodeClearingPending ||
		p.Awaited != "sign" || !slices.Equal(p.Achieved, []string{"self"}) || p.Status != 202 ||
		p.Type != matrixBase+"/problems/"+protocol.CodeClearingPending {
		t.Fatalf("self evidence: %s", raw)
	}
	// The seller's signature clears it: settled, with its receipt.
	signed, err := protocol.SignEvidence([]byte(stmt), obl.ObligationID, seller.key)
	if err != nil {
		t.Fatal(err)
	}
	var sub protocol.EvidenceSubmitted
	c.call(buyer, "evidence.submit", protocol.EvidenceSubmitRequest{Subject: obl.ObligationID, Class: protocol.ClassSign,
		Statement: json.RawMessage(stmt), Signature: signed}, 200, &sub)
	if cl := sub.Clearing; sub.Evidence.Signer != seller.agent || cl == nil || cl.Status != protocol.ClearingCleared ||
		cl.Receipt == nil || cl.Receipt.Amount != usd(2_500) || cl.EvidenceID != sub.Evidence.ID {
		t.Fatalf("sign evidence: %+v", sub)
	}
	var o protocol.Obligation
	if c.call(buyer, "obligation.get", protocol.ObligationRef{ObligationID: obl.ObligationID}, 200, &o); o.Status != protocol.ObligationSettled {
		t.Fatalf("obligation after clearing: %+v", o)
	}

	// Insurance on the obligation.
	var q protocol.InsuranceQuote
	c.call(buyer, "insurance.quote", protocol.InsuranceQuoteRequest{Subject: obl.ObligationID, LimitMinor: 2_000}, 200, &q)
	if q.Payee != protocol.DefaultInsurancePayee || q.Premium.Minor <= 0 {
		t.Fatalf("quote: %+v", q)
	}
	var pol protocol.PolicyBound
	c.call(buyer, "insurance.bind", protocol.InsuranceBindRequest{Subject: obl.ObligationID, LimitMinor: 2_000,
		Spend: buyer.spend(t, "insurance.bind", q.Payee, q.Premium.Minor, "")}, 200, &pol)
	if pol.Status != "active" || pol.Premium != q.Premium {
		t.Fatalf("policy: %+v", pol)
	}

	// The delivery, disputed by an operator, answered by the seller.
	var dlv protocol.DeliveryReport
	c.call(buyer, "delivery.record", protocol.DeliveryRecordRequest{Subject: obl.ObligationID, Description: "report v1",
		EvidenceIDs: []string{sub.Evidence.ID}}, 200, &dlv)
	var dsp protocol.Dispute
	c.call(nil, "delivery.dispute", protocol.DeliveryDisputeRequest{DeliveryID: dlv.ID, Reason: "empty report",
		Override: protocol.Override{Rationale: "the report is empty"}}, 200, &dsp)
	if dsp.Status != protocol.DisputeOpen || dsp.OpenedBy != "operator" || dsp.StakeID != stk.ID || dsp.Respondent != seller.agent ||
		dsp.Claimant != buyer.agent || dsp.Claim != usd(2_500) {
		t.Fatalf("dispute: %+v", dsp)
	}
	if status, b := c.send(http.MethodPost, "/protocol/stake/release", mustJSON(t, protocol.StakeRef{StakeID: stk.ID}),
		http.Header{"Content-Type": {contract.MediaJSON}, "Authorization": {"Bearer " + seller.cred}}, ""); status != http.StatusConflict ||
		(!strings.Contains(string(b), protocol.CodeStakeLocked) && !strings.Contains(string(b), protocol.CodeStakeDisputed)) {
		t.Fatalf("release under dispute: %d %s", status, b)
	}
	// Only the respondent responds: not the buyer's credential.
	if status, b := c.send(http.MethodPost, "/protocol/dispute/respond", mustJSON(t, protocol.DisputeRespondRequest{DisputeID: dsp.ID, Text: "mine"}),
		http.Header{"Content-Type": {contract.MediaJSON}, "Authorization": {"Bearer " + buyer.cred}}, ""); status != http.StatusForbidden ||
		!strings.Contains(string(b), protocol.CodeDisputeNotParty) {
		t.Fatalf("respond as the claimant: %d %s", status, b)
	}
	c.call(seller, "dispute.respond", protocol.DisputeRespondRequest{DisputeID: dsp.ID, Text: "it was full"}, 200, &dsp)
	if dsp.Status != protocol.DisputeResponded || dsp.Response == nil {
		t.Fatalf("response: %+v", dsp)
	}
	var clm protocol.Claim
	c.call(buyer, "claim.file", protocol.ClaimFileRequest{PolicyID: pol.ID, DisputeID: dsp.ID, AmountMinor: 1_500}, 200, &clm)
	if clm.Status != protocol.ClaimFiled {
		t.Fatalf("claim: %+v", clm)
	}

	// Resolved for the buyer: the refund runs, the stake is slashed into
	// the buyer's custody, the claim is paid from the pool.
	refund := int64(2_500)
	c.call(nil, "dispute.resolve", protocol.DisputeResolveRequest{DisputeID: dsp.ID, Outcome: protocol.ForClaimant, RefundMinor: &refund,
		SlashMinor: 1_000, Override: protocol.Override{Rationale: "the report was empty"}}, 200, &dsp)
	if r := dsp.Resolution; dsp.Status != protocol.DisputeResolved || r == nil || r.RefundStatus != protocol.RefundDone ||
		r.SlashedMinor != 1_000 || !slices.Equal(r.Claims, []string{clm.ID}) || r.Operator != k.ops[0].kid {
		t.Fatalf("resolution: %+v", dsp.Resolution)
	}
	var got protocol.Dispute
	if c.call(buyer, "dispute.get", protocol.DisputeRef{DisputeID: dsp.ID}, 200, &got); got.Resolution == nil ||
		got.Resolution.RefundStatus != protocol.RefundDone || got.Resolution.RefundMinor != 2_500 {
		t.Fatalf("dispute.get after resolution: %+v", got.Resolution)
	}
	var stake protocol.Stake
	if c.call(seller, "stake.get", protocol.StakeRef{StakeID: stk.ID}, 200, &stake); stake.SlashedMinor != 1_000 {
		t.Fatalf("stake after resolution: %+v", stake)
	}
	var claim protocol.Claim
	if c.call(buyer, "claim.get", protocol.ClaimRef{ClaimID: clm.ID}, 200, &claim); claim.Status != protocol.ClaimPaid || claim.PaidMinor != 1_500 {
		t.Fatalf("claim after resolution: %+v", claim)
	}
	if c.call(buyer, "obligation.get", protocol.ObligationRef{ObligationID: obl.ObligationID}, 200, &o); o.RefundedMinor != 2_500 {
		t.Fatalf("obligation after the refund: %+v", o)
	}
	balance := func(p *storyParty) protocol.CurrencyBalance {
		var b protocol.CustodyBalance
		c.call(p, "custody.balance", protocol.CustodyBalanceRequest{}, 200, &b)
		if len(b.Balances) != 1 || b.Agent != p.agent {
			t.Fatalf("%s's custody: %+v", p.name, b)
		}
		return b.Balances[0]
	}
	if b := balance(buyer); b.AvailableMinor != 1_000+1_500 || b.StakedMinor != 0 {
		t.Errorf("buyer's custody %+v, want available 2500: slash 1000 + claim 1500", b)
	}
	if b := balance(seller); b.AvailableMinor != 5_000-3_000 || b.StakedMinor != 3_000-1_000 {
		t.Errorf("seller's custody %+v, want available 2000 and staked 2000", b)
	}

	// The record, as served, verifies with the record's public key: every
	// entry's hash, link and signature, and the signed checkpoint over
	// them all.
	var entries []audit.Entry
	chain := audit.NewChainVerifier(stack.log.PublicKey(), true)
	for cursor := ""; ; {
		target := "/audit?limit=100"
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		var page audit.Page
		c.get(buyer, target, &page)
		for _, e := range page.Data {
			if err := chain.Add(e); err != nil {
				t.Fatalf("served entry %d: %v", e.Seq, err)
			}
		}
		entries = append(entries, page.Data...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	var cp audit.Checkpoint
	c.get(buyer, "/audit/checkpoint", &cp)
	if err := chain.VerifyCheckpoint(stack.log.VerifierKey(), cp); err != nil {
		t.Fatalf("served checkpoint: %v", err)
	}
	if err := stack.log.Verify(ctx, 1, 0, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	types := map[string]audit.Entry{}
	for _, e := range entries {
		types[e.Type] = e
	}
	for _, typ := range []string{"protocol.negotiate.offer", "protocol.negotiate.counter", "protocol.negotiate.accept", "protocol.terms.accept",
		"protocol.obligation.create", "protocol.evidence.submit", "protocol.clearing.attempt", "protocol.insurance.bind",
		"protocol.delivery.record", "protocol.delivery.dispute", "protocol.dispute.open", "protocol.dispute.respond", "protocol.claim.file",
		"protocol.dispute.resolve", "protocol.stake.slash", "protocol.claim.pay", "protocol.dispute.refund", "payment.refunded"} {
		if _, ok := types[typ]; !ok {
			t.Errorf("the record has no %s entry", typ)
		}
	}
	for _, typ := range []string{"protocol.delivery.dispute", "protocol.dispute.resolve"} {
		if e := types[typ]; e.Actor != (audit.Actor{Kind: "operator", ID: k.ops[0].kid}) || e.Rationale == "" {
			t.Errorf("%s: actor %+v, rationale %q: an override records its operator and rationale", typ, e.Actor, e.Rationale)
		}
	}

	// Money is conserved. What the rail settled less what it refunded is
	// what the record says settled less what it says was refunded, intent
	// by intent; the custody ledger balances; and what custody holds is
	// what the rail moved into the deployment's accounts.
	railNet, recordNet := map[string]int64{}, map[string]int64{}
	var intoDeployment int64
	rail, err := stack.rail.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rail {
		switch {
		case (e.Kind == fake.KindPayment || e.Kind == fake.KindCapture) && e.Status == settle.StatusSettled:
			railNet[e.Key] += e.Amount
			if e.Payee == protocol.DefaultCustodyPayee || e.Payee == protocol.DefaultInsurancePayee {
				intoDeployment += e.Amount
			}
		case e.Kind == fake.KindRefund:
			railNet[e.Key] -= e.Amount
		}
	}
	for _, e := range entries {
		switch e.Type {
		case "payment.settled":
			var r pay.Receipt
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			recordNet[e.IntentID] += r.Amount.Minor
		case "payment.refunded":
			var r struct {
				AmountMinor int64 `json:"amountMinor"`
			}
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			recordNet[e.IntentID] -= r.AmountMinor
		}
	}
	sum := func(m map[string]int64) (n int64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	// Deposits 5000 + 4000, the premium, the obligation's 2500 refunded.
	if want := 9_000 + q.Premium.Minor; sum(railNet) != want || sum(recordNet) != want || intoDeployment != want {
		t.Errorf("moved: rail %d, record %d, into custody %d; want %d", sum(railNet), sum(recordNet), intoDeployment, want)
	}
	for id, n := range railNet {
		if recordNet[id] != n {
			t.Errorf("intent %s: the rail moved %d net, the record says %d", id, n, recordNet[id])
		}
	}
	for id, n := range recordNet {
		if _, ok := railNet[id]; !ok {
			t.Errorf("intent %s: the record says %d moved, the rail has nothing", id, n)
		}
	}
	err = st.View(ctx, func(r store.Reader) error {
		if err := ledger.Check(r); err != nil {
			return err
		}
		world, err := ledger.Balance(r, ledger.WorldPrefix+"rail/"+fake.SandboxCard, "USD")
		if err != nil {
			return err
		}
		if -world != intoDeployment {
			return fmt.Errorf("custody holds %d from the rail, the rail moved %d into it", -world, intoDeployment)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The served contract has every method of the 19 namespaces.
	status, doc := c.send(http.MethodGet, "/openapi.json", nil, http.Header{}, "")
	var openapi struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(doc, &openapi); err != nil || status != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d %v", status, err)
	}
	namespaces := map[string]bool{}
	for p := range openapi.Paths {
		if rest, ok := strings.CutPrefix(p, "/protocol/"); ok {
			ns, _, _ := strings.Cut(rest, "/")
			namespaces[ns] = true
		}
	}
	want := []string{"mandate", "session", "hold", "meter", "custody", "stake", "economics", "oversight", "revocation", "proof",
		"terms", "negotiate", "obligation", "evidence", "clearing", "delivery", "dispute", "insurance", "claim"}
	if got := slices.Sorted(maps.Keys(namespaces)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("/openapi.json lists the protocol namespaces %v, want %v", got, want)
	}
	for _, m := range protocol.Methods() {
		if _, ok := openapi.Paths[m.Path()]; !ok {
			t.Errorf("/openapi.json lacks %s (%s)", m.Path(), m.ID())
		}
	}
	t.Logf("%d record entries verify as served; the rail and the record moved %d net over %d intents; custody holds %d; %d protocol methods in %d namespaces served",
		len(entries), sum(railNet), len(railNet), intoDeployment, len(protocol.Methods()), len(namespaces))
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
