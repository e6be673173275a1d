package pebblestore

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/time/rate"
)

// TestPacedFSPacesCompactionsAndFlushes writes one burst's worth through
// files of each write category and checks that a compaction's drew on the
// compaction limiter, a flush's on the flush limiter, nothing else on
// either, and that every byte arrived.
func TestPacedFSPacesCompactionsAndFlushes(t *testing.T) {
	for _, tc := range []struct {
		category vfs.DiskWriteCategory
		paced    string // which limiter: "compaction", "flush" or ""
	}{
		{"pebble-compaction", "compaction"},
		{"pebble-memtable-flush", "flush"},
		{"pebble-wal", ""},
		{"pebble-manifest", ""},
		{vfs.WriteCategoryUnspecified, ""},
	} {
		t.Run(string(tc.category), func(t *testing.T) {
			mem := vfs.NewMem()
			// A rate so low that the limiters refill nothing while the
			// test runs: the tokens left say what was drawn.
			lims := map[string]*rate.Limiter{
				"compaction": rate.NewLimiter(1e-9, paceChunk),
				"flush":      rate.NewLimiter(1e-9, paceChunk),
			}
			fs := pacedFS{FS: mem, compaction: lims["compaction"], flush: lims["flush"]}
			f, err := fs.Create("f", tc.category)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte{7}, paceChunk)
			// Pebble's in-memory files scribble over the caller's buffer
			// after a write in race builds; keep a copy to compare.
			want := bytes.Clone(data)
			// Two writes, the first smaller than a chunk, so that the
			// chunking is crossed.
			if n, err := f.Write(data[:100]); n != 100 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if n, err := f.Write(data[100:]); n != len(data)-100 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			for name, lim := range lims {
				left := lim.Tokens()
				if name == tc.paced && left > 1 {
					t.Errorf("%s limiter: %d tokens left after a burst's worth of writes; want 0: the file was not paced", name, int(left))
				}
				if name != tc.paced && left < paceChunk-1 {
					t.Errorf("%s limiter: %d tokens left; want %d: the file was paced by it", name, int(left), paceChunk)
				}
			}
			r, err := mem.Open("f")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got := make([]byte, len(want)+1)
			n, _ := r.ReadAt(got, 0)
			if !bytes.Equal(got[:n], want) {
				t.Errorf("read back %d bytes, want the %d written", n, len(want))
			}
		})
	}
}

// TestPacerLiftsWhileL0IsDeep checks the pace across L0 depths, including
// the hysteresis between the compaction threshold and the lift.
func TestPacerLiftsWhileL0IsDeep(t *testing.T) {
	p := newPacer(1<<20, -1)
	paced := rate.Limit(1 << 20)
	for _, step := range []struct {
		sublevels int
		want      rate.Limit
	}{
		{0, paced},
		{l0CompactionThreshold, paced},
		{paceLiftSublevels - 1, paced},
		{paceLiftSublevels, rate.Inf},
		{l0StopWritesThreshold, rate.Inf},
		{paceLiftSublevels - 1, rate.Inf}, // still draining
		{l0CompactionThreshold + 1, rate.Inf},
		{l0CompactionThreshold, paced},
		{paceLiftSublevels - 1, paced},
	} {
		p.adjust(step.sublevels, 1)
		if got := p.compaction.lim.Limit(); got != step.want {
			t.Errorf("after %d sublevels: limit %v, want %v", step.sublevels, got, step.want)
		}
	}
}

// TestPacerLiftsFlushesThatFallBehind checks the flush pace across the
// memtables' count: lifted once two full memtables wait behind the one
// being written, restored once at most one waits, and independent of the
// compaction pace.
func TestPacerLiftsFlushesThatFallBehind(t *testing.T) {
	p := newPacer(1<<20, 8<<20)
	paced := rate.Limit(8 << 20)
	for _, step := range []struct {
		memtables int
		want      rate.Limit
	}{
		{1, paced},
		{flushLiftMemtables - 1, paced},
		{flushLiftMemtables, rate.Inf},
		{memTableStopWrites, rate.Inf},
		{flushLiftMemtables, rate.Inf},
		{flushLiftMemtables - 1, paced},
		{1, paced},
	} {
		p.adjust(0, step.memtables)
		if got := p.flush.lim.Limit(); got != step.want {
			t.Errorf("after %d memtables: flush limit %v, want %v", step.memtables, got, step.want)
		}
		if got := p.compaction.lim.Limit(); got != rate.Limit(1<<20) {
			t.Errorf("after %d memtables: compaction limit %v, want it untouched", step.memtables, got)
		}
	}
	p.adjust(paceLiftSublevels, 1)
	if got := p.flush.lim.Limit(); got != paced {
		t.Errorf("a deep L0 changed the flush limit to %v", got)
	}
}

