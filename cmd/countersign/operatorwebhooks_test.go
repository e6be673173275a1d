package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

// seenRequest is what the fake operator server received, its signature
// verified for the operation its route is.
type seenRequest struct {
	op, method, path, query string
	body                    map[string]any
}

// fakeOperatorServer serves canned answers on the operator routes the CLI
// calls, after checking each request's Svc-Operator signature for the
// route's operation with a real verifier (the nonce store included). It
// records what it accepted.
type fakeOperatorServer struct {
	url, key string
	mu       sync.Mutex
	seen     []seenRequest
}

func newFakeOperatorServer(t *testing.T, answers map[string]struct {
	status int
	body   string
}) *fakeOperatorServer {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeOperatorServer{key: filepath.Join(t.TempDir(), "op.jwk.json")}
	if err := keyfile.Write(f.key, priv, "op-test"); err != nil {
		t.Fatal(err)
	}
	var v *operator.Verifier
	mux := http.NewServeMux()
	route := func(pattern, op string) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			raw, _ := io.ReadAll(r.Body)
			var body []byte
			if len(raw) > 0 {
				body = raw
			}
			r.Body = io.NopCloser(bytes.NewReader(raw))
			if _, err := v.Verify(r, op, body); err != nil {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"code":"operator.unauthorized","detail":"`+err.Error()+`"}`)
				return
			}
			s := seenRequest{op: op, method: r.Method, path: r.URL.Path, query: r.URL.RawQuery}
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &s.body); err != nil {
					t.Errorf("%s: body %s: %v", op, raw, err)
				}
			}
			f.mu.Lock()
			f.seen = append(f.seen, s)
			f.mu.Unlock()
			a, ok := answers[op]
			if !ok {
				t.Errorf("no answer for %s", op)
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
			if a.status == http.StatusNoContent {
				w.WriteHeader(a.status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.status)
			_, _ = io.WriteString(w, a.body)
		})
	}
	route("GET /webhooks/endpoints", "webhooks.list")
	route("POST /webhooks/endpoints", "webhooks.create")
	route("PATCH /webhooks/endpoints/{id}", "webhooks.update")
	route("DELETE /webhooks/endpoints/{id}", "webhooks.delete")
	route("GET /operator/approvals", "operator.approvals")
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	if v, err = operator.NewVerifier(memstore.New(nil), []operator.PublicKey{{KeyID: "op-test", Public: pub}}, srv.URL, nil); err != nil {
		t.Fatal(err)
	}
	return f
}

// take returns and forgets what the server accepted.
func (f *fakeOperatorServer) take() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.seen
	f.seen = nil
	return out
}

// runCLI runs the CLI and returns its exit code, stdout and stderr.
func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestOperatorWebhooks drives the webhook endpoint routes from the CLI
// against a server that verifies each signature for the route's
// operation: the request each action sends (only members the routes
// accept, a rationale where they take one: the body, or the signed query
// of a DELETE) and what it prints, including the secret a creation shows
// once.
func TestOperatorWebhooks(t *testing.T) {
	const why = "a receiver for the finance team"
	const endpoint = `{"id":"we_1","url":"https://hooks.example/in","events":["*"],"active":true,"createdAt":"2026-11-23T10:00:00Z"}`
	srv := newFakeOperatorServer(t, map[string]struct {
		status int
		body   string
	}{
		"webhooks.list":   {200, `{"data":[` + endpoint + `],"hasMore":false,"nextCursor":null}`},
		"webhooks.create": {201, strings.TrimSuffix(endpoint, "}") + `,"secret":"whsec_shown-once"}`},
		"webhooks.update": {200, endpoint},
		"webhooks.delete": {204, ""},
	})
	for _, tc := range []struct {
		name     string
		args     []string
		want     *seenRequest // nil: refused before any request
		wantCode int
		wantOut  string // in stdout (or stderr for a refusal)
	}{
		{
			name: "list, paged", args: []string{"webhooks", "list", "--limit", "5", "--cursor", "c1"},
			want:    &seenRequest{op: "webhooks.list", method: "GET", path: "/webhooks/endpoints", query: "cursor=c1&limit=5"},
			wantOut: `"id": "we_1"`,
		},
		{
			name: "create: every kind by default, and the secret is printed",
			args: []string{"webhooks", "create", "--endpoint-url", "https://hooks.example/in", "--rationale", why},
			want: &seenRequest{op: "webhooks.create", method: "POST", path: "/webhooks/endpoints",
				body: map[string]any{"url": "https://hooks.example/in", "events": []any{"*"}, "rationale": why}},
			wantOut: `"secret": "whsec_shown-once"`,
		},
		{
			name: "create: events and inactive",
			args: []string{"webhooks", "create", "--endpoint-url", "https://hooks.example/in", "--events", "payment.settled, approval.pending",
				"--active=false", "--rationale", why},
			want: &seenRequest{op: "webhooks.create", method: "POST", path: "/webhooks/endpoints",
				body: map[string]any{"url": "https://hooks.example/in", "events": []any{"payment.settled", "approval.pending"}, "active": false, "rationale": why}},
			wantOut: "201 Created",
		},
		{
			name:    "create without a destination",
			args:    []string{"webhooks", "create", "--rationale", why},
			wantOut: "--endpoint-url is required", wantCode: 1,
		},
		{
			name: "update: only what is given",
			args: []string{"webhooks", "update", "--id", "we_1", "--events", "payment.settled", "--active=true", "--rotate-secret", "--rationale", why},
			want: &seenRequest{op: "webhooks.update", method: "PATCH", path: "/webhooks/endpoints/we_1",
				body: map[string]any{"events": []any{"payment.settled"}, "active": true, "rotateSecret": true, "rationale": why}},
			wantOut: "200 OK",
		},
		{
			name: "update: a new destination, --active alone means true",
			args: []string{"webhooks", "update", "--id", "we_1", "--endpoint-url", "https://hooks.example/v2", "--active", "--rationale", why},
			want: &seenRequest{op: "webhooks.update", method: "PATCH", path: "/webhooks/endpoints/we_1",
				body: map[string]any{"url": "https://hooks.example/v2", "active": true, "rationale": why}},
			wantOut: "200 OK",
		},
		{
			name:    "update without a change",
			args:    []string{"webhooks", "update", "--id", "we_1", "--rationale", why},
			wantOut: "give at least one of", wantCode: 1,
		},
		{
			name:    "update without an id",
			args:    []string{"webhooks", "update", "--events", "*", "--rationale", why},
			wantOut: "--id is required", wantCode: 1,
		},
		{
			name: "delete: the rationale is a signed query parameter",
			args: []string{"webhooks", "delete", "--id", "we_1", "--rationale", why},
			want: &seenRequest{op: "webhooks.delete", method: "DELETE", path: "/webhooks/endpoints/we_1",
				query: "rationale=a+receiver+for+the+finance+team"},
			wantOut: "204 No Content",
		},
		{
			name:    "an unknown webhooks action",
			args:    []string{"webhooks", "rotate", "--id", "we_1"},
			wantOut: `unknown action "webhooks rotate"`, wantCode: 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"operator", tc.args[0], tc.args[1], "--url", srv.url, "--key", srv.key}, tc.args[2:]...)
			code, out, errOut := runCLI(args...)
			seen := srv.take()
			if code != tc.wantCode || !strings.Contains(out+errOut, tc.wantOut) {
				t.Fatalf("exit %d, want %d with %q in:\n%s%s", code, tc.wantCode, tc.wantOut, out, errOut)
			}
			if tc.want == nil {
				if len(seen) != 0 {
					t.Fatalf("sent %+v, want nothing", seen)
				}
				return
			}
			if len(seen) != 1 {
				t.Fatalf("the server accepted %d requests, want 1: %+v\n%s%s", len(seen), seen, out, errOut)
			}
			got, want := seen[0], *tc.want
			gb, _ := json.Marshal(got.body)
			wb, _ := json.Marshal(want.body)
			if got.op != want.op || got.method != want.method || got.path != want.path || got.query != want.query || !bytes.Equal(gb, wb) {
				t.Errorf("sent %s %s %s?%s %s\nwant %s %s %s?%s %s", got.op, got.method, got.path, got.query, gb,
					want.op, want.method, want.path, want.query, wb)
			}
		})
	}
}
