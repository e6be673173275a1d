package durability

import (
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// noSyncFS is a file system whose files, while lie says so for their
// name, pretend to sync: Sync, SyncData and SyncTo return success and do
// nothing. It is a store that skips its fsync and acknowledges commits
// anyway.
type noSyncFS struct {
	vfs.FS
	lie func(name string) bool
}

func (fs noSyncFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return noSyncFile{File: f, name: name, lie: fs.lie}, nil
}

func (fs noSyncFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f, err)
}

func (fs noSyncFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(name, f, err)
}

func (fs noSyncFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f, err)
}

func (fs noSyncFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(name, f, err)
}

func (fs noSyncFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	return fs.wrap(newname, f, err)
}

// noSyncFile is a file whose syncs, while lie says so, do nothing and say
// they succeeded.
type noSyncFile struct {
	vfs.File
	name string
	lie  func(string) bool
}

func (f noSyncFile) Sync() error {
	if f.lie(f.name) {
		return nil
	}
	return f.File.Sync()
}

func (f noSyncFile) SyncData() error {
	if f.lie(f.name) {
		return nil
	}
	return f.File.SyncData()
}

func (f noSyncFile) SyncTo(length int64) (bool, error) {
	if f.lie(f.name) {
		return true, nil
	}
	return f.File.SyncTo(length)
}

// TestPowerCutCatchesSkippedSync runs the power-cut harness over a store
// whose syncs start lying once the server is set up, and requires it to
// find acknowledged payments lost at every cut. The clones keep no
// unsynced data (UnsyncedDataPercent 0) and nothing flushes the memtable
// (no shreds; the epoch writes far less than a memtable holds), so every
// payment acknowledged before a cut exists only in unsynced log blocks and
// is certainly gone, while the setup (synced honestly) survives: a harness
// that passed here could not tell a durable store from one that skips its
// fsync.
func TestPowerCutCatchesSkippedSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  func(string) bool
	}{
		// The commit's own sync: the write-ahead log.
		{"wal", func(name string) bool { return strings.HasSuffix(name, ".log") }},
		// Every sync: files and directories.
		{"all", func(string) bool { return true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var broken atomic.Bool
			cfg := epochConfig{seed: 7, cuts: 3, meanGap: 4, noShred: true, payers: 2,
				percent: func(*rand.Rand) int { return 0 },
				wrap: func(fs vfs.FS) vfs.FS {
					return noSyncFS{FS: fs, lie: func(n string) bool { return broken.Load() && tc.lie(n) }}
				},
				afterSetup: func() { broken.Store(true) }}
			e, cuts := runEpoch(t, t.Context(), cfg)
			for _, s := range e.errs {
				t.Errorf("live workload: %s", s)
			}
			reps := e.checkCuts(t.Context(), cuts[:len(cuts)-1]) // the last is the clean stop
			for i, rep := range reps {
				if len(rep.lost) == 0 {
					t.Errorf("cut %d (%d acknowledged): the harness found no lost payment on a store that never syncs:%s",
						i, cuts[i].exp.acks.len(), rep)
					continue
				}
				if len(rep.webhooks) > 0 && strings.Contains(rep.webhooks[0], "endpoint") {
					t.Errorf("cut %d: the endpoint made before the syncs broke is gone: %s", i, rep.webhooks[0])
				}
				t.Logf("cut %d: %d acknowledged, found lost as it must: %s", i, cuts[i].exp.acks.len(), rep.lost[0])
			}
		})
	}
}
