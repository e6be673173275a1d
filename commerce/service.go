// Package commerce lets an agent buy from merchants that speak the Agentic
// Commerce Protocol (ACP) or the Universal Commerce Protocol (UCP), under
// exactly the gate, record and settlement of /pay.
//
// # Quote and buy
//
// [Service.Quote] opens a checkout session at a registered merchant and
// returns the priced [cart.Cart]; it moves no money and is recorded as a
// commerce.quote entry with the cart's digest. [Service.Buy] re-reads (or
// opens) the session and, only when the merchant says it is ready to pay,
// authorises the cart's total through [pay.Books.Authorize]: the
// agent signed the purchase (which names no amount), the server builds the
// instruction with payee "merchant:<id>" and the priced total, and the gate,
// the idempotency (in the buy namespace), the record and two-phase
// settlement are those of /pay.
//
// # Completion is settlement
//
// The merchants are settlement rails: the rail named "acp" or "ucp"
// ([Service.Rails]) completes the checkout session with the payment
// credential the protocol produces (ACP: a delegated payment token; UCP: the
// payment handler's instrument), keyed by the intent id. So a purchase held
// for a person completes when the operator approves it — after re-reading
// the cart: a cart no longer ready, or whose total changed, is declined and
// no money moves — and a completion whose outcome is unknown (a timeout, a
// 5xx) leaves the intent settling until the merchant's own state says what
// happened ([pay.Service.Reconcile] asks the rail's Lookup, which re-reads
// the session and never completes twice).
package commerce

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/sealbox"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Problem codes of commerce.
const (
	CodeMerchantNotFound    = "commerce.merchant_not_found"
	CodeMerchantUnavailable = "commerce.merchant_unavailable"
	CodeMerchantRejected    = "commerce.merchant_rejected"
	CodeMerchantInvalid     = "commerce.merchant_invalid_response"
	CodeCartNotFound        = "commerce.cart_not_found"
	CodeRailMismatch        = "commerce.rail_mismatch"
)

// Errors of the service. Check with errors.Is.
var (
	// ErrMerchantNotFound: no registered merchant has that id (404).
	ErrMerchantNotFound = errcode.New(CodeMerchantNotFound, "commerce: no registered merchant with that id")
	// ErrRailMismatch: the request's rail (or terms.rail) is not the
	// merchant's protocol (400).
	ErrRailMismatch = errcode.New(CodeRailMismatch, "commerce: rail is not the merchant's protocol")
	// ErrMerchantUnavailable: the merchant could not be reached; nothing
	// was bought (503, retry).
	ErrMerchantUnavailable = errcode.New(CodeMerchantUnavailable, "commerce: merchant unavailable")
	// ErrMerchantRejected: the merchant refused the request (422).
	ErrMerchantRejected = errcode.New(CodeMerchantRejected, "commerce: the merchant refused the request")
	// ErrMerchantInvalid: the merchant answered outside its protocol; the
	// answer was not used (502).
	ErrMerchantInvalid = errcode.New(CodeMerchantInvalid, "commerce: the merchant's answer does not satisfy its protocol")
	// ErrCartNotFound: the merchant has no such checkout session (404).
	ErrCartNotFound = errcode.New(CodeCartNotFound, "commerce: no such checkout session at the merchant")
)

// NotReadyError is a cart the merchant does not let us pay: no money
// moved. It is the problem intent.malformed with the cart's status, the
// merchant's continue link and messages, and action continue-at-link.
type NotReadyError struct {
	Cart cart.Cart
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("commerce: cart %s is not ready for payment (merchant status %s)", e.Cart.ID, e.Cart.RawStatus)
}

// Code is intent.malformed, as the interface document requires.
func (e *NotReadyError) Code() string { return pay.CodeMalformed }

// ProblemAction sends the agent (or its person) to the merchant's link.
func (e *NotReadyError) ProblemAction() string {
	if e.Cart.ContinueURL != "" {
		return "continue-at-link"
	}
	return "fix-request"
}

