package webhook

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/store"
)

// Defaults of [DispatcherOptions].
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultWorkers        = 8
	DefaultPerEndpoint    = 2
	DefaultJitter         = 0.25
	DefaultRetention      = 30 * 24 * time.Hour
	DefaultPollInterval   = time.Second
	DefaultUserAgent      = "Countersign-Webhooks/1"
)

// Internal limits.
const (
	// tailBatch is how many entries the tailer reads per transaction, and
	// tailMaxWrites how many deliveries (two keys each) it writes per
	// transaction at most, so that a burst across many endpoints does not
	// become one huge transaction.
	tailBatch     = 128
	tailMaxWrites = 4096
	// tailEvery is the least time between two tails. The record grows
	// with every commit group, up to thousands of times a second under
	// load, and each tail costs a few reads and a commit; one tail per
	// tailEvery takes everything that arrived meanwhile, and a delivery
	// starts at most that much later.
	tailEvery = 5 * time.Millisecond
	// queueCap is how many due deliveries of one endpoint the scheduler
	// reads ahead per refill.
	queueCap = 32
	// sweepBatch is how many keys one sweep transaction deletes.
	sweepBatch = 1000
	// sweepEvery is how often (by Now) the background loop sweeps.
	sweepEvery = time.Minute
	// penaltyFor is how long a delivery whose bookkeeping failed is left
	// alone before it is attempted again (it stays in the outbox).
	penaltyFor = time.Minute
	// bodyCacheSize is how many event bodies are kept, so an entry fanned
	// out to many endpoints is read and encoded once.
	bodyCacheSize = 4096
	// maxErrorLen bounds Delivery.LastError.
	maxErrorLen = 300
)

// DefaultSchedule returns the default retry delays: 1 minute, doubling up
// to 8 h 32 min, then 12 hours four times: 14 delays, so 15 attempts. The
// attempts fall at these times after the event (nominal; jitter only
// shortens delays, by up to 25%), so a delivery is given up within 3 days:
//
//	attempt  1  at once       attempt  9  4h15m
//	attempt  2  1m            attempt 10  8h31m
//	attempt  3  3m            attempt 11  17h03m
//	attempt  4  7m            attempt 12  29h03m
//	attempt  5  15m           attempt 13  41h03m
//	attempt  6  31m           attempt 14  53h03m
//	attempt  7  1h03m         attempt 15  65h03m, then failed
//	attempt  8  2h07m
func DefaultSchedule() []time.Duration {
	s := make([]time.Duration, 0, 14)
	for d := time.Minute; d < 12*time.Hour; d *= 2 {
		s = append(s, d)
	}
	for len(s) < 14 {
		s = append(s, 12*time.Hour)
	}
	return s
}

