package product

import (
	"reflect"

	"github.com/countersign/countersign/contract"
)

// served declares the operations that describe the product itself: its
// documents, its problem pages and its liveness. The reference server
// answers them (package httpserver); they are declared here because what
// they serve is the whole assembly, not one domain.
func served() contract.Part {
	return contract.Part{
		Name: "product",
		Operations: []contract.Operation{
			{
				ID: "openapi.get", Method: "GET", Path: "/openapi.json",
				Summary:     "This OpenAPI document",
				Description: "The live contract, generated from the same model as the routes; the authority on the current operation list.",
				Credential:  contract.CredentialNone,
				Responses:   []contract.Response{{Status: 200, Description: "OpenAPI 3.1 document.", Content: []contract.Content{{MediaType: contract.MediaJSON}}}},
			},
			{
				ID: "asyncapi.get", Method: "GET", Path: "/asyncapi.json",
				Summary:     "The event surface (AsyncAPI 3.0)",
				Description: "The events the server sends to registered webhook endpoints, generated from the same model as the routes: channels per event kind, payloads, and the Svc-Signature delivery header.",
				Credential:  contract.CredentialNone,
				Responses:   []contract.Response{{Status: 200, Description: "AsyncAPI 3.0 document.", Content: []contract.Content{{MediaType: contract.MediaJSON}}}},
			},
			{
				ID: "health.get", Method: "GET", Path: "/healthz",
				Summary:     "Liveness",
				Description: "Answers while the process serves requests. It does not touch the store.",
				Credential:  contract.CredentialNone,
				Responses:   []contract.Response{contract.JSON(200, "The server is up.", reflect.TypeFor[Health]())},
			},
			{
				ID: "problems.get", Method: "GET", Path: "/problems/{code}",
				Summary:     "Problem type page",
				Description: "A short page for people describing one problem code: its status, title, action and meaning.",
				Credential:  contract.CredentialNone,
				Params:      reflect.TypeFor[ProblemPageParams](),
				Responses:   []contract.Response{{Status: 200, Description: "The page.", Content: []contract.Content{{MediaType: contract.MediaHTML}}}},
				Problems:    []string{contract.CodeRouteNotFound},
			},
		},
	}
}

// Health is the response of health.get.
type Health struct {
	Status string `json:"status" validate:"oneof=ok" doc:"Always ok."`
}

// ProblemPageParams are the parameters of problems.get.
type ProblemPageParams struct {
	Code string `path:"code" validate:"max=64" doc:"A problem code, e.g. audit.bad_cursor."`
}
