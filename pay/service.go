package pay

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// Errors of Pay that are not outcomes. Check with errors.Is; each carries a
// stable code through its Code method.
var (
	// ErrFrozen: the kill switch is engaged; nothing settles. Nothing is
	// stored under the idempotency key, so the same request can be sent
	// again after the operator releases the switch.
	ErrFrozen = errcode.New(CodeFrozen, "pay: settlement is frozen by the operator's kill switch")
	// ErrRailUnavailable: the rail did not give a definite answer. The
	// intent stays settling; sending the same request again (same
	// idempotency key) finishes it, and so does the reconciler.
	ErrRailUnavailable = errcode.New(CodeRailUnavailable, "pay: the rail did not answer definitely; the payment is still settling")
	// ErrIdempotencyConflict: the key was used with a different instruction.
	ErrIdempotencyConflict = errcode.New(CodeIdempotencyConflict, "pay: idempotency key already used for a different instruction")
	// ErrInFlight: the first request with this key is still being processed.
	ErrInFlight = errcode.New(CodeInFlight, "pay: a request with this idempotency key is still in flight")
	// ErrKeyMismatch: the Idempotency-Key header differs from the
	// instruction's idempotencyKey.
	ErrKeyMismatch = errcode.New(CodeKeyMismatch, "pay: Idempotency-Key header does not match the instruction's idempotencyKey")
	// ErrIntentNotFound: no intent with that id for this agent key.
	ErrIntentNotFound = errcode.New(CodeIntentNotFound, "pay: no such intent")
)

// Caller is the authenticated agent key a request came with.
type Caller struct {
	// KeyID is the agent key id ("ak_...").
	KeyID string
	// Agents are the agent ids the key may act for.
	Agents []string
	// Credential is how the key was presented ("api-key" or "dpop"); the
	// gate checks it against the instruction's terms. Empty skips that
	// check (in-process callers with no credential at all).
	Credential gate.Credential
	// Tags are the request's usage tags (X-Svc-Tags), kept on the intents
	// it creates so economics can group by them. They do not take part in
	// idempotency.
	Tags []string
}

func (c Caller) mayActFor(agent string) bool {
	for _, a := range c.Agents {
		if a == agent {
			return true
		}
	}
	return false
}

// Options configure a Service. Store, Log, Rails and Mandates are required.
type Options struct {
	Store    store.Store
	Log      *audit.Log
	Rails    *settle.Registry
	Mandates *MandateVerifier
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the service's own faults. Default slog.Default().
	Logger *slog.Logger
	// Rand is the source of approval challenges. Default crypto/rand.
	Rand io.Reader
	// DenyPayees and DenyAgents are refused whatever a mandate says.
	DenyPayees, DenyAgents []string
	// BreakerAfter trips the circuit breaker after this many consecutive
	// settlement failures, or consecutive denials of one mandate.
	// Default gate.DefaultBreakerAfter (5).
	BreakerAfter int64
	// ApprovalWindow is how long a held payment waits for approval.
	// Default 24 h.
	ApprovalWindow time.Duration
	// IdempotencyRetention is how long an outcome is kept for replay.
	// Default 7 days.
	IdempotencyRetention time.Duration
	// RailTimeout bounds one rail call. Default 30 s.
	RailTimeout time.Duration
	// SharedStore says that other processes pay through the same store
	// (replicas of one service). A request's claim on an intent is then
	// not enough to know that nobody is settling it: a payment found
	// settling is resumed (by a replay of its request, or by Reconcile)
	// only once its first attempt, which may be running in another
	// process, has answered or can no longer be running (RailTimeout,
	// and as long again for the processes' clocks, since it began
	// settling). Until then a replay answers ErrInFlight.
	SharedStore bool
	// BaseURL prefixes the links of intents ("" gives relative links).
	BaseURL string
	// Extensions join the money path (see [Extension]): New attaches each,
	// in order, before it returns. Default none.
	Extensions []Extension
	// PolicyDigest returns the digest of a policy, which every gate
	// decision records so that a proof of enforcement can tie a decision
	// to the policy it was made under (the reference node passes the
	// disclosed constitution's digest, identity.GateConstitution). New
	// calls it once, on [Service.Policy] after every extension attached:
	// the policy does not change while a Service lives. Default: none,
	// and decisions record no policy hash.
	PolicyDigest func(Policy) string
}

// Extension is a package that joins the money path: it keeps its own
// books on the intents of its routes (Effects, run inside the
// transactions that change them), checks the terms an instruction cites
// (Terms), or brings rails (a merchant's checkout is a rail). Such a
// package also pays through the Service, so the two need each other: the
// cycle is real, and this interface is where it is broken. [New] hands
// the Service under construction to each extension's Attach, once, in
// the order of Options.Extensions, and installs what it returns before
// New returns; nothing is installed later. Attach may keep the Service
// and read it ([Service.Policy], [Service.Mandates]) but must not pay
// through it before New returns.
type Extension interface {
	Attach(s *Service, b *Books) (Attachment, error)
}

