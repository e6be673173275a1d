package httpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/product"
)

// DefaultMaxBodyBytes is the request body limit when Config.MaxBodyBytes
// is zero: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// AuditLog is what the server reads the record through. An *audit.Log
// satisfies it.
type AuditLog interface {
	// Page returns up to limit entries after cursor ("" for the start).
	Page(ctx context.Context, cursor string, limit int) (audit.Page, error)
	// Get returns the entry with sequence number seq.
	Get(ctx context.Context, seq uint64) (audit.Entry, error)
	// Checkpoint returns the latest signed tree head.
	Checkpoint(ctx context.Context) (audit.Checkpoint, error)
	// Inclusion proves entry seq is in the tree of treeSize entries; a
	// treeSize of 0 means the latest checkpoint.
	Inclusion(ctx context.Context, seq, treeSize uint64) (audit.InclusionProof, error)
	// Consistency proves tree size from is a prefix of tree size to; a to
	// of 0 means the latest checkpoint.
	Consistency(ctx context.Context, from, to uint64) (audit.ConsistencyProof, error)
}

// Principal is the authenticated agent credential of a request.
type Principal struct {
	// KeyID is the agent key id ("ak_...").
	KeyID string
	// Agents are the agent ids (64 lowercase hex Ed25519 public keys) the
	// credential may act for.
	Agents []string
	// DPoP is true when the credential was presented with a DPoP proof.
	DPoP bool
	// RateLimit overrides the default bucket for this credential.
	RateLimit *auth.Limit
}

// Authenticator checks the agent credential of a request. It must return
// an error with a stable code (auth.missing, auth.invalid, rate_limited,
// see [Config]) for a request it refuses; any other error is answered as
// an internal error.
type Authenticator interface {
	AuthenticateAgent(r *http.Request) (Principal, error)
}

// Operator is the person whose signature opened an operator operation.
type Operator struct {
	// KeyID is the operator key id ("op-alice").
	KeyID string
}

// OperatorVerifier checks the Svc-Operator signature of a request.
// operationID is the operation's id as served in /openapi.json and body the
// raw request body (nil when the operation takes none), both covered by
// the signature. It must return an error with code operator.unauthorized
// for a request it refuses.
type OperatorVerifier interface {
	VerifyOperator(r *http.Request, operationID string, body []byte) (Operator, error)
}

// Config configures [New]. Fields marked required must be set; the zero
// value of every other field is a documented default.
type Config struct {
	// BaseURL is the public base URL of the server, e.g.
	// "https://pay.example.com" (required). Problem types are
	// BaseURL/problems/{code}; the OpenAPI document names it as its server.
	BaseURL string
	// Sandbox opens agent operations without a credential when no
	// Authenticator is set. Without Sandbox an Authenticator is required.
	Sandbox bool
	// Logger receives rejected requests at Debug and the server's own
	// faults at Error. Default slog.Default().
	Logger *slog.Logger
	// Model is the contract the routes are built from. Default
	// product.Model().
	Model *contract.Model
	// Now is the clock, used to mint request ids. Default time.Now.
	Now func() time.Time
	// MaxBodyBytes limits request bodies. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Audit is the record (required).
	Audit AuditLog
	// AuditHub serves the live record stream, audit.stream. Nil: that
	// operation answers 500. Streams never go idle, so http.Server.Shutdown
	// waits for them until the hub is closed: close it when shutdown starts
	// (http.Server.RegisterOnShutdown), and the streams end cleanly.
	AuditHub *audit.Hub
	// Authenticator checks agent credentials. Nil: agent operations are
	// open in Sandbox mode, and New fails otherwise.
	Authenticator Authenticator
	// Operators verifies operator signatures. Nil: every operator operation
	// answers 401 operator.unauthorized.
	Operators OperatorVerifier
	// Payments is the money path. Nil: payment operations answer 500
	// (a server built without it must not pretend to take payments).
	Payments Payments
	// Operations are the operator's actions on the money path. Nil: those
	// operations answer 500.
	Operations Operations
	// AgentKeys manages agent credentials for the operator. Nil: those
	// operations answer 500.
	AgentKeys AgentKeys
	// Limiter rate-limits agent requests per key (X-RateLimit-* headers,
	// 429 rate_limited). Nil: no limit.
	Limiter *auth.Limiter
	// AddrLimiter rate-limits unauthenticated requests per client address.
	// Nil: no limit.
	AddrLimiter *auth.Limiter
	// Usage counts authenticated requests for GET /usage. Nil: usage.get
	// answers 500 and nothing is counted.
	Usage *auth.Usage
	// Webhooks manages webhook endpoints and WebhookDeliveries their
	// deliveries. Nil: those operations answer 500.
	Webhooks          Webhooks
	WebhookDeliveries WebhookDeliveries
	// Identity is the deployment's ADP identity: disclosure, handshake,
	// verification, resolution. Nil: those operations answer 500.
	Identity Identity
	// Commerce quotes and buys from merchants. Nil: those operations
	// answer 500.
	Commerce Commerce
	// X402 pays for HTTP resources that ask for x402 payment. Nil:
	// x402.fetch answers 500.
	X402 X402
	// Protocol is the generated method surface. Nil: its operations
	// answer 500.
	Protocol Protocol
	// Memory is the bi-temporal memory store. Nil: those operations
	// answer 500.
	Memory Memory
	// Metrics observes every request: its operation, status and
	// duration. Nil: nothing is observed and requests pay nothing for it.
	// The server never serves the metrics itself: they are for the
	// operator, on a listener of their own (see package metrics).
	Metrics Metrics
}

