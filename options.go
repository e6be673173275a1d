package countersign

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/metrics"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// Options configures a [Node]. The zero value of every field is its
// default, said in its comment; only RecordKey and OperatorKeys are
// required. Open clones the Options (slices and maps are copied), so the
// caller may reuse them.
type Options struct {
	// RecordKey signs the record's checkpoints. Required. Keep it secret:
	// whoever holds it can sign a record.
	RecordKey ed25519.PrivateKey
	// Origin names the record in its checkpoints. Default
	// "countersign.local/record/" followed by the first 8 hex digits of
	// the SHA-256 of the record's public key.
	Origin string
	// BaseURL is the node's public base URL: operator signatures cover
	// it, problem types and links start with it. Default
	// "http://127.0.0.1:8080".
	BaseURL string
	// Sandbox marks a node for trying things out: the HTTP surface says so
	// in its answers, outbound URLs may be loopback and http, and webhook
	// endpoints may be http on loopback. Default false (production).
	Sandbox bool

	// OperatorKeys are the public keys of the people who approve, refund,
	// freeze and erase: they verify Svc-Operator signatures and sign
	// mandates. Required, at least one.
	OperatorKeys []operator.PublicKey

	// Rails settle payments. Default none: every payment is denied for
	// want of a rail (the sandbox's fake rails are in settle/fake).
	Rails []settle.Rail
	// Pay tunes the money path.
	Pay PayOptions

	// Merchants are the merchants purchases can be made from, besides
	// those operators register at run time. Default none.
	Merchants []commerce.MerchantConfig
	// Connect builds the client of a merchant an operator registers.
	// Default: none, and registration is refused.
	Connect func(context.Context, commerce.MerchantSpec) (cart.Merchant, error)
	// URLs is the guard of every outbound URL (merchants,
	// counterparties). Default: the production policy (https to public
	// addresses only), or, with Sandbox, loopback and http allowed too.
	URLs *netguard.Policy
	// HTTPClient fetches counterparties' disclosures. Default: a client
	// guarded by URLs with a 10 s timeout and no redirects.
	HTTPClient *http.Client
	// SealKey (32 bytes) seals the secrets the node keeps to use again:
	// webhook signing secrets and merchant credentials. Default: none,
	// and webhook endpoints and merchant credentials cannot be stored.
	SealKey []byte

	// X402 configures paying for HTTP resources that ask for x402
	// payment (POST /x402/fetch, Node.X402Transport).
	X402 X402Options

	// Identity configures the node's Agent Disclosure Protocol identity.
	Identity IdentityOptions
	// Memory configures the bi-temporal memory.
	Memory MemoryOptions
	// Webhook configures delivery of events to registered endpoints.
	Webhook WebhookOptions
	// Protocol configures the protocol surface.
	Protocol ProtocolOptions
	// RateLimit limits agent and unauthenticated requests.
	RateLimit RateLimitOptions

	// Replicas configures nodes that share one store with others (a
	// store implementing store.Watcher, such as store/pgstore).
	Replicas ReplicaOptions

	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the node's own faults and notices. Default
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, receives requests, commits, deliveries, the
	// record stream and refusals. Default none: nothing is measured.
	Metrics *metrics.Metrics
	// Provision, when set, runs once the record is open and has the
	// system.started entry, before anything else is built: the place to
	// issue agent credentials a deployment starts with (the reference
	// server's sandbox issues its agents' here, so they precede the
	// identity's entries in the record). An error fails Open.
	Provision func(ctx context.Context, keys *auth.Keys) error
	// StartData, when set, is recorded with the node's system.started
	// entry (what the embedding program wants the record to say about
	// this start: its version, its configuration). Default: the origin,
	// base URL and mode only.
	StartData map[string]any
}

