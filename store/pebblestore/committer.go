package pebblestore

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/internal/commithook"
	"github.com/countersign/countersign/store/internal/ordered"
)

// A request moves from queued to taken (by the committer) or withdrawn (by
// its caller, whose ctx ended while it was queued). Whoever wins the
// compare-and-swap decides: a withdrawn request is skipped, a taken one is
// always answered.
const (
	stateQueued int32 = iota
	stateTaken
	stateWithdrawn
)

// request is one queued Update.
type request struct {
	ctx   context.Context
	fn    func(store.Txn) error
	state atomic.Int32
	// deferred asks for an answer once the group is applied, before its
	// fsync completes (UpdateDeferred).
	deferred bool
	answered bool // by the committer only

	// Set by the committer before it closes done.
	err      error
	panicked bool
	panicVal any
	done     chan struct{}
}

// answer tells r's caller its outcome, once: a deferred member answered
// before its group's fsync is not answered again if that fsync fails.
// Only the goroutine that owns r's group calls it.
func (r *request) answer(err error) {
	if r.answered {
		return
	}
	r.answered = true
	r.err = err
	close(r.done)
}

// group is the transactions committed by one batch and one fsync.
type group struct {
	batch   *pebble.Batch
	members []*request // transactions whose function succeeded
	hooks   commithook.List
	taken   int // requests taken, successful or not, for MaxGroup
	// written is every key the group's batch writes, for the Views'
	// cache (viewCache.publish). It is kept apart from the batch because
	// Pebble may release a large batch's contents once applied.
	written [][]byte
	// deferred is set once a member was answered before the group
	// committed (UpdateDeferred), at deferredAt.
	deferred   bool
	deferredAt time.Time
	// waiting counts the members still to be answered: those not
	// deferred. A group none of whose members waits is held back (see
	// committer).
	waiting int
	// synced is how long the group took from its apply to the end of its
	// fsync; set before its members are answered, zero if it failed.
	synced time.Duration
}

// committer is the single writer; see the package documentation.
//
// It is a two-stage pipeline with at most one group in flight. While group
// k's fsync runs (on a goroutine of its own, see apply), the committer keeps
// running the functions of the transactions that arrive into group k+1's
// batch, which reads the database with group k already applied. Group k+1
// is applied only once k's fsync has completed, so it holds everything that
// arrived meanwhile (groups do not shrink), nobody is answered about data
// that is not durable yet, and the functions' CPU time overlaps the disk's
// instead of adding to it.
//
// Under steady concurrency that pipeline alone splits the callers into two
// cohorts that take turns: when k's fsync completes, k+1 holds only the
// callers that arrived during it, and k's members, just answered, come back
// for k+2. Each fsync then carries about half of the callers. So once a
// group of gatherMin or more is answered, the next one is held back while
// that cohort rejoins (gather): until it is as large as the group answered,
// or no transaction has arrived for gatherGap, or the hold has lasted as
// long as the fsync it saves (at most maxGather). A cohort of callers in a
// loop comes back within microseconds of each other; callers that do not
// come back (a request answered over HTTP goes off to write its response)
// leave a gap, and the hold ends at once. The committer waits for the gap
// by yielding its thread rather than on a timer, whose resolution on an
// idle machine can be a millisecond. A hold that ends before even half of
// the missing callers arrived was not worth its wait: the callers were not
// a cohort in a loop (requests answered over HTTP go off to write their
// responses, and new ones arrive at their own pace), so the next chances
// to hold are let pass: one after a failure, twice as many after each
// further failure in a row, up to gatherBackoff. Below gatherMin nothing is
// held, so a lone or sequential caller's latency is unchanged. With 64 concurrent
// appenders this took the record from 34 to about 58 entries per fsync
// (docs/PERFORMANCE.md).
func (s *Store) committer() {
	defer close(s.committerDone)
	var cur *group
	var inflight chan struct{} // closed when the group in flight is answered
	var flying *group          // the group in flight
	var hold gatherHold
	skip := 0       // chances to hold still to let pass after a hold that failed
	failStreak := 0 // holds failed in a row
	deferTimer := time.NewTimer(time.Hour)
	deferTimer.Stop()
	for {
		var deferDue <-chan time.Time // set while a deferred-only group is held
		ready := cur != nil && inflight == nil && (cur.taken >= s.maxGroup || len(s.reqs) == 0)
		if ready {
			if left := s.deferredHold(cur); left > 0 {
				// Go 1.23 timers: Reset discards a value left unread.
				deferTimer.Reset(left)
				deferDue = deferTimer.C
				ready = false
			}
		}
		if ready {
			if hold.on && cur.taken < hold.want {
				if hold.base < 0 {
					hold.base = cur.taken
				}
				if s.gatherMore(cur, &hold) {
					continue
				}
				if 2*(cur.taken-hold.base) < hold.want-hold.base {
					// Not even half of the missing callers came back.
					skip = min(1<<failStreak, gatherBackoff)
					failStreak = min(failStreak+1, 16)
					s.gatherFailed.Add(1)
				} else {
					failStreak = 0
				}
			}
			hold.on = false
			inflight, flying = s.apply(cur), cur
			cur = nil
			continue
		}
		reqs := s.reqs
		if cur != nil && cur.taken >= s.maxGroup {
			reqs = nil // full: wait for the fsync in flight
		}
		var exclusive chan *exclusiveJob
		var stop chan struct{}
		if cur == nil && inflight == nil {
			exclusive, stop = s.exclusive, s.stop
		}
		select {
		case req := <-reqs:
			if cur == nil {
				cur = &group{batch: s.db.NewIndexedBatch()}
			}
			s.runMember(cur, req)
			if hold.on {
				hold.last = time.Now()
			}
		case <-inflight:
			inflight = nil
			if n := len(flying.members); n >= gatherMin && flying.synced > 0 && skip > 0 {
				skip--
			} else if n >= gatherMin && flying.synced > 0 {
				s.gatherHolds.Add(1)
				now := time.Now()
				hold = gatherHold{on: true, want: n, base: -1, last: now, until: now.Add(min(flying.synced, s.maxGather))}
			}
			flying = nil
		case job := <-exclusive:
			job.err = job.fn()
			close(job.done)
		case <-stop:
			return
		case <-deferDue:
			// The hold is over: the next turn applies the group.
		}
	}
}

