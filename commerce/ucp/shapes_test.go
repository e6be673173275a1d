package ucp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/commerce/ucp/ucptest"
)

// passThrough sits in front of the fake so that checkExchanges validates
// the requests only: the credential-handler profile is outside the schema
// on purpose (a handler version "1.0").
func passThrough(h http.Handler) http.Handler { return h }

// TestCredentialHandlerShapes: a merchant whose handlers take a token
// credential at complete (no tokenization endpoint) and that declares a
// handler with an undated version it never uses, and sessions that never
// report they are ready.
func TestCredentialHandlerShapes(t *testing.T) {
	bothVersions(t, func(t *testing.T, version string) {
		e := newEnv(t, fakemerchant.Options{UCPPayment: fakemerchant.UCPPaymentCredential}, passThrough, version)

		// The profile is outside the schema, in a part the client never uses.
		resp, err := e.client().Get(e.base + "/.well-known/ucp")
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := ucptest.New(t).Profile(t, version, raw); err == nil {
			t.Fatalf("the schema accepts the profile; the test needs one it refuses:\n%s", raw)
		}
		bare := newClient(t, e, nil)
		ig := bare.Profile().Ignored
		if len(ig) != 1 || !strings.Contains(ig[0], "version") {
			t.Fatalf("Ignored = %q, want the unused handler's version", ig)
		}

		for _, tc := range []struct {
			name  string
			sku   string
			creds []ucp.PaymentCredential
			want  error // nil: an order
		}{
			{"credential by id", "sku-mug", []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletID, Token: fakemerchant.UCPWalletToken}}, nil},
			{"credential by name", "sku-book", []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletName, Token: fakemerchant.UCPWalletToken, Brand: "visa", LastDigits: "4242"}}, nil},
			{"declined credential", "sku-mug", []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletID, Token: fakemerchant.UCPWalletDeclineToken}}, cart.ErrDeclined},
			{"no credential held", "sku-mug", nil, cart.ErrRejected},
			{"credential only for the unused handler", "sku-mug", []ucp.PaymentCredential{{Handler: "other", Token: "t"}}, cart.ErrRejected},
			{"never ready", "sku-never-ready", []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletID, Token: fakemerchant.UCPWalletToken}}, cart.ErrNotReady},
		} {
			t.Run(tc.name, func(t *testing.T) {
				c := newClient(t, e, func(o *ucp.Options) { o.PaymentCredentials = tc.creds })
				k := create(t, c, tc.sku, 1)
				if tc.sku == "sku-never-ready" && (k.Status != cart.StatusIncomplete || len(k.Messages) != 0) {
					t.Fatalf("never-ready cart: %s %+v", k.Status, k.Messages)
				}
				o, err := c.Complete(t.Context(), k.ID, pay(k, "intent-"+tc.name))
				if tc.want != nil {
					if !errors.Is(err, tc.want) {
						t.Fatalf("Complete: %v, want %v", err, tc.want)
					}
					if after, err := c.Get(t.Context(), k.ID); err != nil || after.Status == cart.StatusCompleted {
						t.Fatalf("after a refused completion the cart is %s (%v): no order may exist", after.Status, err)
					}
					return
				}
				if err != nil || o.ID == "" || o.Total != k.Totals.Total {
					t.Fatalf("Complete: %+v, %v", o, err)
				}
				// A retry under the same key hands over the same body and
				// gets the same order (what reconciliation relies on).
				again, err := c.Complete(t.Context(), k.ID, pay(k, "intent-"+tc.name))
				if err != nil || again.ID != o.ID {
					t.Fatalf("retry: %+v, %v; want order %s", again, err, o.ID)
				}
			})
		}
	})
}

