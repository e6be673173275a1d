package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

const testBase = "https://countersign.example"

// fakeAudit is an AuditLog whose methods are func fields; unset ones
// answer from a small fixed record of three entries.
type fakeAudit struct {
	page        func(ctx context.Context, cursor string, limit int) (audit.Page, error)
	get         func(ctx context.Context, seq uint64) (audit.Entry, error)
	checkpoint  func(ctx context.Context) (audit.Checkpoint, error)
	inclusion   func(ctx context.Context, seq, treeSize uint64) (audit.InclusionProof, error)
	consistency func(ctx context.Context, from, to uint64) (audit.ConsistencyProof, error)
}

var fakeCheckpoint = audit.Checkpoint{
	Origin: "countersign/test", TreeSize: 3, RootHash: "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=",
	Note: "countersign/test\n3\nq83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80=\n\n— countersign/test AAAA\n",
}

func fakeEntry(seq uint64) audit.Entry {
	return audit.Entry{
		Seq: seq, At: "2026-11-22T10:00:00.123456Z", Type: "gate.decision", IntentID: "int_01",
		Actor: audit.Actor{Kind: "agent", ID: "ak_1"}, RequestID: "req_x", Data: json.RawMessage(`{"outcome":"allow"}`),
		Prev: strings.Repeat("0", 64), Hash: strings.Repeat("a", 64), Sig: "c2ln",
	}
}

func (f *fakeAudit) Page(ctx context.Context, cursor string, limit int) (audit.Page, error) {
	if f.page != nil {
		return f.page(ctx, cursor, limit)
	}
	if cursor != "" && cursor != "Mg" {
		return audit.Page{}, fmt.Errorf("audit: page: %w", audit.ErrBadCursor)
	}
	next := "Mg"
	return audit.Page{Data: []audit.Entry{fakeEntry(1), fakeEntry(2)}, HasMore: true, NextCursor: &next}, nil
}

func (f *fakeAudit) Get(ctx context.Context, seq uint64) (audit.Entry, error) {
	if f.get != nil {
		return f.get(ctx, seq)
	}
	if seq > 3 {
		return audit.Entry{}, audit.ErrNotFound
	}
	return fakeEntry(seq), nil
}

func (f *fakeAudit) Checkpoint(ctx context.Context) (audit.Checkpoint, error) {
	if f.checkpoint != nil {
		return f.checkpoint(ctx)
	}
	return fakeCheckpoint, nil
}

func (f *fakeAudit) Inclusion(ctx context.Context, seq, treeSize uint64) (audit.InclusionProof, error) {
	if f.inclusion != nil {
		return f.inclusion(ctx, seq, treeSize)
	}
	if treeSize > 3 || (treeSize != 0 && seq > treeSize) {
		return audit.InclusionProof{}, audit.ErrOutOfRange
	}
	return audit.InclusionProof{Seq: seq, LeafIndex: seq - 1, TreeSize: 3, LeafHash: "AAAA",
		Hashes: []string{"BBBB", "CCCC"}, Checkpoint: fakeCheckpoint}, nil
}

func (f *fakeAudit) Consistency(ctx context.Context, from, to uint64) (audit.ConsistencyProof, error) {
	if f.consistency != nil {
		return f.consistency(ctx, from, to)
	}
	if to > 3 || from > 3 || (to != 0 && from > to) {
		return audit.ConsistencyProof{}, audit.ErrOutOfRange
	}
	return audit.ConsistencyProof{From: from, To: 3, Checkpoint: fakeCheckpoint}, nil
}

// codedErr is a domain error in the shape later packages will use.
type codedErr struct {
	code   string
	msg    string
	retry  time.Duration
	ext    map[string]any
	action string
}

func (e *codedErr) Error() string                     { return e.msg }
func (e *codedErr) Code() string                      { return e.code }
func (e *codedErr) RetryAfter() time.Duration         { return e.retry }
func (e *codedErr) ProblemExtensions() map[string]any { return e.ext }
func (e *codedErr) ProblemAction() string             { return e.action }

// Test-only operations, so that body handling, panics and domain errors
// can be exercised before real operations that need them exist.
type echoBody struct {
	Name  string `json:"name" validate:"required,max=8"`
	Count int    `json:"count" validate:"min=1"`
}

type failParams struct {
	Kind string `path:"kind"`
}

