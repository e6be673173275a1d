package auth

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rate-limit defaults (DESIGN §6).
const (
	// DefaultRate is the [LimiterOptions.Rate] used when it is zero:
	// tokens added per second.
	DefaultRate = 50
	// DefaultBurst is the [LimiterOptions.Burst] used when it is zero:
	// the bucket's size.
	DefaultBurst = 100
	// DefaultMaxIdle is the [LimiterOptions.MaxIdle] used when it is zero.
	DefaultMaxIdle = time.Minute
	// DefaultMaxKeys is the [LimiterOptions.MaxKeys] used when it is zero.
	// At about 165 bytes a bucket, key included (BenchmarkLimiterMemory),
	// that is some 16 MB at worst.
	DefaultMaxKeys = 100_000
)

// limiterShards spreads keys over independently locked maps so that
// concurrent requests for different keys rarely wait on each other.
const limiterShards = 16

// evictSample is how many buckets are looked at to choose one to evict
// when a shard is at its cap. Map iteration starts at a random place, so
// this is a random sample; the least recently used of it goes.
const evictSample = 8

// Limit is a token bucket's shape: Rate tokens per second, at most Burst
// tokens. Burst is also the X-RateLimit-Limit a response carries.
type Limit struct {
	// Rate is tokens added per second. Zero, negative, NaN or infinite
	// means the limiter's default.
	Rate float64 `json:"rate"`
	// Burst is the bucket's size. Zero or negative means the limiter's
	// default.
	Burst int `json:"burst"`
}

// LimiterOptions configure a Limiter. The zero value is usable.
type LimiterOptions struct {
	// Rate is the default refill rate, tokens per second. Zero means
	// DefaultRate (50/s); it must otherwise be positive and finite.
	Rate float64
	// Burst is the default bucket size. Zero means DefaultBurst (100); it
	// must otherwise be positive.
	Burst int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// MaxIdle is how long a bucket must go untaken before it may be
	// evicted. A bucket is evicted only once it is also full again, and
	// a full bucket behaves exactly like a new one, so idle eviction never
	// changes a decision; MaxIdle only saves re-creating buckets of keys
	// that call now and then. Zero means DefaultMaxIdle (1 min).
	MaxIdle time.Duration
	// MaxKeys caps the number of buckets held. When it is reached, taking
	// for a new key first evicts the least recently used of a small random
	// sample of buckets, full or not; the evicted key starts over with a
	// full bucket. Set it well above the number of keys active within
	// MaxIdle. Zero means DefaultMaxKeys (100,000).
	MaxKeys int
}

// Decision is the outcome of [Limiter.Take], with the numbers of the
// rate-limit headers. They describe the bucket as Take left it:
//
//	X-RateLimit-Limit:     Limit
//	X-RateLimit-Remaining: Remaining
//	X-RateLimit-Reset:     Reset.Unix()
//	Retry-After:           RetryAfter / time.Second   (refused only)
type Decision struct {
	// Allowed reports whether a token was taken.
	Allowed bool
	// Limit is the bucket's size (its burst).
	Limit int
	// Remaining is the whole tokens left in the bucket, 0 to Limit.
	Remaining int
	// Reset is when the bucket will be full again if nothing more is
	// taken, rounded up to the whole second so that a client waiting
	// until Reset.Unix() never waits too little.
	Reset time.Time
	// RetryAfter is, when Allowed is false, how long until a token is
	// available: whole seconds, rounded up, at least one second. It is
	// zero when Allowed is true.
	RetryAfter time.Duration
}

// Limiter is a set of token buckets, one per key (golang.org/x/time/rate):
// the agent key id for authenticated routes, the client address for the
// others (use a separate Limiter for each, so the two key spaces cannot
// collide). It is safe for concurrent use.
//
// For client addresses, key by the address without its port; for IPv6,
// by the /64 prefix, since one client commonly holds a whole /64 and
// could otherwise mint fresh buckets at will.
//
// # Memory
//
// Buckets are created on first use and evicted lazily: no goroutine runs.
// Each of the Limiter's shards is swept at the first Take that lands on
// it at least MaxIdle after its previous sweep, dropping buckets that are
// both idle for MaxIdle and full; a bucket therefore goes between MaxIdle
// and twice MaxIdle after its last use (once full), as long as any key
// of its shard is still taking. A sweep costs time proportional to the
// shard (1/16 of the buckets) and happens at most once per MaxIdle per
// shard, so its cost is amortised over the Takes in between. MaxKeys is
// a hard cap at all times.
type Limiter struct {
	def      Limit
	now      func() time.Time
	maxIdle  time.Duration
	perShard int
	seed     maphash.Seed
	shards   [limiterShards]limiterShard
}

type limiterShard struct {
	mu sync.Mutex // guards m and nextSweep; held for a Take's map and bucket work only
	m  map[string]*bucket
	// nextSweep is when, in unix nanoseconds, the shard is next swept.
	nextSweep int64
	_         [40]byte // keep shards on separate cache lines
}

type bucket struct {
	lim  *rate.Limiter
	used int64 // unix nanoseconds of the last Take
}

