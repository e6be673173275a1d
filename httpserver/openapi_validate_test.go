package httpserver

// Every response an httpserver test receives is checked against the served
// contract (/openapi.json) by an OpenAPI validator that shares no code with
// package contract: kin-openapi's openapi3filter, whose JSON Schema 2020-12
// validation runs on santhosh-tekuri/jsonschema. The one choke point is
// [ContractChecked], which wraps the handler every test builds
// (newTestServer here, newMatrixStack in the external tests), so a test
// cannot receive a response the contract does not describe without failing.
//
// It checks more than openapi3filter does on its own:
//
//   - the status must be declared (IncludeResponseStatus);
//   - the body is validated in a closed world: every object schema of the
//     test's copy of the document refuses members it does not declare
//     (unevaluatedProperties: false at each use), so a member the server
//     sends and the contract leaves out fails, as a strict client would;
//   - every header the server sets must be declared on that response, but
//     for the few in genericHeaders;
//   - a response declared without content must have no body.
//
// What it does not check, on purpose:
//
//   - the body of a text/event-stream response: a stream has no JSON body
//     to validate, and its frames are checked by the SSE tests; its status,
//     headers and media type are checked like any other;
//   - benchmarks (*testing.B): they measure the server, not the validator;
//   - requests that match no operation are not operations: they must be
//     answered 404 route.not_found or 405 method.not_allowed (with Allow),
//     and their body is validated against the Problem component.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/countersign/countersign/contract"
)

// genericHeaders are response headers the contract does not declare: they
// are HTTP's own, meant for caches, proxies and browsers, and the HTTP layer
// sets them the same way whatever the operation. Content-Type is described
// by each response's content (OpenAPI says a Content-Type header
// declaration is ignored). Everything else a client can observe is part of
// the contract.
var genericHeaders = map[string]bool{
	"Content-Type":           true,
	"Content-Length":         true,
	"Cache-Control":          true, // RFC 9111
	"Etag":                   true, // RFC 9110 §8.8.3, with Cache-Control
	"Vary":                   true, // RFC 9110 §12.5.5
	"X-Content-Type-Options": true, // browsers: nosniff
	"X-Accel-Buffering":      true, // proxies: do not buffer a stream
}

// contractTBKey carries the test that sent a request, so a mismatch is
// reported on it rather than on the test that built the server.
type contractTBKey struct{}

// withContractTB returns ctx carrying t for [ContractChecked].
func withContractTB(ctx context.Context, t testing.TB) context.Context {
	return context.WithValue(ctx, contractTBKey{}, t)
}

// ContractChecked returns h wrapped so that every response it sends is
// validated against the OpenAPI document h serves; a response that does
// not match fails the test that sent the request (when it is known, see
// withContractTB) or t. h must be a handler made by New.
func ContractChecked(t testing.TB, h http.Handler) http.Handler {
	t.Helper()
	if _, bench := t.(*testing.B); bench {
		return h
	}
	s, ok := h.(*server)
	if !ok {
		t.Fatalf("ContractChecked: %T is not a handler made by New", h)
	}
	c, err := loadContract(s.openapi)
	if err != nil {
		t.Fatalf("the served /openapi.json does not load in the OpenAPI validator: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What routing needs, taken before the handler reads the body.
		req := &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), Host: r.Host}
		rw := &capturingWriter{ResponseWriter: w}
		h.ServeHTTP(rw, r)
		problems := c.check(req, rw)
		if len(problems) == 0 {
			return
		}
		tb := t
		if rt, ok := r.Context().Value(contractTBKey{}).(testing.TB); ok {
			tb = rt
		}
		tb.Errorf("response does not match the served contract: %s %s → %d (%s):\n\t%s\n%s",
			req.Method, req.URL.RequestURI(), rw.status(), c.operationID(req), strings.Join(problems, "\n\t"), clip(rw.body.Bytes()))
	})
}

func clip(b []byte) []byte {
	if len(b) > 2048 {
		return append(b[:2048:2048], "…"...)
	}
	return b
}

// capturingWriter passes everything through and keeps the status, the
// headers as they were sent and, but for a stream, the body.
type capturingWriter struct {
	http.ResponseWriter
	code   int
	header http.Header // snapshot at WriteHeader
	stream bool
	body   bytes.Buffer
}

