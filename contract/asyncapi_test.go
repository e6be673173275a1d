package contract

import (
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
	var kinds []string
	for _, ev := range m.Events() {
		kinds = append(kinds, ev.Name)
	}
	schematest.CheckAsyncAPI(t, doc, "testdata/asyncapi-3.0.0-schema.json", kinds)
}
