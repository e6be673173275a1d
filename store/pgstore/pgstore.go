// Package pgstore is a [store.Store] on PostgreSQL, through
// github.com/jackc/pgx/v5's connection pool: an existing, trusted database
// engine for deployments that outgrow one machine's Pebble directory.
//
// # Layout
//
// Everything lives in one schema (Options.Schema, default "countersign"):
// the key-value table kv (k bytea PRIMARY KEY, v bytea NOT NULL), whose
// ordered primary key gives bytewise iteration (bytea compares bytewise);
// schema_version, the migrations applied; commits, the markers that
// resolve a commit whose answer was lost; and changes, the log of changed
// keys that keeps several processes' caches coherent (coherence.go).
// [Open] creates and migrates the schema: versioned, idempotent
// migrations, safe when several processes open the same database at
// once. The pool's connections to PostgreSQL run with sequential scans
// and JIT compilation off, and a bound on idling inside a transaction
// (sessionSettings).
//
// # Group commit
//
// Every Update of a process goes through one committer goroutine, which
// commits concurrent Updates together in one database transaction, as
// package pebblestore shares one fsync among them. The committer takes the
// queued Updates in arrival order and runs their functions one after
// another. A function's writes go to a private overlay and are folded into
// the group's buffer, in memory, only if it returns nil: a failing function
// leaves no trace, and each later function sees the writes of the earlier
// ones. Nothing is written to the database while the functions run. When
// the queue is empty, or the group holds [Options.MaxGroup] transactions
// or has run for 5 ms, the committer runs the group's commit hooks
// ([store.Committer]) and sends the group's net writes (one insert of the
// keys it read as absent or wrote blind while it guesses them new, one
// upsert of the other keys set, one delete of the keys deleted), with a
// commit marker and COMMIT, in one round trip, and waits for the answer
// before it runs the next group. Transactions are serializable: within
// the process they run one at a time, each seeing all earlier ones;
// between processes on PostgreSQL, the commit lock (below) runs the
// groups one at a time, each a REPEATABLE READ transaction whose snapshot
// is taken under the lock, and on CockroachDB serializable isolation
// orders them. The functions run on the committer goroutine, so they must not
// block on other Updates; a function that panics has its transaction
// dropped and the panic re-raised in its caller.
//
// Reads of a group go to the database inside its transaction, which is
// begun by the first one, in the same round trip. A value the committer
// has read or committed before is answered from its cache instead, without
// a round trip, and so is a key it has never seen while nearly every such
// key has lately turned out absent (the idempotency key of a new request,
// the id of a new transaction): it is guessed absent. Cached and guessed
// values are checked at commit: the commit's round trip begins with a
// statement that compares each with the transaction's snapshot and fails
// when one differs (a cast of a message that names the cause, SQLSTATE
// 22P02), which aborts the transaction before anything is written. The
// committer then reads what the database holds for those keys and runs
// the group again. So a function may see a stale value (another process
// wrote the key), but nothing computed from one commits, and no caller is
// answered from one: a function's error, or a commit hook's, is returned
// only once the values it read were checked. The cache keeps two
// generations of up to 16 MiB and 32,768 keys each: a key read in every
// group stays, one written once and never read again goes.
//
// A group is run again, all its functions from the start, when PostgreSQL
// refuses it for a conflict (SQLSTATE 40001, 40P01), when a cached or
// guessed value was wrong, or when a connection drops before COMMIT was sent;
// the store contract already says a function may run more than once. An
// Update whose ctx ends while it is queued is withdrawn, and one whose ctx
// has ended when its function returns (or before it runs again) is
// answered ctx.Err() and its writes are dropped. A group gives up after
// [Options.MaxAttempts] runs.
//
// A commit whose answer is lost (the connection drops while the commit's
// round trip is out, or was dead already: a write to a closed connection
// may seem to succeed) is not guessed at: every group that writes also
// inserts a random marker into commits, and the store reads it back on a
// new connection — present, the commit happened; absent, it did not, and
// the group runs again. While the database cannot be reached the store
// tries again, for up to two minutes (a restart, a failover): the group's
// callers wait, and every other Update is refused with
// store.ErrUnavailable meanwhile. Markers are swept after an hour. When
// even that fails, the store does as the store contract asks of a durable
// driver that cannot tell: every later transaction fails with
// store.ErrFailed until the process restarts. A database that is
// unreachable or restarting otherwise gives store.ErrUnavailable: nothing
// written, try again; the store recovers when the database returns.
//
// [Store.UpdateDeferred] is group committed like Update; a group all of
// whose transactions are deferred commits with synchronous_commit off for
// that transaction only, so it does not wait for its WAL flush. PostgreSQL
// writes one ordered WAL, and a synchronous commit flushes it up to its
// own commit record, so every later synchronous commit makes the deferred
// one durable too; the next group with an Update that is not deferred
// writes a marker, and so commits synchronously, even when its functions
// wrote nothing. On CockroachDB, which has no such setting, deferred
// commits are synchronous.
//
// # Reads
//
// A View that reads one key, or one page of a range, costs one round trip:
// its first statement runs alone, outside a transaction, and is a snapshot
// by itself. A View that goes on to a second statement begins a
// REPEATABLE READ READ ONLY transaction in the same round trip as that
// statement and runs its first one again inside it; if the answer
// differs, the function runs again, entirely inside the transaction, so
// that whatever it returns comes from one snapshot. A View's function may
// therefore run twice, as it may when its connection drops. Iterators
// read their range in pages (16, 64, then 256 rows), each continuing after
// the last key returned: a transaction's statements all read one
// snapshot, so no cursor is needed, and an Update's iterator merges its
// pages with the group's buffered writes and its own, in key order, in
// either direction.
//
// # Several processes
//
// Several processes may open one database and schema. On PostgreSQL
// their groups commit one at a time, under a commit lock that each
// transaction of a committer takes right after BEGIN, before its
// snapshot; and every group that writes logs the keys it changed, so that
// each process brings its cache up to date with the others' changes when
// it takes the lock. A process that has seen another's change lately
// (a row in that log, or a cached value the check refused) takes the
// lock before its group's functions run, so that they read current
// values and the group commits at once; coherence.go has the design. A
// check that refused only guesses (keys the cache did not hold, taken to
// be absent, such as a lease renewed every few seconds whose value left
// the cache under load) says nothing of other processes: the committer
// reads those keys in the transaction the next attempt commits, and
// does not take the lock first afterwards. Should a cached value still be stale (a writer outside this
// package), the check refuses it and the group runs again, as above;
// PostgreSQL's log then shows the check's error ("invalid input syntax
// for type integer: "pgstore: a value this process cached has changed;
// …""). On CockroachDB, which has no LOCK TABLE, the groups of several
// processes are ordered by serializable isolation alone: one of two that
// conflict is refused (40001) and runs again.
//
// The store is a [store.Watcher]: every group that writes sends NOTIFY on
// a channel named after the schema in its commit's round trip, and
// [Store.Watch] LISTENs on one connection of its own, so that a process
// learns of the others' commits (the record's followers wake on them).
//
// # CockroachDB
//
// Only plain SQL both PostgreSQL and CockroachDB accept is used (bytea,
// ON CONFLICT, unnest, = ANY, correlated subqueries, a failing cast as
// the check, no advisory locks, no PL/pgSQL), except NOTIFY and LISTEN,
// on PostgreSQL only: see docs/DESIGN.md. Group commit, the cache and its check, and the Views'
// single round trip need nothing else, and CockroachDB reports its own
// transaction restarts as 40001, which run the group again; this driver
// has not been run against CockroachDB. Three things differ there: the
// connections keep CockroachDB's planner settings (enable_seqscan is a
// PostgreSQL setting); UpdateDeferred is an Update, since CockroachDB has
// no synchronous_commit and always waits for durability; and there is no
// LISTEN, so Watch signals once and a follower relies on its own polling.
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
	"sync"
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
	// MaxAttempts bounds how often a group of Updates runs after
	// conflicts, stale cached values and dropped connections. Default 64.
	MaxAttempts int
	// MaxGroup is the most Updates committed by one PostgreSQL
	// transaction. Larger groups share a commit among more callers, but
	// make each wait for more functions to run, and lose more work when a
	// group must run again. It also sizes the queue of waiting Updates:
	// callers beyond it block in Update until the committer catches up.
	// Default DefaultMaxGroup.
	MaxGroup int
	// Logger receives retries at Debug and the store's faults at Error.
	// Default slog.Default().
	Logger *slog.Logger
	// OnCommit, if set, is called by the committer after every group
	// that sent a commit, committed or not, with what it cost; metrics
	// hang here. It runs on the committer goroutine between groups, so
	// it must be cheap and must not call back into the store.
	OnCommit func(CommitInfo)
}

