// Package pebblestore is the durable [store.Store], built on Pebble
// (github.com/cockroachdb/pebble/v2), the LSM engine of CockroachDB.
//
//	st, err := pebblestore.Open("/var/lib/countersign", nil)
//	if err != nil { ... }
//	defer st.Close()
//
// # Group commit
//
// Every Update must be on stable storage before it returns, and one fsync
// costs hundreds of microseconds. One fsync per transaction would cap the
// store at a few thousand commits a second however many callers there are,
// so concurrent transactions share fsyncs.
//
// A single committer goroutine owns all writing. Update queues its
// transaction and waits. The committer takes queued transactions in arrival
// order and runs each function in turn against a group-wide view: the
// database plus the writes of the transactions before it in the same group
// (a Pebble indexed batch). A transaction's own writes go to a private
// overlay first and are folded into the group only if its function returns
// nil, so a failing function leaves no trace for the ones after it.
//
// Groups are pipelined, one in flight: when the queue is empty (or the
// group holds [Options.MaxGroup] transactions) and no fsync is running, the
// committer runs the group's commit hooks ([store.Committer]), applies its
// batch to Pebble's write-ahead log and memtable, and hands it to a
// goroutine that waits for the fsync (pebble.Sync), publishes the new
// snapshot and answers the group's callers. Meanwhile the committer keeps
// running the functions of new arrivals into the next group, which sees the
// group in flight already applied; that next group is applied only once the
// fsync has completed. So the functions' CPU time overlaps the disk's, and
// a group still holds everything that arrived during one fsync (groups do
// not shrink, as they would with several fsyncs in flight).
//
// Transactions are therefore serializable (they run one at a time, each
// seeing all earlier ones), and a group costs one fsync however many
// transactions it holds. The functions run on the committer goroutine, so
// they must not block on other Updates; a function that panics has its
// transaction dropped and the panic re-raised in its caller.
//
// A crash before a group's fsync completes loses the whole group and every
// group after it, and no caller in them was told it had committed (except
// [Store.UpdateDeferred] callers, who accepted exactly that).
//
// # Reads
//
// View reads a Pebble snapshot taken by the committer right after a group's
// fsync succeeded. Pebble makes a batch visible to readers before its WAL
// fsync completes; reading from that published snapshot instead of the live
// database means no View ever sees data that a crash could still take away.
// A caller that sees Update return nil and then calls View sees its write.
//
// # Failure
//
// If committing a group fails (typically a failed fsync), every transaction
// of that group gets an error and the store fails: every later Update
// returns an error matching [ErrFailed] and wrapping the original cause.
// This is deliberate. After a failed fsync the kernel may have dropped the
// dirty pages, the data may be partly on disk, and retrying the fsync can
// report success for data that was lost; nothing written after that point
// could be trusted, so the store stops writing rather than guess. Views keep
// serving the last data known to be durable. Close the store, and reopen it
// once the disk is healthy: recovery replays exactly what reached the log.
package pebblestore

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
)

// ErrFailed marks the errors of a store that stopped writing after a failed
// commit; see the package documentation. Check for it with errors.Is; the
// error also wraps the original cause.
// It wraps the driver-neutral store.ErrFailed.
var ErrFailed = fmt.Errorf("pebblestore: %w", store.ErrFailed)

// DefaultMaxGroup is the [Options.MaxGroup] used when it is zero.
const DefaultMaxGroup = 256

