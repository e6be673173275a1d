package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Several processes on one schema (PostgreSQL): the commit lock and the
// log of changed keys.
//
// Each process's committer caches what it read and wrote, and checks
// every cached value at commit. Alone, that costs nothing: its cache is
// the database. With several processes appending to one record, every
// group of one would read some value another had just changed (the
// record's head, its newest tree hashes, the signed checkpoint, shared
// counters), fail its check, and run again, while the others' groups did
// the same: measured, three servers together fell to a quarter of one's
// rate. Two things make them queue instead.
//
//   - The commit lock. Every transaction the committer begins takes
//     LOCK TABLE changes IN EXCLUSIVE MODE right after BEGIN, before its
//     first query, so its snapshot is taken once the lock is granted
//     (LOCK takes none): the groups of all processes commit one at a
//     time, each seeing every earlier one. Views take no lock and are
//     not delayed.
//   - The log of changed keys. Every group that writes inserts, in its
//     commit, one row into changes: the next number (max + 1, which the
//     lock makes unique and gapless) and the keys it wrote or deleted.
//     A process that takes the lock reads the rows numbered after the
//     last it saw, in the same round trip: the keys other processes
//     changed since, each with its current value, which its cache takes
//     in (apply). Values, not only keys: the keys others insert include
//     the record's newest tree rows, which this process's next append
//     reads, and a key left out would be guessed absent. Most of them are
//     others' own payments, which this process never reads: that read is
//     about a millisecond of the lock's handover (docs/PERFORMANCE.md, "A
//     payment in one commit").
//
// A process runs optimistically while no other writes: its functions run
// against the cache before the lock, and its commit round trip takes the
// lock, reads the log (nothing new) and commits, as before. Once it sees
// another process's change, it takes the lock first, for lockFirstFor
// after the last such sighting: the lock and the log in one round trip
// before its functions run, so that they read current values and the
// group commits on its first attempt. The check of cached values stays,
// as the last word.
//
// Rows older than changesKept are swept, the newest always kept; a
// process that finds the rows after its last one swept (it was idle that
// long), or more than changesRead new rows (it was idle while another
// committed), forgets its whole cache rather than read them under the
// lock.

// defaultLockFirstFor is how long after it last saw another process's
// change a process keeps taking the commit lock before its groups'
// functions run (Store.lockFirstFor; tests lengthen it).
const defaultLockFirstFor = time.Second

// changesKept is how long the log of changed keys keeps its rows.
const changesKept = 10 * time.Minute

// changesRead is the most rows of the log a process reads when it takes
// the lock; with more new rows than that, it forgets its cache instead
// (apply). Busy processes take the lock between a few of each other's
// groups; one that has been idle for seconds while another committed
// hundreds of groups would otherwise read every key they changed, with
// its value, while holding the lock every other process waits for
// (measured: commits of 0.4-0.8 s by idle servers, and 1 s stalls of the
// busy one's payments).
const changesRead = 8

// changed is a key another process changed, from the log of changed
// keys, and what it holds now.
type changed struct {
	seq  int64
	k, v []byte // v nil: deleted
}

// lockFirst reports whether the committer's next attempt takes the commit
// lock before its functions run.
func (s *Store) lockFirst() bool {
	return s.serialize && time.Now().Before(s.lockFirstUntil)
}

// queueChanges queues the read of the log's last number, into *last, and
// of the keys other processes changed since the last change this one saw,
// with their values, unless there are more than changesRead new rows; the
// rows land in *out, and *ok is set once all were read.
func (s *Store) queueChanges(b *pgx.Batch, out *[]changed, last *int64, ok *bool) {
	b.Queue(s.q.lastChange).QueryRow(func(r pgx.Row) error { return r.Scan(last) })
	b.Queue(s.q.changesSince, s.seen, changesRead).Query(func(rows pgx.Rows) error {
		var c changed
		_, err := pgx.ForEachRow(rows, []any{&c.seq, &c.k, &c.v}, func() error {
			*out = append(*out, c)
			c = changed{}
			return nil
		})
		*ok = err == nil
		return err
	})
}

// apply brings the cache up to date with other processes' changes, read
// under the commit lock: the log's last number and, unless there were
// more than changesRead new rows, the rows after the last one seen.
func (s *Store) apply(changes []changed, last int64) {
	if last <= s.seen {
		return // nothing new
	}
	s.lockFirstUntil = time.Now().Add(s.lockFirstFor)
	first := int64(-1)
	for _, c := range changes {
		if c.seq > s.seen && (first < 0 || c.seq < first) {
			first = c.seq
		}
	}
	if first != s.seen+1 {
		// Too many rows to read (they were not), or the rows after
		// the last one seen were swept: anything cached may have
		// changed.
		s.cache.reset()
		s.cacheResets++
		s.seen = last
		return
	}
	for _, c := range changes {
		if c.seq > s.seen {
			s.cache.put(c.k, c.v, c.v != nil)
		}
	}
	s.seen = last
}

// beginLocked begins the attempt's transaction with the commit lock and
// brings the cache up to date, in one round trip, before the group's
// functions run. A failure breaks the attempt (g.fail), which then runs
// again.
func (g *group) beginLocked() {
	s := g.s
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	if err := g.acquire(ctx); err != nil {
		_ = g.fail(err)
		return
	}
	var changes []changed
	var last int64
	var ok bool
	b := &pgx.Batch{}
	g.queueBegin(b)
	s.queueChanges(b, &changes, &last, &ok)
	g.begun = true
	err := g.conn.SendBatch(ctx, b).Close()
	if err == nil && !ok {
		err = errors.New("pgstore: the log of changed keys was not read")
	}
	if err != nil {
		_ = g.fail(err)
		return
	}
	g.locked = true
	s.apply(changes, last)
}

// sweepChanges deletes the log's rows older than changesKept, but never
// the newest.
func (s *Store) sweepChanges(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, s.q.sweepChanges, time.Now().Add(-changesKept).UTC())
	return err
}
