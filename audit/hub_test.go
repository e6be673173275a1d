package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/countersign/countersign/store"
)

// appendOne appends one entry through the store's own Update and calls
// Notify when notify is true; half the tests' writers use this path and
// half Log.Update.
func appendOne(ctx context.Context, l *Log, st store.Store, i int, viaLog bool) error {
	fn := func(txn store.Txn) error {
		_, err := l.Append(txn, testRecord(i))
		return err
	}
	if viaLog {
		return l.Update(ctx, fn)
	}
	if err := st.Update(ctx, fn); err != nil {
		return err
	}
	l.Notify()
	return nil
}

// collect reads from sub until it has delivered seq to, checking that
// seqs run from after+1 without gaps or duplicates.
func collect(ctx context.Context, sub *HubSub, after, to uint64) error {
	for want := after + 1; want <= to; want++ {
		e, err := sub.Next(ctx)
		if err != nil {
			return fmt.Errorf("after %d: waiting for %d: %w", after, want, err)
		}
		if e.Entry.Seq != want {
			return fmt.Errorf("after %d: got seq %d, want %d", after, e.Entry.Seq, want)
		}
	}
	return nil
}

// 100 subscribers share one tail; each receives all 1,000 entries in
// order, exactly once, while they are appended.
func TestHubFanOut(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	hub := NewHub(l, nil)
	defer hub.Close()

	const subs, total = 100, 1000
	var wg sync.WaitGroup
	errs := make(chan error, subs+1)
	for range subs {
		sub, err := hub.Subscribe(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer sub.Close()
			if err := collect(ctx, sub, 0, total); err != nil {
				errs <- err
			}
		})
	}
	wg.Go(func() {
		for i := range total {
			if err := appendOne(ctx, l, st, i, i%2 == 0); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := hub.Stats(); s.Position != total || s.Dropped != 0 || s.Subscribers != 0 || s.Buffered != 0 {
		t.Errorf("Stats = %+v, want position %d, nothing dropped, no subscribers left", s, total)
	}
}

// Subscriptions started at random points while writers append (through
// Log.Update and through the store plus Notify) see every entry after
// their start exactly once: no gap and no duplicate at the seam between
// the backlog read from the store and the live feed. A small buffer makes
// some of them overflow while they read their backlog.
func TestHubSeam(t *testing.T) {
	for _, bufSize := range []int{4, DefaultHubBufferSize} {
		t.Run(fmt.Sprint("buffer=", bufSize), func(t *testing.T) {
			ctx := t.Context()
			st := newMem(t)
			l := newTestLog(t, st)
			const backlog, writers, each = 300, 4, 100
			const total = backlog + writers*each
			appendN(t, l, backlog, 50)
			hub := NewHub(l, &HubOptions{BufferSize: bufSize})
			defer hub.Close()

			var wg sync.WaitGroup
			errs := make(chan error, 128)
			var written atomic.Uint64
			written.Store(backlog)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						if err := appendOne(ctx, l, st, w*1000+i, i%2 == 0); err != nil {
							errs <- err
							return
						}
						written.Add(1)
					}
				})
			}
			rng := rand.New(rand.NewPCG(3, uint64(bufSize)))
			for range 40 {
				// A start anywhere in what has committed so far: the
				// seam falls wherever the race puts it.
				after := rng.Uint64N(written.Load() + 1)
				sub, err := hub.Subscribe(ctx, after)
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					// A subscriber dropped as slow resumes after the last
					// entry it got, as an SSE client does.
					for last := after; last < total; {
						err := collect(ctx, sub, last, total)
						sub.Close()
						if err == nil {
							return
						}
						if !errors.Is(err, ErrSlowSubscriber) {
							errs <- err
							return
						}
						last = sub.last
						if sub, err = hub.Subscribe(ctx, last); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// A reader catching up from the store is never slow, and
			// with the default buffer these eager readers never fall
			// 1024 behind; with 4, a batch of 5 fanned out at once
			// drops a live subscriber, which then resumes.
			if s := hub.Stats(); bufSize == DefaultHubBufferSize && s.Dropped != 0 {
				t.Errorf("Stats = %+v, want nothing dropped", s)
			} else {
				t.Logf("Stats = %+v", s)
			}
		})
	}
}

