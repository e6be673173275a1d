package fakemerchant_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
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

const key = "sk_fake"

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

// acpEnv serves the ACP view; every answer it gives is checked against the
// schemas when the test ends.
type acpEnv struct {
	t     *testing.T
	srv   *httptest.Server
	rec   *acptest.Recorder
	hc    *http.Client
	clock *clock
}

func newACP(t *testing.T, o fakemerchant.Options) *acpEnv {
	t.Helper()
	e := &acpEnv{t: t, clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}}
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	o.BaseURL, o.APIKey, o.Now = e.srv.URL, key, e.clock.Now
	h = fakemerchant.New(&o).ACPHandler()
	e.rec = &acptest.Recorder{Next: e.srv.Client().Transport}
	e.hc = &http.Client{Transport: e.rec}
	s := acptest.Load(t)
	t.Cleanup(func() {
		for i, x := range e.rec.Exchanges() {
			if x.Status == 0 {
				continue // no answer
			}
			if len(x.Response) == 0 && x.Path == "/agentic_commerce/delegate_payment" && (x.Status == 401 || x.Status == 400) {
				continue // no Error code fits (see psp.go)
			}
			if err := s.Response(t, x.Method, x.Path, x.Status, x.Response); err != nil {
				t.Errorf("answer %d to %s %s (%d) refused by the schema: %v\n%s", i, x.Method, x.Path, x.Status, err, x.Response)
			}
		}
	})
	return e
}

// do sends a request with ACP's headers; edit may change them.
func (e *acpEnv) do(method, path, body string, edit func(h http.Header)) (int, http.Header, map[string]any) {
	e.t.Helper()
	var rd *strings.Reader
	if body != "" {
		rd = strings.NewReader(body)
	} else {
		rd = strings.NewReader("")
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("API-Version", acp.Version)
	if method == http.MethodPost {
		req.Header.Set("Idempotency-Key", fmt.Sprintf("idem-%x", sha256.Sum256([]byte(path+body))))
		req.Header.Set("Content-Type", "application/json")
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if buf.Len() > 0 {
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			e.t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, buf.String())
		}
	}
	return resp.StatusCode, resp.Header, m
}

