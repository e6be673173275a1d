package fake

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/settle"
)

// Op names a rail operation, for [Options.Fault] and [FailNext].
type Op string

const (
	OpSettle    Op = "settle"    // Rail.Settle
	OpRefund    Op = "refund"    // Rail.Refund
	OpLookup    Op = "lookup"    // Rail.Lookup and Rail.LookupAuthorization
	OpAuthorize Op = "authorize" // Rail.Authorize
	OpCapture   Op = "capture"   // Rail.Capture
	OpVoid      Op = "void"      // Rail.Void
)

// The errors of simulated faults. Each matches the settle sentinel its
// caller must act on, and says in words which kind of fault it was, for a
// person reading a test log; code cannot tell the two unknown outcomes
// apart, just as it could not with a real rail.
var (
	errUnavailable  = fmt.Errorf("%w: simulated outage", settle.ErrUnavailable)
	errLostRequest  = fmt.Errorf("%w: simulated lost request", settle.ErrUnknownOutcome)
	errLostResponse = fmt.Errorf("%w: simulated lost response", settle.ErrUnknownOutcome)
)

// AfterMove marks a [Options.Fault] error as happening after the rail acted:
// the rail records the payment, refund, hold, capture or void, then the call
// fails with err. This is a response lost after the money moved (or the hold
// changed). A nil err means settle.ErrUnknownOutcome.
func AfterMove(err error) error {
	if err == nil {
		err = settle.ErrUnknownOutcome
	}
	return &afterMoveError{err: err}
}

type afterMoveError struct{ err error }

func (e *afterMoveError) Error() string { return e.err.Error() }
func (e *afterMoveError) Unwrap() error { return e.err }

// FailNext returns an [Options.Fault] hook that fails the next n calls of op
// (of every operation, if op is empty) with err, and lets every later call
// through. Wrap err with [AfterMove] to fail after the rail acted. The hook
// is safe for concurrent use; exactly n calls fail.
func FailNext(op Op, n int, err error) func(Op, any) error {
	var left atomic.Int64
	left.Store(int64(n))
	return func(o Op, _ any) error {
		if op != "" && o != op {
			return nil
		}
		if left.Add(-1) < 0 {
			return nil
		}
		return err
	}
}

// SeededRand returns a reproducible source for [Options.Rand] that is safe
// for concurrent use. A rail draws from it in a fixed order on each call, so
// sequential calls with the same seed and options meet the same faults.
func SeededRand(seed uint64) func() float64 {
	var mu sync.Mutex // guards r, which is not safe for concurrent use
	r := rand.New(rand.NewPCG(seed, 0x636f756e74657273))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

// plan is what a call will do, decided before it acts, so that the store
// transaction that records it is a pure function of its inputs and may
// safely run more than once.
type plan struct {
	fail        error                // fail at once, before anything happens
	lostRequest bool                 // spend the first half of the latency, then fail unknown, recording nothing
	after       error                // act, then fail with this
	decline     *settle.DeclineError // record a decline (OpSettle, OpAuthorize, OpCapture)
	returns     bool                 // a pending payment fails when final (OpSettle, OpCapture; deferred)
	latency     time.Duration
}

// plan draws the faults of one call: first the scripted Fault, then the
// random ones in a fixed order (unavailable, unknown outcome and its mode,
// decline, return, latency), drawing only for the features configured that
// apply to op.
func (r *Rail) plan(op Op, req any, amount int64) plan {
	var p plan
	if r.opts.Fault != nil {
		if err := r.opts.Fault(op, req); err != nil {
			var am *afterMoveError
			var de *settle.DeclineError
			switch {
			case errors.As(err, &am):
				p.after = am.err
			case declinable(op) && errors.As(err, &de):
				p.decline = &settle.DeclineError{Code: de.Code, Message: de.Message}
			default:
				p.fail = err
				return p
			}
		}
	}
	if r.chance(r.opts.UnavailableRate) {
		p.fail = errUnavailable
		return p
	}
	if op != OpLookup && r.chance(r.opts.UnknownOutcomeRate) {
		after := r.opts.UnknownOutcomeMode == UnknownAfter ||
			r.opts.UnknownOutcomeMode == UnknownEither && r.opts.Rand() < 0.5
		if !after {
			p.lostRequest = true
		} else if p.after == nil {
			p.after = errLostResponse
		}
	}
	// A capture draws no decline of its own: its hold passed these rules.
	if op == OpSettle || op == OpAuthorize {
		switch {
		case p.decline != nil:
		case declinedPayee(r.opts.DeclinePayees, req):
			p.decline = &settle.DeclineError{
				Code:    CodeDoNotHonor,
				Message: r.name + " declines every payment to " + req.(settle.SettleRequest).Payee,
			}
		case r.opts.DeclineAbove > 0 && amount > r.opts.DeclineAbove:
			p.decline = &settle.DeclineError{
				Code:    CodeAmountTooLarge,
				Message: fmt.Sprintf("amount above this rail's limit of %d", r.opts.DeclineAbove),
			}
		case r.chance(r.opts.DeclineRate):
			p.decline = &settle.DeclineError{Code: CodeInsufficientFunds, Message: "insufficient funds"}
		}
	}
	// Only a payment can be returned, and Settle and Capture make them.
	if (op == OpSettle || op == OpCapture) && p.decline == nil && r.chance(r.opts.PendingDeclineRate) {
		p.returns = true
	}
	if d := r.opts.MaxLatency - r.opts.MinLatency; d > 0 {
		p.latency = r.opts.MinLatency + time.Duration(r.opts.Rand()*float64(d))
	} else {
		p.latency = r.opts.MinLatency
	}
	return p
}

// declinedPayee reports whether req, a payment or an authorization, is to
// one of payees.
func declinedPayee(payees []string, req any) bool {
	sr, ok := req.(settle.SettleRequest)
	return ok && slices.Contains(payees, sr.Payee)
}

// declinable reports whether a scripted decline of op is recorded as one:
// only the operations that may move money or hold it can be declined.
func declinable(op Op) bool {
	return op == OpSettle || op == OpAuthorize || op == OpCapture
}

// chance reports true with probability rate, drawing only if 0 < rate < 1.
func (r *Rail) chance(rate float64) bool {
	switch {
	case rate <= 0:
		return false
	case rate >= 1:
		return true
	}
	return r.opts.Rand() < rate
}
