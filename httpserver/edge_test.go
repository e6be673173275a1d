package httpserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store/memstore"
)

// edgeClock is a settable clock for the limiter and usage.
type edgeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *edgeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *edgeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// edge is a server with the real agent edge: keys, DPoP, limiter, usage.
type edge struct {
	ts    *testServer
	keys  *auth.Keys
	usage *auth.Usage
	clock *edgeClock
}

func newEdge(t *testing.T, rate float64, burst int) *edge {
	t.Helper()
	clock := &edgeClock{t: time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)}
	st := memstore.New(&memstore.Options{RetryRate: -1})
	_, rk, _ := ed25519.GenerateKey(rand.Reader)
	lg, err := audit.Open(t.Context(), st, rk, &audit.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.New(st, lg, &auth.Options{Now: clock.Now})
	lim, err := auth.NewLimiter(&auth.LimiterOptions{Rate: rate, Burst: burst, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	usage := auth.NewUsage(st, &auth.UsageOptions{Now: clock.Now, FlushEvery: time.Hour})
	t.Cleanup(func() { _ = usage.Close(context.Background()) })
	ts := newTestServer(t, Config{
		Audit: lg, Now: clock.Now,
		Authenticator: AgentAuthenticator{Keys: keys, DPoP: auth.NewDPoPVerifier(st, &auth.DPoPOptions{Now: clock.Now}), BaseURL: testBase},
		Limiter:       lim, Usage: usage, Payments: fakePayments{},
	})
	return &edge{ts: ts, keys: keys, usage: usage, clock: clock}
}

func (e *edge) issue(t *testing.T, jkt string) string {
	t.Helper()
	agent := make([]byte, 32)
	_, _ = rand.Read(agent)
	iss, err := e.keys.Create(context.Background(), auth.CreateRequest{Name: "edge", AgentIDs: []string{hex.EncodeToString(agent)}, JKT: jkt},
		audit.Actor{Kind: "operator", ID: "op-test"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return iss.Credential
}

func TestRateLimitHeaders(t *testing.T) {
	e := newEdge(t, 2, 3) // 2 tokens/s, burst 3
	cred := "Bearer " + e.issue(t, "")
	wantRemaining := []int{2, 1, 0}
	for i, want := range wantRemaining {
		w := e.ts.do(t, "GET", "/audit", nil, "Authorization", cred)
		if w.Code != 200 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		h := w.Header()
		if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != strconv.Itoa(want) {
			t.Fatalf("request %d: limit %q remaining %q, want 3 and %d", i, h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), want)
		}
		if h.Get("Retry-After") != "" {
			t.Fatalf("request %d: Retry-After on a success", i)
		}
	}
	// The bucket is empty: refilling 3 tokens at 2/s takes 1.5 s from now.
	w := e.ts.do(t, "GET", "/audit", nil, "Authorization", cred)
	if w.Code != 429 {
		t.Fatalf("over the burst: %d %s", w.Code, w.Body)
	}
	var p contract.Problem
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	h := w.Header()
	if p.Code != "rate_limited" || p.Action != contract.ActionRetryAsIs || h.Get("Retry-After") != "1" || p.RetryAfter != 1 ||
		h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-Request-Id") == "" {
		t.Fatalf("429: headers %v problem %+v", h, p)
	}
	reset, _ := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if want := e.clock.Now().Add(1500 * time.Millisecond); reset != want.Add(time.Second-1).Truncate(time.Second).Unix() {
		t.Fatalf("X-RateLimit-Reset %d, want the second the bucket is full again (%v)", reset, want)
	}
	// Half a second later one token is back.
	e.clock.Add(500 * time.Millisecond)
	if w := e.ts.do(t, "GET", "/audit", nil, "Authorization", cred); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("after refill: %d remaining %q", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Routes that consume no agent token carry no X-RateLimit headers.
	if w := e.ts.do(t, "GET", "/healthz", nil); w.Header().Get("X-RateLimit-Limit") != "" {
		t.Fatal("healthz carries X-RateLimit headers without an address limiter")
	}
}

func TestUsageCounting(t *testing.T) {
	e := newEdge(t, 1000, 1000)
	cred := "Bearer " + e.issue(t, "")
	calls := []struct{ path, tags string }{
		{"/audit", "team=growth, project=alpha"},
		{"/audit", "team=growth"},
		{"/audit?limit=500", "team=growth, bad tag!, " + strings.Repeat("x", 65)}, // a 400, malformed tags dropped
		{"/intents/int_1", ""},
		{"/audit/checkpoint", "project=alpha"},
	}
	for _, c := range calls {
		w := e.ts.do(t, "GET", c.path, nil, "Authorization", cred, "X-Svc-Tags", c.tags)
		if w.Code >= 500 {
			t.Fatalf("%s: %d %s", c.path, w.Code, w.Body)
		}
	}
	report := func(tags string) auth.Report {
		t.Helper()
		q := "/usage?since=2026-11-23T10:00:00Z&until=2026-11-23T11:00:00Z"
		for _, tag := range strings.Split(tags, ",") {
			if tag != "" {
				q += "&tags=" + tag
			}
		}
		w := e.ts.do(t, "GET", q, nil, "Authorization", cred)
		if w.Code != 200 {
			t.Fatalf("usage: %d %s", w.Code, w.Body)
		}
		var r auth.Report
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	all := report("")
	if all.Total != 5 || all.ByOperation["audit.list"] != 3 || all.ByOperation["intents.get"] != 1 ||
		all.ByOutcome["ok"] != 4 || all.ByOutcome["request.validation"] != 1 || all.ByTag["team=growth"] != 3 {
		t.Fatalf("all usage: %+v", all)
	}
	if r := report("team=growth,project=alpha"); r.Total != 1 {
		t.Fatalf("AND filter: %+v", r)
	}
	if r := report("project=alpha"); r.Total != 2 {
		t.Fatalf("project filter: %+v", r)
	}
	w := e.ts.do(t, "GET", "/usage?since=2026-11-23T11:00:00Z&until=2026-11-23T10:00:00Z", nil, "Authorization", cred)
	if w.Code != 400 || !strings.Contains(w.Body.String(), "usage.bad_window") {
		t.Fatalf("reversed window: %d %s", w.Code, w.Body)
	}
	// Another key sees only its own usage.
	other := "Bearer " + e.issue(t, "")
	w = e.ts.do(t, "GET", "/usage?since=2026-11-23T10:00:00Z&until=2026-11-23T11:00:00Z", nil, "Authorization", other)
	var r auth.Report
	_ = json.Unmarshal(w.Body.Bytes(), &r)
	if r.Total != 0 {
		t.Fatalf("another key's report counts this key's calls: %+v", r)
	}
}

func TestDPoPAtTheEdge(t *testing.T) {
	e := newEdge(t, 1000, 1000)
	edKey := func() (ed25519.PrivateKey, string) {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		jkt, err := auth.Thumbprint(k.Public())
		if err != nil {
			t.Fatal(err)
		}
		return k, jkt
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecJKT, _ := auth.Thumbprint(ecKey.Public())
	ed, edJKT := edKey()

	for _, tc := range []struct {
		name string
		jkt  string
		key  any
	}{
		{"EdDSA", edJKT, ed},
		{"ES256", ecJKT, ecKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cred := e.issue(t, tc.jkt)
			var proof string
			var err error
			switch k := tc.key.(type) {
			case ed25519.PrivateKey:
				proof, err = auth.NewDPoPProof(k, "GET", testBase+"/audit", cred, e.clock.Now())
			case *ecdsa.PrivateKey:
				proof, err = auth.NewDPoPProof(k, "GET", testBase+"/audit", cred, e.clock.Now())
			}
			if err != nil {
				t.Fatal(err)
			}
			if w := e.ts.do(t, "GET", "/audit?limit=2", nil, "Authorization", "DPoP "+cred, "DPoP", proof); w.Code != 200 {
				t.Fatalf("valid proof: %d %s", w.Code, w.Body)
			}
			// The same proof again is a replay.
			w := e.ts.do(t, "GET", "/audit", nil, "Authorization", "DPoP "+cred, "DPoP", proof)
			if w.Code != 401 || !strings.Contains(w.Header().Get("WWW-Authenticate"), `error="invalid_dpop_proof"`) ||
				!strings.Contains(w.Body.String(), "jti_replayed") {
				t.Fatalf("replayed proof: %d %v %s", w.Code, w.Header(), w.Body)
			}
			// A bound key used as a bearer token is refused.
			if w := e.ts.do(t, "GET", "/audit", nil, "Authorization", "Bearer "+cred); w.Code != 401 {
				t.Fatalf("bound key as bearer: %d %s", w.Code, w.Body)
			}
			// No proof at all.
			if w := e.ts.do(t, "GET", "/audit", nil, "Authorization", "DPoP "+cred); w.Code != 401 ||
				w.Header().Get("WWW-Authenticate") == "" {
				t.Fatalf("missing proof: %d %s", w.Code, w.Body)
			}
		})
	}
	t.Run("proof for another URL", func(t *testing.T) {
		cred := e.issue(t, edJKT)
		proof, _ := auth.NewDPoPProof(ed, "GET", testBase+"/intents/int_1", cred, e.clock.Now())
		if w := e.ts.do(t, "GET", "/audit", nil, "Authorization", "DPoP "+cred, "DPoP", proof); w.Code != 401 ||
			!strings.Contains(w.Body.String(), "htu_mismatch") {
			t.Fatalf("wrong htu: %d %s", w.Code, w.Body)
		}
	})
	t.Run("unbound key with the DPoP scheme", func(t *testing.T) {
		cred := e.issue(t, "")
		proof, _ := auth.NewDPoPProof(ed, "GET", testBase+"/audit", cred, e.clock.Now())
		if w := e.ts.do(t, "GET", "/audit", nil, "Authorization", "DPoP "+cred, "DPoP", proof); w.Code != 401 {
			t.Fatalf("unbound key with DPoP: %d %s", w.Code, w.Body)
		}
	})
}

// TestRequestIDOnEveryRoute walks every operation of the contract with no
// credential and with a valid one, and checks X-Request-Id on whatever
// comes back, and Retry-After exactly when the problem says retry-as-is.
func TestRequestIDOnEveryRoute(t *testing.T) {
	e := newEdge(t, 1000, 1000)
	cred := "Bearer " + e.issue(t, "")
	for _, op := range product.Model().Operations() {
		path := op.Path
		for _, p := range []string{"{id}", "{seq}", "{code}", "{eventId}"} {
			path = strings.ReplaceAll(path, p, "1")
		}
		for _, auth := range []string{"", cred} {
			w := e.ts.do(t, op.Method, path, strings.NewReader("{}"), "Authorization", auth, "Content-Type", "application/json",
				"X-Request-Id", "caller-supplied-1")
			if got := w.Header().Get("X-Request-Id"); got != "caller-supplied-1" {
				t.Errorf("%s %s: X-Request-Id %q", op.Method, path, got)
			}
			var p contract.Problem
			if strings.HasPrefix(w.Header().Get("Content-Type"), contract.MediaProblem) {
				if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
					t.Fatalf("%s %s: problem does not parse: %s", op.Method, path, w.Body)
				}
				if (p.Action == contract.ActionRetryAsIs) != (w.Header().Get("Retry-After") != "") {
					t.Errorf("%s %s: action %s with Retry-After %q", op.Method, path, p.Action, w.Header().Get("Retry-After"))
				}
				if p.RequestID != "caller-supplied-1" {
					t.Errorf("%s %s: problem requestId %q", op.Method, path, p.RequestID)
				}
			}
		}
	}
}
