package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/store"
)

// outcome is what an attempt came to.
type outcome int

const (
	outcomeRetry    outcome = iota // failed: reschedule or give up
	outcomeOK                      // 2xx
	outcomeGone                    // 410: deactivate the endpoint
	outcomeInactive                // the endpoint is inactive: fail without sending
)

// attempt makes one delivery attempt and records its outcome.
func (d *Dispatcher) attempt(ep storedEndpoint, k dkey, mine *sync.WaitGroup) {
	var next int64
	var penalize, deactivate bool
	defer func() {
		d.finish(k, next, penalize, deactivate)
		if mine != nil {
			mine.Done()
		}
	}()
	ctx := d.attemptCtx
	now := d.now()
	res := attemptResult{outcome: outcomeInactive, err: "the endpoint is inactive"}
	if ep.Active {
		var fatal error
		res, fatal = d.send(ctx, &ep, k, now)
		if fatal != nil {
			// Our own fault (the record cannot be read): leave the
			// delivery in the outbox and look again later.
			if ctx.Err() == nil {
				d.logger.LogAttrs(ctx, slog.LevelError, "webhook: cannot build delivery",
					slog.String("endpoint", k.ep), slog.String("event", EventID(k.seq, k.kind)),
					slog.String("error", fatal.Error()))
			}
			penalize = true
			return
		}
		if ctx.Err() != nil {
			// Close gave up waiting: the attempt does not count; the
			// delivery stays due for the next dispatcher.
			return
		}
	}
	jit := d.rand()
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var err error
	next, deactivate, err = d.record(bctx, k, res, now, jit)
	if err != nil {
		d.logger.LogAttrs(bctx, slog.LevelError, "webhook: recording a delivery attempt failed",
			slog.String("endpoint", k.ep), slog.String("event", EventID(k.seq, k.kind)),
			slog.String("error", err.Error()))
		penalize = true
		return
	}
	if d.onDelivery != nil {
		switch {
		case res.outcome == outcomeOK:
			d.onDelivery(StateDelivered)
		case next != 0:
			d.onDelivery(StatePending)
		default:
			d.onDelivery(StateFailed)
		}
	}
	lvl := slog.LevelDebug
	msg := "webhook: delivery attempt failed"
	switch res.outcome {
	case outcomeOK:
		msg = "webhook: delivered"
	case outcomeGone:
		lvl, msg = slog.LevelInfo, "webhook: receiver answered 410 Gone; endpoint deactivated"
	}
	d.logger.LogAttrs(bctx, lvl, msg,
		slog.String("endpoint", k.ep), slog.String("event", EventID(k.seq, k.kind)),
		slog.Int("status", res.status), slog.String("error", res.err))
}

type attemptResult struct {
	outcome outcome
	status  int
	err     string
}

// send POSTs the event. A non-nil error means no attempt was made because
// of the dispatcher's own fault.
func (d *Dispatcher) send(ctx context.Context, ep *storedEndpoint, k dkey, now time.Time) (attemptResult, error) {
	body, err := d.body(ctx, k)
	if err != nil {
		return attemptResult{}, err
	}
	secrets, err := d.eps.signingSecrets(ep, now)
	if err != nil {
		// A configuration fault (seal key), not the receiver's: count it
		// as a failed attempt so that it shows in the delivery, and say
		// so loudly.
		d.logger.LogAttrs(ctx, slog.LevelError, "webhook: cannot open endpoint secret",
			slog.String("endpoint", k.ep), slog.String("error", err.Error()))
		return attemptResult{err: "the service cannot open the endpoint's signing secret (server configuration)"}, nil
	}
	actx, cancel := context.WithTimeout(ctx, d.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, ep.URL, bytes.NewReader(body))
	if err != nil {
		return attemptResult{err: "invalid endpoint url"}, nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", d.userAgent)
	req.Header.Set(SignatureHeader, Sign(body, secrets, now))
	req.Header.Set(EventIDHeader, EventID(k.seq, k.kind))
	req.Header.Set(EventTypeHeader, k.kind)
	resp, err := d.client.Do(req)
	if err != nil {
		return attemptResult{err: describe(actx, err, d.attemptTimeout)}, nil
	}
	// Read a little of the body so the connection can be reused; what
	// the receiver says is not kept.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	res := attemptResult{status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		res.outcome = outcomeOK
	case resp.StatusCode == http.StatusGone:
		res.outcome = outcomeGone
		res.err = "the receiver answered 410 Gone"
	default:
		res.err = "the receiver answered " + strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	}
	return res, nil
}

