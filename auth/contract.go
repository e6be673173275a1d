package auth

import (
	"reflect"
	"time"

	"github.com/countersign/countersign/contract"
)

// Problem codes of agent credentials and usage. [ErrMissing] and
// [ErrInvalid] carry contract.CodeAuthMissing and contract.CodeAuthInvalid:
// the HTTP layer answers them on every agent operation, so the contract
// declares them.
const (
	CodeBadRequest = "auth.bad_request"   // ErrBadRequest
	CodeBadCursor  = "auth.bad_cursor"    // ErrBadCursor
	CodeNotFound   = "auth.key_not_found" // ErrNotFound
	CodeBadWindow  = "usage.bad_window"   // ErrBadWindow
)

// Contract returns the declarations of agent credentials for the contract
// model: an agent's usage report (usage.get), the operator's management of
// agent keys (operator.agents.*) and the problem types of the codes above.
func Contract() contract.Part {
	return contract.Part{
		Name: "auth",
		Operations: []contract.Operation{
			{
				ID: "usage.get", Method: "GET", Path: "/usage",
				Summary: "Usage of the calling key",
				Description: "Counts the calling agent key's requests in the half-open window [since, until) (RFC 3339, " +
					"at most 31 days; minute buckets count when their start is in the window, and the answer states the " +
					"window actually counted), by operation, outcome (ok or the problem code) and attribution tag. " +
					"tags filters with AND semantics: a request counts when it carried every tag given. Tags come from " +
					"the X-Svc-Tags header of each request; malformed tags are dropped, never an error.",
				Credential: contract.CredentialAgent,
				Params:     reflect.TypeFor[UsageParams](),
				Responses:  []contract.Response{contract.JSON(200, "The usage report.", reflect.TypeFor[Report]())},
				Problems:   []string{CodeBadWindow, contract.CodeAuthMissing, contract.CodeAuthInvalid, contract.CodeRateLimited, contract.CodeUnavailable},
			},
			{
				ID: "operator.agents.create", Method: "POST", Path: "/operator/agents",
				Summary:     "Issue an agent credential",
				Description: "Issues an agent key that may act for the listed agent ids (hex Ed25519 public keys). The credential is in this answer only; the server keeps its hash. With jkt the key is bound to a DPoP key.",
				Credential:  contract.CredentialOperator,
				Body:        reflect.TypeFor[AgentCreateRequest](),
				Responses:   []contract.Response{contract.JSON(201, "The key and, this once, its credential.", reflect.TypeFor[Issued]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeBadRequest, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.agents.list", Method: "GET", Path: "/operator/agents",
				Summary:     "List agent keys",
				Description: "Lists agent keys in creation order, revoked ones included. Secrets are never shown.",
				Credential:  contract.CredentialOperator,
				Params:      reflect.TypeFor[contract.PageParams](),
				Responses:   []contract.Response{contract.JSON(200, "A page of agent keys.", reflect.TypeFor[KeyPage]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, CodeBadCursor, contract.CodeUnavailable},
			},
			{
				ID: "operator.agents.revoke", Method: "DELETE", Path: "/operator/agents/{id}",
				Summary:     "Revoke an agent key",
				Description: "Revokes the key at once: every later request with it is refused. A DELETE has no body, so the rationale is a query parameter (covered by the operator signature like the rest of the URL).",
				Credential:  contract.CredentialOperator,
				Params:      reflect.TypeFor[AgentRevokeParams](),
				Responses:   []contract.Response{contract.JSON(200, "The revoked key.", reflect.TypeFor[Key]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeNotFound, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeBadRequest, Status: 400, Title: "Invalid key request", Action: contract.ActionFixRequest,
				Description: "The agent key request is not valid: a name of 1 to 100 characters and 1 to 100 agent ids of 64 " +
					"lowercase hex characters are needed; a jkt must be a base64url SHA-256 JWK thumbprint."},
			{Code: CodeBadCursor, Status: 400, Title: "Bad cursor", Action: contract.ActionFixRequest,
				Description: "The cursor was not issued by this list. Pass exactly the nextCursor of a previous page."},
			{Code: CodeNotFound, Status: 404, Title: "No such agent key", Action: contract.ActionFixRequest,
				Description: "No agent key has this id."},
			{Code: CodeBadWindow, Status: 400, Title: "Bad usage window", Action: contract.ActionFixRequest,
				Description: "since must be before until, and the window at most 31 days. Both are RFC 3339 timestamps."},
		},
	}
}

// UsageParams are the parameters of usage.get.
type UsageParams struct {
	Since time.Time `query:"since" validate:"required" doc:"Start of the window, RFC 3339, inclusive."`
	Until time.Time `query:"until" validate:"required" doc:"End of the window, RFC 3339, exclusive; at most 31 days after since."`
	Tags  []string  `query:"tags" validate:"max=16,dive,max=64" doc:"Repeatable; only requests that carried every one of these tags count."`
}

// AgentCreateRequest is the body of operator.agents.create.
type AgentCreateRequest struct {
	Name      string   `json:"name" validate:"required,max=100" doc:"A name for people reading the record."`
	AgentIDs  []string `json:"agentIds" validate:"required,min=1,max=100,dive,len=64,hexadecimal" doc:"Agent ids (64 lowercase hex Ed25519 public keys) the key may act for."`
	JKT       string   `json:"jkt,omitempty" validate:"omitempty,len=43" doc:"Bind the key to this DPoP JWK thumbprint (RFC 7638, SHA-256, base64url)."`
	Rationale string   `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// AgentRevokeParams are the parameters of operator.agents.revoke.
type AgentRevokeParams struct {
	ID        string `path:"id" validate:"required,max=64" doc:"The agent key id (ak_...)."`
	Rationale string `query:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}
