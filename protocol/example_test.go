package protocol_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// exampleWorld is a deployment in memory with fixed keys and a fixed
// clock: a record, a card rail that authorizes holds and a wire rail that
// does not, the money path, the protocol surface, and one agent with a
// mandate of 50.00 USD a payment, 10,000.00 a day, a person above 100.00.
type exampleWorld struct {
	st       store.Store
	log      *audit.Log
	pay      *pay.Service
	svc      *protocol.Service
	agentKey ed25519.PrivateKey
	caller   pay.Caller
	mandate  string
	seq      int
}

// exampleKey is a fixed Ed25519 key: examples print the same every run.
func exampleKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

var exampleNow = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func newExampleWorld() (*exampleWorld, error) {
	ctx := context.Background()
	now := func() time.Time { return exampleNow }
	st := memstore.New(nil)
	log, err := audit.Open(ctx, st, exampleKey(1), &audit.Options{Now: now})
	if err != nil {
		return nil, err
	}
	facts := settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}
	card, err := fake.New("sandbox-card", &fake.Options{Store: st, Now: now, Authorizations: true, Facts: facts})
	if err != nil {
		return nil, err
	}
	wire, err := fake.New("sandbox-wire", &fake.Options{Store: st, Now: now, Facts: facts})
	if err != nil {
		return nil, err
	}
	rails := &settle.Registry{}
	for _, r := range []settle.Rail{card, wire} {
		if err := rails.Register(r); err != nil {
			return nil, err
		}
	}
	opKey := exampleKey(2)
	mandates, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-1", Public: opKey.Public()}}, &pay.MandateVerifierOptions{Now: now})
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	// The surface joins the money path as it is built (protocol.Extension).
	var svc *protocol.Service
	surface := protocol.Extension(protocol.Options{Store: st, Log: log, Mandates: mandates, Now: now, Logger: quiet}, &svc)
	p, err := pay.New(pay.Options{Store: st, Log: log, Rails: rails, Mandates: mandates, Now: now, Logger: quiet,
		Extensions: []pay.Extension{surface}})
	if err != nil {
		return nil, err
	}
	if _, err := p.Reconcile(ctx); err != nil {
		return nil, err
	}
	w := &exampleWorld{st: st, log: log, pay: p, svc: svc, agentKey: exampleKey(3)}
	agent := fmt.Sprintf("%x", w.agentKey.Public())
	w.caller = pay.Caller{KeyID: "ak_01JEXAMPLEAGENTKEY00000000", Agents: []string{agent}, Credential: gate.CredentialAPIKey}
	w.mandate, err = pay.SignMandate(pay.MandateClaims{
		ID: "mdt-example", Agent: agent, IssuedAt: exampleNow.Add(-time.Hour), ExpiresAt: exampleNow.Add(30 * 24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 5_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
		Rails: []string{"sandbox-card", "sandbox-wire"}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
	}, opKey, "op-1")
	return w, err
}

// instruction is an unsigned payment instruction of the world's agent.
func (w *exampleWorld) instruction(rail string, minor int64) pay.Instruction {
	w.seq++
	return pay.Instruction{
		IdempotencyKey: fmt.Sprintf("order-%d", 1000+w.seq), Payee: "acct:seller.example",
		Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "one GPU hour",
		Terms: pay.Terms{Rail: rail, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: w.mandate},
	}
}

// payNow pays through /pay's money path and returns the intent id.
func (w *exampleWorld) payNow(minor int64) (string, error) {
	in := w.instruction("sandbox-wire", minor)
	if err := pay.SignInstruction(&in, w.agentKey); err != nil {
		return "", err
	}
	res, err := w.pay.PayInstruction(context.Background(), w.caller, &in, "", "req_example")
	if err != nil {
		return "", err
	}
	return res.IntentID, nil
}

