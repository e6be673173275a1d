package x402_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

// paidAttempt asks the fake for path unpaid, signs its offer once, and
// returns what the payer needs to pay it and to ask the chain about it.
func paidAttempt(t *testing.T, p *x402.Payer, fake *fakex402.Server, base, path string, key *evm.Key, nonce [32]byte) (header string) {
	t.Helper()
	ctx := t.Context()
	r, err := p.Fetch(ctx, "GET", base+path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusPaymentRequired {
		t.Fatalf("unpaid: %d", r.Status)
	}
	pr, err := x402.PaymentRequiredFrom(r.Header, r.Body)
	if err != nil || len(pr.Accepts) != 1 {
		t.Fatalf("offers: %+v, %v", pr, err)
	}
	now := time.Now()
	payload, err := x402.SignExactEVM(pr.Accepts[0], &pr.Resource, key, nonce, now.Add(-time.Minute), now.Add(50*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	h, err := x402.EncodePaymentPayload(payload)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestFetchPaid: each of the fake's scenarios, paid once through the
// payer, comes to Paid only when the server said so; otherwise Unknown,
// with the chain's word on whether the money moved, and a resend of the
// same header never moves it twice.
func TestFetchPaid(t *testing.T) {
	tests := []struct {
		scenario  fakex402.Scenario
		want      x402.Outcome
		settled   bool // the chain says the authorization was used
		wantCode  int  // the answer's status, 0 for none
		resendNow bool // resend the same header at once
	}{
		{fakex402.ScenarioPaid, x402.Paid, true, 200, true},
		{fakex402.ScenarioSlow, x402.Paid, true, 200, false},
		{fakex402.ScenarioRefused, x402.Unknown, false, 402, false},
		{fakex402.ScenarioPriceChanged, x402.Unknown, false, 402, false},
		{fakex402.ScenarioSettleThenDrop, x402.Unknown, true, 0, true},
		{fakex402.ScenarioUnknownOutcome, x402.Unknown, true, 500, true},
		{fakex402.ScenarioErrorUnsettled, x402.Unknown, false, 503, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.scenario), func(t *testing.T) {
			instant := func(time.Duration) <-chan time.Time {
				c := make(chan time.Time, 1)
				c <- time.Now()
				return c
			}
			fake := fakex402.New(&fakex402.Options{After: instant})
			srv := httptest.NewServer(fake.Handler())
			defer srv.Close()
			key, err := evm.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			nonce := x402.NonceFromID("int_" + string(tt.scenario))
			p := &x402.Payer{Timeout: 10 * time.Second}
			header := paidAttempt(t, p, fake, srv.URL, "/"+string(tt.scenario), key, nonce)

			res, err := p.FetchPaid(t.Context(), "GET", srv.URL+"/"+string(tt.scenario), nil, nil, header)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want {
				t.Fatalf("outcome %s (%s), want %s", res.Outcome, res.Reason, tt.want)
			}
			switch {
			case tt.wantCode == 0 && res.Response != nil:
				t.Errorf("an answer arrived: %d", res.Response.Status)
			case tt.wantCode != 0 && (res.Response == nil || res.Response.Status != tt.wantCode):
				t.Errorf("answer %+v, want %d", res.Response, tt.wantCode)
			}
			if res.Outcome == x402.Paid && (res.Settlement.Transaction == "" || res.Settlement.Network != fake.Network() || len(res.Response.Body) == 0) {
				t.Errorf("paid without its settlement or body: %+v", res)
			}
			if res.Outcome == x402.Unknown && res.Reason == "" {
				t.Error("unknown without a reason")
			}
			used, err := fake.AuthorizationState(context.Background(), fake.Network(), fake.Asset(), key.Address(), nonce)
			if err != nil || used != tt.settled {
				t.Errorf("chain: used %v (%v), want %v", used, err, tt.settled)
			}
			if tt.resendNow {
				again, err := p.FetchPaid(t.Context(), "GET", srv.URL+"/"+string(tt.scenario), nil, nil, header)
				if err != nil || again.Outcome != x402.Unknown {
					t.Errorf("a resend of a settled authorization: %+v, %v (the fake refuses a used nonce)", again, err)
				}
			}
			n := 0
			for _, s := range fake.Settlements() {
				if s.Authorization.Nonce == nonce {
					n++
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tt.settled]; n != want {
				t.Errorf("%d settlements, want %d", n, want)
			}
		})
	}
}

// TestPayerRefusesAndRelays: a payment header on the unpaid request, a
// paid request without one, a redirect relayed rather than followed, a
// body cut at the cap.
func TestPayerRefusesAndRelays(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		default:
			w.Write(bytes.Repeat([]byte("x"), 100))
		}
	}))
	defer srv.Close()
	p := &x402.Payer{MaxBody: 10}
	h := http.Header{x402.HeaderPaymentSignature: {"abc"}}
	if _, err := p.Fetch(t.Context(), "GET", srv.URL, h, nil); err == nil {
		t.Error("an unpaid request with a payment header was sent")
	}
	if _, err := p.FetchPaid(t.Context(), "GET", srv.URL, nil, nil, ""); err == nil {
		t.Error("a paid request without a payment was sent")
	}
	r, err := p.Fetch(t.Context(), "GET", srv.URL+"/redirect", nil, nil)
	if err != nil || r.Status != http.StatusFound {
		t.Errorf("redirect: %+v, %v", r, err)
	}
	r, err = p.Fetch(t.Context(), "GET", srv.URL+"/big", nil, nil)
	if err != nil || len(r.Body) != 10 || !r.Truncated {
		t.Errorf("cap: %d bytes, truncated %v, %v", len(r.Body), r.Truncated, err)
	}
	// A 2xx without PAYMENT-RESPONSE is not the server's word that it
	// settled.
	res, err := p.FetchPaid(t.Context(), "GET", srv.URL+"/big", nil, nil, "abc")
	if err != nil || res.Outcome != x402.Unknown {
		t.Errorf("2xx without a settlement: %+v, %v", res, err)
	}
}

