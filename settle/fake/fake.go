// Package fake provides payment rails that behave like real ones without
// moving money: for the tests of code that pays, and for the sandbox server.
//
// A [Rail] keeps the full [settle.Rail] contract. It is idempotent on keys
// and refund ids, refuses reused keys, declines, returns pending on deferred
// rails, refuses refunds on irreversible ones, and keeps a ledger that
// survives a process restart when it is given a durable store. On top of
// that it fails on demand, in the ways real rails fail:
//
//   - declines above an amount ([Options.DeclineAbove]) or at random
//     ([Options.DeclineRate]);
//   - unavailable rails ([Options.UnavailableRate]): nothing is sent;
//   - unknown outcomes ([Options.UnknownOutcomeRate]), in two modes
//     ([Options.UnknownOutcomeMode]): the request is lost before the rail
//     acts (nothing recorded), or the response is lost after it acted (the
//     money moved). The caller gets [settle.ErrUnknownOutcome] either way
//     and must ask [Rail.Lookup], which tells the truth;
//   - latency ([Options.MinLatency], [Options.MaxLatency]), half before the
//     rail acts and half after, so a context cancelled mid-call produces
//     either kind of unknown outcome (with [Rail.SettleInTxn], whose write
//     comes after the whole latency, always the lost request);
//   - scripted faults ([Options.Fault], with [AfterMove] and [FailNext]) for
//     deterministic tests.
//
// With [Options.Authorizations] it is also a [settle.Authorizer], under the
// same machinery.
//
// Random choices come from [Options.Rand] ([SeededRand] makes them
// reproducible), time from [Options.Now], and waiting from [Options.Sleep],
// so tests need neither real time nor luck.
//
// # The ledger
//
// A rail records every payment (settled, pending or declined) and every
// refund in a [store.Store] under the key prefix "settle/fake/<name>/", in
// transactions of its own: it models an external system, so its records
// commit or not independently of the caller's. The one exception is
// [Rail.SettleInTxn] under [Options.SharedLog], whose payment entry
// commits with the caller's transaction. Give it the server's durable
// store ([Options.Store]) and a new Rail of the same name over the same
// store, after a crash and restart, still answers Lookup for the payments
// the old process made. Without a store it keeps the ledger in memory.
//
// A payment's key is its store key, so the ledger holds at most one payment
// per key: double settlement is impossible by construction, and
// [Rail.CheckLedger] verifies that and the other invariants (refunds never
// exceed their payment, none on irreversible rails). Tests read the ledger
// with [Rail.Ledger], [Rail.Settled] and [Rail.Count].
//
// # Deferred finality
//
// On a rail with [settle.Deferred] finality, Settle answers
// [settle.StatusPending]. The payment becomes final [Options.FinalityDelay]
// after it was accepted, by the clock [Options.Now]: from then on Lookup,
// Settle replays and Refund see it settled (or declined, for the share set by
// [Options.PendingDeclineRate], with code [CodeReturned]), and its SettledAt
// is the moment it became final. [Rail.Advance] makes every payment due by a
// given time final at once, for tests that hold their clock still.
//
// # Authorizations
//
// A rail built with [Options.Authorizations] holds funds with
// [Rail.Authorize], and releases them with [Rail.Capture] (which makes a
// payment under the hold's key, so Lookup, Refund, Settled and Advance treat
// it as any other) or [Rail.Void]. Holds live in the same store as payments,
// so a restarted rail keeps them, and share their keys: a key is used by
// Settle or by Authorize, never both. A hold expires
// [Options.AuthorizationTTL] after it was placed, by [Options.Now]; the
// expiry is recorded the first time a call sees it, and then stays even if
// the clock is set back. Latency, unavailability, unknown outcomes, Fault
// and FailNext apply as to Settle ([OpAuthorize], [OpCapture], [OpVoid];
// LookupAuthorization is an [OpLookup]); holds are declined by the rules of
// Settle, captures only when a Fault scripts it. The ledger records each
// hold, capture and void ([KindAuthorization], [KindCapture], [KindVoid]),
// and CheckLedger checks that no hold was captured twice or beyond its
// amount.
//
// # Sandbox rails
//
// [NewSandbox] builds the three rails of the sandbox server: "sandbox-card"
// (reversible, instant, with authorizations), "sandbox-bank" (reversible,
// deferred) and "sandbox-chain" (irreversible, instant).
package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// DefaultFinalityDelay is the [Options.FinalityDelay] used when it is zero.
const DefaultFinalityDelay = 10 * time.Second

