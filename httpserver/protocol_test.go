package httpserver

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

// protocolAgentKey is the agent key of the protocol fixture. A spend is
// signed by the key envelope.agent names, so the agent must be a key the
// tests hold: allowAll acts for its public key, protocolAgent, besides
// its first agent (whose private key nobody has). The seed is fixed so
// that allowAll stays a plain value.
var (
	protocolAgentKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x5a}, ed25519.SeedSize))
	protocolAgent    = hex.EncodeToString(protocolAgentKey.Public().(ed25519.PublicKey))
)

// Rails of the protocol fixture: card authorizes (a hold is held by the
// rail), wire does not (a hold is a reservation of the mandate's budget).
const (
	protocolCard = "sandbox-card"
	protocolWire = "sandbox-wire"
)

// protocolFixture is a real protocol surface over memstore: record, two
// fake rails, the money path and protocol.Service, with a mandate for
// protocolAgent and, made through the Go API as allowAll's principal,
// the objects the happy paths act on.
type protocolFixture struct {
	svc       *protocol.Service
	pay       *pay.Service
	log       *audit.Log
	clock     *edgeClock
	caller    pay.Caller
	mandate   string // token of the fixture's mandate
	mandateID string
	spareID   string // a mandate mandate.revoke may revoke

	captureHold string // held: hold.capture captures it
	releaseHold string // held: hold.release releases it
	meter       string // open: meter.record and meter.close act on it
	session     string // open: session.get and session.close
	stake       string // lockedUntil passed: stake.release
	intent      string // an intent of the caller: proof.get
	proof       json.RawMessage

	seq int // idempotency keys minted so far

	// Part 2: the deployment's identity (it signs our offers), a
	// counterparty and a witness whose keys the tests hold, and the
	// objects the happy paths of terms … claim act on.
	ident        *protocolIdentity
	cpKey        ed25519.PrivateKey
	cp           string // the counterparty's agent id, 64 hex
	witnessKey   ed25519.PrivateKey
	terms        *protocol.TwoPartyTerms // proposed: terms.accept accepts it
	negotiation  string                  // our offer: countered, then accepted
	rejected     string                  // our offer: negotiate.reject
	oblSign      string                  // floor sign, no evidence: clears over HTTP, then is disputed
	oblCancel    string                  // floor self, no evidence: obligation.cancel
	evidence     string                  // self evidence that cleared oblDelivered
	delivery     string                  // recorded, on a cleared obligation: accepted, then disputed
	policy       string                  // active, on the subject of dispute
	dispute      string                  // open, its respondent allowAll's first agent; claim filed on it
	claim        string
	claimPolicy  string // active, on the subject of claimDispute: claim.file
	claimDispute string
}

// protocolWitness is the name of the fixture's witness (wit evidence).
const protocolWitness = "witness-1"

// protocolPeer is allowAll's first agent: the counterparty of the
// fixture's dispute, so that allowAll's principal may respond to it.
var protocolPeer = strings.Repeat("ab", 32)

// protocolIdentity is the deployment's identity of the protocol fixture:
// it signs our negotiation offers and has revoked nobody.
type protocolIdentity struct {
	key ed25519.PrivateKey
	id  string
}

func newProtocolIdentity(t testing.TB) *protocolIdentity {
	t.Helper()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &protocolIdentity{key: key, id: hex.EncodeToString(pub)}
}

func (i *protocolIdentity) SignStatement(msg []byte) (string, ed25519.PublicKey, []byte) {
	return i.id, i.key.Public().(ed25519.PublicKey), ed25519.Sign(i.key, msg)
}

func (i *protocolIdentity) Revoked(context.Context, string) (bool, error) { return false, nil }

