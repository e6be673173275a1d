package operator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
)

// Entry types the [RefusalJournal] appends.
const (
	// EntryRefused is one refused request by a trusted operator key: the
	// operation, method, path (bounded), reason and key id. Anyone who
	// knows a key id can make such a request fail, so these are
	// rate-limited per key; refusals over the limit go to the next
	// [EntryRefusalSummary].
	EntryRefused = "operator.refused"
	// EntryRefusalSummary counts, for one interval, the refusals that were
	// not recorded one by one: requests that proved no identity (no
	// header, a malformed one, an unknown key id) and refusals by a known
	// key over its rate. At most one per [RefusalJournalOptions.Interval].
	EntryRefusalSummary = "operator.refusals"
)

// Defaults of [RefusalJournalOptions].
const (
	DefaultRefusalInterval = time.Minute
	DefaultRefusalKeyBurst = 10
	DefaultRefusalKeyEvery = 6 * time.Second
	// maxSummaryOperations bounds the per-operation counts of one summary.
	// Operation ids come from the matched route, not from the caller, so
	// they are few; the bound keeps the entry small whatever the model.
	maxSummaryOperations = 64
	// maxRecordedPath bounds the request path copied into an entry: the
	// path is the caller's (a wildcard segment can be any length).
	maxRecordedPath = 256
)

// IdentifiesKey reports whether a refusal with this reason came after the
// header named a trusted key: the request then identifies whom it claims
// to act for, and the refusal is worth a person's attention. A request
// refused as missing_header, malformed_header or unknown_key proves
// nothing about anyone and is only counted.
func (r Reason) IdentifiesKey() bool {
	switch r {
	case ReasonMissingHeader, ReasonMalformedHeader, ReasonUnknownKey, "":
		return false
	}
	return true
}

// RefusalJournalOptions configures a [RefusalJournal]. The zero value
// gives the defaults.
type RefusalJournalOptions struct {
	// Now returns the current time. The default is time.Now.
	Now func() time.Time
	// Interval is the shortest time between two summary entries. The
	// default is DefaultRefusalInterval (one minute).
	Interval time.Duration
	// KeyEvery and KeyBurst rate-limit the entries recorded one by one per
	// trusted key: a burst of KeyBurst, refilled one per KeyEvery. The
	// defaults are DefaultRefusalKeyBurst and DefaultRefusalKeyEvery.
	KeyEvery time.Duration
	KeyBurst int
	// Logger receives the summary of each interval at Warn and the
	// journal's own faults at Error. The default is slog.Default().
	Logger *slog.Logger
	// RequestID returns the request id the server assigned to the request
	// whose context it is given (the reference server passes
	// httpserver.RequestID). The default reads X-Request-Id from the
	// request and keeps it only if it is 1–128 visible ASCII characters.
	RequestID func(context.Context) string
}

// RefusalStats counts refusals since the journal was made.
type RefusalStats struct {
	// ByReason counts every refusal the journal saw, by reason.
	ByReason map[Reason]uint64
	// Recorded counts operator.refused entries written one by one.
	Recorded uint64
	// Summaries counts operator.refusals entries written.
	Summaries uint64
}

// RefusalJournal decides what a refused operator request leaves in the
// signed record, so that no caller without a credential can grow the
// record at the rate it sends requests (DESIGN §5):
//
//   - a refusal that proves no identity (missing_header,
//     malformed_header, unknown_key) writes nothing when it happens: it is
//     counted, and the counts of an interval become one
//     operator.refusals entry when [RefusalJournal.Flush] next runs;
//   - a refusal by a trusted key id (stale or future ts, alg mismatch,
//     bad signature, replayed nonce) is an operator.refused entry of its
//     own, rate-limited per key; over the rate it is counted in the
//     summary instead.
//
// Nothing the caller chose reaches the record unbounded: the key id is a
// trusted one (bounded by [MaxKeyIDLen]), the request id is the server's
// (at most 128 visible ASCII characters), the path is cut to 256 bytes,
// and unproven key ids are never stored. Its Refused method has the
// signature of [VerifierOptions.OnRefused]. It is safe for concurrent use.
type RefusalJournal struct {
	log      *audit.Log
	now      func() time.Time
	interval time.Duration
	every    rate.Limit
	burst    int
	logger   *slog.Logger
	reqID    func(context.Context) string

	mu       sync.Mutex
	perKey   map[string]*rate.Limiter // trusted key ids only
	pending  refusalCounts
	since    time.Time // start of the pending interval
	lastSumm time.Time // when the last summary was written
	stats    RefusalStats
}

