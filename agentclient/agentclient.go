// Package agentclient is an agent's side of the Countersign HTTP API: what
// a careful client does before it sends a request. It completes payment
// instructions, purchases and protocol spends the way the reference CLI
// and the MCP server both do (the rail's facts, the credential kind, the
// envelope), signs them with the agent's Ed25519 key, and sends requests
// with the agent credential, as a Bearer token or bound to a DPoP key
// (RFC 9449) with a fresh proof per request.
//
// One piece of code for one piece of logic: cmd/countersign (pay, buy,
// protocol) and package mcpserver use these functions rather than their
// own copies.
package agentclient

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/x402/fetch"
)

// MaxResponseBytes bounds the body [Agent.Do] reads from an answer.
const MaxResponseBytes = 4 << 20

// Agent is one agent as a client: its key, its credential and its
// mandates, and the server it talks to. Fields are read, never written, by
// its methods, so an Agent may be shared by goroutines once set up.
type Agent struct {
	// BaseURL is the server's public base URL (no trailing slash needed).
	// DPoP proofs name BaseURL + path as their htu, so it must be the URL
	// the server knows itself by (its --base-url).
	BaseURL string
	// HTTPClient sends the requests; nil is http.DefaultClient. An
	// in-process node is reached through [HandlerTransport].
	HTTPClient *http.Client
	// Key is the agent's Ed25519 private key: it signs instructions,
	// purchases and spends. Its public key, in hex, is the agent id.
	Key ed25519.PrivateKey
	// Credential is the agent credential (svc_ak_...).
	Credential string
	// DPoPKey, when set, is the key the credential is bound to: every
	// request then carries "Authorization: DPoP" and a proof signed by it,
	// and instructions declare terms.credential "dpop".
	DPoPKey crypto.Signer
	// Mandate is the payment mandate (compact JWS) instructions are sent
	// under; MemoryMandate the memory mandate memory requests carry.
	Mandate       string
	MemoryMandate string
	// Tags, when set, is sent as X-Svc-Tags (usage attribution).
	Tags string
	// UserAgent, when set, is sent as User-Agent.
	UserAgent string
}

// ID returns the agent id: the hex of the public key, or "" without a key.
func (a *Agent) ID() string {
	if len(a.Key) != ed25519.PrivateKeySize {
		return ""
	}
	return hex.EncodeToString(a.Key.Public().(ed25519.PublicKey))
}

// CredentialKind is the terms.credential an instruction of this agent
// declares: dpop when its credential is DPoP-bound, api-key otherwise.
func (a *Agent) CredentialKind() gate.Credential {
	if a.DPoPKey != nil {
		return gate.CredentialDPoP
	}
	return gate.CredentialAPIKey
}

// RailFacts are the reversibility and finality of the rails a sandbox
// deployment registers (sandbox-card, sandbox-bank, sandbox-chain) and of
// the merchant rails (acp, ucp: a purchase cannot be reversed by the rail).
// A client that names one of these rails need not spell its facts out.
var RailFacts = map[string]struct {
	Reversibility gate.Reversibility
	Finality      gate.Finality
}{
	"sandbox-card":  {gate.Reversible, gate.FinalityInstant},
	"sandbox-bank":  {gate.Reversible, gate.FinalityDeferred},
	"sandbox-chain": {gate.Irreversible, gate.FinalityInstant},
	"acp":           {gate.Irreversible, gate.FinalityInstant},
	"ucp":           {gate.Irreversible, gate.FinalityInstant},
	"x402":          {gate.Irreversible, gate.FinalityInstant},
}

