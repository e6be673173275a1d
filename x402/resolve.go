package x402

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/countersign/countersign/x402/evm"
)

// Attempt is a paid attempt as its payer stored it before the first send:
// the request and the PAYMENT-SIGNATURE it carried, sent again unchanged,
// and what the chain is asked about once the authorization has expired.
type Attempt struct {
	Method  string
	URL     string
	Header  http.Header
	Body    []byte
	Payment string // the PAYMENT-SIGNATURE header, exactly as first sent

	Network     string // CAIP-2
	Asset       evm.Address
	From        evm.Address
	Nonce       [32]byte
	ValidBefore time.Time
}

// Resolution is what resolving an unknown attempt came to.
type Resolution int

const (
	// StillUnknown: ask again later (before validBefore the resend found
	// no answer either; after it, the chain is not yet final, its clock
	// may not have passed validBefore, or there is no chain reader and a
	// person must look).
	StillUnknown Resolution = iota
	// Settled: the money moved, once. Result.Response is the resource
	// when a resend brought it; nil when only the chain says so (paid,
	// not delivered).
	Settled
	// NeverSettled: the authorization expired unused; it can never move
	// money now, so nothing was paid.
	NeverSettled
)

func (r Resolution) String() string {
	switch r {
	case Settled:
		return "settled"
	case NeverSettled:
		return "never settled"
	}
	return "still unknown"
}

// DefaultClockSkew is how far the local clock is assumed to run ahead of
// the chain's when an authorization is judged expired unused: the
// disagreement between clocks that reference x402 clients allow for when
// they date validAfter 600 s back.
const DefaultClockSkew = 10 * time.Minute

// Resolver settles the question an Unknown attempt leaves: before the
// authorization's validBefore it resends the attempt byte for byte (the
// nonce lets the token move the money once, whichever copy lands); once
// validBefore and Finality have passed it asks the chain whether the
// nonce was used, and takes "unused" for an answer only ClockSkew later
// still. It never signs.
type Resolver struct {
	Payer *Payer
	// Chain answers authorizationState; nil leaves an expired attempt
	// StillUnknown, for a person to resolve.
	Chain ChainReader
	// Finality is how long after validBefore the chain's answer is
	// trusted (blocks to wait for reorganisations).
	Finality time.Duration
	// ClockSkew is how far the local clock may run ahead of the chain's:
	// an unused authorization is declared expired only once the local
	// clock is past validBefore + Finality + ClockSkew. 0 or less means
	// DefaultClockSkew; the margin cannot be switched off (see Resolve).
	ClockSkew time.Duration
	Now       func() time.Time
}

// Resolve makes one step towards an outcome.
func (r *Resolver) Resolve(ctx context.Context, a Attempt) (Resolution, PaidResult, error) {
	if a.Payment == "" || a.ValidBefore.IsZero() {
		return StillUnknown, PaidResult{}, errors.New("x402: resolve: the attempt has no stored payment or validBefore")
	}
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	if now.Before(a.ValidBefore) {
		if r.Payer == nil {
			return StillUnknown, PaidResult{}, errors.New("x402: resolve: no payer to resend with")
		}
		res, err := r.Payer.FetchPaid(ctx, a.Method, a.URL, a.Header, a.Body, a.Payment)
		if err != nil {
			return StillUnknown, res, err
		}
		if res.Outcome == Paid {
			return Settled, res, nil
		}
		return StillUnknown, res, nil
	}
	if now.Before(a.ValidBefore.Add(r.Finality)) {
		return StillUnknown, PaidResult{Reason: "the authorization expired; waiting for the chain to be final"}, nil
	}
	if r.Chain == nil {
		return StillUnknown, PaidResult{Reason: "the authorization expired and no chain reader is configured"}, nil
	}
	used, err := r.Chain.AuthorizationState(ctx, a.Network, a.Asset, a.From, a.Nonce)
	if err != nil {
		return StillUnknown, PaidResult{Reason: fmt.Sprintf("the chain did not answer: %v", err)}, nil
	}
	if used {
		return Settled, PaidResult{Outcome: Paid, Reason: "the chain says the authorization was used; the resource was not delivered"}, nil
	}
	// Unused is conclusive only once the chain's clock is past
	// validBefore: the token compares block.timestamp, not our clock. No
	// ChainReader says what time the chain has reached, so the local clock
	// stands in for it, late by ClockSkew. Judged early, by a clock ahead
	// of the chain's, an authorization the chain would still execute is
	// declared unused, the payment declined, and a new one signed beside
	// it: the stale one can then land too, and the same thing is paid
	// twice. Judged late, an unknown payment only waits longer. A margin
	// bounds the danger, it does not remove it (docs/design/x402.md,
	// "Whose clock says expired"): the chain's own time would.
	skew := r.ClockSkew
	if skew <= 0 {
		skew = DefaultClockSkew
	}
	if now.Before(a.ValidBefore.Add(r.Finality + skew)) {
		return StillUnknown, PaidResult{Reason: fmt.Sprintf("the chain says the authorization is unused so far; it is taken as expired only %s after validBefore, in case the chain's clock is behind ours", r.Finality+skew)}, nil
	}
	return NeverSettled, PaidResult{Reason: "the authorization expired unused"}, nil
}
