// Package fetch lets an agent pay for HTTP resources that ask for an
// x402 payment (HTTP 402, protocol version 2, scheme exact on EVM
// networks), under exactly the gate, record and settlement of /pay.
//
// # A fetch is a payment whose rail makes the paid request
//
// The agent signs what it wants (method, URL, a digest of the body, the
// most it will pay, an idempotency key, a purpose: [Request]), never a
// price. [Service.Fetch] makes the request unpaid; an answer that is not a
// 402 is relayed and nothing is paid. A 402's offers are read, and only
// those the deployment can honour are kept ([x402.Policy]: version 2,
// exact on an allowed network and asset whose EIP-712 domain is pinned,
// payTo allowed by the mandate, resource.url on the origin asked for,
// maxTimeoutSeconds under the cap, the amount, rounded up to minor units,
// within the signed maximum); no offer is the problem x402.no_offer, which
// lists why each was refused. The cheapest offer becomes an instruction
// (payee the CAIP-10 payTo, amount its minor units, rail x402) and goes
// through [pay.Books.Authorize]: the gate allows, holds for a person or
// denies; the deciding transaction keeps the offer and the request
// (nothing is signed yet).
//
// The rail "x402" settles: it signs an EIP-3009 TransferWithAuthorization
// with the deployment's wallet key, whose nonce is derived from the
// intent's id ([x402.NonceFromID]) so that the token contract itself
// allows one transfer per payment. In one transaction it checks the kill
// switch and stores the header, with an x402.authorization entry carrying
// the nonce and the validity window, before the header leaves; then it
// sends the paid request on a connection of its own. Only a 2xx with a
// successful PAYMENT-RESPONSE settles (an x402.paid entry, then
// payment.settled with the transaction as reference); the resource's
// answer is kept for replays. Anything else leaves the payment settling:
// the header is resent byte for byte until validBefore, then a
// [x402.ChainReader] says whether the nonce was used; without one the
// payment waits on the operator's settling list. Never a new nonce.
//
// A fetch held for a person signs nothing until it is approved; the
// approval fetches the offer again, and pays only if it still fits what
// was approved (same payee, amount not above): otherwise the payment is
// declined price_changed and nothing is signed.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// Problem codes of x402 fetches.
const (
	CodeNoOffer             = "x402.no_offer"
	CodeInvalidURL          = "x402.invalid_url"
	CodeResourceUnavailable = "x402.resource_unavailable"
	CodeInvalidOffer        = "x402.invalid_payment_required"
	CodeNotConfigured       = "x402.not_configured"
)

// Decline codes of the rail.
const (
	DeclinePriceChanged        = "price_changed"
	DeclineNotRequired         = "payment_not_required"
	DeclineAuthorizationUnused = "authorization_expired_unused"
)

// Errors of [Service.Fetch], as problems.
var (
	// ErrNotConfigured: the deployment holds no wallet key or allows no
	// asset.
	ErrNotConfigured = errcode.New(CodeNotConfigured, "x402 fetch: this deployment pays no x402 resources (no wallet key or no assets configured)")
	// ErrResourceUnavailable: the unpaid request got no answer.
	ErrResourceUnavailable = errcode.New(CodeResourceUnavailable, "x402 fetch: the resource did not answer")
)

// Entry types written by the service.
const (
	EntryNoOffer       = "x402.no_offer"
	EntryAuthorization = "x402.authorization"
	EntryPaid          = "x402.paid"
)

// keyFetch + intent id → the fetch's record (see record).
const keyFetch = "x402/fetch/"

// Defaults of [Options].
const (
	DefaultMaxTimeout = 5 * time.Minute
	DefaultSkew       = time.Minute
	DefaultFinality   = 2 * time.Minute
)

