package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// rail is "x402": settling a fetch signs its authorization and makes the
// paid request. An on-chain transfer cannot be reversed by the payer, so
// the rail is irreversible (a fetch at or above a mandate's irreversible
// threshold waits for a person) and refunds are refused.
type rail struct{ s *Service }

func (r *rail) Name() string { return RailName }

func (r *rail) Facts() settle.Facts {
	return settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}
}

func (r *rail) Refund(context.Context, settle.RefundRequest) (settle.RefundResult, error) {
	return settle.RefundResult{}, fmt.Errorf("%w: an x402 payment is an on-chain transfer; the resource's seller refunds it", settle.ErrIrreversible)
}

var errFrozen = errors.New("x402 fetch: the kill switch is engaged: nothing is signed")

// errSigned: another call stored the attempt first.
var errSigned = errors.New("x402 fetch: the attempt is signed already")

// Settle pays a fetch: once, whatever happens. A fetch whose attempt is
// stored is never signed again: its header is resent, or the chain asked
// (see resolve).
func (r *rail) Settle(ctx context.Context, req settle.SettleRequest) (settle.Settlement, error) {
	if err := req.Validate(); err != nil {
		return settle.Settlement{}, err
	}
	s := r.s
	rec, err := s.load(ctx, req.Key)
	if errors.Is(err, store.ErrNotFound) {
		return settle.Settlement{}, fmt.Errorf("%w: no fetch is recorded for %s", settle.ErrInvalidRequest, req.Key)
	}
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnavailable, err)
	}
	switch {
	case rec.Outcome != nil:
		return r.settled(req, rec), nil
	case rec.Attempt != nil:
		return r.resolve(ctx, req, rec)
	case req.Payee != rec.PayTo || req.Amount != rec.Minor || req.Currency != rec.Currency:
		return settle.Settlement{}, fmt.Errorf("%w: the payment is not the fetch's offer (%s %d %s)", settle.ErrInvalidRequest, rec.PayTo, rec.Minor, rec.Currency)
	}
	if s.wallet == nil {
		return settle.Settlement{}, fmt.Errorf("%w: no wallet key", settle.ErrUnavailable)
	}
	a := &attempt{Requirements: rec.Requirements, Resource: rec.Resource}
	ext := rec.Extensions
	// A held fetch was priced before a person looked; one not sent for
	// longer than its offer lasts may be priced differently now: ask again.
	if rec.Held || s.now().Sub(rec.DecidedAt) > offerTimeout(rec.Requirements) {
		pr, err := r.refetch(ctx, req, rec)
		if err != nil {
			return r.declined(req, err)
		}
		a.Requirements, a.Resource, a.Refetched, ext = pr.Requirements, pr.resource, true, pr.extensions
	}
	now := s.now()
	nonce := x402.NonceFromID(req.Key)
	a.ValidAfter = now.Add(-s.skew).UTC().Truncate(time.Second)
	a.ValidBefore = now.Add(min(offerTimeout(a.Requirements), s.policy.MaxTimeout)).UTC().Truncate(time.Second)
	a.SignedAt, a.From, a.Nonce = now.UTC(), s.wallet.Address().String(), "0x"+hex.EncodeToString(nonce[:])
	res := a.Resource
	p, err := x402.SignExactEVM(a.Requirements, &res, s.wallet, nonce, a.ValidAfter, a.ValidBefore)
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("%w: signing: %v", settle.ErrInvalidRequest, err)
	}
	p.Extensions = ext
	if a.Payment, err = x402.EncodePaymentPayload(p); err != nil {
		return settle.Settlement{}, fmt.Errorf("%w: encoding the payment: %v", settle.ErrInvalidRequest, err)
	}
	// The header leaves only once it is stored with its nonce and window,
	// in a transaction that finds the kill switch released.
	err = s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		frozen, err := s.books.Frozen(txn)
		if err != nil {
			return err
		}
		if frozen {
			return errFrozen
		}
		cur, err := getRecord(txn, req.Key)
		if err != nil {
			return err
		}
		if cur.Attempt != nil {
			return errSigned
		}
		cur.Attempt = a
		if err := putRecord(txn, cur); err != nil {
			return err
		}
		data, err := json.Marshal(map[string]any{"url": rec.URL, "method": rec.Method, "network": a.Requirements.Network,
			"asset": a.Requirements.Asset, "amount": a.Requirements.Amount, "payTo": rec.PayTo, "from": a.From,
			"nonce": a.Nonce, "validAfter": a.ValidAfter, "validBefore": a.ValidBefore, "refetched": a.Refetched})
		if err != nil {
			return err
		}
		_, err = s.books.AppendIntentEntry(txn, audit.Record{Type: EntryAuthorization, IntentID: req.Key,
			Actor: audit.Actor{Kind: "system", ID: "x402"}, Data: data})
		return err
	})
	switch {
	case errors.Is(err, errSigned):
		if rec, err = s.load(ctx, req.Key); err != nil {
			return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnknownOutcome, err)
		}
		return r.resolve(ctx, req, rec)
	case errors.Is(err, errFrozen):
		return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnavailable, err)
	case err != nil:
		// Nothing was sent. Should the attempt have been stored all the
		// same, the next call finds it and sends that one.
		return settle.Settlement{}, fmt.Errorf("%w: storing the attempt: %v", settle.ErrUnavailable, err)
	}
	rec.Attempt = a
	pr, err := s.payer.FetchPaid(ctx, rec.Method, rec.URL, rec.Header, rec.Body, a.Payment)
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnknownOutcome, err)
	}
	if pr.Outcome != x402.Paid {
		return settle.Settlement{}, fmt.Errorf("%w: %s", settle.ErrUnknownOutcome, pr.Reason)
	}
	return r.paid(ctx, req, rec, pr, "answer")
}

