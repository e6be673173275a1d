package pebblestore

import (
	"context"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/time/rate"
)

// Compactions and memtable flushes are paced so that they do not take the
// disk and a core from the commits in bursts.
//
// Pebble runs both as fast as it can. On the machines measured
// (docs/PERFORMANCE.md) an L0→Lbase compaction wrote for 0.4–0.7 s at full
// speed, and for that long every commit's fsync took 5–50 ms instead of
// about 1 ms, queued behind the compaction's writeback. A flush of an 8 MiB
// memtable took one of the two cores for 25–70 ms, during which requests
// queued behind the remaining core. At half a server's sustained rate most
// requests slower than 25 ms fell inside those windows. Written at a steady
// rate instead, the same compaction takes a few seconds and the same flush
// a quarter of a second, and the fsyncs and requests beside them stay short.
//
// Pacing must never let either fall behind, or Pebble would stop writes
// altogether: at L0StopWritesThreshold sublevels for compactions, at
// MemTableStopWritesThreshold queued memtables for flushes. A flush is
// paced to end within a quarter of the time its memtable took to fill, and
// never slower than the configured rate, so flushes keep up with any
// steady load. And each pace holds only while the store keeps up: a
// watcher lifts the compaction pace while L0 has paceLiftSublevels or more
// sublevels (compaction begins at L0CompactionThreshold) and restores it
// once L0 is back at its threshold, and lifts the flush pace while
// flushLiftMemtables or more memtables exist (the one being written and
// two full ones waiting) and restores it once at most one waits.

// DefaultCompactionRate is the [Options.CompactionRate] used when it is
// zero: 16 MiB/s, several times what a loaded two-core server's
// compactions write on average.
const DefaultCompactionRate = 16 << 20

// DefaultFlushRate is the [Options.FlushRate] used when it is zero: 8 MiB/s.
// An 8 MiB memtable of this store's data flushes to about 2 MiB, so a paced
// flush takes about a quarter of a second. It is the least rate: each
// flush is paced to end within a quarter of the time its memtable took to
// fill (pacer.flushBegan), faster than this when the memtables fill faster.
const DefaultFlushRate = 8 << 20

const (
	l0CompactionThreshold = 16
	l0StopWritesThreshold = 64
	// paceLiftSublevels is the L0 depth at which compactions run unpaced.
	paceLiftSublevels = l0CompactionThreshold + 8
	// memTableStopWrites is Pebble's MemTableStopWritesThreshold: room
	// for the memtable being written, one being flushed at its pace and
	// two more before writes stop (Pebble's default, 2, would stop them
	// as soon as a paced flush fell one memtable behind).
	memTableStopWrites = 4
	// flushFillShare: a flush is paced to end within this fraction (one
	// over it) of the time its memtable took to fill (pacer.flushBegan).
	flushFillShare = 4
	// flushLiftMemtables is the count of memtables (the one being written
	// included) at which flushes run unpaced.
	flushLiftMemtables = 3
	// paceChunk is the largest write let through at once, and the
	// limiters' burst.
	paceChunk = 64 << 10
	// paceWatch is how often the watcher reads L0's depth and the
	// memtables' count.
	paceWatch = 250 * time.Millisecond
)

// pacedFS paces the writes of the files Pebble creates for compactions and
// memtable flushes (its "pebble-compaction" and "pebble-memtable-flush"
// write categories), each through its own limiter; a nil limiter leaves
// that category unpaced. Every other file, the log and the manifest among
// them, is written unpaced.
type pacedFS struct {
	vfs.FS
	compaction, flush *rate.Limiter
}

func (p pacedFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := p.FS.Create(name, category)
	if err != nil {
		return f, err
	}
	var lim *rate.Limiter
	switch category {
	case "pebble-compaction":
		lim = p.compaction
	case "pebble-memtable-flush":
		lim = p.flush
	}
	if lim == nil {
		return f, nil
	}
	return pacedFile{File: f, lim: lim}, nil
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

// pace is one paced write category: its limiter and the rate it holds
// while the store keeps up.
type pace struct {
	lim  *rate.Limiter
	base rate.Limit // the configured rate, the least it holds

	mu     sync.Mutex
	rate   rate.Limit // base, or faster for a flush that must end sooner
	lifted bool
}

// newPace returns the pace for bytesPerSecond, or nil for a rate that is
// not positive (unpaced).
func newPace(bytesPerSecond int) *pace {
	if bytesPerSecond <= 0 {
		return nil
	}
	r := rate.Limit(bytesPerSecond)
	return &pace{lim: rate.NewLimiter(r, paceChunk), base: r, rate: r}
}

// limiter is p's limiter, nil for an unpaced category.
func (p *pace) limiter() *rate.Limiter {
	if p == nil {
		return nil
	}
	return p.lim
}

// set lifts p (lift) or restores its rate (restore); neither leaves it as
// it was. A nil p is unpaced and stays so.
func (p *pace) set(lift, restore bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case lift:
		p.lifted = true
		p.lim.SetLimit(rate.Inf)
	case restore:
		p.lifted = false
		p.lim.SetLimit(p.rate)
	}
}

