package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// sseEvent is one dispatched event, as an EventSource sees it.
type sseEvent struct {
	ID    string // the last event ID buffer at dispatch
	Event string // "message" when the stream named none
	Data  string
}

// sseReader parses an event stream per the WHATWG "Interpreting an event
// stream" rules (LF, CR or CRLF line ends; one optional space after the
// colon; id, event, data, retry; comments; dispatch on a blank line when
// data was set).
type sseReader struct {
	br       *bufio.Reader
	lastID   string
	retry    string
	comments []string
}

func newSSEReader(r io.Reader) *sseReader { return &sseReader{br: bufio.NewReader(r)} }

// line reads one line without its end.
func (p *sseReader) line() (string, error) {
	var b strings.Builder
	for {
		c, err := p.br.ReadByte()
		if err != nil {
			if b.Len() > 0 && err == io.EOF {
				err = io.ErrUnexpectedEOF // a line the stream did not finish
			}
			return "", err
		}
		switch c {
		case '\n':
			return b.String(), nil
		case '\r':
			if n, err := p.br.Peek(1); err == nil && n[0] == '\n' {
				_, _ = p.br.ReadByte()
			}
			return b.String(), nil
		}
		b.WriteByte(c)
	}
}

// next returns the next dispatched event.
func (p *sseReader) next() (sseEvent, error) {
	var event string
	var data strings.Builder
	hasData := false
	for {
		line, err := p.line()
		if err != nil {
			return sseEvent{}, err
		}
		if line == "" {
			if !hasData {
				event = ""
				continue
			}
			ev := sseEvent{ID: p.lastID, Event: event, Data: strings.TrimSuffix(data.String(), "\n")}
			if ev.Event == "" {
				ev.Event = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			p.comments = append(p.comments, line)
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.Contains(value, "\x00") {
				p.lastID = value
			}
		case "event":
			event = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "retry":
			p.retry = value
		}
	}
}

// streamFixture is a record, a hub over it and a real HTTP server on
// 127.0.0.1 whose only handler is the audit stream.
type streamFixture struct {
	st   *memstore.Store
	log  *audit.Log
	hub  *audit.Hub
	srv  *httptest.Server
	logs *syncBuffer
	// ended receives what each stream handler returned, when it returns.
	ended chan error
	n     int // entries appended
}

func newStreamFixture(t testing.TB, hubOpts *audit.HubOptions, opts streamOptions, smallBuffers bool) *streamFixture {
	t.Helper()
	ctx := context.Background()
	f := &streamFixture{st: memstore.New(&memstore.Options{RetryRate: -1}), logs: &syncBuffer{}, ended: make(chan error, 64)}
	t.Cleanup(func() { f.st.Close() })
	l, err := audit.Open(ctx, f.st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)),
		&audit.Options{Origin: "countersign.example/audit"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f.log = l
	f.hub = audit.NewHub(l, hubOpts)
	t.Cleanup(func() { f.hub.Close() })
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var after uint64
		if v := r.URL.Query().Get("after"); v != "" {
			after, _ = strconv.ParseUint(v, 10, 64)
		}
		after, err := resumePoint(r.Header.Get(headerLastEventID), after)
		if err == nil {
			err = serveAuditStream(w, r, f.hub, after, opts)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
		f.ended <- err
	}))
	if smallBuffers {
		f.srv.Listener = smallBufListener{f.srv.Listener}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	if smallBuffers {
		// A client that stops reading fills the socket buffers in a few
		// kilobytes, not the megabytes loopback autotuning allows.
		tr := f.srv.Client().Transport.(*http.Transport)
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4096)
			}
			return c, err
		}
	}
	return f
}

