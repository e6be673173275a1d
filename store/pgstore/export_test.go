package pgstore

import "github.com/countersign/countersign/store"

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
