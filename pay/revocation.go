package pay

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/store"
)

// Revocations
//
// An operator revokes a mandate (RevokeMandate) or a whole agent identity
// (RevokeIdentity). Revoking an identity stops every mandate whose subject
// it is at once: the deciding transaction of every payment, the approval of
// a held one, the capture of a hold and the opening of a session all read
// the revocation in the same transaction that would spend. Both kinds are
// kept in one feed ordered by when they happened, for agents and
// counterparties that mirror revocations.

// IdentityRevocation is a stored revocation of an agent identity.
type IdentityRevocation struct {
	Agent     string    `json:"agent"`
	RevokedAt time.Time `json:"revokedAt"`
	Operator  string    `json:"operator"`
	Rationale string    `json:"rationale"`
}

// RevocationEvent is one entry of the revocation feed.
type RevocationEvent struct {
	Kind      string    `json:"kind"` // "mandate" or "identity"
	ID        string    `json:"id"`   // the mandate id or the agent id
	RevokedAt time.Time `json:"revokedAt"`
	Operator  string    `json:"operator"`
	Rationale string    `json:"rationale"`
}

// revokeIdentity revokes an agent identity (64 lower-case hex digits) for
// good. Revoking twice returns the first revocation and changes nothing.
// within runs in the same transaction when the revocation is new (the
// protocol surface records it there).
func (s *Service) revokeIdentity(ctx context.Context, agent string, call OperatorCall, within func(store.Txn, IdentityRevocation) error) (IdentityRevocation, bool, error) {
	if !isAgentID(agent) {
		return IdentityRevocation{}, false, malformed(FieldError{Field: "agent", Rule: "hexadecimal", Message: "must be 64 lower-case hex digits (an Ed25519 public key)"})
	}
	var out IdentityRevocation
	var fresh bool
	err := s.log.Update(ctx, func(txn store.Txn) error {
		fresh = false
		b, err := txn.Get([]byte(keyRevokedIdentity + agent))
		if err == nil {
			return json.Unmarshal(b, &out)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out = IdentityRevocation{Agent: agent, RevokedAt: s.now().UTC().Truncate(time.Microsecond), Operator: call.Operator, Rationale: call.Rationale}
		v, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyRevokedIdentity+agent), v); err != nil {
			return err
		}
		if err := appendRevocation(txn, "identity", agent); err != nil {
			return err
		}
		fresh = true
		if within != nil {
			return within(txn, out)
		}
		return nil
	})
	if err != nil {
		return IdentityRevocation{}, false, fmt.Errorf("pay: revoke identity: %w", err)
	}
	return out, fresh, nil
}

// IdentityRevoked reports whether an operator revoked the agent identity.
func IdentityRevoked(r store.Reader, agent string) (bool, error) { return identityRevoked(r, agent) }

func identityRevoked(r store.Reader, agent string) (bool, error) {
	_, err := r.Get([]byte(keyRevokedIdentity + agent))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// appendRevocation adds a revocation to the feed inside txn. The feed is
// ordered by a counter the transactions increment, i.e. by commit order:
// a follower's cursor never skips an event, whatever the clock did.
func appendRevocation(txn store.Txn, kind, id string) error {
	n, err := getInt(txn, []byte(keyRevocationSeq))
	if err != nil {
		return err
	}
	n++
	if err := putInt(txn, []byte(keyRevocationSeq), n); err != nil {
		return err
	}
	return txn.Set(append(append([]byte(keyRevocations), be8(uint64(n))...), kind+"/"+id...), nil)
}

// Revocations returns up to limit revocations after the cursor (the last
// event's cursor from an earlier page, "" from the start), oldest first,
// and the cursor of the last one returned.
func (s *Service) Revocations(ctx context.Context, after string, limit int) ([]RevocationEvent, string, bool, error) {
	lower := []byte(keyRevocations)
	if after != "" {
		raw, err := decodeFeedCursor(after)
		if err != nil {
			return nil, "", false, err
		}
		lower = append(append([]byte(keyRevocations), raw...), 0)
	}
	var out []RevocationEvent
	var last []byte
	more := false
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate(lower, store.PrefixEnd([]byte(keyRevocations)), false)
		defer it.Close()
		for it.Next() {
			if len(out) == limit {
				more = true
				break
			}
			ref := it.Key()[len(keyRevocations):]
			kind, id, _ := strings.Cut(string(ref[8:]), "/")
			ev := RevocationEvent{Kind: kind, ID: id}
			var key string
			if kind == "identity" {
				key = keyRevokedIdentity + id
			} else {
				key = keyRevoked + id
			}
			b, err := r.Get([]byte(key))
			if err != nil {
				return err
			}
			var rec struct {
				RevokedAt time.Time `json:"revokedAt"`
				Operator  string    `json:"operator"`
				Rationale string    `json:"rationale"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				return err
			}
			ev.RevokedAt, ev.Operator, ev.Rationale = rec.RevokedAt, rec.Operator, rec.Rationale
			out = append(out, ev)
			last = slices.Clone(ref)
		}
		return it.Err()
	})
	if err != nil {
		return nil, "", false, err
	}
	cursor := ""
	if last != nil {
		cursor = encodeFeedCursor(last)
	}
	return out, cursor, more, nil
}

// RevocationStatus says whether a mandate or an identity is revoked.
func (s *Service) RevocationStatus(ctx context.Context, kind, id string) (*RevocationEvent, error) {
	var out *RevocationEvent
	err := s.st.View(ctx, func(r store.Reader) error {
		key := keyRevoked + id
		if kind == "identity" {
			key = keyRevokedIdentity + id
		}
		b, err := r.Get([]byte(key))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var rec struct {
			RevokedAt time.Time `json:"revokedAt"`
			Operator  string    `json:"operator"`
			Rationale string    `json:"rationale"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return err
		}
		out = &RevocationEvent{Kind: kind, ID: id, RevokedAt: rec.RevokedAt, Operator: rec.Operator, Rationale: rec.Rationale}
		return nil
	})
	return out, err
}

// ErrBadFeedCursor: the cursor is not one a revocation page returned.
var ErrBadFeedCursor = errcode.New(CodeBadFeedCursor, "pay: malformed revocation cursor")

func encodeFeedCursor(raw []byte) string { return base64.RawURLEncoding.EncodeToString(raw) }

func decodeFeedCursor(c string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(raw) < 10 || len(raw) > 300 {
		return nil, ErrBadFeedCursor
	}
	return raw, nil
}
