package mcpserver

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402/fetch"
)

// fakeCountersign is a small stand-in for the server: /pay settles below
// 10,000, holds up to 50,000 and denies above; replays by idempotency key;
// /intents/{id} reads what /pay made, and decide() settles a held one.
type fakeCountersign struct {
	mu      sync.Mutex
	byKey   map[string][]byte
	intents map[string]string // id → status
	paid    int
	headers []http.Header
	fetches []fetch.Request
}

func newFake() *fakeCountersign {
	return &fakeCountersign{byKey: map[string][]byte{}, intents: map[string]string{}}
}

func (f *fakeCountersign) decide(id, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.intents[id] = status
}

func problem(w http.ResponseWriter, status int, code, action, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": status, "code": code, "action": action, "detail": detail, "title": code})
}

func (f *fakeCountersign) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.headers = append(f.headers, r.Header.Clone())
	switch {
	case r.Method == "POST" && r.URL.Path == "/pay":
		b, _ := io.ReadAll(r.Body)
		var in pay.Instruction
		if err := json.Unmarshal(b, &in); err != nil || pay.VerifyInstruction(&in) != nil {
			problem(w, 401, "intent.unauthorized", "stop", "bad signature")
			return
		}
		if r.Header.Get("Idempotency-Key") != in.IdempotencyKey {
			problem(w, 400, "idempotency.key_mismatch", "fix-request", "header and body differ")
			return
		}
		if prev, ok := f.byKey[in.IdempotencyKey]; ok {
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(prev)
			return
		}
		id := "int_" + in.IdempotencyKey[4:12]
		switch {
		case in.Amount.Minor > 50_000:
			problem(w, 403, "intent.denied", "stop", "above the per-payment cap")
		case in.Amount.Minor >= 10_000:
			f.intents[id] = "pending_approval"
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(map[string]any{"intentId": id, "status": "pending_approval", "challenge": "ch",
				"expiresAt": "2030-01-01T00:00:00Z", "approvalsRequired": 1})
		default:
			f.paid++
			f.intents[id] = "settled"
			body, _ := json.Marshal(map[string]any{"intentId": id, "settledAt": "2026-01-01T00:00:00Z", "amount": in.Amount, "payee": in.Payee})
			f.byKey[in.IdempotencyKey] = body
			_, _ = w.Write(body)
		}
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/intents/"):
		id := strings.TrimPrefix(r.URL.Path, "/intents/")
		st, ok := f.intents[id]
		if !ok {
			problem(w, 404, "intent.not_found", "fix-request", "no such intent")
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "status": st})
	case r.Method == "POST" && r.URL.Path == "/x402/fetch":
		var fr fetch.Request
		if err := json.NewDecoder(r.Body).Decode(&fr); err != nil {
			problem(w, 400, "request.malformed_json", "fix-request", err.Error())
			return
		}
		f.fetches = append(f.fetches, fr)
		_ = json.NewEncoder(w).Encode(fetch.Fetched{IntentID: "int_x402", Paid: true, Delivered: true, Status: 200, Body: "c3Vubnk="})
	case r.URL.Path == "/usage":
		_ = json.NewEncoder(w).Encode(map[string]any{"since": r.URL.Query().Get("since"), "tags": r.URL.Query()["tags"]})
	default:
		problem(w, 404, "route.not_found", "fix-request", r.Method+" "+r.URL.Path)
	}
}

func agentKey() ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = 7
	return ed25519.NewKeyFromSeed(s)
}

// connect serves a Server over the SDK's in-memory transports and returns
// a client session.
func connect(t *testing.T, h http.Handler, cfg Config) (*Server, *mcp.ClientSession) {
	t.Helper()
	cfg.Agent = &agentclient.Agent{BaseURL: "http://countersign.test", Credential: "svc_ak_a_b", Key: agentKey(), Mandate: "x.y.z",
		HTTPClient: &http.Client{Transport: agentclient.HandlerTransport(h)}}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close(); s.Close() })
	return s, cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res, m
}

func TestResults(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, Config{ConsoleURL: "http://countersign.test/console/", PollInterval: time.Millisecond})
	pay := func(minor int) map[string]any {
		return map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": minor}, "terms": map[string]any{"rail": "sandbox-card"}}
	}
	for _, tc := range []struct {
		name    string
		tool    string
		args    any
		isError bool
		want    map[string]any
		text    string
	}{
		{"settled", "pay_create", pay(1250), false, map[string]any{"outcome": "settled"}, "settled"},
		{"retried: replayed", "pay_create", pay(1250), false, map[string]any{"outcome": "settled", "replayed": true}, "nothing was done twice"},
		{"held", "pay_create", pay(20_000), false, map[string]any{"outcome": "approval_pending", "approveAt": "http://countersign.test/console/", "expiresAt": "2030-01-01T00:00:00Z"}, "wait_for_decision"},
		{"denied", "pay_create", pay(60_000), true, map[string]any{"code": "intent.denied", "action": "stop"}, "Do not retry"},
		{"envelope given", "pay_create", map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": 1}, "envelope": map[string]any{}}, true,
			map[string]any{"action": "fix-request"}, "leave envelope out"},
		{"unknown member", "pay_create", map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": 1}, "tip": 3}, true,
			map[string]any{"action": "fix-request"}, "tip"},
		{"missing path parameter", "intents_get", map[string]any{}, true, map[string]any{"code": "mcp.invalid_arguments"}, "path parameter"},
		{"query parameters", "usage_get", map[string]any{"since": "2026-01-01T00:00:00Z", "until": "2026-01-02T00:00:00Z", "tags": []any{"a=1", "b=2"}}, false,
			map[string]any{"since": "2026-01-01T00:00:00Z"}, "HTTP 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, got := callTool(t, cs, tc.tool, tc.args)
			if res.IsError != tc.isError {
				t.Fatalf("IsError %v: %s", res.IsError, text(res))
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (%v)", k, got[k], v, got)
				}
			}
			if !strings.Contains(text(res), tc.text) {
				t.Errorf("text %q lacks %q", text(res), tc.text)
			}
		})
	}
	if f.paid != 1 {
		t.Errorf("paid %d times, want 1", f.paid)
	}
}