// deferredHold reports how much longer g may be held back because none of
// its members waits for it: every one was deferred (UpdateDeferred) and
// answered already. Such a group is not applied when the committer could,
// but when a transaction that waits joins it (the outcome that follows a
// payment's deferred decision, or an empty Update used as a barrier), when
// it is full, or after maxDeferredHold. Applied at once, it would cost an
// fsync and a commit's hooks of its own, and the transaction that follows
// would wait for that fsync before its own: at low load a payment would
// make two fsyncs in a row where one makes both durable. Its writes are
// already visible to every later transaction, which runs into the same
// batch, and can be lost only together with every commit after them,
// which is all UpdateDeferred promises. It returns 0 when g is to be
// applied now.
func (s *Store) deferredHold(g *group) time.Duration {
	if !g.deferred || g.waiting > 0 || g.taken >= s.maxGroup {
		return 0
	}
	return max(0, s.maxDeferredHold-time.Since(g.deferredAt))
}

// gatherHold is the committer's hold on the next group (see committer).
type gatherHold struct {
	on    bool
	want  int       // release once the group has this many
	base  int       // how many the group had when the hold began; -1 before
	last  time.Time // when the hold began or a transaction last arrived
	until time.Time // release by then whatever happens
}

// gatherMore takes one more transaction into cur while the hold lasts,
// yielding the thread until one arrives. It reports false once the hold
// is over: the gap since the last arrival or the hold's deadline passed.
func (s *Store) gatherMore(cur *group, hold *gatherHold) bool {
	for {
		select {
		case req := <-s.reqs:
			s.runMember(cur, req)
			hold.last = time.Now()
			return true
		default:
		}
		now := time.Now()
		if now.Sub(hold.last) >= s.gatherGap || !now.Before(hold.until) {
			return false
		}
		runtime.Gosched()
	}
}

