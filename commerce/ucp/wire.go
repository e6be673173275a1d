package ucp

import "encoding/json"

// Wire types. One set serves both versions: where the versions differ in
// shape (the ucp envelope, payment) the member is kept as the JSON the
// validator accepted. Optional members are pointers so that a decoded
// document re-encodes to one the schema still accepts.
//
// Responses are never decoded with encoding/json into these types: its
// case-insensitive key matching would let {"status":…,"STATUS":…} put a
// value the validator never looked at into Status. The validators build
// them from the exact keys they checked.

// Checkout is a checkout session as the merchant sends it (checkout_resp
// in 2026-01-11, checkout.json resolved for responses in 2026-04-08).
type Checkout struct {
	UCP         json.RawMessage    `json:"ucp"`
	ID          string             `json:"id"`
	LineItems   []LineItem         `json:"line_items"`
	Buyer       *Buyer             `json:"buyer,omitempty"`
	Status      string             `json:"status"`
	Currency    string             `json:"currency"`
	Totals      []Total            `json:"totals"`
	Messages    []Message          `json:"messages,omitempty"`
	Links       []Link             `json:"links"`
	ExpiresAt   *string            `json:"expires_at,omitempty"`
	ContinueURL *string            `json:"continue_url,omitempty"`
	Payment     json.RawMessage    `json:"payment,omitempty"`
	Order       *OrderConfirmation `json:"order,omitempty"`
	Context     json.RawMessage    `json:"context,omitempty"`
	Signals     json.RawMessage    `json:"signals,omitempty"`
	Attribution map[string]string  `json:"attribution,omitempty"`
}

// ErrorResponse is 2026-04-08's error_response: no session, only
// messages.
type ErrorResponse struct {
	UCP         json.RawMessage `json:"ucp"`
	Messages    []Message       `json:"messages"`
	ContinueURL *string         `json:"continue_url,omitempty"`
}

// LineItem is a priced line.
type LineItem struct {
	ID       string  `json:"id"`
	Item     Item    `json:"item"`
	Quantity int64   `json:"quantity"`
	Totals   []Total `json:"totals"`
	ParentID *string `json:"parent_id,omitempty"`
}

// Item is the product of a line.
type Item struct {
	ID       string  `json:"id"`
	Title    string  `json:"title"`
	Price    int64   `json:"price"`
	ImageURL *string `json:"image_url,omitempty"`
}

// Total is one entry of a totals breakdown (minor units; 2026-04-08
// discounts are negative, 2026-01-11 ones positive).
type Total struct {
	Type        string  `json:"type"`
	DisplayText *string `json:"display_text,omitempty"`
	Amount      int64   `json:"amount"`
}

// Message is an error, warning or info message.
type Message struct {
	Type        string  `json:"type"`
	Code        *string `json:"code,omitempty"`
	Path        *string `json:"path,omitempty"`
	ContentType *string `json:"content_type,omitempty"`
	Content     string  `json:"content"`
	Severity    *string `json:"severity,omitempty"`
}

// Link is a legal or informational link.
type Link struct {
	Type  string  `json:"type"`
	URL   string  `json:"url"`
	Title *string `json:"title,omitempty"`
}

// Buyer is the buyer's contact.
type Buyer struct {
	FirstName   *string `json:"first_name,omitempty"`
	LastName    *string `json:"last_name,omitempty"`
	FullName    *string `json:"full_name,omitempty"`
	Email       *string `json:"email,omitempty"`
	PhoneNumber *string `json:"phone_number,omitempty"`
}

// OrderConfirmation is the order a completed session placed.
type OrderConfirmation struct {
	ID           string  `json:"id"`
	Label        *string `json:"label,omitempty"`
	PermalinkURL string  `json:"permalink_url"`
}

// ---- requests ----

// LineItemRequest is a line of a create or update request.
type LineItemRequest struct {
	ID       string      `json:"id,omitempty"`
	Item     ItemRequest `json:"item"`
	Quantity int64       `json:"quantity"`
}

// ItemRequest names the item.
type ItemRequest struct {
	ID string `json:"id"`
}