// errNoOperatorKeys answers operator operations on a server without an
// operator verifier.
var errNoOperatorKeys = errcode.New(contract.CodeOperatorUnauthorized,
	"httpserver: this server has no operator keys configured, so no operator signature can be accepted")

type server struct {
	model      *contract.Model
	log        *slog.Logger
	now        func() time.Time
	baseURL    string
	maxBody    int64
	sandbox    bool
	audit      AuditLog
	auditHub   *audit.Hub
	auth       Authenticator
	operators  OperatorVerifier
	payments   Payments
	operations Operations
	agentKeys  AgentKeys
	limiter    *auth.Limiter
	addrLimit  *auth.Limiter
	usage      *auth.Usage
	webhooks   Webhooks
	deliveries WebhookDeliveries
	identity   Identity
	commerce   Commerce
	x402       X402
	memory     Memory
	protocol   Protocol
	metrics    *observers // nil without Config.Metrics

	mux      *http.ServeMux
	openapi  []byte
	asyncapi []byte
	etag     string
	entropy  io.Reader // safe for concurrent use
	pageTmpl *template.Template
}

// New returns the handler of the reference server. It fails when a
// required field is missing, when Sandbox is off and no Authenticator is
// set (a production server must not serve the record to anyone), or when
// the model and the server's handlers disagree about the operations.
func New(cfg Config) (http.Handler, error) {
	s, err := newServer(cfg, nil)
	if err != nil {
		return nil, err // not s: a nil *server in an interface is not nil
	}
	return s, nil
}

