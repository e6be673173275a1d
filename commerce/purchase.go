package commerce

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/pay"
)

// PurchaseType is the "typ" header of an agent's purchase signature, so a
// purchase signature can never pass for a payment instruction's and back.
const PurchaseType = "svc-purchase+jws"

// QuoteRequest is the body of POST /quote.
type QuoteRequest struct {
	Rail        string             `json:"rail" validate:"required,oneof=acp ucp" doc:"acp or ucp: the protocol the merchant is reached over."`
	Merchant    string             `json:"merchant" validate:"required,max=64" doc:"The merchant's registry id."`
	Currency    string             `json:"currency" validate:"required,len=3,uppercase" doc:"ISO 4217 code, e.g. USD."`
	Lines       []cart.LineRequest `json:"lines" validate:"required,min=1,max=100,dive" doc:"What to buy: at least one line."`
	Email       string             `json:"email,omitempty" validate:"omitempty,max=320,email" doc:"The buyer's e-mail, passed to the merchant."`
	Address     *cart.Address      `json:"address,omitempty" doc:"Fulfilment address, passed to the merchant."`
	Fulfillment string             `json:"fulfillmentOption,omitempty" validate:"omitempty,max=128" doc:"A fulfilment option id the merchant offered."`
	Discounts   []string           `json:"discountCodes,omitempty" validate:"max=10,dive,max=64" doc:"Discount codes to apply."`
}

// PurchaseRequest is the body of POST /buy: the quote's fields, the
// idempotency key, purpose, terms and the agent's envelope. There is no
// amount: the gate authorises the cart's priced total.
type PurchaseRequest struct {
	QuoteRequest
	// CartID, when set, buys that checkout session (from /quote) after
	// re-reading it; otherwise a session is created for the lines.
	CartID         string       `json:"cartId,omitempty" validate:"omitempty,max=256" doc:"The cart id /quote returned; omit to open a new checkout session for the lines."`
	IdempotencyKey string       `json:"idempotencyKey" validate:"required,max=255,printascii" doc:"Unique per agent key on /buy (a separate namespace from /pay)."`
	Purpose        string       `json:"purpose" validate:"required,max=500" doc:"Why, shown to the person who approves."`
	Terms          pay.Terms    `json:"terms" doc:"How the money moves; terms.rail is acp or ucp, as rail."`
	Envelope       pay.Envelope `json:"envelope" doc:"Agent, mandate, and the agent's signature (typ svc-purchase+jws) over the RFC 8785 form of this request without envelope.signature."`
}

// signingView is a purchase without its signature.
type signingView struct {
	QuoteRequest
	CartID         string    `json:"cartId,omitempty"`
	IdempotencyKey string    `json:"idempotencyKey"`
	Purpose        string    `json:"purpose"`
	Terms          pay.Terms `json:"terms"`
	Envelope       struct {
		Agent   string `json:"agent"`
		Mandate string `json:"mandate"`
	} `json:"envelope"`
}

// SigningBytes returns what a purchase signature covers: the RFC 8785
// canonical JSON of the request without envelope.signature.
func SigningBytes(p *PurchaseRequest) ([]byte, error) {
	v := signingView{QuoteRequest: p.QuoteRequest, CartID: p.CartID, IdempotencyKey: p.IdempotencyKey,
		Purpose: p.Purpose, Terms: p.Terms}
	v.Envelope.Agent, v.Envelope.Mandate = p.Envelope.Agent, p.Envelope.Mandate
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("commerce: signing bytes: %w", err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("commerce: signing bytes: %w", err)
	}
	return c, nil
}

// SignPurchase signs p with the agent's key: it sets envelope.agent (when
// empty) and envelope.signature.
func SignPurchase(p *PurchaseRequest, agentKey ed25519.PrivateKey) error {
	if err := pay.SignEnvelope(&p.Envelope, agentKey, PurchaseType, func() ([]byte, error) { return SigningBytes(p) }); err != nil {
		return fmt.Errorf("commerce: sign purchase: %w", err)
	}
	return nil
}

// digest is the idempotency digest of a purchase as the agent sent it.
func digest(signed []byte, p *PurchaseRequest) string {
	return pay.SignedDigest(signed, p.Envelope.Signature)
}

// cartDigest commits to a priced cart as read, for the record: the
// SHA-256 of its JSON as this server serves it (a Cart has no maps, so
// encoding/json writes it deterministically).
func cartDigest(c *cart.Cart) string {
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
