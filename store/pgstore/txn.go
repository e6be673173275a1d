package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/internal/commithook"
	"github.com/countersign/countersign/store/internal/ordered"
)

var (
	errFinished = errors.New("pgstore: reader or transaction used after its function returned")
	// errStale is what a View's function gets once its first read turned
	// out not to belong to the snapshot of its second: the function runs
	// again, and whatever it returns now is dropped.
	errStale = errors.New("pgstore: the view's first read is not part of its snapshot; the function runs again")
)

// txn is an Update's transaction: reads merge its pending writes over the
// group's buffer over what the group reads (see group.get); writes go to
// pending, which the committer folds into the group's buffer if the
// function returns nil.
type txn struct {
	g       *group
	pending ordered.Map
	// hooks are this transaction's BeforeCommit registrations, merged
	// into the group's if its function succeeds; noHooks refuses them in
	// the group's own hook transaction.
	hooks   commithook.List
	noHooks bool
	done    bool
}

var _ store.Committer = (*txn)(nil)

// BeforeCommit implements [store.Committer]: fn runs once per group,
// after every member's function, over the group's writes.
func (t *txn) BeforeCommit(key any, fn func(store.Txn) error) {
	if t.done || t.noHooks {
		panic("pgstore: BeforeCommit called from a commit hook or after the transaction's function returned")
	}
	t.hooks.Add(key, fn)
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.done {
		return nil, errFinished
	}
	if e, ok := t.pending.Get(key); ok {
		return entryValue(e)
	}
	if e, ok := t.g.buf.Get(key); ok {
		return entryValue(e)
	}
	v, present, err := t.g.get(key)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, store.ErrNotFound
	}
	return append(make([]byte, 0, len(v)), v...), nil
}

func entryValue(e ordered.Entry) ([]byte, error) {
	if e.Tombstone {
		return nil, store.ErrNotFound
	}
	return append(make([]byte, 0, len(e.Value)), e.Value...), nil
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

func (t *txn) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	if t.done {
		return ordered.ErrIter(errFinished)
	}
	if emptyRange(lower, upper) {
		return ordered.ErrIter(nil)
	}
	lower, upper = clone(lower), clone(upper)
	db := &dbIter{page: t.g.query, note: t.g.noteIterated, q: &t.g.s.q, lower: lower, upper: upper, reverse: reverse, done: &t.done}
	// The group's buffer does not change while a function runs: only
	// its own pending writes do, and ordered's cursors follow them.
	group := ordered.Merge(t.g.buf.Cursor(lower, upper, reverse), db, reverse)
	return ordered.Merge(t.pending.Cursor(lower, upper, reverse), group, reverse)
}

// emptyRange reports a range that holds no key.
func emptyRange(lower, upper []byte) bool {
	return upper != nil && (len(upper) == 0 || lower != nil && bytes.Compare(lower, upper) >= 0)
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// View runs fn against one snapshot: see "Reads" in the package
// documentation.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.inflight.Done()
	var v *view
	defer func() {
		if v != nil {
			v.end() // fn panicked or called runtime.Goexit
		}
	}()
	for attempt := 1; ; attempt++ {
		v = &view{s: s, ctx: ctx}
		ferr := v.run(fn)
		if v.stale {
			// The transaction has begun: this run reads only its snapshot.
			v.stale = false
			ferr = v.run(fn)
		}
		v.end()
		broken := v.broken
		v = nil
		if broken != nil && ctx.Err() == nil && rerunnable(broken) && attempt < s.attempts {
			continue
		}
		if ferr != nil {
			return ferr
		}
		if broken != nil {
			return s.fault(ctx, "view", broken)
		}
		return nil
	}
}

// view is a View's reader. Its first statement runs alone; the second
// begins the transaction (see "Reads" in the package documentation).
type view struct {
	s      *Store
	ctx    context.Context
	conn   *pgxpool.Conn
	begun  bool
	first  *stmt // the statement run before the transaction began
	stale  bool  // first's answer differed inside the transaction
	broken error
	done   bool
}

// stmt is a statement and its answer.
type stmt struct {
	sql  string
	args []any
	rows []row
}

func (v *view) run(fn func(store.Reader) error) error {
	v.done = false
	err := fn(v)
	v.done = true
	return err
}

// end rolls back the transaction if it began and releases the connection.
func (v *view) end() {
	if v.conn == nil {
		return
	}
	pc := v.conn.Conn().PgConn()
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(v.ctx), roundTrip)
		_, _ = v.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	v.conn.Release()
	v.conn = nil
}

