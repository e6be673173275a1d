package pebblestore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// Open a store in a directory, write, close, and find the data again after
// reopening.
func Example() {
	dir, err := os.MkdirTemp("", "pebblestore-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	opts := &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)}

	st, err := pebblestore.Open(dir, opts)
	if err != nil {
		panic(err)
	}
	// When Update returns nil, the write is on disk.
	err = st.Update(ctx, func(tx store.Txn) error {
		return tx.Set([]byte("greeting"), []byte("hello"))
	})
	if err != nil {
		panic(err)
	}
	if err := st.Close(); err != nil {
		panic(err)
	}

	st, err = pebblestore.Open(dir, opts)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	err = st.View(ctx, func(r store.Reader) error {
		v, err := r.Get([]byte("greeting"))
		fmt.Printf("%s %v\n", v, err)
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// hello <nil>
}

// Tests run the store on an in-memory file system.
func ExampleOpen() {
	st, err := pebblestore.Open("db", &pebblestore.Options{
		FS:       vfs.NewMem(),
		Logger:   slog.New(slog.DiscardHandler),
		MaxGroup: 64,
	})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	fmt.Println(st.Stats())
	// Output:
	// {0 0 0 0}
}

// An increment that is safe under any number of concurrent callers: the
// read and the write are in one serializable transaction.
func ExampleStore_Update() {
	st, err := pebblestore.Open("db", &pebblestore.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx := context.Background()

	incr := func(tx store.Txn) error {
		v, err := tx.Get([]byte("counter"))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.Set([]byte("counter"), append(v, '+'))
	}
	for range 3 {
		if err := st.Update(ctx, incr); err != nil {
			panic(err)
		}
	}
	_ = st.View(ctx, func(r store.Reader) error {
		v, err := r.Get([]byte("counter"))
		fmt.Printf("%s %v\n", v, err)
		return nil
	})
	fmt.Printf("%+v\n", st.Stats())
	// Output:
	// +++ <nil>
	// {Txns:3 Groups:3 Holds:0 FailedHolds:0}
}

// A prefix scan, newest first.
func ExampleStore_View() {
	st, err := pebblestore.Open("db", &pebblestore.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx := context.Background()
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
	st, err := pebblestore.Open("db", &pebblestore.Options{FS: vfs.NewMem(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Close())
	fmt.Println(errors.Is(st.Close(), store.ErrClosed))
	// Output:
	// <nil>
	// true
}
