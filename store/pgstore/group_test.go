package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// inOneGroup runs fns as Updates committed by one group, in order, and
// returns their errors. An Update that blocks the committer goes first;
// each of fns is queued behind it before the next starts.
func inOneGroup(t *testing.T, st *pgstore.Store, fns ...func(store.Txn) error) []error {
	t.Helper()
	queued := make(chan struct{}, len(fns)+1)
	pgstore.OnQueuedForTest(st, func() { queued <- struct{}{} })
	release := make(chan struct{})
	blocked := make(chan struct{})
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	wg.Go(func() {
		once := sync.OnceFunc(func() { close(blocked) })
		if err := st.Update(context.Background(), func(txn store.Txn) error {
			once()
			<-release
			return nil
		}); err != nil {
			t.Errorf("blocking Update: %v", err)
		}
	})
	<-queued
	<-blocked // the committer is inside the blocking function
	for i, fn := range fns {
		wg.Go(func() { errs[i] = st.Update(context.Background(), fn) })
		<-queued
	}
	close(release)
	wg.Wait()
	return errs
}

func get(t testing.TB, st store.Store, key string) (string, bool) {
	t.Helper()
	var v []byte
	err := st.View(context.Background(), func(r store.Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(v), true
}

func set(t *testing.T, st store.Store, kvs ...string) {
	t.Helper()
	if err := st.Update(context.Background(), func(txn store.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := txn.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupFailingFunction: in one group, a function that fails has its
// writes dropped, and the functions after it neither see them nor lose
// their own.
func TestGroupFailingFunction(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	before := st.Stats()
	refused := errors.New("refused")
	var sawA, sawB string
	errs := inOneGroup(t, st,
		func(txn store.Txn) error { return txn.Set([]byte("a"), []byte("1")) },
		func(txn store.Txn) error {
			if err := txn.Set([]byte("b"), []byte("1")); err != nil {
				return err
			}
			if err := txn.Set([]byte("a"), []byte("2")); err != nil {
				return err
			}
			return refused
		},
		func(txn store.Txn) error {
			v, err := txn.Get([]byte("a"))
			if err != nil {
				return err
			}
			sawA = string(v)
			if _, err := txn.Get([]byte("b")); !errors.Is(err, store.ErrNotFound) {
				sawB = fmt.Sprint(err)
			}
			return txn.Set([]byte("c"), v)
		},
	)
	if errs[0] != nil || !errors.Is(errs[1], refused) || errs[2] != nil {
		t.Fatalf("Updates = %v, want nil, refused, nil", errs)
	}
	if sawA != "1" || sawB != "" {
		t.Errorf("the function after the failing one saw a=%q, b: %q; want 1 and not found", sawA, sawB)
	}
	for k, want := range map[string]string{"a": "1", "c": "1"} {
		if v, ok := get(t, st, k); !ok || v != want {
			t.Errorf("%s = %q, %v; want %q", k, v, ok, want)
		}
	}
	if v, ok := get(t, st, "b"); ok {
		t.Errorf("the failing function's write b = %q was committed", v)
	}
	after := st.Stats()
	if n := after.Groups - before.Groups; n != 1 {
		t.Errorf("%d groups committed, want 1", n)
	}
	if n := after.Txns - before.Txns; n != 3 {
		t.Errorf("%d transactions committed, want 3 (the blocking one, a and c)", n)
	}
}

// TestGroupIteratorMerge: an iterator in a group merges the database's
// pages with the writes buffered by earlier functions of the group and
// its own, in key order, in both directions, within its bounds.
func TestGroupIteratorMerge(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	key := func(i int) string { return fmt.Sprintf("p/%03d", i) }
	// The database holds the even keys (enough for several pages), an
	// earlier function of the group sets the odd ones below 60 and
	// deletes the multiples of 10, and the iterating function sets 301
	// and the odd ones from 60 and deletes the multiples of 7.
	model := map[string]string{}
	var kvs []string
	for i := 0; i < 300; i += 2 {
		kvs = append(kvs, key(i), "db")
		model[key(i)] = "db"
	}
	set(t, st, kvs...)
	earlier := func(txn store.Txn) error {
		for i := 1; i < 60; i += 2 {
			if err := txn.Set([]byte(key(i)), []byte("earlier")); err != nil {
				return err
			}
		}
		for i := 0; i < 300; i += 10 {
			if err := txn.Delete([]byte(key(i))); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 1; i < 60; i += 2 {
		model[key(i)] = "earlier"
	}
	for i := 0; i < 300; i += 10 {
		delete(model, key(i))
	}
	own := func(txn store.Txn) error {
		for i := 61; i < 300; i += 2 {
			if err := txn.Set([]byte(key(i)), []byte("own")); err != nil {
				return err
			}
		}
		if err := txn.Set([]byte(key(301)), []byte("own")); err != nil {
			return err
		}
		for i := 0; i < 302; i += 7 {
			if err := txn.Delete([]byte(key(i))); err != nil {
				return err
			}
		}
		return nil
	}
	for i := 61; i < 300; i += 2 {
		model[key(i)] = "own"
	}
	model[key(301)] = "own"
	for i := 0; i < 302; i += 7 {
		delete(model, key(i))
	}
	want := func(lower, upper string, reverse bool) []string {
		var out []string
		for k, v := range model {
			if (lower == "" || k >= lower) && (upper == "" || k < upper) {
				out = append(out, k+"="+v)
			}
		}
		slices.Sort(out)
		if reverse {
			slices.Reverse(out)
		}
		return out
	}
	bound := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	type scan struct {
		lower, upper string
		reverse      bool
	}
	var scans []scan
	for _, b := range [][2]string{{"", ""}, {key(15), key(233)}, {"", key(100)}, {key(290), ""}, {key(40), key(41)}, {key(50), key(50)}} {
		for _, rev := range []bool{false, true} {
			scans = append(scans, scan{b[0], b[1], rev})
		}
	}
	got := make([][]string, len(scans))
	errs := inOneGroup(t, st, earlier, func(txn store.Txn) error {
		if err := own(txn); err != nil {
			return err
		}
		for i, sc := range scans {
			got[i] = nil
			it := txn.Iterate(bound(sc.lower), bound(sc.upper), sc.reverse)
			for it.Next() {
				got[i] = append(got[i], string(it.Key())+"="+string(it.Value()))
			}
			if err := it.Close(); err != nil {
				return err
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, sc := range scans {
		if w := want(sc.lower, sc.upper, sc.reverse); !slices.Equal(got[i], w) {
			t.Errorf("Iterate(%q, %q, reverse %v) = %d keys %v…, want %d keys %v…", sc.lower, sc.upper, sc.reverse,
				len(got[i]), got[i][:min(4, len(got[i]))], len(w), w[:min(4, len(w))])
		}
	}
}

// TestGroupRunsAgainAfterConflict: PostgreSQL refuses a group's commit
// (40001); every function of the group runs again, and each commits once.
func TestGroupRunsAgainAfterConflict(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	set(t, st, "n", "0")
	pgstore.RefuseCommitsForTest(st, 1)
	before := st.Stats()
	var mu sync.Mutex
	runs := map[int]int{}
	incr := func(i int) func(store.Txn) error {
		return func(txn store.Txn) error {
			mu.Lock()
			runs[i]++
			mu.Unlock()
			v, err := txn.Get([]byte("n"))
			if err != nil {
				return err
			}
			n, _ := strconv.Atoi(string(v))
			if err := txn.Set([]byte(fmt.Sprint("by/", i)), v); err != nil {
				return err
			}
			return txn.Set([]byte("n"), []byte(strconv.Itoa(n+1)))
		}
	}
	if err := errors.Join(inOneGroup(t, st, incr(1), incr(2), incr(3))...); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, st, "n"); v != "3" {
		t.Errorf("n = %q, want 3", v)
	}
	for i := 1; i <= 3; i++ {
		if runs[i] != 2 {
			t.Errorf("function %d ran %d times, want 2 (refused, then committed)", i, runs[i])
		}
		if v, _ := get(t, st, fmt.Sprint("by/", i)); v != strconv.Itoa(i-1) {
			t.Errorf("function %d saw n = %q, want %d", i, v, i-1)
		}
	}
	if st.Stats().Reruns == before.Reruns {
		t.Error("Stats.Reruns did not count the group's second run")
	}
}

// TestGroupLostCommitAnswer: a group's COMMIT lands but its answer is
// lost; the marker says it landed, and no function runs again.
func TestGroupLostCommitAnswer(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	pgstore.LoseCommitAnswersForTest(st, true, true)
	var mu sync.Mutex
	runs := map[string]int{}
	write := func(k string) func(store.Txn) error {
		return func(txn store.Txn) error {
			mu.Lock()
			runs[k]++
			mu.Unlock()
			return txn.Set([]byte(k), []byte("v"))
		}
	}
	if err := errors.Join(inOneGroup(t, st, write("a"), write("b"), write("c"))...); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if runs[k] != 1 {
			t.Errorf("%s's function ran %d times, want 1", k, runs[k])
		}
		if _, ok := get(t, st, k); !ok {
			t.Errorf("%s was not committed", k)
		}
	}
}

// rawConn connects to the test database outside any store.
func rawConn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dbURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// TestCachedValueChangedElsewhere: a value the committer cached is
// changed by another process; the next Update that reads it runs again
// and commits what it computed from the new value.
func TestCachedValueChangedElsewhere(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	set(t, st, "x", "1") // cached by the committer
	raw := rawConn(t)
	if _, err := raw.Exec(context.Background(), "UPDATE "+pgstore.SchemaForTest(st)+".kv SET v = '2' WHERE k = 'x'"); err != nil {
		t.Fatal(err)
	}
	before := st.Stats()
	if err := st.Update(context.Background(), func(txn store.Txn) error {
		v, err := txn.Get([]byte("x"))
		if err != nil {
			return err
		}
		return txn.Set([]byte("y"), v)
	}); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, st, "y"); v != "2" {
		t.Errorf("y = %q, want 2: computed from the value another process committed", v)
	}
	if st.Stats().Stale == before.Stale {
		t.Error("Stats.Stale did not count the stale cached value")
	}
}

// TestGuessedAbsentButPresent: once the committer guesses that keys it
// has not seen are absent, a key another process wrote is still read
// with its value.
func TestGuessedAbsentButPresent(t *testing.T) {
	ctx := context.Background()
	var groups []pgstore.CommitInfo
	st, err := pgstore.Open(ctx, dbURL(t), &pgstore.Options{Schema: schemaFor(t, t.Name()),
		OnCommit: func(ci pgstore.CommitInfo) { groups = append(groups, ci) }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pgstore.LockFirstForTest(st, time.Hour)
	teachGuessing(t, st)
	raw := rawConn(t)
	if _, err := raw.Exec(ctx, "INSERT INTO "+pgstore.SchemaForTest(st)+".kv (k, v) VALUES ('elsewhere', 'v')"); err != nil {
		t.Fatal(err)
	}
	before := st.Stats()
	if err := st.Update(ctx, func(txn store.Txn) error {
		v, err := txn.Get([]byte("elsewhere"))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return txn.Set([]byte("seen"), append([]byte("got:"), v...))
	}); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, st, "seen"); v != "got:v" {
		t.Errorf("seen = %q, want got:v", v)
	}
	if got := st.Stats().Stale - before.Stale; got != 1 {
		t.Errorf("Stats.Stale grew by %d, want 1: the key guessed absent first, then read once", got)
	}
	if last := groups[len(groups)-1]; last.Attempts != 2 {
		t.Errorf("the group ran %d times, want 2: the refused guess is read back before the second", last.Attempts)
	}
	// A wrong guess says nothing of other processes: the next groups do
	// not take the commit lock before their functions run.
	set(t, st, "after", "1")
	if last := groups[len(groups)-1]; last.Lock != 0 || last.Attempts != 1 {
		t.Errorf("the group after a wrong guess: %+v, want one attempt and no wait for the lock", last)
	}
}

// teachGuessing commits misses that all turn out absent, which teach
// st's committer to guess that keys it has not seen are absent.
func teachGuessing(t *testing.T, st *pgstore.Store) {
	t.Helper()
	for i := range 300 {
		if err := st.Update(context.Background(), func(txn store.Txn) error {
			k := []byte(fmt.Sprint("new/", i))
			if _, err := txn.Get(k); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("new key: %v", err)
			}
			return txn.Set(k, nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBlindWriteOfPresentKey: a key set without being read, which the
// committer has never seen, is inserted as new while it guesses; when
// another process wrote it, the group runs again and overwrites it, and
// the other writes of the group land once. Before the committer guesses,
// such a key is upserted at once.
func TestBlindWriteOfPresentKey(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		guessing  bool
		wantStale uint64
		wantRuns  int
	}{
		{"guessing", true, 1, 2},
		{"not yet guessing", false, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t, schemaFor(t, t.Name()))
			defer st.Close()
			if tc.guessing {
				teachGuessing(t, st)
			}
			raw := rawConn(t)
			if _, err := raw.Exec(ctx, "INSERT INTO "+pgstore.SchemaForTest(st)+".kv (k, v) VALUES ('elsewhere', 'old')"); err != nil {
				t.Fatal(err)
			}
			before := st.Stats()
			runs := 0
			if err := st.Update(ctx, func(txn store.Txn) error {
				runs++
				if err := txn.Set([]byte("fresh"), []byte("f")); err != nil {
					return err
				}
				return txn.Set([]byte("elsewhere"), []byte("new"))
			}); err != nil {
				t.Fatal(err)
			}
			for k, want := range map[string]string{"elsewhere": "new", "fresh": "f"} {
				if v, _ := get(t, st, k); v != want {
					t.Errorf("%s = %q, want %q", k, v, want)
				}
			}
			if got := st.Stats().Stale - before.Stale; got != tc.wantStale || runs != tc.wantRuns {
				t.Errorf("Stats.Stale grew by %d and the function ran %d times, want %d and %d", got, runs, tc.wantStale, tc.wantRuns)
			}
			// Now cached: a second blind write upserts at once.
			before = st.Stats()
			set(t, st, "elsewhere", "newer")
			if v, _ := get(t, st, "elsewhere"); v != "newer" {
				t.Errorf("elsewhere = %q, want newer", v)
			}
			if st.Stats().Reruns != before.Reruns {
				t.Error("a blind write of a key the committer wrote ran its group again")
			}
		})
	}
}

// TestViewFirstReadChanges: a View's first read runs alone; when the
// database changes before its second, the function runs again inside one
// snapshot and sees both changes.
func TestViewFirstReadChanges(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	set(t, st, "a", "0", "b", "0")
	raw := rawConn(t)
	runs := 0
	var a, b []byte
	err := st.View(context.Background(), func(r store.Reader) error {
		runs++
		var err error
		if a, err = r.Get([]byte("a")); err != nil {
			return err
		}
		if runs == 1 {
			if _, err := raw.Exec(context.Background(), "UPDATE "+pgstore.SchemaForTest(st)+".kv SET v = '1' WHERE k IN ('a', 'b')"); err != nil {
				t.Fatal(err)
			}
		}
		b, err = r.Get([]byte("b"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if runs != 2 || string(a) != "1" || string(b) != "1" {
		t.Errorf("View ran %d times and saw a=%s b=%s; want 2 runs and a=b=1", runs, a, b)
	}
}

// TestDeferredThenBarrier: a deferred group commits without waiting for
// its WAL flush, so the next Update that is not deferred commits with a
// marker even when it writes nothing, and the one after it does not.
func TestDeferredThenBarrier(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	ctx := context.Background()
	raw := rawConn(t)
	markers := func() int {
		var n int
		if err := raw.QueryRow(ctx, "SELECT count(*) FROM "+pgstore.SchemaForTest(st)+".commits").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	nothing := func(store.Txn) error { return nil }
	if err := st.Update(ctx, nothing); err != nil {
		t.Fatal(err)
	}
	n0 := markers()
	if err := st.UpdateDeferred(ctx, func(txn store.Txn) error { return txn.Set([]byte("d"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, nothing); err != nil {
		t.Fatal(err)
	}
	n2 := markers()
	if err := st.Update(ctx, nothing); err != nil {
		t.Fatal(err)
	}
	n3 := markers()
	if n2 != n0+2 || n3 != n2 {
		t.Errorf("markers: %d, then %d after a deferred commit and an empty Update, then %d after another; want %d, %d, %d",
			n0, n2, n3, n0, n0+2, n0+2)
	}
}

// TestOnCommit: Options.OnCommit hears of every group that sent a
// commit, with what it came to and where its time went, and of no other.
func TestOnCommit(t *testing.T) {
	ctx := context.Background()
	setK := func(txn store.Txn) error { return txn.Set([]byte("k"), []byte("v")) }
	for _, tc := range []struct {
		name     string
		attempts int // Options.MaxAttempts
		prepare  func(*pgstore.Store)
		update   func(*pgstore.Store) error
		want     []pgstore.CommitInfo // Run, Commit and Lock are checked apart
		wantErr  error
	}{
		{"committed", 0, nil,
			func(st *pgstore.Store) error { return st.Update(ctx, setK) },
			[]pgstore.CommitInfo{{Txns: 1, Attempts: 1}}, nil},
		{"deferred", 0, nil,
			func(st *pgstore.Store) error { return st.UpdateDeferred(ctx, setK) },
			[]pgstore.CommitInfo{{Txns: 1, Attempts: 1, Deferred: true}}, nil},
		{"ran again after a conflict", 0, func(st *pgstore.Store) { pgstore.RefuseCommitsForTest(st, 1) },
			func(st *pgstore.Store) error { return st.Update(ctx, setK) },
			[]pgstore.CommitInfo{{Txns: 1, Attempts: 2}}, nil},
		{"gave up", 2, func(st *pgstore.Store) { pgstore.RefuseCommitsForTest(st, 100) },
			func(st *pgstore.Store) error { return st.Update(ctx, setK) },
			[]pgstore.CommitInfo{{Attempts: 2}}, store.ErrUnavailable},
		{"a function's own error sends no commit", 0, nil,
			func(st *pgstore.Store) error {
				return st.Update(ctx, func(store.Txn) error { return errors.New("refused") })
			},
			nil, nil},
		{"outcome unknown", 0, func(st *pgstore.Store) { pgstore.LoseCommitAnswersForTest(st, true, false) },
			func(st *pgstore.Store) error { return st.Update(ctx, setK) },
			[]pgstore.CommitInfo{{Attempts: 1}}, store.ErrFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []pgstore.CommitInfo
			st, err := pgstore.Open(ctx, dbURL(t), &pgstore.Options{Schema: schemaFor(t, t.Name()), MaxAttempts: tc.attempts,
				OnCommit: func(ci pgstore.CommitInfo) { got = append(got, ci) }})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if tc.prepare != nil {
				tc.prepare(st)
			}
			_ = tc.update(st)
			if len(got) != len(tc.want) {
				t.Fatalf("OnCommit called %d times (%+v), want %d", len(got), got, len(tc.want))
			}
			for i, ci := range got {
				if ci.Commit <= 0 || ci.Run <= 0 || ci.Lock != 0 {
					t.Errorf("group %d: Run %v, Commit %v, Lock %v: want Run and Commit measured, no wait for the lock", i, ci.Run, ci.Commit, ci.Lock)
				}
				if !errors.Is(ci.Err, tc.wantErr) || (tc.wantErr == nil) != (ci.Err == nil) {
					t.Errorf("group %d: Err %v, want %v", i, ci.Err, tc.wantErr)
				}
				ci.Run, ci.Commit, ci.Err = 0, 0, nil
				if ci != tc.want[i] {
					t.Errorf("group %d: %+v, want %+v", i, ci, tc.want[i])
				}
			}
		})
	}
}

// TestIteratedKeyIsNotBlind: a key an Update found by iterating is
// present, so setting it is an upsert even while the committer guesses
// unseen keys absent: the group commits on its first run.
func TestIteratedKeyIsNotBlind(t *testing.T) {
	ctx := context.Background()
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	teachGuessing(t, st)
	raw := rawConn(t)
	if _, err := raw.Exec(ctx, "INSERT INTO "+pgstore.SchemaForTest(st)+".kv (k, v) VALUES ('queue/1', 'old'), ('queue/2', 'old')"); err != nil {
		t.Fatal(err)
	}
	before := st.Stats()
	runs := 0
	if err := st.Update(ctx, func(txn store.Txn) error {
		runs++
		it := txn.Iterate([]byte("queue/"), []byte("queue0"), false)
		var keys [][]byte
		for it.Next() {
			keys = append(keys, append([]byte(nil), it.Key()...))
		}
		if err := errors.Join(it.Err(), it.Close()); err != nil {
			return err
		}
		for _, k := range keys {
			if err := txn.Set(k, []byte("claimed")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"queue/1", "queue/2"} {
		if v, _ := get(t, st, k); v != "claimed" {
			t.Errorf("%s = %q, want claimed", k, v)
		}
	}
	if runs != 1 || st.Stats().Reruns != before.Reruns {
		t.Errorf("the function ran %d times (%d reruns): a key read by an iterator was inserted blind", runs, st.Stats().Reruns-before.Reruns)
	}
}
