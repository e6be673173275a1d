package seqlist

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

func TestKeySplit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		key    []byte
		want   Pos
		ok     bool
	}{
		{"round trip", "l/", Key("l/", 0x0102, "it_1"), Pos{0x0102, "it_1"}, true},
		{"seq 0", "l/", Key("l/", 0, "a"), Pos{0, "a"}, true},
		{"no id", "l/", []byte("l/\x00\x00\x00\x00\x00\x00\x00\x01"), Pos{}, false},
		{"other prefix", "l/", Key("m/", 1, "a"), Pos{}, false},
		{"short", "l/", []byte("l/a"), Pos{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Split(tc.prefix, tc.key)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("Split = %+v %v, want %+v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestCursor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cursor string
		want   Pos
		err    bool
	}{
		{"start", "", Pos{}, false},
		{"minted", Pos{Seq: 42, ID: "ak_01"}.Cursor(), Pos{42, "ak_01"}, false},
		{"seq 0", Pos{Seq: 0, ID: "x"}.Cursor(), Pos{0, "x"}, false},
		{"not base64url", "!!", Pos{}, true},
		{"padded", Pos{Seq: 1, ID: "ab"}.Cursor() + "=", Pos{}, true},
		{"no id", "AQAAAAAAAAAB", Pos{}, true},
		{"an id-ordered cursor (base64url of a bare id)", "YWtfMDFKQUJDREVGR0hKS01OUFFSU1RWV1hZWjA", Pos{}, true},
		{"another version", "AgAAAAAAAAABYQ", Pos{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCursor(tc.cursor)
			if (err != nil) != tc.err || (err != nil && !errors.Is(err, ErrBadCursor)) || got != tc.want {
				t.Fatalf("ParseCursor(%q) = %+v %v, want %+v (error %v)", tc.cursor, got, err, tc.want, tc.err)
			}
		})
	}
}

func FuzzParseCursor(f *testing.F) {
	f.Add(Pos{Seq: 7, ID: "int_01JABCDEFGHJKMNPQRSTVWXYZ0"}.Cursor())
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, c string) {
		p, err := ParseCursor(c)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("ParseCursor(%q): %v", c, err)
			}
			return
		}
		if p.Cursor() != c && c != "" {
			t.Fatalf("ParseCursor(%q) = %+v, which mints %q", c, p, p.Cursor())
		}
	})
}

