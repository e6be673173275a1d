package ucp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
)

func newClient(t *testing.T, e *env, mod func(*ucp.Options)) *ucp.Client {
	t.Helper()
	o := ucp.Options{ProfileURL: e.base + "/.well-known/ucp", MerchantID: "m_fake", HTTPClient: e.client(),
		Timeout: 5 * time.Second, Now: e.clock.Now, AgentProfile: "https://agent.test/.well-known/ucp"}
	if mod != nil {
		mod(&o)
	}
	c, err := ucp.New(t.Context(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

func create(t *testing.T, c *ucp.Client, sku string, qty int64) cart.Cart {
	t.Helper()
	k, err := c.Create(t.Context(), cart.CreateRequest{Currency: "USD", Email: "buyer@example.com",
		Lines: []cart.LineRequest{{ID: sku, Quantity: qty}}, IdempotencyKey: "cr_" + sku + t.Name()})
	if err != nil {
		t.Fatalf("Create %s: %v", sku, err)
	}
	return k
}

func pay(k cart.Cart, key string) cart.Payment {
	return cart.Payment{Amount: k.Totals.Total, Currency: k.Currency, IdempotencyKey: key}
}

func bothVersions(t *testing.T, f func(t *testing.T, version string)) {
	for _, v := range ucp.Versions() {
		t.Run(v, func(t *testing.T) { t.Parallel(); f(t, v) })
	}
}

func TestScenarios(t *testing.T) {
	bothVersions(t, func(t *testing.T, version string) {
		ctx := t.Context()
		e := newEnv(t, fakemerchant.Options{SlowDelay: 20 * time.Millisecond, HangFor: 10 * time.Second}, nil, version)
		c := newClient(t, e, nil)
		if c.Version() != version || c.Protocol() != "ucp" {
			t.Fatalf("negotiated %s %s", c.Protocol(), c.Version())
		}

		t.Run("ready", func(t *testing.T) {
			k := create(t, c, "sku-mug", 2)
			want := cart.Totals{Subtotal: 2400, Tax: 198, Shipping: 500, Total: 3098}
			if k.Status != cart.StatusReady || k.RawStatus != "ready_for_complete" || k.Totals != want || k.Currency != "USD" ||
				k.Merchant != "m_fake" || k.Version != version || len(k.Lines) != 1 || k.Lines[0].Unit != 1200 || k.ExpiresAt == nil {
				t.Fatalf("cart = %+v", k)
			}
			o, err := c.Complete(ctx, k.ID, pay(k, "intent-ready"))
			if err != nil {
				t.Fatal(err)
			}
			if o.ID == "" || o.CartID != k.ID || o.Total != 3098 || o.Currency != "USD" || o.Permalink == "" {
				t.Fatalf("order = %+v", o)
			}
			again, err := c.Complete(ctx, k.ID, pay(k, "intent-ready"))
			if err != nil || again.ID != o.ID {
				t.Fatalf("retried Complete = %+v, %v; want order %s", again, err, o.ID)
			}
			if g, err := c.Get(ctx, k.ID); err != nil || g.Status != cart.StatusCompleted {
				t.Fatalf("Get = %+v, %v", g, err)
			}
		})
		t.Run("update", func(t *testing.T) {
			k := create(t, c, "sku-mug", 1)
			u, err := c.Update(ctx, k.ID, ucp.UpdateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-book", Quantity: 3}}})
			if err != nil || u.Totals.Total != 7500+500 || u.Lines[0].ItemID != "sku-book" {
				t.Fatalf("Update = %+v, %v", u, err)
			}
		})
		t.Run("out_of_stock", func(t *testing.T) {
			k := create(t, c, "sku-soldout", 1)
			if k.Status != cart.StatusIncomplete || len(k.Messages) == 0 || k.Messages[0].Code != "out_of_stock" {
				t.Fatalf("cart = %+v", k)
			}
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-oos")); !errors.Is(err, cart.ErrNotReady) {
				t.Fatalf("Complete: %v, want ErrNotReady", err)
			}
		})
		for sku, want := range map[string]cart.Status{"sku-age": cart.StatusEscalation, "sku-3ds": cart.StatusAuth} {
			t.Run(sku, func(t *testing.T) {
				k := create(t, c, sku, 1)
				if k.Status != want || k.RawStatus != "requires_escalation" || k.ContinueURL != e.base+"/continue/"+k.ID {
					t.Fatalf("cart = %+v", k)
				}
				if _, err := c.Complete(ctx, k.ID, pay(k, "intent-"+sku)); !errors.Is(err, cart.ErrNotReady) {
					t.Fatalf("Complete: %v, want ErrNotReady", err)
				}
			})
		}
		t.Run("declined", func(t *testing.T) {
			k := create(t, c, "sku-declined", 1)
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-declined")); !errors.Is(err, cart.ErrDeclined) {
				t.Fatalf("Complete: %v, want ErrDeclined", err)
			}
			if g, err := c.Get(ctx, k.ID); err != nil || g.Status != cart.StatusReady {
				t.Fatalf("Get = %+v, %v", g, err)
			}
		})
		t.Run("slow", func(t *testing.T) {
			k := create(t, c, "sku-slow", 1)
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-slow")); err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			if _, err := c.Get(short, k.ID); !errors.Is(err, cart.ErrUnavailable) {
				t.Fatalf("Get with a short timeout: %v, want ErrUnavailable", err)
			}
		})
		t.Run("complete_5xx", func(t *testing.T) {
			k := create(t, c, "sku-5xx", 1)
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-5xx")); !errors.Is(err, cart.ErrUnknownOutcome) {
				t.Fatalf("Complete: %v, want ErrUnknownOutcome", err)
			}
			if g, err := c.Get(ctx, k.ID); err != nil || g.Status == cart.StatusCompleted {
				t.Fatalf("Get = %+v, %v; want not completed", g, err)
			}
		})
		t.Run("timeout_then_success", func(t *testing.T) {
			k := create(t, c, "sku-timeout", 1)
			short := newClient(t, e, func(o *ucp.Options) { o.Timeout = 300 * time.Millisecond })
			if _, err := short.Complete(ctx, k.ID, pay(k, "intent-timeout")); !errors.Is(err, cart.ErrUnknownOutcome) {
				t.Fatalf("Complete: %v, want ErrUnknownOutcome", err)
			}
			if g, err := c.Get(ctx, k.ID); err != nil || g.Status != cart.StatusCompleted {
				t.Fatalf("Get = %+v, %v; want completed", g, err)
			}
			o1, err := c.Complete(ctx, k.ID, pay(k, "intent-timeout"))
			if err != nil {
				t.Fatal(err)
			}
			o2, err := c.Complete(ctx, k.ID, pay(k, "intent-timeout"))
			if err != nil || o2.ID != o1.ID {
				t.Fatalf("second retry = %+v, %v; want %s", o2, err, o1.ID)
			}
			if _, err := c.Complete(ctx, k.ID, pay(k, "another-intent")); !errors.Is(err, cart.ErrRejected) {
				t.Fatalf("Complete with another key: %v, want ErrRejected", err)
			}
		})
		t.Run("price_changes", func(t *testing.T) {
			k := create(t, c, "sku-surge", 1)
			g, err := c.Get(ctx, k.ID)
			if err != nil || g.Totals.Total != k.Totals.Total+fakemerchant.PriceIncrease {
				t.Fatalf("Get = %+v, %v; want the total to grow", g, err)
			}
			_, err = c.Complete(ctx, k.ID, pay(k, "intent-surge"))
			if !errors.Is(err, ucp.ErrAmountMismatch) || !errors.Is(err, cart.ErrNotReady) {
				t.Fatalf("Complete at the quoted total: %v, want ErrAmountMismatch", err)
			}
			o, err := c.Complete(ctx, k.ID, pay(g, "intent-surge"))
			if err != nil || o.Total != g.Totals.Total {
				t.Fatalf("Complete at the new total = %+v, %v", o, err)
			}
		})
		t.Run("cancel", func(t *testing.T) {
			k := create(t, c, "sku-book", 1)
			x, err := c.Cancel(ctx, k.ID)
			if err != nil || x.Status != cart.StatusCanceled {
				t.Fatalf("Cancel = %+v, %v", x, err)
			}
			if _, err := c.Cancel(ctx, k.ID); !errors.Is(err, cart.ErrRejected) {
				t.Fatalf("second Cancel: %v, want ErrRejected", err)
			}
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-canceled")); !errors.Is(err, cart.ErrNotReady) {
				t.Fatalf("Complete: %v, want ErrNotReady", err)
			}
		})
		t.Run("not_found", func(t *testing.T) {
			if _, err := c.Get(ctx, "cs_nope"); !errors.Is(err, cart.ErrNotFound) {
				t.Fatalf("Get: %v, want ErrNotFound", err)
			}
			if _, err := c.Complete(ctx, "cs_nope", cart.Payment{Amount: 1, Currency: "USD", IdempotencyKey: "k"}); !errors.Is(err, cart.ErrNotFound) {
				t.Fatalf("Complete: %v, want ErrNotFound", err)
			}
		})
		t.Run("unknown_item", func(t *testing.T) {
			_, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-nope", Quantity: 1}}})
			if !errors.Is(err, cart.ErrRejected) {
				t.Fatalf("Create: %v, want ErrRejected", err)
			}
		})
		// Last: it moves the shared clock.
		t.Run("expires", func(t *testing.T) {
			k := create(t, c, "sku-expiring", 1)
			if k.Status != cart.StatusReady {
				t.Fatalf("cart = %+v", k)
			}
			e.clock.Add(fakemerchant.ExpiresAfter + time.Second)
			g, err := c.Get(ctx, k.ID)
			if err != nil || g.Status != cart.StatusExpired || g.RawStatus != "canceled" {
				t.Fatalf("Get = %+v, %v; want expired", g, err)
			}
			if _, err := c.Complete(ctx, k.ID, pay(k, "intent-expired")); !errors.Is(err, cart.ErrNotReady) {
				t.Fatalf("Complete: %v, want ErrNotReady", err)
			}
		})
	})
}

