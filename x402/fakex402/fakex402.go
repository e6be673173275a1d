// Package fakex402 is a fake x402 (version 2) resource server, facilitator
// and token contract for tests and demos: it prices resources with
// PAYMENT-REQUIRED, verifies a PAYMENT-SIGNATURE for real (the EIP-712
// signature recovers authorization.from, amount, payTo, time window, nonce
// unused), "settles" by recording the authorization in an in-memory chain
// state keyed by (network, asset, from, nonce) — at most once, as the
// token contract's authorizationState would — and answers the resource
// with PAYMENT-RESPONSE. Nothing touches a real chain.
//
// Each resource has a scenario (see [Scenario]) so a client can be tested
// against refusals, a price change, lost answers and unknown outcomes;
// [Server.AuthorizationState] (also served over HTTP, read by
// [ChainClient]) is the chain reader a client resolves those with.
package fakex402

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// Scenario is how a resource behaves.
type Scenario string

// The scenarios. Every one answers an unpaid request with 402 and
// PAYMENT-REQUIRED (after SlowDelay for ScenarioSlow), and refuses a
// payload that does not verify with 402 and PAYMENT-REQUIRED whose error
// is the specification's invalid reason; they differ in what a valid
// payment gets.
const (
	// ScenarioPaid settles and answers 200 with the resource and
	// PAYMENT-RESPONSE. The default.
	ScenarioPaid Scenario = "paid"
	// ScenarioRefused settles nothing: 402 with PAYMENT-REQUIRED (error
	// insufficient_funds) and a PAYMENT-RESPONSE of success false.
	ScenarioRefused Scenario = "refused"
	// ScenarioPriceChanged raises the price (to PriceFactor times the
	// amount) once its first 402 is served: a payment signed at the old
	// price gets 402 with the new requirements (error
	// invalid_exact_evm_payload_authorization_value_mismatch), nothing
	// settled; one signed at the new price is paid.
	ScenarioPriceChanged Scenario = "price-changed"
	// ScenarioSettleThenDrop settles, then closes the connection without
	// answering: the money moved and the client never hears of it.
	ScenarioSettleThenDrop Scenario = "settle-then-drop"
	// ScenarioSlow is ScenarioPaid after waiting SlowDelay on the clock
	// (Options.After) before every answer, 402s included.
	ScenarioSlow Scenario = "slow"
	// ScenarioUnknownOutcome settles, then answers 500 without
	// PAYMENT-RESPONSE: the client cannot tell whether it paid; the chain
	// reader says it did.
	ScenarioUnknownOutcome Scenario = "unknown-outcome"
	// ScenarioErrorUnsettled answers 503 without settling: the client
	// cannot tell either; the chain reader says nothing moved (and after
	// validBefore, that nothing ever will).
	ScenarioErrorUnsettled Scenario = "error-unsettled"
)

// Scenarios lists every scenario.
var Scenarios = []Scenario{ScenarioPaid, ScenarioRefused, ScenarioPriceChanged, ScenarioSettleThenDrop,
	ScenarioSlow, ScenarioUnknownOutcome, ScenarioErrorUnsettled}

// Defaults of [Options].
const (
	DefaultNetwork      = "eip155:84532"                               // Base Sepolia
	DefaultAsset        = "0x036CbD53842c5426634e7929541eC2318f3dCF7e" // USDC on Base Sepolia
	DefaultTokenName    = "USDC"
	DefaultTokenVersion = "2"
	DefaultAmount       = "10000" // 0.01 USDC (6 decimals)
	DefaultMaxTimeout   = 60      // seconds
	DefaultSlowDelay    = 50 * time.Millisecond
	DefaultPriceFactor  = 2
)

// DefaultPayTo is the fake's own recipient: the last 20 bytes of
// keccak256("fakex402 payTo"), an address no one holds a key for.
var DefaultPayTo = func() evm.Address {
	h := evm.Keccak256([]byte("fakex402 payTo"))
	return evm.Address(h[12:])
}()

// Resource is a priced path.
type Resource struct {
	Path        string // "/paid"; matched exactly
	Amount      string // base units of the asset; default DefaultAmount
	Scenario    Scenario
	Body        []byte // default a small JSON document naming the path
	MimeType    string // default application/json
	Description string
}

