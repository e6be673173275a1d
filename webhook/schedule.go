package webhook

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
)

// busy reports whether any attempt is in flight.
func (d *Dispatcher) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.claimed) > 0
}

// changedChan returns a channel that the next signal closes. Take it
// before looking at the state it guards, so that no signal is missed.
func (d *Dispatcher) changedChan() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changed
}

// signalLocked wakes every loop waiting on changedChan. d.mu must be held.
func (d *Dispatcher) signalLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// markDirty says the outbox may hold due deliveries no queue holds.
func (d *Dispatcher) markDirty() {
	d.mu.Lock()
	d.dirty = true
	d.signalLocked()
	d.mu.Unlock()
}

// needRefill reports whether the queues must be read from the outbox.
func (d *Dispatcher) needRefill() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dirty {
		return true
	}
	for _, q := range d.queues {
		if len(q.items) == 0 && q.more && q.inflight < d.perEndpoint {
			return true
		}
	}
	return false
}

// runScheduler is the background scheduler loop.
func (d *Dispatcher) runScheduler(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		ch := d.changedChan()
		now := d.now()
		if now.Sub(d.lastSweepTime()) >= sweepEvery {
			if err := d.sweep(ctx); err != nil && ctx.Err() == nil {
				d.logger.LogAttrs(ctx, slog.LevelError, "webhook: sweep failed", slog.String("error", err.Error()))
			}
		}
		if d.needRefill() {
			if err := d.refill(ctx); err != nil && ctx.Err() == nil {
				d.logger.LogAttrs(ctx, slog.LevelError, "webhook: reading the outbox failed", slog.String("error", err.Error()))
			}
		}
		d.launch(nil)
		wait := d.poll
		if next := d.nextDue(); next != 0 {
			wait = min(wait, max(time.Duration(next-d.now().UnixNano()), 0))
		}
		timer.Reset(wait)
		select {
		case <-ch:
		case <-timer.C:
			d.markDirty()
		case <-ctx.Done():
			return
		}
	}
}

// nextDue returns the earliest known due time after now (unix ns), or 0.
func (d *Dispatcher) nextDue() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var next int64
	for _, q := range d.queues {
		if q.next != 0 && (next == 0 || q.next < next) {
			next = q.next
		}
	}
	return next
}

