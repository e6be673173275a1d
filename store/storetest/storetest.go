// Package storetest is the conformance suite for [store.Store] drivers.
//
// A driver proves it keeps the contract documented in package store by
// calling [Run] from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			st, err := mydriver.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return st
//		})
//	}
//
// A durable driver also calls [RunDurable], which runs everything Run does
// and then checks that committed data, and only committed data, survives a
// Close and reopen of the same directory.
//
// The suite covers: not-found errors, empty values, bytewise ordering and
// reverse iteration under every combination of bounds, prefix scans,
// read-your-writes, aborted transactions, snapshot reads, concurrent
// read-modify-write without lost updates, spurious retries, context
// cancellation, Close, and ownership of the slices passing through Get and
// Set. Run it under -race.
//
// storetest imports package testing, which is why it is a package of its own:
// production binaries that import a driver do not link it.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
)

// Run runs the conformance suite. open must return a new, empty store each
// time it is called; the suite closes every store it opens. Each check is a
// subtest, so -run selects them by name (e.g. -run 'Conformance/Ordering').
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			t.Cleanup(func() { _ = st.Close() })
			tc.fn(t, st)
		})
	}
}

// RunDurable runs [Run], each test against a store opened on a fresh
// directory from t.TempDir, and then the durability checks, which open a
// store on a directory, Close it, open it again on the same directory and
// check its contents. open(t, dir) must open the store kept in dir,
// creating it if dir is empty, and must not return until the store is
// usable; the suite closes every store it opens.
//
// A driver that runs on a virtual file system can ignore that dir exists on
// disk and use it as a name in its own file system, as long as reopening the
// same name finds the same data.
func RunDurable(t *testing.T, open func(t *testing.T, dir string) store.Store) {
	t.Helper()
	Run(t, func(t *testing.T) store.Store { return open(t, t.TempDir()) })
	for _, tc := range durableTests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, open)
		})
	}
}

var tests = []struct {
	name string
	fn   func(*testing.T, store.Store)
}{
	{"NotFound", testNotFound},
	{"EmptyValue", testEmptyValue},
	{"Overwrite", testOverwrite},
	{"Ordering", testOrdering},
	{"PrefixScan", testPrefixScan},
	{"ReadYourWrites", testReadYourWrites},
	{"WriteWhileIterating", testWriteWhileIterating},
	{"Abort", testAbort},
	{"ErrorUnchanged", testErrorUnchanged},
	{"Snapshot", testSnapshot},
	{"ConsistentViews", testConsistentViews},
	{"ConcurrentIncrements", testConcurrentIncrements},
	{"RetriedAttemptsLeaveNoTrace", testRetriedAttempts},
	{"ContextCanceled", testContextCanceled},
	{"ContextCanceledDuringUpdate", testContextCanceledDuring},
	{"SetCopiesArguments", testSetCopies},
	{"GetReturnsCopy", testGetReturnsCopy},
	{"ManyKeys", testManyKeys},
	{"CommitHooks", testCommitHooks},
	{"CommitHookError", testCommitHookError},
	{"Deferred", testDeferred},
	{"Close", testClose},
}

var durableTests = []struct {
	name string
	fn   func(*testing.T, func(*testing.T, string) store.Store)
}{
	{"Reopen", testReopen},
	{"ReopenAfterConcurrentWriters", testReopenConcurrent},
}

// kv is one key and value as seen by a scan.
type kv struct{ k, v string }

func (p kv) String() string { return fmt.Sprintf("%x=%q", p.k, p.v) }

