package lease_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/lease"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// clock is a fake clock shared by the holders.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newLease(t *testing.T, st store.Store, holder string, c *clock) *lease.Lease {
	t.Helper()
	l, err := lease.New(st, "reconcile", holder, &lease.Options{TTL: 15 * time.Second, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTry walks the lease through its hands: taken when free, refused to
// another while running, renewed by its holder, taken over once expired,
// and free again at once when released.
func TestTry(t *testing.T) {
	ctx := context.Background()
	st := new(memstore.Store)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	a, b := newLease(t, st, "a", c), newLease(t, st, "b", c)
	steps := []struct {
		name    string
		advance time.Duration
		who     *lease.Lease
		release bool
		held    bool
	}{
		{"a takes the free lease", 0, a, false, true},
		{"b is refused while a holds it", time.Second, b, false, false},
		{"a renews", 4 * time.Second, a, false, true},
		{"b is refused just before the renewed expiry", 14 * time.Second, b, false, false},
		{"b takes it once expired", 2 * time.Second, b, false, true},
		{"a is refused now", 0, a, false, false},
		{"b releases", 0, b, true, false},
		{"a takes it at once", 0, a, false, true},
	}
	for _, s := range steps {
		c.Add(s.advance)
		if s.release {
			if err := s.who.Release(ctx); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			continue
		}
		until, err := s.who.Try(ctx)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := !until.IsZero(); got != s.held {
			t.Fatalf("%s: held = %v, want %v", s.name, got, s.held)
		}
		if s.held {
			if want := c.Now().Add(10 * time.Second); !until.Equal(want) {
				t.Fatalf("%s: works until %v, want %v (TTL less margin)", s.name, until, want)
			}
			ok := false
			if err := st.View(ctx, func(r store.Reader) (err error) { ok, err = s.who.Holds(r); return err }); err != nil || !ok {
				t.Fatalf("%s: Holds = %v, %v", s.name, ok, err)
			}
		}
	}
}

// TestRunStopsWorkWhenLost: work runs while the lease is held and is
// cancelled at the holder's deadline once renewals stop landing (here: the
// other holder took an expired lease).
func TestRunStopsWorkWhenLost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := new(memstore.Store)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	a, b := newLease(t, st, "a", c), newLease(t, st, "b", c)
	tick := make(chan time.Time)
	started, stopped := make(chan struct{}, 4), make(chan struct{}, 4)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		a.Run(ctx, func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			stopped <- struct{}{}
		}, tick)
	}()
	<-started
	// b cannot take it while a renews.
	c.Add(5 * time.Second)
	tick <- time.Time{}
	if until, err := b.Try(ctx); err != nil || !until.IsZero() {
		t.Fatalf("b took a renewed lease: %v %v", until, err)
	}
	// Past a's expiry without a renewal (a's ticks did not come): b takes
	// it, and a's next tick finds it lost and stops the work.
	c.Add(16 * time.Second)
	if until, err := b.Try(ctx); err != nil || until.IsZero() {
		t.Fatalf("b could not take an expired lease: %v %v", until, err)
	}
	tick <- time.Time{}
	<-stopped
	select {
	case <-started:
		t.Fatal("work started again without the lease")
	default:
	}
	cancel()
	<-ran
}
