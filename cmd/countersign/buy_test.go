package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxBuy buys from the sandbox's fake merchants over both
// protocols, end to end over HTTP, as the README shows: the CLI signs the
// purchase, the server re-reads the cart at the merchant, the gate
// authorises its total, the rail completes the checkout.
func TestSandboxBuy(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	sandbox := filepath.Join(dir, "sandbox")
	args := func(extra ...string) []string {
		return append([]string{"buy", "--url", base, "--agent-key", filepath.Join(sandbox, "agent.jwk.json"),
			"--credential", filepath.Join(sandbox, "agent-credential.txt"), "--mandate", filepath.Join(sandbox, "mandate.jws")}, extra...)
	}
	buy := func(extra ...string) (int, map[string]any, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args(extra...), &out, &errOut)
		text := out.String()
		var body map[string]any
		if i := strings.Index(text, "{"); i >= 0 {
			_ = json.Unmarshal([]byte(text[i:]), &body)
		}
		return code, body, text + errOut.String()
	}
	for _, tc := range []struct{ merchant, rail string }{{"sandbox-acp", "acp"}, {"sandbox-ucp", "ucp"}} {
		code, order, out := buy("--merchant", tc.merchant, "--rail", tc.rail, "--line", "sku-mug:2,sku-book")
		if code != 0 || !strings.HasPrefix(out, "200 OK") {
			t.Fatalf("%s: exit %d\n%s", tc.merchant, code, out)
		}
		receipt, _ := order["receipt"].(map[string]any)
		total, _ := order["total"].(map[string]any)
		// 2 mugs (2,400 + 8.25 % tax = 198) + a book (2,500) + shipping 500.
		if order["merchant"] != tc.merchant || total["minor"] != float64(5598) || receipt["payee"] != "merchant:"+tc.merchant ||
			receipt["rail"] != tc.rail || order["id"] == "" {
			t.Errorf("%s: order %v", tc.merchant, order)
		}
		// Quote only: a priced cart, no money moved.
		code, q, out := buy("--quote", "--merchant", tc.merchant, "--rail", tc.rail, "--line", "sku-laptop")
		if code != 0 || q["status"] != "ready" {
			t.Errorf("%s quote: exit %d\n%s", tc.merchant, code, out)
		}
		// A cart the merchant does not let us pay: 400 intent.malformed with
		// where to continue; no money moves.
		code, p, out := buy("--merchant", tc.merchant, "--rail", tc.rail, "--line", "sku-age")
		if code == 0 || p["code"] != "intent.malformed" || p["action"] != "continue-at-link" ||
			!strings.HasPrefix(p["continueUrl"].(string), "http://127.0.0.1:") {
			t.Errorf("%s not ready: exit %d\n%s", tc.merchant, code, out)
		}
	}
	// The record holds the purchase's steps.
	credBytes := readFile(t, filepath.Join(sandbox, "agent-credential.txt"))
	_, body := get(t, base+"/audit?limit=100", "Authorization", "Bearer "+strings.TrimSpace(credBytes))
	for _, want := range []string{`"type":"commerce.quote"`, `"type":"commerce.cart_read"`, `"type":"commerce.completed"`, `"payee":"merchant:sandbox-ucp"`} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the record lacks %s", want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
