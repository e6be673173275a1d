package pgstore_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// proxy forwards TCP connections to the database, and can stop doing so
// (down: every connection is cut and new ones are refused) and start
// again on the same address (up), as a database that restarts.
type proxy struct {
	t      *testing.T
	addr   string // where it listens
	target string // the database
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.down(); p.wg.Wait() })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[d] = struct{}{}, struct{}{}
			p.mu.Unlock()
			for _, pair := range [][2]net.Conn{{c, d}, {d, c}} {
				p.wg.Go(func() {
					_, _ = io.Copy(pair[0], pair[1])
					pair[0].Close()
					pair[1].Close()
				})
			}
		}
	})
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// TestUnreachableDatabase: while the database cannot be reached, Views
// fail with store.ErrUnavailable; an Update whose commit went out on a
// connection that was dead waits until the database is back and its
// marker tells what happened; and the store works again by itself.
func TestUnreachableDatabase(t *testing.T) {
	u, err := url.Parse(dbURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.addr
	st, err := pgstore.Open(context.Background(), u.String(), &pgstore.Options{Schema: schemaFor(t, t.Name()), MaxAttempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	write := func(k string) error {
		return st.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte(k), []byte("v")) })
	}
	read := func(k string) (bool, error) {
		found := false
		err := st.View(ctx, func(r store.Reader) error {
			_, err := r.Get([]byte(k))
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			found = err == nil
			return err
		})
		return found, err
	}
	if err := write("before"); err != nil {
		t.Fatal(err)
	}
	if found, err := read("before"); !found || err != nil {
		t.Fatalf("read before: %v, %v", found, err)
	}

	resolving := make(chan struct{})
	pgstore.OnResolvingForTest(st, sync.OnceFunc(func() { close(resolving) }))
	p.down()
	during := make(chan error, 1)
	go func() { during <- write("during") }()
	select {
	case err := <-during:
		// Refused before its commit went out.
		t.Log("the Update was refused before its commit went out")
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Update while the database is unreachable = %v, want store.ErrUnavailable", err)
		}
		during <- err
	case <-resolving:
		// Its commit went out on a dead connection: it waits for the
		// database, and other Updates are refused meanwhile.
		t.Log("the Update's commit went out on a dead connection")
		if err := write("refused"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Update while a commit's outcome is unknown = %v, want store.ErrUnavailable", err)
		}
	}

	if _, err := read("before"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("View while the database is unreachable = %v, want store.ErrUnavailable", err)
	}
	p.up()
	errDuring := <-during
	if err := write("after"); err != nil {
		t.Fatalf("Update once the database is back: %v", err)
	}
	for k, want := range map[string]bool{"before": true, "during": errDuring == nil, "refused": false, "after": true} {
		if found, err := read(k); found != want || err != nil {
			t.Errorf("%s: found %v, %v; want %v (its Update returned %v)", k, found, err, want, errDuring)
		}
	}
}

// TestUpdatesRefusedWhileResolving: while the committer reads back the
// marker of a commit whose answer was lost, other Updates are refused
// with store.ErrUnavailable at once; the commit's own Update waits and
// learns that it committed.
func TestUpdatesRefusedWhileResolving(t *testing.T) {
	st := open(t, schemaFor(t, t.Name()))
	defer st.Close()
	ctx := context.Background()
	reading, release := pgstore.HoldMarkerReadsForTest(st)
	first := make(chan error, 1)
	go func() {
		first <- st.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte("first"), []byte("v")) })
	}()
	<-reading
	err := st.Update(ctx, func(txn store.Txn) error { return txn.Set([]byte("second"), []byte("v")) })
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("an Update while a commit's outcome is read back = %v, want store.ErrUnavailable", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the Update whose answer was lost = %v, want nil: its marker says it committed", err)
	}
	if _, ok := get(t, st, "first"); !ok {
		t.Error("first was not committed")
	}
	if _, ok := get(t, st, "second"); ok {
		t.Error("the refused Update was committed")
	}
}
