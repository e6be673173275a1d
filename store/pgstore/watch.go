package pgstore

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
)

var _ store.Watcher = (*Store)(nil)

// Watch implements [store.Watcher]. On PostgreSQL every group that writes
// sends NOTIFY on a channel named after the schema, in its commit's round
// trip, so the notification goes out exactly when the commit does; the
// store LISTENs on one connection of its own, opened on the first Watch,
// and signals every watcher on each notification, whichever process
// committed. When that connection is lost it is made again, and the
// watchers are signalled once it listens again, since commits may have
// been missed meanwhile. The channel is closed when ctx ends or the store
// closes.
//
// CockroachDB has no LISTEN: there, Watch's channel receives only the
// signal of its start, and a follower relies on its own polling.
func (s *Store) Watch(ctx context.Context) <-chan struct{} {
	w := &watcher{ch: make(chan struct{}, 1)}
	w.stop = context.AfterFunc(ctx, func() { s.unwatch(w) })
	s.watchMu.Lock()
	if s.watchEnded {
		s.watchMu.Unlock()
		w.stop()
		close(w.ch)
		return w.ch
	}
	if s.watchers == nil {
		s.watchers = map[*watcher]struct{}{}
	}
	s.watchers[w] = struct{}{}
	start := s.notify && !s.listening
	s.listening = s.listening || start
	if !s.notify {
		w.ch <- struct{}{} // nothing will follow: the follower reads once
	}
	s.watchMu.Unlock()
	if start {
		go s.listen()
	}
	if ctx.Err() != nil {
		s.unwatch(w) // ctx ended before w was registered
	}
	return w.ch
}

// watcher is one Watch subscription.
type watcher struct {
	ch   chan struct{} // capacity 1: signals coalesce
	stop func() bool   // the AfterFunc that ends it with its ctx
}

// unwatch ends w's subscription and closes its channel, once.
func (s *Store) unwatch(w *watcher) {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if _, ok := s.watchers[w]; ok {
		delete(s.watchers, w)
		close(w.ch)
	}
}

// signal wakes every watcher, without blocking: a watcher already
// signalled and not yet woken keeps one signal.
func (s *Store) signal() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	for w := range s.watchers {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// listen holds the LISTEN connection until the store closes: it signals
// the watchers on each notification, and once after each time it starts
// listening.
func (s *Store) listen() {
	defer close(s.listenDone)
	ctx := s.listenCtx
	wait := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, func() { wait = 50 * time.Millisecond })
		if ctx.Err() != nil {
			return
		}
		s.log.LogAttrs(ctx, slog.LevelDebug, "pgstore: listening again for other processes' commits", slog.Any("error", err))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// listenOnce connects, listens and signals until the connection fails or
// ctx ends; listening reports that it listens.
func (s *Store) listenOnce(ctx context.Context, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+s.schema); err != nil {
		return err
	}
	listening()
	s.signal() // commits may have been made while nobody listened
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		s.signal()
	}
}

// stopWatching ends the listener and every subscription (Close).
func (s *Store) stopWatching() {
	s.watchMu.Lock()
	s.watchEnded = true
	listening := s.listening
	ws := s.watchers
	s.watchers = nil
	for w := range ws {
		close(w.ch)
	}
	s.watchMu.Unlock()
	for w := range ws {
		w.stop()
	}
	s.stopListen()
	if listening {
		<-s.listenDone
	}
}

// watchState is the part of Store that Watch uses.
type watchState struct {
	// notify is set on PostgreSQL: commits send NOTIFY, and Watch listens.
	notify bool
	// watchMu guards watchers, listening and watchEnded (set by Close).
	watchMu    sync.Mutex
	watchers   map[*watcher]struct{}
	listening  bool
	watchEnded bool
	// listenCtx ends the listener (stopListen, at Close); listenDone is
	// closed when it has returned.
	listenCtx  context.Context
	stopListen context.CancelFunc
	listenDone chan struct{}
}
