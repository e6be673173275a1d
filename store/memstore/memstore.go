// Package memstore is the in-memory [store.Store]: the reference driver for
// tests and examples, and the twin against which the durable drivers are
// checked by [storetest].
//
// Its zero value is an empty, ready store:
//
//	var st memstore.Store
//	err := st.Update(ctx, func(tx store.Txn) error { return tx.Set(k, v) })
//
// # Semantics
//
// Transactions are serializable because they are serial: Update holds a
// write lock while its function runs and while its writes are applied, and
// View holds a read lock, so Views run in parallel with each other but never
// with an Update. A transaction's writes go to a private sorted overlay that
// is applied to the store only if the function returns nil.
//
// Nothing is durable: the data lives as long as the Store value and is
// dropped by Close.
//
// # Spurious retries
//
// [store.Store.Update] may run its function more than once. A driver that
// never does so lets callers that keep state between attempts pass their
// tests and fail in production, so memstore, by default, runs the function
// an extra time at random (see [Options.RetryRate]) and throws the first
// run's writes away.
//
// [storetest]: github.com/countersign/countersign/store/storetest
package memstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/internal/commithook"
	"github.com/countersign/countersign/store/internal/ordered"
)

// DefaultRetryRate is the [Options.RetryRate] used when it is zero.
const DefaultRetryRate = 0.1

// Options configures a [Store]. The zero value gives the defaults.
type Options struct {
	// RetryRate is the probability that Update runs its function one extra
	// time, discarding that run's writes and result, before the run that
	// counts. Zero means DefaultRetryRate; a negative value disables
	// spurious retries; 1 or more retries every transaction.
	RetryRate float64

	// Rand is the source of randomness for spurious retries. The store uses
	// it only while holding its write lock, so it need not be safe for
	// concurrent use, but it must not be shared with other code. The
	// default (nil) uses math/rand/v2's top-level functions. Pass a seeded
	// generator to make retries reproducible.
	Rand *rand.Rand
}

// Store is an in-memory [store.Store]. The zero value is an empty store with
// default [Options]. A Store is safe for concurrent use by multiple
// goroutines and must not be copied after first use.
type Store struct {
	// mu serializes transactions: Update holds it for writing from before
	// its function runs until its writes are applied, View holds it for
	// reading. It also guards data and closed.
	mu     sync.RWMutex
	data   ordered.Map
	closed bool
	opts   Options
}

// New returns an empty store configured by opts, which may be nil.
// The store keeps a copy of *opts, not the pointer.
func New(opts *Options) *Store {
	s := &Store{}
	if opts != nil {
		s.opts = *opts
	}
	return s
}

var _ store.Store = (*Store)(nil)

// View runs fn against a consistent snapshot: no Update runs while fn does.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return fmt.Errorf("memstore: view: %w", store.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(reader{m: &s.data})
}

// Update runs fn in a transaction and applies its writes if fn returns nil
// and ctx is still live. fn may run twice; see [Options.RetryRate].
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: update: %w", store.ErrClosed)
	}
	if s.retry() {
		if err := ctx.Err(); err != nil {
			return err
		}
		tx := &txn{base: &s.data}
		if fn(tx) == nil { // a spurious attempt: its result and writes are discarded
			tx.inHook = true
			_ = tx.hooks.Run(tx)
		}
		tx.done = true
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tx := &txn{base: &s.data}
	err := fn(tx)
	if err == nil {
		// Each Update is its own commit: its hooks run at its end.
		tx.inHook = true
		err = tx.hooks.Run(tx)
	}
	tx.done = true
	if err != nil {
		return err
	}
	// The commit point: a ctx that ended while fn ran still aborts.
	if err := ctx.Err(); err != nil {
		return err
	}
	tx.pending.Ascend(func(e ordered.Entry) {
		if e.Tombstone {
			s.data.Remove(e.Key)
		} else {
			s.data.Put(e)
		}
	})
	return nil
}

// retry reports whether to run a spurious extra attempt. mu must be held
// for writing.
func (s *Store) retry() bool {
	rate := s.opts.RetryRate
	switch {
	case rate == 0:
		rate = DefaultRetryRate
	case rate < 0:
		return false
	}
	var f float64
	if s.opts.Rand != nil {
		f = s.opts.Rand.Float64()
	} else {
		f = rand.Float64()
	}
	return f < rate
}

// Close drops the data. It waits for running transactions to finish. The
// first call returns nil, later calls return an error matching
// store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memstore: close: %w", store.ErrClosed)
	}
	s.closed = true
	s.data.Reset()
	return nil
}

// reader reads the committed data directly; the read lock keeps it still.
type reader struct{ m *ordered.Map }

func (r reader) Get(key []byte) ([]byte, error) {
	e, ok := r.m.Get(key)
	if !ok {
		return nil, store.ErrNotFound
	}
	return clone(e.Value), nil
}

func (r reader) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	return ordered.Iter(r.m.Cursor(lower, upper, reverse))
}

// txn is a transaction: reads merge pending over base, writes go to pending.
type txn struct {
	base    *ordered.Map
	pending ordered.Map
	// done is set when fn has returned, to catch a Txn kept past its
	// transaction (a caller bug that would otherwise race with commits).
	done bool
	// hooks run after fn, in the same transaction (store.Committer);
	// inHook is set while they do, when BeforeCommit is refused.
	hooks  commithook.List
	inHook bool
}

var _ store.Committer = (*txn)(nil)

// BeforeCommit implements [store.Committer]: every Update is its own
// commit, so fn runs at the end of this transaction.
func (t *txn) BeforeCommit(key any, fn func(store.Txn) error) {
	if t.done || t.inHook {
		panic("memstore: BeforeCommit called after the transaction's function returned")
	}
	t.hooks.Add(key, fn)
}

var errTxnDone = fmt.Errorf("memstore: transaction used after its function returned")

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errTxnDone
	}
	if e, ok := t.pending.Get(key); ok {
		if e.Tombstone {
			return nil, store.ErrNotFound
		}
		return clone(e.Value), nil
	}
	if e, ok := t.base.Get(key); ok {
		return clone(e.Value), nil
	}
	return nil, store.ErrNotFound
}

func (t *txn) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	if t.done {
		return ordered.ErrIter(errTxnDone)
	}
	return ordered.Merge(
		t.pending.Cursor(lower, upper, reverse),
		ordered.Iter(t.base.Cursor(lower, upper, reverse)),
		reverse)
}

func (t *txn) Set(key, value []byte) error {
	if t.done {
		return errTxnDone
	}
	// clone never returns nil, so an empty value stays a value.
	t.pending.Put(ordered.Entry{Key: clone(key), Value: clone(value)})
	return nil
}

func (t *txn) Delete(key []byte) error {
	if t.done {
		return errTxnDone
	}
	t.pending.Put(ordered.Entry{Key: clone(key), Tombstone: true})
	return nil
}

// clone copies b into a new non-nil slice.
func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}
