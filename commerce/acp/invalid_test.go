package acp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/acp/acptest"
	"github.com/countersign/countersign/commerce/cart"
)

// stub answers every checkout request with one canned answer, and the PSP
// with a valid token.
func stub(t *testing.T, status int, ctype, body string) *acp.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/agentic_commerce/delegate_payment" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"vt_1","created":"2026-05-01T12:00:00Z","metadata":{}}`))
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	c, err := acp.New(acp.Options{BaseURL: srv.URL, HTTPClient: srv.Client(), MaxBody: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// edit applies fn to the decoded JSON of doc and re-encodes it.
func edit(t *testing.T, doc []byte, fn func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func firstLine(m map[string]any) map[string]any {
	return m["line_items"].([]any)[0].(map[string]any)
}

// TestInvalidResponses: a malformed or partial session is refused whole.
func TestInvalidResponses(t *testing.T) {
	ex := acptest.Load(t).Examples(t)
	base := []byte(ex["get_checkout_session_response"]) // id checkout_session_123
	id := "checkout_session_123"
	tests := []struct {
		name, ctype, body string
	}{
		{"missing totals", "", edit(t, base, func(m map[string]any) { delete(m, "totals") })},
		{"missing capabilities", "", edit(t, base, func(m map[string]any) { delete(m, "capabilities") })},
		{"unknown status", "", edit(t, base, func(m map[string]any) { m["status"] = "ready" })},
		{"unknown member", "", edit(t, base, func(m map[string]any) { m["surprise"] = 1 })},
		{"null currency", "", edit(t, base, func(m map[string]any) { m["currency"] = nil })},
		{"quantity 0", "", edit(t, base, func(m map[string]any) { firstLine(m)["quantity"] = 0 })},
		{"amount as string", "", edit(t, base, func(m map[string]any) {
			m["totals"].([]any)[0].(map[string]any)["amount"] = "300"
		})},
		{"line without item", "", edit(t, base, func(m map[string]any) { delete(firstLine(m), "item") })},
		{"unknown total type", "", edit(t, base, func(m map[string]any) {
			m["totals"].([]any)[0].(map[string]any)["type"] = "shipping"
		})},
		{"message without content_type", "", edit(t, base, func(m map[string]any) {
			m["messages"] = []any{map[string]any{"type": "error", "code": "invalid", "content": "x"}}
		})},
		{"message of unknown type", "", edit(t, base, func(m map[string]any) {
			m["messages"] = []any{map[string]any{"type": "note", "content_type": "plain", "content": "x"}}
		})},
		{"bad expires_at", "", edit(t, base, func(m map[string]any) { m["expires_at"] = "tomorrow" })},
		{"relative continue_url", "", edit(t, base, func(m map[string]any) { m["continue_url"] = "/continue" })},
		{"extensions empty", "", edit(t, base, func(m map[string]any) {
			m["capabilities"].(map[string]any)["extensions"] = []any{}
		})},
		// Beyond the schema: what cannot be paid or shown safely.
		{"no total", "", edit(t, base, func(m map[string]any) {
			ts := m["totals"].([]any)
			m["totals"] = ts[:len(ts)-1]
		})},
		{"two totals", "", edit(t, base, func(m map[string]any) {
			ts := m["totals"].([]any)
			m["totals"] = append(ts, ts[len(ts)-1])
		})},
		{"javascript continue_url", "", edit(t, base, func(m map[string]any) { m["continue_url"] = "javascript:alert(1)" })},
		{"another session", "", edit(t, base, func(m map[string]any) { m["id"] = "checkout_session_999" })},
		// Not JSON, or not all of it.
		{"duplicate member", "", strings.Replace(string(base), `"status":`, `"status": "canceled", "status":`, 1)},
		{"truncated", "", string(base[:len(base)/2])},
		{"trailing data", "", string(base) + " {}"},
		{"empty", "", ""},
		{"array", "", "[]"},
		{"text/plain", "text/plain", string(base)},
		{"too large", "", strings.Replace(string(base), `"id": "checkout_session_123"`,
			`"id": "checkout_session_123", "locale": "`+strings.Repeat("x", 70<<10)+`"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ctype == "" {
				tt.ctype = "application/json"
			}
			c := stub(t, http.StatusOK, tt.ctype, tt.body)
			ct, err := c.Get(t.Context(), id)
			if !errors.Is(err, cart.ErrInvalidResponse) {
				t.Fatalf("get: %v", err)
			}
			if ct.ID != "" || ct.Lines != nil {
				t.Fatalf("half a cart: %+v", ct)
			}
		})
	}
	t.Run("base is valid", func(t *testing.T) {
		if _, err := stub(t, http.StatusOK, "application/json", string(base)).Get(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCompleteAnswers: what each answer to a completion means.
func TestCompleteAnswers(t *testing.T) {
	ex := acptest.Load(t).Examples(t)
	withOrder := []byte(ex["complete_checkout_session_response"]) // checkout_session_123
	declined := []byte(ex["checkout_session_with_payment_declined"])
	p := cart.Payment{Amount: 830, Currency: "USD", IdempotencyKey: "k"}
	tests := []struct {
		name   string
		id     string
		status int
		body   string
		is     []error
	}{
		{"order", "checkout_session_123", 200, string(withOrder), nil},
		{"order of another session", "checkout_session_123", 200, edit(t, withOrder, func(m map[string]any) {
			m["order"].(map[string]any)["checkout_session_id"] = "checkout_session_999"
		}), []error{cart.ErrUnknownOutcome, cart.ErrInvalidResponse}},
		{"completed without order", "checkout_session_123", 200, edit(t, withOrder, func(m map[string]any) { delete(m, "order") }),
			[]error{cart.ErrUnknownOutcome, cart.ErrInvalidResponse}},
		{"malformed", "checkout_session_123", 200, `{"id":`, []error{cart.ErrUnknownOutcome, cart.ErrInvalidResponse}},
		{"session with payment_declined", "checkout_session_pd_001", 200, string(declined), []error{cart.ErrDeclined}},
		{"402", "cs_1", 402, `{"type":"invalid_request","code":"payment_declined","message":"declined"}`, []error{cart.ErrDeclined}},
		{"requires_3ds", "cs_1", 400, string(ex["error_400_requires_3ds"]), []error{cart.ErrNotReady}},
		{"idempotency conflict", "cs_1", 422, string(ex["error_422_idempotency_conflict"]), []error{cart.ErrRejected}},
		{"in flight", "cs_1", 409, string(ex["error_409_idempotency_in_flight"]), []error{cart.ErrUnknownOutcome}},
		{"4xx not an Error", "cs_1", 400, `<html>`, []error{cart.ErrRejected}},
		{"404", "cs_1", 404, `{"type":"invalid_request","code":"not_found","message":"no"}`, []error{cart.ErrNotFound}},
		{"500", "cs_1", 500, `{"type":"processing_error","code":"x","message":"boom"}`, []error{cart.ErrUnknownOutcome}},
		{"503 html", "cs_1", 503, `<html>`, []error{cart.ErrUnknownOutcome}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := stub(t, tt.status, "application/json", tt.body)
			o, err := c.Complete(t.Context(), tt.id, p)
			if tt.is == nil {
				if err != nil || o.ID != "ord_abc123" || o.Total != 830 || o.Currency != "USD" {
					t.Fatalf("%+v, %v", o, err)
				}
				return
			}
			for _, want := range tt.is {
				if !errors.Is(err, want) {
					t.Fatalf("%v does not match %v", err, want)
				}
			}
			if o.ID != "" {
				t.Fatalf("half an order: %+v", o)
			}
		})
	}
}
