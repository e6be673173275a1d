package fake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// DefaultAuthorizationTTL is the [Options.AuthorizationTTL] used when it is
// zero: the hold period card networks commonly grant.
const DefaultAuthorizationTTL = 7 * 24 * time.Hour

// CaptureRequest is what [Options.Fault] receives for [OpCapture]: the
// arguments of [Rail.Capture].
type CaptureRequest struct {
	Key   string
	Minor int64
}

var _ settle.Authorizer = (*Rail)(nil)

// errAuthorizationsOff refuses new holds on a rail built without
// [Options.Authorizations]. It is a caller bug (settle.AuthorizerOf would
// not have offered the capability), so it matches settle.ErrInvalidRequest:
// nothing was sent.
var errAuthorizationsOff = fmt.Errorf("%w: authorizations are not enabled on this rail", settle.ErrInvalidRequest)

// AuthorizationsEnabled reports [Options.Authorizations], so that
// [settle.AuthorizerOf] offers the capability only on rails that have it.
func (r *Rail) AuthorizationsEnabled() bool { return r.opts.Authorizations }

// Authorize records a hold, at most once per key, subject to the configured
// latency and faults; declines follow the rules of Settle (DeclineAbove,
// DeclineRate, a scripted *settle.DeclineError). It refuses with
// settle.ErrInvalidRequest unless [Options.Authorizations] is set. See
// [settle.Authorizer] for the contract.
func (r *Rail) Authorize(ctx context.Context, req settle.SettleRequest) (settle.Authorization, error) {
	if err := req.Validate(); err != nil {
		return settle.Authorization{}, fmt.Errorf("fake: %s: authorize: %w", r.name, err)
	}
	fail := func(err error) (settle.Authorization, error) {
		return settle.Authorization{}, fmt.Errorf("fake: %s: authorize %s: %w", r.name, req.Key, err)
	}
	if !r.opts.Authorizations {
		return fail(errAuthorizationsOff)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	p := r.plan(OpAuthorize, req, req.Amount)
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
	a, err := r.authorizeTxn(context.WithoutCancel(ctx), req, p, r.now())
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
	out, err := a.outcome()
	if err != nil {
		return out, fmt.Errorf("fake: %s: authorize %s: %w", r.name, req.Key, err)
	}
	return out, nil
}

// Capture records the payment of minor from the hold under key, at most once
// per key, subject to the configured latency and faults. Only a scripted
// *settle.DeclineError declines a capture (the hold already passed the
// decline rules); on a deferred rail PendingDeclineRate applies to the
// payment it makes, as to one made by Settle. See [settle.Authorizer] for
// the contract.
func (r *Rail) Capture(ctx context.Context, key string, minor int64) (settle.Settlement, error) {
	if err := settle.ValidateCapture(key, minor); err != nil {
		return settle.Settlement{}, fmt.Errorf("fake: %s: capture: %w", r.name, err)
	}
	fail := func(err error) (settle.Settlement, error) {
		return settle.Settlement{}, fmt.Errorf("fake: %s: capture %s: %w", r.name, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	p := r.plan(OpCapture, CaptureRequest{Key: key, Minor: minor}, minor)
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
	pay, refusal, err := r.captureTxn(context.WithoutCancel(ctx), key, minor, p, r.now())
	if err != nil {
		return fail(fmt.Errorf("%w: ledger: %w", settle.ErrUnknownOutcome, err))
	}
	if refusal != nil {
		var de *settle.DeclineError
		if errors.As(refusal, &de) {
			// A declined authorization: describe it as Settle describes a
			// decline, so a caller reads the code in one place.
			return pay.settlement(), fmt.Errorf("fake: %s: capture %s: %w", r.name, key, refusal)
		}
		return fail(refusal)
	}
	if err := r.wait(ctx, after); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.after != nil {
		return fail(p.after)
	}
	st, err := pay.outcome()
	if err != nil {
		return st, fmt.Errorf("fake: %s: capture %s: %w", r.name, key, err)
	}
	return st, nil
}

// Void releases the hold under key, subject to the configured latency and
// faults (declines do not apply). See [settle.Authorizer] for the contract.
func (r *Rail) Void(ctx context.Context, key string) (settle.Authorization, error) {
	if err := settle.ValidateKey(key); err != nil {
		return settle.Authorization{}, fmt.Errorf("fake: %s: void: %w", r.name, err)
	}
	fail := func(err error) (settle.Authorization, error) {
		return settle.Authorization{}, fmt.Errorf("fake: %s: void %s: %w", r.name, key, err)
	}
	if err := ctx.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnavailable, err))
	}
	p := r.plan(OpVoid, key, 0)
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
	a, refusal, err := r.voidTxn(context.WithoutCancel(ctx), key, r.now())
	if err != nil {
		return fail(fmt.Errorf("%w: ledger: %w", settle.ErrUnknownOutcome, err))
	}
	if refusal != nil {
		return fail(refusal)
	}
	if err := r.wait(ctx, after); err != nil {
		return fail(fmt.Errorf("%w: %w", settle.ErrUnknownOutcome, err))
	}
	if p.after != nil {
		return fail(p.after)
	}
	out, err := a.outcome()
	if err != nil {
		return out, fmt.Errorf("fake: %s: void %s: %w", r.name, key, err)
	}
	return out, nil
}