// DefaultReferencePrefix is the [Options.ReferencePrefix] used when it is
// empty.
const DefaultReferencePrefix = "fk_"

// Decline codes of the fake rails.
const (
	// CodeAmountTooLarge: the amount is above [Options.DeclineAbove].
	CodeAmountTooLarge = "amount_too_large"
	// CodeInsufficientFunds: a random decline ([Options.DeclineRate]).
	CodeInsufficientFunds = "insufficient_funds"
	// CodeReturned: a pending payment that failed when it became final
	// ([Options.PendingDeclineRate]).
	CodeReturned = "returned"
	// CodeDoNotHonor: the payee is one of [Options.DeclinePayees].
	CodeDoNotHonor = "do_not_honor"
)

// UnknownMode says where a simulated unknown outcome happens.
type UnknownMode string

const (
	// UnknownEither loses the request or the response with equal
	// probability. It is the zero value.
	UnknownEither UnknownMode = ""
	// UnknownBefore loses the request: the rail records nothing.
	UnknownBefore UnknownMode = "before"
	// UnknownAfter loses the response: the rail has acted (the money moved,
	// or the decline is recorded) before the call fails.
	UnknownAfter UnknownMode = "after"
)

// Options configures a [Rail]. The zero value is a reversible, instant rail
// that answers at once, never fails, and keeps its ledger in memory.
type Options struct {
	// Facts are the rail's reversibility and finality. An empty field
	// defaults to settle.Reversible and settle.Instant respectively.
	Facts settle.Facts

	// MinLatency and MaxLatency bound how long each call takes: a duration
	// drawn uniformly from [MinLatency, MaxLatency], half spent before the
	// rail acts and half after. Both zero (the default) means no latency.
	// A zero MaxLatency means MinLatency.
	MinLatency, MaxLatency time.Duration

	// Sleep waits for d, or until ctx is done, and returns ctx.Err() in that
	// case. The default waits on a timer. Tests may inject a function that
	// returns at once, or run the default inside testing/synctest.
	Sleep func(ctx context.Context, d time.Duration) error

	// DeclineAbove, when positive, declines every payment and
	// authorization of a larger amount with code CodeAmountTooLarge. Zero
	// means no limit.
	DeclineAbove int64

	// DeclinePayees lists payees every payment and authorization to which
	// is declined with code CodeDoNotHonor (the sandbox declines
	// [SandboxDeclinePayee]).
	DeclinePayees []string

	// DeclineRate is the probability, in [0, 1], that a payment or an
	// authorization is declined with code CodeInsufficientFunds. Default 0.
	// Captures are not declined at random: the hold already passed.
	DeclineRate float64

	// PendingDeclineRate is the probability, in [0, 1], that a pending
	// payment (made by Settle or by Capture) on a deferred rail fails when
	// it becomes final (code CodeReturned) instead of settling. Default 0.
	// It must be zero on an instant rail.
	PendingDeclineRate float64

	// FinalityDelay is how long a payment on a deferred rail stays pending.
	// Zero means DefaultFinalityDelay.
	FinalityDelay time.Duration

	// UnavailableRate is the probability, in [0, 1], that a call of any
	// operation fails with settle.ErrUnavailable before anything happens.
	// Default 0.
	UnavailableRate float64

	// UnknownOutcomeRate is the probability, in [0, 1], that a call that
	// changes the ledger (every operation but the lookups) fails with
	// settle.ErrUnknownOutcome, at the point chosen by UnknownOutcomeMode.
	// Default 0.
	UnknownOutcomeRate float64

	// UnknownOutcomeMode says whether simulated unknown outcomes lose the
	// request (nothing recorded), the response (recorded), or either at
	// random (the default).
	UnknownOutcomeMode UnknownMode

	// Fault, when set, is called at the start of every call that reaches
	// the rail (valid, and not refused outright) with the operation and its
	// request, which it must not modify: a settle.SettleRequest for
	// OpSettle and OpAuthorize, a settle.RefundRequest for OpRefund, a
	// CaptureRequest for OpCapture, and the key string for OpVoid and
	// OpLookup (which both Lookup and LookupAuthorization are). It must be
	// safe for concurrent use. Its result scripts the call:
	//
	//   - nil: the call proceeds (and the random faults above still apply);
	//   - a *settle.DeclineError, from OpSettle, OpAuthorize or OpCapture:
	//     the rail records the payment, hold or capture as declined with
	//     that code and message (a replay of a key already recorded
	//     returns the recorded outcome instead);
	//   - an error wrapped by AfterMove: the rail acts, then fails with the
	//     wrapped error (a response lost after the money moved);
	//   - any other error: the call fails with it at once, nothing recorded.
	//
	// Returned errors reach the caller wrapped, so they should be ones the
	// settle contract covers: settle.ErrUnavailable when nothing was sent,
	// settle.ErrUnknownOutcome otherwise. See FailNext.
	Fault func(op Op, req any) error

	// Rand returns random numbers in [0, 1). It must be safe for concurrent
	// use. The default is math/rand/v2's Float64. SeededRand returns a
	// reproducible one.
	Rand func() float64

	// Now returns the current time. The default is time.Now.
	Now func() time.Time

	// Store holds the ledger, under the key prefix "settle/fake/<name>/",
	// written in transactions of the rail's own. Pass the server's durable
	// store for a ledger that survives restarts. The default is a new,
	// empty memstore.Store. The rail never closes it. Never call the rail
	// from inside a transaction on this store: stores do not nest (and
	// settlement must not run inside the caller's transaction, except as
	// the step SettleInTxn returns under SharedLog).
	Store store.Store

	// SharedLog says that Store is also the store in which the caller
	// records the rail's answers (as the sandbox's rails share the
	// server's store with the money path). The ledger is then written
	// with store.UpdateDeferred: a payment does not wait for an fsync of
	// the rail's own, because the caller's synchronous commit of the
	// outcome, ordered after it in the store's log, makes both durable at
	// once, and a crash before that commit loses the rail's entry together
	// with the outcome, so that the payment is still settling and the next
	// Lookup finds nothing and sends it again. SettleInTxn goes one step
	// further: the payment's entry is written in the caller's transaction
	// that records the outcome. Leave it false for a ledger in a store of
	// its own: a real rail never forgets a payment it answered for.
	SharedLog bool

	// ReferencePrefix starts every payment and authorization reference the
	// rail mints; 24 lowercase hex digits follow. At most 16 bytes of
	// visible ASCII. Default DefaultReferencePrefix.
	ReferencePrefix string

	// Authorizations enables the rail's settle.Authorizer methods, and is
	// what AuthorizationsEnabled reports, so settle.AuthorizerOf offers
	// them. Default false: Authorize refuses with settle.ErrInvalidRequest.
	// Capture, Void and LookupAuthorization keep serving holds already in
	// the store either way, so that switching the option off never
	// strands a hold the rail recorded.
	Authorizations bool

	// AuthorizationTTL is how long a hold lasts: it expires at its
	// AuthorizedAt plus AuthorizationTTL, judged by Now. Zero means
	// DefaultAuthorizationTTL (7 days).
	AuthorizationTTL time.Duration
}

