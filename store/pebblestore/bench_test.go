package pebblestore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// writerCounts are the concurrencies benchmarked: one writer (every commit
// pays a whole fsync) and 64 (commits share fsyncs).
var writerCounts = []int{1, 64}

// runWriters runs b.N calls of op spread over writers goroutines.
func runWriters(b *testing.B, writers int, op func(i uint64) error) {
	var next atomic.Uint64
	b.SetBytes(1024)
	b.ResetTimer()
	if writers == 1 {
		for range b.N {
			if err := op(next.Add(1)); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	// RunParallel starts SetParallelism*GOMAXPROCS goroutines.
	b.SetParallelism((writers + gomaxprocs() - 1) / gomaxprocs())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUpdate measures durable transactions of one 1 KB Set each, on a
// real disk (fsync included).
func BenchmarkUpdate(b *testing.B) {
	value := make([]byte, 1024)
	for _, writers := range writerCounts {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			st, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: quiet})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			runWriters(b, writers, func(i uint64) error {
				key := binary.BigEndian.AppendUint64([]byte("bench/"), i)
				return st.Update(ctx, func(tx store.Txn) error { return tx.Set(key, value) })
			})
			b.StopTimer()
			stats := st.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
			if stats.Groups > 0 {
				b.ReportMetric(float64(stats.Txns)/float64(stats.Groups), "txn/group")
			}
		})
	}
}

// BenchmarkPebbleSetSync is the baseline: pebble's own DB.Set with
// pebble.Sync, which also groups concurrent commits' WAL syncs but has no
// transactions.
func BenchmarkPebbleSetSync(b *testing.B) {
	value := make([]byte, 1024)
	for _, writers := range writerCounts {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: pebbleQuiet{}})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			runWriters(b, writers, func(i uint64) error {
				return db.Set(binary.BigEndian.AppendUint64([]byte("bench/"), i), value, pebble.Sync)
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "txn/s")
		})
	}
}
