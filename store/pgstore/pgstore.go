// Package pgstore is a [store.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5's connection pool: an existing, trusted database
// engine for deployments that outgrow one machine's Pebble directory.
//
// # Layout
//
// Everything lives in one schema (Options.Schema, default "countersign"):
// the key-value table kv (k bytea PRIMARY KEY, v bytea NOT NULL), whose
// ordered primary key gives bytewise iteration (bytea compares bytewise);
// schema_version, the migrations applied; and commits, the markers that
// resolve a commit whose answer was lost. [Open] creates and migrates the
// schema: versioned, idempotent migrations, safe when several processes
// open the same database at once.
//
// # Transactions
//
// View is a read-only REPEATABLE READ transaction: one snapshot. Update is
// a SERIALIZABLE transaction whose function runs again when PostgreSQL
// refuses it for a conflict (SQLSTATE 40001, 40P01) or a connection drops
// before COMMIT was sent; the store contract already says the function may
// run more than once. A commit whose answer is lost (the connection drops
// during COMMIT) is not guessed at: every Update also writes a random
// marker into commits, and the store reads it back on a new connection —
// present, the commit happened and Update returns nil; absent, it did not,
// and the function runs again. Markers are swept after an hour. When even
// that read fails, the store does as the store contract asks of a durable
// driver that cannot tell: every later transaction fails with
// store.ErrFailed until the process restarts. A database that is
// unreachable or restarting otherwise gives store.ErrUnavailable: nothing
// written, try again; the store recovers when the database returns.
//
// Only plain SQL both PostgreSQL and CockroachDB accept is used (bytea,
// ON CONFLICT, no advisory locks, no LISTEN): see docs/DESIGN.md.
//
// # Erasure
//
// pgstore does not implement [store.Shredder]: PostgreSQL removes a
// deleted row logically at commit, and its bytes physically when (auto)
// VACUUM reclaims the page and the WAL that held it is recycled. Memory
// erasure on PostgreSQL therefore guarantees that no query, backup taken
// after the erasure, or replica returns the erased bodies, and their
// physical disappearance within the database's vacuum and WAL retention.
package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/store"
)

// Options configures a [Store]. The zero value gives the defaults.
type Options struct {
	// Schema is the PostgreSQL schema that holds the store's tables,
	// created if missing. Default "countersign".
	Schema string
	// MaxAttempts bounds how often an Update runs its function after
	// conflicts and dropped connections. Default 64.
	MaxAttempts int
	// Logger receives retries at Debug and the store's faults at Error.
	// Default slog.Default().
	Logger *slog.Logger
}

// Store is a [store.Store] on a PostgreSQL database. It is safe for
// concurrent use; several processes may open the same database and schema.
type Store struct {
	pool     *pgxpool.Pool
	schema   string
	attempts int
	log      *slog.Logger
	closed   atomic.Bool
	commits  atomic.Int64 // for the marker sweep
	// failed is set when a commit's outcome could not be learnt: from
	// then on every View and Update returns it (see failedErr).
	failed atomic.Pointer[error]
	// Test hooks (export_test.go): commit replaces tx.Commit, found
	// replaces reading a marker back. Nil in production.
	commitHook func(context.Context, pgx.Tx) error
	foundHook  func(context.Context, []byte) (bool, error)

	qGet, qSet, qDel, qMark, qFound, qSweep string
	qRange                                  [2][2][2]string // [reverse][lower][upper]
}

var _ store.Store = (*Store)(nil)

var validSchema = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// batch is how many rows an iterator fetches from its cursor at a time.
const batch = 256

