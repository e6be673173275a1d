package x402_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// The PAYMENT-REQUIRED header of transports-v2/http.md's example.
const paymentRequired = "eyJ4NDAyVmVyc2lvbiI6MiwiZXJyb3IiOiJQQVlNRU5ULVNJR05BVFVSRSBoZWFkZXIgaXMgcmVxdWlyZWQiLCJyZXNvdXJjZSI6eyJ1cmwiOiJodHRwczovL2FwaS5leGFtcGxlLmNvbS9wcmVtaXVtLWRhdGEiLCJkZXNjcmlwdGlvbiI6IkFjY2VzcyB0byBwcmVtaXVtIG1hcmtldCBkYXRhIiwibWltZVR5cGUiOiJhcHBsaWNhdGlvbi9qc29uIn0sImFjY2VwdHMiOlt7InNjaGVtZSI6ImV4YWN0IiwibmV0d29yayI6ImVpcDE1NTo4NDUzMiIsImFtb3VudCI6IjEwMDAwIiwiYXNzZXQiOiIweDAzNkNiRDUzODQyYzU0MjY2MzRlNzkyOTU0MWVDMjMxOGYzZENGN2UiLCJwYXlUbyI6IjB4MjA5NjkzQmM2YWZjMEM1MzI4YkEzNkZhRjAzQzUxNEVGMzEyMjg3QyIsIm1heFRpbWVvdXRTZWNvbmRzIjo2MCwiZXh0cmEiOnsibmFtZSI6IlVTREMiLCJ2ZXJzaW9uIjoiMiJ9fV19"

func offer() (x402.PaymentRequired, x402.PaymentRequirements) {
	pr, err := x402.DecodePaymentRequired(paymentRequired)
	if err != nil {
		panic(err)
	}
	return pr, pr.Accepts[0]
}

func payerKey() *evm.Key {
	k, err := evm.ParseKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	if err != nil {
		panic(err)
	}
	return k
}

func ExampleDecodePaymentRequired() {
	pr, err := x402.DecodePaymentRequired(paymentRequired)
	if err != nil {
		panic(err)
	}
	r := pr.Accepts[0]
	fmt.Println(pr.X402Version, pr.Resource.URL)
	fmt.Println(r.Scheme, r.Network, r.Amount, r.Asset, r.PayTo, r.MaxTimeoutSeconds)

	// Version 1 is refused by name.
	_, err = x402.DecodePaymentRequired("eyJ4NDAyVmVyc2lvbiI6MSwiYWNjZXB0cyI6W119") // {"x402Version":1,"accepts":[]}
	fmt.Println(errors.Is(err, x402.ErrVersion1))
	// Output:
	// 2 https://api.example.com/premium-data
	// exact eip155:84532 10000 0x036CbD53842c5426634e7929541eC2318f3dCF7e 0x209693Bc6afc0C5328bA36FaF03C514EF312287C 60
	// true
}

func ExampleEncodePaymentRequired() {
	h, _ := x402.EncodePaymentRequired(x402.PaymentRequired{
		Resource: x402.ResourceInfo{URL: "http://127.0.0.1:8402/paid"},
		Accepts:  []x402.PaymentRequirements{{Scheme: "exact", Network: "eip155:84532", Amount: "1", Asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", PayTo: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C", MaxTimeoutSeconds: 60}},
	})
	pr, err := x402.DecodePaymentRequired(h)
	fmt.Println(pr.X402Version, pr.Accepts[0].Amount, err)
	// Output: 2 1 <nil>
}

func ExampleParseExactEVM() {
	_, r := offer()
	x, err := x402.ParseExactEVM(r)
	if err != nil {
		panic(err)
	}
	fmt.Println(x.ChainID, x.Amount, x.MaxTimeout, x.Domain.Name, x.Domain.Version, x.Domain.VerifyingContract)

	r.Scheme = "upto"
	_, err = x402.ParseExactEVM(r)
	var oe *x402.OfferError
	fmt.Println(errors.As(err, &oe), oe.Check)
	// Output:
	// 84532 10000 1m0s USDC 2 0x036CbD53842c5426634e7929541eC2318f3dCF7e
	// true scheme
}

