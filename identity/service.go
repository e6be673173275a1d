package identity

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Problem codes of the identity service. Each error below carries one (its
// Code method) for the HTTP edge.
const (
	CodeBadRef             = "identity.bad_ref"
	CodeNotFound           = "identity.not_found"
	CodeBadPolicy          = "identity.bad_policy"
	CodeInvalidParty       = "identity.invalid_counterparty"
	CodePartyExists        = "identity.counterparty_exists"
	CodeBadRevocation      = "identity.bad_revocation"
	CodeRotationFailed     = "identity.rotation_unavailable"
	CodeBadChallenge       = "identity.bad_challenge"
	CodeBadCursor          = "identity.bad_cursor"
	CodeDisclosureDisabled = "identity.disclosure_unavailable"
)

// Errors of the identity service. Check with errors.Is.
var (
	// ErrBadRef: a reference to resolve is empty, too long, or of no form
	// the resolver knows (400).
	ErrBadRef = errcode.New(CodeBadRef, "identity: unparseable reference")
	// ErrNotFound: a well-formed reference names nothing this deployment
	// knows (404).
	ErrNotFound = errcode.New(CodeNotFound, "identity: unknown counterparty")
	// ErrBadPolicy: a per-call verification policy is malformed or would
	// loosen the server's policy (400).
	ErrBadPolicy = errcode.New(CodeBadPolicy, "identity: verification policy refused")
	// ErrInvalidCounterparty: a registration is malformed: id, base URL or
	// expected agent id (400).
	ErrInvalidCounterparty = errcode.New(CodeInvalidParty, "identity: invalid counterparty registration")
	// ErrCounterpartyExists: a counterparty with that id, or with that agent
	// id, is already registered (409).
	ErrCounterpartyExists = errcode.New(CodePartyExists, "identity: counterparty already registered")
	// ErrBadRevocation: a revocation names no id, or a signed revocation
	// does not verify (400).
	ErrBadRevocation = errcode.New(CodeBadRevocation, "identity: invalid revocation")
	// ErrRotationUnavailable: the deployment was built without a way to
	// persist a new identity key, so it cannot rotate (503).
	ErrRotationUnavailable = errcode.New(CodeRotationFailed, "identity: key rotation is not available")
	// ErrBadChallenge: a challenge to answer is malformed (400).
	ErrBadChallenge = errcode.New(CodeBadChallenge, "identity: malformed challenge")
	// ErrBadCursor: a page cursor is malformed (400).
	ErrBadCursor = errcode.New(CodeBadCursor, "identity: malformed cursor")
	// ErrDisclosureUnavailable: the facts a disclosure states could not be
	// gathered, so none is served rather than a partial one (503).
	ErrDisclosureUnavailable = errcode.New(CodeDisclosureDisabled, "identity: disclosure unavailable")
)

// Record entry types written by the service.
const (
	EntryCreated    = "identity.created"
	EntryRotated    = "identity.rotated"
	EntryVerified   = "identity.verified"
	EntryRevoked    = "identity.revoked"
	EntryPartyAdded = "identity.counterparty_registered"
	// EntryAgentIDForm records that Options.HexAgentID rewrote a did:key
	// agent id to the same key in hex.
	EntryAgentIDForm = "identity.agent_id_form"
	// EntryPolicy records the deployment's policy digest (the disclosed
	// constitution's digest) whenever a start finds it changed.
	EntryPolicy = "gate.policy"
)

// Store layout: the service owns the identity/ prefix.
const (
	keySelf       = "identity/self"
	keyTrust      = "identity/trust/"      // + normalised agent key hex → trustRecord
	keyRevoked    = "identity/revoked/"    // + id → Revocation
	keyParty      = "identity/party/"      // + counterparty id → Registration
	keyPartyAgent = "identity/partyagent/" // + agent key hex → counterparty id
	keyChallenge  = "identity/challenge/"  // + nonce → issuedChallenge
	keyPolicy     = "identity/policy"      // the last recorded policy digest
	keyPolicySeq  = "identity/policy-seq/" // + entry seq BE8 → the digest that gate.policy entry recorded
)

// Options configure [Open]. Store, Log and Keys are required.
type Options struct {
	Store store.Store
	Log   *audit.Log
	// Keys are the identity's private keys this process holds: the
	// original one and every key a rotation moved to. Open selects the key
	// the stored rotation chain ends at (the original when there is no
	// chain); it fails when that key is not among them.
	Keys []ed25519.PrivateKey
	// NewKey makes and durably persists a new identity key for
	// [Service.Rotate]; the service commits the rotation only after it
	// returns. Nil: Rotate answers ErrRotationUnavailable.
	NewKey func(ctx context.Context) (ed25519.PrivateKey, error)
	// Shared says that other processes share Store and may rotate this
	// identity: the service then reads the stored identity again before
	// it signs, at most every SharedRefresh, and adopts a rotation made
	// elsewhere, taking the new key from Keys or LoadKey. A process that
	// cannot get the key a chain ends at refuses to sign
	// (ErrRotationUnavailable) rather than sign with a key rotated away.
	Shared bool
	// SharedRefresh bounds how long a rotation made by another process
	// goes unseen here. Default 2 s.
	SharedRefresh time.Duration
	// LoadKey finds a private key this process does not hold: the key
	// another process rotated to. Default none.
	LoadKey func(ctx context.Context, pub ed25519.PublicKey) (ed25519.PrivateKey, error)
	// Facts gathers what a disclosure states about the running deployment
	// (constitution, tools, capital, operator). Required for Disclose.
	Facts func(ctx context.Context) (Facts, error)
	// Policy is the deployment's verification policy, the floor of every
	// Verify: a caller may tighten it, never loosen it.
	Policy Policy
	// TTL is the freshness window of a disclosure (validUntil − issuedAt).
	// Default 10 minutes.
	TTL time.Duration
	// Refresh is the least time between two signatures of a disclosure when
	// only the record head moved: under load, /disclose costs no signature
	// per request. Default 1 s.
	Refresh time.Duration
	// ChallengeTTL is how long a challenge this deployment issued can be
	// answered. Default 5 minutes.
	ChallengeTTL time.Duration
	// HexAgentID, when the stored agent id is a did:key (an identity
	// created before hex became the default), makes Open rewrite it once
	// to the same key in hex and record an [EntryAgentIDForm] entry. Both
	// forms name one key, so verifiers that compare keys see the same
	// identity; verifiers that compare strings (SPEC §5.1's chain walk,
	// §7.4's agentId match, hex-only raw verifiers) accept only the hex
	// one. The stored rotation chain's hops are hex already and continue
	// from it. Irreversible; without it the stored form is kept.
	HexAgentID bool
	// HTTPClient fetches disclosures from registered counterparties' base
	// URLs. It must refuse private destinations at every connection: build
	// it with URLs.Client (package netguard), as the reference server does.
	// Nil: Resolve never fetches.
	HTTPClient *http.Client
	// URLs is the guard a counterparty's base URL passes at registration,
	// and again before each fetch: https to a public address. The zero
	// Policy is production's; sandbox mode sets AllowLoopback and
	// AllowHTTP.
	URLs netguard.Policy
	// Directories resolve references the service itself does not know,
	// e.g. the merchants of the commerce registry; asked in order.
	Directories []Directory
	// BaseURL is this deployment's public base URL, named in the DID
	// document's disclosure endpoint. Optional.
	BaseURL string
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand is the source of nonces and disclosure ids. Default crypto/rand.
	Rand io.Reader
	// Logger receives the service's own faults. Default slog.Default().
	Logger *slog.Logger
}

// Service is this deployment's identity: it emits the signed disclosure,
// answers handshakes, verifies other agents' disclosures under the
// deployment's policy (recording every decision), resolves counterparty
// references, and keeps the operator's registrations and revocations. It is
// safe for concurrent use.
type Service struct {
	st      store.Store
	log     *audit.Log
	facts   func(ctx context.Context) (Facts, error)
	newKey  func(ctx context.Context) (ed25519.PrivateKey, error)
	policy  Policy
	ttl     time.Duration
	refresh time.Duration
	chTTL   time.Duration
	client  *http.Client
	urls    netguard.Policy
	dirs    []Directory
	baseURL string
	now     func() time.Time
	rand    io.Reader
	logger  *slog.Logger

	keyMu sync.RWMutex // guards self and keys: Rotate swaps them
	self  selfState
	key   ed25519.PrivateKey
	keys  []ed25519.PrivateKey

	cache   disclosureCache
	history historyCounter

	shared   time.Duration // Options.SharedRefresh when Options.Shared, else 0
	loadKey  func(ctx context.Context, pub ed25519.PublicKey) (ed25519.PrivateKey, error)
	syncedAt atomic.Int64 // when the stored identity was last read (Unix ns); see sync
}

// selfState is what the store keeps about this deployment's identity: the
// stable agent id and the rotation chain from it to the current key. The
// agent id is stored as written, so its form (64 lowercase hex digits for
// identities created now, did:key for those created before) is chosen once,
// at creation, and every disclosure and rotation chain repeats it exactly.
type selfState struct {
	AgentID string              `json:"agentId"`
	Chain   []RotationStatement `json:"chain,omitempty"`
}

// Open loads (or, on first start, creates and records) this deployment's
// identity and returns the service.
func Open(ctx context.Context, opts Options) (*Service, error) {
	if opts.Store == nil || opts.Log == nil || len(opts.Keys) == 0 {
		return nil, errors.New("identity: Options.Store, Log and Keys are required")
	}
	s := &Service{
		st: opts.Store, log: opts.Log, facts: opts.Facts, newKey: opts.NewKey, loadKey: opts.LoadKey,
		policy: opts.Policy, ttl: opts.TTL, refresh: opts.Refresh, chTTL: opts.ChallengeTTL,
		client: opts.HTTPClient, urls: opts.URLs, dirs: slices.Clone(opts.Directories),
		baseURL: opts.BaseURL, now: opts.Now, rand: opts.Rand, logger: opts.Logger,
		keys: slices.Clone(opts.Keys),
	}
	if s.ttl <= 0 {
		s.ttl = 10 * time.Minute
	}
	if s.refresh <= 0 {
		s.refresh = time.Second
	}
	if s.chTTL <= 0 {
		s.chTTL = 5 * time.Minute
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rand == nil {
		s.rand = rand.Reader
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if _, err := json.Marshal(s.policy); err != nil {
		return nil, fmt.Errorf("identity: policy: %w", err)
	}
	for _, k := range s.keys {
		if len(k) != ed25519.PrivateKeySize {
			return nil, errors.New("identity: Options.Keys holds a key that is not an Ed25519 private key")
		}
	}
	original := s.keys[0]
	err := s.log.Update(ctx, func(txn store.Txn) error {
		b, err := txn.Get([]byte(keySelf))
		if err == nil {
			if err := json.Unmarshal(b, &s.self); err != nil {
				return err
			}
			if opts.HexAgentID {
				return s.hexAgentID(txn)
			}
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		// Hex, the form every ADP verifier accepts on every path (SPEC
		// §3.1's first form, §5.1's rotation hops, §7.2's response).
		self := selfState{AgentID: keyHex(original.Public().(ed25519.PublicKey))}
		data, err := json.Marshal(map[string]string{"agentId": self.AgentID,
			"publicKey": keyHex(original.Public().(ed25519.PublicKey))})
		if err != nil {
			return err
		}
		if _, err := s.log.Append(txn, audit.Record{Type: EntryCreated,
			Actor: audit.Actor{Kind: "system", ID: "identity"}, Data: data}); err != nil {
			return err
		}
		s.self = self
		b, err = json.Marshal(self)
		if err != nil {
			return err
		}
		return txn.Set([]byte(keySelf), b)
	})
	if err != nil {
		return nil, fmt.Errorf("identity: open: %w", err)
	}
	want, err := PublicKeyOf(s.self.AgentID)
	if err != nil {
		return nil, fmt.Errorf("identity: stored agent id: %w", err)
	}
	if n := len(s.self.Chain); n > 0 {
		if want, err = PublicKeyOf(s.self.Chain[n-1].To); err != nil {
			return nil, fmt.Errorf("identity: stored rotation chain: %w", err)
		}
	}
	for _, k := range s.keys {
		if bytes.Equal(k.Public().(ed25519.PublicKey), want) {
			s.key = k
		}
	}
	if s.key == nil && s.loadKey != nil {
		if k, err := s.loadKey(ctx, want); err == nil && bytes.Equal(k.Public().(ed25519.PublicKey), want) {
			s.key, s.keys = k, append(s.keys, k)
		}
	}
	if s.key == nil {
		return nil, fmt.Errorf("identity: the current identity key (%s) is not among Options.Keys", keyHex(want))
	}
	if opts.Shared {
		s.shared = opts.SharedRefresh
		if s.shared <= 0 {
			s.shared = 2 * time.Second
		}
		s.syncedAt.Store(time.Now().UnixNano())
	}
	if s.facts != nil {
		if err := s.recordPolicy(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// hexAgentID rewrites a did:key agent id to the same key in hex, in txn,
// and records the change; any other agent id is left as it is.
func (s *Service) hexAgentID(txn store.Txn) error {
	if !strings.HasPrefix(s.self.AgentID, didKeyPrefix) {
		return nil
	}
	k, err := PublicKeyOf(s.self.AgentID)
	if err != nil {
		return fmt.Errorf("stored agent id: %w", err)
	}
	self := selfState{AgentID: keyHex(k), Chain: s.self.Chain}
	if n := len(self.Chain); n > 0 {
		last, err := PublicKeyOf(self.Chain[n-1].To)
		if err != nil {
			return fmt.Errorf("stored rotation chain: %w", err)
		}
		if err := VerifyRotationChain(self.AgentID, self.Chain, last); err != nil {
			return fmt.Errorf("stored rotation chain from the hex agent id: %w", err)
		}
	}
	data, err := json.Marshal(map[string]string{"from": s.self.AgentID, "agentId": self.AgentID})
	if err != nil {
		return err
	}
	if _, err := s.log.Append(txn, audit.Record{Type: EntryAgentIDForm,
		Actor: audit.Actor{Kind: "system", ID: "identity"}, Data: data}); err != nil {
		return err
	}
	b, err := json.Marshal(self)
	if err != nil {
		return err
	}
	s.self = self
	return txn.Set([]byte(keySelf), b)
}

// recordPolicy appends a gate.policy entry when the constitution's digest
// differs from the last one recorded, so the record shows the policy hash
// every disclosure of this deployment states.
func (s *Service) recordPolicy(ctx context.Context) error {
	f, err := s.facts(ctx)
	if err != nil {
		return fmt.Errorf("identity: gathering the policy: %w", err)
	}
	c := f.Constitution
	ids := make([]string, len(c.HardConstraints))
	for i, h := range c.HardConstraints {
		ids[i] = h.ID
	}
	data, err := json.Marshal(map[string]any{"digest": c.Digest, "enforced": c.Enforced,
		"hardConstraints": ids, "parameters": c.Parameters})
	if err != nil {
		return err
	}
	err = s.log.Update(ctx, func(txn store.Txn) error {
		last, err := txn.Get([]byte(keyPolicy))
		if err == nil && string(last) == c.Digest {
			return nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryPolicy,
			Actor: audit.Actor{Kind: "system", ID: "identity"}, Data: data})
		if err != nil {
			return err
		}
		if err := txn.Set(policySeqKey(e.Seq), []byte(c.Digest)); err != nil {
			return err
		}
		return txn.Set([]byte(keyPolicy), []byte(c.Digest))
	})
	if err != nil {
		return fmt.Errorf("identity: record policy: %w", err)
	}
	return nil
}

// PolicyDigest returns the digest of the policy in force: the disclosed
// constitution's digest.
func (s *Service) PolicyDigest(ctx context.Context) (string, error) {
	if s.facts == nil {
		return "", ErrDisclosureUnavailable
	}
	f, err := s.facts(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrDisclosureUnavailable, err)
	}
	return f.Constitution.Digest, nil
}

// AgentID returns this deployment's stable ADP agent id, the did:key of its
// first identity key; it survives rotations.
func (s *Service) AgentID() string {
	s.keyMu.RLock()
	defer s.keyMu.RUnlock()
	return s.self.AgentID
}

// PublicKey returns the current signing key's public half.
func (s *Service) PublicKey() ed25519.PublicKey {
	s.keyMu.RLock()
	defer s.keyMu.RUnlock()
	return s.key.Public().(ed25519.PublicKey)
}

// RotationChain returns the rotation statements from AgentID to the
// current key (empty before the first rotation).
func (s *Service) RotationChain() []RotationStatement {
	s.keyMu.RLock()
	defer s.keyMu.RUnlock()
	return slices.Clone(s.self.Chain)
}

// signer returns the current key, agent id and chain under one lock.
// sync reads the stored identity again, on a shared store (Options.Shared)
// and at most every SharedRefresh unless force, and adopts a rotation
// another process made: its chain, and its key from Keys or LoadKey. A
// key it cannot get is ErrRotationUnavailable: nothing is signed with the
// key rotated away.
func (s *Service) sync(ctx context.Context, force bool) error {
	if s.shared <= 0 {
		return nil
	}
	now := time.Now().UnixNano()
	if last := s.syncedAt.Load(); !force && now-last < int64(s.shared) {
		return nil
	}
	var b []byte
	err := s.st.View(ctx, func(r store.Reader) (err error) {
		b, err = r.Get([]byte(keySelf))
		return err
	})
	if err != nil {
		return fmt.Errorf("identity: reading the stored identity: %w", err)
	}
	var self selfState
	if err := json.Unmarshal(b, &self); err != nil {
		return fmt.Errorf("identity: stored identity: %w", err)
	}
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	if self.AgentID == s.self.AgentID && len(self.Chain) == len(s.self.Chain) {
		s.syncedAt.Store(now)
		return nil
	}
	want, err := PublicKeyOf(self.AgentID)
	if err == nil && len(self.Chain) > 0 {
		want, err = PublicKeyOf(self.Chain[len(self.Chain)-1].To)
	}
	if err == nil {
		err = VerifyRotationChain(self.AgentID, self.Chain, want)
	}
	if err != nil {
		return fmt.Errorf("identity: stored identity: %w", err)
	}
	var key ed25519.PrivateKey
	for _, k := range s.keys {
		if bytes.Equal(k.Public().(ed25519.PublicKey), want) {
			key = k
		}
	}
	if key == nil && s.loadKey != nil {
		if k, err := s.loadKey(ctx, want); err == nil && bytes.Equal(k.Public().(ed25519.PublicKey), want) {
			key = k
			s.keys = append(s.keys, k)
		}
	}
	if key == nil {
		return fmt.Errorf("%w: another server rotated this identity to %s, a key this server does not hold", ErrRotationUnavailable, keyHex(want))
	}
	s.self, s.key = self, key
	s.cache.invalidate()
	s.syncedAt.Store(now)
	return nil
}

func (s *Service) signer() (ed25519.PrivateKey, string, []RotationStatement) {
	s.keyMu.RLock()
	defer s.keyMu.RUnlock()
	return s.key, s.self.AgentID, slices.Clone(s.self.Chain)
}

// OperatorCall says who asks for an operator action and why; it is written
// into the record with the action. It is the money path's type: one
// operator, one way of naming the call.
type OperatorCall = pay.OperatorCall

func operatorActor(c OperatorCall) audit.Actor { return audit.Actor{Kind: "operator", ID: c.Operator} }

// Rotation is the answer of [Service.Rotate].
type Rotation struct {
	AgentID   string            `json:"agentId" doc:"The stable agent id, unchanged by the rotation."`
	PublicKey string            `json:"publicKey" doc:"The new signing key, 64 hex."`
	Statement RotationStatement `json:"statement" doc:"The statement the old key signed (ADP §5.1)."`
	ChainLen  int               `json:"chainLength" doc:"Hops from agentId to the new key."`
	AuditSeq  uint64            `json:"auditSeq" doc:"The identity.rotated entry."`
}

// Rotate moves this identity to a new key (ADP §5.1): Options.NewKey makes
// and persists it, the current key signs a rotation statement, and the
// chain is stored and recorded in one transaction. agentId stays the same;
// disclosures are signed by the new key from then on and carry the chain.
func (s *Service) Rotate(ctx context.Context, call OperatorCall) (Rotation, error) {
	if s.newKey == nil {
		return Rotation{}, ErrRotationUnavailable
	}
	if err := s.sync(ctx, true); err != nil {
		return Rotation{}, err
	}
	s.keyMu.Lock()
	defer s.keyMu.Unlock()
	next, err := s.newKey(ctx)
	if err != nil {
		return Rotation{}, fmt.Errorf("%w: %v", ErrRotationUnavailable, err)
	}
	stmt, err := Rotate(s.key, next.Public().(ed25519.PublicKey), s.now())
	if err != nil {
		return Rotation{}, fmt.Errorf("identity: rotate: %w", err)
	}
	self := selfState{AgentID: s.self.AgentID, Chain: append(slices.Clone(s.self.Chain), stmt)}
	if err := VerifyRotationChain(self.AgentID, self.Chain, next.Public().(ed25519.PublicKey)); err != nil {
		return Rotation{}, fmt.Errorf("identity: rotate: the new chain does not verify: %w", err)
	}
	data, err := json.Marshal(map[string]any{"agentId": self.AgentID, "statement": stmt, "chainLength": len(self.Chain)})
	if err != nil {
		return Rotation{}, err
	}
	var seq uint64
	err = s.log.Update(ctx, func(txn store.Txn) error {
		// Another process may have rotated since this one read the
		// identity: a chain must grow from its stored end, never fork.
		b, err := txn.Get([]byte(keySelf))
		if err != nil {
			return err
		}
		var cur selfState
		if err := json.Unmarshal(b, &cur); err != nil {
			return fmt.Errorf("stored identity: %w", err)
		}
		if cur.AgentID != s.self.AgentID || len(cur.Chain) != len(s.self.Chain) {
			return fmt.Errorf("%w: another server rotated this identity at the same time; try again", ErrRotationUnavailable)
		}
		e, err := s.log.Append(txn, audit.Record{Type: EntryRotated, Actor: operatorActor(call),
			RequestID: call.RequestID, Rationale: call.Rationale, Data: data})
		if err != nil {
			return err
		}
		seq = e.Seq
		if b, err = json.Marshal(self); err != nil {
			return err
		}
		return txn.Set([]byte(keySelf), b)
	})
	if err != nil {
		return Rotation{}, fmt.Errorf("identity: rotate: %w", err)
	}
	s.self, s.key = self, next
	s.keys = append(s.keys, next)
	s.cache.invalidate()
	return Rotation{AgentID: self.AgentID, PublicKey: keyHex(next.Public().(ed25519.PublicKey)),
		Statement: stmt, ChainLen: len(self.Chain), AuditSeq: seq}, nil
}

// keyHex is the ADP wire form of a public key: 64 lowercase hex.
func keyHex(k ed25519.PublicKey) string { return hex.EncodeToString(k) }

func policySeqKey(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return append([]byte(keyPolicySeq), b[:]...)
}

// PolicyAt returns the gate.policy entry in force at record position seq:
// the last one appended before it, with the digest it recorded. ok is
// false when none was (a record older than this index, or no policy
// recorded yet).
func PolicyAt(r store.Reader, seq uint64) (entrySeq uint64, digest string, ok bool, err error) {
	it := r.Iterate([]byte(keyPolicySeq), policySeqKey(seq), true)
	defer it.Close()
	if !it.Next() {
		return 0, "", false, it.Err()
	}
	k := it.Key()
	return binary.BigEndian.Uint64(k[len(keyPolicySeq):]), string(it.Value()), true, nil
}

// SignStatement signs msg with the deployment's current identity key and
// returns the stable agent id, the signing key and the signature. The
// protocol surface signs its negotiation offers with it; msg must carry
// its own domain separation (a type member), so that it can never be
// read as a disclosure.
func (s *Service) SignStatement(msg []byte) (agentID string, pub ed25519.PublicKey, sig []byte) {
	// A shared store's rotation elsewhere is adopted first; when that
	// fails the statement is signed with the key held, which a verifier
	// that follows the chain refuses: never a forged statement.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.sync(ctx, false)
	cancel()
	key, id, _ := s.signer()
	return id, key.Public().(ed25519.PublicKey), ed25519.Sign(key, msg)
}

// Revoked reports whether the operator revoked a counterparty's agent id
// (POST /identity/revoke): a revoked counterparty's signatures are
// refused wherever they are checked.
func (s *Service) Revoked(ctx context.Context, agentID string) (bool, error) {
	set, err := s.revokedSet(ctx)
	if err != nil {
		return false, err
	}
	return set(agentID), nil
}
