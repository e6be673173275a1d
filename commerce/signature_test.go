package commerce

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
)

// ucpShop is a fake UCP merchant over HTTP, which signs its 2026-04-08
// answers with its own key.
type ucpShop struct {
	fm  *fakemerchant.Merchant
	srv *httptest.Server
}

func newUCPShop(t *testing.T, f *fixture) *ucpShop {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String(), Now: f.now})
	srv.Config.Handler = fm.UCPHandler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &ucpShop{fm: fm, srv: srv}
}

func (u *ucpShop) key() ucp.SigningKey { return ucp.SigningKey(u.fm.SigningJWK()) }

// connect is a Connect of the service: our UCP client of the shop, with
// the spec's pinned keys.
func (u *ucpShop) connect(f *fixture) func(context.Context, MerchantSpec) (cart.Merchant, error) {
	return func(ctx context.Context, sp MerchantSpec) (cart.Merchant, error) {
		return ucp.New(ctx, ucp.Options{ProfileURL: sp.ProfileURL, MerchantID: sp.ID, HTTPClient: u.srv.Client(),
			Now: f.now, SigningKeys: sp.SigningKeys, Logger: slog.New(slog.DiscardHandler)})
	}
}

func (f *fixture) ucpPurchase(key string, lines ...cart.LineRequest) PurchaseRequest {
	f.t.Helper()
	p := f.purchase(key, lines...)
	p.Rail, p.Terms.Rail, p.Merchant = "ucp", "ucp", "ucpshop"
	if err := SignPurchase(&p, f.agentKey); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func otherKey(t *testing.T) ucp.SigningKey {
	t.Helper()
	priv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k, err := ucp.SigningKeyOf("not-the-merchant", &priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestBuyVerifiesMerchantSignatures buys from a UCP merchant whose key is
// pinned: signed answers are used, a badly signed quote is a clear
// problem, and a completion whose answer cannot be trusted leaves the
// purchase settling — neither failed nor settled — until the merchant's
// own (properly signed) state resolves it.
func TestBuyVerifiesMerchantSignatures(t *testing.T) {
	f := newFixture(t)
	shop := newUCPShop(t, f)
	c, err := shop.connect(f)(t.Context(), MerchantSpec{ID: "ucpshop", ProfileURL: shop.srv.URL + "/.well-known/ucp",
		SigningKeys: []ucp.SigningKey{shop.key()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Register(MerchantConfig{ID: "ucpshop", Merchant: c}); err != nil {
		t.Fatal(err)
	}
	page, _ := f.svc.MerchantList(t.Context())
	tp, _ := shop.key().Thumbprint()
	if i := slices.IndexFunc(page.Data, func(v MerchantView) bool { return v.ID == "ucpshop" }); i < 0 ||
		!slices.Equal(page.Data[i].SigningKeys, []PinnedKey{{KeyID: shop.key().Kid, Thumbprint: tp}}) {
		t.Fatalf("listing %+v", page.Data)
	}

	q := QuoteRequest{Rail: "ucp", Merchant: "ucpshop", Currency: "USD", Lines: []cart.LineRequest{line("sku-mug", 1)}}
	if got, err := f.svc.Quote(t.Context(), f.caller, q, ""); err != nil || !got.Ready() {
		t.Fatalf("quote: %v %+v", err, got)
	}
	q.Lines = []cart.LineRequest{line("sku-badsig", 1)}
	_, err = f.svc.Quote(t.Context(), f.caller, q, "")
	var ext interface{ ProblemExtensions() map[string]any }
	if !errors.Is(err, ErrMerchantInvalid) || !errors.As(err, &ext) ||
		!strings.Contains(ext.ProblemExtensions()["signatureRefused"].(string), "does not verify with key") {
		t.Fatalf("badly signed quote: %v, want %v saying which check failed", err, ErrMerchantInvalid)
	}
	if res, err := f.buy(f.ucpPurchase("ucp-ok", line("sku-book", 1))); err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatalf("buy: %v %+v", err, res)
	}

	// The merchant places the order, but its answer is badly signed.
	before := len(f.types())
	if _, err := f.buy(f.ucpPurchase("ucp-badsig", line("sku-badsig-complete", 1))); !errors.Is(err, pay.ErrRailUnavailable) {
		t.Fatalf("completion answered with a bad signature: %v, want %v", err, pay.ErrRailUnavailable)
	}
	settling, err := f.pay.Settling(t.Context(), "", 10)
	if err != nil || len(settling.Data) != 1 || settling.Data[0].IdempotencyKey != "ucp-badsig" || settling.Data[0].Status != pay.StatusSettling {
		t.Fatalf("settling %+v %v", settling.Data, err)
	}
	for _, ty := range f.types()[before:] {
		if ty == EntryCompleted || ty == "payment.settled" || ty == "payment.failed" {
			t.Fatalf("an untrusted completion answer was used: %v", f.types()[before:])
		}
	}
	// The reconciler asks the merchant, whose answers now verify: the
	// order is on file once.
	rep, err := f.pay.Reconcile(t.Context())
	if err != nil || rep.Settled != 1 || rep.Failed != 0 {
		t.Fatalf("reconcile %+v %v", rep, err)
	}
	n := 0
	for _, ty := range f.types() {
		if ty == EntryCompleted {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d orders recorded, want 2", n)
	}
}

// TestRegisterMerchantSigningKeys: pinned keys are checked, stored with the
// registration, listed by kid and thumbprint, and used on the lazy connect
// after a restart.
func TestRegisterMerchantSigningKeys(t *testing.T) {
	f := newFixture(t)
	shop := newUCPShop(t, f)
	var specs []MerchantSpec
	connect := func(ctx context.Context, sp MerchantSpec) (cart.Merchant, error) {
		specs = append(specs, sp)
		return shop.connect(f)(ctx, sp)
	}
	open := func() *Service {
		s, err := New(Options{Store: f.st, Log: f.log, Now: f.now, SealKey: bytes.Repeat([]byte{9}, 32), Connect: connect,
			URLs: netguard.Policy{AllowLoopback: true, AllowHTTP: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	svc := open()
	call := pay.OperatorCall{Operator: "op", Rationale: "a merchant that signs"}
	profile := shop.srv.URL + "/.well-known/ucp"
	wrong := otherKey(t)
	bad := shop.key()
	bad.Y = bad.X
	for _, tc := range []struct {
		name string
		spec MerchantSpec
		want string
	}{
		{"acp", MerchantSpec{ID: "acme", Protocol: "acp", BaseURL: "https://acme.example", SigningKeys: []ucp.SigningKey{shop.key()}}, "ACP defines no response signatures"},
		{"malformed key", MerchantSpec{ID: "m1", Protocol: "ucp", ProfileURL: profile, SigningKeys: []ucp.SigningKey{bad}}, "not a point of P-256"},
		{"RSA key", MerchantSpec{ID: "m2", Protocol: "ucp", ProfileURL: profile, SigningKeys: []ucp.SigningKey{{Kid: "r", Kty: "RSA"}}}, `kty "RSA"`},
		{"kid twice", MerchantSpec{ID: "m3", Protocol: "ucp", ProfileURL: profile, SigningKeys: []ucp.SigningKey{shop.key(), shop.key()}}, "given twice"},
	} {
		if _, err := svc.RegisterMerchant(t.Context(), tc.spec, call); !errors.Is(err, ErrInvalidMerchant) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, ErrInvalidMerchant, tc.want)
		}
	}
	if len(specs) != 0 {
		t.Fatalf("an invalid registration connected: %+v", specs)
	}
	// A merchant that speaks only 2026-01-11 cannot sign its answers.
	old := httptest.NewServer(fakemerchant.New(nil).UCPHandler(fakemerchant.UCP20260111))
	t.Cleanup(old.Close)
	if _, err := svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "old", Protocol: "ucp", ProfileURL: old.URL + "/.well-known/ucp",
		SigningKeys: []ucp.SigningKey{shop.key()}}, call); !errors.Is(err, ErrInvalidMerchant) || !errors.Is(err, ucp.ErrSignaturesUnsupported) ||
		!strings.Contains(err.Error(), "2026-01-11") {
		t.Errorf("pinned keys for a 2026-01-11 merchant: %v", err)
	}

	tp, _ := shop.key().Thumbprint()
	v, err := svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "ucpshop", Protocol: "ucp", ProfileURL: profile,
		SigningKeys: []ucp.SigningKey{shop.key()}}, call)
	if err != nil || !slices.Equal(v.SigningKeys, []PinnedKey{{KeyID: shop.key().Kid, Thumbprint: tp}}) {
		t.Fatalf("register: %v %+v", err, v)
	}
	// Pinned to a key the merchant does not sign with: registered (the
	// profile is not signed), then every answer is refused.
	if _, err := svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "wrongkey", Protocol: "ucp", ProfileURL: profile,
		SigningKeys: []ucp.SigningKey{wrong}}, call); err != nil {
		t.Fatal(err)
	}
	quote := func(s *Service, merchant string) error {
		_, err := s.Quote(t.Context(), f.caller, QuoteRequest{Rail: "ucp", Merchant: merchant, Currency: "USD",
			Lines: []cart.LineRequest{line("sku-mug", 1)}}, "")
		return err
	}
	if err := quote(svc, "ucpshop"); err != nil {
		t.Fatal(err)
	}
	if err := quote(svc, "wrongkey"); !errors.Is(err, ErrMerchantInvalid) || !strings.Contains(err.Error(), "not a pinned key") {
		t.Fatalf("quote from a merchant pinned to another key: %v", err)
	}
	// The record names the keys (public: no sealing, no secret).
	var recorded bool
	for e, err := range f.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		recorded = recorded || e.Type == EntryMerchantRegistered && bytes.Contains(e.Data, []byte(tp))
	}
	if !recorded {
		t.Error("the registration entry does not name the pinned key")
	}

	// After a restart: listed with their keys, connected on first use with
	// them.
	specs = nil
	again := open()
	page, _ := again.MerchantList(t.Context())
	if len(page.Data) != 2 || page.Data[0].ID != "ucpshop" || len(page.Data[0].SigningKeys) != 1 || page.Data[0].SigningKeys[0].Thumbprint != tp ||
		page.Data[1].SigningKeys[0].KeyID != wrong.Kid {
		t.Fatalf("registry after restart: %+v", page.Data)
	}
	if err := quote(again, "ucpshop"); err != nil {
		t.Fatal(err)
	}
	if err := quote(again, "wrongkey"); !errors.Is(err, ErrMerchantInvalid) || !strings.Contains(err.Error(), "not a pinned key") {
		t.Fatalf("after a restart, quote from a merchant pinned to another key: %v", err)
	}
	if len(specs) != 2 || !slices.Equal(specs[0].SigningKeys, []ucp.SigningKey{shop.key()}) || !slices.Equal(specs[1].SigningKeys, []ucp.SigningKey{wrong}) {
		t.Fatalf("lazy connects %+v", specs)
	}
}
