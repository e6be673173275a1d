package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
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