// testProtocol builds the fixture. Its clock is fixed and moves only when
// the fixture moves it (past the stake's lock).
func testProtocol(t testing.TB) *protocolFixture {
	t.Helper()
	ctx := t.Context()
	quiet := slog.New(slog.DiscardHandler)
	f := &protocolFixture{clock: &edgeClock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}}
	st := memstore.New(nil)
	_, recKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if f.log, err = audit.Open(ctx, st, recKey, &audit.Options{Now: f.clock.Now, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.log.Close() })
	reg := &settle.Registry{}
	for _, o := range []struct {
		name string
		auth bool
	}{{protocolCard, true}, {protocolWire, false}} {
		r, err := fake.New(o.name, &fake.Options{Store: st, Now: f.clock.Now, Authorizations: o.auth,
			Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}})
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	opPub, opKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-test", Public: opPub}}, &pay.MandateVerifierOptions{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.ident = newProtocolIdentity(t)
	if _, f.witnessKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
		t.Fatal(err)
	}
	surface := protocol.Extension(protocol.Options{Store: st, Log: f.log, Mandates: mv, Now: f.clock.Now, Logger: quiet,
		PolicyDigest: func(context.Context) (string, error) { return "sha256:test-policy", nil },
		Identity:     f.ident,
		Evidence:     protocol.EvidenceKeys{Witnesses: map[string]ed25519.PublicKey{protocolWitness: f.witnessKey.Public().(ed25519.PublicKey)}}}, &f.svc)
	if f.pay, err = pay.New(pay.Options{Store: st, Log: f.log, Rails: reg, Mandates: mv, Now: f.clock.Now, Logger: quiet,
		Extensions: []pay.Extension{surface}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pay.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}

	// The principal every HTTP call of the tests is made as.
	p, err := allowAll{}.AuthenticateAgent(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Agents, protocolAgent) {
		t.Fatalf("allowAll does not act for the protocol agent %s", protocolAgent)
	}
	f.caller = pay.Caller{KeyID: p.KeyID, Agents: p.Agents, Credential: gate.CredentialAPIKey}

	now := f.clock.Now()
	sign := func(id string) string {
		tok, err := pay.SignMandate(pay.MandateClaims{
			ID: id, Agent: protocolAgent, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(30 * 24 * time.Hour),
			Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000,
			Period: gate.Day, Rails: []string{protocolCard, protocolWire}, ConfirmAboveMinor: 10_000,
			IrreversibleConfirmAboveMinor: 10_000,
		}, opKey, "op-test")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	f.mandateID, f.spareID = "mdt-protocol", "mdt-protocol-spare"
	f.mandate = sign(f.mandateID)

	call := protocol.AgentCall(f.caller, "req_seed")
	hold := func() string {
		h, err := f.svc.HoldPlace(ctx, call, &protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 5_000), TTLSeconds: 86_400})
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != protocol.HoldHeld {
			t.Fatalf("seed hold: %+v", h)
		}
		return h.HoldID
	}
	f.captureHold, f.releaseHold = hold(), hold()
	m, err := f.svc.MeterOpen(ctx, call, &protocol.MeterOpenRequest{Spend: f.spend(t, "meter.open", protocolCard, "acct:api.example", 5_000),
		UnitPriceMinor: 10, TTLSeconds: 86_400})
	if err != nil {
		t.Fatal(err)
	}
	f.meter = m.MeterID
	ses, err := f.svc.SessionOpen(ctx, call, &protocol.SessionOpenRequest{Mandate: f.mandate, BudgetMinor: 20_000, TTLSeconds: 86_400, Purpose: "seed session"})
	if err != nil {
		t.Fatal(err)
	}
	f.session = ses.ID
	dep, err := f.svc.CustodyDeposit(ctx, call, &protocol.CustodySpendRequest{Spend: f.spend(t, "custody.deposit", protocolWire, protocol.DefaultCustodyPayee, 9_000)})
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status != string(pay.StatusSettled) {
		t.Fatalf("seed deposit: %+v", dep)
	}
	f.intent = dep.IntentID
	stk, err := f.svc.StakePost(ctx, call, &protocol.StakePostRequest{Agent: protocolAgent, Amount: pay.Amount{Minor: 1_000, Currency: "USD"},
		LockedUntil: now.Add(time.Minute), Purpose: "seed stake", IdempotencyKey: "seed-stake"})
	if err != nil {
		t.Fatal(err)
	}
	f.stake = stk.ID
	// Past the stake's lock: the sweep marks it releasable.
	f.clock.Add(2 * time.Minute)
	if rep, err := f.svc.Sweep(ctx); err != nil || rep.StakesUnlocked != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	proof, err := f.svc.ProofGet(ctx, call, &protocol.ProofGetRequest{IntentID: f.intent})
	if err != nil {
		t.Fatal(err)
	}
	if f.proof, err = json.Marshal(proof); err != nil {
		t.Fatal(err)
	}
	f.seedPart2(t, call)
	return f
}

// seedPart2 makes, through the Go API as allowAll's principal, the
// objects the happy paths of terms … claim act on. Nothing it does
// touches the protocol agent's custody or waits for a person, so part 1's
// cases see what they saw before.
func (f *protocolFixture) seedPart2(t testing.TB, call protocol.Call) {
	t.Helper()
	ctx := t.Context()
	pub, cpKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.cpKey, f.cp = cpKey, hex.EncodeToString(pub)
	if f.terms, err = f.svc.TermsPropose(ctx, call, &protocol.TermsProposeRequest{Agent: protocolAgent, Counterparty: f.cp, Terms: f.termsBody()}); err != nil {
		t.Fatal(err)
	}
	offer := func() string {
		n, err := f.svc.NegotiateOffer(ctx, call, &protocol.NegotiateOfferRequest{Agent: protocolAgent, Counterparty: f.cp, Terms: f.termsBody()})
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	f.negotiation, f.rejected = offer(), offer()

	obligation := func(floor protocol.EvidenceClass, cp string, minor int64) string {
		o, err := f.svc.ObligationCreate(ctx, call, &protocol.ObligationCreateRequest{Spend: f.spend(t, "obligation.create", protocolCard, "acct:seller.example", minor),
			EvidenceFloor: floor, Deadline: f.clock.Now().Add(time.Hour), Counterparty: cp, Description: "a report"})
		if err != nil || o.Status != protocol.ObligationAwaiting {
			t.Fatalf("seed obligation: %+v, %v", o, err)
		}
		return o.ObligationID
	}
	// cleared is an obligation that cleared on the agent's own word.
	cleared := func(cp string) (string, string) {
		id := obligation(protocol.ClassSelf, cp, 2_000)
		ev, err := f.svc.EvidenceSubmit(ctx, call, &protocol.EvidenceSubmitRequest{Subject: id, Class: protocol.ClassSelf,
			Statement: json.RawMessage(`{"subject":"` + id + `","delivered":"report v1"}`)})
		if err != nil || ev.Clearing == nil || ev.Clearing.Status != protocol.ClearingCleared {
			t.Fatalf("seed clearing: %+v, %v", ev, err)
		}
		return id, ev.Evidence.ID
	}
	f.oblSign = obligation(protocol.ClassSign, f.cp, 2_000)
	f.oblCancel = obligation(protocol.ClassSelf, "", 1_000)
	delivered, ev := cleared(f.cp)
	f.evidence = ev
	dlv, err := f.svc.DeliveryRecord(ctx, call, &protocol.DeliveryRecordRequest{Subject: delivered, Description: "report v1", EvidenceIDs: []string{ev}})
	if err != nil {
		t.Fatal(err)
	}
	f.delivery = dlv.ID
	// insured is a cleared obligation of protocolPeer's with a policy and
	// an open dispute.
	insured := func(limit, premium int64) (string, string) {
		subject, _ := cleared(protocolPeer)
		pol, err := f.svc.InsuranceBind(ctx, call, &protocol.InsuranceBindRequest{Subject: subject, LimitMinor: limit,
			Spend: f.spend(t, "insurance.bind", protocolCard, protocol.DefaultInsurancePayee, premium)})
		if err != nil || pol.Status != "active" {
			t.Fatalf("seed policy: %+v, %v", pol, err)
		}
		dsp, err := f.svc.DisputeOpen(ctx, call, &protocol.DisputeOpenRequest{Subject: subject, Reason: "the report is empty"})
		if err != nil || dsp.Respondent != protocolPeer {
			t.Fatalf("seed dispute: %+v, %v", dsp, err)
		}
		return pol.ID, dsp.ID
	}
	// Premiums of 100 and 100 fund the pool the claim of 150 is paid from.
	f.policy, f.dispute = insured(2_000, 100)
	f.claimPolicy, f.claimDispute = insured(1_000, 100)
	clm, err := f.svc.ClaimFile(ctx, call, &protocol.ClaimFileRequest{PolicyID: f.policy, DisputeID: f.dispute, AmountMinor: 150})
	if err != nil {
		t.Fatal(err)
	}
	f.claim = clm.ID
}

// termsBody is what the fixture's terms and first offers say.
func (f *protocolFixture) termsBody() protocol.TermsBody {
	return protocol.TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2_000, Currency: "USD"}, Rail: protocolCard,
		Description: "a report", EvidenceFloor: protocol.ClassSign, ValidUntil: f.clock.Now().Add(24 * time.Hour)}
}

