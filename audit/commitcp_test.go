package audit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// plainStore hides store.Committer from the log, as a third-party driver
// without it would: every Append then signs the checkpoint itself.
type plainStore struct{ store.Store }

type plainTxn struct{ store.Txn }

func (s plainStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.Store.Update(ctx, func(tx store.Txn) error { return fn(plainTxn{tx}) })
}

// TestCheckpointPerCommit checks the record's one-signature-per-commit
// model on every kind of driver: after concurrent commits the stored
// checkpoint covers the head, Open accepts it with the key and refuses
// another key, Verify passes at both depths, and no entry carries a
// signature of its own unless asked.
func TestCheckpointPerCommit(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"memstore": func(t *testing.T) store.Store { return memstore.New(nil) },
		"pebble": func(t *testing.T) store.Store {
			st, err := pebblestore.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
		"no Committer": func(t *testing.T) store.Store { return plainStore{memstore.New(nil)} },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			st := open(t)
			l := newTestLog(t, st)
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					for i := range 20 {
						err := l.Update(ctx, func(txn store.Txn) error {
							e, err := l.Append(txn, testRecord(g*100+i))
							if err == nil && e.Sig != "" {
								t.Error("an entry got a signature of its own without Signed")
							}
							return err
						})
						if err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			cp, err := l.Checkpoint(ctx)
			if err != nil || cp.TreeSize != 320 {
				t.Fatalf("Checkpoint = %+v, %v; want 320 entries", cp, err)
			}
			if err := VerifyCheckpoint(l.VerifierKey(), cp); err != nil {
				t.Fatal(err)
			}
			for _, d := range []Depth{Hashes, Full} {
				if err := l.Verify(ctx, 0, 0, d, nil); err != nil {
					t.Fatalf("Verify(%d): %v", d, err)
				}
			}
			if _, err := Open(ctx, st, testKey(1), nil); err != nil {
				t.Fatalf("reopen with the key: %v", err)
			}
			if _, err := Open(ctx, st, testKey(2), nil); !errors.Is(err, ErrKeyMismatch) {
				t.Fatalf("reopen with another key: %v, want ErrKeyMismatch", err)
			}
		})
	}
}

// TestLegacyLog checks that a log written before checkpoints were stored
// (every entry signed on its own, no stored checkpoint) still opens,
// verifies and serves a checkpoint, and that once it grows it is covered
// like any other.
func TestLegacyLog(t *testing.T) {
	ctx := t.Context()
	st := memstore.New(nil)
	l := newTestLog(t, st)
	for i := range 10 {
		err := l.Update(ctx, func(txn store.Txn) error {
			r := testRecord(i)
			r.Signed = true
			_, err := l.Append(txn, r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Update(ctx, func(txn store.Txn) error { return txn.Delete(cpKey) }); err != nil {
		t.Fatal(err)
	}
	l2, err := Open(ctx, st, testKey(1), nil)
	if err != nil {
		t.Fatalf("Open of a legacy log: %v", err)
	}
	if _, err := Open(ctx, st, testKey(2), nil); !errors.Is(err, ErrKeyMismatch) {
		t.Fatalf("legacy log, another key: %v", err)
	}
	if err := l2.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatal(err)
	}
	if cp, err := l2.Checkpoint(ctx); err != nil || cp.TreeSize != 10 {
		t.Fatalf("Checkpoint of a legacy log: %+v, %v", cp, err)
	}
	// A forged entry signature in a legacy entry is found at depth Full.
	mutate(t, st, entryKey(4), flipByte(storedSigOff+3))
	checkTamperSeq(t, l2.Verify(ctx, 0, 0, Full, nil), 4)
	if err := l2.Verify(ctx, 0, 0, Hashes, nil); err != nil {
		t.Fatalf("depth Hashes does not check signatures: %v", err)
	}
	mutate(t, st, entryKey(4), flipByte(storedSigOff+3))
	appendN(t, l2, 5, 5)
	if _, err := Open(ctx, st, testKey(1), nil); err != nil {
		t.Fatal(err)
	}
	if err := l2.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatal(err)
	}
}

// TestOpenRefusesUncoveredHead checks that Open refuses a store whose
// head is not what the stored checkpoint signs: entries appended or cut
// behind the log's back.
func TestOpenRefusesUncoveredHead(t *testing.T) {
	ctx := t.Context()
	st := memstore.New(nil)
	l := newTestLog(t, st)
	appendN(t, l, 20, 7)
	old := getRaw(t, st, cpKey)
	appendN(t, l, 1, 1)
	setRaw(t, st, cpKey, old) // the checkpoint of 20 entries, head at 21
	if _, err := Open(ctx, st, testKey(1), nil); !errors.Is(err, ErrTampered) {
		t.Fatalf("Open with a stale checkpoint: %v, want ErrTampered", err)
	}
	if err := l.Verify(ctx, 0, 0, Hashes, nil); !errors.Is(err, ErrTampered) {
		t.Fatalf("Verify with a stale checkpoint: %v, want ErrTampered", err)
	}
}

// TestUpdateDeferredReportsOnceDurable checks that entries appended
// through UpdateDeferred reach Options.Committed only with the next
// Update that commits (which makes them durable), in log order, and that
// they then verify like any other.
func TestUpdateDeferredReportsOnceDurable(t *testing.T) {
	ctx := context.Background()
	st, err := pebblestore.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var seen []uint64
	l, err := Open(ctx, st, testKey(1), &Options{Committed: func(es []Entry) {
		for _, e := range es {
			seen = append(seen, e.Seq)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func(txn store.Txn) error {
		_, err := l.Append(txn, Record{Type: "test.deferred", Actor: Actor{Kind: "system", ID: "test"}, Data: []byte(`{"n":1}`)})
		return err
	}
	for range 3 {
		if err := l.UpdateDeferred(ctx, appendOne); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != 0 {
		t.Fatalf("deferred entries reported before a synchronous commit: %v", seen)
	}
	if err := l.Update(ctx, func(store.Txn) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3}; !slices.Equal(seen, want) {
		t.Fatalf("after the barrier: reported %v, want %v", seen, want)
	}
	if err := l.Update(ctx, appendOne); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 3, 4}; !slices.Equal(seen, want) {
		t.Fatalf("after one more Update: reported %v, want %v", seen, want)
	}
	if err := l.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatalf("Verify: %v", err)
	}
}
