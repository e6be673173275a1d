package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

// browserEnv says whether the console's browser test can run: node,
// Debian's chromium and console/e2e's node_modules (npm ci). Where one is
// missing the test skips, unless COUNTERSIGN_TEST_BROWSER=1 (set by
// .ci/run, which installs them) makes it fail.
func browserEnv(t *testing.T) (node, chromium, e2e string) {
	t.Helper()
	e2e, err := filepath.Abs(filepath.Join("..", "..", "console", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	chromium = os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	node, nerr := exec.LookPath("node")
	_, cerr := os.Stat(chromium)
	_, merr := os.Stat(filepath.Join(e2e, "node_modules", "playwright-core"))
	if nerr != nil || cerr != nil || merr != nil {
		msg := "the console's browser test needs node, Debian's chromium (apt-get install chromium) and " +
			"`npm ci` in console/e2e; .ci/run installs them"
		if os.Getenv("COUNTERSIGN_TEST_BROWSER") == "1" {
			t.Fatalf("%s (node: %v, chromium: %v, playwright-core: %v)", msg, nerr, cerr, merr)
		}
		t.Skip(msg)
	}
	return node, chromium, e2e
}

// signVector is one request the console's signer must sign exactly as the
// Go signer does.
type signVector struct {
	JWK          json.RawMessage `json:"jwk"`
	OperationID  string          `json:"operationId"`
	Method       string          `json:"method"`
	BaseURL      string          `json:"baseURL"`
	PathAndQuery string          `json:"pathAndQuery"`
	Body         string          `json:"body"`
	TS           int64           `json:"ts"`
	Nonce        string          `json:"nonce"`

	ed25519 bool
	pub     json.RawMessage
}

// signVectors returns vectors over both key types, a query, a
// percent-encoded path and a base URL with a path of its own.
func signVectors(t *testing.T, edPath string) []signVector {
	t.Helper()
	ed, err := keyfile.Read(edPath)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var vs []signVector
	for _, k := range []struct {
		key     crypto.Signer
		kid     string
		ed25519 bool
	}{{ed.Signer, ed.KeyID, true}, {p256, "op-bob", false}} {
		priv, err := keyfile.Marshal(k.key, k.kid)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := keyfile.MarshalPublic(k.key, k.kid)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ op, method, base, target, body string }{
			{"operator.approve", "POST", "http://127.0.0.1:8080", "/operator/approve", `{"intentId":"int_01","rationale":"customer confirmed by phone"}`},
			{"operator.approvals", "GET", "https://pay.example.com/", "/operator/approvals?limit=20&cursor=AAAA-_x", ""},
			{"webhooks.update", "PATCH", "https://pay.example.com/api/", "/api/webhooks/endpoints/we_%C3%A9x", `{"active":false}`},
		} {
			vs = append(vs, signVector{JWK: priv, OperationID: c.op, Method: c.method, BaseURL: c.base, PathAndQuery: c.target,
				Body: c.body, TS: 1763800000, Nonce: "AQEBAQEBAQEBAQEBAQEBAQ", ed25519: k.ed25519, pub: pub})
		}
	}
	return vs
}

// checkVectors checks the page's headers: each verifies with the Go
// verifier over the same request, and an Ed25519 one (deterministic) is
// byte for byte the Go signer's.
func checkVectors(t *testing.T, vs []signVector, headers []string) {
	t.Helper()
	if len(headers) != len(vs) {
		t.Fatalf("the page signed %d vectors of %d", len(headers), len(vs))
	}
	for i, v := range vs {
		keys, err := operator.LoadKeySet([]byte(`{"keys":[` + string(v.pub) + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		now := func() time.Time { return time.Unix(v.TS, 0) }
		ver, err := operator.NewVerifier(memstore.New(nil), keys, v.BaseURL, &operator.VerifierOptions{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		// The server behind a proxy that strips the base URL's path
		// receives the route's path (DESIGN §5).
		bu, err := url.Parse(v.BaseURL)
		if err != nil {
			t.Fatal(err)
		}
		received := strings.TrimPrefix(v.PathAndQuery, strings.TrimRight(bu.Path, "/"))
		req := httptest.NewRequest(v.Method, received, strings.NewReader(v.Body))
		req.Header.Set(operator.HeaderName, headers[i])
		if _, err := ver.Verify(req, v.OperationID, []byte(v.Body)); err != nil {
			t.Errorf("vector %d (%s %s, ed25519 %v): the page's header %q does not verify: %v", i, v.Method, v.PathAndQuery, v.ed25519, headers[i], err)
		}
		if !v.ed25519 {
			continue
		}
		k, err := keyfile.Parse(v.JWK)
		if err != nil {
			t.Fatal(err)
		}
		s, err := operator.NewSigner(k.Signer, k.KeyID, v.BaseURL, &operator.SignerOptions{Now: now, Rand: bytes.NewReader(bytes.Repeat([]byte{1}, operator.NonceBytes))})
		if err != nil {
			t.Fatal(err)
		}
		goReq := httptest.NewRequest(v.Method, v.PathAndQuery, nil)
		if err := s.Sign(goReq, v.OperationID, []byte(v.Body)); err != nil {
			t.Fatal(err)
		}
		if got, want := headers[i], goReq.Header.Get(operator.HeaderName); got != want {
			t.Errorf("vector %d: the page signed\n%s\nthe Go signer\n%s", i, got, want)
		}
	}
}

// TestConsoleInBrowser is the operator console in Debian's chromium,
// driven by console/e2e/console.mjs (playwright-core): a wrong key refused
// with the problem shown, the sandbox operator key imported, a held
// payment seen with its context and approved, its entries verified in the
// page, another declined, a refund in two parts, the kill switch engaged
// and released, a breaker reset refused with its problem shown, a webhook
// endpoint created (secret shown) and deactivated, the page at 360 px, the
// page's signer against the Go signer's vectors. Screenshots go to $COUNTERSIGN_CONSOLE_SHOTS,
// or the test's temporary directory (logged).
func TestConsoleInBrowser(t *testing.T) {
	node, chromium, e2e := browserEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	sandbox := filepath.Join(dir, "sandbox")
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()

	payArgs := []string{"pay", "--url", base, "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
		"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", filepath.Join(sandbox, sandboxMandate),
		"--currency", "USD", "--rail", "sandbox-card", "--amount", "25000"}
	held := func(payee string) string {
		r := cli(t, append(payArgs, "--payee", payee)...)
		if r.status != http.StatusAccepted || r.str("intentId") == "" {
			t.Fatalf("a held payment: %d %s", r.status, r.out)
		}
		return r.str("intentId")
	}
	approveID, declineID := held("acct:seller.example"), held("acct:stranger.example")

	work := t.TempDir()
	shots := os.Getenv("COUNTERSIGN_CONSOLE_SHOTS")
	if shots == "" {
		shots = filepath.Join(work, "screenshots")
	}
	wrong := filepath.Join(work, "wrong.jwk.json")
	_, wrongKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyfile.Write(wrong, wrongKey, sandboxOperatorKID); err != nil {
		t.Fatal(err)
	}
	vs := signVectors(t, filepath.Join(sandbox, sandboxOperatorKey))
	vb, err := json.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	vectors, vectorsOut := filepath.Join(work, "vectors.json"), filepath.Join(work, "headers.json")
	if err := os.WriteFile(vectors, vb, 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console.mjs")
	cmd.Dir = e2e
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+base+"/console/", "SHOTS="+shots, "CHROMIUM="+chromium,
		"OPERATOR_KEY="+filepath.Join(sandbox, sandboxOperatorKey), "WRONG_KEY="+wrong,
		"APPROVE_ID="+approveID, "DECLINE_ID="+declineID, "VECTORS="+vectors, "VECTORS_OUT="+vectorsOut)
	out, err := cmd.CombinedOutput()
	t.Logf("screenshots in %s", shots)
	if err != nil {
		t.Fatalf("the browser test failed: %v\n%s", err, out)
	}

	hb, err := os.ReadFile(vectorsOut)
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	if err := json.Unmarshal(hb, &headers); err != nil {
		t.Fatal(err)
	}
	checkVectors(t, vs, headers)

	// What the page did, read back through the API.
	cred, err := os.ReadFile(filepath.Join(sandbox, sandboxCredential))
	if err != nil {
		t.Fatal(err)
	}
	// Approved (settled), then refunded in two steps; declined.
	for id, want := range map[string]string{approveID: "refunded", declineID: "declined"} {
		resp, body := get(t, base+"/intents/"+id, "Authorization", "Bearer "+strings.TrimSpace(string(cred)))
		var in struct {
			Status string `json:"status"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &in) != nil || in.Status != want {
			t.Errorf("intent %s: %d %s, want status %s", id, resp.StatusCode, body, want)
		}
	}
	for _, png := range []string{"queue.png", "record.png", "wrong-key.png", "webhooks.png", "queue-360.png", "record-360.png"} {
		if st, err := os.Stat(filepath.Join(shots, png)); err != nil || st.Size() == 0 {
			t.Errorf("screenshot %s missing: %v", png, err)
		}
	}
}
