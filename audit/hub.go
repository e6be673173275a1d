package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/countersign/countersign/store"
)

// A Hub is the live tail that serves many subscribers at once: one
// goroutine reads each new entry from the store once, encodes it to JSON
// once, and hands the same entry to every subscriber's bounded buffer.
// [Log.Subscribe] is the one-reader form of the same thing; a Hub is what a
// server with hundreds of streaming clients uses instead, so that a burst of
// entries costs one store read and one encoding per entry rather than one
// per entry per client.
//
// # Backlog and the seam
//
// A subscriber that starts behind the hub's position (afterSeq below it)
// reads its backlog itself, in batches, while the hub already buffers live
// entries for it. [Hub.Subscribe] registers the subscriber for live
// entries first, under the hub's lock, and notes the hub's position P at
// that moment: every entry after P will reach the buffer, every entry up
// to P is in the store. The subscriber reads afterSeq+1..P, then drains
// its buffer, skipping any seq it has already delivered. So there is no
// gap and no duplicate at the seam, whatever appends race the
// subscription.
//
// The backlog comes from the hub's history, the newest
// [HubOptions.History] entries kept in memory already encoded, when it
// starts among them (a client reconnecting after a drop or a restart of
// its connection), and otherwise from the store, the way [Log.Entries]
// reads it.
//
// # Slow subscribers
//
// Each subscriber's buffer holds at most [HubOptions.BufferSize] entries
// (pointers to entries shared by all subscribers, so a full buffer of 1024
// costs 8 KiB; it starts at 16 and grows only as a subscriber falls
// behind, so an idle subscriber costs next to nothing). A subscriber that is reading live entries and falls behind
// by more than that is ended with [ErrSlowSubscriber] instead of growing
// memory; it resumes with a new subscription after the last seq it
// received (an SSE client does so with Last-Event-ID).
//
// A subscriber whose buffer overflows while it is still reading its backlog
// is not slow, only early: the hub empties its buffer and stops filling it,
// and once the subscriber has read up to the old seam it registers again at
// the hub's new position and reads the difference from the store too. Its
// memory stays bounded by the buffer and one read batch however long the
// backlog, and it joins the live feed when it has caught up.
//
// # Lifecycle
//
// The tail goroutine starts with the first Subscribe and is woken by
// [Log.Notify] (which [Log.Update] calls), never by a timer. [Hub.Close],
// or closing the Log, stops it and ends every subscription with
// [ErrHubClosed], which a server treats as a clean end of its streams on
// shutdown. If the tail cannot read the store, it logs the error, ends the
// current subscriptions with it, and tries again on the next Notify or the
// next Subscribe.
//
// A Hub is safe for concurrent use by multiple goroutines.
type Hub struct {
	l       *Log
	bufLen  int
	histCap int
	logger  *slog.Logger
	kick    chan struct{} // capacity 1: asks a failed tail to retry now

	// mu guards the fields below, and is held while the tail fans a batch
	// out and advances pos, so that a subscriber registering under it sees
	// a position that exactly splits store-read entries from buffered ones.
	// Lock order: Hub.mu before HubSub.mu.
	mu      sync.Mutex
	subs    map[*HubSub]struct{}
	pos     uint64 // seq of the newest entry fanned out
	started bool   // the tail goroutine runs (or ran)
	closed  bool
	failed  bool   // the tail's last read failed
	dropped uint64 // subscriptions ended as slow
	// hist holds the newest histN entries fanned out, the oldest at
	// histHead, the newest being pos; allocated on first use.
	hist            []*HubEntry
	histHead, histN int
	stopTail        func()        // cancels the tail's context; nil until started
	tailDone        chan struct{} // closed when the tail goroutine returns
}

// ErrHubClosed ends every subscription of a Hub that was closed (or whose
// Log was closed), and is returned by Subscribe afterwards. A streaming
// server treats it as a clean end. Check with errors.Is.
var ErrHubClosed = errors.New("audit: hub closed")

// ErrSlowSubscriber ends a [HubSub] that fell more than
// [HubOptions.BufferSize] entries behind the live log. Everything it
// delivered before is complete and in order; resume with a new subscription
// after the last seq received. Check with errors.Is.
var ErrSlowSubscriber = errors.New("audit: subscriber too slow; resume after the last entry received")

// DefaultHubBufferSize is the per-subscriber buffer of a Hub when
// [HubOptions.BufferSize] is zero.
const DefaultHubBufferSize = 1024