// smallBufListener shrinks the send buffer of every accepted connection.
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// appendEntries appends n entries, up to 100 per transaction.
func (f *streamFixture) appendEntries(t testing.TB, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 100)
		err := f.log.Update(context.Background(), func(txn store.Txn) error {
			for i := range k {
				_, err := f.log.Append(txn, audit.Record{
					Type:  "gate.decision",
					Actor: audit.Actor{Kind: "system", ID: "test"},
					Data:  json.RawMessage(`{"i":"` + strconv.Itoa(f.n+i+1) + `","note":"<b>&</b>"}`),
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		f.n += k
		n -= k
	}
}

// open starts a stream request; header is name, value pairs.
func (f *streamFixture) open(t testing.TB, ctx context.Context, query string, header ...string) (*http.Response, *sseReader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", mediaEventStream)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, newSSEReader(resp.Body)
}

// expect reads events from..to and checks each is the entry with that seq,
// exactly as the log serves it.
func (f *streamFixture) expect(t testing.TB, r *sseReader, from, to uint64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		ev, err := r.next()
		if err != nil {
			t.Fatalf("waiting for seq %d: %v", seq, err)
		}
		if ev.ID != strconv.FormatUint(seq, 10) {
			t.Fatalf("event id %q, want %d", ev.ID, seq)
		}
		want, err := f.log.Get(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Event != want.Type {
			t.Errorf("seq %d: event %q, want %q", seq, ev.Event, want.Type)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // as writeJSON serves entries
		if err := enc.Encode(want); err != nil {
			t.Fatal(err)
		}
		if w := strings.TrimSuffix(buf.String(), "\n"); ev.Data != w {
			t.Fatalf("seq %d: data\n%s\nwant\n%s", seq, ev.Data, w)
		}
	}
}

// The acceptance scenario: a client reads 100 entries and disconnects; 50
// more are appended; it reconnects with Last-Event-ID and receives exactly
// those 50 in order, then live entries.
func TestAuditStreamResume(t *testing.T) {
	f := newStreamFixture(t, nil, streamOptions{}, false)
	f.appendEntries(t, 100)

	ctx, disconnect := context.WithCancel(t.Context())
	resp, r := f.open(t, ctx, "?after=0")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	f.expect(t, r, 1, 100)
	if r.retry != "2000" {
		t.Errorf("retry %q, want 2000", r.retry)
	}
	disconnect()
	resp.Body.Close()
	if err := <-f.ended; err != nil {
		t.Fatalf("stream handler returned %v", err)
	}

	f.appendEntries(t, 50)
	// An EventSource reconnects to the URL it was opened with: after=0
	// still, but Last-Event-ID wins.
	_, r = f.open(t, t.Context(), "?after=0", headerLastEventID, r.lastID)
	f.expect(t, r, 101, 150)
	f.appendEntries(t, 7)
	f.expect(t, r, 151, 157)

	if s := f.hub.Stats(); s.Dropped != 0 || s.Subscribers != 1 {
		t.Errorf("hub stats %+v, want one subscriber, none dropped", s)
	}
	if !strings.Contains(f.logs.String(), `"msg":"audit stream ended"`) {
		t.Errorf("the first stream's end was not logged at Debug:\n%s", f.logs.String())
	}
}

// A client that never reads its body is dropped by the hub once it is a
// buffer behind; the hub then holds nothing for it, the blocked write is
// cut, and the client resumes with Last-Event-ID with nothing lost.
func TestAuditStreamSlowReader(t *testing.T) {
	const bufSize = 16
	f := newStreamFixture(t, &audit.HubOptions{BufferSize: bufSize}, streamOptions{}, true)
	f.appendEntries(t, 10)
	resp, r := f.open(t, t.Context(), "") // headers only; the body is left unread
	// Only a subscriber reading live entries is dropped when it falls a
	// buffer behind; one still reading its backlog holds nothing in the
	// hub, and one that overflowed before going live reads its backlog
	// again. So the flood starts once the subscriber is live: its first
	// ten entries fit in the socket buffers.
	for start := time.Now(); f.hub.Stats().Live == 0; runtime.Gosched() {
		if time.Since(start) > time.Minute {
			t.Fatalf("the subscriber never read live entries: %+v", f.hub.Stats())
		}
	}

	const limit = 100_000
	for f.hub.Stats().Dropped == 0 {
		if f.n >= limit {
			t.Fatalf("appended %d entries to a client that reads nothing, and the hub still holds it: %+v", f.n, f.hub.Stats())
		}
		f.appendEntries(t, 50)
		if s := f.hub.Stats(); s.Buffered > bufSize {
			t.Fatalf("hub stats %+v: more than %d entries buffered for one client", s, bufSize)
		}
	}
	// The drop cut the write the handler was blocked in.
	if err := <-f.ended; err != nil {
		t.Fatalf("stream handler returned %v", err)
	}
	if s := f.hub.Stats(); s.Subscribers != 0 || s.Buffered != 0 || s.Dropped != 1 {
		t.Errorf("hub stats %+v after the drop, want nothing held", s)
	}
	if !strings.Contains(f.logs.String(), "subscriber too slow") {
		t.Errorf("the drop was not logged:\n%s", f.logs.String())
	}

	// What reached the client is a gapless prefix, then the stream ends.
	var last uint64
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		seq, _ := strconv.ParseUint(ev.ID, 10, 64)
		if seq != last+1 {
			t.Fatalf("after seq %d the client got %q", last, ev.ID)
		}
		last = seq
	}
	resp.Body.Close()
	if last >= uint64(f.n) {
		t.Fatalf("the client got all %d entries; it was not cut off", f.n)
	}
	t.Logf("cut off after %d of %d entries", last, f.n)

	// Resume as a real client does: with Last-Event-ID, and again if this
	// stream too is cut (on a loaded machine even an attentive reader can
	// fall a small buffer behind); every entry arrives once, in order.
	_, r = f.open(t, t.Context(), "", headerLastEventID, strconv.FormatUint(last, 10))
	for seq, reconnects := last+1, 0; seq <= uint64(f.n); {
		ev, err := r.next()
		if err != nil {
			if reconnects++; reconnects > 20 {
				t.Fatalf("resumed stream, waiting for %d: %v (after %d reconnects)", seq, err, reconnects)
			}
			_, r = f.open(t, t.Context(), "", headerLastEventID, strconv.FormatUint(seq-1, 10))
			continue
		}
		if ev.ID != strconv.FormatUint(seq, 10) {
			t.Fatalf("resumed stream: id %q, want %d", ev.ID, seq)
		}
		seq++
	}
}

// Closing the hub (what shutdown does) ends every stream cleanly: the
// client sees the end of the body, not a broken connection.
func TestAuditStreamHubClose(t *testing.T) {
	f := newStreamFixture(t, nil, streamOptions{}, false)
	f.appendEntries(t, 3)
	_, r := f.open(t, t.Context(), "")
	f.expect(t, r, 1, 3)
	f.hub.Close()
	if _, err := r.next(); err != io.EOF {
		t.Errorf("after Hub.Close the client read %v, want io.EOF", err)
	}
	if err := <-f.ended; err != nil {
		t.Errorf("stream handler returned %v", err)
	}
}

// A client that goes away ends its stream and its subscription.
func TestAuditStreamClientGone(t *testing.T) {
	f := newStreamFixture(t, nil, streamOptions{}, false)
	f.appendEntries(t, 2)
	ctx, cancel := context.WithCancel(t.Context())
	_, r := f.open(t, ctx, "?after=1")
	f.expect(t, r, 2, 2)
	cancel()
	if err := <-f.ended; err != nil {
		t.Errorf("stream handler returned %v", err)
	}
	if s := f.hub.Stats(); s.Subscribers != 0 {
		t.Errorf("hub stats %+v, want the subscription gone", s)
	}
}

// fakeStreamWriter is a ResponseWriter that records what a handler writes
// and flushes, for tests that run in a synctest bubble (no network there).
type fakeStreamWriter struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	flushed bytes.Buffer // what was written and then flushed
	pending bytes.Buffer
	flushes int // flushes that sent something
}

func (f *fakeStreamWriter) Header() http.Header { return f.header }
func (f *fakeStreamWriter) WriteHeader(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

func (f *fakeStreamWriter) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pending.Write(b)
}

func (f *fakeStreamWriter) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending.Len() > 0 {
		f.flushes++
	}
	_, _ = f.pending.WriteTo(&f.flushed)
}

func (f *fakeStreamWriter) Flushes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushes
}

