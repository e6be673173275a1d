// Package acp is a merchant client for the Agentic Commerce Protocol
// (ACP), version 2026-04-17: checkout sessions at the merchant and
// delegated payment tokens at its payment service provider (PSP).
//
// # Client
//
// [Client] implements [cart.Merchant]. Create opens a checkout session,
// Get re-reads it, Cancel cancels it, and Complete pays it: it first asks
// the PSP for a delegated payment token whose allowance is exactly the
// payment's amount and currency, for that session only, valid for 15
// minutes, then completes the session with the token.
//
// Every answer is checked against the protocol's schema before any of it
// is used: an answer that does not satisfy it is refused whole with
// [cart.ErrInvalidResponse]. The schema is transcribed into Go in this
// package (rules.go) and tested against the protocol's own JSON Schema
// files with an independent validator.
//
// # Wire types
//
// The request and response bodies are Go types named after the schemas
// ([CheckoutSession], [CheckoutSessionCreateRequest], [Error],
// [DelegatePaymentRequest], ...). Parse them with the Parse functions
// ([ParseCheckoutSession], ...), which check the schema first and return a
// [*SchemaError] naming the offending member.
//
// # Errors
//
// Errors match the sentinels of package cart with errors.Is; refusals
// carry the merchant's answer as a [*MerchantError]. Completion is the
// one call that can move money: when its outcome is not definite (a
// timeout, a lost connection, a 5xx, an answer outside the protocol) the
// error matches [cart.ErrUnknownOutcome] and the caller must re-read the
// session before anything else. Completing again with the same
// idempotency key is safe: the merchant answers the order it placed.
package acp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/commerce/cart"
)

// Version is the ACP version this package speaks, sent as API-Version.
const Version = "2026-04-17"

// Options configure [New]. BaseURL and HTTPClient are required; every
// other field has a default.
type Options struct {
	// BaseURL is the merchant's ACP base URL (http or https); the
	// checkout endpoints are below it (BaseURL + "/checkout_sessions").
	BaseURL string
	// APIKey is the bearer key for the merchant. Default: none (no
	// Authorization header is sent).
	APIKey string
	// PSPURL is the base URL of the PSP's delegate payment API
	// (PSPURL + "/agentic_commerce/delegate_payment"). Default: BaseURL.
	PSPURL string
	// PSPKey is the bearer key for the PSP. Default: APIKey.
	PSPKey string
	// MerchantID is the merchant's registry id: it becomes Cart.Merchant
	// and the allowance's merchant_id. Default: BaseURL's host.
	MerchantID string
	// HTTPClient sends every request. Required: the server passes its
	// SSRF-guarded client.
	HTTPClient *http.Client
	// MaxBody caps the size of an answer's body. Default 1 MiB.
	MaxBody int64
	// Timeout bounds each request, body included. Default 30 s.
	Timeout time.Duration
	// Now is the clock (allowance expiry, order time). Default time.Now.
	Now func() time.Time
	// Card returns the card to delegate for a payment. Default: the
	// sandbox network token of [SandboxCard], which only a sandbox PSP
	// accepts.
	Card func(ctx context.Context, p cart.Payment) (PaymentMethodCard, error)
	// HandlerID is the merchant's payment handler that takes delegated
	// tokens (payment_data.handler_id). Default "card_tokenized", the id
	// ACP's examples give the dev.acp.tokenized.card handler.
	HandlerID string
}

// LogValue keeps the keys out of logs.
func (o Options) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("baseURL", o.BaseURL),
		slog.String("pspURL", o.PSPURL),
		slog.String("merchantID", o.MerchantID),
		slog.Bool("apiKey", o.APIKey != ""),
		slog.Bool("pspKey", o.PSPKey != ""),
		slog.Duration("timeout", o.Timeout),
	)
}

// SandboxCard is the default delegated card: Visa's test number as a
// network token.
func SandboxCard() PaymentMethodCard {
	return PaymentMethodCard{
		Type: "card", CardNumberType: "network_token", Number: "4242424242424242",
		ExpMonth: "12", ExpYear: "2034", DisplayCardFundingType: "credit",
		DisplayBrand: "visa", DisplayLast4: "4242", Metadata: map[string]string{}, Virtual: true,
	}
}