// A subscriber that stops reading is dropped once it is more than its
// buffer behind; the hub then holds nothing for it, and the others go on.
func TestHubSlowSubscriber(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	const bufSize, total = 8, 200
	hub := NewHub(l, &HubOptions{BufferSize: bufSize})
	defer hub.Close()

	slow, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// One TryNext makes it a live subscriber (it has no backlog).
	if _, ok, err := slow.TryNext(ctx); ok || err != nil {
		t.Fatalf("TryNext on an empty log = %v, %v", ok, err)
	}
	fast, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()

	for i := range total {
		if err := appendOne(ctx, l, st, i, true); err != nil {
			t.Fatal(err)
		}
		// In step with the appends, so the fast reader is never the one
		// behind, however the scheduler runs the tail.
		if err := collect(ctx, fast, uint64(i), uint64(i+1)); err != nil {
			t.Fatal(err)
		}
		if s := hub.Stats(); s.Buffered > s.Subscribers*bufSize {
			t.Fatalf("Stats = %+v: more buffered than %d per subscriber", s, bufSize)
		}
	}
	<-slow.Done()
	if err := slow.Err(); !errors.Is(err, ErrSlowSubscriber) {
		t.Fatalf("slow subscriber ended with %v, want ErrSlowSubscriber", err)
	}
	// What it got before the drop is a complete prefix, so it can resume.
	if _, err := slow.Next(ctx); !errors.Is(err, ErrSlowSubscriber) {
		t.Errorf("Next after the drop: %v, want ErrSlowSubscriber", err)
	}
	s := hub.Stats()
	if s.Dropped != 1 || s.Subscribers != 1 || s.Buffered != 0 || s.Position != total {
		t.Errorf("Stats = %+v, want 1 dropped, 1 subscriber, nothing buffered, position %d", s, total)
	}
	slow.mu.Lock()
	held := len(slow.ring)
	slow.mu.Unlock()
	if held != 0 {
		t.Errorf("dropped subscriber still holds a %d-slot buffer", held)
	}
	resumed, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if err := collect(ctx, resumed, 0, total); err != nil {
		t.Error(err)
	}
}

// A subscriber whose buffer overflows while it still reads its backlog is
// not dropped: it catches up from the store and joins the live feed.
func TestHubBacklogOverflow(t *testing.T) {
	ctx := t.Context()
	st := newMem(t)
	l := newTestLog(t, st)
	const backlog, live, bufSize = 600, 50, 4
	appendN(t, l, backlog, 100)
	hub := NewHub(l, &HubOptions{BufferSize: bufSize})
	defer hub.Close()

	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := collect(ctx, sub, 0, 10); err != nil { // well inside the backlog
		t.Fatal(err)
	}
	appendN(t, l, live, 1)
	waitPosition(hub, backlog+live)
	sub.mu.Lock()
	behind, isLive := sub.behind, sub.live
	sub.mu.Unlock()
	if !behind || isLive {
		t.Fatalf("after %d live entries into a %d-entry buffer during the backlog: behind=%v live=%v, want overflowed, not live",
			live, bufSize, behind, isLive)
	}
	if err := collect(ctx, sub, 10, backlog+live); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 3, 1)
	if err := collect(ctx, sub, backlog+live, backlog+live+3); err != nil {
		t.Fatal(err)
	}
	if s := hub.Stats(); s.Dropped != 0 {
		t.Errorf("Stats = %+v, want nothing dropped", s)
	}
}

// waitPosition waits until the hub's tail has fanned out entry seq. Stats
// takes the lock the fan-out holds, and Gosched lets the tail run: this is
// a wait on progress, not on time.
func waitPosition(hub *Hub, seq uint64) {
	for hub.Stats().Position < seq {
		runtime.Gosched()
	}
}

