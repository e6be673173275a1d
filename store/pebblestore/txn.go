package pebblestore

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/internal/commithook"
	"github.com/countersign/countersign/store/internal/ordered"
)

var errFinished = errors.New("pebblestore: reader or transaction used after its function returned")

// reader reads a published snapshot (View) or the group batch (Update).
// Exactly one of snap and batch is set.
type reader struct {
	snap  *pebble.Snapshot
	batch *pebble.Batch
	// cache answers repeated point reads: the committer's read cache for
	// batch readers, the Views' cache for snapshot readers; nil for none.
	cache pointCache
	// iters are the iterators not yet closed; finish closes them so that a
	// forgotten one cannot pin the snapshot or outlive the batch.
	iters map[*iter]struct{}
	done  bool
}

func (r *reader) Get(key []byte) ([]byte, error) {
	if r.done {
		return nil, errFinished
	}
	if r.cache != nil {
		if e, ok := r.cache.get(key); ok {
			if e.absent {
				return nil, store.ErrNotFound
			}
			return append(make([]byte, 0, len(e.v)), e.v...), nil
		}
	}
	var (
		v   []byte
		c   io.Closer
		err error
	)
	if r.snap != nil {
		v, c, err = r.snap.Get(key)
	} else {
		v, c, err = r.batch.Get(key)
	}
	if errors.Is(err, pebble.ErrNotFound) {
		if r.cache != nil {
			r.cache.learn(key, nil, true)
		}
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("pebblestore: get: %w", err)
	}
	// v belongs to Pebble until c is closed: copy it first.
	out := append(make([]byte, 0, len(v)), v...)
	if err := c.Close(); err != nil {
		return nil, fmt.Errorf("pebblestore: get: %w", err)
	}
	if r.cache != nil {
		r.cache.learn(key, append([]byte(nil), out...), false)
	}
	return out, nil
}

func (r *reader) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	return r.iterate(lower, upper, reverse)
}

func (r *reader) iterate(lower, upper []byte, reverse bool) store.Iterator {
	if r.done {
		return ordered.ErrIter(errFinished)
	}
	if upper != nil && (len(upper) == 0 || lower != nil && bytes.Compare(lower, upper) >= 0) {
		// An empty range. Pebble requires lower < upper.
		return ordered.ErrIter(nil)
	}
	if len(lower) == 0 {
		// The empty key is the least key anyway, and Pebble (under its
		// invariants checks, on in -race builds) indexes a non-nil empty
		// bound.
		lower = nil
	}
	// Pebble keeps the bounds for the iterator's life: copy them so that
	// the caller may reuse its slices.
	opts := &pebble.IterOptions{LowerBound: cloneBound(lower), UpperBound: cloneBound(upper)}
	var (
		pit *pebble.Iterator
		err error
	)
	if r.snap != nil {
		pit, err = r.snap.NewIter(opts)
	} else {
		pit, err = r.batch.NewIter(opts)
	}
	if err != nil {
		return ordered.ErrIter(fmt.Errorf("pebblestore: iterate: %w", err))
	}
	it := &iter{r: r, it: pit, reverse: reverse}
	if r.iters == nil {
		r.iters = map[*iter]struct{}{}
	}
	r.iters[it] = struct{}{}
	return it
}

func cloneBound(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// finish ends the reader's life: it closes forgotten iterators and makes
// later use an error.
func (r *reader) finish() {
	r.done = true
	for it := range r.iters {
		_ = it.Close()
	}
}

// iter adapts a Pebble iterator to store.Iterator.
type iter struct {
	r       *reader
	it      *pebble.Iterator
	reverse bool

	started, closed bool
	key, value      []byte
	err             error
}

func (it *iter) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	var ok bool
	switch {
	case !it.started && it.reverse:
		ok = it.it.Last()
	case !it.started:
		ok = it.it.First()
	case it.reverse:
		ok = it.it.Prev()
	default:
		ok = it.it.Next()
	}
	it.started = true
	if !ok {
		it.key, it.value = nil, nil
		if err := it.it.Error(); err != nil {
			it.err = fmt.Errorf("pebblestore: iterate: %w", err)
		}
		return false
	}
	v, err := it.it.ValueAndErr()
	if err != nil {
		it.key, it.value = nil, nil
		it.err = fmt.Errorf("pebblestore: iterate: %w", err)
		return false
	}
	it.key, it.value = it.it.Key(), v
	return true
}

func (it *iter) Key() []byte   { return it.key }
func (it *iter) Value() []byte { return it.value }
func (it *iter) Err() error    { return it.err }

func (it *iter) Close() error {
	if it.closed {
		return it.err
	}
	it.closed = true
	it.key, it.value = nil, nil
	delete(it.r.iters, it)
	if err := it.it.Close(); err != nil && it.err == nil {
		it.err = fmt.Errorf("pebblestore: iterate: %w", err)
	}
	return it.err
}

// txn is a transaction: reads merge its pending writes over the group
// batch; writes go to pending, which the committer folds into the batch if
// the function succeeds.
type txn struct {
	reader
	pending ordered.Map
	// hooks are this transaction's BeforeCommit registrations, merged
	// into the group's if its function succeeds; noHooks refuses them in
	// the group's own hook transaction.
	hooks   commithook.List
	noHooks bool
}

var _ store.Committer = (*txn)(nil)

// BeforeCommit implements [store.Committer]: fn runs once per group, after
// every member's function, in the group's batch.
func (t *txn) BeforeCommit(key any, fn func(store.Txn) error) {
	if t.done || t.noHooks {
		panic("pebblestore: BeforeCommit called from a commit hook or after the transaction's function returned")
	}
	t.hooks.Add(key, fn)
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errFinished
	}
	if e, ok := t.pending.Get(key); ok {
		if e.Tombstone {
			return nil, store.ErrNotFound
		}
		return append(make([]byte, 0, len(e.Value)), e.Value...), nil
	}
	return t.reader.Get(key)
}

func (t *txn) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	base := t.reader.iterate(lower, upper, reverse)
	if t.done {
		return base
	}
	return ordered.Merge(t.pending.Cursor(cloneBound(lower), cloneBound(upper), reverse), base, reverse)
}

func (t *txn) Set(key, value []byte) error {
	if t.done {
		return errFinished
	}
	t.pending.Put(ordered.Entry{
		Key:   append([]byte{}, key...),
		Value: append([]byte{}, value...),
	})
	return nil
}

func (t *txn) Delete(key []byte) error {
	if t.done {
		return errFinished
	}
	t.pending.Put(ordered.Entry{Key: append([]byte{}, key...), Tombstone: true})
	return nil
}
