package pebblestore

import "sync"

// viewCache holds values Views read from the published snapshot, so that
// the next View of the same key answers from memory. It serves the keys
// every request reads and few commits write: an agent's API key record,
// read before each payment, sits in the deepest level, and a Pebble point
// lookup reaches it only after consulting every memtable and every L0
// sublevel's filter (about a twentieth of a request's CPU at a moderate
// rate, docs/PERFORMANCE.md).
//
// It is exact: an entry is the key's value in the published snapshot, and
// in every later one until a group that writes the key is published. The
// committer publishes each durable group's snapshot (publishSnapshot) and,
// under the same lock, drops every key that group wrote (noted as they were
// folded into its batch, not read back from the batch: Pebble releases a
// large batch's contents once applied) and moves the cache to the new
// snapshot's version. A View uses the cache only while
// its snapshot is the published one (version equal); one that began on an
// older snapshot reads that snapshot, as before. A value a View read is
// kept only if its snapshot is still the published one when it returns,
// so no entry is ever older than a write already published.
type viewCache struct {
	mu      sync.RWMutex
	version uint64 // of the published snapshot
	m       map[string]cacheEntry
}

const (
	// viewCacheMax is how many keys the cache holds; when full it starts
	// over, which keeps the hot keys a moment later without bookkeeping.
	viewCacheMax = 4096
	// viewCacheMaxValue is the largest value kept.
	viewCacheMaxValue = 2048
)

// viewAt is c as a View on the snapshot of version v sees it.
type viewAt struct {
	c *viewCache
	v uint64
}

func (a viewAt) get(k []byte) (cacheEntry, bool) { return a.c.get(k, a.v) }

func (a viewAt) learn(k, val []byte, absent bool) { a.c.learn(k, val, absent, a.v) }

// get returns k's entry for a View on the snapshot of version v.
func (c *viewCache) get(k []byte, v uint64) (cacheEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.version != v {
		return cacheEntry{}, false
	}
	e, ok := c.m[string(k)]
	return e, ok
}

// learn keeps what a View on the snapshot of version v read under k: val,
// or its absence. val must not be changed afterwards.
func (c *viewCache) learn(k, val []byte, absent bool, v uint64) {
	if len(val) > viewCacheMaxValue {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != v {
		return // a later group is published: it may have written k
	}
	if c.m == nil || len(c.m) >= viewCacheMax {
		c.m = make(map[string]cacheEntry, viewCacheMax)
	}
	c.m[string(k)] = cacheEntry{v: val, absent: absent}
}

// publish moves the cache to version v, the snapshot that adds a group's
// writes: every key in written, the keys the group wrote, is dropped. The
// caller holds the lock that makes v's snapshot the one Views read, so no
// View sees v before this.
func (c *viewCache) publish(written [][]byte, v uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version = v
	if len(c.m) == 0 {
		return
	}
	for _, k := range written {
		delete(c.m, string(k))
	}
}