// Client is an ACP merchant. It is safe for concurrent use and keeps no
// state between calls.
type Client struct {
	opts    Options
	base    string
	pspBase string
}

var _ cart.Merchant = (*Client)(nil)

// New returns a client for the merchant at opts.BaseURL.
func New(opts Options) (*Client, error) {
	o := opts
	if o.HTTPClient == nil {
		return nil, errors.New("acp: new: HTTPClient is required")
	}
	base, err := baseURL(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("acp: new: BaseURL: %w", err)
	}
	psp := base
	if o.PSPURL != "" {
		if psp, err = baseURL(o.PSPURL); err != nil {
			return nil, fmt.Errorf("acp: new: PSPURL: %w", err)
		}
	}
	if o.PSPKey == "" {
		o.PSPKey = o.APIKey
	}
	if o.MerchantID == "" {
		u, _ := url.Parse(base)
		o.MerchantID = u.Host
	}
	if len(o.MerchantID) > 256 {
		return nil, errors.New("acp: new: MerchantID is longer than 256 characters")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Card == nil {
		o.Card = func(context.Context, cart.Payment) (PaymentMethodCard, error) { return SandboxCard(), nil }
	}
	if o.HandlerID == "" {
		o.HandlerID = "card_tokenized"
	}
	return &Client{opts: o, base: base, pspBase: psp}, nil
}

func baseURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) base URL", s)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// Protocol is "acp".
func (c *Client) Protocol() string { return "acp" }

// Version is the ACP version spoken, [Version].
func (c *Client) Version() string { return Version }

// maxItems bounds the items of a create request. ACP's Item has no
// quantity, so n of an item is the item listed n times.
const maxItems = 10_000

// Create opens a checkout session for req and returns it priced. When
// req.Fulfillment names an option other than the one the merchant
// selected, it is selected with an update (the create request has no
// member for it).
func (c *Client) Create(ctx context.Context, req cart.CreateRequest) (cart.Cart, error) {
	req2, err := createBody(req)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
	}
	body, err := encode(req2, ruleCheckoutSessionCreateRequest)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
	}
	key := req.IdempotencyKey
	if key == "" {
		key = newUUID()
	}
	cs, err := c.session(ctx, "create", http.MethodPost, "/checkout_sessions", body, key, "")
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
	}
	if req.Fulfillment != "" && !selected(cs, req.Fulfillment) {
		upd, err := selectBody(cs, req.Fulfillment)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
		}
		b, err := encode(upd, ruleCheckoutSessionUpdateRequest)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
		}
		cs, err = c.session(ctx, "update", http.MethodPost, "/checkout_sessions/"+url.PathEscape(cs.ID), b,
			derive("fulfillment", key, req.Fulfillment), cs.ID)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("acp: create: selecting fulfillment: %w", err)
		}
	}
	ct, err := c.toCart(cs)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: create: %w", err)
	}
	return ct, nil
}

func createBody(req cart.CreateRequest) (*CheckoutSessionCreateRequest, error) {
	if req.Currency == "" {
		return nil, errors.New("no currency")
	}
	if len(req.Lines) == 0 {
		return nil, errors.New("no lines")
	}
	body := &CheckoutSessionCreateRequest{Currency: strings.ToLower(req.Currency), LineItems: []Item{}}
	for _, l := range req.Lines {
		if l.ID == "" || l.Quantity < 1 || l.Quantity > maxItems-int64(len(body.LineItems)) {
			return nil, fmt.Errorf("line %q: quantity %d is out of range (at most %d items in all)", clip(l.ID), l.Quantity, maxItems)
		}
		for range l.Quantity {
			body.LineItems = append(body.LineItems, Item{ID: l.ID})
		}
	}
	if req.Email != "" {
		body.Buyer = &Buyer{Email: req.Email}
	}
	if req.Address != nil || req.Email != "" {
		fd := &FulfillmentDetails{Email: req.Email}
		if a := req.Address; a != nil {
			fd.Name = a.Name
			fd.Address = &Address{Name: a.Name, LineOne: a.Line1, LineTwo: a.Line2, City: a.City,
				State: a.State, Country: a.Country, PostalCode: a.PostalCode}
		}
		body.FulfillmentDetails = fd
	}
	if len(req.Discounts) > 0 {
		body.Discounts = &DiscountsRequest{Codes: req.Discounts}
	}
	return body, nil
}

