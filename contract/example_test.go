package contract_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"

	"github.com/countersign/countersign/contract"
)

// Quote is the body of a tiny example operation.
type Quote struct {
	Rail  string   `json:"rail" validate:"oneof=acp ucp" doc:"Checkout protocol."`
	Lines []string `json:"lines" validate:"min=1,dive,max=32"`
	Note  *string  `json:"note,omitempty"`
}

func ExampleBuild() {
	def := contract.Definition{
		Title: "Example", Version: "1",
		Parts: []contract.Part{contract.Core()},
		Operations: []contract.Operation{{
			ID: "quote.create", Method: "POST", Path: "/quote", Summary: "Price a cart",
			Credential: contract.CredentialAgent,
			Body:       reflect.TypeFor[Quote](),
			Responses:  []contract.Response{contract.JSON(200, "The priced cart.", reflect.TypeFor[Quote]())},
		}},
	}
	m, err := contract.Build(def)
	if err != nil {
		fmt.Println(err)
		return
	}
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	b, _ := m.OpenAPI("https://pay.example")
	_ = json.Unmarshal(b, &doc)
	var s any
	_ = json.Unmarshal(doc.Components.Schemas["Quote"], &s)
	out, _ := json.Marshal(s)
	fmt.Println(string(out))
	// Output:
	// {"properties":{"lines":{"items":{"maxLength":32,"type":"string"},"minItems":1,"type":"array"},"note":{"type":["string","null"]},"rail":{"description":"Checkout protocol.","enum":["acp","ucp"],"type":"string"}},"required":["rail","lines"],"type":"object"}
}

func ExampleBuild_zeroCredential() {
	_, err := contract.Build(contract.Definition{
		Title: "Example", Version: "1", Parts: []contract.Part{contract.Core()},
		Operations: []contract.Operation{{
			ID: "things.list", Method: "GET", Path: "/things", Summary: "List things",
			Responses: []contract.Response{contract.JSON(200, "ok", nil)},
		}},
	})
	fmt.Println(err)
	// Output:
	// contract: invalid definition: operation things.list: no valid credential class (got unset)
}

func ExampleDecodeJSON() {
	var q Quote
	for _, body := range []string{
		`{"rail":"acp","lines":["a"]}`,
		`{"rail":"acp","lines":["a"],"colour":"red"}`,
		`{"rail":"acp","rail":"ucp"}`,
		`{"rail":"acp","lines":[1]}`,
	} {
		err := contract.DecodeJSON(strings.NewReader(body), &q)
		var de *contract.DecodeError
		var ve *contract.ValidationError
		switch {
		case err == nil:
			fmt.Println("ok", q.Rail, q.Lines)
		case errors.As(err, &de):
			fmt.Println(de.Code, de.Detail)
		case errors.As(err, &ve):
			fmt.Println(ve.Code(), ve.Errors)
		}
	}
	// Output:
	// ok acp [a]
	// request.unknown_field unknown field "colour"
	// request.malformed_json member rail appears twice
	// request.validation [{lines[0] type must be a string}]
}