// Rail is a fake [settle.Rail]. It is safe for concurrent use by multiple
// goroutines. It owns no goroutines and needs no Close.
type Rail struct {
	name   string
	opts   Options // defaults filled in; never the caller's pointer
	prefix string  // "settle/fake/<name>/"

	// layout is set once this rail has seen the ledger's keys all have
	// their use markers (markOldKeys).
	layout atomic.Bool
}

var (
	_ settle.Rail           = (*Rail)(nil)
	_ settle.LogSharer      = (*Rail)(nil)
	_ settle.TxnSettler     = (*Rail)(nil)
	_ settle.InstantSettler = (*Rail)(nil)
)

// New returns a fake rail named name (see [settle.ValidateName]) configured
// by opts, which may be nil. It keeps a copy of *opts, not the pointer.
func New(name string, opts *Options) (*Rail, error) {
	if err := settle.ValidateName(name); err != nil {
		return nil, fmt.Errorf("fake: new: %w", err)
	}
	var o Options
	if opts != nil {
		o = *opts
		o.DeclinePayees = slices.Clone(o.DeclinePayees)
	}
	if o.Facts.Reversibility == "" {
		o.Facts.Reversibility = settle.Reversible
	}
	if o.Facts.Finality == "" {
		o.Facts.Finality = settle.Instant
	}
	if o.MaxLatency == 0 {
		o.MaxLatency = o.MinLatency
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.FinalityDelay == 0 {
		o.FinalityDelay = DefaultFinalityDelay
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Store == nil {
		o.Store = &memstore.Store{}
	}
	if o.ReferencePrefix == "" {
		o.ReferencePrefix = DefaultReferencePrefix
	}
	if o.AuthorizationTTL == 0 {
		o.AuthorizationTTL = DefaultAuthorizationTTL
	}
	if err := validate(&o); err != nil {
		return nil, fmt.Errorf("fake: new %q: %w", name, err)
	}
	return &Rail{name: name, opts: o, prefix: "settle/fake/" + name + "/"}, nil
}

func validate(o *Options) error {
	if err := o.Facts.Validate(); err != nil {
		return err
	}
	if o.MinLatency < 0 || o.MaxLatency < o.MinLatency {
		return fmt.Errorf("latency bounds [%v, %v] invalid", o.MinLatency, o.MaxLatency)
	}
	if o.DeclineAbove < 0 {
		return errors.New("negative DeclineAbove")
	}
	if o.FinalityDelay < 0 {
		return errors.New("negative FinalityDelay")
	}
	if o.AuthorizationTTL < 0 {
		return errors.New("negative AuthorizationTTL")
	}
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"DeclineRate", o.DeclineRate},
		{"PendingDeclineRate", o.PendingDeclineRate},
		{"UnavailableRate", o.UnavailableRate},
		{"UnknownOutcomeRate", o.UnknownOutcomeRate},
	} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return fmt.Errorf("%s %v not in [0, 1]", r.name, r.v)
		}
	}
	if o.PendingDeclineRate > 0 && o.Facts.Finality != settle.Deferred {
		return errors.New("PendingDeclineRate needs deferred finality")
	}
	switch o.UnknownOutcomeMode {
	case UnknownEither, UnknownBefore, UnknownAfter:
	default:
		return fmt.Errorf("invalid UnknownOutcomeMode %q", string(o.UnknownOutcomeMode))
	}
	if len(o.ReferencePrefix) > 16 {
		return errors.New("ReferencePrefix longer than 16 bytes")
	}
	for i := 0; i < len(o.ReferencePrefix); i++ {
		if c := o.ReferencePrefix[i]; c < 0x21 || c > 0x7e {
			return errors.New("ReferencePrefix is not visible ASCII")
		}
	}
	return nil
}