// Lookup says what a fetch's payment came to. The fetch's record holds
// the request, so no metadata is needed. A stored attempt whose answer was
// lost is resolved as the package documentation says: its header resent
// unchanged until validBefore (a repeat of the same payment, which its
// nonce lets the token settle at most once), then the chain asked. An
// attempt never stored is settle.ErrUnknownKey: nothing was signed.
func (r *rail) Lookup(ctx context.Context, key string) (settle.Settlement, error) {
	rec, err := r.s.load(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return settle.Settlement{}, fmt.Errorf("%w: %s", settle.ErrUnknownKey, key)
	}
	if err != nil {
		return settle.Settlement{}, err
	}
	req := settle.SettleRequest{Key: key, Payee: rec.PayTo, Amount: rec.Minor, Currency: rec.Currency}
	switch {
	case rec.Outcome != nil:
		return r.settled(req, rec), nil
	case rec.Attempt == nil:
		return settle.Settlement{}, fmt.Errorf("%w: nothing was signed for %s", settle.ErrUnknownKey, key)
	}
	return r.resolve(ctx, req, rec)
}

// resolve makes one step towards the outcome of a stored attempt.
func (r *rail) resolve(ctx context.Context, req settle.SettleRequest, rec *record) (settle.Settlement, error) {
	s, a := r.s, rec.Attempt
	from, err := parseAddress(a.From)
	if err != nil {
		return settle.Settlement{}, err
	}
	asset, err := parseAddress(a.Requirements.Asset)
	if err != nil {
		return settle.Settlement{}, err
	}
	nonce, err := x402.ParseNonce(a.Nonce)
	if err != nil {
		return settle.Settlement{}, err
	}
	if s.now().Before(a.ValidBefore) {
		// Before validBefore, resolving means sending the stored header
		// again: a payment leaving. The kill switch stops it as it stops
		// the first send; the header stays stored, and once the switch is
		// released (or validBefore passes and the chain is asked, which
		// sends nothing) the payment resolves as before.
		var frozen bool
		if err := s.st.View(ctx, func(r store.Reader) error {
			var err error
			frozen, err = s.books.Frozen(r)
			return err
		}); err != nil {
			return settle.Settlement{}, fmt.Errorf("%w: reading the kill switch: %v", settle.ErrUnknownOutcome, err)
		}
		if frozen {
			return settle.Settlement{}, fmt.Errorf("%w: the kill switch is engaged: the stored authorization is not sent again", settle.ErrUnknownOutcome)
		}
	}
	rv := x402.Resolver{Payer: s.payer, Chain: s.chain, Finality: s.finality, ClockSkew: s.clockSkew, Now: s.now}
	res, pr, err := rv.Resolve(ctx, x402.Attempt{Method: rec.Method, URL: rec.URL, Header: rec.Header, Body: rec.Body,
		Payment: a.Payment, Network: a.Requirements.Network, Asset: asset, From: from, Nonce: nonce, ValidBefore: a.ValidBefore})
	switch {
	case err != nil:
		return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnknownOutcome, err)
	case res == x402.Settled && pr.Response != nil:
		return r.paid(ctx, req, rec, pr, "resend")
	case res == x402.Settled:
		return r.paid(ctx, req, rec, pr, "chain")
	case res == x402.NeverSettled:
		return r.declined(req, &settle.DeclineError{Code: DeclineAuthorizationUnused,
			Message: fmt.Sprintf("the authorization (nonce %s) expired at %s unused: nothing was paid, and it can never pay now", a.Nonce, a.ValidBefore.Format(time.RFC3339))})
	}
	return settle.Settlement{}, fmt.Errorf("%w: %s", settle.ErrUnknownOutcome, pr.Reason)
}

