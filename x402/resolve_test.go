package x402_test

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestResolve: an attempt whose answer was lost is resent unchanged until
// its authorization expires, then decided by the chain; it settles at
// most once, and an expired unused authorization is known unpaid.
func TestResolve(t *testing.T) {
	tests := []struct {
		name         string
		scenario     fakex402.Scenario
		replay       bool // the server answers a settled resend with the resource
		beforeExpiry x402.Resolution
		afterExpiry  x402.Resolution
		delivered    bool
	}{
		{"settled then dropped, server refuses the resend", fakex402.ScenarioSettleThenDrop, false, x402.StillUnknown, x402.Settled, false},
		{"settled then dropped, server replays", fakex402.ScenarioSettleThenDrop, true, x402.Settled, x402.Settled, true},
		{"settled then 500", fakex402.ScenarioUnknownOutcome, false, x402.StillUnknown, x402.Settled, false},
		{"503 unsettled", fakex402.ScenarioErrorUnsettled, false, x402.StillUnknown, x402.NeverSettled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Now().Truncate(time.Second)}
			fake := fakex402.New(&fakex402.Options{Now: c.now, ReplaySettled: tt.replay})
			srv := httptest.NewServer(fake.Handler())
			defer srv.Close()
			key, err := evm.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			p := &x402.Payer{Timeout: 10 * time.Second}
			url := srv.URL + "/" + string(tt.scenario)
			r, err := p.Fetch(t.Context(), "GET", url, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := x402.PaymentRequiredFrom(r.Header, r.Body)
			if err != nil {
				t.Fatal(err)
			}
			nonce := x402.NonceFromID("int_resolve")
			validBefore := c.now().Add(50 * time.Second)
			payload, err := x402.SignExactEVM(pr.Accepts[0], &pr.Resource, key, nonce, c.now().Add(-time.Minute), validBefore)
			if err != nil {
				t.Fatal(err)
			}
			header, err := x402.EncodePaymentPayload(payload)
			if err != nil {
				t.Fatal(err)
			}
			first, err := p.FetchPaid(t.Context(), "GET", url, nil, nil, header)
			if err != nil || first.Outcome != x402.Unknown {
				t.Fatalf("first attempt: %+v, %v", first, err)
			}
			a := x402.Attempt{Method: "GET", URL: url, Payment: header, Network: fake.Network(), Asset: fake.Asset(),
				From: key.Address(), Nonce: nonce, ValidBefore: validBefore}
			res := &x402.Resolver{Payer: p, Chain: fake, Finality: 30 * time.Second, Now: c.now}

			got, pr2, err := res.Resolve(t.Context(), a)
			if err != nil || got != tt.beforeExpiry {
				t.Fatalf("before expiry: %s (%s), %v; want %s", got, pr2.Reason, err, tt.beforeExpiry)
			}
			if got == x402.Settled && (pr2.Response == nil) != !tt.delivered {
				t.Errorf("delivered %v, want %v", pr2.Response != nil, tt.delivered)
			}
			c.add(55 * time.Second) // expired, not yet final
			if got, _, _ := res.Resolve(t.Context(), a); got != x402.StillUnknown {
				t.Errorf("expired but not final: %s", got)
			}
			c.add(30 * time.Second)
			if got, _, _ := res.Resolve(t.Context(), a); got != tt.afterExpiry {
				t.Errorf("after expiry: %s, want %s", got, tt.afterExpiry)
			}
			// No chain reader: a person must look.
			blind := *res
			blind.Chain = nil
			if got, r, _ := blind.Resolve(t.Context(), a); got != x402.StillUnknown || r.Reason == "" {
				t.Errorf("without a chain reader: %s %q", got, r.Reason)
			}
			want := map[bool]int{true: 1, false: 0}[tt.afterExpiry == x402.Settled]
			if n := len(fake.Settlements()); n != want {
				t.Errorf("%d settlements, want %d", n, want)
			}
		})
	}
}
