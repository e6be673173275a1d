package ucp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/countersign/countersign/commerce/cart"
)

// Options configure [New]. Only ProfileURL and HTTPClient are required.
type Options struct {
	// ProfileURL is the merchant's discovery profile, its /.well-known/ucp.
	ProfileURL string
	// MerchantID is our registry id of the merchant, copied to Cart.Merchant.
	MerchantID string
	// HTTPClient makes every request (profile, checkout, tokenization).
	// Required: the server passes its SSRF-guarded client.
	HTTPClient *http.Client
	// MaxBody caps every response body read. Default 1 MiB.
	MaxBody int64
	// Timeout bounds each HTTP request. Default 30 s.
	Timeout time.Duration
	// Versions are the protocol versions we may speak. Default both
	// ([Versions]).
	Versions []string
	// Now is the clock (expiry of canceled sessions). Default time.Now.
	Now func() time.Time
	// AgentProfile is our platform profile URI, sent as
	// UCP-Agent: profile="…" on every request (both bindings make the
	// header mandatory). Default "https://countersign.invalid/.well-known/ucp".
	AgentProfile string
	// Sign, when set, signs each request before it is sent, given the
	// exact body: 2026-04-08 uses RFC 9421 Signature/Signature-Input/
	// Content-Digest, 2026-01-11 a Request-Signature header. Default: no
	// signature (see the package doc).
	Sign func(req *http.Request, body []byte) error
	// SigningKeys pins the merchant's response-signing keys (public JWKs,
	// EC P-256 or P-384): every checkout answer must then carry a
	// signature by one of them that verifies, and the keys of the
	// merchant's profile are not trusted. Without pinned keys a signed
	// answer is verified against the profile's signing_keys and an
	// unsigned one is accepted. Only 2026-04-08 defines response
	// signatures: New refuses pinned keys for a merchant it negotiates
	// 2026-01-11 with (ErrSignaturesUnsupported). See the package doc.
	SigningKeys []SigningKey
	// PaymentCredentials are credentials the platform holds for payment
	// handlers that take one directly at completion (a handler without a
	// tokenization endpoint, such as a wallet's or a PSP's token handler):
	// the credential is handed over in the completion's instrument, as
	// is. See the package doc.
	PaymentCredentials []PaymentCredential
	// ReadyWithoutErrors treats a session the merchant reports incomplete
	// that carries no message of type error as ready for completion: its
	// cart is cart.StatusReady (Cart.RawStatus stays "incomplete") and
	// Complete completes it as it completes one that is
	// ready_for_complete, at exactly the payment's amount and currency.
	// It exists for merchants that never report ready_for_complete and
	// accept the completion anyway, such as the protocol's public sample
	// merchant: UCP's incomplete means "missing required information,
	// resolve via update", so the strict default refuses to pay such a
	// session. An operator chooses it, per merchant. An incomplete session
	// carrying an error message, and every other status, stays as the
	// default maps it. Default false.
	ReadyWithoutErrors bool
	// Logger receives debug records of refused answers. Default slog.Default().
	Logger *slog.Logger
}

// PaymentCredential is a token credential the platform holds for one of
// a merchant's payment handlers (UCP token_credential: type "token").
type PaymentCredential struct {
	// Handler is the handler's instance id, or its reverse-domain name,
	// as the merchant declares it.
	Handler string `json:"handler" validate:"required,max=200" doc:"The payment handler this credential is for: its id (or reverse-domain name) in the merchant's profile."`
	// Token is handed over at complete. A secret.
	Token string `json:"token" validate:"required,max=4096" doc:"The token credential handed over at complete (UCP token_credential); a secret, sealed at rest and never shown again."`
	// Brand and LastDigits describe the instrument (a 2026-01-11 card
	// instrument requires both). Default: "token" and the token's last
	// four characters.
	Brand      string `json:"brand,omitempty" validate:"omitempty,max=64" doc:"The instrument's brand, shown to the merchant (default token)."`
	LastDigits string `json:"lastDigits,omitempty" validate:"omitempty,max=8" doc:"The instrument's last digits, shown to the merchant (default: the token's last four characters)."`
}

