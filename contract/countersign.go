package contract

import (
	"reflect"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/webhook"
)

// Version is the version of the contract this package declares, served as
// info.version of the OpenAPI document.
const Version = "0.1.0"

// Countersign returns the definition of this release: every operation,
// event kind and problem type. The value is fresh on every call, so a
// caller (a test, a deployment with extra operations) may append to it
// before passing it to [Build].
func Countersign() Definition {
	return Definition{
		Title:   "Countersign",
		Version: Version,
		Description: "Payments and purchases by automated agents under human oversight. An agent submits " +
			"a signed payment instruction; a deny-first gate decides; every decision lands in a signed, " +
			"hash-linked record; money moves only when the gate allows it or an operator approves it.\n\n" +
			"Errors are RFC 9457 problems (application/problem+json) carrying a stable code and an action; " +
			"x-problems lists every code. Every response carries X-Request-Id.",
		Operations: Operations(),
		Events:     Events(),
		Problems:   Problems(),
	}
}

// Operations returns the operations of this release in a stable order.
func Operations() []Operation {
	return []Operation{
		{
			ID: "audit.list", Method: "GET", Path: "/audit",
			Summary: "List record entries",
			Description: "Returns one page of the signed record in ascending sequence order. Pass the page's " +
				"nextCursor as cursor to read on; nextCursor is null on the last page.",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[AuditListParams](),
			Responses:  []Response{JSON(200, "A page of entries.", reflect.TypeFor[audit.Page]())},
			Problems:   []string{CodeAuditBadCursor, CodeUnavailable},
		},
		{
			ID: "audit.checkpoint", Method: "GET", Path: "/audit/checkpoint",
			Summary: "Latest signed checkpoint",
			Description: "Returns the latest signed Merkle tree head of the record. With Accept: text/plain " +
				"the C2SP signed note is returned as is, for note-verifying tools.",
			Credential: CredentialAgent,
			Responses: []Response{{Status: 200, Description: "The latest checkpoint.", Content: []Content{
				{MediaType: MediaJSON, Type: reflect.TypeFor[audit.Checkpoint]()},
				{MediaType: MediaText},
			}}},
			Problems: []string{CodeUnavailable},
		},
		{
			ID: "audit.entry", Method: "GET", Path: "/audit/entries/{seq}",
			Summary: "One entry with its inclusion proof",
			Description: "Returns the entry with sequence number seq and a proof that it is included in the " +
				"tree of treeSize entries (the latest checkpoint when treeSize is omitted).",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[AuditEntryParams](),
			Responses:  []Response{JSON(200, "The entry and its inclusion proof.", reflect.TypeFor[AuditEntryWithProof]())},
			Problems:   []string{CodeAuditNotFound, CodeAuditOutOfRange, CodeUnavailable},
		},
		{
			ID: "audit.consistency", Method: "GET", Path: "/audit/consistency",
			Summary: "Consistency proof between two tree sizes",
			Description: "Proves that the tree of size from is a prefix of the tree of size to (the latest " +
				"checkpoint when to is omitted): the record only grew.",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[AuditConsistencyParams](),
			Responses:  []Response{JSON(200, "The consistency proof.", reflect.TypeFor[audit.ConsistencyProof]())},
			Problems:   []string{CodeAuditOutOfRange, CodeUnavailable},
		},
		{
			ID: "audit.stream", Method: "GET", Path: "/audit/stream",
			Summary: "Live stream of record entries",
			Description: "Server-Sent Events: one event per record entry, in sequence order, after the sequence " +
				"number after (0, the default, streams the whole record) or, when sent, after Last-Event-ID, which " +
				"an EventSource sends when it reconnects. Each event has id = the entry's seq, event = its type and " +
				"data = the whole signed entry exactly as audit.list serves it, on one line. An idle stream carries " +
				"a comment line every 15 s. The server ends the stream when the client falls more than 1,024 entries " +
				"behind, and on shutdown; the client reconnects with Last-Event-ID (retry: 2000) and resumes with " +
				"no gap and no duplicate.",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[AuditStreamParams](),
			Responses: []Response{{Status: 200, Description: "An event stream of record entries.",
				Content: []Content{{MediaType: MediaEventStream}}}},
			Problems: []string{CodeAuditOutOfRange, CodeUnavailable},
		},
		{
			ID: "pay.create", Method: "POST", Path: "/pay",
			Summary: "Submit a payment instruction",
			Description: "Runs a signed payment instruction through the deny-first gate. 200: settled, with the " +
				"Receipt. 202: accepted and held for an operator's approval, with the approval challenge. 403 " +
				"intent.denied: refused by the mandate's rules (reasons list every failing rule). 402 " +
				"payment.declined: the rail declined and no money moved. Every decision is recorded. Idempotency " +
				"is keyed on the instruction's idempotencyKey per agent key; a replay answers the stored outcome " +
				"byte for byte with Idempotent-Replayed: true.",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[PayParams](),
			Body:       reflect.TypeFor[pay.Instruction](),
			Responses: []Response{
				JSON(200, "Settled: the Receipt.", reflect.TypeFor[pay.Receipt]()),
				JSON(202, "Accepted, not settled: held for an operator's approval.", reflect.TypeFor[pay.Held]()),
			},
			Problems: []string{CodeIntentMalformed, CodeIntentUnauthorized, CodeIntentDenied, CodePaymentDeclined,
				CodeSettlementFrozen, CodeRailUnavailable, CodeIdempotencyConflict, CodeIdempotencyInFlight,
				CodeIdempotencyKeyHeaderMismatch, CodeAuthMissing, CodeAuthInvalid, CodeRequestTooLarge,
				CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "intents.get", Method: "GET", Path: "/intents/{id}",
			Summary:     "One payment",
			Description: "Returns an intent of the calling agent key: status, amounts, the gate's decision, the receipt or the pending approval material, refunds and links. Intents of other keys are not found.",
			Credential:  CredentialAgent,
			Params:      reflect.TypeFor[IntentParams](),
			Responses:   []Response{JSON(200, "The intent.", reflect.TypeFor[pay.Intent]())},
			Problems:    []string{CodeIntentNotFound, CodeAuthMissing, CodeAuthInvalid, CodeUnavailable},
		},
		{
			ID: "intents.events", Method: "GET", Path: "/intents/{id}/events",
			Summary:     "Everything that happened to one payment",
			Description: "Returns a page of the signed record entries of one intent, oldest first: the gate decision, settlement or failure, approvals, refunds.",
			Credential:  CredentialAgent,
			Params:      reflect.TypeFor[IntentEventsParams](),
			Responses:   []Response{JSON(200, "A page of the intent's entries.", reflect.TypeFor[audit.Page]())},
			Problems:    []string{CodeIntentNotFound, CodeAuditBadCursor, CodeAuthMissing, CodeAuthInvalid, CodeUnavailable},
		},
		{
			ID: "usage.get", Method: "GET", Path: "/usage",
			Summary: "Usage of the calling key",
			Description: "Counts the calling agent key's requests in the half-open window [since, until) (RFC 3339, " +
				"at most 31 days; minute buckets count when their start is in the window, and the answer states the " +
				"window actually counted), by operation, outcome (ok or the problem code) and attribution tag. " +
				"tags filters with AND semantics: a request counts when it carried every tag given. Tags come from " +
				"the X-Svc-Tags header of each request; malformed tags are dropped, never an error.",
			Credential: CredentialAgent,
			Params:     reflect.TypeFor[UsageParams](),
			Responses:  []Response{JSON(200, "The usage report.", reflect.TypeFor[auth.Report]())},
			Problems:   []string{CodeUsageBadWindow, CodeAuthMissing, CodeAuthInvalid, CodeRateLimited, CodeUnavailable},
		},
		{
			ID: "operator.approve", Method: "POST", Path: "/operator/approve",
			Summary: "Approve a held payment",
			Description: "Records one operator's approval of a held payment, with the challenge from its 202 answer. " +
				"When the mandate's number of distinct operators have approved, the payment settles and the Receipt is " +
				"returned (200); otherwise 202 says how many approvals it has. Irreversible or large payments need " +
				"acknowledged: true. The kill switch, the mandate's revocation and expiry are checked again first.",
			Credential: CredentialOperator,
			Body:       reflect.TypeFor[pay.ApproveRequest](),
			Responses: []Response{
				JSON(200, "Approved and settled: the Receipt.", reflect.TypeFor[pay.Receipt]()),
				JSON(202, "Approval recorded; more are needed, or acknowledged: true is.", reflect.TypeFor[pay.Held]()),
			},
			Problems: []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeIntentNotFound, CodeApprovalExpired,
				CodeApprovalMismatch, CodeApprovalNotPending, CodeIntentUnauthorized, CodeSettlementFrozen, CodeRailUnavailable,
				CodePaymentDeclined, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "operator.refund", Method: "POST", Path: "/operator/refund",
			Summary: "Refund a settled payment",
			Description: "Returns all that remains of a settled payment, or amountMinor of it. Refunds never add up to more " +
				"than the settled amount; an irreversible rail refuses.",
			Credential: CredentialOperator,
			Body:       reflect.TypeFor[pay.RefundRequest](),
			Responses:  []Response{JSON(200, "Refunded.", reflect.TypeFor[pay.RefundResult]())},
			Problems: []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeIntentNotFound, CodeRefundRefused,
				CodeRefundExceeds, CodeSettlementFrozen, CodeRailUnavailable, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "operator.kill_switch", Method: "POST", Path: "/operator/kill-switch",
			Summary:     "Freeze or release settlement",
			Description: "While engaged nothing settles: payments, approvals and refunds answer 503 settlement.frozen. Returns the live state.",
			Credential:  CredentialOperator,
			Body:        reflect.TypeFor[KillSwitchRequest](),
			Responses:   []Response{JSON(200, "The live state of the controls.", reflect.TypeFor[pay.Control]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "operator.breaker_reset", Method: "POST", Path: "/operator/circuit-breaker/reset",
			Summary:     "Reset the tripped circuit breaker",
			Description: "Closes a tripped breaker so allowed payments settle again without approval. Resetting a closed breaker is 409 breaker.not_tripped.",
			Credential:  CredentialOperator,
			Body:        reflect.TypeFor[RationaleRequest](),
			Responses:   []Response{JSON(200, "The live state of the controls.", reflect.TypeFor[pay.Control]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeBreakerNotTripped, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "operator.approvals", Method: "GET", Path: "/operator/approvals",
			Summary:     "Payments waiting for approval",
			Description: "Lists held payments, oldest first, with amounts, payees, the gate's reasons, approvals so far and age.",
			Credential:  CredentialOperator,
			Params:      reflect.TypeFor[PageParams](),
			Responses:   []Response{JSON(200, "A page of held payments.", reflect.TypeFor[pay.HeldPage]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeAuditBadCursor, CodeUnavailable},
		},
		{
			ID: "operator.agents.create", Method: "POST", Path: "/operator/agents",
			Summary:     "Issue an agent credential",
			Description: "Issues an agent key that may act for the listed agent ids (hex Ed25519 public keys). The credential is in this answer only; the server keeps its hash. With jkt the key is bound to a DPoP key.",
			Credential:  CredentialOperator,
			Body:        reflect.TypeFor[AgentCreateRequest](),
			Responses:   []Response{JSON(201, "The key and, this once, its credential.", reflect.TypeFor[auth.Issued]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeAuthBadRequest, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "operator.agents.list", Method: "GET", Path: "/operator/agents",
			Summary:     "List agent keys",
			Description: "Lists agent keys in creation order, revoked ones included. Secrets are never shown.",
			Credential:  CredentialOperator,
			Params:      reflect.TypeFor[PageParams](),
			Responses:   []Response{JSON(200, "A page of agent keys.", reflect.TypeFor[auth.KeyPage]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeAuthBadCursor, CodeUnavailable},
		},
		{
			ID: "operator.agents.revoke", Method: "DELETE", Path: "/operator/agents/{id}",
			Summary:     "Revoke an agent key",
			Description: "Revokes the key at once: every later request with it is refused. A DELETE has no body, so the rationale is a query parameter (covered by the operator signature like the rest of the URL).",
			Credential:  CredentialOperator,
			Params:      reflect.TypeFor[AgentRevokeParams](),
			Responses:   []Response{JSON(200, "The revoked key.", reflect.TypeFor[auth.Key]())},
			Problems:    []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeAuthKeyNotFound, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "webhooks.create", Method: "POST", Path: "/webhooks/endpoints",
			Summary: "Register a webhook endpoint",
			Description: "Registers a destination for signed events derived from the record. The signing secret is in " +
				"this answer only. An agent can never register a destination for copies of the record: this is operator-signed.",
			Credential: CredentialOperator,
			Body:       reflect.TypeFor[WebhookCreateRequest](),
			Responses:  []Response{JSON(201, "The endpoint and, this once, its signing secret.", reflect.TypeFor[webhook.Created]())},
			Problems:   webhookProblems,
		},
		{
			ID: "webhooks.list", Method: "GET", Path: "/webhooks/endpoints",
			Summary: "List webhook endpoints", Description: "Pages through the endpoints, oldest first. Secrets are never shown.",
			Credential: CredentialOperator,
			Params:     reflect.TypeFor[PageParams](),
			Responses:  []Response{JSON(200, "A page of endpoints.", reflect.TypeFor[webhook.EndpointPage]())},
			Problems:   webhookProblems,
		},
		{
			ID: "webhooks.get", Method: "GET", Path: "/webhooks/endpoints/{id}",
			Summary: "One webhook endpoint", Description: "Returns the endpoint; its secret is never shown.",
			Credential: CredentialOperator,
			Params:     reflect.TypeFor[EndpointParams](),
			Responses:  []Response{JSON(200, "The endpoint.", reflect.TypeFor[webhook.Endpoint]())},
			Problems:   webhookProblems,
		},
		{
			ID: "webhooks.update", Method: "PATCH", Path: "/webhooks/endpoints/{id}",
			Summary: "Change a webhook endpoint",
			Description: "Changes url, events or active. rotateSecret: true issues a new secret, shown in this answer " +
				"only; for 24 hours deliveries carry signatures under both the old and the new secret.",
			Credential: CredentialOperator,
			Params:     reflect.TypeFor[EndpointParams](),
			Body:       reflect.TypeFor[WebhookUpdateRequest](),
			Responses:  []Response{JSON(200, "The endpoint (and a rotated secret, once).", reflect.TypeFor[webhook.Updated]())},
			Problems:   webhookProblems,
		},
		{
			ID: "webhooks.delete", Method: "DELETE", Path: "/webhooks/endpoints/{id}",
			Summary:     "Delete a webhook endpoint",
			Description: "Deletes the endpoint; pending deliveries to it stop. The rationale is a query parameter (a DELETE has no body).",
			Credential:  CredentialOperator,
			Params:      reflect.TypeFor[EndpointDeleteParams](),
			Responses:   []Response{{Status: 204, Description: "Deleted."}},
			Problems:    webhookProblems,
		},
		{
			ID: "webhooks.deliveries", Method: "GET", Path: "/webhooks/endpoints/{id}/deliveries",
			Summary: "Deliveries of an endpoint", Description: "Pages through the deliveries, newest event first: event id, attempts, last status and error, next attempt, state.",
			Credential: CredentialOperator,
			Params:     reflect.TypeFor[DeliveriesParams](),
			Responses:  []Response{JSON(200, "A page of deliveries.", reflect.TypeFor[webhook.DeliveryPage]())},
			Problems:   webhookProblems,
		},
		{
			ID: "webhooks.retry", Method: "POST", Path: "/webhooks/endpoints/{id}/deliveries/{eventId}/retry",
			Summary: "Retry a delivery now", Description: "Makes a pending or failed delivery due now.",
			Credential: CredentialOperator,
			Params:     reflect.TypeFor[DeliveryParams](),
			Body:       reflect.TypeFor[RationaleRequest](),
			Responses:  []Response{JSON(200, "The delivery.", reflect.TypeFor[webhook.Delivery]())},
			Problems:   webhookProblems,
		},
		{
			ID: "mandate.revoke", Method: "POST", Path: "/protocol/mandate/revoke",
			Summary: "Revoke a mandate",
			Description: "Protocol surface, override class. Revokes a mandate for good: every later payment under it is " +
				"refused (intent.unauthorized, reason mandate_revoked) and payments held under it can no longer be approved.",
			Credential: CredentialOperator,
			Body:       reflect.TypeFor[MandateRevokeRequest](),
			Responses:  []Response{JSON(200, "The revocation.", reflect.TypeFor[pay.Revocation]())},
			Problems:   []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeIntentMalformed, CodeRequestTooLarge, CodeRequestUnsupportedMediaType, CodeUnavailable},
		},
		{
			ID: "openapi.get", Method: "GET", Path: "/openapi.json",
			Summary:     "This OpenAPI document",
			Description: "The live contract, generated from the same model as the routes; the authority on the current operation list.",
			Credential:  CredentialNone,
			Responses:   []Response{{Status: 200, Description: "OpenAPI 3.1 document.", Content: []Content{{MediaType: MediaJSON}}}},
		},
		{
			ID: "asyncapi.get", Method: "GET", Path: "/asyncapi.json",
			Summary:     "The event surface (AsyncAPI 3.0)",
			Description: "The events the server sends to registered webhook endpoints, generated from the same model as the routes: channels per event kind, payloads, and the Svc-Signature delivery header.",
			Credential:  CredentialNone,
			Responses:   []Response{{Status: 200, Description: "AsyncAPI 3.0 document.", Content: []Content{{MediaType: MediaJSON}}}},
		},
		{
			ID: "health.get", Method: "GET", Path: "/healthz",
			Summary:     "Liveness",
			Description: "Answers while the process serves requests. It does not touch the store.",
			Credential:  CredentialNone,
			Responses:   []Response{JSON(200, "The server is up.", reflect.TypeFor[Health]())},
		},
		{
			ID: "problems.get", Method: "GET", Path: "/problems/{code}",
			Summary:     "Problem type page",
			Description: "A short page for people describing one problem code: its status, title, action and meaning.",
			Credential:  CredentialNone,
			Params:      reflect.TypeFor[ProblemPageParams](),
			Responses:   []Response{{Status: 200, Description: "The page.", Content: []Content{{MediaType: MediaHTML}}}},
			Problems:    []string{CodeRouteNotFound},
		},
	}
}

// AuditListParams are the parameters of audit.list.
type AuditListParams struct {
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page. Omit to start at the first entry."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Entries per page, 1 to 100."`
}

// AuditStreamParams are the parameters of audit.stream.
type AuditStreamParams struct {
	After       uint64 `query:"after" doc:"Stream the entries after this sequence number; 0 (the default) streams the whole record."`
	LastEventID string `header:"Last-Event-ID" doc:"Sent by an EventSource when it reconnects: the id (sequence number) of the last event it received. Takes precedence over after; anything but a decimal sequence number is refused."`
}

// PayParams are the parameters of pay.create.
type PayParams struct {
	IdempotencyKey string `header:"Idempotency-Key" validate:"omitempty,max=255" doc:"Optional; must equal the instruction's idempotencyKey, which is what idempotency is keyed on."`
}

// IntentParams are the parameters of intents.get.
type IntentParams struct {
	ID string `path:"id" validate:"required,max=64" doc:"The intent id (int_...)."`
}

// IntentEventsParams are the parameters of intents.events.
type IntentEventsParams struct {
	ID     string `path:"id" validate:"required,max=64" doc:"The intent id (int_...)."`
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Entries per page, 1 to 100."`
}

// webhookProblems are the problem codes of the endpoint management routes.
var webhookProblems = []string{CodeOperatorUnauthorized, CodeOperatorRationaleTooShort, CodeWebhookInvalidURL,
	CodeWebhookInvalidEvents, CodeWebhookNotFound, CodeWebhookBadCursor, CodeWebhookTooMany, CodeWebhookDeliveryNotFound,
	CodeWebhookInactive, CodeWebhookBadLimit, CodeRequestTooLarge,
	CodeRequestUnsupportedMediaType, CodeUnavailable}

// WebhookCreateRequest is the body of webhooks.create.
type WebhookCreateRequest struct {
	webhook.CreateRequest
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// WebhookUpdateRequest is the body of webhooks.update.
type WebhookUpdateRequest struct {
	webhook.UpdateRequest
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

// UsageParams are the parameters of usage.get.
type UsageParams struct {
	Since time.Time `query:"since" validate:"required" doc:"Start of the window, RFC 3339, inclusive."`
	Until time.Time `query:"until" validate:"required" doc:"End of the window, RFC 3339, exclusive; at most 31 days after since."`
	Tags  []string  `query:"tags" validate:"max=16,dive,max=64" doc:"Repeatable; only requests that carried every one of these tags count."`
}

// PageParams are the paging parameters of operator lists.
type PageParams struct {
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Items per page, 1 to 100."`
}

// AgentRevokeParams are the parameters of operator.agents.revoke.
type AgentRevokeParams struct {
	ID        string `path:"id" validate:"required,max=64" doc:"The agent key id (ak_...)."`
	Rationale string `query:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// RationaleRequest is the body of operator actions that need nothing but
// the operator's reason.
type RationaleRequest struct {
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// KillSwitchRequest is the body of operator.kill_switch.
type KillSwitchRequest struct {
	Engaged   *bool  `json:"engaged" validate:"required" doc:"true freezes all settlement, false releases it."`
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// AgentCreateRequest is the body of operator.agents.create.
type AgentCreateRequest struct {
	Name      string   `json:"name" validate:"required,max=100" doc:"A name for people reading the record."`
	AgentIDs  []string `json:"agentIds" validate:"required,min=1,max=100,dive,len=64,hexadecimal" doc:"Agent ids (64 lowercase hex Ed25519 public keys) the key may act for."`
	JKT       string   `json:"jkt,omitempty" validate:"omitempty,len=43" doc:"Bind the key to this DPoP JWK thumbprint (RFC 7638, SHA-256, base64url)."`
	Rationale string   `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// MandateRevokeRequest is the body of mandate.revoke.
type MandateRevokeRequest struct {
	MandateID string `json:"mandateId" validate:"required,max=128" doc:"The mandate's id (its jti claim)."`
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// AuditEntryParams are the parameters of audit.entry.
type AuditEntryParams struct {
	Seq      uint64 `path:"seq" validate:"min=1" doc:"Sequence number of the entry; the first entry is 1."`
	TreeSize uint64 `query:"treeSize" doc:"Tree size the proof is for; at least seq. Omit for the latest checkpoint."`
}

// AuditEntryWithProof is the response of audit.entry: an entry and the
// proof that the signed tree includes it, so a client holding the record's
// public key verifies both without trusting the server.
type AuditEntryWithProof struct {
	Entry audit.Entry          `json:"entry"`
	Proof audit.InclusionProof `json:"proof"`
}

// AuditConsistencyParams are the parameters of audit.consistency.
type AuditConsistencyParams struct {
	From *uint64 `query:"from" validate:"required,min=1" doc:"The older tree size."`
	To   uint64  `query:"to" doc:"The newer tree size. Omit for the latest checkpoint."`
}

// Health is the response of health.get.
type Health struct {
	Status string `json:"status" validate:"oneof=ok" doc:"Always ok."`
}

// ProblemPageParams are the parameters of problems.get.
type ProblemPageParams struct {
	Code string `path:"code" validate:"max=64" doc:"A problem code, e.g. audit.bad_cursor."`
}

// Event kinds (DESIGN §7). Events are derived from record entries, never
// emitted on their own.
const (
	EventGateDecision       = webhook.EventGateDecision
	EventIntentDenied       = webhook.EventIntentDenied
	EventApprovalPending    = webhook.EventApprovalPending
	EventPaymentSettled     = webhook.EventPaymentSettled
	EventAuditAppended      = webhook.EventAuditAppended
	EventMemoryRecorded     = webhook.EventMemoryRecorded
	EventMemoryConsolidated = webhook.EventMemoryConsolidated
	EventMemoryErased       = webhook.EventMemoryErased
	EventMemoryTainted      = webhook.EventMemoryTainted
)

// Event is the body of every webhook delivery; package webhook derives it
// from the record and owns the type.
type Event = webhook.Event

// Events returns the event kinds of this release, as package webhook
// defines them (one list serves derivation, delivery and the documents).
func Events() []EventKind {
	var out []EventKind
	for _, k := range webhook.Kinds() {
		out = append(out, EventKind{Name: k.Name, Description: k.Description, Payload: k.Payload})
	}
	return out
}
