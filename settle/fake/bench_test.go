package fake_test

import (
	"strconv"
	"testing"

	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

// BenchmarkSettle measures a new payment on a rail with zero latency over
// an in-memory ledger (without spurious retries): the fake's own cost.
func BenchmarkSettle(b *testing.B) {
	r, err := fake.New("bench", &fake.Options{Store: memstore.New(&memstore.Options{RetryRate: -1})})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	i := 0
	for b.Loop() {
		if _, err := r.Settle(ctx, payReq("int_"+strconv.Itoa(i), 100)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSettleReplay measures an idempotent replay.
func BenchmarkSettleReplay(b *testing.B) {
	r, err := fake.New("bench", &fake.Options{Store: memstore.New(&memstore.Options{RetryRate: -1})})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	req := payReq("int_1", 100)
	if _, err := r.Settle(ctx, req); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := r.Settle(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
