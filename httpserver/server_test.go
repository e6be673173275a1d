package httpserver

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// routeCase is a request to a real operation and what must come back.
type routeCase struct {
	op, target, accept string
	method, body       string // default GET, no body
	status             int
	media              string
	check              func(t *testing.T, body []byte)
}

func realRouteCases() []routeCase {
	return []routeCase{
		{op: "audit.list", target: "/audit", status: 200, media: contract.MediaJSON},
		{op: "audit.list", target: "/audit?limit=1", status: 200, media: contract.MediaJSON},
		{op: "audit.checkpoint", target: "/audit/checkpoint", status: 200, media: contract.MediaJSON},
		{op: "audit.checkpoint", target: "/audit/checkpoint", accept: "text/plain", status: 200, media: contract.MediaText},
		{op: "audit.entry", target: "/audit/entries/1", status: 200, media: contract.MediaJSON},
		{op: "audit.entry", target: "/audit/entries/2?treeSize=3", status: 200, media: contract.MediaJSON},
		{op: "audit.consistency", target: "/audit/consistency?from=1", status: 200, media: contract.MediaJSON},
		{op: "audit.consistency", target: "/audit/consistency?from=2&to=3", status: 200, media: contract.MediaJSON},
		{op: "pay.create", method: "POST", target: "/pay", body: `{"idempotencyKey":"k"}`, status: 200, media: contract.MediaJSON},
		{op: "pay.create", method: "POST", target: "/pay", body: `{"idempotencyKey":"held"}`, status: 202, media: contract.MediaJSON},
		{op: "intents.get", target: "/intents/int_1", status: 200, media: contract.MediaJSON},
		{op: "usage.get", target: "/usage?since=2026-11-01T00:00:00Z&until=2026-11-02T00:00:00Z&tags=team=a", status: 200, media: contract.MediaJSON},
		{op: "operator.approve", method: "POST", target: "/operator/approve", body: `{"intentId":"int_1","challenge":"c","mandateId":"m","rationale":"routine check by ops","acknowledged":true}`, status: 200, media: contract.MediaJSON},
		{op: "operator.approve", method: "POST", target: "/operator/approve", body: `{"intentId":"held","challenge":"c","mandateId":"m","rationale":"routine check by ops"}`, status: 202, media: contract.MediaJSON},
		{op: "operator.approve", method: "POST", target: "/operator/approve", body: `{"intentId":"int_1","mandateId":"m","rationale":"routine check by ops","acknowledged":true}`, status: 200, media: contract.MediaJSON},
		{op: "operator.decline", method: "POST", target: "/operator/decline", body: `{"intentId":"int_1","mandateId":"m","rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "operator.refund", method: "POST", target: "/operator/refund", body: `{"intentId":"int_1","amountMinor":5,"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "operator.kill_switch", method: "POST", target: "/operator/kill-switch", body: `{"engaged":true,"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "operator.breaker_reset", method: "POST", target: "/operator/circuit-breaker/reset", body: `{"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "operator.approvals", target: "/operator/approvals?limit=5", status: 200, media: contract.MediaJSON},
		{op: "operator.agents.create", method: "POST", target: "/operator/agents", body: `{"name":"bot","agentIds":["` + strings.Repeat("ab", 32) + `"],"rationale":"routine check by ops"}`, status: 201, media: contract.MediaJSON},
		{op: "operator.agents.list", target: "/operator/agents", status: 200, media: contract.MediaJSON},
		{op: "operator.agents.revoke", method: "DELETE", target: "/operator/agents/ak_1?rationale=key+leaked+in+logs", status: 200, media: contract.MediaJSON},
		{op: "webhooks.create", method: "POST", target: "/webhooks/endpoints", body: `{"url":"https://hooks.example/in","events":["*"],"rationale":"routine check by ops"}`, status: 201, media: contract.MediaJSON},
		{op: "webhooks.list", target: "/webhooks/endpoints", status: 200, media: contract.MediaJSON},
		{op: "webhooks.get", target: "/webhooks/endpoints/we_1", status: 200, media: contract.MediaJSON},
		{op: "webhooks.update", method: "PATCH", target: "/webhooks/endpoints/we_1", body: `{"active":false,"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "webhooks.delete", method: "DELETE", target: "/webhooks/endpoints/we_1?rationale=no+longer+used+by+ops", status: 204, media: ""},
		{op: "webhooks.deliveries", target: "/webhooks/endpoints/we_1/deliveries", status: 200, media: contract.MediaJSON},
		{op: "webhooks.retry", method: "POST", target: "/webhooks/endpoints/we_1/deliveries/evt_1_audit.appended/retry", body: `{"rationale":"routine check by ops"}`, status: 200, media: contract.MediaJSON},
		{op: "operator.settling", target: "/operator/settling", status: 200, media: contract.MediaJSON},
		{op: "intents.events", target: "/intents/int_1/events?limit=5", status: 200, media: contract.MediaJSON},
		{op: "openapi.get", target: "/openapi.json", status: 200, media: contract.MediaJSON},
		{op: "asyncapi.get", target: "/asyncapi.json", status: 200, media: contract.MediaJSON},
		{op: "health.get", target: "/healthz", status: 200, media: contract.MediaJSON, check: func(t *testing.T, b []byte) {
			if string(b) != `{"status":"ok"}`+"\n" {
				t.Errorf("healthz body %q", b)
			}
		}},
		{op: "problems.get", target: "/problems/audit.bad_cursor", status: 200, media: contract.MediaHTML, check: func(t *testing.T, b []byte) {
			for _, want := range []string{"<title>audit.bad_cursor: Bad cursor</title>", "<dd>400</dd>", "fix-request", "nextCursor"} {
				if !strings.Contains(string(b), want) {
					t.Errorf("problem page lacks %q", want)
				}
			}
		}},
	}
}

// runRouteCases serves every case and checks status, media type,
// X-Request-Id and, for JSON, the body against the operation's schema in
// the served document.
func runRouteCases(t *testing.T, ts *testServer, m *contract.Model, cases []routeCase) {
	sch := newSchemas(t, ts.doc)
	seen := make(map[string]bool)
	for _, tc := range cases {
		t.Run(tc.op+" "+tc.target+" "+tc.accept, func(t *testing.T) {
			seen[tc.op] = true
			op, ok := m.Operation(tc.op)
			if !ok {
				t.Fatalf("no operation %s", tc.op)
			}
			method := tc.method
			if method == "" {
				method = "GET"
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			w := ts.do(t, method, tc.target, body, "Accept", tc.accept, "Content-Type", "application/json")
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			ct := w.Header().Get("Content-Type")
			if !strings.HasPrefix(ct, tc.media) {
				t.Errorf("Content-Type %q, want %s", ct, tc.media)
			}
			if w.Header().Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if tc.media == contract.MediaJSON {
				sch.check(t, sch.responseSchema(t, op, strconv.Itoa(tc.status), tc.media), w.Body.Bytes())
			}
			if tc.check != nil {
				tc.check(t, w.Body.Bytes())
			}
		})
	}
	// A stream does not end for a recorder; TestAuditStreamRoute
	// (sse_route_test.go) serves it over a real connection.
	seen["audit.stream"] = true
	for _, op := range product.Model().Operations() {
		if !seen[op.ID] {
			t.Errorf("operation %s has no happy-path case", op.ID)
		}
	}
}

func TestRoutesFake(t *testing.T) {
	m := testModel(t)
	mem := testMemory(t)
	proto := testProtocol(t)
	ts := newTestServer(t, Config{Model: m, Authenticator: allowAll{}, Payments: fakePayments{}, Operators: allowOperator{}, Operations: fakeOperations{}, AgentKeys: fakeAgentKeys{}, Usage: testUsage(t), Webhooks: fakeWebhooks{}, WebhookDeliveries: fakeDeliveries{}, Identity: testIdentity(t), Commerce: fakeCommerce{}, X402: fakeX402{}, Memory: mem.svc, Protocol: proto.svc})
	cases := append(append(append(append(append(realRouteCases(), identityRouteCases()...), commerceRouteCases()...), x402RouteCases()...), memoryRouteCases(t, mem)...), protocolRouteCases(t, proto)...)
	cases = append(cases, routeCase{op: "audit.list", target: "/audit?cursor=Mg", status: 200, media: contract.MediaJSON,
		check: func(t *testing.T, b []byte) {
			var p audit.Page
			if err := json.Unmarshal(b, &p); err != nil || len(p.Data) != 2 || !p.HasMore || *p.NextCursor != "Mg" {
				t.Errorf("page %s", b)
			}
		}})
	runRouteCases(t, ts, m, cases)
}

func TestRoutesPassParameters(t *testing.T) {
	var gotCursor string
	var gotLimit int
	var gotSeq, gotTree, gotFrom, gotTo uint64
	fa := &fakeAudit{
		get: func(_ context.Context, seq uint64) (audit.Entry, error) { return fakeEntry(seq), nil },
		page: func(_ context.Context, c string, l int) (audit.Page, error) {
			gotCursor, gotLimit = c, l
			return audit.Page{}, nil // nil Data must still be served as []
		},
		inclusion: func(_ context.Context, seq, tree uint64) (audit.InclusionProof, error) {
			gotSeq, gotTree = seq, tree
			return audit.InclusionProof{Seq: seq, TreeSize: 1, Checkpoint: fakeCheckpoint}, nil // nil Hashes
		},
		consistency: func(_ context.Context, from, to uint64) (audit.ConsistencyProof, error) {
			gotFrom, gotTo = from, to
			return audit.ConsistencyProof{From: from, To: to, Checkpoint: fakeCheckpoint}, nil
		},
	}
	ts := newTestServer(t, Config{Audit: fa})
	if w := ts.do(t, "GET", "/audit", nil); gotCursor != "" || gotLimit != 20 || !strings.Contains(w.Body.String(), `"data":[]`) {
		t.Errorf("default page: cursor %q limit %d body %s", gotCursor, gotLimit, w.Body)
	}
	ts.do(t, "GET", "/audit?cursor=abc&limit=100", nil)
	if gotCursor != "abc" || gotLimit != 100 {
		t.Errorf("cursor %q limit %d", gotCursor, gotLimit)
	}
	if w := ts.do(t, "GET", "/audit/entries/18446744073709551615?treeSize=7", nil); gotSeq != 1<<64-1 || gotTree != 7 ||
		!strings.Contains(w.Body.String(), `"hashes":[]`) {
		t.Errorf("seq %d tree %d body %s", gotSeq, gotTree, w.Body)
	}
	if w := ts.do(t, "GET", "/audit/consistency?from=2", nil); gotFrom != 2 || gotTo != 0 || !strings.Contains(w.Body.String(), `"hashes":[]`) {
		t.Errorf("from %d to %d body %s", gotFrom, gotTo, w.Body)
	}
}

// TestRoutesRealLog serves a real audit.Log over memstore.
func TestRoutesRealLog(t *testing.T) {
	ctx := t.Context()
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(nil)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	lg, err := audit.Open(ctx, st, key, &audit.Options{Now: func() time.Time { at = at.Add(time.Second); return at }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lg.Close() })
	for i := range 5 {
		err := lg.Update(ctx, func(txn store.Txn) error {
			_, err := lg.Append(txn, audit.Record{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_1"},
				RequestID: "req_" + strconv.Itoa(i), Data: json.RawMessage(`{"outcome":"allow"}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	m := testModel(t)
	mem := testMemory(t)
	proto := testProtocol(t)
	ts := newTestServer(t, Config{Model: m, Audit: lg, Authenticator: allowAll{}, Payments: fakePayments{}, Operators: allowOperator{}, Operations: fakeOperations{}, AgentKeys: fakeAgentKeys{}, Usage: testUsage(t), Webhooks: fakeWebhooks{}, WebhookDeliveries: fakeDeliveries{}, Identity: testIdentity(t), Commerce: fakeCommerce{}, X402: fakeX402{}, Memory: mem.svc, Protocol: proto.svc})
	runRouteCases(t, ts, m, append(append(append(append(append(realRouteCases(), identityRouteCases()...), commerceRouteCases()...), x402RouteCases()...), memoryRouteCases(t, mem)...), protocolRouteCases(t, proto)...))

	// The served entry and proof verify with the record's key alone.
	w := ts.do(t, "GET", "/audit/entries/4?treeSize=5", nil)
	var ep audit.AuditEntryWithProof
	if err := json.Unmarshal(w.Body.Bytes(), &ep); err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyInclusion(lg.VerifierKey(), ep.Entry, ep.Proof); err != nil {
		t.Errorf("served inclusion proof does not verify: %v", err)
	}

	// Paging walks the whole record.
	var seqs []uint64
	target := "/audit?limit=2"
	for range 10 {
		w := ts.do(t, "GET", target, nil)
		var p audit.Page
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Data {
			seqs = append(seqs, e.Seq)
		}
		if p.NextCursor == nil {
			break
		}
		target = "/audit?limit=2&cursor=" + *p.NextCursor
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4, 5}) {
		t.Errorf("paged seqs %v", seqs)
	}

	// Errors of the real log map to their problems.
	for target, code := range map[string]string{
		"/audit?cursor=bm90LWEtY3Vyc29y":     audit.CodeBadCursor,
		"/audit/entries/99":                  audit.CodeNotFound,
		"/audit/entries/5?treeSize=4":        audit.CodeOutOfRange,
		"/audit/consistency?from=3&to=2":     audit.CodeOutOfRange,
		"/audit/consistency?from=1&to=99":    audit.CodeOutOfRange,
		"/audit/entries/1?treeSize=99999999": audit.CodeOutOfRange,
	} {
		w := ts.do(t, "GET", target, nil)
		if p := decodeProblem(t, w); p.Code != code {
			t.Errorf("%s: code %s (%d), want %s", target, p.Code, w.Code, code)
		}
	}
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder) contract.Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != contract.MediaProblem {
		t.Fatalf("Content-Type %q, want problem+json; body %s", ct, w.Body)
	}
	var p contract.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body: %v\n%s", err, w.Body)
	}
	return p
}

func TestProblems(t *testing.T) {
	big := strings.Repeat("x", 2048)
	tests := []struct {
		name, method, target, body string
		header                     []string
		status                     int
		code                       string
		action                     contract.Action
		retryAfter                 int
		errors                     []contract.FieldError
		detail                     string // substring
		allow                      string
		ext                        map[string]any
		noLeak                     string
	}{
		{name: "bad cursor", method: "GET", target: "/audit?cursor=bad", status: 400, code: "audit.bad_cursor", action: "fix-request", detail: "cursor"},
		{name: "limit 0", method: "GET", target: "/audit?limit=0", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "limit", Rule: "min", Message: "must be at least 1"}}},
		{name: "limit 101", method: "GET", target: "/audit?limit=101", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "limit", Rule: "max", Message: "must be at most 100"}}},
		{name: "limit abc", method: "GET", target: "/audit?limit=abc", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "limit", Rule: "type", Message: "must be an integer"}}},
		{name: "unknown query", method: "GET", target: "/audit?limt=5", status: 400, code: "request.unknown_field", action: "fix-request", detail: `"limt"`},
		{name: "unknown seq", method: "GET", target: "/audit/entries/4", status: 404, code: "audit.not_found", action: "fix-request"},
		{name: "seq zero", method: "GET", target: "/audit/entries/0", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "seq", Rule: "min", Message: "must be at least 1"}}},
		{name: "seq abc", method: "GET", target: "/audit/entries/abc", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "seq", Rule: "type", Message: "must be a non-negative integer"}}},
		{name: "out of range proof", method: "GET", target: "/audit/entries/2?treeSize=9", status: 400, code: "audit.out_of_range", action: "fix-request"},
		{name: "consistency without from", method: "GET", target: "/audit/consistency", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "from", Rule: "required", Message: "is required"}}},
		{name: "query on operation without params", method: "GET", target: "/healthz?verbose=1", status: 400, code: "request.unknown_field", action: "fix-request", detail: `"verbose"`},
		{name: "malformed query", method: "GET", target: "/audit?limit=%zz", status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Rule: "syntax", Message: "the query string is not valid percent-encoded name=value pairs"}}},
		{name: "unknown path", method: "GET", target: "/nope", status: 404, code: "route.not_found", action: "fix-request", detail: "/nope"},
		{name: "method not allowed", method: "POST", target: "/audit", status: 405, code: "method.not_allowed", action: "fix-request", allow: "GET, HEAD"},
		{name: "method not allowed on body route", method: "GET", target: "/test/echo", status: 405, code: "method.not_allowed", action: "fix-request", allow: "POST"},
		{name: "too large by length", method: "POST", target: "/test/echo", body: `{"name":"` + big + `"}`, header: []string{"Content-Type", "application/json"},
			status: 413, code: "request.too_large", action: "fix-request", detail: "1024 bytes"},
		{name: "too large even where unrouted", method: "POST", target: "/nope", body: big, status: 413, code: "request.too_large", action: "fix-request"},
		{name: "wrong content type", method: "POST", target: "/test/echo", body: `{"name":"a","count":1}`, header: []string{"Content-Type", "text/plain"},
			status: 415, code: "request.unsupported_media_type", action: "fix-request"},
		{name: "no content type", method: "POST", target: "/test/echo", body: `{"name":"a","count":1}`,
			status: 415, code: "request.unsupported_media_type", action: "fix-request"},
		{name: "other charset", method: "POST", target: "/test/echo", body: `{"name":"a","count":1}`, header: []string{"Content-Type", "application/json; charset=latin1"},
			status: 415, code: "request.unsupported_media_type", action: "fix-request"},
		{name: "malformed JSON", method: "POST", target: "/test/echo", body: `{"name":`, header: []string{"Content-Type", "application/json"},
			status: 400, code: "request.malformed_json", action: "fix-request", detail: "ends unexpectedly"},
		{name: "unknown field", method: "POST", target: "/test/echo", body: `{"name":"a","count":1,"colour":"red"}`, header: []string{"Content-Type", "application/json; charset=UTF-8"},
			status: 400, code: "request.unknown_field", action: "fix-request", detail: `"colour"`},
		{name: "invalid body", method: "POST", target: "/test/echo", body: `{"name":"much too long","count":0}`, header: []string{"Content-Type", "application/json"},
			status: 400, code: "request.validation", action: "fix-request", detail: "2 fields are invalid",
			errors: []contract.FieldError{{Field: "name", Rule: "max", Message: "must have at most 8 characters"}, {Field: "count", Rule: "min", Message: "must be at least 1"}}},
		{name: "wrong type in body", method: "POST", target: "/test/echo", body: `{"name":1,"count":1}`, header: []string{"Content-Type", "application/json"},
			status: 400, code: "request.validation", action: "fix-request",
			errors: []contract.FieldError{{Field: "name", Rule: "type", Message: "must be a string"}}},
		{name: "operator without verifier", method: "POST", target: "/test/operator", body: `{"name":"a","count":1}`, header: []string{"Content-Type", "application/json"},
			status: 401, code: "operator.unauthorized", action: "reauthenticate", detail: "no operator keys"},
		{name: "panic", method: "GET", target: "/test/panic", status: 500, code: "internal", action: "stop", noLeak: "secret-panic-value"},
		{name: "internal error", method: "GET", target: "/test/fail/internal", status: 500, code: "internal", action: "stop", noLeak: "hunter2"},
		{name: "rate limited", method: "GET", target: "/test/fail/rate", status: 429, code: "rate_limited", action: "retry-as-is", retryAfter: 7},
		{name: "denied with extensions", method: "GET", target: "/test/fail/denied", status: 403, code: "intent.denied", action: "stop",
			detail: "denied: per-tx cap", ext: map[string]any{"intentId": "int_1", "auditSeq": float64(42)}},
		{name: "frozen", method: "GET", target: "/test/fail/frozen", status: 503, code: "settlement.frozen", action: "await-operator"},
		{name: "cart not ready", method: "GET", target: "/test/fail/cart", status: 400, code: "intent.malformed", action: "continue-at-link",
			ext: map[string]any{"continueUrl": "https://m.example/c/1"}},
		{name: "tampered", method: "GET", target: "/test/fail/tampered", status: 500, code: "internal", action: "stop", noLeak: "hash mismatch"},
		{name: "unregistered code", method: "GET", target: "/test/fail/unregistered", status: 500, code: "internal", action: "stop", noLeak: "secret-unregistered"},
		{name: "deadline", method: "GET", target: "/test/fail/deadline", status: 503, code: "unavailable", action: "retry-as-is", retryAfter: 5},
		{name: "unencodable extensions", method: "GET", target: "/test/fail/unencodable", status: 503, code: "unavailable", action: "retry-as-is", retryAfter: 5},
		{name: "unknown problem page", method: "GET", target: "/problems/no.such", status: 404, code: "route.not_found", action: "fix-request", detail: "no.such"},
	}
	ts := newTestServer(t, Config{MaxBodyBytes: 1024})
	sch := newSchemas(t, ts.doc)
	problemSchema, err := sch.c.Compile(sch.url + "#/components/schemas/Problem")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body *strings.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			var w *httptest.ResponseRecorder
			if body == nil {
				w = ts.do(t, tt.method, tt.target, nil, tt.header...)
			} else {
				w = ts.do(t, tt.method, tt.target, body, tt.header...)
			}
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			sch.check(t, problemSchema, w.Body.Bytes())
			p := decodeProblem(t, w)
			id := w.Header().Get("X-Request-Id")
			want := contract.Problem{
				Type: testBase + "/problems/" + tt.code, Status: tt.status, Code: tt.code, Action: tt.action,
				Instance: strings.SplitN(tt.target, "?", 2)[0], RequestID: id, RetryAfter: tt.retryAfter, Errors: tt.errors,
			}
			got := p
			got.Title, got.Detail = "", ""
			if !reflect.DeepEqual(got, want) {
				t.Errorf("problem\n got %+v\nwant %+v", got, want)
			}
			if p.Title == "" || id == "" {
				t.Errorf("title %q request id %q", p.Title, id)
			}
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail %q, want it to contain %q", p.Detail, tt.detail)
			}
			if tt.status >= 500 && tt.code == "internal" && p.Detail != "" {
				t.Errorf("internal problem has detail %q", p.Detail)
			}
			if tt.noLeak != "" && strings.Contains(w.Body.String(), tt.noLeak) {
				t.Errorf("body leaks %q: %s", tt.noLeak, w.Body)
			}
			// Retry-After exactly when the action is retry-as-is.
			ra := w.Header().Get("Retry-After")
			if (p.Action == contract.ActionRetryAsIs) != (ra != "") || (ra != "" && ra != strconv.Itoa(p.RetryAfter)) {
				t.Errorf("Retry-After %q with action %s retryAfter %d", ra, p.Action, p.RetryAfter)
			}
			if got := w.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			if tt.ext != nil {
				var m map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &m)
				for k, v := range tt.ext {
					if !reflect.DeepEqual(m[k], v) {
						t.Errorf("member %s = %v, want %v", k, m[k], v)
					}
				}
			}
		})
	}
}

func TestLogLevels(t *testing.T) {
	ts := newTestServer(t, Config{})
	w := ts.do(t, "GET", "/audit?limit=0", nil, "X-Request-Id", "rejected-1")
	w2 := ts.do(t, "GET", "/test/fail/internal", nil, "X-Request-Id", "fault-1")
	w3 := ts.do(t, "GET", "/test/panic", nil, "X-Request-Id", "panic-1")
	if w.Code != 400 || w2.Code != 500 || w3.Code != 500 {
		t.Fatalf("statuses %d %d %d", w.Code, w2.Code, w3.Code)
	}
	type rec struct {
		Level, Msg, RequestID, Error, Panic string
	}
	var recs []rec
	for line := range strings.SplitSeq(strings.TrimSpace(ts.logs.String()), "\n") {
		var r struct {
			Level     string `json:"level"`
			Msg       string `json:"msg"`
			RequestID string `json:"requestId"`
			Error     string `json:"error"`
			Panic     string `json:"panic"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, rec{r.Level, r.Msg, r.RequestID, r.Error, r.Panic})
	}
	want := []rec{
		{"DEBUG", "request rejected", "rejected-1", "contract: invalid request: limit must be at least 1", ""},
		{"ERROR", "request failed", "fault-1", "db: password=hunter2 refused", ""},
		{"ERROR", "panic serving request", "panic-1", "", "secret-panic-value"},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("logs\n got %+v\nwant %+v", recs, want)
	}
}

func TestRequestID(t *testing.T) {
	ts := newTestServer(t, Config{MaxBodyBytes: 16})
	requests := []struct {
		name, method, target, body string
		status                     int
	}{
		{"ok", "GET", "/healthz", "", 200},
		{"not found", "GET", "/nope", "", 404},
		{"method", "DELETE", "/healthz", "", 405},
		{"too large", "POST", "/test/echo", strings.Repeat("x", 17), 413},
		{"media type", "POST", "/test/echo", "{}", 415},
		{"panic", "GET", "/test/panic", "", 500},
		{"openapi", "GET", "/openapi.json", "", 200},
	}
	long := strings.Repeat("a", 129)
	for _, rq := range requests {
		for _, caller := range []struct {
			value string
			keep  bool
		}{
			{"", false},
			{"abc-123_X.~!", true},
			{strings.Repeat("a", 128), true},
			{long, false},
			{"has space", false},
			{"caf\u00e9", false},
			{"tab\there", false},
		} {
			t.Run(rq.name+"/"+caller.value, func(t *testing.T) {
				r := httptest.NewRequest(rq.method, rq.target, strings.NewReader(rq.body))
				if caller.value != "" {
					r.Header.Set("X-Request-Id", caller.value)
				}
				w := httptest.NewRecorder()
				ts.h.ServeHTTP(w, r)
				if w.Code != rq.status {
					t.Fatalf("status %d, want %d", w.Code, rq.status)
				}
				got := w.Header().Get("X-Request-Id")
				if caller.keep {
					if got != caller.value {
						t.Errorf("X-Request-Id %q, want the caller's %q", got, caller.value)
					}
					return
				}
				rest, ok := strings.CutPrefix(got, "req_")
				if !ok {
					t.Fatalf("minted X-Request-Id %q lacks req_", got)
				}
				if _, err := ulid.ParseStrict(rest); err != nil {
					t.Errorf("minted X-Request-Id %q: %v", got, err)
				}
			})
		}
	}
}

func TestMintedRequestIDsAreOrdered(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	ts := newTestServer(t, Config{Now: func() time.Time { return now }})
	var ids []string
	for range 50 {
		ids = append(ids, ts.do(t, "GET", "/healthz", nil).Header().Get("X-Request-Id"))
	}
	if !slices.IsSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("ids minted in one millisecond are not strictly increasing: %v", ids)
	}
	if got := ulid.MustParse(strings.TrimPrefix(ids[0], "req_")).Timestamp(); !got.Equal(now) {
		t.Errorf("ULID time %v, want the injected clock's %v", got, now)
	}
}

func TestRequestIDInContext(t *testing.T) {
	var seen string
	fa := &fakeAudit{checkpoint: func(ctx context.Context) (audit.Checkpoint, error) {
		seen = RequestID(ctx)
		return fakeCheckpoint, nil
	}}
	ts := newTestServer(t, Config{Audit: fa})
	ts.do(t, "GET", "/audit/checkpoint", nil, "X-Request-Id", "trace-42")
	if seen != "trace-42" {
		t.Errorf("RequestID(ctx) = %q", seen)
	}
	if RequestID(context.Background()) != "" {
		t.Error("RequestID of a foreign context is not empty")
	}
}

func TestPanicAfterWriteAborts(t *testing.T) {
	ts := newTestServer(t, Config{})
	s := ts.srv
	r := httptest.NewRequest("GET", "/x", nil)
	w := httptest.NewRecorder()
	tw := &trackingWriter{ResponseWriter: w}
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler", v)
		}
		if w.Code != 200 || w.Body.String() != "partial" {
			t.Errorf("response was altered: %d %q", w.Code, w.Body)
		}
	}()
	func() {
		defer s.recoverPanic(tw, r)
		_, _ = tw.Write([]byte("partial"))
		panic("late")
	}()
}

func TestCheckpointNegotiation(t *testing.T) {
	ts := newTestServer(t, Config{})
	for accept, want := range map[string]string{
		"":                                   contract.MediaJSON,
		"*/*":                                contract.MediaJSON,
		"text/plain":                         "text/plain; charset=utf-8",
		"text/*":                             "text/plain; charset=utf-8",
		"application/json;q=0.5, text/plain": "text/plain; charset=utf-8",
		"text/plain;q=0.1, application/*":    contract.MediaJSON,
		"image/png":                          contract.MediaJSON,
	} {
		w := ts.do(t, "GET", "/audit/checkpoint", nil, "Accept", accept)
		if got := w.Header().Get("Content-Type"); got != want {
			t.Errorf("Accept %q: Content-Type %q, want %q", accept, got, want)
		}
		if want != contract.MediaJSON && w.Body.String() != fakeCheckpoint.Note {
			t.Errorf("Accept %q: body %q", accept, w.Body)
		}
		if w.Header().Get("Vary") != "Accept" {
			t.Errorf("Accept %q: Vary %q", accept, w.Header().Get("Vary"))
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	m := product.Model()
	ts2 := &testServer{}
	h, err := New(Config{BaseURL: testBase + "/", Model: m, Sandbox: true, Audit: &fakeAudit{}})
	if err != nil {
		t.Fatal(err)
	}
	ts2.h = ContractChecked(t, h)
	w := ts2.do(t, "GET", "/openapi.json", nil)
	want, _ := m.OpenAPI(testBase)
	if w.Code != 200 || w.Body.String() != string(want) {
		t.Fatalf("served document differs from Model.OpenAPI: %d", w.Code)
	}
	etag := w.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	w = ts2.do(t, "GET", "/openapi.json", nil, "If-None-Match", etag)
	if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("conditional GET: %d, %d bytes", w.Code, w.Body.Len())
	}
}

type fakeAuth struct {
	p   Principal
	err error
}

func (f fakeAuth) AuthenticateAgent(*http.Request) (Principal, error) { return f.p, f.err }

type fakeOperators struct {
	gotID   string
	gotBody string
	err     error
}

func (f *fakeOperators) VerifyOperator(_ *http.Request, id string, body []byte) (Operator, error) {
	f.gotID, f.gotBody = id, string(body)
	return Operator{KeyID: "op-alice"}, f.err
}

func TestCredentials(t *testing.T) {
	body := `{"name":"x","count":1}`
	ct := []string{"Content-Type", "application/json"}

	// Production with an authenticator: the principal reaches the handler.
	ts := newTestServer(t, Config{Sandbox: false, Authenticator: fakeAuth{p: Principal{KeyID: "ak_7"}}})
	w := ts.do(t, "POST", "/test/echo", strings.NewReader(body), ct...)
	if w.Code != 201 || !strings.Contains(w.Body.String(), `"name":"ak_7"`) {
		t.Errorf("authenticated echo: %d %s", w.Code, w.Body)
	}
	// A refusal keeps its code; credential-free operations stay open.
	ts = newTestServer(t, Config{Authenticator: fakeAuth{err: &codedErr{code: contract.CodeAuthMissing, msg: "auth: no credential"}}})
	w = ts.do(t, "GET", "/audit", nil)
	if p := decodeProblem(t, w); w.Code != 401 || p.Code != "auth.missing" || p.Action != contract.ActionReauthenticate || p.Detail != "no credential" {
		t.Errorf("refused: %d %+v", w.Code, p)
	}
	if w := ts.do(t, "GET", "/healthz", nil); w.Code != 200 {
		t.Errorf("healthz with a refusing authenticator: %d", w.Code)
	}

	// Operator operations go to the verifier with the id and raw body.
	ops := &fakeOperators{}
	ts = newTestServer(t, Config{Operators: ops})
	w = ts.do(t, "POST", "/test/operator", strings.NewReader(body), ct...)
	if w.Code != 200 || ops.gotID != "test.operator" || ops.gotBody != body || !strings.Contains(w.Body.String(), "op-alice") {
		t.Errorf("operator: %d %s id %q body %q", w.Code, w.Body, ops.gotID, ops.gotBody)
	}
	ops.err = &codedErr{code: contract.CodeOperatorUnauthorized, msg: "operator: nonce reused"}
	w = ts.do(t, "POST", "/test/operator", strings.NewReader(body), ct...)
	if p := decodeProblem(t, w); w.Code != 401 || p.Detail != "nonce reused" {
		t.Errorf("operator refused: %d %+v", w.Code, p)
	}
	// An agent credential never opens an operator operation.
	ts = newTestServer(t, Config{Sandbox: true, Authenticator: fakeAuth{p: Principal{KeyID: "ak_1"}}})
	if w := ts.do(t, "POST", "/test/operator", strings.NewReader(body), ct...); w.Code != 401 {
		t.Errorf("agent on operator operation: %d", w.Code)
	}
}

func TestNewRefuses(t *testing.T) {
	m := product.Model()
	ok := Config{BaseURL: testBase, Sandbox: true, Audit: &fakeAudit{}, Model: m}
	tests := []struct {
		name  string
		cfg   func(*Config)
		extra map[string]endpoint
		want  string
	}{
		{name: "no base URL", cfg: func(c *Config) { c.BaseURL = "" }, want: "BaseURL"},
		{name: "relative base URL", cfg: func(c *Config) { c.BaseURL = "/x" }, want: "BaseURL"},
		{name: "no audit", cfg: func(c *Config) { c.Audit = nil }, want: "Audit is required"},
		{name: "production without authenticator", cfg: func(c *Config) { c.Sandbox = false }, want: "Authenticator is required"},
		{name: "negative body limit", cfg: func(c *Config) { c.MaxBodyBytes = -1 }, want: "negative"},
		{name: "operation without handler", cfg: func(c *Config) { c.Model = testModel(t) }, want: "operation test.echo has no handler"},
		{name: "handler without operation", extra: map[string]endpoint{"test.ghost": testEndpoints()["test.panic"]},
			want: "handler test.ghost has no operation"},
		{name: "handler types disagree", extra: map[string]endpoint{"audit.list": testEndpoints()["test.panic"]},
			want: "bound twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			var err error
			if tt.extra != nil {
				_, err = newServer(cfg, tt.extra)
			} else {
				var h http.Handler
				h, err = New(cfg)
				if err != nil && h != nil {
					t.Error("New returned a handler with its error")
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// Production with an authenticator starts.
	cfg := ok
	cfg.Sandbox = false
	cfg.Authenticator = fakeAuth{}
	if _, err := New(cfg); err != nil {
		t.Errorf("production with authenticator: %v", err)
	}
}

func TestEndpointTypeChecks(t *testing.T) {
	m := testModel(t)
	eps := map[string]endpoint{
		"audit.list": jsonEndpoint(func(context.Context, *noParams, *noBody) (audit.Page, error) { return audit.Page{}, nil }),
		"test.echo":  jsonEndpoint(func(context.Context, *noParams, *noBody) (echoBody, error) { return echoBody{}, nil }),
		"health.get": jsonEndpoint(func(context.Context, *noParams, *noBody) (audit.Page, error) { return audit.Page{}, nil }),
	}
	for id, ep := range eps {
		op, _ := m.Operation(id)
		if err := ep.agrees(op); err == nil {
			t.Errorf("%s: mismatched endpoint accepted", id)
		}
	}
}

func TestEveryProblemCodeHasAPage(t *testing.T) {
	ts := newTestServer(t, Config{})
	for _, p := range product.Model().Problems() {
		w := ts.do(t, "GET", "/problems/"+p.Code, nil)
		if w.Code != 200 || !strings.Contains(w.Body.String(), p.Title) {
			t.Errorf("%s: %d", p.Code, w.Code)
		}
	}
	// The page escapes what it shows.
	s := ts.srv
	var b strings.Builder
	if err := s.pageTmpl.Execute(&b, problemPage{ProblemType: contract.ProblemType{Title: "<script>"}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>") {
		t.Error("problem page does not escape")
	}
}

func TestClientDetail(t *testing.T) {
	for in, want := range map[string]string{
		"audit: malformed cursor":  "malformed cursor",
		"no prefix here":           "no prefix here",
		"Not a pkg: x":             "Not a pkg: x",
		"pay: idem: conflict":      "idem: conflict",
		": empty":                  ": empty",
		"pebble2: closed database": "closed database",
	} {
		if got := clientDetail(in); got != want {
			t.Errorf("clientDetail(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCanceledRequest(t *testing.T) {
	fa := &fakeAudit{checkpoint: func(ctx context.Context) (audit.Checkpoint, error) {
		return audit.Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", ctx.Err())
	}}
	ts := newTestServer(t, Config{Audit: fa})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/audit/checkpoint", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	ts.h.ServeHTTP(w, r)
	if p := decodeProblem(t, w); w.Code != 503 || p.Code != contract.CodeUnavailable {
		t.Errorf("canceled: %d %s", w.Code, p.Code)
	}
	// A canceled error on a live request is not the client's leaving.
	fa.checkpoint = func(context.Context) (audit.Checkpoint, error) { return audit.Checkpoint{}, context.Canceled }
	if w := ts.do(t, "GET", "/audit/checkpoint", nil); w.Code != 500 {
		t.Errorf("stray context.Canceled: %d", w.Code)
	}
	fa.checkpoint = func(context.Context) (audit.Checkpoint, error) {
		return audit.Checkpoint{}, fmt.Errorf("audit: checkpoint: %w", audit.ErrClosed)
	}
	if w := ts.do(t, "GET", "/audit/checkpoint", nil); w.Code != 503 {
		t.Errorf("closed log: %d", w.Code)
	}
}

// TestSandboxOperatorReads: a sandbox without an Authenticator serves the
// record to anyone, but no intent without a credential (there is no agent
// key to own one); an operator's signature reads any intent there, and a
// refused signature is not rescued by the sandbox's openness.
func TestSandboxOperatorReads(t *testing.T) {
	for _, tc := range []struct {
		name      string
		operators OperatorVerifier
		target    string
		header    []string
		status    int
		code      string
		owner     string // the intent's agent key, for a 200 of intents.get
	}{
		{"record without credential", allowOperator{}, "/audit", nil, 200, "", ""},
		{"intent without credential", allowOperator{}, "/intents/int_1", nil, 401, contract.CodeAuthMissing, ""},
		{"intent events without credential", allowOperator{}, "/intents/int_1/events", nil, 401, contract.CodeAuthMissing, ""},
		{"intent by an operator", allowOperator{}, "/intents/int_1", []string{"Svc-Operator", "signed"}, 200, "", "ak_other"},
		{"intent events by an operator", allowOperator{}, "/intents/int_1/events", []string{"Svc-Operator", "signed"}, 200, "", ""},
		{"record by an operator", allowOperator{}, "/audit", []string{"Svc-Operator", "signed"}, 200, "", ""},
		{"record by a refused operator", refuseOperator{}, "/audit", []string{"Svc-Operator", "forged"}, 401, contract.CodeOperatorUnauthorized, ""},
		{"record by an operator, no keys configured", nil, "/audit", []string{"Svc-Operator", "signed"}, 401, contract.CodeOperatorUnauthorized, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestServer(t, Config{Sandbox: true, Operators: tc.operators, Payments: fakePayments{}})
			w := ts.do(t, "GET", tc.target, nil, tc.header...)
			var body struct{ Code, AgentKeyID string }
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tc.status || body.Code != tc.code || body.AgentKeyID != tc.owner {
				t.Fatalf("%d %q (agent key %q), want %d %q (%q)\n%s", w.Code, body.Code, body.AgentKeyID, tc.status, tc.code, tc.owner, w.Body)
			}
		})
	}
}

// refuseOperator refuses every operator request.
type refuseOperator struct{}

func (refuseOperator) VerifyOperator(*http.Request, string, []byte) (Operator, error) {
	return Operator{}, errcode.New(contract.CodeOperatorUnauthorized, "refused")
}
