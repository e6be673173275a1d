package settle

import "errors"

// The outcome errors. What each one allows the caller to conclude about the
// money is the heart of this package; see also the package documentation.
var (
	// ErrDeclined is matched by every *[DeclineError]: the rail refused the
	// payment. The money did not move under the key and never will; the
	// outcome is final, and a repeated Settle returns it again. Check with
	// errors.Is; use errors.As with *DeclineError for the code.
	ErrDeclined = errors.New("settle: declined")

	// ErrUnknownOutcome means the call failed in a way that leaves the
	// outcome unknown: the money MAY have moved (a response lost after the
	// rail acted, a timeout, a cancelled context after sending). The caller
	// must not treat the payment as failed: keep it "settling" and resolve it
	// with [Rail.Lookup], or repeat the identical request, which is
	// idempotent. Callers must treat every error they do not recognise the
	// same way. Check with errors.Is.
	ErrUnknownOutcome = errors.New("settle: outcome unknown")

	// ErrUnavailable means the rail could not be reached or refused to
	// start, and nothing was sent by this call: it is safe to retry the same
	// request later. It proves nothing about earlier calls with the same
	// key. Rails return it only when they are certain; when in doubt they
	// return ErrUnknownOutcome. Check with errors.Is.
	ErrUnavailable = errors.New("settle: rail unavailable")

	// ErrInvalidRequest means the request failed validation and was not
	// sent. It is a caller bug; this call moved nothing. Check with
	// errors.Is.
	ErrInvalidRequest = errors.New("settle: invalid request")

	// ErrKeyReuse means the key (or refund id) was already used for a
	// different request, or, on a rail with authorizations, by the other
	// of Settle and [Authorizer.Authorize]. This call moved nothing, but
	// the key has an earlier outcome of its own: read it with Lookup (and
	// LookupAuthorization) before concluding anything about the payment.
	// Check with errors.Is.
	ErrKeyReuse = errors.New("settle: key reused for a different request")

	// ErrUnknownKey is returned by [Rail.Lookup] and [Rail.Refund] when the
	// rail has no payment under the key: no money moved under it. From
	// [Authorizer.Capture], [Authorizer.Void] and
	// [Authorizer.LookupAuthorization] it means the rail has no
	// authorization under the key: it holds nothing under it. Check with
	// errors.Is.
	ErrUnknownKey = errors.New("settle: unknown key")

	// ErrIrreversible is returned by [Rail.Refund] on a rail whose
	// reversibility is [Irreversible]. Nothing was refunded, and never can
	// be on this rail. Check with errors.Is.
	ErrIrreversible = errors.New("settle: rail is irreversible")

	// ErrRefundExceeds is returned by [Rail.Refund] when the refund would
	// make the payment's refunds sum to more than its amount. Nothing was
	// refunded by this call. Check with errors.Is.
	ErrRefundExceeds = errors.New("settle: refund exceeds settled amount")

	// ErrNotSettled is returned by [Rail.Refund] when the payment is not
	// settled: it is still pending (retry once it settles) or declined
	// (there is nothing to refund). Nothing was refunded. Check with
	// errors.Is.
	ErrNotSettled = errors.New("settle: payment not settled")

	// ErrAuthorizationClosed is returned by [Authorizer.Capture] when the
	// authorization was voided or has expired, and by [Authorizer.Void]
	// when it was already captured. Nothing moved by this call, and the
	// authorization will never change again: a closed hold can only be
	// read. Check with errors.Is.
	ErrAuthorizationClosed = errors.New("settle: authorization closed")

	// ErrUnknownRail is returned by [Registry.Get] for a name that is not
	// registered. Check with errors.Is.
	ErrUnknownRail = errors.New("settle: unknown rail")

	// ErrDuplicateRail is returned by [Registry.Register] for a name that
	// is already registered. Check with errors.Is.
	ErrDuplicateRail = errors.New("settle: rail already registered")
)

// DeclineError is a rail's refusal of a payment. It matches [ErrDeclined]:
// the money did not move under the key and never will.
//
// Code and Message come from the rail and are shown to agents and
// operators, so rails must not put secrets (card numbers, credentials) in
// them.
type DeclineError struct {
	// Code is the rail's machine-readable reason, in lower snake case
	// (e.g. "insufficient_funds", "amount_too_large").
	Code string
	// Message explains the decline to a person.
	Message string
}

func (e *DeclineError) Error() string {
	s := "settle: declined"
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unwrap makes every DeclineError match ErrDeclined.
func (e *DeclineError) Unwrap() error { return ErrDeclined }