// NewLimiter returns a Limiter. opts may be nil; it is copied. It fails
// only if an option is out of range.
func NewLimiter(opts *LimiterOptions) (*Limiter, error) {
	var o LimiterOptions
	if opts != nil {
		o = *opts
	}
	if o.Rate == 0 {
		o.Rate = DefaultRate
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxIdle == 0 {
		o.MaxIdle = DefaultMaxIdle
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	switch {
	case !validRate(o.Rate):
		return nil, fmt.Errorf("auth: limiter: rate %v must be positive and finite", o.Rate)
	case o.Burst < 0:
		return nil, fmt.Errorf("auth: limiter: burst %d must be positive", o.Burst)
	case o.MaxIdle < 0:
		return nil, errors.New("auth: limiter: MaxIdle must not be negative")
	case o.MaxKeys < 0:
		return nil, errors.New("auth: limiter: MaxKeys must not be negative")
	}
	l := &Limiter{
		def:      Limit{Rate: o.Rate, Burst: o.Burst},
		now:      o.Now,
		maxIdle:  o.MaxIdle,
		perShard: max(1, (o.MaxKeys+limiterShards-1)/limiterShards),
		seed:     maphash.MakeSeed(),
	}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*bucket)
	}
	return l, nil
}

func validRate(r float64) bool { return r > 0 && !math.IsInf(r, 0) && !math.IsNaN(r) }

// Default returns the limit used for keys without an override.
func (l *Limiter) Default() Limit { return l.def }

// Take takes one token from key's bucket if it has one, and reports the
// bucket's state either way; a refused Take takes nothing. override, if
// not nil, is the key's own limit (set at issuance); its zero or invalid
// fields fall back to the default. When a key's override changes between
// calls, its bucket is reshaped in place, keeping its tokens (capped at
// the new burst).
func (l *Limiter) Take(key string, override *Limit) Decision {
	lim := l.def
	if override != nil {
		if validRate(override.Rate) {
			lim.Rate = override.Rate
		}
		if override.Burst > 0 {
			lim.Burst = override.Burst
		}
	}
	r := rate.Limit(lim.Rate)
	now := l.now()
	sh := &l.shards[maphash.String(l.seed, key)%limiterShards]

	sh.mu.Lock()
	if n := now.UnixNano(); n >= sh.nextSweep {
		sh.sweep(now, l.maxIdle)
		sh.nextSweep = n + int64(l.maxIdle)
	}
	b := sh.m[key]
	if b == nil {
		if len(sh.m) >= l.perShard {
			sh.evictOne()
		}
		b = &bucket{lim: rate.NewLimiter(r, lim.Burst)}
		// Clone: a key cut from a larger string (a header, an
		// address) must not keep that string alive in the map.
		sh.m[strings.Clone(key)] = b
	} else {
		if b.lim.Limit() != r {
			b.lim.SetLimitAt(now, r)
		}
		if b.lim.Burst() != lim.Burst {
			b.lim.SetBurstAt(now, lim.Burst)
		}
	}
	ok := b.lim.AllowN(now, 1)
	// Read the tokens under the shard lock, so the numbers describe
	// exactly the state this Take left behind.
	tokens := b.lim.TokensAt(now)
	b.used = now.UnixNano()
	sh.mu.Unlock()

	return decide(ok, tokens, lim, now)
}

// decide turns a bucket's state into header numbers.
func decide(ok bool, tokens float64, lim Limit, now time.Time) Decision {
	d := Decision{Allowed: ok, Limit: lim.Burst}
	d.Remaining = int(math.Floor(tokens))
	d.Remaining = min(max(d.Remaining, 0), lim.Burst)
	full := now
	if missing := float64(lim.Burst) - tokens; missing > 0 {
		full = now.Add(secondsCeil(missing / lim.Rate))
	}
	d.Reset = ceilSecond(full)
	if !ok {
		// Whole seconds, rounded up, so a client that waits RetryAfter
		// finds a token; at least one, as Retry-After: 0 would invite an
		// immediate retry.
		s := math.Ceil(max(1-tokens, 0) / lim.Rate)
		s = min(max(s, 1), maxRetrySeconds)
		d.RetryAfter = time.Duration(s) * time.Second
	}
	return d
}

// maxRetrySeconds keeps RetryAfter inside a Duration for absurdly slow
// rates.
const maxRetrySeconds = float64(math.MaxInt64 / int64(time.Second))

// secondsCeil converts seconds to a Duration, rounding up to the
// nanosecond and saturating instead of overflowing.
func secondsCeil(s float64) time.Duration {
	ns := math.Ceil(s * 1e9)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if t.Nanosecond() == 0 {
		return t
	}
	return t.Truncate(time.Second).Add(time.Second)
}

// sweep drops buckets idle for maxIdle that are full again. Called with
// sh.mu held.
func (sh *limiterShard) sweep(now time.Time, maxIdle time.Duration) {
	cutoff := now.UnixNano() - int64(maxIdle)
	for k, b := range sh.m {
		if b.used <= cutoff && b.lim.TokensAt(now) >= float64(b.lim.Burst()) {
			delete(sh.m, k)
		}
	}
}

// evictOne drops the least recently used of a random sample of buckets.
// Called with sh.mu held and the shard at its cap.
func (sh *limiterShard) evictOne() {
	var victim string
	oldest := int64(math.MaxInt64)
	n := 0
	for k, b := range sh.m {
		if b.used < oldest {
			victim, oldest = k, b.used
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(sh.m, victim)
}

// Len returns the number of buckets held, for metrics and tests.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