// CommitInfo describes one group, for [Options.OnCommit]: where the
// committer's time went. The committer runs one group at a time, so Lock,
// Run and Commit, group after group, are most of the chain every Update
// waits in; the rest is the pauses before a group runs again after a
// conflict and the committer's upkeep between groups.
type CommitInfo struct {
	// Txns is the number of Updates the group committed; 0 when it
	// failed.
	Txns int
	// Attempts is the number of times the group's functions ran: 1
	// unless a conflict, a stale cached value or a dropped connection
	// ran it again.
	Attempts int
	// Lock is the wait for the commit lock taken before the functions
	// ran, with the read of the other processes' changes (zero unless
	// another process committed lately).
	Lock time.Duration
	// Run is the time the functions and commit hooks ran, every attempt,
	// with the reads from the database they waited for.
	Run time.Duration
	// Commit is the time the commit's round trips took, every attempt:
	// the statements, the WAL flush (unless Deferred) and the wire; and
	// what follows one that failed: the read of the values a refused
	// check named (with the wait for the commit lock it takes), or of the
	// marker of a commit whose answer was lost.
	Commit time.Duration
	// Deferred reports a commit that did not wait for its WAL flush
	// (every Update of the group was an UpdateDeferred).
	Deferred bool
	// Err is the store's error every Update of the group was answered
	// with (store.ErrUnavailable, store.ErrFailed, ...); nil when it
	// committed. A function's or a commit hook's own error is not a
	// commit's: a group whose hook failed wrote nothing, and reports Txns
	// 0 and Err nil.
	Err error
}

