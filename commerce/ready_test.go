package commerce

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
)

// TestBuyFromAMerchantThatNeverReportsReady buys over UCP from a merchant
// whose sessions never report ready_for_complete (sku-never-ready:
// incomplete, no message, completes when asked, as the public sample
// merchant does). By default /buy refuses the cart (intent.malformed,
// cartStatus incomplete) and no money moves; with the operator's
// readyWithoutErrors the purchase settles, and the record keeps the
// merchant's own word, incomplete. A session with an error message is
// refused either way.
func TestBuyFromAMerchantThatNeverReportsReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		option  bool
		sku     string
		settled bool
	}{
		{"strict", false, "sku-never-ready", false},
		{"ready without errors", true, "sku-never-ready", true},
		{"missing information", true, "sku-needs-phone", false},
		{"out of stock", true, "sku-soldout", false},
		{"ready anyway", true, "sku-book", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			shop := newUCPShop(t, f)
			c, err := ucp.New(t.Context(), ucp.Options{ProfileURL: shop.srv.URL + "/.well-known/ucp", MerchantID: "ucpshop",
				HTTPClient: shop.srv.Client(), Now: f.now, ReadyWithoutErrors: tc.option, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := f.svc.Register(MerchantConfig{ID: "ucpshop", Merchant: c}); err != nil {
				t.Fatal(err)
			}
			page, _ := f.svc.MerchantList(t.Context())
			if i := slices.IndexFunc(page.Data, func(v MerchantView) bool { return v.ID == "ucpshop" }); i < 0 || page.Data[i].ReadyWithoutErrors != tc.option {
				t.Fatalf("listing %+v", page.Data)
			}

			res, err := f.buy(f.ucpPurchase("p-"+strings.ReplaceAll(tc.name, " ", "-"), line(tc.sku, 2)))
			if !tc.settled {
				var nr *NotReadyError
				if !errors.As(err, &nr) || nr.Code() != pay.CodeMalformed || nr.Cart.Status != cart.StatusIncomplete ||
					nr.ProblemExtensions()["cartStatus"] != cart.StatusIncomplete || nr.ProblemExtensions()["merchantStatus"] != "incomplete" {
					t.Fatalf("buy: %v %+v, want a not-ready cart (intent.malformed, incomplete)", err, res)
				}
				for _, ty := range f.types() {
					if ty != EntryCartRead {
						t.Fatalf("a cart that is not ready reached the gate: %v", f.types())
					}
				}
				return
			}
			if err != nil || res.Outcome != pay.OutcomeSettled || res.Order == nil || res.Order.Receipt.Payee != "merchant:ucpshop" ||
				res.Order.Receipt.Amount.Minor != res.Order.Total.Minor || res.Order.Receipt.Rail != "ucp" {
				t.Fatalf("buy: %v %+v", err, res)
			}
			if got, want := f.types(), []string{"gate.decision", EntryCompleted, "payment.settled"}; !slices.Equal(got, want) {
				t.Fatalf("record %v, want %v", got, want)
			}
			// The decision's entry holds the merchant's own status.
			var dec struct {
				Metadata map[string]string `json:"metadata"`
			}
			for e, err := range f.log.Entries(t.Context(), 1, 1) {
				if err != nil || json.Unmarshal(e.Data, &dec) != nil {
					t.Fatal(err)
				}
			}
			raw := "ready_for_complete"
			if tc.sku == "sku-never-ready" {
				raw = "incomplete"
			}
			if dec.Metadata["merchantStatus"] != raw {
				t.Errorf("decision metadata %v, want merchantStatus %s", dec.Metadata, raw)
			}
		})
	}
}

