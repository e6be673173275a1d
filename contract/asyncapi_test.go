package contract_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/contract"
)

// TestAsyncAPIMetaSchema validates the generated AsyncAPI document against
// the official AsyncAPI 3.0.0 JSON Schema (testdata, see its README) with a
// validator independent of the generator, and checks every event kind is a
// channel with a send operation.
func TestAsyncAPIMetaSchema(t *testing.T) {
	m := contract.New()
	doc, err := m.AsyncAPI("https://countersign.example")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/asyncapi-3.0.0-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	schemaDoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("asyncapi-3.0.0.json", schemaDoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("asyncapi-3.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("generated AsyncAPI document is not valid AsyncAPI 3.0.0: %v", err)
	}
	// A broken copy must be refused, or the check proves nothing.
	var broken map[string]any
	_ = json.Unmarshal(doc, &broken)
	broken["asyncapi"] = "3.0"
	b, _ := json.Marshal(broken)
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if sch.Validate(bad) == nil {
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
	for _, ev := range m.Events() {
		if _, ok := d.Channels[ev.Name]; !ok {
			t.Errorf("event kind %s has no channel", ev.Name)
		}
		if d.Operations["send."+ev.Name].Action != "send" {
			t.Errorf("event kind %s has no send operation", ev.Name)
		}
	}
}