// Options configures [Open]. The zero value gives the defaults.
type Options struct {
	// FS is the file system the database lives in. The default (nil) is
	// vfs.Default, the operating system's. Tests use vfs.NewMem() or wrap
	// a file system with vfs/errorfs to inject faults.
	FS vfs.FS

	// Logger receives Pebble's log messages and the store's own. The
	// default (nil) is slog.Default(). See the note on fatal errors at
	// [Open].
	Logger *slog.Logger

	// MaxGroup is the most transactions committed by one fsync. Larger
	// groups amortise the fsync further but make a group's members wait for
	// more functions to run before their commit. It also sizes the queue of
	// waiting transactions: callers beyond it block in Update (backpressure)
	// until the committer catches up. The default (0) is DefaultMaxGroup.
	MaxGroup int

	// CacheSize is the size in bytes of Pebble's block cache. The default
	// (0) is DefaultCacheSize.
	CacheSize int64

	// CompactionRate is how many bytes per second Pebble's compactions may
	// write while the store keeps up with them (pace.go). The default (0)
	// is DefaultCompactionRate; a negative rate leaves them unpaced.
	CompactionRate int

	// FlushRate is how many bytes per second a memtable flush may write
	// while the store keeps up with its flushes (pace.go). The default (0)
	// is DefaultFlushRate; a negative rate leaves them unpaced.
	FlushRate int

	// OnCommit, if set, is called by the committer after every group
	// commit that wrote something, with what it cost; metrics hang here.
	// It runs on the committer goroutine between groups, so it must be
	// cheap and must not call back into the store.
	OnCommit func(CommitInfo)
}

// CommitInfo describes one group commit, for [Options.OnCommit].
type CommitInfo struct {
	// Txns is the number of transactions the group made durable.
	Txns int
	// Sync is how long writing and syncing the group's batch took.
	Sync time.Duration
	// Err is the commit's error; after one the store has failed.
	Err error
}

// DefaultCacheSize is the [Options.CacheSize] used when it is zero. The
// domain packages read a handful of small keys in every transaction
// (idempotency records, counters, the record's head and tree edge); a
// cache that holds the hot blocks keeps those reads off the disk.
const DefaultCacheSize = 64 << 20

// Stats counts the committer's work since Open.
type Stats struct {
	// Txns is the number of transactions committed (functions that returned
	// nil and were made durable), read-only ones included.
	Txns uint64
	// Groups is the number of group commits that wrote something: one fsync
	// each.
	Groups uint64
	// Holds is the number of groups the committer held back to gather the
	// callers of the group before them; FailedHolds, those of them that
	// gathered less than half of the callers missing (see the committer).
	Holds, FailedHolds uint64
}

// Store is a durable [store.Store] on Pebble. It is safe for concurrent use
// by multiple goroutines.
type Store struct {
	db       *pebble.DB
	logger   *slog.Logger
	maxGroup int
	onCommit func(CommitInfo)
	// maxGather and gatherGap bound how long the committer holds a group
	// back to gather the callers of the group before it (see committer).
	maxGather, gatherGap time.Duration
	// maxDeferredHold bounds how long a group of deferred transactions
	// only is held back (committer.go); tests change it.
	maxDeferredHold time.Duration

	// reqs carries queued transactions to the committer, in arrival order.
	reqs chan *request
	// stop tells the committer to exit; closed by Close once no Update is
	// in flight, so the queue is empty by then.
	stop          chan struct{}
	committerDone chan struct{}

	// mu guards closed against the inflight.Add in enter, so that Close's
	// inflight.Wait never races with a new caller.
	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup

	// failed holds the error that failed the store, if any.
	failed atomic.Pointer[error]

	// snapMu guards snap, the snapshot Views read: the state as of the last
	// durable group.
	snapMu sync.Mutex
	snap   *sharedSnapshot
	// views caches what Views read, for the published snapshot and later
	// ones (viewcache.go).
	views viewCache

	// fs and dir locate the store's files, for Shred; exclusive carries
	// jobs the committer runs between groups, while no transaction commits.
	fs        vfs.FS
	dir       string
	exclusive chan *exclusiveJob

	txns, groups atomic.Uint64
	// gatherHolds counts the groups held back to gather (see committer),
	// gatherFailed those of them that ended before their group was as
	// large as the one answered before it.
	gatherHolds, gatherFailed atomic.Uint64

	// pace paces compactions and flushes (pace.go); nil if both run
	// unpaced.
	pace *pacer

	// cache is the committer's read cache (cache.go); only the committer
	// goroutine touches it.
	cache readCache

	// testHookQueued, if set (by tests in this package), is called after a
	// transaction is queued.
	testHookQueued func()
}