func (c *capturingWriter) WriteHeader(status int) {
	if c.code == 0 && status >= 200 {
		c.code = status
		c.header = c.ResponseWriter.Header().Clone()
		c.stream = strings.HasPrefix(c.header.Get("Content-Type"), contract.MediaEventStream)
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *capturingWriter) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.stream {
		c.body.Write(b)
	}
	return c.ResponseWriter.Write(b)
}

// Flush and Unwrap keep streaming handlers working through the wrapper.
func (c *capturingWriter) Flush() {
	if c.code == 0 {
		c.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *capturingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *capturingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(c.ResponseWriter).Hijack()
}

func (c *capturingWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

func (c *capturingWriter) sentHeader() http.Header {
	if c.header == nil {
		return c.ResponseWriter.Header().Clone()
	}
	return c.header
}

func init() {
	// problems.get answers an HTML page: a text body, like text/plain.
	openapi3filter.RegisterBodyDecoder(contract.MediaHTML, openapi3filter.PlainBodyDecoder)
}

// checkedContract is one served document, loaded for validation.
type checkedContract struct {
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema // the closed Problem component
}

var (
	contractsMu sync.Mutex
	contracts   = map[[32]byte]*loadedContract{}
)

type loadedContract struct {
	once sync.Once
	c    *checkedContract
	err  error
}

// loadContract loads doc once per distinct document: the tests build many
// servers over a handful of models.
func loadContract(doc []byte) (*checkedContract, error) {
	key := sha256.Sum256(doc)
	contractsMu.Lock()
	l := contracts[key]
	if l == nil {
		l = &loadedContract{}
		contracts[key] = l
	}
	contractsMu.Unlock()
	l.once.Do(func() { l.c, l.err = newCheckedContract(doc) })
	return l.c, l.err
}

func newCheckedContract(served []byte) (*checkedContract, error) {
	var raw map[string]any
	if err := json.Unmarshal(served, &raw); err != nil {
		return nil, err
	}
	// Route on the path alone: tests reach the handler under any host.
	delete(raw, "servers")
	closeSchemas(raw)
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	router, err := legacy.NewRouter(doc) // validates the document first
	if err != nil {
		return nil, err
	}
	ps := doc.Components.Schemas["Problem"]
	if ps == nil || ps.Value == nil {
		return nil, fmt.Errorf("no Problem component")
	}
	// The component is closed where it is used; closed here, on its own.
	problem := *ps.Value
	problem.UnevaluatedProperties = openapi3.BoolSchema{Has: openapi3.Ptr(false)}
	return &checkedContract{doc: doc, router: router, problem: &problem}, nil
}

// closeSchemas makes the document's schemas refuse undeclared members: at
// every use of a schema (a $ref, or an inline schema with properties) it
// adds unevaluatedProperties: false unless the schema already says what
// other members may be. JSON Schema 2020-12 counts the members that the
// schemas applied in place ($ref, allOf, anyOf, oneOf, if/then/else)
// evaluated as evaluated by the schema that applies them, so those are
// closed by it, not themselves: that is how a use extends a component
// with members of its own ($ref with sibling properties, if/then), and
// why components stay open at their top level. A $ref is closed from
// outside, {allOf: [{$ref...}], unevaluatedProperties: false}: the loader
// folds a $ref's siblings into the referenced schema's allOf, where
// unevaluatedProperties would see nothing evaluated.
func closeSchemas(doc map[string]any) {
	var walk func(node any, schema, inPlace bool) any
	use := func(s any) any { return walk(s, true, false) }
	inPlace := func(s any) any { return walk(s, true, true) }
	walk = func(node any, schema, applied bool) any {
		switch n := node.(type) {
		case []any:
			for i, v := range n {
				n[i] = walk(v, schema, applied)
			}
		case map[string]any:
			if !schema {
				for k, v := range n {
					switch k {
					case "schema":
						n[k] = use(v)
					case "examples", "example":
					default:
						n[k] = walk(v, false, false)
					}
				}
				return n
			}
			for k, v := range n {
				switch k {
				case "properties", "patternProperties", "$defs":
					if m, ok := v.(map[string]any); ok {
						for name, s := range m {
							m[name] = use(s)
						}
					}
				case "items", "additionalProperties", "contains", "propertyNames", "unevaluatedItems",
					"contentSchema", "not":
					n[k] = use(v)
				case "prefixItems":
					n[k] = walk(v, true, false)
				case "if", "then", "else":
					n[k] = inPlace(v)
				case "allOf", "anyOf", "oneOf":
					n[k] = walk(v, true, true)
				case "dependentSchemas":
					if m, ok := v.(map[string]any); ok {
						for name, s := range m {
							m[name] = inPlace(s)
						}
					}
				}
			}
			if applied {
				return n
			}
			_, ref := n["$ref"]
			_, props := n["properties"]
			_, addl := n["additionalProperties"]
			_, uneval := n["unevaluatedProperties"]
			switch {
			case addl || uneval:
			case ref:
				return map[string]any{"allOf": []any{n}, "unevaluatedProperties": false}
			case props:
				n["unevaluatedProperties"] = false
			}
		}
		return node
	}
	if comps, ok := doc["components"].(map[string]any); ok {
		if schemas, ok := comps["schemas"].(map[string]any); ok {
			for name, s := range schemas {
				schemas[name] = inPlace(s) // open at the top: closed where used
			}
		}
		for k, v := range comps {
			if k != "schemas" {
				comps[k] = walk(v, false, false)
			}
		}
	}
	for k, v := range doc {
		if k != "components" {
			doc[k] = walk(v, false, false)
		}
	}
}

// schemaMessage is a validator message without the schema and the value
// (the body is printed once, below the messages): one line per failing
// member.
func schemaMessage(err *openapi3.SchemaError) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "/" + strings.Join(err.JSONPointer(), "/") + ": " + err.Reason
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		for _, c := range e.Causes {
			walk(c)
		}
		if len(e.Causes) > 0 {
			return
		}
		if _, ok := e.ErrorKind.(*kind.FalseSchema); ok {
			leaves = append(leaves, "/"+strings.Join(e.InstanceLocation, "/")+": a member the contract does not declare")
			return
		}
		leaves = append(leaves, e.Error())
	}
	walk(ve)
	return strings.Join(leaves, "; ")
}