// TestRegisterMerchantReadyWithoutErrors: the accommodation is refused for
// ACP (nothing written), recorded and listed for UCP, stored with the
// registration and handed to the client after a restart.
func TestRegisterMerchantReadyWithoutErrors(t *testing.T) {
	f := newFixture(t)
	shop := newUCPShop(t, f)
	var specs []MerchantSpec
	open := registryOver(t, f, shop, &specs)
	svc := open()
	call := pay.OperatorCall{Operator: "op", Rationale: "the sample merchant never says ready"}
	profile := shop.srv.URL + "/.well-known/ucp"

	size, rows := wrote(t, f, svc)
	_, err := svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "acme", Protocol: "acp", BaseURL: "https://acme.example", ReadyWithoutErrors: true}, call)
	var coded interface{ Code() string }
	if !errors.Is(err, ErrInvalidMerchant) || !strings.Contains(err.Error(), "readyWithoutErrors") || !errors.As(err, &coded) || coded.Code() != CodeInvalidMerchant {
		t.Fatalf("acp with readyWithoutErrors: %v, want %v naming the field", err, ErrInvalidMerchant)
	}
	if s, n := wrote(t, f, svc); s != size || n != rows || len(specs) != 0 {
		t.Fatalf("a refused registration wrote (record %d→%d, rows %d→%d) or connected (%d)", size, s, rows, n, len(specs))
	}

	for _, sp := range []MerchantSpec{
		{ID: "sample", Protocol: "ucp", ProfileURL: profile, ReadyWithoutErrors: true},
		{ID: "strict", Protocol: "ucp", ProfileURL: profile},
	} {
		v, err := svc.RegisterMerchant(t.Context(), sp, call)
		if err != nil || v.ReadyWithoutErrors != sp.ReadyWithoutErrors {
			t.Fatalf("register %s: %v %+v", sp.ID, err, v)
		}
	}
	// The record says so (a choice, not a secret).
	var recorded []bool
	for e, err := range f.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == EntryMerchantRegistered {
			recorded = append(recorded, bytes.Contains(e.Data, []byte(`"readyWithoutErrors":true`)))
		}
	}
	if !slices.Equal(recorded, []bool{true, false}) {
		t.Fatalf("registration entries carry readyWithoutErrors: %v, want [true false]", recorded)
	}

	quote := func(s *Service, merchant string) Quoted {
		t.Helper()
		q, err := s.Quote(t.Context(), f.caller, QuoteRequest{Rail: "ucp", Merchant: merchant, Currency: "USD",
			Lines: []cart.LineRequest{line("sku-never-ready", 1)}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	for _, s := range []*Service{svc, open()} { // registered, then after a restart
		specs = nil
		page, _ := s.MerchantList(t.Context())
		if len(page.Data) != 2 || page.Data[0].ID != "sample" || !page.Data[0].ReadyWithoutErrors || page.Data[1].ReadyWithoutErrors {
			t.Fatalf("registry %+v", page.Data)
		}
		if q := quote(s, "sample"); !q.Ready() || q.RawStatus != "incomplete" {
			t.Errorf("sample: quote %s (%s), want ready (incomplete)", q.Status, q.RawStatus)
		}
		if q := quote(s, "strict"); q.Ready() || q.RawStatus != "incomplete" {
			t.Errorf("strict: quote %s (%s), want incomplete", q.Status, q.RawStatus)
		}
	}
	if len(specs) != 2 || !specs[0].ReadyWithoutErrors || specs[1].ReadyWithoutErrors {
		t.Fatalf("connects after the restart: %+v", specs)
	}
}

// TestRegistrationSeenByAnotherServer: two services over one store (two
// servers of a deployment). A merchant registered through one is listed
// and quoted through the other without a restart, and registering the
// same id through the other is refused by the stored registration.
func TestRegistrationSeenByAnotherServer(t *testing.T) {
	f := newFixture(t)
	shop := newUCPShop(t, f)
	open := registryOver(t, f, shop, nil)
	a, b := open(), open()
	call := pay.OperatorCall{Operator: "op", Rationale: "a merchant for both servers"}
	sp := MerchantSpec{ID: "shared", Protocol: "ucp", ProfileURL: shop.srv.URL + "/.well-known/ucp"}
	if _, err := a.RegisterMerchant(t.Context(), sp, call); err != nil {
		t.Fatal(err)
	}
	page, err := b.MerchantList(t.Context())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "shared" {
		t.Fatalf("the other server's listing: %+v %v", page, err)
	}
	q, err := b.Quote(t.Context(), f.caller, QuoteRequest{Rail: "ucp", Merchant: "shared", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-mug", 1)}}, "")
	if err != nil || q.Cart.Totals.Total == 0 {
		t.Fatalf("quote through the other server: %+v %v", q, err)
	}
	if _, err := b.RegisterMerchant(t.Context(), sp, call); !errors.Is(err, ErrMerchantExists) {
		t.Fatalf("registering the same id through the other server: %v", err)
	}
	if _, err := open().Merchant("never-registered"); !errors.Is(err, ErrMerchantNotFound) {
		t.Fatalf("an unknown merchant: %v", err)
	}
}

// registryOver returns a constructor of services over f's store that
// register UCP merchants of shop, noting each spec connected in specs
// (when not nil).
func registryOver(t *testing.T, f *fixture, shop *ucpShop, specs *[]MerchantSpec) func() *Service {
	connect := func(ctx context.Context, sp MerchantSpec) (cart.Merchant, error) {
		if specs != nil {
			*specs = append(*specs, sp)
		}
		return ucp.New(ctx, ucp.Options{ProfileURL: sp.ProfileURL, MerchantID: sp.ID, HTTPClient: shop.srv.Client(), Now: f.now,
			ReadyWithoutErrors: sp.ReadyWithoutErrors, Logger: slog.New(slog.DiscardHandler)})
	}
	return func() *Service {
		s, err := New(Options{Store: f.st, Log: f.log, Now: f.now, SealKey: bytes.Repeat([]byte{9}, 32), Connect: connect,
			URLs: netguard.Policy{AllowLoopback: true, AllowHTTP: true}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}
