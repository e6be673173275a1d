// Package settle defines how Countersign moves money: the [Rail] interface
// every payment rail implements, the outcome types a rail reports, and a
// [Registry] of rails by name. Package settle/fake provides configurable
// fake rails for tests and the sandbox server.
//
// A rail is the only thing in Countersign that moves money, so its contract
// is written for the worst day: the network fails halfway through a call, the
// process is killed between the rail's answer and our bookkeeping, a caller
// retries. The contract is built so that a caller who follows it can never
// pay twice and never records a payment as failed while the money moved.
//
// # Keys make every call idempotent
//
// Every [SettleRequest] carries a Key, the caller's id for the payment
// (Countersign uses the intent id). A rail moves money at most once per key:
// calling Settle again with the same key and the same request moves nothing
// and returns the key's outcome again. Calling it with the same key and a
// different request (another payee, amount or currency) moves nothing and
// fails with [ErrKeyReuse]. Refunds work the same way on their RefundID.
// Keys are scoped to one rail.
//
// Because calls are idempotent, the answer to "did my call work?" is always
// the same: ask again with the same key. Settle replays the outcome, and
// [Rail.Lookup] reads it without the risk of moving money.
//
// # Reading an outcome (fail closed)
//
// A Settle error tells the caller what it may conclude about the money. Only
// the four cases below before the default are facts; everything else means
// "the money may have moved", and a caller must treat every error it cannot
// place in one of those four cases as [ErrUnknownOutcome]:
//
//	st, err := rail.Settle(ctx, req)
//	switch {
//	case err == nil:
//		// The rail accepted the payment: st.Status is StatusSettled, or
//		// StatusPending on a rail with deferred finality (not final yet:
//		// keep asking Lookup until it is settled or declined).
//	case errors.Is(err, settle.ErrDeclined):
//		// Final: the money did not move under this key, and never will.
//		// errors.As(err, &decline) gives the rail's code and message.
//	case errors.Is(err, settle.ErrInvalidRequest):
//		// The request was rejected before it was sent: a caller bug.
//		// This call moved nothing.
//	case errors.Is(err, settle.ErrUnavailable):
//		// This call sent nothing; retry the same request later. It says
//		// nothing about earlier calls with the same key: if one of those
//		// ended unknown, the key is still unknown.
//	default:
//		// ErrUnknownOutcome, ErrKeyReuse, a context error or anything
//		// else: the money MAY have moved. Keep the payment in "settling"
//		// and resolve it with Lookup (or by repeating the same Settle).
//		// Never record it as failed on the strength of this error.
//	}
//
// Cancellation follows the same rule. A rail returns [ErrUnavailable] for a
// context that was done before anything was sent, and [ErrUnknownOutcome]
// when it was cancelled after the request may have left. Callers should
// therefore settle under a context that a client disconnect cannot cancel
// (context.WithoutCancel plus a timeout), and must finish their bookkeeping
// once Settle has returned.
//
// # Two phases and a reconciler
//
// A caller that keeps money safe across crashes uses two store transactions
// around the rail call: the first records that the payment is "settling"
// under its key, the second records the outcome. A crash between them leaves
// the payment "settling", and on start-up a reconciler asks [Rail.Lookup]:
//
//   - nil error: settled (or still pending, on a deferred rail);
//   - [ErrDeclined]: failed, final;
//   - [ErrUnknownKey]: the rail never recorded the key, so no money moved
//     under it. This is conclusive only when no Settle with that key can
//     still be in flight. The robust resolution is to repeat Settle with the
//     original request, which either performs the payment once or replays
//     its outcome;
//   - anything else: the rail could not answer; ask again later.
//
// # Deferred finality
//
// A rail whose [Facts] say [Deferred] (a bank transfer, say) may answer
// Settle with [StatusPending]: the payment is accepted but can still fail.
// It later becomes [StatusSettled], or [StatusDeclined] (a returned
// transfer), and Lookup reports which. A rail with [Instant] finality never
// reports StatusPending.
//
// # Refunds
//
// [Rail.Refund] returns money under a new RefundID, which is the refund's own
// idempotency key. A [Reversible] rail accepts any number of full or partial
// refunds whose sum does not exceed the settled amount; an [Irreversible]
// rail refuses every refund with [ErrIrreversible]. The refusals
// ([ErrIrreversible], [ErrRefundExceeds], [ErrNotSettled], [ErrUnknownKey],
// [ErrKeyReuse], [ErrInvalidRequest]) and [ErrUnavailable] mean nothing was
// refunded by this call. Every other error is an unknown outcome: repeat the
// same Refund (same RefundID, key and amount) until it answers, which
// refunds at most once.
//
// # Authorizations
//
// Some rails (cards) can hold funds first and move them later. Such a rail
// implements [Authorizer]; find it with [AuthorizerOf], which also honours a
// rail whose capability is switched off. Each key names at most one
// authorization, and its states and refusals are these (m is the amount
// captured, at most the authorized amount):
//
//	from        call or event   to          answer
//	(none)      Authorize       authorized  the hold, or *DeclineError: final, nothing held
//	authorized  Capture(m)      captured    the Settlement of m: money moved
//	authorized  Void            voided      the voided hold
//	authorized  its ExpiresAt   expired     (the rail's clock; no call)
//	captured    Capture(m)      captured    replay for the captured m, else ErrKeyReuse
//	captured    Void            captured    ErrAuthorizationClosed: money moved, Refund it
//	voided      Capture         voided      ErrAuthorizationClosed
//	voided      Void            voided      replay
//	expired     Capture         expired     ErrAuthorizationClosed
//	expired     Void            expired     replay
//
// A capture of more than the authorized amount fails with
// [ErrInvalidRequest] and changes nothing. Only a successful Capture moves
// money, at most once per key and never more than the hold.
//
// Keys: a key used by Settle cannot be authorized, and an authorization's
// key cannot be settled; either attempt fails with [ErrKeyReuse]. From a
// capture on, the key is also a payment: [Rail.Lookup] returns the capture's
// Settlement (pending on a [Deferred] rail until final) and [Rail.Refund]
// refunds it as any settled payment.
//
// Lookup before a capture: for a key whose authorization has not been
// captured (authorized, voided, expired or declined), Lookup returns
// [ErrUnknownKey]. That means no money has moved under the key so far, not
// that none will: an authorized hold can still be captured. A reconciler
// resolving a Capture of unknown outcome may conclude "not captured" from
// it only when no Capture with that key can still be in flight; the robust
// resolution is to repeat the Capture with the same amount, which captures
// once or replays. Never resolve an authorization's key by repeating Settle:
// it fails with ErrKeyReuse.
//
// Expiry: the rail, by its own clock, treats a hold as expired from its
// ExpiresAt on. A Capture then fails with [ErrAuthorizationClosed] and moves
// nothing, and the key is spent: to take the money, authorize again under a
// new key. Do not judge expiry with the caller's clock; capture well before
// ExpiresAt and let the rail's answer decide.
//
// Declines: a declined authorization holds nothing and never will: a
// repeated Authorize, and Capture, Void and LookupAuthorization on its key,
// return its *[DeclineError]. A declined Capture is final for the key too:
// nothing moved, the rail releases the hold (the authorization reads
// voided), a repeated Capture returns the decline, and Lookup reports the
// declined payment.
//
// Reading an authorization call's error follows the Settle rules: only a
// nil error, a decline, [ErrInvalidRequest] and [ErrUnavailable] are facts,
// together with the refusals each method documents ([ErrAuthorizationClosed],
// [ErrUnknownKey], and [ErrKeyReuse], after which this call moved nothing but
// the key has an earlier outcome of its own). Everything else is unknown:
//
//   - Authorize: a hold may exist. Resolve with LookupAuthorization, or by
//     repeating the same Authorize. An unresolved hold moves no money; it
//     lapses at ExpiresAt.
//   - Capture: the money may have moved. Keep the payment "settling" and
//     resolve with Lookup or by repeating the same Capture.
//   - Void: the hold may still be in place; repeat Void until it answers.
//     An ErrAuthorizationClosed from Void means the hold was captured: the
//     money moved, and only a Refund returns it.
//
// # Implementing a rail
//
// A rail implementation must: validate requests with [SettleRequest.Validate]
// and [RefundRequest.Validate] (and captures with [ValidateCapture]) before
// sending anything; never move money twice for one key or refund id, across
// restarts of the process and of the rail; return [ErrUnavailable] only when
// it is certain nothing was sent, and [ErrDeclined] only when the money did
// not move and never will; and wrap every other failure in
// [ErrUnknownOutcome]. Errors must not contain secrets such as card numbers
// or credentials. A rail with authorizations keeps them, like payments,
// across restarts, in the key space of its payments.
package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// Rail moves money. Implementations must be safe for concurrent use by
// multiple goroutines.
//
// Read the package documentation before calling a Rail: which errors prove
// that money did not move is part of this interface.
type Rail interface {
	// Name is the rail's registry name (see [ValidateName]), e.g.
	// "sandbox-card". It never changes.
	Name() string

	// Facts are the rail's static properties. They never change.
	Facts() Facts

	// Settle moves req.Amount of req.Currency to req.Payee, at most once per
	// req.Key. A repeated call with the same key and an equal request
	// (see [SettleRequest]) moves nothing and returns the key's current
	// outcome: the same Settlement, except that a pending payment may since
	// have become settled or declined.
	//
	// On success the error is nil and the Settlement's Status is
	// [StatusSettled] or, on a rail with [Deferred] finality,
	// [StatusPending]. On a decline the error is a *[DeclineError] (matching
	// [ErrDeclined]) and the Settlement describes the decline, with Status
	// [StatusDeclined]. For every other error the Settlement is the zero
	// value, whose Status is not a valid status, and the error must be read
	// as the package documentation says: anything but ErrDeclined,
	// ErrInvalidRequest and ErrUnavailable means the money may have moved.
	Settle(ctx context.Context, req SettleRequest) (Settlement, error)

	// Refund returns req.Amount of the payment settled under req.Key, at most
	// once per req.RefundID. A repeated call with the same refund id and an
	// equal request refunds nothing and returns the first call's result.
	//
	// It fails with [ErrIrreversible] on an irreversible rail,
	// [ErrUnknownKey] if the rail has no payment under req.Key,
	// [ErrNotSettled] if that payment is pending or declined,
	// [ErrRefundExceeds] if the refunds of the payment would sum to more
	// than its amount, [ErrKeyReuse] if the refund id was used for a
	// different request, [ErrInvalidRequest] or [ErrUnavailable]; after any
	// of these nothing was refunded by this call. Every other error is an
	// unknown outcome: repeat the same request to learn the result.
	Refund(ctx context.Context, req RefundRequest) (RefundResult, error)

	// Lookup returns the outcome of the payment with the given key, moving
	// no money: exactly what a repeated Settle of the original request
	// would return. So a nil error means settled or pending, and a
	// *[DeclineError] (with a Settlement describing the decline) means
	// declined.
	//
	// It returns [ErrUnknownKey] if the rail has no payment under the key:
	// no money moved under it (see the package documentation for when that
	// is conclusive, and for the key of an authorization not yet
	// captured). Any other error means the rail could not answer, and must
	// never be taken to mean ErrUnknownKey: ask again later.
	Lookup(ctx context.Context, key string) (Settlement, error)
}