// cpSign is the counterparty's signature over base64url signing bytes.
func (f *protocolFixture) cpSign(t testing.TB, signingBytes string) string {
	t.Helper()
	msg, err := base64.RawURLEncoding.DecodeString(signingBytes)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(f.cpKey, msg))
}

// spend returns an instruction under the fixture's mandate with a fresh
// idempotency key, signed for method by the protocol agent.
func (f *protocolFixture) spend(t testing.TB, method, rail, payee string, minor int64) pay.Instruction {
	t.Helper()
	f.seq++
	in := pay.Instruction{
		IdempotencyKey: fmt.Sprintf("proto-%s-%d", method, f.seq), Payee: payee, Amount: pay.Amount{Minor: minor, Currency: "USD"},
		Purpose: "protocol route test",
		Terms: pay.Terms{Rail: rail, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: protocolAgent, Mandate: f.mandate},
	}
	if err := protocol.SignSpend(method, &in, protocolAgentKey); err != nil {
		t.Fatal(err)
	}
	return in
}

// spendCiting is f.spend citing terms.
func (f *protocolFixture) spendCiting(t testing.TB, method, rail, payee string, minor int64, termsID string) pay.Instruction {
	t.Helper()
	in := f.spend(t, method, rail, payee, minor)
	in.TermsID, in.Envelope.Signature = termsID, ""
	if err := protocol.SignSpend(method, &in, protocolAgentKey); err != nil {
		t.Fatal(err)
	}
	return in
}

