package main

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

// Example runs the embedded service end to end, every step in-process.
func Example() {
	if err := run(context.Background(), memstore.New(nil), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// paid: settled 1250 USD to acct:seller.example on sandbox-card
	// quoted: ready 1799 USD
	// bought: settled 1799 USD from merchant:shop
	// recalled: 1 record(s), the first says {"mugs":"blue"}
	// receipt of entry payment.settled verifies: true; the whole record verifies: true
}

// Example_ownStore runs the same node on a store of the program's own.
func Example_ownStore() {
	st := &countingStore{Store: memstore.New(nil)}
	if err := run(context.Background(), st, discard{}); err != nil {
		panic(err)
	}
	fmt.Println("the node committed through the program's store:", st.commits.Load() > 0)
	// Output:
	// the node committed through the program's store: true
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestOwnStorePassesStoretest: the wrapper is a store like any other.
func TestOwnStorePassesStoretest(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st := &countingStore{Store: memstore.New(nil)}
		t.Cleanup(func() { st.Close() })
		return st
	})
}
