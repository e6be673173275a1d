package protocol

import (
	"reflect"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
)

// Contract declares every method of the surface as an operation
// (POST /protocol/{namespace}/{method}, JSON in and out), and the problem
// types of the surface's codes.
func Contract() contract.Part {
	core := []string{contract.CodeUnavailable}
	ops := make([]contract.Operation, 0, len(methods))
	for _, m := range methods {
		desc := m.Description
		if m.Entry != "" {
			desc += "\n\nRecord entry: " + m.Entry + "."
		}
		op := contract.Operation{
			ID: m.ID(), Method: "POST", Path: m.Path(), Summary: m.Summary, Description: desc,
			Credential: m.Credential, MovesValue: m.MovesValue, Body: m.Request,
			Responses: []contract.Response{contract.JSON(200, m.Summary+".", m.Response)},
			Problems:  append(append([]string(nil), m.Problems...), core...),
		}
		if reflect.PointerTo(m.Response).Implements(reflect.TypeFor[Acceptor]()) {
			accepted := m.Accepted
			if accepted == "" {
				accepted = "Accepted: held for an operator's approval."
			}
			op.Responses = append(op.Responses, contract.JSON(202, accepted, m.Response))
		}
		if m.Credential == contract.CredentialOperator {
			op.Problems = append(op.Problems, contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort,
				contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType)
		}
		ops = append(ops, op)
	}
	p := func(code string, status int, title string, action contract.Action, desc string) contract.ProblemType {
		return contract.ProblemType{Code: code, Status: status, Title: title, Action: action, Description: desc}
	}
	return contract.Part{
		Name:       "protocol",
		Operations: ops,
		Problems: []contract.ProblemType{
			p(pay.CodeHoldNotFound, 404, "No such hold", contract.ActionFixRequest, "No hold of this id belongs to the caller (a meter's hold is reached through meter methods)."),
			p(pay.CodeHoldNotAuthorized, 409, "Hold not held yet", contract.ActionAwaitOperator, "The hold waits for an operator's approval or for the rail's authorization; try again once it is held."),
			p(pay.CodeHoldCaptured, 409, "Hold already captured", contract.ActionStop, "The hold was captured (or its capture is in progress) under another idempotency key; nothing changed."),
			p(pay.CodeHoldReleased, 409, "Hold released", contract.ActionStop, "The hold was released, expired, denied, failed or declined by an operator; nothing can be captured or released."),
			p(pay.CodeCaptureExceeds, 422, "Capture exceeds the hold", contract.ActionFixRequest, "amountMinor is more than the held amount."),
			p(pay.CodeSessionNotFound, 404, "No such session", contract.ActionFixRequest, "No session of this id belongs to the caller."),
			p(pay.CodeSessionClosed, 409, "Session closed", contract.ActionStop, "The session is closed or expired; nothing changed."),
			p(pay.CodeSessionInvalid, 422, "Invalid session", contract.ActionFixRequest, "The budget is above the mandate's period cap or the lifetime is out of range; detail says which."),
			p(pay.CodeBadFeedCursor, 400, "Malformed revocation cursor", contract.ActionFixRequest, "The cursor is not one a revocation page returned."),
			p(CodeBadCursor, 400, "Malformed cursor", contract.ActionFixRequest, "The cursor is not one a page of this method returned; start again without it."),
			p(CodeMandateNotFound, 404, "No such mandate", contract.ActionFixRequest, "No mandate of this id was honoured for the caller's agents (a mandate is known once a payment, a spend or a session used it; a dry run does not count)."),
			p(CodeMeterNotFound, 404, "No such meter", contract.ActionFixRequest, "No meter of this id belongs to the caller."),
			p(CodeMeterNotOpen, 409, "Meter not open", contract.ActionStop, "The meter waits for approval, is closing, closed or expired; no usage is recorded and it cannot be closed again."),
			p(CodeMeterCapExceeded, 422, "Meter cap exceeded", contract.ActionStop, "The units would take the accrued amount past the meter's cap; nothing was recorded. Close it and open another."),
			p(CodeMeterUsageReused, 409, "Usage id reused", contract.ActionFixRequest, "This usageId was recorded on the meter with other units; a usage id names one usage."),
			p(CodeCustodyWrongPayee, 422, "Wrong custody payee", contract.ActionFixRequest, "A deposit must pay the deployment's custody account, and a withdrawal may not; detail names the account."),
			p(CodeCustodyInsufficient, 409, "Insufficient custody funds", contract.ActionStop, "The identity's available custody balance is less than the amount (a stake, or a refund of a deposit already spent); nothing changed."),
			p(CodeCustodyAgent, 422, "Agent identity required", contract.ActionFixRequest, "The credential acts for several agent identities, or not for the one named: name one it acts for in agent."),
			p(CodeStakeNotFound, 404, "No such stake", contract.ActionFixRequest, "No stake of this id belongs to the caller."),
			p(CodeStakeLocked, 409, "Stake still locked", contract.ActionStop, "lockedUntil has not passed: nothing changed. Release it after lockedUntil; the stake becomes releasable then."),
			p(CodeStakeDisputed, 409, "Stake under dispute", contract.ActionAwaitOperator, "An open dispute names the stake; it is released or slashed when the dispute is resolved."),
			p(CodeStakeReleased, 409, "Stake already released", contract.ActionStop, "The stake was released or slashed; nothing changed."),
			p(CodeStakeInvalid, 422, "Invalid stake", contract.ActionFixRequest, "The amount must be positive in a valid currency and lockedUntil in the future, within a year."),
			p(CodeProofNotFound, 404, "No such intent", contract.ActionFixRequest, "No intent of this id belongs to the caller."),
			p(CodeTermsNotFound, 404, "No such terms", contract.ActionFixRequest, "No terms of this id were agreed for the caller's identities."),
			p(CodeTermsInvalid, 422, "Invalid terms", contract.ActionFixRequest, "The terms or offer break a rule (payee, amount, rail, validUntil within a year, a stake that is the counterparty's and live, a counterparty agent id); detail says which."),
			p(CodeTermsSignature, 422, "Signature does not verify", contract.ActionFixRequest, "The signature is not the counterparty's Ed25519 signature over these exact bytes; nothing changed."),
			p(CodeTermsAccepted, 409, "Terms already accepted", contract.ActionStop, "The terms were accepted with another signature; nothing changed."),
			p(CodeTermsExpired, 409, "Terms expired", contract.ActionStop, "validUntil has passed; propose new terms."),
			p(CodeCounterpartyRevoked, 403, "Counterparty revoked", contract.ActionStop, "The operator revoked this counterparty's agent id (POST /identity/revoke); its signatures are refused."),
			p(CodeNegotiationNotFound, 404, "No such negotiation", contract.ActionFixRequest, "No negotiation of this id belongs to the caller's identities."),
			p(CodeNegotiationClosed, 409, "Negotiation closed", contract.ActionStop, "The negotiation was accepted or rejected; nothing changed."),
			p(CodeNegotiationTurn, 409, "Out of turn", contract.ActionFixRequest, "Offers alternate: the latest offer is this side's own, so the other side answers it."),
			p(CodeNegotiationNoKey, 503, "No identity key", contract.ActionStop, "This deployment has no identity key to sign offers with; configure the identity service."),
			p(CodeObligationNotFound, 404, "No such obligation", contract.ActionFixRequest, "No obligation of this id belongs to the caller."),
			p(CodeObligationInvalid, 422, "Invalid obligation", contract.ActionFixRequest, "The deadline is not 60 s to 30 days ahead, the counterparty is not an agent id or not the terms', the floor differs from the terms', or the sign floor names no counterparty."),
			p(CodeDeadlinePassed, 409, "Deadline passed", contract.ActionStop, "The obligation's deadline passed: it is refused and its reservation released; nothing can clear it."),
			p(CodeObligationCancelled, 409, "Obligation cancelled", contract.ActionStop, "The obligation was cancelled; nothing can clear it."),
			p(CodeObligationNotReady, 409, "Obligation not reserved yet", contract.ActionAwaitOperator, "The obligation waits for an operator's approval or the rail's authorization."),
			p(CodeObligationClosed, 409, "Obligation closed", contract.ActionStop, "The obligation was denied, failed or declined by an operator; nothing is reserved."),
			p(CodeObligationEvidence, 409, "Evidence submitted", contract.ActionStop, "Evidence was submitted for the obligation: the counterparty is performing, so it can only clear or reach its deadline."),
			p(CodeObligationCleared, 409, "Obligation cleared", contract.ActionStop, "The obligation cleared (or is clearing); it can no longer be cancelled."),
			p(CodeEvidenceNotFound, 404, "No such evidence", contract.ActionFixRequest, "No evidence of this id is about one of the caller's subjects."),
			p(CodeEvidenceSubject, 404, "No such subject", contract.ActionFixRequest, "No obligation (obl_) or payment (int_) of the caller has this id."),
			p(CodeEvidenceInvalid, 422, "Evidence does not verify", contract.ActionFixRequest, "The statement is not a JSON object naming the subject, or its signature or inclusion proof does not verify for the class; detail says which check failed. Nothing was stored."),
			p(CodeEvidenceSigner, 422, "Unknown signer", contract.ActionFixRequest, "No key is configured under this name for the class (or sign evidence names someone other than the counterparty)."),
			p(CodeDeliveryNotFound, 404, "No such delivery", contract.ActionFixRequest, "No delivery of this id belongs to the caller."),
			p(CodeDeliveryExists, 409, "Delivery recorded already", contract.ActionStop, "A delivery of this subject is recorded already."),
			p(CodeDeliveryState, 409, "Delivery not open", contract.ActionStop, "The delivery was accepted or disputed already."),
			p(CodeDeliveryInvalid, 422, "Invalid delivery", contract.ActionFixRequest, "The subject was denied, failed or declined by an operator, or an evidence id is not about it."),
			p(CodeDisputeNotFound, 404, "No such dispute", contract.ActionFixRequest, "No dispute of this id has the caller's identity as a party."),
			p(CodeDisputeExists, 409, "Dispute exists", contract.ActionStop, "The subject is disputed already (one dispute per subject)."),
			p(CodeDisputeResolved, 409, "Dispute resolved", contract.ActionStop, "The dispute is resolved; nothing changed."),
			p(CodeDisputeInvalid, 422, "Invalid dispute request", contract.ActionFixRequest, "The claim is more than remains refundable, a respondent resolution refunds or slashes, a slash names no stake or exceeds it, or the respondent responded already."),
			p(CodeDisputeNotParty, 403, "Not the respondent", contract.ActionStop, "Only a credential acting for the respondent identity may respond."),
			p(CodeDisputeUnsettled, 409, "Not settled", contract.ActionStop, "Only a settled payment or a cleared obligation can be disputed."),
			p(CodeInsuranceInvalid, 422, "Invalid insurance request", contract.ActionFixRequest, "The limit is above the schedule's, or the subject has nothing to cover."),
			p(CodeInsurancePremium, 422, "Wrong premium", contract.ActionFixRequest, "The spend must be exactly the quoted premium in the subject's currency; insurance.quote gives it."),
			p(CodePolicyNotFound, 404, "No such policy", contract.ActionFixRequest, "No policy of this id belongs to the caller."),
			p(CodeClaimNotFound, 404, "No such claim", contract.ActionFixRequest, "No claim of this id belongs to the caller."),
			p(CodeClaimInvalid, 422, "Invalid claim", contract.ActionFixRequest, "The dispute is not the caller's as claimant or not about the policy's subject."),
			p(CodeClaimExceedsLimit, 422, "Claim exceeds the limit", contract.ActionFixRequest, "The claim is more than the policy's limit has left after its other claims."),
			p(CodeClaimExists, 409, "Claim exists", contract.ActionStop, "A claim on this dispute exists already."),
			p(CodeClaimPolicy, 409, "Policy not in force", contract.ActionStop, "The policy's premium has not settled, or was refunded."),
			p(CodeClaimDisputeLost, 409, "Dispute lost", contract.ActionStop, "The dispute was resolved for the respondent; there is nothing to claim."),
		},
	}
}
