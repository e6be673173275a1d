package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

const fakeX402Synopsis = `fake-x402 [--addr 127.0.0.1:8402] [--price UNITS] [--path /p=SCENARIO[:UNITS]]... [flags]

Runs a fake x402 (version 2) resource server and facilitator for tests and
demos. Each path is priced in the asset's base units and answers 402 with
PAYMENT-REQUIRED (scheme exact, EIP-3009); a PAYMENT-SIGNATURE is verified
for real (EIP-712 signature, amount, payTo, time window, nonce unused) and
"settled" on an in-memory chain, once per (payer, nonce): nothing touches a
real chain. Without --path, one path per scenario: /paid, /refused,
/price-changed, /settle-then-drop, /slow, /unknown-outcome and
/error-unsettled. Also served: POST /facilitator/verify and /settle, GET
/facilitator/supported, and GET /chain/authorization-state?network=&asset=
&authorizer=&nonce= (the token's authorizationState). Loopback only.`

// pathFlags collects --path /p=scenario[:units].
type pathFlags []fakex402.Resource

func (p *pathFlags) String() string { return "" }

func (p *pathFlags) Set(v string) error {
	path, rest, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(path, "/") {
		return fmt.Errorf("%q: want /path=scenario[:units]", v)
	}
	sc, units, _ := strings.Cut(rest, ":")
	if units != "" {
		if _, err := x402.ParseUint256(units); err != nil {
			return fmt.Errorf("%q: %v", v, err)
		}
	}
	known := false
	for _, s := range fakex402.Scenarios {
		known = known || string(s) == sc
	}
	if !known {
		return fmt.Errorf("%q: unknown scenario %q (want one of %v)", v, sc, fakex402.Scenarios)
	}
	*p = append(*p, fakex402.Resource{Path: path, Scenario: fakex402.Scenario(sc), Amount: units})
	return nil
}

func cmdFakeX402(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("fake-x402", fakeX402Synopsis, stderr)
	addr := fs.String("addr", "127.0.0.1:8402", "`host:port` to listen on (loopback)")
	price := fs.String("price", fakex402.DefaultAmount, "price of each path without its own, in the asset's base `units`")
	payTo := fs.String("pay-to", fakex402.DefaultPayTo.String(), "the recipient `address` offered")
	network := fs.String("network", fakex402.DefaultNetwork, "CAIP-2 `network` offered")
	asset := fs.String("asset", fakex402.DefaultAsset, "the token contract `address` offered")
	tokenName := fs.String("token-name", fakex402.DefaultTokenName, "the token's EIP-712 domain `name` (extra.name)")
	tokenVersion := fs.String("token-version", fakex402.DefaultTokenVersion, "the token's EIP-712 domain `version` (extra.version)")
	maxTimeout := fs.Int64("max-timeout", fakex402.DefaultMaxTimeout, "maxTimeoutSeconds offered")
	slowDelay := fs.Duration("slow-delay", fakex402.DefaultSlowDelay, "how long the slow scenario waits")
	replay := fs.Bool("replay-settled", false, "answer a resent, already settled payment 200 again instead of refusing its used nonce")
	var paths pathFlags
	fs.Var(&paths, "path", "a priced `/path=scenario[:units]` (repeatable; replaces the default paths)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if _, err := x402.ParseUint256(*price); err != nil || *price == "0" {
		return fmt.Errorf("--price %q: want a positive decimal integer of base units", *price)
	}
	if _, err := x402.ChainID(*network); err != nil {
		return fmt.Errorf("--network: %v", err)
	}
	pay, err := evm.ParseAddress(*payTo)
	if err != nil {
		return fmt.Errorf("--pay-to: %v", err)
	}
	token, err := evm.ParseAddress(*asset)
	if err != nil {
		return fmt.Errorf("--asset: %v", err)
	}
	if *maxTimeout < 1 {
		return fmt.Errorf("--max-timeout %d: want at least 1", *maxTimeout)
	}
	resources := []fakex402.Resource(paths)
	if len(resources) == 0 {
		resources = fakex402.DefaultResources()
	}
	seen := map[string]bool{}
	for i := range resources {
		if seen[resources[i].Path] {
			return fmt.Errorf("--path %s given twice", resources[i].Path)
		}
		seen[resources[i].Path] = true
		if resources[i].Amount == "" {
			resources[i].Amount = *price
		}
	}
	ln, err := listenLoopback("addr", *addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	fake := fakex402.New(&fakex402.Options{Network: *network, Asset: token, PayTo: pay, TokenName: *tokenName,
		TokenVersion: *tokenVersion, MaxTimeoutSeconds: *maxTimeout, Resources: resources, BaseURL: base,
		SlowDelay: *slowDelay, ReplaySettled: *replay})
	fmt.Fprintf(stdout, "fake x402 at %s\n", base)
	fmt.Fprintf(stdout, "  network %s  asset %s (%s, version %s)  payTo %s\n", *network, token, *tokenName, *tokenVersion, pay)
	for _, r := range resources {
		fmt.Fprintf(stdout, "  %-22s %10s  %s\n", r.Path, r.Amount, r.Scenario)
	}
	fmt.Fprintf(stdout, "  chain reader: %s/chain/authorization-state\n", base)
	srv := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second}
	return serveUntil(ctx, srv, ln)
}
