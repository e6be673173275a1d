// Package lease lets one of several processes sharing a store do a piece
// of background work at a time: the settlement reconciler, the webhook
// dispatcher, the protocol scheduler. A lease is a row in the store naming
// its holder and the time it runs until; the holder renews it well before
// then, and any process may take it once that time has passed.
//
// A lease is a promise about time, so it rests on an assumption: the
// clocks of the processes differ by less than the margin between a
// holder's own deadline ([Options.TTL] minus [Options.Margin], after
// which it stops its work) and the lease's expiry as written. The work
// under a lease must therefore stay correct if, for a moment, two
// processes do it at once: every item it changes is changed in a store
// transaction that checks the item's state (two reconcilers ask the rail
// the same question and the second's transaction finds the payment
// already final), and what leaves the process is idempotent (a rail's
// at-most-once key) or at-least-once by contract (a webhook delivery).
// The lease makes that overlap rare and short; it is not what makes the
// work safe.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/store"
)

const keyPrefix = "lease/" // + name → record

// record is a lease as stored.
type record struct {
	Holder string `json:"holder"`
	// Until is when the lease ends unless renewed (Unix nanoseconds).
	Until int64 `json:"until"`
	// Term counts the times the lease changed hands, for logs and tests.
	Term uint64 `json:"term"`
}

// Options configures a [Lease]. The zero value gives the defaults.
type Options struct {
	// TTL is how long a taken or renewed lease lasts. Default 15s.
	TTL time.Duration
	// Renew is how often the holder renews, and how often another
	// process tries to take it. Default TTL/3.
	Renew time.Duration
	// Margin is how long before the written expiry the holder stops its
	// work when it could not renew: the bound on clock skew between the
	// processes. Default TTL/3.
	Margin time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives changes of hands at Info and store faults at Warn.
	// Default slog.Default().
	Logger *slog.Logger
}

// Lease is one named lease as seen by one holder.
type Lease struct {
	st     store.Store
	name   string
	holder string
	o      Options
}