// speed sets the rate p holds to r, or to its base if r is slower; a
// lifted p stays lifted until restored.
func (p *pace) speed(r rate.Limit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = max(p.base, r)
	if !p.lifted {
		p.lim.SetLimit(p.rate)
	}
}

// pacer lifts and restores the paces by L0's depth and the memtables'
// count, and sets each flush's pace by how fast the memtables fill.
type pacer struct {
	compaction, flush *pace
	stop              chan struct{}
	done              chan struct{}

	mu        sync.Mutex
	lastBegan time.Time // when the last flush began; zero before the first
	lastSize  int64     // bytes the last flush wrote; 0 before the first ended
}

// newPacer returns a pacer for the two rates, or nil when neither is
// paced.
func newPacer(compactionRate, flushRate int) *pacer {
	p := &pacer{
		compaction: newPace(compactionRate),
		flush:      newPace(flushRate),
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if p.compaction == nil && p.flush == nil {
		return nil
	}
	return p
}

// fs wraps fs so that the files of p's paced categories are paced.
func (p *pacer) fs(fs vfs.FS) vfs.FS {
	return pacedFS{FS: fs, compaction: p.compaction.limiter(), flush: p.flush.limiter()}
}

// flushBegan sets the pace of the flush beginning at now so that it
// writes what the last flush wrote in a quarter of the time the memtable
// it flushes took to fill (the time since the last flush began), and never
// slower than the configured rate. At a server's sustained rate memtables
// fill every quarter to third of a second, faster than the configured
// rate could flush them; without this the flushes would fall behind until
// the watcher lifted them, and the writes wait meanwhile. (Half the fill
// time kept up too, but cost the in-process benchmark about a tenth of
// its rate: docs/PERFORMANCE.md.)
func (p *pacer) flushBegan(now time.Time) {
	if p.flush == nil {
		return
	}
	p.mu.Lock()
	filled := now.Sub(p.lastBegan)
	first := p.lastBegan.IsZero()
	p.lastBegan = now
	size := p.lastSize
	p.mu.Unlock()
	if first || filled <= 0 || size <= 0 {
		return
	}
	p.flush.speed(rate.Limit(float64(size) / (filled.Seconds() / flushFillShare)))
}

// flushEnded records what a flush wrote, for the next one's pace.
func (p *pacer) flushEnded(info pebble.FlushInfo) {
	if info.Err != nil {
		return
	}
	var size int64
	for _, t := range info.Output {
		size += int64(t.Size)
	}
	p.mu.Lock()
	p.lastSize = size
	p.mu.Unlock()
}

// events is the pacer's part of Pebble's event listener.
func (p *pacer) events() *pebble.EventListener {
	return &pebble.EventListener{
		FlushBegin: func(pebble.FlushInfo) { p.flushBegan(time.Now()) },
		FlushEnd:   p.flushEnded,
	}
}

// watch runs until close, setting the paces from db's metrics.
func (p *pacer) watch(db *pebble.DB) {
	defer close(p.done)
	t := time.NewTicker(paceWatch)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			m := db.Metrics()
			p.adjust(int(m.Levels[0].Sublevels), int(m.MemTable.Count))
		}
	}
}

// adjust sets the paces for an L0 of sublevels sublevels and memtables
// memtables (the one being written included).
func (p *pacer) adjust(sublevels, memtables int) {
	p.compaction.set(sublevels >= paceLiftSublevels, sublevels <= l0CompactionThreshold)
	p.flush.set(memtables >= flushLiftMemtables, memtables < flushLiftMemtables)
}

// close stops the watcher and lifts the paces, so that a compaction or a
// flush still running when the store closes finishes at full speed.
func (p *pacer) close() {
	close(p.stop)
	<-p.done
	p.compaction.set(true, false)
	p.flush.set(true, false)
}
