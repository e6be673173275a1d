package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

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
	ctx      context.Context
	fn       func(store.Txn) error
	deferred bool
	state    atomic.Int32

	// Set by the committer before it closes done.
	err      error
	panicked bool
	panicVal any
	done     chan struct{}

	// The outcome of the function in the group's current attempt, kept
	// until the group's reads are checked (committer only).
	ferr      error
	fpanicked bool
	fpanicVal any
	ok        bool // it returned nil and its writes are in the group
}

func (r *request) answer(err error) {
	r.err = err
	close(r.done)
}

// UpdateDeferred implements [store.Deferrer]: the transaction is group
// committed like any other, and a group whose transactions are all
// deferred commits with synchronous_commit off for that transaction only
// (SET LOCAL), returning before its WAL is flushed. What makes that sound
// is in PostgreSQL's documentation, "Asynchronous Commit"
// (https://www.postgresql.org/docs/15/wal-async-commit.html): the mode is
// chosen per transaction, by the setting when its commit begins; after a
// crash the database replays its WAL, in commit order, up to the last
// record flushed, so a transaction's effects are never kept while those
// of one committed before it are lost; and the WAL writer flushes an
// asynchronous commit within three times wal_writer_delay. A synchronous
// commit flushes the WAL up to its own commit record, and so every
// asynchronous commit before it, of this process or another. So the next
// group here with an Update that is not deferred commits synchronously
// with a marker even when its functions wrote nothing: the barrier the
// store contract asks for. On CockroachDB it is Update.
func (s *Store) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	return s.update(ctx, fn, true)
}

// Update runs fn in a serializable transaction, group committed with
// concurrent ones; see the package documentation.
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.update(ctx, fn, false)
}