// ExtensionFunc is a function used as an [Extension]: for a program that
// builds, inside the attach, what needs the money path first (the
// reference node opens the identity, which discloses the gate's policy,
// then the protocol surface, which signs with that identity).
type ExtensionFunc func(s *Service, b *Books) (Attachment, error)

// Attach calls f(s, b).
func (f ExtensionFunc) Attach(s *Service, b *Books) (Attachment, error) { return f(s, b) }

// Attachment is what an [Extension] brings to the money path.
type Attachment struct {
	// Rails are registered in Options.Rails; the gate's policy knows
	// their facts from then on.
	Rails []settle.Rail
	// Effects keep the extension's books on the intents of its routes. A
	// route may have one effect in all.
	Effects map[Route]Effect
	// Terms checks the terms an instruction cites; at most one extension
	// brings it. Without one, an instruction citing terms is denied
	// terms.unknown.
	Terms TermsGate
}

// Service runs payments: it verifies instructions, asks the gate, records
// every decision and state change in the same transaction that makes it,
// and settles through the rails with a crash-safe two-phase protocol.
//
// # Settlement is two-phase
//
// Transaction 1 records the decision, reserves the amount against the
// mandate's period cap and moves the intent to settling. Then the rail is
// called with the intent id as its idempotency key. Transaction 2 records
// the outcome: settled with a Receipt, or failed (the reservation is
// released). A rail answer of unknown outcome never becomes failed: the
// intent stays settling until a Lookup (by a retry with the same
// idempotency key, or by [Service.Reconcile] at start-up) says what
// happened. On any doubt, no money moves and nothing is reported settled.
//
// It is safe for concurrent use.
type Service struct {
	st       store.Store
	log      *audit.Log
	rails    *settle.Registry
	mandates *MandateVerifier
	now      func() time.Time
	logger   *slog.Logger
	rand     io.Reader
	policy   gate.Policy
	window   time.Duration
	retain   time.Duration
	railTO   time.Duration
	shared   bool // Options.SharedStore
	baseURL  string

	mu      sync.Mutex          // guards running
	running map[string]struct{} // intents this process is settling right now

	known sync.Map // mandate ids durably stored under keyMandate; see rememberMandate

	lists seqlist.Migration // of the held and settling lists; see migrateLists

	effects effects // per-route effects; see Extension

	policyHash string // see Options.PolicyDigest; set by New
}

// PolicyHash returns the digest of the policy every gate decision records
// (Options.PolicyDigest of [Service.Policy]), or "" without one.
func (s *Service) PolicyHash() string { return s.policyHash }

// New returns a Service. Call [Service.Reconcile] once after New (the
// reference server does) to finish payments a crash left settling.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Log == nil || opts.Rails == nil || opts.Mandates == nil {
		return nil, errors.New("pay: Options.Store, Log, Rails and Mandates are required")
	}
	o := opts
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.BreakerAfter == 0 {
		o.BreakerAfter = gate.DefaultBreakerAfter
	}
	if o.ApprovalWindow <= 0 {
		o.ApprovalWindow = 24 * time.Hour
	}
	if o.IdempotencyRetention <= 0 {
		o.IdempotencyRetention = 7 * 24 * time.Hour
	}
	if o.RailTimeout <= 0 {
		o.RailTimeout = 30 * time.Second
	}
	s := &Service{
		st: o.Store, log: o.Log, rails: o.Rails, mandates: o.Mandates,
		now: o.Now, logger: o.Logger, rand: o.Rand,
		window: o.ApprovalWindow, retain: o.IdempotencyRetention, railTO: o.RailTimeout,
		baseURL: o.BaseURL, running: map[string]struct{}{}, shared: o.SharedStore,
	}
	if err := s.buildPolicy(o); err != nil {
		return nil, err
	}
	for i, ext := range o.Extensions {
		if ext == nil {
			return nil, fmt.Errorf("pay: Options.Extensions[%d] is nil", i)
		}
		att, err := ext.Attach(s, &Books{s: s})
		if err != nil {
			return nil, fmt.Errorf("pay: attaching extension %d (%T): %w", i, ext, err)
		}
		if err := s.install(att); err != nil {
			return nil, fmt.Errorf("pay: extension %d (%T): %w", i, ext, err)
		}
		if len(att.Rails) > 0 {
			// The next extension, and the gate, see the new rails' facts.
			if err := s.buildPolicy(o); err != nil {
				return nil, err
			}
		}
	}
	if o.PolicyDigest != nil {
		s.policyHash = o.PolicyDigest(s.Policy())
	}
	return s, nil
}

