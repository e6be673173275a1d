package contract

import (
	"reflect"
	"testing"
)

// The test API: a small definition exercising everything the documents
// project (an agent operation with parameters, a body and two success
// responses, one with two representations, an operator operation without
// a body, an open operation, a problem type of its own beside the core
// ones, and an event kind), so the machinery is tested without the
// product's packages, which contract must not import.

type orderParams struct {
	IdempotencyKey string `header:"Idempotency-Key" validate:"omitempty,max=255" doc:"Optional idempotency key."`
}

type orderRef struct {
	ID       string `path:"id" validate:"required,max=64" doc:"The order id."`
	Cursor   string `query:"cursor" validate:"omitempty,max=256"`
	Limit    int    `query:"limit" default:"20" validate:"min=1,max=100"`
	TreeSize uint64 `query:"treeSize"`
}

type orderCancel struct {
	ID        string `path:"id" validate:"required,max=64"`
	Rationale string `query:"rationale" validate:"required,max=2000"`
}

type orderCreated struct {
	Kind  string `json:"kind" validate:"required"`
	Order order  `json:"order"`
}

const codeOrderNotFound = "orders.not_found"

func testDefinition() Definition {
	return Definition{
		Title: "Orders", Version: "1", Description: "A test API.",
		Parts: []Part{Core(), {
			Name: "orders",
			Operations: []Operation{
				{
					ID: "orders.create", Method: "POST", Path: "/orders", Summary: "Place an order",
					Credential: CredentialAgent,
					Params:     reflect.TypeFor[orderParams](),
					Body:       reflect.TypeFor[order](),
					Responses: []Response{
						JSON(201, "Placed.", reflect.TypeFor[order]()),
						JSON(202, "Held.", reflect.TypeFor[RationaleRequest]()),
					},
					Problems: []string{CodeUnavailable},
				},
				{
					ID: "orders.get", Method: "GET", Path: "/orders/{id}", Summary: "One order",
					Credential: CredentialAgent,
					Params:     reflect.TypeFor[orderRef](),
					Responses: []Response{{Status: 200, Description: "The order.", Content: []Content{
						{MediaType: MediaJSON, Type: reflect.TypeFor[order]()},
						{MediaType: MediaText},
					}}},
					Problems: []string{codeOrderNotFound},
				},
				{
					ID: "orders.cancel", Method: "DELETE", Path: "/orders/{id}", Summary: "Cancel an order",
					Credential: CredentialOperator,
					Params:     reflect.TypeFor[orderCancel](),
					Responses:  []Response{{Status: 204, Description: "Cancelled."}},
					Problems:   []string{CodeOperatorRationaleTooShort, codeOrderNotFound},
				},
				{
					ID: "orders.list", Method: "GET", Path: "/orders", Summary: "List orders",
					Credential: CredentialOperator,
					Params:     reflect.TypeFor[PageParams](),
					Responses:  []Response{JSON(200, "A page.", reflect.TypeFor[[]order]())},
				},
				{
					ID: "status.get", Method: "GET", Path: "/status", Summary: "Liveness",
					Credential: CredentialNone,
					Responses:  []Response{{Status: 200, Description: "Up.", Content: []Content{{MediaType: MediaJSON}}}},
				},
			},
			Problems: []ProblemType{{Code: codeOrderNotFound, Status: 404, Title: "No such order",
				Action: ActionFixRequest, Description: "No order has this id."}},
			Events: []EventKind{{Name: "order.created", Description: "An order was placed.",
				Payload: reflect.TypeFor[orderCreated]()}},
		}},
	}
}

// testModel builds [testDefinition].
func testModel(t testing.TB) *Model {
	t.Helper()
	m, err := Build(testDefinition())
	if err != nil {
		t.Fatal(err)
	}
	return m
}