// A spend is signed for the method it is sent to: the signature covers
// {"method": id, "payment": the instruction's signing bytes}, so a spend
// signed for hold.place is refused by /pay and by every other method.
func ExampleSignSpend() {
	agentKey := exampleKey(3)
	in := pay.Instruction{
		IdempotencyKey: "order-1042", Payee: "acct:seller.example",
		Amount: pay.Amount{Minor: 2_500, Currency: "USD"}, Purpose: "one GPU hour",
		Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: "<the mandate token>"},
	}
	if err := protocol.SignSpend("hold.place", &in, agentKey); err != nil {
		panic(err)
	}
	signed, err := protocol.SpendSigningBytes("hold.place", &in)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(signed[:strings.Index(string(signed), `"envelope"`)]) + "...")

	// The signature is a compact JWS with a detached payload.
	header, rest, _ := strings.Cut(in.Envelope.Signature, ".")
	payload, sig, _ := strings.Cut(rest, ".")
	h, _ := base64.RawURLEncoding.DecodeString(header)
	s, _ := base64.RawURLEncoding.DecodeString(sig)
	fmt.Println(string(h), "payload detached:", payload == "")
	msg := header + "." + base64.RawURLEncoding.EncodeToString(signed)
	fmt.Println("verifies:", ed25519.Verify(agentKey.Public().(ed25519.PublicKey), []byte(msg), s))
	other, _ := protocol.SpendSigningBytes("custody.deposit", &in)
	fmt.Println("verifies for another method:", ed25519.Verify(agentKey.Public().(ed25519.PublicKey),
		[]byte(header+"."+base64.RawURLEncoding.EncodeToString(other)), s))
	// Output:
	// {"method":"hold.place","payment":{"amount":{"currency":"USD","minor":2500},...
	// {"alg":"EdDSA","typ":"svc-spend+jws"} payload detached: true
	// verifies: true
	// verifies for another method: false
}