// TestPayerCapsAnswerHeaders: an answer whose headers are over
// MaxResponseHeaderBytes is no answer: the unpaid request fails with an
// error naming the cap (so nothing is offered, nothing can be signed), a
// paid one is Unknown with that reason. An answer with an x402 header at
// its own cap and more headers beside it still fits.
func TestPayerCapsAnswerHeaders(t *testing.T) {
	var signed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(x402.HeaderPaymentSignature) != "" {
			signed.Add(1)
		}
		pad := 4 << 10 // a line of padding per header
		n := 0
		switch r.URL.Path {
		case "/hostile":
			n = 2 * x402.MaxResponseHeaderBytes / pad // twice the cap
		case "/fits":
			w.Header().Set(x402.HeaderPaymentRequired, strings.Repeat("A", x402.MaxHeaderBytes))
			n = 4 // 16 KiB more
		}
		for i := range n {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", pad))
		}
		w.WriteHeader(http.StatusPaymentRequired)
	}))
	defer srv.Close()
	// A transport allowing net/http's default (10 MiB) is capped all the same.
	p := &x402.Payer{Transport: &http.Transport{MaxResponseHeaderBytes: 10 << 20}, Timeout: 10 * time.Second}
	limit := fmt.Sprint(x402.MaxResponseHeaderBytes)

	if r, err := p.Fetch(t.Context(), "GET", srv.URL+"/hostile", nil, nil); err == nil || !strings.Contains(err.Error(), "headers exceeded") ||
		!strings.Contains(err.Error(), limit) {
		if r != nil {
			t.Errorf("answered %d with %d headers", r.Status, len(r.Header))
		}
		t.Fatalf("unpaid, oversized headers: %v; want an error naming the %s-byte cap", err, limit)
	}
	res, err := p.FetchPaid(t.Context(), "GET", srv.URL+"/hostile", nil, nil, "abc")
	if err != nil || res.Outcome != x402.Unknown || res.Response != nil || !strings.Contains(res.Reason, limit) {
		t.Fatalf("paid, oversized headers: %s %q, answered %v, %v; want Unknown naming the cap", res.Outcome, res.Reason, res.Response != nil, err)
	}
	if n := signed.Load(); n != 1 {
		t.Errorf("%d requests carried a payment, want only the paid one", n)
	}
	r, err := p.Fetch(t.Context(), "GET", srv.URL+"/fits", nil, nil)
	if err != nil || r.Status != http.StatusPaymentRequired || len(r.Header.Get(x402.HeaderPaymentRequired)) != x402.MaxHeaderBytes {
		t.Fatalf("an x402 header at its cap and 16 KiB beside it: %v", err)
	}
}
