package metrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/operator"
)

// Namespace prefixes every metric of this package.
const Namespace = "countersign"

// Label values this package uses for what it cannot name otherwise.
const (
	// Unmatched is the operation label of requests no route matched
	// (404 route.not_found, 405 method_not_allowed), so that probing
	// random paths adds no series.
	Unmatched = "unmatched"
	// Other is the label value of a gate outcome, a status class or an
	// entry type this package does not know, or of an entry type past the
	// cap of MaxEntryTypes.
	Other = "other"
)

// MaxEntryTypes caps the distinct type labels of
// countersign_record_entries_total. Entry types come from the code, so a
// deployment has a few dozen; the cap keeps an embedder that appends
// entries of made-up types from growing the series without bound.
const MaxEntryTypes = 256

// Bucket layouts of the histograms.
var (
	// HTTPBuckets are the upper bounds, in seconds, of
	// countersign_http_request_duration_seconds: 0.5 ms to 30 s.
	HTTPBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	// CommitBuckets are the upper bounds, in seconds, of
	// countersign_store_commit_seconds: 100 µs doubling to about 1.6 s.
	CommitBuckets = prometheus.ExponentialBuckets(0.0001, 2, 15)
	// GroupBuckets are the upper bounds of countersign_store_commit_group_size:
	// 1 doubling to 256, Pebble's default largest group.
	GroupBuckets = prometheus.ExponentialBuckets(1, 2, 9)
)

// OutboxTimeout bounds the store read behind the outbox depth gauge on
// each scrape.
const OutboxTimeout = 10 * time.Second

// Options configures [New]. The zero value gives the defaults.
type Options struct {
	// Logger receives errors met while collecting a scrape (a failed
	// outbox read), at Warn. Default slog.Default().
	Logger *slog.Logger
	// MaxScrapes is how many scrapes are served at once; more are answered
	// 503. Default 4.
	MaxScrapes int
}

// Metrics holds the metrics of one server on a private registry. Its
// Observe methods are the hooks to plug into the library's packages; its
// Watch methods register gauges read at scrape time. It is safe for
// concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	httpRequests *prometheus.CounterVec   // operation, code
	httpDuration *prometheus.HistogramVec // operation

	gate        [3]prometheus.Counter // allow, confirm, deny
	gateOther   prometheus.Counter
	settlements *prometheus.CounterVec
	settled     prometheus.Counter
	failed      prometheus.Counter
	unknown     prometheus.Counter
	refunded    prometheus.Counter
	entries     *prometheus.CounterVec // type
	entryOther  prometheus.Counter
	// entryTypes maps a type to its counter. Readers load it without a
	// lock; a new type copies it under entryMu (types are few and fixed
	// by the code, so copies stop after the first entries of each).
	entryTypes atomic.Pointer[map[string]prometheus.Counter]
	entryMu    sync.Mutex

	commitGroup   prometheus.Histogram
	commitSeconds prometheus.Histogram
	commitErrors  prometheus.Counter
	groupRun      prometheus.Histogram
	lockWait      prometheus.Histogram

	webhookDelivered prometheus.Counter
	webhookRetrying  prometheus.Counter
	webhookFailed    prometheus.Counter
}

