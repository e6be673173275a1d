package pgstore

import (
	"context"
	"errors"

	"github.com/countersign/countersign/store"
	"github.com/jackc/pgx/v5"
)

// TerminateBackendForTest ends the backend of txn's connection from inside
// the transaction, the way a failover drops a connection.
func TerminateBackendForTest(st store.Txn) error {
	t := st.(*txn)
	_, err := t.tx.Exec(t.ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
	if err != nil {
		return t.fail(err)
	}
	return nil
}

// LoseCommitAnswersForTest makes every COMMIT's answer lost after the
// commit was made or not (commit decides), and every marker read fail
// when readable is false.
func LoseCommitAnswersForTest(s *Store, commit bool, readable bool) {
	s.commitHook = func(ctx context.Context, tx pgx.Tx) error {
		if commit {
			if err := tx.Commit(ctx); err != nil {
				return err
			}
		} else {
			_ = tx.Rollback(ctx)
		}
		return errors.New("connection reset while reading COMMIT's answer")
	}
	if !readable {
		s.foundHook = func(context.Context, []byte) (bool, error) {
			return false, errors.New("database unreachable")
		}
	}
}
