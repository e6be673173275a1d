package pebblestore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
)

func openMem(t *testing.T) *Store {
	t.Helper()
	s, err := Open("db", &Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// viewGet reads k in a View of its own; "" with ok false when absent.
func viewGet(t *testing.T, s *Store, k string) (string, bool) {
	t.Helper()
	var v []byte
	err := s.View(t.Context(), func(r store.Reader) error {
		var err error
		v, err = r.Get([]byte(k))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// TestViewCacheFollowsCommits: a View answered from the cache sees every
// commit published before it: a new value, a deletion, a key that was
// absent. Each step reads twice, so that the second read comes from the
// cache the first one filled.
func TestViewCacheFollowsCommits(t *testing.T) {
	s := openMem(t)
	steps := []struct {
		name     string
		fn       func(store.Txn) error
		deferred bool // fn commits deferred, then an empty Update makes it durable
		key      string
		want     string
		wantOK   bool
	}{
		{"absent", nil, false, "k", "", false},
		{"set after absent", set("k", "v1"), false, "k", "v1", true},
		{"overwritten", set("k", "v2"), false, "k", "v2", true},
		{"other key written", set("j", "x"), false, "k", "v2", true},
		{"deleted", func(tx store.Txn) error { return tx.Delete([]byte("k")) }, false, "k", "", false},
		{"set after delete", set("k", "v3"), false, "k", "v3", true},
		{"deferred then waited", set("k", "v4"), true, "k", "v4", true},
	}
	for _, st := range steps {
		switch {
		case st.deferred:
			if err := s.UpdateDeferred(t.Context(), st.fn); err != nil {
				t.Fatal(err)
			}
			if err := s.Update(t.Context(), func(store.Txn) error { return nil }); err != nil {
				t.Fatal(err)
			}
		case st.fn != nil:
			if err := s.Update(t.Context(), st.fn); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 2 {
			if v, ok := viewGet(t, s, st.key); v != st.want || ok != st.wantOK {
				t.Errorf("%s, read %d: %q %v, want %q %v", st.name, i, v, ok, st.want, st.wantOK)
			}
		}
	}
}

// TestViewCacheKeepsSnapshotIsolation: a View that began before a commit
// keeps reading its own snapshot, cache or not, while a View that begins
// after it sees the commit.
func TestViewCacheKeepsSnapshotIsolation(t *testing.T) {
	s := openMem(t)
	if err := s.Update(t.Context(), set("k", "old")); err != nil {
		t.Fatal(err)
	}
	viewGet(t, s, "k") // cached
	err := s.View(t.Context(), func(r store.Reader) error {
		if err := s.Update(context.Background(), set("k", "new")); err != nil {
			return err
		}
		if v, _ := viewGet(t, s, "k"); v != "new" {
			t.Errorf("a View begun after the commit reads %q, want new", v)
		}
		for i := range 2 {
			v, err := r.Get([]byte("k"))
			if err != nil || string(v) != "old" {
				t.Errorf("read %d in the View begun before the commit: %q, %v; want old", i, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewCacheUnderConcurrentCommits: writers bump counters while readers
// read them. A reader never sees a counter go back, and once a writer's
// Update has returned every View sees at least its value.
func TestViewCacheUnderConcurrentCommits(t *testing.T) {
	s := openMem(t)
	const writers, rounds, readers = 4, 200, 4
	var (
		mu    sync.Mutex
		acked [writers]int // highest value each writer was told committed
	)
	read := func(w int) int {
		v, ok := viewGet(t, s, "c"+strconv.Itoa(w))
		if !ok {
			return 0
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Error(err)
		}
		return n
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := 1; n <= rounds; n++ {
				if err := s.Update(context.Background(), set("c"+strconv.Itoa(w), strconv.Itoa(n))); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[w] = n
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	var rg sync.WaitGroup
	for range readers {
		rg.Go(func() {
			var seen [writers]int
			for {
				select {
				case <-done:
					return
				default:
				}
				for w := range writers {
					mu.Lock()
					floor := acked[w]
					mu.Unlock()
					n := read(w)
					if n < seen[w] || n < floor {
						t.Errorf("counter %d read %d after seeing %d, with %d acknowledged", w, n, seen[w], floor)
						return
					}
					seen[w] = n
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	for w := range writers {
		if n := read(w); n != rounds {
			t.Errorf("counter %d ends at %d, want %d", w, n, rounds)
		}
	}
}

// TestViewCacheFollowsALargeGroup: a group larger than half a memtable
// (5 MiB here, against 8 MiB memtables) is one Pebble turns into a
// flushable batch, whose contents it releases once applied. The cache must
// still forget the keys that group wrote: it notes them as they are folded
// in, rather than reading them back from the batch.
func TestViewCacheFollowsALargeGroup(t *testing.T) {
	s := openMem(t)
	if err := s.Update(t.Context(), set("k", "old")); err != nil {
		t.Fatal(err)
	}
	if v, _ := viewGet(t, s, "k"); v != "old" { // now cached
		t.Fatalf("k = %q", v)
	}
	filler := make([]byte, 64<<10)
	err := s.Update(t.Context(), func(tx store.Txn) error {
		if err := tx.Set([]byte("k"), []byte("new")); err != nil {
			return err
		}
		for i := range 80 {
			if err := tx.Set([]byte("filler/"+strconv.Itoa(i)), filler); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := viewGet(t, s, "k"); v != "new" {
		t.Fatalf("after a large group: View reads %q, want new", v)
	}
}
