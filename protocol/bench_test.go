package protocol

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/pebblestore"
)

// The hot paths of the surface, on the durable store (pebblestore,
// fsync-durable group commits), with concurrent callers:
//
//	go test ./protocol -run '^$' -bench . -benchtime 3s
//
// Results are recorded in docs/PERFORMANCE.md.

func pebbleHarness(b *testing.B) *harness {
	b.Helper()
	st, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return newHarness(b, harnessConfig{store: st, claims: func(c *pay.MandateClaims) {
		c.PerPeriodCapMinor = 1 << 50 // the budget is not what is measured
		c.ConfirmAboveMinor = 1 << 50
	}})
}

// BenchmarkHoldPlace places holds (gate, reservation, record entries,
// and the rail's authorization on railCard) from 64 goroutines.
func BenchmarkHoldPlace(b *testing.B) {
	for _, rail := range []string{railWire, railCard} {
		b.Run(rail, func(b *testing.B) {
			h := pebbleHarness(b)
			reqs := make([]HoldPlaceRequest, b.N)
			for i := range reqs {
				reqs[i] = HoldPlaceRequest{Spend: h.spend("hold.place", rail, 100, nil), TTLSeconds: 3600}
			}
			var next atomic.Int64
			b.SetParallelism(32) // 64 goroutines on this machine's 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1) - 1
					if _, err := h.svc.HoldPlace(b.Context(), h.call(), &reqs[i]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "holds/s")
		})
	}
}

// BenchmarkMeterRecord records usage on 16 open meters from 64
// goroutines: a durable store write each, no settlement, no signature.
func BenchmarkMeterRecord(b *testing.B) {
	h := pebbleHarness(b)
	var meters []string
	for range 16 {
		o, err := h.svc.MeterOpen(b.Context(), h.call(), &MeterOpenRequest{Spend: h.spend("meter.open", railWire, 50_000, nil), UnitPriceMinor: 1, TTLSeconds: 3600})
		if err != nil {
			b.Fatal(err)
		}
		meters = append(meters, o.MeterID)
	}
	n := h.size()
	var next atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			req := &MeterRecordRequest{MeterID: meters[i%16], Units: 1, UsageID: fmt.Sprintf("u-%d", i)}
			if _, err := h.svc.MeterRecord(b.Context(), h.call(), req); err != nil && code(err) != CodeMeterCapExceeded {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	b.StopTimer()
	if h.size() != n {
		b.Fatalf("meter.record appended %d record entries", h.size()-n)
	}
}
