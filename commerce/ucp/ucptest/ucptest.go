// Package ucptest validates UCP documents against the protocol's own
// schemas (the shared conformance copy of Universal-Commerce-Protocol/ucp)
// with an independent validator, github.com/santhosh-tekuri/jsonschema/v6.
// It is test support, like storetest: production code never imports it.
//
// Schemas are found in $UCP_CONFORMANCE_DIR when set, else in
// ../shared/conformance/ucp beside the repository root, or else in the copy
// in commerce/ucp/testdata/conformance/ucp.
//
// 2026-04-08 schemas carry ucp_request/ucp_response annotations; they are
// resolved per operation and direction before compiling, as the protocol
// prescribes: "omit" removes a property (and its requirement), "required"
// requires it, "optional" drops the requirement. The resolved schema stays
// open (unknown members are allowed), as the protocol's own resolver does.
package ucptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Operations of the REST binding.
const (
	Create   = "create"
	Get      = "get"
	Update   = "update"
	Complete = "complete"
	Cancel   = "cancel"
)

// Dir returns the conformance directory (holding 2026-01-11/ and
// 2026-04-08/), failing the test when neither copy exists.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := dir()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func dir() (string, error) {
	if d := os.Getenv("UCP_CONFORMANCE_DIR"); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("ucptest: no go.mod above %s", wd)
		}
		root = parent
	}
	for _, d := range []string{
		filepath.Join(root, "..", "shared", "conformance", "ucp"),
		filepath.Join(root, "commerce", "ucp", "testdata", "conformance", "ucp"),
	} {
		if _, err := os.Stat(filepath.Join(d, "2026-04-08")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("ucptest: no UCP conformance schemas under %s", root)
}

// base maps https://ucp.dev/<p> to a file of version v.
func base(conf, v string) string {
	if v == "2026-01-11" {
		return filepath.Join(conf, v, "spec")
	}
	return filepath.Join(conf, v, "source")
}

// Loaded records every file any compiler read (to keep testdata small).
var Loaded sync.Map

type loader struct {
	dir       string
	op, annot string // annotation key to resolve ("" none) and operation
}

func (l loader) Load(u string) (any, error) {
	rest, ok := strings.CutPrefix(u, "https://ucp.dev/")
	if !ok {
		return nil, fmt.Errorf("ucptest: refusing to load %s", u)
	}
	// The profile schemas declare $id https://ucp.dev/schemas/discovery/
	// profile.json but are written for /discovery/: their "../schemas/…"
	// references resolve to /schemas/schemas/…, which we map back.
	rest = strings.Replace(rest, "schemas/schemas/", "schemas/", 1)
	path := filepath.Join(l.dir, filepath.FromSlash(rest))
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	Loaded.Store(path, true)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if l.annot != "" {
		resolve(doc, l.annot, l.op)
	}
	return doc, nil
}

// resolve applies ucp_request/ucp_response annotations for op in place.
func resolve(v any, annot, op string) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			resolve(e, annot, op)
		}
	case map[string]any:
		if props, ok := x["properties"].(map[string]any); ok {
			req, _ := x["required"].([]any)
			for name, p := range props {
				pm, ok := p.(map[string]any)
				if !ok {
					continue
				}
				mode := ""
				switch a := pm[annot].(type) {
				case string:
					mode = a
				case map[string]any:
					mode, _ = a[op].(string)
				}
				drop := func() {
					req = slices.DeleteFunc(req, func(r any) bool { return r == name })
				}
				switch mode {
				case "omit":
					delete(props, name)
					drop()
				case "optional":
					drop()
				case "required":
					if !slices.Contains(req, any(name)) {
						req = append(req, name)
					}
				}
			}
			if _, had := x["required"]; had || len(req) > 0 {
				x["required"] = req
			}
		}
		for k, e := range x {
			if k == "ucp_request" || k == "ucp_response" {
				delete(x, k)
				continue
			}
			resolve(e, annot, op)
		}
	}
}

// Schemas compiles and caches the schemas a test validates against.
type Schemas struct {
	conf string
	mu   sync.Mutex
	m    map[string]*jsonschema.Schema
}

// New returns the schemas of the conformance directory.
func New(t testing.TB) *Schemas {
	return &Schemas{conf: Dir(t), m: map[string]*jsonschema.Schema{}}
}

func (s *Schemas) compile(t testing.TB, version, annot, op, loc string) *jsonschema.Schema {
	t.Helper()
	key := strings.Join([]string{version, annot, op, loc}, "|")
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.m[key]; ok {
		return sch
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(loader{dir: base(s.conf, version), annot: annot, op: op})
	sch, err := c.Compile(loc)
	if err != nil {
		t.Fatalf("ucptest: compile %s (%s %s %s): %v", loc, version, annot, op, err)
	}
	s.m[key] = sch
	return sch
}

func pointer(path, method, kind, code string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1").Replace
	p := "https://ucp.dev/services/shopping/rest.openapi.json#/paths/" + esc(path) + "/" + method
	if kind == "request" {
		return p + "/requestBody/content/application~1json/schema"
	}
	return p + "/responses/" + code + "/content/application~1json/schema"
}

var ops = map[string]struct{ path, method, code string }{
	Create:   {"/checkout-sessions", "post", "201"},
	Get:      {"/checkout-sessions/{id}", "get", "200"},
	Update:   {"/checkout-sessions/{id}", "put", "200"},
	Complete: {"/checkout-sessions/{id}/complete", "post", "200"},
	Cancel:   {"/checkout-sessions/{id}/cancel", "post", "200"},
}

func validate(sch *jsonschema.Schema, doc []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return sch.Validate(inst)
}

// Request validates the body of a request of operation op, as the
// binding's OpenAPI document declares it.
func (s *Schemas) Request(t testing.TB, version, op string, body []byte) error {
	t.Helper()
	o, ok := ops[op]
	if !ok {
		t.Fatalf("ucptest: unknown operation %q", op)
	}
	return validate(s.compile(t, version, "ucp_request", op, pointer(o.path, o.method, "request", "")), body)
}

// Response validates the body of a successful answer to op.
func (s *Schemas) Response(t testing.TB, version, op string, body []byte) error {
	t.Helper()
	o, ok := ops[op]
	if !ok {
		t.Fatalf("ucptest: unknown operation %q", op)
	}
	return validate(s.compile(t, version, "ucp_response", op, pointer(o.path, o.method, "response", o.code)), body)
}

// Profile validates a discovery profile of version.
func (s *Schemas) Profile(t testing.TB, version string, body []byte) error {
	t.Helper()
	return validate(s.compile(t, version, "ucp_response", "", "https://ucp.dev/discovery/profile_schema.json"), body)
}

// Tokenize validates a tokenization request (request=true) or answer
// against the tokenization handler's OpenAPI document (2026-01-11's; the
// 2026-04-08 release ships none).
func (s *Schemas) Tokenize(t testing.TB, request bool, body []byte) error {
	t.Helper()
	p := "https://ucp.dev/handlers/tokenization/openapi.json#/paths/~1tokenize/post/"
	if request {
		p += "requestBody/content/application~1json/schema"
	} else {
		p += "responses/200/content/application~1json/schema"
	}
	return validate(s.compile(t, "2026-01-11", "", "", p), body)
}

// Pretty indents a JSON document for failure messages.
func Pretty(b []byte) string {
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}