const (
	// gatherMin is the smallest answered group after which the committer
	// holds the next one back to gather (see committer): below it the
	// callers are too few for the two cohorts to matter.
	gatherMin = 8
	// gatherGap is how long a hold lasts with no transaction arriving
	// (Store.gatherGap, which tests lengthen).
	gatherGap = 50 * time.Microsecond
	// maxGather bounds how long a group is held back (Store.maxGather).
	maxGather = time.Millisecond
	// gatherBackoff is the most chances to hold let pass after holds that
	// did not gather their group.
	gatherBackoff = 64
	// maxDeferredHold bounds how long a group whose members were all
	// deferred is held back for a transaction that waits
	// (Store.maxDeferredHold; see deferredHold).
	maxDeferredHold = 2 * time.Millisecond
)

// runMember runs r's function into g, unless the store has failed.
func (s *Store) runMember(g *group, r *request) {
	g.taken++
	s.take(r, func(r *request) {
		if err := s.failure(); err != nil {
			r.answer(err) // nothing more is written once the store has failed
			return
		}
		if err := s.runTxn(r, g); err != nil || r.panicked {
			// Its writes never reached the batch; answer now.
			r.answer(err)
			return
		}
		g.members = append(g.members, r)
		if r.deferred {
			// Its writes are in the batch, ahead of every transaction
			// that runs after it: the store's log will order them first,
			// and a group that cannot commit fails the store (apply), so
			// they can be lost only together with everything after.
			if !g.deferred {
				g.deferred, g.deferredAt = true, time.Now()
			}
			r.answer(nil)
			return
		}
		g.waiting++
	})
}

// apply runs g's commit hooks (store.Committer), applies its batch to
// Pebble's log and memtable, answers its deferred members, and starts a
// goroutine that waits for the batch's fsync, publishes the new snapshot
// and answers the rest. It returns a channel closed when that goroutine is
// done, or nil when nothing needed a sync. The committer calls it only
// when no group is in flight.
func (s *Store) apply(g *group) chan struct{} {
	fail := func(err error) chan struct{} {
		if err != nil {
			// The group's writes are discarded: the cache may hold them.
			s.cache.reset()
		}
		closeBatch(g.batch)
		for _, r := range g.members {
			r.answer(err)
		}
		return nil
	}
	if err := s.failure(); err != nil {
		// The fsync of the group before failed after these functions ran
		// over its writes: none of them may commit.
		return fail(err)
	}
	if g.hooks.Len() > 0 {
		if err := s.runHooks(g); err != nil {
			// The hooks' writes cover the whole group (a checkpoint over
			// its entries): without them nothing of it may commit. A
			// deferred member was told its writes would commit unless
			// everything after them is lost: keep that promise by failing
			// the store.
			if g.deferred {
				err = s.fail(fmt.Errorf("pebblestore: a commit hook failed after a deferred transaction was answered: %w", err))
			}
			return fail(err)
		}
	}
	if g.batch.Empty() {
		// Only read-only transactions: nothing to sync, and what they
		// read is durable, since no group is in flight.
		s.txns.Add(uint64(len(g.members)))
		return fail(nil)
	}
	start := time.Now()
	if err := s.applyNoSyncWait(g.batch); err != nil {
		s.observe(g, start, err)
		return fail(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := s.syncWait(g.batch)
		s.observe(g, start, err)
		if err == nil {
			g.synced = time.Since(start)
			s.groups.Add(1)
			s.txns.Add(uint64(len(g.members)))
			s.publishSnapshot(g.written)
		}
		closeBatch(g.batch)
		for _, r := range g.members {
			r.answer(err)
		}
	}()
	return done
}

func (s *Store) observe(g *group, start time.Time, err error) {
	if s.onCommit != nil {
		s.onCommit(CommitInfo{Txns: len(g.members), Sync: time.Since(start), Err: err})
	}
}

// applyNoSyncWait applies batch to the log and memtable without waiting
// for its fsync. An error fails the store and is returned wrapped in
// ErrFailed.
func (s *Store) applyNoSyncWait(batch *pebble.Batch) (err error) {
	defer func() {
		// Pebble reports a failed WAL write through Logger.Fatalf, which
		// our adapter turns into a panic (see Open). The panic value is
		// Pebble's message, so %v rather than %w.
		if p := recover(); p != nil {
			err = s.fail(fmt.Errorf("pebblestore: commit: %v", p))
		}
	}()
	if err := s.db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		return s.fail(fmt.Errorf("pebblestore: commit: %w", err))
	}
	return nil
}