// DispatcherOptions configures a [Dispatcher]. The zero value gives the
// defaults; NewDispatcher keeps a copy.
type DispatcherOptions struct {
	// HTTPClient sends deliveries. Its Transport must be nil or an
	// *http.Transport; the dispatcher uses a clone of it with its own
	// dialer (the SSRF guard), no proxy and no custom TLS dialer, and does
	// not follow redirects (a 3xx is a failed attempt). TLSClientConfig and
	// Timeout are kept. Default: a fresh transport and no client timeout
	// (AttemptTimeout bounds each attempt).
	HTTPClient *http.Client
	// AttemptTimeout bounds one attempt, connection included. Default
	// DefaultAttemptTimeout (10 s).
	AttemptTimeout time.Duration
	// Workers is how many attempts run at once. Default DefaultWorkers (8).
	Workers int
	// PerEndpoint is how many attempts to one endpoint run at once, so a
	// slow endpoint holds at most that many workers. Default
	// DefaultPerEndpoint (2).
	PerEndpoint int
	// Schedule is the list of delays before the 2nd, 3rd, ... attempt; a
	// delivery fails after len(Schedule)+1 failed attempts. Every delay
	// must be positive. nil means DefaultSchedule(); an empty, non-nil
	// list means a single attempt.
	Schedule []time.Duration
	// Jitter shortens each delay by a random fraction in [0, Jitter), so
	// that deliveries failing together do not retry together; it never
	// lengthens one, so the total stays within the sum of Schedule. 0
	// means DefaultJitter (0.25); negative means none; at most 0.9.
	Jitter float64
	// Retention is how long a finished (delivered or failed) delivery is
	// kept for Deliveries. Default DefaultRetention (30 days); negative
	// keeps them for ever.
	Retention time.Duration
	// PollInterval is the longest the background loops sleep without
	// looking at the record and the outbox, which covers entries appended
	// by another process that cannot wake this one. Default
	// DefaultPollInterval (1 s).
	PollInterval time.Duration
	// UserAgent is sent with every delivery. Default DefaultUserAgent.
	UserAgent string
	// AllowLoopback lets deliveries connect to loopback addresses
	// (sandbox mode). Default false.
	AllowLoopback bool
	// Resolver resolves endpoint host names for the SSRF check. Default
	// net.DefaultResolver.
	Resolver Resolver
	// Now is the clock: due times, signature timestamps, record times.
	// Default time.Now. (The background loops of Start wait with real
	// timers; tests drive Tick instead.)
	Now func() time.Time
	// Rand returns a number in [0, 1) for jitter; it must be safe for
	// concurrent use. Default math/rand/v2.Float64.
	Rand func() float64
	// Logger receives diagnostics: failed attempts at Debug, deactivations
	// at Info, the dispatcher's own faults at Error. Secrets are never
	// logged. Default slog.Default().
	Logger *slog.Logger
	// OnDelivery, if set, is called after each attempt's outcome is
	// stored, with the delivery's state after it: StateDelivered,
	// StatePending (it will be retried) or StateFailed (given up: the
	// schedule ran out, 410 Gone, or the endpoint was inactive). Metrics
	// hang here. It runs on the attempt's goroutine, so it must be cheap
	// and must not block.
	OnDelivery func(state string)
}

// Dispatcher delivers the events derived from the record to the endpoints
// that subscribe to them, durably and at least once.
//
// A tailer follows the record from a persisted cursor and, for each entry,
// writes one delivery per subscribed endpoint into a persisted outbox,
// advancing the cursor in the same transaction: after a restart nothing is
// lost and nothing is queued twice. Workers take due deliveries, POST the
// event, and record the outcome. See the package documentation for the
// details.
//
// Use Start and Close to run it in the background, or call Tick to drive
// it step by step (tests, and deployments with their own scheduler). It
// is safe for concurrent use.
type Dispatcher struct {
	st     store.Store
	log    *audit.Log
	eps    *Endpoints
	client *http.Client

	now            func() time.Time
	rand           func() float64
	logger         *slog.Logger
	userAgent      string
	attemptTimeout time.Duration
	perEndpoint    int
	schedule       []time.Duration
	jitter         float64
	retention      time.Duration
	poll           time.Duration
	onDelivery     func(state string)

	bodies  bodyCache
	epCache endpointCache

	// sem holds one token per running attempt (Workers in all).
	sem chan struct{}
	// attempts counts running attempts; Close waits for it.
	attempts sync.WaitGroup
	// attemptCtx parents every attempt; Close cancels it when its own ctx
	// ends before the attempts drain.
	attemptCtx    context.Context
	attemptCancel context.CancelFunc

	// tailMu serializes tail passes (background tailer and Tick).
	tailMu sync.Mutex
	// refillMu serializes refills, so that the completions a refill must
	// ignore (see recent) are well defined.
	refillMu sync.Mutex

	// mu guards everything below. It is never held across store or
	// network I/O, except that refill's merge step runs under it.
	mu     sync.Mutex
	queues map[string]*epQueue // by endpoint id
	order  []string            // endpoint ids, for round-robin
	rr     int                 // where the next launch round starts
	// claimed holds the deliveries being attempted.
	claimed map[dkey]struct{}
	// penalty holds deliveries whose bookkeeping failed: not attempted
	// again before the time given (by Now), though still in the outbox.
	penalty map[dkey]time.Time
	// recent holds deliveries finished since the refill in progress
	// began (by completion generation), which that refill may have read
	// as due from a snapshot taken before they finished.
	recent map[dkey]uint64
	gen    uint64
	// dirty says the outbox may hold due deliveries that no queue holds:
	// new deliveries, a Retry, or time passing.
	dirty bool
	// changed is closed (and replaced) whenever something happens that a
	// waiting loop may act on; see signal.
	changed chan struct{}
	// state is 0 before Start, 1 running, 2 closed.
	state      int
	loopCancel context.CancelFunc
	loops      sync.WaitGroup
	lastSweep  time.Time
}

