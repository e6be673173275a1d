package audit

import (
	"errors"
	"testing"

	"github.com/countersign/countersign/store"
)

// The acceptance test: a 10,000-entry log, one byte flipped directly in the
// store, and Verify names exactly the damaged seq, at the depths that can
// see that kind of damage.
func TestVerifyNamesTamperedSeq(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 10,000 signed entries")
	}
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	const n = 10000
	appendN(t, l, n, 500)

	var calls, lastDone uint64
	err := l.Verify(ctx, 0, 0, Full, func(done, total uint64) {
		calls++
		if total != n || done < lastDone || done > total {
			t.Errorf("progress(%d, %d) after %d", done, total, lastDone)
		}
		lastDone = done
	})
	if err != nil {
		t.Fatalf("Verify of the intact log: %v", err)
	}
	if lastDone != n || calls != (n+verifyChunk-1)/verifyChunk {
		t.Errorf("progress: %d calls, last done %d", calls, lastDone)
	}

	tests := []struct {
		name   string
		seq    uint64
		key    []byte
		change func([]byte) []byte
		hashes bool // whether depth Hashes must see it (Full always must)
	}{
		{"entry body byte", 7777, entryKey(7777), flipByte(storedSigOff + 40), true},
		{"entry body last byte", 1, entryKey(1), flipByte(-1), true},
		{"stored entry hash", 4242, entryKey(4242), flipByte(storedHashOff + 3), true},
		{"stored format byte", 9000, entryKey(9000), flipByte(0), true},
		{"newest entry", n, entryKey(n), flipByte(storedSigOff + 10), true},
		// Leaf 8191 (seq 8192) completes subtrees of 2, 4, ..., 8192 leaves:
		// it stores 14 hashes. Flip one at level 0 and one at level 13.
		{"Merkle leaf hash", 8192, treeKey(8191), flipByte(5), true},
		{"Merkle interior hash", 8192, treeKey(8191), flipByte(13*32 + 31), true},
		{"Merkle hash truncated", 5000, treeKey(4999), func(v []byte) []byte { return v[:len(v)-1] }, true},
		// The checkpoint stored with the newest commit signs them all;
		// its signature line ends with the base64 signature.
		{"checkpoint signature", n, cpKey, flipByte(-10), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := getRaw(t, st, tt.key)
			mutate(t, st, tt.key, tt.change)
			defer mutate(t, st, tt.key, func([]byte) []byte { return orig })

			for _, depth := range []Depth{Hashes, Full} {
				err := l.Verify(ctx, 0, 0, depth, nil)
				if depth == Hashes && !tt.hashes {
					if err != nil {
						t.Errorf("depth Hashes: %v, want nil (it does not check signatures)", err)
					}
					continue
				}
				checkTamperSeq(t, err, tt.seq)
			}
		})
	}

	t.Run("missing entry", func(t *testing.T) {
		orig := getRaw(t, st, entryKey(300))
		err := st.Update(ctx, func(txn store.Txn) error { return txn.Delete(entryKey(300)) })
		if err != nil {
			t.Fatal(err)
		}
		defer setRaw(t, st, entryKey(300), orig)
		checkTamperSeq(t, l.Verify(ctx, 0, 0, Hashes, nil), 300)
		checkTamperSeq(t, l.Verify(ctx, 0, 0, Full, nil), 300)
		if _, err := l.Get(ctx, 300); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(300): %v", err)
		}
	})

	t.Run("swapped entries", func(t *testing.T) {
		a, b := getRaw(t, st, entryKey(20)), getRaw(t, st, entryKey(21))
		mutate(t, st, entryKey(20), func([]byte) []byte { return b })
		mutate(t, st, entryKey(21), func([]byte) []byte { return a })
		defer mutate(t, st, entryKey(20), func([]byte) []byte { return a })
		defer mutate(t, st, entryKey(21), func([]byte) []byte { return b })
		checkTamperSeq(t, l.Verify(ctx, 0, 0, Hashes, nil), 20)
	})

	t.Run("head", func(t *testing.T) {
		orig := getRaw(t, st, headKey)
		mutate(t, st, headKey, flipByte(20))
		defer mutate(t, st, headKey, func([]byte) []byte { return orig })
		checkTamperSeq(t, l.Verify(ctx, 0, 0, Hashes, nil), n)
	})

	// A range that stops before the damage does not see it, and one that
	// starts in the middle of the log picks up the tree from stored hashes.
	t.Run("ranges", func(t *testing.T) {
		orig := getRaw(t, st, entryKey(6000))
		mutate(t, st, entryKey(6000), flipByte(storedBodyOff+12))
		defer mutate(t, st, entryKey(6000), func([]byte) []byte { return orig })
		for _, r := range []struct{ from, to uint64 }{{1, 5999}, {6001, 0}, {3, 3}, {4097, 5000}} {
			if err := l.Verify(ctx, r.from, r.to, Full, nil); err != nil {
				t.Errorf("Verify(%d, %d): %v", r.from, r.to, err)
			}
		}
		checkTamperSeq(t, l.Verify(ctx, 5000, 7000, Hashes, nil), 6000)
	})

	// The damage is repaired: the log verifies again.
	if err := l.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatalf("Verify after repairs: %v", err)
	}
	if err := l.Verify(ctx, 5, n+1, Hashes, nil); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Verify past the end: %v, want ErrOutOfRange", err)
	}
	if err := l.Verify(ctx, 10, 9, Hashes, nil); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Verify from > to: %v, want ErrOutOfRange", err)
	}
}

func TestVerifyEmptyLog(t *testing.T) {
	l := newTestLog(t, newMem(t))
	for _, d := range []Depth{Hashes, Full} {
		if err := l.Verify(t.Context(), 0, 0, d, nil); err != nil {
			t.Errorf("depth %d: %v", d, err)
		}
	}
}

// Get, Page and Subscribe refuse to serve a damaged entry.
func TestReadsDetectTampering(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 10, 10)
	mutate(t, st, entryKey(4), flipByte(storedBodyOff+30))

	_, err := l.Get(ctx, 4)
	checkTamperSeq(t, err, 4)
	_, err = l.Page(ctx, "", 10)
	checkTamperSeq(t, err, 4)
	sub := l.Subscribe(ctx, 0)
	defer sub.Close()
	_, err = sub.Next(ctx)
	checkTamperSeq(t, err, 4)
	if _, err := l.Get(ctx, 5); err != nil {
		t.Errorf("Get(5): %v", err)
	}
}

func checkTamperSeq(t *testing.T, err error, seq uint64) {
	t.Helper()
	var te *TamperError
	if !errors.Is(err, ErrTampered) || !errors.As(err, &te) {
		t.Fatalf("error = %v, want a *TamperError", err)
	}
	if te.Seq != seq {
		t.Fatalf("TamperError names seq %d (%s), want %d", te.Seq, te.Reason, seq)
	}
}

func setRaw(t *testing.T, st store.Store, key, v []byte) {
	t.Helper()
	if err := st.Update(t.Context(), func(txn store.Txn) error { return txn.Set(key, v) }); err != nil {
		t.Fatal(err)
	}
}

func getRaw(t *testing.T, st store.Store, key []byte) []byte {
	t.Helper()
	var v []byte
	err := st.View(t.Context(), func(r store.Reader) error {
		var err error
		v, err = r.Get(key)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
