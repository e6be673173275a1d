// Package store defines the ordered, transactional key-value interface that
// every piece of Countersign state lives in.
//
// The interface is deliberately small and byte-oriented: drivers store bytes,
// and all domain meaning (the hash-chained record, idempotency records, the
// bi-temporal memory index) is a key layout built above it by the domain
// packages. A user who writes a driver for their own database gets all of
// that for free by passing the conformance suite in [storetest].
//
// # Transactions
//
// [Store.View] runs a function against a consistent, read-only snapshot.
// [Store.Update] runs a function inside a serializable read-write
// transaction: the function sees the state as of the transaction's start plus
// its own writes, and no other transaction's writes become visible to it.
// If the function returns an error, nothing it wrote is applied.
//
// Update may run its function more than once (a driver may retry after a
// conflict, and [memstore] deliberately does so at random to flush out
// callers that keep state between attempts). The function must therefore not
// have side effects outside the transaction, and must not keep values from an
// earlier attempt.
//
// # Durability
//
// When Update returns nil, the writes are committed and, for a durable
// driver, on stable storage: a crash after that point loses nothing. When
// Update returns an error, the caller must treat the transaction as not
// committed. A durable driver that cannot tell whether a commit reached disk
// (a failed fsync) must fail every later Update too rather than guess, so
// that no caller is ever told "committed" about data that is not.
//
// # Keys and iteration
//
// Keys are compared bytewise (bytes.Compare). Iteration bounds are half-open:
// lower is inclusive, upper is exclusive, and a nil bound is unbounded on that
// side. Values returned by Get are owned by the caller. Key and Value of an
// [Iterator] belong to the store: they must not be modified, and are only
// valid until the next call to Next or Close; copy them to keep them.
// Iterators must be closed, and must not be used after the function passed
// to View or Update has returned.
//
// A transaction may write while it iterates, for example to rewrite or
// delete each key it visits. The iterator stays usable and never returns a
// key twice or out of order, but whether it sees keys written after it was
// created is up to the driver; code must not depend on either.
//
// A [Reader] or [Txn] belongs to the function it was passed to and is not
// safe for concurrent use.
//
// [storetest]: github.com/countersign/countersign/store/storetest
// [memstore]: github.com/countersign/countersign/store/memstore
package store

import (
	"context"
	"errors"
)

// ErrNotFound is returned by [Reader.Get] when the key has no value.
// Check for it with errors.Is.
var ErrNotFound = errors.New("store: not found")

// ErrFailed marks the errors of a durable store that stopped writing after
// a commit it could not complete (a failed fsync, a write error, a full
// disk): see "Durability" above. Drivers wrap it, so that callers (the HTTP
// edge answers 503 store.unavailable, retry-as-is) recognise the condition
// whatever the driver. Check for it with errors.Is.
var ErrFailed = errors.New("store: failed after a commit error; restart on a healthy disk")

// ErrUnavailable marks an error of a store that cannot commit now but
// may in a moment: a database that is unreachable or restarting, or a
// transaction that lost every retry to contention. Nothing was written,
// and the store keeps working; the caller may send the same request again
// (the HTTP edge answers 503 unavailable, retry-as-is). Unlike
// [ErrFailed], it does not say the store stopped. Check for it with
// errors.Is.
var ErrUnavailable = errors.New("store: unavailable for now; nothing was written, retry")

// ErrClosed is returned by every method of a [Store] after Close.
// Check for it with errors.Is.
var ErrClosed = errors.New("store: closed")

// Store is an ordered key-value store with serializable transactions.
//
// Implementations must be safe for concurrent use by multiple goroutines.
// Calling View or Update from inside another View or Update function is not
// allowed and may deadlock.
type Store interface {
	// View runs fn against a consistent snapshot. The error fn returns is
	// returned unchanged. If ctx is done before fn runs, View returns
	// ctx.Err() without running fn.
	View(ctx context.Context, fn func(Reader) error) error

	// Update runs fn in a serializable read-write transaction and commits
	// its writes if fn returns nil. fn may run more than once. If fn returns
	// an error, that error is returned and nothing is written. If ctx is done
	// before the transaction commits, Update returns ctx.Err() and nothing
	// is written; once the commit has begun, Update waits for its outcome.
	// When Update returns nil the writes are durable (for a durable driver).
	Update(ctx context.Context, fn func(Txn) error) error

	// Close releases the store. It is idempotent; after the first call every
	// method returns ErrClosed. Update calls still in progress finish first.
	Close() error
}

// Shredder is an optional interface of a [Store] that can purge deleted
// data physically: after Shred returns nil, no file of the store holds a
// value that was deleted from the given key spans (half-open, [lower,
// upper)) before the call. Erasure (package memory) calls it after a
// committed delete of secret material; a store without it keeps deleted
// bytes until it reuses their space on its own.
type Shredder interface {
	Shred(ctx context.Context, spans [][2][]byte) error
}