// FillTerms completes terms as a careful client does: the rail's facts
// from [RailFacts] (reversible and instant for a rail it does not know),
// cred as the credential kind, the payer's own capital, delegated
// presence. Only empty fields are filled; what the caller set is kept, and
// the gate judges it.
func FillTerms(t *pay.Terms, cred gate.Credential) {
	facts, known := RailFacts[t.Rail]
	if !known {
		facts.Reversibility, facts.Finality = gate.Reversible, gate.FinalityInstant
	}
	if t.Reversibility == "" {
		t.Reversibility = facts.Reversibility
	}
	if t.Finality == "" {
		t.Finality = facts.Finality
	}
	if t.Credential == "" {
		t.Credential = cred
	}
	if t.CapitalSource == "" {
		t.CapitalSource = gate.CapitalPayer
	}
	if t.Presence == "" {
		t.Presence = gate.PresenceDelegated
	}
}

// NewIdempotencyKey returns a fresh random idempotency key (32 hex
// digits), for a call that is not a retry of an earlier one.
func NewIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// CompleteInstruction fills what an instruction may leave to the client:
// an idempotency key (random when empty), purpose (when empty), currency
// USD, rail sandbox-card, the terms ([FillTerms]) and the envelope's agent
// and mandate (the Agent's). It does not sign.
func (a *Agent) CompleteInstruction(in *pay.Instruction, purpose string) {
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = NewIdempotencyKey()
	}
	if in.Purpose == "" {
		in.Purpose = purpose
	}
	if in.Amount.Currency == "" {
		in.Amount.Currency = "USD"
	}
	if in.Terms.Rail == "" {
		in.Terms.Rail = "sandbox-card"
	}
	FillTerms(&in.Terms, a.CredentialKind())
	in.Envelope.Agent = a.ID()
	if in.Envelope.Mandate == "" {
		in.Envelope.Mandate = a.Mandate
	}
}

var errNoKey = errors.New("agentclient: the agent has no Ed25519 key to sign with")

// SignPayment completes in ([Agent.CompleteInstruction]) and signs it for
// POST /pay.
func (a *Agent) SignPayment(in *pay.Instruction, purpose string) error {
	if len(a.Key) != ed25519.PrivateKeySize {
		return errNoKey
	}
	a.CompleteInstruction(in, purpose)
	return pay.SignInstruction(in, a.Key)
}

// SignSpend completes in and signs it as the spend of a protocol method
// (e.g. "hold.place"): a spend is signed for the method it is sent to.
func (a *Agent) SignSpend(method string, in *pay.Instruction) error {
	if len(a.Key) != ed25519.PrivateKeySize {
		return errNoKey
	}
	a.CompleteInstruction(in, method+" by agent "+shortID(a.ID()))
	return protocol.SignSpend(method, in, a.Key)
}

// SignPurchase completes p (idempotency key when empty, the rail's terms,
// the envelope's mandate) and signs it for POST /buy.
func (a *Agent) SignPurchase(p *commerce.PurchaseRequest, purpose string) error {
	if len(a.Key) != ed25519.PrivateKeySize {
		return errNoKey
	}
	if p.IdempotencyKey == "" {
		p.IdempotencyKey = NewIdempotencyKey()
	}
	if p.Purpose == "" {
		p.Purpose = purpose
	}
	if p.Terms.Rail == "" {
		p.Terms.Rail = p.Rail
	}
	FillTerms(&p.Terms, a.CredentialKind())
	if p.Envelope.Mandate == "" {
		p.Envelope.Mandate = a.Mandate
	}
	p.Envelope.Agent = a.ID()
	return commerce.SignPurchase(p, a.Key)
}