func selected(cs *CheckoutSession, option string) bool {
	for _, s := range cs.SelectedFulfillmentOptions {
		if s.OptionID == option {
			return true
		}
	}
	return false
}

func selectBody(cs *CheckoutSession, option string) (*CheckoutSessionUpdateRequest, error) {
	for _, fo := range cs.FulfillmentOptions {
		if fo.ID != option {
			continue
		}
		ids := []string{}
		for _, li := range cs.LineItems {
			ids = append(ids, li.ID)
		}
		return &CheckoutSessionUpdateRequest{SelectedFulfillmentOptions: []SelectedFulfillmentOption{
			{Type: fo.Type, OptionID: fo.ID, ItemIDs: ids},
		}}, nil
	}
	return nil, fmt.Errorf("%w: the merchant offers no fulfillment option %q", cart.ErrRejected, clip(option))
}

// Get re-reads a checkout session.
func (c *Client) Get(ctx context.Context, id string) (cart.Cart, error) {
	if id == "" {
		return cart.Cart{}, fmt.Errorf("acp: get: %w: empty session id", cart.ErrNotFound)
	}
	cs, err := c.session(ctx, "get", http.MethodGet, "/checkout_sessions/"+url.PathEscape(id), nil, "", id)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: get: %w", err)
	}
	ct, err := c.toCart(cs)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: get: %w", err)
	}
	return ct, nil
}

// Cancel cancels an open session. A session the merchant cannot cancel
// (already completed or canceled: 405) is cart.ErrRejected.
func (c *Client) Cancel(ctx context.Context, id string) (cart.Cart, error) {
	if id == "" {
		return cart.Cart{}, fmt.Errorf("acp: cancel: %w: empty session id", cart.ErrNotFound)
	}
	cs, err := c.session(ctx, "cancel", http.MethodPost, "/checkout_sessions/"+url.PathEscape(id)+"/cancel",
		[]byte("{}"), newUUID(), id)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: cancel: %w", err)
	}
	ct, err := c.toCart(cs)
	if err != nil {
		return cart.Cart{}, fmt.Errorf("acp: cancel: %w", err)
	}
	return ct, nil
}

// session sends a request whose success answer is a CheckoutSession (of
// session id, when id is not empty). It never reports an unknown outcome:
// none of these calls moves money, so a failure to get an answer is
// cart.ErrUnavailable.
func (c *Client) session(ctx context.Context, op, method, path string, body []byte, key, id string) (*CheckoutSession, error) {
	res, err := c.send(ctx, method, c.base+path, body, key, c.opts.APIKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", cart.ErrUnavailable, err)
	}
	switch {
	case res.status >= 200 && res.status < 300:
		if err := res.json(); err != nil {
			return nil, err
		}
		cs, err := ParseCheckoutSession(res.body)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", cart.ErrInvalidResponse, err)
		}
		if id != "" && cs.ID != id {
			return nil, fmt.Errorf("%w: asked for session %q, answered %q", cart.ErrInvalidResponse, clip(id), clip(cs.ID))
		}
		return cs, nil
	case res.status >= 500:
		return nil, &MerchantError{StatusCode: res.status, Body: res.checkoutError(), err: cart.ErrUnavailable}
	case res.status == http.StatusNotFound:
		return nil, &MerchantError{StatusCode: res.status, Body: res.checkoutError(), err: cart.ErrNotFound}
	case res.status >= 400:
		return nil, res.refusal(op)
	}
	return nil, fmt.Errorf("%w: unexpected HTTP status %d", cart.ErrInvalidResponse, res.status)
}