// New returns the lease name for holder, which must be unique to the
// process (a random id: a restarted process is a new holder, and waits
// for its predecessor's lease to end unless that one released it).
func New(st store.Store, name, holder string, opts *Options) (*Lease, error) {
	if st == nil || name == "" || holder == "" {
		return nil, errors.New("lease: new: store, name and holder are required")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Second
	}
	if o.Renew <= 0 {
		o.Renew = o.TTL / 3
	}
	if o.Margin <= 0 {
		o.Margin = o.TTL / 3
	}
	if o.Renew+o.Margin >= o.TTL {
		return nil, fmt.Errorf("lease: new: renew (%v) plus margin (%v) must be shorter than the TTL (%v)", o.Renew, o.Margin, o.TTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Lease{st: st, name: name, holder: holder, o: o}, nil
}

// Name is the lease's name.
func (l *Lease) Name() string { return l.name }

// Holder is this process's holder id.
func (l *Lease) Holder() string { return l.holder }

// Try takes the lease if it is free or expired, or renews it if this
// holder has it. It returns the time until which this holder may work
// (the written expiry less the margin), or the zero time when another
// holder has the lease. An error is the store's: the lease is then not
// known to be held.
func (l *Lease) Try(ctx context.Context) (time.Time, error) {
	var (
		until time.Time
		took  bool
		term  uint64
	)
	err := l.st.Update(ctx, func(txn store.Txn) error {
		until, took, term = time.Time{}, false, 0
		now := l.o.Now()
		cur, err := get(txn, l.name)
		if err != nil {
			return err
		}
		if cur != nil && cur.Holder != l.holder && now.UnixNano() < cur.Until {
			return nil // someone else's, still running
		}
		next := record{Holder: l.holder, Until: now.Add(l.o.TTL).UnixNano()}
		if cur != nil {
			next.Term = cur.Term
		}
		if cur == nil || cur.Holder != l.holder {
			next.Term++
			took = true
		}
		term = next.Term
		b, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyPrefix+l.name), b); err != nil {
			return err
		}
		until = time.Unix(0, next.Until).Add(-l.o.Margin)
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("lease: %s: %w", l.name, err)
	}
	if took {
		l.o.Logger.InfoContext(ctx, "lease taken", slog.String("lease", l.name), slog.String("holder", l.holder), slog.Uint64("term", term))
	}
	return until, nil
}

// Release gives the lease up if this holder has it, so that another
// process may take it at once rather than after it expires.
func (l *Lease) Release(ctx context.Context) error {
	err := l.st.Update(ctx, func(txn store.Txn) error {
		cur, err := get(txn, l.name)
		if err != nil || cur == nil || cur.Holder != l.holder {
			return err
		}
		cur.Holder, cur.Until = "", 0
		b, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		return txn.Set([]byte(keyPrefix+l.name), b)
	})
	if err != nil {
		return fmt.Errorf("lease: release %s: %w", l.name, err)
	}
	return nil
}

// Holds reports, inside a transaction, whether this holder has the lease
// as of now: for work that wants its own writes fenced by the lease (the
// transaction then conflicts with any that takes the lease over).
func (l *Lease) Holds(r store.Reader) (bool, error) {
	cur, err := get(r, l.name)
	if err != nil || cur == nil {
		return false, err
	}
	return cur.Holder == l.holder && l.o.Now().UnixNano() < cur.Until-int64(l.o.Margin), nil
}

// Run does work while this holder has the lease, until ctx ends: it tries
// every Renew; on taking the lease it starts work with a context that is
// cancelled when the lease is lost (another holder has it, or it could not
// be renewed before this holder's deadline) or ctx ends, and waits for
// work to return before trying again. Work that returns early is started
// again at the next renewal while the lease is held. On return the lease
// is released. tick, when non-nil, replaces the renewal timer (tests).
func (l *Lease) Run(ctx context.Context, work func(context.Context), tick <-chan time.Time) {
	// expire fires at this holder's deadline, so that work stops on time
	// even when a renewal is slow; with a test's tick the deadline is
	// checked at each tick instead.
	var expire *time.Timer
	if tick == nil {
		t := time.NewTicker(l.o.Renew)
		defer t.Stop()
		tick = t.C
		expire = time.NewTimer(time.Hour)
		defer expire.Stop()
	}
	var (
		cancel   context.CancelFunc
		done     chan struct{}
		deadline time.Time
	)
	stop := func() {
		if cancel != nil {
			cancel()
			<-done
			cancel, done = nil, nil
		}
	}
	defer func() {
		stop()
		rctx, c := context.WithTimeout(context.WithoutCancel(ctx), l.o.TTL)
		defer c()
		if err := l.Release(rctx); err != nil {
			l.o.Logger.WarnContext(ctx, "releasing a lease", slog.String("lease", l.name), slog.Any("error", err))
		}
	}()
	for {
		until, err := l.Try(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			l.o.Logger.WarnContext(ctx, "renewing a lease", slog.String("lease", l.name), slog.Any("error", err))
			// Keep working until the last deadline this holder was given.
		case until.IsZero():
			deadline = time.Time{}
		default:
			deadline = until
		}
		if !l.o.Now().Before(deadline) {
			stop()
		} else {
			if done != nil {
				select {
				case <-done: // work returned by itself: start it again
					cancel()
					cancel, done = nil, nil
				default:
				}
			}
			if done == nil {
				var wctx context.Context
				wctx, cancel = context.WithCancel(ctx)
				done = make(chan struct{})
				go func(ctx context.Context, done chan struct{}) {
					defer close(done)
					work(ctx)
				}(wctx, done)
			}
		}
		var expired <-chan time.Time
		if expire != nil && cancel != nil {
			expire.Reset(time.Until(deadline))
			expired = expire.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-expired:
		}
		if cancel != nil && !l.o.Now().Before(deadline) {
			stop() // the deadline passed while waiting
		}
	}
}

func get(r store.Reader, name string) (*record, error) {
	b, err := r.Get([]byte(keyPrefix + name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("lease: %s: stored record: %w", name, err)
	}
	return &rec, nil
}