// New returns Metrics with every countersign metric, the Go runtime
// collector and the process collector registered on a new private
// registry (never prometheus.DefaultRegisterer: two servers in one
// process, or an embedder's own metrics, do not collide).
func New(opts *Options) *Metrics {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxScrapes <= 0 {
		o.MaxScrapes = 4
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "http", Name: "requests_total",
		Help: "HTTP requests served, by contract operation id (\"unmatched\" when no route matched) and status class (2xx, 3xx, 4xx, 5xx).",
	}, []string{"operation", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
		Help:    "Time from a request's arrival to the end of its response (for audit.stream, the stream's lifetime), by contract operation id.",
		Buckets: HTTPBuckets,
	}, []string{"operation"})

	gate := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "gate_decisions_total",
		Help: "gate.decision entries committed to the record, by outcome (allow, confirm, deny; other for an outcome this build does not know).",
	}, []string{"outcome"})
	m.gate = [3]prometheus.Counter{gate.WithLabelValues("allow"), gate.WithLabelValues("confirm"), gate.WithLabelValues("deny")}
	m.gateOther = gate.WithLabelValues(Other)

	m.settlements = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "settlements_total",
		Help: "Settlement outcomes committed to the record, by outcome: settled (payment.settled), failed (payment.failed), unknown (payment.outcome_unknown), refunded (payment.refunded).",
	}, []string{"outcome"})
	m.settled = m.settlements.WithLabelValues("settled")
	m.failed = m.settlements.WithLabelValues("failed")
	m.unknown = m.settlements.WithLabelValues("unknown")
	m.refunded = m.settlements.WithLabelValues("refunded")

	m.entries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "record", Name: "entries_total",
		Help: "Entries committed to the record, by entry type.",
	}, []string{"type"})
	m.entryOther = m.entries.WithLabelValues(Other)
	m.entryTypes.Store(&map[string]prometheus.Counter{})

	m.commitGroup = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "store", Name: "commit_group_size",
		Help:    "Transactions made durable by one group commit of the store.",
		Buckets: GroupBuckets,
	})
	m.commitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "store", Name: "commit_seconds",
		Help:    "Time to write and sync one group commit of the store, which every acknowledged write waits for: Pebble's write and fsync; PostgreSQL's commit round trip (the statements, the WAL flush, the wire).",
		Buckets: CommitBuckets,
	})
	m.commitErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "store", Name: "commit_errors_total",
		Help: "Group commits of the store that failed, nothing of them written; after one, Pebble refuses every write.",
	})
	m.groupRun = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "store", Name: "group_run_seconds",
		Help:    "Time the PostgreSQL store's committer ran one group's functions and commit hooks, every attempt, before its commit.",
		Buckets: CommitBuckets,
	})
	m.lockWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: "store", Name: "commit_lock_wait_seconds",
		Help:    "Wait of one group of the PostgreSQL store for the commit lock taken before its functions run (zero unless another server committed lately).",
		Buckets: CommitBuckets,
	})

	deliveries := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "webhook", Name: "deliveries_total",
		Help: "Webhook delivery attempts whose outcome was stored, by what the delivery came to: delivered (2xx), retrying (rescheduled), failed (given up: schedule exhausted, 410 Gone, endpoint inactive).",
	}, []string{"outcome"})
	m.webhookDelivered = deliveries.WithLabelValues("delivered")
	m.webhookRetrying = deliveries.WithLabelValues("retrying")
	m.webhookFailed = deliveries.WithLabelValues("failed")

	m.reg.MustRegister(m.httpRequests, m.httpDuration, gate, m.settlements, m.entries,
		m.commitGroup, m.commitSeconds, m.commitErrors, m.groupRun, m.lockWait, deliveries)

	m.handler = promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelWarn),
		// A failed collector (the outbox read) must not hide every
		// other metric; promhttp_metric_handler_errors_total counts it.
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            m.reg,
		MaxRequestsInFlight: o.MaxScrapes,
	}))
	return m
}

// Registry returns the private registry, for collectors of other parts
// of a deployment (a store driver's connection pool, an MCP server's
// sessions) and for embedders that gather it together with their own
// (prometheus.Gatherers).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Register adds c to the registry. It fails, as
// prometheus.Registerer.Register does, when c's metrics clash with
// registered ones.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Handler serves the registry in the Prometheus text or OpenMetrics
// exposition format, whichever the scraper negotiates. Serve it only where
// operators, never agents, can reach it (see the package documentation).
func (m *Metrics) Handler() http.Handler { return m.handler }

// ---- HTTP ----