// TestCredentialsChecked: a credential needs a handler and a token, one
// per handler.
func TestCredentialsChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		creds []ucp.PaymentCredential
		ok    bool
	}{
		{"none", nil, true},
		{"one", []ucp.PaymentCredential{{Handler: "h", Token: "t"}}, true},
		{"no handler", []ucp.PaymentCredential{{Token: "t"}}, false},
		{"no token", []ucp.PaymentCredential{{Handler: "h"}}, false},
		{"twice", []ucp.PaymentCredential{{Handler: "h", Token: "t"}, {Handler: "h", Token: "u"}}, false},
	} {
		if err := ucp.CheckPaymentCredentials(tc.creds); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestReadyWithoutErrors: a merchant whose sessions never report
// ready_for_complete (sku-never-ready: incomplete, no message, and it
// completes when asked, as the public sample merchant does). By default
// such a session is not ready and Complete sends nothing; with
// Options.ReadyWithoutErrors it is ready (its raw status still
// incomplete) and completes, at exactly its total. An incomplete session
// with an error message (missing information, out of stock) and the other
// statuses are unchanged by the option. Over both kinds of payment
// handler.
func TestReadyWithoutErrors(t *testing.T) {
	bothVersions(t, func(t *testing.T, version string) {
		for name, payment := range map[string]fakemerchant.UCPPayment{"tokenizer": fakemerchant.UCPPaymentTokenizer, "credential": fakemerchant.UCPPaymentCredential} {
			t.Run(name, func(t *testing.T) {
				var wrap func(http.Handler) http.Handler
				if payment == fakemerchant.UCPPaymentCredential {
					wrap = passThrough // the credential profile is outside the schema
				}
				e := newEnv(t, fakemerchant.Options{UCPPayment: payment}, wrap, version)
				creds := []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletID, Token: fakemerchant.UCPWalletToken}}
				for _, tc := range []struct {
					name    string
					sku     string
					option  bool
					status  cart.Status // of the cart, as created and re-read
					raw     string
					overpay int64 // added to the payment's amount
					want    error // nil: an order
				}{
					{"never ready, strict", "sku-never-ready", false, cart.StatusIncomplete, "incomplete", 0, cart.ErrNotReady},
					{"never ready, ready without errors", "sku-never-ready", true, cart.StatusReady, "incomplete", 0, nil},
					{"never ready, another amount", "sku-never-ready", true, cart.StatusReady, "incomplete", 1, ucp.ErrAmountMismatch},
					{"missing information", "sku-needs-phone", true, cart.StatusIncomplete, "incomplete", 0, cart.ErrNotReady},
					{"out of stock", "sku-soldout", true, cart.StatusIncomplete, "incomplete", 0, cart.ErrNotReady},
					{"escalation", "sku-age", true, cart.StatusEscalation, "requires_escalation", 0, cart.ErrNotReady},
					{"ready", "sku-book", true, cart.StatusReady, "ready_for_complete", 0, nil},
				} {
					t.Run(tc.name, func(t *testing.T) {
						c := newClient(t, e, func(o *ucp.Options) {
							o.ReadyWithoutErrors = tc.option
							if payment == fakemerchant.UCPPaymentCredential {
								o.PaymentCredentials = creds
							}
						})
						if c.ReadyWithoutErrors() != tc.option {
							t.Fatalf("ReadyWithoutErrors() = %v", c.ReadyWithoutErrors())
						}
						k := create(t, c, tc.sku, 1)
						again, err := c.Get(t.Context(), k.ID)
						if err != nil {
							t.Fatal(err)
						}
						for _, got := range []cart.Cart{k, again} {
							if got.Status != tc.status || got.RawStatus != tc.raw {
								t.Fatalf("cart %s (%s), want %s (%s); messages %+v", got.Status, got.RawStatus, tc.status, tc.raw, got.Messages)
							}
						}
						p := pay(k, "intent-"+tc.name)
						p.Amount += tc.overpay
						o, err := c.Complete(t.Context(), k.ID, p)
						after, gerr := c.Get(t.Context(), k.ID)
						if gerr != nil {
							t.Fatal(gerr)
						}
						if tc.want != nil {
							if !errors.Is(err, tc.want) {
								t.Fatalf("Complete: %v, want %v", err, tc.want)
							}
							if after.Status == cart.StatusCompleted || completions(e, k.ID) != 0 {
								t.Fatalf("a refused completion was sent (%d) or placed an order (%s)", completions(e, k.ID), after.Status)
							}
							return
						}
						if err != nil || o.ID == "" || o.Total != k.Totals.Total || after.Status != cart.StatusCompleted {
							t.Fatalf("Complete: %+v, %v; cart after: %s", o, err, after.Status)
						}
						if retry, err := c.Complete(t.Context(), k.ID, pay(k, "intent-"+tc.name)); err != nil || retry.ID != o.ID {
							t.Fatalf("retry: %+v, %v; want order %s", retry, err, o.ID)
						}
					})
				}
			})
		}
	})
}

// completions counts the completion requests sent for session id.
func completions(e *env, id string) int {
	e.rec.mu.Lock()
	defer e.rec.mu.Unlock()
	n := 0
	for _, x := range e.rec.ex {
		if strings.HasSuffix(x.path, "/checkout-sessions/"+id+"/complete") {
			n++
		}
	}
	return n
}
