package contract

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestNewIsValid(t *testing.T) {
	m := New()
	if len(m.Operations()) == 0 {
		t.Fatal("no operations")
	}
	for _, op := range m.Operations() {
		if !op.Credential.Valid() {
			t.Errorf("%s: credential %s", op.ID, op.Credential)
		}
		for _, c := range m.ProblemCodes(op) {
			if _, ok := m.Problem(c); !ok {
				t.Errorf("%s: code %s not in registry", op.ID, c)
			}
		}
	}
	var kinds []string
	for _, ev := range m.Events() {
		kinds = append(kinds, ev.Name)
	}
	want := []string{"gate.decision", "intent.denied", "approval.pending", "payment.settled", "audit.appended",
		"memory.recorded", "memory.consolidated", "memory.erased", "memory.tainted"}
	if !slices.Equal(kinds, want) {
		t.Errorf("event kinds = %v, want %v", kinds, want)
	}
}

func TestCredentialZeroValueInvalid(t *testing.T) {
	var c Credential
	if c.Valid() || c.String() != "unset" {
		t.Errorf("zero Credential: Valid=%v String=%q", c.Valid(), c.String())
	}
	for c, s := range map[Credential]string{CredentialNone: "none", CredentialAgent: "agent", CredentialOperator: "operator"} {
		if !c.Valid() || c.String() != s {
			t.Errorf("%v: Valid=%v String=%q", int(c), c.Valid(), c.String())
		}
	}
}

type testParams struct {
	ID    string `path:"id"`
	Limit int    `query:"limit"`
}

type testBody struct {
	Name string `json:"name" validate:"required"`
}

type badTagBody struct {
	Name string `json:"name" validate:"frobnicate"`
}

func baseOp() Operation {
	return Operation{
		ID: "things.get", Method: "GET", Path: "/things/{id}", Summary: "Get a thing",
		Credential: CredentialAgent, Params: reflect.TypeFor[testParams](),
		Responses: []Response{JSON(200, "ok", reflect.TypeFor[testBody]())},
	}
}

func def(ops ...Operation) Definition {
	return Definition{Title: "t", Version: "1", Operations: ops, Problems: Problems()}
}