// RequestLooker is a [Rail] whose lookup needs what the original request
// carried (its metadata: which merchant, which checkout session) rather
// than only its key. The caller resuming a payment of unknown outcome asks
// LookupRequest with the request it sent, when the rail has it; the
// answer means exactly what [Rail.Lookup]'s does. It moves no money.
type RequestLooker interface {
	LookupRequest(ctx context.Context, req SettleRequest) (Settlement, error)
}

// LogSharer is a [Rail] that can report that it keeps its books in the
// caller's own store, through the same ordered log as the caller's records
// (a store.Deferrer): a simulated rail (settle/fake with SharedLog),
// never one whose effects live outside that log. When SharesLog reports
// true, the caller may let the transaction that decides a payment on this
// rail return before it is durable (audit.Log.UpdateDeferred): the rail's
// entry and the outcome recorded after it are ordered after the decision
// in that log, so a crash that loses the decision loses them too, and the
// outcome's synchronous commit makes all three durable before anyone is
// answered.
type LogSharer interface {
	SharesLog() bool
}

// TxnSettler is a [LogSharer] that can also settle inside the caller's
// own transaction, so that its entry and the caller's outcome are one
// commit rather than two in a row. SettleInTxn does what precedes the
// rail's write (its checks, latency and faults) and returns either step,
// the write, to run in a transaction of st, the caller's store (a
// function that may run more than once, as a transaction's may, with
// effects only if that transaction commits; its error is the rail's
// answer, as Settle's would be, or the store's), or, when this call
// cannot settle that way (st is not the store the rail keeps its books
// in, or a fault of the simulation happens around the write), step nil
// and Settle's answer. It is only ever called when SharesLog reports
// true.
type TxnSettler interface {
	LogSharer
	SettleInTxn(ctx context.Context, st store.Store, req SettleRequest) (step func(store.Txn) (Settlement, error), s Settlement, err error)
}