// Name returns the rail's name.
func (r *Rail) Name() string { return r.name }

// SharesLog reports [Options.SharedLog] (settle.LogSharer).
func (r *Rail) SharesLog() bool { return r.opts.SharedLog }

// Facts returns the rail's reversibility and finality.
func (r *Rail) Facts() settle.Facts { return r.opts.Facts }

// Settle records the payment in the ledger, at most once per key, and
// returns its outcome, subject to the configured latency and faults. See
// [settle.Rail] for the contract.
func (r *Rail) Settle(ctx context.Context, req settle.SettleRequest) (settle.Settlement, error) {
	p, err := r.startSettle(ctx, req)
	if err != nil {
		return settle.Settlement{}, err
	}
	return r.settlePlanned(ctx, req, p)
}

// startSettle checks a settlement's request and ctx, and draws the
// call's faults.
func (r *Rail) startSettle(ctx context.Context, req settle.SettleRequest) (plan, error) {
	if err := req.Validate(); err != nil {
		return plan{}, fmt.Errorf("fake: %s: settle: %w", r.name, err)
	}
	if err := ctx.Err(); err != nil {
		return plan{}, r.settleErr(req.Key, fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	return r.plan(OpSettle, req, req.Amount), nil
}

// settleErr is err as every failed settlement of key answers it.
func (r *Rail) settleErr(key string, err error) error {
	return fmt.Errorf("fake: %s: settle %s: %w", r.name, key, err)
}

// settlePlanned is Settle once its faults are drawn.
func (r *Rail) settlePlanned(ctx context.Context, req settle.SettleRequest, p plan) (settle.Settlement, error) {
	fail := func(err error) (settle.Settlement, error) {
		return settle.Settlement{}, r.settleErr(req.Key, err)
	}
	if p.fail != nil {
		return fail(p.fail)
	}
	before, after := split(p.latency)
	if err := r.wait(ctx, before); err != nil {
		// The request may be on the wire: the caller cannot know.
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.lostRequest {
		return fail(errLostRequest)
	}
	// The rail acts whatever becomes of the caller's context: it is another
	// system, and the request has reached it.
	pay, err := r.settleTxn(context.WithoutCancel(ctx), req, p, r.now())
	if err != nil {
		if errors.Is(err, settle.ErrKeyReuse) {
			return fail(err)
		}
		return fail(fmt.Errorf("%w: ledger: %w", settle.ErrUnknownOutcome, err))
	}
	if err := r.wait(ctx, after); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.after != nil {
		return fail(p.after)
	}
	st, err := pay.outcome()
	if err != nil {
		return st, r.settleErr(req.Key, err)
	}
	return st, nil
}

// SettleInTxn implements [settle.TxnSettler]. With [Options.SharedLog],
// st the rail's own [Options.Store], and no fault drawn for this call
// that happens around the ledger's write (unavailable, a lost request, an
// unknown outcome after acting), it spends the call's latency (the same
// two halves as Settle) and returns the ledger's write as step, for the
// caller's own transaction on st; the payment is then on the rail's books
// exactly when that transaction commits. Otherwise step is nil and the
// answer is Settle's, with the faults drawn once. Two things differ from
// Settle: a wait cut short by ctx always records nothing (an unknown
// outcome, as a request lost on the wire), and the payment's time is
// taken after the whole latency.
func (r *Rail) SettleInTxn(ctx context.Context, st store.Store, req settle.SettleRequest) (step func(store.Txn) (settle.Settlement, error), s settle.Settlement, err error) {
	p, err := r.startSettle(ctx, req)
	if err != nil {
		return nil, settle.Settlement{}, err
	}
	if !r.opts.SharedLog || st != r.opts.Store || p.fail != nil || p.lostRequest || p.after != nil {
		s, err := r.settlePlanned(ctx, req, p)
		return nil, s, err
	}
	before, after := split(p.latency)
	for _, d := range []time.Duration{before, after} {
		if err := r.wait(ctx, d); err != nil {
			// Nothing was written: as a request lost on the wire.
			return nil, settle.Settlement{}, r.settleErr(req.Key, fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
		}
	}
	marked, err := r.layoutMarked(ctx)
	if err != nil {
		return nil, settle.Settlement{}, r.settleErr(req.Key, fmt.Errorf("%w: ledger: %w", settle.ErrUnavailable, err))
	}
	now := r.now()
	return r.step(req, p, marked, func() time.Time { return now }), settle.Settlement{}, nil
}

// step is the ledger's write of a payment planned as p, in the caller's
// transaction: SettleInTxn's and PrepareInTxn's.
func (r *Rail) step(req settle.SettleRequest, p plan, marked bool, now func() time.Time) func(store.Txn) (settle.Settlement, error) {
	return func(tx store.Txn) (settle.Settlement, error) {
		if !marked {
			// As update does; whether the caller's transaction
			// commits is not known here, so the next call reads the
			// layout again (layoutMarked).
			if err := r.markOldKeys(tx); err != nil {
				return settle.Settlement{}, r.settleErr(req.Key, fmt.Errorf("marking the ledger's used keys: %w", err))
			}
		}
		pay, err := r.settleIn(tx, req, p, now())
		if err != nil {
			return settle.Settlement{}, r.settleErr(req.Key, err)
		}
		s, err := pay.outcome()
		if err != nil {
			return s, r.settleErr(req.Key, err)
		}
		return s, nil
	}
}

// PrepareInTxn implements [settle.InstantSettler]. It answers at once
// only on a rail configured to act without delay or chance: with
// [Options.SharedLog], st its own [Options.Store], no latency, no
// [Options.Fault] and every random rate zero; its declines are then the
// deterministic ones ([Options.DeclineAbove], [Options.DeclinePayees]),
// recorded by the step as Settle would record them. Preparing may read
// whether the ledger's layout is marked (layoutMarked; if not, the step
// marks it, as SettleInTxn's does), and draws and records nothing; the
// payment's time is taken when the step runs.
func (r *Rail) PrepareInTxn(ctx context.Context, st store.Store, req settle.SettleRequest) func(store.Txn) (settle.Settlement, error) {
	if !r.instant() || st != r.opts.Store || req.Validate() != nil {
		return nil
	}
	marked, err := r.layoutMarked(ctx)
	if err != nil {
		return nil // SettleInTxn, on the long way, answers it
	}
	return r.step(req, r.plan(OpSettle, req, req.Amount), marked, r.now)
}

// instant reports whether every call of this rail is answered at once
// and without chance: plan draws nothing and calls no Fault, so that it
// may run before the caller knows whether it will send the payment.
func (r *Rail) instant() bool {
	o := r.opts
	return o.SharedLog && o.Fault == nil && o.MinLatency == 0 && o.MaxLatency == 0 &&
		o.DeclineRate == 0 && o.PendingDeclineRate == 0 && o.UnavailableRate == 0 && o.UnknownOutcomeRate == 0
}

// layoutMarked reports whether the ledger's keys are all marked
// (markOldKeys): known in memory once this rail marked them or saw them
// marked, read from the store until then.
func (r *Rail) layoutMarked(ctx context.Context) (bool, error) {
	if r.layout.Load() {
		return true, nil
	}
	var marked bool
	err := r.opts.Store.View(ctx, func(rd store.Reader) error {
		v, err := rd.Get(r.key("", layoutName))
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		marked = string(v) == layoutV2
		return nil
	})
	if marked {
		r.layout.Store(true)
	}
	return marked, err
}

// Refund records a refund of the payment under req.Key, at most once per
// req.RefundID, subject to the configured latency and faults (declines do
// not apply). See [settle.Rail] for the contract.
func (r *Rail) Refund(ctx context.Context, req settle.RefundRequest) (settle.RefundResult, error) {
	if err := req.Validate(); err != nil {
		return settle.RefundResult{}, fmt.Errorf("fake: %s: refund: %w", r.name, err)
	}
	fail := func(err error) (settle.RefundResult, error) {
		return settle.RefundResult{}, fmt.Errorf("fake: %s: refund %s of %s: %w", r.name, req.RefundID, req.Key, err)
	}
	if r.opts.Facts.Reversibility == settle.Irreversible {
		return fail(settle.ErrIrreversible)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	p := r.plan(OpRefund, req, 0)
	if p.fail != nil {
		return fail(p.fail)
	}
	before, after := split(p.latency)
	if err := r.wait(ctx, before); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.lostRequest {
		return fail(errLostRequest)
	}
	res, err := r.refundTxn(context.WithoutCancel(ctx), req, r.now())
	if err != nil {
		if isRefusal(err) {
			return fail(err)
		}
		return fail(fmt.Errorf("%w: ledger: %w", settle.ErrUnknownOutcome, err))
	}
	if err := r.wait(ctx, after); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.after != nil {
		return fail(p.after)
	}
	return res.result(), nil
}

// isRefusal reports whether err is one of the refund refusals, after which
// nothing was refunded.
func isRefusal(err error) bool {
	for _, target := range []error{settle.ErrKeyReuse, settle.ErrUnknownKey, settle.ErrNotSettled, settle.ErrRefundExceeds} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// Lookup returns the outcome of the payment under key, subject to the
// configured latency, UnavailableRate and Fault (an AfterMove error fails
// the call after the read, which looks the same to the caller). A pending
// payment that is due is made final first, and stays final. See
// [settle.Rail] for the contract.
func (r *Rail) Lookup(ctx context.Context, key string) (settle.Settlement, error) {
	return read[settle.Settlement](ctx, r, "lookup", key, r.lookup)
}

// read runs a read of the ledger under key (Lookup, LookupAuthorization)
// through the rail's latency, UnavailableRate and Fault, which see it as
// OpLookup. A read changes nothing, so an interrupted or failed one is
// simply unanswered (ErrUnavailable); only ErrUnknownKey is an answer.
func read[S any, R any, PR interface {
	*R
	outcome() (S, error)
}](ctx context.Context, r *Rail, what, key string, get func(context.Context, string, time.Time) (R, error)) (S, error) {
	var zero S
	if err := settle.ValidateKey(key); err != nil {
		return zero, fmt.Errorf("fake: %s: %s: %w", r.name, what, err)
	}
	fail := func(err error) (S, error) {
		return zero, fmt.Errorf("fake: %s: %s %s: %w", r.name, what, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	p := r.plan(OpLookup, key, 0)
	if p.fail != nil {
		return fail(p.fail)
	}
	if err := r.wait(ctx, p.latency); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	rec, err := get(ctx, key, r.now())
	if err != nil {
		if errors.Is(err, settle.ErrUnknownKey) {
			return fail(err)
		}
		return fail(fmt.Errorf("%w: ledger: %w", settle.ErrUnavailable, err))
	}
	if p.after != nil {
		return fail(p.after)
	}
	out, err := PR(&rec).outcome()
	if err != nil {
		return out, fmt.Errorf("fake: %s: %s %s: %w", r.name, what, key, err)
	}
	return out, nil
}

// now returns the injected time in UTC without a monotonic reading, so that
// times compare equal after a round trip through the store.
func (r *Rail) now() time.Time { return r.opts.Now().UTC().Round(0) }

// reference mints the rail's id for a payment or refund. It is derived from
// the rail's name and the caller's key, so it is stable across retries and
// restarts, and distinct for distinct keys.
func (r *Rail) reference(prefix, kind, id string) string {
	h := sha256.Sum256([]byte(r.name + "\x00" + kind + "\x00" + id))
	return prefix + hex.EncodeToString(h[:12])
}

// wait spends d of simulated latency with Options.Sleep. Zero latency costs
// nothing, not even a call to Sleep.
func (r *Rail) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return r.opts.Sleep(ctx, d)
}

// sleep is the default Options.Sleep: a timer that honours ctx.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// split divides a call's latency into the part before the rail acts and the
// part after.
func split(d time.Duration) (before, after time.Duration) {
	return d / 2, d - d/2
}