// update runs fn in st.Update and fails the test on error.
func update(t *testing.T, st store.Store, fn func(store.Txn) error) {
	t.Helper()
	if err := st.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// view runs fn in st.View and fails the test on error.
func view(t *testing.T, st store.Store, fn func(store.Reader) error) {
	t.Helper()
	if err := st.View(t.Context(), fn); err != nil {
		t.Fatalf("View: %v", err)
	}
}

// put writes the pairs in one transaction.
func put(t *testing.T, st store.Store, pairs ...kv) {
	t.Helper()
	update(t, st, func(tx store.Txn) error {
		for _, p := range pairs {
			if err := tx.Set([]byte(p.k), []byte(p.v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// scan collects an iteration, copying keys and values.
func scan(r store.Reader, lower, upper []byte, reverse bool) ([]kv, error) {
	it := r.Iterate(lower, upper, reverse)
	var out []kv
	for it.Next() {
		out = append(out, kv{string(it.Key()), string(it.Value())})
	}
	if err := it.Close(); err != nil {
		return out, fmt.Errorf("iterate [%x, %x) reverse=%v: %w", lower, upper, reverse, err)
	}
	return out, nil
}

// all is the committed contents of st, in order.
func all(t *testing.T, st store.Store) []kv {
	t.Helper()
	var out []kv
	view(t, st, func(r store.Reader) error {
		var err error
		out, err = scan(r, nil, nil, false)
		return err
	})
	return out
}

// model is the expected contents: a map, sorted on demand.
type model map[string]string

func (m model) scan(lower, upper []byte, reverse bool) []kv {
	var out []kv
	for k, v := range m {
		if lower != nil && k < string(lower) || upper != nil && k >= string(upper) {
			continue
		}
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return bytes.Compare([]byte(a.k), []byte(b.k)) })
	if reverse {
		slices.Reverse(out)
	}
	return out
}

func getString(r store.Reader, key string) (string, error) {
	v, err := r.Get([]byte(key))
	return string(v), err
}

func testNotFound(t *testing.T, st store.Store) {
	put(t, st, kv{"a", "1"}, kv{"c", "3"})
	check := func(r store.Reader) error {
		for _, k := range []string{"", "b", "a\x00", "aa", "c\xff", "d"} {
			v, err := r.Get([]byte(k))
			if !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Get(%x) = %q, %v; want an error matching store.ErrNotFound", k, v, err)
			}
		}
		return nil
	}
	view(t, st, check)
	update(t, st, func(tx store.Txn) error { return check(tx) })
	update(t, st, func(tx store.Txn) error {
		if err := tx.Delete([]byte("a")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("never-existed")); err != nil {
			t.Errorf("Delete of a missing key: %v", err)
		}
		if _, err := tx.Get([]byte("a")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get after Delete in the same txn: %v, want store.ErrNotFound", err)
		}
		return nil
	})
	view(t, st, func(r store.Reader) error {
		if _, err := r.Get([]byte("a")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get of a deleted key: %v, want store.ErrNotFound", err)
		}
		return nil
	})
}

func testEmptyValue(t *testing.T, st store.Store) {
	update(t, st, func(tx store.Txn) error {
		if err := tx.Set([]byte("empty"), []byte{}); err != nil {
			return err
		}
		if err := tx.Set([]byte("nil"), nil); err != nil {
			return err
		}
		for _, k := range []string{"empty", "nil"} {
			v, err := tx.Get([]byte(k))
			if err != nil || len(v) != 0 {
				t.Errorf("in txn: Get(%q) = %q, %v; want empty value, nil", k, v, err)
			}
		}
		return nil
	})
	view(t, st, func(r store.Reader) error {
		for _, k := range []string{"empty", "nil"} {
			v, err := r.Get([]byte(k))
			if err != nil || len(v) != 0 {
				t.Errorf("Get(%q) = %q, %v; want empty value, nil", k, v, err)
			}
		}
		got, err := scan(r, nil, nil, false)
		want := []kv{{"empty", ""}, {"nil", ""}}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("scan = %v, %v; want %v", got, err, want)
		}
		return nil
	})
}

func testOverwrite(t *testing.T, st store.Store) {
	put(t, st, kv{"k", "first"})
	put(t, st, kv{"k", "second"})
	update(t, st, func(tx store.Txn) error {
		if err := tx.Set([]byte("k"), []byte("third")); err != nil {
			return err
		}
		return tx.Set([]byte("k"), []byte("fourth"))
	})
	if got, want := all(t, st), []kv{{"k", "fourth"}}; !slices.Equal(got, want) {
		t.Errorf("contents = %v, want %v", got, want)
	}
}

// orderingKeys exercises bytewise order where it differs from other orders:
// the empty key, 0x00 and 0xff bytes, prefixes of other keys, and bytes
// above 0x7f (which a signed-char comparison gets wrong).
var orderingKeys = []string{
	"", "\x00", "\x00\x00", "\x00\xff", "\x01", "a", "a\x00", "a\x00\x00", "a\x01",
	"a\x7f", "a\x80", "a\xff", "a\xff\xff", "ab", "b", "\x7f", "\x80", "\xfe\xff",
	"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff",
}

// boundKeys are the bounds tried against orderingKeys: keys present, keys
// between, and keys outside.
var boundKeys = []string{"", "\x00", "\x00\x01", "a", "a\x00", "a\xff", "aa", "\x80", "\xff", "\xff\xff", "\xff\xff\xff\xff"}

func testOrdering(t *testing.T, st store.Store) {
	m := model{}
	// Insert in a scrambled order, over two transactions.
	perm := slices.Clone(orderingKeys)
	slices.Reverse(perm[:len(perm)/2])
	var first, second []kv
	for i, k := range perm {
		p := kv{k, fmt.Sprintf("v%d", i)}
		m[k] = p.v
		if i%2 == 0 {
			first = append(first, p)
		} else {
			second = append(second, p)
		}
	}
	put(t, st, first...)
	put(t, st, second...)
	view(t, st, func(r store.Reader) error {
		checkScans(t, "View", r, m)
		return nil
	})
	// The same scans through a transaction with no writes of its own.
	update(t, st, func(tx store.Txn) error {
		checkScans(t, "Update", tx, m)
		return nil
	})
}

// checkScans compares every combination of bounds and direction with m.
func checkScans(t *testing.T, where string, r store.Reader, m model) {
	t.Helper()
	var bounds [][]byte
	bounds = append(bounds, nil)
	for _, b := range boundKeys {
		bounds = append(bounds, []byte(b))
	}
	for _, lo := range bounds {
		for _, hi := range bounds {
			for _, rev := range []bool{false, true} {
				got, err := scan(r, lo, hi, rev)
				want := m.scan(lo, hi, rev)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%s: Iterate(%s, %s, reverse=%v) = %v, %v; want %v",
						where, showBound(lo), showBound(hi), rev, got, err, want)
				}
			}
		}
	}
}

func showBound(b []byte) string {
	if b == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", b)
}

func testPrefixScan(t *testing.T, st store.Store) {
	m := model{}
	for _, k := range []string{
		"p", "p\x00", "p/", "p/a", "p/b", "p/\xff", "p/\xff\xff", "p0", "q",
		"\xff", "\xff\x00", "\xff\xff", "\xff\xff\x01",
	} {
		m[k] = "v" + k
	}
	var pairs []kv
	for k, v := range m {
		pairs = append(pairs, kv{k, v})
	}
	put(t, st, pairs...)
	view(t, st, func(r store.Reader) error {
		for _, prefix := range []string{"p", "p/", "p/\xff", "\xff", "\xff\xff", "x"} {
			for _, rev := range []bool{false, true} {
				got, err := scan(r, []byte(prefix), store.PrefixEnd([]byte(prefix)), rev)
				var want []kv
				for _, p := range m.scan(nil, nil, rev) {
					if len(p.k) >= len(prefix) && p.k[:len(prefix)] == prefix {
						want = append(want, p)
					}
				}
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("prefix %q reverse=%v: got %v, %v; want %v", prefix, rev, got, err, want)
				}
			}
		}
		return nil
	})
}

func testReadYourWrites(t *testing.T, st store.Store) {
	base := model{}
	var pairs []kv
	for _, k := range orderingKeys {
		base[k] = "base"
		pairs = append(pairs, kv{k, "base"})
	}
	put(t, st, pairs...)

	update(t, st, func(tx store.Txn) error {
		m := model{}
		for k, v := range base {
			m[k] = v
		}
		// Overwrite some keys, delete others, add new ones between and
		// around them, and delete a key that was only just added.
		for i, k := range orderingKeys {
			switch i % 3 {
			case 0:
				if err := tx.Set([]byte(k), []byte("txn")); err != nil {
					return err
				}
				m[k] = "txn"
			case 1:
				if err := tx.Delete([]byte(k)); err != nil {
					return err
				}
				delete(m, k)
			}
			nk := k + "\x00new"
			if err := tx.Set([]byte(nk), []byte("new")); err != nil {
				return err
			}
			m[nk] = "new"
		}
		if err := tx.Delete([]byte("a\x00new")); err != nil {
			return err
		}
		delete(m, "a\x00new")

		for _, k := range append(slices.Clone(orderingKeys), "a\x00new", "b\x00new", "zz") {
			got, err := getString(tx, k)
			want, ok := m[k]
			switch {
			case ok && (err != nil || got != want):
				t.Errorf("Get(%q) in txn = %q, %v; want %q", k, got, err, want)
			case !ok && !errors.Is(err, store.ErrNotFound):
				t.Errorf("Get(%q) in txn = %q, %v; want store.ErrNotFound", k, got, err)
			}
		}
		checkScans(t, "txn with writes", tx, m)
		return nil
	})
}

// testWriteWhileIterating checks the common pattern of rewriting or deleting
// the keys of a range while iterating it: the iteration must finish without
// error and visit every key that was there when it started exactly once, and
// the writes must land. (Whether an iterator sees writes made after it was
// created is up to the driver.)
func testWriteWhileIterating(t *testing.T, st store.Store) {
	const n = 400
	var pairs []kv
	for i := range n {
		pairs = append(pairs, kv{fmt.Sprintf("k%04d", i), "old"})
	}
	put(t, st, pairs...)
	pass := func(reverse bool, want []string, write func(tx store.Txn, i int, k []byte) error) {
		t.Helper()
		update(t, st, func(tx store.Txn) error {
			it := tx.Iterate([]byte("k"), store.PrefixEnd([]byte("k")), reverse)
			defer it.Close()
			var seen []string
			for it.Next() {
				k := bytes.Clone(it.Key())
				seen = append(seen, string(k))
				i, _ := strconv.Atoi(string(k[1:]))
				if err := write(tx, i, k); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				t.Errorf("reverse=%v: iterating while writing: %v", reverse, err)
			}
			if reverse {
				slices.Reverse(seen)
			}
			if !slices.Equal(seen, want) {
				t.Errorf("reverse=%v: visited %d keys, want each of %d once\ngot  %q\nwant %q",
					reverse, len(seen), len(want), seen, want)
			}
			return nil
		})
	}
	var want []string
	for _, p := range pairs {
		want = append(want, p.k)
	}
	// Forward: delete the even keys, rewrite the odd ones, add keys
	// between them.
	pass(false, want, func(tx store.Txn, i int, k []byte) error {
		if err := tx.Set(append(k, 'x'), []byte("added")); err != nil {
			return err
		}
		if i%2 == 0 {
			return tx.Delete(k)
		}
		return tx.Set(k, []byte("rewritten"))
	})
	m := model{}
	want = want[:0]
	for i := range n {
		k := fmt.Sprintf("k%04d", i)
		m[k+"x"] = "added"
		want = append(want, k+"x")
		if i%2 == 1 {
			m[k] = "rewritten"
			want = append(want, k)
		}
	}
	slices.Sort(want)
	// Reverse: delete every other remaining key, rewrite the rest.
	pass(true, want, func(tx store.Txn, i int, k []byte) error {
		if k[len(k)-1] == 'x' || i%4 == 1 {
			delete(m, string(k))
			return tx.Delete(k)
		}
		m[string(k)] = "again"
		return tx.Set(k, []byte("again"))
	})
	if got := all(t, st); !slices.Equal(got, m.scan(nil, nil, false)) {
		t.Errorf("after rewriting while iterating: %v\nwant %v", got, m.scan(nil, nil, false))
	}
}

var errAbort = errors.New("storetest: abort")

func testAbort(t *testing.T, st store.Store) {
	put(t, st, kv{"keep", "1"}, kv{"doomed", "2"})
	before := all(t, st)
	err := st.Update(t.Context(), func(tx store.Txn) error {
		for _, op := range []error{
			tx.Set([]byte("keep"), []byte("changed")),
			tx.Delete([]byte("doomed")),
			tx.Set([]byte("new"), []byte("3")),
		} {
			if op != nil {
				return op
			}
		}
		return errAbort
	})
	if !errors.Is(err, errAbort) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	if got := all(t, st); !slices.Equal(got, before) {
		t.Errorf("after an aborted txn: %v, want %v", got, before)
	}
	// A later transaction must not inherit the aborted one's writes either.
	update(t, st, func(tx store.Txn) error {
		got, err := scan(tx, nil, nil, false)
		if err != nil || !slices.Equal(got, before) {
			t.Errorf("txn after an aborted txn sees %v, %v; want %v", got, err, before)
		}
		return nil
	})
}

func testErrorUnchanged(t *testing.T, st store.Store) {
	if err := st.View(t.Context(), func(store.Reader) error { return errAbort }); err != errAbort {
		t.Errorf("View returned %v, want the function's error unchanged", err)
	}
	if err := st.Update(t.Context(), func(store.Txn) error { return errAbort }); err != errAbort {
		t.Errorf("Update returned %v, want the function's error unchanged", err)
	}
}

// testSnapshot starts an Update from inside a View and checks that the View
// does not see it. The View does not wait for the Update, because a driver
// may (legitimately) make writers wait for readers.
func testSnapshot(t *testing.T, st store.Store) {
	put(t, st, kv{"x", "before"}, kv{"y", "before"})
	done := make(chan error, 1)
	view(t, st, func(r store.Reader) error {
		if v, err := getString(r, "x"); err != nil || v != "before" {
			t.Errorf("Get(x) = %q, %v; want before", v, err)
		}
		go func() {
			done <- st.Update(context.Background(), func(tx store.Txn) error {
				if err := tx.Set([]byte("x"), []byte("after")); err != nil {
					return err
				}
				return tx.Set([]byte("y"), []byte("after"))
			})
		}()
		for range 100 {
			got, err := scan(r, nil, nil, false)
			want := []kv{{"x", "before"}, {"y", "before"}}
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("View sees %v, %v; want %v", got, err, want)
			}
		}
		return nil
	})
	if err := <-done; err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got, want := all(t, st), []kv{{"x", "after"}, {"y", "after"}}; !slices.Equal(got, want) {
		t.Errorf("after Update: %v, want %v", got, want)
	}
}

