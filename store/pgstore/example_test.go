package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// The examples need a PostgreSQL database, so they have no Output and go
// test compiles them without running them; the package's tests run the
// same calls against COUNTERSIGN_TEST_POSTGRES.

// Open a store in a schema of its own, write, and read the write back.
// Several processes may open the same schema: they behave as one store.
func ExampleOpen() {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, os.Getenv("COUNTERSIGN_TEST_POSTGRES"), &pgstore.Options{Schema: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	// When Update returns nil, the write is committed and its WAL flushed.
	err = st.Update(ctx, func(tx store.Txn) error {
		return tx.Set([]byte("greeting"), []byte("hello"))
	})
	if err != nil {
		log.Fatal(err) // store.ErrUnavailable: nothing written, try again
	}
	err = st.View(ctx, func(r store.Reader) error {
		v, err := r.Get([]byte("greeting"))
		fmt.Printf("%s %v\n", v, err)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Where the committer's time goes, group by group: the chain every Update
// waits in is the wait for the commit lock, the functions and the
// commit's round trip, one group after another.
func ExampleOptions_onCommit() {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, os.Getenv("COUNTERSIGN_TEST_POSTGRES"), &pgstore.Options{
		Schema: "example",
		OnCommit: func(ci pgstore.CommitInfo) {
			// Runs on the committer between groups: keep it cheap (a
			// histogram's Observe), and never call the store from it.
			fmt.Printf("%d txns in %d attempt(s): lock %v, run %v, commit %v (deferred %v), err %v\n",
				ci.Txns, ci.Attempts, ci.Lock, ci.Run, ci.Commit, ci.Deferred, ci.Err)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.Update(ctx, func(tx store.Txn) error { return tx.Set([]byte("k"), []byte("v")) }); err != nil {
		log.Fatal(err)
	}
}
