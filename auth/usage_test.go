package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var usageT0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// countingStore counts calls and can be told to refuse Updates.
type countingStore struct {
	store.Store
	views, updates atomic.Int64
	fail           atomic.Bool
}

func (s *countingStore) View(ctx context.Context, fn func(store.Reader) error) error {
	s.views.Add(1)
	return s.Store.View(ctx, fn)
}

func (s *countingStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	s.updates.Add(1)
	if s.fail.Load() {
		return errors.New("store refuses")
	}
	return s.Store.Update(ctx, fn)
}

// newTestUsage returns a Usage whose background flush never fires during
// a test (tests flush explicitly) and that is closed at cleanup.
func newTestUsage(t *testing.T, st store.Store, clock *fakeClock) *Usage {
	t.Helper()
	u := NewUsage(st, &UsageOptions{Now: clock.Now, FlushEvery: time.Hour, Logger: discardLogger()})
	t.Cleanup(func() {
		if err := u.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return u
}

func usageAt(d time.Duration) time.Time { return usageT0.Add(d) }

// seedUsage counts a fixed set of calls.
func seedUsage(u *Usage) {
	growthAlpha := []string{"team=growth", "project=alpha"}
	for range 3 {
		u.Count("ak_A", "pay.create", "ok", growthAlpha, usageAt(10*time.Second))
	}
	// Same tag set in another order and with a repeat: the same bucket.
	u.Count("ak_A", "pay.create", "ok", []string{"project=alpha", "team=growth", "team=growth"}, usageAt(50*time.Second))
	u.Count("ak_A", "pay.create", "intent.denied", []string{"team=growth"}, usageAt(time.Minute))
	u.Count("ak_A", "usage.get", "ok", nil, usageAt(2*time.Minute+30*time.Second))
	u.Count("ak_B", "pay.create", "ok", growthAlpha, usageAt(0))
	u.Count("ak_A1", "pay.create", "ok", nil, usageAt(0)) // a key id that extends ak_A
}

func TestUsageReport(t *testing.T) {
	type want struct {
		total int64
		op    map[string]int64
		out   map[string]int64
		tag   map[string]int64
	}
	tests := []struct {
		name         string
		key          string
		since, until time.Time
		tags         []string
		want         want
	}{
		{"all of A", "ak_A", usageAt(0), usageAt(5 * time.Minute), nil, want{6,
			map[string]int64{"pay.create": 5, "usage.get": 1},
			map[string]int64{"ok": 5, "intent.denied": 1},
			map[string]int64{"team=growth": 5, "project=alpha": 4}}},
		{"B", "ak_B", usageAt(0), usageAt(5 * time.Minute), nil, want{1,
			map[string]int64{"pay.create": 1}, map[string]int64{"ok": 1},
			map[string]int64{"team=growth": 1, "project=alpha": 1}}},
		{"one tag", "ak_A", usageAt(0), usageAt(5 * time.Minute), []string{"team=growth"}, want{5,
			map[string]int64{"pay.create": 5}, map[string]int64{"ok": 4, "intent.denied": 1},
			map[string]int64{"team=growth": 5, "project=alpha": 4}}},
		{"two tags AND", "ak_A", usageAt(0), usageAt(5 * time.Minute), []string{" project=alpha", "team=growth", "team=growth"}, want{4,
			map[string]int64{"pay.create": 4}, map[string]int64{"ok": 4},
			map[string]int64{"team=growth": 4, "project=alpha": 4}}},
		{"unknown tag", "ak_A", usageAt(0), usageAt(5 * time.Minute), []string{"team=growth", "nope"}, want{0, map[string]int64{}, map[string]int64{}, map[string]int64{}}},
		{"invalid tag", "ak_A", usageAt(0), usageAt(5 * time.Minute), []string{"bad tag"}, want{0, map[string]int64{}, map[string]int64{}, map[string]int64{}}},
		{"half-open: until excludes its minute", "ak_A", usageAt(time.Minute), usageAt(2 * time.Minute), nil, want{1,
			map[string]int64{"pay.create": 1}, map[string]int64{"intent.denied": 1}, map[string]int64{"team=growth": 1}}},
		{"since inside a minute skips it", "ak_A", usageAt(30 * time.Second), usageAt(5 * time.Minute), nil, want{2,
			map[string]int64{"pay.create": 1, "usage.get": 1}, map[string]int64{"ok": 1, "intent.denied": 1}, map[string]int64{"team=growth": 1}}},
		{"until inside a minute includes it", "ak_A", usageAt(2 * time.Minute), usageAt(2*time.Minute + time.Second), nil, want{1,
			map[string]int64{"usage.get": 1}, map[string]int64{"ok": 1}, map[string]int64{}}},
		{"window inside one minute", "ak_A", usageAt(10 * time.Second), usageAt(50 * time.Second), nil, want{0, map[string]int64{}, map[string]int64{}, map[string]int64{}}},
		{"other key", "ak_C", usageAt(0), usageAt(5 * time.Minute), nil, want{0, map[string]int64{}, map[string]int64{}, map[string]int64{}}},
	}
	// Run every case against pending counts, flushed counts, and a mix.
	for _, mode := range []string{"pending", "flushed", "mixed"} {
		t.Run(mode, func(t *testing.T) {
			clock := newFakeClock(usageAt(time.Hour))
			u := newTestUsage(t, &memstore.Store{}, clock)
			switch mode {
			case "pending":
				seedUsage(u)
			case "flushed":
				seedUsage(u)
				if err := u.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
			case "mixed":
				// Half before a flush, all again after: then halve.
				seedUsage(u)
				if err := u.Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
				seedUsage(u)
			}
			for _, tt := range tests {
				rep, err := u.Report(t.Context(), tt.key, tt.since, tt.until, tt.tags)
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if mode == "mixed" {
					rep = halve(rep)
				}
				got := want{rep.Total, rep.ByOperation, rep.ByOutcome, rep.ByTag}
				if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
					t.Errorf("%s: report differs (-want +got):\n%s", tt.name, diff)
				}
				if rep.KeyID != tt.key {
					t.Errorf("%s: keyId %q", tt.name, rep.KeyID)
				}
			}
		})
	}
}

func halve(r Report) Report {
	r.Total /= 2
	for _, m := range []map[string]int64{r.ByOperation, r.ByOutcome, r.ByTag} {
		for k := range m {
			m[k] /= 2
		}
	}
	return r
}

func TestUsageReportWindow(t *testing.T) {
	u := newTestUsage(t, &memstore.Store{}, newFakeClock(usageT0))
	ctx := t.Context()
	for _, tt := range []struct {
		name         string
		since, until time.Time
		bad          bool
		wantSince    time.Time
		wantUntil    time.Time
	}{
		{name: "aligned", since: usageAt(0), until: usageAt(time.Hour), wantSince: usageAt(0), wantUntil: usageAt(time.Hour)},
		{name: "rounded up", since: usageAt(time.Second), until: usageAt(time.Hour + time.Nanosecond), wantSince: usageAt(time.Minute), wantUntil: usageAt(time.Hour + time.Minute)},
		{name: "31 days", since: usageAt(0), until: usageAt(MaxUsageWindow), wantSince: usageAt(0), wantUntil: usageAt(MaxUsageWindow)},
		{name: "other zone", since: usageAt(0).In(time.FixedZone("X", 3600)), until: usageAt(time.Minute), wantSince: usageAt(0), wantUntil: usageAt(time.Minute)},
		{name: "empty", since: usageAt(0), until: usageAt(0), bad: true},
		{name: "reversed", since: usageAt(time.Minute), until: usageAt(0), bad: true},
		{name: "too long", since: usageAt(0), until: usageAt(MaxUsageWindow + time.Second), bad: true},
	} {
		rep, err := u.Report(ctx, "ak_A", tt.since, tt.until, nil)
		if tt.bad {
			var c interface{ Code() string }
			if !errors.Is(err, ErrBadWindow) || !errors.As(err, &c) || c.Code() != "usage.bad_window" {
				t.Errorf("%s: err %v, want ErrBadWindow", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !rep.Since.Equal(tt.wantSince) || !rep.Until.Equal(tt.wantUntil) || rep.Since.Location() != time.UTC {
			t.Errorf("%s: window [%v, %v), want [%v, %v)", tt.name, rep.Since, rep.Until, tt.wantSince, tt.wantUntil)
		}
	}
	if _, err := u.Report(ctx, "ak/A", usageAt(0), usageAt(time.Minute), nil); err == nil || errors.Is(err, ErrBadWindow) {
		t.Errorf("malformed key id: %v", err)
	}
}

func TestUsageReportJSON(t *testing.T) {
	u := newTestUsage(t, &memstore.Store{}, newFakeClock(usageT0))
	rep, err := u.Report(t.Context(), "ak_A", usageAt(0), usageAt(time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"keyId":"ak_A","since":"2026-11-22T10:00:00Z","until":"2026-11-22T10:01:00Z","total":0,"byOperation":{},"byOutcome":{},"byTag":{}}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
}

func TestUsageCountIsCheapAndFlushIsOneUpdate(t *testing.T) {
	st := &countingStore{Store: &memstore.Store{}}
	u := newTestUsage(t, st, newFakeClock(usageT0))
	for i := range 1000 {
		u.Count(fmt.Sprintf("ak_%d", i%10), "pay.create", "ok", []string{fmt.Sprintf("n=%d", i%7)}, usageAt(time.Duration(i)*time.Second))
	}
	if v, w := st.views.Load(), st.updates.Load(); v != 0 || w != 0 {
		t.Fatalf("Count touched the store: %d views, %d updates", v, w)
	}
	if err := u.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := st.updates.Load(); w != 1 {
		t.Fatalf("Flush made %d updates, want 1", w)
	}
	if err := u.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := st.updates.Load(); w != 1 {
		t.Fatalf("an empty Flush made an update")
	}
	var total int64
	for k := range 10 {
		rep, err := u.Report(t.Context(), fmt.Sprintf("ak_%d", k), usageAt(0), usageAt(time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		total += rep.Total
	}
	if total != 1000 {
		t.Fatalf("total %d, want 1000", total)
	}
}

func TestUsageFlushFailureKeepsCounts(t *testing.T) {
	st := &countingStore{Store: &memstore.Store{}}
	u := newTestUsage(t, st, newFakeClock(usageT0))
	ctx := t.Context()
	u.Count("ak_A", "pay.create", "ok", nil, usageAt(0))
	st.fail.Store(true)
	if err := u.Flush(ctx); err == nil {
		t.Fatal("Flush succeeded on a refusing store")
	}
	u.Count("ak_A", "pay.create", "ok", nil, usageAt(0))
	rep, err := u.Report(ctx, "ak_A", usageAt(0), usageAt(time.Minute), nil)
	if err != nil || rep.Total != 2 {
		t.Fatalf("report while the store refuses: %d, %v; want 2", rep.Total, err)
	}
	st.fail.Store(false)
	if err := u.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// A fresh Usage sees only the store: both counts are there, once.
	rep, err = newTestUsage(t, st.Store, newFakeClock(usageT0)).Report(ctx, "ak_A", usageAt(0), usageAt(time.Minute), nil)
	if err != nil || rep.Total != 2 {
		t.Fatalf("flushed report: %d, %v; want 2", rep.Total, err)
	}
}

func TestUsageDropsMalformedCounts(t *testing.T) {
	u := newTestUsage(t, &memstore.Store{}, newFakeClock(usageT0))
	for _, c := range []struct{ key, op, out string }{
		{"", "op", "ok"}, {"ak/x", "op", "ok"}, {"ak_A", "", "ok"}, {"ak_A", "op", ""},
		{"ak_A", "op\x00x", "ok"}, {"ak_A", "op", "\xff"}, {"ak_A", strings.Repeat("o", maxUsageName+1), "ok"},
	} {
		u.Count(c.key, c.op, c.out, nil, usageAt(0))
	}
	u.Count("ak_A", "op", "ok", nil, time.Unix(-60, 0))
	u.Count("ak_A", "op", "ok", []string{"bad tag", "fine"}, usageAt(0)) // invalid tags ignored, the call counted
	rep, err := u.Report(t.Context(), "ak_A", usageAt(0), usageAt(time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 1 || rep.ByTag["fine"] != 1 || len(rep.ByTag) != 1 {
		t.Fatalf("report %+v, want just the one well-formed call", rep)
	}
}

func TestUsageClose(t *testing.T) {
	st := &memstore.Store{}
	clock := newFakeClock(usageT0)
	u := NewUsage(st, &UsageOptions{Now: clock.Now, FlushEvery: time.Hour, Logger: discardLogger()})
	u.Count("ak_A", "pay.create", "ok", nil, usageAt(0))
	if err := u.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-u.done:
	default:
		t.Fatal("flush goroutine still running after Close")
	}
	u.Count("ak_A", "pay.create", "ok", nil, usageAt(0)) // after Close: dropped
	if err := u.Close(t.Context()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	rep, err := newTestUsage(t, st, clock).Report(t.Context(), "ak_A", usageAt(0), usageAt(time.Minute), nil)
	if err != nil || rep.Total != 1 {
		t.Fatalf("after Close the store holds %d, %v; want 1", rep.Total, err)
	}
}

func TestUsageBackgroundFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &countingStore{Store: &memstore.Store{}}
		u := NewUsage(st, &UsageOptions{FlushEvery: time.Second, Logger: discardLogger()})
		u.Count("ak_A", "pay.create", "ok", nil, usageAt(0))
		time.Sleep(500 * time.Millisecond) // virtual time, inside the bubble
		synctest.Wait()
		if n := st.updates.Load(); n != 0 {
			t.Fatalf("%d updates before the interval", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := st.updates.Load(); n != 1 {
			t.Fatalf("%d updates after one interval, want 1", n)
		}
		if n := countPrefix(t, st, usagePrefix); n != 1 {
			t.Fatalf("%d buckets stored, want 1", n)
		}
		// Nothing pending: later ticks write nothing.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n := st.updates.Load(); n != 1 {
			t.Fatalf("%d updates, want 1", n)
		}
		if err := u.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUsageSweep(t *testing.T) {
	st := &memstore.Store{}
	clock := newFakeClock(usageT0)
	u := newTestUsage(t, st, clock)
	ctx := t.Context()
	// Old: ak_0..ak_4, 300 minutes each, day 0. ak_big: sweepBatch+50
	// minutes on day 0. New: every key one minute on day 60.
	keys := []string{"ak_0", "ak_1", "ak_2", "ak_3", "ak_4", "ak_big"}
	old := 0
	for _, k := range keys {
		n := 300
		if k == "ak_big" {
			n = sweepBatch + 50
		}
		for m := range n {
			u.Count(k, "pay.create", "ok", nil, usageAt(time.Duration(m)*time.Minute))
		}
		old += n
		u.Count(k, "pay.create", "ok", nil, usageAt(60*24*time.Hour))
	}
	if err := u.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := u.SweepUsage(ctx); err != nil || n != 0 {
		t.Fatalf("early sweep = %d, %v", n, err)
	}
	clock.Advance(DefaultRetention + 2*24*time.Hour)
	n, err := u.SweepUsage(ctx)
	if err != nil || n != old {
		t.Fatalf("sweep = %d, %v; want %d", n, err, old)
	}
	if left := countPrefix(t, st, usagePrefix); left != len(keys) {
		t.Fatalf("%d buckets left, want %d", left, len(keys))
	}
	for _, k := range keys {
		rep, err := u.Report(ctx, k, usageAt(59*24*time.Hour), usageAt(61*24*time.Hour), nil)
		if err != nil || rep.Total != 1 {
			t.Fatalf("%s after sweep: %d, %v", k, rep.Total, err)
		}
	}
}

func TestUsageConcurrent(t *testing.T) {
	u := newTestUsage(t, &memstore.Store{}, newFakeClock(usageT0))
	ctx := t.Context()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				u.Count("ak_A", "op", "ok", []string{fmt.Sprint("g=", g)}, usageAt(time.Duration(i)*time.Second))
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if err := u.Flush(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		// Every report sees each count exactly once, so totals never
		// go down.
		var last int64
		for range 50 {
			rep, err := u.Report(ctx, "ak_A", usageAt(0), usageAt(time.Hour), nil)
			if err != nil {
				t.Error(err)
				return
			}
			if rep.Total < last {
				t.Errorf("total went from %d to %d", last, rep.Total)
			}
			last = rep.Total
		}
	})
	wg.Wait()
	rep, err := u.Report(ctx, "ak_A", usageAt(0), usageAt(time.Hour), nil)
	if err != nil || rep.Total != 2000 {
		t.Fatalf("total %d, %v; want 2000", rep.Total, err)
	}
}

func BenchmarkUsageCount(b *testing.B) {
	u := NewUsage(&memstore.Store{}, &UsageOptions{FlushEvery: 100 * time.Millisecond, Logger: discardLogger()})
	defer u.Close(context.Background())
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("ak_%026d", i)
	}
	ops := []string{"pay.create", "intent.get", "usage.get"}
	tags := []string{"team=growth", "project=alpha"}
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			u.Count(keys[i%len(keys)], ops[i%len(ops)], "ok", tags, now)
			i++
		}
	})
}
