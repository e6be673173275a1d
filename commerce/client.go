package commerce

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// Client is an agent's side of commerce in-process: it holds the agent's
// key, mandate and credential, signs each purchase the way the HTTP API
// expects, and calls the same [Service] the reference server runs, so an
// agent runtime embedding Countersign buys exactly as a remote agent does
// (same gate, record, idempotency and settlement). It is safe for
// concurrent use.
type Client struct {
	svc      *Service
	key      ed25519.PrivateKey
	mandate  string
	caller   pay.Caller
	template pay.Terms
}

// ClientOptions configure [NewClient].
type ClientOptions struct {
	// AgentKey signs purchases (required); Mandate is the operator-signed
	// mandate it buys under (required).
	AgentKey ed25519.PrivateKey
	Mandate  string
	// KeyID names the agent credential the purchases are attributed to in
	// the record (default "in-process").
	KeyID string
	// Credential is the kind of credential the terms declare: api-key
	// (default) or dpop.
	Credential gate.Credential
	// Presence and CapitalSource of the terms. Defaults: delegated, payer.
	Presence      gate.Presence
	CapitalSource gate.CapitalSource
}

// NewClient returns a client buying through svc.
func NewClient(svc *Service, o ClientOptions) (*Client, error) {
	if svc == nil || len(o.AgentKey) != ed25519.PrivateKeySize || o.Mandate == "" {
		return nil, errors.New("commerce: NewClient needs a service, an Ed25519 agent key and a mandate")
	}
	if o.KeyID == "" {
		o.KeyID = "in-process"
	}
	if o.Credential == "" {
		o.Credential = gate.CredentialAPIKey
	}
	if o.Presence == "" {
		o.Presence = gate.PresenceDelegated
	}
	if o.CapitalSource == "" {
		o.CapitalSource = gate.CapitalPayer
	}
	agent := hex.EncodeToString(o.AgentKey.Public().(ed25519.PublicKey))
	return &Client{svc: svc, key: o.AgentKey, mandate: o.Mandate,
		caller: pay.Caller{KeyID: o.KeyID, Agents: []string{agent}, Credential: o.Credential},
		template: pay.Terms{Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: o.Credential, CapitalSource: o.CapitalSource, Presence: o.Presence}}, nil
}

// Quote asks the merchant for a priced cart; it moves no money.
func (c *Client) Quote(ctx context.Context, q QuoteRequest) (Quoted, error) {
	return c.svc.Quote(ctx, c.caller, q, "")
}

// Buy buys the cart q describes (cartID: a quoted cart, or "" for a new
// checkout session) under idempotencyKey, for purpose. The terms are the
// commerce rails' facts. A repeat with the same key and request answers
// the first outcome.
func (c *Client) Buy(ctx context.Context, q QuoteRequest, cartID, idempotencyKey, purpose string) (*BuyResult, error) {
	terms := c.template
	terms.Rail = q.Rail
	p := PurchaseRequest{QuoteRequest: q, CartID: cartID, IdempotencyKey: idempotencyKey, Purpose: purpose,
		Terms: terms, Envelope: pay.Envelope{Mandate: c.mandate}}
	if err := SignPurchase(&p, c.key); err != nil {
		return nil, fmt.Errorf("commerce: buy: %w", err)
	}
	return c.svc.Buy(ctx, c.caller, p, "", "")
}