// PayOptions tunes the money path (package pay).
type PayOptions struct {
	// DenyPayees and DenyAgents are refused whatever a mandate says.
	// Default none.
	DenyPayees, DenyAgents []string
	// BreakerAfter trips the circuit breaker after this many consecutive
	// settlement failures. Default 5.
	BreakerAfter int64
	// ApprovalWindow is how long a held payment waits for a person.
	// Default 24 h.
	ApprovalWindow time.Duration
	// IdempotencyRetention is how long an outcome is kept for replay.
	// Default 7 days.
	IdempotencyRetention time.Duration
	// RailTimeout bounds one call to a rail. On a store other processes
	// share, a payment left settling by an attempt that never answered
	// is resumed only twice this long after it began settling (the
	// attempt may be running in another process). Default 30 s.
	RailTimeout time.Duration
}

// IdentityOptions configures the node's ADP identity (package identity).
type IdentityOptions struct {
	// Keys are the identity's Ed25519 keys, the current one among them.
	// Default: one key derived from RecordKey, so a node reopened on its
	// store is the same identity. A deployment that rotates passes every
	// key it has had, and a NewKey that keeps the new one.
	Keys []ed25519.PrivateKey
	// NewKey makes (and keeps) the next key of a rotation. Default: a
	// fresh key kept only in memory, so a node that rotated must be given
	// its keys to open again.
	NewKey func(context.Context) (ed25519.PrivateKey, error)
	// Rotated, when set, is called after a rotation committed (the
	// reference server republishes its public identity file).
	Rotated func(*identity.Service)
	// OperatorID is the deploying party's stable id, disclosed to
	// counterparties. Default "sandbox-operator".
	OperatorID string
	// DeniabilityBoundary is disclosed as the operator's. Default "".
	DeniabilityBoundary string
	// SystemPrompt and PromptVersion are disclosed as a digest. Default
	// none.
	SystemPrompt  []byte
	PromptVersion string
	// Policy tightens how counterparties' disclosures are verified.
	// Default: identity's defaults.
	Policy identity.Policy
	// TTL is how long a disclosure is valid. Default: identity's.
	TTL time.Duration
	// HexAgentID rewrites, once and irreversibly, an agent id stored in
	// its did:key form (an identity created before hex became the
	// default) to the same key in hex, the form every ADP verifier
	// accepts (identity.Options.HexAgentID). Default false: the stored
	// form is kept.
	HexAgentID bool
}

// X402Options configures x402 fetches (package x402/fetch).
type X402Options struct {
	// Wallet signs the EIP-3009 authorizations: keep it like the record
	// key (a file of mode 0600); it is never stored, recorded or logged.
	// Default none: a resource that asks for payment is refused
	// x402.not_configured, and nothing is signed.
	Wallet *evm.Key
	// Assets are the tokens the deployment pays with, each pinned to its
	// network, contract, EIP-712 domain and worth. Default none.
	Assets []x402.Asset
	// MaxTimeout caps an offer's maxTimeoutSeconds, and so how long a
	// signed authorization stays valid after a kill switch. Default 5 min.
	MaxTimeout time.Duration
	// Chain answers whether an expired authorization was used. Default
	// none: such a payment waits on the operator's settling list.
	Chain x402.ChainReader
	// Finality is how long after an authorization's validBefore the
	// chain's answer is trusted. Default 2 min.
	Finality time.Duration
	// ClockSkew is how far this machine's clock may run ahead of the
	// chain's: an unused authorization counts as expired only once the
	// local clock is past validBefore + Finality + ClockSkew, so that a
	// clock running ahead never declines a payment the chain would still
	// execute. Default 10 min (x402.DefaultClockSkew); it cannot be
	// switched off.
	ClockSkew time.Duration
}

// MemoryOptions configures the memory (package memory).
type MemoryOptions struct {
	// UntrustedSourceKinds are the source kinds whose records are tainted
	// on arrival. Default none.
	UntrustedSourceKinds []string
}

// WebhookOptions configures webhook delivery (package webhook).
type WebhookOptions struct {
	// Schedule is the retry schedule. Default: webhook's.
	Schedule []time.Duration
	// OnDelivery, when set, is told each attempt's outcome.
	OnDelivery func(state string)
}

