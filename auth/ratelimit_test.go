package auth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

var rlStart = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func newTestLimiter(t testing.TB, o LimiterOptions) (*Limiter, *fakeClock) {
	t.Helper()
	clock := newFakeClock(rlStart)
	o.Now = clock.Now
	l, err := NewLimiter(&o)
	if err != nil {
		t.Fatal(err)
	}
	return l, clock
}

// bucketTokens reads a bucket's tokens the way the limiter does.
func bucketTokens(t *testing.T, l *Limiter, key string) float64 {
	t.Helper()
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		b := sh.m[key]
		sh.mu.Unlock()
		if b != nil {
			return b.lim.TokensAt(l.now())
		}
	}
	t.Fatalf("no bucket for %q", key)
	return 0
}

func TestLimiterHeaders(t *testing.T) {
	type step struct {
		advance   time.Duration
		allowed   bool
		remaining int
		reset     time.Duration // after rlStart
		retry     time.Duration
	}
	tests := []struct {
		name  string
		rate  float64
		burst int
		steps []step
	}{{
		name: "burst then refill", rate: 1, burst: 3,
		steps: []step{
			{0, true, 2, 1 * time.Second, 0},
			{0, true, 1, 2 * time.Second, 0},
			{0, true, 0, 3 * time.Second, 0},
			{0, false, 0, 3 * time.Second, time.Second},
			{500 * time.Millisecond, false, 0, 3 * time.Second, time.Second},
			{500 * time.Millisecond, true, 0, 4 * time.Second, 0},
			{10 * time.Second, true, 2, 12 * time.Second, 0},
			// At 12.25 s the bucket is full again (3); taking one
			// leaves 2, full at 13.25 s, which the header rounds up.
			{1250 * time.Millisecond, true, 2, 14 * time.Second, 0},
		},
	}, {
		name: "retry-after rounds up", rate: 0.25, burst: 1,
		steps: []step{
			{0, true, 0, 4 * time.Second, 0},
			{0, false, 0, 4 * time.Second, 4 * time.Second},
			{time.Second, false, 0, 4 * time.Second, 3 * time.Second},
			{2500 * time.Millisecond, false, 0, 4 * time.Second, time.Second}, // 0.5 s to go
			{250 * time.Millisecond, false, 0, 4 * time.Second, time.Second},  // 0.25 s to go: still 1 s
			{250 * time.Millisecond, true, 0, 8 * time.Second, 0},
		},
	}, {
		name: "reset rounds up to the second", rate: 2, burst: 2,
		steps: []step{
			{0, true, 1, 1 * time.Second, 0},               // full at 0.5 s
			{5 * time.Second, true, 1, 6 * time.Second, 0}, // full at 5.5 s
			{250 * time.Millisecond, true, 0, 6 * time.Second, 0},
		},
	}}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clock := newTestLimiter(t, LimiterOptions{Rate: tt.rate, Burst: tt.burst})
			for i, s := range tt.steps {
				clock.Advance(s.advance)
				d := l.Take("k", nil)
				want := Decision{Allowed: s.allowed, Limit: tt.burst, Remaining: s.remaining,
					Reset: rlStart.Add(s.reset), RetryAfter: s.retry}
				if d != want {
					t.Fatalf("step %d at +%v: got %+v\nwant %+v", i, clock.Now().Sub(rlStart), d, want)
				}
				// The numbers are the bucket's state, not a guess.
				tok := bucketTokens(t, l, "k")
				if d.Remaining != int(math.Floor(tok)) {
					t.Fatalf("step %d: Remaining %d but the bucket holds %v tokens", i, d.Remaining, tok)
				}
				full := clock.Now().Add(time.Duration((float64(tt.burst) - tok) / tt.rate * 1e9))
				if d.Reset.Before(full) || d.Reset.Sub(full) >= time.Second {
					t.Fatalf("step %d: Reset %v, bucket full at %v", i, d.Reset, full)
				}
			}
		})
	}
}