func (s *Store) update(ctx context.Context, fn func(store.Txn) error, deferred bool) error {
	if err := s.enterAs(ctx, true); err != nil {
		return err
	}
	defer s.inflight.Done()
	req := &request{ctx: ctx, fn: fn, deferred: deferred, done: make(chan struct{})}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	if h := s.queuedHook; h != nil {
		h()
	}
	select {
	case <-req.done:
	case <-ctx.Done():
		// Still queued: withdraw and leave at once. Otherwise the
		// committer has taken the transaction and its outcome is on the
		// way.
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

// committer is the single goroutine that runs and commits Updates; see
// the package documentation.
//
// It waits for each group's commit before it runs the next group's
// functions. Running them during the commit's round trip instead (a
// pipeline, as in pebblestore) was measured with the database on the same
// two cores: the next group then commits as soon as the one before lands,
// before the callers that one answered come back with their next Update,
// so groups were a quarter smaller, the database made more commits for
// the same work, and throughput fell (docs/PERFORMANCE.md).
func (s *Store) committer() {
	defer close(s.committerDone)
	for {
		select {
		case r := <-s.reqs:
			s.runGroup(r)
		case <-s.stop:
			return
		}
	}
}

// runGroup runs first and the Updates queued behind it as one group, and
// commits them.
func (s *Store) runGroup(first *request) {
	g := &group{s: s, reads: map[string]readEntry{}, attempt: 1, start: time.Now()}
	g.cost.start = g.start
	if s.lockFirst() {
		g.beginLocked()
		// The wait for the lock does not count against the time the
		// functions may run: the Updates queued meanwhile join.
		g.start = time.Now()
		g.cost.Lock += g.start.Sub(g.cost.start)
	}
	g.take(first)
	for !g.full() {
		select {
		case r := <-s.reqs:
			g.take(r)
			continue
		default:
		}
		break
	}
	g.cost.Run += time.Since(g.start)
	g.settle()
}

// group is the Updates committed by one database transaction, and the
// state of its current attempt.
type group struct {
	s       *Store
	reqs    []*request // taken and not yet answered, in arrival order
	taken   int
	attempt int
	start   time.Time
	// cost is where the group's time went, for Options.OnCommit;
	// cost.start is when the group began.
	cost struct {
		CommitInfo
		start time.Time
		sent  bool // a commit round trip was made
	}

	// The current attempt.
	conn  *pgxpool.Conn
	begun bool // BEGIN was sent
	keep  bool // refresh began the next attempt's transaction
	// noBlind is set once a blind insert (queueWrites) met a key that
	// was present: the group's later attempts upsert every key not read.
	noBlind bool
	// iterated is every key the attempt's iterators read from the
	// database: present, so never inserted blind.
	iterated map[string]struct{}
	locked   bool  // beginLocked began it: the cache is up to date
	broken   error // the first database error: the attempt is over
	buf      ordered.Map
	hooks    commithook.List
	// reads is every key the attempt read below the group's buffer, with
	// what it read; a value from the cache is checked at commit.
	reads map[string]readEntry

	// The attempt's commit, as prepare planned it and send (or prepare)
	// concluded it.
	plan commitPlan
	out  outcome
	err  error
}

// commitPlan is an attempt's commit round trip, and what it learnt.
type commitPlan struct {
	b              *pgx.Batch
	tag            pgconn.CommandTag
	checkK, checkV [][]byte // the cached and guessed values to check
	checkG         []bool   // which of them were guessed
	blindK         [][]byte // keys inserted blind (queueWrites)
	blindMiss      bool     // one of them was present: the insert failed
	writes         bool
	mark           bool
	async          bool
	marker         []byte
	hookErr        error
	// guessesOK is set once the check passed: every guessed key was
	// absent.
	guessesOK bool
	// stale, when staleOK, is what the database holds of the checked keys
	// the check refused; forget drops them from the cache instead.
	stale   []row
	staleOK bool
	forget  bool
	// foreign, when foreignOK, is the log of other processes' changes
	// read in the commit's round trip; seq is the number the commit gave
	// its own (coherence.go).
	foreign     []changed
	foreignLast int64
	foreignOK   bool
	seq         int64
}

// full reports that g takes no more Updates.
func (g *group) full() bool {
	return g.broken != nil || g.taken >= g.s.maxGroup || time.Since(g.start) >= g.s.groupTime
}

// readEntry is a value read by an attempt: v (present false for
// absent), and whether it was read from the database in the attempt's
// own transaction (checked), from the committer's cache, or guessed.
type readEntry struct {
	v       []byte
	present bool
	checked bool
	guessed bool // absent for want of a cached value (readCache.guessAbsent)
}

// take claims r for the group and runs its function, unless its caller
// withdrew it or its ctx has ended (then it is answered with ctx.Err()).
func (g *group) take(r *request) {
	if !r.state.CompareAndSwap(stateQueued, stateTaken) {
		return // withdrawn: the caller has already returned
	}
	g.taken++
	if err := g.s.failure(); err != nil {
		r.answer(err) // nothing more is written once the store has failed
		return
	}
	if err := r.ctx.Err(); err != nil {
		r.answer(err)
		return
	}
	g.reqs = append(g.reqs, r)
	g.run(r)
}

// run runs r's function in the current attempt and, if it returns nil
// and r's ctx is still live, folds its writes into the group.
func (g *group) run(r *request) {
	r.ferr, r.fpanicked, r.fpanicVal, r.ok = nil, false, nil, false
	t := &txn{g: g}
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.fpanicked, r.fpanicVal = true, p
			}
		}()
		r.ferr = r.fn(t)
	}()
	t.done = true
	if r.fpanicked || r.ferr != nil || g.broken != nil {
		return
	}
	// The commit has not begun: a ctx that ended while fn ran still
	// aborts.
	if err := r.ctx.Err(); err != nil {
		r.ferr = err
		return
	}
	g.fold(t)
	g.hooks.Merge(&t.hooks)
	r.ok = true
}

// noteIterated records keys an iterator of the current attempt read from
// the database (queueWrites upserts them).
func (g *group) noteIterated(rows []row) {
	if g.iterated == nil && len(rows) > 0 {
		g.iterated = map[string]struct{}{}
	}
	for _, r := range rows {
		g.iterated[string(r.k)] = struct{}{}
	}
}

// fold moves t's pending writes into the group's buffer.
func (g *group) fold(t *txn) {
	t.pending.Ascend(func(e ordered.Entry) { g.buf.Put(e) })
}

// outcome is what an attempt's commit came to.
type outcome int

const (
	committed outcome = iota // answer every request
	again                    // run the group again at once (a stale cached value)
	conflict                 // run it again after a pause (conflict, dropped connection)
	faulted                  // answer every request with the error
)

// settle commits the group, running it again as often as needed and
// allowed, and answers every request.
func (g *group) settle() {
	for {
		t := time.Now()
		sending := g.prepare()
		g.cost.Run += time.Since(t)
		if sending {
			t = time.Now()
			g.send()
			g.cost.Commit += time.Since(t)
			g.cost.sent = true
		}
		if g.finish() {
			return
		}
	}
}

// report tells Options.OnCommit what the group cost and came to, if it
// sent a commit: err is the store's error every Update was answered
// with, and committed whether the group's writes committed (not when a
// commit hook failed: then nothing was written, and the hook's error,
// which is not the store's, went to each Update).
func (g *group) report(err error, committed bool) {
	if g.s.onCommit == nil || !g.cost.sent {
		return
	}
	ci := g.cost.CommitInfo
	ci.Attempts, ci.Deferred, ci.Err = g.attempt, g.plan.async, err
	if committed {
		for _, r := range g.reqs {
			if r.ok {
				ci.Txns++
			}
		}
	}
	g.s.onCommit(ci)
}

