package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/jcsenc"
)

// SignedRevocation is a revocation attributable to the key that issued it
// (SPEC §10.1): Signature is the hex Ed25519 signature of PublicKey over
// canonicalize({id, reason, revokedAt}). ID is a disclosureId or an agentId.
type SignedRevocation struct {
	ID        string `json:"id"`
	Reason    string `json:"reason"`
	RevokedAt string `json:"revokedAt"`
	PublicKey string `json:"publicKey"`
	Signature string `json:"signature"`
}

// revocationBody is canonicalize({id, reason, revokedAt}); those keys are
// already in RFC 8785 order.
func revocationBody(id, reason, revokedAt string) []byte {
	b := make([]byte, 0, 48+len(id)+len(reason)+len(revokedAt))
	b = append(b, `{"id":`...)
	b = jcsenc.AppendString(b, id)
	b = append(b, `,"reason":`...)
	b = jcsenc.AppendString(b, reason)
	b = append(b, `,"revokedAt":`...)
	b = jcsenc.AppendString(b, revokedAt)
	return append(b, '}')
}

// SignRevocation signs the revocation of id (a disclosureId or agentId) at
// the given time (written with [Timestamp]).
func SignRevocation(key ed25519.PrivateKey, id, reason string, at time.Time) (SignedRevocation, error) {
	if len(key) != ed25519.PrivateKeySize {
		return SignedRevocation{}, fmt.Errorf("identity: revocation: private key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if !utf8.ValidString(id) || !utf8.ValidString(reason) {
		return SignedRevocation{}, fmt.Errorf("identity: revocation: id and reason must be valid UTF-8: %w", ErrMalformed)
	}
	r := SignedRevocation{
		ID:        id,
		Reason:    reason,
		RevokedAt: Timestamp(at),
		PublicKey: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
	}
	r.Signature = hex.EncodeToString(ed25519.Sign(key, revocationBody(r.ID, r.Reason, r.RevokedAt)))
	return r, nil
}

// VerifyRevocation checks r's signature against its embedded public key.
// That proves who revoked, not that they were entitled to: a verifier
// should act only on revocations by a key it trusts for the id (the
// agent's own key, or an operator's). Errors match [ErrInvalidSignature],
// or [ErrMalformed] for a badly encoded key or signature.
func VerifyRevocation(r SignedRevocation) error {
	pub, err := hex.DecodeString(r.PublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("identity: revocation: publicKey is not a 32-byte hex key: %w", ErrMalformed)
	}
	sig, err := hex.DecodeString(r.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("identity: revocation: signature is not 64 hex bytes: %w", ErrMalformed)
	}
	if !utf8.ValidString(r.ID) || !utf8.ValidString(r.Reason) || !utf8.ValidString(r.RevokedAt) {
		return fmt.Errorf("identity: revocation: invalid UTF-8: %w", ErrMalformed)
	}
	if !ed25519.Verify(pub, revocationBody(r.ID, r.Reason, r.RevokedAt), sig) {
		return fmt.Errorf("identity: revocation: %w", ErrInvalidSignature)
	}
	return nil
}

// RevocationEntry is one revoked id.
type RevocationEntry struct {
	ID        string `json:"id"`
	Reason    string `json:"reason"`
	RevokedAt string `json:"revokedAt"`
}

// RevocationStatus is the answer of [RevocationList.Status].
type RevocationStatus struct {
	Revoked   bool   `json:"revoked"`
	Reason    string `json:"reason,omitempty"`
	RevokedAt string `json:"revokedAt,omitempty"`
}

// RevocationList is an in-memory status list keyed by disclosureId or
// agentId (SPEC §10.1). Its JSON form is the reference's portable one, an
// array of {id, reason, revokedAt} in revocation order. The zero value is
// an empty list ready to use; it is safe for concurrent use and must not be
// copied after first use. Wire it into a [Policy] as p.IsRevoked =
// list.IsRevoked.
type RevocationList struct {
	mu      sync.RWMutex // guards entries and index
	entries []RevocationEntry
	index   map[string]int // id → position in entries
}

// Revoke marks id revoked. Revoking an id again replaces its reason and
// time but keeps its place in the list.
func (l *RevocationList) Revoke(id, reason string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.put(RevocationEntry{ID: id, Reason: reason, RevokedAt: Timestamp(at)})
}

func (l *RevocationList) put(e RevocationEntry) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[e.ID]; ok {
		l.entries[i] = e
		return
	}
	l.index[e.ID] = len(l.entries)
	l.entries = append(l.entries, e)
}

// IsRevoked reports whether id is revoked.
func (l *RevocationList) IsRevoked(id string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	_, ok := l.index[id]
	return ok
}

// Status reports whether id is revoked, and if so why and when.
func (l *RevocationList) Status(id string) RevocationStatus {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i, ok := l.index[id]
	if !ok {
		return RevocationStatus{}
	}
	e := l.entries[i]
	return RevocationStatus{Revoked: true, Reason: e.Reason, RevokedAt: e.RevokedAt}
}

// Entries returns a copy of the list in revocation order.
func (l *RevocationList) Entries() []RevocationEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]RevocationEntry{}, l.entries...)
}

// MarshalJSON writes the portable form.
func (l *RevocationList) MarshalJSON() ([]byte, error) {
	entries := l.Entries()
	b := make([]byte, 0, 64*len(entries)+2)
	b = append(b, '[')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jcsenc.AppendString(b, e.ID)
		b = append(b, `,"reason":`...)
		b = jcsenc.AppendString(b, e.Reason)
		b = append(b, `,"revokedAt":`...)
		b = jcsenc.AppendString(b, e.RevokedAt)
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON replaces the list with the portable form in data, parsed
// strictly; on error the list is left as it was.
func (l *RevocationList) UnmarshalJSON(data []byte) error {
	v, err := parseStrictJSON(string(data), 4)
	if err != nil {
		return fmt.Errorf("identity: revocation list: %w", err)
	}
	if v.kind != kindArray {
		return fmt.Errorf("identity: revocation list: %w", mustBe("an array"))
	}
	var fresh RevocationList
	for n := range v.vals {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return fmt.Errorf("identity: revocation list: %w", atIndex(n, err))
		}
		var re RevocationEntry
		var seen uint32
		for i, k := range e.keys {
			var err error
			switch k {
			case "id":
				seen |= 1 << 0
				re.ID, err = decString(&e.vals[i])
			case "reason":
				seen |= 1 << 1
				re.Reason, err = decString(&e.vals[i])
			case "revokedAt":
				seen |= 1 << 2
				re.RevokedAt, err = decString(&e.vals[i])
			default:
				return fmt.Errorf("identity: revocation list: %w", atIndex(n, unknownField(k)))
			}
			if err != nil {
				return fmt.Errorf("identity: revocation list: %w", atIndex(n, at(k, err)))
			}
		}
		if seen != 1<<3-1 {
			return fmt.Errorf("identity: revocation list: %w", atIndex(n, missing("id reason revokedAt", seen)))
		}
		fresh.put(re)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries, l.index = fresh.entries, fresh.index
	return nil
}
