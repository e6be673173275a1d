package ledger

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// t0 is the instant of the first test transfer, deliberately not in UTC.
var t0 = time.Date(2026, 11, 22, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))

// drivers are the stores the domain tests run against.
var drivers = []struct {
	name string
	open func(testing.TB) store.Store
}{
	{"memstore", func(t testing.TB) store.Store { return newMem(t) }},
	{"pebblestore", func(t testing.TB) store.Store {
		st, err := pebblestore.Open("ledger", &pebblestore.Options{
			FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// newMem returns a memstore with spurious retries at the default rate,
// seeded so failures reproduce.
func newMem(t testing.TB) *memstore.Store {
	t.Helper()
	st := memstore.New(&memstore.Options{Rand: rand.New(rand.NewPCG(1, 2))})
	t.Cleanup(func() { st.Close() })
	return st
}

// xfer returns a transfer of kind "test" at t0 with the given postings,
// written as account, minor, account, minor...
func xfer(id, currency string, legs ...any) Transfer {
	t := Transfer{ID: id, Currency: currency, Kind: "test", At: t0}
	for i := 0; i < len(legs); i += 2 {
		t.Postings = append(t.Postings, Posting{Account: legs[i].(string), Minor: int64(legs[i+1].(int))})
	}
	return t
}

// mustPost posts each transfer in its own transaction.
func mustPost(t testing.TB, st store.Store, ts ...Transfer) {
	t.Helper()
	for _, tr := range ts {
		if err := st.Update(context.Background(), func(tx store.Txn) error { return Post(tx, tr) }); err != nil {
			t.Fatalf("post %s: %v", tr.ID, err)
		}
	}
}

// postCommitting posts tr and commits the transaction whatever Post
// returned, so any write Post made despite refusing would be kept.
func postCommitting(t testing.TB, st store.Store, tr Transfer) error {
	t.Helper()
	var perr error
	if err := st.Update(context.Background(), func(tx store.Txn) error {
		perr = Post(tx, tr) // the last attempt's result is the one committed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return perr
}

// kv is one stored key and value.
type kv struct{ k, v string }

// dump returns every key and value of the store, in order.
func dump(t testing.TB, st store.Store) []kv {
	t.Helper()
	var out []kv
	err := st.View(context.Background(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		defer it.Close()
		for it.Next() {
			out = append(out, kv{string(it.Key()), string(it.Value())})
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// view runs fn in a View and fails the test on a store error.
func view(t testing.TB, st store.Store, fn func(store.Reader) error) {
	t.Helper()
	if err := st.View(context.Background(), fn); err != nil {
		t.Fatal(err)
	}
}

// check runs Check in a View.
func check(t testing.TB, st store.Store) error {
	t.Helper()
	var cerr error
	view(t, st, func(r store.Reader) error { cerr = Check(r); return nil })
	return cerr
}

// editLine rewrites a stored line in place.
func editLine(tx store.Txn, account, currency string, seq uint64, edit func(*lineRecord)) error {
	k := lineKey(account, currency, seq)
	v, err := tx.Get(k)
	if err != nil {
		return err
	}
	var l lineRecord
	if err := json.Unmarshal(v, &l); err != nil {
		return err
	}
	edit(&l)
	if v, err = json.Marshal(l); err != nil {
		return err
	}
	return tx.Set(k, v)
}

// editTransfer rewrites a stored transfer in place.
func editTransfer(tx store.Txn, id string, edit func(*transferRecord)) error {
	k := transferKey(id)
	v, err := tx.Get(k)
	if err != nil {
		return err
	}
	var rec transferRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return err
	}
	edit(&rec)
	if v, err = json.Marshal(rec); err != nil {
		return err
	}
	return tx.Set(k, v)
}

// putLine writes a line directly.
func putLine(tx store.Txn, account, currency string, seq uint64, l lineRecord) error {
	v, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return tx.Set(lineKey(account, currency, seq), v)
}

// allLines returns every line of (account, currency), paging by limit.
func allLines(t testing.TB, r store.Reader, account, currency string, limit int) []Line {
	t.Helper()
	var all []Line
	var after uint64
	for {
		page, more, err := Lines(r, account, currency, after, limit)
		if err != nil {
			t.Fatalf("lines %s %s after %d: %v", account, currency, after, err)
		}
		if len(page) > limit || (more && len(page) != limit) {
			t.Fatalf("lines %s %s after %d: %d lines, hasMore %v, limit %d", account, currency, after, len(page), more, limit)
		}
		all = append(all, page...)
		if !more {
			return all
		}
		after = page[len(page)-1].Seq
	}
}

func contains(s, sub string) bool { return sub == "" || strings.Contains(s, sub) }