// describe turns a client error into a LastError for people, without the
// url (whose query may hold a token).
func describe(ctx context.Context, err error, timeout time.Duration) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "timed out after " + timeout.String()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	s := err.Error()
	if len(s) > maxErrorLen {
		s = s[:maxErrorLen] + "..."
	}
	return s
}

// record stores an attempt's outcome: delivered, rescheduled, or failed;
// for 410 it also deactivates the endpoint. It returns the new due time
// when rescheduled. jit is the jitter draw, taken outside the transaction
// function because that function may run more than once.
func (d *Dispatcher) record(ctx context.Context, k dkey, res attemptResult, now time.Time, jit float64) (next int64, deactivated bool, err error) {
	now = now.UTC()
	err = d.log.Update(ctx, func(txn store.Txn) error {
		next, deactivated = 0, false
		rec, err := getRecord(txn, k.ep, k.seq, k.kind)
		if errors.Is(err, store.ErrNotFound) {
			return nil // the endpoint was deleted and purged meanwhile
		}
		if err != nil {
			return err
		}
		if rec.State == StatePending {
			if err := txn.Delete(outboxKey(k.ep, rec.Due, k.seq, k.kind)); err != nil {
				return err
			}
		} else if rec.ExpireAt != 0 {
			if err := txn.Delete(expireKey(rec.ExpireAt, k.ep, k.seq, k.kind)); err != nil {
				return err
			}
			rec.ExpireAt = 0
		}
		at := now
		if res.outcome != outcomeInactive {
			rec.Attempts++
			rec.LastAttemptAt = &at
			rec.LastStatus = res.status
		}
		rec.LastError = res.err
		state := StateFailed
		switch res.outcome {
		case outcomeOK:
			state = StateDelivered
		case outcomeGone:
			if deactivated, err = d.eps.deactivateGone(txn, k.ep, now); err != nil {
				return err
			}
		case outcomeRetry:
			if !rec.Once && rec.Failures < len(d.schedule) {
				delay := d.schedule[rec.Failures]
				delay -= time.Duration(float64(delay) * d.jitter * jit)
				rec.Failures++
				rec.State, rec.Due = StatePending, now.Add(delay).UnixNano()
				next = rec.Due
				if err := txn.Set(outboxKey(k.ep, rec.Due, k.seq, k.kind), nil); err != nil {
					return err
				}
				return putRecord(txn, k.ep, &rec)
			}
		}
		rec.State, rec.Due, rec.Once = state, 0, false
		rec.CompletedAt = &at
		if d.retention > 0 {
			rec.ExpireAt = now.Add(d.retention).UnixNano()
			if err := txn.Set(expireKey(rec.ExpireAt, k.ep, k.seq, k.kind), nil); err != nil {
				return err
			}
		}
		return putRecord(txn, k.ep, &rec)
	})
	return next, deactivated, err
}

// body returns the JSON body of a delivery, derived from the record entry
// (cached: an entry fanned out to many endpoints is read once).
func (d *Dispatcher) body(ctx context.Context, k dkey) ([]byte, error) {
	id := EventID(k.seq, k.kind)
	if b, ok := d.bodies.get(id); ok {
		return b, nil
	}
	e, err := d.log.Get(ctx, k.seq)
	if err != nil {
		return nil, err
	}
	// Encode every event of the entry: the endpoints subscribed to its
	// other kinds will ask next.
	var b []byte
	for _, ev := range Derive(e) {
		enc, err := json.Marshal(ev)
		if err != nil {
			return nil, err
		}
		d.bodies.put(ev.ID, enc)
		if ev.Type == k.kind {
			b = enc
		}
	}
	if b == nil {
		return nil, fmt.Errorf("webhook: entry %d yields no %s event", k.seq, k.kind)
	}
	return b, nil
}

// ---- body cache ----

// bodyCache is a small FIFO cache of encoded events by id.
type bodyCache struct {
	mu   sync.Mutex // guards m, ring, next
	m    map[string][]byte
	ring []string
	next int
}

func (c *bodyCache) init(n int) {
	c.m = make(map[string][]byte, n)
	c.ring = make([]string, n)
}

func (c *bodyCache) get(id string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok
}

func (c *bodyCache) put(id string, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; ok {
		return
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.m, old)
	}
	c.ring[c.next] = id
	c.m[id] = b
	c.next = (c.next + 1) % len(c.ring)
}