// newServer is New with extra endpoints for operations a test model adds.
func newServer(cfg Config, extra map[string]endpoint) (*server, error) {
	s := &server{
		model: cfg.Model, log: cfg.Logger, now: cfg.Now, maxBody: cfg.MaxBodyBytes,
		sandbox: cfg.Sandbox, audit: cfg.Audit, auditHub: cfg.AuditHub, auth: cfg.Authenticator, operators: cfg.Operators,
		payments: cfg.Payments, operations: cfg.Operations, agentKeys: cfg.AgentKeys,
		limiter: cfg.Limiter, addrLimit: cfg.AddrLimiter, usage: cfg.Usage,
		webhooks: cfg.Webhooks, deliveries: cfg.WebhookDeliveries, identity: cfg.Identity, commerce: cfg.Commerce, x402: cfg.X402,
		memory: cfg.Memory, protocol: cfg.Protocol,
	}
	if s.model == nil {
		s.model = product.Model()
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.maxBody < 0 {
		return nil, fmt.Errorf("httpserver: MaxBodyBytes %d is negative", s.maxBody)
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("httpserver: BaseURL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	s.baseURL = base
	if s.audit == nil {
		return nil, errors.New("httpserver: Config.Audit is required")
	}
	if !s.sandbox && s.auth == nil {
		return nil, errors.New("httpserver: outside sandbox mode an Authenticator is required; refusing to serve agent operations without credentials")
	}
	s.entropy = &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(rand.Reader, 0)}
	if cfg.Metrics != nil {
		s.metrics = newObservers(cfg.Metrics)
	}

	doc, err := s.model.OpenAPI(s.baseURL)
	if err != nil {
		return nil, fmt.Errorf("httpserver: %w", err)
	}
	s.openapi = doc
	sum := sha256.Sum256(doc)
	s.etag = `"` + hex.EncodeToString(sum[:16]) + `"`
	if s.asyncapi, err = s.model.AsyncAPI(s.baseURL); err != nil {
		return nil, fmt.Errorf("httpserver: %w", err)
	}
	s.pageTmpl, err = template.New("problem").Parse(problemPageHTML)
	if err != nil {
		return nil, fmt.Errorf("httpserver: problem page template: %w", err)
	}

	eps := s.endpoints()
	for id, ep := range extra {
		if _, dup := eps[id]; dup {
			return nil, fmt.Errorf("httpserver: endpoint %s bound twice", id)
		}
		eps[id] = ep
	}
	if err := s.route(eps); err != nil {
		return nil, err
	}
	return s, nil
}

// route binds every operation to its endpoint on a new ServeMux and checks
// that both sides agree on ids and types.
func (s *server) route(eps map[string]endpoint) error {
	var errs []error
	s.mux = http.NewServeMux()
	bound := make(map[string]bool)
	for _, op := range s.model.Operations() {
		ep, ok := eps[op.ID]
		if !ok {
			errs = append(errs, fmt.Errorf("operation %s has no handler", op.ID))
			continue
		}
		bound[op.ID] = true
		if err := ep.agrees(op); err != nil {
			errs = append(errs, fmt.Errorf("operation %s: %w", op.ID, err))
			continue
		}
		pattern := op.Method + " " + op.Path
		s.mux.Handle(pattern, s.operationHandler(op, ep))
		if s.metrics != nil {
			s.metrics.byPattern[pattern] = s.metrics.src.RequestObserver(op.ID)
		}
	}
	var orphans []string
	for id := range eps {
		if !bound[id] {
			orphans = append(orphans, id)
		}
	}
	sort.Strings(orphans)
	for _, id := range orphans {
		errs = append(errs, fmt.Errorf("handler %s has no operation in the model", id))
	}
	if len(errs) > 0 {
		return fmt.Errorf("httpserver: model and handlers disagree: %w", errors.Join(errs...))
	}
	return nil
}

// endpoint is the handler side of one operation. Exactly one of json and
// raw is set.
type endpoint struct {
	params, body reflect.Type // decoded input; nil for none
	result       reflect.Type // JSON success type, for json endpoints
	json         func(ctx context.Context, params, body any) (any, error)
	raw          func(w http.ResponseWriter, r *http.Request, params any) error
}

type (
	noParams struct{}
	noBody   struct{}
)

func inputType[T, none any]() reflect.Type {
	if t := reflect.TypeFor[T](); t != reflect.TypeFor[none]() {
		return t
	}
	return nil
}

// jsonEndpoint binds fn, which answers the operation's first success
// response as JSON. P and B are the operation's Params and Body types, or
// noParams and noBody.
func jsonEndpoint[P, B, R any](fn func(ctx context.Context, p *P, b *B) (R, error)) endpoint {
	return endpoint{
		params: inputType[P, noParams](),
		body:   inputType[B, noBody](),
		result: reflect.TypeFor[R](),
		json: func(ctx context.Context, p, b any) (any, error) {
			return fn(ctx, p.(*P), b.(*B))
		},
	}
}

// rawEndpoint binds fn, which writes its own success response (content
// negotiation, bytes that are not a Go value).
func rawEndpoint[P any](fn func(w http.ResponseWriter, r *http.Request, p *P) error) endpoint {
	return endpoint{
		params: inputType[P, noParams](),
		raw: func(w http.ResponseWriter, r *http.Request, p any) error {
			return fn(w, r, p.(*P))
		},
	}
}

func (ep endpoint) agrees(op contract.Operation) error {
	if ep.params != op.Params {
		return fmt.Errorf("handler decodes params %v, the contract declares %v", ep.params, op.Params)
	}
	if ep.raw == nil && ep.body != op.Body {
		return fmt.Errorf("handler decodes body %v, the contract declares %v", ep.body, op.Body)
	}
	if ep.json != nil {
		r := op.Responses[0]
		if len(r.Content) == 0 || r.Content[0].MediaType != contract.MediaJSON || r.Content[0].Type != ep.result {
			return fmt.Errorf("handler returns %v, the contract's first response is not JSON of that type", ep.result)
		}
	}
	return nil
}

// operationHandler is the per-operation pipeline: credential, body,
// parameters, call, answer.
func (s *server) operationHandler(op contract.Operation, ep endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &reqState{tags: auth.ParseTags(strings.Join(r.Header.Values(contract.HeaderSvcTags), ","))}
		r = r.WithContext(context.WithValue(r.Context(), reqStateKey{}, st))
		if err := s.serveOperation(w, r, op, ep); err != nil {
			s.writeError(w, r, err)
		}
		s.countUsage(r, op, st)
	})
}