// DefaultMaxGroup is the [Options.MaxGroup] used when it is zero.
const DefaultMaxGroup = 128

// maxGroupTime bounds how long the committer runs the functions of one
// group before it commits them, so that a steady stream of arrivals
// cannot hold the first ones back.
const maxGroupTime = 5 * time.Millisecond

// roundTrip bounds one exchange with the database, so that a database that
// stops answering fails the transactions waiting on it rather than the
// committer hanging.
const roundTrip = 30 * time.Second

// Stats counts the committer's work since Open.
type Stats struct {
	// Txns is the number of Updates committed: functions that returned
	// nil and whose group committed.
	Txns uint64
	// Groups is the number of groups committed (one database transaction
	// each).
	Groups uint64
	// Reruns is the number of times a group ran again: conflicts, stale
	// cached values, dropped connections.
	Reruns uint64
	// Stale is the number of those re-runs caused by a value the
	// committer had cached, or guessed absent, that the database held
	// otherwise (another process wrote it).
	Stale uint64
}

// Store is a [store.Store] on a PostgreSQL database. It is safe for
// concurrent use; several processes may open the same database and schema.
type Store struct {
	pool     *pgxpool.Pool
	schema   string
	attempts int
	maxGroup int
	// groupTime bounds how long the committer runs the functions of one
	// group (maxGroupTime; tests lengthen it).
	groupTime time.Duration
	log       *slog.Logger
	onCommit  func(CommitInfo)
	// async is set when synchronous_commit can be switched off for one
	// transaction (PostgreSQL; not CockroachDB).
	async bool
	// serialize is set when every transaction the committer begins takes
	// the commit lock first, before its snapshot (PostgreSQL; not
	// CockroachDB, which has no LOCK TABLE): see "Several processes" in
	// the package documentation.
	serialize bool
	q         queries

	// reqs carries queued Updates to the committer, in arrival order.
	reqs chan *request
	// stop tells the committer to exit; closed by Close once no Update is
	// in flight, so the queue is empty by then.
	stop          chan struct{}
	committerDone chan struct{}

	// mu guards closed against the inflight.Add in enter, so that Close's
	// inflight.Wait never races with a new caller.
	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup

	// failed is set when a commit's outcome could not be learnt: from
	// then on every View and Update returns it.
	failed atomic.Pointer[error]
	// resolving is set while the committer reads back the marker of a
	// commit whose answer was lost: Updates are refused meanwhile.
	resolving atomic.Bool
	// patience bounds that reading back (defaultPatience; tests shorten
	// it).
	patience time.Duration

	txns, groups, reruns, stale atomic.Uint64

	// Only the committer goroutine touches these.
	cache readCache
	// asyncUnflushed is set after a group committed with
	// synchronous_commit off, and cleared by the next synchronous commit.
	asyncUnflushed bool
	// seen is the last change (coherence.go) whose keys the cache
	// accounts for; lockFirstUntil, while in the future, makes each
	// group take the commit lock before its functions run.
	seen           int64
	lockFirstUntil time.Time
	lockFirstFor   time.Duration
	// cacheResets counts the cache forgotten for a log of changes too
	// long to read or swept (tests).
	cacheResets int

	// watchState is Watch's (watch.go).
	watchState
	// getBatcher batches Views' first reads (getbatch.go).
	getBatcher

	// Test hooks (export_test.go), nil in production: commitHook wraps
	// the round trip that sends a group's commit, found replaces reading
	// a marker back, queued runs after an Update is queued.
	commitHook func(ctx context.Context, send func() error) error
	foundHook  func(context.Context, []byte) (bool, error)
	queuedHook func()
	// resolvingHook runs when the committer starts reading a marker back.
	resolvingHook func()
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Deferrer = (*Store)(nil)
)

