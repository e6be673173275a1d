package pay

import (
	"reflect"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
)

// Problem codes of the money path, besides [CodeMalformed] and
// [CodeUnauthorized]. Each sentinel error carries its code through its
// Code method; the HTTP layer answers the outcomes of [Service.Pay] that
// are refusals with CodeDenied and CodeDeclined.
const (
	CodeDenied              = "intent.denied"            // OutcomeDenied: the gate refused the payment
	CodeDeclined            = "payment.declined"         // OutcomeFailed: the rail declined; no money moved
	CodeFrozen              = "settlement.frozen"        // ErrFrozen
	CodeRailUnavailable     = "rail.unavailable"         // ErrRailUnavailable
	CodeIdempotencyConflict = "idempotency.conflict"     // ErrIdempotencyConflict
	CodeInFlight            = "idempotency.in_flight"    // ErrInFlight
	CodeKeyMismatch         = "idempotency.key_mismatch" // ErrKeyMismatch
	CodeIntentNotFound      = "intent.not_found"         // ErrIntentNotFound
	CodeApprovalExpired     = "approval.expired"         // ErrApprovalExpired
	CodeApprovalMismatch    = "approval.mismatch"        // ErrApprovalMismatch
	CodeNotPending          = "approval.not_pending"     // ErrNotPending
	CodeRefundRefused       = "refund.refused"           // ErrRefundRefused
	CodeRefundExceeds       = "refund.exceeds"           // ErrRefundExceeds
	CodeBreakerNotTripped   = "breaker.not_tripped"      // ErrBreakerNotTripped

	// Holds and sessions: the protocol surface declares their problem
	// types (namespaces hold and session).
	CodeHoldNotFound      = "hold.not_found"        // ErrNotHold
	CodeHoldNotAuthorized = "hold.not_authorized"   // ErrHoldNotAuthorized
	CodeHoldCaptured      = "hold.already_captured" // ErrHoldCaptured
	CodeHoldReleased      = "hold.released"         // ErrHoldReleased
	CodeCaptureExceeds    = "hold.capture_exceeds"  // ErrCaptureExceeds
	CodeSessionNotFound   = "session.not_found"     // ErrSessionNotFound
	CodeSessionClosed     = "session.closed"        // ErrSessionClosed
	CodeSessionInvalid    = "session.invalid"       // ErrSessionInvalid
	CodeBadFeedCursor     = "revocation.bad_cursor" // ErrBadFeedCursor
)

