package commerce_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store/memstore"
)

// Quote and buy from a fake ACP merchant, in-process: the same Service the
// reference server runs, its rails registered in the money path.
func ExampleService_Buy() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)

	// A merchant speaking ACP over HTTP, and our client of it.
	fm := fakemerchant.New(nil)
	shopSrv := httptest.NewServer(fm.ACPHandler())
	defer shopSrv.Close()
	shop, err := acp.New(acp.Options{BaseURL: shopSrv.URL, MerchantID: "shop", HTTPClient: shopSrv.Client()})
	if err != nil {
		panic(err)
	}

	// The record, commerce, and the money path over commerce's rails.
	st := memstore.New(nil)
	lg, _ := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, 32)), &audit.Options{Logger: quiet})
	svc, _ := commerce.New(commerce.Options{Store: st, Log: lg, Logger: quiet,
		Merchants: []commerce.MerchantConfig{{ID: "shop", Merchant: shop}}})
	opKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	mandates, _ := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opKey.Public()}}, nil)
	// Commerce joins the money path as an extension: its rails, and the
	// money path handed back.
	_, _ = pay.New(pay.Options{Store: st, Log: lg, Rails: &settle.Registry{}, Mandates: mandates, Logger: quiet,
		Extensions: []pay.Extension{svc}})

	// An agent with a mandate to buy from the shop.
	agentKey := ed25519.NewKeyFromSeed(append(make([]byte, 31), 1))
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	now := time.Now().UTC().Truncate(time.Second)
	mandate, _ := pay.SignMandate(pay.MandateClaims{ID: "mdt-shop", Agent: agent, IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		Payees: []string{"merchant:shop"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 100_000,
		Period: gate.Day, Rails: []string{"acp"}, ConfirmAboveMinor: 20_000, IrreversibleConfirmAboveMinor: 20_000}, opKey, "op")
	caller := pay.Caller{KeyID: "ak_example", Agents: []string{agent}, Credential: gate.CredentialAPIKey}

	q := commerce.QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
		Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 2}}}
	quoted, err := svc.Quote(ctx, caller, q, "")
	if err != nil {
		panic(err)
	}
	fmt.Println("quoted:", quoted.Status, quoted.Totals.Total, quoted.Currency)

	p := commerce.PurchaseRequest{QuoteRequest: q, CartID: quoted.ID, IdempotencyKey: "order-1", Purpose: "mugs for the office",
		Terms: pay.Terms{Rail: "acp", Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: mandate}}
	if err := commerce.SignPurchase(&p, agentKey); err != nil {
		panic(err)
	}
	res, err := svc.Buy(ctx, caller, p, "", "")
	if err != nil {
		panic(err)
	}
	fmt.Println("bought:", res.Outcome, res.Order.Total.Minor, res.Order.Receipt.Payee, len(res.Order.Lines))
	// Output:
	// quoted: ready 3098 USD
	// bought: settled 3098 merchant:shop 1
}

// An agent runtime embedding Countersign buys through a Client: it signs
// each purchase with the agent's key and calls the same Service the server
// runs.
func ExampleClient() {
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	// The UCP profile names the merchant's own address: start the server,
	// then give the merchant its URL.
	var merchant http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { merchant.ServeHTTP(w, r) }))
	defer srv.Close()
	merchant = fakemerchant.New(&fakemerchant.Options{BaseURL: srv.URL}).UCPHandler()
	shop, err := ucp.New(ctx, ucp.Options{ProfileURL: srv.URL + "/.well-known/ucp", MerchantID: "shop", HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}
	st := memstore.New(nil)
	lg, _ := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, 32)), &audit.Options{Logger: quiet})
	svc, _ := commerce.New(commerce.Options{Store: st, Log: lg, Logger: quiet,
		Merchants: []commerce.MerchantConfig{{ID: "shop", Merchant: shop}}})
	opKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	mandates, _ := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opKey.Public()}}, nil)
	// Commerce joins the money path as an extension: its rails, and the
	// money path handed back.
	_, _ = pay.New(pay.Options{Store: st, Log: lg, Rails: &settle.Registry{}, Mandates: mandates, Logger: quiet,
		Extensions: []pay.Extension{svc}})

	agentKey := ed25519.NewKeyFromSeed(append(make([]byte, 31), 2))
	now := time.Now().UTC().Truncate(time.Second)
	mandate, _ := pay.SignMandate(pay.MandateClaims{ID: "mdt-ucp", Agent: hex.EncodeToString(agentKey.Public().(ed25519.PublicKey)),
		IssuedAt: now, ExpiresAt: now.Add(time.Hour), Payees: []string{"merchant:shop"}, Currency: "USD",
		PerTxCapMinor: 50_000, PerPeriodCapMinor: 100_000, Period: gate.Day, Rails: []string{"ucp"},
		ConfirmAboveMinor: 20_000, IrreversibleConfirmAboveMinor: 20_000}, opKey, "op")

	client, err := commerce.NewClient(svc, commerce.ClientOptions{AgentKey: agentKey, Mandate: mandate})
	if err != nil {
		panic(err)
	}
	q := commerce.QuoteRequest{Rail: "ucp", Merchant: "shop", Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-book", Quantity: 1}}}
	res, err := client.Buy(ctx, q, "", "book-1", "a book for the library")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Outcome, res.Order.Rail, res.Order.Total.Minor, res.Order.Receipt.Rail)
	again, _ := client.Buy(ctx, q, "", "book-1", "a book for the library")
	fmt.Println("replayed:", again.Replayed, again.Order.ID == res.Order.ID)
	// Output:
	// settled ucp 3000 ucp
	// replayed: true true
}
