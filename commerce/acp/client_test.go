package acp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/acp/acptest"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
)

const apiKey = "sk_test_fake"

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a fake merchant over httptest and a client of it whose every
// exchange is recorded, and checked against the schemas when the test ends.
type env struct {
	m     *fakemerchant.Merchant
	srv   *httptest.Server
	rec   *acptest.Recorder
	c     *acp.Client
	clock *clock
}

func newEnv(t *testing.T, mo fakemerchant.Options, co acp.Options) *env {
	t.Helper()
	e := &env{clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}}
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	mo.BaseURL, mo.APIKey, mo.Now = e.srv.URL, apiKey, e.clock.Now
	e.m = fakemerchant.New(&mo)
	h = e.m.ACPHandler()
	e.rec = &acptest.Recorder{Next: e.srv.Client().Transport}
	co.BaseURL, co.APIKey, co.MerchantID, co.Now = e.srv.URL, apiKey, "fake-merchant", e.clock.Now
	co.HTTPClient = &http.Client{Transport: e.rec}
	c, err := acp.New(co)
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	schemas := acptest.Load(t)
	t.Cleanup(func() {
		if n := e.rec.Check(t, schemas, apiKey); n == 0 {
			t.Error("no exchange recorded")
		}
	})
	return e
}

func (e *env) create(t *testing.T, sku string, qty int64) cart.Cart {
	t.Helper()
	ct, err := e.c.Create(t.Context(), cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: sku, Quantity: qty}}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return ct
}

func pay(ct cart.Cart, key string) cart.Payment {
	return cart.Payment{Amount: ct.Totals.Total, Currency: ct.Currency, IdempotencyKey: key}
}

func TestReadyCompleteOrder(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	ctx := t.Context()
	ct := e.create(t, "sku-mug", 2)
	want := cart.Totals{Subtotal: 2400, Tax: 198, Shipping: 500, Total: 3098}
	if ct.Status != cart.StatusReady || ct.RawStatus != "ready_for_payment" || ct.Totals != want ||
		ct.Currency != "USD" || ct.Rail != "acp" || ct.Version != "2026-04-17" || ct.Merchant != "fake-merchant" {
		t.Fatalf("cart = %+v", ct)
	}
	if len(ct.Lines) != 1 || ct.Lines[0].ItemID != "sku-mug" || ct.Lines[0].Quantity != 2 || ct.Lines[0].Unit != 1200 ||
		ct.Lines[0].Total != 2598 {
		t.Fatalf("lines = %+v", ct.Lines)
	}
	if len(ct.Fulfillment) != 2 || !ct.Fulfillment[0].Selected || ct.Fulfillment[1].Amount != 1500 {
		t.Fatalf("fulfillment = %+v", ct.Fulfillment)
	}
	got, err := e.c.Get(ctx, ct.ID)
	if err != nil || got.Totals != want {
		t.Fatalf("get = %+v, %v", got.Totals, err)
	}
	o, err := e.c.Complete(ctx, ct.ID, pay(ct, "intent-1"))
	if err != nil {
		t.Fatal(err)
	}
	if o.ID == "" || o.CartID != ct.ID || o.Total != 3098 || o.Currency != "USD" || o.Status != "confirmed" ||
		!strings.HasPrefix(o.Permalink, e.srv.URL) || len(o.Lines) != 1 || !o.PlacedAt.Equal(e.clock.Now()) {
		t.Fatalf("order = %+v", o)
	}
	again, err := e.c.Complete(ctx, ct.ID, pay(ct, "intent-1"))
	if err != nil || again.ID != o.ID {
		t.Fatalf("retried completion = %+v, %v; want order %s", again, err, o.ID)
	}
	if got, _ := e.c.Get(ctx, ct.ID); got.Status != cart.StatusCompleted {
		t.Fatalf("after completion: %s", got.Status)
	}

	// The delegation: exactly the amount, for this session, 15 minutes.
	var saw bool
	for _, x := range e.rec.Exchanges() {
		switch {
		case x.Path == "/agentic_commerce/delegate_payment":
			var r acp.DelegatePaymentRequest
			if err := json.Unmarshal(x.Request, &r); err != nil {
				t.Fatal(err)
			}
			exp, _ := time.Parse(time.RFC3339, r.Allowance.ExpiresAt)
			if d := exp.Sub(e.clock.Now()); r.Allowance.MaxAmount != 3098 || r.Allowance.Currency != "usd" ||
				r.Allowance.CheckoutSessionID != ct.ID || r.Allowance.Reason != "one_time" || d < 15*time.Minute || d > 16*time.Minute {
				t.Errorf("allowance = %+v", r.Allowance)
			}
			if k := x.Header.Get("Idempotency-Key"); !strings.HasPrefix(k, "delegate_payment_") {
				t.Errorf("delegate Idempotency-Key = %q", k)
			}
			saw = true
		case strings.HasSuffix(x.Path, "/complete"):
			if k := x.Header.Get("Idempotency-Key"); k != "intent-1" {
				t.Errorf("complete Idempotency-Key = %q", k)
			}
		}
	}
	if !saw {
		t.Fatal("no delegate_payment")
	}
}

