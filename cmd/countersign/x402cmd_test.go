package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
)

// TestSandboxX402 pays the sandbox's fake x402 server end to end over
// HTTP, as the README shows: the CLI signs the fetch, the server pays
// one cent in USDC through the gate; the premium path waits for an
// operator, and the same command after the approval answers the resource.
func TestSandboxX402(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	sandbox := filepath.Join(dir, "sandbox")
	resource := strings.TrimSpace(readFile(t, filepath.Join(sandbox, x402URLFile)))
	fetch := func(extra ...string) (int, map[string]any, string) {
		args := append([]string{"x402", "fetch", "--url", base, "--agent-key", filepath.Join(sandbox, "agent.jwk.json"),
			"--credential", filepath.Join(sandbox, "agent-credential.txt"), "--mandate", filepath.Join(sandbox, "mandate.jws")}, extra...)
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		text := out.String()
		var body map[string]any
		if i := strings.Index(text, "{"); i >= 0 {
			_ = json.Unmarshal([]byte(text[i:]), &body)
		}
		return code, body, text + errOut.String()
	}
	bodyOut := filepath.Join(dir, "body.json")
	code, f, out := fetch("--resource", resource+"/paid", "--max-amount", "5", "--body-out", bodyOut)
	if code != 0 || !strings.HasPrefix(out, "200 OK") || f["paid"] != true {
		t.Fatalf("paid: exit %d\n%s", code, out)
	}
	if b, _ := os.ReadFile(bodyOut); !strings.Contains(string(b), "/paid") {
		t.Errorf("body %q", b)
	}
	receipt, _ := f["receipt"].(map[string]any)
	payment, _ := f["payment"].(map[string]any)
	if receipt["rail"] != "x402" || receipt["reference"] != payment["transaction"] || payment["transaction"] == "" {
		t.Errorf("receipt %v payment %v", receipt, payment)
	}
	// Over the signed maximum: refused with the check, nothing signed.
	code, p, out := fetch("--resource", resource+"/premium", "--max-amount", "100")
	refusals, _ := p["refusals"].([]any)
	if code == 0 || p["code"] != "x402.no_offer" || len(refusals) != 1 {
		t.Fatalf("over the maximum: exit %d\n%s", code, out)
	}
	// Above the mandate's threshold: held; approved; the same command
	// answers the resource.
	code, h, out := fetch("--resource", resource+"/premium", "--max-amount", "20000", "--idempotency-key", "premium-1")
	if code != 0 || !strings.HasPrefix(out, "202 Accepted") {
		t.Fatalf("held: exit %d\n%s", code, out)
	}
	var opOut, opErr bytes.Buffer
	if c := run(context.Background(), []string{"operator", "approve", "--url", base, "--key", filepath.Join(sandbox, "operator.jwk.json"),
		"--intent", h["intentId"].(string), "--ack", "--rationale", "the quarterly report needs it"}, &opOut, &opErr); c != 0 {
		t.Fatalf("approve: %s%s", opOut.String(), opErr.String())
	}
	code, f, out = fetch("--resource", resource+"/premium", "--max-amount", "20000", "--idempotency-key", "premium-1")
	if code != 0 || f["paid"] != true || f["intentId"] != h["intentId"] {
		t.Fatalf("after approval: exit %d\n%s", code, out)
	}
	// The record holds the authorizations and the payments.
	cred := strings.TrimSpace(readFile(t, filepath.Join(sandbox, "agent-credential.txt")))
	_, body := get(t, base+"/audit?limit=100", "Authorization", "Bearer "+cred)
	for _, want := range []string{`"type":"x402.authorization"`, `"type":"x402.paid"`, `"type":"x402.no_offer"`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the record lacks %s", want)
		}
	}
	// The wallet key is a secret: mode 0600, and nowhere in the record.
	key := filepath.Join(dir, "keys", x402WalletFile)
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("wallet key %v %v", fi, err)
	}
	secret := strings.TrimPrefix(strings.TrimSpace(readFile(t, key)), "0x")
	if bytes.Contains(bytes.ToLower(body), []byte(strings.ToLower(secret))) {
		t.Fatal("the wallet key is in the record")
	}
}

func TestLoadWalletRefusesOpenFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.key")
	if err := os.WriteFile(path, []byte("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWallet(dir, path, true); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("mode 0644: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := loadWallet(dir, path, true)
	if err != nil || k.Address().String() != "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" {
		t.Fatalf("%v %v", k, err)
	}
	if err := os.WriteFile(path, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadWallet(dir, path, true); err == nil || strings.Contains(err.Error(), "not a key\"") {
		t.Fatalf("bad key: %v", err)
	}
	if k, err := loadWallet(dir, "", true); k != nil || err != nil {
		t.Fatalf("production without a key: %v %v", k, err)
	}
}

func TestReadAssets(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "a.json")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := `[{"network":"eip155:84532","address":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","name":"USDC","version":"2","decimals":6,"currency":"USD","minorDigits":2}]`
	as, err := readAssets(write(good))
	if err != nil || len(as) != 1 || as[0] != sandboxAsset() {
		t.Fatalf("%v %+v", err, as)
	}
	for _, bad := range []string{
		strings.Replace(good, `"decimals"`, `"decimal"`, 1),                        // a typo is an error
		strings.Replace(good, `0x036C`, `0x036G`, 1),                               // not an address
		strings.Replace(good, `"version":"2"`, `"version":""`, 1),                  // the domain is pinned
		strings.Replace(good, `"currency":"USD"`, `"currency":"usd"`, 1),           // ISO 4217
		strings.Replace(good, `"network":"eip155:84532"`, `"network":"solana"`, 1), // EVM only
		`[` + good[1:len(good)-1] + `,` + good[1:],                                 // the same asset twice
	} {
		if _, err := readAssets(write(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestX402ClockSkewFlag(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		skew    time.Duration
		refused bool
	}{
		{x402.DefaultClockSkew, false},
		{3 * time.Minute, false},
		{0, true}, // the margin cannot be switched off
		{-time.Minute, true},
	} {
		cfg := serveConfig{data: t.TempDir(), production: true, x402ClockSkew: tc.skew}
		o, _, err := x402Options(t.Context(), cfg, quiet)
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "--x402-clock-skew")):
			t.Errorf("%s: %v, want the flag refused", tc.skew, err)
		case !tc.refused && (err != nil || o.ClockSkew != tc.skew):
			t.Errorf("%s: %v, ClockSkew %s", tc.skew, err, o.ClockSkew)
		}
	}
}