// finish lands the current attempt and answers the group, or prepares the
// next attempt and reports false.
func (g *group) finish() bool {
	s := g.s
	out, err := g.land()
	switch out {
	case committed:
		g.report(nil, err == nil)
		g.answer(err)
		return true
	case faulted:
		g.report(err, false)
		g.answerAll(err)
		return true
	}
	if g.attempt >= s.attempts {
		err = fmt.Errorf("pgstore: update: gave up after %d attempts: %w (%w)", s.attempts, store.ErrUnavailable, err)
		g.report(err, false)
		g.answerAll(err)
		return true
	}
	s.reruns.Add(1)
	g.attempt++
	s.log.LogAttrs(context.Background(), slog.LevelDebug, "pgstore: running a group again",
		slog.Int("attempt", g.attempt), slog.Int("txns", len(g.reqs)), slog.Any("error", err))
	if out == conflict {
		pause(g.attempt)
	}
	t := time.Now()
	g.rerun()
	g.cost.Run += time.Since(t) // the wait for the lock is split off in rerun
	return false
}

// rerun starts a new attempt and runs every function again, leaving out
// the requests whose ctx has ended.
func (g *group) rerun() {
	if !g.keep {
		g.endTxn() // refresh may have begun the attempt's transaction
	}
	g.keep = false
	g.broken = nil
	g.buf.Reset()
	g.hooks.Reset()
	g.reads = map[string]readEntry{}
	g.iterated = nil
	reqs := g.reqs[:0]
	for _, r := range g.reqs {
		if err := g.s.failure(); err != nil {
			r.answer(err)
			continue
		}
		if err := r.ctx.Err(); err != nil {
			r.answer(err)
			continue
		}
		reqs = append(reqs, r)
	}
	clear(g.reqs[len(reqs):])
	g.reqs = reqs
	if len(g.reqs) > 0 && g.s.lockFirst() && !g.begun {
		t := time.Now()
		g.beginLocked()
		d := time.Since(t)
		g.cost.Lock += d
		g.cost.Run -= d
	}
	for _, r := range g.reqs {
		if g.broken != nil {
			return // the commit runs the group again
		}
		g.run(r)
	}
}

// answer tells every request its outcome once the group committed (err
// nil) or its commit hooks failed (err): a function's own error or panic,
// else err.
func (g *group) answer(err error) {
	for _, r := range g.reqs {
		switch {
		case r.fpanicked:
			r.panicked, r.panicVal = true, r.fpanicVal
			r.answer(nil)
		case r.ferr != nil:
			r.answer(r.ferr)
		default:
			r.answer(err)
		}
	}
	g.reqs = nil
}

// answerAll tells every request err: nothing of the group was written.
func (g *group) answerAll(err error) {
	g.endTxn()
	for _, r := range g.reqs {
		r.answer(err)
	}
	g.reqs = nil
}

// prepare ends the current attempt's functions: it runs the commit hooks
// and plans the round trip that checks the cached and guessed values and
// sends the group's writes, its marker and COMMIT. It reports whether
// there is a round trip to make (send makes it); if not, the attempt's
// outcome is set already.
func (g *group) prepare() bool {
	s := g.s
	g.plan, g.out, g.err = commitPlan{}, committed, nil
	if g.broken != nil {
		g.out, g.err = g.brokenOutcome()
		return false
	}
	if err := s.failure(); err != nil {
		g.out, g.err = faulted, err // the commit before failed the store
		return false
	}
	p := &g.plan
	members, waiting := false, false
	for _, r := range g.reqs {
		members = members || r.ok
		waiting = waiting || !r.deferred
	}
	if members && g.hooks.Len() > 0 {
		p.hookErr = g.runHooks()
		if g.broken != nil {
			g.out, g.err = g.brokenOutcome()
			return false
		}
	}
	p.writes = members && p.hookErr == nil && g.buf.Len() > 0
	for k, e := range g.reads {
		if e.checked {
			continue
		}
		p.checkK = append(p.checkK, []byte(k))
		p.checkG = append(p.checkG, e.guessed)
		if e.present {
			p.checkV = append(p.checkV, e.v)
		} else {
			p.checkV = append(p.checkV, nil) // NULL: absent
		}
	}
	// A group with an Update that is not deferred, after a commit whose
	// WAL may not be flushed, commits with a marker: a commit that writes
	// waits for the flush of the WAL up to its own record.
	p.mark = p.writes || (s.asyncUnflushed && waiting)
	p.async = s.async && p.writes && !waiting
	if !g.begun && len(p.checkK) == 0 && !p.mark {
		// Nothing was read from the database and nothing is to be
		// written.
		g.err = p.hookErr
		return false
	}
	b := &pgx.Batch{}
	if !g.begun {
		g.queueBegin(b)
	}
	if s.serialize && !g.locked {
		// Before the check, so that its rows arrive even when the check
		// fails: they say which cached values to forget.
		s.queueChanges(b, &p.foreign, &p.foreignLast, &p.foreignOK)
	}
	if len(p.checkK) > 0 {
		b.Queue(s.q.guard, pgtype.FlatArray[[]byte](p.checkK), pgtype.FlatArray[[]byte](p.checkV), pgtype.FlatArray[bool](p.checkG))
	}
	if p.writes {
		g.queueWrites(b)
		if s.serialize {
			g.queueLogChange(b)
		}
	}
	if p.mark {
		p.marker = make([]byte, 16)
		_, _ = rand.Read(p.marker)
		b.Queue(s.q.mark, p.marker, time.Now().UTC())
	}
	if p.writes && s.notify {
		// Delivered when, and only if, the transaction commits: other
		// processes' watchers (Watch) learn of the commit.
		b.Queue("NOTIFY " + s.schema)
	}
	if p.async {
		b.Queue(asyncCommit)
	}
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error { p.tag = ct; return nil })
	p.b = b
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	if err := g.acquire(ctx); err != nil {
		g.out, g.err = g.brokenOutcomeOf(err)
		return false
	}
	return true
}