// RequestObserver returns the function that records one request of
// operation (a contract operation id, or [Unmatched]): its status, counted
// by class, and how long it took. Call it once per operation and keep the
// function; each call of it then costs an atomic load, a counter increment
// and a histogram observation, and allocates nothing once the operation's
// series exist. A status of 0 means no response was sent (the handler
// aborted) and counts as 5xx. An *httpserver.Config's Metrics is this
// method's natural caller.
//
// Series are created on an operation's first request, so an idle operation
// adds none.
func (m *Metrics) RequestObserver(operation string) func(status int, elapsed time.Duration) {
	o := &opObserver{m: m, op: operation}
	return o.observe
}

// statusClasses are the code label values, by status/100.
var statusClasses = [...]string{Other, "1xx", "2xx", "3xx", "4xx", "5xx"}

// opObserver holds one operation's series, made on first use.
type opObserver struct {
	m     *Metrics
	op    string
	dur   atomic.Pointer[prometheus.Observer]
	codes [len(statusClasses)]atomic.Pointer[prometheus.Counter]
}

func (o *opObserver) observe(status int, elapsed time.Duration) {
	c := 0
	switch {
	case status == 0:
		c = 5
	case status >= 100 && status < 600:
		c = status / 100
	}
	ctr := o.codes[c].Load()
	if ctr == nil {
		v := o.m.httpRequests.WithLabelValues(o.op, statusClasses[c])
		ctr = &v
		o.codes[c].Store(ctr)
	}
	(*ctr).Inc()
	dur := o.dur.Load()
	if dur == nil {
		v := o.m.httpDuration.WithLabelValues(o.op)
		dur = &v
		o.dur.Store(dur)
	}
	(*dur).Observe(elapsed.Seconds())
}

// ---- the record ----

// ObserveEntries counts the entries one committed transaction appended to
// the record: every entry by type, gate.decision entries by outcome, and
// settlement outcomes. Pass it as audit.Options.Committed. It reads only
// the type of each entry and, for a gate decision, the outcome member of
// its data.
func (m *Metrics) ObserveEntries(entries []audit.Entry) {
	for i := range entries {
		e := &entries[i]
		m.entryCounter(e.Type).Inc()
		switch e.Type {
		case "gate.decision":
			switch gateOutcome(e.Data) {
			case "allow":
				m.gate[0].Inc()
			case "confirm":
				m.gate[1].Inc()
			case "deny":
				m.gate[2].Inc()
			default:
				m.gateOther.Inc()
			}
		case "payment.settled":
			m.settled.Inc()
		case "payment.failed":
			m.failed.Inc()
		case "payment.outcome_unknown":
			m.unknown.Inc()
		case "payment.refunded":
			m.refunded.Inc()
		}
	}
}