func TestCreateOptions(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	ct, err := e.c.Create(t.Context(), cart.CreateRequest{
		Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-book", Quantity: 1}, {ID: "sku-mug", Quantity: 1}},
		Email: "buyer@example.com", Fulfillment: "express", Discounts: []string{"SAVE10"},
		Address:        &cart.Address{Name: "A B", Line1: "1 Main St", City: "Springfield", PostalCode: "12345", Country: "US"},
		IdempotencyKey: "create-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	// 3700 subtotal, 370 off, tax 8.25 % of 1080 = 89, express 1500.
	want := cart.Totals{Subtotal: 3700, Discount: 370, Tax: 89, Shipping: 1500, Total: 4919}
	if ct.Totals != want || !ct.Fulfillment[1].Selected || len(ct.Lines) != 2 {
		t.Fatalf("cart = %+v", ct)
	}
}

func TestScenarios(t *testing.T) {
	tests := []struct {
		sku        string
		status     cart.Status
		continues  bool
		completeIs error
		message    string
	}{
		{"sku-soldout", cart.StatusIncomplete, false, cart.ErrNotReady, "out_of_stock"},
		{"sku-age", cart.StatusEscalation, true, cart.ErrNotReady, ""},
		{"sku-3ds", cart.StatusAuth, true, cart.ErrNotReady, ""},
		{"sku-declined", cart.StatusReady, false, cart.ErrDeclined, ""},
		{"sku-5xx", cart.StatusReady, false, cart.ErrUnknownOutcome, ""},
	}
	for _, tt := range tests {
		t.Run(tt.sku, func(t *testing.T) {
			e := newEnv(t, fakemerchant.Options{}, acp.Options{})
			ct := e.create(t, tt.sku, 1)
			if ct.Status != tt.status {
				t.Fatalf("status %s, want %s", ct.Status, tt.status)
			}
			if tt.continues != (ct.ContinueURL == e.srv.URL+"/continue/"+ct.ID) {
				t.Fatalf("continue URL %q", ct.ContinueURL)
			}
			if tt.message != "" && (len(ct.Messages) == 0 || ct.Messages[0].Code != tt.message) {
				t.Fatalf("messages %+v", ct.Messages)
			}
			_, err := e.c.Complete(t.Context(), ct.ID, pay(ct, "k"))
			if !errors.Is(err, tt.completeIs) {
				t.Fatalf("complete: %v, want %v", err, tt.completeIs)
			}
			for _, other := range []error{cart.ErrDeclined, cart.ErrNotReady, cart.ErrUnknownOutcome, cart.ErrUnavailable} {
				if other != tt.completeIs && errors.Is(err, other) {
					t.Fatalf("complete: %v also matches %v", err, other)
				}
			}
			var me *acp.MerchantError
			if !errors.As(err, &me) || me.Body == nil {
				t.Fatalf("complete: %v carries no merchant error", err)
			}
			if got, err := e.c.Get(t.Context(), ct.ID); err != nil || got.Status != tt.status {
				t.Fatalf("after: %s, %v; want %s (no order)", got.Status, err, tt.status)
			}
		})
	}
}

func TestSlow(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{SlowDelay: 50 * time.Millisecond}, acp.Options{})
	ct := e.create(t, "sku-slow", 1)
	if _, err := e.c.Complete(t.Context(), ct.ID, pay(ct, "k")); err != nil {
		t.Fatal(err)
	}
	impatient := newEnv(t, fakemerchant.Options{SlowDelay: 5 * time.Second}, acp.Options{Timeout: 20 * time.Millisecond})
	_, err := impatient.c.Create(t.Context(), cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-slow", Quantity: 1}}})
	if !errors.Is(err, cart.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("create: %v", err)
	}
}

func TestTimeoutThenSuccess(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{HangFor: 10 * time.Second}, acp.Options{Timeout: 300 * time.Millisecond})
	ctx := t.Context()
	ct := e.create(t, "sku-timeout", 1)
	_, err := e.c.Complete(ctx, ct.ID, pay(ct, "intent-7"))
	if !errors.Is(err, cart.ErrUnknownOutcome) || errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("complete: %v", err)
	}
	got, err := e.c.Get(ctx, ct.ID)
	if err != nil || got.Status != cart.StatusCompleted {
		t.Fatalf("get: %s, %v", got.Status, err)
	}
	o1, err := e.c.Complete(ctx, ct.ID, pay(ct, "intent-7"))
	if err != nil {
		t.Fatal(err)
	}
	o2, err := e.c.Complete(ctx, ct.ID, pay(ct, "intent-7"))
	if err != nil || o2.ID != o1.ID {
		t.Fatalf("orders %s and %s, %v", o1.ID, o2.ID, err)
	}
	if _, err := e.c.Complete(ctx, ct.ID, pay(ct, "another-intent")); !errors.Is(err, cart.ErrRejected) {
		t.Fatalf("completing again under another key: %v", err)
	}
}