var validSchema = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to the database named by connString (a postgres:// URL or
// key=value string, as pgxpool.ParseConfig reads it), creates or migrates
// the schema, starts the committer and returns the store. Close releases
// both.
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
	if o.MaxGroup == 0 {
		o.MaxGroup = DefaultMaxGroup
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if !validSchema.MatchString(o.Schema) {
		return nil, fmt.Errorf("pgstore: schema %q: want 1 to 63 lower-case letters, digits and _", o.Schema)
	}
	if o.MaxGroup < 0 {
		return nil, fmt.Errorf("pgstore: MaxGroup %d is negative", o.MaxGroup)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	cfg.AfterConnect = sessionSettings
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{
		pool:          pool,
		schema:        o.Schema,
		attempts:      o.MaxAttempts,
		maxGroup:      o.MaxGroup,
		groupTime:     maxGroupTime,
		patience:      defaultPatience,
		lockFirstFor:  defaultLockFirstFor,
		log:           o.Logger,
		onCommit:      o.OnCommit,
		q:             newQueries(o.Schema),
		reqs:          make(chan *request, o.MaxGroup),
		stop:          make(chan struct{}),
		committerDone: make(chan struct{}),
		cache:         newReadCache(),
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	var version string
	if err := pool.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s.async = !strings.Contains(version, "CockroachDB")
	s.notify = s.async
	s.serialize = s.async
	if s.serialize {
		if err := pool.QueryRow(ctx, s.q.lastChange).Scan(&s.seen); err != nil {
			pool.Close()
			return nil, fmt.Errorf("pgstore: %w", err)
		}
	}
	s.listenCtx, s.stopListen = context.WithCancel(context.Background())
	s.listenDone = make(chan struct{})
	go s.committer()
	s.startGets()
	return s, nil
}

// sessionSettings sets up a new connection to PostgreSQL: sequential scans
// and JIT compilation off, generic plans kept. Every statement of the store
// reads keys or a range of keys through the primary key, and a connection
// keeps the plan of each (pgx prepares them): a plan made while the table
// was new, before PostgreSQL analyzed it, could otherwise scan the whole
// table for every lookup once it has grown (seen: 5 scans of 10,000 rows a
// payment). A statement with no index to use (sweeping old commit markers)
// still runs. And the read of the log of changed keys, a lookup per key
// whose count the planner cannot know, is costed high enough to be compiled
// by JIT on every run: 13 ms, for a statement that takes a fraction of one.
// Prepared statements keep one generic plan (plan_cache_mode): PostgreSQL
// otherwise planned the Views' reads of keys (= ANY of an array) and of
// ranges afresh on every run, their custom plans being costed below the
// generic one, and that planning was a tenth of the database's time on a
// payment (measured: 900 ms of planning over 23,000 payments, 59 ms with
// the setting). And a session left idle inside a transaction for longer
// than a round trip may take is ended by the database: a committer's
// transaction holds the commit lock (coherence.go), and a process that
// stopped (paused, or cut off by the network, which PostgreSQL may not
// notice for hours) must not hold every other process's commits with it.
// CockroachDB has none of these settings, and plans differently.
func sessionSettings(ctx context.Context, c *pgx.Conn) error {
	if c.PgConn().ParameterStatus("crdb_version") != "" {
		return nil
	}
	_, err := c.Exec(ctx, fmt.Sprintf("SET enable_seqscan = off; SET jit = off; SET plan_cache_mode = force_generic_plan; SET idle_in_transaction_session_timeout = %d",
		roundTrip.Milliseconds()))
	return err
}

// queries are the store's statements, built once for its schema.
type queries struct {
	get, insert, upsert, del, mark, found, sweep string
	// lock is the commit lock, and the others the log of changed keys:
	// see coherence.go.
	lock, changesSince, logChange, lastChange, sweepChanges string
	// getMany reads several keys: the batched first reads of Views
	// (getbatch.go).
	getMany string
	// refresh returns the keys among $1 whose value is not the one in $2
	// (NULL for absent), with their value (NULL for absent); guard fails
	// when there is one (see the package documentation).
	refresh, guard string
	// page reads one page of a range: [reverse][lower][upper], where
	// lower is none, k >= $, or k > $, and upper none or k < $. The
	// parameters are the bounds present, then the limit.
	page [2][3][2]string
}

// staleMessage is the text whose cast to int fails in the guard
// (SQLSTATE 22P02), and so appears in the database's log; guessMessage
// replaces it when every value that differs was a guess (a key the cache
// did not hold, taken to be absent), which says nothing of other
// processes.
const (
	staleMessage = "pgstore: a value this process cached has changed; its group of transactions runs again"
	guessMessage = "pgstore: a key this process guessed absent is present; its group of transactions runs again"
)

const (
	beginSerializable = "BEGIN ISOLATION LEVEL SERIALIZABLE"
	// beginUnderLock begins a transaction that takes the commit lock
	// (queueBegin).
	beginUnderLock = "BEGIN ISOLATION LEVEL REPEATABLE READ"
	beginSnapshot  = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
	// asyncCommit switches off the wait for the WAL flush of the
	// transaction it runs in, and of no other: see UpdateDeferred.
	asyncCommit = "SET LOCAL synchronous_commit = off"
)

func newQueries(schema string) queries {
	t := schema + ".kv"
	// Each key is looked up on its own (a correlated subquery, kept
	// apart by OFFSET 0): a join could be planned as a hash join over
	// the whole table, and a connection keeps a statement's plan.
	mismatch := func(params string) string {
		return " FROM (SELECT c.*, (SELECT kv.v FROM " + t + " AS kv WHERE kv.k = c.k) AS cur" +
			" FROM unnest(" + params + ") OFFSET 0) AS x WHERE cur IS DISTINCT FROM v"
	}
	q := queries{
		get:    "SELECT v FROM " + t + " WHERE k = $1",
		insert: "INSERT INTO " + t + " (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[])",
		upsert: "INSERT INTO " + t + " (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
		del:    "DELETE FROM " + t + " WHERE k = ANY($1::bytea[])",
		mark:   "INSERT INTO " + schema + ".commits (id, at) VALUES ($1, $2)",
		found:  "SELECT count(*) FROM " + schema + ".commits WHERE id = $1",
		sweep:  "DELETE FROM " + schema + ".commits WHERE at < $1",
		lock:   "LOCK TABLE " + schema + ".changes IN EXCLUSIVE MODE",
		// Under the lock, max(seq) is the last commit's: no two
		// processes number a change alike, and none is ever skipped.
		// Each key another process changed, with what it holds now
		// (NULL: deleted), looked up on its own as in the guard.
		// None at all when more than $2 rows are new (apply).
		changesSince: "SELECT c.seq, u.k, (SELECT kv.v FROM " + t + " AS kv WHERE kv.k = u.k) FROM " + schema +
			".changes AS c, unnest(c.k) AS u(k) WHERE c.seq > $1 AND (SELECT max(seq) FROM " + schema + ".changes) <= $1 + $2",
		logChange:  "INSERT INTO " + schema + ".changes (seq, at, k) SELECT coalesce(max(seq), 0) + 1, $1, $2 FROM " + schema + ".changes RETURNING seq",
		lastChange: "SELECT coalesce(max(seq), 0) FROM " + schema + ".changes",
		// The newest row stays, so that max(seq) never goes back.
		sweepChanges: "DELETE FROM " + schema + ".changes WHERE at < $1 AND seq < (SELECT max(seq) FROM " + schema + ".changes)",
		getMany:      "SELECT k, v FROM " + t + " WHERE k = ANY($1::bytea[])",
		refresh:      "SELECT k, cur" + mismatch("$1::bytea[], $2::bytea[]) AS c(k, v"),
		// The cast of the message fails, and aborts the transaction,
		// only when a value differs (the CASE is not a constant, so it is
		// evaluated at run time); the database's log then says why.
		// $3 marks the guessed values.
		guard: "SELECT (CASE WHEN count(*) = 0 THEN '0' WHEN bool_and(g) THEN '" + guessMessage + "' ELSE '" + staleMessage + "' END)::int" +
			mismatch("$1::bytea[], $2::bytea[], $3::bool[]) AS c(k, v, g"),
	}
	for rev := range 2 {
		for lo := range 3 {
			for hi := range 2 {
				q.page[rev][lo][hi] = pageQuery(t, rev == 1, lo, hi == 1)
			}
		}
	}
	return q
}

// pageQuery is the query that reads one page of a range: only the bounds
// it has, as plain comparisons on the primary key, so that the planner
// walks the index.
func pageQuery(table string, reverse bool, lower int, upper bool) string {
	var where []string
	n := 0
	param := func() string { n++; return fmt.Sprintf("$%d", n) }
	switch lower {
	case 1:
		where = append(where, "k >= "+param())
	case 2:
		where = append(where, "k > "+param())
	}
	if upper {
		where = append(where, "k < "+param())
	}
	q := "SELECT k, v FROM " + table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	order := " ORDER BY k ASC"
	if reverse {
		order = " ORDER BY k DESC"
	}
	return q + order + " LIMIT " + param()
}

// migrations are applied in order; each is idempotent, and the version
// row records how far a schema is.
var migrations = []string{
	`CREATE TABLE IF NOT EXISTS %[1]s.kv (k bytea PRIMARY KEY, v bytea NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS %[1]s.commits (id bytea PRIMARY KEY, at timestamptz NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS %[1]s.changes (seq bigint PRIMARY KEY, at timestamptz NOT NULL, k bytea[] NOT NULL)`,
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

// Close stops accepting transactions, waits for the Views and Updates in
// flight (queued Updates are committed), stops the committer and releases
// the pool. A second Close returns store.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.inflight.Wait()
	s.stopGetWorkers()
	close(s.stop)
	<-s.committerDone
	s.stopWatching()
	s.pool.Close()
	return nil
}

// Stats returns counts of the committer's work since Open.
func (s *Store) Stats() Stats {
	return Stats{Txns: s.txns.Load(), Groups: s.groups.Load(), Reruns: s.reruns.Load(), Stale: s.stale.Load()}
}

// enter registers a View or Update in flight, or says why none may start:
// the store is closed or failed, or ctx is done. On nil the caller must
// call s.inflight.Done.
func (s *Store) enter(ctx context.Context) error {
	return s.enterAs(ctx, false)
}

// enterAs is enter, for an Update when update is set: Updates are also
// refused while the outcome of a commit is being read back.
func (s *Store) enterAs(ctx context.Context, update bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	if err := s.failure(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if update && s.resolving.Load() {
		return errResolving
	}
	s.inflight.Add(1)
	return nil
}

// failure returns the error of a failed store, or nil.
func (s *Store) failure() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// fault wraps an error of the database that is not the caller's. The
// database may come back, and nothing was written (a commit whose answer
// was lost is resolved before this), so it is store.ErrUnavailable, which
// the HTTP edge answers 503 unavailable, retry-as-is; the store goes on
// working when the database does.
func (s *Store) fault(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("pgstore: %s: %w (%w)", what, store.ErrUnavailable, err)
}

// pause waits before another attempt: a short, growing, jittered delay.
func pause(attempt int) {
	d := time.Duration(min(attempt*attempt, 100)) * time.Millisecond
	var b [1]byte
	_, _ = rand.Read(b[:])
	time.Sleep(d/2 + time.Duration(int64(b[0])*int64(d)/512))
}

// retryable reports a refusal a new attempt can overcome: a serialization
// failure, a deadlock, or a connection that failed.
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

// rerunnable reports an error of a View, or of an Update's group before
// its commit was sent, after which running again on another connection
// may succeed: anything but an error the server reported for a
// statement, unless that is itself retryable. Neither has written
// anything, so a connection that died under them, even mid-statement,
// costs only the attempt; after the database restarts every idle
// connection of the pool is dead, and each is found so in turn.
func rerunnable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC" {
		return retryable(err)
	}
	return true
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

// queryRows reads the rows of a query: (k, v) for a query of two columns,
// (nil, v) for one of one column. The values are the caller's.
func queryRows(rows pgx.Rows, err error) ([]row, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []row
	two := len(rows.FieldDescriptions()) == 2
	for rows.Next() {
		var r row
		if two {
			err = rows.Scan(&r.k, &r.v)
		} else {
			err = rows.Scan(&r.v)
		}
		if err != nil {
			return nil, err
		}
		if r.v == nil {
			r.v = []byte{} // an empty value is a value, never NULL
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// row is one row a query returned.
type row struct{ k, v []byte }