// CreateRequest0111 is checkout.create_req of 2026-01-11.
type CreateRequest0111 struct {
	LineItems []LineItemRequest `json:"line_items"`
	Buyer     *Buyer            `json:"buyer,omitempty"`
	Currency  string            `json:"currency"`
	Payment   PaymentRequest    `json:"payment"`
}

// UpdateRequest0111 is checkout.update_req of 2026-01-11 (a full
// replacement of the session's updatable fields).
type UpdateRequest0111 struct {
	ID        string            `json:"id"`
	LineItems []LineItemRequest `json:"line_items"`
	Buyer     *Buyer            `json:"buyer,omitempty"`
	Currency  string            `json:"currency"`
	Payment   PaymentRequest    `json:"payment"`
}

// PaymentRequest is payment.create_req / update_req of 2026-01-11; the
// client sends it empty (instruments are sent on completion).
type PaymentRequest struct {
	SelectedInstrumentID string       `json:"selected_instrument_id,omitempty"`
	Instruments          []Instrument `json:"instruments,omitempty"`
}

// CompleteRequest0111 is the complete_checkout body of 2026-01-11
// (payment_data).
type CompleteRequest0111 struct {
	PaymentData Instrument `json:"payment_data"`
}

// CheckoutRequest0408 is checkout.json resolved for the create and update
// operations of 2026-04-08 (ucp, id, status, currency, totals ... omitted).
type CheckoutRequest0408 struct {
	LineItems []LineItemRequest `json:"line_items"`
	Buyer     *Buyer            `json:"buyer,omitempty"`
	Context   *RequestContext   `json:"context,omitempty"`
}

// RequestContext carries the buyer's signals; we send the currency.
type RequestContext struct {
	Currency string `json:"currency,omitempty"`
}

// CompleteRequest0408 is checkout.json resolved for complete in
// 2026-04-08: only payment, required.
type CompleteRequest0408 struct {
	Payment PaymentInstruments0408 `json:"payment"`
}

// PaymentInstruments0408 is payment.json of 2026-04-08.
type PaymentInstruments0408 struct {
	Instruments []Instrument `json:"instruments"`
}

// Instrument is a payment instrument carrying a handler's token. In
// 2026-01-11 the only instrument schema is the card instrument, which
// requires brand and last_digits (see the package doc).
type Instrument struct {
	ID          string      `json:"id"`
	HandlerID   string      `json:"handler_id"`
	Type        string      `json:"type"`
	Brand       string      `json:"brand,omitempty"`
	LastDigits  string      `json:"last_digits,omitempty"`
	Credential  *Credential `json:"credential,omitempty"`
	Selected    *bool       `json:"selected,omitempty"`
	DisplayInfo *Display    `json:"display,omitempty"`
}

// Display is a 2026-04-08 card instrument's display block.
type Display struct {
	Brand      string `json:"brand,omitempty"`
	LastDigits string `json:"last_digits,omitempty"`
}

// Credential is a token credential.
type Credential struct {
	Type  string `json:"type"`
	Token string `json:"token"`
}

// TokenizeRequest is the tokenization API's /tokenize body. The
// credential is our spend allowance (see the package doc).
type TokenizeRequest struct {
	Credential AllowanceCredential `json:"credential"`
	Binding    Binding             `json:"binding"`
}

// AllowanceCredential is the source credential we tokenize: a token
// credential (type plus handler-defined fields) that authorises exactly
// Amount minor units of Currency on one checkout.
type AllowanceCredential struct {
	Type     string `json:"type"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// AllowanceType is AllowanceCredential.Type.
const AllowanceType = "spend_allowance"

// Binding ties a token to a checkout (binding.json).
type Binding struct {
	CheckoutID string    `json:"checkout_id"`
	Identity   *Identity `json:"identity,omitempty"`
}

// Identity is payment_identity.json.
type Identity struct {
	AccessToken string `json:"access_token"`
}

// TokenizeResponse is /tokenize's answer.
type TokenizeResponse struct {
	Token string `json:"token"`
}