func (f *fakeStreamWriter) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushed.String()
}

// bubbleStream runs serveAuditStream on a fake writer inside the calling
// synctest bubble. It returns the writer, a func that appends one entry,
// and a func that ends the request and checks the handler returned nil.
func bubbleStream(t *testing.T, opts streamOptions) (w *fakeStreamWriter, appendEntry func(), stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	st := memstore.New(nil)
	t.Cleanup(func() { st.Close() })
	l, err := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	hub := audit.NewHub(l, nil)
	t.Cleanup(func() { hub.Close() })

	w = &fakeStreamWriter{header: make(http.Header)}
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/audit/stream", nil)
	done := make(chan error)
	opts.Logger = slog.New(slog.DiscardHandler)
	go func() { done <- serveAuditStream(w, r, hub, 0, opts) }()
	appendEntry = func() {
		err := l.Update(ctx, func(txn store.Txn) error {
			_, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "system", ID: "t"}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serveAuditStream returned %v", err)
		}
	}
	synctest.Wait()
	return w, appendEntry, stop
}

// An idle stream sends a comment every heartbeat interval, and an entry
// after a quiet spell is flushed at once; timed with the synctest clock.
func TestAuditStreamHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, appendEntry, stop := bubbleStream(t, streamOptions{Heartbeat: 15 * time.Second})
		defer stop()
		if got := w.String(); got != "retry: 2000\n\n" {
			t.Fatalf("stream starts with %q", got)
		}
		time.Sleep(15*time.Second - time.Nanosecond) // fake time
		synctest.Wait()
		if strings.Contains(w.String(), "heartbeat") {
			t.Fatal("heartbeat before the interval")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got := strings.Count(w.String(), ": heartbeat\n\n"); got != 1 {
			t.Fatalf("%d heartbeats after 15 s, want 1:\n%s", got, w.String())
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if got := strings.Count(w.String(), ": heartbeat\n\n"); got != 2 {
			t.Fatalf("%d heartbeats after 30 s, want 2", got)
		}
		appendEntry()
		synctest.Wait()
		if !strings.Contains(w.String(), "id: 1\nevent: agent.created\ndata: {\"seq\":1,") {
			t.Fatalf("the entry was not flushed:\n%s", w.String())
		}
	})
}