// TestLimiterMatchesModel runs random steps against an independent token
// bucket model and requires identical decisions.
func TestLimiterMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		rate := []float64{0.5, 1, 3, 50, 1000}[rng.IntN(5)]
		burst := 1 + rng.IntN(20)
		l, clock := newTestLimiter(t, LimiterOptions{Rate: rate, Burst: burst})
		// The model is a plain token bucket that, like x/time/rate,
		// moves its clock only when a token is taken.
		stored, last := float64(burst), time.Time{}
		for step := range 300 {
			clock.Advance(time.Duration(rng.IntN(int(2*time.Second/time.Millisecond))) * time.Millisecond / time.Duration(1+rng.IntN(50)))
			now := clock.Now()
			tokens := float64(burst)
			if !last.IsZero() {
				tokens = min(float64(burst), stored+now.Sub(last).Seconds()*rate)
			}
			allowed := tokens >= 1
			if allowed {
				tokens--
				stored, last = tokens, now
			}
			d := l.Take("k", nil)
			if d.Allowed != allowed || d.Remaining != int(math.Floor(tokens)) || d.Limit != burst {
				t.Fatalf("trial %d step %d: %+v, model allowed %v tokens %v", trial, step, d, allowed, tokens)
			}
			wantReset := now.Add(time.Duration(math.Ceil((float64(burst) - tokens) / rate * 1e9)))
			if wantReset.Nanosecond() != 0 {
				wantReset = wantReset.Truncate(time.Second).Add(time.Second)
			}
			if !d.Reset.Equal(wantReset) {
				t.Fatalf("trial %d step %d: Reset %v, model %v", trial, step, d.Reset, wantReset)
			}
			if !allowed {
				want := time.Duration(max(1, math.Ceil((1-tokens)/rate))) * time.Second
				if d.RetryAfter != want {
					t.Fatalf("trial %d step %d: RetryAfter %v, model %v", trial, step, d.RetryAfter, want)
				}
			} else if d.RetryAfter != 0 {
				t.Fatalf("RetryAfter %v on an allowed take", d.RetryAfter)
			}
		}
	}
}

func TestLimiterOverride(t *testing.T) {
	l, clock := newTestLimiter(t, LimiterOptions{})
	if d := l.Take("default", nil); d.Limit != DefaultBurst || d.Remaining != DefaultBurst-1 {
		t.Fatalf("default: %+v", d)
	}
	slow := &Limit{Rate: 1, Burst: 2}
	if d := l.Take("slow", slow); !d.Allowed || d.Limit != 2 || d.Remaining != 1 {
		t.Fatalf("override: %+v", d)
	}
	// Invalid fields fall back to the default.
	if d := l.Take("odd", &Limit{Rate: math.NaN(), Burst: -1}); d.Limit != DefaultBurst {
		t.Fatalf("invalid override: %+v", d)
	}
	if d := l.Take("slow", slow); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("second: %+v", d)
	}
	if d := l.Take("slow", slow); d.Allowed || d.RetryAfter != time.Second {
		t.Fatalf("third: %+v", d)
	}
	// The operator raises the key's limit: the bucket is reshaped in
	// place and keeps its (empty) tokens, refilling at the new rate.
	// At +100 ms the bucket holds 0.1 token (old rate): still refused.
	// 100 ms later, at the new rate, it holds 1.1: allowed.
	fast := &Limit{Rate: 10, Burst: 5}
	clock.Advance(100 * time.Millisecond)
	if d := l.Take("slow", fast); d.Allowed || d.Limit != 5 {
		t.Fatalf("raised: %+v", d)
	}
	clock.Advance(100 * time.Millisecond)
	if d := l.Take("slow", fast); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("raised, later: %+v", d)
	}
	// Lowering the burst caps the tokens.
	clock.Advance(time.Minute)
	if d := l.Take("slow", &Limit{Rate: 10, Burst: 3}); !d.Allowed || d.Limit != 3 || d.Remaining != 2 {
		t.Fatalf("lowered: %+v", d)
	}
}

