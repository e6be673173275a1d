package pay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

// Idempotency
//
// The first request with a key stores the digest of its instruction and,
// once its outcome is final, the outcome itself, in the same transaction
// that decides it; a payment that settles or fails leaves the record in
// flight instead, and its outcome is rebuilt from the intent (finalIdem). A later request with the same key and the same digest
// gets the stored outcome back (a replay); with another digest it is an
// ErrIdempotencyConflict; while the first is still running it is
// ErrInFlight. Transient refusals (settlement frozen, rail unavailable, rate
// limited) store no final outcome, so the same key can be retried.
//
// Keys live per route and per agent key, so /pay and /buy never collide
// and two agents cannot see each other's outcomes.

// idemState says whether a stored idempotency record is final.
type idemState string

const (
	idemInFlight idemState = "in_flight"
	idemFinal    idemState = "final"
)

type idemRecord struct {
	Digest    string    `json:"digest"`
	State     idemState `json:"state"`
	IntentID  string    `json:"intentId,omitempty"`
	Result    *Result   `json:"result,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func idemKey(route Route, agentKeyID, key string) []byte {
	return []byte(keyIdem + string(route) + "/" + agentKeyID + "/" + key)
}

func idemExpiryKey(exp time.Time, route Route, agentKeyID, key string) []byte {
	k := append([]byte(keyIdemExpiry), be8(uint64(exp.UnixNano()))...)
	return append(k, string(route)+"/"+agentKeyID+"/"+key...)
}

// requestDigest is the SHA-256 of the decoded instruction re-encoded by
// encoding/json: two requests that differ only in white space or member
// order decode to the same value and so have the same digest. (The
// decoder refuses duplicate and unknown members, so the decoded value is
// the whole request; encoding/json's field order is fixed, so no RFC 8785
// pass is needed here.)
func requestDigest(in any) (string, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

func getIdem(r store.Reader, route Route, agentKeyID, key string) (*idemRecord, error) {
	b, err := r.Get(idemKey(route, agentKeyID, key))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec idemRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("pay: idempotency record %s/%s: %w", agentKeyID, key, err)
	}
	return &rec, nil
}

// putIdem writes an idempotency record and its expiry index entry. The
// expiry is set when the record is first written and kept on later writes,
// so retention counts from the first request.
func putIdem(txn store.Txn, route Route, agentKeyID, key string, rec *idemRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := txn.Set(idemKey(route, agentKeyID, key), b); err != nil {
		return err
	}
	return txn.Set(idemExpiryKey(rec.ExpiresAt, route, agentKeyID, key), nil)
}

// SweepIdempotency deletes idempotency records whose retention has passed
// and returns how many it deleted. Records of intents still settling are
// kept: their outcome is not known yet, and a retry must still find them.
// The service runs it periodically; it is exported for embedders that run
// their own schedule.
func (s *Service) SweepIdempotency(ctx context.Context) (int, error) {
	now := s.now()
	upper := append([]byte(keyIdemExpiry), be8(uint64(now.UnixNano()))...)
	total := 0
	for {
		n := 0
		err := s.st.Update(ctx, func(txn store.Txn) error {
			n = 0
			it := txn.Iterate([]byte(keyIdemExpiry), upper, false)
			defer it.Close()
			var dead [][]byte
			for it.Next() && len(dead) < 500 {
				dead = append(dead, append([]byte(nil), it.Key()...))
			}
			if err := it.Err(); err != nil {
				return err
			}
			for _, k := range dead {
				ref := k[len(keyIdemExpiry)+8:]
				rec, err := txn.Get(append([]byte(keyIdem), ref...))
				if err == nil {
					var r idemRecord
					if json.Unmarshal(rec, &r) == nil && r.State == idemInFlight {
						// Ended, if its intent says so (finalIdem);
						// else the outcome is unknown: keep it until
						// settled.
						cur, err := getIntent(txn, r.IntentID)
						if err != nil && !errors.Is(err, ErrIntentNotFound) {
							return err
						}
						if _, ended := outcomeOf(cur); !ended {
							continue
						}
					}
					if err := txn.Delete(append([]byte(keyIdem), ref...)); err != nil {
						return err
					}
				} else if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err := txn.Delete(k); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("pay: sweep idempotency: %w", err)
		}
		total += n
		if n == 0 {
			return total, nil
		}
	}
}