// Entries that follow one another within the flush interval go out
// together when it has passed; with a negative interval, each at once.
func TestAuditStreamFlushInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, appendEntry, stop := bubbleStream(t, streamOptions{FlushInterval: 10 * time.Millisecond})
		defer stop()
		appendEntry()
		synctest.Wait()
		if !strings.Contains(w.String(), "id: 1\n") || w.Flushes() != 2 {
			t.Fatalf("after a quiet spell the entry waited (%d flushes):\n%s", w.Flushes(), w.String())
		}
		appendEntry()
		appendEntry()
		synctest.Wait()
		if strings.Contains(w.String(), "id: 2\n") {
			t.Fatal("an entry right after another was not held back")
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if !strings.Contains(w.String(), "id: 3\n") || w.Flushes() != 3 {
			t.Fatalf("held entries: %d flushes, want 3 (2 and 3 together):\n%s", w.Flushes(), w.String())
		}
		time.Sleep(time.Second)
		appendEntry()
		synctest.Wait()
		if !strings.Contains(w.String(), "id: 4\n") {
			t.Fatal("after a quiet spell the entry waited")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		w, appendEntry, stop := bubbleStream(t, streamOptions{FlushInterval: -1})
		defer stop()
		for seq := 1; seq <= 3; seq++ {
			appendEntry()
			synctest.Wait()
			if !strings.Contains(w.String(), "id: "+strconv.Itoa(seq)+"\n") || w.Flushes() != seq+1 {
				t.Fatalf("FlushInterval -1: entry %d not sent at once (%d flushes)", seq, w.Flushes())
			}
		}
	})
}

// streamTestParams mirror the contract's AuditStreamParams.
type streamTestParams struct {
	After       uint64 `query:"after" doc:"Start after this seq."`
	LastEventID string `header:"Last-Event-ID" doc:"Resume after this event id."`
}