// SignFetch completes r (idempotency key when empty, purpose, the x402
// rail's terms, bodyDigest of its body when left out, the envelope's
// mandate) and signs it for POST /x402/fetch.
func (a *Agent) SignFetch(r *fetch.Request, purpose string) error {
	if len(a.Key) != ed25519.PrivateKeySize {
		return errNoKey
	}
	if r.IdempotencyKey == "" {
		r.IdempotencyKey = NewIdempotencyKey()
	}
	if r.Purpose == "" {
		r.Purpose = purpose
	}
	if r.Terms.Rail == "" {
		r.Terms.Rail = fetch.RailName
	}
	if r.BodyDigest == "" && r.Body != "" {
		body, err := base64.StdEncoding.DecodeString(r.Body)
		if err != nil {
			return fmt.Errorf("agentclient: body: %w", err)
		}
		r.BodyDigest = fetch.BodyDigest(body)
	}
	FillTerms(&r.Terms, a.CredentialKind())
	if r.Envelope.Mandate == "" {
		r.Envelope.Mandate = a.Mandate
	}
	r.Envelope.Agent = a.ID()
	return fetch.Sign(r, a.Key)
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Response is an answer as received.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Replayed reports whether the server answered an earlier request's
// outcome again (Idempotent-Replayed: true).
func (r *Response) Replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

// Problem is an RFC 9457 problem as Countersign answers it: the standard
// members, the stable code and the action a client should take.
type Problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Code       string `json:"code"`
	Action     string `json:"action"`
	RequestID  string `json:"requestId"`
	RetryAfter int    `json:"retryAfter"`
	// Members is the whole problem object, every member included
	// (errors, intentId, reasons, ...).
	Members map[string]any `json:"-"`
}

// Problem decodes r's body as a problem when r is a 4xx or 5xx answer
// with a problem body; ok is false otherwise.
func (r *Response) Problem() (p *Problem, ok bool) {
	if r.Status < 400 {
		return nil, false
	}
	p = new(Problem)
	if json.Unmarshal(r.Body, p) != nil || json.Unmarshal(r.Body, &p.Members) != nil || p.Code == "" {
		return nil, false
	}
	return p, true
}

// Request is one request to send with [Agent.Do].
type Request struct {
	Method string
	// Path is the route path with its wildcards filled in (each value
	// escaped by the caller, e.g. with url.PathEscape).
	Path  string
	Query url.Values
	// IdempotencyKey, when set, is sent as Idempotency-Key.
	IdempotencyKey string
	// Body, when set, is sent as application/json.
	Body []byte
	// Accept, when set, is sent as Accept.
	Accept string
}

// Do sends req with the agent's credential and reads the answer (at most
// [MaxResponseBytes]). A problem is an answer, not an error: err is only
// for a request that could not be made or read.
func (a *Agent) Do(ctx context.Context, req Request) (*Response, error) {
	resp, err := a.Open(ctx, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes))
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// Open sends req like [Agent.Do] and returns the response unread, for a
// stream (the record's Server-Sent Events); the caller closes its body.
func (a *Agent) Open(ctx context.Context, req Request) (*http.Response, error) {
	base := strings.TrimRight(a.BaseURL, "/")
	u := base + req.Path
	if len(req.Query) > 0 {
		u += "?" + req.Query.Encode()
	}
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, u, body)
	if err != nil {
		return nil, err
	}
	if req.Body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.Accept != "" {
		hr.Header.Set("Accept", req.Accept)
	}
	if req.IdempotencyKey != "" {
		hr.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	if a.Tags != "" {
		hr.Header.Set("X-Svc-Tags", a.Tags)
	}
	if a.UserAgent != "" {
		hr.Header.Set("User-Agent", a.UserAgent)
	}
	if err := a.authorize(hr, base+req.Path); err != nil {
		return nil, err
	}
	c := a.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	return c.Do(hr)
}

// authorize sets the credential: Bearer, or DPoP with a proof for this
// request (htu without query, as RFC 9449 wants).
func (a *Agent) authorize(r *http.Request, htu string) error {
	if a.Credential == "" {
		return nil
	}
	if a.DPoPKey == nil {
		r.Header.Set("Authorization", "Bearer "+a.Credential)
		return nil
	}
	proof, err := auth.NewDPoPProof(a.DPoPKey, r.Method, htu, a.Credential, time.Now())
	if err != nil {
		return fmt.Errorf("agentclient: %w", err)
	}
	r.Header.Set("Authorization", "DPoP "+a.Credential)
	r.Header.Set("DPoP", proof)
	return nil
}
