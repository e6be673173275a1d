package protocol

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Options configure a Service. Store, Log, Pay and Mandates are required.
type Options struct {
	Store    store.Store
	Log      *audit.Log
	Mandates *pay.MandateVerifier
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// PolicyDigest returns the digest of the gate policy in force, the
	// one /disclose publishes (identity.Service.PolicyDigest). Nil:
	// oversight.policy answers without a digest.
	PolicyDigest func(context.Context) (string, error)
	// CustodyPayee is the payee a custody deposit pays: the deployment's
	// own custody account. Default DefaultCustodyPayee.
	CustodyPayee string
	// Logger receives the scheduler's faults. Default slog.Default().
	Logger *slog.Logger
	// BaseURL is the server's public base URL: the problem types in
	// answers are {BaseURL}/problems/{code}. Default "" (relative).
	BaseURL string
	// Identity signs this deployment's negotiation offers and says which
	// counterparties the operator revoked (*identity.Service). Nil:
	// negotiate cannot make our offers, and no counterparty is revoked.
	Identity Identity
	// Evidence are the keys evidence classes are checked against. A
	// class without keys admits no evidence of it.
	Evidence EvidenceKeys
	// Insurance is the premium schedule and pool account. Zero: the
	// DefaultInsurance schedule.
	Insurance InsuranceSchedule
}

// Identity is what the protocol surface needs of the deployment's ADP
// identity (*identity.Service has it).
type Identity interface {
	// SignStatement signs msg with the identity key.
	SignStatement(msg []byte) (agentID string, pub ed25519.PublicKey, sig []byte)
	// Revoked reports a counterparty agent id the operator revoked.
	Revoked(ctx context.Context, agentID string) (bool, error)
}

// DefaultCustodyPayee is the custody account deposits pay when
// Options.CustodyPayee is empty.
const DefaultCustodyPayee = "acct:custody.countersign.local"

// Service is the protocol surface: the handler of every declared method
// (its exported methods are the Go API, one per declaration) over the
// money path of package pay.
type Service struct {
	st       store.Store
	log      *audit.Log
	pay      *pay.Service
	books    *pay.Books // the money path's transactions, joined
	mandates *pay.MandateVerifier
	now      func() time.Time
	policy   func(context.Context) (string, error)
	custody  string
	logger   *slog.Logger
	baseURL  string
	identity Identity
	evidence EvidenceKeys
	insure   InsuranceSchedule
	lists    seqlist.Migration // of the lists' order rows; see migrateLists
}

// Extension returns the protocol surface as a [pay.Extension]: the
// surface pays through the money path, and the money path keeps the
// surface's books (holds, meters, custody, obligations, insurance) inside
// the transactions that change their intents, whoever finishes them, and
// asks it about cited terms. pay.New attaches it, builds the Service over
// the money path under construction, installs its effects and stores the
// Service in *out. Build the money path once per process with it, and
// reconcile after (pay.Service.Reconcile), so that intents a crash left
// settling finish with their books.
func Extension(o Options, out **Service) pay.Extension {
	return extension{o: o, out: out}
}

type extension struct {
	o   Options
	out **Service
}

func (e extension) Attach(p *pay.Service, b *pay.Books) (pay.Attachment, error) {
	if e.out == nil {
		return pay.Attachment{}, errors.New("protocol: Extension needs somewhere to put the Service")
	}
	s, err := newService(e.o, p, b)
	if err != nil {
		return pay.Attachment{}, err
	}
	*e.out = s
	return s.attachment(), nil
}