// Through the real pipeline (credential, parameters, problems), a bad
// resume point is a problem before the stream starts, and a stream runs
// through the server's response-writer wrapper.
func TestAuditStreamProblems(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	l, err := audit.Open(t.Context(), st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, nil)
	defer hub.Close()

	def := product.Definition()
	def.Operations = append(def.Operations, testOperations()...)
	def.Operations = append(def.Operations, contract.Operation{
		ID: "test.audit_stream", Method: "GET", Path: "/test/audit/stream", Summary: "Stream the record",
		Credential: contract.CredentialAgent, Params: reflect.TypeFor[streamTestParams](),
		Responses: []contract.Response{{Status: 200, Description: "An event stream.",
			Content: []contract.Content{{MediaType: mediaEventStream}}}},
		Problems: []string{audit.CodeOutOfRange, contract.CodeUnavailable},
	})
	m, err := contract.Build(def)
	if err != nil {
		t.Fatal(err)
	}
	eps := testEndpoints()
	eps["test.audit_stream"] = rawEndpoint(func(w http.ResponseWriter, r *http.Request, p *streamTestParams) error {
		after, err := resumePoint(p.LastEventID, p.After)
		if err != nil {
			return err
		}
		return serveAuditStream(w, r, hub, after, streamOptions{})
	})
	h, err := newServer(Config{BaseURL: testBase, Sandbox: true, Model: m, Audit: &fakeAudit{},
		Logger: slog.New(slog.DiscardHandler)}, eps)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ContractChecked(t, h))
	defer srv.Close()

	err = l.Update(t.Context(), func(txn store.Txn) error {
		_, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "system", ID: "t"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	get := func(query, lastEventID string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/test/audit/stream"+query, nil)
		if lastEventID != "" {
			req.Header.Set(headerLastEventID, lastEventID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	problem := func(resp *http.Response) contract.Problem {
		t.Helper()
		var p contract.Problem
		if ct := resp.Header.Get("Content-Type"); ct != contract.MediaProblem {
			t.Fatalf("Content-Type %q, want a problem", ct)
		}
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}

	for _, c := range []struct {
		name, query, lastEventID string
		status                   int
		code, field              string
	}{
		{"last-event-id not a number", "", "abc", 400, contract.CodeRequestValidation, "Last-Event-ID"},
		{"last-event-id negative", "", "-1", 400, contract.CodeRequestValidation, "Last-Event-ID"},
		{"last-event-id too large", "", "18446744073709551616", 400, contract.CodeRequestValidation, "Last-Event-ID"},
		{"after not a number", "?after=x", "", 400, contract.CodeRequestValidation, "after"},
		{"after past the head", "?after=2", "", 400, audit.CodeOutOfRange, ""},
		{"last-event-id past the head", "?after=0", "9", 400, audit.CodeOutOfRange, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := get(c.query, c.lastEventID)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			p := problem(resp)
			if p.Code != c.code {
				t.Errorf("code %q, want %q", p.Code, c.code)
			}
			if c.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != c.field) {
				t.Errorf("errors %+v, want one for %s", p.Errors, c.field)
			}
		})
	}

	t.Run("stream through the pipeline", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/test/audit/stream", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get(contract.HeaderRequestID) == "" {
			t.Fatalf("status %d, request id %q", resp.StatusCode, resp.Header.Get(contract.HeaderRequestID))
		}
		ev, err := newSSEReader(resp.Body).next()
		if err != nil || ev.ID != "1" || ev.Event != "agent.created" {
			t.Fatalf("first event %+v, %v", ev, err)
		}
	})

	t.Run("hub closed", func(t *testing.T) {
		hub.Close()
		resp := get("", "")
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("status %d, want 503", resp.StatusCode)
		}
		if p := problem(resp); p.Code != contract.CodeUnavailable {
			t.Errorf("code %q, want unavailable", p.Code)
		}
	})
}

// A server built without a hub answers audit.stream with an error rather
// than a stream that never sends anything.
func TestAuditStreamNoHub(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/audit/stream", nil)
	if err := serveAuditStream(httptest.NewRecorder(), r, nil, 0, streamOptions{}); !errors.Is(err, errNoHub) {
		t.Errorf("serveAuditStream without a hub: %v", err)
	}
}