// page reads a whole list page by page.
func page(t *testing.T, st store.Store, prefix string, after Pos, limit int) (ids []string, last Pos, more bool) {
	t.Helper()
	err := st.View(t.Context(), func(r store.Reader) error {
		ids = ids[:0]
		var err error
		last, more, err = Page(r, prefix, after, limit, func(id string, _ []byte) (bool, error) {
			ids = append(ids, id)
			return true, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, last, more
}

func update(t *testing.T, st store.Store, fn func(store.Txn) error) {
	t.Helper()
	if err := st.Update(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestPageFollowsCommitOrder: an item put at a greater seq after a reader
// took a cursor is on the reader's next page, though its id sorts before
// the cursor's.
func TestPageFollowsCommitOrder(t *testing.T) {
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	x := Index{Order: "l/o/", Member: "l/m/"}
	update(t, st, func(txn store.Txn) error {
		for i, id := range []string{"m", "z"} {
			if err := x.Put(txn, uint64(i+1), id); err != nil {
				return err
			}
		}
		return nil
	})
	ids, last, more := page(t, st, x.Order, Pos{}, 1)
	if !slices.Equal(ids, []string{"m"}) || !more {
		t.Fatalf("page 1: %v %v", ids, more)
	}
	cursor := last.Cursor()
	update(t, st, func(txn store.Txn) error { return x.Put(txn, 3, "a") })
	after, err := ParseCursor(cursor)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, more = page(t, st, x.Order, after, 10)
	if !slices.Equal(ids, []string{"z", "a"}) || more {
		t.Fatalf("page 2: %v %v, want z then a (committed last)", ids, more)
	}
}

func TestPageFilterAndLimit(t *testing.T) {
	st := memstore.New(nil)
	update(t, st, func(txn store.Txn) error {
		for i := range 5 {
			if err := txn.Set(Key("l/", uint64(i+1), fmt.Sprint("id", i)), nil); err != nil {
				return err
			}
		}
		return txn.Set([]byte("l0"), nil) // past the list
	})
	var got []string
	var last Pos
	var more bool
	err := st.View(t.Context(), func(r store.Reader) error {
		var err error
		last, more, err = Page(r, "l/", Pos{}, 2, func(id string, _ []byte) (bool, error) {
			if id == "id1" {
				return false, nil // filtered out: does not count
			}
			got = append(got, id)
			return true, nil
		})
		return err
	})
	if err != nil || !slices.Equal(got, []string{"id0", "id2"}) || !more || last != (Pos{3, "id2"}) {
		t.Fatalf("%v %+v %v %v", got, last, more, err)
	}
	ids, _, more := page(t, st, "l/", last, 2)
	if !slices.Equal(ids, []string{"id3", "id4"}) || more {
		t.Fatalf("last page: %v %v", ids, more)
	}
}

func TestIndex(t *testing.T) {
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	x := Index{Order: "l/o/", Member: "l/m/"}
	all := func() []string { ids, _, _ := page(t, st, x.Order, Pos{}, 100); return ids }
	update(t, st, func(txn store.Txn) error {
		for i, id := range []string{"b", "a", "c"} {
			if err := x.Put(txn, uint64(10+i), id); err != nil {
				return err
			}
		}
		return nil
	})
	if got := all(); !slices.Equal(got, []string{"b", "a", "c"}) {
		t.Fatalf("put: %v", got)
	}
	// b moves to the end; a leaves; removing what is not there is no error.
	update(t, st, func(txn store.Txn) error {
		if err := x.Put(txn, 20, "b"); err != nil {
			return err
		}
		if err := x.Remove(txn, "a"); err != nil {
			return err
		}
		return x.Remove(txn, "nope")
	})
	if got := all(); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("moved: %v", got)
	}
	err := st.View(t.Context(), func(r store.Reader) error {
		for _, tc := range []struct {
			id  string
			seq uint64
			ok  bool
		}{{"b", 20, true}, {"c", 12, true}, {"a", 0, false}} {
			if seq, ok, err := x.Seq(r, tc.id); err != nil || seq != tc.seq || ok != tc.ok {
				return fmt.Errorf("Seq(%s) = %d %v %v, want %d %v", tc.id, seq, ok, err, tc.seq, tc.ok)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBackfill: the member rows of an id-keyed set (id → empty) get their
// order rows at seq 0, before the items put since, by id; twice is once.
func TestBackfill(t *testing.T) {
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	x := Index{Order: "l/o/", Member: "l/m/"}
	update(t, st, func(txn store.Txn) error {
		for _, id := range []string{"q", "b"} {
			if err := txn.Set([]byte(x.Member+id), nil); err != nil {
				return err
			}
		}
		return x.Put(txn, 5, "a")
	})
	for i, want := range []bool{true, false} {
		var changed bool
		update(t, st, func(txn store.Txn) (err error) { changed, err = x.Backfill(txn); return err })
		if changed != want {
			t.Fatalf("run %d: changed %v, want %v", i, changed, want)
		}
		if ids, _, _ := page(t, st, x.Order, Pos{}, 100); !slices.Equal(ids, []string{"b", "q", "a"}) {
			t.Fatalf("backfilled: %v", ids)
		}
	}
	// A legacy member leaves cleanly.
	update(t, st, func(txn store.Txn) error { return x.Remove(txn, "q") })
	if ids, _, _ := page(t, st, x.Order, Pos{}, 100); !slices.Equal(ids, []string{"b", "a"}) {
		t.Fatalf("after remove: %v", ids)
	}
}

func TestMove(t *testing.T) {
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	update(t, st, func(txn store.Txn) error {
		for _, k := range []string{"old/g1/b", "old/g1/a", "old/g2/c"} {
			if err := txn.Set([]byte(k), []byte("v-"+k)); err != nil {
				return err
			}
		}
		return nil
	})
	seqs := map[string]uint64{"a": 0, "b": 7, "c": 0}
	for i, want := range []bool{true, false} {
		var moved bool
		update(t, st, func(txn store.Txn) (err error) {
			moved, err = Move(txn, "old/", "new/", func(_ store.Reader, group, id string) (uint64, error) {
				if group != "g1/" && group != "g2/" {
					return 0, fmt.Errorf("group %q", group)
				}
				return seqs[id], nil
			})
			return err
		})
		if moved != want {
			t.Fatalf("run %d: moved %v, want %v", i, moved, want)
		}
	}
	err := st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate([]byte("old/"), store.PrefixEnd([]byte("old/")), false)
		if it.Next() {
			it.Close()
			return fmt.Errorf("left behind: %q", it.Key())
		}
		if err := it.Close(); err != nil {
			return err
		}
		v, err := r.Get(Key("new/g1/", 7, "b"))
		if err != nil || string(v) != "v-old/g1/b" {
			return fmt.Errorf("b: %q %v", v, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ids, _, _ := page(t, st, "new/g1/", Pos{}, 10); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("g1: %v", ids)
	}
	if err := st.Update(t.Context(), func(txn store.Txn) error {
		_, err := Move(txn, "old/", "old/new/", nil)
		return err
	}); err == nil {
		t.Fatal("moved a prefix into itself")
	}
}

func TestAdd(t *testing.T) {
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	for i, want := range []bool{true, false} {
		var added bool
		update(t, st, func(txn store.Txn) (err error) { added, err = Add(txn, "l/", 3, "a"); return err })
		if added != want {
			t.Fatalf("run %d: added %v, want %v", i, added, want)
		}
	}
	if ids, _, _ := page(t, st, "l/", Pos{}, 10); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("%v", ids)
	}
}

// TestMigration: a migration applies once per store (the marker), once per
// Migration value (no read after success), again after a failure, and
// writes nothing (not even its marker) when there was nothing to change.
func TestMigration(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(&memstore.Options{RetryRate: 0.3})
	applied := 0
	apply := func(txn store.Txn) (bool, error) {
		applied++ // counts attempts; memstore retries at random
		return true, txn.Set([]byte("data"), []byte("migrated"))
	}
	var m Migration
	if err := m.Run(ctx, st, "marker", apply); err != nil {
		t.Fatal(err)
	}
	if applied == 0 {
		t.Fatal("not applied")
	}
	applied = 0
	if err := m.Run(ctx, st, "marker", apply); err != nil || applied != 0 {
		t.Fatalf("second run on the same value: %v, applied %d", err, applied)
	}
	var other Migration // another process over the same store
	if err := other.Run(ctx, st, "marker", apply); err != nil || applied != 0 {
		t.Fatalf("second process: %v, applied %d", err, applied)
	}

	boom := errors.New("boom")
	var failing Migration
	if err := failing.Run(ctx, st, "marker2", func(store.Txn) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("failed apply: %v", err)
	}
	if err := failing.Run(ctx, st, "marker2", apply); err != nil || applied == 0 {
		t.Fatalf("retry after failure: %v, applied %d", err, applied)
	}

	var nothing Migration
	if err := nothing.Run(ctx, st, "marker3", func(store.Txn) (bool, error) { return false, nil }); err != nil {
		t.Fatal(err)
	}
	err := st.View(ctx, func(r store.Reader) error {
		_, err := r.Get([]byte("marker3"))
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("marker of a migration that changed nothing: %v", err)
	}
}