// LookupAuthorization returns the hold under key, subject to the configured
// latency, UnavailableRate and Fault, which see it as [OpLookup] with the
// key. A hold whose ExpiresAt has passed is marked expired first, and stays
// expired. See [settle.Authorizer] for the contract.
func (r *Rail) LookupAuthorization(ctx context.Context, key string) (settle.Authorization, error) {
	return read[settle.Authorization](ctx, r, "lookup authorization", key, r.lookupAuthorization)
}

// authorization is a stored hold. A declined one has an empty Status and
// keeps its decline, so that every later call on the key can repeat it.
type authorization struct {
	Seq            uint64                     `json:"seq"`
	Key            string                     `json:"key"`
	Payee          string                     `json:"payee"`
	Amount         int64                      `json:"amount"`
	Currency       string                     `json:"currency"`
	Metadata       map[string]string          `json:"metadata,omitempty"`
	Reference      string                     `json:"reference"`
	Status         settle.AuthorizationStatus `json:"status,omitempty"`
	DeclineCode    string                     `json:"declineCode,omitempty"`
	DeclineMessage string                     `json:"declineMessage,omitempty"`
	At             time.Time                  `json:"at"` // when the rail recorded it
	ExpiresAt      time.Time                  `json:"expiresAt,omitzero"`
	CapturedMinor  int64                      `json:"capturedMinor,omitempty"`
	// VoidSeq and VoidedAt record a Void. A hold released by a declined
	// capture is voided without them: the capture's own entry records it.
	VoidSeq  uint64    `json:"voidSeq,omitempty"`
	VoidedAt time.Time `json:"voidedAt,omitzero"`
}

func (a *authorization) declined() bool { return a.Status == "" }

func (a *authorization) request() settle.SettleRequest {
	return settle.SettleRequest{Key: a.Key, Payee: a.Payee, Amount: a.Amount, Currency: a.Currency}
}

// expire marks a hold expired if its ExpiresAt has come at now, and reports
// whether it changed. The boundary belongs to expiry: a hold is good while
// now is before ExpiresAt.
func (a *authorization) expire(now time.Time) bool {
	if a.Status != settle.AuthAuthorized || now.Before(a.ExpiresAt) {
		return false
	}
	a.Status = settle.AuthExpired
	return true
}

func (a *authorization) authorization() settle.Authorization {
	out := settle.Authorization{
		Key:           a.Key,
		Reference:     a.Reference,
		Payee:         a.Payee,
		Amount:        a.Amount,
		Currency:      a.Currency,
		Status:        a.Status,
		CapturedMinor: a.CapturedMinor,
	}
	if !a.declined() {
		out.AuthorizedAt, out.ExpiresAt = a.At, a.ExpiresAt
	}
	return out
}

