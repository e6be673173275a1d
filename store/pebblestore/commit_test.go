package pebblestore

// These tests reach into the store (testHookQueued) to build transaction
// groups deterministically: no sleeps, no timing assumptions.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/countersign/countersign/store"
)

var quiet = slog.New(slog.DiscardHandler)

// isWALSync reports whether op makes the write-ahead log durable.
func isWALSync(op errorfs.Op) bool {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
		return strings.HasSuffix(op.Path, ".log")
	}
	return false
}

// queueWatch counts queued transactions through testHookQueued.
type queueWatch struct {
	mu     sync.Mutex
	n      int
	waitN  int
	reachd chan struct{}
}

func watchQueue(s *Store) *queueWatch {
	w := &queueWatch{}
	s.testHookQueued = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.n++
		if w.reachd != nil && w.n >= w.waitN {
			close(w.reachd)
			w.reachd = nil
		}
	}
	return w
}

// count returns how many transactions have been queued so far.
func (w *queueWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// until returns a channel closed once n transactions in all have been queued.
func (w *queueWatch) until(n int) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if w.n >= n {
		close(ch)
		return ch
	}
	w.waitN, w.reachd = n, ch
	return ch
}

// groupLog records the size of every group commit, as Options.OnCommit.
type groupLog struct {
	mu  sync.Mutex
	got []int
}

func (l *groupLog) record(ci CommitInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, ci.Txns)
}

func (l *groupLog) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

func set(k, v string) func(store.Txn) error {
	return func(tx store.Txn) error { return tx.Set([]byte(k), []byte(v)) }
}

func keys(t *testing.T, s store.Store) []string {
	t.Helper()
	var out []string
	err := s.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		defer it.Close()
		for it.Next() {
			out = append(out, string(it.Key()))
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// blockCommitter queues a transaction whose function holds the committer
// until release is closed, and returns a channel with its Update's result.
// When blockCommitter returns, the function is running.
func blockCommitter(t *testing.T, s *Store, key string, release <-chan struct{}) <-chan error {
	t.Helper()
	running := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- s.Update(context.Background(), func(tx store.Txn) error {
			close(running)
			<-release
			return tx.Set([]byte(key), nil)
		})
	}()
	<-running
	return res
}

// TestGroupCommitSharesSyncs holds the first group's fsync until 63 more
// writers are queued behind it, and checks that those 63 commit with a
// single further fsync.
func TestGroupCommitSharesSyncs(t *testing.T) {
	var (
		syncs    atomic.Int64
		armed    atomic.Bool
		inSync   = make(chan struct{})
		release  = make(chan struct{})
		injector = errorfs.InjectorFunc(func(op errorfs.Op) error {
			if !isWALSync(op) {
				return nil
			}
			syncs.Add(1)
			if armed.CompareAndSwap(true, false) {
				close(inSync)
				<-release
			}
			return nil
		})
	)
	s, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), injector), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := watchQueue(s)

	const writers = 64
	before := syncs.Load()
	armed.Store(true)
	errs := make(chan error, writers)
	go func() { errs <- s.Update(context.Background(), set("w00", "")) }()
	<-inSync // the committer is inside the first group's fsync
	for i := 1; i < writers; i++ {
		go func() { errs <- s.Update(context.Background(), set(fmt.Sprintf("w%02d", i), "")) }()
	}
	<-w.until(writers)
	close(release)
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	if got := syncs.Load() - before; got != 2 {
		t.Errorf("%d commits took %d WAL syncs, want 2 (one for the first, one for the other %d)", writers, got, writers-1)
	}
	if st := s.Stats(); st.Txns != writers || st.Groups != 2 {
		t.Errorf("Stats = %+v, want %d transactions in 2 groups", st, writers)
	}
	if got := len(keys(t, s)); got != writers {
		t.Errorf("%d keys, want %d", got, writers)
	}
}