// Options configure [New]. The zero value serves one resource per
// scenario at "/<scenario>".
type Options struct {
	Network      string      // CAIP-2; default DefaultNetwork
	Asset        evm.Address // the token; default DefaultAsset
	PayTo        evm.Address // default DefaultPayTo
	TokenName    string      // the token's EIP-712 name; default DefaultTokenName
	TokenVersion string      // its EIP-712 version; default DefaultTokenVersion
	// MaxTimeoutSeconds is offered in every requirement; default 60.
	MaxTimeoutSeconds int64
	// Resources are the priced paths; default one per scenario.
	Resources []Resource
	// BaseURL prefixes a path to make resource.url; default
	// "http://" + the request's Host.
	BaseURL string
	// Now is the clock verification reads; default time.Now.
	Now func() time.Time
	// After is the clock ScenarioSlow waits on; default time.After.
	After func(time.Duration) <-chan time.Time
	// SlowDelay is ScenarioSlow's wait; default DefaultSlowDelay.
	SlowDelay time.Duration
	// PriceFactor multiplies ScenarioPriceChanged's price; default 2.
	PriceFactor int64
	// ReplaySettled makes a resent payment whose authorization is already
	// settled answer 200 again with the same PAYMENT-RESPONSE, as a
	// resource server that remembers its payments would. By default it is
	// refused as the token contract refuses a used nonce: 402 with
	// errorReason invalid_transaction_state.
	ReplaySettled bool
}

// DefaultResources is one resource per scenario at "/<scenario>", each at
// DefaultAmount.
func DefaultResources() []Resource {
	out := make([]Resource, 0, len(Scenarios))
	for _, sc := range Scenarios {
		out = append(out, Resource{Path: "/" + string(sc), Scenario: sc})
	}
	return out
}

// Settlement is one authorization the fake chain executed.
type Settlement struct {
	Network       string
	Asset         evm.Address
	Authorization evm.TransferWithAuthorization
	Transaction   string // 0x and 64 hex digits, derived from the authorization
	Path          string // the resource paid for; "" through the facilitator API
	At            time.Time
}

// Server is the fake. It is safe for concurrent use.
type Server struct {
	opts Options

	mu        sync.Mutex // guards the fields below
	resources map[string]*resourceState
	chain     map[chainKey]*Settlement
	order     []*Settlement
}

type resourceState struct {
	Resource
	raised   bool // ScenarioPriceChanged: the first 402 was served
	requests int
}

type chainKey struct {
	network string
	asset   evm.Address
	from    evm.Address
	nonce   [32]byte
}

// New returns a fake with nothing settled. It panics on a resource whose
// amount is not a decimal uint256 or whose path is given twice.
func New(opts *Options) *Server {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Network == "" {
		o.Network = DefaultNetwork
	}
	if o.Asset == (evm.Address{}) {
		o.Asset, _ = evm.ParseAddress(DefaultAsset)
	}
	if o.PayTo == (evm.Address{}) {
		o.PayTo = DefaultPayTo
	}
	if o.TokenName == "" {
		o.TokenName = DefaultTokenName
	}
	if o.TokenVersion == "" {
		o.TokenVersion = DefaultTokenVersion
	}
	if o.MaxTimeoutSeconds == 0 {
		o.MaxTimeoutSeconds = DefaultMaxTimeout
	}
	if o.Resources == nil {
		o.Resources = DefaultResources()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.SlowDelay == 0 {
		o.SlowDelay = DefaultSlowDelay
	}
	if o.PriceFactor == 0 {
		o.PriceFactor = DefaultPriceFactor
	}
	s := &Server{opts: o, resources: map[string]*resourceState{}, chain: map[chainKey]*Settlement{}}
	for _, r := range o.Resources {
		if r.Amount == "" {
			r.Amount = DefaultAmount
		}
		if _, err := x402.ParseUint256(r.Amount); err != nil {
			panic("fakex402: resource " + r.Path + ": " + err.Error())
		}
		if r.Scenario == "" {
			r.Scenario = ScenarioPaid
		}
		if !slices.Contains(Scenarios, r.Scenario) {
			panic("fakex402: resource " + r.Path + ": unknown scenario " + string(r.Scenario))
		}
		if r.MimeType == "" {
			r.MimeType = "application/json"
		}
		if r.Body == nil {
			r.Body, _ = json.Marshal(map[string]any{"resource": r.Path, "paid": true})
		}
		if _, dup := s.resources[r.Path]; dup {
			panic("fakex402: resource " + r.Path + " given twice")
		}
		s.resources[r.Path] = &resourceState{Resource: r}
	}
	return s
}

// Network, Asset and PayTo are what the fake's requirements offer.
func (s *Server) Network() string    { return s.opts.Network }
func (s *Server) Asset() evm.Address { return s.opts.Asset }
func (s *Server) PayTo() evm.Address { return s.opts.PayTo }

// Resources lists the priced paths, sorted.
func (s *Server) Resources() []string { return slices.Sorted(maps.Keys(s.resources)) }

// Requirements is the offer path currently gets (after a price change, the
// raised one), or false for a path the fake does not serve.
func (s *Server) Requirements(path string) (x402.PaymentRequirements, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs, ok := s.resources[path]
	if !ok {
		return x402.PaymentRequirements{}, false
	}
	return s.requirementsLocked(rs), true
}

func (s *Server) requirementsLocked(rs *resourceState) x402.PaymentRequirements {
	amount := rs.Amount
	if rs.raised {
		n, _ := x402.ParseUint256(amount)
		amount = new(big.Int).Mul(n, big.NewInt(s.opts.PriceFactor)).String()
	}
	name, _ := json.Marshal(s.opts.TokenName)
	ver, _ := json.Marshal(s.opts.TokenVersion)
	return x402.PaymentRequirements{Scheme: x402.SchemeExact, Network: s.opts.Network, Amount: amount,
		Asset: s.opts.Asset.String(), PayTo: s.opts.PayTo.String(), MaxTimeoutSeconds: s.opts.MaxTimeoutSeconds,
		Extra: map[string]json.RawMessage{"name": name, "version": ver}}
}

// Requests is how many requests reached path, paid or not.
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs, ok := s.resources[path]; ok {
		return rs.requests
	}
	return 0
}

