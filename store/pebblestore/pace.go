package pebblestore

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/time/rate"
)

// Compactions are paced so that they do not take the disk and a core from
// the commits in bursts.
//
// Pebble runs a compaction as fast as it can: on the machines measured
// (docs/PERFORMANCE.md) an L0→Lbase compaction wrote for 0.4–0.7 s at full
// speed, and for that long every commit's fsync took 5–50 ms instead of
// about 1 ms, queued behind the compaction's writeback. At half a server's
// sustained rate most requests slower than 25 ms fell inside those windows.
// Written at a steady rate instead, the same compaction takes a few seconds
// and the fsyncs beside it stay short.
//
// Pacing must never let compaction fall behind, or L0 would grow until
// Pebble stops writes altogether. So the pace holds only while L0 is
// healthy: a watcher lifts it while L0 has paceLiftSublevels or more
// sublevels (compaction begins at L0CompactionThreshold, writes stop at
// L0StopWritesThreshold) and restores it once L0 is back at its threshold.

// DefaultCompactionRate is the [Options.CompactionRate] used when it is
// zero: 16 MiB/s, several times what a loaded two-core server's
// compactions write on average.
const DefaultCompactionRate = 16 << 20

const (
	l0CompactionThreshold = 16
	l0StopWritesThreshold = 64
	// paceLiftSublevels is the L0 depth at which compactions run unpaced.
	paceLiftSublevels = l0CompactionThreshold + 8
	// paceChunk is the largest write let through at once, and the
	// limiter's burst.
	paceChunk = 64 << 10
	// paceWatch is how often the watcher reads L0's depth.
	paceWatch = 250 * time.Millisecond
)

// pacedFS paces the writes of the files Pebble creates for compactions
// (its "pebble-compaction" write category), through lim. Every other file,
// the log and memtable flushes among them, is written unpaced.
type pacedFS struct {
	vfs.FS
	lim *rate.Limiter
}

func (p pacedFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	if err != nil || category != "pebble-compaction" {
		return f, err
	}
	return pacedFile{File: f, lim: p.lim}, nil
}

type pacedFile struct {
	vfs.File
	lim *rate.Limiter
}

func (f pacedFile) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		c := min(len(b), paceChunk)
		// WaitN fails only for a canceled context, which Background
		// never is, or for c above the burst, which the chunking rules out.
		_ = f.lim.WaitN(context.Background(), c)
		m, err := f.File.Write(b[:c])
		n += m
		if err != nil {
			return n, err
		}
		b = b[c:]
	}
	return n, nil
}

// pacer lifts and restores the compaction pace by L0's depth.
type pacer struct {
	lim  *rate.Limiter
	pace rate.Limit
	stop chan struct{}
	done chan struct{}
}

func newPacer(bytesPerSecond int) *pacer {
	pace := rate.Limit(bytesPerSecond)
	return &pacer{
		lim:  rate.NewLimiter(pace, paceChunk),
		pace: pace,
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// watch runs until close, setting the pace from db's L0 depth.
func (p *pacer) watch(db *pebble.DB) {
	defer close(p.done)
	t := time.NewTicker(paceWatch)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.adjust(int(db.Metrics().Levels[0].Sublevels))
		}
	}
}

// adjust sets the pace for an L0 of sublevels sublevels.
func (p *pacer) adjust(sublevels int) {
	switch {
	case sublevels >= paceLiftSublevels:
		p.lim.SetLimit(rate.Inf)
	case sublevels <= l0CompactionThreshold:
		p.lim.SetLimit(p.pace)
	}
}

// close stops the watcher and lifts the pace, so that a compaction still
// running when the store closes finishes at full speed.
func (p *pacer) close() {
	close(p.stop)
	<-p.done
	p.lim.SetLimit(rate.Inf)
}