// A subscriber resuming from an entry the store has but the tail has not
// yet fanned out does not fill its buffer with entries it already has,
// so it is not dropped as slow for them.
func TestHubResumeAheadOfTail(t *testing.T) {
	// In a bubble, synctest.Wait tells when the tail is parked waiting for
	// a Notify, so entries can be appended behind its back.
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		st := newMem(t)
		l := newTestLog(t, st)
		const bufSize = 8
		appendN(t, l, 10, 10)
		hub := NewHub(l, &HubOptions{BufferSize: bufSize})
		defer hub.Close()
		first, err := hub.Subscribe(ctx, 10) // starts the tail at 10
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		synctest.Wait()
		// 20 entries the hub is not told about.
		for i := range 20 {
			if err := st.Update(ctx, func(txn store.Txn) error {
				_, err := l.Append(txn, testRecord(i))
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		sub, err := hub.Subscribe(ctx, 25)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		if _, ok, err := sub.TryNext(ctx); ok || err != nil { // now live
			t.Fatalf("TryNext = %v, %v before the hub read anything", ok, err)
		}
		if p := hub.Stats().Position; p != 10 {
			t.Fatalf("hub position %d, want 10", p)
		}
		l.Notify()
		if err := collect(ctx, sub, 25, 30); err != nil {
			t.Fatal(err)
		}
		if err := collect(ctx, first, 10, 30); err != nil {
			t.Fatal(err)
		}
		if s := hub.Stats(); s.Dropped != 0 {
			t.Errorf("Stats = %+v, want nothing dropped", s)
		}
	})
}

func TestHubSubscribeOutOfRange(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 3, 3)
	hub := NewHub(l, nil)
	defer hub.Close()
	if _, err := hub.Subscribe(ctx, 4); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Subscribe(4) on a log of 3: %v, want ErrOutOfRange", err)
	}
	sub, err := hub.Subscribe(ctx, 3)
	if err != nil {
		t.Fatalf("Subscribe(3) on a log of 3: %v", err)
	}
	sub.Close()
}

// Close ends every subscription, blocked or not, with ErrHubClosed, and
// the hub refuses new ones; closing the Log does the same.
func TestHubClose(t *testing.T) {
	for _, how := range []string{"hub", "log"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			l := newTestLog(t, newMem(t))
			appendN(t, l, 5, 5)
			hub := NewHub(l, nil)
			var wg sync.WaitGroup
			errs := make(chan error, 10)
			for after := range uint64(5) {
				sub, err := hub.Subscribe(ctx, after)
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					defer sub.Close()
					for {
						if _, err := sub.Next(ctx); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			if how == "hub" {
				hub.Close()
			} else {
				l.Close()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, ErrHubClosed) {
					t.Errorf("Next after close: %v, want ErrHubClosed", err)
				}
			}
			if _, err := hub.Subscribe(ctx, 0); !errors.Is(err, ErrHubClosed) {
				t.Errorf("Subscribe after close: %v, want ErrHubClosed", err)
			}
			if err := hub.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if s := hub.Stats(); s.Subscribers != 0 {
				t.Errorf("Stats after close = %+v", s)
			}
		})
	}
}

// A hub that was never subscribed to has no goroutine to stop.
func TestHubCloseUnused(t *testing.T) {
	hub := NewHub(newTestLog(t, newMem(t)), nil)
	if err := hub.Close(); err != nil {
		t.Fatal(err)
	}
}

