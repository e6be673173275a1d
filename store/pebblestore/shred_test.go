package pebblestore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// TestShred deletes values and shreds their span: no file of the store
// holds them afterwards, while the values kept are still read back, also
// after a reopen.
func TestShred(t *testing.T) {
	dir := t.TempDir()
	st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(i int) []byte {
		return []byte(fmt.Sprintf("secret-value-%04d-%s", i, bytes.Repeat([]byte("x"), 100)))
	}
	for i := range 2000 {
		err := st.Update(t.Context(), func(txn store.Txn) error {
			return txn.Set([]byte(fmt.Sprintf("k/%04d", i)), secret(i))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !onDisk(t, dir, secret(7)) {
		t.Fatal("the value is not on disk before it is deleted; the scan proves nothing")
	}
	err = st.Update(t.Context(), func(txn store.Txn) error {
		for i := 0; i < 100; i++ {
			if err := txn.Delete([]byte(fmt.Sprintf("k/%04d", i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Shred(t.Context(), [][2][]byte{{[]byte("k/0000"), []byte("k/0100")}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i += 9 {
		if onDisk(t, dir, secret(i)) {
			t.Fatalf("deleted value %d is still on disk after Shred", i)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = pebblestore.Open(dir, &pebblestore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.View(t.Context(), func(r store.Reader) error {
		if v, err := r.Get([]byte("k/1500")); err != nil || !bytes.Equal(v, secret(1500)) {
			t.Fatalf("kept value after reopen: %q %v", v, err)
		}
		if _, err := r.Get([]byte("k/0050")); err == nil {
			t.Fatal("a shredded value came back after reopen")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Shred(t.Context(), nil); err != nil {
		t.Fatalf("a shred of nothing: %v", err)
	}
}

func onDisk(t *testing.T, dir string, needle []byte) bool {
	t.Helper()
	found := false
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, needle) {
			found = true
		}
		return nil
	})
	return found
}