// DefaultHubHistory is how many recent entries a Hub keeps for backlogs
// when [HubOptions.History] is zero.
const DefaultHubHistory = 4096

// hubBatch is how many entries the tail, or a subscriber reading its
// backlog, reads per store snapshot.
const hubBatch = 256

// hubMinRing is the size a subscriber's buffer starts at when it first
// holds an entry; it doubles from there up to the hub's buffer size.
const hubMinRing = 16

// HubOptions configures a Hub. The zero value gives the defaults; NewHub
// keeps a copy, not the pointer.
type HubOptions struct {
	// BufferSize is how many live entries may wait for each subscriber.
	// A subscriber reading live entries that falls further behind is ended
	// with ErrSlowSubscriber. The buffer holds pointers to entries shared
	// by every subscriber, so its cost is 8 bytes per slot used, grown
	// on demand. Zero or negative means DefaultHubBufferSize (1024).
	BufferSize int

	// History is how many of the newest entries the hub keeps, shared,
	// for subscribers whose backlog starts among them: a client that
	// reconnects after a drop or a short outage reads its backlog from
	// memory, already encoded, instead of decoding it from the store.
	// Older backlogs are read from the store. The cost is the entries
	// themselves (about 1 KiB each for typical entries). Zero means
	// DefaultHubHistory (4096); negative keeps none.
	History int

	// Logger receives the hub's own faults (a failed store read) at
	// Error. Subscription endings are returned to the subscriber, not
	// logged. The default is slog.Default().
	Logger *slog.Logger
}

// HubEntry is one entry as a Hub delivers it.
type HubEntry struct {
	Entry Entry
	// JSON is Entry as the API serves it: encoding/json with HTML escaping
	// off, on one line with no trailing newline, so Entry.Data appears byte
	// for byte in the canonical form that was hashed. For live entries it
	// is computed once and shared by every subscriber, like Entry.Data:
	// read them, never modify them.
	JSON []byte
}

// HubStats is a snapshot of a Hub's state, for metrics and tests.
type HubStats struct {
	// Subscribers is the number of open subscriptions.
	Subscribers int
	// Live is how many of them read live entries; the others are still
	// reading their backlog (and, while they do, are never ended as slow:
	// they hold nothing in the hub).
	Live int
	// Position is the seq of the newest entry the tail has fanned out (0
	// before the first Subscribe).
	Position uint64
	// Buffered is the number of live entries waiting in all subscribers'
	// buffers; it never exceeds Subscribers × BufferSize.
	Buffered int
	// Dropped counts subscriptions ended with ErrSlowSubscriber.
	Dropped uint64
	// History is the number of recent entries kept for backlogs.
	History int
}

// NewHub returns a Hub over l. It starts nothing until the first
// Subscribe; call Close to stop it.
func NewHub(l *Log, opts *HubOptions) *Hub {
	var o HubOptions
	if opts != nil {
		o = *opts
	}
	if o.BufferSize <= 0 {
		o.BufferSize = DefaultHubBufferSize
	}
	if o.History == 0 {
		o.History = DefaultHubHistory
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Hub{
		l: l, bufLen: o.BufferSize, histCap: max(o.History, 0), logger: o.Logger,
		kick: make(chan struct{}, 1), subs: make(map[*HubSub]struct{}),
	}
}

// Subscribe returns a subscription that delivers every entry with seq >
// afterSeq, in order, exactly once: first the backlog, read by the
// subscriber itself from the hub's history or the store, then the live
// entries the hub fans out.
//
// afterSeq may not exceed the log's size: a resume point past the newest
// entry belongs to some other log, and Subscribe returns an error matching
// ErrOutOfRange rather than wait for entries that may never be the ones
// the caller saw. After Close it returns ErrHubClosed.
//
// The subscription ends when ctx is done (Next then returns ctx's error),
// when it is closed, when it falls behind (ErrSlowSubscriber), or when the
// hub closes (ErrHubClosed). Always Close it when done.
func (h *Hub) Subscribe(ctx context.Context, afterSeq uint64) (*HubSub, error) {
	size, err := h.l.Size(ctx)
	if errors.Is(err, ErrClosed) {
		return nil, ErrHubClosed
	}
	if err != nil {
		return nil, fmt.Errorf("audit: hub: subscribe: %w", err)
	}
	if afterSeq > size {
		return nil, fmt.Errorf("audit: hub: subscribe: %w: after seq %d, but the log has %d entries", ErrOutOfRange, afterSeq, size)
	}
	s := &HubSub{
		h: h, last: afterSeq, floor: afterSeq, signal: make(chan struct{}, 1), done: make(chan struct{}),
	}

	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHubClosed
	}
	if !h.started {
		// size was read before the lock, so entries may have committed
		// since: the tail reads from size+1 on its first pass.
		h.start(size)
	}
	s.from = h.pos
	h.subs[s] = struct{}{}
	retry := h.failed
	h.mu.Unlock()

	if retry {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
	s.stop = context.AfterFunc(ctx, func() { s.end(context.Cause(ctx)) })
	return s, nil
}

// start launches the tail at position pos. h.mu is held.
func (h *Hub) start(pos uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	h.started, h.pos, h.stopTail, h.tailDone = true, pos, cancel, make(chan struct{})
	go h.tail(ctx)
}

// Stats returns a snapshot of the hub's state.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := HubStats{Subscribers: len(h.subs), Position: h.pos, Dropped: h.dropped, History: h.histN}
	for s := range h.subs {
		s.mu.Lock()
		st.Buffered += s.n
		if s.live {
			st.Live++
		}
		s.mu.Unlock()
	}
	return st
}

