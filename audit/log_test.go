package audit

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/google/go-cmp/cmp"
)

func TestAppendGet(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)

	var appended []Entry
	for i := range 8 {
		var e Entry
		err := l.Update(ctx, func(txn store.Txn) error {
			var err error
			e, err = l.Append(txn, testRecord(i))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		appended = append(appended, e)
	}
	for i, e := range appended {
		if e.Seq != uint64(i+1) {
			t.Errorf("entry %d: seq = %d", i, e.Seq)
		}
		if i == 0 && e.Prev != strings.Repeat("0", 64) {
			t.Errorf("seq 1 prev = %q, want 64 zeros", e.Prev)
		}
		if i > 0 && e.Prev != appended[i-1].Hash {
			t.Errorf("seq %d prev = %s, want %s", e.Seq, e.Prev, appended[i-1].Hash)
		}
		if !validAt(e.At) || !strings.HasSuffix(e.At, "Z") {
			t.Errorf("seq %d at = %q", e.Seq, e.At)
		}
		got, err := l.Get(ctx, e.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("Get(%d) differs from Append's entry (-append +get):\n%s", e.Seq, diff)
		}
	}
	// Data comes back canonical: keys sorted, whitespace gone, numbers in
	// ECMAScript form.
	if got, want := string(appended[0].Data), `{"amount":{"currency":"EUR","value":"0.00"},"ok":true,"z":0}`; got != want {
		t.Errorf("data = %s, want %s", got, want)
	}
	if got, want := string(appended[1].Data), `{"list":[3,1,2],"n":1500,"note":"quote \" backslash \\ tab \t <html> & é 😀"}`; got != want {
		t.Errorf("data = %s, want %s", got, want)
	}

	for _, seq := range []uint64{0, 9, 1 << 40} {
		if _, err := l.Get(ctx, seq); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%d) error = %v, want ErrNotFound", seq, err)
		}
	}
	if n, err := l.Size(ctx); err != nil || n != 8 {
		t.Errorf("Size = %d, %v; want 8", n, err)
	}
}

func TestAppendInvalidRecord(t *testing.T) {
	ok := Record{Type: "gate.decision", Actor: Actor{Kind: "agent", ID: "ak_1"}}
	with := func(f func(*Record)) Record { r := ok; f(&r); return r }
	tests := []struct {
		name string
		r    Record
		want string // substring of the error; "" means valid
	}{
		{"valid", ok, ""},
		{"valid data", with(func(r *Record) { r.Data = json.RawMessage(" {\"b\":1,\"a\":[]} ") }), ""},
		{"empty type", with(func(r *Record) { r.Type = "" }), "type is empty"},
		{"no actor", with(func(r *Record) { r.Actor = Actor{} }), "actor kind"},
		{"bad actor kind", with(func(r *Record) { r.Actor.Kind = "robot" }), "actor kind"},
		{"empty actor id", with(func(r *Record) { r.Actor.ID = "" }), "actor id is empty"},
		{"data array", with(func(r *Record) { r.Data = json.RawMessage(`[1]`) }), "not a JSON object"},
		{"data null", with(func(r *Record) { r.Data = json.RawMessage(`null`) }), "not a JSON object"},
		{"data string", with(func(r *Record) { r.Data = json.RawMessage(`"x"`) }), "not a JSON object"},
		{"data broken", with(func(r *Record) { r.Data = json.RawMessage(`{"a":`) }), "not valid JSON"},
		{"data trailing", with(func(r *Record) { r.Data = json.RawMessage(`{"a":1} {}`) }), "not valid JSON"},
		{"data duplicate key", with(func(r *Record) { r.Data = json.RawMessage(`{"a":1,"a":2}`) }), "not valid JSON"},
		{"invalid utf-8", with(func(r *Record) { r.Rationale = "bad \xff" }), "rationale is not valid UTF-8"},
		{"too large", with(func(r *Record) {
			r.Data = json.RawMessage(`{"x":"` + strings.Repeat("a", maxBodyBytes) + `"}`)
		}), "more than"},
	}
	st := newMem(t)
	l := newTestLog(t, st)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.Update(t.Context(), func(txn store.Txn) error {
				_, err := l.Append(txn, tt.r)
				return err
			})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Append: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Append error = %v, want ErrInvalidRecord mentioning %q", err, tt.want)
			}
		})
	}
}