// entryCounter returns the counter of entry type typ, or of Other past
// MaxEntryTypes or for a type that is not a valid label value.
func (m *Metrics) entryCounter(typ string) prometheus.Counter {
	if c, ok := (*m.entryTypes.Load())[typ]; ok {
		return c
	}
	m.entryMu.Lock()
	defer m.entryMu.Unlock()
	old := *m.entryTypes.Load()
	if c, ok := old[typ]; ok {
		return c
	}
	if len(old) >= MaxEntryTypes {
		return m.entryOther
	}
	c, err := m.entries.GetMetricWithLabelValues(typ)
	if err != nil {
		return m.entryOther // not valid UTF-8
	}
	next := make(map[string]prometheus.Counter, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[typ] = c
	m.entryTypes.Store(&next)
	return c
}

// gateOutcome returns the value of the top-level "outcome" member of a
// gate.decision's data, or "" when it has none. The record stores data as
// canonical JSON (RFC 8785: keys sorted, so outcome sits after agent,
// amount, ...), so it scans the top-level members in place, skipping the
// others' values without decoding them, and decodes properly only what the
// scan cannot settle (an escape in a key or in the value).
func gateOutcome(data []byte) string {
	v, ok := topLevelString(data, "outcome")
	if !ok {
		return decodeOutcome(data)
	}
	switch string(v) { // compared in place, no allocation
	case "allow":
		return "allow"
	case "confirm":
		return "confirm"
	case "deny":
		return "deny"
	case "":
		return ""
	}
	return Other
}

// outcomeLabel maps a gate outcome to its label value: allow, confirm,
// deny, "" for none, Other for anything else.
func outcomeLabel(v string) string {
	switch v {
	case "allow", "confirm", "deny", "":
		return v
	}
	return Other
}

// topLevelString finds member key of the JSON object data and returns its
// string value ("" when it is absent or not a string; the last one when
// the key repeats, as encoding/json would). ok is false when the scan
// cannot tell without decoding: data is not an object, or a key or the
// value holds an escape. data must be valid JSON, as the record's is.
func topLevelString(data []byte, key string) (v []byte, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	depth, wantKey := 0, false
	for ; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
			wantKey = depth == 1 // the top-level object's first key follows
		case '}', ']':
			depth--
		case ',':
			wantKey = depth == 1
		case '"':
			end, escaped := stringEnd(data, i)
			if end < 0 {
				return nil, false
			}
			if depth == 1 && wantKey {
				wantKey = false
				if escaped {
					return nil, false
				}
				if string(data[i+1:end]) == key {
					j := skipSpace(data, end+1)
					if j >= len(data) || data[j] != ':' {
						return nil, false
					}
					j = skipSpace(data, j+1)
					v = nil // not a string, unless it is
					if j < len(data) && data[j] == '"' {
						vend, vesc := stringEnd(data, j)
						if vend < 0 || vesc {
							return nil, false
						}
						v, end = data[j+1:vend], vend
					}
				}
			}
			i = end
		}
	}
	return v, true
}

// stringEnd returns the index of the quote closing the string that opens
// at data[i], or -1, and whether the string holds an escape.
func stringEnd(data []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			return j, escaped
		}
	}
	return -1, escaped
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// decodeOutcome is gateOutcome's slow path, with the same reading: the
// exact key, the last one when it repeats.
func decodeOutcome(data []byte) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(data, &members) != nil {
		return ""
	}
	var v string
	if raw, ok := members["outcome"]; !ok || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	return outcomeLabel(v)
}

// ---- the store ----

// ObserveStoreCommit records one commit of the store: how many
// transactions it made durable, how long writing and syncing it took, and
// whether it failed (failed commits are observed in the histograms too).
// With pebblestore:
//
//	OnCommit: func(ci pebblestore.CommitInfo) { m.ObserveStoreCommit(ci.Txns, ci.Sync, ci.Err) }
//
// A driver without group commit reports each transaction with txns 1.
// With pgstore, whose commit is a round trip, see ObserveStoreGroup.
func (m *Metrics) ObserveStoreCommit(txns int, sync time.Duration, err error) {
	m.commitGroup.Observe(float64(txns))
	m.commitSeconds.Observe(sync.Seconds())
	if err != nil {
		m.commitErrors.Inc()
	}
}

// ObserveStoreGroup records the rest of a group's time in a store whose
// committer runs the functions itself and then commits: how long they
// ran, and how long the group waited for a lock before they could. With
// pgstore:
//
//	OnCommit: func(ci pgstore.CommitInfo) {
//		m.ObserveStoreCommit(ci.Txns, ci.Commit, ci.Err)
//		m.ObserveStoreGroup(ci.Run, ci.Lock)
//	}
//
// Run, lock wait and commit, one group after another, are the chain
// every write waits in.
func (m *Metrics) ObserveStoreGroup(run, lockWait time.Duration) {
	m.groupRun.Observe(run.Seconds())
	m.lockWait.Observe(lockWait.Seconds())
}

// ---- webhooks ----