// Close stops the tail goroutine and waits for it, and ends every
// subscription with ErrHubClosed. It does not close the Log. Close is
// idempotent and always returns nil.
func (h *Hub) Close() error {
	h.shut()
	h.mu.Lock()
	stop, done := h.stopTail, h.tailDone
	h.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	return nil
}

// shut marks the hub closed and ends every subscription with
// ErrHubClosed.
func (h *Hub) shut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		s.finish(ErrHubClosed)
		delete(h.subs, s)
	}
}

// tail is the hub's one reader of the log.
func (h *Hub) tail(ctx context.Context) {
	defer close(h.tailDone)
	h.mu.Lock()
	pos := h.pos
	h.mu.Unlock()
	for {
		// Taken before reading, so that a commit racing the read wakes
		// the next wait instead of being missed (see Log.Subscribe).
		wake := h.l.wakeChan()
		var err error
		for {
			var batch []*HubEntry
			batch, err = h.read(ctx, pos)
			if err != nil || len(batch) == 0 {
				break
			}
			h.fanOut(batch)
			pos = batch[len(batch)-1].Entry.Seq
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.fail(ctx, err)
		} else {
			h.mu.Lock()
			h.failed = false
			h.mu.Unlock()
		}
		select {
		case <-wake:
		case <-h.kick:
		case <-h.l.done:
			h.shut()
			return
		case <-ctx.Done():
			return
		}
	}
}

// read returns up to hubBatch entries after pos, encoded.
func (h *Hub) read(ctx context.Context, pos uint64) ([]*HubEntry, error) {
	var entries []Entry
	err := h.l.st.View(ctx, func(r store.Reader) error {
		hd, err := readHead(r)
		if err != nil || hd.size <= pos {
			return err
		}
		entries, err = readEntries(r, pos+1, min(pos+hubBatch, hd.size), make([]Entry, 0, hubBatch))
		return err
	})
	if err != nil {
		return nil, err
	}
	return encodeEntries(entries)
}

// fanOut hands batch to every subscriber and advances the position.
func (h *Hub) fanOut(batch []*HubEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.push(batch) {
			delete(h.subs, s)
			h.dropped++
		}
	}
	h.pos = batch[len(batch)-1].Entry.Seq
	if h.histCap == 0 {
		return
	}
	if h.hist == nil {
		h.hist = make([]*HubEntry, h.histCap)
	}
	for _, e := range batch {
		if h.histN < len(h.hist) {
			h.hist[(h.histHead+h.histN)%len(h.hist)] = e
			h.histN++
		} else {
			h.hist[h.histHead] = e
			h.histHead = (h.histHead + 1) % len(h.hist)
		}
	}
}

// recent appends entries from..to to dst from the history and reports
// whether it holds them all. to is at most the hub's position, since it is
// a subscriber's seam.
func (h *Hub) recent(from, to uint64, dst []*HubEntry) ([]*HubEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.histN == 0 || to > h.pos || from <= h.pos-uint64(h.histN) {
		return dst, false
	}
	first := h.pos - uint64(h.histN) + 1 // seq at histHead
	for seq := from; seq <= to; seq++ {
		dst = append(dst, h.hist[(h.histHead+int(seq-first))%len(h.hist)])
	}
	return dst, true
}

