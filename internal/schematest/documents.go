package schematest

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CheckAsyncAPI validates an AsyncAPI document against the official
// AsyncAPI 3.0.0 schema at schemaPath, shows with a broken copy that the
// check can fail, and checks that every event kind has a channel and a send
// operation.
func CheckAsyncAPI(t testing.TB, doc []byte, schemaPath string, kinds []string) {
	t.Helper()
	sch := Compile(t, schemaPath)
	if err := Validate(t, sch, doc); err != nil {
		t.Fatalf("generated AsyncAPI document is not valid AsyncAPI 3.0.0: %v", err)
	}
	// A broken copy must be refused, or the check proves nothing.
	var broken map[string]any
	_ = json.Unmarshal(doc, &broken)
	broken["asyncapi"] = "3.0"
	b, _ := json.Marshal(broken)
	if Validate(t, sch, b) == nil {
		t.Fatal("the meta-schema accepted a document with asyncapi: 3.0")
	}
	var d struct {
		Channels   map[string]any `json:"channels"`
		Operations map[string]struct {
			Action string `json:"action"`
		} `json:"operations"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if _, ok := d.Channels[k]; !ok {
			t.Errorf("event kind %s has no channel", k)
		}
		if d.Operations["send."+k].Action != "send" {
			t.Errorf("event kind %s has no send operation", k)
		}
	}
}

// CompileEverySchema compiles every schema of an OpenAPI document (the
// components and every inline parameter, body and response schema) as
// JSON Schema 2020-12: compiling validates each against the meta-schema
// and resolves every $ref. docURL names the document for $ref resolution.
// It fails the test when fewer than least schemas are found, so an empty
// document cannot pass.
func CompileEverySchema(t testing.TB, doc []byte, docURL string, least int) {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, inst); err != nil {
		t.Fatal(err)
	}
	var ptrs []string
	if comps, ok := d["components"].(map[string]any); ok {
		if schemas, ok := comps["schemas"].(map[string]any); ok {
			for name := range schemas {
				ptrs = append(ptrs, "/components/schemas/"+name)
			}
		}
	}
	schemaPointers(d["paths"], "/paths", &ptrs)
	schemaPointers(d["webhooks"], "/webhooks", &ptrs)
	sort.Strings(ptrs)
	if len(ptrs) < least {
		t.Fatalf("only %d schemas found, want at least %d", len(ptrs), least)
	}
	for _, p := range ptrs {
		if _, err := c.Compile(docURL + "#" + p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// schemaPointers finds every "schema" member below v.
func schemaPointers(v any, ptr string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			p := ptr + "/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			if k == "schema" {
				*out = append(*out, p)
				continue
			}
			schemaPointers(sub, p, out)
		}
	case []any:
		for i, sub := range v {
			schemaPointers(sub, ptr+"/"+strconv.Itoa(i), out)
		}
	}
}
