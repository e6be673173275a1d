package commerce

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
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
