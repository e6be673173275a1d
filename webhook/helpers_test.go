package webhook

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func testKey() ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 7)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func testSealKey() []byte { return bytes.Repeat([]byte{0x5a}, SealKeySize) }

// fakeResolver maps host names to addresses.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	calls []string
}

func (f *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, host)
	a, ok := f.hosts[host]
	if !ok {
		return nil, fmt.Errorf("no such host %q", host)
	}
	return a, nil
}

// env is a complete webhook setup over one store.
type env struct {
	t     testing.TB
	st    store.Store
	clock *fakeClock
	log   *audit.Log
	eps   *Endpoints
	d     *Dispatcher
	logs  *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (slog output).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type envOptions struct {
	st       store.Store
	clock    *fakeClock
	eps      *Options
	dispatch *DispatcherOptions
}

// newEnv builds an env; zero options mean: memstore with spurious
// retries, a fake clock, a seal key, loopback allowed, a fixed jitter draw.
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	if o.st == nil {
		ms := memstore.New(&memstore.Options{Rand: rand.New(rand.NewPCG(1, 2))})
		t.Cleanup(func() { ms.Close() })
		o.st = ms
	}
	if o.clock == nil {
		o.clock = newClock()
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l, err := audit.Open(ctx, o.st, testKey(), &audit.Options{Now: o.clock.Now, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	eo := Options{SealKey: testSealKey(), AllowLoopbackHTTP: true}
	if o.eps != nil {
		eo = *o.eps
	}
	eo.Now, eo.Logger = o.clock.Now, logger
	eps, err := NewEndpoints(o.st, l, &eo)
	if err != nil {
		t.Fatal(err)
	}
	do := DispatcherOptions{AllowLoopback: true, Rand: func() float64 { return 0.5 }}
	if o.dispatch != nil {
		do = *o.dispatch
	}
	do.Now, do.Logger = o.clock.Now, logger
	d, err := NewDispatcher(o.st, l, eps, &do)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return &env{t: t, st: o.st, clock: o.clock, log: l, eps: eps, d: d, logs: logs}
}

var operator = audit.Actor{Kind: "operator", ID: "op_test"}

// create registers an endpoint or fails the test.
func (e *env) create(url string, events ...string) Created {
	e.t.Helper()
	c, err := e.eps.Create(context.Background(), CreateRequest{URL: url, Events: events}, operator, "req_1", "register the test receiver")
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// append records an entry of type typ with data.
func (e *env) append(typ, data string) audit.Entry {
	e.t.Helper()
	var out audit.Entry
	err := e.log.Update(context.Background(), func(txn store.Txn) error {
		r := audit.Record{Type: typ, Actor: audit.Actor{Kind: "agent", ID: "ak_1"}}
		if data != "" {
			r.Data = json.RawMessage(data)
		}
		var err error
		out, err = e.log.Append(txn, r)
		return err
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) tick() int {
	e.t.Helper()
	n, err := e.d.Tick(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// deliveries lists every delivery of an endpoint, newest first.
func (e *env) deliveries(ep string) []Delivery {
	e.t.Helper()
	var all []Delivery
	cursor := ""
	for {
		p, err := e.d.Deliveries(context.Background(), ep, cursor, 100)
		if err != nil {
			e.t.Fatal(err)
		}
		all = append(all, p.Data...)
		if !p.HasMore {
			return all
		}
		cursor = *p.NextCursor
	}
}

// received is one request a receiver got.
type received struct {
	Event     Event
	Body      []byte
	Header    http.Header
	VerifyErr error
	Status    int
}

// receiver is a test webhook receiver on 127.0.0.1. status decides the
// answer to each request (nil: 200); requests are verified with the
// secrets set by setSecrets at the clock's time.
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	clock  *fakeClock
	status func(ev Event, n int) int // n: how many times this event id was seen before

	mu      sync.Mutex
	secrets []string
	got     []received
	seen    map[string]int
	arrived chan struct{} // gets a value per request (buffered, lossy)
}

func newReceiver(t testing.TB, clock *fakeClock, status func(ev Event, n int) int) *receiver {
	r := &receiver{t: t, clock: clock, status: status, seen: map[string]int{}, arrived: make(chan struct{}, 1<<16)}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecrets(s ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = s
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(400)
		return
	}
	r.mu.Lock()
	secrets := r.secrets
	r.mu.Unlock()
	vErr := Verify(body, req.Header.Get(SignatureHeader), secrets, 0, r.clock.Now())
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("receiver: body does not parse: %v", err)
	}
	r.mu.Lock()
	n := r.seen[ev.ID]
	r.seen[ev.ID]++
	r.mu.Unlock()
	status := 200
	if r.status != nil {
		status = r.status(ev, n)
	}
	r.mu.Lock()
	r.got = append(r.got, received{Event: ev, Body: body, Header: req.Header.Clone(), VerifyErr: vErr, Status: status})
	r.mu.Unlock()
	w.WriteHeader(status)
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// delivered returns the ids of the events answered 2xx, sorted by
// sequence then kind.
func (r *receiver) delivered() []string {
	var evs []Event
	for _, g := range r.requests() {
		if g.Status >= 200 && g.Status < 300 {
			evs = append(evs, g.Event)
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].Sequence != evs[j].Sequence {
			return evs[i].Sequence < evs[j].Sequence
		}
		return evs[i].Type < evs[j].Type
	})
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

// url returns the receiver's url with path.
func (r *receiver) url(path string) string { return r.srv.URL + path }

// rawStore returns every key and value under prefix.
func rawStore(t testing.TB, st store.Store, prefix string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := st.View(context.Background(), func(r store.Reader) error {
		it := r.Iterate([]byte(prefix), store.PrefixEnd([]byte(prefix)), false)
		defer it.Close()
		for it.Next() {
			out[string(it.Key())] = bytes.Clone(it.Value())
		}
		return it.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
