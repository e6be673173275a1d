// Package auth holds agent credentials: issuing them, checking them on every
// request, and revoking them.
//
// # Credentials
//
// An agent credential is a bearer secret of the form
//
//	svc_ak_<ULID>_<secret>
//
// where "ak_<ULID>" is the key's public id and <secret> is 32 random bytes in
// base64url. The secret is shown once, when the key is issued; the store
// keeps only its SHA-256, and the record notes the issuance without it. A
// key names the agent ids (hex Ed25519 public keys) it may act for, so a
// leaked credential cannot pay under another agent's mandate.
//
// Checking a credential costs one store read and one constant-time compare.
// SHA-256 (not a password hash) is right here: the secret has 256 bits of
// entropy, so there is nothing for a slow hash to protect against, and a
// slow hash on every request would be a denial-of-service lever.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
)

// Errors returned by Authenticate. Check with errors.Is; each carries a
// stable code through its Code method.
var (
	// ErrMissing: no credential was presented.
	ErrMissing = errcode.New(contract.CodeAuthMissing, "auth: no agent credential")
	// ErrInvalid: the credential is malformed, unknown, wrong or revoked.
	// The four cases are deliberately one error so that a caller cannot
	// probe which key ids exist.
	ErrInvalid = errcode.New(contract.CodeAuthInvalid, "auth: invalid agent credential")
	// ErrNotFound: no key with that id (management calls only).
	ErrNotFound = errcode.New(CodeNotFound, "auth: no such agent key")
	// ErrBadRequest: an issuance request is not valid.
	ErrBadRequest = errcode.New(CodeBadRequest, "auth: invalid key request")
)

const (
	credentialPrefix = "svc_"
	keyPrefix        = "auth/key/"       // + key id → storedKey JSON
	keyOrder         = "auth/key-order/" // + seq BE8 + key id → empty: List's order (package seqlist)
	keyLayout        = "auth/key-layout" // set once every key has its order row
	secretBytes      = 32
)

