package webhook

import (
	"reflect"

	"github.com/countersign/countersign/contract"
)

// Problem codes of the endpoint and delivery services; each sentinel error
// carries its code through its Code method.
const (
	CodeInvalidURL       = "webhook.invalid_url"        // ErrInvalidURL
	CodeInvalidEvents    = "webhook.invalid_events"     // ErrInvalidEvents
	CodeNotFound         = "webhook.not_found"          // ErrNotFound
	CodeTooManyEndpoints = "webhook.too_many_endpoints" // ErrTooManyEndpoints
	CodeDeliveryNotFound = "webhook.delivery_not_found" // ErrDeliveryNotFound
	CodeInactive         = "webhook.endpoint_inactive"  // ErrInactive
	CodeBadCursor        = "webhook.bad_cursor"         // ErrBadCursor
	CodeBadLimit         = "webhook.bad_limit"          // ErrBadLimit
)

// Contract returns the webhook declarations for the contract model: the
// operator's management of endpoints and deliveries (webhooks.*), the
// problem types of the codes above, and the event kinds of [Kinds].
func Contract() contract.Part {
	// Every endpoint route can answer every code of the service.
	problems := []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeInvalidURL,
		CodeInvalidEvents, CodeNotFound, CodeBadCursor, CodeTooManyEndpoints, CodeDeliveryNotFound,
		CodeInactive, CodeBadLimit, contract.CodeRequestTooLarge,
		contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable}
	return contract.Part{
		Name: "webhook",
		Operations: []contract.Operation{
			{
				ID: "webhooks.create", Method: "POST", Path: "/webhooks/endpoints",
				Summary: "Register a webhook endpoint",
				Description: "Registers a destination for signed events derived from the record. The signing secret is in " +
					"this answer only. An agent can never register a destination for copies of the record: this is operator-signed.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[WebhookCreateRequest](),
				Responses:  []contract.Response{contract.JSON(201, "The endpoint and, this once, its signing secret.", reflect.TypeFor[Created]())},
				Problems:   problems,
			},
			{
				ID: "webhooks.list", Method: "GET", Path: "/webhooks/endpoints",
				Summary: "List webhook endpoints", Description: "Pages through the endpoints, oldest first. Secrets are never shown.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[contract.PageParams](),
				Responses:  []contract.Response{contract.JSON(200, "A page of endpoints.", reflect.TypeFor[EndpointPage]())},
				Problems:   problems,
			},
			{
				ID: "webhooks.get", Method: "GET", Path: "/webhooks/endpoints/{id}",
				Summary: "One webhook endpoint", Description: "Returns the endpoint; its secret is never shown.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[EndpointParams](),
				Responses:  []contract.Response{contract.JSON(200, "The endpoint.", reflect.TypeFor[Endpoint]())},
				Problems:   problems,
			},
			{
				ID: "webhooks.update", Method: "PATCH", Path: "/webhooks/endpoints/{id}",
				Summary: "Change a webhook endpoint",
				Description: "Changes url, events or active. rotateSecret: true issues a new secret, shown in this answer " +
					"only; for 24 hours deliveries carry signatures under both the old and the new secret.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[EndpointParams](),
				Body:       reflect.TypeFor[WebhookUpdateRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The endpoint (and a rotated secret, once).", reflect.TypeFor[Updated]())},
				Problems:   problems,
			},
			{
				ID: "webhooks.delete", Method: "DELETE", Path: "/webhooks/endpoints/{id}",
				Summary:     "Delete a webhook endpoint",
				Description: "Deletes the endpoint; pending deliveries to it stop. The rationale is a query parameter (a DELETE has no body).",
				Credential:  contract.CredentialOperator,
				Params:      reflect.TypeFor[EndpointDeleteParams](),
				Responses:   []contract.Response{{Status: 204, Description: "Deleted."}},
				Problems:    problems,
			},
			{
				ID: "webhooks.deliveries", Method: "GET", Path: "/webhooks/endpoints/{id}/deliveries",
				Summary: "Deliveries of an endpoint", Description: "Pages through the deliveries, newest event first: event id, attempts, last status and error, next attempt, state.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[DeliveriesParams](),
				Responses:  []contract.Response{contract.JSON(200, "A page of deliveries.", reflect.TypeFor[DeliveryPage]())},
				Problems:   problems,
			},
			{
				ID: "webhooks.retry", Method: "POST", Path: "/webhooks/endpoints/{id}/deliveries/{eventId}/retry",
				Summary: "Retry a delivery now", Description: "Makes a pending or failed delivery due now.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[DeliveryParams](),
				Body:       reflect.TypeFor[contract.RationaleRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The delivery.", reflect.TypeFor[Delivery]())},
				Problems:   problems,
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeInvalidURL, Status: 400, Title: "Invalid endpoint URL", Action: contract.ActionFixRequest,
				Description: "An endpoint URL must be https (http only to a loopback address in sandbox mode), without " +
					"credentials or fragment, and must not name a private, loopback, link-local or multicast address."},
			{Code: CodeInvalidEvents, Status: 400, Title: "Invalid event kinds", Action: contract.ActionFixRequest,
				Description: "events must list at least one known event kind, or \"*\" for every kind; the detail lists the valid kinds."},
			{Code: CodeNotFound, Status: 404, Title: "No such endpoint or delivery", Action: contract.ActionFixRequest,
				Description: "No webhook endpoint (or no delivery of it) has this id."},
			{Code: CodeBadCursor, Status: 400, Title: "Bad cursor", Action: contract.ActionFixRequest,
				Description: "The cursor was not issued by this list. Pass exactly the nextCursor of a previous page."},
			{Code: CodeTooManyEndpoints, Status: 409, Title: "Too many endpoints", Action: contract.ActionStop,
				Description: "The deployment's limit on webhook endpoints is reached. Delete an endpoint you no longer use."},
			{Code: CodeDeliveryNotFound, Status: 404, Title: "No such delivery", Action: contract.ActionFixRequest,
				Description: "The endpoint has no delivery of this event (it was not subscribed, or the delivery's retention passed)."},
			{Code: CodeInactive, Status: 409, Title: "Endpoint inactive", Action: contract.ActionFixRequest,
				Description: "The endpoint is inactive, so nothing is delivered to it. Activate it (PATCH active: true) first."},
			{Code: CodeBadLimit, Status: 400, Title: "Bad page size", Action: contract.ActionFixRequest,
				Description: "limit must be 1 to 100."},
		},
		Events: Kinds(),
	}
}

// The types below are the bodies and parameters of the operations above.
// WebhookCreateRequest and WebhookUpdateRequest are component names of the
// OpenAPI document, so they keep their Webhook prefix.

// WebhookCreateRequest is the body of webhooks.create.
type WebhookCreateRequest struct {
	CreateRequest
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// WebhookUpdateRequest is the body of webhooks.update.
type WebhookUpdateRequest struct {
	UpdateRequest
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// EndpointParams name a webhook endpoint in the path.
type EndpointParams struct {
	ID string `path:"id" validate:"required,max=64" doc:"The endpoint id (we_...)."`
}

// EndpointDeleteParams are the parameters of webhooks.delete.
type EndpointDeleteParams struct {
	ID        string `path:"id" validate:"required,max=64" doc:"The endpoint id (we_...)."`
	Rationale string `query:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// DeliveriesParams are the parameters of webhooks.deliveries.
type DeliveriesParams struct {
	ID     string `path:"id" validate:"required,max=64" doc:"The endpoint id (we_...)."`
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Items per page, 1 to 100."`
}

// DeliveryParams name one delivery of an endpoint.
type DeliveryParams struct {
	ID      string `path:"id" validate:"required,max=64" doc:"The endpoint id (we_...)."`
	EventID string `path:"eventId" validate:"required,max=128" doc:"The event id (evt_<sequence>_<type>)."`
}
