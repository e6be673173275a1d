package x402_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

// Pay for a resource of the fake x402 server: the unpaid request's 402,
// one signature under a nonce fixed by the payment's id, the paid request.
func ExamplePayer_FetchPaid() {
	fake := fakex402.New(nil)
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()
	ctx := context.Background()
	p := &x402.Payer{}

	r, _ := p.Fetch(ctx, "GET", srv.URL+"/paid", nil, nil)
	pr, _ := x402.PaymentRequiredFrom(r.Header, r.Body)
	key, _ := evm.GenerateKey()
	now := time.Now()
	payload, _ := x402.SignExactEVM(pr.Accepts[0], &pr.Resource, key, x402.NonceFromID("int_example"), now.Add(-time.Minute), now.Add(50*time.Second))
	header, _ := x402.EncodePaymentPayload(payload)

	res, _ := p.FetchPaid(ctx, "GET", srv.URL+"/paid", nil, nil, header)
	fmt.Println(r.Status, res.Outcome, res.Response.Status, res.Settlement.Network)
	// Output: 402 paid 200 eip155:84532
}
