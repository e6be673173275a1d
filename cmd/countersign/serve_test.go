package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/schematest"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine to write while
// the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenLine = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// startServe runs "countersign serve" in-process on a free port in an empty
// data directory and returns its base URL and a stop function that returns
// the exit code.
func startServe(t *testing.T, dir string, extra ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, extra...)
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listenLine.FindStringSubmatch(stdout.String()); m != nil {
			return m[1], func() int { cancel(); return <-done }
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d before listening:\n%s\n%s", code, stdout.String(), stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve did not start:\n%s\n%s", stdout.String(), stderr.String())
		}
		// Polling a buffer the server writes once at start-up; this waits
		// for real I/O, not for time to pass in the code under test.
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestServeEmptyDirectory is the README's first command: serve in an empty
// directory, answer the documented routes, serve an OpenAPI 3.1 document the
// official schema accepts, record its own start, verify from outside with
// only the public key, and shut down cleanly.
func TestServeEmptyDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "countersign-data")
	base, stop := startServe(t, dir)

	resp, body := get(t, base+"/healthz")
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}

	resp, body = get(t, base+"/openapi.json")
	if resp.StatusCode != 200 {
		t.Fatalf("openapi.json: %d", resp.StatusCode)
	}
	validateOpenAPI(t, body)

	resp, body = get(t, base+"/audit?limit=5")
	if resp.StatusCode != 401 {
		t.Fatalf("the record without a credential: %d %s", resp.StatusCode, body)
	}
	sandbox := filepath.Join(dir, "sandbox")
	credBytes, err := os.ReadFile(filepath.Join(sandbox, "agent-credential.txt"))
	if err != nil {
		t.Fatal(err)
	}
	bearer := []string{"Authorization", "Bearer " + strings.TrimSpace(string(credBytes))}
	resp, body = get(t, base+"/audit?limit=5", bearer...)
	var page struct {
		Data []struct {
			Seq  uint64 `json:"seq"`
			Type string `json:"type"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("audit: %d %s", resp.StatusCode, body)
	}
	var types []string
	for _, e := range page.Data {
		types = append(types, e.Type)
	}
	if want := []string{"system.started", "agent.created", "agent.created", "identity.created", "gate.policy"}; !slices.Equal(types, want) {
		t.Fatalf("a fresh server's record should hold its start, the sandbox agent's and seller's keys, its identity and its policy (%v): %s", want, body)
	}

	// The README's two payments: one settles, one is held for approval.
	payArgs := func(amount, key string) []string {
		return []string{"pay", "--url", base, "--agent-key", filepath.Join(sandbox, "agent.jwk.json"),
			"--credential", filepath.Join(sandbox, "agent-credential.txt"), "--mandate", filepath.Join(sandbox, "mandate.jws"),
			"--payee", "acct:seller.example", "--amount", amount, "--currency", "USD", "--rail", "sandbox-card",
			"--idempotency-key", key}
	}
	for _, tc := range []struct{ amount, key, want string }{
		{"1250", "k-settle", "200 OK"},
		{"25000", "k-held", "202 Accepted"},
		{"1250", "k-settle", "200 OK"}, // a replay
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), payArgs(tc.amount, tc.key), &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), tc.want) {
			t.Fatalf("pay %s: exit %d\n%s%s", tc.amount, code, out.String(), errOut.String())
		}
	}
	_, body = get(t, base+"/audit?limit=100", bearer...)
	if err := json.Unmarshal(body, &page); err != nil || len(page.Data) != 8 {
		t.Fatalf("after two payments and a replay the record should hold 8 entries: %s", body)
	}

	resp, body = get(t, base+"/audit?limit=500", bearer...)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"code":"request.validation"`) {
		t.Fatalf("limit=500: %d %s", resp.StatusCode, body)
	}

	var out, errOut bytes.Buffer
	pub := filepath.Join(dir, "record.pub")
	cred := filepath.Join(sandbox, "agent-credential.txt")
	if code := run(context.Background(), []string{"audit", "verify", "--url", base, "--key", pub, "--credential", cred, "--signatures"}, &out, &errOut); code != 0 {
		t.Fatalf("audit verify --url: exit %d: %s %s", code, out.String(), errOut.String())
	}
	if !strings.HasPrefix(out.String(), "ok: 8 entries verified") {
		t.Fatalf("audit verify --url said %q", out.String())
	}

	if code := stop(); code != 0 {
		t.Fatalf("serve exit code %d after shutdown", code)
	}

	// A restart appends a second start entry to the same chain.
	base, stop = startServe(t, dir)
	_, body = get(t, base+"/audit/consistency?from=1", bearer...)
	if !strings.Contains(string(body), `"to":9`) { // the policy did not change: no second gate.policy
		t.Fatalf("consistency after restart: %s", body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("second serve exit code %d", code)
	}
	out.Reset()
	if code := run(context.Background(), []string{"audit", "verify", "--data", dir, "--signatures"}, &out, &errOut); code != 0 {
		t.Fatalf("audit verify --data: exit %d: %s %s", code, out.String(), errOut.String())
	}
	if !strings.HasPrefix(out.String(), "ok: 9 entries verified") {
		t.Fatalf("audit verify --data said %q", out.String())
	}
}

func TestServeProductionRefusesWithoutKey(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--production"}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--record-key") {
		t.Fatalf("production without a record key: exit %d, %s", code, errOut.String())
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "record.jwk.json")
	if code := run(context.Background(), []string{"keygen", "record", "--out", key}, &out, &errOut); code != 0 {
		t.Fatal(errOut.String())
	}
	errOut.Reset()
	code = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--production", "--record-key", key}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--operator-keys") {
		t.Fatalf("production without a record key: exit %d, %s", code, errOut.String())
	}

	// Everything but the operator's id: a production disclosure names who
	// deployed it, so the server refuses to guess.
	opKey := filepath.Join(dir, "op.jwk.json")
	var pubJWK bytes.Buffer
	if code := run(context.Background(), []string{"keygen", "operator", "--kid", "op-prod", "--out", opKey}, &pubJWK, &errOut); code != 0 {
		t.Fatal(errOut.String())
	}
	set := filepath.Join(dir, "operators.jwks.json")
	lines := strings.Split(strings.TrimSpace(pubJWK.String()), "\n")
	if err := os.WriteFile(set, []byte(`{"keys":[`+lines[len(lines)-1]+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	seal := filepath.Join(dir, "seal.key")
	if err := os.WriteFile(seal, []byte(base64.RawURLEncoding.EncodeToString(make([]byte, 32))), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	code = run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--production", "--record-key", key,
		"--operator-keys", set, "--webhook-seal-key", seal}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--operator-id") {
		t.Fatalf("production without an operator id: exit %d, %s", code, errOut.String())
	}
}

// validateOpenAPI checks a document against the official OpenAPI 3.1 JSON
// Schema kept by the contract package's tests.
func validateOpenAPI(t *testing.T, doc []byte) {
	t.Helper()
	sch := schematest.Compile(t, filepath.Join("..", "..", "contract", "testdata", "openapi-3.1-schema.json"))
	if err := schematest.Validate(t, sch, doc); err != nil {
		t.Fatalf("served /openapi.json is not valid OpenAPI 3.1: %v", err)
	}
}

// TestServeHexAgentID: the deployment's agent id is its key in hex (the
// form every ADP verifier accepts), and --identity-hex-agent-id is
// accepted on a data directory whose id is hex already (a no-op).
func TestServeHexAgentID(t *testing.T) {
	dir := t.TempDir()
	_, stop := startServe(t, dir, "--identity-hex-agent-id")
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	r := cli(t, "keys", "--data", dir)
	if r.code != 0 || !regexp.MustCompile(`agent id:\s+[0-9a-f]{64}\n`).MatchString(r.out) {
		t.Errorf("keys: the agent id is not 64 hex digits:\n%s", r.out)
	}
}
