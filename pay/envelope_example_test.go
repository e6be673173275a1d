package pay_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// The examples share a fixed world: deterministic keys and a fixed clock,
// so their output is stable.
var exampleNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func exampleKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

// exampleMandate is what an operator issues (offline, with
// `countersign operator mandate`) and hands to the agent.
func exampleMandate(agent string) string {
	tok, err := pay.SignMandate(pay.MandateClaims{
		ID:                "mdt_01JDEMO",
		Agent:             agent,
		IssuedAt:          exampleNow.Add(-time.Hour),
		ExpiresAt:         exampleNow.Add(30 * 24 * time.Hour),
		Payees:            []string{"*"},
		Currency:          "USD",
		PerTxCapMinor:     50000,
		PerPeriodCapMinor: 1000000,
		Period:            gate.Day,
		Rails:             []string{"sandbox-card", "sandbox-bank", "sandbox-chain"},
		ConfirmAboveMinor: 10000,
	}, exampleKey(1), "op-alice")
	if err != nil {
		log.Fatal(err)
	}
	return tok
}

func exampleVerifier() *pay.MandateVerifier {
	v, err := pay.NewMandateVerifier(
		[]pay.OperatorKey{{KeyID: "op-alice", Public: exampleKey(1).Public()}},
		&pay.MandateVerifierOptions{Now: func() time.Time { return exampleNow }})
	if err != nil {
		log.Fatal(err)
	}
	return v
}

func exampleInstruction(agentKey ed25519.PrivateKey) *pay.Instruction {
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	return &pay.Instruction{
		IdempotencyKey: "7f3c6a2e",
		Payee:          "acct:seller.example",
		Amount:         pay.Amount{Minor: 1250, Currency: "USD"},
		Purpose:        "invoice 1182",
		Terms: pay.Terms{
			Rail:          "sandbox-card",
			Reversibility: gate.Reversible,
			Finality:      gate.FinalityInstant,
			Credential:    gate.CredentialAPIKey,
			CapitalSource: gate.CapitalPayer,
			Presence:      gate.PresenceDelegated,
		},
		Envelope: pay.Envelope{Mandate: exampleMandate(agent)},
	}
}

func ExampleSignInstruction() {
	agentKey := exampleKey(2)
	in := exampleInstruction(agentKey)

	// The agent signs; SignInstruction fills in envelope.agent.
	if err := pay.SignInstruction(in, agentKey); err != nil {
		log.Fatal(err)
	}
	fmt.Println("agent:", in.Envelope.Agent)
	fmt.Println("verify:", pay.VerifyInstruction(in))

	// Any change after signing breaks the signature.
	in.Amount.Minor = 125000
	var ue *pay.UnauthorizedError
	if errors.As(pay.VerifyInstruction(in), &ue) {
		fmt.Println("tampered:", ue.Code(), ue.Reason)
	}
	// Output:
	// agent: 8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394
	// verify: <nil>
	// tampered: intent.unauthorized signature_invalid
}

func ExampleVerifyInstruction() {
	agentKey := exampleKey(2)
	in := exampleInstruction(agentKey)
	if err := pay.SignInstruction(in, agentKey); err != nil {
		log.Fatal(err)
	}
	// A signature by another key, even over the same bytes, is refused.
	in.Envelope.Agent = hex.EncodeToString(exampleKey(3).Public().(ed25519.PublicKey))
	err := pay.VerifyInstruction(in)
	var ue *pay.UnauthorizedError
	if errors.As(err, &ue) {
		fmt.Println(errors.Is(err, pay.ErrUnauthorized), ue.Reason)
	}
	// Output: true signature_invalid
}

func ExampleVerifyEnvelope() {
	agentKey := exampleKey(2)
	in := exampleInstruction(agentKey)
	if err := pay.SignInstruction(in, agentKey); err != nil {
		log.Fatal(err)
	}
	mandates := exampleVerifier()

	// Server side, after DecodeInstruction and the agent credential check.
	m, err := pay.VerifyEnvelope(in, mandates)
	if err != nil {
		log.Fatal(err)
	}
	// The caller now checks m.ID against revoked mandates and that the
	// credential may act for in.Envelope.Agent, then asks the gate.
	fmt.Println("mandate:", m.ID, "by", m.KeyID)

	gi := in.GateInput(m)
	gi.Credential = gate.CredentialAPIKey
	gi.Policy = gate.Policy{Rails: map[string]gate.RailFacts{
		"sandbox-card": {Reversibility: gate.Reversible, Finality: gate.FinalityInstant},
	}}
	d := gate.Decide(gi)
	fmt.Println("decision:", d.Outcome)
	// Output:
	// mandate: mdt_01JDEMO by op-alice
	// decision: allow
}

func ExampleSigningBytes() {
	in := &pay.Instruction{
		IdempotencyKey: "k1",
		Payee:          "acct:seller.example",
		Amount:         pay.Amount{Minor: 1250, Currency: "USD"},
		Purpose:        "invoice 1182",
		Terms: pay.Terms{Rail: "sandbox-card", Reversibility: "reversible", Finality: "instant",
			Credential: "api-key", CapitalSource: "payer", Presence: "delegated"},
		Envelope: pay.Envelope{Agent: "8139...", Mandate: "eyJ...", Signature: "not signed over"},
	}
	b, err := pay.SigningBytes(in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"amount":{"currency":"USD","minor":1250},"envelope":{"agent":"8139...","mandate":"eyJ..."},"idempotencyKey":"k1","payee":"acct:seller.example","purpose":"invoice 1182","terms":{"capitalSource":"payer","credential":"api-key","finality":"instant","presence":"delegated","rail":"sandbox-card","reversibility":"reversible"}}
}

func ExampleInstruction_GateInput() {
	agentKey := exampleKey(2)
	in := exampleInstruction(agentKey)
	in.Amount.Minor = 20000 // above the mandate's confirmation threshold
	if err := pay.SignInstruction(in, agentKey); err != nil {
		log.Fatal(err)
	}
	m, err := pay.VerifyEnvelope(in, exampleVerifier())
	if err != nil {
		log.Fatal(err)
	}
	gi := in.GateInput(m)
	gi.Policy.Rails = map[string]gate.RailFacts{
		"sandbox-card": {Reversibility: gate.Reversible, Finality: gate.FinalityInstant},
	}
	d := gate.Decide(gi)
	fmt.Println(d.Outcome, d.MandateID, d.Reasons[0].Code)
	// Output: confirm mdt_01JDEMO confirm_threshold
}

// A request that is not an instruction (here a made-up "quote request")
// is signed over its own canonical bytes, which cover envelope.agent, with
// a typ of its own; SignedDigest is its idempotency digest.
func ExampleSignEnvelope() {
	_, agentKey, _ := ed25519.GenerateKey(nil)
	type request struct {
		Item     string       `json:"item"`
		Envelope pay.Envelope `json:"envelope"`
	}
	r := request{Item: "one report", Envelope: pay.Envelope{Mandate: "<mandate>"}}
	var signed []byte
	err := pay.SignEnvelope(&r.Envelope, agentKey, "example-request+jws", func() ([]byte, error) {
		var err error
		signed, err = json.Marshal(map[string]string{"item": r.Item, "agent": r.Envelope.Agent})
		return signed, err
	})
	fmt.Println(err, len(r.Envelope.Agent), strings.Count(r.Envelope.Signature, "."), len(pay.SignedDigest(signed, r.Envelope.Signature)))
	// Output: <nil> 64 2 64
}