// send makes the round trip prepare planned and sets the attempt's
// outcome.
func (g *group) send() {
	s, p := g.s, &g.plan
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	trip := func() error { return g.conn.SendBatch(ctx, p.b).Close() }
	var err error
	if s.commitHook != nil {
		err = s.commitHook(ctx, trip)
	} else {
		err = trip()
	}
	g.begun = true
	g.out, g.err = g.conclude(err)
	if g.out == committed {
		p.guessesOK = true
		g.err = p.hookErr
	}
}

// conclude reads the outcome of the commit round trip from its error.
func (g *group) conclude(err error) (outcome, error) {
	s, p := g.s, &g.plan
	if err == nil && p.tag.String() != "COMMIT" {
		// The transaction was aborted and COMMIT rolled it back; every
		// statement answered, so this cannot happen unless the server
		// broke its protocol. Nothing was written.
		g.endTxn()
		return conflict, fmt.Errorf("COMMIT answered %q", p.tag.String())
	}
	if err == nil {
		g.release()
		return committed, nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC" && !g.conn.Conn().IsClosed() {
		// A statement failed and the server skipped the rest of the
		// batch, COMMIT included: nothing was written.
		g.endTxn()
		switch {
		case pe.Code == "22P02" && len(p.checkK) > 0 && strings.Contains(pe.Message, guessMessage):
			// The guard refused guesses only: keys this process had
			// not seen, taken to be absent, are present (say, a lease
			// renewed every few seconds, whose value left the cache).
			// Nothing says another process wrote anything, so no
			// commit lock first for the next second: learn what the
			// database holds for the keys checked, in the transaction
			// that the next attempt commits.
			g.refresh()
			s.stale.Add(1)
			return again, err
		case pe.Code == "22P02" && len(p.checkK) > 0:
			// The guard (nothing else in the batch casts text): a
			// cached or guessed value was wrong. Learn what the database
			// holds and run again: with the commit lock, from the log of
			// changed keys before the next attempt's functions run.
			if s.serialize {
				s.lockFirstUntil = time.Now().Add(s.lockFirstFor)
			} else {
				g.refresh()
			}
			s.stale.Add(1)
			return again, err
		case pe.Code == "23505" && len(p.blindK) > 0:
			// Most likely a key written blind was present after all
			// (queueWrites); should another process have inserted a
			// key read as absent, the next attempt meets it too. Run
			// again at once, upserting every key not read, and count a
			// key guessed absent that was not.
			g.noBlind = true
			p.blindMiss = true
			s.cache.missed(true)
			s.stale.Add(1)
			return again, err
		case retryable(err) || pe.Code == "23505":
			// A unique violation: another process inserted a key this
			// one read as absent, after the snapshot (PostgreSQL reports
			// most such cases as 40001).
			p.forget = true
			return conflict, err
		}
		return faulted, s.fault(context.Background(), "commit", err)
	}
	g.endTxn()
	if pgconn.SafeToRetry(err) {
		return conflict, err // nothing reached the server
	}
	// The connection failed while the batch was out: COMMIT may have run.
	if p.marker == nil {
		return conflict, err // nothing was to be written
	}
	found, rerr := s.markerFound(p.marker)
	if rerr != nil {
		// Neither answer could be had. The store contract's rule for a
		// durable driver that cannot tell whether a commit landed: fail
		// every later transaction rather than guess (store.ErrFailed),
		// until the process is restarted and the record is read afresh.
		ferr := fmt.Errorf("pgstore: the outcome of a commit is unknown (%v) and could not be read back (%v): %w", err, rerr, store.ErrFailed)
		s.failed.CompareAndSwap(nil, &ferr)
		s.log.LogAttrs(context.Background(), slog.LevelError, "pgstore: a commit's outcome is unknown; refusing further transactions", slog.Any("error", ferr))
		return faulted, s.failure()
	}
	if found {
		return committed, nil
	}
	return conflict, err
}

