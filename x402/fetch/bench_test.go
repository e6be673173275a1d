package fetch

import (
	"fmt"
	"testing"

	"github.com/countersign/countersign/pay"
)

// BenchmarkFetchPaid is one paid fetch end to end on an in-memory store:
// the unpaid request and its 402, the offer chosen, the gate's decision,
// the EIP-712 signature, the stored attempt, the paid request over a
// fresh loopback connection, and the outcome recorded.
func BenchmarkFetchPaid(b *testing.B) {
	f := newFixture(b, fixtureOptions{})
	reqs := make([]Request, b.N)
	for i := range reqs {
		reqs[i] = f.request(fmt.Sprintf("bench-%d", i), "/paid", 5)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range reqs {
		res, err := f.svc.Fetch(b.Context(), f.caller, reqs[i], "", "")
		if err != nil || res.Outcome != pay.OutcomeSettled {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