// Options configure [New]. Store, Log and, to pay at all, Wallet and
// Policy.Assets are required.
type Options struct {
	Store store.Store
	Log   *audit.Log
	// Wallet signs the authorizations. It is never written to the store,
	// the record or a log. Nil: every fetch that would pay is refused
	// x402.not_configured.
	Wallet *evm.Key
	// Policy is what the deployment pays with (assets, pinned EIP-712
	// domains) and the cap on an offer's maxTimeoutSeconds (default
	// DefaultMaxTimeout); its PayTo is set per fetch from the mandate.
	Policy x402.Policy
	// URLs guards every request the service makes: the agent's URL is
	// checked, and every connection dialled again.
	URLs netguard.Policy
	// Chain answers whether an expired authorization was used; nil leaves
	// such a payment on the operator's settling list.
	Chain x402.ChainReader
	// Finality is how long after validBefore the chain's answer is
	// trusted. Default DefaultFinality.
	Finality time.Duration
	// ClockSkew is how far this machine's clock may run ahead of the
	// chain's: an unused authorization is declined only once the local
	// clock is past validBefore + Finality + ClockSkew. Default
	// x402.DefaultClockSkew; it cannot be switched off (x402.Resolver).
	ClockSkew time.Duration
	// Skew is how far before now an authorization is valid from (the
	// resource's clock may lag). Default DefaultSkew.
	Skew time.Duration
	// Timeout bounds each request to a resource; default 30 s.
	Timeout time.Duration
	// MaxBody caps the resource's answer kept and relayed; default 1 MiB.
	MaxBody int64
	// Transport is the base of the guarded transport (tests); default
	// netguard's.
	Transport *http.Transport
	Now       func() time.Time
	Logger    *slog.Logger
}

// Service makes x402 fetches. It is safe for concurrent use.
type Service struct {
	st       store.Store
	log      *audit.Log
	wallet   *evm.Key
	policy   x402.Policy
	urls     netguard.Policy
	payer    *x402.Payer
	chain    x402.ChainReader
	finality time.Duration
	// clockSkew is Options.ClockSkew, passed to the Resolver as is: it
	// reads 0 or less as x402.DefaultClockSkew.
	clockSkew time.Duration
	skew      time.Duration // Options.Skew: how far back validAfter is dated
	now       func() time.Time
	logger    *slog.Logger

	mu    sync.RWMutex
	books *pay.Books
	svc   *pay.Service
}

// New returns a fetch service. Pass it in pay.Options.Extensions (see
// [Service.Attach]) before fetching.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Log == nil {
		return nil, errors.New("x402 fetch: Options.Store and Log are required")
	}
	if o.Policy.MaxTimeout == 0 {
		o.Policy.MaxTimeout = DefaultMaxTimeout
	}
	if err := o.Policy.Check(); err != nil {
		return nil, err
	}
	s := &Service{st: o.Store, log: o.Log, wallet: o.Wallet, policy: o.Policy, urls: o.URLs, chain: o.Chain,
		finality: o.Finality, clockSkew: o.ClockSkew, skew: o.Skew, now: o.Now, logger: o.Logger}
	if s.finality <= 0 {
		s.finality = DefaultFinality
	}
	if s.skew <= 0 {
		s.skew = DefaultSkew
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.payer = &x402.Payer{Transport: o.URLs.Transport(o.Transport), Timeout: o.Timeout, MaxBody: o.MaxBody}
	return s, nil
}

// Attach joins the money path as a [pay.Extension]: the rail "x402"
// (settling a fetch signs and sends its payment) and the route's kind for
// the operator's held list.
func (s *Service) Attach(svc *pay.Service, b *pay.Books) (pay.Attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.books != nil {
		return pay.Attachment{}, errors.New("x402 fetch: attached to a money path already")
	}
	s.books, s.svc = b, svc
	return pay.Attachment{Rails: []settle.Rail{&rail{s: s}}, Effects: map[pay.Route]pay.Effect{Route: {Kind: "x402"}}}, nil
}

func (s *Service) money() (*pay.Books, *pay.Service, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.books == nil {
		return nil, nil, errors.New("x402 fetch: the service has no money path (pass it in pay.Options.Extensions)")
	}
	return s.books, s.svc, nil
}

// Address is the wallet's address, the payer of every authorization; the
// zero address when there is no wallet.
func (s *Service) Address() evm.Address {
	if s.wallet == nil {
		return evm.Address{}
	}
	return s.wallet.Address()
}

