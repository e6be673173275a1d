package ordered

import (
	"bytes"

	"github.com/countersign/countersign/store"
)

// Iter returns c as a [store.Iterator], skipping tombstones.
func Iter(c *Cursor) store.Iterator {
	return Merge(c, emptyIter{}, c.reverse)
}

// Merge returns an iterator over overlay layered on base: where both hold a
// key the overlay wins, and an overlay tombstone hides the key. Both must
// iterate the same range in the same direction (reverse). Closing the result
// closes base.
func Merge(overlay *Cursor, base store.Iterator, reverse bool) store.Iterator {
	return &mergeIter{o: overlay, b: base, reverse: reverse}
}

type mergeIter struct {
	o       *Cursor
	b       store.Iterator
	reverse bool

	started    bool
	oOK, bOK   bool
	advO, advB bool // which sources the current position consumed
	key, value []byte
	err        error
	closed     bool
}

func (it *mergeIter) nextBase() {
	it.bOK = it.b.Next()
	if !it.bOK && it.err == nil {
		it.err = it.b.Err()
	}
}

func (it *mergeIter) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	if !it.started {
		it.started = true
		it.oOK = it.o.Next()
		it.nextBase()
	} else {
		// Advance lazily, on the following Next, so the base's Key and
		// Value stay valid for as long as ours are.
		if it.advO {
			it.oOK = it.o.Next()
		}
		if it.advB {
			it.nextBase()
		}
	}
	for it.err == nil {
		it.advO, it.advB = false, false
		switch {
		case !it.oOK && !it.bOK:
			it.key, it.value = nil, nil
			return false
		case it.oOK && it.bOK:
			c := bytes.Compare(it.o.Entry().Key, it.b.Key())
			if it.reverse {
				c = -c
			}
			it.advO = c <= 0
			it.advB = c >= 0
		case it.oOK:
			it.advO = true
		default:
			it.advB = true
		}
		if it.advO {
			e := it.o.Entry()
			if e.Tombstone {
				it.oOK = it.o.Next()
				if it.advB {
					it.nextBase()
				}
				continue
			}
			it.key, it.value = e.Key, e.Value
			return true
		}
		it.key, it.value = it.b.Key(), it.b.Value()
		return true
	}
	it.key, it.value = nil, nil
	return false
}

func (it *mergeIter) Key() []byte   { return it.key }
func (it *mergeIter) Value() []byte { return it.value }
func (it *mergeIter) Err() error    { return it.err }

func (it *mergeIter) Close() error {
	if it.closed {
		return it.err
	}
	it.closed = true
	it.key, it.value = nil, nil
	if err := it.b.Close(); err != nil && it.err == nil {
		it.err = err
	}
	return it.err
}

type emptyIter struct{}

func (emptyIter) Next() bool    { return false }
func (emptyIter) Key() []byte   { return nil }
func (emptyIter) Value() []byte { return nil }
func (emptyIter) Err() error    { return nil }
func (emptyIter) Close() error  { return nil }

// ErrIter returns an iterator that yields nothing and reports err.
func ErrIter(err error) store.Iterator { return errIter{err} }

type errIter struct{ err error }

func (errIter) Next() bool      { return false }
func (errIter) Key() []byte     { return nil }
func (errIter) Value() []byte   { return nil }
func (it errIter) Err() error   { return it.err }
func (it errIter) Close() error { return it.err }
