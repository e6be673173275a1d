package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/countersign/countersign/store"
)

// TerminateBackendForTest ends the backend of txn's connection from inside
// the transaction, the way a failover drops a connection.
func TerminateBackendForTest(st store.Txn) error {
	_, err := st.(*txn).g.query("SELECT convert_to(pg_terminate_backend(pg_backend_pid())::text, 'UTF8')")
	return err
}

// LoseCommitAnswersForTest makes every COMMIT's answer lost after the
// commit was made or not (commit decides), and every marker read fail
// when readable is false.
func LoseCommitAnswersForTest(s *Store, commit bool, readable bool) {
	s.commitHook = func(ctx context.Context, send func() error) error {
		if commit {
			if err := send(); err != nil {
				return err
			}
		}
		return errors.New("connection reset while reading COMMIT's answer")
	}
	if !readable {
		s.foundHook = func(context.Context, []byte) (bool, error) {
			return false, errors.New("database unreachable")
		}
		s.patience = 300 * time.Millisecond
	}
}

// RefuseCommitsForTest makes the next n commits fail as PostgreSQL
// refuses a transaction that conflicts (40001), without sending them.
func RefuseCommitsForTest(s *Store, n int) {
	s.commitHook = func(ctx context.Context, send func() error) error {
		if n > 0 {
			n--
			return &pgconn.PgError{Severity: "ERROR", Code: "40001", Message: "could not serialize access (injected)"}
		}
		return send()
	}
}

// OnQueuedForTest sets a function run after every Update is queued, and
// lets a group gather for as long as the queue is not empty: tests queue
// Updates behind one that blocks, and they all commit together.
func OnQueuedForTest(s *Store, fn func()) {
	s.queuedHook = fn
	s.groupTime = time.Hour
}

// SchemaForTest names the store's schema.
func SchemaForTest(s *Store) string { return s.schema }

// HoldMarkerReadsForTest makes every COMMIT's answer lost after the
// commit was made, and the reading back of its marker wait: reading
// receives a value when the first read begins, and the reads answer once
// release is closed.
func HoldMarkerReadsForTest(s *Store) (reading <-chan struct{}, release chan<- struct{}) {
	r, rel := make(chan struct{}), make(chan struct{})
	LoseCommitAnswersForTest(s, true, true)
	once := sync.OnceFunc(func() { close(r) })
	failed := false
	s.foundHook = func(ctx context.Context, mark []byte) (bool, error) {
		if !failed {
			// A first read fails, as when the database is unreachable.
			failed = true
			return false, errors.New("database unreachable")
		}
		once()
		<-rel
		s.foundHook = nil
		var n int
		err := s.pool.QueryRow(ctx, s.q.found, mark).Scan(&n)
		return n > 0, err
	}
	return r, rel
}

// OnResolvingForTest sets a function run when the committer starts
// reading back the marker of a commit whose answer was lost.
func OnResolvingForTest(s *Store, fn func()) { s.resolvingHook = fn }

// LockFirstForTest makes the store take the commit lock before its
// groups' functions run for d after it last saw another process's change.
func LockFirstForTest(s *Store, d time.Duration) { s.lockFirstFor = d }

// SettingForTest reads a setting of one of the pool's sessions.
func SettingForTest(s *Store, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(context.Background(), "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// CacheResetsForTest counts the times the committer forgot its cache
// because the log of other processes' changes was too long to read, or
// swept. Read it only while no Update runs.
func CacheResetsForTest(s *Store) int { return s.cacheResets }