// Fetched is the answer of a fetch: the resource's answer and, when it
// was paid for, the payment and its Receipt.
type Fetched struct {
	IntentID string `json:"intentId,omitempty" doc:"The payment intent (GET /intents/{id}); absent when nothing was paid."`
	Paid     bool   `json:"paid" doc:"Whether this fetch paid: false when the resource answered without asking for payment."`
	// Delivered is false for a payment the chain proved after its answer
	// was lost: paid, the resource not delivered.
	Delivered bool                `json:"delivered" doc:"Whether the resource's answer is here. False only for a payment resolved on chain after its answer was lost."`
	Status    int                 `json:"status,omitempty" doc:"The resource's HTTP status."`
	Headers   map[string][]string `json:"headers,omitempty" doc:"The resource's answer headers."`
	Body      string              `json:"body,omitempty" doc:"The resource's answer body, standard base64."`
	Truncated bool                `json:"truncated,omitempty" doc:"The body was longer than the deployment keeps (1 MiB by default) and is cut."`
	Payment   *Payment            `json:"payment,omitempty" doc:"The x402 payment: what was authorized and the resource's PAYMENT-RESPONSE."`
	Receipt   *pay.Receipt        `json:"receipt,omitempty" doc:"The settlement Receipt, bound to the signed record; its reference is the transaction."`
}

// Payment is an x402 payment as made.
type Payment struct {
	Network     string    `json:"network" doc:"CAIP-2 network."`
	Asset       string    `json:"asset" doc:"The token contract."`
	Amount      string    `json:"amount" doc:"In the token's base units."`
	PayTo       string    `json:"payTo" doc:"CAIP-10 recipient."`
	Payer       string    `json:"payer" doc:"The deployment's wallet address."`
	Nonce       string    `json:"nonce" doc:"The EIP-3009 nonce, derived from the intent id."`
	ValidBefore time.Time `json:"validBefore" doc:"The authorization is void from this instant."`
	Transaction string    `json:"transaction,omitempty" doc:"The settlement transaction, from PAYMENT-RESPONSE; empty when only the chain reader proved the payment."`
}

// Result is what a fetch came to: Fetched (relayed or paid), or the money
// path's held, denied or failed outcome.
type Result struct {
	*pay.Result
	Fetched *Fetched
}

// NoOfferError is x402.no_offer: the resource asked for payment and no
// offer can be honoured. Nothing was signed.
type NoOfferError struct {
	Refusals []x402.Refusal
	err      error
}

func (e *NoOfferError) Error() string { return "x402 fetch: " + e.err.Error() }

// Code returns x402.no_offer.
func (e *NoOfferError) Code() string { return CodeNoOffer }

// ProblemExtensions lists the refusals.
func (e *NoOfferError) ProblemExtensions() map[string]any {
	return map[string]any{"refusals": e.Refusals}
}

// InvalidOfferError is x402.invalid_payment_required: a 402 whose offer
// cannot be read (no or a malformed PAYMENT-REQUIRED, or x402 version 1).
type InvalidOfferError struct{ err error }

func (e *InvalidOfferError) Error() string { return "x402 fetch: the 402's offer: " + e.err.Error() }

// Code returns x402.invalid_payment_required.
func (e *InvalidOfferError) Code() string { return CodeInvalidOffer }

func (e *InvalidOfferError) Unwrap() error { return e.err }

// InvalidURLError is x402.invalid_url: the deployment's outbound policy
// refuses the URL.
type InvalidURLError struct{ err error }

func (e *InvalidURLError) Error() string { return "x402 fetch: url: " + e.err.Error() }

// Code returns x402.invalid_url.
func (e *InvalidURLError) Code() string { return CodeInvalidURL }

func (e *InvalidURLError) Unwrap() error { return e.err }