func TestResumePoint(t *testing.T) {
	for _, c := range []struct {
		header string
		after  uint64
		want   uint64
		ok     bool
	}{
		{"", 0, 0, true},
		{"", 7, 7, true},
		{"5", 7, 5, true}, // the header wins, even when lower
		{"12", 7, 12, true},
		{"0", 7, 0, true},
		{"18446744073709551615", 0, 1<<64 - 1, true},
		{"007", 0, 7, true},
		{"18446744073709551616", 0, 0, false},
		{"-1", 0, 0, false},
		{"+1", 0, 0, false},
		{"1.0", 0, 0, false},
		{"0x10", 0, 0, false},
		{"1_000", 0, 0, false},
		{" 1", 0, 0, false},
		{"abc", 3, 0, false},
	} {
		got, err := resumePoint(c.header, c.after)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("resumePoint(%q, %d) = %d, %v; want %d, ok %v", c.header, c.after, got, err, c.want, c.ok)
		}
		var verr *contract.ValidationError
		if err != nil && (!errors.As(err, &verr) || verr.Errors[0].Field != "Last-Event-ID") {
			t.Errorf("resumePoint(%q): %v is not a validation error on Last-Event-ID", c.header, err)
		}
	}
}

// FuzzResumePoint: any header either parses to the seq it spells (digits
// only) or is refused as a validation error.
func FuzzResumePoint(f *testing.F) {
	for _, s := range []string{"", "0", "42", "18446744073709551615", "18446744073709551616", "-1", "abc", "0x1", "1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := resumePoint(s, 99)
		if s == "" {
			if err != nil || got != 99 {
				t.Fatalf("empty header: %d, %v", got, err)
			}
			return
		}
		if err != nil {
			var verr *contract.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("%q: %v is not a validation error", s, err)
			}
			return
		}
		if strings.Trim(s, "0123456789") != "" {
			t.Fatalf("%q accepted as %d", s, got)
		}
		if strings.TrimLeft(s, "0") != strings.TrimLeft(strconv.FormatUint(got, 10), "0") {
			t.Fatalf("%q parsed as %d", s, got)
		}
	})
}