func acpField(m map[string]any, path ...any) any {
	var v any = m
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func TestACPCreateItems(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	// The quirk: quantities on items (the examples send them), and an
	// item listed twice.
	st, _, m := e.do("POST", "/checkout_sessions",
		`{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug","quantity":2},{"id":"sku-book"},{"id":"sku-mug"}]}`, nil)
	if st != 201 || acpField(m, "status") != "ready_for_payment" {
		t.Fatalf("%d %v", st, m)
	}
	lines := acpField(m, "line_items").([]any)
	if len(lines) != 2 || acpField(m, "line_items", 0, "quantity") != 3.0 || acpField(m, "line_items", 1, "quantity") != 1.0 {
		t.Fatalf("lines %v", lines)
	}
	// 3 mugs 3600 + tax 297, a book 2500, shipping 500.
	totals := acpField(m, "totals").([]any)
	if last := totals[len(totals)-1].(map[string]any); last["type"] != "total" || last["amount"] != 6897.0 {
		t.Fatalf("totals %v", totals)
	}
}

func TestACPRefusals(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	create := `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug"}]}`
	tests := []struct {
		name, body string
		edit       func(h http.Header)
		status     int
		code       string
		param      string
	}{
		{"no bearer", create, func(h http.Header) { h.Del("Authorization") }, 401, "unauthorized", ""},
		{"wrong bearer", create, func(h http.Header) { h.Set("Authorization", "Bearer nope") }, 401, "unauthorized", ""},
		{"no API-Version", create, func(h http.Header) { h.Del("API-Version") }, 400, "unsupported_api_version", ""},
		{"no Idempotency-Key", create, func(h http.Header) { h.Del("Idempotency-Key") }, 400, "idempotency_key_required", ""},
		{"not JSON", create, func(h http.Header) { h.Set("Content-Type", "text/plain") }, 400, "invalid_content_type", ""},
		{"no capabilities", `{"currency":"usd","line_items":[{"id":"sku-mug"}]}`, nil, 400, "invalid", "$.capabilities"},
		{"unknown member", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug"}],"gift":true}`, nil, 400, "invalid", "$.gift"},
		{"quantity 0", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug","quantity":0}]}`, nil, 400, "invalid", "$.line_items[0].quantity"},
		{"no items", `{"currency":"usd","capabilities":{},"line_items":[]}`, nil, 400, "invalid", "$.line_items"},
		{"unknown item", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-x"}]}`, nil, 400, "invalid_item", "$.line_items"},
		{"euro", `{"currency":"eur","capabilities":{},"line_items":[{"id":"sku-mug"}]}`, nil, 400, "invalid", ""},
		{"unknown scenario", create, func(h http.Header) { h.Set("X-Fake-Scenario", "chaos"); h.Set("Idempotency-Key", "k-chaos") }, 400, "invalid", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, m := e.do("POST", "/checkout_sessions", tt.body, tt.edit)
			if st != tt.status || acpField(m, "code") != tt.code || (tt.param != "" && acpField(m, "param") != tt.param) {
				t.Fatalf("%d %v", st, m)
			}
		})
	}
	if st, _, m := e.do("GET", "/checkout_sessions/cs_nope", "", nil); st != 404 || acpField(m, "code") != "not_found" {
		t.Fatalf("get: %d %v", st, m)
	}
}

func TestACPIdempotentCreate(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	body := `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug"}]}`
	k := func(h http.Header) { h.Set("Idempotency-Key", "same") }
	st1, _, m1 := e.do("POST", "/checkout_sessions", body, k)
	st2, h2, m2 := e.do("POST", "/checkout_sessions", ` {"line_items":[{"id":"sku-mug"}],"capabilities":{},"currency":"usd"}`, k)
	if st1 != 201 || st2 != 201 || m1["id"] != m2["id"] || h2.Get("Idempotent-Replayed") != "true" || h2.Get("Idempotency-Key") != "same" {
		t.Fatalf("%d %d %v %v %v", st1, st2, m1["id"], m2["id"], h2)
	}
	st3, _, m3 := e.do("POST", "/checkout_sessions", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-book"}]}`, k)
	if st3 != 422 || acpField(m3, "code") != "idempotency_conflict" {
		t.Fatalf("%d %v", st3, m3)
	}
}

func TestACPScenarioHeaderAndUpdate(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	st, _, m := e.do("POST", "/checkout_sessions", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug"}]}`,
		func(h http.Header) { h.Set("X-Fake-Scenario", "requires_escalation") })
	id, _ := m["id"].(string)
	if st != 201 || m["status"] != "requires_escalation" || m["continue_url"] != e.srv.URL+"/continue/"+id {
		t.Fatalf("%d %v", st, m)
	}
	st, _, m = e.do("POST", "/checkout_sessions", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-book"}],`+
		`"buyer":{"email":"b@example.com"},"fulfillment_details":{"name":"B","address":{"name":"B","line_one":"1 St","city":"C","state":"S","country":"US","postal_code":"1"}}}`, nil)
	id, _ = m["id"].(string)
	if st != 201 || acpField(m, "fulfillment_details", "address", "city") != "C" || acpField(m, "buyer", "email") != "b@example.com" {
		t.Fatalf("%d %v", st, m)
	}
	st, _, m = e.do("POST", "/checkout_sessions/"+id, `{"selected_fulfillment_options":[{"type":"shipping","option_id":"express","item_ids":["li_1"]}],`+
		`"discounts":{"codes":["save10","BOGUS"]},"line_items":[{"id":"sku-book","quantity":2}]}`, nil)
	if st != 200 || acpField(m, "selected_fulfillment_options", 0, "option_id") != "express" || acpField(m, "line_items", 0, "quantity") != 2.0 {
		t.Fatalf("%d %v", st, m)
	}
	// 5000 - 500 + 1500 express.
	totals := acpField(m, "totals").([]any)
	if last := totals[len(totals)-1].(map[string]any); last["amount"] != 6000.0 || acpField(m, "messages", 0, "code") != "discount_code_invalid" {
		t.Fatalf("%v %v", totals, m["messages"])
	}
	if st, _, m := e.do("POST", "/checkout_sessions/"+id, `{"selected_fulfillment_options":[{"type":"shipping","option_id":"drone","item_ids":[]}]}`, nil); st != 400 {
		t.Fatalf("unknown option: %d %v", st, m)
	}
}

// TestACPNotReadySessions: the sessions that are not ready say why, or
// (never_ready) say nothing; only an out-of-stock session reports a line
// out of stock.
func TestACPNotReadySessions(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	for _, tc := range []struct {
		sku, code string // code: the error message's ("": none)
		soldOut   bool
	}{
		{"sku-soldout", "out_of_stock", true},
		{"sku-never-ready", "", false},
		{"sku-needs-phone", "missing", false},
	} {
		t.Run(tc.sku, func(t *testing.T) {
			st, _, m := e.do("POST", "/checkout_sessions", `{"currency":"usd","capabilities":{},"line_items":[{"id":"`+tc.sku+`"}]}`, nil)
			msgs, _ := m["messages"].([]any)
			code := ""
			if len(msgs) == 1 {
				code, _ = acpField(m, "messages", 0, "code").(string)
			}
			if st != 201 || m["status"] != "not_ready_for_payment" || len(msgs) > 1 || code != tc.code ||
				(acpField(m, "line_items", 0, "availability_status") == "out_of_stock") != tc.soldOut {
				t.Fatalf("%d %v", st, m)
			}
		})
	}
}

// TestACPEverySession renders a session of every scenario in every state
// it reaches through the client, so that each answer is checked against
// the schemas.
func TestACPEverySession(t *testing.T) {
	e := newACP(t, fakemerchant.Options{SlowDelay: time.Millisecond, ExpiresAfter: time.Minute, HangFor: time.Millisecond})
	c, err := acp.New(acp.Options{BaseURL: e.srv.URL, APIKey: key, HTTPClient: e.hc, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ids []string
	for _, it := range fakemerchant.Catalogue {
		ct, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: it.SKU, Quantity: 2}},
			Discounts: []string{"SAVE10"}, Email: "a@example.com"})
		if err != nil {
			t.Fatalf("%s: %v", it.SKU, err)
		}
		if ct, err = c.Get(ctx, ct.ID); err != nil {
			t.Fatalf("%s: %v", it.SKU, err)
		}
		_, _ = c.Complete(ctx, ct.ID, cart.Payment{Amount: ct.Totals.Total, Currency: "USD", IdempotencyKey: "k-" + it.SKU})
		ids = append(ids, ct.ID)
	}
	for _, id := range ids[:3] {
		_, _ = c.Cancel(ctx, id)
	}
	e.clock.Advance(time.Hour)
	for _, id := range ids {
		if _, err := c.Get(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

func TestACPDelegatePayment(t *testing.T) {
	e := newACP(t, fakemerchant.Options{})
	ex := acptest.Load(t).Examples(t)
	var req map[string]any
	if err := json.Unmarshal(ex["delegate_payment_request"], &req); err != nil {
		t.Fatal(err)
	}
	req["allowance"].(map[string]any)["expires_at"] = "2026-05-01T12:15:00Z"
	body, _ := json.Marshal(req)
	k := func(h http.Header) { h.Set("Idempotency-Key", "dp-1") }
	st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", string(body), k)
	if st != 201 || !strings.HasPrefix(m["id"].(string), "vt_") || acpField(m, "metadata", "idempotency_key") != "dp-1" ||
		acpField(m, "metadata", "campaign") != "q4" {
		t.Fatalf("%d %v", st, m)
	}
	st2, h2, m2 := e.do("POST", "/agentic_commerce/delegate_payment", string(body), k)
	if st2 != 201 || m2["id"] != m["id"] || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", st2, m2)
	}
	// The example's own allowance expired in 2025.
	if st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", string(ex["delegate_payment_request"]), nil); st != 400 || m["code"] != "invalid_card" || m["param"] != "$.allowance" {
		t.Fatalf("expired allowance: %d %v", st, m)
	}
	req["payment_method"].(map[string]any)["number"] = "4242424242424241"
	bad, _ := json.Marshal(req)
	if st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", string(bad), nil); st != 400 || m["param"] != "$.payment_method.number" {
		t.Fatalf("bad number: %d %v", st, m)
	}
	if st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", string(body), func(h http.Header) { h.Del("Idempotency-Key") }); st != 400 || m["code"] != "idempotency_key_required" {
		t.Fatalf("no key: %d %v", st, m)
	}
	if st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", string(body), func(h http.Header) { h.Set("Idempotency-Key", "dp-1"); h.Del("Authorization") }); st != 401 || m != nil {
		t.Fatalf("no bearer: %d %v", st, m)
	}
	if st, _, m := e.do("POST", "/agentic_commerce/delegate_payment", `{"allowance":{}}`, nil); st != 400 || m["code"] != "invalid_card" {
		t.Fatalf("schema: %d %v", st, m)
	}
	// A completion with the example's token (unknown here) is declined.
	if st, _, m = e.do("POST", "/checkout_sessions", `{"currency":"usd","capabilities":{},"line_items":[{"id":"sku-mug"}]}`, nil); st != 201 {
		t.Fatalf("create: %d %v", st, m)
	}
	id := m["id"].(string)
	if st, _, m := e.do("POST", "/checkout_sessions/"+id+"/complete", string(ex["complete_checkout_session_request"]), nil); st != 402 || m["code"] != "payment_token_invalid" {
		t.Fatalf("complete: %d %v", st, m)
	}
	if st, _, m := e.do("POST", "/checkout_sessions/"+id+"/cancel", string(ex["cancel_checkout_session_request"]), nil); st != 200 || m["status"] != "canceled" {
		t.Fatalf("cancel: %d %v", st, m)
	}
	if st, _, m := e.do("POST", "/checkout_sessions/"+id+"/cancel", "", func(h http.Header) { h.Set("Idempotency-Key", "c2") }); st != 405 || m["code"] != "not_cancelable" {
		t.Fatalf("cancel again: %d %v", st, m)
	}
}