// buildPolicy makes the gate's policy from the options and the facts of
// every rail registered so far.
func (s *Service) buildPolicy(o Options) error {
	policy := gate.Policy{
		Rails:        map[string]gate.RailFacts{},
		DenyPayees:   append([]string(nil), o.DenyPayees...),
		DenyAgents:   append([]string(nil), o.DenyAgents...),
		BreakerAfter: o.BreakerAfter,
	}
	for _, name := range o.Rails.Names() {
		r, err := o.Rails.Get(name)
		if err != nil {
			return err
		}
		f := r.Facts()
		policy.Rails[name] = gate.RailFacts{
			Reversibility: gate.Reversibility(f.Reversibility),
			Finality:      gate.Finality(f.Finality),
		}
	}
	s.policy = policy
	return nil
}

// Pay decodes and runs one payment instruction (the body of POST /pay).
// headerKey is the Idempotency-Key header ("" when absent); requestID is
// written into every entry the request appends.
//
// Outcomes (settled, held, denied, failed) are returned as a Result.
// Refusals before a decision — a malformed instruction (*MalformedError),
// an envelope that does not authorise it (*UnauthorizedError) — and the
// transient errors ErrFrozen and ErrRailUnavailable are recorded in the
// record and returned as errors. ErrIdempotencyConflict, ErrInFlight and
// ErrKeyMismatch are returned without a record entry.
func (s *Service) Pay(ctx context.Context, c Caller, body []byte, headerKey, requestID string) (*Result, error) {
	in, err := DecodeInstruction(body)
	if err != nil {
		return nil, s.refuse(ctx, c, RoutePay, nil, "structure", err, requestID)
	}
	return s.PayInstruction(ctx, c, in, headerKey, requestID)
}

// PayInstruction runs an already decoded instruction; embedders that build
// instructions in Go call it directly. See Pay.
func (s *Service) PayInstruction(ctx context.Context, c Caller, in *Instruction, headerKey, requestID string) (*Result, error) {
	return s.authorizeSigned(ctx, RoutePay, c, in, Signed{}, headerKey, requestID)
}

// Signed describes a request the agent signed in another form than a
// payment instruction: a purchase, which names what to buy but not the
// amount, since the merchant prices it. The zero value means the agent
// signed the instruction itself.
type Signed struct {
	// Type and Bytes are the signature's typ header and what it covers;
	// the instruction's envelope carries the signature.
	Type  string
	Bytes []byte
	// Digest is the idempotency digest of the request as the agent sent
	// it, so that a replay is recognised by what the agent sent, not by
	// the amount a merchant priced since.
	Digest string
	// Metadata is kept with the intent and passed to the rail with the
	// settlement (e.g. the merchant and the checkout session to complete).
	// It must not hold secrets.
	Metadata map[string]string
	// Hold, when set, asks for a hold instead of a settlement: on allow (or
	// approval) the intent is authorized and waits for [Books.Capture]
	// or [Books.Void].
	Hold *HoldOptions
	// OnHeld, when set, runs in the deciding transaction when the gate
	// holds the intent for an operator, after pay's own writes: what the
	// caller keeps of the request for the operator's view of the held
	// intent (commerce keeps the cart it priced, see [Effect].Cart). An
	// error abandons the transaction.
	OnHeld func(txn store.Txn, in *Intent) error
	// OnDecided, when set, runs in the deciding transaction whatever the
	// gate decided (allowed, held or denied), after OnHeld: what the
	// caller must keep about the request before anything is sent (an x402
	// fetch keeps the offer it chose and the request to make again). An
	// error abandons the transaction.
	OnDecided func(txn store.Txn, in *Intent) error
}

// authorizeSigned runs an instruction through the gate, the record and
// settlement under the idempotency namespace of route: the one money
// path. /pay comes through PayInstruction (sg zero: the agent signed the
// instruction itself); extensions through [Books.Authorize], with an
// instruction built from a request the agent signed as sg describes: the
// same structure check, the same mandate and envelope checks (against
// sg's signature), the same gate, record, idempotency and two-phase
// settlement.
func (s *Service) authorizeSigned(ctx context.Context, route Route, c Caller, in *Instruction, sg Signed, headerKey, requestID string) (*Result, error) {
	if err := in.Check(); err != nil {
		return nil, s.refuse(ctx, c, route, in, "structure", err, requestID)
	}
	if headerKey != "" && headerKey != in.IdempotencyKey {
		return nil, ErrKeyMismatch
	}
	var m *Mandate
	var err error
	if sg.Type == "" {
		m, err = VerifyEnvelope(in, s.mandates)
	} else {
		m, err = VerifySignedEnvelope(in.Envelope, sg.Type, sg.Bytes, s.mandates)
	}
	if err == nil && !c.mayActFor(in.Envelope.Agent) {
		err = &UnauthorizedError{Reason: ReasonAgentNotPermitted}
	}
	if err != nil {
		return nil, s.refuse(ctx, c, route, in, "envelope", err, requestID)
	}
	digest := sg.Digest
	if digest == "" {
		if digest, err = requestDigest(in); err != nil {
			return nil, fmt.Errorf("pay: digest: %w", err)
		}
	}
	if sg.Hold != nil && (sg.Hold.TTL < MinHoldTTL || sg.Hold.TTL > MaxHoldTTL) {
		return nil, malformed(FieldError{Field: "ttlSeconds", Rule: "range",
			Message: fmt.Sprintf("a hold lasts %s to %s", MinHoldTTL, MaxHoldTTL)})
	}
	return s.decide(ctx, route, c, in, m, digest, sg, requestID)
}