// The Subscribe context ends the subscription; Close ends it with
// ErrClosed; Next's own context only ends that call.
func TestHubSubEnds(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	hub := NewHub(l, nil)
	defer hub.Close()

	subCtx, cancel := context.WithCancel(ctx)
	sub, err := hub.Subscribe(subCtx, 0)
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancelCall := context.WithCancel(ctx)
	cancelCall()
	if _, err := sub.Next(callCtx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next with a done ctx: %v", err)
	}
	if sub.Err() != nil {
		t.Fatalf("the call's ctx ended the subscription: %v", sub.Err())
	}
	cancel()
	<-sub.Done()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next after the Subscribe ctx ended: %v, want context.Canceled", err)
	}
	sub.Close()

	sub2, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	sub2.Close()
	sub2.Close()
	if _, err := sub2.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Next after Close: %v, want ErrClosed", err)
	}
	if s := hub.Stats(); s.Subscribers != 0 {
		t.Errorf("Stats = %+v, want no subscribers", s)
	}
}

// lockedBuffer is a log sink safe for the hub's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// failingStore fails every View while fail is set.
type failingStore struct {
	store.Store
	fail atomic.Bool
}

var errInjected = errors.New("injected read failure")

func (f *failingStore) View(ctx context.Context, fn func(store.Reader) error) error {
	if f.fail.Load() {
		return errInjected
	}
	return f.Store.View(ctx, fn)
}

// When the tail cannot read, its subscribers end with the error (rather
// than wait silently); a later Subscribe makes it try again.
func TestHubReadFailure(t *testing.T) {
	ctx := t.Context()
	fs := &failingStore{Store: newMem(t)}
	l := newTestLog(t, fs)
	var logs lockedBuffer
	hub := NewHub(l, &HubOptions{History: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer hub.Close()

	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	fs.fail.Store(true)
	for i := range 2 { // Update is not View; the tail's read fails
		if err := appendOne(ctx, l, fs, i, true); err != nil {
			t.Fatal(err)
		}
	}
	<-sub.Done()
	if err := sub.Err(); !errors.Is(err, errInjected) {
		t.Fatalf("subscription ended with %v, want the read error", err)
	}
	if logged := logs.String(); !strings.Contains(logged, "injected read failure") {
		t.Errorf("the failure was not logged: %q", logged)
	}
	fs.fail.Store(false)
	again, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := collect(ctx, again, 0, 2); err != nil {
		t.Fatal(err)
	}

	// A subscriber reading its backlog: a done ctx ends the call only, a
	// store failure ends the subscription.
	back, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := back.Next(done); !errors.Is(err, context.Canceled) || back.Err() != nil {
		t.Fatalf("Next(done ctx) in the backlog: %v (subscription: %v)", err, back.Err())
	}
	fs.fail.Store(true)
	if _, err := back.Next(ctx); !errors.Is(err, errInjected) || !errors.Is(back.Err(), errInjected) {
		t.Fatalf("Next with a failing store: %v (subscription: %v)", err, back.Err())
	}
	fs.fail.Store(false)
}

// HubEntry.JSON is the entry as the API serves it, with Data byte for byte
// as stored, for live and backlog entries alike.
func TestHubEntryJSON(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 4, 4) // backlog
	hub := NewHub(l, nil)
	defer hub.Close()
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	appendN(t, l, 4, 1) // live
	for range 8 {
		e, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e.Entry); err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(e.JSON, want) {
			t.Errorf("seq %d: JSON\n%s\nwant\n%s", e.Entry.Seq, e.JSON, want)
		}
		if bytes.ContainsAny(e.JSON, "\r\n") {
			t.Errorf("seq %d: JSON is not one line", e.Entry.Seq)
		}
		if len(e.Entry.Data) > 0 && !bytes.Contains(e.JSON, e.Entry.Data) {
			t.Errorf("seq %d: JSON does not carry data %s verbatim", e.Entry.Seq, e.Entry.Data)
		}
		got, err := l.Get(ctx, e.Entry.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := fmt.Sprint(got), fmt.Sprint(e.Entry); g != w {
			t.Errorf("seq %d: hub delivered %s, Get returns %s", e.Entry.Seq, w, g)
		}
	}
}

// TryNext and Ready let a caller wait on the subscription and on other
// things at once.
func TestHubTryNextReady(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 2, 2)
	hub := NewHub(l, nil)
	defer hub.Close()
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []uint64
	drain := func() {
		for {
			e, ok, err := sub.TryNext(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				return
			}
			got = append(got, e.Entry.Seq)
		}
	}
	drain() // the backlog needs no wait
	appendN(t, l, 3, 1)
	for len(got) < 5 {
		<-sub.Ready()
		drain()
	}
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Errorf("got %v", got)
	}
}