// fail ends every current subscription with err: they cannot get past the
// entry the tail cannot read, and would otherwise wait silently.
func (h *Hub) fail(ctx context.Context, err error) {
	err = fmt.Errorf("audit: hub: %w", err)
	h.logger.ErrorContext(ctx, "audit hub cannot read the log; ending its subscriptions",
		slog.Any("error", err))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
	for s := range h.subs {
		s.finish(err)
		delete(h.subs, s)
	}
}

func encodeEntries(entries []Entry) ([]*HubEntry, error) {
	out := make([]*HubEntry, len(entries))
	for i := range entries {
		b, err := encodeEntry(&entries[i])
		if err != nil {
			return nil, err
		}
		out[i] = &HubEntry{Entry: entries[i], JSON: b}
	}
	return out, nil
}

// encodeEntry encodes e as the API serves it (see HubEntry.JSON).
func encodeEntry(e *Entry) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		// Data was read from the store and checked, so it is valid JSON.
		return nil, fmt.Errorf("encode entry %d: %w", e.Seq, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// HubSub is one subscription to a [Hub]. Next and TryNext must not be
// called concurrently with each other; Ready, Done, Err and Close may be
// called from any goroutine.
type HubSub struct {
	h      *Hub
	signal chan struct{} // capacity 1: entries may be ready, or the end
	done   chan struct{} // closed when the subscription ends
	stop   func() bool   // stops the Subscribe ctx's AfterFunc

	// Owned by the reader (Next, TryNext).
	last    uint64      // seq of the newest entry delivered
	backlog []*HubEntry // read from the store, not yet delivered
	next    int         // index in backlog of the next to deliver

	// mu guards the fields below. The tail takes it (under Hub.mu) to
	// push; the reader takes it to pop and to change phase.
	mu sync.Mutex
	// ring holds the live entries after from that are not yet delivered,
	// oldest at head, in seq order and without gaps while !behind.
	ring    []*HubEntry
	head, n int
	// from is the seam: entries up to from come from the store, entries
	// after it through ring.
	from uint64
	// floor is the resume point: push skips entries up to it, which the
	// hub may still be fanning out when a subscriber resumes from an entry
	// the store already has but the tail has not read yet.
	floor uint64
	// live is set once the reader has read the store up to from; from
	// then on an overflow means the subscriber is slow.
	live bool
	// behind is set when ring overflowed before live: the tail stops
	// filling ring until the reader registers again at a new seam.
	behind bool
	err    error // why the subscription ended; nil while open
}

// push appends batch to the subscriber's buffer. It reports true when the
// subscriber fell behind and was ended, so the hub must drop it. Called by
// the tail with Hub.mu held.
func (s *HubSub) push(batch []*HubEntry) (slow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.behind {
		return false
	}
	for _, e := range batch {
		if e.Entry.Seq <= s.floor {
			continue
		}
		if s.n == len(s.ring) && !s.grow() {
			if s.live {
				s.finishLocked(ErrSlowSubscriber)
				return true
			}
			s.behind = true
			s.clearLocked()
			break
		}
		s.ring[(s.head+s.n)%len(s.ring)] = e
		s.n++
	}
	s.notify()
	return false
}

// grow doubles ring up to the hub's buffer size, and reports whether it
// did. Rings start small so that idle subscribers cost little. s.mu is
// held.
func (s *HubSub) grow() bool {
	if len(s.ring) >= s.h.bufLen {
		return false
	}
	ring := make([]*HubEntry, min(max(2*len(s.ring), hubMinRing), s.h.bufLen))
	for i := range s.n {
		ring[i] = s.ring[(s.head+i)%len(s.ring)]
	}
	s.ring, s.head = ring, 0
	return true
}

// notify wakes a waiting reader.
func (s *HubSub) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// clearLocked empties ring, letting go of the shared entries. s.mu is held.
func (s *HubSub) clearLocked() {
	clear(s.ring)
	s.head, s.n = 0, 0
}

// finish ends the subscription with err unless it has ended already. The
// caller removes it from the hub.
func (s *HubSub) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(err)
}

func (s *HubSub) finishLocked(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	s.clearLocked()
	s.ring = nil
	close(s.done)
	s.notify()
}