// Fetch runs a fetch; see the package documentation. headerKey is the
// Idempotency-Key header, which must equal the request's when given.
func (s *Service) Fetch(ctx context.Context, c pay.Caller, r Request, headerKey, requestID string) (*Result, error) {
	books, _, err := s.money()
	if err != nil {
		return nil, err
	}
	if headerKey != "" && headerKey != r.IdempotencyKey {
		return nil, pay.ErrKeyMismatch
	}
	u, header, body, err := r.check()
	if err != nil {
		return nil, err
	}
	signed, err := SigningBytes(&r)
	if err != nil {
		return nil, err
	}
	dig := digest(signed, &r)
	// The agent's signature first: nothing is sent for a request nobody
	// signed. Refusals are recorded as Authorize records them.
	m, err := books.CheckSigned(ctx, Route, c, r.Envelope, Type, signed, r.IdempotencyKey, requestID)
	if err != nil {
		return nil, err
	}
	// A request made again answers from what the first one came to: its
	// resource is not asked again. One whose payment is still settling
	// resumes it: asking the resource again could relay an unpaid answer
	// while the first payment's outcome is unknown.
	prior, pending, err := books.Prior(ctx, Route, c, r.IdempotencyKey, dig)
	switch {
	case err != nil:
		return nil, err
	case prior != nil:
		return s.answer(ctx, prior)
	case pending != "":
		return s.resume(ctx, books, c, &r, signed, dig, pending, headerKey, requestID)
	}
	if _, err := s.urls.CheckURL(r.URL); err != nil {
		return nil, &InvalidURLError{err}
	}
	resp, err := s.payer.Fetch(ctx, r.Method, r.URL, header, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrResourceUnavailable, err)
	}
	if resp.Status != http.StatusPaymentRequired {
		return &Result{Fetched: relayed(resp)}, nil
	}
	if s.wallet == nil || len(s.policy.Assets) == 0 {
		return nil, ErrNotConfigured
	}
	pr, err := x402.PaymentRequiredFrom(resp.Header, resp.Body)
	if err != nil {
		return nil, &InvalidOfferError{err}
	}
	choice, err := s.choose(pr, u, r.MaxAmount, m.Claims.Payees)
	if err != nil {
		var noe *NoOfferError
		if errors.As(err, &noe) {
			if rerr := s.recordNoOffer(ctx, c, &r, noe, requestID); rerr != nil {
				return nil, rerr
			}
		}
		return nil, err
	}
	in := &pay.Instruction{
		IdempotencyKey: r.IdempotencyKey, Payee: choice.PayTo,
		Amount:  pay.Amount{Minor: choice.Minor, Currency: choice.Currency},
		Purpose: r.Purpose, Terms: r.Terms, Envelope: r.Envelope,
	}
	rec := &record{Method: r.Method, URL: r.URL, Header: header, Body: body, MaxMinor: r.MaxAmount.Minor,
		Currency: r.MaxAmount.Currency, Resource: pr.Resource, Extensions: pr.Extensions,
		Requirements: choice.Requirements, Minor: choice.Minor, PayTo: choice.PayTo}
	res, err := books.Authorize(ctx, Route, c, in, pay.Signed{Type: Type, Bytes: signed, Digest: dig,
		Metadata: metadata(rec, choice), OnDecided: rec.keep(s.now)}, headerKey, requestID)
	if err != nil {
		return nil, err
	}
	return s.answer(ctx, res)
}