// land records the current attempt's outcome in the committer's state
// (the cache, the guesses' record, the counts) and returns it.
func (g *group) land() (outcome, error) {
	s, p := g.s, &g.plan
	if p.foreignOK {
		// Other processes' changes, read under the commit lock, come
		// before this group's own writes (put below).
		s.apply(p.foreign, p.foreignLast)
	}
	switch {
	case g.out == committed:
		if p.guessesOK {
			g.learn(nil)
		}
		if p.hookErr == nil {
			n := 0
			for _, r := range g.reqs {
				if r.ok {
					n++
				}
			}
			s.txns.Add(uint64(n))
		}
		if p.writes {
			if s.serialize {
				s.seen = p.seq
			}
			g.buf.Ascend(func(e ordered.Entry) { s.cache.put(e.Key, e.Value, !e.Tombstone) })
			if s.groups.Add(1)%1000 == 0 {
				s.sweep()
			}
		}
		switch {
		case p.async:
			s.asyncUnflushed = true
		case p.mark:
			s.asyncUnflushed = false
		}
	case p.blindMiss:
		// Which of the keys inserted blind was present is not known:
		// mark them all unknown, so that later groups upsert them
		// rather than meet the same key again.
		for _, k := range p.blindK {
			s.cache.invalidate(k)
		}
	case p.staleOK:
		for _, r := range p.stale {
			s.cache.put(r.k, r.v, r.v != nil)
		}
		g.learn(p.stale)
	case p.forget || g.out == again:
		// Another process probably changed one of the values checked.
		// With the commit lock, the log of changed keys says which
		// (apply, in the next attempt's beginLocked); should it not
		// (a process that does not log), the check keeps failing, and
		// after two attempts the values checked are read again.
		if !s.serialize || g.attempt >= 2 {
			for _, k := range p.checkK {
				s.cache.invalidate(k)
			}
		}
	}
	if !g.keep {
		g.endTxn()
	}
	return g.out, g.err
}

// queueWrites queues the group's net writes: one insert of the keys
// known to be absent, one upsert of the others, and one delete.
//
// A plain insert of a key known absent spares the database the upsert's
// speculative insertion: a probe of the index first, one more WAL record
// for each row, and under a conflict a lock and an update (measured:
// nearly half the database's time on a payment). A key is known absent
// when the group read it so (checked at commit), and taken to be absent
// when it is written blind (set without being read) while the cache
// holds nothing of it and the committer guesses unseen keys absent
// (readCache.guessAbsent): most such keys are new (the record's next
// entry, a new transaction's index rows). The guess is checked by the
// database itself: the insert of a key that is present fails with a
// unique violation, which aborts the transaction before it commits, and
// the group runs again at once with every key it did not read upserted
// (conclude).
func (g *group) queueWrites(b *pgx.Batch) {
	var insK, insV, setK, setV, delK [][]byte
	blind := !g.noBlind && g.s.cache.guessAbsent()
	p := &g.plan
	g.buf.Ascend(func(e ordered.Entry) {
		if e.Tombstone {
			delK = append(delK, e.Key)
			return
		}
		v := e.Value
		if v == nil {
			v = []byte{} // an empty value is a value, never NULL
		}
		if r, ok := g.reads[string(e.Key)]; ok {
			if !r.present {
				insK, insV = append(insK, e.Key), append(insV, v)
			} else {
				setK, setV = append(setK, e.Key), append(setV, v)
			}
			return
		}
		if _, ok := g.iterated[string(e.Key)]; ok {
			setK, setV = append(setK, e.Key), append(setV, v)
			return
		}
		if blind && !g.s.cache.holds(e.Key) {
			insK, insV = append(insK, e.Key), append(insV, v)
			p.blindK = append(p.blindK, e.Key)
			return
		}
		setK, setV = append(setK, e.Key), append(setV, v)
	})
	if len(insK) > 0 {
		b.Queue(g.s.q.insert, pgtype.FlatArray[[]byte](insK), pgtype.FlatArray[[]byte](insV))
	}
	if len(setK) > 0 {
		b.Queue(g.s.q.upsert, pgtype.FlatArray[[]byte](setK), pgtype.FlatArray[[]byte](setV))
	}
	if len(delK) > 0 {
		b.Queue(g.s.q.del, pgtype.FlatArray[[]byte](delK))
	}
}