// dkey identifies a delivery: an event of an endpoint.
type dkey struct {
	ep   string
	seq  uint64
	kind string
}

// epQueue is the scheduler's view of one endpoint.
type epQueue struct {
	ep    storedEndpoint // as of the last refill
	items []dkey         // due, not claimed, in outbox order
	// more says the last refill stopped at queueCap: the outbox may hold
	// more due deliveries of this endpoint.
	more     bool
	inflight int
	// next is the earliest known due time (unix ns) after the last
	// refill's now; 0 when none is known.
	next int64
	// low (unix ns) is where refills start scanning the endpoint's
	// outbox. Every key is written with a due time at or after the
	// moment it is written, so once a refill at time T saw no key below
	// due D ≤ T, none will appear: the scan skips the delete tombstones of
	// finished deliveries, which a log-structured store would otherwise
	// walk on every refill. A wall clock stepped backwards breaks that
	// premise, so every sweep (once a minute) and every Retry reset low.
	low int64
}

// NewDispatcher returns a dispatcher of the events of log to the endpoints
// of eps, keeping its state in st (under "webhook/"). It does not start
// it. It fails for invalid options.
func NewDispatcher(st store.Store, log *audit.Log, eps *Endpoints, opts *DispatcherOptions) (*Dispatcher, error) {
	if st == nil || log == nil || eps == nil {
		return nil, errors.New("webhook: new dispatcher: nil store, log or endpoints")
	}
	var o DispatcherOptions
	if opts != nil {
		o = *opts
	}
	if o.AttemptTimeout == 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.PerEndpoint == 0 {
		o.PerEndpoint = DefaultPerEndpoint
	}
	if o.Schedule == nil {
		o.Schedule = DefaultSchedule()
	}
	switch {
	case o.Jitter == 0:
		o.Jitter = DefaultJitter
	case o.Jitter < 0:
		o.Jitter = 0
	}
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.AttemptTimeout < 0 || o.Workers < 0 || o.PerEndpoint < 0 || o.PollInterval < 0:
		return nil, errors.New("webhook: new dispatcher: negative AttemptTimeout, Workers, PerEndpoint or PollInterval")
	case o.Jitter > 0.9:
		return nil, fmt.Errorf("webhook: new dispatcher: Jitter %v is more than 0.9", o.Jitter)
	}
	for i, d := range o.Schedule {
		if d <= 0 {
			return nil, fmt.Errorf("webhook: new dispatcher: Schedule[%d] is %v, want > 0", i, d)
		}
	}
	client, err := newClient(&o)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		st: st, log: log, eps: eps, client: client,
		now: o.Now, rand: o.Rand, logger: o.Logger, userAgent: o.UserAgent,
		attemptTimeout: o.AttemptTimeout, perEndpoint: o.PerEndpoint,
		schedule: slices.Clone(o.Schedule), jitter: o.Jitter, retention: o.Retention, poll: o.PollInterval,
		onDelivery: o.OnDelivery, sem: make(chan struct{}, o.Workers),
		queues:  map[string]*epQueue{},
		claimed: map[dkey]struct{}{},
		penalty: map[dkey]time.Time{},
		recent:  map[dkey]uint64{},
		changed: make(chan struct{}),
		dirty:   true,
	}
	d.bodies.init(bodyCacheSize)
	d.attemptCtx, d.attemptCancel = context.WithCancel(context.Background())
	return d, nil
}