// ObserveWebhookDelivery counts one stored delivery attempt by the
// delivery's state after it, as webhook.DispatcherOptions.OnDelivery
// reports it: "delivered", "pending" (counted as retrying) or "failed".
// Pass it as that option.
func (m *Metrics) ObserveWebhookDelivery(state string) {
	switch state {
	case "delivered":
		m.webhookDelivered.Inc()
	case "pending":
		m.webhookRetrying.Inc()
	default:
		m.webhookFailed.Inc()
	}
}

// OutboxReader is what the outbox gauge reads; a *webhook.Dispatcher is
// one.
type OutboxReader interface {
	OutboxDepth(ctx context.Context) (int, error)
}

// WatchOutbox registers countersign_webhook_outbox_depth, the number of
// webhook deliveries waiting (due or scheduled for a retry), read from o
// on every scrape within OutboxTimeout. A failed read is logged (Options.Logger),
// counted in promhttp_metric_handler_errors_total, and leaves the gauge out of
// that scrape. It fails if called twice.
func (m *Metrics) WatchOutbox(o OutboxReader) error {
	return m.reg.Register(&outboxCollector{
		src: o,
		desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "webhook", "outbox_depth"),
			"Webhook deliveries waiting in the outbox: due, or scheduled for a retry.", nil, nil),
	})
}

type outboxCollector struct {
	src  OutboxReader
	desc *prometheus.Desc
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), OutboxTimeout)
	defer cancel()
	n, err := c.src.OutboxDepth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
}

// ---- the live stream ----

// HubStatser is what the stream gauges read; an *audit.Hub is one.
type HubStatser interface {
	Stats() audit.HubStats
}

// WatchHub registers countersign_sse_subscribers, the live-stream
// (audit.stream) subscribers open now, and
// countersign_sse_subscribers_dropped_total, those ended for falling
// behind, both read from h's Stats on every scrape. It fails if called
// twice.
func (m *Metrics) WatchHub(h HubStatser) error {
	subs := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: "sse", Name: "subscribers",
		Help: "Live record stream (audit.stream) subscribers open now.",
	}, func() float64 { return float64(h.Stats().Subscribers) })
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: "sse", Name: "subscribers_dropped_total",
		Help: "Live record stream subscribers ended for falling too far behind (they resume with Last-Event-ID).",
	}, func() float64 { return float64(h.Stats().Dropped) })
	if err := m.reg.Register(subs); err != nil {
		return err
	}
	if err := m.reg.Register(dropped); err != nil {
		m.reg.Unregister(subs)
		return err
	}
	return nil
}

// RefusalStatser is what [Metrics.WatchRefusals] reads: the reference
// server's operator.RefusalJournal.
type RefusalStatser interface {
	Stats() operator.RefusalStats
}

// WatchRefusals exports the refused operator requests, by reason, and how
// many of them became record entries: a flood of unauthenticated requests
// shows here, not in the record.
func (m *Metrics) WatchRefusals(j RefusalStatser) error {
	return m.reg.Register(refusalCollector{j: j, refused: prometheus.NewDesc(
		prometheus.BuildFQName(Namespace, "operator", "refusals_total"),
		"Operator requests refused by the signature verifier, by reason.", []string{"reason"}, nil),
		recorded: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "operator", "refusal_entries_total"),
			"Record entries the refusals became: kind=refused for one trusted key's refusal, kind=summary for an interval's counts.",
			[]string{"kind"}, nil)})
}

type refusalCollector struct {
	j                 RefusalStatser
	refused, recorded *prometheus.Desc
}

func (c refusalCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.refused
	ch <- c.recorded
}

func (c refusalCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.j.Stats()
	for _, r := range operator.Reasons() {
		ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(s.ByReason[r]), string(r))
	}
	ch <- prometheus.MustNewConstMetric(c.recorded, prometheus.CounterValue, float64(s.Recorded), "refused")
	ch <- prometheus.MustNewConstMetric(c.recorded, prometheus.CounterValue, float64(s.Summaries), "summary")
}