// paid records a paid attempt (the resource's answer, the server's
// PAYMENT-RESPONSE, an x402.paid entry) and reports it settled. Not
// recorded, it is an unknown outcome: the money path asks again.
func (r *rail) paid(ctx context.Context, req settle.SettleRequest, rec *record, pr x402.PaidResult, by string) (settle.Settlement, error) {
	s := r.s
	o := &outcome{Settlement: pr.Settlement, ResolvedBy: by, At: s.now().UTC()}
	if o.Settlement.Network == "" {
		o.Settlement.Network = rec.Attempt.Requirements.Network
	}
	if resp := pr.Response; resp != nil && by != "chain" {
		o.Delivered, o.Status, o.Header, o.Body, o.Truncated = true, resp.Status, resp.Header, resp.Body, resp.Truncated
	}
	err := s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		cur, err := getRecord(txn, req.Key)
		if err != nil {
			return err
		}
		if cur.Outcome != nil {
			o = cur.Outcome // recorded by an earlier call
			return nil
		}
		cur.Outcome = o
		if err := putRecord(txn, cur); err != nil {
			return err
		}
		d := map[string]any{"transaction": o.Settlement.Transaction, "network": o.Settlement.Network,
			"payer": o.Settlement.Payer, "nonce": rec.Attempt.Nonce, "resolvedBy": by, "delivered": o.Delivered}
		if o.Delivered {
			sum := sha256.Sum256(o.Body)
			d["status"], d["bodySha256"] = o.Status, hex.EncodeToString(sum[:])
		}
		data, err := json.Marshal(d)
		if err != nil {
			return err
		}
		_, err = s.books.AppendIntentEntry(txn, audit.Record{Type: EntryPaid, IntentID: req.Key,
			Actor: audit.Actor{Kind: "system", ID: "x402"}, Data: data})
		return err
	})
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("%w: recording the payment: %v", settle.ErrUnknownOutcome, err)
	}
	rec.Outcome = o
	return r.settled(req, rec), nil
}

// settled is the Settlement of a recorded payment: its reference is the
// transaction, or the nonce when only the chain proved it.
func (r *rail) settled(req settle.SettleRequest, rec *record) settle.Settlement {
	ref := rec.Outcome.Settlement.Transaction
	if ref == "" && rec.Attempt != nil {
		ref = "nonce:" + rec.Attempt.Nonce
	}
	return settle.Settlement{Key: req.Key, Reference: ref, Status: settle.StatusSettled, Amount: rec.Minor,
		Currency: rec.Currency, Payee: rec.PayTo, SettledAt: rec.Outcome.At}
}

