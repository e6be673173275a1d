package ucp_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/commerce/ucp/ucptest"
)

// tamper rewrites the fake's answers to one path suffix with mutate (on
// the parsed body) or raw (on the bytes).
type tamper struct {
	mu     sync.Mutex
	suffix string
	mutate func(m map[string]any)
	raw    func(b []byte) []byte
	seen   [][]byte
}

func (tp *tamper) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		suffix, mutate, raw := tp.suffix, tp.mutate, tp.raw
		tp.mu.Unlock()
		if suffix == "" || !strings.HasSuffix(r.URL.Path, suffix) || (suffix != "/complete" && r.Method != http.MethodGet) {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if mutate != nil {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err == nil {
				mutate(m)
				body, _ = json.Marshal(m)
			}
		}
		if raw != nil {
			body = raw(body)
		}
		tp.mu.Lock()
		tp.seen = append(tp.seen, body)
		tp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

func del(path ...string) func(map[string]any) {
	return func(m map[string]any) {
		for _, p := range path[:len(path)-1] {
			m = dig(m, p)
		}
		delete(m, path[len(path)-1])
	}
}

func set(v any, path ...string) func(map[string]any) {
	return func(m map[string]any) {
		for _, p := range path[:len(path)-1] {
			m = dig(m, p)
		}
		m[path[len(path)-1]] = v
	}
}

// dig follows a key, or the first element of an array under it.
func dig(m map[string]any, k string) map[string]any {
	switch x := m[k].(type) {
	case map[string]any:
		return x
	case []any:
		return x[0].(map[string]any)
	}
	panic("no " + k)
}

func TestMalformedResponses(t *testing.T) {
	type mut struct {
		name   string
		mutate func(map[string]any)
		raw    func([]byte) []byte
	}
	common := []mut{
		{name: "not JSON", raw: func([]byte) []byte { return []byte("<html>oops</html>") }},
		{name: "trailing data", raw: func(b []byte) []byte { return append(b, []byte(`{}`)...) }},
		{name: "empty object", raw: func([]byte) []byte { return []byte(`{}`) }},
		{name: "array", raw: func([]byte) []byte { return []byte(`[]`) }},
		{name: "no id", mutate: del("id")},
		{name: "no status", mutate: del("status")},
		{name: "unknown status", mutate: set("paid", "status")},
		{name: "no currency", mutate: del("currency")},
		{name: "no line_items", mutate: del("line_items")},
		{name: "no totals", mutate: del("totals")},
		{name: "no links", mutate: del("links")},
		{name: "no ucp", mutate: del("ucp")},
		{name: "ucp version malformed", mutate: set("v1", "ucp", "version")},
		{name: "quantity zero", mutate: set(0, "line_items", "quantity")},
		{name: "quantity fractional", mutate: set(1.5, "line_items", "quantity")},
		{name: "price as string", mutate: set("1200", "line_items", "item", "price")},
		{name: "negative price", mutate: set(-1, "line_items", "item", "price")},
		{name: "item without title", mutate: del("line_items", "item", "title")},
		{name: "total amount missing", mutate: del("totals", "amount")},
		{name: "link without url", mutate: del("links", "url")},
		{name: "message error without severity", mutate: set([]any{map[string]any{"type": "error", "code": "x", "content": "y"}}, "messages")},
		{name: "message of unknown type", mutate: set([]any{map[string]any{"type": "note", "content": "y"}}, "messages")},
		{name: "message without content", mutate: set([]any{map[string]any{"type": "info"}}, "messages")},
		{name: "order without permalink", mutate: set(map[string]any{"id": "ord_1"}, "order")},
		{name: "buyer email a number", mutate: set(map[string]any{"email": 5}, "buyer")},
		{name: "status null", mutate: set(nil, "status")},
	}
	v0111 := []mut{
		{name: "no payment", mutate: del("payment")},
		{name: "payment without handlers", mutate: set(map[string]any{}, "payment")},
		{name: "handler without config", mutate: del("payment", "handlers", "config")},
		{name: "negative discount total", mutate: set(-5, "totals", "amount")},
		{name: "unknown total type", mutate: set("surcharge", "totals", "type")},
		{name: "ucp without capabilities", mutate: del("ucp", "capabilities")},
		{name: "capability name not reverse-domain", mutate: set("Checkout", "ucp", "capabilities", "name")},
		{name: "unrecoverable severity (2026-04-08 only)", mutate: set([]any{map[string]any{"type": "error", "code": "x", "content": "y", "severity": "unrecoverable"}}, "messages")},
	}
	v0408 := []mut{
		{name: "ucp without payment_handlers", mutate: del("ucp", "payment_handlers")},
		{name: "two totals", mutate: func(m map[string]any) {
			m["totals"] = append(m["totals"].([]any), map[string]any{"type": "total", "amount": 1})
		}},
		{name: "no subtotal", mutate: func(m map[string]any) { m["totals"] = m["totals"].([]any)[1:] }},
		{name: "positive discount", mutate: func(m map[string]any) {
			m["totals"] = append(m["totals"].([]any), map[string]any{"type": "discount", "amount": 5})
		}},
		{name: "custom total without display_text", mutate: func(m map[string]any) {
			m["totals"] = append(m["totals"].([]any), map[string]any{"type": "surcharge", "amount": 5})
		}},
		{name: "handler without id", mutate: func(m map[string]any) {
			delete(dig(m, "ucp")["payment_handlers"].(map[string]any)[fakemerchant.UCPTokenizerName].([]any)[0].(map[string]any), "id")
		}},
		{name: "capability key not reverse-domain", mutate: func(m map[string]any) {
			dig(m, "ucp")["capabilities"].(map[string]any)["Checkout"] = []any{map[string]any{"version": "2026-04-08"}}
		}},
		{name: "error response with a session member", raw: func([]byte) []byte {
			return []byte(`{"ucp":{"version":"2026-04-08","status":"error"},"messages":[{"type":"error","code":"x","content":"y","severity":"unrecoverable"}],"id":"cs_1"}`)
		}},
		{name: "error response without messages", raw: func([]byte) []byte {
			return []byte(`{"ucp":{"version":"2026-04-08","status":"error"},"messages":[]}`)
		}},
	}
	for _, version := range ucp.Versions() {
		t.Run(version, func(t *testing.T) {
			tp := &tamper{}
			e := newEnv(t, fakemerchant.Options{}, tp.wrap, version)
			c := newClient(t, e, nil)
			sch := ucptest.New(t)
			muts := append([]mut{}, common...)
			if version == ucp.V20260111 {
				muts = append(muts, v0111...)
			} else {
				muts = append(muts, v0408...)
			}
			for _, m := range muts {
				t.Run(m.name, func(t *testing.T) {
					k := create(t, c, "sku-mug", 1)
					tp.mu.Lock()
					tp.suffix, tp.mutate, tp.raw, tp.seen = "/"+k.ID, m.mutate, m.raw, nil
					tp.mu.Unlock()
					defer func() { tp.mu.Lock(); tp.suffix = ""; tp.mu.Unlock() }()
					got, err := c.Get(t.Context(), k.ID)
					if !errors.Is(err, cart.ErrInvalidResponse) {
						t.Fatalf("Get = %+v, %v; want ErrInvalidResponse", got, err)
					}
					// The independent validator agrees the answer is invalid.
					for _, b := range tp.seen {
						if sch.Response(t, version, ucptest.Get, b) == nil {
							t.Errorf("the schema accepts the tampered answer:\n%s", ucptest.Pretty(b))
						}
					}
				})
			}
			t.Run("complete answer invalid", func(t *testing.T) {
				k := create(t, c, "sku-mug", 1)
				tp.mu.Lock()
				tp.suffix, tp.mutate, tp.raw = "/complete", del("id"), nil
				tp.mu.Unlock()
				defer func() { tp.mu.Lock(); tp.suffix = ""; tp.mu.Unlock() }()
				_, err := c.Complete(t.Context(), k.ID, pay(k, "intent-bad"))
				if !errors.Is(err, cart.ErrInvalidResponse) || !errors.Is(err, cart.ErrUnknownOutcome) {
					t.Fatalf("Complete: %v, want ErrInvalidResponse and ErrUnknownOutcome", err)
				}
			})
			// A well-formed answer about another session (a signed answer
			// replayed from elsewhere): valid by the schema, refused here.
			t.Run("answer about another session", func(t *testing.T) {
				k := create(t, c, "sku-mug", 1)
				other := create(t, c, "sku-book", 1)
				for _, suffix := range []string{"/" + k.ID, "/complete"} {
					tp.mu.Lock()
					tp.suffix, tp.mutate, tp.raw = suffix, set(other.ID, "id"), nil
					tp.mu.Unlock()
					if suffix == "/complete" {
						_, err := c.Complete(t.Context(), k.ID, pay(k, "intent-other"))
						if !errors.Is(err, cart.ErrInvalidResponse) || !errors.Is(err, cart.ErrUnknownOutcome) {
							t.Errorf("Complete: %v, want ErrInvalidResponse and ErrUnknownOutcome", err)
						}
					} else if g, err := c.Get(t.Context(), k.ID); !errors.Is(err, cart.ErrInvalidResponse) {
						t.Errorf("Get = %+v, %v; want ErrInvalidResponse", g, err)
					}
				}
				tp.mu.Lock()
				tp.suffix = ""
				tp.mu.Unlock()
			})
			t.Run("oversized", func(t *testing.T) {
				small := newClient(t, e, func(o *ucp.Options) { o.MaxBody = 64 << 10 })
				k := create(t, small, "sku-mug", 1)
				tp.mu.Lock()
				tp.suffix, tp.mutate, tp.raw = "/"+k.ID, set(strings.Repeat("x", 70<<10), "padding"), nil
				tp.mu.Unlock()
				defer func() { tp.mu.Lock(); tp.suffix = ""; tp.mu.Unlock() }()
				if _, err := small.Get(t.Context(), k.ID); !errors.Is(err, cart.ErrInvalidResponse) {
					t.Fatalf("Get: %v, want ErrInvalidResponse", err)
				}
			})
			t.Run("case-folded duplicate key is not used", func(t *testing.T) {
				k := create(t, c, "sku-mug", 1)
				tp.mu.Lock()
				tp.suffix, tp.mutate, tp.raw = "/"+k.ID, set("completed", "STATUS"), nil
				tp.mu.Unlock()
				defer func() { tp.mu.Lock(); tp.suffix = ""; tp.mu.Unlock() }()
				g, err := c.Get(t.Context(), k.ID)
				if err != nil || g.Status != cart.StatusReady {
					t.Fatalf("Get = %+v, %v; want ready (STATUS ignored)", g, err)
				}
			})
		})
	}
}
