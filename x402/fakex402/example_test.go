package fakex402_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

// Pay a fake resource as an x402 client does: ask, read the 402, sign the
// offer, retry with PAYMENT-SIGNATURE; then ask the fake chain whether the
// authorization was used.
func Example() {
	fake := fakex402.New(&fakex402.Options{Resources: []fakex402.Resource{{Path: "/report", Amount: "2500"}}})
	srv := httptest.NewServer(fake.Handler())
	defer srv.Close()

	resp, _ := http.Get(srv.URL + "/report")
	resp.Body.Close()
	pr, _ := x402.DecodePaymentRequired(resp.Header.Get(x402.HeaderPaymentRequired))
	fmt.Println(resp.StatusCode, pr.Accepts[0].Amount, pr.Accepts[0].Network)

	key, _ := evm.GenerateKey()
	nonce := x402.NonceFromID("int_example")
	now := time.Now()
	p, _ := x402.SignExactEVM(pr.Accepts[0], &pr.Resource, key, nonce, now.Add(-time.Minute), now.Add(time.Minute))
	h, _ := x402.EncodePaymentPayload(p)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/report", nil)
	req.Header.Set(x402.HeaderPaymentSignature, h)
	resp, _ = http.DefaultClient.Do(req)
	resp.Body.Close()
	s, _ := x402.DecodeSettlementResponse(resp.Header.Get(x402.HeaderPaymentResponse))
	fmt.Println(resp.StatusCode, s.Success, s.Payer == key.Address().String())

	used, _ := fake.AuthorizationState(context.Background(), fake.Network(), fake.Asset(), key.Address(), nonce)
	overHTTP, _ := (&fakex402.ChainClient{BaseURL: srv.URL}).AuthorizationState(context.Background(), fake.Network(), fake.Asset(), key.Address(), nonce)
	fmt.Println(used, overHTTP, len(fake.Settlements()))
	// Output:
	// 402 2500 eip155:84532
	// 200 true true
	// true true 1
}
