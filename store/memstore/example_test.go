package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// The zero value is a ready, empty store.
func Example() {
	ctx := context.Background()
	var st memstore.Store
	defer st.Close()

	err := st.Update(ctx, func(tx store.Txn) error {
		return tx.Set([]byte("greeting"), []byte("hello"))
	})
	if err != nil {
		panic(err)
	}
	err = st.View(ctx, func(r store.Reader) error {
		v, err := r.Get([]byte("greeting"))
		if err != nil {
			return err
		}
		fmt.Printf("%s\n", v)
		_, err = r.Get([]byte("missing"))
		fmt.Println(errors.Is(err, store.ErrNotFound))
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// hello
	// true
}

// New with a seeded generator makes the spurious retries reproducible;
// RetryRate 1 retries every transaction, which is the harshest setting for
// code under test.
func ExampleNew() {
	st := memstore.New(&memstore.Options{RetryRate: 1, Rand: rand.New(rand.NewPCG(1, 2))})
	defer st.Close()

	attempts := 0
	err := st.Update(context.Background(), func(tx store.Txn) error {
		attempts++ // never do this in real code: fn must not keep state
		return tx.Set([]byte("k"), []byte("v"))
	})
	fmt.Println(err, attempts)
	// Output:
	// <nil> 2
}

// A transaction reads its own writes; if its function fails, none of them
// are applied.
func ExampleStore_Update() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()

	errNo := errors.New("changed my mind")
	err := st.Update(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("k"), []byte("v")); err != nil {
			return err
		}
		v, _ := tx.Get([]byte("k"))
		if string(v) == "v" {
			return errNo
		}
		return nil
	})
	fmt.Println(errors.Is(err, errNo))
	_ = st.View(ctx, func(r store.Reader) error {
		_, err := r.Get([]byte("k"))
		fmt.Println(errors.Is(err, store.ErrNotFound))
		return nil
	})
	// Output:
	// true
	// true
}

// A prefix scan, newest first.
func ExampleStore_View() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()

	_ = st.Update(ctx, func(tx store.Txn) error {
		for _, k := range []string{"log/001", "log/002", "log/003", "other"} {
			if err := tx.Set([]byte(k), nil); err != nil {
				return err
			}
		}
		return nil
	})
	_ = st.View(ctx, func(r store.Reader) error {
		prefix := []byte("log/")
		it := r.Iterate(prefix, store.PrefixEnd(prefix), true)
		defer it.Close()
		for it.Next() {
			fmt.Printf("%s\n", it.Key())
		}
		return it.Err()
	})
	// Output:
	// log/003
	// log/002
	// log/001
}

func ExampleStore_Close() {
	st := memstore.New(nil)
	fmt.Println(st.Close())
	err := st.View(context.Background(), func(store.Reader) error { return nil })
	fmt.Println(errors.Is(err, store.ErrClosed))
	// Output:
	// <nil>
	// true
}