// ProblemExtensions carries the status the cart stopped in and the link.
func (e *NotReadyError) ProblemExtensions() map[string]any {
	msgs := e.Cart.Messages
	if msgs == nil {
		msgs = []cart.Message{}
	}
	return map[string]any{"cartId": e.Cart.ID, "cartStatus": e.Cart.Status, "merchantStatus": e.Cart.RawStatus,
		"continueUrl": e.Cart.ContinueURL, "messages": msgs}
}

// signatureRefusedError is a merchant answer refused because its
// signature does not satisfy the policy (UCP response signatures): the
// problem commerce.merchant_invalid_response, with the check that failed
// in its signatureRefused member (a 502 carries no detail).
type signatureRefusedError struct {
	err    error
	reason string
}

func (e *signatureRefusedError) Error() string { return e.err.Error() }
func (e *signatureRefusedError) Unwrap() error { return e.err }

// ProblemExtensions names the failed check.
func (e *signatureRefusedError) ProblemExtensions() map[string]any {
	return map[string]any{"signatureRefused": e.reason}
}

// MerchantConfig registers one merchant.
type MerchantConfig struct {
	// ID is the registry id agents name in requests.
	ID string
	// Merchant is the protocol client (commerce/acp, commerce/ucp, or a
	// test's fake).
	Merchant cart.Merchant
}

// Entry types written by the service.
const (
	EntryQuote     = "commerce.quote"
	EntryCartRead  = "commerce.cart_read"
	EntryCompleted = "commerce.completed"
)

// Store layout: commerce owns the commerce/ prefix.
const (
	keyOrder = "commerce/order/" // + intent id → Order
)

// Options configure [New]. Store, Log and Pay are required; Pay must be
// built with [Service.Rails] registered (see the package example), which
// is why New takes it as a func.
type Options struct {
	Store store.Store
	Log   *audit.Log
	// Merchants are the merchants of the configuration.
	Merchants []MerchantConfig
	// Connect builds the client of a merchant an operator registers (and,
	// on first use, of each one registered before a restart). Nil: merchants
	// are registered in configuration only.
	Connect func(ctx context.Context, spec MerchantSpec) (cart.Merchant, error)
	// SealKey (32 bytes) seals registered merchants' credentials at rest.
	// Nil stores them in the clear (sandbox only).
	SealKey []byte
	// URLs is the guard every merchant URL passes at registration
	// (baseUrl, pspUrl, profileUrl, and the endpoint a UCP profile
	// declares): https to a public address. The zero Policy is
	// production's; sandbox mode sets AllowLoopback and AllowHTTP. Connect
	// must build its clients over the same policy (Policy.Client), so
	// that every connection is checked again.
	URLs netguard.Policy
	// Rand is the source of seal nonces. Default crypto/rand.
	Rand io.Reader
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the service's own faults. Default slog.Default().
	Logger *slog.Logger
}

// Service quotes and buys. It is safe for concurrent use.
type Service struct {
	st     store.Store
	log    *audit.Log
	now    func() time.Time
	logger *slog.Logger

	connect func(context.Context, MerchantSpec) (cart.Merchant, error)
	seal    *sealbox.Box
	urls    netguard.Policy
	rand    io.Reader
	reg     registry

	mu        sync.RWMutex // guards merchants and pay
	merchants map[string]cart.Merchant
	pay       *pay.Books // the money path, from Attach
}