// Key is an agent key as the service shows it: never with its secret.
type Key struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	AgentIDs []string `json:"agentIds"`
	JKT      string   `json:"jkt,omitempty"` // DPoP JWK thumbprint the key is bound to
	// RateLimit overrides the server's default bucket for this key.
	RateLimit *Limit     `json:"rateLimit,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// MayActFor reports whether the key may act for the agent id.
func (k Key) MayActFor(agentID string) bool {
	for _, a := range k.AgentIDs {
		if a == agentID {
			return true
		}
	}
	return false
}

// storedKey is the persisted form: the public key fields plus the secret's
// SHA-256.
type storedKey struct {
	Key
	SecretHash string `json:"secretHash"`
	// ListSeq is the seq of the key's agent.created entry, its place in
	// List; 0 for a key stored before List followed commit order.
	ListSeq uint64 `json:"listSeq,omitempty"`
}

// Options configure a Keys. The zero value is usable.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand is the source of secrets. Default crypto/rand.Reader.
	Rand io.Reader
	// Logger receives debug logs of refused credentials (never the
	// credential itself). Default slog.Default().
	Logger *slog.Logger
}

// Keys issues, checks and revokes agent keys. It is safe for concurrent use.
type Keys struct {
	st     store.Store
	log    *audit.Log
	now    func() time.Time
	rand   io.Reader
	logger *slog.Logger
	layout seqlist.Migration // of List's order rows; see migrate
}

// New returns a Keys over the store, recording issuance and revocation in
// the record.
func New(st store.Store, log *audit.Log, opts *Options) *Keys {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Keys{st: st, log: log, now: o.Now, rand: o.Rand, logger: o.Logger}
}

// CreateRequest describes a key to issue.
type CreateRequest struct {
	Name     string   `json:"name" validate:"required,min=1,max=100"`
	AgentIDs []string `json:"agentIds" validate:"required,min=1,max=100,dive,len=64,hexadecimal,lowercase"`
	JKT      string   `json:"jkt,omitempty" validate:"omitempty,len=43"`
	// RateLimit optionally overrides the default bucket for this key.
	RateLimit *Limit `json:"rateLimit,omitempty"`
}

// Issued is the result of issuing a key: the key and, this once, its
// credential.
type Issued struct {
	Key
	// Credential is the bearer secret. It is not stored and cannot be
	// shown again.
	Credential string `json:"credential"`
}

// LogValue keeps the credential out of logs.
func (i Issued) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", i.ID), slog.String("credential", "REDACTED"))
}

var agentIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func (r *CreateRequest) check() error {
	name := strings.TrimSpace(r.Name)
	if name == "" || len(name) > 100 {
		return fmt.Errorf("%w: name must be 1 to 100 characters", ErrBadRequest)
	}
	if len(r.AgentIDs) == 0 || len(r.AgentIDs) > 100 {
		return fmt.Errorf("%w: agentIds must list 1 to 100 agent ids", ErrBadRequest)
	}
	for i, a := range r.AgentIDs {
		if !agentIDPattern.MatchString(a) {
			return fmt.Errorf("%w: agentIds[%d] must be 64 lowercase hex characters (an Ed25519 public key)", ErrBadRequest, i)
		}
	}
	if l := r.RateLimit; l != nil && (l.Rate <= 0 || l.Burst < 1 || l.Rate > 100_000 || l.Burst > 1_000_000) {
		return fmt.Errorf("%w: rateLimit needs rate > 0 (per second, at most 100000) and burst >= 1", ErrBadRequest)
	}
	if r.JKT != "" {
		if b, err := base64.RawURLEncoding.DecodeString(r.JKT); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("%w: jkt must be a base64url SHA-256 JWK thumbprint", ErrBadRequest)
		}
	}
	return nil
}

// Create issues a key and records an agent.created entry (without the
// secret) in the same transaction. actor and requestID say who asked.
func (k *Keys) Create(ctx context.Context, req CreateRequest, actor audit.Actor, requestID string) (Issued, error) {
	if err := req.check(); err != nil {
		return Issued{}, err
	}
	secret := make([]byte, secretBytes)
	if _, err := io.ReadFull(k.rand, secret); err != nil {
		return Issued{}, fmt.Errorf("auth: generating secret: %w", err)
	}
	id := ids.New(ids.AgentKey)
	enc := base64.RawURLEncoding.EncodeToString(secret)
	sum := sha256.Sum256([]byte(enc))
	sk := storedKey{
		Key: Key{
			ID:        id,
			Name:      strings.TrimSpace(req.Name),
			AgentIDs:  append([]string(nil), req.AgentIDs...),
			JKT:       req.JKT,
			RateLimit: req.RateLimit,
			CreatedAt: k.now().UTC(),
		},
		SecretHash: hex.EncodeToString(sum[:]),
	}
	data, err := json.Marshal(sk.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("auth: %w", err)
	}
	err = k.log.Update(ctx, func(txn store.Txn) error {
		e, err := k.log.Append(txn, audit.Record{
			Type: "agent.created", Actor: actor, RequestID: requestID, Data: data,
		})
		if err != nil {
			return err
		}
		s := sk // a copy per attempt: fn may run more than once
		s.ListSeq = e.Seq
		val, err := json.Marshal(s)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyPrefix+id), val); err != nil {
			return err
		}
		return txn.Set(seqlist.Key(keyOrder, s.ListSeq, id), nil)
	})
	if err != nil {
		return Issued{}, fmt.Errorf("auth: create key: %w", err)
	}
	return Issued{Key: sk.Key, Credential: credentialPrefix + id + "_" + enc}, nil
}

// ParseCredential splits a credential into its key id and secret. It does
// not check the secret.
func ParseCredential(cred string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(cred, credentialPrefix)
	if !ok {
		return "", "", ErrInvalid
	}
	n := len(ids.AgentKey) + 26 // "ak_" + ULID
	if len(rest) < n+2 || rest[n] != '_' {
		return "", "", ErrInvalid
	}
	id, secret = rest[:n], rest[n+1:]
	if !ids.Valid(ids.AgentKey, id) {
		return "", "", ErrInvalid
	}
	return id, secret, nil
}

// Authenticate checks a credential and returns its key. Every failure is
// ErrMissing or ErrInvalid; the reason is logged at debug level only.
func (k *Keys) Authenticate(ctx context.Context, cred string) (Key, error) {
	if cred == "" {
		return Key{}, ErrMissing
	}
	id, secret, err := ParseCredential(cred)
	if err != nil {
		k.logger.DebugContext(ctx, "agent credential refused", slog.String("reason", "malformed"))
		return Key{}, ErrInvalid
	}
	sk, err := k.get(ctx, id)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			k.logger.DebugContext(ctx, "agent credential refused", slog.String("reason", "unknown key"), slog.String("keyId", id))
			return Key{}, ErrInvalid
		}
		return Key{}, err
	}
	sum := sha256.Sum256([]byte(secret))
	want, err := hex.DecodeString(sk.SecretHash)
	if err != nil || subtle.ConstantTimeCompare(sum[:], want) != 1 {
		k.logger.DebugContext(ctx, "agent credential refused", slog.String("reason", "wrong secret"), slog.String("keyId", id))
		return Key{}, ErrInvalid
	}
	if sk.RevokedAt != nil {
		k.logger.DebugContext(ctx, "agent credential refused", slog.String("reason", "revoked"), slog.String("keyId", id))
		return Key{}, ErrInvalid
	}
	return sk.Key, nil
}

// Get returns a key by id, revoked or not.
func (k *Keys) Get(ctx context.Context, id string) (Key, error) {
	sk, err := k.get(ctx, id)
	return sk.Key, err
}

func (k *Keys) get(ctx context.Context, id string) (storedKey, error) {
	var sk storedKey
	err := k.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyPrefix + id))
		if errors.Is(err, store.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &sk)
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return storedKey{}, fmt.Errorf("auth: read key %s: %w", id, err)
	}
	return sk, err
}

// Revoke marks a key revoked, effective for every later Authenticate, and
// records agent.revoked with the rationale. Revoking a revoked key is not an
// error and records nothing new.
func (k *Keys) Revoke(ctx context.Context, id string, actor audit.Actor, requestID, rationale string) (Key, error) {
	var out Key
	err := k.log.Update(ctx, func(txn store.Txn) error {
		b, err := txn.Get([]byte(keyPrefix + id))
		if errors.Is(err, store.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var sk storedKey
		if err := json.Unmarshal(b, &sk); err != nil {
			return err
		}
		if sk.RevokedAt != nil {
			out = sk.Key
			return nil
		}
		now := k.now().UTC()
		sk.RevokedAt = &now
		val, err := json.Marshal(sk)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyPrefix+id), val); err != nil {
			return err
		}
		data, err := json.Marshal(sk.Key)
		if err != nil {
			return err
		}
		if _, err := k.log.Append(txn, audit.Record{
			Type: "agent.revoked", Actor: actor, RequestID: requestID, Rationale: rationale, Data: data,
		}); err != nil {
			return err
		}
		out = sk.Key
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Key{}, err
		}
		return Key{}, fmt.Errorf("auth: revoke %s: %w", id, err)
	}
	return out, nil
}

// KeyPage is a page of agent keys, oldest first, never with secrets.
type KeyPage struct {
	Data       []Key   `json:"data"`
	HasMore    bool    `json:"hasMore"`
	NextCursor *string `json:"nextCursor"`
}

// ErrBadCursor: a List cursor that this package did not mint.
var ErrBadCursor = errcode.New(CodeBadCursor, "auth: malformed cursor")

// List returns a page of agent keys in creation order: the order their
// creations committed, so that a key created after a page was read is on
// a later page, whatever its id. cursor is the NextCursor of the previous
// page, "" for the first; limit is 1 to 100 (0 means 20).
func (k *Keys) List(ctx context.Context, cursor string, limit int) (KeyPage, error) {
	if limit == 0 {
		limit = 20
	}
	if limit < 1 || limit > 100 {
		return KeyPage{}, fmt.Errorf("%w: limit must be 1 to 100", ErrBadRequest)
	}
	after, err := seqlist.ParseCursor(cursor)
	if err != nil || (cursor != "" && !ids.Valid(ids.AgentKey, after.ID)) {
		return KeyPage{}, ErrBadCursor
	}
	if err := k.migrate(ctx); err != nil {
		return KeyPage{}, err
	}
	page := KeyPage{Data: []Key{}}
	var last seqlist.Pos
	err = k.st.View(ctx, func(r store.Reader) error {
		page.Data = page.Data[:0]
		var err error
		last, page.HasMore, err = seqlist.Page(r, keyOrder, after, limit, func(id string, _ []byte) (bool, error) {
			b, err := r.Get([]byte(keyPrefix + id))
			if err != nil {
				return false, fmt.Errorf("auth: key %s: %w", id, err)
			}
			var sk storedKey
			if err := json.Unmarshal(b, &sk); err != nil {
				return false, fmt.Errorf("auth: key %s: %w", id, err)
			}
			page.Data = append(page.Data, sk.Key)
			return true, nil
		})
		return err
	})
	if err != nil {
		return KeyPage{}, err
	}
	if page.HasMore {
		c := last.Cursor()
		page.NextCursor = &c
	}
	return page, nil
}

// migrate gives every key of a store written before List followed commit
// order its order row, at the seq its record keeps: 0 for those keys, so
// that they come first, by id, as they were listed. It runs once per
// store, at the first List: New cannot do I/O.
func (k *Keys) migrate(ctx context.Context) error {
	err := k.layout.Run(ctx, k.st, keyLayout, func(txn store.Txn) (bool, error) {
		it := txn.Iterate([]byte(keyPrefix), store.PrefixEnd([]byte(keyPrefix)), false)
		var rows []seqlist.Pos
		for it.Next() {
			var sk storedKey
			if err := json.Unmarshal(it.Value(), &sk); err != nil {
				it.Close()
				return false, fmt.Errorf("key %s: %w", it.Key(), err)
			}
			rows = append(rows, seqlist.Pos{Seq: sk.ListSeq, ID: string(it.Key()[len(keyPrefix):])})
		}
		if err := it.Close(); err != nil {
			return false, err
		}
		changed := false
		for _, p := range rows {
			added, err := seqlist.Add(txn, keyOrder, p.Seq, p.ID)
			if err != nil {
				return false, err
			}
			changed = changed || added
		}
		return changed, nil
	})
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	return nil
}
