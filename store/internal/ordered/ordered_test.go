package ordered

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model is the obviously-correct reference: a Go map plus a sort per read.
type model map[string]Entry

func (md model) scan(lower, upper []byte, reverse bool) []string {
	var keys []string
	for k := range md {
		if lower != nil && k < string(lower) {
			continue
		}
		if upper != nil && k >= string(upper) {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if reverse {
		slices.Reverse(keys)
	}
	return keys
}

func collect(c *Cursor) []string {
	var keys []string
	for c.Next() {
		keys = append(keys, string(c.Entry().Key))
	}
	return keys
}

// TestMapAgainstModel runs random puts and removes over a small key space,
// so that chunks split and empty out, and compares every read with the model.
func TestMapAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var m Map
	md := model{}
	key := func() []byte { return []byte{byte(r.IntN(40)), byte(r.IntN(60))} }
	for i := range 12000 {
		k := key()
		if r.IntN(3) == 0 {
			m.Remove(k)
			delete(md, string(k))
		} else {
			e := Entry{Key: k, Value: []byte(fmt.Sprint(i)), Tombstone: r.IntN(5) == 0}
			m.Put(e)
			md[string(k)] = e
		}
		if m.Len() != len(md) {
			t.Fatalf("step %d: Len = %d, want %d", i, m.Len(), len(md))
		}
		if i%151 != 0 {
			continue
		}
		probe := key()
		got, ok := m.Get(probe)
		want, wok := md[string(probe)]
		if ok != wok || !bytes.Equal(got.Value, want.Value) || got.Tombstone != want.Tombstone {
			t.Fatalf("step %d: Get(%x) = %v,%v want %v,%v", i, probe, got, ok, want, wok)
		}
		lo, hi := key(), key()
		for _, b := range [][2][]byte{{nil, nil}, {lo, nil}, {nil, hi}, {lo, hi}} {
			for _, rev := range []bool{false, true} {
				got := collect(m.Cursor(b[0], b[1], rev))
				want := md.scan(b[0], b[1], rev)
				if !slices.Equal(got, want) {
					t.Fatalf("step %d: scan(%x, %x, %v) = %q, want %q", i, b[0], b[1], rev, got, want)
				}
			}
		}
	}
}

// TestCursorSurvivesMutation checks that a cursor whose map changes under it
// neither repeats nor goes backwards, and sees every key that was present
// throughout.
func TestCursorSurvivesMutation(t *testing.T) {
	for _, rev := range []bool{false, true} {
		t.Run(fmt.Sprintf("reverse=%v", rev), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var m Map
			for i := range 3000 {
				m.Put(Entry{Key: fmt.Appendf(nil, "k%05d", i*2)})
			}
			c := m.Cursor(nil, nil, rev)
			var prev []byte
			seen := 0
			for c.Next() {
				k := c.Entry().Key
				if prev != nil && (bytes.Compare(k, prev) <= 0) != rev {
					t.Fatalf("cursor went from %s to %s", prev, k)
				}
				prev = k
				if k[len(k)-1]%2 == 0 {
					seen++
				}
				// Churn odd keys (never present at the start) and remove the
				// current key, which the cursor must step past.
				m.Put(Entry{Key: fmt.Appendf(nil, "k%05d", r.IntN(3000)*2+1)})
				m.Remove(fmt.Appendf(nil, "k%05d", r.IntN(3000)*2+1))
				m.Remove(k)
			}
			if seen != 3000 {
				t.Fatalf("saw %d of the 3000 original keys", seen)
			}
		})
	}
}

func TestAscendingAppendPacksChunks(t *testing.T) {
	var m Map
	for i := range 100 * maxChunk {
		m.Put(Entry{Key: fmt.Appendf(nil, "%08d", i)})
	}
	if got := len(m.chunks); got != 100 {
		t.Fatalf("%d chunks after %d ascending appends, want 100", got, 100*maxChunk)
	}
}

func BenchmarkAppendAscending(b *testing.B) {
	var m Map
	for i := range b.N {
		m.Put(Entry{Key: fmt.Appendf(nil, "%016d", i)})
	}
}

func BenchmarkPutRandom(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var m Map
	for range b.N {
		m.Put(Entry{Key: fmt.Appendf(nil, "%016d", r.Uint64())})
	}
}
