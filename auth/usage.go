package auth

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/store"
)

// Usage defaults and limits.
const (
	// DefaultFlushEvery is the [UsageOptions.FlushEvery] used when it is
	// zero.
	DefaultFlushEvery = time.Second
	// DefaultRetention is the [UsageOptions.Retention] used when it is
	// zero: 90 days.
	DefaultRetention = 90 * 24 * time.Hour
	// MaxUsageWindow is the longest window one [Usage.Report] covers.
	MaxUsageWindow = 31 * 24 * time.Hour
)

// maxUsageName bounds the key id, operation id and outcome of a count;
// they become store key bytes.
const maxUsageName = 128

// maxPending bounds the in-memory aggregate. It is only reached if the
// store refuses flushes for a long time; counts beyond it are dropped
// (and the drop is logged) rather than growing without limit.
const maxPending = 1 << 20

// ErrBadWindow: a usage report's window is empty, reversed or longer
// than MaxUsageWindow. Check with errors.Is; its code is
// [CodeBadWindow].
var ErrBadWindow = errcode.New(CodeBadWindow, "auth: bad usage window")

// UsageOptions configure a Usage. The zero value is usable.
type UsageOptions struct {
	// Now is the clock, used by SweepUsage. Default time.Now.
	Now func() time.Time
	// FlushEvery is how often counts are written to the store. Zero or
	// negative means DefaultFlushEvery (1 s).
	FlushEvery time.Duration
	// Retention is how long minute buckets are kept; SweepUsage deletes
	// older ones. Zero or negative means DefaultRetention (90 days).
	Retention time.Duration
	// Logger receives errors of background flushes (the counts are kept
	// and retried at the next flush) and reports of dropped counts.
	// Default slog.Default().
	Logger *slog.Logger
}

// Usage counts calls per agent key and answers usage reports (GET
// /usage). It is safe for concurrent use.
//
// # Cost and durability
//
// [Usage.Count] only adds to an in-memory aggregate, keyed by (key id,
// minute, operation, outcome, tag set); it never touches the store, so
// it adds no write and no fsync to a request. A goroutine owned by the
// Usage writes the aggregate to the store every FlushEvery, in one
// store.Update per interval whatever the number of calls. A crash
// therefore loses at most the counts of the last interval (plus any a
// failing store has refused meanwhile): usage is reporting, not money,
// and the record of every payment is elsewhere. A flush the store
// refuses is kept and retried at the next interval; if the store stays
// down the aggregate stops growing at a fixed bound and further counts
// are dropped and logged. [Usage.Close] stops the goroutine and flushes
// what is left.
//
// # Store layout
//
// Buckets live under the prefix "auth/usage/", one key per minute,
// operation, outcome and tag set:
//
//	auth/usage/<keyID>/<unix minute BE8>/<operation> 0x00 <outcome> 0x00 <tags> -> count BE8
//
// where <tags> is the sorted, comma-joined tag set (empty for none).
// Keys sort by key id, then time, so a report is one range scan.
//
// # Windows and minutes
//
// Counts are kept per whole minute (UTC, from the unix epoch). A report
// for [since, until) counts a minute bucket when the minute's start lies
// in [since, until). For minute-aligned bounds that is exactly the calls
// made in [since, until); otherwise it is the calls made in
// [since, until) with both bounds rounded up to the next whole minute,
// and the report says so: its Since and Until are the rounded bounds.
type Usage struct {
	st         store.Store
	now        func() time.Time
	flushEvery time.Duration
	retention  time.Duration
	logger     *slog.Logger

	// flushMu is held for writing by a flush from the moment it takes the
	// pending aggregate until its Update has returned, and for reading by
	// Report across its store scan and its look at pending. So a report
	// sees every count exactly once: in the store or in pending, never in
	// both and never in neither. Count does not take it.
	flushMu sync.RWMutex

	mu      sync.Mutex // guards pending and closed; held only for map work
	pending map[usageKey]int64
	closed  bool

	dropped atomic.Int64 // counts dropped since the last log of it

	cancel    context.CancelFunc // stops the flush goroutine's store calls
	stop      chan struct{}      // closed by Close to end the flush loop
	done      chan struct{}      // closed when the flush loop has returned
	closeOnce sync.Once
}

type usageKey struct {
	keyID       string
	minute      int64 // unix minutes
	op, outcome string
	tags        string // sorted, comma-joined, "" for none
}