// CheckPaymentCredentials checks credentials: each names a handler and
// carries a token, and no handler has two.
func CheckPaymentCredentials(creds []PaymentCredential) error {
	seen := map[string]bool{}
	for i, pc := range creds {
		switch {
		case strings.TrimSpace(pc.Handler) == "":
			return fmt.Errorf("[%d].handler is required", i)
		case pc.Token == "":
			return fmt.Errorf("[%d].token is required", i)
		case seen[pc.Handler]:
			return fmt.Errorf("[%d].handler: %q has two credentials", i, pc.Handler)
		}
		seen[pc.Handler] = true
	}
	return nil
}

// DefaultAgentProfile is Options.AgentProfile's default.
const DefaultAgentProfile = "https://countersign.invalid/.well-known/ucp"

// Client is one merchant over UCP. It implements cart.Merchant and is safe
// for concurrent use.
type Client struct {
	opts     Options
	profile  Profile
	version  string
	endpoint string

	refreshMu sync.Mutex // one re-read of the profile's keys at a time
	keysMu    sync.Mutex // guards the three below
	keys      keyRing    // trusted response-signing keys (2026-04-08)
	keysGen   uint64     // counts the rings
	keysRead  time.Time  // when the profile's keys were read
}

// keyRefreshInterval: an unknown keyid makes the client read the profile's
// signing_keys again (a merchant rotating its key publishes the new one
// first), at most this often.
const keyRefreshInterval = time.Minute

var _ cart.Merchant = (*Client)(nil)

