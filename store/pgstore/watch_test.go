package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// next waits for a signal on ch; closed reports whether ch was closed
// instead.
func next(t *testing.T, ch <-chan struct{}, what string) (closed bool) {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case _, ok := <-ch:
		return !ok
	case <-timer.C:
		t.Fatalf("no signal: %s", what)
		return false
	}
}

// drain empties ch of a pending signal.
func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// TestWatch: a Store's watchers are signalled when another Store on the
// same schema commits a write, once again after their listening
// connection was lost and made again, and their channels close with
// their ctx or the store.
func TestWatch(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a, b := open(t, schema), open(t, schema)
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := a.Watch(ctx)
	if next(t, ch, "when the listener starts") {
		t.Fatal("the channel closed at once")
	}
	drain(ch)
	if err := b.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	if next(t, ch, "after another store's commit") {
		t.Fatal("the channel closed")
	}

	// The listener's backend is terminated: once it listens again, the
	// watchers are told, since commits may have been missed.
	drain(ch)
	raw := rawConn(t)
	if _, err := raw.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = 'LISTEN "+pgstore.SchemaForTest(a)+"'"); err != nil {
		t.Fatal(err)
	}
	if next(t, ch, "after the listening connection was made again") {
		t.Fatal("the channel closed")
	}

	wctx, wcancel := context.WithCancel(context.Background())
	other := a.Watch(wctx)
	wcancel()
	for !next(t, other, "closing with its ctx") {
	}
	a.Close()
	for !next(t, ch, "closing with the store") {
	}
	if !next(t, a.Watch(context.Background()), "a Watch after Close") {
		t.Error("a Watch after Close was not closed")
	}
}
