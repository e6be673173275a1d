// Package seqlisttest helps test that a list follows commit order: it
// makes a request that minted its id first commit last.
package seqlisttest

import (
	"context"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
)

// Gate is a store that can hold back one Update: a request that minted its
// id before it began its transaction then commits after another request
// that minted a later id, as two servers on one database may. Build the
// record (audit.Open) and the service over the Gate. It is safe for
// concurrent use.
type Gate struct {
	store.Store

	mu   sync.Mutex // guards hold
	hold *held      // the Update to hold back next, if any
}

type held struct {
	entered chan struct{} // closed when the held Update is waiting
	release chan struct{} // closed to let it run
}

// Update runs fn in the underlying store, first waiting for the release
// if it is the Update [Gate.Later] holds back.
func (g *Gate) Update(ctx context.Context, fn func(store.Txn) error) error {
	g.mu.Lock()
	h := g.hold
	g.hold = nil
	g.mu.Unlock()
	if h != nil {
		close(h.entered)
		select {
		case <-h.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Update(ctx, fn)
}

// Later runs first in a goroutine and holds its first Update back; once
// first is waiting in it (so it has minted whatever it mints before its
// transaction), Later runs meanwhile, then lets first commit and waits
// for it. What first puts into a list commits after what meanwhile put
// there, though first's id was minted first. Nothing else may call
// Update on the Gate until first has.
func (g *Gate) Later(t testing.TB, first func() error, meanwhile func()) {
	t.Helper()
	h := &held{entered: make(chan struct{}), release: make(chan struct{})}
	g.mu.Lock()
	g.hold = h
	g.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- first() }()
	select {
	case <-h.entered:
	case err := <-done:
		t.Fatalf("seqlisttest: first returned (%v) without an Update", err)
	}
	func() {
		defer close(h.release) // even when meanwhile fails the test
		meanwhile()
	}()
	if err := <-done; err != nil {
		t.Fatalf("seqlisttest: first: %v", err)
	}
}
