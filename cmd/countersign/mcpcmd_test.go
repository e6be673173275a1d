package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/internal/keyfile"
)

// mcpClient is an MCP client session with helpers for the tests.
type mcpClient struct {
	t       *testing.T
	cs      *mcp.ClientSession
	updates chan string
}

func newMCPClient(t *testing.T) (*mcp.Client, chan string) {
	updates := make(chan string, 64)
	c := mcp.NewClient(&mcp.Implementation{Name: "countersign-test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			select {
			case updates <- req.Params.URI:
			default:
			}
		},
	})
	return c, updates
}

// call calls a tool and returns the result and its structured content.
func (c *mcpClient) call(name string, args any) (*mcp.CallToolResult, map[string]any) {
	c.t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		c.t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return res, out
}

func (c *mcpClient) ok(name string, args any) map[string]any {
	c.t.Helper()
	res, out := c.call(name, args)
	if res.IsError {
		c.t.Fatalf("%s: tool error: %s", name, text(res))
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func sandboxArgs(dir string) []string {
	s := filepath.Join(dir, "sandbox")
	return []string{"--agent-key", filepath.Join(s, "agent.jwk.json"), "--credential", filepath.Join(s, "agent-credential.txt"),
		"--mandate", filepath.Join(s, "mandate.jws"), "--memory-mandate", filepath.Join(s, "memory-mandate.jws"), "--poll", "20ms"}
}

func payArgs(payee string, minor int64) map[string]any {
	return map[string]any{"payee": payee, "amount": map[string]any{"minor": minor, "currency": "USD"},
		"terms": map[string]any{"rail": "sandbox-card"}, "purpose": "a test payment over MCP"}
}

// TestMCPStdio drives "countersign mcp" over stdio with the SDK's own
// client against a sandbox server: tools, pay, a held payment approved by
// an operator while the agent waits, a denied and a declined payment, a
// retried call, quote and buy, remember and recall, resources and the
// intents subscription.
func TestMCPStdio(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	cmd := exec.Command(binary(t), append([]string{"mcp", "--url", base}, sandboxArgs(dir)...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client, updates := newMCPClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	c := &mcpClient{t: t, cs: cs, updates: updates}
	defer func() {
		if t.Failed() {
			t.Logf("mcp stderr:\n%s", stderr.String())
		}
	}()

	// Tools: generated, schemas valid, no operator action.
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		b, _ := json.Marshal(tool.InputSchema)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		comp := jsonschema.NewCompiler()
		if err := comp.AddResource("t.json", doc); err != nil {
			t.Fatal(err)
		}
		if _, err := comp.Compile("t.json"); err != nil {
			t.Errorf("tool %s: input schema: %v", tool.Name, err)
		}
	}
	for _, want := range []string{"pay_create", "commerce_quote", "commerce_buy", "memory_remember", "memory_recall",
		"identity_resolve", "identity_verify", "identity_disclose", "intents_get", "usage_get", "hold_place", "wait_for_decision"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tool %s in %v", want, names)
		}
	}
	for _, n := range names {
		if strings.HasPrefix(n, "operator_") || n == "memory_forget" || n == "dispute_resolve" || n == "audit_stream" {
			t.Errorf("tool %s exposes what an agent must not do", n)
		}
	}

	// Subscribe to the agent's intents before paying.
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "countersign://intents"}); err != nil {
		t.Fatal(err)
	}

	// Pay 12.50: settled, with the receipt.
	first := c.ok("pay_create", payArgs("acct:seller.example", 1250))
	if first["outcome"] != "settled" || first["intentId"] == nil {
		t.Fatalf("pay: %v", first)
	}
	// The same call again: the first answer, replayed; no second payment.
	again := c.ok("pay_create", payArgs("acct:seller.example", 1250))
	if again["intentId"] != first["intentId"] || again["replayed"] != true {
		t.Errorf("retried call: %v, first %v", again, first)
	}
	// The subscription saw our intent change.
	select {
	case <-updates:
	case <-ctx.Done():
		t.Fatal("no resources/updated notification for the agent's intents")
	}

	// Above the threshold: held for a person, who approves while we wait.
	held := c.ok("pay_create", payArgs("acct:seller.example", 25000))
	id, _ := held["intentId"].(string)
	if held["outcome"] != "approval_pending" || id == "" || held["expiresAt"] == nil || held["approveAt"] != base+"/console/" {
		t.Fatalf("held: %v", held)
	}
	decided := make(chan map[string]any, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait_for_decision", Arguments: map[string]any{"intentId": id, "timeoutSeconds": 60}})
		if err != nil {
			decided <- map[string]any{"error": err.Error()}
			return
		}
		m, _ := res.StructuredContent.(map[string]any)
		decided <- m
	}()
	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"operator", "approve", "--url", base, "--key", filepath.Join(dir, "sandbox", "operator.jwk.json"),
		"--intent", id, "--ack", "--rationale", "approved by the MCP test"}, &out, &errOut); code != 0 {
		t.Fatalf("approve: %d\n%s%s", code, out.String(), errOut.String())
	}
	if d := <-decided; d["decided"] != true || d["status"] != "settled" {
		t.Errorf("wait_for_decision: %v", d)
	}

	// Denied: above the mandate's per-payment cap. A tool error with the
	// problem's code and action.
	res, p := c.call("pay_create", payArgs("acct:seller.example", 60000))
	if !res.IsError || p["code"] != "intent.denied" || p["action"] == nil || !strings.Contains(text(res), "intent.denied") {
		t.Errorf("denied: %v %s", p, text(res))
	}
	// Declined by the rail.
	res, p = c.call("pay_create", payArgs("acct:decline.sandbox", 100))
	if !res.IsError || p["code"] != "payment.declined" {
		t.Errorf("declined: %v", p)
	}
	// A request the agent must fix.
	res, p = c.call("pay_create", map[string]any{"payee": "acct:seller.example", "amount": map[string]any{"minor": 5}, "terms": map[string]any{"rail": "sandbox-card"}, "envelope": map[string]any{}})
	if !res.IsError || p["action"] != "fix-request" {
		t.Errorf("an envelope from the agent: %v", p)
	}

	// Quote and buy at the fake merchant.
	cart := map[string]any{"rail": "acp", "merchant": "sandbox-acp", "currency": "USD",
		"lines": []any{map[string]any{"id": "sku-mug", "quantity": 2}}}
	quoted := c.ok("commerce_quote", cart)
	if quoted["status"] != "ready" {
		t.Errorf("quote: %v", quoted)
	}
	order := c.ok("commerce_buy", cart)
	if rc, _ := order["receipt"].(map[string]any); rc["payee"] != "merchant:sandbox-acp" {
		t.Errorf("buy: %v", order)
	}
	if again := c.ok("commerce_buy", cart); again["id"] != order["id"] || again["replayed"] != true {
		t.Errorf("retried buy: %v", again)
	}

	// Remember and recall.
	// The source defaults to the agent itself.
	c.ok("memory_remember", map[string]any{"namespace": "demo", "subject": "user:ada", "kind": "home", "body": "Paris",
		"validFrom": "2025-01-01T00:00:00Z"})
	recalled := c.ok("memory_recall", map[string]any{"namespace": "demo", "subject": "user:ada"})
	if b, _ := json.Marshal(recalled); !bytes.Contains(b, []byte(`"Paris"`)) {
		t.Errorf("recall: %s", b)
	}

	// Resources: the mandate with its budget, the checkpoint, the disclosure.
	for _, uri := range []string{"countersign://mandate", "countersign://record/checkpoint", "countersign://disclosure", "countersign://intents",
		"countersign://intents/" + id} {
		rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(rr.Contents) != 1 || !json.Valid([]byte(rr.Contents[0].Text)) {
			t.Errorf("read %s: %v %v", uri, err, rr)
			continue
		}
		if uri == "countersign://mandate" && !strings.Contains(rr.Contents[0].Text, "remainingMinor") {
			t.Errorf("mandate resource has no remaining budget: %s", rr.Contents[0].Text)
		}
	}
}