// FuzzStreamFrame: whatever an entry's type and data hold, its frame is
// parsed by an EventSource as exactly one event with the entry's id and
// JSON; a type that could forge fields is left out rather than sent.
func FuzzStreamFrame(f *testing.F) {
	f.Add(uint64(1), "payment.settled", `{"a":"b"}`)
	f.Add(uint64(42), "x\n\ndata: forged\n\nid: 99", `{"s":"line\nbreak\r\u2028"}`)
	f.Add(uint64(7), "evt\rid: 1", `{}`)
	f.Add(uint64(1<<53), " leading space", `{"<b>":"&"}`)
	f.Fuzz(func(t *testing.T, seq uint64, typ, data string) {
		e := audit.Entry{Seq: seq, Type: typ, Actor: audit.Actor{Kind: "system", ID: "f"}}
		if json.Valid([]byte(data)) {
			e.Data = json.RawMessage(data)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(e); err != nil {
			t.Skip() // not an entry the log would hold
		}
		js := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		frame := appendFrame(nil, &audit.HubEntry{Entry: e, JSON: js})

		r := newSSEReader(bytes.NewReader(frame))
		ev, err := r.next()
		if err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		if ev.ID != strconv.FormatUint(seq, 10) || ev.Data != string(js) {
			t.Fatalf("frame %q parsed as %+v", frame, ev)
		}
		wantEvent := typ
		if strings.ContainsAny(typ, "\r\n") {
			wantEvent = ""
		}
		if wantEvent == "" {
			wantEvent = "message"
		}
		if ev.Event != wantEvent {
			t.Fatalf("frame %q: event %q, want %q", frame, ev.Event, wantEvent)
		}
		if ev, err := r.next(); err != io.EOF {
			t.Fatalf("frame %q holds more: %+v, %v", frame, ev, err)
		}
	})
}

// The load measurement of the live stream, opt-in because it takes the
// machine for tens of seconds:
//
//	go test -run TestSSELoad -sse.load -v ./httpserver/
//
// It starts a real server on 127.0.0.1, connects -sse.subs clients, appends
// -sse.entries entries (one per transaction, as fast as the log takes them
// or at -sse.rate per second) and checks that every client receives every
// entry exactly once and in order, reconnecting with Last-Event-ID when
// the hub drops it. It prints the delivery lag (from just before the
// appending transaction starts to the client reading the event's id line)
// at p50/p99/max and the heap in use; clients run in the same process, so
// their buffers are part of the heap figure.
var (
	sseLoad        = flag.Bool("sse.load", false, "run the SSE load measurement (TestSSELoad)")
	sseLoadSubs    = flag.Int("sse.subs", 1000, "TestSSELoad: concurrent stream clients")
	sseLoadEntries = flag.Int("sse.entries", 10000, "TestSSELoad: entries appended in the burst")
	sseLoadRate    = flag.Int("sse.rate", 0, "TestSSELoad: entries per second; 0 appends as fast as the log allows")
	sseLoadBatch   = flag.Int("sse.batch", 1, "TestSSELoad: entries per transaction")
	sseLoadStore   = flag.String("sse.store", "mem", "TestSSELoad: mem or pebble")
	sseLoadBuffer  = flag.Int("sse.buffer", 0, "TestSSELoad: hub buffer per subscriber; 0 is the default")

	sseLoadHeapProfile = flag.String("sse.heapprofile", "", "TestSSELoad: write a heap profile here when the burst has been appended")
)

// lagHistogram counts lags in 0.1 ms buckets below 1 s and 10 ms buckets up
// to 10 minutes, safely for concurrent use.
type lagHistogram struct {
	fine   [10_000]atomic.Uint64 // 0.1 ms each, < 1 s
	coarse [60_000]atomic.Uint64 // 10 ms each, from 1 s
	max    atomic.Int64
	n      atomic.Uint64
}

func (h *lagHistogram) add(d time.Duration) {
	h.n.Add(1)
	for {
		m := h.max.Load()
		if int64(d) <= m || h.max.CompareAndSwap(m, int64(d)) {
			break
		}
	}
	switch {
	case d < 0:
		h.fine[0].Add(1)
	case d < time.Second:
		h.fine[d/(100*time.Microsecond)].Add(1)
	default:
		h.coarse[min(int((d-time.Second)/(10*time.Millisecond)), len(h.coarse)-1)].Add(1)
	}
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *lagHistogram) quantile(q float64) time.Duration {
	want := uint64(q * float64(h.n.Load()))
	var seen uint64
	for i := range h.fine {
		if seen += h.fine[i].Load(); seen > want {
			return time.Duration(i+1) * 100 * time.Microsecond
		}
	}
	for i := range h.coarse {
		if seen += h.coarse[i].Load(); seen > want {
			return time.Second + time.Duration(i+1)*10*time.Millisecond
		}
	}
	return time.Duration(h.max.Load())
}

func TestSSELoad(t *testing.T) {
	if !*sseLoad {
		t.Skip("opt-in: go test -run TestSSELoad -sse.load -v ./httpserver/")
	}
	subs, entries, batch := *sseLoadSubs, *sseLoadEntries, max(*sseLoadBatch, 1)
	ctx := t.Context()

	var st store.Store
	switch *sseLoadStore {
	case "mem":
		m := memstore.New(&memstore.Options{RetryRate: -1})
		defer m.Close()
		st = m
	case "pebble":
		p, err := pebblestore.Open(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		st = p
	default:
		t.Fatalf("-sse.store %q: want mem or pebble", *sseLoadStore)
	}
	l, err := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hub := audit.NewHub(l, &audit.HubOptions{BufferSize: *sseLoadBuffer})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after, err := resumePoint(r.Header.Get(headerLastEventID), 0)
		if err == nil {
			err = serveAuditStream(w, r, hub, after, streamOptions{Logger: slog.New(slog.DiscardHandler)})
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	srv.Start() // on 127.0.0.1
	defer srv.Close()
	defer hub.Close() // runs first: ends the streams so srv.Close can return
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: subs, DisableCompression: true}}

	appendAt := make([]atomic.Int64, entries+1) // unix ns, by seq
	var hist lagHistogram
	var reconnects, bytesRead atomic.Int64
	var connected, finished sync.WaitGroup
	connected.Add(subs)
	finished.Add(subs)
	errs := make(chan error, subs)
	for range subs {
		go func() {
			defer finished.Done()
			var last uint64
			first := true
			for last < uint64(entries) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				if last > 0 {
					req.Header.Set(headerLastEventID, strconv.FormatUint(last, 10))
				}
				resp, err := client.Do(req)
				if first {
					connected.Done()
					first = false
				}
				if err != nil {
					errs <- err
					return
				}
				br := bufio.NewReaderSize(resp.Body, 8<<10)
				for last < uint64(entries) {
					line, err := br.ReadSlice('\n')
					bytesRead.Add(int64(len(line)))
					if err != nil {
						break // dropped as slow, or the server went away: resume
					}
					if !bytes.HasPrefix(line, []byte("id: ")) {
						continue
					}
					now := time.Now().UnixNano()
					seq, err := strconv.ParseUint(string(line[4:len(line)-1]), 10, 64)
					if err != nil || seq != last+1 {
						errs <- fmt.Errorf("after seq %d got id line %q", last, line)
						resp.Body.Close()
						return
					}
					hist.add(time.Duration(now - appendAt[seq].Load()))
					last = seq
				}
				resp.Body.Close()
				if last < uint64(entries) {
					reconnects.Add(1)
				}
			}
		}()
	}
	connected.Wait()
	for hub.Stats().Subscribers < subs {
		runtime.Gosched() // the last handlers are still subscribing
	}

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	baseHeap := ms.HeapInuse
	var peakHeap, peakBuffered atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peakHeap.Load() {
				peakHeap.Store(ms.HeapInuse)
			}
			if b := uint64(hub.Stats().Buffered); b > peakBuffered.Load() {
				peakBuffered.Store(b)
			}
		}
	}()

	start := time.Now()
	for seq := 1; seq <= entries; seq += batch {
		k := min(batch, entries-seq+1)
		if *sseLoadRate > 0 {
			time.Sleep(time.Until(start.Add(time.Duration(seq-1) * time.Second / time.Duration(*sseLoadRate))))
		}
		now := time.Now().UnixNano()
		for i := range k {
			appendAt[seq+i].Store(now)
		}
		err := l.Update(ctx, func(txn store.Txn) error {
			for i := range k {
				_, err := l.Append(txn, audit.Record{
					Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_01JLOADTEST"},
					RequestID: "req_01JLOADTEST" + strconv.Itoa(seq+i),
					Data:      json.RawMessage(`{"outcome":"allow","amount":{"currency":"USD","minor":"1250"},"seq":"` + strconv.Itoa(seq+i) + `"}`),
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	appended := time.Since(start)
	if *sseLoadHeapProfile != "" {
		f, err := os.Create(*sseLoadHeapProfile)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	finished.Wait()
	delivered := time.Since(start)
	close(stopSampling)
	<-sampled
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	hs := hub.Stats()
	e, _ := l.Get(ctx, 1)
	frame := appendFrame(nil, &audit.HubEntry{Entry: e, JSON: must(json.Marshal(e))})
	t.Logf("%d subscribers, %d entries (%d-byte frames, %d per txn, store %s, rate %s, hub buffer %s), GOMAXPROCS %d",
		subs, entries, len(frame), batch, *sseLoadStore, rateString(*sseLoadRate), bufString(*sseLoadBuffer), runtime.GOMAXPROCS(0))
	t.Logf("appended in %v (%.0f entries/s); every client had every entry after %v", appended.Round(time.Millisecond),
		float64(entries)/appended.Seconds(), delivered.Round(time.Millisecond))
	t.Logf("delivered %d events (%.1f MB) to clients: %.0f events/s", hist.n.Load(), float64(bytesRead.Load())/1e6,
		float64(hist.n.Load())/delivered.Seconds())
	t.Logf("lag p50 %v  p90 %v  p99 %v  max %v", hist.quantile(0.50), hist.quantile(0.90), hist.quantile(0.99),
		time.Duration(hist.max.Load()).Round(100*time.Microsecond))
	t.Logf("slow drops %d, reconnects %d; heap in use %.1f MB with %d idle streams, peak %.1f MB (+%.1f MB); peak hub buffer %d entries",
		hs.Dropped, reconnects.Load(), float64(baseHeap)/1e6, subs, float64(peakHeap.Load())/1e6,
		(float64(peakHeap.Load())-float64(baseHeap))/1e6, peakBuffered.Load())
	if n := hist.n.Load(); n != uint64(subs*entries) {
		t.Errorf("delivered %d events, want %d", n, subs*entries)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func rateString(r int) string {
	if r == 0 {
		return "unpaced"
	}
	return strconv.Itoa(r) + "/s"
}

func bufString(b int) string {
	if b == 0 {
		return strconv.Itoa(audit.DefaultHubBufferSize)
	}
	return strconv.Itoa(b)
}
