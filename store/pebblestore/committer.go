package pebblestore

import (
	"context"
	"fmt"
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
// Only the committer calls it.
func (r *request) answer(err error) {
	if r.answered {
		return
	}
	r.answered = true
	r.err = err
	close(r.done)
}

// committer is the single writer; see the package documentation.
func (s *Store) committer() {
	defer close(s.committerDone)
	for {
		select {
		case req := <-s.reqs:
			s.commitGroup(req)
		case job := <-s.exclusive:
			job.err = job.fn()
			close(job.done)
		case <-s.stop:
			return
		}
	}
}

// exclusiveJob is work the committer runs between two groups, so that no
// transaction commits while it runs.
type exclusiveJob struct {
	fn   func() error
	err  error
	done chan struct{}
}

// commitGroup runs first and whatever else is queued, up to maxGroup
// transactions, against one batch, runs the hooks they registered
// (store.Committer), and commits them together.
func (s *Store) commitGroup(first *request) {
	if err := s.failure(); err != nil {
		// Drain: nothing more is written once the store has failed.
		s.take(first, func(r *request) { r.answer(err) })
		return
	}

	batch := s.db.NewIndexedBatch()
	var members []*request // transactions whose function succeeded
	var hooks commithook.List
	run := func(r *request) {
		if err := s.runTxn(r, batch, &hooks); err != nil || r.panicked {
			// Its writes never reached the batch; answer now.
			r.answer(err)
			return
		}
		members = append(members, r)
	}
	s.take(first, run)
	// Keep taking what arrived while earlier functions ran: the longer the
	// fsync before this group took, the more is waiting now.
collect:
	for n := 1; n < s.maxGroup; n++ {
		select {
		case r := <-s.reqs:
			s.take(r, run)
		default:
			break collect
		}
	}
	if hooks.Len() > 0 {
		if err := s.runHooks(batch, &hooks); err != nil {
			// The hooks' writes cover the whole group (a checkpoint over
			// its entries): without them nothing of it may commit.
			closeBatch(batch)
			for _, r := range members {
				r.answer(err)
			}
			return
		}
	}

	wrote := !batch.Empty()
	start := time.Now()
	err := s.commitBatch(batch, members)
	if wrote && s.onCommit != nil {
		s.onCommit(CommitInfo{Txns: len(members), Sync: time.Since(start), Err: err})
	}
	if err == nil {
		if wrote {
			s.groups.Add(1)
			s.publishSnapshot()
		}
		s.txns.Add(uint64(len(members)))
	}
	for _, r := range members {
		r.answer(err)
	}
}

// runHooks runs the group's commit hooks in one more transaction over
// batch and folds its writes in. A panic in a hook fails the group like an
// error.
func (s *Store) runHooks(batch *pebble.Batch, hooks *commithook.List) (err error) {
	tx := &txn{reader: reader{batch: batch}, noHooks: true}
	defer func() {
		tx.finish()
		if p := recover(); p != nil {
			err = fmt.Errorf("pebblestore: commit hook panicked: %v", p)
		}
	}()
	if err := hooks.Run(tx); err != nil {
		return err
	}
	fold(tx, batch)
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
func (s *Store) runTxn(r *request, batch *pebble.Batch, hooks *commithook.List) (err error) {
	tx := &txn{reader: reader{batch: batch}}
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
	fold(tx, batch)
	hooks.Merge(&tx.hooks)
	return nil
}

// fold writes tx's pending writes into batch.
func fold(tx *txn, batch *pebble.Batch) {
	var ferr error
	tx.pending.Ascend(func(e ordered.Entry) {
		if ferr != nil {
			return
		}
		if e.Tombstone {
			ferr = batch.Delete(e.Key, nil)
		} else {
			ferr = batch.Set(e.Key, e.Value, nil)
		}
	})
	if ferr != nil {
		// A half-folded transaction would poison the whole group.
		panic(fmt.Sprintf("pebblestore: writing to an in-memory batch failed: %v", ferr))
	}
}

// commitBatch makes batch durable and releases it. Deferred members are
// answered as soon as the batch is applied, before its fsync completes
// (see store.Deferrer). An error fails the store and is returned wrapped in
// ErrFailed.
func (s *Store) commitBatch(batch *pebble.Batch, members []*request) (err error) {
	defer func() {
		// Pebble reports a failed WAL write or sync through Logger.Fatalf,
		// which our adapter turns into a panic (see Open). The panic value
		// is Pebble's message, so %v rather than %w.
		if p := recover(); p != nil {
			err = s.fail(fmt.Errorf("pebblestore: commit: %v", p))
		}
		closeBatch(batch)
	}()
	if batch.Empty() {
		return nil // only read-only or failed transactions: nothing to sync
	}
	deferred := false
	for _, r := range members {
		deferred = deferred || r.deferred
	}
	if !deferred {
		if err := s.db.Apply(batch, pebble.Sync); err != nil {
			return s.fail(fmt.Errorf("pebblestore: commit: %w", err))
		}
		return nil
	}
	if err := s.db.ApplyNoSyncWait(batch, pebble.Sync); err != nil {
		return s.fail(fmt.Errorf("pebblestore: commit: %w", err))
	}
	// Applied: every later group is ordered after it in the WAL, so a
	// deferred member's writes can be lost only with everything after.
	for _, r := range members {
		if r.deferred {
			r.answer(nil)
		}
	}
	if err := batch.SyncWait(); err != nil {
		return s.fail(fmt.Errorf("pebblestore: commit: %w", err))
	}
	return nil
}

// closeBatch releases batch; after a failed commit Pebble may refuse, and
// the batch is then left to the garbage collector.
func closeBatch(batch *pebble.Batch) {
	defer func() { _ = recover() }()
	_ = batch.Close()
}

// publishSnapshot makes the state as of the group just made durable the one
// Views read. Only the committer calls it, between a successful sync and the
// next write, so the snapshot never holds data that is not yet durable.
func (s *Store) publishSnapshot() {
	next := newSharedSnapshot(s.db)
	s.snapMu.Lock()
	old := s.snap
	s.snap = next
	s.snapMu.Unlock()
	old.release()
}