// Complete pays session id with a delegated token for exactly p and
// completes it, at most once per p.IdempotencyKey.
func (c *Client) Complete(ctx context.Context, id string, p cart.Payment) (cart.Order, error) {
	switch {
	case id == "":
		return cart.Order{}, fmt.Errorf("acp: complete: %w: empty session id", cart.ErrNotFound)
	case p.Amount < 1:
		return cart.Order{}, fmt.Errorf("acp: complete: amount %d is not positive", p.Amount)
	case len(p.Currency) != 3:
		return cart.Order{}, fmt.Errorf("acp: complete: currency %q is not an ISO 4217 code", clip(p.Currency))
	case p.IdempotencyKey == "" || len(p.IdempotencyKey) > 255:
		return cart.Order{}, errors.New("acp: complete: the idempotency key must be 1 to 255 characters")
	}
	token, err := c.delegate(ctx, id, p)
	if err != nil {
		return cart.Order{}, fmt.Errorf("acp: complete: delegate_payment: %w", err)
	}
	body, err := encode(&CheckoutSessionCompleteRequest{PaymentData: PaymentData{
		HandlerID:  c.opts.HandlerID,
		Instrument: &Instrument{Type: "card", Credential: Credential{Type: "spt", Token: token}},
	}}, ruleCheckoutSessionCompleteRequest)
	if err != nil {
		return cart.Order{}, fmt.Errorf("acp: complete: %w", err)
	}
	res, err := c.send(ctx, http.MethodPost, c.base+"/checkout_sessions/"+url.PathEscape(id)+"/complete",
		body, p.IdempotencyKey, c.opts.APIKey)
	if err != nil {
		if notSent(err) {
			return cart.Order{}, fmt.Errorf("acp: complete: %w: %w", cart.ErrUnavailable, err)
		}
		return cart.Order{}, fmt.Errorf("acp: complete: %w: %w", cart.ErrUnknownOutcome, err)
	}
	o, err := c.completed(res, id)
	if err != nil {
		return cart.Order{}, fmt.Errorf("acp: complete: %w", err)
	}
	return o, nil
}

// completed reads a completion's answer.
func (c *Client) completed(res *response, id string) (cart.Order, error) {
	switch {
	case res.status >= 200 && res.status < 300:
		// An answer outside the protocol to a completion leaves the
		// outcome unknown: the merchant may have placed the order.
		if err := res.json(); err != nil {
			return cart.Order{}, fmt.Errorf("%w: %w", cart.ErrUnknownOutcome, err)
		}
		if cs, err := ParseCheckoutSessionWithOrder(res.body); err == nil {
			return c.toOrder(cs, id)
		}
		// A session without an order, still open, is the merchant saying
		// no: ACP reports declines and missing information as messages of
		// a valid session (MessageError payment_declined, ...).
		cs, err := ParseCheckoutSession(res.body)
		if err != nil {
			return cart.Order{}, fmt.Errorf("%w: %w: %w", cart.ErrUnknownOutcome, cart.ErrInvalidResponse, err)
		}
		if cs.ID != id {
			return cart.Order{}, fmt.Errorf("%w: %w: asked for session %q, answered %q", cart.ErrUnknownOutcome, cart.ErrInvalidResponse, clip(id), clip(cs.ID))
		}
		return cart.Order{}, sessionRefusal(res.status, cs)
	case res.status >= 500:
		return cart.Order{}, &MerchantError{StatusCode: res.status, Body: res.checkoutError(), err: cart.ErrUnknownOutcome}
	case res.status == http.StatusNotFound:
		return cart.Order{}, &MerchantError{StatusCode: res.status, Body: res.checkoutError(), err: cart.ErrNotFound}
	case res.status >= 400:
		return cart.Order{}, res.refusal("complete")
	}
	return cart.Order{}, fmt.Errorf("%w: %w: unexpected HTTP status %d", cart.ErrUnknownOutcome, cart.ErrInvalidResponse, res.status)
}

// sessionRefusal reads a session answered instead of an order.
func sessionRefusal(status int, cs *CheckoutSession) error {
	var msg *Message
	for i, m := range cs.Messages {
		if m.Type == MessageTypeError {
			if msg == nil || m.Code == "payment_declined" {
				msg = &cs.Messages[i]
			}
		}
	}
	e := &MerchantError{StatusCode: status, Status: cs.Status, err: cart.ErrNotReady}
	if msg != nil {
		e.Body = &Error{Type: ErrorInvalidRequest, Code: msg.Code, Message: msg.Content, Param: msg.Param}
		if msg.Code == "payment_declined" {
			e.err = cart.ErrDeclined
		}
	}
	if cs.Status == StatusCompleted {
		// Completed but without its order: the schema requires the
		// order in a completion's answer.
		return fmt.Errorf("%w: %w: a completed session without its order", cart.ErrUnknownOutcome, cart.ErrInvalidResponse)
	}
	return e
}