func testOperations() []contract.Operation {
	echo := reflect.TypeFor[echoBody]()
	return []contract.Operation{
		{ID: "test.echo", Method: "POST", Path: "/test/echo", Summary: "Echo", Credential: contract.CredentialAgent,
			Body: echo, Responses: []contract.Response{contract.JSON(201, "Echoed.", echo)}},
		{ID: "test.panic", Method: "GET", Path: "/test/panic", Summary: "Panic", Credential: contract.CredentialNone,
			Responses: []contract.Response{contract.JSON(200, "Never.", echo)}},
		{ID: "test.fail", Method: "GET", Path: "/test/fail/{kind}", Summary: "Fail", Credential: contract.CredentialNone,
			Params: reflect.TypeFor[failParams](), Responses: []contract.Response{contract.JSON(200, "Never.", echo)},
			Problems:       []string{pay.CodeDenied, pay.CodeFrozen, pay.CodeMalformed, contract.CodeUnavailable},
			ProblemMembers: map[string]reflect.Type{pay.CodeMalformed: reflect.TypeFor[commerce.NotReadyMembers]()}},
		{ID: "test.operator", Method: "POST", Path: "/test/operator", Summary: "Operator", Credential: contract.CredentialOperator,
			Body: echo, Responses: []contract.Response{contract.JSON(200, "Done.", echo)}},
	}
}

func testEndpoints() map[string]endpoint {
	return map[string]endpoint{
		"test.echo": jsonEndpoint(func(ctx context.Context, _ *noParams, b *echoBody) (echoBody, error) {
			if p, ok := PrincipalFrom(ctx); ok {
				b.Name = p.KeyID
			}
			return *b, nil
		}),
		"test.panic": jsonEndpoint(func(context.Context, *noParams, *noBody) (echoBody, error) {
			panic("secret-panic-value")
		}),
		"test.fail": jsonEndpoint(func(ctx context.Context, p *failParams, _ *noBody) (echoBody, error) {
			switch p.Kind {
			case "internal":
				return echoBody{}, errors.New("db: password=hunter2 refused")
			case "rate":
				return echoBody{}, &codedErr{code: contract.CodeRateLimited, msg: "auth: bucket empty", retry: 6500 * time.Millisecond}
			case "denied":
				return echoBody{}, &codedErr{code: pay.CodeDenied, msg: "gate: denied: per-tx cap",
					ext: map[string]any{"intentId": "int_1", "mandateId": "m", "auditSeq": 42, "reasons": []any{map[string]any{"code": "cap.per_tx", "message": "over cap"}}}}
			case "frozen":
				return echoBody{}, &codedErr{code: pay.CodeFrozen, msg: "pay: settlement frozen"}
			case "cart":
				return echoBody{}, &codedErr{code: pay.CodeMalformed, msg: "commerce: cart not ready", action: "continue-at-link",
					ext: map[string]any{"cartId": "cs_1", "cartStatus": "escalation", "merchantStatus": "requires_escalation",
						"continueUrl": "https://m.example/c/1", "messages": []any{}}}
			case "tampered":
				return echoBody{}, &audit.TamperError{Seq: 7, Reason: "hash mismatch"}
			case "unregistered":
				return echoBody{}, &codedErr{code: "no.such_code", msg: "x: secret-unregistered"}
			case "deadline":
				return echoBody{}, context.DeadlineExceeded
			case "unencodable":
				// A code without members of its own: the dropped extensions
				// leave a problem the contract describes.
				return echoBody{}, &codedErr{code: contract.CodeUnavailable, msg: "store: busy", ext: map[string]any{"bad": func() {}}}
			}
			return echoBody{Name: p.Kind, Count: 1}, nil
		}),
		"test.operator": jsonEndpoint(func(ctx context.Context, _ *noParams, b *echoBody) (echoBody, error) {
			if o, ok := OperatorFrom(ctx); ok {
				b.Name = o.KeyID
			}
			return *b, nil
		}),
	}
}

