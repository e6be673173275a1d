package fakemerchant

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/commerce/cart"
)

// Options configure [New]. The zero value is a working merchant.
type Options struct {
	// BaseURL is where the merchant is served, used in continue and
	// order links. Default "http://merchant.invalid".
	BaseURL string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// SlowDelay, HangFor, ExpiresAfter override the scenario constants of
	// the same names (tests shorten them).
	SlowDelay, HangFor, ExpiresAfter time.Duration
	// APIKey, when set, is the bearer key ACP requests must carry.
	APIKey string
}

// Merchant is the shared state behind both protocol views: sessions,
// delegated payment tokens and orders. It is safe for concurrent use.
type Merchant struct {
	opts Options

	mu       sync.Mutex // guards the maps below
	sessions map[string]*Session
	tokens   map[string]*Allowance // delegated payment tokens (ACP's PSP)
}

// New returns a merchant with no sessions.
func New(opts *Options) *Merchant {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.BaseURL == "" {
		o.BaseURL = "http://merchant.invalid"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SlowDelay == 0 {
		o.SlowDelay = SlowDelay
	}
	if o.HangFor == 0 {
		o.HangFor = HangFor
	}
	if o.ExpiresAfter == 0 {
		o.ExpiresAfter = ExpiresAfter
	}
	return &Merchant{opts: o, sessions: map[string]*Session{}, tokens: map[string]*Allowance{}}
}

// Session is one checkout session. Views read it under the merchant's
// lock through [Merchant.Session] copies.
type Session struct {
	ID          string
	Protocol    string // "acp" or "ucp"
	Version     string
	Currency    string
	Lines       []cart.LineRequest
	Scenario    Scenario
	Email       string
	Address     *cart.Address
	Fulfillment string // selected option id: "standard" (default) or "express"
	Discounts   []string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	Reads       int // reads after creation; ScenarioPriceChanges surges after the first
	Canceled    bool
	Order       *cart.Order
	// Completions maps an idempotency key to the order it placed, so a
	// retried completion answers the same order.
	Completions map[string]string
	// CompleteAttempts counts completion requests (for the scenarios that
	// fail a given attempt).
	CompleteAttempts int
}

// Allowance is a delegated payment token's limit (ACP delegate_payment).
type Allowance struct {
	Token      string
	MaxAmount  int64
	Currency   string
	CheckoutID string
	ExpiresAt  time.Time
	Used       bool
}

// Errors of the engine, mapped by each view to its protocol's error shape.
var (
	ErrUnknownItem = errors.New("fakemerchant: unknown item")
	ErrNoSession   = errors.New("fakemerchant: no such session")
	ErrNotReady    = errors.New("fakemerchant: session not ready for payment")
	ErrDeclined    = errors.New("fakemerchant: payment declined")
	ErrBadToken    = errors.New("fakemerchant: payment token invalid, used, expired or over its allowance")
	ErrClosed      = errors.New("fakemerchant: session is completed, canceled or expired")
	ErrBadRequest  = errors.New("fakemerchant: bad request")
)

func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create opens a session for lines; scenarioOverride (the X-Fake-Scenario
// header) wins over the SKUs' scenarios.
func (m *Merchant) Create(protocol, version, currency string, lines []cart.LineRequest, scenarioOverride Scenario) (Session, error) {
	if currency != "USD" && currency != "usd" {
		return Session{}, fmt.Errorf("%w: only USD is sold here", ErrBadRequest)
	}
	if len(lines) == 0 {
		return Session{}, fmt.Errorf("%w: no line items", ErrBadRequest)
	}
	sc := ScenarioReady
	for _, l := range lines {
		it, ok := Find(l.ID)
		if !ok {
			return Session{}, fmt.Errorf("%w: %s", ErrUnknownItem, l.ID)
		}
		if l.Quantity < 1 || l.Quantity > 10_000 {
			return Session{}, fmt.Errorf("%w: quantity of %s must be 1 to 10000", ErrBadRequest, l.ID)
		}
		if sc == ScenarioReady && it.Scenario != ScenarioReady {
			sc = it.Scenario
		}
	}
	if scenarioOverride != "" {
		sc = scenarioOverride
	}
	now := m.opts.Now()
	s := &Session{ID: newID("cs_"), Protocol: protocol, Version: version, Currency: "USD",
		Lines: slices.Clone(lines), Scenario: sc, Fulfillment: "standard", CreatedAt: now,
		ExpiresAt: now.Add(6 * time.Hour), Completions: map[string]string{}}
	if sc == ScenarioExpires {
		s.ExpiresAt = now.Add(m.opts.ExpiresAfter)
	}
	m.mu.Lock()
	m.sessions[s.ID] = s
	m.mu.Unlock()
	return m.copy(s), nil
}

// Read returns a session as a buyer reads it back (counting the read).
func (m *Merchant) Read(id string) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return Session{}, ErrNoSession
	}
	s.Reads++
	return m.copy(s), nil
}

