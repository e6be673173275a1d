package agentclient_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/pay"
)

func seedKey(b byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = b
	return ed25519.NewKeyFromSeed(s)
}

// FillTerms completes what a client may leave to the rail's facts.
func ExampleFillTerms() {
	t := pay.Terms{Rail: "sandbox-bank"}
	agentclient.FillTerms(&t, "api-key")
	fmt.Println(t.Reversibility, t.Finality, t.Credential, t.CapitalSource, t.Presence)
	// Output: reversible deferred api-key payer delegated
}

// An agent signs a payment: the envelope, the terms and the signature are
// filled; the instruction verifies.
func ExampleAgent_SignPayment() {
	a := &agentclient.Agent{Key: seedKey(2), Mandate: "a.b.c"}
	in := &pay.Instruction{IdempotencyKey: "invoice-1", Payee: "acct:seller.example", Amount: pay.Amount{Minor: 1250}, Terms: pay.Terms{Rail: "sandbox-card"}}
	if err := a.SignPayment(in, "invoice 1"); err != nil {
		panic(err)
	}
	fmt.Println(in.Purpose, in.Amount.Currency, in.Terms.Reversibility, in.Envelope.Agent == a.ID(), pay.VerifyInstruction(in) == nil)
	// Output: invoice 1 USD reversible true true
}

// A spend is signed for the protocol method it is sent to.
func ExampleAgent_SignSpend() {
	a := &agentclient.Agent{Key: seedKey(2), Mandate: "a.b.c"}
	in := &pay.Instruction{Payee: "acct:hotel.example", Amount: pay.Amount{Minor: 8000}}
	if err := a.SignSpend("hold.place", in); err != nil {
		panic(err)
	}
	fmt.Println(in.Terms.Rail, in.IdempotencyKey != "", in.Envelope.Signature != "")
	// Output: sandbox-card true true
}

// A purchase names what to buy, never an amount; the merchant rail's
// terms are filled.
func ExampleAgent_SignPurchase() {
	a := &agentclient.Agent{Key: seedKey(2), Mandate: "a.b.c"}
	p := &commerce.PurchaseRequest{QuoteRequest: commerce.QuoteRequest{Rail: "acp", Merchant: "sandbox-acp", Currency: "USD",
		Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}}}
	if err := a.SignPurchase(p, "a mug"); err != nil {
		panic(err)
	}
	fmt.Println(p.Terms.Rail, p.Terms.Reversibility, p.Envelope.Signature != "")
	// Output: acp irreversible true
}

// HandlerTransport reaches a handler in this process: the same client code
// talks to an embedded node and to a remote server.
func ExampleHandlerTransport() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"auth":%q}`, r.Header.Get("Authorization"))
	})
	a := &agentclient.Agent{BaseURL: "http://countersign.local", Credential: "svc_ak_x_y",
		HTTPClient: &http.Client{Transport: agentclient.HandlerTransport(h)}}
	resp, err := a.Do(context.Background(), agentclient.Request{Method: "GET", Path: "/usage"})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Status, string(resp.Body))
	// Output: 200 {"auth":"Bearer svc_ak_x_y"}
}

// Problem reads a refusal's code and action.
func ExampleResponse_Problem() {
	r := &agentclient.Response{Status: 403, Body: []byte(`{"status":403,"code":"intent.denied","action":"stop","detail":"payee not allowed"}`)}
	p, ok := r.Problem()
	fmt.Println(ok, p.Code, p.Action, p.Detail)
	// Output: true intent.denied stop payee not allowed
}

// Open returns a stream unread: the body arrives as the handler flushes.
func ExampleAgent_Open() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 1\ndata: {}\n\n")
		w.(http.Flusher).Flush()
	})
	a := &agentclient.Agent{BaseURL: "http://countersign.local", HTTPClient: &http.Client{Transport: agentclient.HandlerTransport(h)}}
	resp, err := a.Open(context.Background(), agentclient.Request{Method: "GET", Path: "/audit/stream"})
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %q\n", resp.Header.Get("Content-Type"), b)
	// Output: text/event-stream "id: 1\ndata: {}\n\n"
}