func (c *checkedContract) operationID(req *http.Request) string {
	if req.Method == http.MethodHead {
		get := *req
		get.Method = http.MethodGet
		req = &get
	}
	route, _, err := c.router.FindRoute(req)
	if err != nil {
		return "no operation"
	}
	return route.Operation.OperationID
}

// check returns what is wrong with the response rw sent to req.
func (c *checkedContract) check(req *http.Request, rw *capturingWriter) []string {
	status, header, body := rw.status(), rw.sentHeader(), rw.body.Bytes()
	head := req.Method == http.MethodHead
	if head {
		// HTTP's HEAD is GET without the content (RFC 9110 §9.3.2), which
		// the server, like every Go ServeMux, answers on each GET route;
		// the contract declares the GET. Status and headers are checked.
		get := *req
		get.Method = http.MethodGet
		req = &get
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return c.checkUnrouted(req, status, header, body)
	}
	var out []string
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		MultiError:            true,
		ExcludeResponseBody:   rw.stream || head,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	opts.WithCustomSchemaErrorFunc(schemaMessage)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route, Options: opts,
		},
		Status:  status,
		Header:  header,
		Options: opts,
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		out = append(out, err.Error())
	}
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return out // reported above: status not declared
	}
	resp := ref.Value
	declared := make(map[string]bool, len(resp.Headers))
	for name := range resp.Headers {
		declared[http.CanonicalHeaderKey(name)] = true
	}
	out = append(out, undeclaredHeaders(header, declared)...)
	if !head && len(resp.Content) == 0 && len(body) > 0 {
		out = append(out, fmt.Sprintf("a body of %d bytes on a response declared without content", len(body)))
	}
	if (rw.stream || head) && len(resp.Content) > 0 && resp.Content.Get(header.Get("Content-Type")) == nil {
		out = append(out, fmt.Sprintf("media type %q is not declared for this response", header.Get("Content-Type")))
	}
	return out
}