// A subscriber's buffer starts small and grows, keeping order across the
// wrap of its ring, up to the configured size.
func TestHubBufferGrows(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	hub := NewHub(l, &HubOptions{BufferSize: 40})
	defer hub.Close()
	sub, err := hub.Subscribe(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ringLen := func() int {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		return len(sub.ring)
	}
	if n := ringLen(); n != 0 {
		t.Fatalf("a new subscriber holds a %d-slot buffer", n)
	}
	if _, ok, err := sub.TryNext(ctx); ok || err != nil { // live
		t.Fatal(ok, err)
	}
	appendN(t, l, 10, 1)
	waitPosition(hub, 10)
	if err := collect(ctx, sub, 0, 8); err != nil { // the ring's head moves to 8
		t.Fatal(err)
	}
	appendN(t, l, 20, 1) // 22 waiting: wraps, then grows past 16
	waitPosition(hub, 30)
	if n := ringLen(); n != 32 {
		t.Errorf("buffer of %d slots for 22 entries, want 32", n)
	}
	appendN(t, l, 18, 1) // 40 waiting: grows to the cap of 40, not 64
	waitPosition(hub, 48)
	if n := ringLen(); n != 40 {
		t.Errorf("buffer of %d slots for 40 entries, want the configured 40", n)
	}
	if err := collect(ctx, sub, 8, 48); err != nil {
		t.Fatal(err)
	}
	if s := hub.Stats(); s.Dropped != 0 {
		t.Errorf("Stats = %+v", s)
	}
}

// A backlog that starts among the newest History entries is served from
// memory; one that starts before them is read from the store.
func TestHubHistory(t *testing.T) {
	// In a bubble, so that synctest.Wait can tell when the tail is parked
	// before the store is made to fail.
	synctest.Test(t, testHubHistory)
}

func testHubHistory(t *testing.T) {
	ctx := t.Context()
	fs := &failingStore{Store: newMem(t)}
	l := newTestLog(t, fs)
	appendN(t, l, 100, 50)
	hub := NewHub(l, &HubOptions{History: 50})
	defer hub.Close()
	first, err := hub.Subscribe(ctx, 100) // the tail starts at 100
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	appendN(t, l, 80, 7)
	waitPosition(hub, 180)
	if s := hub.Stats(); s.History != 50 {
		t.Fatalf("Stats = %+v, want 50 entries of history", s)
	}
	inHistory, err := hub.Subscribe(ctx, 130) // 131..180: all in history
	if err != nil {
		t.Fatal(err)
	}
	defer inHistory.Close()
	before, err := hub.Subscribe(ctx, 129) // 130 is not
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()

	synctest.Wait()
	fs.fail.Store(true) // the store is now out of reach
	for seq := uint64(131); seq <= 180; seq++ {
		e, err := inHistory.Next(ctx)
		if err != nil || e.Entry.Seq != seq {
			t.Fatalf("from history: %d, %v; want seq %d", e.Entry.Seq, err, seq)
		}
		live, err := first.Next(ctx) // the same shared entry
		if err != nil || live.Entry.Seq != seq-30 {
			t.Fatalf("live: %d, %v; want %d", live.Entry.Seq, err, seq-30)
		}
	}
	if _, err := before.Next(ctx); !errors.Is(err, errInjected) {
		t.Errorf("a backlog older than the history: %v, want a store read (and its failure)", err)
	}
	fs.fail.Store(false)
	appendN(t, l, 1, 1)
	if err := collect(ctx, inHistory, 180, 181); err != nil {
		t.Fatal(err)
	}
}
