package pay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/countersign/countersign/gate"

	"github.com/countersign/countersign/store"
)

// indexVersion names the secondary indexes every intent and revocation
// has: intents by agent key and by mandate, and the revocation feed. A
// store written before they existed is brought up to date once, by
// [Service.Reconcile] at start-up.
const indexVersion = "2"

func (s *Service) migrateIndexes(ctx context.Context) error {
	var have string
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyIndexVersion))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		have = string(b)
		return err
	})
	if err != nil || have == indexVersion {
		return err
	}
	err = s.st.Update(ctx, func(txn store.Txn) error {
		it := txn.Iterate([]byte(keyIntent), store.PrefixEnd([]byte(keyIntent)), false)
		var intents []*Intent
		for it.Next() {
			var in Intent
			if err := json.Unmarshal(it.Value(), &in); err != nil {
				it.Close()
				return fmt.Errorf("intent %s: %w", it.Key(), err)
			}
			intents = append(intents, &in)
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, in := range intents {
			if err := s.indexIntent(txn, in); err != nil {
				return err
			}
		}
		// The revocation feed, rebuilt in revocation-time order.
		type rev struct {
			kind, id string
			at       time.Time
		}
		var revs []rev
		var old [][]byte
		for _, src := range []struct{ prefix, kind string }{{keyRevoked, "mandate"}, {keyRevokedIdentity, "identity"}, {keyRevocations, ""}} {
			it = txn.Iterate([]byte(src.prefix), store.PrefixEnd([]byte(src.prefix)), false)
			for it.Next() {
				if src.kind == "" {
					old = append(old, append([]byte(nil), it.Key()...))
					continue
				}
				var r struct {
					RevokedAt time.Time `json:"revokedAt"`
				}
				if err := json.Unmarshal(it.Value(), &r); err != nil {
					it.Close()
					return err
				}
				revs = append(revs, rev{src.kind, string(it.Key()[len(src.prefix):]), r.RevokedAt})
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		for _, k := range old {
			if err := txn.Delete(k); err != nil {
				return err
			}
		}
		if err := txn.Delete([]byte(keyRevocationSeq)); err != nil {
			return err
		}
		sort.SliceStable(revs, func(i, j int) bool { return revs[i].at.Before(revs[j].at) })
		for _, r := range revs {
			if err := appendRevocation(txn, r.kind, r.id); err != nil {
				return err
			}
		}
		return txn.Set([]byte(keyIndexVersion), []byte(indexVersion))
	})
	if err != nil {
		return fmt.Errorf("pay: building intent indexes: %w", err)
	}
	return nil
}

// IntentsOf calls fn for each intent of an agent key created in
// [since, until) (zero times leave that side open), oldest first, until fn
// returns false.
func (s *Service) IntentsOf(ctx context.Context, agentKeyID string, since, until time.Time, fn func(*Intent) bool) error {
	return s.scanIndex(ctx, keyByKey+agentKeyID+"/", since, until, fn)
}

// IntentsUnder calls fn for each intent decided under a mandate created in
// [since, until), oldest first, until fn returns false.
func (s *Service) IntentsUnder(ctx context.Context, mandateID string, since, until time.Time, fn func(*Intent) bool) error {
	return s.scanIndex(ctx, keyByMandate+mandateID+"/", since, until, fn)
}

func (s *Service) scanIndex(ctx context.Context, prefix string, since, until time.Time, fn func(*Intent) bool) error {
	lower, upper := []byte(prefix), store.PrefixEnd([]byte(prefix))
	if !since.IsZero() {
		lower = append([]byte(prefix), be8(uint64(since.UnixNano()))...)
	}
	if !until.IsZero() {
		upper = append([]byte(prefix), be8(uint64(until.UnixNano()))...)
	}
	return s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate(lower, upper, false)
		defer it.Close()
		for it.Next() {
			id := string(it.Key()[len(prefix)+8:])
			in, err := getIntent(r, id)
			if err != nil {
				return err
			}
			if !fn(in) {
				return nil
			}
		}
		return it.Err()
	})
}

// PeriodUsage is what a mandate's current period window holds.
type PeriodUsage struct {
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	CountedMinor  int64     `json:"countedMinor"`  // settled + reserved: what the gate compares to the cap
	ReservedMinor int64     `json:"reservedMinor"` // held for approval, settling or authorized
	SettledMinor  int64     `json:"settledMinor"`  // CountedMinor − ReservedMinor
	VelocityCount int64     `json:"velocityCount"` // payments in the velocity window, as the gate counts them
}

// MandateUsage reads a mandate's counters as the gate would now.
func (s *Service) MandateUsage(ctx context.Context, km KnownMandate) (PeriodUsage, error) {
	now := s.now().UTC()
	start, end := gate.PeriodWindow(km.Period, now)
	u := PeriodUsage{Start: start, End: end}
	key := keyPeriod + km.ID + "/" + strconv.FormatInt(start.Unix(), 10)
	m := &Mandate{ID: km.ID, Claims: MandateClaims{Velocity: km.Velocity}}
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		if u.CountedMinor, err = getInt(r, []byte(key)); err != nil {
			return err
		}
		u.VelocityCount, err = velocityCount(r, m, now)
		return err
	})
	if err != nil {
		return u, err
	}
	err = s.IntentsUnder(ctx, km.ID, start, time.Time{}, func(in *Intent) bool {
		if in.PeriodKey == key {
			u.ReservedMinor += in.ReservedMinor
		}
		return true
	})
	u.SettledMinor = u.CountedMinor - u.ReservedMinor
	return u, err
}

// Mandate returns a mandate the service has honoured, by id.
func (s *Service) Mandate(ctx context.Context, id string) (*KnownMandate, error) {
	var out *KnownMandate
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyMandate + id))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var km KnownMandate
		if err := json.Unmarshal(b, &km); err != nil {
			return err
		}
		out = &km
		return nil
	})
	return out, err
}

// RememberMandate stores a verified mandate as honoured, as the first
// payment under it would (opening a session under it does too). For
// embedders and tests that want a mandate readable before first use.
func (s *Service) RememberMandate(ctx context.Context, m *Mandate) error {
	return s.st.Update(ctx, func(txn store.Txn) error {
		return s.rememberMandate(txn, m, s.now().UTC().Truncate(time.Microsecond))
	})
}