// Open connects to the database named by connString (a postgres:// URL or
// key=value string, as pgxpool.ParseConfig reads it), creates or migrates
// the schema, and returns the store. Close releases the pool.
func Open(ctx context.Context, connString string, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = "countersign"
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if !validSchema.MatchString(o.Schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want 1 to 63 lower-case letters, digits and _", o.Schema)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{pool: pool, schema: o.Schema, attempts: o.MaxAttempts, log: o.Logger}
	s.prepareQueries()
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) prepareQueries() {
	t := s.schema + ".kv"
	s.qGet = "SELECT v FROM " + t + " WHERE k = $1"
	s.qSet = "INSERT INTO " + t + " (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
	s.qDel = "DELETE FROM " + t + " WHERE k = $1"
	s.qMark = "INSERT INTO " + s.schema + ".commits (id, at) VALUES ($1, $2)"
	s.qFound = "SELECT count(*) FROM " + s.schema + ".commits WHERE id = $1"
	s.qSweep = "DELETE FROM " + s.schema + ".commits WHERE at < $1"
	for rev := range 2 {
		for lo := range 2 {
			for hi := range 2 {
				s.qRange[rev][lo][hi] = rangeQuery(t, rev == 1, lo == 1, hi == 1)
			}
		}
	}
}

// rangeQuery is the query an iterator's cursor runs: only the bounds it
// has, as plain comparisons on the primary key, so that the planner walks
// the index. The parameters are lower and upper, each present only when
// used.
func rangeQuery(table string, reverse, lower, upper bool) string {
	var where []string
	n := 0
	param := func() string { n++; return fmt.Sprintf("$%d", n) }
	if lower {
		where = append(where, "k >= "+param())
	}
	if upper {
		where = append(where, "k < "+param())
	}
	q := "SELECT k, v FROM " + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if reverse {
		return q + " ORDER BY k DESC"
	}
	return q + " ORDER BY k ASC"
}

// migrations are applied in order; each is idempotent, and the version
// row records how far a schema is.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS %[1]s.kv (k bytea PRIMARY KEY, v bytea NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS %[1]s.commits (id bytea PRIMARY KEY, at timestamptz NOT NULL)`,
}

func (s *Store) migrate(ctx context.Context) error {
	var last error
	for attempt := 0; attempt < 10; attempt++ {
		err := s.migrateOnce(ctx)
		if err == nil {
			return nil
		}
		last = err
		// Two processes creating the same schema at once: one of them
		// meets a unique violation or a duplicate object (the table's row
		// type) in the catalog, and tries again.
		if !retryable(err) && !isCode(err, "23505", "42P06", "42P07", "42710") {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
	}
	return fmt.Errorf("pgstore: migrate schema %s: %w", s.schema, last)
}

func (s *Store) migrateOnce(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.schema); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.schema+
		".schema_version (one int PRIMARY KEY CHECK (one = 1), version int NOT NULL)"); err != nil {
		return err
	}
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+s.schema+".schema_version (one, version) VALUES (1, 0) ON CONFLICT (one) DO NOTHING"); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, "SELECT version FROM "+s.schema+".schema_version WHERE one = 1 FOR UPDATE").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("schema version %d is newer than this program (%d): upgrade the program", v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.Exec(ctx, fmt.Sprintf(migrations[i], s.schema)); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		_, err := tx.Exec(ctx, "UPDATE "+s.schema+".schema_version SET version = $1 WHERE one = 1", len(migrations))
		return err
	})
}

// Close releases the pool. A second Close returns store.ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return store.ErrClosed
	}
	s.pool.Close()
	return nil
}

// usable says why no transaction may start: the store is closed or
// failed, or ctx is done.
func (s *Store) usable(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := s.failed.Load(); err != nil {
		return *err
	}
	return ctx.Err()
}

// View runs fn in a read-only REPEATABLE READ transaction.
func (s *Store) View(ctx context.Context, fn func(store.Reader) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			if ctx.Err() == nil && retryable(err) && attempt < s.attempts {
				continue
			}
			return s.fault(ctx, "view", err)
		}
		t := &txn{s: s, ctx: ctx, tx: tx}
		ferr := fn(t)
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if t.broken != nil && ctx.Err() == nil && retryable(t.broken) && attempt < s.attempts {
			continue
		}
		if ferr != nil {
			return ferr
		}
		if t.broken != nil {
			return s.fault(ctx, "view", t.broken)
		}
		return nil
	}
}

// Update runs fn in a SERIALIZABLE transaction and commits its writes if
// fn returns nil, running fn again after a conflict or a dropped
// connection (see the package documentation).
func (s *Store) Update(ctx context.Context, fn func(store.Txn) error) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	var last error
	for attempt := 1; attempt <= s.attempts; attempt++ {
		if attempt > 1 {
			s.log.DebugContext(ctx, "pgstore: running a transaction again", slog.Int("attempt", attempt), slog.Any("error", last))
			if err := pause(ctx, attempt); err != nil {
				return err
			}
		}
		done, err := s.updateOnce(ctx, fn)
		if done {
			return err
		}
		last = err
	}
	return fmt.Errorf("pgstore: update: gave up after %d attempts: %w (%w)", s.attempts, store.ErrUnavailable, last)
}