func ExampleModel_Validate() {
	m, err := contract.Build(contract.Definition{Title: "Example", Version: "1", Parts: []contract.Part{contract.Core()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = m.Validate(Quote{Rail: "sepa", Lines: []string{}})
	var ve *contract.ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Errors {
			fmt.Printf("%s: %s (%s)\n", fe.Field, fe.Message, fe.Rule)
		}
	}
	// Output:
	// rail: must be one of: acp, ucp (oneof)
	// lines: must have at least 1 item (min)
}

func ExampleDecodeParams() {
	m, err := contract.Build(contract.Definition{Title: "Example", Version: "1", Parts: []contract.Part{contract.Core()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, raw := range []string{"", "limit=50&cursor=abc", "limit=abc", "limit=0", "limt=5"} {
		q, _ := url.ParseQuery(raw)
		var p contract.PageParams
		err := contract.DecodeParams(&p, contract.ParamSource{Query: q})
		if err == nil {
			err = m.Validate(&p)
		}
		if err != nil {
			fmt.Printf("%q: %v\n", raw, err)
			continue
		}
		fmt.Printf("%q: cursor=%q limit=%d\n", raw, p.Cursor, p.Limit)
	}
	// Output:
	// "": cursor="" limit=20
	// "limit=50&cursor=abc": cursor="abc" limit=50
	// "limit=abc": contract: invalid request: limit must be an integer
	// "limit=0": contract: invalid request: limit must be at least 1
	// "limt=5": contract: unknown query parameter "limt"
}

func ExampleModel_OpenAPI() {
	m, err := contract.Build(contract.Definition{
		Title: "Example", Version: "1",
		Parts: []contract.Part{contract.Core(), {
			Name: "quotes",
			Operations: []contract.Operation{
				{
					ID: "quote.create", Method: "POST", Path: "/quote", Summary: "Price a cart",
					Credential: contract.CredentialAgent,
					Body:       reflect.TypeFor[Quote](),
					Responses:  []contract.Response{contract.JSON(200, "The priced cart.", reflect.TypeFor[Quote]())},
				},
				{
					ID: "quote.list", Method: "GET", Path: "/quotes", Summary: "List priced carts",
					Credential: contract.CredentialOperator,
					Params:     reflect.TypeFor[contract.PageParams](),
					Responses:  []contract.Response{contract.JSON(200, "A page of carts.", reflect.TypeFor[[]Quote]())},
				},
			},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := m.OpenAPI("https://pay.example")
	if err != nil {
		fmt.Println(err)
		return
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	_ = json.Unmarshal(b, &doc)
	fmt.Println(doc.OpenAPI)
	for _, op := range m.Operations() {
		var o struct {
			OperationID string   `json:"operationId"`
			Credential  string   `json:"x-credential"`
			Codes       []string `json:"x-problem-codes"`
		}
		_ = json.Unmarshal(doc.Paths[op.Path][strings.ToLower(op.Method)], &o)
		fmt.Println(op.Method, op.Path, o.OperationID, o.Credential, o.Codes)
	}
	// Output:
	// 3.1.0
	// POST /quote quote.create agent [auth.invalid auth.missing internal rate_limited request.malformed_json request.too_large request.unknown_field request.unsupported_media_type request.validation store.unavailable unavailable]
	// GET /quotes quote.list operator [internal operator.unauthorized rate_limited request.unknown_field request.validation store.unavailable unavailable]
}

func ExampleModel_Schema() {
	m, err := contract.Build(contract.Definition{Title: "Example", Version: "1", Parts: []contract.Part{contract.Core()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := m.Schema(reflect.TypeFor[[]contract.FieldError]())
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := json.Marshal(s)
	fmt.Println(string(b))
	// Output:
	// {"items":{"$ref":"#/components/schemas/FieldError"},"type":"array"}
}

func ExampleCore() {
	for _, p := range contract.Core().Problems {
		fmt.Println(p.Code, p.Status, p.Action, p.RetryAfter)
	}
	// Output:
	// auth.invalid 401 reauthenticate 0
	// auth.missing 401 reauthenticate 0
	// internal 500 stop 0
	// method.not_allowed 405 fix-request 0
	// operator.rationale_too_short 400 fix-request 0
	// operator.unauthorized 401 reauthenticate 0
	// rate_limited 429 retry-as-is 1
	// request.malformed_json 400 fix-request 0
	// request.too_large 413 fix-request 0
	// request.unknown_field 400 fix-request 0
	// request.unsupported_media_type 415 fix-request 0
	// request.validation 400 fix-request 0
	// route.not_found 404 fix-request 0
	// store.unavailable 503 retry-as-is 30
	// unavailable 503 retry-as-is 5
}

// Each package declares its part; Build checks them together and names
// both parts of a declaration made twice.
func ExampleBuild_parts() {
	quotes := contract.Part{
		Name: "commerce",
		Operations: []contract.Operation{{
			ID: "quote.create", Method: "POST", Path: "/quote", Summary: "Price a cart",
			Credential: contract.CredentialAgent,
			Body:       reflect.TypeFor[Quote](),
			Responses:  []contract.Response{contract.JSON(200, "The priced cart.", reflect.TypeFor[Quote]())},
			Problems:   []string{"quote.expired"},
		}},
		Problems: []contract.ProblemType{{Code: "quote.expired", Status: 409, Title: "Quote expired",
			Action: contract.ActionFixRequest, Description: "The quote's validity passed; ask for a new one."}},
	}
	def := contract.Definition{Title: "Example", Version: "1", Parts: []contract.Part{contract.Core(), quotes}}
	m, err := contract.Build(def)
	if err != nil {
		fmt.Println(err)
		return
	}
	op, _ := m.Operation("quote.create")
	fmt.Println(m.ProblemCodes(op))

	def.Parts = append(def.Parts, contract.Part{Name: "protocol", Operations: quotes.Operations})
	_, err = contract.Build(def)
	fmt.Println(err)
	// Output:
	// [auth.invalid auth.missing internal quote.expired rate_limited request.malformed_json request.too_large request.unknown_field request.unsupported_media_type request.validation store.unavailable unavailable]
	// contract: invalid definition: operation id quote.create declared twice, by commerce and by protocol
}

func ExampleProblem_MarshalJSON() {
	p := contract.Problem{
		Type: "https://pay.example/problems/intent.denied", Title: "Payment denied", Status: 403,
		Code: "intent.denied", Action: contract.ActionStop, RequestID: "req_1",
		Extensions: map[string]any{"intentId": "int_1", "auditSeq": 42},
	}
	b, _ := json.Marshal(p)
	fmt.Println(string(b))
	// Output:
	// {"type":"https://pay.example/problems/intent.denied","title":"Payment denied","status":403,"code":"intent.denied","action":"stop","requestId":"req_1","auditSeq":42,"intentId":"int_1"}
}