// ProtocolOptions configures the protocol surface (package protocol).
type ProtocolOptions struct {
	// Evidence are the keys evidence classes are checked against.
	// Default none: only self evidence is admitted.
	Evidence protocol.EvidenceKeys
	// Insurance is the premium schedule. Default protocol's.
	Insurance protocol.InsuranceSchedule
	// ScheduleEvery is how often due holds, meters, sessions and stakes
	// are swept. Default 15 s.
	ScheduleEvery time.Duration
}

// ReplicaOptions configures a node whose store other nodes share (the
// store implements store.Watcher). Several such nodes behave as one
// service: the record, idempotency, nonces, budgets and the kill switch
// are read and written in the store's serializable transactions; the
// background work runs on one node at a time under leases in the store;
// each node follows the others' commits for its record streams. Rate
// limits stay per node. See docs/design/replicas.md.
type ReplicaOptions struct {
	// LeaseTTL is how long a lease on background work lasts without
	// renewal: the longest a dead node's work waits for another to take
	// it over. Its holder renews every third of it and stops its work a
	// third before it ends, which bounds the clock skew the nodes may
	// have. Default 15 s.
	LeaseTTL time.Duration
	// FollowEvery is how often a node looks for the others' commits even
	// without the store's signal. Default 2 s.
	FollowEvery time.Duration
}

// RateLimitOptions limits requests at the HTTP surface.
type RateLimitOptions struct {
	// AgentRate and AgentBurst are each agent key's bucket (requests per
	// second, burst). Default: auth's defaults.
	AgentRate  float64
	AgentBurst int
	// AddrRate and AddrBurst are each client address's bucket for
	// requests without a credential and refused operator requests that
	// prove no identity. Default: auth's defaults.
	AddrRate  float64
	AddrBurst int
}

// clone copies o deeply enough that the caller's later changes do not
// reach the node.
func (o *Options) clone() Options {
	if o == nil {
		return Options{}
	}
	c := *o
	c.RecordKey = slices.Clone(o.RecordKey)
	c.OperatorKeys = slices.Clone(o.OperatorKeys)
	c.Rails = slices.Clone(o.Rails)
	c.Merchants = slices.Clone(o.Merchants)
	c.SealKey = slices.Clone(o.SealKey)
	c.Pay.DenyPayees = slices.Clone(o.Pay.DenyPayees)
	c.Pay.DenyAgents = slices.Clone(o.Pay.DenyAgents)
	c.Identity.Keys = slices.Clone(o.Identity.Keys)
	c.Identity.SystemPrompt = slices.Clone(o.Identity.SystemPrompt)
	c.Memory.UntrustedSourceKinds = slices.Clone(o.Memory.UntrustedSourceKinds)
	c.Webhook.Schedule = slices.Clone(o.Webhook.Schedule)
	c.X402.Assets = slices.Clone(o.X402.Assets)
	if o.URLs != nil {
		u := *o.URLs
		c.URLs = &u
	}
	if o.StartData != nil {
		c.StartData = make(map[string]any, len(o.StartData))
		for k, v := range o.StartData {
			c.StartData[k] = v
		}
	}
	return c
}

// LogValue shows the options without their secrets (the record key, the
// seal key, the identity's keys), so that logging them leaks nothing.
func (o Options) LogValue() slog.Value {
	keyIDs := make([]string, len(o.OperatorKeys))
	for i, k := range o.OperatorKeys {
		keyIDs[i] = k.KeyID
	}
	return slog.GroupValue(
		slog.Bool("recordKey", len(o.RecordKey) > 0),
		slog.String("origin", o.Origin),
		slog.String("baseURL", o.BaseURL),
		slog.Bool("sandbox", o.Sandbox),
		slog.Any("operatorKeys", keyIDs),
		slog.Int("rails", len(o.Rails)),
		slog.Int("merchants", len(o.Merchants)),
		slog.Bool("sealKey", len(o.SealKey) > 0),
		slog.Bool("x402Wallet", o.X402.Wallet != nil),
		slog.Int("x402Assets", len(o.X402.Assets)),
		slog.Int("identityKeys", len(o.Identity.Keys)),
		slog.String("operatorId", o.Identity.OperatorID),
	)
}