// Error codes a refused completion may carry, and what they mean here.
var (
	declinedCodes = []string{"payment_declined", "card_declined", "insufficient_funds", "invalid_card",
		"payment_token_invalid"}
	notReadyCodes = []string{"not_ready_for_payment", "incomplete", "requires_escalation",
		"authentication_required", "requires_3ds", "intervention_required", "requires_sign_in",
		"age_verification_required", "approval_required", "missing", "out_of_stock", "expired",
		"session_expired", "canceled", "session_canceled", "invalid_status"}
)

// refusal reads a 4xx answer (other than 404).
func (r *response) refusal(op string) error {
	e := &MerchantError{StatusCode: r.status, Body: r.checkoutError(), err: cart.ErrRejected}
	code := ""
	if e.Body != nil {
		code = e.Body.Code
	}
	switch {
	case op != "complete":
	case r.status == http.StatusPaymentRequired || contains(declinedCodes, code):
		e.err = cart.ErrDeclined
	case contains(notReadyCodes, code):
		e.err = cart.ErrNotReady
	case r.status == http.StatusConflict && code == "idempotency_in_flight":
		// The first completion under this key is still running.
		e.err = cart.ErrUnknownOutcome
	}
	return e
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// delegate obtains a token for exactly p on session id.
func (c *Client) delegate(ctx context.Context, id string, p cart.Payment) (string, error) {
	card, err := c.opts.Card(ctx, p)
	if err != nil {
		return "", fmt.Errorf("%w: no card: %w", cart.ErrUnavailable, err)
	}
	// The allowance ends 15 minutes from now, rounded up to the minute,
	// and the key is derived from everything in the request: a resend
	// within the same minute is the same request (the PSP replays its
	// answer), a later one is a new request with a new key, never an
	// idempotency conflict.
	exp := c.opts.Now().UTC().Add(15 * time.Minute)
	if t := exp.Truncate(time.Minute); !t.Equal(exp) {
		exp = t.Add(time.Minute)
	}
	expires := exp.Format(time.RFC3339)
	cur := strings.ToLower(p.Currency)
	body, err := encode(&DelegatePaymentRequest{
		PaymentMethod: card,
		Allowance: Allowance{Reason: "one_time", MaxAmount: p.Amount, Currency: cur,
			CheckoutSessionID: id, MerchantID: c.opts.MerchantID, ExpiresAt: expires},
		RiskSignals: []RiskSignal{},
		Metadata:    map[string]string{"source": "countersign"},
	}, ruleDelegatePaymentRequest)
	if err != nil {
		// Not %w: the schema error could quote the card.
		return "", errors.New("the card or allowance does not satisfy the protocol")
	}
	key := derive("delegate_payment", p.IdempotencyKey, id, strconv.FormatInt(p.Amount, 10), cur, expires)
	res, err := c.send(ctx, http.MethodPost, c.pspBase+"/agentic_commerce/delegate_payment", body, key, c.opts.PSPKey)
	if err != nil {
		return "", fmt.Errorf("%w: %w", cart.ErrUnavailable, err)
	}
	switch {
	case res.status >= 200 && res.status < 300:
		if err := res.json(); err != nil {
			return "", err
		}
		dr, err := ParseDelegatePaymentResponse(res.body)
		if err != nil {
			return "", fmt.Errorf("%w: %w", cart.ErrInvalidResponse, err)
		}
		if dr.ID == "" {
			return "", fmt.Errorf("%w: empty token", cart.ErrInvalidResponse)
		}
		return dr.ID, nil
	case res.status >= 500:
		return "", &MerchantError{StatusCode: res.status, Body: res.delegateError(), err: cart.ErrUnavailable}
	case res.status >= 400:
		e := &MerchantError{StatusCode: res.status, Body: res.delegateError(), err: cart.ErrRejected}
		if e.Body != nil && e.Body.Code == DelegateInvalidCard {
			e.err = cart.ErrDeclined
		}
		return "", e
	}
	return "", fmt.Errorf("%w: unexpected HTTP status %d", cart.ErrInvalidResponse, res.status)
}

// MerchantError is a merchant's (or its PSP's) answer that is not a
// success. It matches one sentinel of package cart (ErrRejected,
// ErrDeclined, ErrNotReady, ErrNotFound, ErrUnavailable or
// ErrUnknownOutcome) with errors.Is.
type MerchantError struct {
	StatusCode int
	// Body is the answer's error object when it satisfied the protocol's
	// Error schema (or, for a session answered instead of an order, its
	// first error message); nil otherwise.
	Body *Error
	// Status is the session's status when a session was answered.
	Status string
	err    error
}

func (e *MerchantError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v (HTTP %d", e.err, e.StatusCode)
	if e.Status != "" {
		fmt.Fprintf(&b, ", session %s", e.Status)
	}
	b.WriteString(")")
	if e.Body != nil {
		// The merchant's words, quoted and clipped: they are untrusted.
		fmt.Fprintf(&b, ": %s/%s: %q", clip(e.Body.Type), clip(e.Body.Code), clipN(e.Body.Message, 200))
	}
	return b.String()
}

// Unwrap returns the cart sentinel.
func (e *MerchantError) Unwrap() error { return e.err }

func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return clip(s[:n]) + "…"
}

// response is an answer read in full.
type response struct {
	status   int
	ctype    string
	body     []byte
	oversize bool // the body was longer than MaxBody, and dropped
}

// json checks the answer claims to be JSON and was read whole.
func (r *response) json() error {
	if r.oversize {
		return fmt.Errorf("%w: the answer is longer than MaxBody", cart.ErrInvalidResponse)
	}
	mt, _, err := mime.ParseMediaType(r.ctype)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("%w: content type %q is not application/json", cart.ErrInvalidResponse, clip(r.ctype))
	}
	return nil
}

