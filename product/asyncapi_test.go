package product_test

import (
	"testing"

	"github.com/countersign/countersign/internal/schematest"
	"github.com/countersign/countersign/product"
)

// TestAsyncAPIMetaSchema validates the generated AsyncAPI document against
// the official AsyncAPI 3.0.0 JSON Schema (contract's testdata, see its
// README) with a validator independent of the generator, and checks every
// event kind is a channel with a send operation.
func TestAsyncAPIMetaSchema(t *testing.T) {
	m := product.Model()
	doc, err := m.AsyncAPI("https://countersign.example")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range m.Events() {
		kinds = append(kinds, ev.Name)
	}
	schematest.CheckAsyncAPI(t, doc, "../contract/testdata/asyncapi-3.0.0-schema.json", kinds)
}