// refill reads due deliveries from the outbox into the queues: every
// endpoint's when dirty, otherwise those whose queue ran dry with more
// waiting. It also refreshes each queue's endpoint snapshot.
func (d *Dispatcher) refill(ctx context.Context) error {
	d.refillMu.Lock()
	defer d.refillMu.Unlock()
	d.mu.Lock()
	all := d.dirty
	d.dirty = false
	gen0 := d.gen
	skip := make(map[dkey]bool, len(d.claimed)+len(d.penalty))
	for k := range d.claimed {
		skip[k] = true
	}
	now := d.now()
	for k, until := range d.penalty {
		if now.Before(until) {
			skip[k] = true
		} else {
			delete(d.penalty, k)
		}
	}
	// read: the endpoints to read, by id; endpoints without a queue (new
	// ones) are read too.
	read := map[string]bool{}
	lows := map[string]int64{}
	for id, q := range d.queues {
		read[id] = all || (len(q.items) == 0 && q.more)
		lows[id] = q.low
	}
	d.mu.Unlock()

	nowNS := now.UnixNano()
	type result struct {
		items []dkey
		more  bool
		next  int64
		low   int64
	}
	var eps []storedEndpoint
	reads := map[string]result{}
	err := d.st.View(ctx, func(r store.Reader) error {
		clear(reads)
		var err error
		if eps, err = loadEndpoints(r, &d.epCache); err != nil {
			return err
		}
		for i := range eps {
			ep := &eps[i]
			if ep.Deleted {
				continue
			}
			if r, known := read[ep.ID]; known && !r {
				continue
			}
			rd := result{low: nowNS}
			prefix := epPrefix(outboxPrefix, ep.ID)
			lower := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(lows[ep.ID]))
			it := r.Iterate(lower, store.PrefixEnd(prefix), false)
			scanned := 0
			for it.Next() {
				due, seq, kind, ok := parseOutboxSuffix(it.Key()[len(prefix):])
				if !ok {
					continue
				}
				if scanned == 0 {
					rd.low = min(due, nowNS)
				}
				if due > nowNS {
					rd.next = due
					break
				}
				scanned++
				k := dkey{ep.ID, seq, kind}
				if !skip[k] {
					rd.items = append(rd.items, k)
				}
				if len(rd.items) == queueCap || scanned == 4*queueCap {
					rd.more = true
					break
				}
			}
			if err := it.Close(); err != nil {
				return err
			}
			reads[ep.ID] = rd
		}
		return nil
	})
	if err != nil {
		d.markDirty() // try again
		return err
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	live := map[string]bool{}
	order := make([]string, 0, len(eps))
	for i := range eps {
		ep := eps[i]
		if ep.Deleted {
			continue
		}
		live[ep.ID] = true
		order = append(order, ep.ID)
		q := d.queues[ep.ID]
		if q == nil {
			q = &epQueue{}
			d.queues[ep.ID] = q
		}
		q.ep = ep
		rd, ok := reads[ep.ID]
		if !ok {
			continue
		}
		q.items = q.items[:0]
		for _, k := range rd.items {
			if _, c := d.claimed[k]; c {
				continue
			}
			if g, done := d.recent[k]; done && g > gen0 {
				continue
			}
			q.items = append(q.items, k)
		}
		q.more, q.next, q.low = rd.more, rd.next, rd.low
	}
	for id, q := range d.queues {
		if !live[id] && q.inflight == 0 {
			delete(d.queues, id)
		}
	}
	d.order = order
	clear(d.recent) // no refill is in progress now (refillMu)
	return nil
}

// launch starts attempts from the queues, round-robin across endpoints,
// while workers and per-endpoint slots are free. It reports how many it
// started and whether queued deliveries had to wait for a slot. mine, if
// not nil, is Done when each started attempt finishes.
func (d *Dispatcher) launch(mine *sync.WaitGroup) (launched int, blocked bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == 2 || len(d.order) == 0 {
		return 0, false
	}
	start := d.rr % len(d.order)
	d.rr++
	for progress := true; progress; {
		progress = false
		for i := range d.order {
			id := d.order[(start+i)%len(d.order)]
			q := d.queues[id]
			if q == nil || len(q.items) == 0 {
				continue
			}
			if q.inflight >= d.perEndpoint {
				blocked = true
				continue
			}
			select {
			case d.sem <- struct{}{}:
			default:
				return launched, true
			}
			k := q.items[0]
			q.items = q.items[1:]
			q.inflight++
			d.claimed[k] = struct{}{}
			d.attempts.Add(1)
			if mine != nil {
				mine.Add(1)
			}
			ep := q.ep
			go d.attempt(ep, k, mine)
			launched++
			progress = true
		}
	}
	return launched, blocked
}

// finish releases a delivery after its attempt. next is its new due time
// (unix ns) when rescheduled; penalize keeps it from being retried at once
// because its bookkeeping failed; deactivate marks the queue's endpoint
// snapshot inactive (410 Gone).
func (d *Dispatcher) finish(k dkey, next int64, penalize, deactivate bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.claimed, k)
	d.gen++
	d.recent[k] = d.gen
	if penalize {
		d.penalty[k] = d.now().Add(penaltyFor)
	}
	if q := d.queues[k.ep]; q != nil {
		q.inflight--
		if next != 0 && (q.next == 0 || next < q.next) {
			q.next = next
		}
		if deactivate {
			q.ep.Active = false
		}
	}
	<-d.sem
	d.attempts.Done()
	d.signalLocked()
}
