// Package ordered holds the in-memory sorted map shared by the store drivers:
// memstore keeps its whole state in one, and both drivers keep a
// transaction's pending writes (sets and tombstones) in one and merge it with
// the underlying data when the transaction reads.
//
// A [Map] is an unrolled sorted list: a slice of sorted chunks of at most
// maxChunk entries. Lookups are two binary searches; appending keys in
// ascending order (the audit log's pattern) is amortised O(1) and packs
// chunks full; a random insert moves at most one chunk's worth of entries plus
// the (short) chunk index. That is simpler than a B-tree and, at the 10^6
// keys tests reach, as fast.
//
// A Map is not safe for concurrent use; its owner locks.
package ordered

import (
	"bytes"
	"sort"
)

// maxChunk bounds a chunk. 512 entries of 56 bytes keep a chunk's memmove
// within a few pages while keeping the chunk index 1/512 the size of the map.
const maxChunk = 512

// Entry is one key and what the map holds for it. The map owns Key and
// Value; callers must not modify them.
type Entry struct {
	Key   []byte
	Value []byte
	// Tombstone marks a pending delete in a transaction overlay. A tombstone
	// hides the key in the data below the overlay.
	Tombstone bool
}

// Map is a sorted map from byte-string keys to entries. The zero value is an
// empty map.
type Map struct {
	chunks [][]Entry
	n      int
	// version changes whenever entries move (insert or remove), so that a
	// Cursor knows its position is stale and must seek again by key.
	version uint64
}

// Len returns the number of entries, tombstones included.
func (m *Map) Len() int { return m.n }

// Reset empties the map.
func (m *Map) Reset() {
	m.chunks = nil
	m.n = 0
	m.version++
}

// seek returns the position of the first entry with key >= key. ci ==
// len(m.chunks) means past the end.
func (m *Map) seek(key []byte) (ci, j int) {
	ci = sort.Search(len(m.chunks), func(i int) bool {
		c := m.chunks[i]
		return bytes.Compare(c[len(c)-1].Key, key) >= 0
	})
	if ci == len(m.chunks) {
		return ci, 0
	}
	c := m.chunks[ci]
	j = sort.Search(len(c), func(i int) bool { return bytes.Compare(c[i].Key, key) >= 0 })
	return ci, j
}

// Get returns the entry for key.
func (m *Map) Get(key []byte) (Entry, bool) {
	ci, j := m.seek(key)
	if ci == len(m.chunks) || !bytes.Equal(m.chunks[ci][j].Key, key) {
		return Entry{}, false
	}
	return m.chunks[ci][j], true
}

// Put stores e under e.Key, replacing any entry with that key. The map takes
// ownership of e.Key and e.Value.
func (m *Map) Put(e Entry) {
	ci, j := m.seek(e.Key)
	if ci < len(m.chunks) && bytes.Equal(m.chunks[ci][j].Key, e.Key) {
		// Replacing in place moves nothing, so cursors stay valid.
		m.chunks[ci][j] = e
		return
	}
	m.n++
	m.version++
	if len(m.chunks) == 0 {
		m.chunks = [][]Entry{make([]Entry, 0, 4)}
		ci, j = 0, 0
	} else if ci == len(m.chunks) {
		ci = len(m.chunks) - 1
		j = len(m.chunks[ci])
		if j == maxChunk {
			// Appending past the end: start a fresh chunk rather than split,
			// so ascending appends leave every chunk full.
			m.chunks = append(m.chunks, append(make([]Entry, 0, maxChunk), e))
			return
		}
	}
	c := m.chunks[ci]
	c = append(c, Entry{})
	copy(c[j+1:], c[j:])
	c[j] = e
	if len(c) <= maxChunk {
		m.chunks[ci] = c
		return
	}
	// Split the overfull chunk in halves. Each half gets its own backing
	// array so that later appends to the first cannot clobber the second.
	half := len(c) / 2
	left := append(make([]Entry, 0, maxChunk+1), c[:half]...)
	right := append(make([]Entry, 0, maxChunk+1), c[half:]...)
	m.chunks[ci] = left
	m.chunks = append(m.chunks, nil)
	copy(m.chunks[ci+2:], m.chunks[ci+1:])
	m.chunks[ci+1] = right
}