// New discovers the merchant's profile, negotiates the protocol version
// and returns a client speaking it. It fails with ErrNoCommonVersion when
// no version is shared, cart.ErrUnavailable when the profile cannot be
// fetched and cart.ErrInvalidResponse when it is not a valid profile or
// lacks the checkout capability or a REST endpoint.
func New(ctx context.Context, opts Options) (*Client, error) {
	o := opts
	o.Versions = slices.Clone(opts.Versions)
	o.SigningKeys = slices.Clone(opts.SigningKeys)
	o.PaymentCredentials = slices.Clone(opts.PaymentCredentials)
	if err := CheckPaymentCredentials(o.PaymentCredentials); err != nil {
		return nil, fmt.Errorf("ucp: new: Options.PaymentCredentials: %w", err)
	}
	if o.HTTPClient == nil {
		return nil, errors.New("ucp: new: Options.HTTPClient is required")
	}
	if o.ProfileURL == "" {
		return nil, errors.New("ucp: new: Options.ProfileURL is required")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = defaultMaxBody
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if len(o.Versions) == 0 {
		o.Versions = Versions()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AgentProfile == "" {
		o.AgentProfile = DefaultAgentProfile
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var pinned keyRing
	if len(o.SigningKeys) > 0 {
		var err error
		if pinned, err = pinnedRing(o.SigningKeys); err != nil {
			return nil, fmt.Errorf("ucp: new: Options.SigningKeys: %w", err)
		}
	}
	c := &Client{opts: o}
	p, err := c.discover(ctx, o.ProfileURL)
	if err != nil {
		return nil, fmt.Errorf("ucp: new: %w", err)
	}
	v, err := Negotiate(p.Offers(), o.Versions)
	if err != nil {
		return nil, fmt.Errorf("ucp: new: %w", err)
	}
	if v != p.Version {
		// The merchant describes older versions in profiles of their own.
		p, err = c.discover(ctx, p.SupportedVersions[v])
		if err != nil {
			return nil, fmt.Errorf("ucp: new: profile of %s: %w", v, err)
		}
		if p.Version != v {
			return nil, fmt.Errorf("ucp: new: %w: the profile listed for %s declares %s", cart.ErrInvalidResponse, v, p.Version)
		}
	}
	if !p.HasCapability(CheckoutCapability) {
		return nil, fmt.Errorf("ucp: new: %w: merchant does not offer %s", cart.ErrInvalidResponse, CheckoutCapability)
	}
	if !isHTTPURL(p.Endpoint) {
		return nil, fmt.Errorf("ucp: new: %w: merchant declares no REST endpoint for %s", cart.ErrInvalidResponse, ShoppingService)
	}
	switch {
	case pinned.pinned && v != V20260408:
		return nil, fmt.Errorf("ucp: new: %w: the merchant speaks UCP %s", ErrSignaturesUnsupported, v)
	case pinned.pinned:
		c.keys = pinned
	default:
		c.keys = profileRing(p.SigningKeys, o.Logger, o.MerchantID)
	}
	c.keysRead = o.Now()
	c.profile, c.version, c.endpoint = p, v, strings.TrimSuffix(p.Endpoint, "/")
	return c, nil
}

// PinnedKeys are the signing keys pinned for this merchant
// (Options.SigningKeys), nil when none are.
func (c *Client) PinnedKeys() []SigningKey { return slices.Clone(c.opts.SigningKeys) }

func (c *Client) discover(ctx context.Context, u string) (Profile, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	return discover(ctx, c.opts.HTTPClient, u, c.opts.MaxBody, func(h http.Header) {
		h.Set("UCP-Agent", c.agentHeader())
	})
}

// Protocol is "ucp".
func (c *Client) Protocol() string { return "ucp" }

// Version is the negotiated protocol version.
func (c *Client) Version() string { return c.version }

// CredentialHandlers names the handlers a credential is held for
// (Options.PaymentCredentials), never the credentials.
func (c *Client) CredentialHandlers() []string {
	var out []string
	for _, pc := range c.opts.PaymentCredentials {
		out = append(out, pc.Handler)
	}
	return out
}

// ReadyWithoutErrors reports Options.ReadyWithoutErrors.
func (c *Client) ReadyWithoutErrors() bool { return c.opts.ReadyWithoutErrors }

// Profile is the merchant's profile for the negotiated version.
func (c *Client) Profile() Profile { return c.profile }

// Create opens a checkout session for req's lines. Only the lines, the
// buyer's e-mail and (2026-04-08, as context.currency; 2026-01-11, as
// currency) the currency are sent: address, fulfilment and discount codes
// belong to extension capabilities this client does not negotiate.
func (c *Client) Create(ctx context.Context, req cart.CreateRequest) (cart.Cart, error) {
	if len(req.Lines) == 0 {
		return cart.Cart{}, errors.New("ucp: create: no lines")
	}
	lines := make([]LineItemRequest, 0, len(req.Lines))
	for _, l := range req.Lines {
		lines = append(lines, LineItemRequest{Item: ItemRequest{ID: l.ID}, Quantity: l.Quantity})
	}
	var buyer *Buyer
	if req.Email != "" {
		e := req.Email
		buyer = &Buyer{Email: &e}
	}
	var body any
	switch c.version {
	case V20260111:
		body = CreateRequest0111{LineItems: lines, Buyer: buyer, Currency: strings.ToUpper(req.Currency)}
	default:
		var rc *RequestContext
		if req.Currency != "" {
			rc = &RequestContext{Currency: strings.ToUpper(req.Currency)}
		}
		body = CheckoutRequest0408{LineItems: lines, Buyer: buyer, Context: rc}
	}
	key := req.IdempotencyKey
	if key != "" {
		key = "create:" + key
	}
	d, err := c.call(ctx, opCreate, http.MethodPost, "/checkout-sessions", body, idempotencyKey(key))
	if err != nil {
		return cart.Cart{}, fmt.Errorf("ucp: create: %w", err)
	}
	return c.cartOf(d)
}

// UpdateRequest replaces a session's lines and buyer e-mail.
type UpdateRequest struct {
	Lines    []cart.LineRequest
	Email    string
	Currency string
	// IdempotencyKey, when set, makes retries of this update one update.
	IdempotencyKey string
}

// Update replaces the session's lines (and e-mail) with req's: PUT
// /checkout-sessions/{id}, a full replacement as both bindings define it.
// It is not part of cart.Merchant.
func (c *Client) Update(ctx context.Context, id string, req UpdateRequest) (cart.Cart, error) {
	lines := make([]LineItemRequest, 0, len(req.Lines))
	for _, l := range req.Lines {
		lines = append(lines, LineItemRequest{Item: ItemRequest{ID: l.ID}, Quantity: l.Quantity})
	}
	var buyer *Buyer
	if req.Email != "" {
		e := req.Email
		buyer = &Buyer{Email: &e}
	}
	var body any
	switch c.version {
	case V20260111:
		body = UpdateRequest0111{ID: id, LineItems: lines, Buyer: buyer, Currency: strings.ToUpper(req.Currency)}
	default:
		var rc *RequestContext
		if req.Currency != "" {
			rc = &RequestContext{Currency: strings.ToUpper(req.Currency)}
		}
		body = CheckoutRequest0408{LineItems: lines, Buyer: buyer, Context: rc}
	}
	key := ""
	if req.IdempotencyKey != "" {
		key = "update:" + id + ":" + req.IdempotencyKey
	}
	d, err := c.call(ctx, opUpdate, http.MethodPut, "/checkout-sessions/"+url.PathEscape(id), body, idempotencyKey(key))
	if err == nil {
		err = sameSession(d, id)
	}
	if err != nil {
		return cart.Cart{}, fmt.Errorf("ucp: update: %w", err)
	}
	return c.cartOf(d)
}

// Get re-reads a checkout session.
func (c *Client) Get(ctx context.Context, id string) (cart.Cart, error) {
	d, err := c.call(ctx, opGet, http.MethodGet, "/checkout-sessions/"+url.PathEscape(id), nil, "")
	if err == nil {
		err = sameSession(d, id)
	}
	if err != nil {
		return cart.Cart{}, fmt.Errorf("ucp: get: %w", err)
	}
	return c.cartOf(d)
}

// Cancel cancels an open session.
func (c *Client) Cancel(ctx context.Context, id string) (cart.Cart, error) {
	d, err := c.call(ctx, opCancel, http.MethodPost, "/checkout-sessions/"+url.PathEscape(id)+"/cancel", nil, idempotencyKey("cancel:"+id))
	if err == nil {
		err = sameSession(d, id)
	}
	if err != nil {
		return cart.Cart{}, fmt.Errorf("ucp: cancel: %w", err)
	}
	return c.cartOf(d)
}

// sameSession refuses an answer about another checkout session than the
// one asked about. A UCP response signature covers the answer, not the
// request, so a signed answer for one session could be replayed as the
// answer for another by whoever can alter the traffic; the session id in
// the body is what binds it.
func sameSession(d decoded, id string) error {
	if d.Error != nil || (d.Checkout != nil && d.Checkout.ID == id) {
		return nil
	}
	got := ""
	if d.Checkout != nil {
		got = d.Checkout.ID
	}
	return fmt.Errorf("%w: the answer is about checkout session %.64q, not %.64q", cart.ErrInvalidResponse, got, id)
}

// cartOf maps a decoded answer of a non-completing operation.
func (c *Client) cartOf(d decoded) (cart.Cart, error) {
	if d.Error != nil {
		return cart.Cart{}, errorResponseErr(d.Error)
	}
	return c.toCart(d.Checkout), nil
}

// toCart maps a validated session with the client's options.
func (c *Client) toCart(co *Checkout) cart.Cart {
	return toCart(co, c.version, c.opts.MerchantID, c.opts.Now(), c.opts.ReadyWithoutErrors)
}

// ErrAmountMismatch: the session's total or currency is not the payment's,
// so the payment cannot complete it; nothing was sent that could change
// state. It matches cart.ErrNotReady too.
var ErrAmountMismatch = fmt.Errorf("ucp: the session's total differs from the payment: %w", cart.ErrNotReady)

// Complete pays session id with p and places the order, at most once per
// p.IdempotencyKey:
//
//  1. it re-reads the session and refuses (ErrNotReady, ErrAmountMismatch)
//     unless it is ready for completion at exactly p.Amount p.Currency
//     (ready_for_complete; with Options.ReadyWithoutErrors, also
//     incomplete without an error message) — or already completing or
//     completed, when the merchant alone can say whether it was by this
//     key;
//  2. it obtains an instrument from the session's tokenization payment
//     handler: a token bound to the session for exactly p.Amount
//     (see the package doc);
//  3. it completes with Idempotency-Key derived from p.IdempotencyKey.
//
// Failures of 1 and 2 match cart.ErrUnavailable when the merchant could
// not be reached: no order can exist. Failures of 3 map as the package
// doc says; an error matching cart.ErrUnknownOutcome means re-read with
// Get before anything else.
func (c *Client) Complete(ctx context.Context, id string, p cart.Payment) (cart.Order, error) {
	o, err := c.complete(ctx, id, p)
	if err != nil {
		return cart.Order{}, fmt.Errorf("ucp: complete: %w", err)
	}
	return o, nil
}

func (c *Client) complete(ctx context.Context, id string, p cart.Payment) (cart.Order, error) {
	if p.Amount < 1 || p.Currency == "" || p.IdempotencyKey == "" {
		return cart.Order{}, errors.New("payment needs a positive amount, a currency and an idempotency key")
	}
	d, err := c.call(ctx, opGet, http.MethodGet, "/checkout-sessions/"+url.PathEscape(id), nil, "")
	if err == nil {
		err = sameSession(d, id)
	}
	if err != nil {
		return cart.Order{}, err
	}
	if d.Error != nil {
		return cart.Order{}, errorResponseErr(d.Error)
	}
	co := d.Checkout
	switch {
	case co.Status == "ready_for_complete", c.opts.ReadyWithoutErrors && readyWithoutErrors(co.Status, co.Messages):
		total := sumTotals(co.Totals).Total
		if total != p.Amount || !strings.EqualFold(co.Currency, p.Currency) {
			return cart.Order{}, fmt.Errorf("%w: merchant asks %d %s, payment is %d %s", ErrAmountMismatch, total, co.Currency, p.Amount, p.Currency)
		}
	case co.Status == "completed", co.Status == "complete_in_progress":
		// Ask again with the same key: the merchant answers the order our
		// key placed, or refuses.
	default:
		return cart.Order{}, fmt.Errorf("%w: session is %s%s", cart.ErrNotReady, co.Status, firstError(co.Messages))
	}
	h, cred, ok := c.pickHandler(d.Handlers, c.profile.PaymentHandlers)
	if !ok {
		return cart.Order{}, fmt.Errorf("%w: the merchant offers no payment handler we can pay through (none has a tokenization endpoint, and we hold no credential for any of %s)",
			cart.ErrRejected, handlerNames(d.Handlers, c.profile.PaymentHandlers))
	}
	in := Instrument{ID: "pi_" + idempotencyKey("instrument:"+p.IdempotencyKey), HandlerID: h.ID, Type: "card"}
	if cred != nil {
		// A credential handed over at complete, as is: the same body on
		// every attempt under the same key.
		in.Credential = &Credential{Type: "token", Token: cred.Token}
		in.Brand, in.LastDigits = cred.Brand, cred.LastDigits
		if in.Brand == "" {
			in.Brand = "token"
		}
		if in.LastDigits == "" {
			in.LastDigits = lastDigits(cred.Token)
		}
	} else {
		token, err := c.tokenize(ctx, h, id, p)
		if err != nil {
			return cart.Order{}, err
		}
		in.Credential = &Credential{Type: "token", Token: token}
		in.Brand, in.LastDigits = AllowanceType, lastDigits(token)
	}
	var body any
	switch c.version {
	case V20260111:
		body = CompleteRequest0111{PaymentData: in}
	default:
		in.Brand, in.LastDigits = "", ""
		sel := true
		in.Selected = &sel
		body = CompleteRequest0408{Payment: PaymentInstruments0408{Instruments: []Instrument{in}}}
	}
	d, err = c.call(ctx, opComplete, http.MethodPost, "/checkout-sessions/"+url.PathEscape(id)+"/complete", body, idempotencyKey("complete:"+p.IdempotencyKey))
	if err != nil {
		return cart.Order{}, err
	}
	if err := sameSession(d, id); err != nil {
		// The completion was sent: whether it placed an order only a
		// re-read of the session can say.
		return cart.Order{}, fmt.Errorf("%w: %w", cart.ErrUnknownOutcome, err)
	}
	if d.Error != nil {
		return cart.Order{}, errorResponseErr(d.Error)
	}
	co = d.Checkout
	if co.Status == "completed" {
		if co.Order == nil {
			return cart.Order{}, fmt.Errorf("%w: %w: completed without an order", cart.ErrUnknownOutcome, cart.ErrInvalidResponse)
		}
		cc := c.toCart(co)
		return cart.Order{ID: co.Order.ID, CartID: co.ID, Status: co.Status, PlacedAt: c.opts.Now().UTC(), Lines: cc.Lines,
			Total: cc.Totals.Total, Currency: cc.Currency, Permalink: co.Order.PermalinkURL}, nil
	}
	if m, ok := declined(co.Messages); ok {
		return cart.Order{}, fmt.Errorf("%w: %s", cart.ErrDeclined, m)
	}
	if co.Status == "complete_in_progress" {
		return cart.Order{}, fmt.Errorf("%w: the merchant is still completing the session", cart.ErrUnknownOutcome)
	}
	return cart.Order{}, fmt.Errorf("%w: session is %s%s", cart.ErrNotReady, co.Status, firstError(co.Messages))
}

// pickHandler chooses the payment handler: the first of the session's
// handlers (else the profile's) that declares a tokenization endpoint;
// else the first of them we hold a credential for (by id, then name),
// returned with it.
func (c *Client) pickHandler(lists ...[]PaymentHandler) (PaymentHandler, *PaymentCredential, bool) {
	for _, l := range lists {
		for _, h := range l {
			if h.TokenizeURL != "" {
				return h, nil, true
			}
		}
	}
	for _, l := range lists {
		for _, h := range l {
			if pc := c.credentialFor(h); pc != nil {
				return h, pc, true
			}
		}
	}
	return PaymentHandler{}, nil, false
}

func (c *Client) credentialFor(h PaymentHandler) *PaymentCredential {
	for _, match := range []string{h.ID, h.Name} {
		for i, pc := range c.opts.PaymentCredentials {
			if match != "" && pc.Handler == match {
				return &c.opts.PaymentCredentials[i]
			}
		}
	}
	return nil
}

// handlerNames lists the handlers' ids, for an error.
func handlerNames(lists ...[]PaymentHandler) string {
	var ids []string
	for _, l := range lists {
		for _, h := range l {
			if !slices.Contains(ids, h.ID) {
				ids = append(ids, h.ID)
			}
		}
	}
	if len(ids) == 0 {
		return "none offered"
	}
	return fmt.Sprintf("%q", ids)
}

// tokenize obtains the handler's token for exactly p on session id.
func (c *Client) tokenize(ctx context.Context, h PaymentHandler, id string, p cart.Payment) (string, error) {
	req := TokenizeRequest{Credential: AllowanceCredential{Type: AllowanceType, Amount: p.Amount, Currency: strings.ToUpper(p.Currency)},
		Binding: Binding{CheckoutID: id}}
	if h.Identity != "" {
		req.Binding.Identity = &Identity{AccessToken: h.Identity}
	}
	status, _, raw, err := c.send(ctx, http.MethodPost, h.TokenizeURL, req, "")
	if err != nil {
		return "", fmt.Errorf("tokenize: %w: %w", cart.ErrUnavailable, err)
	}
	switch {
	case status >= 500:
		return "", fmt.Errorf("tokenize: %w: HTTP %d", cart.ErrUnavailable, status)
	case status >= 400:
		return "", fmt.Errorf("tokenize: %w: HTTP %d%s", cart.ErrDeclined, status, problemText(raw))
	case status != http.StatusOK && status != http.StatusCreated:
		return "", fmt.Errorf("tokenize: %w: HTTP %d", cart.ErrInvalidResponse, status)
	}
	doc, err := parseJSON(raw)
	if err != nil {
		return "", fmt.Errorf("tokenize: %w: %v", cart.ErrInvalidResponse, err)
	}
	ch := &checker{}
	tok, _ := ch.str("$", ch.object("$", doc), "token", true)
	if ch.ok() && tok == "" {
		ch.failf("$.token", "must not be empty")
	}
	if !ch.ok() {
		return "", fmt.Errorf("tokenize: %w: %v", cart.ErrInvalidResponse, ch.err)
	}
	return tok, nil
}

type op int

const (
	opCreate op = iota
	opGet
	opUpdate
	opComplete
	opCancel
)

// call sends one checkout operation and validates the answer. Errors are
// mapped here, by operation: see the package doc.
func (c *Client) call(ctx context.Context, o op, method, path string, body any, idemKey string) (decoded, error) {
	status, hdr, raw, err := c.send(ctx, method, c.endpoint+path, body, idemKey)
	if err != nil {
		if o == opComplete {
			return decoded{}, fmt.Errorf("%w: %w", cart.ErrUnknownOutcome, err)
		}
		return decoded{}, fmt.Errorf("%w: %w", cart.ErrUnavailable, err)
	}
	// The signature is checked on the raw bytes before anything of the
	// answer is read, whatever its status: an answer that fails is used
	// for nothing, not even its status code.
	switch err = c.verify(ctx, status, hdr, raw); {
	case err != nil:
	case status >= 500:
		if o == opComplete {
			return decoded{}, fmt.Errorf("%w: HTTP %d", cart.ErrUnknownOutcome, status)
		}
		return decoded{}, fmt.Errorf("%w: HTTP %d", cart.ErrUnavailable, status)
	case status == http.StatusNotFound:
		return decoded{}, fmt.Errorf("%w: HTTP 404%s", cart.ErrNotFound, problemText(raw))
	case status >= 400:
		return decoded{}, fmt.Errorf("%w: HTTP %d%s", cart.ErrRejected, status, problemText(raw))
	case status != http.StatusOK && !(o == opCreate && status == http.StatusCreated):
		err = fmt.Errorf("%w: unexpected HTTP %d", cart.ErrInvalidResponse, status)
	default:
		var d decoded
		if d, err = decodeCheckout(c.version, raw); err == nil {
			if len(d.Ignored) > 0 {
				c.opts.Logger.InfoContext(ctx, "ucp: merchant answer has parts outside the schema that are not used",
					slog.String("merchant", c.opts.MerchantID), slog.Any("ignored", d.Ignored))
			}
			return d, nil
		}
	}
	c.opts.Logger.DebugContext(ctx, "ucp: refused merchant answer", slog.String("merchant", c.opts.MerchantID), slog.Int("status", status), slog.Any("error", err))
	if o == opComplete {
		// The merchant answered, but not in a way we may use: it may have
		// placed the order all the same.
		return decoded{}, fmt.Errorf("%w: %w", cart.ErrUnknownOutcome, err)
	}
	return decoded{}, err
}

// verify applies the signature policy to one checkout answer (see the
// package doc). Only 2026-04-08 defines response signatures; a 5xx is used
// for nothing but "try later", so it need not be signed even when keys are
// pinned (a signed one must verify).
func (c *Client) verify(ctx context.Context, status int, h http.Header, raw []byte) error {
	if c.version != V20260408 {
		return nil
	}
	ring, gen := c.ring()
	err := verifyResponse(ring, ring.pinned && status < 500, c.opts.Now(), status, h, raw)
	if err == nil || ring.pinned || !errors.Is(err, errUnknownKey) || !c.refreshKeys(ctx, gen) {
		return err
	}
	ring, _ = c.ring()
	return verifyResponse(ring, false, c.opts.Now(), status, h, raw)
}

func (c *Client) ring() (keyRing, uint64) {
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	return c.keys, c.keysGen
}

// refreshKeys reads the profile's signing_keys again, unless they were
// read less than keyRefreshInterval ago. It reports whether the ring
// changed since generation gen (by this call or another).
func (c *Client) refreshKeys(ctx context.Context, gen uint64) bool {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	c.keysMu.Lock()
	changed, recent := c.keysGen != gen, c.opts.Now().Before(c.keysRead.Add(keyRefreshInterval))
	c.keysMu.Unlock()
	if changed || recent {
		return changed
	}
	p, err := c.discover(ctx, c.profile.URL)
	if err == nil && p.Version != c.version {
		err = fmt.Errorf("%w: the profile now declares %s", cart.ErrInvalidResponse, p.Version)
	}
	c.keysMu.Lock()
	defer c.keysMu.Unlock()
	c.keysRead = c.opts.Now()
	if err != nil {
		c.opts.Logger.DebugContext(ctx, "ucp: re-reading the merchant's signing keys", slog.String("merchant", c.opts.MerchantID), slog.Any("error", err))
		return false
	}
	c.keys = profileRing(p.SigningKeys, c.opts.Logger, c.opts.MerchantID)
	c.keysGen++
	return true
}

// send makes one HTTP request with the binding's headers and returns the
// status, the headers and the capped body.
func (c *Client) send(ctx context.Context, method, u string, body any, idemKey string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var buf []byte
	if body != nil {
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return 0, nil, nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(buf))
	if err != nil {
		return 0, nil, nil, err
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("UCP-Agent", c.agentHeader())
	req.Header.Set("Request-Id", newUUID())
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	if c.opts.Sign != nil {
		if err := c.opts.Sign(req, buf); err != nil {
			return 0, nil, nil, fmt.Errorf("sign: %w", err)
		}
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBody+1))
	if err != nil {
		return 0, nil, nil, err
	}
	if int64(len(raw)) > c.opts.MaxBody {
		return resp.StatusCode, nil, nil, fmt.Errorf("%w: body larger than %d bytes", cart.ErrInvalidResponse, c.opts.MaxBody)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

func (c *Client) agentHeader() string {
	// An RFC 8941 dictionary with one string member; a URI has no '"' or
	// '\\' once parsed and re-encoded.
	return `profile="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(c.opts.AgentProfile) + `"`
}

// ---- helpers ----

// idempotencyKey turns our key into the binding's Idempotency-Key, which
// must be a UUID: a UUIDv8 named by SHA-256 of the key, so a retry with the
// same key sends the same header and different operations never share
// one. "" means a fresh random key.
func idempotencyKey(key string) string {
	if key == "" {
		return newUUID()
	}
	sum := sha256.Sum256([]byte("countersign/ucp/idempotency:" + key))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return formatUUID(b)
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b []byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func lastDigits(token string) string {
	if len(token) <= 4 {
		return token
	}
	return token[len(token)-4:]
}

// declined reports a payment refusal among error messages.
func declined(msgs []Message) (string, bool) {
	for _, m := range msgs {
		if m.Type == "error" && m.Code != nil && (*m.Code == "payment_declined" || *m.Code == "payment_failed") {
			return clean(m.Content), true
		}
	}
	return "", false
}

func firstError(msgs []Message) string {
	for _, m := range msgs {
		if m.Type == "error" {
			code := ""
			if m.Code != nil {
				code = *m.Code + ": "
			}
			return " (" + clean(code+m.Content) + ")"
		}
	}
	return ""
}

// errorResponseErr maps a 2026-04-08 error response.
func errorResponseErr(er *ErrorResponse) error {
	for _, m := range er.Messages {
		if m.Code != nil && *m.Code == "not_found" {
			return fmt.Errorf("%w%s", cart.ErrNotFound, firstError(er.Messages))
		}
	}
	if m, ok := declined(er.Messages); ok {
		return fmt.Errorf("%w: %s", cart.ErrDeclined, m)
	}
	return fmt.Errorf("%w%s", cart.ErrRejected, firstError(er.Messages))
}

// problemText extracts a short message from an error body ({code,
// content}, an error response's messages, or an RFC 9457 detail) for the
// error text only; nothing else of it is used.
func problemText(raw []byte) string {
	var p struct {
		Code     string `json:"code"`
		Content  string `json:"content"`
		Detail   string `json:"detail"`
		Messages []struct {
			Code    string `json:"code"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return ""
	}
	if len(p.Messages) > 0 {
		p.Code, p.Content = p.Messages[0].Code, p.Messages[0].Content
	}
	s := strings.TrimSpace(strings.TrimPrefix(p.Code+": "+p.Content+p.Detail, ": "))
	if s == "" || s == ":" {
		return ""
	}
	return " (" + clean(s) + ")"
}

// clean keeps merchant text printable and short.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, s)
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