// An Append whose transaction then fails leaves no trace: the next
// successful Append reuses its seq.
func TestAppendAbortedLeavesNoTrace(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 3, 1)

	boom := errors.New("boom")
	var aborted Entry
	err := l.Update(ctx, func(txn store.Txn) error {
		var err error
		if aborted, err = l.Append(txn, testRecord(100)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want boom", err)
	}
	if aborted.Seq != 4 {
		t.Fatalf("aborted entry seq = %d, want 4", aborted.Seq)
	}
	if n, _ := l.Size(ctx); n != 3 {
		t.Fatalf("Size after abort = %d, want 3", n)
	}
	if _, err := l.Get(ctx, 4); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(4) after abort: %v, want ErrNotFound", err)
	}
	var e Entry
	err = l.Update(ctx, func(txn store.Txn) error {
		var err error
		e, err = l.Append(txn, testRecord(101))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 4 {
		t.Fatalf("next entry seq = %d, want 4", e.Seq)
	}
	if err := l.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Fatal(err)
	}
}

// Against a store that re-runs transaction functions, concurrent appenders
// still produce 1..n with no gap and a log that verifies.
func TestAppendUnderRetries(t *testing.T) {
	for _, rate := range []float64{0.5, 1} {
		t.Run("", func(t *testing.T) {
			ctx := t.Context()
			st := memstore.New(&memstore.Options{RetryRate: rate, Rand: rand.New(rand.NewPCG(3, 4))})
			defer st.Close()
			l := newTestLog(t, st)
			const workers, each = 8, 40
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						err := l.Update(ctx, func(txn store.Txn) error {
							_, err := l.Append(txn, testRecord(w*each+i))
							return err
						})
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			var seqs []uint64
			for e, err := range l.Entries(ctx, 0, 0) {
				if err != nil {
					t.Fatal(err)
				}
				seqs = append(seqs, e.Seq)
			}
			if len(seqs) != workers*each {
				t.Fatalf("%d entries, want %d", len(seqs), workers*each)
			}
			for i, s := range seqs {
				if s != uint64(i+1) {
					t.Fatalf("entry %d has seq %d", i, s)
				}
			}
			if err := l.Verify(ctx, 0, 0, Full, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPage(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 45, 10)

	// Walk the whole log with each limit; the pages must tile 1..45.
	for _, limit := range []int{0, 1, 7, 45, 100} {
		var seqs []uint64
		cursor := ""
		pages := 0
		for {
			p, err := l.Page(ctx, cursor, limit)
			if err != nil {
				t.Fatalf("limit %d: %v", limit, err)
			}
			pages++
			for _, e := range p.Data {
				seqs = append(seqs, e.Seq)
			}
			if p.HasMore != (p.NextCursor != nil) {
				t.Fatalf("limit %d: hasMore %v with nextCursor %v", limit, p.HasMore, p.NextCursor)
			}
			if !p.HasMore {
				break
			}
			cursor = *p.NextCursor
		}
		eff := limit
		if eff == 0 {
			eff = DefaultPageLimit
		}
		if want := (45 + eff - 1) / eff; pages != want {
			t.Errorf("limit %d: %d pages, want %d", limit, pages, want)
		}
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("limit %d: position %d has seq %d", limit, i, s)
			}
		}
		if len(seqs) != 45 {
			t.Errorf("limit %d: %d entries", limit, len(seqs))
		}
	}

	// An empty page at the end still has "data": [] and a null cursor.
	p, err := l.Page(ctx, l.CursorAfter(45), 10)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	if got, want := string(b), `{"data":[],"hasMore":false,"nextCursor":null}`; got != want {
		t.Errorf("end page = %s, want %s", got, want)
	}

	other, err := Open(ctx, memstore.New(nil), testKey(1), &Options{Origin: "other.example/audit"})
	if err != nil {
		t.Fatal(err)
	}
	good := l.CursorAfter(3)
	errTests := []struct {
		name   string
		cursor string
		limit  int
		want   error
	}{
		{"limit negative", "", -1, ErrBadLimit},
		{"limit too large", "", 101, ErrBadLimit},
		{"not base64", "!!!!!!!!!!!!!!!!", 10, ErrBadCursor},
		{"short", good[:10], 10, ErrBadCursor},
		{"long", good + "AA", 10, ErrBadCursor},
		{"padded", good + "==", 10, ErrBadCursor},
		{"flipped tag", good[:15] + string(good[15]^1), 10, ErrBadCursor},
		{"foreign log", other.CursorAfter(3), 10, ErrBadCursor},
		{"past head", l.CursorAfter(46), 10, ErrBadCursor},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := l.Page(ctx, tt.cursor, tt.limit); !errors.Is(err, tt.want) {
				t.Fatalf("Page error = %v, want %v", err, tt.want)
			}
		})
	}
	p, err = l.Page(ctx, good, 2)
	if err != nil || len(p.Data) != 2 || p.Data[0].Seq != 4 {
		t.Fatalf("Page(after 3) = %+v, %v", p, err)
	}
}

func TestOpen(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	appendN(t, l, 3, 3)

	if _, err := Open(ctx, st, testKey(2), nil); !errors.Is(err, ErrKeyMismatch) {
		t.Errorf("Open with another key: %v, want ErrKeyMismatch", err)
	}
	if _, err := Open(ctx, st, testKey(1)[:10], nil); err == nil {
		t.Error("Open with a short key succeeded")
	}
	for _, origin := range []string{"has space", "has+plus", "tab\there"} {
		if _, err := Open(ctx, st, testKey(1), &Options{Origin: origin}); err == nil {
			t.Errorf("Open with origin %q succeeded", origin)
		}
	}
	if got := l.Origin(); !strings.HasPrefix(got, "countersign/") || len(got) != len("countersign/")+16 {
		t.Errorf("default origin = %q", got)
	}
	if !strings.HasPrefix(l.VerifierKey(), l.Origin()+"+") {
		t.Errorf("verifier key %q does not start with the origin", l.VerifierKey())
	}

	r, err := OpenReader(ctx, st, l.PublicKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Origin() != l.Origin() || r.VerifierKey() != l.VerifierKey() {
		t.Errorf("reader origin/key %q %q differ from the writer's", r.Origin(), r.VerifierKey())
	}
	err = st.Update(ctx, func(txn store.Txn) error { _, err := r.Append(txn, testRecord(0)); return err })
	if !errors.Is(err, ErrReadOnly) {
		t.Errorf("reader Append: %v, want ErrReadOnly", err)
	}
	if _, err := r.Checkpoint(ctx); !errors.Is(err, ErrReadOnly) {
		t.Errorf("reader Checkpoint: %v, want ErrReadOnly", err)
	}
	if _, err := r.Inclusion(ctx, 1, 0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("reader Inclusion: %v, want ErrReadOnly", err)
	}
	if _, err := r.Consistency(ctx, 1, 0); !errors.Is(err, ErrReadOnly) {
		t.Errorf("reader Consistency: %v, want ErrReadOnly", err)
	}
	if err := r.Verify(ctx, 0, 0, Full, nil); err != nil {
		t.Errorf("reader Verify: %v", err)
	}
	// Cursors minted by the writer work on the reader: same origin.
	if p, err := r.Page(ctx, l.CursorAfter(1), 1); err != nil || p.Data[0].Seq != 2 {
		t.Errorf("reader Page = %+v, %v", p, err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Size(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Size after Close: %v, want ErrClosed", err)
	}
	err = l.Update(ctx, func(txn store.Txn) error { return nil })
	if !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v, want ErrClosed", err)
	}
}

func TestEntries(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 600, 100)
	tests := []struct{ from, to, first, n uint64 }{
		{0, 0, 1, 600},
		{1, 1, 1, 1},
		{250, 520, 250, 271},
		{600, 600, 600, 1},
	}
	for _, tt := range tests {
		next, n := tt.first, uint64(0)
		for e, err := range l.Entries(ctx, tt.from, tt.to) {
			if err != nil {
				t.Fatal(err)
			}
			if e.Seq != next {
				t.Fatalf("Entries(%d,%d): got seq %d, want %d", tt.from, tt.to, e.Seq, next)
			}
			next++
			n++
		}
		if n != tt.n {
			t.Errorf("Entries(%d,%d): %d entries, want %d", tt.from, tt.to, n, tt.n)
		}
	}
	var lastErr error
	n := 0
	for _, err := range l.Entries(ctx, 1, 601) {
		if err != nil {
			lastErr = err
			break
		}
		n++
	}
	if !errors.Is(lastErr, ErrNotFound) || n > 600 {
		t.Errorf("Entries past the end: %d entries, then %v; want ErrNotFound", n, lastErr)
	}
	// Breaking out early is fine.
	for range l.Entries(ctx, 0, 0) {
		break
	}
}

func TestAtFormat(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05.000000Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.UTC), "2026-01-02T03:04:05.999999Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 1000, time.FixedZone("X", -7*3600)), "2026-01-02T10:04:05.000001Z"},
	}
	for _, tt := range tests {
		if got := formatAt(tt.in); got != tt.want || !validAt(got) {
			t.Errorf("formatAt(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "2026-01-02T03:04:05Z", "2026-01-02T03:04:05.000000+00:00", "2026-01-02T03:04:05.0000000Z", "2026-13-02T03:04:05.000000Z"} {
		if validAt(bad) {
			t.Errorf("validAt(%q) = true", bad)
		}
	}
}