func TestNewLimiterValidates(t *testing.T) {
	for _, o := range []LimiterOptions{
		{Rate: -1}, {Rate: math.Inf(1)}, {Rate: math.NaN()}, {Burst: -1}, {MaxIdle: -1}, {MaxKeys: -1},
	} {
		if _, err := NewLimiter(&o); err == nil {
			t.Errorf("NewLimiter(%+v) succeeded", o)
		}
	}
	l, err := NewLimiter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Default(); got != (Limit{Rate: DefaultRate, Burst: DefaultBurst}) {
		t.Errorf("Default() = %+v", got)
	}
}

// sweepAllShards takes fresh keys until every shard has been swept at
// or after now.
func sweepAllShards(t *testing.T, l *Limiter) int {
	t.Helper()
	now := l.now().UnixNano()
	taken := 0
	for i := 0; ; i++ {
		done := true
		for s := range l.shards {
			sh := &l.shards[s]
			sh.mu.Lock()
			if sh.nextSweep <= now {
				done = false
			}
			sh.mu.Unlock()
		}
		if done {
			return taken
		}
		l.Take(fmt.Sprintf("probe-%d", i), nil)
		taken++
		if i > 10_000 {
			t.Fatal("shards never swept")
		}
	}
}

func TestLimiterEvictsIdleFullBuckets(t *testing.T) {
	const keys = 100_000
	l, clock := newTestLimiter(t, LimiterOptions{MaxKeys: 1 << 20})
	for i := range keys {
		l.Take(fmt.Sprintf("ak_%026d", i), nil)
	}
	if n := l.Len(); n != keys {
		t.Fatalf("Len = %d, want %d", n, keys)
	}
	// A key that keeps calling, and a key whose bucket refills so slowly
	// that it is still not full after the idle period.
	clock.Advance(DefaultMaxIdle / 2)
	l.Take("slow", &Limit{Rate: 0.001, Burst: 5})
	clock.Advance(DefaultMaxIdle/2 + time.Second)
	l.Take("busy", nil)

	probes := sweepAllShards(t, l)
	// What is left: the probes, busy, slow, and no more.
	if n := l.Len(); n > probes+2 {
		t.Fatalf("after the idle period Len = %d, want at most %d", n, probes+2)
	}
	if d := l.Take("slow", &Limit{Rate: 0.001, Burst: 5}); d.Remaining != 3 {
		t.Fatalf("the slow bucket was evicted before it was full: %+v", d)
	}
	t.Logf("%d keys, then %d buckets after one idle period (%d probes)", keys, l.Len(), probes)
}

func TestLimiterMaxKeys(t *testing.T) {
	l, clock := newTestLimiter(t, LimiterOptions{MaxKeys: 64})
	for i := range 10_000 {
		clock.Advance(time.Millisecond)
		l.Take(fmt.Sprint(i), nil)
		if n := l.Len(); n > 64 {
			t.Fatalf("Len = %d after %d keys, cap 64", n, i+1)
		}
	}
}

func TestLimiterConcurrent(t *testing.T) {
	// Burst 1000, no refill to speak of: exactly 1000 takes succeed
	// however they interleave.
	l, _ := newTestLimiter(t, LimiterOptions{Rate: 1e-9, Burst: 1000})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 500 {
				if l.Take("shared", nil).Allowed {
					n++
				}
				l.Take(fmt.Sprint(n), nil)
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed != 1000 {
		t.Fatalf("%d takes allowed, want 1000", allowed)
	}
}

func BenchmarkLimiterTake(b *testing.B) {
	for _, nkeys := range []int{1, 1000} {
		b.Run(fmt.Sprintf("keys=%d", nkeys), func(b *testing.B) {
			l, err := NewLimiter(&LimiterOptions{Rate: 1e9, Burst: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = fmt.Sprintf("ak_%026d", i)
			}
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(nkeys)
				for pb.Next() {
					l.Take(keys[i%nkeys], nil)
					i++
				}
			})
		})
	}
}

// BenchmarkLimiterMemory reports the heap held per bucket, key string
// included.
func BenchmarkLimiterMemory(b *testing.B) {
	const n = 100_000
	for range b.N {
		l, err := NewLimiter(&LimiterOptions{MaxKeys: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			l.Take(fmt.Sprintf("ak_%026d", i), nil)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/key")
		runtime.KeepAlive(l)
	}
}
