package acp

import "log/slog"

// Wire types of the delegate payment API (openapi.delegate_payment.yaml):
// the agent hands a card to the merchant's PSP and gets back a vault
// token that the merchant may charge once, up to an allowance, for one
// checkout session, until the allowance expires.

// PaymentMethodCard is the card delegated. Number, CVC and Cryptogram are
// secrets: the type's LogValue omits them, and nothing in this package
// puts them into an error.
type PaymentMethodCard struct {
	Type                   string            `json:"type"`             // "card"
	CardNumberType         string            `json:"card_number_type"` // "fpan" or "network_token"
	Number                 string            `json:"number"`
	ExpMonth               string            `json:"exp_month,omitempty"`
	ExpYear                string            `json:"exp_year,omitempty"`
	Name                   string            `json:"name,omitempty"`
	CVC                    string            `json:"cvc,omitempty"`
	Cryptogram             string            `json:"cryptogram,omitempty"`
	ECIValue               string            `json:"eci_value,omitempty"`
	ChecksPerformed        []string          `json:"checks_performed,omitempty"`
	IIN                    string            `json:"iin,omitempty"`
	DisplayCardFundingType string            `json:"display_card_funding_type"`
	DisplayWalletType      string            `json:"display_wallet_type,omitempty"`
	DisplayBrand           string            `json:"display_brand,omitempty"`
	DisplayLast4           string            `json:"display_last4,omitempty"`
	Metadata               map[string]string `json:"metadata"`
	Virtual                bool              `json:"virtual,omitempty"`
}

// LogValue shows only what a card's display fields already show.
func (c PaymentMethodCard) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("card_number_type", c.CardNumberType),
		slog.String("display_brand", c.DisplayBrand),
		slog.String("display_last4", c.DisplayLast4),
		slog.Bool("virtual", c.Virtual),
	)
}

// Allowance limits a delegated token: one use, at most MaxAmount minor
// units of Currency (lower-case ISO 4217), for one checkout session, until
// ExpiresAt.
type Allowance struct {
	Reason            string `json:"reason"` // "one_time"
	MaxAmount         int64  `json:"max_amount"`
	Currency          string `json:"currency"`
	CheckoutSessionID string `json:"checkout_session_id"`
	MerchantID        string `json:"merchant_id"`
	ExpiresAt         string `json:"expires_at"`
}

// RiskSignal is a fraud signal about the delegation.
type RiskSignal struct {
	Type   string `json:"type"` // "card_testing"
	Score  int64  `json:"score"`
	Action string `json:"action"` // blocked, manual_review, authorized
}

// DelegatePaymentRequest is the body of
// POST /agentic_commerce/delegate_payment.
type DelegatePaymentRequest struct {
	PaymentMethod  PaymentMethodCard `json:"payment_method"`
	Allowance      Allowance         `json:"allowance"`
	BillingAddress *Address          `json:"billing_address,omitempty"`
	RiskSignals    []RiskSignal      `json:"risk_signals"`
	Metadata       map[string]string `json:"metadata"`
}

// LogValue keeps the card's secrets out of logs.
func (r DelegatePaymentRequest) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("payment_method", r.PaymentMethod),
		slog.Int64("max_amount", r.Allowance.MaxAmount),
		slog.String("currency", r.Allowance.Currency),
		slog.String("checkout_session_id", r.Allowance.CheckoutSessionID),
	)
}

// DelegatePaymentResponse is the PSP's answer: ID is the vault token.
type DelegatePaymentResponse struct {
	ID       string            `json:"id"`
	Created  string            `json:"created"`
	Metadata map[string]string `json:"metadata"`
}

// Delegate payment error codes (the delegate API's Error.code enum).
const (
	DelegateInvalidCard            = "invalid_card"
	DelegateDuplicateRequest       = "duplicate_request"
	DelegateIdempotencyConflict    = "idempotency_conflict"
	DelegateTooManyRequests        = "too_many_requests"
	DelegateIdempotencyKeyRequired = "idempotency_key_required"
	DelegateIdempotencyInFlight    = "idempotency_in_flight"
)
