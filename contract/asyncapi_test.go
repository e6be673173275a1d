package contract

import (
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/internal/schematest"
)

// TestAsyncAPIMetaSchema validates the test API's AsyncAPI document against
// the official AsyncAPI 3.0.0 JSON Schema (testdata, see its README) with a
// validator independent of the generator, and checks every event kind is a
// channel with a send operation. Package product runs the same check on
// the whole product's document.
func TestAsyncAPIMetaSchema(t *testing.T) {
	m := testModel(t)
	doc, err := m.AsyncAPI("https://countersign.example")
	if err != nil {
		t.Fatal(err)
	}
	sch := schematest.Compile(t, "testdata/asyncapi-3.0.0-schema.json")
	if err := schematest.Validate(t, sch, doc); err != nil {
		t.Fatalf("generated AsyncAPI document is not valid AsyncAPI 3.0.0: %v", err)
	}
	// A broken copy must be refused, or the check proves nothing.
	var broken map[string]any
	_ = json.Unmarshal(doc, &broken)
	broken["asyncapi"] = "3.0"
	b, _ := json.Marshal(broken)
	if schematest.Validate(t, sch, b) == nil {
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
