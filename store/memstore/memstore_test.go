package memstore_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/storetest"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"ZeroValue", func(*testing.T) store.Store { return &memstore.Store{} }},
		{"NoRetries", func(*testing.T) store.Store { return memstore.New(&memstore.Options{RetryRate: -1}) }},
		// Retrying every transaction makes the retry tests bite every time.
		{"AlwaysRetry", func(*testing.T) store.Store {
			return memstore.New(&memstore.Options{RetryRate: 1, Rand: rand.New(rand.NewPCG(1, 2))})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { storetest.Run(t, tc.open) })
	}
}

// BenchmarkAppend is the audit log's pattern: one ascending key per
// transaction, with the default spurious retries.
func BenchmarkAppend(b *testing.B) {
	var st memstore.Store
	ctx := b.Context()
	value := make([]byte, 256)
	for i := range b.N {
		key := binary.BigEndian.AppendUint64([]byte("log/"), uint64(i))
		err := st.Update(ctx, func(tx store.Txn) error {
			// Read the current head, as an appender does.
			it := tx.Iterate([]byte("log/"), store.PrefixEnd([]byte("log/")), true)
			it.Next()
			if err := it.Close(); err != nil {
				return err
			}
			return tx.Set(key, value)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
