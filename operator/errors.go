package operator

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
)

// Stable error codes. Both are the contract's: the HTTP layer answers them
// on every operator operation, whichever package declares it.
const (
	// CodeUnauthorized is the code of every [*UnauthorizedError].
	CodeUnauthorized = contract.CodeOperatorUnauthorized
	// CodeRationaleTooShort is the code of [ErrRationaleTooShort].
	CodeRationaleTooShort = contract.CodeOperatorRationaleTooShort
)

// ErrUnauthorized is matched by every [*UnauthorizedError]; check with
// errors.Is.
var ErrUnauthorized = errors.New("operator: unauthorized")

// Reason says precisely why a request was refused. The values are stable
// and safe to show the client; the HTTP layer puts them in the problem.
type Reason string

// Reasons for refusing an operator request, in the order of the checks.
const (
	// ReasonMissingHeader: the request has no Svc-Operator header, or only
	// an empty one.
	ReasonMissingHeader Reason = "missing_header"
	// ReasonMalformedHeader: the header is not what [ParseHeader] accepts.
	ReasonMalformedHeader Reason = "malformed_header"
	// ReasonUnknownKey: keyid names no trusted operator key.
	ReasonUnknownKey Reason = "unknown_key"
	// ReasonStaleTimestamp: ts is more than the window before the server's
	// clock.
	ReasonStaleTimestamp Reason = "stale_timestamp"
	// ReasonFutureTimestamp: ts is more than the window after the server's
	// clock.
	ReasonFutureTimestamp Reason = "future_timestamp"
	// ReasonAlgMismatch: sig is not the length the key's algorithm
	// produces: 64 bytes for both EdDSA and ES256. The usual cause is an
	// ES256 signature in ASN.1 DER form instead of the fixed r||s form.
	ReasonAlgMismatch Reason = "alg_mismatch"
	// ReasonBadSignature: the signature does not verify over the request
	// as received. A signature made for another operation, method, URL,
	// query, body, base URL, ts or nonce, or by another key, lands here:
	// the verifier cannot tell which line differed, only that one did.
	ReasonBadSignature Reason = "bad_signature"
	// ReasonReplayedNonce: the nonce was accepted before. Checked last, so
	// only a correctly signed request can spend a nonce.
	ReasonReplayedNonce Reason = "replayed_nonce"
)

// UnauthorizedError is a refused operator request (401
// operator.unauthorized). It matches [ErrUnauthorized]. Its message is
// "operator: unauthorized: {reason}: {detail}" and holds nothing secret:
// no signature, nonce or body bytes, and no key material.
type UnauthorizedError struct {
	// Reason is the precise, stable reason.
	Reason Reason
	// KeyID is the keyid the header claimed, when it parsed; empty
	// otherwise. It is not authenticated unless the refusal came after the
	// signature verified (ReasonReplayedNonce).
	KeyID string
	// Detail says what did not hold, for a person.
	Detail string
}

func (e *UnauthorizedError) Error() string {
	if e.Detail == "" {
		return "operator: unauthorized: " + string(e.Reason)
	}
	return "operator: unauthorized: " + string(e.Reason) + ": " + e.Detail
}

// Code returns "operator.unauthorized".
func (e *UnauthorizedError) Code() string { return CodeUnauthorized }

// ProblemExtensions adds the stable reason to the HTTP problem.
func (e *UnauthorizedError) ProblemExtensions() map[string]any {
	return map[string]any{"reason": string(e.Reason)}
}

// Unwrap returns [ErrUnauthorized].
func (e *UnauthorizedError) Unwrap() error { return ErrUnauthorized }

func refuse(r Reason, keyID, format string, args ...any) *UnauthorizedError {
	return &UnauthorizedError{Reason: r, KeyID: keyID, Detail: fmt.Sprintf(format, args...)}
}

// MinRationaleLen is the fewest characters (Unicode code points) a
// rationale must have after leading and trailing white space is trimmed.
const MinRationaleLen = 10

// ErrRationaleTooShort is returned by [CheckRationale] (400
// operator.rationale_too_short); check with errors.Is.
var ErrRationaleTooShort = errcode.New(CodeRationaleTooShort,
	"operator: the rationale must have at least 10 characters besides leading and trailing spaces")

// CheckRationale checks that an operator stated why they act: s must have
// at least [MinRationaleLen] characters after trimming white space. It
// counts characters, not bytes, so "Überweisung" and "返金は顧客の要望による" are
// judged by what a person reads. The error wraps [ErrRationaleTooShort].
func CheckRationale(s string) error {
	if n := utf8.RuneCountInString(strings.TrimSpace(s)); n < MinRationaleLen {
		return fmt.Errorf("%w (it has %d)", ErrRationaleTooShort, n)
	}
	return nil
}