func (a *authorization) decline() *settle.DeclineError {
	return &settle.DeclineError{Code: a.DeclineCode, Message: a.DeclineMessage}
}

// outcome is what Authorize, Void and LookupAuthorization return for the
// hold.
func (a *authorization) outcome() (settle.Authorization, error) {
	if a.declined() {
		return a.authorization(), a.decline()
	}
	return a.authorization(), nil
}

// authorizeTxn records the hold planned by p, or returns the one already
// recorded under req.Key.
func (r *Rail) authorizeTxn(ctx context.Context, req settle.SettleRequest, p plan, now time.Time) (authorization, error) {
	ak := r.key(authDir, req.Key)
	var out authorization
	err := r.update(ctx, func(tx store.Txn) error {
		use, err := r.keyUse(tx, req.Key)
		switch {
		case err != nil:
			return err
		case use == paymentDir:
			// A key Settle used is not free for a hold.
			return settle.ErrKeyReuse
		case use == authDir:
			prev, err := getJSON[authorization](tx, ak)
			if err != nil {
				return err
			}
			if !prev.request().Matches(req) {
				return settle.ErrKeyReuse
			}
			if prev.expire(now) {
				if err := setJSON(tx, ak, &prev); err != nil {
					return err
				}
			}
			out = prev
			return nil
		}
		if err := r.markUsed(tx, req.Key, authDir); err != nil {
			return err
		}
		seq, err := nextSeq(tx, r.key("", seqName))
		if err != nil {
			return err
		}
		a := authorization{
			Seq:       seq,
			Key:       req.Key,
			Payee:     req.Payee,
			Amount:    req.Amount,
			Currency:  req.Currency,
			Metadata:  req.Metadata,
			Reference: r.reference(r.opts.ReferencePrefix, "authorization", req.Key),
			At:        now,
		}
		if p.decline != nil {
			a.DeclineCode, a.DeclineMessage = p.decline.Code, p.decline.Message
		} else {
			a.Status = settle.AuthAuthorized
			a.ExpiresAt = now.Add(r.opts.AuthorizationTTL)
		}
		if err := setJSON(tx, ak, &a); err != nil {
			return err
		}
		out = a
		return nil
	})
	return out, err
}