// Update changes a session's buyer details; zero values leave a field.
func (m *Merchant) Update(id string, fn func(*Session) error) (Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return Session{}, ErrNoSession
	}
	if m.closed(s) {
		return Session{}, ErrClosed
	}
	if err := fn(s); err != nil {
		return Session{}, err
	}
	return m.copy(s), nil
}

// Cancel cancels an open session.
func (m *Merchant) Cancel(id string) (Session, error) {
	return m.Update(id, func(s *Session) error { s.Canceled = true; return nil })
}

func (m *Merchant) closed(s *Session) bool {
	return s.Order != nil || s.Canceled || !m.opts.Now().Before(s.ExpiresAt)
}

// copy returns a snapshot a view may read without the lock.
func (m *Merchant) copy(s *Session) Session {
	c := *s
	c.Lines = slices.Clone(s.Lines)
	c.Discounts = slices.Clone(s.Discounts)
	if s.Order != nil {
		o := *s.Order
		c.Order = &o
	}
	c.Completions = nil
	return c
}

// Status is the session's state in the neutral vocabulary; each view maps
// it to its protocol's words.
func (m *Merchant) Status(s Session) cart.Status {
	switch {
	case s.Order != nil:
		return cart.StatusCompleted
	case s.Canceled:
		return cart.StatusCanceled
	case !m.opts.Now().Before(s.ExpiresAt):
		return cart.StatusExpired
	}
	switch s.Scenario {
	case ScenarioOutOfStock:
		return cart.StatusIncomplete
	case ScenarioEscalation:
		return cart.StatusEscalation
	case ScenarioAuthentication:
		return cart.StatusAuth
	}
	return cart.StatusReady
}

// ContinueURL is where a person finishes a session the agent cannot.
func (m *Merchant) ContinueURL(s Session) string {
	return m.opts.BaseURL + "/continue/" + s.ID
}

// Price returns the session's priced lines, fulfilment options and totals.
func (m *Merchant) Price(s Session) ([]cart.Line, []cart.Fulfillment, cart.Totals) {
	var lines []cart.Line
	var t cart.Totals
	discount := slices.Contains(s.Discounts, DiscountCode)
	for i, l := range s.Lines {
		it, _ := Find(l.ID)
		unit := it.PriceMinor
		if s.Scenario == ScenarioPriceChanges && s.Reads > 0 {
			unit += PriceIncrease
		}
		sub := unit * l.Quantity
		var disc int64
		if discount {
			disc = sub * DiscountPercent / 100
		}
		tax := (sub - disc) * it.TaxBasisPts / 10_000
		line := cart.Line{ID: fmt.Sprintf("li_%d", i+1), ItemID: l.ID, Title: it.Title, Quantity: l.Quantity,
			Unit: unit, Subtotal: sub, Tax: tax, Discount: disc, Total: sub - disc + tax}
		lines = append(lines, line)
		t.Subtotal += sub
		t.Tax += tax
		t.Discount += disc
	}
	opts := []cart.Fulfillment{
		{ID: "standard", Type: "shipping", Title: "Standard (5-7 days)", Amount: ShippingMinor, Selected: s.Fulfillment != "express"},
		{ID: "express", Type: "shipping", Title: "Express (1-2 days)", Amount: ExpressMinor, Selected: s.Fulfillment == "express"},
	}
	t.Shipping = ShippingMinor
	if s.Fulfillment == "express" {
		t.Shipping = ExpressMinor
	}
	t.Total = t.Subtotal - t.Discount + t.Tax + t.Shipping
	return lines, opts, t
}

