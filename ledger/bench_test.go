package ledger

import (
	"context"
	"strconv"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// BenchmarkPost posts one small transfer per transaction on memstore
// (without spurious retries): a deposit from a world account, then a move
// between two agents, over accounts with a growing history, to show that
// Post's cost does not grow with it.
//
//	go test -run '^$' -bench Post -benchmem ./ledger/
func BenchmarkPost(b *testing.B) {
	for _, postings := range []int{2, 4} {
		b.Run("postings="+strconv.Itoa(postings), func(b *testing.B) {
			st := memstore.New(&memstore.Options{RetryRate: -1})
			defer st.Close()
			ctx := context.Background()
			legs := []string{"world/rail/card", "agent/a1/available", "agent/a2/available", "agent/a3/available"}[:postings]
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				tr := Transfer{ID: "xfer_" + strconv.Itoa(i), Currency: "USD", Kind: "deposit", At: t0}
				// The world account pays everyone; agents' balances only grow.
				for j, a := range legs {
					m := int64(10)
					if j == 0 {
						m = -10 * int64(postings-1)
					}
					tr.Postings = append(tr.Postings, Posting{Account: a, Minor: m})
				}
				if err := st.Update(ctx, func(tx store.Txn) error { return Post(tx, tr) }); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkBalance reads the balance of an account with 10,000 lines.
func BenchmarkBalance(b *testing.B) {
	st := memstore.New(&memstore.Options{RetryRate: -1})
	defer st.Close()
	ctx := context.Background()
	for i := range 10000 {
		mustPost(b, st, xfer("x"+strconv.Itoa(i), "USD", card, -1, alice, 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		err := st.View(ctx, func(r store.Reader) error {
			bal, err := Balance(r, alice, "USD")
			if err == nil && bal != 10000 {
				b.Fatalf("balance %d", bal)
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