// New returns a service over the configured merchants and those operators
// registered (read from the store, connected on first use). Pass it in
// pay.Options.Extensions (see [Service.Attach]) before buying.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Log == nil {
		return nil, errors.New("commerce: Options.Store and Log are required")
	}
	s := &Service{st: opts.Store, log: opts.Log, now: opts.Now, logger: opts.Logger, merchants: map[string]cart.Merchant{},
		connect: opts.Connect, urls: opts.URLs, rand: opts.Rand, reg: registry{views: map[string]MerchantView{}}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	var err error
	if s.seal, err = newSealBox(opts.SealKey); err != nil {
		return nil, fmt.Errorf("commerce: SealKey: %w", err)
	}
	for _, m := range opts.Merchants {
		if err := s.Register(m); err != nil {
			return nil, err
		}
	}
	// Reading the registrations is local (the store); connecting to each
	// merchant waits for its first use.
	if err := s.loadRegistered(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

// Attach joins the money path as a [pay.Extension]: the commerce rails
// ("acp", "ucp": settling a purchase completes its checkout) need this
// service, and purchases pay through the money path, so the cycle is
// broken here: pass the service in pay.Options.Extensions, and pay.New
// registers the rails and hands over the money path, once.
func (s *Service) Attach(_ *pay.Service, b *pay.Books) (pay.Attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pay != nil {
		return pay.Attachment{}, errors.New("commerce: attached to a money path already")
	}
	s.pay = b
	return pay.Attachment{Rails: s.rails(), Effects: map[pay.Route]pay.Effect{pay.RouteBuy: s.heldCartEffect()}}, nil
}

// Register adds a merchant of the configuration to the registry.
func (s *Service) Register(m MerchantConfig) error {
	if !validID(m.ID) || m.Merchant == nil {
		return fmt.Errorf("commerce: merchant %q: an id of 1 to 64 lowercase letters, digits, '-', '_' or '.' and a client are required", m.ID)
	}
	v := MerchantView{ID: m.ID, Protocol: m.Merchant.Protocol(), Source: "configuration"}
	if p, ok := m.Merchant.(interface{ PinnedKeys() []ucp.SigningKey }); ok {
		v.SigningKeys = pinnedKeys(p.PinnedKeys())
	}
	if r, ok := m.Merchant.(interface{ ReadyWithoutErrors() bool }); ok {
		v.ReadyWithoutErrors = r.ReadyWithoutErrors()
	}
	return s.add(m.ID, m.Merchant, v)
}

func (s *Service) add(id string, m cart.Merchant, v MerchantView) error {
	if p := m.Protocol(); p != "acp" && p != "ucp" {
		return fmt.Errorf("commerce: merchant %s: protocol %q is not acp or ucp", id, p)
	}
	s.mu.Lock()
	if _, dup := s.merchants[id]; dup {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s is registered twice", ErrMerchantExists, id)
	}
	s.merchants[id] = m
	s.mu.Unlock()
	s.reg.mu.Lock()
	s.reg.views[id] = v
	s.reg.mu.Unlock()
	return nil
}

func validID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Merchant returns a registered merchant.
//
// A merchant this service does not know yet is looked for among the
// stored registrations: on a store several servers share, an operator may
// have registered it through another.
func (s *Service) Merchant(id string) (cart.Merchant, error) {
	if m, ok := s.known(id); ok {
		return m, nil
	}
	if validID(id) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.loadRegistered(ctx)
		cancel()
		if err != nil {
			return nil, err
		}
		if m, ok := s.known(id); ok {
			return m, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrMerchantNotFound, id)
}

func (s *Service) known(id string) (cart.Merchant, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, ok := s.merchants[id]
	return m, ok
}

func (s *Service) merchantFor(rail, id string) (cart.Merchant, error) {
	m, err := s.Merchant(id)
	if err != nil {
		return nil, err
	}
	if m.Protocol() != rail {
		return nil, fmt.Errorf("%w: merchant %s speaks %s, not %s", ErrRailMismatch, id, m.Protocol(), rail)
	}
	return m, nil
}

// Payee is the payee reference of a merchant in instructions, mandates and
// receipts: "merchant:<id>".
func Payee(merchantID string) string { return "merchant:" + merchantID }

// mapErr turns a merchant error into the service's.
func mapErr(op string, err error) error {
	switch {
	case errors.Is(err, cart.ErrNotFound):
		return fmt.Errorf("%w (%s: %v)", ErrCartNotFound, op, err)
	case errors.Is(err, cart.ErrInvalidResponse):
		var se *ucp.SignatureError
		if errors.As(err, &se) {
			return &signatureRefusedError{err: fmt.Errorf("%w (%s: %v)", ErrMerchantInvalid, op, err), reason: se.Reason}
		}
		return fmt.Errorf("%w (%s: %v)", ErrMerchantInvalid, op, err)
	case errors.Is(err, cart.ErrRejected), errors.Is(err, cart.ErrDeclined), errors.Is(err, cart.ErrNotReady):
		return fmt.Errorf("%w (%s: %v)", ErrMerchantRejected, op, err)
	default:
		return fmt.Errorf("%w (%s: %v)", ErrMerchantUnavailable, op, err)
	}
}

func createRequest(q *QuoteRequest, idem string) cart.CreateRequest {
	return cart.CreateRequest{Currency: q.Currency, Lines: q.Lines, Email: q.Email, Address: q.Address,
		Fulfillment: q.Fulfillment, Discounts: q.Discounts, IdempotencyKey: idem}
}

// quoteData is the data of commerce.quote and commerce.cart_read entries.
type quoteData struct {
	Merchant   string      `json:"merchant"`
	Rail       string      `json:"rail"`
	Version    string      `json:"version"`
	CartID     string      `json:"cartId"`
	Status     cart.Status `json:"status"`
	RawStatus  string      `json:"merchantStatus"`
	Currency   string      `json:"currency"`
	TotalMinor int64       `json:"totalMinor"`
	CartDigest string      `json:"cartDigest"`
	Purpose    string      `json:"purpose,omitempty"`
}

// recordCart appends a read of a cart to the record.
func (s *Service) recordCart(ctx context.Context, typ string, c *cart.Cart, actor audit.Actor, requestID string) (uint64, error) {
	b, err := json.Marshal(quoteData{Merchant: c.Merchant, Rail: c.Rail, Version: c.Version, CartID: c.ID,
		Status: c.Status, RawStatus: c.RawStatus, Currency: c.Currency, TotalMinor: c.Totals.Total, CartDigest: cartDigest(c)})
	if err != nil {
		return 0, err
	}
	var seq uint64
	err = s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		e, err := s.log.Append(txn, audit.Record{Type: typ, Actor: actor, RequestID: requestID, Data: b})
		seq = e.Seq
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("commerce: record %s: %w", typ, err)
	}
	return seq, nil
}

// Quoted is the answer of /quote: the priced cart and the record entry
// that holds its digest.
type Quoted struct {
	cart.Cart
	AuditSeq uint64 `json:"auditSeq" doc:"The commerce.quote entry."`
}

// Quote opens a checkout session at the merchant and returns it priced. It
// commits nothing and moves no money.
func (s *Service) Quote(ctx context.Context, c pay.Caller, q QuoteRequest, requestID string) (Quoted, error) {
	m, err := s.merchantFor(q.Rail, q.Merchant)
	if err != nil {
		return Quoted{}, err
	}
	ct, err := m.Create(ctx, createRequest(&q, ""))
	if err != nil {
		return Quoted{}, mapErr("create checkout session", err)
	}
	ct.Merchant = q.Merchant
	seq, err := s.recordCart(ctx, EntryQuote, &ct, agentActor(c), requestID)
	if err != nil {
		return Quoted{}, err
	}
	return Quoted{Cart: ct, AuditSeq: seq}, nil
}

func agentActor(c pay.Caller) audit.Actor { return audit.Actor{Kind: "agent", ID: c.KeyID} }

// Order is the answer of a settled purchase.
type Order struct {
	ID       string      `json:"id" doc:"The merchant's order id."`
	CartID   string      `json:"cartId"`
	IntentID string      `json:"intentId" doc:"The payment intent this purchase is (GET /intents/{id})."`
	Rail     string      `json:"rail"`
	Merchant string      `json:"merchant"`
	Status   string      `json:"status"`
	PlacedAt time.Time   `json:"placedAt"`
	Lines    []cart.Line `json:"lines"`
	Total    pay.Amount  `json:"total"`
	Receipt  pay.Receipt `json:"receipt" doc:"The settlement Receipt, bound to the signed record."`
}

// BuyResult is what a purchase came to: an Order (settled), or the money
// path's held, denied or failed outcome.
type BuyResult struct {
	*pay.Result
	Order *Order
}

// Buy runs a purchase: it re-reads (or opens) the checkout session and,
// only when the merchant says it is ready, authorises the cart's total
// through the money path. See the package documentation.
func (s *Service) Buy(ctx context.Context, c pay.Caller, p PurchaseRequest, headerKey, requestID string) (*BuyResult, error) {
	s.mu.RLock()
	money := s.pay
	s.mu.RUnlock()
	if money == nil {
		return nil, errors.New("commerce: the service has no money path (pass it in pay.Options.Extensions)")
	}
	if p.Terms.Rail != p.Rail {
		return nil, fmt.Errorf("%w: terms.rail %q is not rail %q", ErrRailMismatch, p.Terms.Rail, p.Rail)
	}
	m, err := s.merchantFor(p.Rail, p.Merchant)
	if err != nil {
		return nil, err
	}
	signed, err := SigningBytes(&p)
	if err != nil {
		return nil, err
	}
	dig := digest(signed, &p)
	var ct cart.Cart
	if p.CartID != "" {
		ct, err = m.Get(ctx, p.CartID)
		if err != nil {
			return nil, mapErr("read checkout session", err)
		}
	} else {
		// The merchant deduplicates creation under a key derived from the
		// purchase's, so a retried /buy opens one session.
		ct, err = m.Create(ctx, createRequest(&p.QuoteRequest, "buy-"+dig[:32]))
		if err != nil {
			return nil, mapErr("create checkout session", err)
		}
	}
	ct.Merchant = p.Merchant
	// A completed cart goes on to the money path too: a replay of the
	// purchase that completed it answers from the idempotency record, and
	// any other purchase of it is declined by the rail (the session is
	// closed). Every other status that is not ready stops here.
	payable := ct.Ready() || ct.Status == cart.StatusCompleted
	if !payable || ct.Currency != p.Currency {
		// The read is recorded on its own: this request ends here.
		if _, err := s.recordCart(ctx, EntryCartRead, &ct, agentActor(c), requestID); err != nil {
			return nil, err
		}
		if !payable {
			return nil, &NotReadyError{Cart: ct}
		}
		return nil, fmt.Errorf("%w: the merchant priced the cart in %s, not %s", ErrMerchantRejected, ct.Currency, p.Currency)
	}
	in := &pay.Instruction{
		IdempotencyKey: p.IdempotencyKey, Payee: Payee(p.Merchant),
		Amount:  pay.Amount{Minor: ct.Totals.Total, Currency: ct.Currency},
		Purpose: p.Purpose, Terms: p.Terms, Envelope: p.Envelope,
	}
	// The cart as read goes into the record with the gate's decision (its
	// metadata), in the decision's own transaction.
	meta := map[string]string{"merchant": p.Merchant, "cart": ct.ID, "rail": p.Rail, "version": m.Version(),
		"merchantStatus": ct.RawStatus, "cartDigest": cartDigest(&ct)}
	res, err := money.Authorize(ctx, pay.RouteBuy, c, in,
		pay.Signed{Type: PurchaseType, Bytes: signed, Digest: dig, Metadata: meta, OnHeld: keepHeldCart(&ct)}, headerKey, requestID)
	if err != nil {
		return nil, err
	}
	out := &BuyResult{Result: res}
	if res.Outcome == pay.OutcomeSettled && res.Receipt != nil {
		o, err := s.OrderOf(ctx, res.IntentID)
		if err != nil {
			return nil, err
		}
		o.Receipt = *res.Receipt
		out.Order = o
	}
	return out, nil
}

// OrderOf returns the order a settled purchase placed.
func (s *Service) OrderOf(ctx context.Context, intentID string) (*Order, error) {
	var o Order
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyOrder + intentID))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &o)
	})
	if err != nil {
		return nil, fmt.Errorf("commerce: order of %s: %w", intentID, err)
	}
	return &o, nil
}

// merchantOfPayee returns the merchant id of a payee "merchant:<id>".
func merchantOfPayee(payee string) (string, bool) {
	return strings.CutPrefix(payee, "merchant:")
}
