package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/store/storetest"
)

// EnvURL names the PostgreSQL database the tests use.
const EnvURL = "COUNTERSIGN_TEST_POSTGRES"

func dbURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL driver's tests", EnvURL)
	}
	return u
}

var schemaSeq atomic.Int64

// schemaFor names a schema for one test, unique across runs, dropped at
// its end.
func schemaFor(t testing.TB, name string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%d/%d", name, os.Getpid(), time.Now().UnixNano(), schemaSeq.Add(1))))
	s := "cs_test_" + hex.EncodeToString(sum[:8])
	u := dbURL(t)
	t.Cleanup(func() { dropSchema(t, u, s) })
	return s
}

func dropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

func open(t testing.TB, schema string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dbURL(t), &pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestConformance(t *testing.T) {
	dbURL(t)
	// A "directory" names a schema: reopening the same one finds the same
	// data, as a durable driver must.
	schemas := map[string]string{}
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		s, ok := schemas[dir]
		if !ok {
			s = schemaFor(t, dir)
			schemas[dir] = s
		}
		return open(t, s)
	})
}

// TestConcurrentOpenMigrates: several processes opening one new schema at
// once all succeed, and the schema is migrated once.
func TestConcurrentOpenMigrates(t *testing.T) {
	schema := schemaFor(t, t.Name())
	errs := make(chan error, 6)
	for range 6 {
		go func() {
			st, err := pgstore.Open(context.Background(), dbURL(t), &pgstore.Options{Schema: schema})
			if err == nil {
				err = st.Update(context.Background(), func(txn store.Txn) error { return txn.Set([]byte("k"), []byte("v")) })
				st.Close()
			}
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestOpenRefusesBadSchema(t *testing.T) {
	for _, s := range []string{"Upper", "has-dash", "x; DROP TABLE y", "1starts_with_digit"} {
		if _, err := pgstore.Open(context.Background(), dbURL(t), &pgstore.Options{Schema: s}); err == nil {
			t.Errorf("schema %q accepted", s)
		}
	}
}

// TestDroppedConnectionIsRetried: the connection of a transaction dies
// mid-way (its backend is terminated); Update runs the function again on
// another connection, and the write lands once.
func TestDroppedConnectionIsRetried(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	ctx := context.Background()
	attempts := 0
	err := st.Update(ctx, func(txn store.Txn) error {
		attempts++
		if err := txn.Set([]byte("counter"), []byte{byte(attempts)}); err != nil {
			return err
		}
		if attempts == 1 {
			// Kill this transaction's own backend, as a failover or an
			// administrator would.
			return pgstore.TerminateBackendForTest(txn)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update after a dropped connection: %v", err)
	}
	if attempts < 2 {
		t.Fatalf("the function ran %d times, want a second run", attempts)
	}
	var got []byte
	if err := st.View(ctx, func(r store.Reader) error {
		var err error
		got, err = r.Get([]byte("counter"))
		return err
	}); err != nil || len(got) != 1 || int(got[0]) != attempts {
		t.Fatalf("counter = %v, %v; want the last attempt's %d", got, err, attempts)
	}
}

// TestSerializationFailureIsRetried: two transactions that read and write
// the same key conflict; both finish, and no update is lost.
func TestSerializationFailureIsRetried(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	ctx := context.Background()
	const workers, each = 4, 25
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for range each {
				if err := st.Update(ctx, func(txn store.Txn) error {
					v, err := txn.Get([]byte("n"))
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					n := 0
					if len(v) > 0 {
						n, _ = strconv.Atoi(string(v))
					}
					return txn.Set([]byte("n"), []byte(strconv.Itoa(n+1)))
				}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	_ = st.View(ctx, func(r store.Reader) error {
		v, err := r.Get([]byte("n"))
		if err != nil || string(v) != strconv.Itoa(workers*each) {
			t.Errorf("n = %s, %v; want %d", v, err, workers*each)
		}
		return nil
	})
}

// TestLostCommitAnswer: when COMMIT's answer is lost, the marker tells
// what happened — a commit that landed is not run again, one that did not
// is — and when the marker cannot be read either, the store fails every
// later transaction rather than guess.
func TestLostCommitAnswer(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name             string
		landed, readable bool
		wantRuns         int
		wantErr          error
	}{
		{"landed", true, true, 1, nil},
		{"did not land", false, true, 64, store.ErrUnavailable}, // every attempt loses its answer
		{"unknown", true, false, 1, store.ErrFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t, schemaFor(t, t.Name()))
			defer st.Close()
			pgstore.LoseCommitAnswersForTest(st, tc.landed, tc.readable)
			runs := 0
			err := st.Update(ctx, func(txn store.Txn) error {
				runs++
				return txn.Set([]byte("k"), []byte("v"))
			})
			if !errors.Is(err, tc.wantErr) && !(tc.wantErr == nil && err == nil) {
				t.Fatalf("Update = %v, want %v", err, tc.wantErr)
			}
			if runs != tc.wantRuns {
				t.Errorf("the function ran %d times, want %d", runs, tc.wantRuns)
			}
			if tc.wantErr == store.ErrFailed {
				if err := st.View(ctx, func(store.Reader) error { return nil }); !errors.Is(err, store.ErrFailed) {
					t.Errorf("View after an unknown commit = %v, want store.ErrFailed", err)
				}
			}
		})
	}
}

// TestTwoStoresOneSchema: two Stores on one schema, as two processes
// would open it, each with several writers appending to one hash chain
// and incrementing one counter while readers check the chain's head.
// Groups of the two conflict and run again; no update is lost, and the
// chain has no gap and no fork.
func TestTwoStoresOneSchema(t *testing.T) {
	schema := schemaFor(t, t.Name())
	stores := []*pgstore.Store{open(t, schema), open(t, schema)}
	defer func() {
		for _, st := range stores {
			st.Close()
		}
	}()
	ctx := context.Background()
	const writers, each = 6, 20
	link := func(prev []byte, n int) []byte {
		sum := sha256.Sum256(append(append([]byte{}, prev...), strconv.Itoa(n)...))
		return []byte(hex.EncodeToString(sum[:]))
	}
	entryKey := func(n int) []byte { return []byte(fmt.Sprintf("chain/%08d", n)) }
	// head is "n hash"; entry n is "hash prev".
	readHead := func(r store.Reader) (int, []byte, error) {
		v, err := r.Get([]byte("head"))
		if errors.Is(err, store.ErrNotFound) {
			return 0, []byte("genesis"), nil
		}
		if err != nil {
			return 0, nil, err
		}
		n, h, _ := strings.Cut(string(v), " ")
		i, err := strconv.Atoi(n)
		return i, []byte(h), err
	}
	appendOne := func(txn store.Txn) error {
		n, h, err := readHead(txn)
		if err != nil {
			return err
		}
		next := link(h, n+1)
		if _, err := txn.Get(entryKey(n + 1)); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("entry %d exists before it is appended (a fork): %v", n+1, err)
		}
		if err := txn.Set(entryKey(n+1), append(append(next, ' '), h...)); err != nil {
			return err
		}
		if err := txn.Set([]byte("head"), []byte(fmt.Sprintf("%d %s", n+1, next))); err != nil {
			return err
		}
		c := 0
		if v, err := txn.Get([]byte("counter")); err == nil {
			c, _ = strconv.Atoi(string(v))
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return txn.Set([]byte("counter"), []byte(strconv.Itoa(c+1)))
	}
	stop := make(chan struct{})
	var readers, wg sync.WaitGroup
	for _, st := range stores {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := st.View(ctx, func(r store.Reader) error {
					n, h, err := readHead(r)
					if err != nil || n == 0 {
						return err
					}
					e, err := r.Get(entryKey(n))
					if err != nil {
						return fmt.Errorf("head %d, its entry: %w", n, err)
					}
					if hash, _, _ := strings.Cut(string(e), " "); hash != string(h) {
						return fmt.Errorf("head %d says %s, its entry %s", n, h, hash)
					}
					return nil
				}); err != nil {
					t.Errorf("reader: %v", err)
					return
				}
			}
		})
		for range writers {
			wg.Go(func() {
				for range each {
					if err := st.Update(ctx, appendOne); err != nil {
						t.Errorf("writer: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	total := 2 * writers * each
	if v, _ := get(t, stores[1], "counter"); v != strconv.Itoa(total) {
		t.Errorf("counter = %s, want %d (lost updates)", v, total)
	}
	err := stores[0].View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte("chain/"), store.PrefixEnd([]byte("chain/")), false)
		defer it.Close()
		prev, n := []byte("genesis"), 0
		for it.Next() {
			n++
			if string(it.Key()) != string(entryKey(n)) {
				return fmt.Errorf("entry %d is at %s: a gap", n, it.Key())
			}
			hash, p, _ := strings.Cut(string(it.Value()), " ")
			if p != string(prev) || hash != string(link(prev, n)) {
				return fmt.Errorf("entry %d does not follow entry %d: a fork", n, n-1)
			}
			prev = []byte(hash)
		}
		if n != total {
			return fmt.Errorf("%d entries, want %d", n, total)
		}
		return it.Err()
	})
	if err != nil {
		t.Error(err)
	}
	s0, s1 := stores[0].Stats(), stores[1].Stats()
	t.Logf("store 0: %+v; store 1: %+v", s0, s1)
	if s0.Txns+s1.Txns != uint64(total) {
		t.Errorf("the stores committed %d + %d transactions, want %d", s0.Txns, s1.Txns, total)
	}
}