// Pay an offer, send the payload, and verify it as the resource server
// would.
func ExampleSignExactEVM() {
	pr, r := offer()
	now := time.Unix(1_800_000_000, 0)
	nonce := x402.NonceFromID("int_01JEXAMPLE")
	p, err := x402.SignExactEVM(r, &pr.Resource, payerKey(), nonce, now.Add(-10*time.Minute), now.Add(time.Minute))
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Payload.Authorization.From, p.Payload.Authorization.Value, p.Payload.Authorization.ValidBefore)
	fmt.Println(p.Payload.Signature[:20] + "…")
	// Output:
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 10000 1800000060
	// 0x22dedcb72cfbd01736…
}

func ExampleEncodePaymentPayload() {
	pr, r := offer()
	now := time.Unix(1_800_000_000, 0)
	p, _ := x402.SignExactEVM(r, &pr.Resource, payerKey(), x402.NonceFromID("int_01JEXAMPLE"), now.Add(-time.Minute), now.Add(time.Minute))
	h, err := x402.EncodePaymentPayload(p) // the PAYMENT-SIGNATURE header
	fmt.Println(len(h) > 0, err)
	// Output: true <nil>
}

func ExampleDecodePaymentPayload() {
	pr, r := offer()
	now := time.Unix(1_800_000_000, 0)
	p, _ := x402.SignExactEVM(r, &pr.Resource, payerKey(), x402.NonceFromID("int_01JEXAMPLE"), now.Add(-time.Minute), now.Add(time.Minute))
	h, _ := x402.EncodePaymentPayload(p)

	got, err := x402.DecodePaymentPayload(h)
	fmt.Println(got.Accepted.PayTo, got.Payload.Authorization.Nonce[:10]+"…", err)
	// Output: 0x209693Bc6afc0C5328bA36FaF03C514EF312287C 0xf2e09856… <nil>
}

func ExampleVerifyExactEVM() {
	pr, r := offer()
	now := time.Unix(1_800_000_000, 0)
	p, _ := x402.SignExactEVM(r, &pr.Resource, payerKey(), x402.NonceFromID("int_01JEXAMPLE"), now.Add(-time.Minute), now.Add(time.Minute))

	payer, auth, err := x402.VerifyExactEVM(p, r, now)
	fmt.Println(payer, auth.Value, err)

	// Two minutes later the authorization has expired.
	_, _, err = x402.VerifyExactEVM(p, r, now.Add(2*time.Minute))
	var ve *x402.VerifyError
	fmt.Println(errors.As(err, &ve), ve.Reason)
	// Output:
	// 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 10000 <nil>
	// true invalid_exact_evm_payload_authorization_valid_before
}

func ExampleEncodeSettlementResponse() {
	h, _ := x402.EncodeSettlementResponse(x402.SettlementResponse{Success: true,
		Transaction: "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef",
		Network:     "eip155:84532", Payer: "0x857b06519E91e3A54538791bDbb0E22373e36b66"})
	fmt.Println(h)
	// Output: eyJzdWNjZXNzIjp0cnVlLCJwYXllciI6IjB4ODU3YjA2NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2UzNmI2NiIsInRyYW5zYWN0aW9uIjoiMHgxMjM0NTY3ODkwYWJjZGVmMTIzNDU2Nzg5MGFiY2RlZjEyMzQ1Njc4OTBhYmNkZWYxMjM0NTY3ODkwYWJjZGVmIiwibmV0d29yayI6ImVpcDE1NTo4NDUzMiJ9
}

func ExampleDecodeSettlementResponse() {
	// transports-v2/http.md's failure example.
	s, err := x402.DecodeSettlementResponse("eyJzdWNjZXNzIjpmYWxzZSwiZXJyb3JSZWFzb24iOiJpbnN1ZmZpY2llbnRfZnVuZHMiLCJ0cmFuc2FjdGlvbiI6IiIsIm5ldHdvcmsiOiJlaXAxNTU6ODQ1MzIiLCJwYXllciI6IjB4ODU3YjA2NTE5RTkxZTNBNTQ1Mzg3OTFiRGJiMEUyMjM3M2UzNmI2NiJ9")
	fmt.Println(s.Success, s.ErrorReason, s.Network, err)
	// Output: false insufficient_funds eip155:84532 <nil>
}