// jsonBody marshals v for a request.
func jsonBody(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// expectJSON returns a check that decodes the body into a T and calls ok.
func expectJSON[T any](ok func(T) bool) func(t *testing.T, b []byte) {
	return func(t *testing.T, b []byte) {
		t.Helper()
		var v T
		if err := json.Unmarshal(b, &v); err != nil || !ok(v) {
			t.Errorf("unexpected answer (%v): %s", err, b)
		}
	}
}

// protocolRouteCases are the happy paths of the protocol methods over the
// fixture, in an order that respects their state: a hold is read after
// its capture, a meter recorded on before it is closed, a session read
// before it is closed.
func protocolRouteCases(t testing.TB, f *protocolFixture) []routeCase {
	c := func(id string, status int, body any, check func(*testing.T, []byte)) routeCase {
		m, ok := protocol.Lookup(id)
		if !ok {
			t.Fatalf("no protocol method %s", id)
		}
		return routeCase{op: id, method: "POST", target: m.Path(), body: jsonBody(t, body), status: status,
			media: contract.MediaJSON, check: check}
	}
	const rationale = "routine check by ops"
	now := f.clock.Now()
	usd := func(minor int64) pay.Amount { return pay.Amount{Minor: minor, Currency: "USD"} }
	terms := pay.Terms{Rail: protocolCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
		Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}
	return append([]routeCase{
		c("mandate.get", 200, protocol.MandateRef{MandateID: f.mandateID}, expectJSON(func(v protocol.MandateView) bool {
			return v.Status == "active" && v.Mandate.ID == f.mandateID
		})),
		c("mandate.list", 200, protocol.MandateListRequest{Limit: 10}, expectJSON(func(v protocol.MandatePage) bool {
			return len(v.Data) == 1 && v.Data[0].Mandate.ID == f.mandateID
		})),
		c("mandate.verify", 200, protocol.MandateVerifyRequest{Mandate: f.mandate, Payee: "acct:seller.example", Amount: usd(100), Terms: terms},
			expectJSON(func(v protocol.MandateVerification) bool { return v.Allowed })),
		c("mandate.revoke", 200, protocol.MandateRevokeRequest{MandateID: f.spareID, Rationale: rationale},
			expectJSON(func(v pay.Revocation) bool { return v.MandateID == f.spareID && v.Operator == "op-test" })),

		c("session.open", 200, protocol.SessionOpenRequest{Mandate: f.mandate, BudgetMinor: 1_000, TTLSeconds: 3600},
			expectJSON(func(v protocol.Session) bool { return v.RemainingMinor == 1_000 && len(v.Entries) == 1 })),
		c("session.get", 200, protocol.SessionRef{SessionID: f.session}, expectJSON(func(v protocol.Session) bool { return v.ID == f.session })),
		c("session.close", 200, protocol.SessionRef{SessionID: f.session}, nil),

		c("hold.place", 200, protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 2_500), TTLSeconds: 3600},
			expectJSON(func(v protocol.HoldPlaced) bool { return v.Status == protocol.HoldHeld && v.RailAuthorization })),
		c("hold.place", 200, protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolWire, "acct:seller.example", 2_500), TTLSeconds: 3600},
			expectJSON(func(v protocol.HoldPlaced) bool { return v.Status == protocol.HoldHeld && !v.RailAuthorization })),
		// Above the mandate's confirmation threshold: held for a person.
		c("hold.place", 202, protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 20_000), TTLSeconds: 3600},
			expectJSON(func(v protocol.HoldPlaced) bool {
				return v.Status == protocol.HoldPendingApproval && v.Approval != nil && v.Approval.Challenge != "" &&
					v.Amount == pay.Amount{Minor: 20_000, Currency: "USD"}
			})),
		c("hold.capture", 200, protocol.HoldCaptureRequest{HoldID: f.captureHold, AmountMinor: 3_000, IdempotencyKey: "capture-1"},
			expectJSON(func(v protocol.HoldCaptured) bool { return v.CapturedMinor == 3_000 && v.ReleasedMinor == 2_000 })),
		c("hold.release", 200, protocol.HoldRef{HoldID: f.releaseHold},
			expectJSON(func(v protocol.Hold) bool { return v.Status == protocol.HoldReleased })),
		c("hold.get", 200, protocol.HoldRef{HoldID: f.captureHold},
			expectJSON(func(v protocol.Hold) bool { return v.Status == protocol.HoldStatusCaptured && v.CapturedMinor == 3_000 })),

		c("meter.open", 200, protocol.MeterOpenRequest{Spend: f.spend(t, "meter.open", protocolCard, "acct:api.example", 1_000), UnitPriceMinor: 5, TTLSeconds: 3600},
			expectJSON(func(v protocol.MeterOpened) bool { return v.Status == protocol.MeterOpen })),
		c("meter.open", 202, protocol.MeterOpenRequest{Spend: f.spend(t, "meter.open", protocolCard, "acct:api.example", 15_000), UnitPriceMinor: 5, TTLSeconds: 3600},
			expectJSON(func(v protocol.MeterOpened) bool { return v.Status == protocol.MeterPendingApproval })),
		c("meter.record", 200, protocol.MeterRecordRequest{MeterID: f.meter, Units: 7, UsageID: "u-1"},
			expectJSON(func(v protocol.MeterRecorded) bool { return v.AccruedMinor == 70 && v.Lines == 1 })),
		c("meter.get", 200, protocol.MeterRef{MeterID: f.meter},
			expectJSON(func(v protocol.Meter) bool { return v.Status == protocol.MeterOpen && v.Units == 7 })),
		c("meter.close", 200, protocol.MeterCloseRequest{MeterID: f.meter, IdempotencyKey: "close-1"},
			expectJSON(func(v protocol.MeterClosed) bool { return v.Receipt != nil && v.Receipt.Amount.Minor == 70 })),

		c("custody.balance", 200, protocol.CustodyBalanceRequest{Agent: protocolAgent}, expectJSON(func(v protocol.CustodyBalance) bool {
			return len(v.Balances) == 1 && v.Balances[0].AvailableMinor == 8_000 && v.Balances[0].StakedMinor == 1_000
		})),
		c("custody.deposit", 200, protocol.CustodySpendRequest{Spend: f.spend(t, "custody.deposit", protocolWire, protocol.DefaultCustodyPayee, 1_000)},
			expectJSON(func(v protocol.CustodyMoved) bool { return v.Status == string(pay.StatusSettled) })),
		c("custody.withdraw", 200, protocol.CustodySpendRequest{Spend: f.spend(t, "custody.withdraw", protocolWire, "acct:bank.example", 500)},
			expectJSON(func(v protocol.CustodyMoved) bool { return v.Status == string(pay.StatusSettled) })),
		c("custody.ledger", 200, protocol.CustodyLedgerRequest{Agent: protocolAgent, Currency: "USD", Limit: 2},
			expectJSON(func(v protocol.CustodyLedgerPage) bool { return len(v.Data) == 2 && v.HasMore && v.NextCursor != nil })),

		c("stake.post", 200, protocol.StakePostRequest{Agent: protocolAgent, Amount: usd(500), LockedUntil: now.Add(time.Hour),
			Purpose: "bond for a task", IdempotencyKey: "stake-1"},
			expectJSON(func(v protocol.StakePosted) bool { return v.Status == protocol.StakeLocked })),
		c("stake.get", 200, protocol.StakeRef{StakeID: f.stake},
			expectJSON(func(v protocol.Stake) bool { return v.Status == protocol.StakeReleasable })),
		c("stake.release", 200, protocol.StakeRef{StakeID: f.stake},
			expectJSON(func(v protocol.Stake) bool { return v.Status == protocol.StakeReleased })),

		c("economics.summary", 200, protocol.EconomicsSummaryRequest{Since: now.Add(-24 * time.Hour), Until: now.Add(time.Hour), GroupBy: "rail"},
			expectJSON(func(v protocol.EconomicsSummary) bool { return len(v.Groups) == 2 })),
		c("economics.budget", 200, protocol.EconomicsBudgetRequest{MandateID: f.mandateID},
			expectJSON(func(v protocol.EconomicsBudget) bool { return len(v.Mandates) == 1 && v.Mandates[0].CountedMinor > 0 })),

		c("oversight.status", 200, protocol.Empty{},
			expectJSON(func(v protocol.OversightStatus) bool { return !v.KillSwitchEngaged && v.PendingApprovals == 2 })),
		c("oversight.policy", 200, protocol.Empty{},
			expectJSON(func(v protocol.OversightPolicy) bool { return v.PolicyHash == "sha256:test-policy" })),
		c("oversight.queue", 200, protocol.OversightQueueRequest{Limit: 1},
			expectJSON(func(v protocol.OversightQueue) bool { return len(v.Data) == 1 && v.HasMore })),

		c("revocation.revoke_identity", 200, protocol.RevokeIdentityRequest{Agent: strings.Repeat("cd", 32), Override: protocol.Override{Rationale: rationale}},
			expectJSON(func(v pay.IdentityRevocation) bool { return v.Agent == strings.Repeat("cd", 32) })),
		c("revocation.list", 200, protocol.RevocationListRequest{},
			expectJSON(func(v protocol.RevocationPage) bool { return len(v.Data) == 2 && v.NextCursor != nil })),
		c("revocation.check", 200, protocol.RevocationCheckRequest{Agent: protocolAgent},
			expectJSON(func(v protocol.RevocationCheck) bool { return v.Kind == "identity" && !v.Revoked })),
		c("revocation.check", 200, protocol.RevocationCheckRequest{MandateID: f.spareID},
			expectJSON(func(v protocol.RevocationCheck) bool { return v.Kind == "mandate" && v.Revoked })),

		c("proof.get", 200, protocol.ProofGetRequest{IntentID: f.intent}, expectJSON(func(v protocol.EnforcementProof) bool {
			return v.IntentID == f.intent && len(v.Entries) > 0 && v.Entries[0].Entry.Type == "gate.decision"
		})),
		c("proof.verify", 200, protocol.ProofVerifyRequest{Proof: f.proof},
			expectJSON(func(v protocol.ProofVerification) bool { return v.Valid && v.IntentID == f.intent })),
	}, protocolRouteCases2(t, f, c)...)
}

