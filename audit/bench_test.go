package audit

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// Benchmarks. Commands and the numbers measured are in the package doc
// (doc.go, "Performance").
//
//	go test -run '^$' -bench 'Append64|AppendFn' -benchtime 3s ./audit/
//	go test -run '^$' -bench 'Verify' -benchtime 3x ./audit/
//	go test -run '^$' -bench InclusionProof -benchtime 2000x -timeout 30m ./audit/

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// BenchmarkAppend64 runs 64 concurrent appenders, each its own durable
// transaction with one Append, on pebblestore in a real directory (fsync).
func BenchmarkAppend64(b *testing.B) {
	st, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l, err := Open(context.Background(), st, testKey(1), &Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	rec := testRecord(0)

	b.SetParallelism((64 + 1) / 2) // × GOMAXPROCS(2) = 64 goroutines
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := l.Update(ctx, func(txn store.Txn) error {
				_, err := l.Append(txn, rec)
				return err
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
	if s := st.Stats(); s.Groups > 0 {
		b.ReportMetric(float64(s.Txns)/float64(s.Groups), "txn/group")
		b.ReportMetric(float64(s.Holds)/float64(s.Groups), "holds/group")
		b.ReportMetric(float64(s.FailedHolds)/float64(s.Groups), "failed/group")
	}
}

// BenchmarkAppendFn measures Append alone, in one long memstore
// transaction: the serial cost every append adds to the committer.
func BenchmarkAppendFn(b *testing.B) {
	st := memstore.New(&memstore.Options{RetryRate: -1})
	l, err := Open(context.Background(), st, testKey(1), &Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	rec := testRecord(0)
	b.ReportAllocs()
	err = st.Update(context.Background(), func(txn store.Txn) error {
		for b.Loop() {
			if _, err := l.Append(txn, rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// builtLog caches a log built once per benchmark process: building is
// dominated by one Ed25519 signature per entry and cannot be parallelized
// (each entry's hash covers its predecessor's).
type builtLog struct {
	once sync.Once
	st   store.Store
	l    *Log
	err  error
}

func (bl *builtLog) get(b *testing.B, n int, open func(b *testing.B) store.Store) (store.Store, *Log) {
	bl.once.Do(func() {
		bl.st = open(b)
		bl.l, bl.err = Open(context.Background(), bl.st, testKey(1), &Options{Logger: quietLogger})
		if bl.err != nil {
			return
		}
		const batch = 1000
		for done := 0; done < n && bl.err == nil; done += batch {
			bl.err = bl.st.Update(context.Background(), func(txn store.Txn) error {
				for i := range min(batch, n-done) {
					if _, err := bl.l.Append(txn, testRecord(done+i)); err != nil {
						return err
					}
				}
				return nil
			})
		}
	})
	if bl.err != nil {
		b.Fatal(bl.err)
	}
	return bl.st, bl.l
}

// mem100k and mem1M are shared by the benchmarks of one process.
var mem100k, mem1M builtLog

func openMem(*testing.B) store.Store { return memstore.New(&memstore.Options{RetryRate: -1}) }

const verifyN = 100_000

func benchVerify(b *testing.B, depth Depth) { benchVerifyN(b, depth, verifyN, true) }

func benchVerifyN(b *testing.B, depth Depth, n int, withMem bool) {
	// The pebble log lives in this (parent) benchmark's temp dir, so it is
	// built once per Benchmark function and removed after it.
	var pebbleLog builtLog
	dir := b.TempDir()
	openPebble := func(b *testing.B) store.Store {
		st, err := pebblestore.Open(dir, &pebblestore.Options{Logger: quietLogger})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	defer func() {
		if pebbleLog.st != nil {
			pebbleLog.st.Close()
		}
	}()
	cases := []struct {
		name string
		bl   *builtLog
		open func(*testing.B) store.Store
	}{{"memstore", &mem100k, openMem}, {"pebble", &pebbleLog, openPebble}}
	if !withMem {
		cases = cases[1:]
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			_, l := c.bl.get(b, n, c.open)
			ctx := context.Background()
			for b.Loop() {
				if err := l.Verify(ctx, 0, 0, depth, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}

// BenchmarkVerifyHashes verifies a 100,000-entry log at depth Hashes.
func BenchmarkVerifyHashes(b *testing.B) { benchVerify(b, Hashes) }

// BenchmarkVerifyFull verifies a 100,000-entry log at depth Full.
func BenchmarkVerifyFull(b *testing.B) { benchVerify(b, Full) }

// BenchmarkVerifyFull1M verifies a 1,000,000-entry log on pebblestore at
// depth Full (every entry's canonical form, the chain, the tree and the
// signed checkpoint), the issue-15 target of 200,000 entries/s:
//
//	go test -run '^$' -bench VerifyFull1M -benchtime 3x -timeout 30m ./audit/
func BenchmarkVerifyFull1M(b *testing.B) { benchVerifyN(b, Full, 1_000_000, false) }

// BenchmarkInclusionProof serves inclusion proofs for random entries of a
// 1,000,000-entry log (memstore): against the latest tree (checkpoint
// signature cached) and against a random past tree size (one checkpoint
// signature per proof).
func BenchmarkInclusionProof(b *testing.B) {
	const n = 1_000_000
	_, l := mem1M.get(b, n, openMem)
	ctx := context.Background()
	vkey := l.VerifierKey()
	rng := rand.New(rand.NewPCG(1, 1))
	b.Run("latest", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Inclusion(ctx, 1+rng.Uint64N(n), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("past-size", func(b *testing.B) {
		for b.Loop() {
			size := 1 + rng.Uint64N(n)
			if _, err := l.Inclusion(ctx, 1+rng.Uint64N(size), size); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		seq := 1 + rng.Uint64N(n)
		p, err := l.Inclusion(ctx, seq, 0)
		if err != nil {
			b.Fatal(err)
		}
		e, err := l.Get(ctx, seq)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := VerifyInclusion(vkey, e, p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