// queueLogChange queues the insert of the group's row in the log of
// changed keys (coherence.go), which numbers it.
func (g *group) queueLogChange(b *pgx.Batch) {
	keys := make([][]byte, 0, g.buf.Len())
	g.buf.Ascend(func(e ordered.Entry) { keys = append(keys, e.Key) })
	p := &g.plan
	b.Queue(g.s.q.logChange, time.Now().UTC(), pgtype.FlatArray[[]byte](keys)).QueryRow(func(r pgx.Row) error {
		return r.Scan(&p.seq)
	})
}

// refresh reads, after the guard refused an attempt, the values the
// database holds for the keys the attempt took from the cache or guessed,
// for land to learn. It reads them in a new transaction, begun (and so
// holding the commit lock, where it is taken) for the group's next
// attempt: with the lock, no other process commits between the reading
// and that attempt's commit, so the values it learns stay true.
func (g *group) refresh() {
	s, p := g.s, &g.plan
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	if err := g.acquire(ctx); err != nil {
		return
	}
	b := &pgx.Batch{}
	g.queueBegin(b)
	// Not queryRows: a NULL value is an absent key here.
	var r row
	b.Queue(s.q.refresh, pgtype.FlatArray[[]byte](p.checkK), pgtype.FlatArray[[]byte](p.checkV)).Query(func(rows pgx.Rows) error {
		_, err := pgx.ForEachRow(rows, []any{&r.k, &r.v}, func() error {
			p.stale = append(p.stale, r)
			return nil
		})
		return err
	})
	if err := g.conn.SendBatch(ctx, b).Close(); err != nil {
		g.endTxn()
		return
	}
	g.begun, g.keep = true, true
	p.staleOK = true
}

// queueBegin queues the statements that begin the committer's
// transactions: BEGIN and, where it is taken, the commit lock, which
// PostgreSQL grants before the transaction's snapshot is taken (LOCK
// TABLE takes none; the first statement after it does).
//
// Under the commit lock the transaction is REPEATABLE READ: every
// transaction that writes the store's tables takes the lock before its
// snapshot and holds it to its end, so they run one after another, each
// on a snapshot that holds every earlier one; a serial history is
// serializable without PostgreSQL's predicate locks, whose bookkeeping
// on every read and write was a fifth of the upsert's time (measured).
// The schema's tables are the store's own; a writer outside this
// package, which takes no lock, is outside that order, and is met as
// before only by the check of cached values and by REPEATABLE READ's
// refusal (40001) to update a row changed after the snapshot. Without
// the lock (CockroachDB) serializable isolation orders the groups.
func (g *group) queueBegin(b *pgx.Batch) {
	if g.s.serialize {
		b.Queue(beginUnderLock)
		b.Queue(g.s.q.lock)
		return
	}
	b.Queue(beginSerializable)
}

// learn records, for the guesses, whether each guessed key turned out
// present: those among stale, the keys the check found not as the
// attempt took them.
func (g *group) learn(stale []row) {
	present := map[string]bool{}
	for _, r := range stale {
		present[string(r.k)] = r.v != nil
	}
	for k, e := range g.reads {
		if e.guessed {
			g.s.cache.missed(present[k])
		}
	}
}

// brokenOutcome ends an attempt that met a database error while its
// functions or hooks ran.
func (g *group) brokenOutcome() (outcome, error) {
	return g.brokenOutcomeOf(g.broken)
}

func (g *group) brokenOutcomeOf(err error) (outcome, error) {
	g.endTxn()
	if rerunnable(err) {
		return conflict, err
	}
	return faulted, g.s.fault(context.Background(), "update", err)
}

// runHooks runs the group's commit hooks in one more transaction over the
// group's buffer and folds its writes in. A panic in a hook fails the group
// like an error.
func (g *group) runHooks() (err error) {
	t := &txn{g: g, noHooks: true}
	defer func() {
		t.done = true
		if p := recover(); p != nil {
			err = fmt.Errorf("pgstore: commit hook panicked: %v", p)
		}
	}()
	if err := g.hooks.Run(t); err != nil {
		return err
	}
	if g.broken == nil {
		g.fold(t)
	}
	return nil
}