func TestBuildRejects(t *testing.T) {
	with := func(f func(*Operation)) Operation {
		op := baseOp()
		f(&op)
		return op
	}
	tests := []struct {
		name string
		def  Definition
		want string
	}{
		{"zero credential", def(with(func(o *Operation) { o.Credential = 0 })), "no valid credential class"},
		{"duplicate id", def(baseOp(), baseOp()), "declared twice"},
		{"duplicate route", def(baseOp(), with(func(o *Operation) {
			o.ID = "things.other"
			o.Path = "/things/{key}"
			o.Params = reflect.TypeFor[struct {
				Key string `path:"key"`
			}]()
		})), "already declared by things.get"},
		{"unknown problem code", def(with(func(o *Operation) { o.Problems = []string{"no.such_code"} })), "not in the registry"},
		{"path param missing", def(with(func(o *Operation) { o.Params = nil })), "no Params type"},
		{"path param mismatch", def(with(func(o *Operation) { o.Path = "/things/{name}" })), "do not match the wildcards"},
		{"body on GET", def(with(func(o *Operation) { o.Body = reflect.TypeFor[testBody]() })), "cannot have a request body"},
		{"bad id", def(with(func(o *Operation) { o.ID = "Things" })), "not lowercase dot-separated"},
		{"reserved id", def(with(func(o *Operation) { o.ID = "event.x" })), "reserved"},
		{"bad method", def(with(func(o *Operation) { o.Method = "get" })), "method"},
		{"bad path", def(with(func(o *Operation) { o.Path = "things" })), "does not start with /"},
		{"no responses", def(with(func(o *Operation) { o.Responses = nil })), "no success response"},
		{"error status as success", def(with(func(o *Operation) { o.Responses = []Response{JSON(404, "x", nil)} })), "not 1xx–3xx"},
		{"no summary", def(with(func(o *Operation) { o.Summary = "" })), "no summary"},
		{"unprojectable tag", def(with(func(o *Operation) {
			o.Method = "POST"
			o.Body = reflect.TypeFor[badTagBody]()
		})), `"frobnicate" has no schema projection`},
		{"param without tag", def(with(func(o *Operation) {
			o.Params = reflect.TypeFor[struct {
				ID string `path:"id"`
				X  int
			}]()
		})), "exactly one non-empty path, query or header tag"},
		{"missing registry code", Definition{Title: "t", Version: "1"}, "registry lacks internal"},
		{"retry without delay", Definition{Title: "t", Version: "1", Problems: append(Problems(),
			ProblemType{Code: "x.y", Status: 503, Title: "X", Description: "x", Action: ActionRetryAsIs})},
			"needs a RetryAfter"},
		{"duplicate problem", Definition{Title: "t", Version: "1", Problems: append(Problems(), Problems()[0])},
			"declared twice"},
		{"event without payload", Definition{Title: "t", Version: "1", Problems: Problems(),
			Events: []EventKind{{Name: "a.b", Description: "x"}}}, "no payload type"},
		{"no title", Definition{Version: "1", Problems: Problems()}, "title"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Build(tt.def)
			if err == nil {
				t.Fatalf("Build succeeded; want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

func TestBuildAcceptsValid(t *testing.T) {
	if _, err := Build(def(baseOp())); err != nil {
		t.Fatal(err)
	}
}

func TestProblemRegistry(t *testing.T) {
	m := New()
	tests := []struct {
		code   string
		status int
		action Action
	}{
		{CodeRequestMalformedJSON, 400, ActionFixRequest},
		{CodeRequestValidation, 400, ActionFixRequest},
		{CodeRequestUnknownField, 400, ActionFixRequest},
		{CodeRequestTooLarge, 413, ActionFixRequest},
		{CodeRequestUnsupportedMediaType, 415, ActionFixRequest},
		{CodeRouteNotFound, 404, ActionFixRequest},
		{CodeMethodNotAllowed, 405, ActionFixRequest},
		{CodeAuditBadCursor, 400, ActionFixRequest},
		{CodeAuditNotFound, 404, ActionFixRequest},
		{CodeAuditOutOfRange, 400, ActionFixRequest},
		{CodeAuthMissing, 401, ActionReauthenticate},
		{CodeAuthInvalid, 401, ActionReauthenticate},
		{CodeRateLimited, 429, ActionRetryAsIs},
		{CodeInternal, 500, ActionStop},
		{CodeUnavailable, 503, ActionRetryAsIs},
		{CodeIntentMalformed, 400, ActionFixRequest},
		{CodeIntentUnauthorized, 403, ActionStop},
		{CodeIntentDenied, 403, ActionStop},
		{CodeSettlementFrozen, 503, ActionAwaitOperator},
		{CodeRailUnavailable, 503, ActionRetryAsIs},
		{CodeIdempotencyConflict, 422, ActionFixRequest},
		{CodeIdempotencyInFlight, 409, ActionRetryAsIs},
		{CodeOperatorUnauthorized, 401, ActionReauthenticate},
		{CodeOperatorRationaleTooShort, 400, ActionFixRequest},
	}
	for _, tt := range tests {
		p, ok := m.Problem(tt.code)
		if !ok {
			t.Errorf("%s missing", tt.code)
			continue
		}
		if p.Status != tt.status || p.Action != tt.action {
			t.Errorf("%s = %d %s, want %d %s", tt.code, p.Status, p.Action, tt.status, tt.action)
		}
		if (p.Action == ActionRetryAsIs) != (p.RetryAfter > 0) {
			t.Errorf("%s: RetryAfter %d with action %s", tt.code, p.RetryAfter, p.Action)
		}
	}
	if p, _ := m.Problem(CodeIdempotencyInFlight); p.RetryAfter != 1 {
		t.Errorf("idempotency.in_flight RetryAfter = %d, DESIGN says 1", p.RetryAfter)
	}
}

func TestProblemCodesImplied(t *testing.T) {
	m := New()
	op := Operation{Credential: CredentialOperator, Body: reflect.TypeFor[testBody](), Problems: []string{"audit.not_found"}}
	got := m.ProblemCodes(op)
	want := []string{"audit.not_found", "internal", "operator.unauthorized", "rate_limited", "request.malformed_json",
		"request.too_large", "request.unknown_field", "request.unsupported_media_type", "request.validation"}
	if !slices.Equal(got, want) {
		t.Errorf("ProblemCodes = %v\nwant %v", got, want)
	}
	got = m.ProblemCodes(Operation{Credential: CredentialNone})
	if !slices.Equal(got, []string{"internal", "rate_limited", "request.unknown_field", "request.validation"}) {
		t.Errorf("ProblemCodes(none) = %v", got)
	}
}

// TestNoNetHTTP keeps the package free of HTTP: the model holds codes and
// statuses as plain values, and net/http stays in httpserver.
func TestNoNetHTTP(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "net/http") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

func TestProblemMarshalExtensions(t *testing.T) {
	p := Problem{Type: "https://x/problems/intent.denied", Title: "Payment denied", Status: 403, Code: "intent.denied",
		Action: ActionStop, RequestID: "req_1",
		Extensions: map[string]any{"intentId": "int_1", "code": "overridden?", "auditSeq": 7}}
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"https://x/problems/intent.denied","title":"Payment denied","status":403,"code":"intent.denied",` +
		`"action":"stop","requestId":"req_1","auditSeq":7,"intentId":"int_1"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
