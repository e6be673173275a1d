package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/store"
)

// BenchmarkUpdateContended: concurrent Updates, each of which reads and
// writes one key all of them share (as every payment appends to the
// record) and one key of its own goroutine.
func BenchmarkUpdateContended(b *testing.B) {
	for _, conc := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", conc), func(b *testing.B) {
			st := open(b, schemaFor(b, b.Name()))
			defer st.Close()
			ctx := context.Background()
			incr := func(txn store.Txn, key []byte) error {
				n := 0
				switch v, err := txn.Get(key); {
				case errors.Is(err, store.ErrNotFound):
				case err != nil:
					return err
				default:
					n, _ = strconv.Atoi(string(v))
				}
				return txn.Set(key, []byte(strconv.Itoa(n+1)))
			}
			shared := []byte("shared")
			before := st.Stats()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for g := range conc {
				wg.Go(func() {
					private := []byte(fmt.Sprint("private/", g))
					for next.Add(1) <= int64(b.N) {
						if err := st.Update(ctx, func(txn store.Txn) error {
							if err := incr(txn, shared); err != nil {
								return err
							}
							return incr(txn, private)
						}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			s := st.Stats()
			if groups := s.Groups - before.Groups; groups > 0 {
				b.ReportMetric(float64(s.Txns-before.Txns)/float64(groups), "txns/group")
			}
			if got, _ := get(b, st, "shared"); got != strconv.Itoa(b.N) {
				b.Errorf("shared = %s after %d Updates", got, b.N)
			}
		})
	}
}
