package contract

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/internal/schematest"
)

const (
	testBase     = "https://countersign.example"
	oasSchemaURL = "https://spec.openapis.org/oas/3.1/schema/2022-02-27"
	docURL       = "https://countersign.example/openapi.json"
)

func openAPIDoc(t *testing.T, m *Model) []byte {
	t.Helper()
	doc, err := m.OpenAPI(testBase)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// oasValidator compiles the official OpenAPI 3.1 schema kept in testdata.
func oasValidator(t *testing.T) *jsonschema.Schema {
	t.Helper()
	return schematest.Compile(t, filepath.Join("testdata", "openapi-3.1-schema.json"))
}

func unmarshalInstance(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOpenAPIMetaSchema is the acceptance test of the generator: the
// document of the test API is valid according to the official OpenAPI 3.1
// schema, checked by an independent validator. Package product runs the
// same check on the whole product's document.
func TestOpenAPIMetaSchema(t *testing.T) {
	sch := oasValidator(t)
	doc := openAPIDoc(t, testModel(t))
	if err := sch.Validate(unmarshalInstance(t, doc)); err != nil {
		t.Fatalf("generated document is not valid OpenAPI 3.1:\n%v", err)
	}

	// Control: the validator does reject a broken document, so the pass
	// above means something.
	var broken map[string]any
	if err := json.Unmarshal(doc, &broken); err != nil {
		t.Fatal(err)
	}
	broken["paths"].(map[string]any)["/orders/{id}"].(map[string]any)["get"].(map[string]any)["responses"] = map[string]any{"ok": 1}
	b, _ := json.Marshal(broken)
	if err := sch.Validate(unmarshalInstance(t, b)); err == nil {
		t.Fatal("a document with a malformed responses object passed validation")
	}
}

// TestSchemasAreValidJSONSchema compiles every schema in the document as
// JSON Schema 2020-12 (schematest.CompileEverySchema).
func TestSchemasAreValidJSONSchema(t *testing.T) {
	schematest.CompileEverySchema(t, openAPIDoc(t, testModel(t)), docURL, 20)
}

func TestOpenAPIDeterministic(t *testing.T) {
	a := openAPIDoc(t, testModel(t))
	for range 3 {
		if b := openAPIDoc(t, testModel(t)); !bytes.Equal(a, b) {
			t.Fatal("two generations differ")
		}
	}
}

func TestOpenAPIShape(t *testing.T) {
	m := testModel(t)
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
		if want := securityOf(op.Credential); !sameSecurity(o.Security, want) {
			t.Errorf("%s: security %v, want %v", op.ID, o.Security, want)
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

func TestOpenAPIBadBaseURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "/relative", "https://x/?q=1", "https://"} {
		if _, err := testModel(t).OpenAPI(u); err == nil {
			t.Errorf("OpenAPI(%q) succeeded", u)
		}
	}
	doc, err := testModel(t).OpenAPI(testBase + "/")
	if err != nil || !bytes.Contains(doc, []byte(`"url": "`+testBase+`"`)) {
		t.Errorf("trailing slash not trimmed: %v", err)
	}
}

// securityOf is the security requirement an operation of class c must
// declare: alternatives, each naming one scheme.
func securityOf(c Credential) []string {
	switch c {
	case CredentialAgent:
		return []string{SchemeAgent}
	case CredentialOperator:
		return []string{SchemeOperator}
	case CredentialAgentOrOperator:
		return []string{SchemeAgent, SchemeOperator}
	}
	return nil
}

func sameSecurity(got []map[string][]any, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i, w := range want {
		if len(got[i]) != 1 || got[i][w] == nil {
			return false
		}
	}
	return true
}

// TestOpenAPIAgentOrOperator: an operation open to an agent credential or
// an operator signature declares both schemes as alternatives, the
// refusals of both, the rate-limit headers on every response (an agent's
// request spends its key's bucket; an operator's unidentified refusal the
// address's) and WWW-Authenticate on its 401.
func TestOpenAPIAgentOrOperator(t *testing.T) {
	op := baseOp()
	op.Credential = CredentialAgentOrOperator
	m, err := Build(def(op))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]struct {
			Credential string                                      `json:"x-credential"`
			Security   []map[string][]any                          `json:"security"`
			Codes      []string                                    `json:"x-problem-codes"`
			Responses  map[string]struct{ Headers map[string]any } `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc(t, m), &d); err != nil {
		t.Fatal(err)
	}
	o := d.Paths["/things/{id}"]["get"]
	if o.Credential != "agent-or-operator" || !sameSecurity(o.Security, []string{SchemeAgent, SchemeOperator}) {
		t.Errorf("x-credential %q security %v", o.Credential, o.Security)
	}
	for _, c := range []string{CodeAuthMissing, CodeAuthInvalid, CodeOperatorUnauthorized} {
		if !slices.Contains(o.Codes, c) {
			t.Errorf("x-problem-codes %v lack %s", o.Codes, c)
		}
	}
	for status, r := range o.Responses {
		for _, h := range []string{HeaderRateLimitLimit, HeaderRateLimitRemaining, HeaderRateLimitReset} {
			if r.Headers[h] == nil {
				t.Errorf("%s: no %s", status, h)
			}
		}
		if (r.Headers[HeaderWWWAuthenticate] != nil) != (status == "401") {
			t.Errorf("%s: WWW-Authenticate declared: %v", status, r.Headers[HeaderWWWAuthenticate] != nil)
		}
	}
	if _, ok := o.Responses["401"]; !ok {
		t.Error("no 401 response")
	}
	if err := oasValidator(t).Validate(unmarshalInstance(t, openAPIDoc(t, m))); err != nil {
		t.Errorf("the document is not valid OpenAPI 3.1: %v", err)
	}
}