// An InstantSettler is a [TxnSettler] that can answer a payment at once,
// so that the caller may decide the payment, send it and record the
// outcome in one transaction: one commit a payment instead of two.
// PrepareInTxn returns the rail's write as a step, as SettleInTxn does,
// but has no effect of its own: it may read st, but it takes no time,
// draws no fault and records nothing, so the caller may prepare a
// payment before knowing whether it will be sent and drop the step when
// it is not (a denial, a hold for approval, a replay). Only the step, in
// a transaction of st that commits, puts the payment on the rail's books;
// it may run more than once, as a transaction's function may. PrepareInTxn returns nil
// when this call cannot be answered at once (the rail simulates latency
// or faults, or st is not the store it keeps its books in); the caller
// then commits its decision first and calls SettleInTxn.
type InstantSettler interface {
	TxnSettler
	PrepareInTxn(ctx context.Context, st store.Store, req SettleRequest) func(store.Txn) (Settlement, error)
}

// Facts are the static properties of a [Rail], which the gate and mandates
// reason about (an irreversible payment may need a person's approval).
type Facts struct {
	Reversibility Reversibility
	Finality      Finality
}

// Validate reports whether both facts are valid.
func (f Facts) Validate() error {
	if err := f.Reversibility.Validate(); err != nil {
		return err
	}
	return f.Finality.Validate()
}