func undeclaredHeaders(header http.Header, declared map[string]bool) []string {
	var out []string
	for name := range header {
		name = http.CanonicalHeaderKey(name)
		if !genericHeaders[name] && !declared[name] {
			out = append(out, "header "+name+" is sent but not declared on this response")
		}
	}
	sort.Strings(out)
	return out
}

// checkUnrouted checks the answer to a request that matches no operation of
// the document.
func (c *checkedContract) checkUnrouted(req *http.Request, status int, header http.Header, body []byte) []string {
	var out []string
	want := map[int]string{http.StatusNotFound: contract.CodeRouteNotFound, http.StatusMethodNotAllowed: contract.CodeMethodNotAllowed,
		// The body limit is enforced before routing.
		http.StatusRequestEntityTooLarge: contract.CodeRequestTooLarge}
	code, ok := want[status]
	if !ok {
		return []string{fmt.Sprintf("%s %s matches no operation of the contract, yet was answered %d", req.Method, req.URL.Path, status)}
	}
	declared := map[string]bool{contract.HeaderRequestID: true}
	if status == http.StatusMethodNotAllowed {
		declared["Allow"] = true
		if header.Get("Allow") == "" {
			out = append(out, "405 without an Allow header")
		}
	}
	out = append(out, undeclaredHeaders(header, declared)...)
	if ct := header.Get("Content-Type"); ct != contract.MediaProblem {
		return append(out, fmt.Sprintf("Content-Type %q, want %s", ct, contract.MediaProblem))
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return append(out, "problem body is not JSON: "+err.Error())
	}
	if err := c.problem.VisitJSON(v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors(),
		openapi3.SetSchemaErrorMessageCustomizer(schemaMessage)); err != nil {
		out = append(out, "problem body does not match the Problem component: "+err.Error())
	}
	if m, _ := v.(map[string]any); m["code"] != code {
		out = append(out, fmt.Sprintf("problem code %v, want %s", m["code"], code))
	}
	return out
}

// TestContractCheckCatchesDrift: the check refuses what the contract does
// not declare (a header, a member, a status) and accepts what it does.
func TestContractCheckCatchesDrift(t *testing.T) {
	ts := newTestServer(t, Config{})
	c, err := loadContract(ts.doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		method string
		target string
		status int
		header http.Header
		body   string
		want   string // in the failure; "" for none
	}{
		{"declared", "GET", "/healthz", 200, nil, `{"status":"ok"}`, ""},
		{"undeclared header", "GET", "/healthz", 200, http.Header{"X-Extra": {"1"}}, `{"status":"ok"}`, "X-Extra"},
		{"undeclared member", "GET", "/healthz", 200, nil, `{"status":"ok","extra":1}`, "/extra: a member the contract does not declare"},
		{"undeclared status", "GET", "/healthz", 418, nil, `{"status":"ok"}`, "status is not supported"},
		{"undeclared problem member", "GET", "/test/fail/x", 503, http.Header{"Content-Type": {contract.MediaProblem}, "Retry-After": {"5"}},
			`{"type":"https://countersign.example/problems/unavailable","title":"t","status":503,"code":"unavailable","action":"retry-as-is","requestId":"r","retryAfter":5,"intentId":"int_1"}`,
			"/intentId: a member"},
		{"unrouted", "GET", "/nope", 404, http.Header{"Content-Type": {contract.MediaProblem}},
			`{"type":"https://countersign.example/problems/route.not_found","title":"t","status":404,"code":"route.not_found","action":"fix-request","requestId":"r"}`, ""},
		{"unrouted success", "GET", "/nope", 200, nil, `{}`, "matches no operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rw := &capturingWriter{ResponseWriter: rec}
			h := rw.Header()
			h.Set("Content-Type", contract.MediaJSON)
			h.Set(contract.HeaderRequestID, "r")
			for k, v := range tc.header {
				h[k] = v
			}
			rw.WriteHeader(tc.status)
			_, _ = rw.Write([]byte(tc.body))
			got := strings.Join(c.check(httptest.NewRequest(tc.method, tc.target, nil), rw), "\n")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("refused: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("got %q, want it to say %q", got, tc.want)
			}
		})
	}
}
