package pay_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

func ExampleSignMandate() {
	operator := exampleKey(1)
	agent := hex.EncodeToString(exampleKey(2).Public().(ed25519.PublicKey))
	tok, err := pay.SignMandate(pay.MandateClaims{
		ID:                "mdt_01JDEMO",
		Agent:             agent,
		IssuedAt:          exampleNow,
		ExpiresAt:         exampleNow.Add(7 * 24 * time.Hour),
		Payees:            []string{"*.seller.example", "acct:other.example"},
		Currency:          "USD",
		PerTxCapMinor:     50000,
		PerPeriodCapMinor: 200000,
		Period:            gate.Week,
		Rails:             []string{"sandbox-card"},
		ConfirmAboveMinor: 10000,
		Velocity:          gate.Velocity{Count: 10, Seconds: 3600},
		Approvals:         2,
	}, operator, "op-alice")
	if err != nil {
		log.Fatal(err)
	}

	m, err := exampleVerifier().Verify(tok)
	if err != nil {
		log.Fatal(err)
	}
	c := m.Claims
	fmt.Println(m.ID, m.KeyID, c.Period, c.PerPeriodCapMinor, c.Velocity.Count, c.Approvals)
	fmt.Println(c.ExpiresAt.Format(time.RFC3339))
	// Output:
	// mdt_01JDEMO op-alice week 200000 10 2
	// 2026-11-29T10:00:00Z
}

func ExampleMandateVerifier_Verify() {
	agent := hex.EncodeToString(exampleKey(2).Public().(ed25519.PublicKey))
	tok := exampleMandate(agent)

	now := exampleNow
	v, err := pay.NewMandateVerifier(
		[]pay.OperatorKey{{KeyID: "op-alice", Public: exampleKey(1).Public()}},
		&pay.MandateVerifierOptions{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	m, err := v.Verify(tok)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.ID, m.Claims.Approvals)

	// Expiry is checked on every call, even for a cached token.
	now = now.Add(31 * 24 * time.Hour)
	_, err = v.Verify(tok)
	var ue *pay.UnauthorizedError
	if errors.As(err, &ue) {
		fmt.Println(ue.Reason)
	}

	// A key the verifier does not trust.
	rogue, err := pay.SignMandate(m.Claims, exampleKey(9), "op-mallory")
	if err != nil {
		log.Fatal(err)
	}
	now = exampleNow
	_, err = v.Verify(rogue)
	fmt.Println(err)
	// Output:
	// mdt_01JDEMO 1
	// mandate_expired
	// pay: not authorized: mandate_unknown_key: kid "op-mallory"
}

func ExampleNewMandateVerifier() {
	// Operators may hold Ed25519 or P-256 keys.
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	_, err = pay.NewMandateVerifier([]pay.OperatorKey{
		{KeyID: "op-alice", Public: exampleKey(1).Public()},
		{KeyID: "op-bob", Public: p256.Public()},
	}, nil)
	fmt.Println(err)
	// Output: <nil>
}

func ExampleMandateClaims_Validate() {
	err := pay.MandateClaims{ID: "mdt_1", Currency: "usd", Period: "year"}.Validate()
	var ce *pay.ClaimsError
	if errors.As(err, &ce) {
		for _, f := range ce.Fields {
			fmt.Println(f.Field, f.Rule)
		}
	}
	// Output:
	// sub required
	// iat required
	// exp required
	// payees required
	// currency currency
	// perTxCapMinor min
	// perPeriodCapMinor min
	// period oneof
	// rails required
}

func ExampleMandate_Gate() {
	agent := hex.EncodeToString(exampleKey(2).Public().(ed25519.PublicKey))
	m, err := exampleVerifier().Verify(exampleMandate(agent))
	if err != nil {
		log.Fatal(err)
	}
	g := m.Gate()
	fmt.Println(g.ID, g.Currency, g.PerTxCapMinor, g.Rails)
	// Output: mdt_01JDEMO USD 50000 [sandbox-card sandbox-bank sandbox-chain]
}
