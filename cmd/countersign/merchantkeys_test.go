package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/netguard"
)

// TestOperatorMerchantAddSigningKey pins a UCP merchant's response-signing
// key with the CLI, as an operator would, and buys (quotes) through it: a
// badly signed answer is refused with a clear problem. The sandbox's own
// UCP merchant is pinned too.
func TestOperatorMerchantAddSigningKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	sandbox := filepath.Join(dir, "sandbox")
	alice := filepath.Join(sandbox, sandboxOperatorKey)

	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String()})
	srv.Config.Handler = fm.UCPHandler()
	srv.Start()
	defer srv.Close()
	keys := t.TempDir()
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(keys, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jwk := fm.SigningJWK()
	one, list := write("shop.jwk.json", jwk), write("shop.jwks.json", []any{jwk})
	private := write("private.jwk.json", map[string]string{"kid": "k", "kty": "EC", "crv": "P-256", "x": jwk.X, "y": jwk.Y, "d": jwk.X})

	add := func(args ...string) cliResult {
		return cli(t, append([]string{"operator", "merchant", "add", "--url", base, "--key", alice,
			"--rationale", "pin the shop's signing key"}, args...)...)
	}
	r := add("--id", "signed-shop", "--protocol", "ucp", "--profile-url", srv.URL+"/.well-known/ucp", "--signing-key", one)
	pinned, _ := r.body["signingKeys"].([]any)
	if r.status != 201 || len(pinned) != 1 || pinned[0].(map[string]any)["kid"] != jwk.Kid || pinned[0].(map[string]any)["thumbprint"] == "" {
		t.Fatalf("merchant add: %s", r.out)
	}
	if r := add("--id", "signed-shop-2", "--protocol", "ucp", "--profile-url", srv.URL+"/.well-known/ucp", "--signing-key", list); r.status != 201 {
		t.Fatalf("merchant add with a JWK array: %s", r.out)
	}
	if r := add("--id", "acp-shop", "--protocol", "acp", "--merchant-url", "https://acp.example", "--signing-key", one); r.status != 400 ||
		r.str("code") != "commerce.invalid_merchant" || !strings.Contains(r.str("detail"), "ACP defines no response signatures") {
		t.Fatalf("signing key for an ACP merchant: %s", r.out)
	}
	if r := add("--id", "leaky", "--protocol", "ucp", "--profile-url", srv.URL+"/.well-known/ucp", "--signing-key", private); r.code == 0 ||
		!strings.Contains(r.out, "private key") {
		t.Fatalf("a private key: %s", r.out)
	}

	quote := func(merchant, sku string) cliResult {
		return cli(t, "buy", "--quote", "--url", base, "--credential", filepath.Join(sandbox, sandboxCredential),
			"--merchant", merchant, "--rail", "ucp", "--line", sku)
	}
	if r := quote("signed-shop", "sku-mug"); r.status != 200 || r.str("status") != "ready" {
		t.Fatalf("quote from the pinned merchant: %s", r.out)
	}
	for _, m := range []string{"signed-shop", "sandbox-ucp"} {
		if r := quote(m, "sku-badsig"); r.status != 502 || r.str("code") != "commerce.merchant_invalid_response" ||
			!strings.Contains(r.str("signatureRefused"), "does not verify with key") {
			t.Fatalf("%s: a badly signed answer: %s", m, r.out)
		}
	}
	_, body := get(t, base+"/commerce/merchants", "Authorization", "Bearer "+strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxCredential))))
	var page struct {
		Data []struct {
			ID          string `json:"id"`
			SigningKeys []struct {
				Kid string `json:"kid"`
			} `json:"signingKeys"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Data {
		if (m.ID == "sandbox-ucp" || m.ID == "signed-shop") != (len(m.SigningKeys) == 1) && m.ID != "signed-shop-2" {
			t.Errorf("%s lists signing keys %v", m.ID, m.SigningKeys)
		}
	}
}

// sandboxURLs is the URL guard of a sandbox server.
var sandboxURLs = netguard.Policy{AllowLoopback: true, AllowHTTP: true}

// TestMerchantsFileSigningKeys: --merchants accepts pinned keys for a UCP
// merchant, refuses them for an ACP one, and refuses a malformed key.
func TestMerchantsFileSigningKeys(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String()})
	srv.Config.Handler = fm.UCPHandler()
	srv.Start()
	defer srv.Close()
	key, _ := json.Marshal(fm.SigningJWK())
	file := func(entries string) string {
		p := filepath.Join(t.TempDir(), "merchants.json")
		if err := os.WriteFile(p, []byte(entries), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ms, err := openMerchants(t.Context(), file(`[{"id":"shop","protocol":"ucp","profileUrl":"`+srv.URL+`/.well-known/ucp","signingKeys":[`+string(key)+`]}]`), srv.Client(), sandboxURLs)
	if err != nil || len(ms) != 1 {
		t.Fatalf("openMerchants: %v", err)
	}
	if pk, ok := ms[0].Merchant.(interface{ PinnedKeys() []ucp.SigningKey }); !ok || len(pk.PinnedKeys()) != 1 || pk.PinnedKeys()[0].Kid != fm.SigningJWK().Kid {
		t.Fatalf("the client does not hold the pinned key: %T", ms[0].Merchant)
	}
	for name, entries := range map[string]string{
		"acp":       `[{"id":"a","protocol":"acp","baseUrl":"https://acp.example","signingKeys":[` + string(key) + `]}]`,
		"malformed": `[{"id":"shop","protocol":"ucp","profileUrl":"` + srv.URL + `/.well-known/ucp","signingKeys":[{"kid":"k","kty":"EC","crv":"P-256","x":"AA","y":"AA"}]}]`,
		"private":   `[{"id":"shop","protocol":"ucp","profileUrl":"` + srv.URL + `/.well-known/ucp","signingKeys":[{"kid":"k","kty":"EC","crv":"P-256","x":"AA","y":"AA","d":"AA"}]}]`,
		"metadata":  `[{"id":"a","protocol":"acp","baseUrl":"http://169.254.169.254"}]`,
	} {
		if _, err := openMerchants(t.Context(), file(entries), srv.Client(), sandboxURLs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestOperatorMerchantAddPaymentCredential registers, from the CLI, a UCP
// merchant whose payment handler takes a token credential at complete
// (the token read from a file), and buys from it.
func TestOperatorMerchantAddPaymentCredential(t *testing.T) {
	ss := startSandbox(t)
	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String(),
		UCPPayment: fakemerchant.UCPPaymentCredential})
	srv.Config.Handler = fm.UCPHandler(fakemerchant.UCP20260111)
	srv.Start()
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "wallet.token")
	if err := os.WriteFile(tokenFile, []byte(fakemerchant.UCPWalletToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	add := func(id string, extra ...string) cliResult {
		return cli(t, append([]string{"operator", "merchant", "add", "--url", ss.base,
			"--key", filepath.Join(ss.dir, sandboxOperatorKey), "--rationale", "the wallet shop, with its token",
			"--id", id, "--protocol", "ucp", "--profile-url", srv.URL + "/.well-known/ucp"}, extra...)...)
	}
	r := add("wallet-shop", "--payment-credential", fakemerchant.UCPWalletID+"="+tokenFile)
	if r.status != 201 || strings.Contains(r.out, fakemerchant.UCPWalletToken) {
		t.Fatalf("merchant add with a credential: %s", r.out)
	}
	for _, bad := range []string{"no-equals", fakemerchant.UCPWalletID + "=", "=" + tokenFile, fakemerchant.UCPWalletID + "=/nonexistent"} {
		if r := add("bad-shop", "--payment-credential", bad); r.code == 0 {
			t.Errorf("--payment-credential %q accepted: %s", bad, r.out)
		}
	}
	buy := cli(t, "buy", "--url", ss.base, "--agent-key", filepath.Join(ss.dir, sandboxAgentKey),
		"--credential", filepath.Join(ss.dir, sandboxCredential), "--mandate", filepath.Join(ss.dir, sandboxMandate),
		"--merchant", "wallet-shop", "--rail", "ucp", "--line", "sku-mug")
	if buy.status != 200 {
		t.Fatalf("buy through the credential handler: %s", buy.out)
	}
	_, body := get(t, ss.base+"/commerce/merchants", "Authorization", ss.bearer)
	if strings.Contains(string(body), fakemerchant.UCPWalletToken) || !strings.Contains(string(body), `"credentialHandlers":["`+fakemerchant.UCPWalletID+`"]`) {
		t.Errorf("the listing shows the token, or not the handler: %s", body)
	}
}
