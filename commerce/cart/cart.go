// Package cart is the protocol-neutral view of a merchant checkout: the
// priced Cart an agent quotes, the Order a purchase places, and the
// Merchant interface each protocol client (commerce/acp, commerce/ucp)
// implements. Package commerce works only in these terms, so the gate,
// the record and settlement never depend on a protocol's wire format.
package cart

import (
	"context"
	"errors"
	"time"
)

// Status is a cart's state as the merchant reports it, mapped onto one
// vocabulary: only StatusReady may be paid.
type Status string

// Cart states. Raw keeps the protocol's own status word.
const (
	StatusReady      Status = "ready"       // ACP ready_for_payment, UCP ready_for_complete
	StatusIncomplete Status = "incomplete"  // information or stock missing; fixable by the buyer
	StatusEscalation Status = "escalation"  // a person must continue at ContinueURL
	StatusAuth       Status = "auth"        // authentication required (e.g. 3-D Secure)
	StatusPending    Status = "pending"     // the merchant is approving it
	StatusCompleted  Status = "completed"   // an order was placed
	StatusCanceled   Status = "canceled"    // canceled by either side
	StatusExpired    Status = "expired"     // the session lapsed
	StatusInProgress Status = "in_progress" // completion under way at the merchant
)

// Line is one priced line of a cart. Amounts are minor units of the cart's
// currency.
type Line struct {
	ID       string `json:"id" doc:"The merchant's line id."`
	ItemID   string `json:"itemId" doc:"The item (SKU) requested."`
	Title    string `json:"title,omitempty"`
	Quantity int64  `json:"quantity"`
	Unit     int64  `json:"unitMinor" doc:"Unit price."`
	Subtotal int64  `json:"subtotalMinor"`
	Tax      int64  `json:"taxMinor"`
	Discount int64  `json:"discountMinor"`
	Total    int64  `json:"totalMinor"`
}

// Totals are the cart's amounts, minor units.
type Totals struct {
	Subtotal int64 `json:"subtotalMinor"`
	Tax      int64 `json:"taxMinor"`
	Shipping int64 `json:"shippingMinor"`
	Discount int64 `json:"discountMinor"`
	Total    int64 `json:"totalMinor" doc:"What a purchase authorises: the cart's total."`
}

// Fulfillment is one fulfilment option the merchant offers.
type Fulfillment struct {
	ID       string `json:"id"`
	Type     string `json:"type" doc:"shipping, digital, pickup ..."`
	Title    string `json:"title"`
	Amount   int64  `json:"amountMinor"`
	Selected bool   `json:"selected"`
}

// Message is a merchant message about the cart (info, warning, error).
type Message struct {
	Type string `json:"type"`
	Code string `json:"code,omitempty"`
	Text string `json:"text"`
	Path string `json:"path,omitempty"`
}

// Cart is a checkout session at a merchant, priced.
type Cart struct {
	ID          string        `json:"id" doc:"The merchant's checkout session id."`
	Rail        string        `json:"rail" doc:"acp or ucp."`
	Version     string        `json:"version" doc:"The protocol version negotiated with the merchant."`
	Merchant    string        `json:"merchant" doc:"The merchant's registry id."`
	Status      Status        `json:"status"`
	RawStatus   string        `json:"merchantStatus" doc:"The status word the merchant sent."`
	Currency    string        `json:"currency"`
	Lines       []Line        `json:"lines"`
	Totals      Totals        `json:"totals"`
	Fulfillment []Fulfillment `json:"fulfillmentOptions"`
	Messages    []Message     `json:"messages"`
	ContinueURL string        `json:"continueUrl,omitempty"`
	ExpiresAt   *time.Time    `json:"expiresAt,omitempty"`
}

// Ready reports whether the merchant says the cart may be paid.
func (c *Cart) Ready() bool { return c.Status == StatusReady }

