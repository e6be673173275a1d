package pgstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
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