// resume sends a fetch whose intent exists and has no outcome yet back
// through the money path, as the intent has it: the money path finds the
// idempotency record and resumes (or answers that it is in flight), and
// nothing is asked of the resource here.
func (s *Service) resume(ctx context.Context, books *pay.Books, c pay.Caller, r *Request, signed []byte, dig, intentID, headerKey, requestID string) (*Result, error) {
	var in *pay.Intent
	err := s.st.View(ctx, func(rd store.Reader) error {
		var err error
		in, err = books.Intent(rd, intentID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("x402 fetch: intent %s: %w", intentID, err)
	}
	res, err := books.Authorize(ctx, Route, c, &pay.Instruction{IdempotencyKey: r.IdempotencyKey, Payee: in.Payee,
		Amount: in.Amount, Purpose: r.Purpose, Terms: r.Terms, Envelope: r.Envelope},
		pay.Signed{Type: Type, Bytes: signed, Digest: dig}, headerKey, requestID)
	if err != nil {
		return nil, err
	}
	return s.answer(ctx, res)
}

// answer turns the money path's result into a fetch's: a settled payment
// answers the resource as the rail kept it.
func (s *Service) answer(ctx context.Context, res *pay.Result) (*Result, error) {
	if res.Outcome == pay.OutcomeHeld && res.Replayed {
		// /pay answers a replay of a held request with the hold, whatever
		// came of it; a fetch asked again after its approval answers the
		// resource it paid for (or the decline), which is what the agent
		// is waiting for.
		var in *pay.Intent
		err := s.st.View(ctx, func(r store.Reader) error {
			var err error
			in, err = s.books.Intent(r, res.IntentID)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("x402 fetch: intent %s: %w", res.IntentID, err)
		}
		switch {
		case in.Receipt != nil:
			res = &pay.Result{Outcome: pay.OutcomeSettled, IntentID: in.ID, RequestID: res.RequestID, Receipt: in.Receipt, Replayed: true}
		case in.Failure != nil:
			res = &pay.Result{Outcome: pay.OutcomeFailed, IntentID: in.ID, RequestID: res.RequestID, Failure: in.Failure, Replayed: true}
		}
	}
	out := &Result{Result: res}
	if res.Outcome != pay.OutcomeSettled || res.Receipt == nil {
		return out, nil
	}
	rec, err := s.load(ctx, res.IntentID)
	if err != nil {
		return nil, err
	}
	f := rec.fetched()
	f.Receipt = res.Receipt
	out.Fetched = f
	return out, nil
}

// choose picks the offer to pay with the deployment's policy, the URL
// asked for, the signed maximum and the mandate's payees.
func (s *Service) choose(pr x402.PaymentRequired, u *url.URL, max pay.Amount, payees []string) (x402.Choice, error) {
	p := s.policy
	p.PayTo = func(caip10 string) error {
		for _, pat := range payees {
			if gate.MatchPayee(pat, caip10) {
				return nil
			}
		}
		return errors.New("not a payee of the mandate")
	}
	c, _, err := p.Choose(pr, x402.Ask{URL: u, MaxMinor: max.Minor, Currency: max.Currency})
	var noe *x402.NoOfferError
	if errors.As(err, &noe) {
		return x402.Choice{}, &NoOfferError{Refusals: noe.Refusals, err: err}
	}
	return c, err
}

// recordNoOffer appends an x402.no_offer entry: the agent asked, the
// resource priced, nothing could be paid.
func (s *Service) recordNoOffer(ctx context.Context, c pay.Caller, r *Request, e *NoOfferError, requestID string) error {
	data, err := json.Marshal(map[string]any{"method": r.Method, "url": r.URL, "idempotencyKey": r.IdempotencyKey,
		"maxAmount": r.MaxAmount, "refusals": e.Refusals})
	if err != nil {
		return err
	}
	return s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		_, err := s.log.Append(txn, audit.Record{Type: EntryNoOffer, Actor: audit.Actor{Kind: "agent", ID: c.KeyID},
			RequestID: requestID, Data: data})
		return err
	})
}

// metadata is what the intent keeps of the offer (the decision entry
// records it): the record holds the rest. Values stay under settle's
// 500-byte limit.
func metadata(rec *record, c x402.Choice) map[string]string {
	req, _ := json.Marshal(c.Requirements)
	sum := sha256.Sum256(req)
	m := map[string]string{
		"method": rec.Method, "network": c.Requirements.Network, "asset": c.Requirements.Asset,
		"amount": c.Requirements.Amount, "payTo": c.PayTo,
		"maxTimeoutSeconds": fmt.Sprint(c.Requirements.MaxTimeoutSeconds),
		"offerDigest":       hex.EncodeToString(sum[:]),
	}
	if len(rec.URL) <= 500 {
		m["url"] = rec.URL
	} else {
		u := sha256.Sum256([]byte(rec.URL))
		m["urlDigest"] = hex.EncodeToString(u[:])
	}
	return m
}

func relayed(r *x402.Response) *Fetched {
	return &Fetched{Delivered: true, Status: r.Status, Headers: r.Header, Body: base64.StdEncoding.EncodeToString(r.Body),
		Truncated: r.Truncated}
}
