package fetch_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
	"github.com/countersign/countersign/x402/fetch"
)

// A Go agent's own http.Client pays a fake x402 resource through the
// gate: the fetch service joins the money path as an extension, and its
// Transport signs each request as the agent.
func ExampleService_Transport() {
	ctx := context.Background()
	resource := httptest.NewServer(fakex402.New(&fakex402.Options{
		Resources: []fakex402.Resource{{Path: "/report", Body: []byte("the report")}}}).Handler())
	defer resource.Close()

	st := memstore.New(nil)
	_, recordKey, _ := ed25519.GenerateKey(rand.Reader)
	log, _ := audit.Open(ctx, st, recordKey, &audit.Options{Logger: slog.New(slog.DiscardHandler)})
	wallet, _ := evm.GenerateKey()
	usdc, _ := evm.ParseAddress(fakex402.DefaultAsset)
	svc, err := fetch.New(fetch.Options{Store: st, Log: log, Wallet: wallet,
		Policy: x402.Policy{Assets: []x402.Asset{{Network: fakex402.DefaultNetwork, Address: usdc, Name: "USDC", Version: "2",
			Decimals: 6, Currency: "USD", MinorDigits: 2}}},
		URLs: netguard.Policy{AllowLoopback: true, AllowHTTP: true}}) // a loopback resource: tests only
	if err != nil {
		panic(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(rand.Reader)
	mandates, _ := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opPub}}, nil)
	if _, err := pay.New(pay.Options{Store: st, Log: log, Rails: &settle.Registry{}, Mandates: mandates,
		Extensions: []pay.Extension{svc}}); err != nil {
		panic(err)
	}
	agentPub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agent := hex.EncodeToString(agentPub)
	mandate, _ := pay.SignMandate(pay.MandateClaims{ID: "mdt-1", Agent: agent, IssuedAt: time.Now().Add(-time.Minute),
		ExpiresAt: time.Now().Add(time.Hour), Payees: []string{"eip155:84532:" + fakex402.DefaultPayTo.String()},
		Currency: "USD", PerTxCapMinor: 100, PerPeriodCapMinor: 1000, Period: gate.Day, Rails: []string{fetch.RailName},
		ConfirmAboveMinor: 50, IrreversibleConfirmAboveMinor: 50}, opKey, "op")

	client := &http.Client{Transport: svc.Transport(fetch.Agent{
		Caller: pay.Caller{KeyID: "ak_1", Agents: []string{agent}}, Key: agentKey, Mandate: mandate,
		MaxAmount: pay.Amount{Minor: 5, Currency: "USD"}, Purpose: "the weekly report"})}
	resp, err := client.Get(resource.URL + "/report")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), resp.Header.Get(fetch.HeaderIntent) != "")
	// Output: 200 the report true
}

// An agent calling POST /x402/fetch signs what it wants, never a price.
func ExampleSign() {
	_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	r := fetch.Request{Method: "POST", URL: "https://data.example/query", Headers: map[string]string{"Content-Type": "application/json"},
		MaxAmount: pay.Amount{Minor: 25, Currency: "USD"}, IdempotencyKey: "q-1", Purpose: "one query",
		Terms: pay.Terms{Rail: fetch.RailName, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: "<the mandate's compact JWS>"}}
	r.SetBody([]byte(`{"q":"rates"}`))
	if err := fetch.Sign(&r, agentKey); err != nil {
		panic(err)
	}
	fmt.Println(r.BodyDigest == fetch.BodyDigest([]byte(`{"q":"rates"}`)), r.Envelope.Signature != "")
	// Output: true true
}
