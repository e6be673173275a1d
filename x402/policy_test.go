package x402_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

const (
	usdcBaseSepolia = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	payee           = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
)

func policy(t *testing.T) x402.Policy {
	t.Helper()
	a, err := evm.ParseAddress(usdcBaseSepolia)
	if err != nil {
		t.Fatal(err)
	}
	p := x402.Policy{
		Assets:     []x402.Asset{{Network: "eip155:84532", Address: a, Name: "USDC", Version: "2", Decimals: 6, Currency: "USD", MinorDigits: 2}},
		MaxTimeout: 2 * time.Minute,
		PayTo: func(caip10 string) error {
			if caip10 == "eip155:84532:0x90F79bf6EB2c4f870365E785982E1f101E93b906" {
				return errors.New("not allowed by the mandate")
			}
			return nil
		},
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	return p
}

func chooseOffer(mod func(*x402.PaymentRequirements)) x402.PaymentRequirements {
	r := x402.PaymentRequirements{
		Scheme: "exact", Network: "eip155:84532", Amount: "10000", Asset: usdcBaseSepolia, PayTo: payee,
		MaxTimeoutSeconds: 60,
		Extra:             map[string]json.RawMessage{"name": json.RawMessage(`"USDC"`), "version": json.RawMessage(`"2"`)},
	}
	if mod != nil {
		mod(&r)
	}
	return r
}

// TestChoose: every refusal, each with nothing chosen; rounding up to a
// minor unit; the cheapest of several.
func TestChoose(t *testing.T) {
	p := policy(t)
	asked, _ := url.Parse("https://api.example.com/report?q=1")
	ask := x402.Ask{URL: asked, MaxMinor: 100, Currency: "USD"}
	tests := []struct {
		name      string
		resource  string
		accepts   []x402.PaymentRequirements
		ask       *x402.Ask
		wantIndex int    // -1: none
		wantMinor int64  // when one is chosen
		wantCheck string // the first refusal's check, "" for none
	}{
		{"paid", "", []x402.PaymentRequirements{chooseOffer(nil)}, nil, 0, 1, ""},
		{"below a cent rounds up", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Amount = "1" })}, nil, 0, 1, ""},
		{"exactly the maximum", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Amount = "1000000" })}, nil, 0, 100, ""},
		{"over the maximum", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Amount = "1000001" })}, nil, -1, 0, "amount"},
		{"other currency asked", "", []x402.PaymentRequirements{chooseOffer(nil)}, &x402.Ask{URL: asked, MaxMinor: 100, Currency: "EUR"}, -1, 0, "amount"},
		{"other network", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Network = "eip155:8453" })}, nil, -1, 0, "asset"},
		{"not EVM", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Network = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp" })}, nil, -1, 0, "network"},
		{"other scheme", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Scheme = "upto" })}, nil, -1, 0, "scheme"},
		{"other asset", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Asset = payee })}, nil, -1, 0, "asset"},
		{"other token name", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Extra["name"] = json.RawMessage(`"USD Coin"`) })}, nil, -1, 0, "extra.name"},
		{"other token version", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.Extra["version"] = json.RawMessage(`"1"`) })}, nil, -1, 0, "extra.version"},
		{"payee not allowed", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.PayTo = "0x90F79bf6EB2c4f870365E785982E1f101E93b906" })}, nil, -1, 0, "payTo"},
		{"timeout over the cap", "", []x402.PaymentRequirements{chooseOffer(func(r *x402.PaymentRequirements) { r.MaxTimeoutSeconds = 121 })}, nil, -1, 0, "maxTimeoutSeconds"},
		{"other origin", "https://evil.example.com/report", []x402.PaymentRequirements{chooseOffer(nil)}, nil, -1, 0, "resource.url"},
		{"no offer", "", nil, nil, -1, 0, ""},
		{"cheapest of three", "", []x402.PaymentRequirements{
			chooseOffer(func(r *x402.PaymentRequirements) { r.Amount = "30000" }),
			chooseOffer(func(r *x402.PaymentRequirements) { r.Network = "eip155:8453" }),
			chooseOffer(func(r *x402.PaymentRequirements) { r.Amount = "20000" }),
		}, nil, 2, 2, "amount"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.resource
			if res == "" {
				res = "https://api.example.com/report"
			}
			a := ask
			if tt.ask != nil {
				a = *tt.ask
			}
			c, refused, err := p.Choose(x402.PaymentRequired{X402Version: 2, Resource: x402.ResourceInfo{URL: res}, Accepts: tt.accepts}, a)
			if tt.wantIndex < 0 {
				var no *x402.NoOfferError
				if !errors.As(err, &no) {
					t.Fatalf("chose %+v, %v; want none", c, err)
				}
			} else {
				if err != nil || c.Index != tt.wantIndex || c.Minor != tt.wantMinor || c.Currency != "USD" {
					t.Fatalf("chose %d for %d %s (%v), want %d for %d", c.Index, c.Minor, c.Currency, err, tt.wantIndex, tt.wantMinor)
				}
				if c.PayTo != "eip155:84532:"+payee {
					t.Errorf("payTo %s", c.PayTo)
				}
			}
			got := ""
			if len(refused) > 0 {
				got = refused[0].Check
			}
			if got != tt.wantCheck {
				t.Errorf("first refusal %q (%+v), want %q", got, refused, tt.wantCheck)
			}
		})
	}
}

func TestPolicyCheck(t *testing.T) {
	good := policy(t)
	tests := []struct {
		name string
		mod  func(*x402.Policy)
	}{
		{"no cap", func(p *x402.Policy) { p.MaxTimeout = 0 }},
		{"bad network", func(p *x402.Policy) { p.Assets[0].Network = "eip155:x" }},
		{"no name", func(p *x402.Policy) { p.Assets[0].Name = "" }},
		{"bad currency", func(p *x402.Policy) { p.Assets[0].Currency = "usd" }},
		{"fewer decimals than minor digits", func(p *x402.Policy) { p.Assets[0].Decimals = 1 }},
		{"twice", func(p *x402.Policy) { p.Assets = append(p.Assets, p.Assets[0]) }},
	}
	for _, tt := range tests {
		p := good
		p.Assets = append([]x402.Asset(nil), good.Assets...)
		tt.mod(&p)
		if err := p.Check(); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}
