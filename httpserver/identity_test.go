package httpserver

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/x402/fetch"
)

// testIdentity is a real identity service over its own memstore and
// record, with a fixed gate policy and no mandates.
func testIdentity(t testing.TB) *identity.Service {
	t.Helper()
	id, _ := testIdentityLog(t)
	return id
}

// testIdentityLog is testIdentity with its record.
func testIdentityLog(t testing.TB) (*identity.Service, *audit.Log) {
	t.Helper()
	st := memstore.New(nil)
	_, recKey, _ := ed25519.GenerateKey(nil)
	lg, err := audit.Open(t.Context(), st, recKey, &audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	_, idKey, _ := ed25519.GenerateKey(nil)
	policy := pay.Policy{Rails: []pay.RailPolicy{{Name: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant}},
		DenyPayees: []string{}, DenyAgents: []string{}, BreakerAfter: 5, ApprovalWindowSeconds: 86400, IdempotencyRetentionSeconds: 604800}
	id, err := identity.Open(t.Context(), identity.Options{
		Store: st, Log: lg, Keys: []ed25519.PrivateKey{idKey}, Logger: slog.New(slog.DiscardHandler),
		NewKey: func(context.Context) (ed25519.PrivateKey, error) {
			_, k, err := ed25519.GenerateKey(nil)
			return k, err
		},
		Facts: identity.Sources{
			Policy:     func() pay.Policy { return policy },
			Mandates:   func(context.Context) ([]pay.KnownMandate, error) { return nil, nil },
			Operations: product.Model().Operations(),
			Operator:   identity.OperatorFacts{ID: "test-operator"},
		}.Facts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, lg
}

// identityRouteCases are the happy paths of the identity operations.
func identityRouteCases() []routeCase {
	pub, _, _ := ed25519.GenerateKey(nil)
	peer := identity.DIDKey(pub)
	isEnvelope := func(form string) func(t *testing.T, b []byte) {
		return func(t *testing.T, b []byte) {
			if d := identity.Verify(b, identity.Policy{}); d.Outcome != identity.OutcomeTransact || d.Envelope != form {
				t.Errorf("served disclosure: outcome %s envelope %s, failed %v", d.Outcome, d.Envelope, d.Failed)
			}
		}
	}
	return []routeCase{
		{op: "identity.disclose", method: "POST", target: "/disclose", status: 200, media: contract.MediaJSON, check: isEnvelope(identity.EnvelopeV1)},
		{op: "identity.disclose", method: "POST", target: "/disclose", accept: identity.MediaJWS, status: 200, media: identity.MediaJWS, check: isEnvelope(identity.EnvelopeJWS)},
		{op: "identity.well_known", target: "/.well-known/agent-disclosure", status: 200, media: contract.MediaJSON, check: isEnvelope(identity.EnvelopeV1)},
		{op: "identity.well_known", target: "/.well-known/agent-disclosure?envelope=jws", status: 200, media: identity.MediaJWS, check: isEnvelope(identity.EnvelopeJWS)},
		{op: "identity.respond", method: "POST", target: "/agent-disclosure/respond", body: `{"nonce":"n-1","issuedAt":"2026-01-01T00:00:00.000Z","verifierId":"v"}`, status: 200, media: contract.MediaJSON},
		{op: "identity.challenge", method: "POST", target: "/identity/challenges", body: `{}`, status: 201, media: contract.MediaJSON},
		{op: "identity.verify", method: "POST", target: "/verify", body: `{"disclosure":{},"signature":{}}`, status: 200, media: contract.MediaJSON,
			check: func(t *testing.T, b []byte) {
				var v identity.Verified
				if err := json.Unmarshal(b, &v); err != nil || v.Outcome != identity.OutcomeRefuse || v.AuditSeq == 0 {
					t.Errorf("a malformed disclosure must be a recorded refusal: %s", b)
				}
			}},
		{op: "identity.resolve", method: "POST", target: "/resolve", body: `{"ref":"` + hex.EncodeToString(pub) + `"}`, status: 200, media: contract.MediaJSON,
			check: func(t *testing.T, b []byte) {
				if !strings.Contains(string(b), `"id":"`+peer+`"`) {
					t.Errorf("a hex agent id resolves to its did:key: %s", b)
				}
			}},
		{op: "identity.counterparties.create", method: "POST", target: "/identity/counterparties",
			body:   `{"id":"peer-1","baseUrl":"https://peer.example","agentId":"` + peer + `","rationale":"routine check by ops"}`,
			status: 201, media: contract.MediaJSON},
		{op: "identity.counterparties.list", target: "/identity/counterparties", status: 200, media: contract.MediaJSON},
		{op: "identity.revoke", method: "POST", target: "/identity/revocations", body: `{"id":"dsc_1","reason":"leaked","rationale":"routine check by ops"}`, status: 201, media: contract.MediaJSON},
		{op: "identity.rotate", method: "POST", target: "/identity/rotate", body: `{"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
	}
}

func TestIdentityProblems(t *testing.T) {
	ts := newTestServer(t, Config{Authenticator: allowAll{}, Identity: testIdentity(t)})
	for _, tc := range []struct {
		body, code string
		status     int
	}{
		{`{"ref":"mailto:someone"}`, identity.CodeBadRef, 400},
		{`{"ref":"did:web:example.com"}`, identity.CodeBadRef, 400},
		{`{"ref":"unknown-peer"}`, identity.CodeNotFound, 404},
		{`{"ref":""}`, contract.CodeRequestValidation, 400},
	} {
		w := ts.do(t, "POST", "/resolve", strings.NewReader(tc.body), "Content-Type", "application/json")
		var p struct{ Code string }
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		if w.Code != tc.status || p.Code != tc.code {
			t.Errorf("resolve %s: %d %s, want %d %s", tc.body, w.Code, p.Code, tc.status, tc.code)
		}
	}
	w := ts.do(t, "POST", "/verify", strings.NewReader(`{"envelope":{},"policy":{"requireFresh":false}}`), "Content-Type", "application/json")
	if !strings.Contains(w.Body.String(), identity.CodeBadPolicy) || w.Code != 400 {
		t.Errorf("a policy that loosens the server's: %d %s", w.Code, w.Body)
	}
}

// TestVerifyRefusesWhatIsNoDisclosure: a /verify body that is not JSON, or
// not an object, is the caller's mistake: a 400 problem, and nothing is
// verified or recorded. An object that is not a valid disclosure is a
// recorded refusal (identityRouteCases).
func TestVerifyRefusesWhatIsNoDisclosure(t *testing.T) {
	id, lg := testIdentityLog(t)
	ts := newTestServer(t, Config{Authenticator: allowAll{}, Identity: id})
	for _, tc := range []struct{ body, code string }{
		{`{not json`, contract.CodeRequestMalformedJSON},
		{`{"disclosure":`, contract.CodeRequestMalformedJSON},
		{`42`, contract.CodeRequestValidation},
		{`"eyJhbGciOiJFZERTQSJ9.e30.c2ln"`, contract.CodeRequestValidation},
		{`null`, contract.CodeRequestValidation},
		{`[]`, contract.CodeRequestValidation},
		{`{"envelope":"x"}`, contract.CodeRequestValidation},
		{`{"envelope":[]}`, contract.CodeRequestValidation},
		{`{"envelope":{},"zz":1}`, identity.CodeBadChallenge},
	} {
		before, err := lg.Size(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		w := ts.do(t, "POST", "/verify", strings.NewReader(tc.body), "Content-Type", "application/json")
		var p struct{ Code, Detail string }
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		if w.Code != 400 || p.Code != tc.code {
			t.Errorf("verify %s: %d %s, want 400 %s", tc.body, w.Code, p.Code, tc.code)
		}
		if strings.Contains(p.Detail, "Go ") || strings.Contains(p.Detail, "json:") {
			t.Errorf("verify %s: detail speaks Go: %s", tc.body, p.Detail)
		}
		if after, _ := lg.Size(t.Context()); after != before {
			t.Errorf("verify %s: the record grew from %d to %d", tc.body, before, after)
		}
	}
}

// fakeCommerce answers the commerce routes with fixed, well-formed values.
type fakeCommerce struct{}

func (fakeCommerce) Quote(_ context.Context, _ pay.Caller, q commerce.QuoteRequest, _ string) (commerce.Quoted, error) {
	c := cart.Cart{ID: "cs_1", Rail: q.Rail, Version: "2026-04-17", Merchant: q.Merchant, Status: cart.StatusReady,
		RawStatus: "ready_for_payment", Currency: q.Currency,
		Lines:       []cart.Line{{ID: "li_1", ItemID: q.Lines[0].ID, Quantity: q.Lines[0].Quantity, Unit: 100, Subtotal: 100, Total: 100}},
		Totals:      cart.Totals{Subtotal: 100, Total: 100},
		Fulfillment: []cart.Fulfillment{}, Messages: []cart.Message{}}
	return commerce.Quoted{Cart: c, AuditSeq: 7}, nil
}

func (fakeCommerce) Buy(_ context.Context, _ pay.Caller, p commerce.PurchaseRequest, _, requestID string) (*commerce.BuyResult, error) {
	if p.IdempotencyKey == "held" {
		res, err := fakePayments{}.Pay(context.Background(), pay.Caller{}, []byte(`{"IdempotencyKey":"held"}`), "", requestID)
		return &commerce.BuyResult{Result: res}, err
	}
	res, err := fakePayments{}.Pay(context.Background(), pay.Caller{}, []byte(`{"IdempotencyKey":"k"}`), "", requestID)
	if err != nil {
		return nil, err
	}
	return &commerce.BuyResult{Result: res, Order: &commerce.Order{ID: "ord_1", CartID: "cs_1", IntentID: res.IntentID,
		Rail: p.Rail, Merchant: p.Merchant, Status: "confirmed", PlacedAt: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC),
		Lines: []cart.Line{}, Total: pay.Amount{Minor: 100, Currency: "USD"}, Receipt: *res.Receipt}}, nil
}

func (fakeCommerce) RegisterMerchant(_ context.Context, sp commerce.MerchantSpec, _ pay.OperatorCall) (commerce.MerchantView, error) {
	return commerce.MerchantView{ID: sp.ID, Protocol: sp.Protocol, Version: "2026-04-17", BaseURL: sp.BaseURL,
		HasAPIKey: sp.APIKey != "", Source: "operator", CreatedAt: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC), AuditSeq: 3}, nil
}

func (fakeCommerce) MerchantList(context.Context) (commerce.MerchantPage, error) {
	return commerce.MerchantPage{Data: []commerce.MerchantView{{ID: "shop", Protocol: "acp", Source: "configuration"}}}, nil
}

// commerceRouteCases are the happy paths of /quote and /buy.
func commerceRouteCases() []routeCase {
	purchase := func(key string) string {
		return `{"rail":"acp","merchant":"shop","currency":"USD","lines":[{"id":"sku-mug","quantity":1}],` +
			`"idempotencyKey":"` + key + `","purpose":"office mugs",` +
			`"terms":{"rail":"acp","reversibility":"irreversible","finality":"instant","credential":"api-key","capitalSource":"payer","presence":"delegated"},` +
			`"envelope":{"agent":"` + strings.Repeat("ab", 32) + `","mandate":"eyJhbGciOiJFZERTQSJ9.e30.c2ln","signature":"eyJhbGciOiJFZERTQSJ9..c2ln"}}`
	}
	return []routeCase{
		{op: "commerce.quote", method: "POST", target: "/quote", body: `{"rail":"acp","merchant":"shop","currency":"USD","lines":[{"id":"sku-mug","quantity":2}]}`,
			status: 200, media: contract.MediaJSON},
		{op: "commerce.buy", method: "POST", target: "/buy", body: purchase("k"), status: 200, media: contract.MediaJSON},
		{op: "commerce.buy", method: "POST", target: "/buy", body: purchase("held"), status: 202, media: contract.MediaJSON},
		{op: "commerce.merchants.create", method: "POST", target: "/commerce/merchants",
			body:   `{"id":"shop-2","protocol":"acp","baseUrl":"https://shop.example","apiKey":"sk_test","rationale":"routine check by ops"}`,
			status: 201, media: contract.MediaJSON},
		{op: "commerce.merchants.list", target: "/commerce/merchants", status: 200, media: contract.MediaJSON},
	}
}

// fakeX402 answers /x402/fetch with fixed, well-formed values: a paid
// fetch, a relayed one and a held one.
type fakeX402 struct{}

func (fakeX402) Fetch(_ context.Context, _ pay.Caller, r fetch.Request, _, requestID string) (*fetch.Result, error) {
	switch r.IdempotencyKey {
	case "held":
		res, err := fakePayments{}.Pay(context.Background(), pay.Caller{}, []byte(`{"IdempotencyKey":"held"}`), "", requestID)
		return &fetch.Result{Result: res}, err
	case "free":
		return &fetch.Result{Fetched: &fetch.Fetched{Delivered: true, Status: 200, Headers: map[string][]string{"Content-Type": {"text/plain"}}, Body: "b2s="}}, nil
	}
	res, err := fakePayments{}.Pay(context.Background(), pay.Caller{}, []byte(`{"IdempotencyKey":"k"}`), "", requestID)
	if err != nil {
		return nil, err
	}
	return &fetch.Result{Result: res, Fetched: &fetch.Fetched{IntentID: res.IntentID, Paid: true, Delivered: true, Status: 200,
		Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: "e30=",
		Payment: &fetch.Payment{Network: "eip155:84532", Asset: "0x036CbD53842c5426634e7929541eC2318f3dCF7e", Amount: "10000",
			PayTo: "eip155:84532:0x70997970C51812dc3A010C7d01b50e0d17dc79C8", Payer: "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
			Nonce: "0x" + strings.Repeat("ab", 32), ValidBefore: time.Date(2026, 11, 25, 10, 5, 0, 0, time.UTC), Transaction: "0x" + strings.Repeat("cd", 32)},
		Receipt: res.Receipt}}, nil
}

// x402RouteCases are the happy paths of /x402/fetch.
func x402RouteCases() []routeCase {
	fetchBody := func(key string) string {
		return `{"method":"GET","url":"https://data.example/report","maxAmount":{"minor":5,"currency":"USD"},` +
			`"idempotencyKey":"` + key + `","purpose":"market data",` +
			`"terms":{"rail":"x402","reversibility":"irreversible","finality":"instant","credential":"api-key","capitalSource":"payer","presence":"delegated"},` +
			`"envelope":{"agent":"` + strings.Repeat("ab", 32) + `","mandate":"eyJhbGciOiJFZERTQSJ9.e30.c2ln","signature":"eyJhbGciOiJFZERTQSJ9..c2ln"}}`
	}
	return []routeCase{
		{op: "x402.fetch", method: "POST", target: "/x402/fetch", body: fetchBody("k"), status: 200, media: contract.MediaJSON},
		{op: "x402.fetch", method: "POST", target: "/x402/fetch", body: fetchBody("free"), status: 200, media: contract.MediaJSON},
		{op: "x402.fetch", method: "POST", target: "/x402/fetch", body: fetchBody("held"), status: 202, media: contract.MediaJSON},
	}
}
