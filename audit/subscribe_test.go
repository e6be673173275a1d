package audit

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
)

// Subscribers started at various points while appenders race them all see
// every entry after their starting point exactly once, in order.
func TestSubscribeSeam(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	const backlog, writers, each = 50, 4, 60
	const total = backlog + writers*each
	appendN(t, l, backlog, 10)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				// Half through Log.Update, half through the store's own
				// Update followed by Notify.
				var err error
				if i%2 == 0 {
					err = l.Update(ctx, func(txn store.Txn) error {
						_, err := l.Append(txn, testRecord(w*1000+i))
						return err
					})
				} else {
					err = st.Update(ctx, func(txn store.Txn) error {
						_, err := l.Append(txn, testRecord(w*1000+i))
						return err
					})
					l.Notify()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	subscribe := func(after uint64) {
		sub := l.Subscribe(ctx, after)
		defer sub.Close()
		want := after + 1
		for want <= total {
			e, err := sub.Next(ctx)
			if err != nil {
				errs <- err
				return
			}
			if e.Seq != want {
				errs <- errors.New("subscriber after " + uitoa(after) + ": got seq " + uitoa(e.Seq) + ", want " + uitoa(want))
				return
			}
			want++
		}
	}
	for _, after := range []uint64{0, 1, 25, backlog, backlog + 7} {
		wg.Go(func() { subscribe(after) })
	}
	// Subscribers whose starting point is "now", racing the appenders.
	for range 4 {
		wg.Go(func() {
			n, err := l.Size(ctx)
			if err != nil {
				errs <- err
				return
			}
			subscribe(n)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSubscribeEnds(t *testing.T) {
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 2, 2)

	t.Run("Close while waiting", func(t *testing.T) {
		sub := l.Subscribe(t.Context(), 2)
		done := make(chan error)
		go func() {
			_, err := sub.Next(t.Context())
			done <- err
		}()
		sub.Close()
		sub.Close() // idempotent
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Close: %v, want ErrClosed", err)
		}
	})
	t.Run("Next ctx", func(t *testing.T) {
		sub := l.Subscribe(t.Context(), 2)
		defer sub.Close()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next with a cancelled ctx: %v", err)
		}
	})
	t.Run("Subscribe ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		sub := l.Subscribe(ctx, 0)
		if e, err := sub.Next(t.Context()); err != nil || e.Seq != 1 {
			t.Fatalf("Next = %d, %v", e.Seq, err)
		}
		cancel()
		if _, err := sub.Next(t.Context()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Next after the Subscribe ctx ended: %v", err)
		}
	})
	t.Run("wakes on append", func(t *testing.T) {
		sub := l.Subscribe(t.Context(), 2)
		defer sub.Close()
		got := make(chan Entry)
		go func() {
			e, err := sub.Next(t.Context())
			if err != nil {
				t.Error(err)
			}
			got <- e
		}()
		appendN(t, l, 1, 1)
		if e := <-got; e.Seq != 3 {
			t.Fatalf("woke with seq %d, want 3", e.Seq)
		}
	})
	t.Run("Log.Close", func(t *testing.T) {
		sub := l.Subscribe(t.Context(), 3)
		done := make(chan error)
		go func() {
			_, err := sub.Next(t.Context())
			done <- err
		}()
		l.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("Next after Log.Close: %v, want ErrClosed", err)
		}
	})
}

// TestWaitPast: WaitPast returns at once when the log already holds an
// entry after seq, returns when one is appended while it waits, and
// otherwise ends with its ctx or with the log.
func TestWaitPast(t *testing.T) {
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 3, 1)
	if err := l.WaitPast(t.Context(), 2); err != nil {
		t.Fatalf("past an entry the log holds: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.WaitPast(ctx, 3); !errors.Is(err, context.Canceled) {
		t.Fatalf("with nothing after seq and ctx done: %v, want context.Canceled", err)
	}

	done := make(chan error, 1)
	go func() { done <- l.WaitPast(t.Context(), 3) }()
	appendN(t, l, 1, 1)
	if err := <-done; err != nil {
		t.Fatalf("woken by an append: %v", err)
	}

	go func() { done <- l.WaitPast(t.Context(), 4) }()
	l.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("log closed while waiting: %v, want ErrClosed", err)
	}
}
