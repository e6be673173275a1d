package memory

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// clock is a fake clock that moves only when told to; every reading is
// strictly later than the one before it (one microsecond), so two
// transactions never share a transaction time by accident.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Microsecond)
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	t      testing.TB
	st     store.Store
	log    *audit.Log
	svc    *Service
	clock  *clock
	opKey  ed25519.PrivateKey
	agent  string // the agent id mandates name
	caller Caller
}

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func newFixture(t testing.TB, opts *Options) *fixture {
	return newFixtureOn(t, memstore.New(&memstore.Options{RetryRate: 0.05}), opts)
}

func newFixtureOn(t testing.TB, st store.Store, opts *Options) *fixture {
	t.Helper()
	_, recKey, _ := ed25519.GenerateKey(nil)
	return newFixtureKeyed(t, st, opts, recKey)
}

// newFixtureKeyed is newFixtureOn with a given record key, so that
// artifacts issued by one run verify with the key of another (the fuzz
// seed corpus).
func newFixtureKeyed(t testing.TB, st store.Store, opts *Options, recKey ed25519.PrivateKey) *fixture {
	t.Helper()
	f := &fixture{t: t, st: st, clock: &clock{t: t0}}
	opPub, opKey, _ := ed25519.GenerateKey(nil)
	agentPub, _, _ := ed25519.GenerateKey(nil)
	f.opKey, f.agent = opKey, hex.EncodeToString(agentPub)
	f.caller = Caller{KeyID: "ak_test", Agents: []string{f.agent}}
	var err error
	if f.log, err = audit.Open(t.Context(), st, recKey, &audit.Options{Now: f.clock.Now, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opPub}}, &pay.MandateVerifierOptions{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.Store, o.Log, o.Mandates, o.Now = st, f.log, mv, f.clock.Now
	o.Logger = slog.New(slog.DiscardHandler)
	if f.svc, err = New(o); err != nil {
		t.Fatal(err)
	}
	return f
}

// mandate issues a memory mandate for the fixture's agent over ns with
// every right, changed by mod.
func (f *fixture) mandate(ns string, mod func(*MandateClaims)) string {
	f.t.Helper()
	now := f.clock.Now().Truncate(time.Second)
	c := MandateClaims{ID: "mm-" + ns, Agent: f.agent, IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(24 * time.Hour),
		Namespace: ns, CanRead: true, CanWrite: true, CanErase: true}
	if mod != nil {
		mod(&c)
	}
	tok, err := SignMandate(c, f.opKey, "op")
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

func (f *fixture) op() OperatorCall {
	return OperatorCall{Operator: "op", RequestID: "req_test", Rationale: "the person asked for it"}
}

type fact struct {
	subject, kind, body string
	from                time.Time
	to                  *time.Time
	source              Source
	edges               []Edge
	key                 string
}

// keyCounter numbers the idempotency keys the helpers make up; atomic,
// so tests that run in parallel do not race on it.
var keyCounter atomic.Int64

func (f *fixture) remember(ns string, x fact) (Record, error) {
	f.t.Helper()
	if x.kind == "" {
		x.kind = "note"
	}
	if x.source.Kind == "" {
		x.source = Source{Kind: "agent", Ref: f.agent}
	}
	if x.key == "" {
		x.key = fmt.Sprintf("k%d", keyCounter.Add(1))
	}
	if x.from.IsZero() {
		x.from = t0.Add(-24 * time.Hour)
	}
	body, _ := json.Marshal(x.body)
	r, err := f.svc.Remember(f.t.Context(), f.caller, RememberRequest{Mandate: f.mandate(ns, nil), IdempotencyKey: x.key,
		Namespace: ns, Subject: x.subject, Kind: x.kind, Body: body, ValidFrom: x.from, ValidTo: x.to,
		Source: x.source, Edges: x.edges}, "req_1")
	return r.Artifact.Record, err
}

func (f *fixture) mustRemember(ns string, x fact) Record {
	f.t.Helper()
	r, err := f.remember(ns, x)
	if err != nil {
		f.t.Fatalf("remember %+v: %v", x, err)
	}
	return r
}

func (f *fixture) recall(ns string, q RecallRequest) (RecallPage, error) {
	f.t.Helper()
	q.Namespace = ns
	if q.Mandate == "" {
		q.Mandate = f.mandate(ns, nil)
	}
	return f.svc.Recall(f.t.Context(), f.caller, q)
}

func ptr[T any](v T) *T { return &v }

func ids_(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// size is the number of record entries.
func (f *fixture) size() uint64 {
	f.t.Helper()
	n, err := f.log.Size(f.t.Context())
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// entries returns the record entries after seq, oldest first.
func (f *fixture) entries(after uint64) []audit.Entry {
	f.t.Helper()
	var out []audit.Entry
	if f.size() <= after {
		return nil
	}
	for e, err := range f.log.Entries(f.t.Context(), after+1, 0) {
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// recallAll follows a recall through every page (q.Cursor is ignored) and
// returns the records in order.
func (f *fixture) recallAll(ns string, q RecallRequest) ([]Record, error) {
	f.t.Helper()
	q.Cursor = ""
	var out []Record
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			f.t.Fatalf("recall of %s does not end", ns)
		}
		p, err := f.recall(ns, q)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Data...)
		if !p.HasMore {
			if p.NextCursor != nil {
				f.t.Fatalf("a last page with a next cursor: %+v", p)
			}
			return out, nil
		}
		if p.NextCursor == nil || *p.NextCursor == "" {
			f.t.Fatalf("hasMore without a cursor: %+v", p)
		}
		q.Cursor = *p.NextCursor
	}
}

// forget erases root with the fixture's operator and a mandate over ns.
func (f *fixture) forget(ns, root string) (ErasureProof, error) {
	f.t.Helper()
	return f.svc.Forget(f.t.Context(), ForgetRequest{Mandate: f.mandate(ns, nil), RootID: root, Rationale: "the person asked for it"}, f.op())
}

// snapshot is what a store answers about a namespace now: every record known
// now and valid at any of the given instants (default: a wide spread),
// with the fields that may change (supersededAt, taint), in order. Two
// equal views mean nothing visible changed.
func (f *fixture) snapshot(ns string, validAts ...time.Time) string {
	f.t.Helper()
	if len(validAts) == 0 {
		for h := -72; h <= 72; h += 6 {
			validAts = append(validAts, t0.Add(time.Duration(h)*time.Hour))
		}
	}
	var b []byte
	for _, va := range validAts {
		recs, err := f.recallAll(ns, RecallRequest{ValidAt: ptr(va), Limit: 100})
		if err != nil {
			f.t.Fatalf("snapshot: %v", err)
		}
		for _, r := range recs {
			b = fmt.Appendf(b, "%s %s %s %v %v %v|", formatTime(va), r.ID, r.Body, optTime(r.SupersededAt), r.Taint != nil, len(r.Edges))
		}
	}
	return string(b)
}

// code returns err's memory problem code and reason ("" when err is not
// a *Error).
func code(err error) (string, string) {
	var me *Error
	if errors.As(err, &me) {
		return me.Code(), me.Reason()
	}
	return "", ""
}

// marshalTB is json.Marshal failing tb on error (for tests, benchmarks and
// fuzz targets alike).
func marshalTB(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