// Remove deletes key from the map; it is a no-op if key is absent.
func (m *Map) Remove(key []byte) {
	ci, j := m.seek(key)
	if ci == len(m.chunks) || !bytes.Equal(m.chunks[ci][j].Key, key) {
		return
	}
	m.n--
	m.version++
	c := m.chunks[ci]
	copy(c[j:], c[j+1:])
	c[len(c)-1] = Entry{} // let the GC have the key and value
	c = c[:len(c)-1]
	if len(c) > 0 {
		m.chunks[ci] = c
		return
	}
	copy(m.chunks[ci:], m.chunks[ci+1:])
	m.chunks[len(m.chunks)-1] = nil
	m.chunks = m.chunks[:len(m.chunks)-1]
}

// Ascend calls fn for every entry in ascending key order. fn must not modify
// the map.
func (m *Map) Ascend(fn func(Entry)) {
	for _, c := range m.chunks {
		for _, e := range c {
			fn(e)
		}
	}
}

// Cursor walks the entries with lower <= key < upper (nil bounds are
// unbounded) in ascending order, or descending if reverse. It stays usable
// when the map changes under it: it then seeks again from the last key it
// returned, so it never repeats or skips backwards, and it may or may not
// see entries written after it was created.
func (m *Map) Cursor(lower, upper []byte, reverse bool) *Cursor {
	return &Cursor{m: m, lower: lower, upper: upper, reverse: reverse}
}

// Cursor is an iterator over a [Map]; see [Map.Cursor].
type Cursor struct {
	m            *Map
	lower, upper []byte
	reverse      bool

	started, done bool
	ci, j         int
	version       uint64
	cur           Entry
}

// Next advances to the next entry in range and reports whether there is one.
func (c *Cursor) Next() bool {
	if c.done {
		return false
	}
	m := c.m
	switch {
	case !c.started:
		c.started = true
		if c.reverse {
			if c.upper == nil {
				c.ci = len(m.chunks)
			} else {
				c.ci, c.j = m.seek(c.upper)
			}
			c.back()
		} else {
			if c.lower != nil {
				c.ci, c.j = m.seek(c.lower)
			}
		}
	case c.version != m.version:
		// Entries moved since we last looked: find our place again by key.
		c.ci, c.j = m.seek(c.cur.Key)
		if c.reverse {
			c.back()
		} else if c.valid() && bytes.Equal(m.chunks[c.ci][c.j].Key, c.cur.Key) {
			c.forward()
		}
	case c.reverse:
		c.back()
	default:
		c.forward()
	}
	c.version = m.version
	if !c.valid() {
		c.finish()
		return false
	}
	e := m.chunks[c.ci][c.j]
	if c.reverse {
		if c.lower != nil && bytes.Compare(e.Key, c.lower) < 0 {
			c.finish()
			return false
		}
	} else if c.upper != nil && bytes.Compare(e.Key, c.upper) >= 0 {
		c.finish()
		return false
	}
	c.cur = e
	return true
}

func (c *Cursor) finish() {
	c.done = true
	c.cur = Entry{}
}

// valid reports whether (ci, j) points at an entry.
func (c *Cursor) valid() bool {
	return c.ci >= 0 && c.ci < len(c.m.chunks) && c.j >= 0 && c.j < len(c.m.chunks[c.ci])
}

func (c *Cursor) forward() {
	c.j++
	if c.j >= len(c.m.chunks[c.ci]) {
		c.ci++
		c.j = 0
	}
}

// back steps to the entry before (ci, j), where (len(chunks), 0) is the end.
func (c *Cursor) back() {
	c.j--
	for c.j < 0 {
		c.ci--
		if c.ci < 0 {
			return
		}
		c.j = len(c.m.chunks[c.ci]) - 1
	}
}

// Entry returns the current entry. The map owns its slices.
func (c *Cursor) Entry() Entry { return c.cur }
