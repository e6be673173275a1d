package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/store"
)

func (d *Dispatcher) lastSweepTime() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastSweep
}

// sweep deletes delivery records whose retention ended and purges the
// deliveries of deleted endpoints, then their tombstones. Each
// transaction deletes at most sweepBatch keys; a sweep stops after a
// bounded amount of work and continues at the next one.
func (d *Dispatcher) sweep(ctx context.Context) error {
	now := d.now()
	d.mu.Lock()
	d.lastSweep = now
	for _, q := range d.queues {
		q.low = 0 // see epQueue.low
	}
	d.mu.Unlock()
	for range 10 {
		n := 0
		err := d.st.Update(ctx, func(txn store.Txn) error {
			n = 0
			upper := append(bytes.Clone(expirePrefix), be8(uint64(now.UnixNano())+1)...)
			it := txn.Iterate(expirePrefix, upper, false)
			var keys [][]byte
			for it.Next() && len(keys) < sweepBatch {
				keys = append(keys, bytes.Clone(it.Key()))
			}
			if err := it.Close(); err != nil {
				return err
			}
			for _, key := range keys {
				at, ep, seq, kind, ok := parseExpireKey(key)
				if ok {
					rec, err := getRecord(txn, ep, seq, kind)
					switch {
					case err == nil && rec.ExpireAt == at && rec.State != StatePending:
						if err := txn.Delete(dlvKey(ep, seq, kind)); err != nil {
							return err
						}
					case err != nil && !errors.Is(err, store.ErrNotFound):
						return err
					}
				}
				if err := txn.Delete(key); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		if n < sweepBatch {
			break
		}
	}

	var tombs []string
	err := d.st.View(ctx, func(r store.Reader) error {
		tombs = tombs[:0]
		eps, err := loadEndpoints(r, &d.epCache)
		for _, ep := range eps {
			if ep.Deleted {
				tombs = append(tombs, ep.ID)
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, id := range tombs {
		if err := d.purge(ctx, id); err != nil {
			return fmt.Errorf("sweep: purge %s: %w", id, err)
		}
	}
	return nil
}

// purge deletes the outbox entries and delivery records of a deleted
// endpoint, then its tombstone.
func (d *Dispatcher) purge(ctx context.Context, id string) error {
	for range 100 {
		done := false
		err := d.st.Update(ctx, func(txn store.Txn) error {
			done = false
			n := 0
			for _, prefix := range [][]byte{epPrefix(outboxPrefix, id), epPrefix(dlvPrefix, id)} {
				it := txn.Iterate(prefix, store.PrefixEnd(prefix), false)
				var keys, vals [][]byte
				for it.Next() && n+len(keys) < sweepBatch {
					keys = append(keys, bytes.Clone(it.Key()))
					vals = append(vals, bytes.Clone(it.Value()))
				}
				if err := it.Close(); err != nil {
					return err
				}
				for i, key := range keys {
					if bytes.HasPrefix(key, dlvPrefix) {
						var rec record
						if json.Unmarshal(vals[i], &rec) == nil && rec.ExpireAt != 0 {
							if err := txn.Delete(expireKey(rec.ExpireAt, id, rec.Seq, rec.Type)); err != nil {
								return err
							}
						}
					}
					if err := txn.Delete(key); err != nil {
						return err
					}
				}
				n += len(keys)
			}
			if n < sweepBatch {
				done = true
				// Only a tombstone is removed: an endpoint is never
				// resurrected, so checking Deleted suffices.
				se, err := txn.Get(endpointKey(id))
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				if err != nil {
					return err
				}
				var s storedEndpoint
				if err := json.Unmarshal(se, &s); err != nil {
					return err
				}
				if s.Deleted {
					return txn.Delete(endpointKey(id))
				}
			}
			return nil
		})
		if err != nil || done {
			return err
		}
	}
	return nil
}
