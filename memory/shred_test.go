package memory

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// TestForgetLeavesNoBytes erases a record from a Pebble store on disk and
// then scans every file of the store, byte by byte, for the body, its
// ciphertext and its sealed key: none may remain. The body never reaches
// the disk in the clear (it is encrypted before it is stored), so the scan
// for the ciphertext and the key is what proves the erasure.
func TestForgetLeavesNoBytes(t *testing.T) {
	dir := t.TempDir()
	st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := newFixtureOn(t, st, &Options{SealKey: bytes.Repeat([]byte{7}, 32)})
	const secret = "my passport number is X1234567-unique-marker"
	root := f.mustRemember("ns", fact{subject: "me", body: secret})
	child := f.mustRemember("ns", fact{subject: "derived", body: secret + " (copied)", edges: []Edge{{EdgeDerivedFrom, root.ID}}})
	keep := f.mustRemember("ns", fact{subject: "other", body: "keep-me-marker"})
	// Enough other writes that the store has flushed tables and more than
	// one log file, as a store in use does.
	for i := range 300 {
		f.mustRemember("ns", fact{subject: "filler", body: string(bytes.Repeat([]byte{'a' + byte(i%26)}, 2000))})
	}
	var needles [][]byte
	_ = st.View(t.Context(), func(r store.Reader) error {
		for _, id := range []string{root.ID, child.ID} {
			for _, k := range []string{keyKey + id, keyBody + id} {
				v, err := r.Get([]byte(k))
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				needles = append(needles, v)
			}
		}
		return nil
	})
	needles = append(needles, []byte(secret))
	if found := scanDir(t, dir, needles); len(found) == 0 {
		// Sanity: before erasure the ciphertext is on disk somewhere.
		t.Fatal("the ciphertext was not found on disk before erasure; the scan proves nothing")
	}
	proof, err := f.svc.Forget(t.Context(), ForgetRequest{Mandate: f.mandate("ns", nil), RootID: root.ID, Rationale: "asked to be forgotten"}, f.op())
	if err != nil {
		t.Fatal(err)
	}
	if len(proof.Erased) != 2 {
		t.Fatalf("erased %v", proof.Erased)
	}
	f.svc.WaitPurge()
	raw, _ := json.Marshal(proof)
	if !Verify(f.svc.VerifierKey(), raw).Holds {
		t.Fatal("the erasure proof does not verify")
	}
	if found := scanDir(t, dir, needles); len(found) > 0 {
		t.Fatalf("erased bytes still on disk: %v", found)
	}
	// What was not erased is still readable.
	p, err := f.recall("ns", RecallRequest{Subject: "other"})
	if err != nil || len(p.Data) != 1 || p.Data[0].ID != keep.ID {
		t.Fatalf("recall of a kept record: %+v %v", p.Data, err)
	}
}

// scanDir returns "file: needle #i" for every needle found in a file of dir.
func scanDir(t *testing.T, dir string, needles [][]byte) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, n := range needles {
			if bytes.Contains(b, n) {
				found = append(found, filepath.Base(path)+": needle "+string(rune('0'+i)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