// syncWait waits for batch's fsync. An error fails the store.
func (s *Store) syncWait(batch *pebble.Batch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = s.fail(fmt.Errorf("pebblestore: commit: %v", p))
		}
	}()
	if err := batch.SyncWait(); err != nil {
		return s.fail(fmt.Errorf("pebblestore: commit: %w", err))
	}
	return nil
}

// runHooks runs the group's commit hooks in one more transaction over
// batch and folds its writes in. A panic in a hook fails the group like an
// error.
func (s *Store) runHooks(g *group) (err error) {
	tx := &txn{reader: reader{batch: g.batch, cache: &s.cache}, noHooks: true}
	defer func() {
		tx.finish()
		if p := recover(); p != nil {
			err = fmt.Errorf("pebblestore: commit hook panicked: %v", p)
		}
	}()
	if err := g.hooks.Run(tx); err != nil {
		return err
	}
	s.fold(tx, g)
	return nil
}

// take claims r for the committer and passes it to do, unless its caller
// withdrew it or its ctx has ended (then it is answered with ctx.Err()).
func (s *Store) take(r *request, do func(*request)) {
	if !r.state.CompareAndSwap(stateQueued, stateTaken) {
		return // withdrawn: the caller has already returned
	}
	if err := r.ctx.Err(); err != nil {
		r.answer(err)
		return
	}
	do(r)
}

// runTxn runs r's function in a transaction over batch and, if it returns
// nil and r's ctx is still live, folds its writes into batch. A panic in the
// function is recorded in r for its caller to re-raise.
func (s *Store) runTxn(r *request, g *group) (err error) {
	tx := &txn{reader: reader{batch: g.batch, cache: &s.cache}}
	defer func() {
		tx.finish()
		if p := recover(); p != nil {
			r.panicked, r.panicVal = true, p
			err = nil
		}
	}()
	if err := r.fn(tx); err != nil {
		return err
	}
	// The commit has not begun: a ctx that ended while fn ran still aborts.
	if err := r.ctx.Err(); err != nil {
		return err
	}
	s.fold(tx, g)
	g.hooks.Merge(&tx.hooks)
	return nil
}

// fold writes tx's pending writes into g's batch, and into the read cache,
// and notes their keys in g.written for the Views' cache.
func (s *Store) fold(tx *txn, g *group) {
	var ferr error
	tx.pending.Ascend(func(e ordered.Entry) {
		if ferr != nil {
			return
		}
		s.cache.set(e.Key, e.Value, e.Tombstone)
		// e.Key is the transaction's own copy, which nothing changes.
		g.written = append(g.written, e.Key)
		if e.Tombstone {
			ferr = g.batch.Delete(e.Key, nil)
		} else {
			ferr = g.batch.Set(e.Key, e.Value, nil)
		}
	})
	if ferr != nil {
		// A half-folded transaction would poison the whole group.
		panic(fmt.Sprintf("pebblestore: writing to an in-memory batch failed: %v", ferr))
	}
}

// closeBatch releases batch; after a failed commit Pebble may refuse, and
// the batch is then left to the garbage collector.
func closeBatch(batch *pebble.Batch) {
	defer func() { _ = recover() }()
	_ = batch.Close()
}

// publishSnapshot makes the state as of the group just made durable, which
// wrote the keys written, the one Views read. Only the goroutine of the
// group in flight calls it, after the group's successful sync and before
// the committer applies the next group, so the snapshot never holds data
// that is not yet durable.
func (s *Store) publishSnapshot(written [][]byte) {
	s.snapMu.Lock()
	old := s.snap
	next := newSharedSnapshot(s.db, old.version+1)
	// Before any View can take next: the cache forgets the group's keys.
	s.views.publish(written, next.version)
	s.snap = next
	s.snapMu.Unlock()
	old.release()
}

// exclusiveJob is work the committer runs between two groups, with no group
// in flight, so that no transaction commits while it runs.
type exclusiveJob struct {
	fn   func() error
	err  error
	done chan struct{}
}
