package audit

import (
	"context"
	"fmt"
	"sync"

	"github.com/countersign/countersign/store"
)

// subscribeBatch is how many entries a Subscription reads per snapshot.
const subscribeBatch = 64

// Subscription is a live tail of the log; see [Log.Subscribe]. Next and
// Close may be called from different goroutines, but Next must not be
// called concurrently with itself.
type Subscription struct {
	l      *Log
	ctx    context.Context // the Subscribe ctx; ends the subscription
	last   uint64          // seq of the newest entry delivered
	buf    []Entry         // read but not yet delivered, ascending
	closed chan struct{}
	once   sync.Once
}

// Subscribe returns a Subscription that delivers, through Next, every entry
// with seq > afterSeq, in order, exactly once: first the backlog from the
// store, then new entries as they commit.
//
// There is no separate live feed to stitch to the backlog, so there is no
// seam to get wrong: the subscription only ever reads the store, in order,
// starting after the last seq it delivered, and sleeps on [Log.Notify]
// when it has caught up. A wake-up that races with a read is never lost,
// because the subscriber takes the wake-up channel before it reads.
// Entries appended through the store's own Update become visible only once
// someone calls Notify (Log.Update does so itself).
//
// The subscription ends when ctx is done, Close is called, or the Log is
// closed. It holds no goroutine and no snapshot between calls to Next.
func (l *Log) Subscribe(ctx context.Context, afterSeq uint64) *Subscription {
	return &Subscription{l: l, ctx: ctx, last: afterSeq, closed: make(chan struct{})}
}

// Next returns the next entry, waiting for one to be appended if the
// subscriber has caught up. It returns ctx's error (or the Subscribe ctx's
// error) when either is done, ErrClosed after Close or Log.Close, or the
// error from reading the store, which wraps ErrTampered for a damaged
// entry.
func (s *Subscription) Next(ctx context.Context) (Entry, error) {
	for {
		select {
		case <-s.closed:
			return Entry{}, ErrClosed
		case <-s.l.done:
			return Entry{}, ErrClosed
		case <-s.ctx.Done():
			return Entry{}, s.ctx.Err()
		case <-ctx.Done():
			return Entry{}, ctx.Err()
		default:
		}
		if len(s.buf) > 0 {
			e := s.buf[0]
			s.buf = s.buf[1:]
			s.last = e.Seq
			return e, nil
		}
		wake := s.l.wakeChan() // before reading: see Subscribe
		if err := s.fill(ctx); err != nil {
			return Entry{}, err
		}
		if len(s.buf) > 0 {
			continue
		}
		select {
		case <-wake:
		case <-s.closed:
			return Entry{}, ErrClosed
		case <-s.l.done:
			return Entry{}, ErrClosed
		case <-s.ctx.Done():
			return Entry{}, s.ctx.Err()
		case <-ctx.Done():
			return Entry{}, ctx.Err()
		}
	}
}

// fill reads the next batch of entries after s.last into s.buf.
func (s *Subscription) fill(ctx context.Context) error {
	buf := make([]Entry, 0, subscribeBatch)
	err := s.l.st.View(ctx, func(r store.Reader) error {
		h, err := readHead(r)
		if err != nil || h.size <= s.last {
			return err
		}
		buf, err = readEntries(r, s.last+1, min(s.last+subscribeBatch, h.size), buf)
		return err
	})
	if err != nil {
		return fmt.Errorf("audit: subscription: %w", err)
	}
	s.buf = buf
	return nil
}

// Close ends the subscription: a blocked or later Next returns ErrClosed.
// It is idempotent and safe to call from any goroutine.
func (s *Subscription) Close() {
	s.once.Do(func() { close(s.closed) })
}