// Delegate issues a delegated payment token for at most maxAmount on one
// checkout session until expiresAt (ACP's PSP, delegate_payment).
func (m *Merchant) Delegate(maxAmount int64, currency, checkoutID string, expiresAt time.Time) (Allowance, error) {
	if maxAmount < 1 || checkoutID == "" || !expiresAt.After(m.opts.Now()) {
		return Allowance{}, fmt.Errorf("%w: allowance needs a positive max amount, a checkout session and a future expiry", ErrBadRequest)
	}
	a := &Allowance{Token: newID("vt_"), MaxAmount: maxAmount, Currency: currency, CheckoutID: checkoutID, ExpiresAt: expiresAt}
	m.mu.Lock()
	m.tokens[a.Token] = a
	m.mu.Unlock()
	return *a, nil
}

// Complete places the order of session id, paid with token (a delegated
// token or a handler instrument), at most once per idempotency key. The
// scenario decides how it fails. hang, when true, tells the view to hold
// its answer for HangFor (ScenarioTimeoutThenSuccess: the order exists,
// the client never hears so).
func (m *Merchant) Complete(id, token, idemKey string, requireToken bool) (order cart.Order, hang bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return cart.Order{}, false, ErrNoSession
	}
	s.CompleteAttempts++
	if s.Order != nil {
		if idemKey == "" || s.Completions[idemKey] == s.Order.ID {
			return *s.Order, false, nil // a retry: the same order
		}
		return cart.Order{}, false, ErrClosed
	}
	if m.closed(s) {
		return cart.Order{}, false, ErrClosed
	}
	if st := m.Status(m.copy(s)); st != cart.StatusReady {
		return cart.Order{}, false, ErrNotReady
	}
	lines, _, totals := m.Price(m.copy(s))
	if requireToken {
		a, ok := m.tokens[token]
		now := m.opts.Now()
		if !ok || a.Used || !now.Before(a.ExpiresAt) || a.CheckoutID != id || a.MaxAmount < totals.Total {
			return cart.Order{}, false, ErrBadToken
		}
		a.Used = true
	}
	switch s.Scenario {
	case ScenarioDeclined:
		return cart.Order{}, false, ErrDeclined
	case ScenarioCompleteFails:
		return cart.Order{}, false, errServerFault
	}
	s.Order = &cart.Order{ID: newID("ord_"), CartID: id, Status: "confirmed", PlacedAt: m.opts.Now().UTC(),
		Lines: lines, Total: totals.Total, Currency: s.Currency, Permalink: m.opts.BaseURL + "/orders/" + id}
	if idemKey != "" {
		s.Completions[idemKey] = s.Order.ID
	}
	return *s.Order, s.Scenario == ScenarioTimeoutThenSuccess && s.CompleteAttempts == 1, nil
}

// errServerFault makes a view answer 500.
var errServerFault = errors.New("fakemerchant: internal error (scenario complete_5xx)")

// IsServerFault reports whether err asks the view for a 500.
func IsServerFault(err error) bool { return errors.Is(err, errServerFault) }

// Delay sleeps for the session's scenario before a view answers
// (ScenarioSlow), or until the request is canceled.
func (m *Merchant) Delay(r *http.Request, s Session) {
	if s.Scenario != ScenarioSlow {
		return
	}
	t := time.NewTimer(m.opts.SlowDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// Hang holds an answer for HangFor, or until the client gives up.
func (m *Merchant) Hang(r *http.Request) {
	t := time.NewTimer(m.opts.HangFor)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// APIKey is the bearer key ACP requests must carry ("" for none).
func (m *Merchant) APIKey() string { return m.opts.APIKey }

// BaseURL is where the merchant is served.
func (m *Merchant) BaseURL() string { return m.opts.BaseURL }

// Now is the merchant's clock.
func (m *Merchant) Now() time.Time { return m.opts.Now() }