var mcpHTTPLine = regexp.MustCompile(`streamable HTTP at (http://127\.0\.0\.1:\d+/mcp)`)

// TestMCPHTTP serves the same tools over the streamable HTTP transport,
// with the whole service embedded (--data): pay and buy and remember.
func TestMCPHTTPEmbedded(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "--data", dir, "--http", "127.0.0.1:0", "--console-addr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	defer func() { cancel(); <-done }()
	var endpoint string
	for endpoint == "" {
		if m := mcpHTTPLine.FindStringSubmatch(stderr.String()); m != nil {
			endpoint = m[1]
			break
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("mcp exited with %d:\n%s", code, stderr.String())
		default:
		}
		// Polling a buffer the command writes once at start-up: real I/O.
		time.Sleep(10 * time.Millisecond)
	}
	client, _ := newMCPClient(t)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	c := &mcpClient{t: t, cs: cs}
	if got := c.ok("pay_create", payArgs("acct:seller.example", 1250)); got["outcome"] != "settled" {
		t.Errorf("pay: %v", got)
	}
	held := c.ok("pay_create", payArgs("acct:seller.example", 20000))
	if approve, _ := held["approveAt"].(string); held["outcome"] != "approval_pending" || !strings.HasSuffix(approve, "/console/") {
		t.Errorf("held: %v", held)
	}
	order := c.ok("commerce_buy", map[string]any{"rail": "ucp", "merchant": "sandbox-ucp", "currency": "USD",
		"lines": []any{map[string]any{"id": "sku-book", "quantity": 1}}})
	if order["outcome"] != "settled" {
		t.Errorf("buy: %v", order)
	}
	c.ok("memory_remember", map[string]any{"namespace": "demo", "subject": "user:bob", "kind": "note", "body": map[string]any{"likes": "tea"},
		"validFrom": "2025-01-01T00:00:00Z", "source": map[string]any{"kind": "agent", "ref": "mcp-test"}})
	if got := c.ok("memory_recall", map[string]any{"namespace": "demo", "subject": "user:bob"}); !strings.Contains(mustJSON(got), "tea") {
		t.Errorf("recall: %v", got)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

var credentialPattern = regexp.MustCompile(`svc_ak_[A-Za-z0-9_-]+`)

// TestMCPDPoP: with a credential bound to a DPoP key, every request the
// MCP server sends carries a proof, and instructions declare dpop.
func TestMCPDPoP(t *testing.T) {
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	s := filepath.Join(dir, "sandbox")
	dpop, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dpopFile := filepath.Join(t.TempDir(), "dpop.jwk.json")
	if err := keyfile.Write(dpopFile, dpop, "dpop-1"); err != nil {
		t.Fatal(err)
	}
	jkt, err := auth.Thumbprint(dpop.Public())
	if err != nil {
		t.Fatal(err)
	}
	agentPriv, _, err := keyfile.ReadEd25519(filepath.Join(s, "agent.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"operator", "agents", "create", "--url", base, "--key", filepath.Join(s, "operator.jwk.json"),
		"--name", "mcp-dpop", "--agent", hex.EncodeToString(agentPriv.Public().(ed25519.PublicKey)), "--jkt", jkt,
		"--rationale", "a DPoP-bound key for the MCP test"}, &out, &errOut); code != 0 {
		t.Fatalf("agents create: %d\n%s%s", code, out.String(), errOut.String())
	}
	cred := credentialPattern.FindString(out.String())
	credFile := filepath.Join(t.TempDir(), "cred.txt")
	if err := os.WriteFile(credFile, []byte(cred+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "mcp", "--url", base, "--agent-key", filepath.Join(s, "agent.jwk.json"), "--credential", credFile,
		"--mandate", filepath.Join(s, "mandate.jws"), "--dpop-key", dpopFile)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client, _ := newMCPClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	c := &mcpClient{t: t, cs: cs}
	got := c.ok("pay_create", payArgs("acct:seller.example", 700))
	if terms, _ := got["terms"].(map[string]any); got["outcome"] != "settled" || terms["credential"] != "dpop" {
		t.Errorf("pay with DPoP: %v", got)
	}
	if u := c.ok("usage_get", map[string]any{"since": time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), "until": time.Now().UTC().Add(time.Hour).Format(time.RFC3339)}); u["keyId"] == nil {
		t.Errorf("usage: %v", u)
	}
}

// TestMCPModeFlags: --url on the command line beats COUNTERSIGN_DATA from
// the environment (no node is opened on that directory), and both flags
// on the command line are refused.
func TestMCPModeFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var out, errOut bytes.Buffer
	err := cmdMCP(context.Background(), []string{"--url", "http://127.0.0.1:1", "--data", dir}, strings.NewReader(""), &out, &errOut)
	if !errors.Is(err, errUsage) || !strings.Contains(errOut.String(), "not both") {
		t.Fatalf("both flags: %v, %s", err, errOut.String())
	}
	t.Setenv("COUNTERSIGN_DATA", dir)
	errOut.Reset()
	// No agent key: refused before anything is served, and the
	// environment's data directory was not opened (or created).
	err = cmdMCP(context.Background(), []string{"--url", "http://127.0.0.1:1"}, strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--agent-key") {
		t.Fatalf("--url with COUNTERSIGN_DATA set: %v", err)
	}
	if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
		t.Errorf("the environment's data directory was opened: %v", serr)
	}
}