var _ store.Store = (*Store)(nil)

// Open opens the store in dir, creating it if it does not exist, and starts
// its committer goroutine. Close releases both.
//
// Pebble reports conditions it cannot continue from (such as a failed WAL
// write during commit) through its logger's Fatalf, and its own default
// logger exits the process. This store's adapter logs the message at Error
// and panics instead: in the committer that panic is caught and fails the
// store (see the package documentation); in Pebble's background goroutines
// it ends the process, as Pebble intends.
func Open(dir string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxGroup == 0 {
		o.MaxGroup = DefaultMaxGroup
	}
	if o.MaxGroup < 0 {
		return nil, fmt.Errorf("pebblestore: open: MaxGroup %d is negative", o.MaxGroup)
	}

	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	if o.CompactionRate == 0 {
		o.CompactionRate = DefaultCompactionRate
	}
	if o.FlushRate == 0 {
		o.FlushRate = DefaultFlushRate
	}
	pebbleFS := o.FS
	pace := newPacer(o.CompactionRate, o.FlushRate)
	var events *pebble.EventListener
	if pace != nil {
		pebbleFS = pace.fs(o.FS)
		events = pace.events()
	}
	po := &pebble.Options{
		FS:            pebbleFS,
		Logger:        pebbleLogger{o.Logger},
		Cache:         cache,
		EventListener: events,
	}
	// Most reads are point lookups of keys that often do not exist yet (a
	// new idempotency key, a mandate never revoked). Without a filter each
	// such miss reads an index and a data block of every overlapping table;
	// a 10-bit Bloom filter answers most of them from memory.
	po.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Compaction, not the log, is the write cost of this store's workload.
	// Every commit writes near the tail of several time-ordered ranges
	// (record entries, intents, the rail's ledger) and into one range keyed
	// by client-chosen idempotency keys, so every L0 table spans nearly the
	// whole key space and each L0→Lbase compaction rewrites nearly all of
	// Lbase. With Pebble's defaults (compact L0 at 4 sublevels, 4 MiB
	// memtables) that happened every few flushes and was 24 % of a loaded
	// server's CPU: 40,000 payments wrote 236 MB to the log and 936 MB more
	// in compactions. Letting L0 gather 16 sublevels of 8 MiB flushes before
	// compacting rewrites Lbase a quarter as often for the same data (write
	// amplification 5.5 → 2.2 over 120,000 payments; docs/PERFORMANCE.md).
	// Reads pay little for the deeper L0: point lookups are answered by the
	// Bloom filters above and by the committer's read cache (cache.go).
	// Writes stop only at 64 sublevels, four times the trigger, rather than
	// at Pebble's default of 12, which would sit too close to it. Memtables
	// larger than 8 MiB were slower on the machines measured: a 32 MiB flush
	// stalls the log's fsync behind the flush's own writes.
	po.L0CompactionThreshold = l0CompactionThreshold
	po.L0StopWritesThreshold = l0StopWritesThreshold
	po.MemTableSize = 8 << 20
	po.MemTableStopWritesThreshold = memTableStopWrites
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s := &Store{
		db:              db,
		fs:              o.FS,
		dir:             dir,
		exclusive:       make(chan *exclusiveJob),
		logger:          o.Logger,
		maxGroup:        o.MaxGroup,
		maxGather:       maxGather,
		gatherGap:       gatherGap,
		maxDeferredHold: maxDeferredHold,
		onCommit:        o.OnCommit,
		reqs:            make(chan *request, o.MaxGroup),
		stop:            make(chan struct{}),
		committerDone:   make(chan struct{}),
		snap:            newSharedSnapshot(db, 0),
		pace:            pace,
	}
	go s.committer()
	if pace != nil {
		go pace.watch(db)
	}
	return s, nil
}

