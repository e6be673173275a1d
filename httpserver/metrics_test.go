package httpserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/metrics"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var _ Metrics = (*metrics.Metrics)(nil)

// TestMetricsPerOperation serves a few operations and finds each request
// under its operation id and status class, and every unknown path under
// the one "unmatched" label.
func TestMetricsPerOperation(t *testing.T) {
	m := metrics.New(nil)
	ts := newTestServer(t, Config{Metrics: m, Authenticator: allowAll{}, MaxBodyBytes: 64})
	for _, tc := range []struct {
		method, target string
		body           string
		want           int
	}{
		{"GET", "/healthz", "", 200},
		{"GET", "/healthz", "", 200},
		{"HEAD", "/healthz", "", 200},
		{"GET", "/audit?limit=2", "", 200},
		{"GET", "/audit?limit=500", "", 400},
		{"GET", "/test/fail/denied", "", 403},
		{"GET", "/test/fail/internal", "", 500},
		{"GET", "/test/panic", "", 500},
		{"POST", "/test/echo", strings.Repeat("x", 100), 413}, // refused before routing, still the operation's
		{"GET", "/nope", "", 404},
		{"GET", "/metrics", "", 404},
		{"DELETE", "/healthz", "", 405},
	} {
		var w *httptest.ResponseRecorder
		if tc.body != "" {
			w = ts.do(t, tc.method, tc.target, strings.NewReader(tc.body), "Content-Type", "application/json")
		} else {
			w = ts.do(t, tc.method, tc.target, nil)
		}
		if w.Code != tc.want {
			t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.target, w.Code, tc.want, w.Body)
		}
	}
	const want = `
# HELP countersign_http_requests_total HTTP requests served, by contract operation id ("unmatched" when no route matched) and status class (2xx, 3xx, 4xx, 5xx).
# TYPE countersign_http_requests_total counter
countersign_http_requests_total{code="2xx",operation="audit.list"} 1
countersign_http_requests_total{code="4xx",operation="audit.list"} 1
countersign_http_requests_total{code="2xx",operation="health.get"} 3
countersign_http_requests_total{code="4xx",operation="test.echo"} 1
countersign_http_requests_total{code="4xx",operation="test.fail"} 1
countersign_http_requests_total{code="5xx",operation="test.fail"} 1
countersign_http_requests_total{code="5xx",operation="test.panic"} 1
countersign_http_requests_total{code="4xx",operation="unmatched"} 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "countersign_http_requests_total"); err != nil {
		t.Error(err)
	}
	counts := durationCounts(t, m)
	for op, n := range map[string]uint64{"health.get": 3, "audit.list": 2, "test.fail": 2, "test.panic": 1, "test.echo": 1, "unmatched": 3} {
		if counts[op] != n {
			t.Errorf("duration histogram of %s counted %d, want %d", op, counts[op], n)
		}
	}
	if len(counts) != 6 {
		t.Errorf("duration series for %v; operations never called should have none", counts)
	}
}

// durationCounts returns the sample count of the request duration
// histogram by operation.
func durationCounts(t *testing.T, m *metrics.Metrics) map[string]uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "countersign_http_request_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "operation" {
					out[l.GetValue()] = s.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// TestMetricsNotServedOnTheAPI is the credential decision: metrics are
// for the operator, on a listener of their own. The API answers /metrics
// exactly as any unknown path, with an agent credential, with a valid
// operator signature, or with both, and no operation an agent credential
// opens serves them.
func TestMetricsNotServedOnTheAPI(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(&memstore.Options{RetryRate: -1})
	_, rk, _ := ed25519.GenerateKey(rand.Reader)
	lg, err := audit.Open(ctx, st, rk, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := auth.New(st, lg, nil)
	agent := make([]byte, 32)
	_, _ = rand.Read(agent)
	iss, err := keys.Create(ctx, auth.CreateRequest{Name: "metrics", AgentIDs: []string{hex.EncodeToString(agent)}},
		audit.Actor{Kind: "operator", ID: "op-test"}, "")
	if err != nil {
		t.Fatal(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(rand.Reader)
	verifier, err := operator.NewVerifier(st, []operator.PublicKey{{KeyID: "op-test", Public: opPub}}, testBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := operator.NewSigner(opKey, "op-test", testBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	ts := newTestServer(t, Config{
		Audit: lg, Metrics: m,
		Authenticator: AgentAuthenticator{Keys: keys, BaseURL: testBase},
		Operators:     OperatorAuth{Verifier: verifier},
	})
	// Some traffic, so that there is something to leak.
	ts.do(t, "GET", "/healthz", nil)

	bearer := "Bearer " + iss.Credential
	send := func(method, target, authz string, sign bool, accept string) *httptest.ResponseRecorder {
		t.Helper()
		r := httptest.NewRequest(method, target, nil)
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if sign {
			// A valid signature over exactly this request, under an
			// operation id the model does not have.
			if err := signer.Sign(r, "metrics.get", nil); err != nil {
				t.Fatal(err)
			}
		}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		ts.h.ServeHTTP(w, r)
		return w
	}
	// The agent credential works: it opens the record.
	if w := send("GET", "/audit?limit=1", bearer, false, ""); w.Code != http.StatusOK {
		t.Fatalf("the credential does not open the record: %d %s", w.Code, w.Body)
	}

	// What any unknown path answers, without the parts that name the
	// request.
	shape := func(w *httptest.ResponseRecorder) string {
		var p map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("not a problem: %d %s", w.Code, w.Body)
		}
		delete(p, "requestId")
		delete(p, "instance")
		delete(p, "detail")
		b, _ := json.Marshal(p)
		return w.Result().Status + " " + w.Header().Get("Content-Type") + " " + string(b)
	}
	baseline := send("GET", "/no-such-path", bearer, false, "")
	if baseline.Code != http.StatusNotFound {
		t.Fatalf("unknown path: %d", baseline.Code)
	}
	want := shape(baseline)
	if !strings.Contains(want, `"code":"`+contract.CodeRouteNotFound+`"`) {
		t.Fatalf("unknown path: %s", want)
	}
	for _, target := range []string{"/metrics", "/metrics/", "/metrics?format=prometheus", "/v1/metrics",
		"/debug/pprof/", "/debug/pprof/profile", "/debug/vars", "/healthz/metrics"} {
		for _, c := range []struct {
			name   string
			authz  string
			sign   bool
			accept string
		}{
			{"agent credential", bearer, false, ""},
			{"operator signature", "", true, ""},
			{"both", bearer, true, "application/openmetrics-text; version=1.0.0"},
			{"nothing", "", false, "text/plain; version=0.0.4"},
		} {
			w := send("GET", target, c.authz, c.sign, c.accept)
			if got := shape(w); got != want {
				t.Errorf("GET %s with %s:\n got %s\nwant %s", target, c.name, got, want)
			}
			if strings.Contains(w.Body.String(), "countersign_") {
				t.Errorf("GET %s with %s leaks metrics: %s", target, c.name, w.Body)
			}
		}
	}

	// No operation serves them: none has such a path, and no GET an agent
	// credential may call answers in the exposition format.
	swept := 0
	for _, op := range ts.model(t).Operations() {
		if p := strings.ToLower(op.Path); strings.Contains(p, "metrics") || strings.Contains(p, "pprof") || strings.Contains(p, "debug") {
			t.Errorf("operation %s is served at %s", op.ID, op.Path)
		}
		if op.Method != "GET" || strings.Contains(op.Path, "{") || op.ID == "audit.stream" {
			continue
		}
		w := send("GET", op.Path, bearer, false, "text/plain; version=0.0.4")
		if b := w.Body.String(); strings.Contains(b, "# TYPE") || strings.Contains(b, "countersign_http_requests_total") {
			t.Errorf("GET %s (%s) answers with metrics: %s", op.Path, op.ID, b)
		}
		swept++
	}
	if swept < 10 {
		t.Errorf("only %d operations swept", swept)
	}

	// Meanwhile the metrics were there all along, for the operator.
	sw := httptest.NewRecorder()
	m.Handler().ServeHTTP(sw, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(sw.Body.String(), `countersign_http_requests_total{code="4xx",operation="unmatched"}`) {
		t.Errorf("the operator's scrape lacks the unmatched requests:\n%s", sw.Body)
	}
}

// model returns the served contract model.
func (ts *testServer) model(t *testing.T) *contract.Model {
	t.Helper()
	return ts.srv.model
}

// BenchmarkMetrics measures what metrics add to a request: the same
// route without and with them.
func BenchmarkMetrics(b *testing.B) {
	for _, tc := range []struct {
		name string
		m    Metrics
	}{{"off", nil}, {"on", metrics.New(nil)}} {
		for _, target := range []string{"/healthz", "/nope"} {
			b.Run(tc.name+target, func(b *testing.B) {
				ts := newTestServer(b, Config{Metrics: tc.m})
				b.ReportAllocs()
				for b.Loop() {
					w := httptest.NewRecorder()
					ts.h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
				}
			})
		}
	}
}

// TestMetricsLiveStream: a live stream counts as a subscriber while it
// runs, and as one audit.stream request, with its lifetime, once it ends.
func TestMetricsLiveStream(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	l, err := audit.Open(t.Context(), st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.Update(t.Context(), func(txn store.Txn) error {
		_, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "system", ID: "t"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	hub := audit.NewHub(l, nil)
	defer hub.Close()
	m := metrics.New(nil)
	if err := m.WatchHub(hub); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, Config{Audit: l, AuditHub: hub, Metrics: m})
	srv := httptest.NewServer(ts.h)
	defer srv.Close()
	subscribers := func() float64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "countersign_sse_subscribers" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no countersign_sse_subscribers")
		return 0
	}

	resp, err := srv.Client().Get(srv.URL + "/audit/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := newSSEReader(resp.Body)
	if ev, err := r.next(); err != nil || ev.ID != "1" {
		t.Fatalf("first event: %+v, %v", ev, err)
	}
	if n := subscribers(); n != 1 {
		t.Errorf("%v subscribers while streaming, want 1", n)
	}
	if n := durationCounts(t, m)["audit.stream"]; n != 0 {
		t.Errorf("a running stream is already observed (%d)", n)
	}
	hub.Close() // ends the stream; the client then reads to the end
	for {
		if _, err := r.next(); err != nil {
			break
		}
	}
	if n := subscribers(); n != 0 {
		t.Errorf("%v subscribers after the stream ended, want 0", n)
	}
	if n := durationCounts(t, m)["audit.stream"]; n != 1 {
		t.Errorf("audit.stream observed %d times, want 1", n)
	}
	want := `
# HELP countersign_http_requests_total HTTP requests served, by contract operation id ("unmatched" when no route matched) and status class (2xx, 3xx, 4xx, 5xx).
# TYPE countersign_http_requests_total counter
countersign_http_requests_total{code="2xx",operation="audit.stream"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "countersign_http_requests_total"); err != nil {
		t.Error(err)
	}
}
