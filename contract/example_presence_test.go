package contract_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/countersign/countersign/contract"
)

// Page is a request whose limit is optional but, when sent, 1 to 100.
type Page struct {
	Limit int `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// An explicit zero is a value the rules judge, as the served schema says
// (minimum: 1); leaving the member out is what "absent" means.
func ExampleModel_DecodeJSON() {
	m, err := contract.Build(contract.Definition{Title: "Example", Version: "1", Parts: []contract.Part{contract.Core()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, body := range []string{`{}`, `{"limit":5}`, `{"limit":0}`} {
		var p Page
		err := m.DecodeJSON(strings.NewReader(body), &p)
		var ve *contract.ValidationError
		if errors.As(err, &ve) {
			fmt.Println(body, "→", ve.Errors[0].Field, ve.Errors[0].Message)
			continue
		}
		fmt.Println(body, "→ limit", p.Limit, err)
	}
	// Output:
	// {} → limit 0 <nil>
	// {"limit":5} → limit 5 <nil>
	// {"limit":0} → limit must be at least 1
}

// Receipt and Hold are the two answers of an approval.
type (
	Receipt struct {
		ID string `json:"id"`
	}
	Hold struct {
		ExpiresAt string `json:"expiresAt"`
	}
)

// A response whose shape depends on what the request acted on is one of
// several types: a oneOf schema.
func ExampleJSONOneOf() {
	r := contract.JSONOneOf(200, "A receipt, or a hold.", reflect.TypeFor[Receipt](), reflect.TypeFor[Hold]())
	fmt.Println(r.Status, r.Content[0].MediaType, len(r.Content[0].OneOf))
	// Output:
	// 200 application/json 2
}