func TestExpires(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{ExpiresAfter: time.Minute}, acp.Options{})
	ct := e.create(t, "sku-expiring", 1)
	if ct.Status != cart.StatusReady || ct.ExpiresAt == nil || !ct.ExpiresAt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("cart %s expires %v", ct.Status, ct.ExpiresAt)
	}
	e.clock.Advance(time.Minute)
	got, err := e.c.Get(t.Context(), ct.ID)
	if err != nil || got.Status != cart.StatusExpired || got.RawStatus != "expired" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if _, err := e.c.Complete(t.Context(), ct.ID, pay(ct, "k")); !errors.Is(err, cart.ErrNotReady) {
		t.Fatalf("complete: %v", err)
	}
}

func TestPriceChanges(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	ctx := t.Context()
	quote := e.create(t, "sku-surge", 1)
	now, err := e.c.Get(ctx, quote.ID)
	if err != nil {
		t.Fatal(err)
	}
	if now.Totals.Total != quote.Totals.Total+fakemerchant.PriceIncrease {
		t.Fatalf("total %d after %d", now.Totals.Total, quote.Totals.Total)
	}
	if _, err := e.c.Complete(ctx, quote.ID, pay(quote, "k1")); !errors.Is(err, cart.ErrDeclined) {
		t.Fatalf("paying the quote: %v", err)
	}
	o, err := e.c.Complete(ctx, quote.ID, pay(now, "k2"))
	if err != nil || o.Total != now.Totals.Total {
		t.Fatalf("paying the new total: %+v, %v", o, err)
	}
}

func TestCancelAndNotFound(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	ctx := t.Context()
	ct := e.create(t, "sku-book", 1)
	got, err := e.c.Cancel(ctx, ct.ID)
	if err != nil || got.Status != cart.StatusCanceled {
		t.Fatalf("cancel: %+v, %v", got, err)
	}
	if _, err := e.c.Cancel(ctx, ct.ID); !errors.Is(err, cart.ErrRejected) {
		t.Fatalf("cancel again: %v", err)
	}
	if _, err := e.c.Get(ctx, "cs_nope"); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := e.c.Complete(ctx, "cs_nope", cart.Payment{Amount: 1, Currency: "USD", IdempotencyKey: "k"}); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("complete: %v", err)
	}
	_, err = e.c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-nope", Quantity: 1}}})
	var me *acp.MerchantError
	if !errors.Is(err, cart.ErrRejected) || !errors.As(err, &me) || me.StatusCode != 400 || me.Body.Code != "invalid_item" {
		t.Fatalf("create unknown item: %v", err)
	}
}

func TestWrongKey(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	c, err := acp.New(acp.Options{BaseURL: e.srv.URL, APIKey: "sk_wrong", HTTPClient: e.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(t.Context(), cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}})
	if !errors.Is(err, cart.ErrRejected) || strings.Contains(err.Error(), "sk_wrong") {
		t.Fatalf("create: %v", err)
	}
	e.create(t, "sku-mug", 1) // so that something is recorded and checked
}

func TestUnavailable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := acp.New(acp.Options{BaseURL: url, HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}}); !errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("create: %v", err)
	}
	if _, err := c.Get(ctx, "cs_1"); !errors.Is(err, cart.ErrUnavailable) {
		t.Fatalf("get: %v", err)
	}
	// The PSP answers, the merchant cannot be reached: nothing was sent
	// that could complete anything.
	e := newEnv(t, fakemerchant.Options{}, acp.Options{})
	ct := e.create(t, "sku-mug", 1)
	c, err = acp.New(acp.Options{BaseURL: url, PSPURL: e.srv.URL, APIKey: apiKey, HTTPClient: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(ctx, ct.ID, pay(ct, "k")); !errors.Is(err, cart.ErrUnavailable) || errors.Is(err, cart.ErrUnknownOutcome) {
		t.Fatalf("complete: %v", err)
	}
}

func TestNewOptions(t *testing.T) {
	for _, o := range []acp.Options{
		{BaseURL: "https://m.example"},
		{BaseURL: "ftp://m.example", HTTPClient: http.DefaultClient},
		{BaseURL: "/relative", HTTPClient: http.DefaultClient},
		{BaseURL: "https://m.example", PSPURL: "nope", HTTPClient: http.DefaultClient},
	} {
		if _, err := acp.New(o); err == nil {
			t.Errorf("New(%+v) succeeded", o)
		}
	}
	c, err := acp.New(acp.Options{BaseURL: "https://m.example/acp/", HTTPClient: http.DefaultClient})
	if err != nil || c.Protocol() != "acp" || c.Version() != "2026-04-17" {
		t.Fatalf("%v, %v", c, err)
	}
}