// Settlements is every settlement in the order the fake chain executed
// them: a test asserts exactly-once with it.
func (s *Server) Settlements() []Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Settlement, len(s.order))
	for i, st := range s.order {
		out[i] = *st
	}
	return out
}

// AuthorizationState is the fake token contract's
// authorizationState(authorizer, nonce) on network at asset: whether the
// authorization was settled. It implements x402.ChainReader.
func (s *Server) AuthorizationState(ctx context.Context, network string, asset, authorizer evm.Address, nonce [32]byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, used := s.chain[chainKey{network, asset, authorizer, nonce}]
	return used, nil
}

var _ x402.ChainReader = (*Server)(nil)

// Verify is the facilitator's /verify: [x402.VerifyExactEVM] at the
// fake's clock, and the nonce unused.
func (s *Server) Verify(p x402.PaymentPayload, r x402.PaymentRequirements) x402.VerifyResponse {
	payer, auth, err := x402.VerifyExactEVM(p, r, s.opts.Now())
	if err != nil {
		return x402.VerifyResponse{InvalidReason: reasonOf(err), Payer: p.Payload.Authorization.From}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, used := s.chain[chainKey{r.Network, mustAddress(r.Asset), auth.From, auth.Nonce}]; used {
		return x402.VerifyResponse{InvalidReason: ReasonUsed, Payer: payer.String()}
	}
	return x402.VerifyResponse{IsValid: true, Payer: payer.String()}
}

// ReasonUsed is the errorReason of an authorization whose nonce is
// already used (§9's invalid_transaction_state: the token contract would
// revert).
const ReasonUsed = "invalid_transaction_state"

// Settle is the facilitator's /settle: it verifies, then executes the
// authorization on the fake chain, once.
func (s *Server) Settle(p x402.PaymentPayload, r x402.PaymentRequirements) x402.SettlementResponse {
	st, _, err := s.settle(p, r, "")
	if err != nil {
		return x402.SettlementResponse{ErrorReason: reasonOf(err), Payer: p.Payload.Authorization.From, Network: r.Network}
	}
	return st
}

// settle verifies and settles; replay says the authorization was already
// settled, identically, and ReplaySettled answers it again.
func (s *Server) settle(p x402.PaymentPayload, r x402.PaymentRequirements, path string) (x402.SettlementResponse, bool, error) {
	now := s.opts.Now()
	payer, auth, err := x402.VerifyExactEVM(p, r, now)
	if err != nil {
		return x402.SettlementResponse{}, false, err
	}
	x, _ := x402.ParseExactEVM(r) // verified above
	digest, _ := auth.Digest(x.Domain)
	key := chainKey{r.Network, x.Asset, auth.From, auth.Nonce}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, used := s.chain[key]; used {
		pd, _ := prev.Authorization.Digest(x.Domain)
		if s.opts.ReplaySettled && pd == digest {
			return x402.SettlementResponse{Success: true, Payer: payer.String(), Transaction: prev.Transaction, Network: r.Network}, true, nil
		}
		return x402.SettlementResponse{}, false, &x402.VerifyError{Reason: ReasonUsed, Detail: "authorization nonce already used"}
	}
	tx := evm.Keccak256([]byte("fakex402/tx\x00"), digest[:])
	st := &Settlement{Network: r.Network, Asset: x.Asset, Authorization: auth, Transaction: "0x" + hex.EncodeToString(tx[:]), Path: path, At: now}
	s.chain[key] = st
	s.order = append(s.order, st)
	return x402.SettlementResponse{Success: true, Payer: payer.String(), Transaction: st.Transaction, Network: r.Network, Amount: auth.Value.String()}, false, nil
}

func reasonOf(err error) string {
	var ve *x402.VerifyError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return x402.ReasonInvalidPayload
}

func mustAddress(s string) evm.Address {
	a, _ := evm.ParseAddress(s)
	return a
}

// Handler serves the fake:
//
//	<resource path>                      any method: the priced resource
//	POST /facilitator/verify             §7.1
//	POST /facilitator/settle             §7.2
//	GET  /facilitator/supported          §7.3
//	GET  /chain/authorization-state      ?network=&asset=&authorizer=&nonce= → {"used":bool}
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /facilitator/verify", s.serveVerify)
	mux.HandleFunc("POST /facilitator/settle", s.serveSettle)
	mux.HandleFunc("GET /facilitator/supported", s.serveSupported)
	mux.HandleFunc("GET /chain/authorization-state", s.serveAuthorizationState)
	mux.HandleFunc("/", s.serveResource)
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) serveResource(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rs, ok := s.resources[r.URL.Path]
	if ok {
		rs.requests++
	}
	var res Resource
	if ok {
		res = rs.Resource
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if res.Scenario == ScenarioSlow {
		select {
		case <-s.opts.After(s.opts.SlowDelay):
		case <-r.Context().Done():
			return
		}
	}
	resource := x402.ResourceInfo{URL: s.resourceURL(r), Description: res.Description, MimeType: res.MimeType}

	header := r.Header.Get(x402.HeaderPaymentSignature)
	if header == "" {
		s.mu.Lock()
		req := s.requirementsLocked(rs)
		if res.Scenario == ScenarioPriceChanged {
			rs.raised = true
		}
		s.mu.Unlock()
		s.paymentRequired(w, http.StatusPaymentRequired, resource, req, "PAYMENT-SIGNATURE header is required", nil)
		return
	}
	req, _ := s.Requirements(res.Path)
	p, err := x402.DecodePaymentPayload(header)
	if err != nil {
		s.paymentRequired(w, http.StatusBadRequest, resource, req, x402.ReasonInvalidPayload+": "+err.Error(), nil)
		return
	}
	switch res.Scenario {
	case ScenarioRefused:
		if _, _, err := x402.VerifyExactEVM(p, req, s.opts.Now()); err != nil {
			s.refuse(w, resource, req, p, err)
			return
		}
		s.paymentRequired(w, http.StatusPaymentRequired, resource, req, "insufficient_funds",
			&x402.SettlementResponse{ErrorReason: "insufficient_funds", Payer: p.Payload.Authorization.From, Network: req.Network})
		return
	case ScenarioErrorUnsettled:
		http.Error(w, "facilitator unavailable", http.StatusServiceUnavailable)
		return
	}
	st, replay, err := s.settle(p, req, res.Path)
	if err != nil {
		s.refuse(w, resource, req, p, err)
		return
	}
	if !replay {
		switch res.Scenario {
		case ScenarioSettleThenDrop:
			drop(w)
			return
		case ScenarioUnknownOutcome:
			http.Error(w, "settlement outcome unknown", http.StatusInternalServerError)
			return
		}
	}
	h, err := x402.EncodeSettlementResponse(st)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(x402.HeaderPaymentResponse, h)
	w.Header().Set("Content-Type", res.MimeType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(res.Body)
}

// refuse answers a payment that did not verify or settle: 402 with the
// current requirements, whose error is the reason, and a PAYMENT-RESPONSE
// of success false.
func (s *Server) refuse(w http.ResponseWriter, resource x402.ResourceInfo, req x402.PaymentRequirements, p x402.PaymentPayload, err error) {
	reason := reasonOf(err)
	s.paymentRequired(w, http.StatusPaymentRequired, resource, req, reason,
		&x402.SettlementResponse{ErrorReason: reason, Payer: p.Payload.Authorization.From, Network: req.Network})
}

func (s *Server) paymentRequired(w http.ResponseWriter, status int, resource x402.ResourceInfo, req x402.PaymentRequirements, msg string, sr *x402.SettlementResponse) {
	h, err := x402.EncodePaymentRequired(x402.PaymentRequired{X402Version: x402.Version, Error: msg, Resource: resource,
		Accepts: []x402.PaymentRequirements{req}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set(x402.HeaderPaymentRequired, h)
	if sr != nil {
		if rh, err := x402.EncodeSettlementResponse(*sr); err == nil {
			w.Header().Set(x402.HeaderPaymentResponse, rh)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("{}"))
}

// drop closes the connection without an answer: hijacked on HTTP/1, the
// stream aborted on HTTP/2.
func drop(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func (s *Server) resourceURL(r *http.Request) string {
	base := s.opts.BaseURL
	if base == "" {
		base = "http://" + r.Host
	}
	return strings.TrimSuffix(base, "/") + r.URL.Path
}

// facilitatorRequest reads a /verify or /settle body as strictly as the
// headers: the payload through x402.DecodePaymentPayload.
func facilitatorRequest(r *http.Request) (x402.PaymentPayload, x402.PaymentRequirements, error) {
	var body struct {
		X402Version         int             `json:"x402Version"`
		PaymentPayload      json.RawMessage `json:"paymentPayload"`
		PaymentRequirements json.RawMessage `json:"paymentRequirements"`
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, 64<<10)); err != nil {
		return x402.PaymentPayload{}, x402.PaymentRequirements{}, err
	}
	if err := json.Unmarshal(buf.Bytes(), &body); err != nil {
		return x402.PaymentPayload{}, x402.PaymentRequirements{}, err
	}
	if body.X402Version != x402.Version {
		return x402.PaymentPayload{}, x402.PaymentRequirements{}, fmt.Errorf("x402Version %d", body.X402Version)
	}
	p, err := x402.DecodePaymentPayload(base64.StdEncoding.EncodeToString(body.PaymentPayload))
	if err != nil {
		return p, x402.PaymentRequirements{}, err
	}
	var req x402.PaymentRequirements
	if err := json.Unmarshal(body.PaymentRequirements, &req); err != nil {
		return p, req, err
	}
	return p, req, nil
}

func (s *Server) serveVerify(w http.ResponseWriter, r *http.Request) {
	p, req, err := facilitatorRequest(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, x402.VerifyResponse{InvalidReason: x402.ReasonInvalidPayload})
		return
	}
	writeJSON(w, http.StatusOK, s.Verify(p, req))
}

func (s *Server) serveSettle(w http.ResponseWriter, r *http.Request) {
	p, req, err := facilitatorRequest(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, x402.SettlementResponse{ErrorReason: x402.ReasonInvalidPayload, Network: s.opts.Network})
		return
	}
	writeJSON(w, http.StatusOK, s.Settle(p, req))
}

func (s *Server) serveSupported(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"kinds":      []map[string]any{{"x402Version": x402.Version, "scheme": x402.SchemeExact, "network": s.opts.Network}},
		"extensions": []string{},
		"signers":    map[string][]string{},
	})
}

func (s *Server) serveAuthorizationState(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	asset, err1 := evm.ParseAddress(q.Get("asset"))
	from, err2 := evm.ParseAddress(q.Get("authorizer"))
	nonce, err3 := x402.ParseNonce(q.Get("nonce"))
	if err := errors.Join(err1, err2, err3); err != nil || q.Get("network") == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprint("network, asset, authorizer and nonce are required: ", err)})
		return
	}
	used, err := s.AuthorizationState(r.Context(), q.Get("network"), asset, from, nonce)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"used": used})
}
