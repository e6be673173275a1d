package pebblestore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/store"
)

var _ store.Shredder = (*Store)(nil)

// Shred implements store.Shredder. A deleted value lives on in three
// places until Pebble reuses their space: the memtable, the write-ahead
// log that recorded it, and the tables that hold it. Shred runs in the
// committer between two groups, so nothing commits meanwhile: it flushes
// the memtable (the data of every log but the newest is then in tables,
// and those logs are obsolete), compacts each span (the tables holding it
// are rewritten without the deleted values and removed), and overwrites
// every obsolete log with zeros (Pebble keeps a few to recycle, and a
// recycled log is only overwritten as far as new writes reach). Views
// still reading an older snapshot keep what they can see until they end.
func (s *Store) Shred(ctx context.Context, spans [][2][]byte) error {
	if !s.enter() {
		return fmt.Errorf("pebblestore: shred: %w", store.ErrClosed)
	}
	defer s.inflight.Done()
	job := &exclusiveJob{done: make(chan struct{}), fn: func() error {
		if err := s.db.Flush(); err != nil {
			return fmt.Errorf("flush: %w", err)
		}
		for _, sp := range spans {
			hi := sp[1]
			if hi == nil {
				hi = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			}
			if err := s.db.Compact(ctx, sp[0], hi, true); err != nil {
				return fmt.Errorf("compact: %w", err)
			}
		}
		return zeroObsoleteLogs(s.fs, s.dir)
	}}
	select {
	case s.exclusive <- job:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-job.done
	if job.err != nil {
		return fmt.Errorf("pebblestore: shred: %w", job.err)
	}
	return nil
}

// zeroObsoleteLogs overwrites every write-ahead log but the newest with
// zeros. It runs right after a flush with no commit in between, so the
// newest log is the only one whose data is not yet in tables.
func zeroObsoleteLogs(fs vfs.FS, dir string) error {
	names, err := fs.List(dir)
	if err != nil {
		return err
	}
	var logs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			logs = append(logs, n)
		}
	}
	// Log names are zero-padded numbers: name order is creation order.
	sort.Strings(logs)
	if len(logs) < 2 {
		return nil
	}
	zeros := make([]byte, 64<<10)
	for _, n := range logs[:len(logs)-1] {
		path := fs.PathJoin(dir, n)
		info, err := fs.Stat(path)
		if err != nil {
			continue // already gone: removed by Pebble meanwhile
		}
		f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			continue
		}
		var werr error
		for off := int64(0); off < info.Size() && werr == nil; off += int64(len(zeros)) {
			n := min(int64(len(zeros)), info.Size()-off)
			_, werr = f.WriteAt(zeros[:n], off)
		}
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("zero %s: %w", n, werr)
		}
	}
	return nil
}
