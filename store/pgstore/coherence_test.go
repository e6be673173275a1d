package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// copyKey is an Update that reads from and writes to as the value of
// from with a prefix: what it read is what it wrote.
func copyKey(from, to string) func(store.Txn) error {
	return func(txn store.Txn) error {
		v, err := txn.Get([]byte(from))
		if err != nil {
			return err
		}
		return txn.Set([]byte(to), append([]byte("got:"), v...))
	}
}

// twoProcesses opens two stores on one new schema, as two processes
// would, closed when the test ends; a keeps taking the commit lock first
// once it has seen b's change.
func twoProcesses(t *testing.T) (schema string, a, b *pgstore.Store) {
	schema = schemaFor(t, t.Name())
	a, b = open(t, schema), open(t, schema)
	t.Cleanup(func() { a.Close(); b.Close() })
	pgstore.LockFirstForTest(a, time.Hour)
	return schema, a, b
}

// TestChangesFromAnotherProcess: a store learns the keys another store
// on the same schema changed from the log of changed keys. The first
// time, its cached value fails the check and the group runs again; from
// then on it takes the commit lock first and reads the other's changes
// before its functions run, so that they see current values and commit
// at once.
func TestChangesFromAnotherProcess(t *testing.T) {
	_, a, b := twoProcesses(t)
	ctx := context.Background()

	set(t, a, "x", "1") // cached by a
	set(t, b, "x", "2")
	before := a.Stats()
	if err := a.Update(ctx, copyKey("x", "y")); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, a, "y"); v != "got:2" {
		t.Fatalf("y = %q, want got:2", v)
	}
	if a.Stats().Stale != before.Stale+1 {
		t.Errorf("Stale went from %d to %d, want one stale run: the test no longer tests the optimistic first attempt", before.Stale, a.Stats().Stale)
	}

	// a now takes the lock first: b's next changes reach a's cache
	// before a's functions run.
	set(t, b, "x", "3")
	if err := b.Update(ctx, func(txn store.Txn) error { return txn.Delete([]byte("y")) }); err != nil {
		t.Fatal(err)
	}
	before = a.Stats()
	if err := a.Update(ctx, func(txn store.Txn) error {
		if _, err := txn.Get([]byte("y")); err != store.ErrNotFound {
			t.Errorf("y after b deleted it: %v, want ErrNotFound", err)
		}
		return copyKey("x", "z")(txn)
	}); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, a, "z"); v != "got:3" {
		t.Errorf("z = %q, want got:3", v)
	}
	if st := a.Stats(); st.Reruns != before.Reruns {
		t.Errorf("the Update ran %d more times: with the lock first, it should commit at once", st.Reruns-before.Reruns)
	}
}

// TestChangesSwept: a store whose next change in the log was swept
// forgets its whole cache rather than trust it.
func TestChangesSwept(t *testing.T) {
	schema, a, b := twoProcesses(t)
	ctx := context.Background()

	set(t, a, "x", "1", "w", "1")
	set(t, b, "w", "2") // a learns of b, and takes the lock first from now on
	if err := a.Update(ctx, copyKey("w", "v")); err != nil {
		t.Fatal(err)
	}
	set(t, b, "x", "2")
	set(t, b, "other", "1")
	raw := rawConn(t)
	if _, err := raw.Exec(ctx, "DELETE FROM "+schema+".changes WHERE seq < (SELECT max(seq) FROM "+schema+".changes)"); err != nil {
		t.Fatal(err)
	}
	before := a.Stats()
	if err := a.Update(ctx, copyKey("x", "y")); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, a, "y"); v != "got:2" {
		t.Errorf("y = %q, want got:2", v)
	}
	if st := a.Stats(); st.Reruns != before.Reruns {
		t.Errorf("the Update ran %d more times: the swept log should have emptied the cache first", st.Reruns-before.Reruns)
	}
}

// TestSessionSettings: the pool's sessions run with the settings the
// store relies on, among them a bound on how long a session may idle
// inside a transaction (which holds the commit lock).
func TestSessionSettings(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	for name, want := range map[string]string{"enable_seqscan": "off", "jit": "off", "plan_cache_mode": "force_generic_plan", "idle_in_transaction_session_timeout": "30s"} {
		if got, err := pgstore.SettingForTest(st, name); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
}

// TestOnCommitLockWait: a group that takes the commit lock before its
// functions run reports the wait apart from the functions' time.
func TestOnCommitLockWait(t *testing.T) {
	ctx := context.Background()
	schema := schemaFor(t, t.Name())
	var got []pgstore.CommitInfo
	a, err := pgstore.Open(ctx, dbURL(t), &pgstore.Options{Schema: schema,
		OnCommit: func(ci pgstore.CommitInfo) { got = append(got, ci) }})
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, schema)
	t.Cleanup(func() { a.Close(); b.Close() })
	pgstore.LockFirstForTest(a, time.Hour)

	set(t, a, "x", "1")
	set(t, b, "x", "2")
	set(t, a, "y", "1") // a sees b's change: its groups take the lock first from now on
	if got[len(got)-1].Lock != 0 {
		t.Errorf("a group run before a saw another process waited %v for the lock", got[len(got)-1].Lock)
	}
	set(t, a, "y", "2")
	if last := got[len(got)-1]; last.Lock <= 0 || last.Txns != 1 {
		t.Errorf("a group that took the lock first: %+v, want its wait for the lock measured", last)
	}
}

// TestChangesBacklogForgotten: a store that comes back after another
// committed more groups than it reads from the log forgets its cache
// instead of reading every key they changed under the commit lock, and
// still computes from current values; a short backlog is read.
func TestChangesBacklogForgotten(t *testing.T) {
	_, a, b := twoProcesses(t)
	ctx := context.Background()
	set(t, a, "x", "0") // cached by a
	for i := range 20 {
		set(t, b, "x", fmt.Sprint(i+1))
	}
	resets := pgstore.CacheResetsForTest(a)
	if err := a.Update(ctx, copyKey("x", "y")); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, a, "y"); v != "got:20" {
		t.Errorf("y = %q, want got:20", v)
	}
	if got := pgstore.CacheResetsForTest(a) - resets; got != 1 {
		t.Errorf("the cache was forgotten %d times after 20 groups of another process, want once", got)
	}

	// One group later: read, not forgotten, and so current before the
	// function runs.
	set(t, b, "x", "21")
	resets = pgstore.CacheResetsForTest(a)
	reruns := a.Stats().Reruns
	if err := a.Update(ctx, copyKey("x", "z")); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, a, "z"); v != "got:21" {
		t.Errorf("z = %q, want got:21", v)
	}
	if got := pgstore.CacheResetsForTest(a) - resets; got != 0 {
		t.Errorf("the cache was forgotten after one group of another process (%d times)", got)
	}
	if got := a.Stats().Reruns - reruns; got != 0 {
		t.Errorf("the Update ran %d more times: the change read from the log should have made its first run current", got)
	}
}