func ExampleChainID() {
	id, err := x402.ChainID("eip155:8453")
	fmt.Println(id, err)
	_, err = x402.ChainID("solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp")
	fmt.Println(err != nil)
	// Output:
	// 8453 <nil>
	// true
}

func ExampleParseUint256() {
	n, err := x402.ParseUint256("10000")
	fmt.Println(n, err)
	_, err = x402.ParseUint256("010000")
	fmt.Println(err)
	// Output:
	// 10000 <nil>
	// "010000" is not a decimal uint256
}

func ExampleParseNonce() {
	n, err := x402.ParseNonce("0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480")
	fmt.Println(hex.EncodeToString(n[:4]), err)
	// Output: f3746613 <nil>
}

func ExampleAuthorization_Parse() {
	a := x402.Authorization{From: "0x857b06519E91e3A54538791bDbb0E22373e36b66", To: "0x209693Bc6afc0C5328bA36FaF03C514EF312287C",
		Value: "10000", ValidAfter: "1740672089", ValidBefore: "1740672154",
		Nonce: "0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"}
	t, err := a.Parse()
	fmt.Println(t.From, t.Value, err)
	// Output: 0x857b06519E91e3A54538791bDbb0E22373e36b66 10000 <nil>
}

func ExampleWireAuthorization() {
	to, _ := evm.ParseAddress("0x209693Bc6afc0C5328bA36FaF03C514EF312287C")
	a := x402.WireAuthorization(evm.TransferWithAuthorization{From: payerKey().Address(), To: to,
		Value: big.NewInt(10000), ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(1740672154)})
	fmt.Println(a.From, a.Value, a.ValidBefore, a.Nonce[:6])
	// Output: 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266 10000 1740672154 0x0000
}

func ExampleAuthorizationStateCalldata() {
	from, _ := evm.ParseAddress("0x857b06519E91e3A54538791bDbb0E22373e36b66")
	nonce, _ := x402.ParseNonce("0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480")
	fmt.Printf("0x%x\n", x402.AuthorizationStateCalldata(from, nonce))
	// Output: 0xe94a0102000000000000000000000000857b06519e91e3a54538791bdbb0e22373e36b66f3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480
}

func ExampleNonceFromID() {
	n := x402.NonceFromID("int_01JEXAMPLE")
	fmt.Printf("0x%x\n", n[:4])
	// Output: 0xf2e09856
}

func ExamplePaymentRequirements_ExtraString() {
	_, r := offer()
	name, ok := r.ExtraString("name")
	fmt.Println(name, ok)
	// Output: USDC true
}

func ExamplePaymentRequiredFrom() {
	// A version 1 server puts its offer in the 402's body.
	_, err := x402.PaymentRequiredFrom(http.Header{}, []byte(`{"x402Version":1,"accepts":[]}`))
	fmt.Println(errors.Is(err, x402.ErrVersion1))

	h := http.Header{}
	h.Set(x402.HeaderPaymentRequired, paymentRequired)
	pr, err := x402.PaymentRequiredFrom(h, nil)
	fmt.Println(pr.Accepts[0].Amount, err)
	// Output:
	// true
	// 10000 <nil>
}

func ExampleSettlementFrom() {
	h := http.Header{}
	h.Set(x402.HeaderPaymentResponse, "eyJzdWNjZXNzIjp0cnVlLCJ0cmFuc2FjdGlvbiI6IjB4YWIiLCJuZXR3b3JrIjoiZWlwMTU1Ojg0NTMyIn0=") // {"success":true,"transaction":"0xab","network":"eip155:84532"}
	s, ok, err := x402.SettlementFrom(h)
	fmt.Println(s.Success, s.Transaction, ok, err)
	// Output: true 0xab true <nil>
}

func ExampleSameOrigin() {
	asked, _ := url.Parse("https://api.example.com/premium-data")
	fmt.Println(x402.SameOrigin("https://api.example.com/premium-data", asked))
	fmt.Println(x402.SameOrigin("https://api.example.com.attacker.example/premium-data", asked))
	// Output:
	// true
	// false
}
