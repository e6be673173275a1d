// Package schematest compiles the official JSON Schemas the project's
// generated documents are checked against (OpenAPI 3.1, AsyncAPI 3.0) with
// an independent validator, github.com/santhosh-tekuri/jsonschema/v6. It is
// test support, like storetest: production code never imports it.
package schematest

import (
	"bytes"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile reads the JSON Schema file at path and compiles it; any failure
// fails the test.
func Compile(t testing.TB, path string) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(path, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return sch
}

// Validate checks the JSON document doc against sch.
func Validate(t testing.TB, sch *jsonschema.Schema, doc []byte) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("document does not parse: %v", err)
	}
	return sch.Validate(inst)
}