// NewUsage returns a Usage over the store and starts its flush goroutine;
// call Close to stop it. opts may be nil; it is copied.
func NewUsage(st store.Store, opts *UsageOptions) *Usage {
	var o UsageOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FlushEvery <= 0 {
		o.FlushEvery = DefaultFlushEvery
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &Usage{
		st:         st,
		now:        o.Now,
		flushEvery: o.FlushEvery,
		retention:  o.Retention,
		logger:     o.Logger,
		pending:    make(map[usageKey]int64),
		cancel:     cancel,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	go u.loop(ctx)
	return u
}

func (u *Usage) loop(ctx context.Context) {
	defer close(u.done)
	t := time.NewTicker(u.flushEvery)
	defer t.Stop()
	for {
		select {
		case <-u.stop:
			return
		case <-t.C:
			if err := u.Flush(ctx); err != nil {
				u.logger.ErrorContext(ctx, "usage flush failed; counts kept for the next one", slog.Any("error", err))
			}
		}
	}
}

// Count adds one call to the aggregate: by key id, the minute of at,
// operation id, outcome (for example an error code, or "ok") and tag
// set (normally [ParseTags]' result; tags that are not valid are
// ignored, order and repeats do not matter). It never blocks on the
// store and never fails. A count with an empty or malformed key id,
// operation or outcome (more than 128 bytes, a NUL byte, invalid UTF-8,
// a "/" in the key id) or a time before 1970 is a caller bug: it is
// dropped and logged at Error. Counts made after Close are dropped.
func (u *Usage) Count(keyID, operationID, outcome string, tags []string, at time.Time) {
	if !validUsageName(keyID) || strings.Contains(keyID, "/") || !validUsageName(operationID) || !validUsageName(outcome) {
		u.logger.ErrorContext(context.Background(), "usage count dropped: malformed key id, operation or outcome",
			slog.String("keyId", keyID), slog.String("operation", operationID), slog.String("outcome", outcome))
		return
	}
	sec := at.Unix()
	if sec < 0 {
		u.logger.ErrorContext(context.Background(), "usage count dropped: time before 1970", slog.Time("at", at))
		return
	}
	k := usageKey{keyID: keyID, minute: sec / 60, op: operationID, outcome: outcome, tags: canonicalTags(tags)}
	u.mu.Lock()
	switch _, ok := u.pending[k]; {
	case u.closed:
	case ok || len(u.pending) < maxPending:
		u.pending[k]++
	default:
		u.dropped.Add(1)
	}
	u.mu.Unlock()
}

func validUsageName(s string) bool {
	return s != "" && len(s) <= maxUsageName && strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// canonicalTags returns the sorted, comma-joined set of the valid tags,
// at most MaxTags of them.
func canonicalTags(tags []string) string {
	switch len(tags) {
	case 0:
		return ""
	case 1:
		if ValidTag(tags[0]) {
			return tags[0]
		}
		return ""
	}
	var buf [MaxTags]string
	set := buf[:0]
	for _, t := range tags {
		if len(set) == MaxTags {
			break
		}
		if ValidTag(t) && !containsString(set, t) {
			set = append(set, t)
		}
	}
	slices.Sort(set)
	return strings.Join(set, ",")
}

// Flush writes the pending counts to the store now, in one transaction,
// adding them to what the store holds. If the store refuses, the counts
// go back to pending for the next flush and the error is returned. The
// flush goroutine calls it every FlushEvery; tests and shutdown code may
// call it directly.
func (u *Usage) Flush(ctx context.Context) error {
	u.flushMu.Lock()
	defer u.flushMu.Unlock()

	if n := u.dropped.Swap(0); n > 0 {
		u.logger.ErrorContext(ctx, "usage counts dropped: the pending aggregate is full", slog.Int64("dropped", n))
	}
	u.mu.Lock()
	if len(u.pending) == 0 {
		u.mu.Unlock()
		return nil
	}
	batch := u.pending
	u.pending = make(map[usageKey]int64, len(batch))
	u.mu.Unlock()

	type write struct {
		key []byte
		n   uint64
	}
	writes := make([]write, 0, len(batch))
	for k, n := range batch {
		writes = append(writes, write{usageStoreKey(k), uint64(n)})
	}
	// Sorted writes are kinder to an ordered store's batch.
	slices.SortFunc(writes, func(a, b write) int { return bytes.Compare(a.key, b.key) })
	err := u.st.Update(ctx, func(txn store.Txn) error {
		var val [8]byte
		for _, w := range writes {
			old, err := txn.Get(w.key)
			var have uint64
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			case len(old) != 8:
				return fmt.Errorf("usage bucket %q holds %d bytes, want 8", w.key, len(old))
			default:
				have = binary.BigEndian.Uint64(old)
			}
			binary.BigEndian.PutUint64(val[:], have+w.n)
			if err := txn.Set(w.key, val[:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		u.mu.Lock()
		for k, n := range batch {
			if _, ok := u.pending[k]; ok || len(u.pending) < maxPending {
				u.pending[k] += n
			} else {
				u.dropped.Add(n)
			}
		}
		u.mu.Unlock()
		return fmt.Errorf("auth: usage flush of %d buckets: %w", len(batch), err)
	}
	return nil
}

// Close stops the flush goroutine and flushes the pending counts with
// ctx. Counts made after Close are dropped. If ctx ends while a
// background flush is still in the store, that flush is cancelled (its
// counts return to pending and the final flush, which will then also
// fail on ctx, reports it). Close is idempotent; later calls return nil.
func (u *Usage) Close(ctx context.Context) error {
	err := error(nil)
	u.closeOnce.Do(func() {
		u.mu.Lock()
		u.closed = true
		u.mu.Unlock()
		close(u.stop)
		select {
		case <-u.done:
		case <-ctx.Done():
			u.cancel()
			<-u.done
		}
		u.cancel()
		err = u.Flush(ctx)
	})
	return err
}

// Report is a usage report for one agent key (GET /usage).
type Report struct {
	KeyID string `json:"keyId"`
	// Since and Until are the window counted, [Since, Until): the
	// request's bounds rounded up to whole minutes (see [Usage]).
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Total is the number of calls counted.
	Total int64 `json:"total"`
	// ByOperation counts them by operation id.
	ByOperation map[string]int64 `json:"byOperation"`
	// ByOutcome counts them by outcome.
	ByOutcome map[string]int64 `json:"byOutcome"`
	// ByTag counts, for each tag, the counted calls that carried it; a
	// call with two tags adds to both, so ByTag need not sum to Total.
	ByTag map[string]int64 `json:"byTag"`
}

// Report returns keyID's usage in [since, until): since must be before
// until and the window at most MaxUsageWindow (31 days), else the error
// matches [ErrBadWindow]. tags filters with AND semantics: a call counts
// when its tag set holds every filter tag. Filter tags are trimmed of
// white space and repeats are ignored; a filter tag that is not a valid
// tag matches no call, since no call carries one. Counts not yet flushed
// are included, so a Count is visible to the next Report at once. See
// [Usage] for how bounds that are not whole minutes are treated.
func (u *Usage) Report(ctx context.Context, keyID string, since, until time.Time, tags []string) (Report, error) {
	if !since.Before(until) {
		return Report{}, fmt.Errorf("%w: since must be before until", ErrBadWindow)
	}
	if until.Sub(since) > MaxUsageWindow {
		return Report{}, fmt.Errorf("%w: the window is longer than 31 days", ErrBadWindow)
	}
	if !validUsageName(keyID) || strings.Contains(keyID, "/") {
		return Report{}, fmt.Errorf("auth: usage report: malformed key id %.40q", keyID)
	}
	from, to := ceilMinute(since), ceilMinute(until)
	rep := Report{
		KeyID:       keyID,
		Since:       time.Unix(from*60, 0).UTC(),
		Until:       time.Unix(to*60, 0).UTC(),
		ByOperation: map[string]int64{},
		ByOutcome:   map[string]int64{},
		ByTag:       map[string]int64{},
	}
	var filter []string
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if !ValidTag(t) {
			return rep, nil // no call carries an invalid tag
		}
		if !containsString(filter, t) {
			filter = append(filter, t)
		}
	}
	if from >= to {
		return rep, nil
	}
	add := func(op, outcome, tagSet string, n int64) {
		if !tagsContainAll(tagSet, filter) {
			return
		}
		rep.Total += n
		rep.ByOperation[op] += n
		rep.ByOutcome[outcome] += n
		for t := range strings.SplitSeq(tagSet, ",") {
			if t != "" {
				rep.ByTag[t] += n
			}
		}
	}

	u.flushMu.RLock()
	defer u.flushMu.RUnlock()
	kp := usageKeyPrefix(keyID)
	lower := binary.BigEndian.AppendUint64(bytes.Clone(kp), uint64(from))
	upper := binary.BigEndian.AppendUint64(bytes.Clone(kp), uint64(to))
	type bucketCount struct {
		op, outcome, tags string
		n                 int64
	}
	var got []bucketCount
	err := u.st.View(ctx, func(r store.Reader) error {
		got = got[:0] // fn may run more than once
		it := r.Iterate(lower, upper, false)
		defer it.Close()
		for it.Next() {
			op, outcome, tagSet, ok := parseUsageKey(it.Key()[len(kp):])
			if !ok || len(it.Value()) != 8 {
				return fmt.Errorf("malformed usage bucket %q", it.Key())
			}
			got = append(got, bucketCount{op, outcome, tagSet, int64(binary.BigEndian.Uint64(it.Value()))})
		}
		return it.Err()
	})
	if err != nil {
		return Report{}, fmt.Errorf("auth: usage report: %w", err)
	}
	for _, b := range got {
		add(b.op, b.outcome, b.tags, b.n)
	}
	u.mu.Lock()
	for k, n := range u.pending {
		if k.keyID == keyID && from <= k.minute && k.minute < to {
			add(k.op, k.outcome, k.tags, n)
		}
	}
	u.mu.Unlock()
	return rep, nil
}

// ceilMinute returns the unix minute at or after t. Times before 1970
// count as minute 0: nothing is stored before it.
func ceilMinute(t time.Time) int64 {
	sec := t.Unix()
	if sec < 0 {
		return 0
	}
	m := sec / 60
	if sec%60 != 0 || t.Nanosecond() != 0 {
		m++
	}
	return m
}

// tagsContainAll reports whether the comma-joined set holds every tag of
// filter.
func tagsContainAll(set string, filter []string) bool {
	for _, f := range filter {
		found := false
		for t := range strings.SplitSeq(set, ",") {
			if t == f {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

const usagePrefix = "auth/usage/"

func usageKeyPrefix(keyID string) []byte {
	return []byte(usagePrefix + keyID + "/")
}

func usageStoreKey(k usageKey) []byte {
	b := make([]byte, 0, len(usagePrefix)+len(k.keyID)+1+8+1+len(k.op)+1+len(k.outcome)+1+len(k.tags))
	b = append(b, usagePrefix...)
	b = append(b, k.keyID...)
	b = append(b, '/')
	b = binary.BigEndian.AppendUint64(b, uint64(k.minute))
	b = append(b, '/')
	b = append(b, k.op...)
	b = append(b, 0)
	b = append(b, k.outcome...)
	b = append(b, 0)
	return append(b, k.tags...)
}

// parseUsageKey parses what follows "auth/usage/<keyID>/" in a bucket
// key.
func parseUsageKey(rest []byte) (op, outcome, tags string, ok bool) {
	if len(rest) < 9 || rest[8] != '/' {
		return "", "", "", false
	}
	parts := strings.Split(string(rest[9:]), "\x00")
	if len(parts) != 3 {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// SweepUsage deletes the minute buckets older than the retention period
// and returns how many it deleted. Run it now and then (hourly is
// plenty). It works in batches, one transaction each, and stops at the
// first error, returning the count so far. Its cost is proportional to
// the number of key ids plus the buckets deleted: it skips from one key
// id to the next instead of reading every bucket.
func (u *Usage) SweepUsage(ctx context.Context) (int, error) {
	cutoff := u.now().Add(-u.retention).Unix() / 60 // first minute kept
	if cutoff <= 0 {
		return 0, nil
	}
	end := store.PrefixEnd([]byte(usagePrefix))
	pos := []byte(usagePrefix)
	total := 0
	for {
		var n int
		var next []byte
		err := u.st.Update(ctx, func(txn store.Txn) error {
			n, next = 0, nil // fn may run more than once
			cur := pos
			// Bound both the deletes and the key ids visited per
			// transaction, so neither many old buckets nor many
			// idle keys make one huge transaction.
			for visited := 0; visited < sweepBatch; visited++ {
				first, err := firstKey(txn, cur, end)
				if err != nil || first == nil {
					return err
				}
				rest := first[len(usagePrefix):]
				slash := bytes.IndexByte(rest, '/')
				if slash <= 0 {
					cur = append(first, 0) // not a bucket key; step past it
					continue
				}
				kp := first[:len(usagePrefix)+slash+1]
				old := binary.BigEndian.AppendUint64(bytes.Clone(kp), uint64(cutoff))
				var dels [][]byte
				it := txn.Iterate(kp, old, false)
				for len(dels) < sweepBatch-n && it.Next() {
					dels = append(dels, bytes.Clone(it.Key()))
				}
				if err := it.Close(); err != nil {
					return err
				}
				for _, k := range dels {
					if err := txn.Delete(k); err != nil {
						return err
					}
				}
				n += len(dels)
				if n == sweepBatch {
					next = kp // this key id may have more old buckets
					return nil
				}
				cur = store.PrefixEnd(kp)
			}
			next = cur
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("auth: usage sweep: %w", err)
		}
		total += n
		if next == nil {
			return total, nil
		}
		pos = next
	}
}

// firstKey returns a copy of the first key in [lower, upper), or nil.
func firstKey(r store.Reader, lower, upper []byte) ([]byte, error) {
	it := r.Iterate(lower, upper, false)
	var k []byte
	if it.Next() {
		k = bytes.Clone(it.Key())
	}
	return k, it.Close()
}
