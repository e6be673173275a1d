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

	"github.com/go-playground/validator/v10"
)

func TestTestModelIsValid(t *testing.T) {
	m := testModel(t)
	if len(m.Operations()) == 0 || len(m.Events()) == 0 {
		t.Fatal("no operations or no events")
	}
	for _, op := range m.Operations() {
		for _, c := range m.ProblemCodes(op) {
			if _, ok := m.Problem(c); !ok {
				t.Errorf("%s: code %s not in registry", op.ID, c)
			}
		}
	}
}

func TestCredentialZeroValueInvalid(t *testing.T) {
	var c Credential
	if c.Valid() || c.String() != "unset" {
		t.Errorf("zero Credential: Valid=%v String=%q", c.Valid(), c.String())
	}
	for c, s := range map[Credential]string{CredentialNone: "none", CredentialAgent: "agent", CredentialOperator: "operator",
		CredentialAgentOrOperator: "agent-or-operator"} {
		if !c.Valid() || c.String() != s {
			t.Errorf("%v: Valid=%v String=%q", int(c), c.Valid(), c.String())
		}
	}
}

// TestCredentialAccepts: which credential opens which class. An agent
// credential never opens an operator operation.
func TestCredentialAccepts(t *testing.T) {
	for _, tc := range []struct {
		c               Credential
		agent, operator bool
	}{
		{CredentialNone, false, false},
		{CredentialAgent, true, false},
		{CredentialOperator, false, true},
		{CredentialAgentOrOperator, true, true},
		{Credential(0), false, false},
	} {
		if tc.c.AcceptsAgent() != tc.agent || tc.c.AcceptsOperator() != tc.operator {
			t.Errorf("%s: AcceptsAgent %v AcceptsOperator %v, want %v %v", tc.c, tc.c.AcceptsAgent(), tc.c.AcceptsOperator(), tc.agent, tc.operator)
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
	return Definition{Title: "t", Version: "1", Operations: ops, Parts: []Part{Core()}}
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
		{"retry without delay", Definition{Title: "t", Version: "1", Parts: []Part{Core()}, Problems: []ProblemType{
			{Code: "x.y", Status: 503, Title: "X", Description: "x", Action: ActionRetryAsIs}}},
			"needs a RetryAfter"},
		{"duplicate problem", Definition{Title: "t", Version: "1", Problems: append(coreProblems(), coreProblems()[0])},
			"problem code auth.invalid declared twice"},
		{"event without payload", Definition{Title: "t", Version: "1", Parts: []Part{Core()},
			Events: []EventKind{{Name: "a.b", Description: "x"}}}, "no payload type"},
		{"no title", Definition{Version: "1", Parts: []Part{Core()}}, "title"},
		{"no core part", Definition{Title: "t", Version: "1", Operations: []Operation{baseOp()}}, "add contract.Core"},
		{"operation of two parts", Definition{Title: "t", Version: "1", Parts: []Part{Core(),
			{Name: "audit", Operations: []Operation{baseOp()}}, {Name: "pay", Operations: []Operation{baseOp()}}}},
			"operation id things.get declared twice, by audit and by pay"},
		{"operation of a part and the definition", Definition{Title: "t", Version: "1", Operations: []Operation{baseOp()},
			Parts: []Part{Core(), {Name: "pay", Operations: []Operation{baseOp()}}}},
			"operation id things.get declared twice, by the definition and by pay"},
		{"operation twice in one part", Definition{Title: "t", Version: "1", Parts: []Part{Core(),
			{Name: "pay", Operations: []Operation{baseOp(), baseOp()}}}},
			"operation id things.get declared twice by pay"},
		{"problem code of two parts", Definition{Title: "t", Version: "1", Parts: []Part{Core(),
			{Name: "webhook", Problems: []ProblemType{coreProblems()[0]}}}},
			"problem code auth.invalid declared twice, by contract and by webhook"},
		{"event kind of two parts", Definition{Title: "t", Version: "1", Parts: []Part{Core(),
			{Name: "webhook", Events: []EventKind{{Name: "a.b", Description: "x", Payload: reflect.TypeFor[testBody]()}}},
			{Name: "memory", Events: []EventKind{{Name: "a.b", Description: "y", Payload: reflect.TypeFor[testBody]()}}}}},
			"event kind a.b declared twice, by webhook and by memory"},
		{"rule of two parts", Definition{Title: "t", Version: "1", Parts: []Part{Core(),
			{Name: "pay", Rules: []Rule{testRule()}}, {Name: "identity", Rules: []Rule{testRule()}}}},
			"rule even declared twice, by pay and by identity"},
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

// testRule is a custom validate tag: an even integer.
func testRule() Rule {
	return Rule{
		Tag:     "even",
		Func:    func(fl validator.FieldLevel) bool { return fl.Field().Int()%2 == 0 },
		Message: func(string) string { return "must be even" },
	}
}

func TestBuildAcceptsValid(t *testing.T) {
	if _, err := Build(def(baseOp())); err != nil {
		t.Fatal(err)
	}
}

// TestCore checks the core part: exactly the codes the HTTP layer answers
// with whatever the operation, with the statuses and actions DESIGN gives
// them, and nothing else.
func TestCore(t *testing.T) {
	core := Core()
	if core.Name != "contract" || len(core.Operations) != 0 || len(core.Events) != 0 || len(core.Rules) != 0 {
		t.Errorf("Core() = %+v, want problem types only", core)
	}
	tests := []struct {
		code   string
		status int
		action Action
	}{
		{CodeAuthInvalid, 401, ActionReauthenticate},
		{CodeAuthMissing, 401, ActionReauthenticate},
		{CodeInternal, 500, ActionStop},
		{CodeMethodNotAllowed, 405, ActionFixRequest},
		{CodeOperatorRationaleTooShort, 400, ActionFixRequest},
		{CodeOperatorUnauthorized, 401, ActionReauthenticate},
		{CodeRateLimited, 429, ActionRetryAsIs},
		{CodeRequestMalformedJSON, 400, ActionFixRequest},
		{CodeRequestTooLarge, 413, ActionFixRequest},
		{CodeRequestUnknownField, 400, ActionFixRequest},
		{CodeRequestUnsupportedMediaType, 415, ActionFixRequest},
		{CodeStoreUnavailable, 503, ActionRetryAsIs},
		{CodeRequestValidation, 400, ActionFixRequest},
		{CodeRouteNotFound, 404, ActionFixRequest},
		{CodeUnavailable, 503, ActionRetryAsIs},
	}
	if len(core.Problems) != len(tests) {
		t.Errorf("Core() has %d problem types, want %d", len(core.Problems), len(tests))
	}
	m, err := Build(Definition{Title: "t", Version: "1", Parts: []Part{core}})
	if err != nil {
		t.Fatalf("Build(Core) = %v", err)
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
}

func TestProblemCodesImplied(t *testing.T) {
	m := testModel(t)
	op := Operation{Credential: CredentialOperator, Body: reflect.TypeFor[testBody](), Problems: []string{codeOrderNotFound}}
	got := m.ProblemCodes(op)
	want := []string{"internal", "operator.unauthorized", "orders.not_found", "rate_limited", "request.malformed_json",
		"request.too_large", "request.unknown_field", "request.unsupported_media_type", "request.validation", "store.unavailable", "unavailable"}
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

// TestNoDomainImports keeps the package below the domain: it is the
// model's vocabulary and machinery, and each domain package declares its
// own operations with it (see package product), so importing one would
// make contract the knot every new package has to be tied into. Of this
// module it may import internal/fielderr and internal/strictjson only
// (leaves that import nothing of the module).
func TestNoDomainImports(t *testing.T) {
	const module = "github.com/countersign/countersign/"
	allowed := map[string]bool{module + "internal/fielderr": true, module + "internal/strictjson": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, module) && !allowed[p] {
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
