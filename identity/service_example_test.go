package identity_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/memstore"
)

// openExample opens an identity service in memory with a fixed gate policy:
// what a deployment does with its real pay.Service and contract model.
func openExample(ctx context.Context, seed byte) *identity.Service {
	st := memstore.New(nil)
	quiet := slog.New(slog.DiscardHandler)
	recKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	lg, err := audit.Open(ctx, st, recKey, &audit.Options{Logger: quiet})
	if err != nil {
		panic(err)
	}
	seedBytes := make([]byte, 32)
	seedBytes[0] = seed
	policy := pay.Policy{Rails: []pay.RailPolicy{{Name: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant}},
		DenyPayees: []string{}, DenyAgents: []string{}, BreakerAfter: 5}
	svc, err := identity.Open(ctx, identity.Options{
		Store: st, Log: lg, Logger: quiet,
		Keys: []ed25519.PrivateKey{ed25519.NewKeyFromSeed(seedBytes)},
		Facts: identity.Sources{
			Policy:   func() pay.Policy { return policy },
			Mandates: func(context.Context) ([]pay.KnownMandate, error) { return nil, nil },
			Operator: identity.OperatorFacts{ID: "example-operator"},
		}.Facts,
	})
	if err != nil {
		panic(err)
	}
	return svc
}

// A deployment discloses itself; another verifies the disclosure, with the
// live handshake, and records its decision.
func ExampleService_Verify() {
	ctx := context.Background()
	us, them := openExample(ctx, 1), openExample(ctx, 2)

	envelope, err := them.Disclose(ctx, identity.EnvelopeJWS)
	if err != nil {
		panic(err)
	}
	ch, _ := us.Challenge(ctx, "us")
	resp, _ := them.Respond(ctx, ch)
	v, err := us.Verify(ctx, identity.VerifyRequest{Envelope: envelope, Response: &resp},
		audit.Actor{Kind: "agent", ID: "ak_example"}, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Outcome, v.Envelope, v.AgentID == them.AgentID())
	for _, c := range v.Checks {
		fmt.Println(c.Name, c.OK)
	}
	// Output:
	// transact jws true
	// signature true
	// freshness true
	// revocation true
	// handshake true
}

// Resolve turns a reference into a counterparty, offline.
func ExampleService_Resolve() {
	ctx := context.Background()
	svc := openExample(ctx, 1)
	c, err := svc.Resolve(ctx, "eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb", identity.ResolveOptions{},
		audit.Actor{Kind: "agent", ID: "ak_example"}, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(c.Kind, c.Account.ChainID, c.Account.Address)
	_, err = svc.Resolve(ctx, "https://example.com/agent", identity.ResolveOptions{}, audit.Actor{Kind: "agent", ID: "ak"}, "")
	fmt.Println(err)
	// Output:
	// account eip155:1 0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb
	// identity: unparseable reference: not a did:key, a 64-hex agent id, a CAIP-10 account id or a registry id
}

// Disclose serves the cached signed disclosure; Document shows what it says.
func ExampleService_Disclose() {
	ctx := context.Background()
	svc := openExample(ctx, 1)
	raw, _ := svc.Disclose(ctx, identity.EnvelopeV1)
	d := identity.Verify(raw, identity.Policy{Now: time.Now()})
	fmt.Println(d.Outcome, d.Disclosure.AgentID == svc.AgentID())
	fmt.Println(d.Disclosure.Constitution.Enforced, len(d.Disclosure.Constitution.HardConstraints))
	fmt.Println(d.Disclosure.Operator.OperatorID, d.Disclosure.Capital.Custody)
	// Output:
	// transact true
	// true 15
	// example-operator non_custodial
}