func TestNegotiation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		offered  []string
		allowed  []string
		want     string
		wantFail bool
	}{
		{"both", nil, nil, ucp.V20260408, false},
		{"merchant 2026-01-11 only", []string{ucp.V20260111}, nil, ucp.V20260111, false},
		{"merchant 2026-04-08 only", []string{ucp.V20260408}, nil, ucp.V20260408, false},
		{"we allow 2026-01-11 only: supported_versions", nil, []string{ucp.V20260111}, ucp.V20260111, false},
		{"no common version", []string{ucp.V20260111}, []string{ucp.V20260408}, "", true},
		{"no common version, newest offered", []string{ucp.V20260408}, []string{ucp.V20260111}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fakemerchant.Options{}, nil, tc.offered...)
			c, err := ucp.New(t.Context(), ucp.Options{ProfileURL: e.base + "/.well-known/ucp", HTTPClient: e.client(), Versions: tc.allowed})
			if tc.wantFail {
				if !errors.Is(err, ucp.ErrNoCommonVersion) {
					t.Fatalf("New: %v, want ErrNoCommonVersion", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Version() != tc.want {
				t.Fatalf("negotiated %s, want %s", c.Version(), tc.want)
			}
			k := create(t, c, "sku-book", 1)
			if _, err := c.Complete(t.Context(), k.ID, pay(k, "intent")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		offered, allowed []string
		want             string
	}{
		{[]string{"2026-01-11", "2026-04-08"}, []string{"2026-01-11", "2026-04-08"}, "2026-04-08"},
		{[]string{"2026-01-11", "2026-04-08", "2027-01-01"}, []string{"2026-01-11", "2026-04-08", "2027-01-01"}, "2026-04-08"},
		{[]string{"2026-01-11"}, []string{"2026-01-11", "2026-04-08"}, "2026-01-11"},
		{[]string{"2025-01-01"}, []string{"2026-01-11", "2026-04-08"}, ""},
		{nil, []string{"2026-01-11"}, ""},
	} {
		got, err := ucp.Negotiate(tc.offered, tc.allowed)
		if got != tc.want || (tc.want == "") != errors.Is(err, ucp.ErrNoCommonVersion) {
			t.Errorf("Negotiate(%q, %q) = %q, %v; want %q", tc.offered, tc.allowed, got, err, tc.want)
		}
	}
}

func TestUnavailable(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, nil)
	c := newClient(t, e, nil)
	k := create(t, c, "sku-book", 1)
	e.srv.Close()
	ctx := context.Background()
	if _, err := c.Get(ctx, k.ID); !errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("Get: %v, want ErrUnavailable", err)
	}
	// Complete fails at its first read: nothing state-changing was sent.
	if _, err := c.Complete(ctx, k.ID, pay(k, "intent")); !errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("Complete: %v, want ErrUnavailable", err)
	}
	if _, err := ucp.New(ctx, ucp.Options{ProfileURL: e.base + "/.well-known/ucp", HTTPClient: e.client()}); !errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("New: %v, want ErrUnavailable", err)
	}
}