// newService builds the surface over p without attaching it: the tests
// of this package use it for a second view of one money path.
func newService(o Options, p *pay.Service, b *pay.Books) (*Service, error) {
	if o.Store == nil || o.Log == nil || p == nil || b == nil || o.Mandates == nil {
		return nil, errors.New("protocol: Options.Store, Log and Mandates, and a money path, are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CustodyPayee == "" {
		o.CustodyPayee = DefaultCustodyPayee
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ins, err := o.Insurance.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Service{st: o.Store, log: o.Log, pay: p, books: b, mandates: o.Mandates, now: o.Now,
		policy: o.PolicyDigest, custody: o.CustodyPayee, logger: o.Logger, baseURL: strings.TrimSuffix(o.BaseURL, "/"),
		identity: o.Identity, evidence: o.Evidence, insure: ins}, nil
}

// attachment is what the surface brings to the money path: the effects of
// its routes (and the kind of a held spend of each, for the operator's
// held list) and the check of cited terms.
func (s *Service) attachment() pay.Attachment {
	return pay.Attachment{
		Effects: map[pay.Route]pay.Effect{
			routeHoldPlace:     {Kind: "hold", Changed: s.holdChanged},
			routeMeterOpen:     {Kind: "meter", Changed: s.meterChanged},
			routeDeposit:       {Kind: "deposit", Changed: s.depositChanged},
			routeWithdraw:      {Kind: "withdrawal", Admit: s.withdrawAdmit, Changed: s.withdrawChanged},
			routeObligation:    {Kind: "obligation", Changed: s.obligationChanged},
			routeInsuranceBind: {Kind: "insurance", Admit: s.bindAdmit, Changed: s.bindChanged},
		},
		Terms: s.termsGate,
	}
}

// Call runs the method with the given id ("hold.place") on a request
// already decoded into the method's Request type and validated against
// its tags (the HTTP layer does both; so must every other transport). It
// is how the generic binding of every transport calls the surface.
func (s *Service) Call(ctx context.Context, id string, call Call, req any) (any, error) {
	m, ok := byID[id]
	if !ok {
		return nil, fmt.Errorf("protocol: no method %q", id)
	}
	return m.Invoke(ctx, s, call, req)
}

func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// record appends a protocol entry with the object's new state, inside txn.
// An entry about an intent is indexed under it (GET /intents/{id}/events).
func (s *Service) record(txn store.Txn, call Call, typ, intentID string, obj any) (audit.Entry, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return audit.Entry{}, err
	}
	r := audit.Record{Type: typ, IntentID: intentID, RequestID: call.RequestID, Data: data, Actor: call.actor()}
	if call.Operator != nil {
		r.Rationale = call.Operator.Rationale
	}
	if intentID != "" {
		return s.books.AppendIntentEntry(txn, r)
	}
	return s.log.Append(txn, r)
}

// recorded is a stored object that lists the record entries that changed
// it.
type recorded interface{ entryList() *[]uint64 }

// putObject records obj's new state as typ (without its entry list,
// which the entry cannot contain), appends the entry's seq to the list and
// stores obj under key, all inside txn.
func putObject[T any, P interface {
	*T
	recorded
}](s *Service, txn store.Txn, call Call, typ, intentID string, key []byte, obj P) error {
	view := *obj
	*P(&view).entryList() = nil
	e, err := s.record(txn, call, typ, intentID, view)
	if err != nil {
		return err
	}
	*obj.entryList() = append(*obj.entryList(), e.Seq)
	return putJSON(txn, key, obj)
}

func (c Call) actor() audit.Actor {
	switch {
	case c.Operator != nil:
		return audit.Actor{Kind: "operator", ID: c.Operator.Operator}
	case c.Agent != nil:
		return audit.Actor{Kind: "agent", ID: c.Agent.KeyID}
	}
	return audit.Actor{Kind: "system", ID: "protocol-scheduler"}
}

// systemCall is the Call of the scheduler's transitions.
func systemCall(requestID string) Call { return Call{RequestID: requestID} }

// SpendType is the typ of the agent's signature over a spend: the
// payment instruction bound to the method it is sent to, so that a spend
// signed for one method (a hold) is never accepted by another (/pay, a
// deposit).
const SpendType = "svc-spend+jws"

// SpendSigningBytes are the bytes a spend's signature covers: the JCS
// object {"method": id, "payment": SigningBytes(instruction)}.
func SpendSigningBytes(method string, in *pay.Instruction) ([]byte, error) {
	p, err := pay.SigningBytes(in)
	if err != nil {
		return nil, err
	}
	b := append([]byte(`{"method":`), jcsenc.AppendString(nil, method)...)
	b = append(b, `,"payment":`...)
	b = append(b, p...)
	return append(b, '}'), nil
}

// SignSpend signs a spend for the method (e.g. "hold.place") with the
// agent's key, setting in.Envelope.Agent (when empty) and Signature. The
// instruction must otherwise be final.
func SignSpend(method string, in *pay.Instruction, agentKey ed25519.PrivateKey) error {
	if len(agentKey) != ed25519.PrivateKeySize {
		return errors.New("protocol: sign spend: not an Ed25519 private key")
	}
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	if in.Envelope.Agent == "" {
		in.Envelope.Agent = agent
	} else if in.Envelope.Agent != agent {
		return errors.New("protocol: sign spend: envelope.agent is not the public key of agentKey")
	}
	b, err := SpendSigningBytes(method, in)
	if err != nil {
		return err
	}
	sig, err := pay.SignDetached(agentKey, SpendType, b)
	if err != nil {
		return err
	}
	in.Envelope.Signature = sig
	return nil
}

// spend runs a spend through the one money path: the same structure and
// envelope checks, gate, reservation, approval and two-phase settlement as
// /pay, under the idempotency namespace protocol/{method} of the agent
// key. request is the whole decoded request, whose digest keys the
// idempotency (the same key with another body is a conflict).
func (s *Service) spend(ctx context.Context, call Call, route pay.Route, method string, in *pay.Instruction, request any, hold *pay.HoldOptions, meta map[string]string) (*pay.Result, error) {
	b, err := SpendSigningBytes(method, in)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(request)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(raw)
	res, err := s.books.Authorize(ctx, route, *call.Agent, in, pay.Signed{
		Type: SpendType, Bytes: b, Digest: hex.EncodeToString(sum[:]), Metadata: meta, Hold: hold,
	}, "", call.RequestID)
	if err != nil {
		return nil, err
	}
	if res.Outcome == pay.OutcomeDenied || res.Outcome == pay.OutcomeFailed {
		return nil, &Refused{Result: res}
	}
	return res, nil
}

// Errors of the surface itself.
var (
	errOperatorOnly = errcode.New(contract.CodeOperatorUnauthorized, "protocol: this override needs the operator's signature")
	errAgentOnly    = errcode.New(contract.CodeAuthMissing, "protocol: this method needs an agent credential")
)

// prefixID swaps an id's prefix: the hold of intent int_X is hold_X.
func prefixID(id, from, to string) (string, bool) {
	rest, ok := strings.CutPrefix(id, from)
	if !ok || rest == "" {
		return "", false
	}
	return to + rest, true
}

// checkKey and bindKey tie an idempotency key of a method and agent key
// to the object it first named, so the key used again for another object
// is idempotency.conflict (the same object goes on to its own
// idempotency). checkKey only reads; bindKey writes, in the transaction
// that makes the change, so a refused call binds nothing.
func checkKey(r store.Reader, call Call, method, key, object string) error {
	b, err := r.Get(idemObjectKey(call, method, key))
	switch {
	case err == nil && string(b) != object:
		return fmt.Errorf("%w: the key named %s", pay.ErrIdempotencyConflict, b)
	case err == nil || errors.Is(err, store.ErrNotFound):
		return nil
	}
	return err
}

func bindKey(txn store.Txn, call Call, method, key, object string) error {
	if err := checkKey(txn, call, method, key, object); err != nil {
		return err
	}
	return txn.Set(idemObjectKey(call, method, key), []byte(object))
}

func idemObjectKey(call Call, method, key string) []byte {
	return []byte("protocol/idem/" + method + "/" + call.Agent.KeyID + "/" + key)
}
