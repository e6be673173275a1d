package commerce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

func TestRegisterMerchant(t *testing.T) {
	f := newFixture(t)
	sealKey := bytes.Repeat([]byte{9}, 32)
	var connects []MerchantSpec
	down := false
	connect := func(_ context.Context, sp MerchantSpec) (cart.Merchant, error) {
		connects = append(connects, sp)
		if down {
			return nil, errors.New("connection refused")
		}
		return &engineMerchant{m: fakemerchant.New(&fakemerchant.Options{Now: f.now}), protocol: sp.Protocol}, nil
	}
	open := func() *Service {
		s, err := New(Options{Store: f.st, Log: f.log, Now: f.now, SealKey: sealKey, Connect: connect,
			Merchants: []MerchantConfig{{ID: "shop", Merchant: f.merchant}}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	svc := open()
	call := pay.OperatorCall{Operator: "op", Rationale: "a new supplier"}
	spec := MerchantSpec{ID: "acme", Protocol: "acp", BaseURL: "https://acme.example", APIKey: "sk_live_very_secret"}
	v, err := svc.RegisterMerchant(t.Context(), spec, call)
	if err != nil || v.Source != "operator" || !v.HasAPIKey || v.AuditSeq == 0 {
		t.Fatalf("%+v %v", v, err)
	}
	// The secret is neither in the store in the clear nor in the record.
	leaked := false
	_ = f.st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		for it.Next() {
			if bytes.Contains(it.Value(), []byte("sk_live_very_secret")) {
				leaked = true
			}
		}
		return it.Close()
	})
	if leaked {
		t.Fatal("the merchant's API key is stored in the clear")
	}
	for _, tc := range []struct {
		spec MerchantSpec
		want error
	}{
		{spec, ErrMerchantExists},
		{MerchantSpec{ID: "shop", Protocol: "acp", BaseURL: "https://x.example"}, ErrMerchantExists},
		{MerchantSpec{ID: "Bad", Protocol: "acp", BaseURL: "https://x.example"}, ErrInvalidMerchant},
		{MerchantSpec{ID: "plain", Protocol: "acp", BaseURL: "http://x.example"}, ErrInvalidMerchant},
		{MerchantSpec{ID: "nourl", Protocol: "ucp"}, ErrInvalidMerchant},
		{MerchantSpec{ID: "other", Protocol: "x402", BaseURL: "https://x.example"}, ErrInvalidMerchant},
	} {
		if _, err := svc.RegisterMerchant(t.Context(), tc.spec, call); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.spec, err, tc.want)
		}
	}
	down = true
	if _, err := svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "gone", Protocol: "ucp", ProfileURL: "https://gone.example/.well-known/ucp"}, call); !errors.Is(err, ErrMerchantUnavailable) {
		t.Errorf("an unreachable merchant: %v", err)
	}
	down = false
	// After a restart the registration is back, its key unsealed, and the
	// merchant is connected on first use.
	connects = nil
	again := open()
	page, _ := again.MerchantList(t.Context())
	if len(page.Data) != 2 || page.Data[0].ID != "acme" || page.Data[1].Source != "configuration" {
		t.Fatalf("registry after restart: %+v", page.Data)
	}
	if len(connects) != 0 {
		t.Fatal("a restart connected to registered merchants before their first use")
	}
	q, err := again.Quote(t.Context(), f.caller, QuoteRequest{Rail: "acp", Merchant: "acme", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-mug", 1)}}, "")
	if err != nil || !q.Ready() || len(connects) != 1 || connects[0].APIKey != "sk_live_very_secret" {
		t.Fatalf("quote from a registered merchant: %v %+v", err, connects)
	}
	// Without the seal key the stored credential does not open.
	if _, err := New(Options{Store: f.st, Log: f.log, SealKey: bytes.Repeat([]byte{8}, 32), Connect: connect}); err == nil {
		t.Error("a server with another seal key opened the stored credential")
	}
}

// TestRegisterMerchantRefusals: what a retry cannot fix is
// commerce.invalid_merchant; only what it can (no answer, a 5xx) is
// merchant_unavailable, retry-as-is. Payment credentials are sealed.
func TestRegisterMerchantRefusals(t *testing.T) {
	f := newFixture(t)
	sealKey := bytes.Repeat([]byte{9}, 32)
	var connectErr error
	var connects []MerchantSpec
	connect := func(_ context.Context, sp MerchantSpec) (cart.Merchant, error) {
		connects = append(connects, sp)
		if connectErr != nil {
			return nil, connectErr
		}
		return &engineMerchant{m: fakemerchant.New(&fakemerchant.Options{Now: f.now}), protocol: sp.Protocol}, nil
	}
	open := func() *Service {
		s, err := New(Options{Store: f.st, Log: f.log, Now: f.now, SealKey: sealKey, Connect: connect})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	svc := open()
	call := pay.OperatorCall{Operator: "op", Rationale: "the sample merchant"}
	spec := func(id string) MerchantSpec {
		return MerchantSpec{ID: id, Protocol: "ucp", ProfileURL: "https://" + id + ".example/.well-known/ucp"}
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"invalid profile", fmt.Errorf("ucp: new: %w: profile: $.payment.handlers[0].id: \"id\" is required", cart.ErrInvalidResponse), ErrInvalidMerchant},
		{"no common version", fmt.Errorf("ucp: new: %w", ucp.ErrNoCommonVersion), ErrInvalidMerchant},
		{"no checkout capability", fmt.Errorf("ucp: new: %w: merchant does not offer dev.ucp.shopping.checkout", cart.ErrInvalidResponse), ErrInvalidMerchant},
		{"unreachable", errors.New("connection refused"), ErrMerchantUnavailable},
		{"timeout", fmt.Errorf("%w: %w", cart.ErrUnavailable, context.DeadlineExceeded), ErrMerchantUnavailable},
		{"5xx", fmt.Errorf("%w: profile answered HTTP 503", cart.ErrUnavailable), ErrMerchantUnavailable},
	} {
		connectErr = tc.err
		_, err := svc.RegisterMerchant(t.Context(), spec("m"), call)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == ErrInvalidMerchant && !strings.Contains(err.Error(), "profileUrl") {
			t.Errorf("%s: %v does not name the field", tc.name, err)
		}
	}
	connectErr = nil
	for _, sp := range []MerchantSpec{
		{ID: "acpcred", Protocol: "acp", BaseURL: "https://a.example", PaymentCredentials: []ucp.PaymentCredential{{Handler: "h", Token: "t"}}},
		func() MerchantSpec {
			s := spec("notoken")
			s.PaymentCredentials = []ucp.PaymentCredential{{Handler: "h"}}
			return s
		}(),
	} {
		if _, err := svc.RegisterMerchant(t.Context(), sp, call); !errors.Is(err, ErrInvalidMerchant) {
			t.Errorf("%s: %v, want ErrInvalidMerchant", sp.ID, err)
		}
	}
	sp := spec("flowers")
	sp.PaymentCredentials = []ucp.PaymentCredential{{Handler: "mock_payment_handler", Token: "tok_very_secret"}}
	v, err := svc.RegisterMerchant(t.Context(), sp, call)
	if err != nil || len(v.CredentialHandlers) != 1 || v.CredentialHandlers[0] != "mock_payment_handler" {
		t.Fatalf("%+v %v", v, err)
	}
	leaked := false
	_ = f.st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		for it.Next() {
			leaked = leaked || bytes.Contains(it.Value(), []byte("tok_very_secret"))
		}
		return it.Close()
	})
	if leaked {
		t.Fatal("a payment credential is stored or recorded in the clear")
	}
	// After a restart the credential is unsealed and handed to the client.
	connects = nil
	again := open()
	if _, err := again.Quote(t.Context(), f.caller, QuoteRequest{Rail: "ucp", Merchant: "flowers", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-mug", 1)}}, ""); err != nil {
		t.Fatal(err)
	}
	if len(connects) != 1 || len(connects[0].PaymentCredentials) != 1 || connects[0].PaymentCredentials[0].Token != "tok_very_secret" {
		t.Fatalf("connect after restart: %+v", connects)
	}
}
