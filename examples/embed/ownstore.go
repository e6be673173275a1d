package main

import (
	"context"
	"sync/atomic"

	"github.com/countersign/countersign/store"
)

// countingStore is a store of the program's own: here it wraps another and
// counts the committed writes, the way a program would put its own
// database, cache or instrumentation under the node. Any store.Store that
// passes store/storetest works; countersign.Open needs nothing else.
type countingStore struct {
	store.Store
	commits atomic.Int64
}

// Update counts the transactions that committed.
func (s *countingStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.commits.Add(1)
	}
	return err
}