// protocolRouteCases2 are the happy paths of part 2, in an order that
// respects their state: terms are accepted before an obligation cites
// them; f.oblSign waits below its floor, clears on the counterparty's
// signature, then has a delivery, a dispute and a policy; the fixture's
// dispute is answered, then resolved, which pays its claim.
func protocolRouteCases2(t testing.TB, f *protocolFixture, c func(string, int, any, func(*testing.T, []byte)) routeCase) []routeCase {
	const rationale = "routine check by ops"
	now := f.clock.Now()
	counter := f.termsBody()
	counter.Amount.Minor = 2_500
	counterBytes, err := protocol.OfferSigningBytes(f.negotiation, 2, protocolAgent, f.cp, counter)
	if err != nil {
		t.Fatal(err)
	}
	counterSig := base64.RawURLEncoding.EncodeToString(ed25519.Sign(f.cpKey, counterBytes))
	termsSig := f.cpSign(t, f.terms.SigningBytes)
	stmt := `{"subject":"` + f.oblSign + `","delivered":"report v1"}`
	signed, err := protocol.SignEvidence([]byte(stmt), f.oblSign, f.cpKey)
	if err != nil {
		t.Fatal(err)
	}
	witStmt := `{"subject":"` + f.oblSign + `","witnessed":"the report"}`
	witnessed, err := protocol.SignEvidence([]byte(witStmt), f.oblSign, f.witnessKey)
	if err != nil {
		t.Fatal(err)
	}
	return []routeCase{
		c("terms.propose", 200, protocol.TermsProposeRequest{Agent: protocolAgent, Counterparty: f.cp, Terms: f.termsBody()},
			expectJSON(func(v protocol.TwoPartyTerms) bool {
				return v.Status == protocol.TermsStatusProposed && v.Agent == protocolAgent && v.Counterparty == f.cp && v.SigningBytes != ""
			})),
		c("terms.accept", 200, protocol.TermsAcceptRequest{TermsID: f.terms.ID, Signature: termsSig},
			expectJSON(func(v protocol.TwoPartyTerms) bool {
				return v.Status == protocol.TermsStatusAccepted && v.CounterpartySignature == termsSig && v.AcceptedAt != nil
			})),
		c("terms.get", 200, protocol.TermsRef{TermsID: f.terms.ID},
			expectJSON(func(v protocol.TwoPartyTerms) bool {
				return v.ID == f.terms.ID && v.Status == protocol.TermsStatusAccepted
			})),

		c("negotiate.offer", 200, protocol.NegotiateOfferRequest{Agent: protocolAgent, Counterparty: f.cp, Terms: f.termsBody()},
			expectJSON(func(v protocol.Negotiation) bool {
				return v.Status == protocol.NegotiationOpen && len(v.Offers) == 1 && v.Offers[0].From == protocol.SideUs && v.Offers[0].Signer == f.ident.id
			})),
		c("negotiate.counter", 200, protocol.NegotiateCounterRequest{NegotiationID: f.negotiation, From: protocol.SideCounterparty, Terms: counter, Signature: counterSig},
			expectJSON(func(v protocol.Negotiation) bool {
				return len(v.Offers) == 2 && v.Offers[1].From == protocol.SideCounterparty && v.Offers[1].Signer == f.cp && v.Offers[1].Signature == counterSig
			})),
		c("negotiate.accept", 200, protocol.NegotiateAcceptRequest{NegotiationID: f.negotiation},
			expectJSON(func(v protocol.NegotiationAccepted) bool {
				return v.Negotiation.Status == protocol.NegotiationStatusAccepted && v.Negotiation.TermsID == v.Terms.ID &&
					v.Terms.Status == protocol.TermsStatusAccepted && v.Terms.Amount.Minor == 2_500 &&
					v.Terms.CounterpartySignature == counterSig && v.Terms.OurSignature != ""
			})),
		c("negotiate.reject", 200, protocol.NegotiateRejectRequest{NegotiationID: f.rejected, By: protocol.SideUs, Reason: "too dear"},
			expectJSON(func(v protocol.Negotiation) bool {
				return v.Status == protocol.NegotiationRejected && v.RejectedBy == protocol.SideUs
			})),
		c("negotiate.get", 200, protocol.NegotiationRef{NegotiationID: f.negotiation},
			expectJSON(func(v protocol.Negotiation) bool {
				return v.Status == protocol.NegotiationStatusAccepted && v.TermsID != ""
			})),

		// Cites the terms terms.accept accepted: the gate checks it against them.
		c("obligation.create", 200, protocol.ObligationCreateRequest{Spend: f.spendCiting(t, "obligation.create", protocolCard, "acct:seller.example", 2_000, f.terms.ID),
			EvidenceFloor: protocol.ClassSign, Deadline: now.Add(time.Hour)},
			expectJSON(func(v protocol.ObligationCreated) bool {
				return v.Status == protocol.ObligationAwaiting && v.EvidenceFloor == protocol.ClassSign && v.Amount.Minor == 2_000
			})),
		c("obligation.get", 200, protocol.ObligationRef{ObligationID: f.oblSign},
			expectJSON(func(v protocol.Obligation) bool {
				return v.Status == protocol.ObligationAwaiting && v.EvidenceFloor == protocol.ClassSign && v.Counterparty == f.cp
			})),
		c("obligation.list", 200, protocol.ObligationListRequest{Status: protocol.ObligationAwaiting},
			expectJSON(func(v protocol.ObligationList) bool { return len(v.Obligations) == 3 })),
		c("obligation.cancel", 200, protocol.ObligationRef{ObligationID: f.oblCancel},
			expectJSON(func(v protocol.Obligation) bool { return v.Status == protocol.ObligationCancelled })),

		// The agent's own word is below the floor: 202, pending.
		c("evidence.submit", 202, protocol.EvidenceSubmitRequest{Subject: f.oblSign, Class: protocol.ClassSelf, Statement: json.RawMessage(stmt)},
			expectJSON(func(v protocol.EvidenceSubmitted) bool {
				cl := v.Clearing
				return v.Evidence.Class == protocol.ClassSelf && cl != nil && cl.Status == protocol.ClearingPending && cl.Problem != nil &&
					cl.Problem.Code == protocol.CodeClearingPending && cl.Problem.Awaited == protocol.ClassSign &&
					slices.Equal(cl.Problem.Achieved, []protocol.EvidenceClass{protocol.ClassSelf})
			})),
		c("clearing.status", 200, protocol.ObligationRef{ObligationID: f.oblSign},
			expectJSON(func(v protocol.ClearingState) bool {
				return v.Status == protocol.ClearingPending && !v.Admissible && v.Problem != nil && v.Problem.Awaited == protocol.ClassSign
			})),
		c("clearing.attempt", 202, protocol.ObligationRef{ObligationID: f.oblSign},
			expectJSON(func(v protocol.Clearing) bool {
				return v.Status == protocol.ClearingPending && v.Problem != nil && v.Problem.Code == protocol.CodeClearingPending
			})),
		// The counterparty's signature meets the floor: cleared, settled.
		c("evidence.submit", 200, protocol.EvidenceSubmitRequest{Subject: f.oblSign, Class: protocol.ClassSign, Statement: json.RawMessage(stmt), Signature: signed},
			expectJSON(func(v protocol.EvidenceSubmitted) bool {
				return v.Evidence.Class == protocol.ClassSign && v.Evidence.Signer == f.cp && v.Clearing != nil &&
					v.Clearing.Status == protocol.ClearingCleared && v.Clearing.Receipt != nil && v.Clearing.Receipt.Amount.Minor == 2_000
			})),
		c("clearing.attempt", 200, protocol.ObligationRef{ObligationID: f.oblSign},
			expectJSON(func(v protocol.Clearing) bool {
				return v.Status == protocol.ClearingCleared && v.Admissible && v.EvidenceID != "" && v.Receipt != nil
			})),
		// A witness's signature about a payment, checked against the
		// configured key: stored, nothing to clear.
		c("evidence.submit", 200, protocol.EvidenceSubmitRequest{Subject: f.oblSign, Class: protocol.ClassWit, Statement: json.RawMessage(witStmt),
			Signer: protocolWitness, Signature: witnessed},
			expectJSON(func(v protocol.EvidenceSubmitted) bool {
				return v.Evidence.Class == protocol.ClassWit && v.Evidence.Signer == protocolWitness && v.Clearing != nil &&
					v.Clearing.Status == protocol.ClearingCleared
			})),
		c("evidence.get", 200, protocol.EvidenceRef{EvidenceID: f.evidence},
			expectJSON(func(v protocol.Evidence) bool { return v.ID == f.evidence && v.Class == protocol.ClassSelf })),
		c("evidence.list", 200, protocol.EvidenceListRequest{Subject: f.oblSign},
			expectJSON(func(v protocol.EvidenceList) bool {
				return len(v.Evidence) == 3 && v.Evidence[0].Class == protocol.ClassSelf && v.Evidence[1].Class == protocol.ClassSign && v.Evidence[2].Class == protocol.ClassWit
			})),

		c("insurance.quote", 200, protocol.InsuranceQuoteRequest{Subject: f.oblSign, LimitMinor: 2_000},
			expectJSON(func(v protocol.InsuranceQuote) bool {
				return v.Premium == pay.Amount{Minor: 100, Currency: "USD"} && v.Payee == protocol.DefaultInsurancePayee
			})),
		c("insurance.bind", 200, protocol.InsuranceBindRequest{Subject: f.oblSign, LimitMinor: 2_000,
			Spend: f.spend(t, "insurance.bind", protocolCard, protocol.DefaultInsurancePayee, 100)},
			expectJSON(func(v protocol.PolicyBound) bool {
				return v.Status == "active" && v.Subject == f.oblSign && v.Limit.Minor == 2_000 && v.Premium.Minor == 100
			})),
		c("delivery.record", 200, protocol.DeliveryRecordRequest{Subject: f.oblSign, Description: "report v1"},
			expectJSON(func(v protocol.DeliveryReport) bool {
				return v.Status == protocol.DeliveryRecorded && v.Subject == f.oblSign
			})),
		c("delivery.accept", 200, protocol.DeliveryRef{DeliveryID: f.delivery},
			expectJSON(func(v protocol.DeliveryReport) bool {
				return v.Status == protocol.DeliveryAccepted && v.AcceptedAt != nil
			})),
		c("delivery.get", 200, protocol.DeliveryRef{DeliveryID: f.delivery},
			expectJSON(func(v protocol.DeliveryReport) bool {
				return v.ID == f.delivery && v.Status == protocol.DeliveryAccepted
			})),
		// Even once accepted, an operator may dispute it.
		c("delivery.dispute", 200, protocol.DeliveryDisputeRequest{DeliveryID: f.delivery, Reason: "the report is empty", Override: protocol.Override{Rationale: rationale}},
			expectJSON(func(v protocol.Dispute) bool {
				return v.Status == protocol.DisputeOpen && v.OpenedBy == "operator" && v.DeliveryID == f.delivery && v.Respondent == f.cp
			})),

		c("dispute.open", 200, protocol.DisputeOpenRequest{Subject: f.oblSign, Reason: "half the report is missing", ClaimMinor: 500},
			expectJSON(func(v protocol.Dispute) bool {
				return v.Status == protocol.DisputeOpen && v.OpenedBy == "agent" && v.Claim.Minor == 500 && v.Respondent == f.cp
			})),
		c("dispute.respond", 200, protocol.DisputeRespondRequest{DisputeID: f.dispute, Text: "the report was complete"},
			expectJSON(func(v protocol.Dispute) bool {
				return v.Status == protocol.DisputeResponded && v.Response != nil && v.Response.Text == "the report was complete"
			})),
		c("dispute.get", 200, protocol.DisputeRef{DisputeID: f.dispute},
			expectJSON(func(v protocol.Dispute) bool { return v.ID == f.dispute && v.Status == protocol.DisputeResponded })),
		c("dispute.list", 200, protocol.DisputeListRequest{Agent: protocolAgent},
			expectJSON(func(v protocol.DisputeList) bool { return len(v.Disputes) == 4 })),
		c("dispute.resolve", 200, protocol.DisputeResolveRequest{DisputeID: f.dispute, Outcome: protocol.ForClaimant, RefundMinor: ptr(int64(1_000)),
			Override: protocol.Override{Rationale: rationale}},
			expectJSON(func(v protocol.Dispute) bool {
				r := v.Resolution
				return v.Status == protocol.DisputeResolved && r != nil && r.Outcome == protocol.ForClaimant && r.RefundMinor == 1_000 &&
					r.RefundStatus == protocol.RefundDone && slices.Equal(r.Claims, []string{f.claim}) && r.Operator == "op-test"
			})),

		c("insurance.get", 200, protocol.PolicyRef{PolicyID: f.policy},
			expectJSON(func(v protocol.InsurancePolicy) bool {
				return v.Status == "active" && v.ClaimedMinor == 150 && v.PaidMinor == 150
			})),

		c("claim.file", 200, protocol.ClaimFileRequest{PolicyID: f.claimPolicy, DisputeID: f.claimDispute, AmountMinor: 300},
			expectJSON(func(v protocol.Claim) bool { return v.Status == protocol.ClaimFiled && v.Amount.Minor == 300 })),
		c("claim.get", 200, protocol.ClaimRef{ClaimID: f.claim},
			expectJSON(func(v protocol.Claim) bool { return v.Status == protocol.ClaimPaid && v.PaidMinor == 150 })),
		c("claim.list", 200, protocol.ClaimListRequest{},
			expectJSON(func(v protocol.ClaimList) bool {
				return len(v.Claims) == 2 && v.Claims[0].ID == f.claim && v.Claims[1].Status == protocol.ClaimFiled
			})),
	}
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// protocolServer serves the fixture's surface, and its money path on
// /pay, as allowAll's principal and allowOperator's operator.
func protocolServer(t testing.TB, f *protocolFixture) *testServer {
	t.Helper()
	return newTestServer(t, Config{Authenticator: allowAll{}, Operators: allowOperator{}, Payments: f.pay, Protocol: f.svc})
}

// post sends a JSON body to a protocol method.
func (ts *testServer) post(t testing.TB, id string, body any) *httptest.ResponseRecorder {
	t.Helper()
	m, ok := protocol.Lookup(id)
	if !ok {
		t.Fatalf("no protocol method %s", id)
	}
	return ts.do(t, http.MethodPost, m.Path(), strings.NewReader(jsonBody(t, body)), "Content-Type", contract.MediaJSON)
}

// problemMembers decodes a problem body as a JSON object.
func problemMembers(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	decodeProblem(t, w)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProtocolOverHTTP checks what the generic binding adds to a method:
// idempotent replays and conflicts, a gate's denial rendered as /pay
// renders it, a refused transition as its problem, and an override's
// operator credential and rationale.
func TestProtocolOverHTTP(t *testing.T) {
	f := testProtocol(t)
	ts := protocolServer(t, f)

	t.Run("replay", func(t *testing.T) {
		req := protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 1_000), TTLSeconds: 3600}
		first := ts.post(t, "hold.place", req)
		if first.Code != http.StatusOK || first.Header().Get(HeaderReplayed) != "" {
			t.Fatalf("first: %d %s=%q\n%s", first.Code, HeaderReplayed, first.Header().Get(HeaderReplayed), first.Body)
		}
		again := ts.post(t, "hold.place", req)
		if again.Code != http.StatusOK || again.Header().Get(HeaderReplayed) != "true" {
			t.Errorf("replay: %d %s=%q", again.Code, HeaderReplayed, again.Header().Get(HeaderReplayed))
		}
		if !bytes.Equal(first.Body.Bytes(), again.Body.Bytes()) {
			t.Errorf("the replay's body differs:\nfirst %s\nagain %s", first.Body, again.Body)
		}
		resign := func(edit func(*pay.Instruction)) pay.Instruction {
			in := req.Spend
			edit(&in)
			in.Envelope.Signature = ""
			if err := protocol.SignSpend("hold.place", &in, protocolAgentKey); err != nil {
				t.Fatal(err)
			}
			return in
		}
		for _, tc := range []struct {
			name string
			body protocol.HoldPlaceRequest
		}{
			{"other ttl", protocol.HoldPlaceRequest{Spend: req.Spend, TTLSeconds: 7200}},
			{"other amount", protocol.HoldPlaceRequest{Spend: resign(func(in *pay.Instruction) { in.Amount.Minor = 2_000 }), TTLSeconds: 3600}},
			{"other payee", protocol.HoldPlaceRequest{Spend: resign(func(in *pay.Instruction) { in.Payee = "acct:other.example" }), TTLSeconds: 3600}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := ts.post(t, "hold.place", tc.body)
				if p := decodeProblem(t, w); w.Code != http.StatusUnprocessableEntity || p.Code != pay.CodeIdempotencyConflict {
					t.Errorf("%d %s, want 422 %s\n%s", w.Code, p.Code, pay.CodeIdempotencyConflict, w.Body)
				}
			})
		}
	})

	t.Run("denied as /pay", func(t *testing.T) {
		// Above the mandate's per-transaction cap, through the surface and
		// through /pay.
		hold := ts.post(t, "hold.place", protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 60_000), TTLSeconds: 3600})
		in := f.spend(t, "pay", protocolCard, "acct:seller.example", 60_000)
		in.Envelope.Signature = ""
		if err := pay.SignInstruction(&in, protocolAgentKey); err != nil {
			t.Fatal(err)
		}
		direct := ts.do(t, http.MethodPost, "/pay", strings.NewReader(jsonBody(t, in)), "Content-Type", contract.MediaJSON)
		if hold.Code != http.StatusForbidden || direct.Code != http.StatusForbidden {
			t.Fatalf("statuses: hold.place %d, /pay %d, want 403\n%s\n%s", hold.Code, direct.Code, hold.Body, direct.Body)
		}
		got, want := problemMembers(t, hold), problemMembers(t, direct)
		if got["code"] != pay.CodeDenied {
			t.Errorf("code %v, want %s", got["code"], pay.CodeDenied)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			t.Errorf("members differ:\nhold.place %v\n/pay       %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		for _, k := range []string{"type", "title", "status", "code", "action", "detail", "mandateId", "reasons"} {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("%s: hold.place %v, /pay %v", k, got[k], want[k])
			}
		}
		reasons, _ := got["reasons"].([]any)
		if len(reasons) != 1 || reasons[0].(map[string]any)["code"] != gate.CodePerTxCap {
			t.Errorf("reasons %v, want one %s", got["reasons"], gate.CodePerTxCap)
		}
		if id, _ := got["intentId"].(string); id == "" || id == want["intentId"] {
			t.Errorf("intentId %v (the /pay one is %v)", got["intentId"], want["intentId"])
		}
	})

	t.Run("refused transition", func(t *testing.T) {
		placed := ts.post(t, "hold.place", protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 1_000), TTLSeconds: 3600})
		var h protocol.HoldPlaced
		if err := json.Unmarshal(placed.Body.Bytes(), &h); err != nil || placed.Code != http.StatusOK {
			t.Fatalf("place: %d %v\n%s", placed.Code, err, placed.Body)
		}
		if w := ts.post(t, "stake.release", protocol.StakeRef{StakeID: f.stake}); w.Code != http.StatusOK {
			t.Fatalf("first release: %d %s", w.Code, w.Body)
		}
		for _, tc := range []struct {
			name   string
			method string
			body   any
			status int
			code   string
			action contract.Action
		}{
			{"capture more than held", "hold.capture", protocol.HoldCaptureRequest{HoldID: h.HoldID, AmountMinor: 1_001, IdempotencyKey: "over"},
				http.StatusUnprocessableEntity, pay.CodeCaptureExceeds, contract.ActionFixRequest},
			{"unknown hold", "hold.get", protocol.HoldRef{HoldID: "hold_nope"},
				http.StatusNotFound, pay.CodeHoldNotFound, contract.ActionFixRequest},
			{"stake released twice", "stake.release", protocol.StakeRef{StakeID: f.stake},
				http.StatusConflict, protocol.CodeStakeReleased, contract.ActionStop},
		} {
			t.Run(tc.name, func(t *testing.T) {
				w := ts.post(t, tc.method, tc.body)
				m, _ := protocol.Lookup(tc.method)
				p := decodeProblem(t, w)
				want := contract.Problem{Type: testBase + "/problems/" + tc.code, Status: tc.status, Code: tc.code, Action: tc.action,
					Instance: m.Path(), RequestID: w.Header().Get("X-Request-Id")}
				got := p
				got.Title, got.Detail = "", ""
				if w.Code != tc.status || !reflect.DeepEqual(got, want) {
					t.Errorf("%d %+v\nwant %d %+v", w.Code, got, tc.status, want)
				}
				if p.Title == "" || p.Detail == "" {
					t.Errorf("title %q detail %q", p.Title, p.Detail)
				}
			})
		}
		w := ts.post(t, "hold.get", protocol.HoldRef{HoldID: h.HoldID})
		var got protocol.Hold
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Status != protocol.HoldHeld || got.CapturedMinor != 0 {
			t.Errorf("after the refused capture: %d %s", w.Code, w.Body)
		}
	})

	t.Run("revoke identity", func(t *testing.T) {
		short := ts.post(t, "revocation.revoke_identity", protocol.RevokeIdentityRequest{Agent: protocolAgent, Override: protocol.Override{Rationale: "too short"}})
		if p := decodeProblem(t, short); p.Code != contract.CodeOperatorRationaleTooShort {
			t.Fatalf("short rationale: %d %s\n%s", short.Code, p.Code, short.Body)
		}
		place := func() *httptest.ResponseRecorder {
			return ts.post(t, "hold.place", protocol.HoldPlaceRequest{Spend: f.spend(t, "hold.place", protocolCard, "acct:seller.example", 1_000), TTLSeconds: 3600})
		}
		if w := place(); w.Code != http.StatusOK {
			t.Fatalf("a refused revocation revoked: %d %s", w.Code, w.Body)
		}
		w := ts.post(t, "revocation.revoke_identity", protocol.RevokeIdentityRequest{Agent: protocolAgent,
			Override: protocol.Override{Rationale: "the agent's key leaked"}})
		var rev pay.IdentityRevocation
		if err := json.Unmarshal(w.Body.Bytes(), &rev); err != nil || w.Code != http.StatusOK ||
			rev.Agent != protocolAgent || rev.Operator != "op-test" || rev.Rationale != "the agent's key leaked" {
			t.Fatalf("revoke: %d %v\n%s", w.Code, err, w.Body)
		}
		w = place()
		if m := problemMembers(t, w); w.Code != http.StatusForbidden || m["code"] != pay.CodeUnauthorized || m["reason"] != string(pay.ReasonIdentityRevoked) {
			t.Errorf("hold.place after revocation: %d %s", w.Code, w.Body)
		}
	})
}