// updateOnce runs one attempt. done is false when the attempt should be
// made again (err says why).
func (s *Store) updateOnce(ctx context.Context, fn func(store.Txn) error) (done bool, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	if err != nil {
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		if retryable(err) {
			return false, err
		}
		return true, s.fault(ctx, "begin", err)
	}
	rollback := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	t := &txn{s: s, ctx: ctx, tx: tx}
	ferr := fn(t)
	if t.broken != nil {
		rollback()
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		if retryable(t.broken) {
			return false, t.broken
		}
		if ferr != nil {
			return true, ferr
		}
		return true, s.fault(ctx, "update", t.broken)
	}
	if ferr != nil {
		rollback()
		return true, ferr
	}
	if err := ctx.Err(); err != nil {
		rollback()
		return true, err
	}
	mark := make([]byte, 16)
	_, _ = rand.Read(mark)
	if _, err := tx.Exec(ctx, s.qMark, mark, time.Now().UTC()); err != nil {
		rollback()
		if ctx.Err() != nil {
			return true, ctx.Err()
		}
		if retryable(err) {
			return false, err
		}
		return true, s.fault(ctx, "commit marker", err)
	}
	commit := func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
	if s.commitHook != nil {
		commit = s.commitHook
	}
	cerr := commit(context.WithoutCancel(ctx), tx)
	if cerr == nil {
		s.sweep(ctx)
		return true, nil
	}
	if isCode(cerr, "40001", "40P01") {
		return false, cerr // refused at commit: nothing was written
	}
	// The answer to COMMIT was lost: read the marker to learn whether it
	// happened, rather than run fn again over a commit that landed.
	committed, rerr := s.markerFound(ctx, mark)
	if rerr != nil {
		// Neither answer could be had. The store contract's rule for a
		// durable driver that cannot tell whether a commit landed: fail
		// every later transaction rather than guess (store.ErrFailed),
		// until the process is restarted and the record is read afresh.
		err := fmt.Errorf("pgstore: the outcome of a commit is unknown (%v) and could not be read back (%v): %w", cerr, rerr, store.ErrFailed)
		s.failed.Store(&err)
		return true, err
	}
	if committed {
		return true, nil
	}
	return false, cerr
}

// markerFound reads back a commit marker on a new connection, trying a
// few times while the database comes back.
func (s *Store) markerFound(ctx context.Context, mark []byte) (bool, error) {
	if s.foundHook != nil {
		return s.foundHook(ctx, mark)
	}
	var last error
	for attempt := 1; attempt <= 20; attempt++ {
		var n int
		err := s.pool.QueryRow(context.WithoutCancel(ctx), s.qFound, mark).Scan(&n)
		if err == nil {
			return n > 0, nil
		}
		last = err
		time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
	}
	return false, last
}

// sweep deletes commit markers older than an hour, once every 1,000
// commits of this process.
func (s *Store) sweep(ctx context.Context) {
	if s.commits.Add(1)%1000 != 0 {
		return
	}
	if _, err := s.pool.Exec(context.WithoutCancel(ctx), s.qSweep, time.Now().Add(-time.Hour).UTC()); err != nil {
		s.log.ErrorContext(ctx, "pgstore: sweeping commit markers", slog.Any("error", err))
	}
}

// fault wraps an error of the database that is not the caller's. The
// database may come back, and nothing was written (a commit whose answer
// was lost is resolved before this), so it is store.ErrUnavailable, which
// the HTTP edge answers 503 unavailable, retry-as-is; the store goes on
// working when the database does.
func (s *Store) fault(ctx context.Context, what string, err error) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("pgstore: %s: %w (%w)", what, store.ErrUnavailable, err)
}

// pause waits before another attempt: a short, growing, jittered delay.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(min(attempt*attempt, 100)) * time.Millisecond
	var b [1]byte
	_, _ = rand.Read(b[:])
	d = d/2 + time.Duration(int64(b[0])*int64(d)/512)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryable reports a refusal a new attempt can overcome: a serialization
// failure, a deadlock, or a connection that failed before the statement
// ran.
func retryable(err error) bool {
	if isCode(err, "40001", "40P01") {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Connection exceptions (class 08) and an administrator's
		// shutdown: another connection may do.
		return len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code == "57P01")
	}
	return pgconn.SafeToRetry(err) || isConnectionLoss(err)
}

func isConnectionLoss(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, pgx.ErrTxClosed)
}

func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	for _, c := range codes {
		if pe.Code == c {
			return true
		}
	}
	return false
}

// txn is a Reader and Txn over one pgx transaction. broken is the first
// database error it met: the transaction is then aborted, and the attempt
// ends whatever fn returns.
type txn struct {
	s       *Store
	ctx     context.Context
	tx      pgx.Tx
	broken  error
	cursors int // cursors declared, for their names
}

