package x402_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"sync/atomic"
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
			if tt.afterExpiry == x402.NeverSettled {
				// Unused, but the chain's clock may be behind ours.
				if got, _, _ := res.Resolve(t.Context(), a); got != x402.StillUnknown {
					t.Errorf("final, within the clock skew margin: %s", got)
				}
				c.add(x402.DefaultClockSkew)
			}
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

// countingChain counts the questions asked of a chain reader.
type countingChain struct {
	x402.ChainReader
	asked atomic.Int64
}

func (c *countingChain) AuthorizationState(ctx context.Context, network string, asset, authorizer evm.Address, nonce [32]byte) (bool, error) {
	c.asked.Add(1)
	return c.ChainReader.AuthorizationState(ctx, network, asset, authorizer, nonce)
}

// TestResolveExpiryByTwoClocks: an unused authorization is declared
// expired only when the chain's clock too is past validBefore. No chain
// reader tells the chain's time, so the resolver waits ClockSkew beyond
// validBefore + Finality on its own clock. Each row sets the local clock
// (the resolver's) and the chain's (the fake token's, which executes an
// authorization only before validBefore by its own clock), relative to
// validBefore; the resolver cannot read the chain's. A local clock ahead of the chain's is the danger: the
// first two rows are one moment, at which the chain can still execute
// the authorization; declared expired there (as before this margin), the
// payment would be declined and paid again by a new authorization while
// the stale one lands too.
func TestResolveExpiryByTwoClocks(t *testing.T) {
	const finality = 30 * time.Second
	margin := finality + x402.DefaultClockSkew
	tests := []struct {
		name       string
		local      time.Duration // the resolver's clock - validBefore
		chain      time.Duration // the chain's clock - validBefore
		executedAt time.Duration // nonzero: the chain executed the authorization at this time on its clock (- validBefore)
		skew       time.Duration // Resolver.ClockSkew
		want       x402.Resolution
		chainAsked bool
	}{
		{name: "local past, chain not past", local: finality + time.Second, chain: -30 * time.Second,
			want: x402.StillUnknown, chainAsked: true},
		{name: "local past, chain not past, and the chain executes it", local: finality + time.Second, chain: -30 * time.Second,
			executedAt: -30 * time.Second, want: x402.Settled, chainAsked: true},
		{name: "local past by less than the margin, chain not past", local: margin - time.Second, chain: -time.Second,
			want: x402.StillUnknown, chainAsked: true},
		{name: "local past by less than the margin, chain past", local: margin - time.Second, chain: margin - time.Second,
			want: x402.StillUnknown, chainAsked: true},
		{name: "both past, local ahead by the whole margin", local: margin + time.Second, chain: finality + time.Second,
			want: x402.NeverSettled, chainAsked: true},
		{name: "both past, clocks agree", local: margin + time.Second, chain: margin + time.Second,
			want: x402.NeverSettled, chainAsked: true},
		{name: "both past, used just before validBefore", local: margin + time.Second, chain: margin + time.Second,
			executedAt: -time.Second, want: x402.Settled, chainAsked: true},
		{name: "a wider margin is kept", local: margin + time.Second, chain: margin + time.Second, skew: time.Hour,
			want: x402.StillUnknown, chainAsked: true},
		{name: "a negative margin is the default", local: margin - time.Second, chain: margin - time.Second, skew: -time.Hour,
			want: x402.StillUnknown, chainAsked: true},
		{name: "local not yet final", local: finality - time.Second, chain: finality - time.Second,
			want: x402.StillUnknown},
	}
	validBefore := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: validBefore.Add(tt.executedAt)}
			fake := fakex402.New(&fakex402.Options{Now: c.now})
			key, err := evm.GenerateKey()
			if err != nil {
				t.Fatal(err)
			}
			nonce := x402.NonceFromID("int_" + tt.name)
			if tt.executedAt != 0 {
				req, _ := fake.Requirements("/" + string(fakex402.ScenarioPaid))
				p, err := x402.SignExactEVM(req, nil, key, nonce, validBefore.Add(-10*time.Minute), validBefore)
				if err != nil {
					t.Fatal(err)
				}
				if s := fake.Settle(p, req); !s.Success {
					t.Fatalf("the chain did not execute the authorization at %s: %s", tt.executedAt, s.ErrorReason)
				}
			}
			c.add(tt.chain - tt.executedAt) // the chain's clock now
			chain := &countingChain{ChainReader: fake}
			r := &x402.Resolver{Chain: chain, Finality: finality, ClockSkew: tt.skew,
				Now: func() time.Time { return validBefore.Add(tt.local) }}
			got, res, err := r.Resolve(t.Context(), x402.Attempt{Method: "GET", URL: "http://127.0.0.1:1/x", Payment: "stored",
				Network: fake.Network(), Asset: fake.Asset(), From: key.Address(), Nonce: nonce, ValidBefore: validBefore})
			if err != nil || got != tt.want {
				t.Fatalf("%s (%s), %v; want %s", got, res.Reason, err, tt.want)
			}
			if got == x402.StillUnknown && res.Reason == "" {
				t.Error("still unknown without a reason")
			}
			if asked := chain.asked.Load() > 0; asked != tt.chainAsked {
				t.Errorf("chain asked %v, want %v", asked, tt.chainAsked)
			}
		})
	}
}