// refusalCounts is what one summary entry holds.
type refusalCounts struct {
	total      uint64
	byReason   map[Reason]uint64
	byOp       map[string]uint64
	overflowOp uint64            // operations past maxSummaryOperations
	overRate   map[string]uint64 // trusted key id → refusals over its rate
}

func (c *refusalCounts) add(reason Reason, op, overRateKey string) {
	if c.byReason == nil {
		c.byReason, c.byOp, c.overRate = map[Reason]uint64{}, map[string]uint64{}, map[string]uint64{}
	}
	c.total++
	c.byReason[reason]++
	if _, ok := c.byOp[op]; ok || len(c.byOp) < maxSummaryOperations {
		c.byOp[op]++
	} else {
		c.overflowOp++
	}
	if overRateKey != "" {
		c.overRate[overRateKey]++
	}
}

// merge adds o back into c (a summary that could not be written).
func (c *refusalCounts) merge(o refusalCounts) {
	if c.byReason == nil {
		c.byReason, c.byOp, c.overRate = map[Reason]uint64{}, map[string]uint64{}, map[string]uint64{}
	}
	c.total += o.total
	for r, n := range o.byReason {
		c.byReason[r] += n
	}
	for op, n := range o.byOp {
		if _, ok := c.byOp[op]; ok || len(c.byOp) < maxSummaryOperations {
			c.byOp[op] += n
		} else {
			c.overflowOp += n
		}
	}
	c.overflowOp += o.overflowOp
	for k, n := range o.overRate {
		c.overRate[k] += n
	}
}

// NewRefusalJournal returns a journal that appends to lg. opts may be
// nil; it is copied.
func NewRefusalJournal(lg *audit.Log, opts *RefusalJournalOptions) (*RefusalJournal, error) {
	if lg == nil {
		return nil, errors.New("operator: refusal journal: no record")
	}
	var o RefusalJournalOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval == 0 {
		o.Interval = DefaultRefusalInterval
	}
	if o.KeyEvery == 0 {
		o.KeyEvery = DefaultRefusalKeyEvery
	}
	if o.KeyBurst == 0 {
		o.KeyBurst = DefaultRefusalKeyBurst
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Interval < 0 || o.KeyEvery < 0 || o.KeyBurst < 0 {
		return nil, errors.New("operator: refusal journal: negative interval, rate or burst")
	}
	return &RefusalJournal{
		log: lg, now: o.Now, interval: o.Interval, every: rate.Every(o.KeyEvery), burst: o.KeyBurst,
		logger: o.Logger, reqID: o.RequestID, perKey: map[string]*rate.Limiter{},
		stats: RefusalStats{ByReason: map[Reason]uint64{}},
	}, nil
}

// Refused takes one refusal; plug it in as [VerifierOptions.OnRefused].
// A refusal by a trusted key within its rate is appended before Refused
// returns (durably, like any entry); everything else is only counted.
// ctx is the request's; the append does not stop when the client goes.
func (j *RefusalJournal) Refused(ctx context.Context, r *http.Request, operationID string, reason Reason, keyID string) {
	now := j.now()
	j.mu.Lock()
	j.stats.ByReason[reason]++
	record := false
	overRateKey := ""
	if reason.IdentifiesKey() && validKeyID(keyID) {
		l := j.perKey[keyID]
		if l == nil {
			// Only the verifier's trusted kids reach here with such a
			// reason, so the map is as small as the key set.
			l = rate.NewLimiter(j.every, j.burst)
			j.perKey[keyID] = l
		}
		if l.AllowN(now, 1) {
			record = true
		} else {
			overRateKey = keyID
		}
	}
	if !record {
		if j.pending.total == 0 {
			j.since = now
		}
		j.pending.add(reason, operationID, overRateKey)
	}
	j.mu.Unlock()
	if !record {
		return
	}

	path := r.URL.EscapedPath()
	if len(path) > maxRecordedPath {
		path = path[:maxRecordedPath] + "…"
	}
	data, _ := json.Marshal(map[string]string{
		"operationId": operationID, "method": r.Method, "path": path,
		"reason": string(reason), "keyId": keyID,
	})
	err := j.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		_, err := j.log.Append(txn, audit.Record{
			Type: EntryRefused, RequestID: j.requestID(ctx, r),
			Actor: audit.Actor{Kind: "system", ID: "operator-verifier"}, Data: data,
		})
		return err
	})
	j.mu.Lock()
	if err == nil {
		j.stats.Recorded++
	} else {
		// Counted, so the refusal is not lost from the next summary.
		if j.pending.total == 0 {
			j.since = now
		}
		j.pending.add(reason, operationID, keyID)
	}
	j.mu.Unlock()
	if err != nil {
		j.logger.ErrorContext(ctx, "recording a refused operator request", slog.Any("error", err))
	}
}

