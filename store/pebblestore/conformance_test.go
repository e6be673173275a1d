package pebblestore_test

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/store/storetest"
)

// quiet discards Pebble's informational logging in tests.
var quiet = slog.New(slog.DiscardHandler)

func TestConformanceMem(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st, err := pebblestore.Open("db", &pebblestore.Options{FS: vfs.NewMem(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// TestConformanceMemReopen checks durability across reopen on one
// in-memory file system, using dir as a name inside it.
func TestConformanceMemReopen(t *testing.T) {
	fs := vfs.NewMem()
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		st, err := pebblestore.Open(dir, &pebblestore.Options{FS: fs, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestConformanceDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("fsyncs a real disk")
	}
	storetest.RunDurable(t, func(t *testing.T, dir string) store.Store {
		st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