// LineRequest asks for an item.
type LineRequest struct {
	ID       string `json:"id" validate:"required,max=128" doc:"The merchant's item id (SKU)."`
	Quantity int64  `json:"quantity" validate:"min=1,max=10000" doc:"How many, at least 1."`
}

// Address is a fulfilment address, passed through to the merchant.
type Address struct {
	Name       string `json:"name" validate:"required,max=256"`
	Line1      string `json:"line1" validate:"required,max=256"`
	Line2      string `json:"line2,omitempty" validate:"max=256"`
	City       string `json:"city" validate:"required,max=128"`
	State      string `json:"state,omitempty" validate:"max=64"`
	PostalCode string `json:"postalCode" validate:"required,max=32"`
	Country    string `json:"country" validate:"required,len=2" doc:"ISO 3166-1 alpha-2."`
}

// CreateRequest asks a merchant for a priced cart.
type CreateRequest struct {
	Currency string
	Lines    []LineRequest
	// Buyer's e-mail, address, fulfilment option and discount codes are
	// optional and passed through.
	Email       string
	Address     *Address
	Fulfillment string
	Discounts   []string
	// IdempotencyKey, when set, is sent to the merchant.
	IdempotencyKey string
}

// Payment is what completes a checkout: the payment credential the
// settlement produced for exactly this cart and amount.
type Payment struct {
	Amount   int64
	Currency string
	// IdempotencyKey is the intent id: completing twice with it places one
	// order.
	IdempotencyKey string
}

// Order is a placed order.
type Order struct {
	ID        string    `json:"id"`
	CartID    string    `json:"cartId"`
	Status    string    `json:"status"`
	PlacedAt  time.Time `json:"placedAt"`
	Lines     []Line    `json:"lines"`
	Total     int64     `json:"totalMinor"`
	Currency  string    `json:"currency"`
	Permalink string    `json:"permalinkUrl,omitempty"`
}

// Merchant is one merchant, over one protocol. Implementations refuse a
// response that does not satisfy the protocol's schema (ErrInvalidResponse)
// rather than use part of it.
type Merchant interface {
	// Protocol is "acp" or "ucp"; Version the negotiated protocol version.
	Protocol() string
	Version() string
	// Create opens a checkout session and returns it priced.
	Create(ctx context.Context, req CreateRequest) (Cart, error)
	// Get re-reads a checkout session.
	Get(ctx context.Context, id string) (Cart, error)
	// Complete obtains the payment credential for p (ACP: a delegated
	// payment token from the PSP; UCP: the negotiated payment handler's
	// instrument) and completes the session with it, at most once per
	// p.IdempotencyKey. An error matching ErrUnknownOutcome means the order
	// may or may not exist: re-read with Get before anything else.
	Complete(ctx context.Context, id string, p Payment) (Order, error)
	// Cancel cancels an open session.
	Cancel(ctx context.Context, id string) (Cart, error)
}

// Errors of merchants. Check with errors.Is.
var (
	// ErrInvalidResponse: the merchant answered something the protocol's
	// schema refuses; nothing of it was used.
	ErrInvalidResponse = errors.New("cart: the merchant's answer does not satisfy the protocol")
	// ErrNotFound: the merchant has no such session.
	ErrNotFound = errors.New("cart: no such checkout session")
	// ErrRejected: the merchant refused the request (4xx with a message).
	ErrRejected = errors.New("cart: the merchant refused the request")
	// ErrDeclined: the merchant or its PSP declined the payment; the
	// session is still open and no order exists.
	ErrDeclined = errors.New("cart: payment declined")
	// ErrNotReady: completion was refused because the session is not
	// ready for payment.
	ErrNotReady = errors.New("cart: the checkout session is not ready for payment")
	// ErrUnknownOutcome: the merchant did not answer completion
	// definitely (timeout, 5xx, connection lost): an order may exist.
	ErrUnknownOutcome = errors.New("cart: completion outcome unknown")
	// ErrUnavailable: the merchant could not be reached before anything
	// was sent that could change state.
	ErrUnavailable = errors.New("cart: merchant unavailable")
)