// checkoutError is the answer's Error object, when it is one.
func (r *response) checkoutError() *Error {
	if r.json() != nil {
		return nil
	}
	e, err := ParseError(r.body)
	if err != nil {
		return nil
	}
	return e
}

func (r *response) delegateError() *Error {
	if r.json() != nil {
		return nil
	}
	e, err := ParseDelegatePaymentError(r.body)
	if err != nil {
		return nil
	}
	return e
}

// encode marshals a request body and checks it against its schema: a
// request the protocol refuses is a bug here, and is never sent.
func encode(v any, r rule) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if err := validate(b, r); err != nil {
		return nil, fmt.Errorf("our request does not satisfy the protocol: %w", err)
	}
	return b, nil
}

// send sends one request with ACP's headers and reads the answer, within
// Timeout. An error means no answer was read.
func (c *Client) send(ctx context.Context, method, target string, body []byte, key, bearer string) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	h := req.Header
	if bearer != "" {
		h.Set("Authorization", "Bearer "+bearer)
	}
	h.Set("API-Version", Version)
	h.Set("Accept", "application/json")
	h.Set("User-Agent", "countersign-acp/"+Version)
	h.Set("Request-Id", "req_"+randomHex(12))
	h.Set("Timestamp", c.opts.Now().UTC().Format(time.RFC3339))
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	if method == http.MethodPost {
		h.Set("Idempotency-Key", key)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxBody+1))
	if err != nil {
		return nil, err
	}
	r := &response{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
	if int64(len(b)) > c.opts.MaxBody {
		// Too large to read: the status is known, the body is not.
		r.body, r.oversize = nil, true
	}
	return r, nil
}

// notSent reports whether err shows the request never left: the
// connection could not be made, so nothing was written.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// derive makes an idempotency key from parts (at most 255 characters, as
// ACP requires, whatever the parts' length).
func derive(kind string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte("countersign/acp/" + kind))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return kind + "_" + hex.EncodeToString(h.Sum(nil))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newUUID returns a random (version 4) UUID, the key form ACP recommends.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