func (r *rail) declined(req settle.SettleRequest, err error) (settle.Settlement, error) {
	var d *settle.DeclineError
	if !errors.As(err, &d) {
		return settle.Settlement{}, err
	}
	return settle.Settlement{Key: req.Key, Status: settle.StatusDeclined, Amount: req.Amount, Currency: req.Currency,
		Payee: req.Payee, DeclineCode: d.Code}, d
}

// offer is an offer asked for again.
type offer struct {
	Requirements x402.PaymentRequirements
	resource     x402.ResourceInfo
	extensions   map[string]json.RawMessage
}

// refetch asks the resource for its offer again and keeps it only if it
// is what was approved: the same payee and the same amount in minor units
// (a receipt states what was paid; a new fetch is cheap). Otherwise the
// payment is declined and nothing is signed (a 2xx: no payment
// required). No answer, or one that is neither a 402 nor a 2xx, is
// settle.ErrUnavailable: nothing was signed or sent.
func (r *rail) refetch(ctx context.Context, req settle.SettleRequest, rec *record) (offer, error) {
	s := r.s
	resp, err := s.payer.Fetch(ctx, rec.Method, rec.URL, rec.Header, rec.Body)
	if err != nil {
		return offer{}, fmt.Errorf("%w: asking the resource for its offer again: %v", settle.ErrUnavailable, err)
	}
	if resp.Status != http.StatusPaymentRequired && (resp.Status < 200 || resp.Status > 299) {
		// A redirect, 429 or 5xx says nothing about the price: a blip
		// must not throw away a person's approval. The payment stays
		// settling and is asked again.
		return offer{}, fmt.Errorf("%w: asked again for its offer, the resource answered %d", settle.ErrUnavailable, resp.Status)
	}
	if resp.Status != http.StatusPaymentRequired {
		return offer{}, &settle.DeclineError{Code: DeclineNotRequired,
			Message: fmt.Sprintf("asked again, the resource answered %d without asking for payment; nothing was paid, fetch it again", resp.Status)}
	}
	pr, err := x402.PaymentRequiredFrom(resp.Header, resp.Body)
	if err != nil {
		return offer{}, &settle.DeclineError{Code: DeclinePriceChanged, Message: "asked again, the resource's offer cannot be read: " + err.Error()}
	}
	u, err := url.Parse(rec.URL)
	if err != nil {
		return offer{}, fmt.Errorf("%w: %v", settle.ErrInvalidRequest, err)
	}
	c, err := s.choose(pr, u, pay.Amount{Minor: req.Amount, Currency: req.Currency}, []string{req.Payee})
	if err != nil {
		return offer{}, &settle.DeclineError{Code: DeclinePriceChanged,
			Message: "asked again, no offer fits what was approved (" + req.Payee + ", " + fmt.Sprint(req.Amount) + " " + req.Currency + "): " + err.Error()}
	}
	if c.Minor != req.Amount {
		return offer{}, &settle.DeclineError{Code: DeclinePriceChanged,
			Message: fmt.Sprintf("asked again, the price is %d %s, not the %d %s approved; fetch it again", c.Minor, c.Currency, req.Amount, req.Currency)}
	}
	return offer{Requirements: c.Requirements, resource: pr.Resource, extensions: pr.Extensions}, nil
}

// offerTimeout is an offer's maxTimeoutSeconds.
func offerTimeout(r x402.PaymentRequirements) time.Duration {
	return time.Duration(r.MaxTimeoutSeconds) * time.Second
}

func parseAddress(s string) (evm.Address, error) {
	a, err := evm.ParseAddress(s)
	if err != nil {
		return a, fmt.Errorf("x402 fetch: stored address %q: %w", s, err)
	}
	return a, nil
}