// TestNewPacer checks which categories a pacer paces, and that with
// neither paced there is none.
func TestNewPacer(t *testing.T) {
	if p := newPacer(-1, -1); p != nil {
		t.Fatal("newPacer(-1, -1) is not nil: nothing is paced")
	}
	for _, tc := range []struct {
		compaction, flush int
	}{{1 << 20, -1}, {-1, 1 << 20}, {1 << 20, 2 << 20}} {
		p := newPacer(tc.compaction, tc.flush)
		fs := p.fs(vfs.NewMem()).(pacedFS)
		if (fs.compaction != nil) != (tc.compaction > 0) || (fs.flush != nil) != (tc.flush > 0) {
			t.Errorf("newPacer(%d, %d): compaction limiter %v, flush limiter %v", tc.compaction, tc.flush, fs.compaction != nil, fs.flush != nil)
		}
		// adjust and close must work with a category unpaced.
		p.adjust(paceLiftSublevels, flushLiftMemtables)
		close(p.done) // no watcher runs here
		p.close()
	}
}

// TestFlushPaceFollowsTheFillRate checks each flush's pace: the configured
// rate while memtables fill slowly, fast enough to write the last flush's
// output in a quarter of the fill time when they fill fast, and lifted whatever
// the fill rate while the watcher says flushes fell behind.
func TestFlushPaceFollowsTheFillRate(t *testing.T) {
	const base = 8 << 20
	p := newPacer(-1, base)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ended := func(size uint64) {
		p.flushEnded(pebble.FlushInfo{Output: []pebble.TableInfo{{Size: size / 2}, {Size: size - size/2}}})
	}
	limit := func() rate.Limit { return p.flush.lim.Limit() }

	p.flushBegan(t0) // the first flush: nothing to go by
	if got := limit(); got != base {
		t.Fatalf("first flush: limit %v, want the base %v", got, rate.Limit(base))
	}
	ended(2 << 20)
	// Filled in two seconds: 2 MiB in half a second is 4 MiB/s, below base.
	p.flushBegan(t0.Add(2 * time.Second))
	if got := limit(); got != base {
		t.Errorf("slow fill: limit %v, want the base %v", got, rate.Limit(base))
	}
	ended(2 << 20)
	// Filled in a quarter second: 2 MiB in a sixteenth is 32 MiB/s.
	p.flushBegan(t0.Add(2250 * time.Millisecond))
	if got, want := limit(), rate.Limit(32<<20); got != want {
		t.Errorf("fast fill: limit %v, want %v", got, want)
	}
	// The watcher lifts; a flush beginning meanwhile does not restore the
	// pace, and the watcher's restore brings back the latest rate.
	p.adjust(0, flushLiftMemtables)
	ended(2 << 20)
	p.flushBegan(t0.Add(2500 * time.Millisecond))
	if got := limit(); got != rate.Inf {
		t.Errorf("lifted: a new flush set the limit to %v, want it still lifted", got)
	}
	p.adjust(0, 1)
	if got, want := limit(), rate.Limit(32<<20); got != want {
		t.Errorf("restored: limit %v, want %v", got, want)
	}
	// A failed flush leaves the last size as it was.
	p.flushEnded(pebble.FlushInfo{Err: errors.New("disk full")})
	p.flushBegan(t0.Add(4500 * time.Millisecond))
	if got := limit(); got != base {
		t.Errorf("after a slow fill: limit %v, want the base %v", got, rate.Limit(base))
	}
	// Without a flush pace, flush events change nothing: a fast fill
	// leaves the compaction pace alone.
	q := newPacer(1<<20, -1)
	q.flushBegan(t0)
	q.flushEnded(pebble.FlushInfo{Output: []pebble.TableInfo{{Size: 1 << 20}}})
	q.flushBegan(t0.Add(time.Millisecond))
	if got := q.compaction.lim.Limit(); got != rate.Limit(1<<20) {
		t.Errorf("flush events with flushes unpaced set the compaction limit to %v", got)
	}
}
