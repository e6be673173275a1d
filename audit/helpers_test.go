package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// testKey returns a fixed Ed25519 key; n varies it.
func testKey(n byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = n + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

// testClock returns a Now that starts at a fixed instant (not in UTC, to
// check that At is) and advances 1.234567891 ms per call, safely for
// concurrent use.
func testClock() func() time.Time {
	base := time.Date(2026, 11, 22, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	var n atomic.Int64
	return func() time.Time {
		return base.Add(time.Duration(n.Add(1)) * 1234567891 / 1000)
	}
}

// newMem returns a memstore with spurious retries at the default rate,
// seeded so failures reproduce.
func newMem(t testing.TB) *memstore.Store {
	t.Helper()
	st := memstore.New(&memstore.Options{Rand: rand.New(rand.NewPCG(1, 2))})
	t.Cleanup(func() { st.Close() })
	return st
}

func newTestLog(t testing.TB, st store.Store) *Log {
	t.Helper()
	l, err := Open(context.Background(), st, testKey(1), &Options{Now: testClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testRecord returns a varied, valid record for entry i.
func testRecord(i int) Record {
	r := Record{
		Type:  "gate.decision",
		Actor: Actor{Kind: "agent", ID: fmt.Sprintf("ak_%06d", i)},
	}
	switch i % 4 {
	case 0:
		r.Data = json.RawMessage(fmt.Sprintf(`{"z":%d, "amount":{"currency":"EUR","value":"%d.00"},"ok":true}`, i, i))
		r.IntentID = fmt.Sprintf("int_%d", i)
	case 1:
		r.Type = "payment.settled"
		r.RequestID = "req_" + fmt.Sprint(i)
		r.Data = json.RawMessage(`{"note":"quote \" backslash \\ tab \t <html> & é 😀","list":[3,1,2],"n":1.5e3}`)
	case 2:
		r.Actor = Actor{Kind: "operator", ID: "op_1"}
		r.Rationale = "approved: line1\nline2"
	case 3:
		r.Actor = Actor{Kind: "system", ID: "settle"}
	}
	return r
}

// appendN appends n entries, batch per transaction, through l.Update.
func appendN(t testing.TB, l *Log, n, batch int) {
	t.Helper()
	ctx := context.Background()
	size, err := l.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for done := 0; done < n; {
		k := min(batch, n-done)
		err := l.Update(ctx, func(txn store.Txn) error {
			for i := range k {
				if _, err := l.Append(txn, testRecord(int(size)+done+i)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		done += k
	}
}

// mutate applies f to the stored value under key, directly in the store.
func mutate(t testing.TB, st store.Store, key []byte, f func([]byte) []byte) {
	t.Helper()
	err := st.Update(context.Background(), func(txn store.Txn) error {
		v, err := txn.Get(key)
		if err != nil {
			return err
		}
		return txn.Set(key, f(v))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func flipByte(i int) func([]byte) []byte {
	return func(v []byte) []byte {
		if i < 0 {
			i += len(v)
		}
		v[i] ^= 0x01
		return v
	}
}