// Place an authorization hold in process, capture part of it, and read it
// back: the rest of the reservation goes back to the mandate.
func ExampleService_HoldPlace() {
	ctx := context.Background()
	w, err := newExampleWorld()
	if err != nil {
		panic(err)
	}
	call := protocol.AgentCall(w.caller, "req_example")
	in := w.instruction("sandbox-card", 4_000)
	if err := protocol.SignSpend("hold.place", &in, w.agentKey); err != nil {
		panic(err)
	}
	placed, err := w.svc.HoldPlace(ctx, call, &protocol.HoldPlaceRequest{Spend: in, TTLSeconds: 3600})
	if err != nil {
		panic(err)
	}
	fmt.Println(placed.Status, placed.Amount.Minor, placed.Amount.Currency, "rail holds the funds:", placed.RailAuthorization,
		"until", placed.ExpiresAt.Format(time.RFC3339))

	captured, err := w.svc.HoldCapture(ctx, call, &protocol.HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 2_750, IdempotencyKey: "capture-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println("captured", captured.CapturedMinor, "released", captured.ReleasedMinor, "receipt", captured.Receipt.Amount.Minor)

	h, err := w.svc.HoldGet(ctx, call, &protocol.HoldRef{HoldID: placed.HoldID})
	if err != nil {
		panic(err)
	}
	fmt.Println(h.Status, h.CapturedMinor, h.ReleasedMinor)
	// Output:
	// held 4000 USD rail holds the funds: true until 2026-11-23T11:00:00Z
	// captured 2750 released 1250 receipt 2750
	// captured 2750 1250
}

// A proof of enforcement verifies offline with the record's verifier key
// alone; any change to it does not.
func ExampleVerifyProof() {
	ctx := context.Background()
	w, err := newExampleWorld()
	if err != nil {
		panic(err)
	}
	id, err := w.payNow(1_250)
	if err != nil {
		panic(err)
	}
	proof, err := w.svc.ProofGet(ctx, protocol.AgentCall(w.caller, "req_example"), &protocol.ProofGetRequest{IntentID: id})
	if err != nil {
		panic(err)
	}
	b, err := json.Marshal(proof) // what proof.get answers, and a file to keep
	if err != nil {
		panic(err)
	}

	// Offline: nothing but the verifier key (record.pub) and the bytes.
	key := w.log.VerifierKey()
	v := protocol.VerifyProof(key, b)
	fmt.Println("valid:", v.Valid, "outcome:", v.Outcome)
	for _, e := range proof.Entries {
		fmt.Println(e.Entry.Seq, e.Entry.Type)
	}

	forged := bytes.Replace(b, []byte(`"minor":1250`), []byte(`"minor":125`), 1)
	v = protocol.VerifyProof(key, forged)
	fmt.Println("valid:", v.Valid)
	fmt.Println(v.Failure[:strings.Index(v.Failure, ":")])
	// Output:
	// valid: true outcome: allow
	// 1 gate.decision
	// 2 payment.settled
	// valid: false
	// entry 0 (seq 1)
}

// The surface: every method with its operation id, credential class and
// route, from the same declarations the server, the OpenAPI document and
// the CLI use.
func ExampleMethods() {
	for _, m := range protocol.Methods() {
		fmt.Printf("%-28s %-8s %s\n", m.ID(), m.Credential, m.Path())
	}
	// Output:
	// mandate.get                  agent    /protocol/mandate/get
	// mandate.list                 agent    /protocol/mandate/list
	// mandate.verify               agent    /protocol/mandate/verify
	// mandate.revoke               operator /protocol/mandate/revoke
	// session.open                 agent    /protocol/session/open
	// session.get                  agent    /protocol/session/get
	// session.close                agent    /protocol/session/close
	// hold.place                   agent    /protocol/hold/place
	// hold.capture                 agent    /protocol/hold/capture
	// hold.release                 agent    /protocol/hold/release
	// hold.get                     agent    /protocol/hold/get
	// meter.open                   agent    /protocol/meter/open
	// meter.record                 agent    /protocol/meter/record
	// meter.close                  agent    /protocol/meter/close
	// meter.get                    agent    /protocol/meter/get
	// custody.balance              agent    /protocol/custody/balance
	// custody.deposit              agent    /protocol/custody/deposit
	// custody.withdraw             agent    /protocol/custody/withdraw
	// custody.ledger               agent    /protocol/custody/ledger
	// stake.post                   agent    /protocol/stake/post
	// stake.get                    agent    /protocol/stake/get
	// stake.release                agent    /protocol/stake/release
	// economics.summary            agent    /protocol/economics/summary
	// economics.budget             agent    /protocol/economics/budget
	// oversight.status             agent    /protocol/oversight/status
	// oversight.policy             agent    /protocol/oversight/policy
	// oversight.queue              agent    /protocol/oversight/queue
	// revocation.list              agent    /protocol/revocation/list
	// revocation.check             agent    /protocol/revocation/check
	// revocation.revoke_identity   operator /protocol/revocation/revoke_identity
	// proof.get                    agent    /protocol/proof/get
	// proof.verify                 agent    /protocol/proof/verify
	// terms.propose                agent    /protocol/terms/propose
	// terms.accept                 agent    /protocol/terms/accept
	// terms.get                    agent    /protocol/terms/get
	// negotiate.offer              agent    /protocol/negotiate/offer
	// negotiate.counter            agent    /protocol/negotiate/counter
	// negotiate.accept             agent    /protocol/negotiate/accept
	// negotiate.reject             agent    /protocol/negotiate/reject
	// negotiate.get                agent    /protocol/negotiate/get
	// obligation.create            agent    /protocol/obligation/create
	// obligation.get               agent    /protocol/obligation/get
	// obligation.list              agent    /protocol/obligation/list
	// obligation.cancel            agent    /protocol/obligation/cancel
	// evidence.submit              agent    /protocol/evidence/submit
	// evidence.get                 agent    /protocol/evidence/get
	// evidence.list                agent    /protocol/evidence/list
	// clearing.status              agent    /protocol/clearing/status
	// clearing.attempt             agent    /protocol/clearing/attempt
	// delivery.record              agent    /protocol/delivery/record
	// delivery.accept              agent    /protocol/delivery/accept
	// delivery.get                 agent    /protocol/delivery/get
	// delivery.dispute             operator /protocol/delivery/dispute
	// dispute.open                 agent    /protocol/dispute/open
	// dispute.respond              agent    /protocol/dispute/respond
	// dispute.get                  agent    /protocol/dispute/get
	// dispute.list                 agent    /protocol/dispute/list
	// dispute.resolve              operator /protocol/dispute/resolve
	// insurance.quote              agent    /protocol/insurance/quote
	// insurance.bind               agent    /protocol/insurance/bind
	// insurance.get                agent    /protocol/insurance/get
	// claim.file                   agent    /protocol/claim/file
	// claim.get                    agent    /protocol/claim/get
	// claim.list                   agent    /protocol/claim/list
}

// The evidence lattice: a class meets a floor when it is the floor or
// above it; wit and rec are incomparable.
func ExampleEvidenceClass_Satisfies() {
	for _, pair := range [][2]protocol.EvidenceClass{
		{protocol.ClassSign, protocol.ClassSelf}, {protocol.ClassSelf, protocol.ClassSign},
		{protocol.ClassRec, protocol.ClassWit}, {protocol.ClassAtt, protocol.ClassWit}, {protocol.ClassPote, protocol.ClassProof},
	} {
		fmt.Printf("%s meets a %s floor: %v\n", pair[0], pair[1], pair[0].Satisfies(pair[1]))
	}
	// Output:
	// sign meets a self floor: true
	// self meets a sign floor: false
	// rec meets a wit floor: false
	// att meets a wit floor: true
	// pote meets a proof floor: true
}

// A counterparty signs a statement about an obligation; the signature
// covers a context line and the statement's RFC 8785 form, so member
// order and spacing do not matter, and it cannot move to another subject.
func ExampleSignEvidence() {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	subject := "obl_01JEXAMPLE0000000000000000"
	sig, _ := protocol.SignEvidence([]byte(`{"subject": "`+subject+`", "delivered": "report v1"}`), subject, key)
	canon, _ := protocol.CanonicalStatement([]byte(`{"delivered":"report v1","subject":"`+subject+`"}`), subject)
	raw, _ := base64.RawURLEncoding.DecodeString(sig)
	fmt.Println(string(canon))
	fmt.Println(ed25519.Verify(key.Public().(ed25519.PublicKey), protocol.EvidenceSigningBytes(canon), raw))
	_, err := protocol.SignEvidence([]byte(`{"subject":"obl_other","delivered":"report v1"}`), subject, key)
	fmt.Println(err != nil)
	// Output:
	// {"delivered":"report v1","subject":"obl_01JEXAMPLE0000000000000000"}
	// true
	// true
}

// The premium of a policy: the schedule's rate of the limit, rounded up,
// at least the minimum.
func ExampleInsuranceSchedule_Premium() {
	s := protocol.InsuranceSchedule{RateBps: 300, MinPremiumMinor: 100}
	for _, limit := range []int64{1_000, 5_000, 10_001} {
		fmt.Println(limit, "→", s.Premium(limit))
	}
	// Output:
	// 1000 → 100
	// 5000 → 150
	// 10001 → 301
}

// The bytes a counterparty signs to accept terms: the terms' canonical
// JSON, typed so they can never be read as an offer or a rejection.
func ExampleTermsSigningBytes() {
	t := &protocol.TwoPartyTerms{ID: "trm_01JEXAMPLE000000000000000", Agent: strings.Repeat("a", 64), Counterparty: strings.Repeat("b", 64),
		TermsBody: protocol.TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2500, Currency: "USD"},
			Description: "a market report", ValidUntil: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}}
	b, _ := protocol.TermsSigningBytes(t)
	fmt.Println(strings.ReplaceAll(string(b), strings.Repeat("a", 64), "a…"))
	// Output:
	// {"agent":"a…","amount":{"currency":"USD","minor":2500},"counterparty":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","description":"a market report","payee":"acct:seller.example","ref":"trm_01JEXAMPLE000000000000000","type":"countersign.terms.v1","validUntil":"2026-12-01T00:00:00Z"}
}
