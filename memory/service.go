package memory

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/sealbox"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Record entry types the store appends (the four memory event kinds).
const (
	EntryRecorded     = "memory.recorded"
	EntryConsolidated = "memory.consolidated"
	EntryErased       = "memory.erased"
	EntryTainted      = "memory.tainted"
)

// sealPurpose derives the key that seals body keys from the server's seal
// key (internal/sealbox), apart from every other use of it.
const sealPurpose = "countersign memory body key v1"

// Options configure [New]. Store and Log are required.
type Options struct {
	Store store.Store
	// Log is the signed record; the service appends to it in the same
	// transaction as each change, and signs artifacts with its key.
	Log *audit.Log
	// Mandates verifies memory mandates with the operator keys (the same
	// verifier that checks spend mandates). Nil: every request is refused
	// (memory.mandate_invalid, reason no_operator_keys).
	Mandates *pay.MandateVerifier
	// SealKey seals each body's key at rest (AES-GCM under a key derived
	// from it), so a copy of the store alone does not open bodies. Nil:
	// body keys are stored in the clear (development only).
	SealKey []byte
	// UntrustedSourceKinds are source kinds (agent, tool, url, operator,
	// record) whose records are tainted when written: policy on source
	// kinds. The operator marks single sources with [Service.Taint].
	UntrustedSourceKinds []string
	// Tokenizer counts tokens for Assemble. Default [EstimateTokenizer].
	Tokenizer Tokenizer
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives the store's warnings. Default slog.Default().
	Logger *slog.Logger
}

// Service is the memory store. It is safe for concurrent use.
type Service struct {
	st        store.Store
	log       *audit.Log
	mandates  *pay.MandateVerifier
	box       *sealbox.Box
	untrusted map[string]bool
	tok       Tokenizer
	now       func() time.Time
	logger    *slog.Logger

	purges sync.WaitGroup // physical purges in flight (Forget)

	cacheMu sync.Mutex
	cache   map[[32]byte]*Mandate // verified mandates by token hash; never modified once cached
}

// New returns the memory store over opts.Store.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Log == nil {
		return nil, errors.New("memory: new: Store and Log are required")
	}
	box, err := sealbox.New(opts.SealKey, nil, sealPurpose)
	if err != nil {
		return nil, fmt.Errorf("memory: new: %w", err)
	}
	s := &Service{st: opts.Store, log: opts.Log, mandates: opts.Mandates, box: box,
		untrusted: map[string]bool{}, tok: opts.Tokenizer, now: opts.Now, logger: opts.Logger,
		cache: map[[32]byte]*Mandate{}}
	for _, k := range opts.UntrustedSourceKinds {
		switch k {
		case "agent", "tool", "url", "operator", "record":
			s.untrusted[k] = true
		default:
			return nil, fmt.Errorf("memory: new: %q is not a source kind (agent, tool, url, operator, record)", k)
		}
	}
	if s.tok == nil {
		s.tok = EstimateTokenizer{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	return s, nil
}

// VerifierKey is the key that verifies every artifact of this store (the
// record's verifier key).
func (s *Service) VerifierKey() string { return s.log.VerifierKey() }

// Caller is the agent credential a request came with: its key id (the
// idempotency namespace) and the agent ids it may act for. The zero
// Caller is an in-process caller trusted to act for any agent.
type Caller struct {
	KeyID  string
	Agents []string
}

func (c Caller) mayActFor(agent string) bool {
	if c.KeyID == "" && c.Agents == nil {
		return true
	}
	return slices.Contains(c.Agents, agent)
}

// Rights a request needs.
type right int

const (
	rightRead right = iota
	rightWrite
	rightErase
)

func (r right) String() string { return [...]string{"canRead", "canWrite", "canErase"}[r] }

// authorize verifies a memory mandate's signature and claims (no storage):
// operator key, typ, claims, time, subject, namespace and right.
// Revocation is checked by checkRevoked inside the transaction.
func (s *Service) authorize(token string, c *Caller, ns string, need right) (*Mandate, error) {
	if s.mandates == nil {
		return nil, refusedMandate("no_operator_keys", nil)
	}
	if token == "" {
		return nil, refusedMandate("mandate_missing", nil)
	}
	m, err := s.verifyMandate(token)
	if err != nil {
		return nil, err
	}
	claims := m.Claims
	now := s.now()
	if !now.Before(claims.ExpiresAt) {
		return nil, refusedMandate("mandate_expired", nil)
	}
	if claims.IssuedAt.After(now.Add(pay.DefaultIssuedAtSkew)) {
		return nil, refusedMandate("mandate_not_yet_valid", nil)
	}
	if c != nil && !c.mayActFor(claims.Agent) {
		return nil, refusedMandate("agent_not_permitted", nil)
	}
	if !m.covers(ns) {
		return nil, &Error{code: CodeRightMissing, reason: "namespace",
			msg: fmt.Sprintf("the mandate grants no rights over namespace %q", ns)}
	}
	granted := map[right]bool{rightRead: claims.CanRead, rightWrite: claims.CanWrite, rightErase: claims.CanErase}[need]
	if !granted {
		return nil, &Error{code: CodeRightMissing, reason: need.String(),
			msg: fmt.Sprintf("the mandate does not grant %s", need)}
	}
	return m, nil
}

// maxCachedMandates bounds the verified-mandate cache; when it is full it
// starts over (a mandate costs one signature check to verify again).
const maxCachedMandates = 4096

// verifyMandate checks a token's signature and claims once: mandates are
// immutable, so a verified one is cached by the SHA-256 of the token.
// Time, subject, namespace, rights and revocation are checked on every
// use by the caller.
func (s *Service) verifyMandate(token string) (*Mandate, error) {
	sum := sha256.Sum256([]byte(token))
	s.cacheMu.Lock()
	m, ok := s.cache[sum]
	s.cacheMu.Unlock()
	if ok {
		return m, nil
	}
	kid, payload, err := s.mandates.VerifyToken(token, MandateType)
	if err != nil {
		var ue *pay.UnauthorizedError
		if errors.As(err, &ue) {
			return nil, refusedMandate(string(ue.Reason), err)
		}
		return nil, refusedMandate("mandate_malformed", err)
	}
	var claims MandateClaims
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, refusedMandate("mandate_invalid_claims", err)
	}
	if err := claims.Validate(); err != nil {
		return nil, refusedMandate("mandate_invalid_claims", err)
	}
	m = &Mandate{KeyID: kid, Claims: claims}
	s.cacheMu.Lock()
	if len(s.cache) >= maxCachedMandates {
		clear(s.cache)
	}
	s.cache[sum] = m
	s.cacheMu.Unlock()
	return m, nil
}