// Committer is an optional interface of a [Txn] whose driver commits
// several transactions at once (group commit) or wants to let the layers
// above attach work to the end of a commit. Package audit uses it to sign
// one checkpoint per commit instead of one signature per entry; without
// it, audit signs a checkpoint in every transaction that appends, which is
// correct and slower.
type Committer interface {
	// BeforeCommit registers fn to run once after the function of every
	// transaction that commits together with this one has run, and before
	// that commit is made durable, as part of the same atomic commit: fn's
	// writes commit exactly when those transactions do. fn sees all their
	// writes. Registrations under an equal key (compared with ==) in one
	// commit run once, at the position of the first. A registration by a
	// transaction whose function fails, or that is withdrawn, is dropped
	// with its writes. If fn returns an error, none of the transactions of
	// that commit is committed and each of their Updates returns the error.
	// fn must not call BeforeCommit.
	BeforeCommit(key any, fn func(Txn) error)
}

// Deferrer is an optional interface of a [Store] whose commits go through
// one ordered durable log, so that a commit that is not yet durable becomes
// durable no later than any commit made after it.
//
// UpdateDeferred is [Store.Update], except that it may return before the
// commit is durable. Its writes are visible to every transaction that
// starts after it returns, and a crash can lose them only together with
// every commit made after it returned: a state in which a later commit
// survived and this one did not never exists. An Update that starts after
// UpdateDeferred returned returns only once this commit is durable, even
// when its own function writes nothing: such an Update is the barrier
// before anything that depends on the deferred commit leaves the process.
// If the commit can never be made durable (a failed fsync), the store
// fails as for Update.
//
// It is for bookkeeping whose loss, together with everything after it, is
// harmless: package settle/fake keeps its simulated rail's ledger this
// way where it does not write it in the caller's transaction
// (SettleInTxn), because the money path records the rail's answer in a later,
// synchronous commit, and a crash before that commit leaves the payment
// settling and asks the rail again, which then has no record of it; and
// package pay decides a payment on such a rail this way (see
// audit.Log.UpdateDeferred).
type Deferrer interface {
	UpdateDeferred(ctx context.Context, fn func(Txn) error) error
}

// UpdateDeferred runs fn through st's [Deferrer] when it has one, and
// through Update otherwise (which is stronger).
func UpdateDeferred(ctx context.Context, st Store, fn func(Txn) error) error {
	if d, ok := st.(Deferrer); ok {
		return d.UpdateDeferred(ctx, fn)
	}
	return st.Update(ctx, fn)
}

// Watcher is an optional interface of a [Store] that several processes may
// open at once (a database server rather than an embedded directory).
// Its presence tells the layers above that other processes may commit:
// the reference node then coordinates its background work through leases
// in the store, and follows the others' commits through Watch.
type Watcher interface {
	// Watch returns a channel that receives a value soon after any
	// process commits a transaction that wrote, and whenever the store
	// may have missed such a commit (a lost and re-made connection), so
	// that a follower that reads the store on each signal misses nothing.
	// Signals are a wake-up, not a change feed: they carry nothing, are
	// coalesced, and may come without a change. The channel is closed
	// when ctx ends or the store closes. Each call is a new subscription.
	Watch(ctx context.Context) <-chan struct{}
}

// Reader reads from a snapshot or a transaction.
type Reader interface {
	// Get returns a copy of the value stored under key, or an error
	// matching ErrNotFound.
	Get(key []byte) ([]byte, error)

	// Iterate returns an iterator over the keys k with lower <= k < upper,
	// in ascending bytewise order, or descending if reverse is true.
	// A nil bound is unbounded on that side.
	Iterate(lower, upper []byte, reverse bool) Iterator
}

// Txn is a read-write transaction. Its reads see its own earlier writes.
// Set and Delete copy their arguments; the caller may reuse the slices.
type Txn interface {
	Reader
	// Set stores value under key. An empty value is a value, not a delete.
	Set(key, value []byte) error
	// Delete removes key. Deleting a missing key is not an error.
	Delete(key []byte) error
}

// Iterator walks a range of keys. Use it as
//
//	it := r.Iterate(lo, hi, false)
//	defer it.Close()
//	for it.Next() {
//		use(it.Key(), it.Value())
//	}
//	if err := it.Err(); err != nil { ... }
type Iterator interface {
	// Next advances to the next key and reports whether there is one.
	Next() bool
	// Key returns the current key, valid until the next Next or Close.
	Key() []byte
	// Value returns the current value, valid until the next Next or Close.
	Value() []byte
	// Err returns the first error the iteration met, if any.
	Err() error
	// Close releases the iterator and returns Err().
	Close() error
}

// PrefixEnd returns the smallest key greater than every key that starts with
// prefix, for use as the exclusive upper bound of a prefix scan. It returns
// nil (unbounded) when no such key exists, i.e. when prefix is all 0xff.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