// requestID is the request's id as the server assigned it, or the
// caller's X-Request-Id if it is 1–128 visible ASCII characters: nothing
// longer or stranger is stored.
func (j *RefusalJournal) requestID(ctx context.Context, r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if j.reqID != nil {
		id = j.reqID(ctx)
	}
	if len(id) == 0 || len(id) > 128 {
		return ""
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return ""
		}
	}
	return id
}

// Flush writes the pending counts as one operator.refusals entry, if
// there are any and at least the interval has passed since the last one;
// otherwise it does nothing. Call it at least once per interval (the
// reference server calls it on a ticker) and once more when shutting
// down, through [RefusalJournal.Close]. It reports whether it wrote.
func (j *RefusalJournal) Flush(ctx context.Context) (bool, error) {
	return j.flush(ctx, false)
}

// Close writes what is pending whatever the interval: the last summary
// before the process ends. Refusals after Close are counted in the next
// Flush or Close, if any.
func (j *RefusalJournal) Close(ctx context.Context) error {
	_, err := j.flush(ctx, true)
	return err
}

func (j *RefusalJournal) flush(ctx context.Context, final bool) (bool, error) {
	now := j.now()
	j.mu.Lock()
	if j.pending.total == 0 || (!final && !j.lastSumm.IsZero() && now.Sub(j.lastSumm) < j.interval) {
		j.mu.Unlock()
		return false, nil
	}
	c, since := j.pending, j.since
	j.pending = refusalCounts{}
	j.lastSumm = now
	j.mu.Unlock()

	data := summaryData(c, since, now)
	err := j.log.Update(ctx, func(txn store.Txn) error {
		_, err := j.log.Append(txn, audit.Record{
			Type: EntryRefusalSummary, Actor: audit.Actor{Kind: "system", ID: "operator-verifier"}, Data: data,
		})
		return err
	})
	j.mu.Lock()
	if err != nil {
		j.pending.merge(c)
		if since.Before(j.since) || j.since.IsZero() {
			j.since = since
		}
	} else {
		j.stats.Summaries++
	}
	j.mu.Unlock()
	if err != nil {
		return false, err
	}
	j.logger.WarnContext(ctx, "refused operator requests", slog.Uint64("count", c.total),
		slog.Time("since", since), slog.String("summary", string(data)))
	return true, nil
}

// summaryData is the operator.refusals entry's data: the window, the
// total, and counts by reason, by operation and, for trusted keys over
// their rate, by key id. Maps marshal with sorted keys.
func summaryData(c refusalCounts, since, until time.Time) json.RawMessage {
	type summary struct {
		From            string            `json:"from"`
		Until           string            `json:"until"`
		Count           uint64            `json:"count"`
		Reasons         map[Reason]uint64 `json:"reasons"`
		Operations      map[string]uint64 `json:"operations"`
		OtherOperations uint64            `json:"otherOperations,omitempty"`
		OverRate        map[string]uint64 `json:"overRateByKey,omitempty"`
	}
	s := summary{
		From: since.UTC().Format(time.RFC3339), Until: until.UTC().Format(time.RFC3339),
		Count: c.total, Reasons: c.byReason, Operations: c.byOp, OtherOperations: c.overflowOp,
	}
	if len(c.overRate) > 0 {
		s.OverRate = c.overRate
	}
	b, _ := json.Marshal(s)
	return b
}

// Stats returns the counts since the journal was made, for metrics.
func (j *RefusalJournal) Stats() RefusalStats {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := j.stats
	s.ByReason = make(map[Reason]uint64, len(j.stats.ByReason))
	for r, n := range j.stats.ByReason {
		s.ByReason[r] = n
	}
	return s
}

// Reasons lists every refusal reason, in the order of the checks.
func Reasons() []Reason {
	return []Reason{ReasonMissingHeader, ReasonMalformedHeader, ReasonUnknownKey, ReasonStaleTimestamp,
		ReasonFutureTimestamp, ReasonAlgMismatch, ReasonBadSignature, ReasonReplayedNonce}
}