func (t *txn) fail(err error) error {
	if t.broken == nil {
		t.broken = err
	}
	return fmt.Errorf("pgstore: %w", err)
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.broken != nil {
		return nil, fmt.Errorf("pgstore: transaction aborted: %w", t.broken)
	}
	var v []byte
	err := t.tx.QueryRow(t.ctx, t.s.qGet, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.fail(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *txn) Set(key, value []byte) error {
	if t.broken != nil {
		return fmt.Errorf("pgstore: transaction aborted: %w", t.broken)
	}
	if value == nil {
		value = []byte{} // an empty value is a value, never NULL
	}
	if _, err := t.tx.Exec(t.ctx, t.s.qSet, key, value); err != nil {
		return t.fail(err)
	}
	return nil
}

func (t *txn) Delete(key []byte) error {
	if t.broken != nil {
		return fmt.Errorf("pgstore: transaction aborted: %w", t.broken)
	}
	if _, err := t.tx.Exec(t.ctx, t.s.qDel, key); err != nil {
		return t.fail(err)
	}
	return nil
}

func (t *txn) Iterate(lower, upper []byte, reverse bool) store.Iterator {
	return &iter{t: t, lower: lower, upper: upper, reverse: reverse}
}

// iter reads its range through a cursor, declared on the first Next and
// fetched in batches: a cursor sees the transaction's state as of its
// declaration (writes the transaction makes while iterating do not show),
// and other statements may run between fetches, which an open query would
// not allow.
type iter struct {
	t             *txn
	lower, upper  []byte
	reverse       bool
	name          string // the cursor, once declared
	keys, vals    [][]byte
	i             int
	done, started bool
	closed        bool
	err           error
	curK, curV    []byte
}

func (it *iter) declare() {
	idx := func(b bool) int {
		if b {
			return 1
		}
		return 0
	}
	var args []any
	if it.lower != nil {
		args = append(args, it.lower)
	}
	if it.upper != nil {
		args = append(args, it.upper)
	}
	it.t.cursors++
	it.name = fmt.Sprintf("cs_iter_%d", it.t.cursors)
	q := "DECLARE " + it.name + " NO SCROLL CURSOR FOR " + it.t.s.qRange[idx(it.reverse)][idx(it.lower != nil)][idx(it.upper != nil)]
	if _, err := it.t.tx.Exec(it.t.ctx, q, args...); err != nil {
		it.err = it.t.fail(err)
	}
}

func (it *iter) fetch() {
	if it.t.broken != nil {
		it.err = fmt.Errorf("pgstore: transaction aborted: %w", it.t.broken)
		return
	}
	rows, err := it.t.tx.Query(it.t.ctx, fmt.Sprintf("FETCH %d FROM %s", batch, it.name))
	if err != nil {
		it.err = it.t.fail(err)
		return
	}
	it.keys, it.vals, it.i = it.keys[:0], it.vals[:0], 0
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			it.err = it.t.fail(err)
			return
		}
		if v == nil {
			v = []byte{}
		}
		it.keys, it.vals = append(it.keys, k), append(it.vals, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		it.err = it.t.fail(err)
		return
	}
	if len(it.keys) < batch {
		it.done = true
	}
}

func (it *iter) Next() bool {
	if it.err != nil || it.closed {
		return false
	}
	if !it.started {
		it.started = true
		if it.t.broken != nil {
			it.err = fmt.Errorf("pgstore: transaction aborted: %w", it.t.broken)
			return false
		}
		it.declare()
		if it.err != nil {
			return false
		}
	}
	if it.i >= len(it.keys) && !it.done {
		it.fetch()
		if it.err != nil {
			return false
		}
	}
	if it.i >= len(it.keys) {
		it.curK, it.curV = nil, nil
		return false
	}
	it.curK, it.curV = it.keys[it.i], it.vals[it.i]
	it.i++
	return true
}

func (it *iter) Key() []byte   { return it.curK }
func (it *iter) Value() []byte { return it.curV }
func (it *iter) Err() error    { return it.err }

// Close closes the cursor (the transaction's end would too).
func (it *iter) Close() error {
	if it.closed {
		return it.err
	}
	it.closed = true
	it.keys, it.vals, it.curK, it.curV = nil, nil, nil, nil
	if it.name != "" && it.err == nil && it.t.broken == nil {
		if _, err := it.t.tx.Exec(it.t.ctx, "CLOSE "+it.name); err != nil {
			it.err = it.t.fail(err)
		}
	}
	return it.err
}