// newClient builds the delivery client around the shared SSRF guard
// (package netguard): it resolves each host itself, refuses forbidden
// addresses, dials the address it checked, uses no proxy and follows no
// redirect.
func newClient(o *DispatcherOptions) (*http.Client, error) {
	p := netguard.Policy{
		AllowLoopback: o.AllowLoopback, Resolver: o.Resolver,
		Dialer: &net.Dialer{Timeout: o.AttemptTimeout, KeepAlive: 30 * time.Second},
	}
	var base *http.Transport
	var timeout time.Duration
	if o.HTTPClient != nil {
		timeout = o.HTTPClient.Timeout
		switch tr := o.HTTPClient.Transport.(type) {
		case nil:
		case *http.Transport:
			base = tr
		default:
			return nil, fmt.Errorf("webhook: new dispatcher: HTTPClient.Transport is a %T, want *http.Transport "+
				"(the dispatcher must install its own dialer to refuse internal addresses)", tr)
		}
	}
	t := p.Transport(base)
	t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, o.Workers, DefaultWorkers)
	return &http.Client{
		Transport: t,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// ErrClosed is returned by Start, Tick and Retry's scheduling after Close.
// Check with errors.Is.
var ErrClosed = errors.New("webhook: dispatcher closed")

// Start runs the dispatcher in the background until Close: a tailer that
// follows the record, and a scheduler that hands due deliveries to the
// workers. It does not block. ctx is used only to check that the store is
// readable; the background work belongs to the dispatcher, not to ctx.
// Calling Start twice is an error.
func (d *Dispatcher) Start(ctx context.Context) error {
	if _, err := d.readCursor(ctx); err != nil {
		return fmt.Errorf("webhook: start: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case 1:
		return errors.New("webhook: start: already started")
	case 2:
		return fmt.Errorf("webhook: start: %w", ErrClosed)
	}
	d.state = 1
	loopCtx, cancel := context.WithCancel(context.Background())
	d.loopCancel = cancel
	d.loops.Add(2)
	go func() { defer d.loops.Done(); d.runTailer(loopCtx) }()
	go func() { defer d.loops.Done(); d.runScheduler(loopCtx) }()
	return nil
}

// Close stops the dispatcher: the background loops end, no new attempt
// starts, and Close waits for the attempts in flight to finish. If ctx
// ends first, those attempts are cancelled (they stay due, and are
// retried by the next dispatcher over the store) and Close returns ctx's
// error once they have returned. Close is idempotent; it closes neither
// the store nor the log.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.state == 2 {
		d.mu.Unlock()
		return nil
	}
	d.state = 2
	cancel := d.loopCancel
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	d.loops.Wait()
	drained := make(chan struct{})
	go func() { d.attempts.Wait(); close(drained) }()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = fmt.Errorf("webhook: close: %w", ctx.Err())
		d.attemptCancel()
		<-drained
	}
	d.attemptCancel()
	d.client.CloseIdleConnections()
	return err
}

func (d *Dispatcher) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state == 2
}

// Tick runs one synchronous pass: it tails the record into the outbox,
// sweeps expired delivery records and deleted endpoints, and attempts
// every delivery due at Now, using the worker pool, waiting for those
// attempts to finish. A delivery is attempted at most once per Tick (a
// failed one is rescheduled after Now). It returns the number of attempts
// made.
//
// Tick is how tests drive the dispatcher with a fake clock; it may also
// be used instead of Start by a deployment with its own scheduling.
func (d *Dispatcher) Tick(ctx context.Context) (int, error) {
	if d.isClosed() {
		return 0, fmt.Errorf("webhook: tick: %w", ErrClosed)
	}
	if _, err := d.tail(ctx); err != nil {
		return 0, fmt.Errorf("webhook: tick: %w", err)
	}
	if err := d.sweep(ctx); err != nil {
		return 0, fmt.Errorf("webhook: tick: %w", err)
	}
	d.markDirty()
	var mine sync.WaitGroup
	n := 0
	for {
		ch := d.changedChan()
		if d.needRefill() {
			if err := d.refill(ctx); err != nil {
				mine.Wait()
				return n, fmt.Errorf("webhook: tick: %w", err)
			}
		}
		launched, blocked := d.launch(&mine)
		n += launched
		if launched > 0 {
			continue
		}
		if !blocked && !d.needRefill() && !d.busy() {
			mine.Wait()
			return n, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			mine.Wait()
			return n, fmt.Errorf("webhook: tick: %w", ctx.Err())
		}
	}
}

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

func (d *Dispatcher) lastSweepTime() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lastSweep
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

// ---- tailing ----

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

// ---- scheduling ----

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

// ---- attempts ----

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

// ---- sweeping ----

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