// TestGroupMembersSeeEachOther checks serializability inside a group: each
// transaction reads the writes of those before it in the same group, and a
// transaction whose function fails leaves nothing for the ones after it.
func TestGroupMembersSeeEachOther(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := watchQueue(s)

	release := make(chan struct{})
	first := blockCommitter(t, s, "first", release)
	errBoom := errors.New("boom")
	const n = 20
	results := make([]chan error, n)
	for i := range n {
		results[i] = make(chan error, 1)
		<-w.until(1 + i) // queue them in order
		go func() {
			results[i] <- s.Update(context.Background(), func(tx store.Txn) error {
				// Increment a counter; every third transaction bumps it and
				// then fails, which must leave no trace.
				v, err := tx.Get([]byte("counter"))
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err := tx.Set([]byte("counter"), append(v, 'x')); err != nil {
					return err
				}
				if i%3 == 0 {
					return errBoom
				}
				return nil
			})
		}()
	}
	<-w.until(1 + n)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i, ch := range results {
		err := <-ch
		switch {
		case i%3 == 0 && !errors.Is(err, errBoom):
			t.Errorf("txn %d: %v, want boom", i, err)
		case i%3 != 0 && err != nil:
			t.Errorf("txn %d: %v", i, err)
		case err == nil:
			ok++
		}
	}
	// The queued transactions joined the blocked one's group.
	if st := s.Stats(); st.Txns != uint64(ok)+1 || st.Groups != 1 {
		t.Errorf("Stats = %+v, want %d transactions in 1 group", st, ok+1)
	}
	err = s.View(t.Context(), func(r store.Reader) error {
		v, err := r.Get([]byte("counter"))
		if err != nil {
			return err
		}
		if len(v) != ok {
			t.Errorf("counter = %d, want %d (one per successful txn)", len(v), ok)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFailedSyncFailsGroupAndStore injects a WAL fsync failure under a group
// of transactions. Every one of them must get an error, later Updates must
// fail, and after a crash (only synced data survives) and reopen, everything
// that was reported committed must be there.
func TestFailedSyncFailsGroupAndStore(t *testing.T) {
	mem := vfs.NewCrashableMem()
	var failSyncs atomic.Bool
	errInjected := errors.New("injected fsync failure")
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failSyncs.Load() && isWALSync(op) {
			return errInjected
		}
		return nil
	}))
	s, err := Open("db", &Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w := watchQueue(s)

	var committed []string
	for i := range 10 {
		k := fmt.Sprintf("ok%02d", i)
		if err := s.Update(t.Context(), set(k, k)); err != nil {
			t.Fatal(err)
		}
		committed = append(committed, k)
	}

	// One group: a leader holding the committer, then 15 more.
	release := make(chan struct{})
	leader := blockCommitter(t, s, "doomed-leader", release)
	const n = 15
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Update(context.Background(), set(fmt.Sprintf("doomed%02d", i), "x")) }()
	}
	<-w.until(1 + n)
	failSyncs.Store(true)
	close(release)
	all := []error{<-leader}
	for range n {
		all = append(all, <-errs)
	}
	t.Logf("group error: %v", all[0])
	for i, err := range all {
		if !errors.Is(err, ErrFailed) {
			t.Errorf("group member %d: %v, want an error matching ErrFailed", i, err)
		}
	}

	// Fail-stop: nothing more is written, and the function does not run.
	ran := false
	err = s.Update(t.Context(), func(tx store.Txn) error { ran = true; return tx.Set([]byte("later"), nil) })
	if !errors.Is(err, ErrFailed) || ran {
		t.Errorf("Update after a failed commit = %v (ran=%v), want ErrFailed without running", err, ran)
	}
	// Views keep serving exactly the durable state.
	if got := keys(t, s); !slices.Equal(got, committed) {
		t.Errorf("View after failure sees %q, want %q", got, committed)
	}

	// Crash now: keep only what was synced.
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	failSyncs.Store(false)
	t.Logf("Close after failure: %v", s.Close()) // must not hang or panic

	s2, err := Open("db", &Options{FS: crashed, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got := keys(t, s2)
	for _, k := range committed {
		if !slices.Contains(got, k) {
			t.Errorf("after crash and reopen: committed key %q is missing", k)
		}
	}
	for _, k := range got {
		if !slices.Contains(committed, k) && !strings.HasPrefix(k, "doomed") {
			t.Errorf("after crash and reopen: unexpected key %q", k)
		}
	}
	// The reopened store writes again.
	if err := s2.Update(t.Context(), set("again", "")); err != nil {
		t.Errorf("Update after reopen: %v", err)
	}
}

// TestCanceledWhileQueued withdraws a queued transaction: its caller
// returns at once with ctx.Err(), and its function never runs.
func TestCanceledWhileQueued(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := watchQueue(s)

	release := make(chan struct{})
	first := blockCommitter(t, s, "first", release)
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	res := make(chan error, 1)
	go func() {
		res <- s.Update(ctx, func(tx store.Txn) error { ran.Store(true); return tx.Set([]byte("withdrawn"), nil) })
	}()
	<-w.until(2)
	cancel()
	// The committer is still blocked in the first function, so this returns
	// only because the caller withdrew.
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled queued Update = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// A later transaction runs after the withdrawn one would have.
	if err := s.Update(t.Context(), set("after", "")); err != nil {
		t.Fatal(err)
	}
	if ran.Load() {
		t.Error("the withdrawn transaction's function ran")
	}
	if got, want := keys(t, s), []string{"after", "first"}; !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

// TestPanicInFunction re-raises a function's panic in its caller and leaves
// the rest of the group, and the store, working.
func TestPanicInFunction(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := watchQueue(s)

	release := make(chan struct{})
	first := blockCommitter(t, s, "first", release)
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_ = s.Update(context.Background(), func(tx store.Txn) error {
			_ = tx.Set([]byte("panicker"), nil)
			panic("fn panic")
		})
	}()
	<-w.until(2)
	after := make(chan error, 1)
	go func() { after <- s.Update(context.Background(), set("after", "")) }()
	<-w.until(3)
	close(release)
	if p := <-panicked; p != "fn panic" {
		t.Errorf("caller recovered %v, want the function's panic", p)
	}
	if err := errors.Join(<-first, <-after); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(t, s), []string{"after", "first"}; !slices.Equal(got, want) {
		t.Errorf("keys = %q, want %q", got, want)
	}
}

// TestCloseDrainsQueue closes the store while transactions are queued: they
// commit, Close waits for them, and they survive a reopen.
func TestCloseDrainsQueue(t *testing.T) {
	fs := vfs.NewMem()
	s, err := Open("db", &Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w := watchQueue(s)
	release := make(chan struct{})
	first := blockCommitter(t, s, "first", release)
	const n = 10
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Update(context.Background(), set(fmt.Sprintf("q%02d", i), "")) }()
	}
	<-w.until(1 + n)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Close returned, so every queued Update had returned before it.
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open("db", &Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := len(keys(t, s2)); got != n+1 {
		t.Errorf("after reopen: %d keys, want %d", got, n+1)
	}
}

// TestViewSeesOnlyDurableData holds a group's fsync and checks that a View
// during it does not see the group's writes, although Pebble has already
// made them visible in the database.
func TestViewSeesOnlyDurableData(t *testing.T) {
	var armed atomic.Bool
	inSync, release := make(chan struct{}), make(chan struct{})
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if isWALSync(op) && armed.CompareAndSwap(true, false) {
			close(inSync)
			<-release
		}
		return nil
	}))
	s, err := Open("db", &Options{FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(t.Context(), set("k", "durable")); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	res := make(chan error, 1)
	go func() { res <- s.Update(context.Background(), set("k", "syncing")) }()
	<-inSync
	if v, _, err := s.db.Get([]byte("k")); err != nil || string(v) != "syncing" {
		// Not a requirement of ours; it shows the test exercises the gap.
		t.Logf("pebble does not expose unsynced data here (%q, %v)", v, err)
	}
	err = s.View(t.Context(), func(r store.Reader) error {
		v, err := r.Get([]byte("k"))
		if err != nil || string(v) != "durable" {
			t.Errorf("View during fsync reads %q, %v; want durable", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	err = s.View(t.Context(), func(r store.Reader) error {
		v, err := r.Get([]byte("k"))
		if err != nil || string(v) != "syncing" {
			t.Errorf("View after commit reads %q, %v; want syncing", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpenOptions(t *testing.T) {
	if _, err := Open("db", &Options{FS: vfs.NewMem(), MaxGroup: -1}); err == nil {
		t.Error("Open accepted a negative MaxGroup")
	}
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet, MaxGroup: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.maxGroup != 1 || cap(s.reqs) != 1 {
		t.Errorf("MaxGroup 1 gave maxGroup %d, queue %d", s.maxGroup, cap(s.reqs))
	}
}

func TestLoggerFatalfPanics(t *testing.T) {
	defer func() {
		if p := recover(); p != "pebble: boom 7" {
			t.Errorf("recovered %v", p)
		}
	}()
	pebbleLogger{quiet}.Fatalf("pebble: boom %d", 7)
}

// TestEmptyUpdateIsBarrier checks the promise store.Deferrer makes about
// a later Update: even one that writes nothing returns only once every
// deferred commit before it is durable, so a power cut right after it
// keeps them. (package pay relies on it before answering from a deferred
// decision.)
func TestEmptyUpdateIsBarrier(t *testing.T) {
	for round := range 20 {
		mem := vfs.NewCrashableMem()
		s, err := Open("db", &Options{FS: mem, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 1 + round%4 {
			k := fmt.Sprintf("deferred%02d-%d", round, i)
			if err := s.UpdateDeferred(t.Context(), set(k, "v")); err != nil {
				t.Fatal(err)
			}
			want = append(want, k)
		}
		if err := s.Update(t.Context(), func(store.Txn) error { return nil }); err != nil {
			t.Fatal(err)
		}
		crashed := mem.CrashClone(vfs.CrashCloneCfg{}) // keeps only what was synced
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s2, err := Open("db", &Options{FS: crashed, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(t, s2); !slices.Equal(got, want) {
			t.Errorf("round %d: after the barrier and a power cut: %q, want %q", round, got, want)
		}
		s2.Close()
	}
}

// TestGatherRejoinsAnsweredCohort checks the committer's gather: once a
// group of gatherMin or more is answered, its callers' next transactions
// commit together in one group, not split between the group that was
// waiting and the one after it.
func TestGatherRejoinsAnsweredCohort(t *testing.T) {
	var (
		g      = newSyncGate()
		groups groupLog
	)
	s, err := Open("db", &Options{
		FS:       errorfs.Wrap(vfs.NewMem(), g.injector()),
		Logger:   quiet,
		OnCommit: groups.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The cohort's second transactions must all arrive within the gather
	// window, however slow the machine running the test.
	s.maxGather, s.gatherGap = time.Minute, time.Minute
	w := watchQueue(s)

	g.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- s.Update(context.Background(), set("first", "")) }()
	release1 := <-g.inSync // group 1 (one member) is in its fsync

	const cohort = 2 * gatherMin
	errs := make(chan error, cohort)
	for i := range cohort {
		go func() {
			if err := s.Update(context.Background(), set(fmt.Sprintf("a%02d", i), "")); err != nil {
				errs <- err
				return
			}
			errs <- s.Update(context.Background(), set(fmt.Sprintf("b%02d", i), ""))
		}()
	}
	<-w.until(1 + cohort)
	g.armed.Store(true)
	close(release1)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	release2 := <-g.inSync // group 2, the cohort's first transactions, is in its fsync
	// The gather window is as long as the fsync it follows: make it long.
	time.Sleep(50 * time.Millisecond)
	close(release2)
	for range cohort {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	if got, want := groups.sizes(), []int{1, cohort, cohort}; !slices.Equal(got, want) {
		t.Errorf("group sizes %v, want %v: the answered cohort's next transactions should commit in one group", got, want)
	}
}

// TestGatherNeverHoldsSmallGroups runs callers too few to be gathered with
// an unbounded gather window: were a group of fewer than gatherMin ever
// held back, the test would hang.
func TestGatherNeverHoldsSmallGroups(t *testing.T) {
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.maxGather, s.gatherGap = time.Hour, time.Hour

	var wg sync.WaitGroup
	for c := range gatherMin - 1 {
		wg.Go(func() {
			for i := range 50 {
				if err := s.Update(t.Context(), set(fmt.Sprintf("c%d-%02d", c, i), "")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got, want := s.Stats().Txns, uint64((gatherMin-1)*50); got != want {
		t.Errorf("%d transactions committed, want %d", got, want)
	}
}

// syncGate blocks the next WAL sync after arm until the returned release
// is called.
type syncGate struct {
	armed  atomic.Bool
	inSync chan chan struct{}
}

func newSyncGate() *syncGate { return &syncGate{inSync: make(chan chan struct{}, 1)} }

func (g *syncGate) injector() errorfs.Injector {
	return errorfs.InjectorFunc(func(op errorfs.Op) error {
		if isWALSync(op) && g.armed.CompareAndSwap(true, false) {
			release := make(chan struct{})
			g.inSync <- release
			<-release
		}
		return nil
	})
}

// largeGroup commits a group of n transactions, one per caller, each
// queued while the group before is in its fsync, and waits for them.
func largeGroup(t *testing.T, s *Store, g *syncGate, w *queueWatch, prefix string, n int) {
	t.Helper()
	queued := w.count()
	g.armed.Store(true)
	first := make(chan error, 1)
	go func() { first <- s.Update(context.Background(), set(prefix+"-first", "")) }()
	release := <-g.inSync
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.Update(context.Background(), set(fmt.Sprintf("%s-%02d", prefix, i), "")) }()
	}
	<-w.until(queued + 1 + n)
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestGatherBacksOff checks that a hold whose callers do not come back
// makes the committer let the next chances to hold pass.
func TestGatherBacksOff(t *testing.T) {
	g := newSyncGate()
	s, err := Open("db", &Options{FS: errorfs.Wrap(vfs.NewMem(), g.injector()), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.maxGather, s.gatherGap = 20*time.Millisecond, 20*time.Millisecond
	w := watchQueue(s)

	// A group of 2×gatherMin callers that each commit once: the hold
	// after it gathers one transaction, not 2×gatherMin, and fails.
	largeGroup(t, s, g, w, "a", 2*gatherMin)
	if err := s.Update(t.Context(), set("lone", "")); err != nil {
		t.Fatal(err)
	}
	if h, f := s.gatherHolds.Load(), s.gatherFailed.Load(); h != 1 || f != 1 {
		t.Fatalf("after the first large group: %d holds, %d failed; want 1, 1", h, f)
	}
	// The next large group is not held.
	largeGroup(t, s, g, w, "b", 2*gatherMin)
	if err := s.Update(t.Context(), set("lone2", "")); err != nil {
		t.Fatal(err)
	}
	if h, f := s.gatherHolds.Load(), s.gatherFailed.Load(); h != 1 || f != 1 {
		t.Errorf("after the second large group: %d holds, %d failed; want still 1, 1", h, f)
	}
}

// TestDeferredOnlyGroupWaitsForAWaiter checks that a group whose members
// were all deferred is not committed on its own while a transaction that
// waits may still join it: the deferred transactions and the Update after
// them make one group and one fsync, as a payment's deferred decision,
// its rail's deferred entry and its synchronous outcome do.
func TestDeferredOnlyGroupWaitsForAWaiter(t *testing.T) {
	var groups groupLog
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet, OnCommit: groups.record})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.maxDeferredHold = time.Hour // only a waiter ends the hold here
	for i := range 3 {
		if err := s.UpdateDeferred(t.Context(), set(fmt.Sprintf("d%d", i), "v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Update(t.Context(), set("outcome", "v")); err != nil {
		t.Fatal(err)
	}
	if got := groups.sizes(); !slices.Equal(got, []int{4}) {
		t.Errorf("group commits %v, want one of 4 transactions", got)
	}
	if got := keys(t, s); !slices.Equal(got, []string{"d0", "d1", "d2", "outcome"}) {
		t.Errorf("after the commit: %q", got)
	}
}

// TestDeferredOnlyGroupCommitsAfterItsHold checks that a deferred
// transaction no waiter follows still becomes durable on its own, once
// the hold is over: visible to View and kept by a power cut.
func TestDeferredOnlyGroupCommitsAfterItsHold(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s, err := Open("db", &Options{FS: mem, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.maxDeferredHold = time.Millisecond
	if err := s.UpdateDeferred(t.Context(), set("alone", "v")); err != nil {
		t.Fatal(err)
	}
	// View reads only what is durable; poll for it rather than sleep.
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Equal(keys(t, s), []string{"alone"}) {
		if time.Now().After(deadline) {
			t.Fatal("a deferred transaction with no waiter after it never committed")
		}
		runtime.Gosched()
	}
	s2, err := Open("db", &Options{FS: mem.CrashClone(vfs.CrashCloneCfg{}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := keys(t, s2); !slices.Equal(got, []string{"alone"}) {
		t.Errorf("after a power cut: %q, want the deferred commit kept", got)
	}
}
