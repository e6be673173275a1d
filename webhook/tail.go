package webhook

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
)

// runTailer is the background tailer: tail, then wait for the record to
// grow (or PollInterval), and at least tailEvery since the last tail began.
func (d *Dispatcher) runTailer(ctx context.Context) {
	pace := time.NewTimer(0)
	defer pace.Stop()
	for {
		select {
		case <-pace.C:
		case <-ctx.Done():
			return
		}
		pace.Reset(tailEvery)
		cursor, err := d.tail(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d.logger.LogAttrs(ctx, slog.LevelError, "webhook: tailing the record failed", slog.String("error", err.Error()))
			t := time.NewTimer(d.poll)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, d.poll)
		err = d.log.WaitPast(wctx, cursor)
		cancel()
		if errors.Is(err, audit.ErrClosed) {
			return
		}
	}
}

func (d *Dispatcher) readCursor(ctx context.Context) (uint64, error) {
	var c uint64
	err := d.st.View(ctx, func(r store.Reader) error {
		var err error
		c, err = getCursor(r)
		return err
	})
	return c, err
}

func getCursor(r store.Reader) (uint64, error) {
	b, err := r.Get(cursorKey)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("webhook: stored cursor has %d bytes", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// errCursorMoved aborts a tail transaction that found the cursor moved by
// someone else (another dispatcher over the same store).
var errCursorMoved = errors.New("webhook: cursor moved")

// tail writes the deliveries of every entry after the cursor into the
// outbox, batch by batch, each batch in one transaction with the cursor
// advance. It returns the cursor reached.
func (d *Dispatcher) tail(ctx context.Context) (uint64, error) {
	d.tailMu.Lock()
	defer d.tailMu.Unlock()
	cursor, err := d.readCursor(ctx)
	if err != nil {
		return 0, err
	}
	wrote := false
	defer func() {
		if wrote {
			d.markDirty()
		}
	}()
	for {
		size, err := d.log.Size(ctx)
		if err != nil {
			return cursor, err
		}
		if cursor >= size {
			return cursor, nil
		}
		// Entries at or before every endpoint's creation can go to no
		// endpoint: skip them without reading them (an endpoint created
		// later has a CreatedSeq above size).
		var floor, reached uint64
		err = d.st.View(ctx, func(r store.Reader) error {
			eps, err := loadEndpoints(r, &d.epCache)
			floor = minCreated(eps, size)
			return err
		})
		if err != nil {
			return cursor, err
		}
		if floor > cursor {
			// No endpoint can receive an entry up to floor: only the
			// cursor moves. That is bookkeeping that must not cost a
			// commit of its own: an Update would be a transaction that
			// waits for its fsync, in a group of its own or applying at
			// once a group of deferred commits that would have waited
			// for the next payment's (pebblestore's deferred hold), so at
			// low load every payment paid for two fsyncs and two
			// checkpoints. Deferred, it rides in the next group; if a
			// crash loses it, the restart skips the same entries again.
			// It only ever advances the cursor, so it needs no check
			// that nobody moved it meanwhile.
			err = store.UpdateDeferred(ctx, d.st, func(txn store.Txn) error {
				reached = 0
				c, err := getCursor(txn)
				if err != nil {
					return err
				}
				eps, err := loadEndpoints(txn, &d.epCache)
				if err != nil {
					return err
				}
				reached = max(c, minCreated(eps, size))
				if reached == c {
					return nil
				}
				return txn.Set(cursorKey, be8(reached))
			})
			if err != nil {
				return cursor, err
			}
			cursor = reached
			continue
		}
		var entries []audit.Entry
		for e, err := range d.log.Entries(ctx, cursor+1, min(size, cursor+tailBatch)) {
			if err != nil {
				return cursor, err
			}
			entries = append(entries, e)
		}
		now := d.now().UTC()
		var n int
		err = d.st.Update(ctx, func(txn store.Txn) error {
			reached, n = 0, 0
			c, err := getCursor(txn)
			if err != nil {
				return err
			}
			if c != cursor {
				return errCursorMoved
			}
			eps, err := loadEndpoints(txn, &d.epCache)
			if err != nil {
				return err
			}
			if f := minCreated(eps, size); f > cursor {
				// No endpoint can receive an entry up to f.
				reached = f
				return txn.Set(cursorKey, be8(f))
			}
			reached = cursor
			for _, e := range entries {
				if n >= tailMaxWrites {
					break
				}
				kinds := deriveKinds(e)
				for i := range eps {
					ep := &eps[i]
					if ep.Deleted || !ep.Active || e.Seq <= ep.CreatedSeq {
						continue
					}
					for _, k := range kinds {
						if !ep.subscribed(k) {
							continue
						}
						rec := record{Type: k, Seq: e.Seq, State: StatePending, Due: now.UnixNano(), CreatedAt: now}
						if err := putRecord(txn, ep.ID, &rec); err != nil {
							return err
						}
						if err := txn.Set(outboxKey(ep.ID, rec.Due, e.Seq, k), nil); err != nil {
							return err
						}
						n++
					}
				}
				reached = e.Seq
			}
			return txn.Set(cursorKey, be8(reached))
		})
		if errors.Is(err, errCursorMoved) {
			// Read it through a transaction: a View reads only what is
			// durable, and the move may be a deferred skip (above) not
			// yet synced, which the transaction makes durable first.
			err = d.st.Update(ctx, func(txn store.Txn) error {
				var err error
				cursor, err = getCursor(txn)
				return err
			})
			if err != nil {
				return cursor, err
			}
			continue
		}
		if err != nil {
			return cursor, err
		}
		if n > 0 {
			wrote = true
		}
		cursor = reached
	}
}

// minCreated returns the lowest CreatedSeq of the live endpoints, or size
// when there are none: no entry up to it can be delivered.
func minCreated(eps []storedEndpoint, size uint64) uint64 {
	floor := size
	for i := range eps {
		if !eps[i].Deleted && eps[i].CreatedSeq < floor {
			floor = eps[i].CreatedSeq
		}
	}
	return floor
}
