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
		Problems: contract.Problems(),
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
		Title: "Example", Version: "1", Problems: contract.Problems(),
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
	m := contract.New()
	err := m.Validate(Quote{Rail: "sepa", Lines: []string{}})
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
	m := contract.New()
	for _, raw := range []string{"", "limit=50&cursor=abc", "limit=abc", "limit=0", "limt=5"} {
		q, _ := url.ParseQuery(raw)
		var p contract.AuditListParams
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
	m := contract.New()
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
			OperationID string `json:"operationId"`
			Credential  string `json:"x-credential"`
		}
		_ = json.Unmarshal(doc.Paths[op.Path][strings.ToLower(op.Method)], &o)
		fmt.Println(op.Method, op.Path, o.OperationID, o.Credential)
	}
	// Output:
	// 3.1.0
	// GET /audit audit.list agent
	// GET /audit/checkpoint audit.checkpoint agent
	// GET /audit/entries/{seq} audit.entry agent
	// GET /audit/consistency audit.consistency agent
	// GET /audit/stream audit.stream agent
	// POST /pay pay.create agent
	// GET /intents/{id} intents.get agent
	// GET /intents/{id}/events intents.events agent
	// GET /usage usage.get agent
	// POST /operator/approve operator.approve operator
	// POST /operator/refund operator.refund operator
	// POST /operator/kill-switch operator.kill_switch operator
	// POST /operator/circuit-breaker/reset operator.breaker_reset operator
	// GET /operator/approvals operator.approvals operator
	// POST /operator/agents operator.agents.create operator
	// GET /operator/agents operator.agents.list operator
	// DELETE /operator/agents/{id} operator.agents.revoke operator
	// POST /webhooks/endpoints webhooks.create operator
	// GET /webhooks/endpoints webhooks.list operator
	// GET /webhooks/endpoints/{id} webhooks.get operator
	// PATCH /webhooks/endpoints/{id} webhooks.update operator
	// DELETE /webhooks/endpoints/{id} webhooks.delete operator
	// GET /webhooks/endpoints/{id}/deliveries webhooks.deliveries operator
	// POST /webhooks/endpoints/{id}/deliveries/{eventId}/retry webhooks.retry operator
	// POST /protocol/mandate/revoke mandate.revoke operator
	// GET /openapi.json openapi.get none
	// GET /asyncapi.json asyncapi.get none
	// GET /healthz health.get none
	// GET /problems/{code} problems.get none
}

func ExampleModel_Schema() {
	s, err := contract.New().Schema(reflect.TypeFor[[]contract.FieldError]())
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := json.Marshal(s)
	fmt.Println(string(b))
	// Output:
	// {"items":{"$ref":"#/components/schemas/FieldError"},"type":"array"}
}

func ExampleNew() {
	m := contract.New()
	op, _ := m.Operation("audit.list")
	fmt.Println(op.Method, op.Path, op.Credential)
	fmt.Println(m.ProblemCodes(op))
	p, _ := m.Problem(contract.CodeRateLimited)
	fmt.Println(p.Status, p.Action, p.RetryAfter)
	// Output:
	// GET /audit agent
	// [audit.bad_cursor auth.invalid auth.missing internal rate_limited request.unknown_field request.validation unavailable]
	// 429 retry-as-is 1
}

func ExampleProblem_MarshalJSON() {
	p := contract.Problem{
		Type: "https://pay.example/problems/intent.denied", Title: "Payment denied", Status: 403,
		Code: contract.CodeIntentDenied, Action: contract.ActionStop, RequestID: "req_1",
		Extensions: map[string]any{"intentId": "int_1", "auditSeq": 42},
	}
	b, _ := json.Marshal(p)
	fmt.Println(string(b))
	// Output:
	// {"type":"https://pay.example/problems/intent.denied","title":"Payment denied","status":403,"code":"intent.denied","action":"stop","requestId":"req_1","auditSeq":42,"intentId":"int_1"}
}