// Contract returns the money path's declarations for the contract model:
// the agent's payment operations (pay.create, intents.*), the operator's
// actions on payments and controls (operator.approve, operator.decline,
// operator.refund, operator.kill_switch, operator.breaker_reset,
// operator.approvals, operator.settling) and
// mandate.revoke, with the problem types of the codes above.
func Contract() contract.Part {
	return contract.Part{
		Name: "pay",
		Operations: []contract.Operation{
			{
				ID: "pay.create", Method: "POST", Path: "/pay", MovesValue: true,
				Summary: "Submit a payment instruction",
				Description: "Runs a signed payment instruction through the deny-first gate. 200: settled, with the " +
					"Receipt. 202: accepted and held for an operator's approval, with the approval challenge. 403 " +
					"intent.denied: refused by the mandate's rules (reasons list every failing rule). 402 " +
					"payment.declined: the rail declined and no money moved. Every decision is recorded. Idempotency " +
					"is keyed on the instruction's idempotencyKey per agent key; a replay answers the stored outcome " +
					"byte for byte with Idempotent-Replayed: true.",
				Credential: contract.CredentialAgent,
				Params:     reflect.TypeFor[PayParams](),
				Body:       reflect.TypeFor[Instruction](),
				Responses: []contract.Response{
					contract.JSON(200, "Settled: the Receipt.", reflect.TypeFor[Receipt]()),
					contract.JSON(202, "Accepted, not settled: held for an operator's approval.", reflect.TypeFor[Held]()),
				},
				Problems: []string{CodeMalformed, CodeUnauthorized, CodeDenied, CodeDeclined,
					CodeFrozen, CodeRailUnavailable, CodeIdempotencyConflict, CodeInFlight,
					CodeKeyMismatch, contract.CodeAuthMissing, contract.CodeAuthInvalid, contract.CodeRequestTooLarge,
					contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "intents.get", Method: "GET", Path: "/intents/{id}",
				Summary:     "One payment",
				Description: "Returns an intent of the calling agent key: status, amounts, the gate's decision, the receipt or the pending approval material, refunds and links. Intents of other keys are not found. An operator's signature instead of the agent credential reads any intent.",
				Credential:  contract.CredentialAgentOrOperator,
				Params:      reflect.TypeFor[IntentParams](),
				Responses:   []contract.Response{contract.JSON(200, "The intent.", reflect.TypeFor[Intent]())},
				Problems:    []string{CodeIntentNotFound, contract.CodeAuthMissing, contract.CodeAuthInvalid, contract.CodeOperatorUnauthorized, contract.CodeUnavailable},
			},
			{
				ID: "intents.events", Method: "GET", Path: "/intents/{id}/events",
				Summary:     "Everything that happened to one payment",
				Description: "Returns a page of the signed record entries of one intent, oldest first: the gate decision, settlement or failure, approvals, refunds. An agent key reads its own intents; an operator's signature instead of the agent credential reads any intent's.",
				Credential:  contract.CredentialAgentOrOperator,
				Params:      reflect.TypeFor[IntentEventsParams](),
				Responses:   []contract.Response{contract.JSON(200, "A page of the intent's entries.", reflect.TypeFor[audit.Page]())},
				Problems:    []string{CodeIntentNotFound, audit.CodeBadCursor, contract.CodeAuthMissing, contract.CodeAuthInvalid, contract.CodeOperatorUnauthorized, contract.CodeUnavailable},
			},
			{
				ID: "operator.approve", Method: "POST", Path: "/operator/approve", MovesValue: true,
				Summary: "Approve a held payment",
				Description: "Records one operator's approval of a held payment or hold, named by intentId and mandateId (as the " +
					"held list shows them); the challenge of its 202 answer may be sent too, and must then match. " +
					"When the mandate's number of distinct operators have approved, the payment settles and the Receipt is " +
					"returned (200), or the hold is placed and its authorization returned (200); otherwise 202 says how many approvals it has. Irreversible or large payments need " +
					"acknowledged: true. The kill switch, the mandate's revocation and expiry are checked again first.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[ApproveRequest](),
				Responses: []contract.Response{
					contract.JSONOneOf(200, "Approved: the Receipt of the settled payment, or, for a hold (the protocol's holds, "+
						"meters and sessions), its authorization: the amount reserved until expiresAt.",
						reflect.TypeFor[Receipt](), reflect.TypeFor[Authorized]()),
					contract.JSON(202, "Approval recorded; more are needed, or acknowledged: true is.", reflect.TypeFor[Held]()),
				},
				Problems: []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeIntentNotFound, CodeApprovalExpired,
					CodeApprovalMismatch, CodeNotPending, CodeUnauthorized, CodeFrozen, CodeRailUnavailable,
					CodeDeclined, CodeInFlight, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.decline", Method: "POST", Path: "/operator/decline",
				Summary: "Decline a held payment",
				Description: "Refuses a held payment or hold for good, named as for an approval: it becomes declined, its " +
					"reservation is released and nothing moves. One operator's decline ends it, whatever the mandate's number " +
					"of approvals. Works while the kill switch is engaged. Declining it again answers the first decline and " +
					"records nothing.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[DeclineRequest](),
				Responses:  []contract.Response{contract.JSON(200, "Declined.", reflect.TypeFor[Declined]())},
				Problems: []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeIntentNotFound, CodeApprovalExpired,
					CodeApprovalMismatch, CodeNotPending, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.refund", Method: "POST", Path: "/operator/refund", MovesValue: true,
				Summary: "Refund a settled payment",
				Description: "Returns all that remains of a settled payment, or amountMinor of it. Refunds never add up to more " +
					"than the settled amount; an irreversible rail refuses.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[RefundRequest](),
				Responses:  []contract.Response{contract.JSON(200, "Refunded.", reflect.TypeFor[RefundResult]())},
				Problems: []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeIntentNotFound, CodeRefundRefused,
					CodeRefundExceeds, CodeFrozen, CodeRailUnavailable, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.kill_switch", Method: "POST", Path: "/operator/kill-switch",
				Summary:     "Freeze or release settlement",
				Description: "While engaged nothing settles: payments, approvals and refunds answer 503 settlement.frozen. Returns the live state.",
				Credential:  contract.CredentialOperator,
				Body:        reflect.TypeFor[KillSwitchRequest](),
				Responses:   []contract.Response{contract.JSON(200, "The live state of the controls.", reflect.TypeFor[Control]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.breaker_reset", Method: "POST", Path: "/operator/circuit-breaker/reset",
				Summary:     "Reset the tripped circuit breaker",
				Description: "Closes a tripped breaker so allowed payments settle again without approval. Resetting a closed breaker is 409 breaker.not_tripped.",
				Credential:  contract.CredentialOperator,
				Body:        reflect.TypeFor[contract.RationaleRequest](),
				Responses:   []contract.Response{contract.JSON(200, "The live state of the controls.", reflect.TypeFor[Control]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort, CodeBreakerNotTripped, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "operator.approvals", Method: "GET", Path: "/operator/approvals",
				Summary:     "Payments waiting for approval",
				Description: "Lists held payments, oldest first, with amounts, payees, the gate's reasons, approvals so far and age.",
				Credential:  contract.CredentialOperator,
				Params:      reflect.TypeFor[contract.PageParams](),
				Responses:   []contract.Response{contract.JSON(200, "A page of held payments.", reflect.TypeFor[HeldPage]())},
				Problems:    []string{contract.CodeOperatorUnauthorized, audit.CodeBadCursor, contract.CodeUnavailable},
			},
			{
				ID: "operator.settling", Method: "GET", Path: "/operator/settling",
				Summary: "Payments whose outcome is not known yet",
				Description: "Lists intents still settling, oldest first: the rail or the merchant gave no definite answer " +
					"(a timeout, a 5xx, a crash), so nothing is reported moved and nothing is released until the rail's " +
					"own state says what happened. The reconciler asks every minute; a same-key retry resumes them too.",
				Credential: contract.CredentialOperator,
				Params:     reflect.TypeFor[contract.PageParams](),
				Responses:  []contract.Response{contract.JSON(200, "A page of settling intents.", reflect.TypeFor[SettlingPage]())},
				Problems:   []string{contract.CodeOperatorUnauthorized, audit.CodeBadCursor, contract.CodeUnavailable},
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeMalformed, Status: 400, Title: "Malformed payment instruction", Action: contract.ActionFixRequest,
				Description: "The payment instruction is structurally wrong: a required member is missing, an amount or " +
					"currency is not well formed, or the envelope cannot be parsed. In /buy it also reports a cart " +
					"that is not ready, with the status the cart stopped in and a link to continue at."},
			{Code: CodeUnauthorized, Status: 403, Title: "Instruction not authorised", Action: contract.ActionStop,
				Description: "The envelope does not authorise this instruction: the mandate is not signed by a known " +
					"operator key, has expired or was revoked, names a different agent, or the instruction's signature " +
					"does not verify. The decision was recorded. A new mandate from an operator is needed.",
				Members: reflect.TypeFor[RefusalMembers]()},
			{Code: CodeDenied, Status: 403, Title: "Payment denied", Action: contract.ActionStop,
				Description: "The gate refused the payment under the mandate's rules (payee, currency, rail, caps, " +
					"velocity or deny list). The reasons array says which rules failed and auditSeq points at the " +
					"recorded decision. Repeating the request will be refused again.",
				Members: reflect.TypeFor[Denial]()},
			{Code: CodeFrozen, Status: 503, Title: "Settlement frozen", Action: contract.ActionAwaitOperator,
				Description: "An operator has engaged the kill switch: nothing settles until it is released. The refusal " +
					"was recorded, and no idempotency result was stored, so the same instruction can be sent again after release."},
			{Code: CodeRailUnavailable, Status: 503, Title: "Rail unavailable", Action: contract.ActionRetryAsIs, RetryAfter: 5,
				Description: "The payment rail did not answer, so the outcome is not yet known. The intent stays in " +
					"settling and is finished by reconciliation; money never moves twice. Send the same instruction, " +
					"with the same idempotencyKey, again after Retry-After seconds."},
			{Code: CodeIdempotencyConflict, Status: 422, Title: "Idempotency key reused", Action: contract.ActionFixRequest,
				Description: "This idempotency key was already used with a different request. A key names exactly one " +
					"instruction: use a new key for a new instruction, or resend the original request unchanged."},
			{Code: CodeInFlight, Status: 409, Title: "Request in flight", Action: contract.ActionRetryAsIs, RetryAfter: 1,
				Description: "A request with this idempotency key is still being processed. Send the same request again " +
					"after Retry-After seconds to receive its result."},
			{Code: CodeKeyMismatch, Status: 400, Title: "Idempotency key mismatch", Action: contract.ActionFixRequest,
				Description: "The Idempotency-Key header differs from the instruction's idempotencyKey member. " +
					"Idempotency is keyed on the instruction's own key; send the header with the same value or omit it."},
			{Code: CodeDeclined, Status: 402, Title: "Payment declined", Action: contract.ActionStop,
				Description: "The rail declined the payment and no money moved; the intent is failed and its " +
					"reservation released. declineCode says why. A new instruction (new idempotencyKey) may be sent " +
					"once the cause is fixed; repeating this one answers the same decline.",
				Members: reflect.TypeFor[DeclineMembers]()},
			{Code: CodeApprovalExpired, Status: 409, Title: "Approval window passed", Action: contract.ActionStop,
				Description: "The payment waited longer than its approval window; it is expired and its reservation released. " +
					"The agent must send a new instruction if the payment is still wanted."},
			{Code: CodeApprovalMismatch, Status: 409, Title: "Challenge or mandate mismatch", Action: contract.ActionFixRequest,
				Description: "The mandateId, or the challenge when one was sent, does not match the held payment. Use the " +
					"mandateId the held list (or the payment's 202 answer) shows, and either no challenge or exactly the 202 answer's."},
			{Code: CodeNotPending, Status: 409, Title: "Not waiting for approval", Action: contract.ActionStop,
				Description: "The payment is not held for approval (it settled, failed, was denied, expired or declined). Read the intent for its status."},
			{Code: CodeRefundExceeds, Status: 422, Title: "Refund exceeds the payment", Action: contract.ActionFixRequest,
				Description: "Refunds of a payment may not add up to more than the settled amount. Ask for at most the remaining amount."},
			{Code: CodeBreakerNotTripped, Status: 409, Title: "Breaker not tripped", Action: contract.ActionStop,
				Description: "The circuit breaker is closed; there is nothing to reset."},
			{Code: CodeIntentNotFound, Status: 404, Title: "No such intent", Action: contract.ActionFixRequest,
				Description: "No intent with this id exists for the calling agent key. Intents are visible only to the " +
					"agent key that created them."},
			{Code: CodeRefundRefused, Status: 409, Title: "Refund refused", Action: contract.ActionStop,
				Description: "The refund cannot be made: the rail is irreversible, or the amount would take cumulative " +
					"refunds past the settled amount."},
		},
	}
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

// KillSwitchRequest is the body of operator.kill_switch.
type KillSwitchRequest struct {
	Engaged   *bool  `json:"engaged" validate:"required" doc:"true freezes all settlement, false releases it."`
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// MandateRevokeRequest is the body of mandate.revoke.
type MandateRevokeRequest struct {
	MandateID string `json:"mandateId" validate:"required,max=128" doc:"The mandate's id (its jti claim)."`
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// OverrideRationale returns the rationale (the protocol surface's
// override binding reads it).
func (r MandateRevokeRequest) OverrideRationale() string { return r.Rationale }

// RefusalMembers are what an intent.unauthorized problem adds to the
// standard members.
type RefusalMembers struct {
	Reason AuthReason `json:"reason,omitempty" doc:"Why the envelope does not authorise the instruction (for example mandate_expired, signature_invalid); absent only for a refusal without a stable reason."`
}

// DeclineMembers are what a payment.declined problem adds to the standard
// members: the [Failure] but its message, which is the detail.
type DeclineMembers struct {
	IntentID    string `json:"intentId" doc:"The failed intent."`
	Rail        string `json:"rail" doc:"The rail that declined."`
	DeclineCode string `json:"declineCode" doc:"The rail's reason for the decline."`
	AuditSeq    uint64 `json:"auditSeq" doc:"The record entry of the failure."`
}