// captureTxn records the capture planned by p, or returns the one already
// recorded under key. A refusal is returned apart from the store's error, so
// that the transaction still commits what it learned on the way (a hold
// found expired stays expired).
func (r *Rail) captureTxn(ctx context.Context, key string, minor int64, p plan, now time.Time) (out payment, refusal, err error) {
	ak, pk := r.key(authDir, key), r.key(paymentDir, key)
	err = r.update(ctx, func(tx store.Txn) error {
		out, refusal = payment{}, nil
		a, err := getJSON[authorization](tx, ak)
		if errors.Is(err, store.ErrNotFound) {
			refusal = settle.ErrUnknownKey
			return nil
		} else if err != nil {
			return err
		}
		if a.declined() {
			out = payment{
				Key: a.Key, Payee: a.Payee, Amount: minor, Currency: a.Currency, Reference: a.Reference,
				Status: settle.StatusDeclined, DeclineCode: a.DeclineCode,
			}
			refusal = a.decline()
			return nil
		}
		// A capture was made (or declined) under the key: replay it, or
		// refuse a different amount.
		prev, err := getJSON[payment](tx, pk)
		switch {
		case err == nil:
			if prev.Amount != minor {
				refusal = fmt.Errorf("%w: captured %d, asked %d", settle.ErrKeyReuse, prev.Amount, minor)
				return nil
			}
			if prev.finalize(now) {
				if err := setJSON(tx, pk, &prev); err != nil {
					return err
				}
			}
			out = prev
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if a.expire(now) {
			if err := setJSON(tx, ak, &a); err != nil {
				return err
			}
		}
		if a.Status != settle.AuthAuthorized {
			refusal = fmt.Errorf("%w: it is %s", settle.ErrAuthorizationClosed, a.Status)
			return nil
		}
		if minor > a.Amount {
			refusal = fmt.Errorf("%w: capture of %d exceeds the authorized %d", settle.ErrInvalidRequest, minor, a.Amount)
			return nil
		}
		seq, err := nextSeq(tx, r.key("", seqName))
		if err != nil {
			return err
		}
		pay := payment{
			Seq:       seq,
			Key:       key,
			Payee:     a.Payee,
			Amount:    minor,
			Currency:  a.Currency,
			Metadata:  a.Metadata,
			Reference: r.reference(r.opts.ReferencePrefix, "payment", key),
			At:        now,
			Capture:   true,
		}
		switch {
		case p.decline != nil:
			// Declined is final for the key, so the hold can never be
			// captured: release it rather than leave it to expire.
			pay.Status = settle.StatusDeclined
			pay.DeclineCode = p.decline.Code
			pay.DeclineMessage = p.decline.Message
			a.Status = settle.AuthVoided
		case r.opts.Facts.Finality == settle.Deferred:
			pay.Status = settle.StatusPending
			pay.FinalAt = now.Add(r.opts.FinalityDelay)
			pay.Returns = p.returns
			a.Status, a.CapturedMinor = settle.AuthCaptured, minor
		default:
			pay.Status = settle.StatusSettled
			pay.SettledAt = now
			a.Status, a.CapturedMinor = settle.AuthCaptured, minor
		}
		if err := setJSON(tx, pk, &pay); err != nil {
			return err
		}
		if err := setJSON(tx, ak, &a); err != nil {
			return err
		}
		out = pay
		return nil
	})
	return out, refusal, err
}

// voidTxn releases the hold under key, or returns it as it is if it is
// already released. Refusals are returned apart from the store's error, as
// in captureTxn.
func (r *Rail) voidTxn(ctx context.Context, key string, now time.Time) (out authorization, refusal, err error) {
	ak := r.key(authDir, key)
	err = r.update(ctx, func(tx store.Txn) error {
		out, refusal = authorization{}, nil
		a, err := getJSON[authorization](tx, ak)
		if errors.Is(err, store.ErrNotFound) {
			refusal = settle.ErrUnknownKey
			return nil
		} else if err != nil {
			return err
		}
		changed := a.expire(now)
		switch a.Status {
		case "":
			// Declined: out carries the decline to the caller.
		case settle.AuthCaptured:
			refusal = fmt.Errorf("%w: it is captured", settle.ErrAuthorizationClosed)
		case settle.AuthAuthorized:
			seq, err := nextSeq(tx, r.key("", seqName))
			if err != nil {
				return err
			}
			a.Status, a.VoidSeq, a.VoidedAt = settle.AuthVoided, seq, now
			changed = true
		}
		if changed {
			if err := setJSON(tx, ak, &a); err != nil {
				return err
			}
		}
		out = a
		return nil
	})
	return out, refusal, err
}

// lookupAuthorization reads the hold under key, marking it expired first if
// its time has come.
func (r *Rail) lookupAuthorization(ctx context.Context, key string, now time.Time) (authorization, error) {
	k := r.key(authDir, key)
	var a authorization
	err := r.opts.Store.View(ctx, func(tx store.Reader) error {
		var err error
		a, err = getJSON[authorization](tx, k)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return authorization{}, settle.ErrUnknownKey
	}
	if err != nil || !a.expire(now) {
		return a, err
	}
	// Persist the expiry, so that what LookupAuthorization has reported
	// once stays true even if the injected clock is later set back.
	err = r.update(ctx, func(tx store.Txn) error {
		var err error
		a, err = getJSON[authorization](tx, k)
		if err != nil {
			return err
		}
		if a.expire(now) {
			return setJSON(tx, k, &a)
		}
		return nil
	})
	return a, err
}