// query runs one statement of the View.
func (v *view) query(sql string, args ...any) ([]row, error) {
	switch {
	case v.done:
		return nil, errFinished
	case v.stale:
		return nil, errStale
	case v.broken != nil:
		return nil, fmt.Errorf("pgstore: transaction aborted: %w (%w)", store.ErrUnavailable, v.broken)
	}
	if v.conn == nil {
		// Taken before the first statement, batched or not, so that a
		// second statement is sent at once.
		conn, err := v.s.pool.Acquire(v.ctx)
		if err != nil {
			return nil, v.fail(err)
		}
		v.conn = conn
	}
	if !v.begun && v.first == nil && sql == v.s.q.get {
		// The first statement, a read of one key: batched with other
		// Views' (getbatch.go).
		val, found, err := v.s.batchGet(v.ctx, args[0].([]byte))
		if err != nil {
			return nil, v.fail(err)
		}
		var rows []row
		if found {
			rows = []row{{v: val}} // as the statement answers: v alone
		}
		v.keepFirst(sql, args, rows)
		return rows, nil
	}
	switch {
	case v.begun:
		rows, err := queryRows(v.conn.Query(v.ctx, sql, args...))
		if err != nil {
			return nil, v.fail(err)
		}
		return rows, nil
	case v.first == nil:
		rows, err := queryRows(v.conn.Query(v.ctx, sql, args...))
		if err != nil {
			return nil, v.fail(err)
		}
		v.keepFirst(sql, args, rows)
		return rows, nil
	}
	var replay, rows []row
	b := &pgx.Batch{}
	b.Queue(beginSnapshot)
	b.Queue(v.first.sql, v.first.args...).Query(func(r pgx.Rows) (err error) {
		replay, err = queryRows(r, nil)
		return err
	})
	b.Queue(sql, args...).Query(func(r pgx.Rows) (err error) {
		rows, err = queryRows(r, nil)
		return err
	})
	v.begun = true
	if err := v.conn.SendBatch(v.ctx, b).Close(); err != nil {
		return nil, v.fail(err)
	}
	if !sameRows(replay, v.first.rows) {
		v.stale = true
		return nil, errStale
	}
	return rows, nil
}

// keepFirst keeps the View's first statement and its answer, for the
// replay that begins its transaction. The caller may modify what it is
// given; the replay compares with a copy.
func (v *view) keepFirst(sql string, args []any, rows []row) {
	kept := make([]row, len(rows))
	for i, r := range rows {
		kept[i] = row{k: clone(r.k), v: clone(r.v)}
	}
	v.first = &stmt{sql: sql, args: cloneArgs(args), rows: kept}
}

// fail records err as the View's database error and returns it, marked
// store.ErrUnavailable, for the function: a function passes on the
// errors of its reads, and View returns the function's error as it is.
func (v *view) fail(err error) error {
	if v.broken == nil {
		v.broken = err
	}
	return fmt.Errorf("pgstore: %w (%w)", store.ErrUnavailable, err)
}

// cloneArgs copies the byte slices among args: the caller may reuse
// them once the statement returned, and a View may run it again.
func cloneArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if b, ok := a.([]byte); ok {
			a = clone(b)
		}
		out[i] = a
	}
	return out
}

func sameRows(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].k, b[i].k) || !bytes.Equal(a[i].v, b[i].v) {
			return false
		}
	}
	return true
}

func (v *view) Get(key []byte) ([]byte, error) {
	rows, err := v.query(v.s.q.get, key)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, store.ErrNotFound
	}
	return rows[0].v, nil
}

func (v *view) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	if v.done {
		return ordered.ErrIter(errFinished)
	}
	if emptyRange(lower, upper) {
		return ordered.ErrIter(nil)
	}
	return &dbIter{page: v.query, q: &v.s.q, lower: clone(lower), upper: clone(upper), reverse: reverse, done: &v.done}
}

// dbIter reads a range from the database in pages, each continuing after
// the last key returned. All the pages come from one snapshot, since the
// transaction's statements all read the same one (and the first page of
// a View, run alone, is checked again when a second statement begins the
// transaction).
type dbIter struct {
	page func(sql string, args ...any) ([]row, error)
	// note, if set, is told every page's rows (group.noteIterated).
	note         func([]row)
	q            *queries
	lower, upper []byte
	reverse      bool
	done         *bool // the reader's: set once its function returned

	rows       []row
	i          int
	pages      int
	last       []byte // the last key returned
	end        bool   // no page after the one in rows
	closed     bool
	err        error
	curK, curV []byte
}

// pageSizes are the limits of successive pages: small first, since many
// iterations stop after a few keys.
var pageSizes = [...]int{16, 64, 256}

func (it *dbIter) fetch() {
	if *it.done {
		it.err = errFinished
		return
	}
	limit := pageSizes[min(it.pages, len(pageSizes)-1)]
	it.pages++
	var args []any
	lo, hi := 0, 0
	lower, upper := it.lower, it.upper
	if it.last != nil {
		if it.reverse {
			upper = it.last
		} else {
			lower = it.last
			lo = 2
		}
	}
	if lower != nil {
		args = append(args, lower)
		if lo == 0 {
			lo = 1
		}
	}
	if upper != nil {
		args = append(args, upper)
		hi = 1
	}
	args = append(args, limit)
	rev := 0
	if it.reverse {
		rev = 1
	}
	rows, err := it.page(it.q.page[rev][lo][hi], args...)
	if err != nil {
		it.err = err
		return
	}
	if it.note != nil {
		it.note(rows)
	}
	it.rows, it.i = rows, 0
	it.end = len(rows) < limit
}

func (it *dbIter) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if it.i >= len(it.rows) {
		if it.end {
			it.curK, it.curV = nil, nil
			return false
		}
		it.fetch()
		if it.err != nil {
			it.curK, it.curV = nil, nil
			return false
		}
		if len(it.rows) == 0 {
			it.curK, it.curV = nil, nil
			return false
		}
	}
	r := it.rows[it.i]
	it.i++
	it.curK, it.curV, it.last = r.k, r.v, r.k
	return true
}

func (it *dbIter) Key() []byte   { return it.curK }
func (it *dbIter) Value() []byte { return it.curV }
func (it *dbIter) Err() error    { return it.err }

func (it *dbIter) Close() error {
	it.closed = true
	it.rows, it.curK, it.curV = nil, nil, nil
	return it.err
}
