package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

var fakeX402Line = regexp.MustCompile(`fake x402 at (http://127\.0\.0\.1:\d+)`)

// TestFakeX402 runs "countersign fake-x402" in-process and pays one of its
// paths with a payload package x402 signs.
func TestFakeX402(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"fake-x402", "--addr", "127.0.0.1:0", "--path", "/report=paid:250",
			"--path", "/gone=unknown-outcome", "--price", "7", "--token-name", "USD Coin"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	}()
	var base string
	for base == "" {
		if m := fakeX402Line.FindStringSubmatch(stdout.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("fake-x402 exited with %d:\n%s", code, stderr.String())
		default:
		}
		// Polling a buffer the command writes once at start-up: real I/O.
		time.Sleep(10 * time.Millisecond)
	}
	out := stdout.String()
	for _, want := range []string{"payTo " + fakex402.DefaultPayTo.String(), "asset " + fakex402.DefaultAsset, "/report", "250", "/gone", "7", "unknown-outcome"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	resp, err := http.Get(base + "/report")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	pr, err := x402.DecodePaymentRequired(resp.Header.Get(x402.HeaderPaymentRequired))
	if err != nil || resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("402: %s %v", resp.Status, err)
	}
	if pr.Accepts[0].Amount != "250" || pr.Resource.URL != base+"/report" {
		t.Fatalf("offer %+v", pr)
	}
	if name, _ := pr.Accepts[0].ExtraString("name"); name != "USD Coin" {
		t.Fatalf("extra.name %q", name)
	}
	key, _ := evm.GenerateKey()
	now := time.Now()
	p, err := x402.SignExactEVM(pr.Accepts[0], &pr.Resource, key, x402.NonceFromID("int_cli"), now.Add(-time.Minute), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := x402.EncodePaymentPayload(p)
	req, _ := http.NewRequest(http.MethodGet, base+"/report", nil)
	req.Header.Set(x402.HeaderPaymentSignature, h)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s, err := x402.DecodeSettlementResponse(resp.Header.Get(x402.HeaderPaymentResponse)); resp.StatusCode != http.StatusOK || err != nil || !s.Success {
		t.Fatalf("paid: %s %+v %v", resp.Status, s, err)
	}
	asset, _ := evm.ParseAddress(fakex402.DefaultAsset)
	used, err := (&fakex402.ChainClient{BaseURL: base}).AuthorizationState(ctx, fakex402.DefaultNetwork, asset, key.Address(), x402.NonceFromID("int_cli"))
	if err != nil || !used {
		t.Fatalf("authorizationState: %v %v", used, err)
	}
}

func TestFakeX402RefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--path", "/a=bogus"},
		{"--path", "a=paid"},
		{"--path", "/a=paid:1.5"},
		{"--price", "0"},
		{"--network", "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp"},
		{"--pay-to", "merchant"},
		{"--addr", "0.0.0.0:0"},
		{"--path", "/a=paid", "--path", "/a=slow"},
	} {
		var stdout, stderr syncBuffer
		if code := run(context.Background(), append([]string{"fake-x402"}, args...), &stdout, &stderr); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}
