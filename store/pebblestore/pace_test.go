package pebblestore

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/time/rate"
)

// TestPacedFSPacesOnlyCompactions writes one burst's worth through files of
// each write category and checks that only a compaction's drew on the
// limiter, and that every byte arrived.
func TestPacedFSPacesOnlyCompactions(t *testing.T) {
	for _, tc := range []struct {
		category vfs.DiskWriteCategory
		paced    bool
	}{
		{"pebble-compaction", true},
		{"pebble-memtable-flush", false},
		{"pebble-wal", false},
		{"pebble-manifest", false},
		{vfs.WriteCategoryUnspecified, false},
	} {
		t.Run(string(tc.category), func(t *testing.T) {
			mem := vfs.NewMem()
			// A rate so low that the limiter refills nothing while the
			// test runs: the tokens left say what was drawn.
			lim := rate.NewLimiter(1e-9, paceChunk)
			fs := pacedFS{FS: mem, lim: lim}
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
			left := lim.Tokens()
			if tc.paced && left > 1 {
				t.Errorf("%d tokens left after a burst's worth of writes; want 0: the file was not paced", int(left))
			}
			if !tc.paced && left < paceChunk-1 {
				t.Errorf("%d tokens left; want %d: the file was paced", int(left), paceChunk)
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
	p := newPacer(1 << 20)
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
		p.adjust(step.sublevels)
		if got := p.lim.Limit(); got != step.want {
			t.Errorf("after %d sublevels: limit %v, want %v", step.sublevels, got, step.want)
		}
	}
}