// asOperator reports whether a request to op is the operator's: op takes
// only an operator signature, or takes either credential and the request
// carries the Svc-Operator header (present at all, even empty). The
// signature then alone decides it; an agent credential beside it is not
// looked at, so a bad signature is never rescued by a bearer token.
func asOperator(op contract.Operation, r *http.Request) bool {
	switch op.Credential {
	case contract.CredentialOperator:
		return true
	case contract.CredentialAgentOrOperator:
		return len(r.Header.Values(operator.HeaderName)) > 0
	}
	return false
}

func (s *server) serveOperation(w http.ResponseWriter, r *http.Request, op contract.Operation, ep endpoint) error {
	byOperator := asOperator(op, r)
	switch {
	case byOperator:
		if s.operators == nil {
			return errNoOperatorKeys
		}
	case op.Credential.AcceptsAgent():
		if s.auth != nil {
			p, err := s.auth.AuthenticateAgent(r)
			if err != nil {
				return err
			}
			r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
			if st := stateFrom(r.Context()); st != nil {
				st.principal = &p
			}
			if err := s.take(w, s.limiter, p.KeyID, p.RateLimit); err != nil {
				return err
			}
		}
	case op.Credential == contract.CredentialNone:
		if err := s.take(w, s.addrLimit, clientAddr(r), nil); err != nil {
			return err
		}
	}

	var raw []byte
	if op.Body != nil {
		if !byOperator && !isJSONContentType(r.Header.Get("Content-Type")) {
			return errUnsupportedMediaType
		}
		var err error
		if raw, err = io.ReadAll(r.Body); err != nil {
			return fmt.Errorf("httpserver: read body: %w", err)
		}
		r.Body = bodyReader(raw)
	}
	if byOperator {
		o, err := s.operators.VerifyOperator(r, op.ID, raw)
		if err != nil {
			// A refusal that proves no identity spends the caller's
			// address bucket, as an unauthenticated request does: a flood
			// of unsigned operator requests meets 429, and signed ones
			// from the same address are not slowed by anyone else's.
			var ue *operator.UnauthorizedError
			if errors.As(err, &ue) && !ue.Reason.IdentifiesKey() {
				if lerr := s.take(w, s.addrLimit, clientAddr(r), nil); lerr != nil {
					return lerr
				}
			}
			return err
		}
		r = r.WithContext(context.WithValue(r.Context(), operatorKey{}, o))
		// The body had to be read to check the signature over it; its media
		// type is checked only now, so an unsigned request learns nothing
		// but 401.
		if op.Body != nil && !isJSONContentType(r.Header.Get("Content-Type")) {
			return errUnsupportedMediaType
		}
	}

	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return &contract.ValidationError{Errors: []contract.FieldError{{
			Rule: "syntax", Message: "the query string is not valid percent-encoded name=value pairs"}}}
	}
	src := contract.ParamSource{Path: r.PathValue, Query: query, Header: r.Header}
	params := any(&noParams{})
	if op.Params != nil {
		pv := reflect.New(op.Params).Interface()
		if err := contract.DecodeParams(pv, src); err != nil {
			return err
		}
		if err := s.model.Validate(pv); err != nil {
			return err
		}
		params = pv
	} else if err := contract.DecodeParams(&noParams{}, src); err != nil {
		return err // a query parameter the operation does not declare
	}
	if ep.raw != nil {
		return ep.raw(w, r, params)
	}
	body := any(&noBody{})
	if op.Body != nil {
		bv := reflect.New(op.Body).Interface()
		if err := s.model.DecodeJSON(bytes.NewReader(raw), bv); err != nil {
			return err
		}
		body = bv
	}
	res, err := ep.json(r.Context(), params, body)
	if err != nil {
		return err
	}
	return s.writeJSON(w, op.Responses[0].Status, res)
}

var errUnsupportedMediaType = errcode.New(contract.CodeRequestUnsupportedMediaType,
	"httpserver: request bodies must be sent with Content-Type: application/json")

type (
	requestIDKey struct{}
	principalKey struct{}
	operatorKey  struct{}
)

// RequestID returns the request id the server assigned to the request
// whose context ctx is (the X-Request-Id echoed on its response), or "" for
// a context that did not come from this package.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// PrincipalFrom returns the agent credential that authenticated the
// request, if an Authenticator did.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// OperatorFrom returns the operator whose signature opened the request.
func OperatorFrom(ctx context.Context) (Operator, bool) {
	o, ok := ctx.Value(operatorKey{}).(Operator)
	return o, ok
}