// endTxn rolls back the attempt's transaction if it is open and releases
// its connection.
func (g *group) endTxn() {
	g.keep, g.locked = false, false
	if g.conn == nil {
		g.begun = false
		return
	}
	pc := g.conn.Conn().PgConn()
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
		_, _ = g.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	g.release()
}

// release returns the attempt's connection to the pool, which discards
// it if it is broken or still inside a transaction.
func (g *group) release() {
	if g.conn != nil {
		g.conn.Release()
		g.conn = nil
	}
	g.begun, g.locked = false, false
}

// acquire gives the attempt a connection.
func (g *group) acquire(ctx context.Context) error {
	if g.conn != nil {
		return nil
	}
	conn, err := g.s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	g.conn = conn
	return nil
}

// query runs one statement in the attempt's transaction, beginning it in
// the same round trip if it has not begun, and returns its rows.
func (g *group) query(sql string, args ...any) ([]row, error) {
	if g.broken != nil {
		return nil, fmt.Errorf("pgstore: transaction aborted: %w (%w)", store.ErrUnavailable, g.broken)
	}
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	if err := g.acquire(ctx); err != nil {
		return nil, g.fail(err)
	}
	var rows []row
	var err error
	if g.begun {
		rows, err = queryRows(g.conn.Query(ctx, sql, args...))
	} else {
		b := &pgx.Batch{}
		g.queueBegin(b)
		b.Queue(sql, args...).Query(func(r pgx.Rows) error {
			rows, err = queryRows(r, nil)
			return err
		})
		g.begun = true
		err = g.conn.SendBatch(ctx, b).Close()
	}
	if err != nil {
		return nil, g.fail(err)
	}
	return rows, nil
}

// get reads key below the group's buffer: what the attempt read before,
// else the cache, else a guess or the database.
func (g *group) get(key []byte) ([]byte, bool, error) {
	if g.broken != nil {
		return nil, false, fmt.Errorf("pgstore: transaction aborted: %w (%w)", store.ErrUnavailable, g.broken)
	}
	if e, ok := g.reads[string(key)]; ok {
		return e.v, e.present, nil
	}
	c, ok := g.s.cache.get(key)
	if ok && !c.unknown {
		g.reads[string(key)] = readEntry{v: c.v, present: c.present}
		return c.v, c.present, nil
	}
	if !ok && g.s.cache.guessAbsent() {
		g.reads[string(key)] = readEntry{guessed: true}
		return nil, false, nil
	}
	rows, err := g.query(g.s.q.get, key)
	if err != nil {
		return nil, false, err
	}
	var e readEntry
	e.checked = true
	if len(rows) > 0 {
		e.v, e.present = rows[0].v, true
	}
	g.reads[string(key)] = e
	g.s.cache.put(key, e.v, e.present)
	if !ok {
		// Not a key another process was seen to change: a fair sample
		// for the guesses.
		g.s.cache.missed(e.present)
	}
	return e.v, e.present, nil
}

// fail records err as the attempt's database error and returns it
// wrapped for the function.
// fail records err as the attempt's database error and returns it,
// marked store.ErrUnavailable, for the function (whose result the
// attempt then drops: see brokenOutcome).
func (g *group) fail(err error) error {
	if g.broken == nil {
		g.broken = err
	}
	return fmt.Errorf("pgstore: %w (%w)", store.ErrUnavailable, err)
}

// markerFound reads back a commit marker on a new connection, trying
// again while the database is unreachable, for up to s.patience: the
// group's callers wait, since their commit has begun. Once a read has
// failed, the store refuses new Updates, and answers those already
// queued, with store.ErrUnavailable (resolving), rather than hold them
// behind the committer for as long.
func (s *Store) markerFound(mark []byte) (bool, error) {
	defer s.resolving.Store(false)
	if h := s.resolvingHook; h != nil {
		h()
	}
	read := func(ctx context.Context) (bool, error) {
		var n int
		err := s.pool.QueryRow(ctx, s.q.found, mark).Scan(&n)
		return n > 0, err
	}
	if hook := s.foundHook; hook != nil {
		read = func(ctx context.Context) (bool, error) { return hook(ctx, mark) }
	}
	give := time.Now().Add(s.patience)
	wait := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
		found, err := read(ctx)
		cancel()
		if err == nil {
			return found, nil
		}
		if !time.Now().Before(give) {
			return false, err
		}
		// The database is unreachable, maybe for a while.
		s.resolving.Store(true)
		s.refuseQueued()
		time.Sleep(min(wait, time.Until(give)))
		wait = min(2*wait, time.Second)
	}
}

// refuseQueued answers the queued Updates with store.ErrUnavailable while
// the committer cannot run them (markerFound).
func (s *Store) refuseQueued() {
	for {
		select {
		case r := <-s.reqs:
			if r.state.CompareAndSwap(stateQueued, stateTaken) {
				r.answer(errResolving)
			}
		default:
			return
		}
	}
}