// Reversibility says whether a rail can return money after settlement.
// Its values are the strings used on the wire ("terms.reversibility").
type Reversibility string

const (
	// Reversible rails accept refunds (cards, bank transfers).
	Reversible Reversibility = "reversible"
	// Irreversible rails refuse every refund with [ErrIrreversible]
	// (on-chain transfers).
	Irreversible Reversibility = "irreversible"
)

// Validate returns an error unless r is [Reversible] or [Irreversible].
func (r Reversibility) Validate() error {
	switch r {
	case Reversible, Irreversible:
		return nil
	}
	return fmt.Errorf("settle: invalid reversibility %q (want %q or %q)", string(r), Reversible, Irreversible)
}

// Finality says when a rail's settlement becomes final.
// Its values are the strings used on the wire ("terms.finality").
type Finality string

const (
	// Instant rails answer Settle with a final outcome.
	Instant Finality = "instant"
	// Deferred rails may answer Settle with [StatusPending]; the outcome
	// becomes final later and is read with [Rail.Lookup].
	Deferred Finality = "deferred"
)

// Validate returns an error unless f is [Instant] or [Deferred].
func (f Finality) Validate() error {
	switch f {
	case Instant, Deferred:
		return nil
	}
	return fmt.Errorf("settle: invalid finality %q (want %q or %q)", string(f), Instant, Deferred)
}

// Status is the state of a payment on its rail. The zero value is not a
// status: it is what a failed call returns, so code that forgets to check an
// error still never sees "settled".
type Status string

const (
	// StatusSettled: the money moved, finally (it may later be refunded).
	StatusSettled Status = "settled"
	// StatusPending: accepted by a [Deferred] rail, not final yet; it will
	// become settled or declined.
	StatusPending Status = "pending"
	// StatusDeclined: the money did not move and never will under this key.
	StatusDeclined Status = "declined"
)

// Validate returns an error unless s is one of the three statuses.
func (s Status) Validate() error {
	switch s {
	case StatusSettled, StatusPending, StatusDeclined:
		return nil
	}
	return fmt.Errorf("settle: invalid status %q", string(s))
}

// Settlement is a rail's record of one payment.
type Settlement struct {
	// Key is the caller's key (the intent id) the payment was made under.
	Key string
	// Reference is the rail's own id for the payment (a charge id, a
	// transfer id, a transaction hash). Declines have one too.
	Reference string
	// Status is the payment's state on the rail.
	Status Status
	// Amount is in minor units of Currency; Payee receives it.
	Amount   int64
	Currency string
	Payee    string
	// SettledAt is when the payment became final. It is the zero time
	// unless Status is StatusSettled.
	SettledAt time.Time
	// Refunded is the sum of the refunds made so far, in minor units.
	Refunded int64
	// DeclineCode is the rail's decline code when Status is
	// StatusDeclined, and empty otherwise.
	DeclineCode string
}
