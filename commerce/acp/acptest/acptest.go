// Package acptest checks documents against the Agentic Commerce
// Protocol's own schema files (version 2026-04-17: the JSON Schema bundles
// and the OpenAPI component schemas) with an independent validator,
// github.com/santhosh-tekuri/jsonschema/v6, formats asserted. It is test
// support, like storetest: production code never imports it.
//
// The files are read from ../shared/conformance/acp relative to the
// repository root, or, when that directory is missing, from the copy in
// commerce/acp/testdata/conformance.
package acptest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// Files of the version, relative to the conformance directory.
const (
	CheckoutBundle  = "spec/2026-04-17/json-schema/schema.agentic_checkout.json"
	DelegateBundle  = "spec/2026-04-17/json-schema/schema.delegate_payment.json"
	CheckoutOpenAPI = "spec/2026-04-17/openapi/openapi.agentic_checkout.yaml"
	DelegateOpenAPI = "spec/2026-04-17/openapi/openapi.delegate_payment.yaml"
	ExamplesDir     = "examples/2026-04-17"
)

// Dir returns the conformance directory.
func Dir(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{
		filepath.Join(root, "..", "shared", "conformance", "acp"),
		filepath.Join(root, "commerce", "acp", "testdata", "conformance"),
	} {
		if _, err := os.Stat(filepath.Join(d, CheckoutBundle)); err == nil {
			return d
		}
	}
	t.Fatal("acptest: no ACP conformance files in ../shared/conformance/acp or commerce/acp/testdata/conformance")
	return ""
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Schemas compiles definitions of the four files on demand.
type Schemas struct {
	dir string
	c   *jsonschema.Compiler

	mu    sync.Mutex // guards cache
	cache map[string]*jsonschema.Schema
}

// Resource names the files are loaded under.
const (
	checkoutURL        = "https://acp.test/schema.agentic_checkout.json"
	delegateURL        = "https://acp.test/schema.delegate_payment.json"
	checkoutOpenAPIURL = "https://acp.test/openapi.agentic_checkout.json"
	delegateOpenAPIURL = "https://acp.test/openapi.delegate_payment.json"
)

// Load reads the files; any failure fails the test.
func Load(t testing.TB) *Schemas {
	t.Helper()
	dir := Dir(t)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	for url, file := range map[string]string{
		checkoutURL: CheckoutBundle, delegateURL: DelegateBundle,
		checkoutOpenAPIURL: CheckoutOpenAPI, delegateOpenAPIURL: DelegateOpenAPI,
	} {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(file) == ".yaml" {
			if raw, err = yamlToJSON(raw); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(url, doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	return &Schemas{dir: dir, c: c, cache: map[string]*jsonschema.Schema{}}
}

// yamlToJSON converts an OpenAPI YAML file to JSON.
func yamlToJSON(raw []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func (s *Schemas) schema(t testing.TB, url string) *jsonschema.Schema {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.cache[url]; ok {
		return sch
	}
	sch, err := s.c.Compile(url)
	if err != nil {
		t.Fatalf("compiling %s: %v", url, err)
	}
	s.cache[url] = sch
	return sch
}

func validate(t testing.TB, sch *jsonschema.Schema, doc []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// Checkout validates doc against $defs/def of the checkout JSON Schema
// bundle.
func (s *Schemas) Checkout(t testing.TB, def string, doc []byte) error {
	t.Helper()
	return validate(t, s.schema(t, checkoutURL+"#/$defs/"+def), doc)
}

// Delegate validates doc against $defs/def of the delegate payment JSON
// Schema bundle.
func (s *Schemas) Delegate(t testing.TB, def string, doc []byte) error {
	t.Helper()
	return validate(t, s.schema(t, delegateURL+"#/$defs/"+def), doc)
}

// CheckoutOpenAPI validates doc against components/schemas/def of the
// checkout OpenAPI file.
func (s *Schemas) CheckoutOpenAPI(t testing.TB, def string, doc []byte) error {
	t.Helper()
	return validate(t, s.schema(t, checkoutOpenAPIURL+"#/components/schemas/"+def), doc)
}

// DelegateOpenAPI validates doc against components/schemas/def of the
// delegate payment OpenAPI file.
func (s *Schemas) DelegateOpenAPI(t testing.TB, def string, doc []byte) error {
	t.Helper()
	return validate(t, s.schema(t, delegateOpenAPIURL+"#/components/schemas/"+def), doc)
}

// Examples returns the curated examples of the version, by name, from
// every examples file.
func (s *Schemas) Examples(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.dir, ExamplesDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s", filepath.Join(s.dir, ExamplesDir))
	}
	out := map[string]json.RawMessage{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Response validates the body of an answer to method path (as the client
// sends them: path is "/checkout_sessions", "/checkout_sessions/{id}",
// ".../complete", ".../cancel" or "/agentic_commerce/delegate_payment")
// with status, against both the bundle and the OpenAPI file. An empty
// body is an error except where noted by the caller.
//
// A completion's 200 answer is checked against the bundle's
// CheckoutSessionWithOrder, and against the OpenAPI file as a
// CheckoutSession without its order plus an Order: the OpenAPI
// CheckoutSessionWithOrder is allOf a closed CheckoutSessionBase that
// does not declare "order" and an object that requires it, which nothing
// satisfies.
func (s *Schemas) Response(t testing.TB, method, path string, status int, body []byte) error {
	t.Helper()
	delegate := path == "/agentic_commerce/delegate_payment"
	complete := hasSuffix(path, "/complete")
	switch {
	case delegate && status < 300:
		return first(s.Delegate(t, "DelegatePaymentResponse", body), s.DelegateOpenAPI(t, "DelegatePaymentResponse", body))
	case delegate:
		return first(s.Delegate(t, "Error", body), s.DelegateOpenAPI(t, "Error", body))
	case status >= 400:
		return first(s.Checkout(t, "Error", body), s.CheckoutOpenAPI(t, "Error", body))
	case complete:
		if err := s.Checkout(t, "CheckoutSessionWithOrder", body); err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return err
		}
		order := m["order"]
		delete(m, "order")
		rest, _ := json.Marshal(m)
		return first(s.CheckoutOpenAPI(t, "CheckoutSession", rest), s.CheckoutOpenAPI(t, "Order", order))
	}
	return first(s.Checkout(t, "CheckoutSession", body), s.CheckoutOpenAPI(t, "CheckoutSession", body))
}

// Request validates the body of a request to method path, as Response.
func (s *Schemas) Request(t testing.TB, method, path string, body []byte) error {
	t.Helper()
	switch {
	case path == "/agentic_commerce/delegate_payment":
		return first(s.Delegate(t, "DelegatePaymentRequest", body), s.DelegateOpenAPI(t, "DelegatePaymentRequest", body))
	case path == "/checkout_sessions":
		return first(s.Checkout(t, "CheckoutSessionCreateRequest", body), s.CheckoutOpenAPI(t, "CheckoutSessionCreateRequest", body))
	case hasSuffix(path, "/complete"):
		return first(s.Checkout(t, "CheckoutSessionCompleteRequest", body), s.CheckoutOpenAPI(t, "CheckoutSessionCompleteRequest", body))
	case hasSuffix(path, "/cancel"):
		return first(s.Checkout(t, "CancelSessionRequest", body), s.CheckoutOpenAPI(t, "CancelSessionRequest", body))
	}
	return first(s.Checkout(t, "CheckoutSessionUpdateRequest", body), s.CheckoutOpenAPI(t, "CheckoutSessionUpdateRequest", body))
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}

func first(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Exchange is one request and its answer, as a Recorder saw them.
type Exchange struct {
	Method, Path string
	Header       http.Header // the request's
	Request      []byte
	Status       int
	Response     []byte // nil when no answer was read
}

// Recorder is an http.RoundTripper that records every exchange through
// Next (default http.DefaultTransport). It is safe for concurrent use.
type Recorder struct {
	Next http.RoundTripper

	mu        sync.Mutex // guards exchanges
	exchanges []Exchange
}

// RoundTrip records req and its answer.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	next := r.Next
	if next == nil {
		next = http.DefaultTransport
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	x := Exchange{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Request: body}
	resp, err := next.RoundTrip(req)
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		x.Status = resp.StatusCode
		if rerr == nil {
			x.Response = b
		} else {
			resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{rerr}))
		}
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	return resp, err
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// Exchanges returns what was recorded so far.
func (r *Recorder) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.exchanges...)
}

// Check validates every recorded request body and every answer read
// against the schemas, and the headers ACP requires of a request
// (Authorization when bearer is not empty, API-Version, Content-Type on
// bodies, Idempotency-Key on POSTs). It returns how many exchanges it
// checked.
func (r *Recorder) Check(t testing.TB, s *Schemas, bearer string) int {
	t.Helper()
	xs := r.Exchanges()
	for i, x := range xs {
		where := func() string { return x.Method + " " + x.Path }
		if bearer != "" && x.Header.Get("Authorization") != "Bearer "+bearer {
			t.Errorf("exchange %d %s: Authorization %q", i, where(), x.Header.Get("Authorization"))
		}
		if got := x.Header.Get("API-Version"); got != "2026-04-17" {
			t.Errorf("exchange %d %s: API-Version %q", i, where(), got)
		}
		if x.Method == http.MethodPost {
			if k := x.Header.Get("Idempotency-Key"); k == "" || len(k) > 255 {
				t.Errorf("exchange %d %s: Idempotency-Key %q", i, where(), k)
			}
		}
		if len(x.Request) > 0 {
			if x.Header.Get("Content-Type") != "application/json" {
				t.Errorf("exchange %d %s: Content-Type %q", i, where(), x.Header.Get("Content-Type"))
			}
			if err := s.Request(t, x.Method, x.Path, x.Request); err != nil {
				t.Errorf("exchange %d %s: request refused by the schema: %v\n%s", i, where(), err, x.Request)
			}
		}
		if len(x.Response) > 0 {
			if err := s.Response(t, x.Method, x.Path, x.Status, x.Response); err != nil {
				t.Errorf("exchange %d %s: %d answer refused by the schema: %v\n%s", i, where(), x.Status, err, x.Response)
			}
		}
	}
	return len(xs)
}
