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
