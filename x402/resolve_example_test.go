package x402_test

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

// An attempt whose answer was lost, resolved once its authorization has
// expired: the chain says the nonce was never used, so nothing was paid.
func ExampleResolver_Resolve() {
	fake := fakex402.New(nil) // its chain state answers AuthorizationState
	key, _ := evm.GenerateKey()
	validBefore := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a := x402.Attempt{Method: "GET", URL: "http://127.0.0.1:1/report", Payment: "stored PAYMENT-SIGNATURE",
		Network: fake.Network(), Asset: fake.Asset(), From: key.Address(),
		Nonce: x402.NonceFromID("int_lost"), ValidBefore: validBefore}
	r := &x402.Resolver{Chain: fake, Finality: time.Minute, ClockSkew: 10 * time.Minute,
		Now: func() time.Time { return validBefore.Add(12 * time.Minute) }}
	got, res, err := r.Resolve(context.Background(), a)
	fmt.Println(got, "-", res.Reason, err)
	// Output: never settled - the authorization expired unused <nil>
}