// testConsistentViews keeps an invariant (a and b always equal, and the
// sum over the "n/" keys equal to a) with concurrent Updates, and checks
// that concurrent Views never see it broken.
func testConsistentViews(t *testing.T, st store.Store) {
	put(t, st, kv{"a", "0"}, kv{"b", "0"})
	const writers, rounds, readers = 4, 25, 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var readerWG sync.WaitGroup
	for range readers {
		readerWG.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := st.View(context.Background(), func(r store.Reader) error {
					a, err1 := getString(r, "a")
					b, err2 := getString(r, "b")
					if err := errors.Join(err1, err2); err != nil {
						return err
					}
					if a != b {
						return fmt.Errorf("view saw a=%s b=%s", a, b)
					}
					kvs, err := scan(r, []byte("n/"), store.PrefixEnd([]byte("n/")), false)
					if err != nil {
						return err
					}
					if fmt.Sprint(len(kvs)) != a {
						return fmt.Errorf("view saw a=%s but %d n/ keys", a, len(kvs))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				err := st.Update(context.Background(), func(tx store.Txn) error {
					a, err := getString(tx, "a")
					if err != nil {
						return err
					}
					n, err := strconv.Atoi(a)
					if err != nil {
						return err
					}
					next := []byte(fmt.Sprint(n + 1))
					if err := tx.Set([]byte("a"), next); err != nil {
						return err
					}
					if err := tx.Set([]byte(fmt.Sprintf("n/%d/%d", w, i)), nil); err != nil {
						return err
					}
					return tx.Set([]byte("b"), next)
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readerWG.Wait()
	view(t, st, func(r store.Reader) error {
		if a, err := getString(r, "a"); err != nil || a != fmt.Sprint(writers*rounds) {
			t.Errorf("a = %q, %v; want %d", a, err, writers*rounds)
		}
		return nil
	})
}

// testConcurrentIncrements is the lost-update test: many goroutines each
// read-modify-write one shared counter, and every increment must count.
func testConcurrentIncrements(t *testing.T, st store.Store) {
	const goroutines, each = 32, 10
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				err := st.Update(context.Background(), func(tx store.Txn) error {
					n := 0
					switch v, err := tx.Get([]byte("counter")); {
					case errors.Is(err, store.ErrNotFound):
					case err != nil:
						return err
					default:
						if n, err = strconv.Atoi(string(v)); err != nil {
							return err
						}
					}
					if err := tx.Set([]byte("counter"), []byte(fmt.Sprint(n+1))); err != nil {
						return err
					}
					return tx.Set([]byte(fmt.Sprintf("g%02d/%02d", g, i)), []byte("x"))
				})
				if err != nil {
					t.Errorf("goroutine %d: Update: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
	got := all(t, st)
	if want := goroutines*each + 1; len(got) != want {
		t.Errorf("%d keys, want %d", len(got), want)
	}
	view(t, st, func(r store.Reader) error {
		if v, err := getString(r, "counter"); err != nil || v != fmt.Sprint(goroutines*each) {
			t.Errorf("counter = %q, %v; want %d (lost updates)", v, err, goroutines*each)
		}
		return nil
	})
}

// testRetriedAttempts counts attempts (something a real caller must not
// rely on) to check that only the final attempt's writes are committed,
// whatever the number of attempts the driver made.
func testRetriedAttempts(t *testing.T, st store.Store) {
	for i := range 50 {
		attempts := 0
		update(t, st, func(tx store.Txn) error {
			attempts++
			if attempts > 1 {
				// A retry must not see the earlier attempt's writes.
				if _, err := tx.Get([]byte(fmt.Sprintf("r%02d/attempt%d", i, attempts-1))); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("attempt %d sees attempt %d's write: %v", attempts, attempts-1, err)
				}
			}
			return tx.Set([]byte(fmt.Sprintf("r%02d/attempt%d", i, attempts)), nil)
		})
		var got []kv
		view(t, st, func(r store.Reader) error {
			var err error
			got, err = scan(r, []byte(fmt.Sprintf("r%02d/", i)), store.PrefixEnd([]byte(fmt.Sprintf("r%02d/", i))), false)
			return err
		})
		want := []kv{{fmt.Sprintf("r%02d/attempt%d", i, attempts), ""}}
		if !slices.Equal(got, want) {
			t.Fatalf("after %d attempts: %v, want only the last attempt's write %v", attempts, got, want)
		}
	}
}

func testContextCanceled(t *testing.T, st store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	if err := st.View(ctx, func(store.Reader) error { ran = true; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("View with a canceled ctx = %v, want context.Canceled", err)
	}
	err := st.Update(ctx, func(tx store.Txn) error { ran = true; return tx.Set([]byte("k"), nil) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update with a canceled ctx = %v, want context.Canceled", err)
	}
	if ran {
		t.Error("a function ran under a canceled ctx")
	}
	if got := all(t, st); len(got) != 0 {
		t.Errorf("canceled Update wrote %v", got)
	}
}

// testContextCanceledDuring cancels ctx from inside fn. The driver may
// abort (the commit has not begun) or commit (it began as fn returned), but
// its answer must match what it did.
func testContextCanceledDuring(t *testing.T, st store.Store) {
	for i := range 20 {
		ctx, cancel := context.WithCancel(t.Context())
		key := fmt.Sprintf("k%02d", i)
		err := st.Update(ctx, func(tx store.Txn) error {
			cancel()
			return tx.Set([]byte(key), nil)
		})
		var present bool
		view(t, st, func(r store.Reader) error {
			_, gerr := r.Get([]byte(key))
			present = gerr == nil
			return nil
		})
		switch {
		case err == nil && !present:
			t.Errorf("Update returned nil but %s was not written", key)
		case err != nil && present:
			t.Errorf("Update returned %v but %s was written", err, key)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Errorf("Update returned %v, want nil or context.Canceled", err)
		}
	}
}

func testSetCopies(t *testing.T, st store.Store) {
	key := []byte("key")
	val := []byte("value")
	update(t, st, func(tx store.Txn) error {
		k, v := bytes.Clone(key), bytes.Clone(val)
		if err := tx.Set(k, v); err != nil {
			return err
		}
		copy(k, "XXX")
		copy(v, "XXXXX")
		if got, err := getString(tx, "key"); err != nil || got != "value" {
			t.Errorf("in txn, after mutating the Set arguments: Get = %q, %v; want value", got, err)
		}
		if _, err := tx.Get([]byte("XXX")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("mutating the key passed to Set changed the stored key")
		}
		// Delete must copy its key too: mutate it into another key.
		d := []byte("gone")
		if err := tx.Set(d, nil); err != nil {
			return err
		}
		if err := tx.Delete(d); err != nil {
			return err
		}
		copy(d, "key!")
		return nil
	})
	if got, want := all(t, st), []kv{{"key", "value"}}; !slices.Equal(got, want) {
		t.Errorf("after mutating the Set arguments: %v, want %v", got, want)
	}
}

func testGetReturnsCopy(t *testing.T, st store.Store) {
	put(t, st, kv{"k", "value"})
	mutate := func(r store.Reader) error {
		v, err := r.Get([]byte("k"))
		if err != nil {
			return err
		}
		copy(v, "XXXXX")
		if v, err := getString(r, "k"); err != nil || v != "value" {
			t.Errorf("after mutating a Get result: Get = %q, %v; want value", v, err)
		}
		return nil
	}
	view(t, st, mutate)
	update(t, st, func(tx store.Txn) error { return mutate(tx) })
	update(t, st, func(tx store.Txn) error {
		if err := tx.Set([]byte("k"), []byte("value")); err != nil {
			return err
		}
		return mutate(tx) // the value now comes from the txn's own writes
	})
	if got, want := all(t, st), []kv{{"k", "value"}}; !slices.Equal(got, want) {
		t.Errorf("after mutating Get results: %v, want %v", got, want)
	}
}

// testManyKeys writes enough keys, in one transaction and across several,
// to cross any internal block or chunk boundaries, and checks the scans.
func testManyKeys(t *testing.T, st store.Store) {
	const n = 5000
	m := model{}
	update(t, st, func(tx store.Txn) error {
		for i := 0; i < n; i += 2 {
			k := fmt.Sprintf("key/%06d", i)
			m[k] = k
			if err := tx.Set([]byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	for b := range 10 {
		update(t, st, func(tx store.Txn) error {
			for i := 1 + b*2; i < n; i += 20 {
				k := fmt.Sprintf("key/%06d", i)
				m[k] = k
				if err := tx.Set([]byte(k), []byte(k)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	view(t, st, func(r store.Reader) error {
		for _, rev := range []bool{false, true} {
			got, err := scan(r, nil, nil, rev)
			if err != nil || !slices.Equal(got, m.scan(nil, nil, rev)) {
				t.Errorf("reverse=%v: %d keys, %v; want %d", rev, len(got), err, len(m))
			}
		}
		lo, hi := []byte("key/001234"), []byte("key/004321")
		if got, err := scan(r, lo, hi, true); err != nil || !slices.Equal(got, m.scan(lo, hi, true)) {
			t.Errorf("bounded reverse scan: %d keys, %v", len(got), err)
		}
		return nil
	})
}

func testClose(t *testing.T, st store.Store) {
	put(t, st, kv{"k", "v"})
	if err := st.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := st.Close(); !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close = %v, want store.ErrClosed", err)
	}
	ran := false
	if err := st.View(t.Context(), func(store.Reader) error { ran = true; return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("View after Close = %v, want store.ErrClosed", err)
	}
	if err := st.Update(t.Context(), func(store.Txn) error { ran = true; return nil }); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Update after Close = %v, want store.ErrClosed", err)
	}
	if ran {
		t.Error("a function ran after Close")
	}
}

func testReopen(t *testing.T, open func(*testing.T, string) store.Store) {
	dir := t.TempDir()
	st := open(t, dir)
	m := model{}
	for i := range 20 {
		update(t, st, func(tx store.Txn) error {
			for j := range 10 {
				k := fmt.Sprintf("k%02d/%02d", i, j)
				v := fmt.Sprintf("v%d", i*j)
				if j == 0 {
					v = "" // an empty value must survive as a value
				}
				m[k] = v
				if err := tx.Set([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
			if i > 0 {
				k := fmt.Sprintf("k%02d/05", i-1)
				delete(m, k)
				return tx.Delete([]byte(k))
			}
			return nil
		})
	}
	if err := st.Update(t.Context(), func(tx store.Txn) error {
		if err := tx.Set([]byte("aborted"), nil); err != nil {
			return err
		}
		return errAbort
	}); !errors.Is(err, errAbort) {
		t.Fatalf("aborted Update = %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	for round := range 2 {
		st = open(t, dir)
		if got, want := all(t, st), m.scan(nil, nil, false); !slices.Equal(got, want) {
			t.Fatalf("reopen %d: %d keys, want %d\ngot  %v\nwant %v", round, len(got), len(want), got, want)
		}
		put(t, st, kv{fmt.Sprintf("round%d", round), "x"})
		m[fmt.Sprintf("round%d", round)] = "x"
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
}

func testReopenConcurrent(t *testing.T, open func(*testing.T, string) store.Store) {
	dir := t.TempDir()
	st := open(t, dir)
	const goroutines, each = 16, 8
	var mu sync.Mutex
	m := model{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("g%02d/%02d", g, i)
				err := st.Update(context.Background(), func(tx store.Txn) error {
					return tx.Set([]byte(k), []byte(k))
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
				mu.Lock()
				m[k] = k
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st = open(t, dir)
	defer st.Close()
	if got, want := all(t, st), m.scan(nil, nil, false); !slices.Equal(got, want) {
		t.Fatalf("after reopen: %d keys, want %d", len(got), len(want))
	}
}

// testCommitHooks checks store.Committer, when the driver's transactions
// implement it: concurrent transactions each write a marker and register
// the same hook, which counts the markers and writes the count. Whatever
// the grouping, after every Update has returned the count must include
// every marker (the last commit's hook saw them all), the hook must have
// run at least once per distinct commit and never for a failed function,
// and its writes commit with the group.
func testCommitHooks(t *testing.T, st store.Store) {
	supported := false
	update(t, st, func(tx store.Txn) error {
		_, supported = tx.(store.Committer)
		return nil
	})
	if !supported {
		t.Skip("the driver's transactions do not implement store.Committer")
	}
	type hookKey struct{}
	count := func(tx store.Txn) error {
		it := tx.Iterate([]byte("hook/m/"), store.PrefixEnd([]byte("hook/m/")), false)
		n := 0
		for it.Next() {
			n++
		}
		if err := it.Close(); err != nil {
			return err
		}
		return tx.Set([]byte("hook/count"), []byte(strconv.Itoa(n)))
	}
	const writers = 24
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			err := st.Update(context.Background(), func(tx store.Txn) error {
				if err := tx.Set([]byte(fmt.Sprintf("hook/m/%02d", g)), []byte("x")); err != nil {
					return err
				}
				tx.(store.Committer).BeforeCommit(hookKey{}, count)
				return nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", g, err)
			}
		})
	}
	wg.Wait()
	// A failing transaction's hook never runs: it would count its marker.
	err := st.Update(context.Background(), func(tx store.Txn) error {
		if err := tx.Set([]byte("hook/m/zz"), []byte("x")); err != nil {
			return err
		}
		tx.(store.Committer).BeforeCommit(hookKey{}, count)
		return errors.New("refused")
	})
	if err == nil {
		t.Fatal("a failing function committed")
	}
	view(t, st, func(r store.Reader) error {
		if v, err := getString(r, "hook/count"); err != nil || v != strconv.Itoa(writers) {
			t.Errorf("hook/count = %q, %v; want %d (the last commit's hook sees every marker)", v, err, writers)
		}
		return nil
	})
}

// testCommitHookError checks that a hook's error aborts the transaction
// that registered it.
func testCommitHookError(t *testing.T, st store.Store) {
	errHook := errors.New("hook refused")
	err := st.Update(context.Background(), func(tx store.Txn) error {
		c, ok := tx.(store.Committer)
		if !ok {
			return nil
		}
		if err := tx.Set([]byte("hookerr/k"), []byte("v")); err != nil {
			return err
		}
		c.BeforeCommit(1, func(tx store.Txn) error { return errHook })
		return nil
	})
	if err == nil {
		update(t, st, func(tx store.Txn) error {
			if _, ok := tx.(store.Committer); ok {
				t.Error("Update returned nil although a commit hook failed")
			}
			return nil
		})
		return
	}
	if !errors.Is(err, errHook) {
		t.Errorf("Update = %v, want the hook's error", err)
	}
	view(t, st, func(r store.Reader) error {
		if _, err := r.Get([]byte("hookerr/k")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the aborted transaction's write is visible: %v", err)
		}
		return nil
	})
	// Nor to a later transaction (a driver's caches must forget it too).
	update(t, st, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("hookerr/k")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the aborted transaction's write is visible to a later transaction: %v", err)
		}
		return nil
	})
}

// testDeferred checks store.UpdateDeferred (the driver's Deferrer or the
// Update fallback): its writes are visible to the next transaction at once,
// and to Views once a later Update has returned.
func testDeferred(t *testing.T, st store.Store) {
	for i := range 20 {
		k := []byte(fmt.Sprintf("deferred/%02d", i))
		if err := store.UpdateDeferred(context.Background(), st, func(tx store.Txn) error {
			return tx.Set(k, []byte("v"))
		}); err != nil {
			t.Fatalf("UpdateDeferred: %v", err)
		}
		update(t, st, func(tx store.Txn) error {
			if _, err := tx.Get(k); err != nil {
				t.Errorf("the next transaction does not see the deferred write %s: %v", k, err)
			}
			return tx.Set([]byte("deferred/after"), []byte(strconv.Itoa(i)))
		})
		view(t, st, func(r store.Reader) error {
			if _, err := r.Get(k); err != nil {
				t.Errorf("a View after a later Update does not see the deferred write %s: %v", k, err)
			}
			return nil
		})
	}
	// A failing function writes nothing.
	if err := store.UpdateDeferred(context.Background(), st, func(tx store.Txn) error {
		_ = tx.Set([]byte("deferred/no"), []byte("v"))
		return errors.New("refused")
	}); err == nil {
		t.Fatal("UpdateDeferred of a failing function returned nil")
	}
	update(t, st, func(tx store.Txn) error {
		if _, err := tx.Get([]byte("deferred/no")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a failed deferred transaction's write is visible: %v", err)
		}
		return nil
	})
}