func checkRevoked(r store.Reader, m *Mandate) error {
	revoked, err := pay.MandateRevoked(r, m.Claims.ID)
	if err != nil {
		return err
	}
	if revoked {
		return refusedMandate("mandate_revoked", nil)
	}
	return nil
}

// stamp is the server's transaction time: UTC, microseconds.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// loadBody opens a stored record's body.
func (s *Service) loadBody(r store.Reader, id string) ([]byte, error) {
	sealedKey, err := r.Get([]byte(keyKey + id))
	if err != nil {
		return nil, fmt.Errorf("memory: key of %s: %w", id, err)
	}
	k, err := s.box.Open(id, string(sealedKey))
	if err != nil {
		return nil, fmt.Errorf("memory: key of %s: %w", id, err)
	}
	key, err := base64.RawStdEncoding.DecodeString(k)
	if err != nil {
		return nil, fmt.Errorf("memory: key of %s: %w", id, err)
	}
	ct, err := r.Get([]byte(keyBody + id))
	if err != nil {
		return nil, fmt.Errorf("memory: body of %s: %w", id, err)
	}
	return decryptBody(id, key, ct)
}

// storeBody encrypts body under a fresh key and writes both.
func (s *Service) storeBody(txn store.Txn, id string, body []byte) error {
	key, ct, err := encryptBody(id, body)
	if err != nil {
		return err
	}
	sealed, err := s.box.Seal(id, base64.RawStdEncoding.EncodeToString(key), rand.Reader)
	if err != nil {
		return err
	}
	if err := txn.Set([]byte(keyKey+id), []byte(sealed)); err != nil {
		return err
	}
	return txn.Set([]byte(keyBody+id), ct)
}

// hydrate turns a stored record into the Record handed out: body opened,
// seal entry read from the record.
func (s *Service) hydrate(r store.Reader, st *stored) (Record, error) {
	body, err := s.loadBody(r, st.ID)
	if err != nil {
		return Record{}, err
	}
	return Record{
		ID: st.ID, Namespace: st.Namespace, Subject: st.Subject, Kind: st.Kind, Body: body,
		ValidFrom: st.ValidFrom, ValidTo: st.ValidTo, RecordedAt: st.RecordedAt, SupersededAt: st.SupersededAt,
		Source: st.Source, Edges: st.Edges, Taint: st.Taint,
		Seal: Seal{ContentDigest: st.Digest, Salt: st.Salt, Entry: st.Entry}, bodyCanonical: st.BodyJCS,
	}, nil
}

// sign fills an artifact's signature: the record key's statement over
// the SHA-256 of the artifact's canonical JSON without its signature.
func (s *Service) sign(kind string, v any, set func(string)) error {
	d, err := artifactDigest(v)
	if err != nil {
		return fmt.Errorf("memory: sign %s: %w", kind, err)
	}
	sig, err := s.log.SignStatement(kind, d)
	if err != nil {
		return fmt.Errorf("memory: sign %s: %w", kind, err)
	}
	set(sig)
	return nil
}

func hexDigest(d [32]byte) string { return hex.EncodeToString(d[:]) }

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }

func newID() string { return ids.New(ids.Memory) }
