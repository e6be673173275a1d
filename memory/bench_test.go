package memory

import (
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// The benchmarks run against one Pebble store of -memory.records records
// (default 1,000,000), built once per process: 10 versions of each of
// records/10 subjects, each version superseding the last (a history in
// transaction time). Building a million takes a minute or two; it is not
// part of the default test run (benchmarks never are).
var (
	benchRecords = flag.Int("memory.records", 1_000_000, "records in the benchmark store")
	benchWriters = flag.Int("memory.writers", 128, "concurrent writers of BenchmarkRemember")
)

var (
	benchSeq  atomic.Int64
	benchOnce sync.Once
	benchFix  *fixture
	benchDir  string
	benchSubs int
)

func benchFixture(b *testing.B) *fixture {
	benchOnce.Do(func() {
		dir, err := os.MkdirTemp("", "memory-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
		st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		f := newFixtureOn(b, st, &Options{SealKey: make([]byte, 32)})
		benchSubs = max(1, *benchRecords/10)
		start := time.Now()
		const perTxn = 500
		versions := *benchRecords / benchSubs
		body := json.RawMessage(`{"text":"the customer prefers morning deliveries to the side door, and pays by card"}`)
		m, err := f.svc.authorize(f.mandate("bench", nil), &f.caller, "bench", rightWrite)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for v := 0; v < versions; v++ {
			for s0 := 0; s0 < benchSubs; s0 += perTxn {
				err := f.log.Update(b.Context(), func(txn store.Txn) error {
					if err := checkRevoked(txn, m); err != nil {
						return err
					}
					w := writer{s: f.svc, txn: txn, actor: audit.Actor{Kind: "agent", ID: "bench"}, now: f.svc.stamp()}
					for s := s0; s < min(s0+perTxn, benchSubs); s++ {
						q := RememberRequest{Namespace: "bench", Subject: fmt.Sprintf("customer:%07d", s), Kind: "preference",
							Body: body, Source: Source{Kind: "tool", Ref: "crm"}}
						// Each version corrects the last over the same valid time:
						// it supersedes it whole, leaving a history in
						// transaction time.
						if _, err := w.remember(&q, t0.Add(-365*24*time.Hour), nil); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				n += min(perTxn, benchSubs-s0)
				f.clock.Advance(time.Second)
			}
		}
		b.Logf("built %d records (%d subjects × %d versions) in %s", n, benchSubs, versions, time.Since(start).Round(time.Second))
		benchFix = f
	})
	if benchFix == nil {
		b.Skip("benchmark store not built")
	}
	benchFix.t = b // contexts and failures belong to the benchmark running now
	return benchFix
}

// TestMain removes the benchmark store (hundreds of MB) after the run.
func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if benchDir != "" {
		if benchFix != nil {
			_ = benchFix.st.Close()
		}
		_ = os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// percentiles reports p50 and p99 of ds as metrics.
func percentiles(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}

func BenchmarkRecallSubject(b *testing.B) {
	f := benchFixture(b)
	tok := f.mandate("bench", nil)
	now := f.clock.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		sub := fmt.Sprintf("customer:%07d", rng.IntN(benchSubs))
		va := t0.Add(-time.Duration(rng.IntN(360*24)) * time.Hour)
		start := time.Now()
		p, err := f.svc.Recall(b.Context(), f.caller, RecallRequest{Mandate: tok, Namespace: "bench", Subject: sub, ValidAt: &va, TxAt: &now})
		ds = append(ds, time.Since(start))
		if err != nil || len(p.Data) != 1 {
			b.Fatalf("%s at %s: %d records, %v", sub, va, len(p.Data), err)
		}
	}
	percentiles(b, ds)
}

func BenchmarkRecallPage100(b *testing.B) {
	f := benchFixture(b)
	tok := f.mandate("bench", nil)
	now := f.clock.Now()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		p, err := f.svc.Recall(b.Context(), f.caller, RecallRequest{Mandate: tok, Namespace: "bench", TxAt: &now, Limit: 100})
		ds = append(ds, time.Since(start))
		if err != nil || len(p.Data) != 100 {
			b.Fatalf("%d records, %v", len(p.Data), err)
		}
	}
	percentiles(b, ds)
}

func BenchmarkAssemble8k(b *testing.B) {
	f := benchFixture(b)
	tok := f.mandate("bench", nil)
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		c, err := f.svc.Assemble(b.Context(), f.caller, AssembleRequest{Mandate: tok, Namespace: "bench",
			Budget: Budget{MaxTokens: 8000}, Query: "morning deliveries"})
		ds = append(ds, time.Since(start))
		if err != nil || c.Abstained {
			b.Fatalf("%+v %v", c.AbstainReason, err)
		}
	}
	percentiles(b, ds)
}

// BenchmarkRemember is remember with -memory.writers concurrent writers
// (the store's group commit makes them share fsyncs).
func BenchmarkRemember(b *testing.B) {
	f := benchFixture(b)
	tok := f.mandate("bench", nil)
	b.SetParallelism(*benchWriters / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := benchSeq.Add(1) // across rounds: every remember is new, none a replay
			_, err := f.svc.Remember(b.Context(), f.caller, RememberRequest{Mandate: tok, IdempotencyKey: fmt.Sprintf("bench-%d", i),
				Namespace: "bench", Subject: fmt.Sprintf("new:%d", i), Kind: "note", Body: json.RawMessage(`{"n":1}`),
				ValidFrom: t0, Source: Source{Kind: "agent", Ref: "bench"}}, "")
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkForgetCascade1000 erases a root with 999 records derived from
// it (a tree of fan-out 10), in the million-record store.
func BenchmarkForgetCascade1000(b *testing.B) {
	f := benchFixture(b)
	tok := f.mandate("bench", nil)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		var root string
		ids := []string{}
		for j := 0; j < 1000; j++ {
			x := fact{subject: fmt.Sprintf("tree:%d:%d", i, j), body: "derived", key: fmt.Sprintf("tree-%d-%d", i, j)}
			if j > 0 {
				x.edges = []Edge{{EdgeDerivedFrom, ids[(j-1)/10]}}
			}
			r, err := f.remember("bench", x)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, r.ID)
			if j == 0 {
				root = r.ID
			}
		}
		b.StartTimer()
		p, err := f.svc.Forget(b.Context(), ForgetRequest{Mandate: tok, RootID: root, Rationale: "benchmark erasure"}, f.op())
		if err != nil || len(p.Erased) != 1000 {
			b.Fatalf("%d erased, %v", len(p.Erased), err)
		}
		b.StopTimer()
		f.svc.WaitPurge() // the physical purge runs after the answer; not timed, not left running
		b.StartTimer()
	}
}
