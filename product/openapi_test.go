package product_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/schematest"
	"github.com/countersign/countersign/product"
)

const (
	testBase     = "https://countersign.example"
	oasSchemaURL = "https://spec.openapis.org/oas/3.1/schema/2022-02-27"
	docURL       = "https://countersign.example/openapi.json"
)

func openAPIDoc(t *testing.T, m *contract.Model) []byte {
	t.Helper()
	doc, err := m.OpenAPI(testBase)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// oasValidator compiles the official OpenAPI 3.1 schema kept in
// contract's testdata (see its README).
func oasValidator(t *testing.T) *jsonschema.Schema {
	t.Helper()
	return schematest.Compile(t, filepath.Join("..", "contract", "testdata", "openapi-3.1-schema.json"))
}

func unmarshalInstance(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpenAPIMetaSchema is the acceptance test of the assembled document:
// it is valid according to the official OpenAPI 3.1 schema, checked by an
// independent validator.
func TestOpenAPIMetaSchema(t *testing.T) {
	sch := oasValidator(t)
	doc := openAPIDoc(t, product.Model())
	if err := sch.Validate(unmarshalInstance(t, doc)); err != nil {
		t.Fatalf("generated document is not valid OpenAPI 3.1:\n%v", err)
	}

	// Control: the validator does reject a broken document, so the pass
	// above means something.
	var broken map[string]any
	if err := json.Unmarshal(doc, &broken); err != nil {
		t.Fatal(err)
	}
	broken["paths"].(map[string]any)["/audit"].(map[string]any)["get"].(map[string]any)["responses"] = map[string]any{"ok": 1}
	b, _ := json.Marshal(broken)
	if err := sch.Validate(unmarshalInstance(t, b)); err == nil {
		t.Fatal("a document with a malformed responses object passed validation")
	}
}

// TestSchemasAreValidJSONSchema compiles every schema in the document as
// JSON Schema 2020-12 (schematest.CompileEverySchema).
func TestSchemasAreValidJSONSchema(t *testing.T) {
	schematest.CompileEverySchema(t, openAPIDoc(t, product.Model()), docURL, 20)
}

func TestOpenAPIGolden(t *testing.T) {
	doc := openAPIDoc(t, product.Model())
	path := filepath.Join("testdata", "openapi.golden.json")
	if *rewrite {
		if err := os.WriteFile(path, doc, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -rewrite to create it)", err)
	}
	if !bytes.Equal(doc, want) {
		t.Errorf("OpenAPI document differs from %s; if the change is intended, run\n\tgo test ./product -run TestOpenAPIGolden -rewrite\nand review the diff", path)
	}
}

func TestOpenAPIDeterministic(t *testing.T) {
	a := openAPIDoc(t, product.Model())
	for range 3 {
		if b := openAPIDoc(t, product.Model()); !bytes.Equal(a, b) {
			t.Fatal("two generations differ")
		}
	}
}

func TestOpenAPIShape(t *testing.T) {
	m := product.Model()
	var d struct {
		OpenAPI string                                `json:"openapi"`
		Servers []map[string]string                   `json:"servers"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
		Webhook map[string]json.RawMessage            `json:"webhooks"`
		Probs   map[string]json.RawMessage            `json:"x-problems"`
	}
	if err := json.Unmarshal(openAPIDoc(t, m), &d); err != nil {
		t.Fatal(err)
	}
	if d.OpenAPI != "3.1.0" || d.Servers[0]["url"] != testBase {
		t.Errorf("openapi %q servers %v", d.OpenAPI, d.Servers)
	}
	for _, op := range m.Operations() {
		raw, ok := d.Paths[op.Path][strings.ToLower(op.Method)]
		if !ok {
			t.Errorf("%s: %s %s missing", op.ID, op.Method, op.Path)
			continue
		}
		var o struct {
			OperationID string              `json:"operationId"`
			Credential  string              `json:"x-credential"`
			Codes       []string            `json:"x-problem-codes"`
			Security    []map[string][]any  `json:"security"`
			Responses   map[string]struct{} `json:"responses"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		if o.OperationID != op.ID || o.Credential != op.Credential.String() {
			t.Errorf("%s: operationId %q x-credential %q", op.ID, o.OperationID, o.Credential)
		}
		if !slices.Equal(o.Codes, m.ProblemCodes(op)) {
			t.Errorf("%s: x-problem-codes %v", op.ID, o.Codes)
		}
		var wantSec []string // alternatives, one scheme each
		if op.Credential.AcceptsAgent() {
			wantSec = append(wantSec, contract.SchemeAgent)
		}
		if op.Credential.AcceptsOperator() {
			wantSec = append(wantSec, contract.SchemeOperator)
		}
		secOK := len(o.Security) == len(wantSec)
		for i := 0; secOK && i < len(wantSec); i++ {
			secOK = len(o.Security[i]) == 1 && o.Security[i][wantSec[i]] != nil
		}
		if !secOK {
			t.Errorf("%s: security %v, want %v", op.ID, o.Security, wantSec)
		}
		for _, c := range o.Codes {
			p, _ := m.Problem(c)
			if _, ok := o.Responses[strconv.Itoa(p.Status)]; !ok {
				t.Errorf("%s: no %d response for %s", op.ID, p.Status, c)
			}
		}
	}
	if len(d.Webhook) != len(m.Events()) {
		t.Errorf("%d webhooks for %d event kinds", len(d.Webhook), len(m.Events()))
	}
	if len(d.Probs) != len(m.Problems()) {
		t.Errorf("x-problems has %d codes, registry %d", len(d.Probs), len(m.Problems()))
	}
}