func testModel(t testing.TB) *contract.Model {
	t.Helper()
	def := product.Definition()
	def.Operations = append(def.Operations, testOperations()...)
	m, err := contract.Build(def)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// syncBuffer is a log sink safe for the server's goroutines.
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

type testServer struct {
	h    http.Handler // srv, its responses checked against the contract
	srv  *server
	logs *syncBuffer
	doc  []byte
}

func newTestServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	logs := &syncBuffer{}
	if cfg.BaseURL == "" {
		cfg.BaseURL = testBase
	}
	if cfg.Audit == nil {
		cfg.Audit = &fakeAudit{}
	}
	if cfg.Model == nil {
		cfg.Model = testModel(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if !cfg.Sandbox && cfg.Authenticator == nil {
		cfg.Sandbox = true
	}
	s, err := newServer(cfg, testEndpoints())
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{h: ContractChecked(t, s), srv: s, logs: logs, doc: s.openapi}
}

// do serves one request in-process.
func (ts *testServer) do(t testing.TB, method, target string, body io.Reader, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(withContractTB(context.Background(), t), method, target, body)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	ts.h.ServeHTTP(w, r)
	return w
}

// schemas compiles schemas out of the served OpenAPI document, so real
// responses are checked against exactly what clients are told.
type schemas struct {
	c   *jsonschema.Compiler
	url string
}

func newSchemas(t testing.TB, doc []byte) *schemas {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const u = testBase + "/openapi.json"
	if err := c.AddResource(u, v); err != nil {
		t.Fatal(err)
	}
	return &schemas{c: c, url: u}
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// responseSchema is the schema of an operation's response with status and
// media type.
func (s *schemas) responseSchema(t testing.TB, op contract.Operation, status, media string) *jsonschema.Schema {
	t.Helper()
	ptr := "#/paths/" + pointerEscape(op.Path) + "/" + strings.ToLower(op.Method) +
		"/responses/" + status + "/content/" + pointerEscape(media) + "/schema"
	sch, err := s.c.Compile(s.url + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	return sch
}

func (s *schemas) check(t testing.TB, sch *jsonschema.Schema, body []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("response is not JSON: %v\n%s", err, body)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("response does not match its schema: %v\n%s", err, body)
	}
}

// allowAll authenticates every request as one agent key, which acts for
// two agents: a placeholder id, and protocolAgent, whose private key the
// tests hold so that they can sign spends (protocol_test.go).
type allowAll struct{}

func (allowAll) AuthenticateAgent(*http.Request) (Principal, error) {
	return Principal{KeyID: "ak_test", Agents: []string{strings.Repeat("ab", 32), protocolAgent}}, nil
}

// fakePayments answers the payment routes with fixed, well-formed values;
// an instruction whose idempotencyKey is "held" is held.
type fakePayments struct{}

func (fakePayments) Pay(_ context.Context, c pay.Caller, body []byte, _, requestID string) (*pay.Result, error) {
	var in struct{ IdempotencyKey string }
	_ = json.Unmarshal(body, &in)
	if in.IdempotencyKey == "held" {
		return &pay.Result{Outcome: pay.OutcomeHeld, IntentID: "int_1", RequestID: requestID, Held: &pay.Held{
			IntentID: "int_1", Status: pay.StatusPendingApproval, Challenge: "c", MandateID: "m",
			Decision:          gate.Decision{Outcome: gate.Confirm, Reasons: []gate.Reason{{Code: gate.CodeConfirmThreshold, Message: "large"}}, MandateID: "m"},
			ApprovalsRequired: 1, ExpiresAt: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC),
			Links: pay.Links{Self: "/intents/int_1", Events: "/intents/int_1/events"},
		}}, nil
	}
	return &pay.Result{Outcome: pay.OutcomeSettled, IntentID: "int_1", RequestID: requestID, Receipt: &pay.Receipt{
		ID: "rcpt_1", IntentID: "int_1", IdempotencyKey: in.IdempotencyKey, Payee: "acct:x",
		Amount: pay.Amount{Minor: 1, Currency: "USD"}, Rail: "sandbox-card", Reference: "ch_1", Terms: testTerms,
		SettledAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), AuditSeq: 2, AuditHash: strings.Repeat("0", 64),
	}}, nil
}

func (fakePayments) Intent(_ context.Context, c pay.Caller, id string) (*pay.Intent, error) {
	return &pay.Intent{ID: id, Status: pay.StatusSettled, Route: pay.RoutePay, AgentKeyID: c.KeyID, Agent: c.Agents[0],
		IdempotencyKey: "k", Payee: "acct:x", Amount: pay.Amount{Minor: 1, Currency: "USD"}, Purpose: "test",
		Terms: testTerms, MandateID: "m", Refunds: []pay.Refund{},
		Decision: gate.Decision{Outcome: gate.Allow, Reasons: []gate.Reason{}, MandateID: "m"}}, nil
}

func (fakePayments) IntentEvents(context.Context, pay.Caller, string, string, int) (audit.Page, error) {
	return audit.Page{}, nil
}

func (f fakePayments) OperatorIntent(ctx context.Context, id string) (*pay.Intent, error) {
	return f.Intent(ctx, pay.Caller{KeyID: "ak_other", Agents: []string{strings.Repeat("a", 64)}}, id)
}

func (fakePayments) OperatorIntentEvents(context.Context, string, string, int) (audit.Page, error) {
	return audit.Page{}, nil
}

var testTerms = pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
	Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}

// allowOperator accepts every operator request as op-test.
type allowOperator struct{}

func (allowOperator) VerifyOperator(*http.Request, string, []byte) (Operator, error) {
	return Operator{KeyID: "op-test"}, nil
}

// fakeOperations answers the operator actions with well-formed values; an
// approval of intent "held" is held.
type fakeOperations struct{}

func (fakeOperations) Approve(ctx context.Context, req pay.ApproveRequest, call pay.OperatorCall) (*pay.Result, error) {
	if req.IntentID == "held" {
		return fakePayments{}.Pay(ctx, pay.Caller{}, []byte(`{"IdempotencyKey":"held"}`), "", call.RequestID)
	}
	return fakePayments{}.Pay(ctx, pay.Caller{}, []byte(`{"IdempotencyKey":"k"}`), "", call.RequestID)
}

