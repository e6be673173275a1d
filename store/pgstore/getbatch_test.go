package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
)

// TestBatchedFirstReads: concurrent Views' first reads, batched into
// shared statements, each get their own key's value (or ErrNotFound),
// in a slice of their own: a View that modifies what it read does not
// change what another read of the same key got.
func TestBatchedFirstReads(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	const keys = 10
	for i := range keys {
		set(t, st, fmt.Sprint("k", i), fmt.Sprint("value-", i))
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 40 {
				n := (g + i) % (keys + 2) // two keys that do not exist
				want := fmt.Sprint("value-", n)
				err := st.View(context.Background(), func(r store.Reader) error {
					v, err := r.Get([]byte(fmt.Sprint("k", n)))
					if n >= keys {
						if !errors.Is(err, store.ErrNotFound) {
							return fmt.Errorf("k%d: %q, %v; want ErrNotFound", n, v, err)
						}
						return nil
					}
					if err != nil || string(v) != want {
						return fmt.Errorf("k%d: %q, %v; want %q", n, v, err, want)
					}
					for j := range v {
						v[j] = 'x'
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
	wg.Wait()
}

// TestBatchedFirstReadCancelled: a View whose ctx ends while its first
// read waits returns ctx's error.
func TestBatchedFirstReadCancelled(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := st.View(ctx, func(r store.Reader) error {
		_, err := r.Get([]byte("k"))
		return err
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("View with a cancelled ctx: %v, want context.Canceled", err)
	}
}