// end removes the subscription from the hub and ends it with err.
func (s *HubSub) end(err error) {
	s.h.mu.Lock()
	delete(s.h.subs, s)
	s.h.mu.Unlock()
	s.finish(err)
}

// Next returns the next entry, waiting for one if the subscriber has
// caught up. It returns ctx's error when ctx is done, and the reason the
// subscription ended once it has: ErrClosed after Close, ErrSlowSubscriber,
// ErrHubClosed, the Subscribe ctx's error, or a store error (wrapping
// ErrTampered for a damaged entry).
func (s *HubSub) Next(ctx context.Context) (HubEntry, error) {
	for {
		e, ok, err := s.TryNext(ctx)
		if err != nil || ok {
			return e, err
		}
		select {
		case <-s.signal:
		case <-s.done:
		case <-ctx.Done():
			return HubEntry{}, ctx.Err()
		}
	}
}

// TryNext is Next without the wait for new entries: ok is false when the
// subscriber has caught up with the hub. It may still read the backlog
// from the store, which is what ctx bounds. A caller that also waits on
// other things (a heartbeat ticker) selects on Ready and calls TryNext
// until ok is false.
func (s *HubSub) TryNext(ctx context.Context) (e HubEntry, ok bool, err error) {
	for {
		select {
		case <-s.done:
			return HubEntry{}, false, s.Err()
		default:
		}
		if s.next < len(s.backlog) {
			p := s.backlog[s.next]
			s.backlog[s.next] = nil
			s.next++
			s.last = p.Entry.Seq
			return *p, true, nil
		}
		s.mu.Lock()
		if s.err != nil {
			err := s.err
			s.mu.Unlock()
			return HubEntry{}, false, err
		}
		if s.live {
			for s.n > 0 {
				p := s.ring[s.head]
				s.ring[s.head] = nil
				s.head = (s.head + 1) % len(s.ring)
				s.n--
				if p.Entry.Seq <= s.last {
					continue // from a seam below the resume point
				}
				s.mu.Unlock()
				s.last = p.Entry.Seq
				return *p, true, nil
			}
			s.mu.Unlock()
			return HubEntry{}, false, nil
		}
		from, behind := s.from, s.behind
		s.mu.Unlock()

		switch {
		case s.last < from:
			if err := s.readBacklog(ctx, from); err != nil {
				return HubEntry{}, false, err
			}
		case behind:
			// The buffer overflowed while we read the backlog: register
			// again at the hub's current position. Its buffer is empty.
			s.h.mu.Lock()
			s.mu.Lock()
			if s.err == nil {
				s.from, s.behind = s.h.pos, false
			}
			s.mu.Unlock()
			s.h.mu.Unlock()
		default:
			s.mu.Lock()
			if !s.behind { // else it overflowed meanwhile: go round again
				s.live = true
			}
			s.mu.Unlock()
		}
	}
}

// readBacklog reads the next batch of entries after s.last, up to the seam,
// from the store. A failure other than ctx's ends the subscription.
func (s *HubSub) readBacklog(ctx context.Context, to uint64) error {
	from := s.last + 1
	to = min(to, s.last+hubBatch)
	if batch, ok := s.h.recent(from, to, s.backlog[:0]); ok {
		s.backlog, s.next = batch, 0
		return nil
	}
	entries := make([]Entry, 0, to-from+1)
	err := s.h.l.st.View(ctx, func(r store.Reader) error {
		var err error
		entries, err = readEntries(r, from, to, entries)
		return err
	})
	var batch []*HubEntry
	if err == nil {
		batch, err = encodeEntries(entries)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = fmt.Errorf("audit: hub: backlog: %w", err)
		s.end(err)
		return err
	}
	s.backlog, s.next = batch, 0
	return nil
}

// Ready returns a channel that receives a value when entries may be ready
// for TryNext or the subscription has ended. A receive may be spurious;
// call TryNext until it reports ok false before waiting again.
func (s *HubSub) Ready() <-chan struct{} { return s.signal }

// Done returns a channel that is closed when the subscription ends, for a
// caller that must react while it is busy elsewhere (a server blocked
// writing to a slow client). Err says why.
func (s *HubSub) Done() <-chan struct{} { return s.done }

// Err returns why the subscription ended, or nil while it is open.
func (s *HubSub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription: Next and TryNext return ErrClosed. It is
// idempotent and safe to call from any goroutine.
func (s *HubSub) Close() {
	s.stop()
	s.end(ErrClosed)
}