// refusal is the data of a gate.decision entry for a request refused
// before the policy step.
type refusal struct {
	Outcome        gate.Outcome `json:"outcome"`
	Stage          string       `json:"stage"`
	Code           string       `json:"code"`
	Reason         string       `json:"reason"`
	Fields         []FieldError `json:"fields,omitempty"`
	Route          Route        `json:"route"`
	AgentKeyID     string       `json:"agentKeyId"`
	IdempotencyKey string       `json:"idempotencyKey,omitempty"`
	MandateID      string       `json:"mandateId,omitempty"`
}

// refuse records a refusal and returns cause (or the recording failure).
// The record holds the stable reason, never the raw body.
func (s *Service) refuse(ctx context.Context, c Caller, route Route, in *Instruction, stage string, cause error, requestID string) error {
	r := refusal{Outcome: gate.Deny, Stage: stage, Route: route, AgentKeyID: c.KeyID}
	var me *MalformedError
	var ue *UnauthorizedError
	switch {
	case errors.As(cause, &me):
		r.Code, r.Reason, r.Fields = CodeMalformed, "malformed", me.Fields
	case errors.As(cause, &ue):
		r.Code, r.Reason = CodeUnauthorized, string(ue.Reason)
	case errors.Is(cause, ErrFrozen):
		r.Code, r.Reason = ErrFrozen.Code(), "kill_switch_engaged"
	default:
		r.Code, r.Reason = CodeMalformed, "malformed"
	}
	if in != nil && len(in.IdempotencyKey) <= MaxIdempotencyKeyLen {
		r.IdempotencyKey = in.IdempotencyKey
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	err = s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		_, err := s.log.Append(txn, audit.Record{
			Type: "gate.decision", Actor: agentActor(c), RequestID: requestID, Data: data,
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("pay: recording refusal: %w", err)
	}
	return cause
}

func agentActor(c Caller) audit.Actor { return audit.Actor{Kind: "agent", ID: c.KeyID} }

// decisionData is the data of a gate.decision entry at the policy stage.
type decisionData struct {
	gate.Decision
	Stage          string `json:"stage"`
	Route          Route  `json:"route"`
	AgentKeyID     string `json:"agentKeyId"`
	Agent          string `json:"agent"`
	IdempotencyKey string `json:"idempotencyKey"`
	Payee          string `json:"payee"`
	Amount         Amount `json:"amount"`
	Rail           string `json:"rail"`
	// Metadata is the intent's (see Signed): for a purchase, the merchant,
	// the checkout session and the digest of the cart as read.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Tags are the request's usage tags, so aggregates by tag can be
	// recomputed from the record alone.
	Tags []string `json:"tags,omitempty"`
	// TermsID is the terms the instruction cited, if any.
	TermsID string `json:"termsId,omitempty"`
	// PolicyHash is the digest of the policy in force (see
	// Options.PolicyDigest), binding the decision to it.
	PolicyHash string `json:"policyHash,omitempty"`
}

// decide is transaction 1.
// challengeLen is the size of an approval challenge in bytes: the 202
// answer carries it in base64url (43 characters).
const challengeLen = 32

func (s *Service) decide(ctx context.Context, route Route, c Caller, in *Instruction, m *Mandate, digest string, sg Signed, requestID string) (*Result, error) {
	meta := sg.Metadata
	var (
		res         *Result
		resume      string
		deferred    error
		toSettle    *Intent
		toAuthorize bool
		prior       []byte // toSettle as stored
	)
	challenge := make([]byte, challengeLen)
	if _, err := io.ReadFull(s.rand, challenge); err != nil {
		return nil, fmt.Errorf("pay: challenge: %w", err)
	}
	// The intent's id is claimed before it exists, so that a retry of the
	// same request that finds it settling answers ErrInFlight rather than
	// resuming it under this request's feet.
	id := ids.New(ids.Intent)
	s.claim(id) // fresh: nobody else can hold it
	defer s.release(id)
	// On a rail that keeps its books in this store's log, the decision
	// need not be durable before the rail is called: see
	// settle.LogSharer, and the barrier below for every other way out.
	shared := s.sharesLog(in.Terms.Rail)
	// On a rail that answers at once in this store's log, a payment sent
	// now is decided, sent and recorded in one transaction
	// (settle.InstantSettler): step is the rail's write, prepared before
	// the decision and dropped unless the payment is sent.
	var (
		step     func(store.Txn) (settle.Settlement, error)
		prepared settle.SettleRequest // what step sends
		stepErr  error                // its answer, when not definite
	)
	if shared && sg.Hold == nil {
		step, prepared = s.prepareInstant(ctx, in, id, meta)
	}
	decideFn := func(txn store.Txn) error {
		res, resume, deferred, toSettle, toAuthorize, prior = nil, "", nil, nil, false, nil
		rec, err := getIdem(txn, route, c.KeyID, in.IdempotencyKey)
		if err != nil {
			return err
		}
		if rec != nil {
			switch {
			case rec.Digest != digest:
				return ErrIdempotencyConflict
			case rec.State == idemFinal:
				var ok bool
				if res, ok = replayOf(rec, nil); !ok {
					return fmt.Errorf("pay: idempotency record %s/%s is final without an outcome", c.KeyID, in.IdempotencyKey)
				}
				return nil
			case s.isRunning(rec.IntentID):
				return ErrInFlight
			}
			// In flight by its record: ended, if its intent says so
			// (finalIdem), or else left settling, to resume.
			cur, err := getIntent(txn, rec.IntentID)
			if err != nil {
				return err
			}
			if r, ok := replayOf(rec, cur); ok {
				res = r
			} else {
				resume = rec.IntentID
			}
			return nil
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		ctl, err := getControl(txn)
		if err != nil {
			return err
		}
		if ctl.KillSwitchEngaged {
			deferred = ErrFrozen
			return s.appendRefusal(txn, c, route, in, "frozen", ErrFrozen.Code(), "kill_switch_engaged", m.ID, requestID)
		}
		if revoked, err := isRevoked(txn, m.ID); err != nil {
			return err
		} else if revoked {
			deferred = &UnauthorizedError{Reason: ReasonMandateRevoked}
			return s.appendRefusal(txn, c, route, in, "envelope", CodeUnauthorized, string(ReasonMandateRevoked), m.ID, requestID)
		}
		if revoked, err := identityRevoked(txn, m.Claims.Agent); err != nil {
			return err
		} else if revoked {
			deferred = &UnauthorizedError{Reason: ReasonIdentityRevoked}
			return s.appendRefusal(txn, c, route, in, "envelope", CodeUnauthorized, string(ReasonIdentityRevoked), m.ID, requestID)
		}

		if err := s.rememberMandate(txn, m, now); err != nil {
			return err
		}
		input, periodKey, ses, err := s.gateInput(txn, c, in, m, ctl, now)
		if err != nil {
			return err
		}
		d := gate.Decide(input)
		eff := s.effect(route)

		intent := &Intent{
			ID: id, Route: route, AgentKeyID: c.KeyID, Agent: in.Envelope.Agent,
			IdempotencyKey: in.IdempotencyKey, Payee: in.Payee, Amount: in.Amount,
			Purpose: in.Purpose, Terms: in.Terms, MandateID: m.ID, MandateExpiresAt: m.Claims.ExpiresAt.UTC(),
			Metadata: meta, SessionID: in.SessionID, TermsID: in.TermsID, Tags: c.Tags,
			Refunds: []Refund{}, RequestID: requestID, CreatedAt: now, UpdatedAt: now,
		}
		if sg.Hold != nil {
			intent.Hold = &HoldState{TTLSeconds: int64(sg.Hold.TTL / time.Second), Until: sg.Hold.Until.UTC().Truncate(time.Microsecond)}
		}
		if d.Outcome != gate.Deny && intent.TermsID != "" {
			reason, err := s.checkTerms(txn, intent)
			if err != nil {
				return err
			}
			if reason != nil {
				d = gate.Decision{Outcome: gate.Deny, Reasons: []gate.Reason{*reason}, MandateID: m.ID}
			}
		}
		if d.Outcome != gate.Deny && eff.Admit != nil {
			reason, err := eff.Admit(txn, intent)
			if err != nil {
				return err
			}
			if reason != nil {
				d = gate.Decision{Outcome: gate.Deny, Reasons: []gate.Reason{*reason}, MandateID: m.ID}
			}
		}
		intent.Decision = d
		data, err := json.Marshal(decisionData{
			Decision: d, Stage: "policy", Route: route, AgentKeyID: c.KeyID, Agent: in.Envelope.Agent,
			IdempotencyKey: in.IdempotencyKey, Payee: in.Payee, Amount: in.Amount, Rail: in.Terms.Rail, Metadata: meta,
			Tags: c.Tags, PolicyHash: s.PolicyHash(), TermsID: in.TermsID,
		})
		if err != nil {
			return err
		}
		entry, err := s.append(txn, audit.Record{
			Type: "gate.decision", IntentID: id, Actor: agentActor(c), RequestID: requestID, Data: data,
		})
		if err != nil {
			return err
		}
		idem := &idemRecord{Digest: digest, State: idemFinal, IntentID: id, CreatedAt: now, ExpiresAt: now.Add(s.retain)}
		switch d.Outcome {
		case gate.Deny:
			if err := intent.transition(StepDecided, StatusDenied); err != nil {
				return err
			}
			if err := putInt(txn, []byte(keyDenials+m.ID), input.Counters.ConsecutiveDenials+1); err != nil {
				return err
			}
			if d.TripBreaker {
				if err := s.tripBreaker(txn, &ctl, "consecutive_denials:"+m.ID, requestID); err != nil {
					return err
				}
			}
			idem.Result = &Result{Outcome: OutcomeDenied, IntentID: id, RequestID: requestID, Denial: &Denial{
				IntentID: id, MandateID: m.ID, Reasons: d.Reasons, AuditSeq: entry.Seq,
			}}
		case gate.Confirm, gate.Allow:
			if err := txn.Delete([]byte(keyDenials + m.ID)); err != nil {
				return err
			}
			intent.ReservedMinor, intent.PeriodKey = in.Amount.Minor, periodKey
			if err := putInt(txn, []byte(periodKey), input.Counters.PeriodMinor+in.Amount.Minor); err != nil {
				return err
			}
			if ses != nil {
				if err := chargeSession(txn, ses, in.Amount.Minor, now); err != nil {
					return err
				}
			}
			if !m.Claims.Velocity.IsZero() {
				vk := append([]byte(keyVelocity+m.ID+"/"), be8(uint64(now.UnixNano()))...)
				if err := txn.Set(append(vk, id...), nil); err != nil {
					return err
				}
			}
			if d.Outcome == gate.Confirm {
				sum := sha256.Sum256(challenge)
				if err := intent.transition(StepDecided, StatusPendingApproval); err != nil {
					return err
				}
				intent.Approval = &Approval{
					ChallengeHash: hex.EncodeToString(sum[:]),
					Required:      max(1, m.Claims.Approvals),
					Received:      []ApprovalGrant{},
					ExpiresAt:     now.Add(s.window),
					Acknowledge:   d.Has(gate.CodeIrreversibleThreshold) || d.Has(gate.CodeConfirmThreshold),
				}
				if err := heldList.Put(txn, entry.Seq, id); err != nil {
					return err
				}
				idem.Result = &Result{Outcome: OutcomeHeld, IntentID: id, RequestID: requestID, Held: &Held{
					IntentID: id, Status: StatusPendingApproval, Decision: d,
					Challenge: base64.RawURLEncoding.EncodeToString(challenge), MandateID: m.ID,
					ApprovalsRequired: intent.Approval.Required, ApprovalsReceived: 0,
					ExpiresAt: intent.Approval.ExpiresAt, Links: s.links(id),
				}}
			} else if intent.Hold != nil {
				idem.State, idem.Result = idemInFlight, nil
				if err := putIdem(txn, route, c.KeyID, in.IdempotencyKey, idem); err != nil {
					return err
				}
				if toAuthorize, res, err = s.startHold(txn, intent, StepDecided, entry.Seq, requestID); err != nil {
					return err
				}
				if toAuthorize {
					toSettle = intent
				}
			} else {
				if err := intent.transition(StepDecided, StatusSettling); err != nil {
					return err
				}
				if step == nil {
					// Sent after this transaction: the reconciler
					// finishes it if this process does not.
					if err := settlingList.Put(txn, entry.Seq, id); err != nil {
						return err
					}
				}
				idem.State, idem.Result = idemInFlight, nil
				toSettle = intent
			}
		}
		if intent.Hold == nil || d.Outcome != gate.Allow {
			if err := putIdem(txn, route, c.KeyID, in.IdempotencyKey, idem); err != nil {
				return err
			}
			if toSettle == nil {
				res = idem.Result
			}
		}
		if err := s.indexIntent(txn, intent); err != nil {
			return err
		}
		if err := s.changed(txn, intent, StepDecided, requestID); err != nil {
			return err
		}
		// Sent in this transaction (settle.InstantSettler), the intent is
		// written once, with its outcome, below.
		fused := step != nil && toSettle != nil
		if !fused {
			if prior, err = writeIntent(txn, intent); err != nil {
				return err
			}
		}
		if sg.OnHeld != nil && intent.Status == StatusPendingApproval {
			if err := sg.OnHeld(txn, intent); err != nil {
				return err
			}
		}
		if sg.OnDecided != nil {
			if err := sg.OnDecided(txn, intent); err != nil {
				return err
			}
		}
		if fused {
			if !sameRequest(prepared, settleRequest(intent)) {
				// Nothing of the decision may change what is sent: if
				// it did, the rail's entry and the receipt would differ.
				return errUnprepared
			}
			st, serr := step(txn)
			if err := s.recordAnswer(txn, intent, st, serr, false, requestID, &res); err != nil {
				stepErr = serr
				return err
			}
		}
		return nil
	}
	var err error
	switch {
	case !shared:
		err = s.log.Update(ctx, decideFn)
	case step == nil:
		err = s.log.UpdateDeferred(ctx, decideFn)
	default:
		if err = s.log.Update(ctx, decideFn); errors.Is(err, errIndefinite) || errors.Is(err, errUnprepared) {
			// The rail's answer in the deciding transaction was not
			// definite (or the payment decided is not the one prepared),
			// so that transaction wrote nothing: decide again and send
			// the payment the long way, where such an answer is recorded
			// and reconciled.
			s.logger.WarnContext(ctx, "the rail's answer in the deciding transaction was not definite; deciding again",
				slog.String("intentId", id), slog.String("rail", in.Terms.Rail), slog.Any("error", cmp.Or(stepErr, err)))
			step = nil
			err = s.log.UpdateDeferred(ctx, decideFn)
		}
	}
	sending := err == nil && deferred == nil && res == nil && resume == "" && !toAuthorize
	if shared && !sending && (step == nil || err != nil) {
		// Every way out but sending the payment now answers from what
		// the deciding transaction read or wrote (a decision, a replay, a
		// conflict): it must be durable first. An empty Update is the
		// store's barrier for deferred commits (store.Deferrer). A
		// synchronous deciding transaction that committed is one; one
		// whose function failed (a conflict) may be answered before what
		// it read is durable, so it needs the barrier too.
		if berr := s.log.Update(context.WithoutCancel(ctx), func(store.Txn) error { return nil }); berr != nil && err == nil {
			return nil, fmt.Errorf("pay: decide: %w", berr)
		}
	}
	switch {
	case err != nil:
		if errors.Is(err, ErrIdempotencyConflict) || errors.Is(err, ErrInFlight) {
			return nil, err
		}
		return nil, fmt.Errorf("pay: decide: %w", err)
	case deferred != nil:
		return nil, deferred
	case res != nil:
		return res, nil
	case resume != "":
		return s.resume(ctx, resume, requestID)
	case toAuthorize:
		return s.authorizeClaimed(ctx, toSettle, requestID, false)
	default:
		// A deferred decision is made durable by the outcome's commit,
		// which every answer of settleClaimed waits for.
		return s.settleClaimed(ctx, toSettle, prior, requestID)
	}
}

// sharesLog reports whether rail keeps its books in this service's store
// log (settle.LogSharer).
func (s *Service) sharesLog(rail string) bool {
	r, err := s.rails.Get(rail)
	if err != nil {
		return false
	}
	ls, ok := r.(settle.LogSharer)
	return ok && ls.SharesLog()
}

// prepareInstant returns the write of a rail that answers at once in this
// store's log (settle.InstantSettler) of the payment in would make as
// intent id, and the request it sends; nil when its rail cannot answer it
// at once.
func (s *Service) prepareInstant(ctx context.Context, in *Instruction, id string, meta map[string]string) (func(store.Txn) (settle.Settlement, error), settle.SettleRequest) {
	r, err := s.rails.Get(in.Terms.Rail)
	if err != nil {
		return nil, settle.SettleRequest{}
	}
	is, ok := r.(settle.InstantSettler)
	if !ok {
		return nil, settle.SettleRequest{}
	}
	req := settleRequest(&Intent{ID: id, IdempotencyKey: in.IdempotencyKey, Payee: in.Payee, Amount: in.Amount, Metadata: meta})
	return is.PrepareInTxn(ctx, s.st, req), req
}

// sameRequest reports whether a and b send the same payment.
func sameRequest(a, b settle.SettleRequest) bool {
	return a.Key == b.Key && a.Payee == b.Payee && a.Amount == b.Amount && a.Currency == b.Currency &&
		maps.Equal(a.Metadata, b.Metadata)
}

// indexIntent writes the secondary indexes of a new intent: by agent key
// and by mandate, each in creation order.
func (s *Service) indexIntent(txn store.Txn, in *Intent) error {
	at := be8(uint64(in.CreatedAt.UnixNano()))
	if err := txn.Set(append(append([]byte(keyByKey+in.AgentKeyID+"/"), at...), in.ID...), nil); err != nil {
		return err
	}
	return txn.Set(append(append([]byte(keyByMandate+in.MandateID+"/"), at...), in.ID...), nil)
}

// gateInput gathers what the gate decides on, as of now in r: the
// instruction and mandate, the deployment's policy and breaker, the
// mandate's counters and the session the instruction names. The deciding
// transaction and the dry run (Evaluate) both read it here, so a dry run
// answers what a payment would meet. It returns the key of the period
// counter and the session, which the deciding transaction charges.
func (s *Service) gateInput(r store.Reader, c Caller, in *Instruction, m *Mandate, ctl Control, now time.Time) (gate.Input, string, *Session, error) {
	input := in.GateInput(m)
	input.Credential = c.Credential
	input.Policy = s.policy
	input.BreakerOpen = ctl.CircuitBreakerOpen
	start, _ := gate.PeriodWindow(m.Claims.Period, now)
	periodKey := keyPeriod + m.ID + "/" + strconv.FormatInt(start.Unix(), 10)
	var err error
	if input.Counters.PeriodMinor, err = getInt(r, []byte(periodKey)); err != nil {
		return input, "", nil, err
	}
	if input.Counters.VelocityCount, err = velocityCount(r, m, now); err != nil {
		return input, "", nil, err
	}
	if input.Counters.ConsecutiveDenials, err = getInt(r, []byte(keyDenials+m.ID)); err != nil {
		return input, "", nil, err
	}
	var ses *Session
	if in.SessionID != "" {
		if input.Session, ses, err = s.sessionGate(r, c, in.SessionID, now); err != nil {
			return input, "", nil, err
		}
	}
	return input, periodKey, ses, nil
}

func (s *Service) appendRefusal(txn store.Txn, c Caller, route Route, in *Instruction, stage, code, reason, mandateID, requestID string) error {
	data, err := json.Marshal(refusal{
		Outcome: gate.Deny, Stage: stage, Code: code, Reason: reason, Route: route,
		AgentKeyID: c.KeyID, IdempotencyKey: in.IdempotencyKey, MandateID: mandateID,
	})
	if err != nil {
		return err
	}
	_, err = s.log.Append(txn, audit.Record{Type: "gate.decision", Actor: agentActor(c), RequestID: requestID, Data: data})
	return err
}

// velocityCount counts the mandate's allowed or held payments in the
// rolling window, reading at most Count+1 index entries.
func velocityCount(txn store.Reader, m *Mandate, now time.Time) (int64, error) {
	v := m.Claims.Velocity
	if v.IsZero() {
		return 0, nil
	}
	from, _ := gate.VelocityWindow(v, now)
	prefix := keyVelocity + m.ID + "/"
	lower := append([]byte(prefix), be8(uint64(from.UnixNano()))...)
	it := txn.Iterate(lower, store.PrefixEnd([]byte(prefix)), false)
	var n int64
	for it.Next() && n <= v.Count {
		n++
	}
	return n, it.Close()
}

// append appends an entry and, when it names an intent, indexes it under
// the intent so GET /intents/{id}/events can page it.
func (s *Service) append(txn store.Txn, r audit.Record) (audit.Entry, error) {
	e, err := s.log.Append(txn, r)
	if err != nil {
		return e, err
	}
	if r.IntentID != "" {
		if err := txn.Set(intentEventKey(r.IntentID, e.Seq), nil); err != nil {
			return e, err
		}
	}
	return e, nil
}

func putIntent(txn store.Txn, in *Intent) error {
	_, err := writeIntent(txn, in)
	return err
}

// writeIntent is putIntent that also returns the bytes it stored.
func writeIntent(txn store.Txn, in *Intent) ([]byte, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return b, txn.Set(intentKey(in.ID), b)
}

func getIntent(r store.Reader, id string) (*Intent, error) {
	b, err := intentBytes(r, id)
	if err != nil {
		return nil, err
	}
	return decodeIntent(id, b)
}

// intentBytes reads intent id as stored; ErrIntentNotFound if there is none.
func intentBytes(r store.Reader, id string) ([]byte, error) {
	b, err := r.Get(intentKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrIntentNotFound
	}
	return b, err
}

func decodeIntent(id string, b []byte) (*Intent, error) {
	var in Intent
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("pay: intent %s: %w", id, err)
	}
	return &in, nil
}

// intentReader reads an intent back in the transaction that records its
// outcome, sparing the decoding when nothing changed it. The transaction
// that decided the payment stored in as the bytes prior, and nothing has
// changed in since. While prior is still what is stored, decoding it would
// give in again: an intent's state is its JSON (every field a reader of a
// stored intent needs is in it; TestIntentJSONRoundTrip), so in and the
// decoded copy can differ only in what encoding cannot see (an empty map
// against a nil one), which nothing reads from an intent. in shares its
// metadata, tags and reasons with the request that built it, which the
// outcome path only reads. Decoding was nearly half of the outcome
// transaction's work, in the store's serial section. in is handed out
// once, since the function may change it and a store may run the function
// again; later runs, and any change to the stored bytes, decode as
// getIntent does.
type intentReader struct {
	prior []byte
	in    *Intent
}

func newIntentReader(in *Intent, prior []byte) *intentReader {
	return &intentReader{in: in, prior: prior}
}

func (r *intentReader) get(txn store.Reader) (*Intent, error) {
	id := r.in.ID
	b, err := intentBytes(txn, id)
	if err != nil {
		return nil, err
	}
	if r.prior != nil && bytes.Equal(b, r.prior) {
		r.prior = nil
		return r.in, nil
	}
	return decodeIntent(id, b)
}

func (s *Service) links(id string) Links {
	return Links{Self: s.baseURL + "/intents/" + id, Events: s.baseURL + "/intents/" + id + "/events"}
}

// isRunning, claim and release track the intents this process is talking
// to a rail about, so a concurrent retry answers ErrInFlight instead of
// calling the rail twice at once.
func (s *Service) isRunning(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[id]
	return ok
}

func (s *Service) claim(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[id]; ok {
		return false
	}
	s.running[id] = struct{}{}
	return true
}

func (s *Service) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, id)
}