// enter registers a View or Update in flight, or reports that the store is
// closed.
func (s *Store) enter() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// View runs fn against the state as of the last durable commit.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.enter() {
		return fmt.Errorf("pebblestore: view: %w", store.ErrClosed)
	}
	defer s.inflight.Done()

	s.snapMu.Lock()
	snap := s.snap
	snap.refs.Add(1)
	s.snapMu.Unlock()
	defer snap.release()

	r := &reader{snap: snap.s, cache: viewAt{&s.views, snap.version}}
	defer r.finish()
	return fn(r)
}

var _ store.Deferrer = (*Store)(nil)

// UpdateDeferred implements [store.Deferrer]: the transaction is group
// committed like any other, and its caller is answered as soon as its
// function has run into the group's batch, before the group is applied and
// synced. Every transaction that runs after it sees its writes and is
// committed in the same group or a later one; Pebble's write-ahead log is
// one ordered file, so any later group's fsync covers it too; and a group
// that cannot commit fails the store, so that nothing after it commits
// either.
func (s *Store) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	return s.update(ctx, fn, true)
}

// Update runs fn in a serializable transaction, group-committed with
// concurrent ones; see the package documentation. fn runs at most once.
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.update(ctx, fn, false)
}

func (s *Store) update(ctx context.Context, fn func(store.Txn) error, deferred bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.enter() {
		return fmt.Errorf("pebblestore: update: %w", store.ErrClosed)
	}
	defer s.inflight.Done()
	if err := s.failure(); err != nil {
		return err
	}

	req := &request{ctx: ctx, fn: fn, deferred: deferred, done: make(chan struct{})}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	if h := s.testHookQueued; h != nil {
		h()
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		// Still queued: withdraw and leave at once. Otherwise the committer
		// has taken the transaction and its outcome is on the way.
		if req.state.CompareAndSwap(stateQueued, stateWithdrawn) {
			return ctx.Err()
		}
		<-req.done
	}
	if req.panicked {
		panic(req.panicVal)
	}
	return req.err
}

// failure returns the error of a failed store, or nil.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fail records err as the store's failure (the first one wins) and returns
// the error callers see.
func (s *Store) fail(cause error) error {
	err := fmt.Errorf("%w: %w", ErrFailed, cause)
	if s.failed.CompareAndSwap(nil, &err) {
		s.logger.LogAttrs(context.Background(), slog.LevelError, "pebblestore: commit failed; refusing further writes",
			slog.String("error", cause.Error()))
	}
	return s.failure()
}

// Stats returns counts of the committer's work since Open.
func (s *Store) Stats() Stats {
	return Stats{
		Txns:        s.txns.Load(),
		Groups:      s.groups.Load(),
		Holds:       s.gatherHolds.Load(),
		FailedHolds: s.gatherFailed.Load(),
	}
}

// Close stops accepting transactions, waits for the Views and Updates in
// flight (queued transactions are committed), stops the committer and
// closes the database. The first call returns the result of closing the
// database; later calls return an error matching store.ErrClosed.
func (s *Store) Close() (err error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("pebblestore: close: %w", store.ErrClosed)
	}
	s.closed = true
	s.mu.Unlock()

	s.inflight.Wait()
	close(s.stop)
	<-s.committerDone
	s.snapMu.Lock()
	s.snap.release()
	s.snap = nil
	s.snapMu.Unlock()
	if s.pace != nil {
		s.pace.close()
	}

	// Pebble may report a database that failed mid-commit through Fatalf,
	// which panics here; Close must still return.
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pebblestore: close: %v", p)
		}
	}()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	return nil
}

// sharedSnapshot is a reference-counted Pebble snapshot: the committer
// holds one reference while it is current, and each View one while it
// reads.
type sharedSnapshot struct {
	s    *pebble.Snapshot
	refs atomic.Int32
	// version counts the snapshots published before this one (viewCache).
	version uint64
}

func newSharedSnapshot(db *pebble.DB, version uint64) *sharedSnapshot {
	ss := &sharedSnapshot{s: db.NewSnapshot(), version: version}
	ss.refs.Store(1)
	return ss
}

func (ss *sharedSnapshot) release() {
	if ss.refs.Add(-1) == 0 {
		_ = ss.s.Close() // a snapshot's Close only fails if already closed
	}
}