// A deliberate repeat with its own key pays again; the derived key is
// per session.
func TestIdempotencyPerSession(t *testing.T) {
	f := newFake()
	s, cs := connect(t, f, Config{})
	args := map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": 100}}
	_, a := callTool(t, cs, "pay_create", args)
	_, b := callTool(t, cs, "pay_create", map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": 100}, "idempotencyKey": "second-on-purpose"})
	if a["intentId"] == b["intentId"] || f.paid != 2 {
		t.Errorf("a deliberate repeat did not pay: %v %v (paid %d)", a, b, f.paid)
	}
	// Another session: another derived key.
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "t2", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	_, c := callTool(t, cs2, "pay_create", args)
	if ss.ID() == "" && c["intentId"] != a["intentId"] {
		// Sessions without ids share the process's scope.
		t.Errorf("same scope, another key: %v vs %v", c, a)
	}
	if ss.ID() != "" && c["intentId"] == a["intentId"] {
		t.Errorf("another session reused the key: %v", c)
	}
}

func TestWaitForDecision(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, Config{PollInterval: time.Millisecond})
	_, held := callTool(t, cs, "pay_create", map[string]any{"payee": "acct:a.example", "amount": map[string]any{"minor": 30_000}})
	id, _ := held["intentId"].(string)
	// Not yet decided: a short wait says so.
	_, w := callTool(t, cs, waitToolName, map[string]any{"intentId": id, "timeoutSeconds": 1})
	if w["decided"] != false {
		t.Fatalf("undecided: %v", w)
	}
	// Approved and settling is not the end yet.
	f.decide(id, "settling")
	if _, w := callTool(t, cs, waitToolName, map[string]any{"intentId": id, "timeoutSeconds": 1}); w["decided"] != false || w["status"] != "settling" {
		t.Errorf("settling: %v", w)
	}
	for _, status := range []string{"settled", "declined"} {
		f.decide(id, status)
		res, w := callTool(t, cs, waitToolName, map[string]any{"intentId": id})
		if w["decided"] != true || w["status"] != status || res.IsError {
			t.Errorf("%s: %v", status, w)
		}
	}
	res, _ := callTool(t, cs, waitToolName, map[string]any{"intentId": "int_nope"})
	if !res.IsError {
		t.Errorf("unknown intent: %s", text(res))
	}
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

// TestFetchToolSigns: x402_fetch is signed by the server like a purchase:
// the agent gives what to fetch and the most it pays; the tool fills the
// x402 terms, the body's digest, the mandate, and signs with typ
// svc-x402-fetch+jws over the request's canonical bytes.
func TestFetchToolSigns(t *testing.T) {
	f := newFake()
	_, cs := connect(t, f, Config{PollInterval: time.Millisecond})
	res, out := callTool(t, cs, "x402_fetch", map[string]any{"method": "POST", "url": "https://data.example/q",
		"body": "eyJxIjoxfQ==", "maxAmount": map[string]any{"minor": 5, "currency": "USD"}})
	if res.IsError || out["paid"] != true {
		t.Fatalf("%+v %v", res, out)
	}
	if len(f.fetches) != 1 {
		t.Fatalf("%d fetches", len(f.fetches))
	}
	r := f.fetches[0]
	pub := agentKey().Public().(ed25519.PublicKey)
	signed, err := fetch.SigningBytes(&r)
	if err != nil {
		t.Fatal(err)
	}
	if r.Terms.Rail != fetch.RailName || r.BodyDigest != fetch.BodyDigest([]byte(`{"q":1}`)) || r.Envelope.Mandate != "x.y.z" ||
		r.IdempotencyKey == "" || r.Purpose == "" || !verifyDetached(t, pub, fetch.Type, r.Envelope.Signature, signed) {
		t.Fatalf("request %+v", r)
	}
	// An envelope from the agent is refused, never signed over.
	res, _ = callTool(t, cs, "x402_fetch", map[string]any{"method": "GET", "url": "https://data.example/r",
		"maxAmount": map[string]any{"minor": 5, "currency": "USD"}, "envelope": map[string]any{"signature": "x"}})
	if !res.IsError || len(f.fetches) != 1 {
		t.Fatalf("an envelope was accepted: %+v", res)
	}
}

// verifyDetached checks a compact JWS with a detached payload: header
// typ, EdDSA over header.payload.
func verifyDetached(t *testing.T, pub ed25519.PublicKey, typ, sig string, payload []byte) bool {
	t.Helper()
	parts := strings.Split(sig, ".")
	if len(parts) != 3 || parts[1] != "" {
		return false
	}
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return false
	}
	var hdr struct{ Alg, Typ string }
	if json.Unmarshal(h, &hdr) != nil || hdr.Alg != "EdDSA" || hdr.Typ != typ {
		return false
	}
	s, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	return ed25519.Verify(pub, []byte(parts[0]+"."+base64.RawURLEncoding.EncodeToString(payload)), s)
}