func (fakeOperations) Decline(_ context.Context, req pay.DeclineRequest, call pay.OperatorCall) (*pay.Declined, error) {
	return &pay.Declined{IntentID: req.IntentID, Status: pay.StatusDeclined, MandateID: req.MandateID, DeclinedBy: call.Operator,
		DeclinedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), AuditSeq: 9}, nil
}

func (fakeOperations) Refund(_ context.Context, req pay.RefundRequest, _ pay.OperatorCall) (*pay.RefundResult, error) {
	return &pay.RefundResult{IntentID: req.IntentID, RefundID: "rf_1", RefundedMinor: 5, RemainingMinor: 0, Status: pay.StatusRefunded, AuditSeq: 9}, nil
}

func (fakeOperations) SetKillSwitch(_ context.Context, engaged bool, _ pay.OperatorCall) (pay.Control, error) {
	return pay.Control{KillSwitchEngaged: engaged, ChangedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}, nil
}

func (fakeOperations) ResetBreaker(context.Context, pay.OperatorCall) (pay.Control, error) {
	return pay.Control{ChangedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}, nil
}

func (fakeOperations) Held(context.Context, string, int) (pay.HeldPage, error) {
	return pay.HeldPage{Data: []pay.HeldIntent{}}, nil
}

func (fakeOperations) Settling(context.Context, string, int) (pay.SettlingPage, error) {
	return pay.SettlingPage{Data: []pay.SettlingIntent{}}, nil
}

func (fakeOperations) RevokeMandate(_ context.Context, id string, call pay.OperatorCall) (pay.Revocation, error) {
	return pay.Revocation{MandateID: id, RevokedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), Operator: call.Operator, Rationale: call.Rationale}, nil
}

// fakeAgentKeys answers agent key management with fixed keys.
type fakeAgentKeys struct{}

var fakeKey = auth.Key{ID: "ak_1", Name: "bot", AgentIDs: []string{strings.Repeat("ab", 32)}, CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}

func (fakeAgentKeys) Create(context.Context, auth.CreateRequest, audit.Actor, string) (auth.Issued, error) {
	return auth.Issued{Key: fakeKey, Credential: "svc_ak_1_secret"}, nil
}

func (fakeAgentKeys) List(context.Context, string, int) (auth.KeyPage, error) {
	return auth.KeyPage{Data: []auth.Key{fakeKey}}, nil
}

func (fakeAgentKeys) Revoke(context.Context, string, audit.Actor, string, string) (auth.Key, error) {
	return fakeKey, nil
}

// testUsage is a usage counter over its own memory store.
func testUsage(t *testing.T) *auth.Usage {
	u := auth.NewUsage(memstore.New(nil), &auth.UsageOptions{FlushEvery: time.Hour})
	t.Cleanup(func() { _ = u.Close(context.Background()) })
	return u
}

// fakeWebhooks answers endpoint management with a fixed endpoint.
type fakeWebhooks struct{}

var fakeEndpoint = webhook.Endpoint{ID: "we_1", URL: "https://hooks.example/in", Events: []string{"*"}, Active: true,
	CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC), UpdatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}

func (fakeWebhooks) Create(context.Context, webhook.CreateRequest, audit.Actor, string, string) (webhook.Created, error) {
	return webhook.Created{Endpoint: fakeEndpoint, Secret: "whsec_x"}, nil
}
func (fakeWebhooks) Get(context.Context, string) (webhook.Endpoint, error) { return fakeEndpoint, nil }
func (fakeWebhooks) List(context.Context, string, int) (webhook.EndpointPage, error) {
	return webhook.EndpointPage{Data: []webhook.Endpoint{fakeEndpoint}}, nil
}
func (fakeWebhooks) Update(context.Context, string, webhook.UpdateRequest, audit.Actor, string, string) (webhook.Updated, error) {
	return webhook.Updated{Endpoint: fakeEndpoint}, nil
}
func (fakeWebhooks) Delete(context.Context, string, audit.Actor, string, string) error { return nil }

// fakeDeliveries answers delivery listing and retry.
type fakeDeliveries struct{}

var fakeDelivery = webhook.Delivery{EndpointID: "we_1", EventID: "evt_1_audit.appended", EventType: "audit.appended",
	Sequence: 1, State: "pending", Attempts: 1, CreatedAt: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}

func (fakeDeliveries) Deliveries(context.Context, string, string, int) (webhook.DeliveryPage, error) {
	return webhook.DeliveryPage{Data: []webhook.Delivery{fakeDelivery}}, nil
}
func (fakeDeliveries) Retry(context.Context, string, string, audit.Actor, string, string) (webhook.Delivery, error) {
	return fakeDelivery, nil
}
