package x402_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// A deployment that pays in USDC on Base Sepolia picks what it can pay
// among a 402's offers, and says why not for the others.
func ExamplePolicy_Choose() {
	usdc, _ := evm.ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e")
	p := x402.Policy{
		Assets:     []x402.Asset{{Network: "eip155:84532", Address: usdc, Name: "USDC", Version: "2", Decimals: 6, Currency: "USD", MinorDigits: 2}},
		MaxTimeout: 2 * time.Minute,
	}
	extra := map[string]json.RawMessage{"name": json.RawMessage(`"USDC"`), "version": json.RawMessage(`"2"`)}
	pr := x402.PaymentRequired{X402Version: 2, Resource: x402.ResourceInfo{URL: "https://api.example.com/report"},
		Accepts: []x402.PaymentRequirements{
			{Scheme: "exact", Network: "eip155:8453", Amount: "10000", Asset: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
				PayTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", MaxTimeoutSeconds: 60, Extra: extra},
			{Scheme: "exact", Network: "eip155:84532", Amount: "12345", Asset: usdc.String(),
				PayTo: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8", MaxTimeoutSeconds: 60, Extra: extra},
		}}
	asked, _ := url.Parse("https://api.example.com/report")
	c, refused, err := p.Choose(pr, x402.Ask{URL: asked, MaxMinor: 500, Currency: "USD"})
	fmt.Println(c.Index, c.Minor, c.Currency, c.PayTo, err)
	for _, r := range refused {
		fmt.Println("offer", r.Index, r.Check)
	}
	// Output:
	// 1 2 USD eip155:84532:0x70997970C51812dc3A010C7d01b50e0d17dc79C8 <nil>
	// offer 0 asset
}
