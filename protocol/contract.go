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
			op.Responses = append(op.Responses, contract.JSON(202, "Accepted: held for an operator's approval.", m.Response))
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
			p(pay.CodeHoldReleased, 409, "Hold released", contract.ActionStop, "The hold was released, expired, denied or failed; nothing can be captured or released."),
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
		},
	}
}
