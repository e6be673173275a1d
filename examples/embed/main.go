// Command embed runs Countersign in-process: no server, no listener. An
// agent runtime embeds the library like this: countersign.Open on its own
// store gives it the whole service, and it calls the services directly.
//
// It opens a node on an in-memory store with a fake card rail and a fake
// merchant (answering in-process, through an http.RoundTripper), then, as
// one agent under an operator-signed mandate: pays 12.50 USD, quotes and
// buys a mug, remembers a fact and recalls it, and reads the record back,
// checking a receipt against it and verifying the whole record.
//
// ownstore.go shows the same node on a store of the program's own.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

func main() {
	if err := run(context.Background(), memstore.New(nil), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// seed derives a fixed key, so that the example's output is the same on
// every run.
func seed(b byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = b
	return ed25519.NewKeyFromSeed(s)
}

// inProcess is an http.RoundTripper that answers with a handler: the
// merchant runs in this process, reached without a socket.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// run opens a node on st and does everything an agent does, printing
// what happened to out.
func run(ctx context.Context, st store.Store, out io.Writer) error {
	operatorKey, agentKey := seed(1), seed(2)
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))

	// A fake card rail over the same store, and a fake ACP merchant.
	card, err := fake.New(fake.SandboxCard, &fake.Options{Store: st})
	if err != nil {
		return err
	}
	shop, err := acp.New(acp.Options{BaseURL: "https://shop.example", MerchantID: "shop",
		HTTPClient: &http.Client{Transport: inProcess{fakemerchant.New(nil).ACPHandler()}}})
	if err != nil {
		return err
	}

	node, err := countersign.Open(ctx, st, &countersign.Options{
		RecordKey:    seed(3),
		OperatorKeys: []operator.PublicKey{{KeyID: "op-alice", Public: operatorKey.Public()}},
		Rails:        []settle.Rail{card},
		Merchants:    []commerce.MerchantConfig{{ID: "shop", Merchant: shop}},
		SealKey:      make([]byte, 32), // a real deployment keeps a secret key here
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	defer node.Close(context.WithoutCancel(ctx))

	// The operator issues the agent its mandates, offline.
	now := time.Now().UTC().Truncate(time.Second)
	mandate, err := pay.SignMandate(pay.MandateClaims{
		ID: "mdt_embed", Agent: agent, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 100_000, Period: gate.Day,
		Rails: []string{fake.SandboxCard, "acp"}, ConfirmAboveMinor: 10_001, IrreversibleConfirmAboveMinor: 10_001,
	}, operatorKey, "op-alice")
	if err != nil {
		return err
	}
	memMandate, err := memory.SignMandate(memory.MandateClaims{
		ID: "mm_embed", Agent: agent, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Namespace: "household", CanRead: true, CanWrite: true,
	}, operatorKey, "op-alice")
	if err != nil {
		return err
	}
	caller := pay.Caller{KeyID: "ak_embedded", Agents: []string{agent}, Credential: gate.CredentialAPIKey}

	// Pay: the agent signs an instruction; the gate allows it; it settles.
	in := &pay.Instruction{
		IdempotencyKey: "invoice-1182", Payee: "acct:seller.example",
		Amount: pay.Amount{Minor: 1250, Currency: "USD"}, Purpose: "invoice 1182",
		Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated, Credential: gate.CredentialAPIKey},
		Envelope: pay.Envelope{Agent: agent, Mandate: mandate},
	}
	if err := pay.SignInstruction(in, agentKey); err != nil {
		return err
	}
	paid, err := node.Pay().PayInstruction(ctx, caller, in, "", "req-pay")
	if err != nil {
		return err
	}
	r := paid.Receipt
	fmt.Fprintf(out, "paid: %s %d %s to %s on %s\n", paid.Outcome, r.Amount.Minor, r.Amount.Currency, r.Payee, r.Rail)

	// Quote and buy: the merchant prices the cart; the agent signs the
	// purchase of that cart, never a price; the gate authorises its total.
	q := commerce.QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
		Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}}
	quoted, err := node.Commerce().Quote(ctx, caller, q, "req-quote")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "quoted: %s %d %s\n", quoted.Status, quoted.Totals.Total, quoted.Currency)
	p := commerce.PurchaseRequest{QuoteRequest: q, CartID: quoted.ID, IdempotencyKey: "order-1", Purpose: "a mug for the office",
		Terms: pay.Terms{Rail: "acp", Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: agent, Mandate: mandate}}
	if err := commerce.SignPurchase(&p, agentKey); err != nil {
		return err
	}
	bought, err := node.Commerce().Buy(ctx, caller, p, "", "req-buy")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bought: %s %d %s from %s\n", bought.Outcome, bought.Order.Total.Minor, bought.Order.Total.Currency,
		bought.Order.Receipt.Payee)

	// Remember and recall: a fact with its valid time, read back as of now.
	mc := memory.Caller{KeyID: caller.KeyID, Agents: caller.Agents}
	if _, err := node.Memory().Remember(ctx, mc, memory.RememberRequest{Mandate: memMandate, IdempotencyKey: "fact-1",
		Namespace: "household", Subject: "office", Kind: "preference", Body: json.RawMessage(`{"mugs":"blue"}`),
		ValidFrom: now.Add(-time.Hour), Source: memory.Source{Kind: "agent", Ref: agent}}, "req-remember"); err != nil {
		return err
	}
	page, err := node.Memory().Recall(ctx, mc, memory.RecallRequest{Mandate: memMandate, Namespace: "household", Subject: "office"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "recalled: %d record(s), the first says %s\n", len(page.Data), page.Data[0].Body)

	// Read the record back: the receipt is bound to an entry, which the
	// signed checkpoint covers; the whole record verifies with the public
	// key alone.
	record := node.Record()
	e, err := record.Get(ctx, r.AuditSeq)
	if err != nil {
		return err
	}
	proof, err := record.Inclusion(ctx, r.AuditSeq, 0)
	if err != nil {
		return err
	}
	verr := pay.VerifyReceipt(record.VerifierKey(), *r, e, proof)
	size, err := record.Size(ctx)
	if err != nil {
		return err
	}
	err = record.Verify(ctx, 1, size, audit.Full, nil)
	fmt.Fprintf(out, "receipt of entry %s verifies: %v; the whole record verifies: %v\n", e.Type, verr == nil, err == nil)
	return nil
}
