package settle

import (
	"context"
	"fmt"
	"time"
)

// Authorizer is the optional capability of a rail that can hold funds before
// moving them (a card authorization). Find it with [AuthorizerOf], never with
// a bare type assertion: a rail may implement it and still have it switched
// off. Read "Authorizations" in the package documentation before calling it:
// as with Settle, which errors prove that no money moved is part of this
// interface.
//
// Authorizations and payments share one key space per rail: a key names
// either a payment made by Settle or an authorization (and, once captured,
// the payment its capture made), never both.
type Authorizer interface {
	// Authorize places a hold of req.Amount of req.Currency for req.Payee
	// under req.Key, moving no money. Idempotent per key exactly like
	// Settle: same key + equal request replays the authorization (with its
	// current status); same key + different request (or a key already used
	// by Settle) -> ErrKeyReuse. Errors follow the Settle contract:
	// *DeclineError (ErrDeclined) final, nothing held; ErrInvalidRequest;
	// ErrUnavailable (nothing sent); anything else = unknown outcome (a
	// hold may exist): resolve with LookupAuthorization.
	Authorize(ctx context.Context, req SettleRequest) (Authorization, error)

	// Capture moves minor (1..authorized amount) of an authorization to its
	// payee, at most once per key; the rest of the hold is released. On
	// success it returns a Settlement exactly like Settle (Status settled,
	// or pending on a deferred rail; Amount = minor) and from then on
	// Lookup(key) returns that settlement and Refund works on the key as
	// for a settled payment. Repeating Capture with the same minor
	// replays; a different minor after a capture -> ErrKeyReuse. A voided
	// or expired authorization -> ErrAuthorizationClosed (nothing moved).
	// No authorization under key -> ErrUnknownKey. Declines
	// (*DeclineError) are final: nothing moved. ErrUnavailable: nothing
	// sent. Anything else: unknown outcome (resolve with Lookup(key):
	// ErrUnknownKey from Lookup means no capture happened yet).
	Capture(ctx context.Context, key string, minor int64) (Settlement, error)

	// Void releases an uncaptured authorization. Voiding a voided or
	// expired one replays it (nil error). A captured one ->
	// ErrAuthorizationClosed. Unknown key -> ErrUnknownKey.
	// ErrUnavailable: nothing sent; any other error: unknown, repeat Void.
	Void(ctx context.Context, key string) (Authorization, error)

	// LookupAuthorization reads an authorization without changing it.
	// ErrUnknownKey: the rail never recorded an authorization under key
	// (conclusive as Lookup's is). Any other error: ask again later.
	LookupAuthorization(ctx context.Context, key string) (Authorization, error)
}

// authorizationSwitch is implemented by a rail type whose instances may have
// the [Authorizer] capability switched off. It is unexported because callers
// have no use for it beyond [AuthorizerOf]; a rail only needs the method.
type authorizationSwitch interface {
	AuthorizationsEnabled() bool
}

// AuthorizerOf returns r's authorization capability when r has one and it is
// enabled. A rail type that implements [Authorizer] but can have the
// capability switched off per instance also implements
// AuthorizationsEnabled() bool; AuthorizerOf returns false when that reports
// false. A nil rail has no capability.
//
// A type that wraps a Rail (a circuit breaker, an instrumented rail) hides
// the capability unless it implements Authorizer itself and forwards
// AuthorizationsEnabled too.
func AuthorizerOf(r Rail) (Authorizer, bool) {
	a, ok := r.(Authorizer)
	if !ok {
		return nil, false
	}
	if s, ok := r.(authorizationSwitch); ok && !s.AuthorizationsEnabled() {
		return nil, false
	}
	return a, true
}

// AuthorizationStatus is the state of an authorization on its rail. The zero
// value is not a status: it is what a failed call returns, and what a
// declined authorization reports, so code that forgets to check an error
// never sees "authorized".
type AuthorizationStatus string

const (
	// AuthAuthorized: the hold is in place and may be captured or voided.
	AuthAuthorized AuthorizationStatus = "authorized"
	// AuthCaptured: the hold was captured, at most once; the payment it
	// made is read with [Rail.Lookup] under the same key. Terminal.
	AuthCaptured AuthorizationStatus = "captured"
	// AuthVoided: the hold was released and nothing moved. Terminal.
	AuthVoided AuthorizationStatus = "voided"
	// AuthExpired: the rail released the hold at its ExpiresAt and nothing
	// moved. Terminal.
	AuthExpired AuthorizationStatus = "expired"
)

// Validate returns an error unless s is one of the four statuses.
func (s AuthorizationStatus) Validate() error {
	switch s {
	case AuthAuthorized, AuthCaptured, AuthVoided, AuthExpired:
		return nil
	}
	return fmt.Errorf("settle: invalid authorization status %q", string(s))
}

// Authorization is a rail's record of one hold.
type Authorization struct {
	// Key is the caller's key the hold was placed under.
	Key string
	// Reference is the rail's id for the hold. It need not equal the
	// Reference of the payment a capture makes.
	Reference string
	Payee     string
	// Amount is the authorized amount, in minor units of Currency.
	Amount   int64
	Currency string
	// Status is the hold's state on the rail; empty for a declined
	// authorization (returned beside its *DeclineError).
	Status AuthorizationStatus
	// CapturedMinor is the captured amount when Status is AuthCaptured,
	// and zero otherwise.
	CapturedMinor int64
	// AuthorizedAt is when the rail placed the hold; zero when declined.
	AuthorizedAt time.Time
	// ExpiresAt is the rail's own expiry of the hold: from this instant
	// on, by the rail's clock, the hold is expired unless captured or
	// voided first. Zero when declined. A caller should capture well
	// before it, since the caller's clock is not the rail's.
	ExpiresAt time.Time
}

// ValidateCapture checks the arguments of [Authorizer.Capture] that can be
// checked without the authorization: a valid key (see [ValidateKey]) and an
// amount of 1 to [MaxAmount]. Whether minor exceeds the authorized amount is
// for the rail to say, also with [ErrInvalidRequest]. Errors match
// ErrInvalidRequest. Rails call it before sending anything.
func ValidateCapture(key string, minor int64) error {
	if err := checkID("key", key); err != nil {
		return err
	}
	return checkAmount(minor)
}