// errResolving refuses Updates while the outcome of a commit is being
// read back.
var errResolving = fmt.Errorf("pgstore: update: %w (the database is unreachable and the outcome of an earlier commit is not known yet)", store.ErrUnavailable)

// defaultPatience is how long the store tries to read back the marker of
// a commit whose answer was lost before it fails (Store.patience): long
// enough for a database to restart or fail over.
const defaultPatience = 2 * time.Minute

// sweep deletes commit markers older than an hour, and the log of
// changed keys' old rows.
func (s *Store) sweep() {
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q.sweep, time.Now().Add(-time.Hour).UTC()); err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "pgstore: sweeping commit markers", slog.Any("error", err))
	}
	if s.serialize {
		if err := s.sweepChanges(ctx); err != nil {
			s.log.LogAttrs(ctx, slog.LevelError, "pgstore: sweeping the log of changed keys", slog.Any("error", err))
		}
	}
}

// readCache is the committer's cache of values it read or committed:
// what the database held the last time this process looked. Every value
// taken from it is checked at commit (see the package documentation), so
// it may be stale. Only the committer goroutine touches it.
//
// It keeps two generations: when the current one is full it becomes the
// old one, and a key found only in the old one moves back to the current
// one. So the keys read in every group (the record's head) stay, and the
// keys written once and never read again (last week's payments) go.
type readCache struct {
	cur, old map[string]cached
	bytes    int // of cur's keys and values

	// missPresent is the share, as a moving average, of the keys read
	// from the database for want of a cached value that existed (see
	// guessAbsent).
	missPresent float64
}

type cached struct {
	v       []byte // never modified: the cache and the readers share it
	present bool
	// unknown marks a key another process changed (coherence.go): read
	// it, neither trust nor guess it.
	unknown bool
}

// A generation is full when it holds this much.
const (
	cacheGenBytes   = 16 << 20
	cacheGenEntries = 1 << 15
)

func (c *readCache) get(key []byte) (cached, bool) {
	if e, ok := c.cur[string(key)]; ok {
		return e, true
	}
	e, ok := c.old[string(key)]
	if ok {
		c.put(key, e.v, e.present)
	}
	return e, ok
}

// holds reports whether the cache holds anything of key, without get's
// promotion of an old generation's entry.
func (c *readCache) holds(key []byte) bool {
	if _, ok := c.cur[string(key)]; ok {
		return true
	}
	_, ok := c.old[string(key)]
	return ok
}

func (c *readCache) put(key, v []byte, present bool) {
	if c.cur == nil || c.bytes > cacheGenBytes || len(c.cur) >= cacheGenEntries {
		c.old, c.cur, c.bytes = c.cur, map[string]cached{}, 0
	}
	if old, ok := c.cur[string(key)]; ok {
		c.bytes -= len(key) + len(old.v)
	}
	if !present {
		v = nil
	}
	c.cur[string(key)] = cached{v: v, present: present}
	c.bytes += len(key) + len(v)
}

// invalidate marks key unknown and reports whether it held a value (or
// a known absence) before.
func (c *readCache) invalidate(key []byte) bool {
	e, ok := c.get(key)
	if ok && e.unknown {
		return false
	}
	c.put(key, nil, false)
	c.cur[string(key)] = cached{unknown: true}
	return ok
}

// reset forgets everything, and guesses nothing until misses come out
// absent again.
func (c *readCache) reset() {
	c.cur, c.old, c.bytes = nil, nil, 0
	c.missPresent = 1
}

// guessAbsent reports whether a key the cache does not hold should be
// taken to be absent rather than read: a guess, checked at commit like a
// cached value. Most keys a group reads that this process has not seen
// are new (an idempotency key, a new transaction's id), and each read
// would cost the committer a round trip; a wrong guess costs the group
// another run. So the committer guesses only while nearly every such key
// has turned out absent lately: not after a start or a restart, when the
// keys it has not seen are mostly old ones.
func (c *readCache) guessAbsent() bool { return c.missPresent < missPresentMax }

// missed records whether a key the cache did not hold turned out present.
func (c *readCache) missed(present bool) {
	x := 0.0
	if present {
		x = 1
	}
	c.missPresent += (x - c.missPresent) / missWindow
}

const (
	// missPresentMax is the share of present keys among the misses
	// below which the committer guesses.
	missPresentMax = 0.05
	// missWindow is the span, in misses, of the moving average.
	missWindow = 64
)

// newReadCache returns a cache that does not guess until it has seen
// misses come out absent.
func newReadCache() readCache { return readCache{missPresent: 1} }
