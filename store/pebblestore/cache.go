package pebblestore

// pointCache is what a reader asks before a Pebble point lookup and tells
// after one: the committer's readCache, or the Views' cache at the version
// of the View's snapshot (viewAt).
type pointCache interface {
	get(k []byte) (cacheEntry, bool)
	// learn keeps v (which the cache may keep as is) or, with absent, the
	// key's absence.
	learn(k, v []byte, absent bool)
}

// readCache holds recent values of keys the committer's transactions read
// or wrote, as of the batch the committer is filling: the database with
// every applied group, plus the writes folded into the current group. The
// committer is the only writer and folds every write through it, so the
// cache is exact; it spares the serial section Pebble's point lookups
// (memtables, every level, Bloom filters) for the keys every payment reads:
// the record's head, the controls, the counters, the revocation markers that
// are absent. Only the committer goroutine touches it.
//
// It is two generations of a map: when the current one is full it becomes
// the old one, and an old hit is copied back, so hot keys stay and the rest
// ages out without bookkeeping per access.
type readCache struct {
	cur, old map[string]cacheEntry
}

// cacheEntry is a key's value, or its absence.
type cacheEntry struct {
	v      []byte
	absent bool
}

const (
	// cacheGeneration is how many keys one generation holds.
	cacheGeneration = 4096
	// cacheMaxValue is the largest value kept; a larger one written
	// drops the key. A payment's intent (about 1.1 KB) must fit: its
	// outcome reads it back in the next group. At most two generations
	// of such values, 16 MiB, are held.
	cacheMaxValue = 2048
)

func (c *readCache) get(k []byte) (cacheEntry, bool) {
	if e, ok := c.cur[string(k)]; ok {
		return e, true
	}
	if e, ok := c.old[string(k)]; ok {
		c.put(k, e)
		return e, true
	}
	return cacheEntry{}, false
}

func (c *readCache) put(k []byte, e cacheEntry) {
	if c.cur == nil || len(c.cur) >= cacheGeneration {
		c.old, c.cur = c.cur, make(map[string]cacheEntry, cacheGeneration)
	}
	c.cur[string(k)] = e
}

// set records what a folded write leaves under k.
func (c *readCache) set(k, v []byte, tombstone bool) {
	switch {
	case tombstone:
		c.put(k, cacheEntry{absent: true})
	case len(v) <= cacheMaxValue:
		c.put(k, cacheEntry{v: append([]byte(nil), v...)})
	default:
		delete(c.cur, string(k))
		delete(c.old, string(k))
	}
}

// learn records a value read from the batch (nil v with absent for a miss).
func (c *readCache) learn(k, v []byte, absent bool) {
	if absent || len(v) <= cacheMaxValue {
		c.put(k, cacheEntry{v: v, absent: absent})
	}
}

// reset forgets everything, after the writes of a group were discarded.
func (c *readCache) reset() { c.cur, c.old = nil, nil }
