package httpserver

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
)

// The live audit stream (audit.stream) is a Server-Sent Events response
// (WHATWG HTML, "Server-sent events") over an [audit.Hub]:
//
//	retry: 2000
//
//	id: 42
//	event: payment.settled
//	data: {"seq":42,"at":"...","type":"payment.settled",...,"sig":"..."}
//
//	: heartbeat
//
// One event per entry, in seq order: id is the seq, event the entry type,
// data the whole signed entry as JSON on one line (byte for byte what
// audit.list serves), so a client verifies what it receives exactly as it
// verifies a page. An entry type containing a line break (which nothing in
// this release appends) is sent without its event line, as a "message"
// event, rather than let it forge fields; data still carries the type.
//
// The stream starts after ?after= (default 0: the whole record) or, taking
// precedence, after the Last-Event-ID an EventSource sends when it
// reconnects, so a client that was cut off resumes with no gap and no
// duplicate. The server ends the stream when the hub drops the client for
// falling more than the hub's buffer behind, when the client goes away,
// and on shutdown (the hub is closed): in every case the client reconnects
// with Last-Event-ID after the retry delay. A comment line is sent every
// heartbeat interval on an idle stream so proxies keep it open and a dead
// peer is noticed.

// Defaults of [streamOptions].
const (
	defaultStreamHeartbeat     = 15 * time.Second
	defaultStreamWriteTimeout  = 30 * time.Second
	defaultStreamFlushInterval = 10 * time.Millisecond
)

const (
	// streamRetry is the reconnection delay the stream asks clients for.
	streamRetry = "retry: 2000\n\n"
	// streamFlushBytes is how many bytes of frames are written per flush:
	// a burst goes out in few large writes, a trickle frame by frame.
	streamFlushBytes = 16 << 10
	// streamIdleBytes is the largest frame buffer an idle stream keeps.
	streamIdleBytes = 4 << 10
	// headerLastEventID is the header an EventSource resumes with.
	headerLastEventID = "Last-Event-ID"
	// mediaEventStream is the media type of an SSE response.
	mediaEventStream = "text/event-stream"
)

// errNoHub answers audit.stream on a server configured without a hub; it
// is a 500 because the operation is in the contract but not served.
var errNoHub = errors.New("httpserver: audit.stream: no audit hub is configured")

// errStreamClosed answers a stream request that arrives during shutdown.
var errStreamClosed = errcode.New(contract.CodeUnavailable,
	"httpserver: the record stream is closed; the server is shutting down")

// streamOptions configures serveAuditStream. The zero value gives the
// defaults.
type streamOptions struct {
	// Heartbeat is the interval of ": heartbeat" comments on an idle
	// stream. Zero means defaultStreamHeartbeat (15 s).
	Heartbeat time.Duration
	// WriteTimeout bounds each write of frames to the client; a client
	// that takes none of a batch within it is disconnected (a stalled
	// client reading its backlog is not a slow live subscriber, so the
	// hub does not drop it, and this is what frees its connection). Zero
	// means defaultStreamWriteTimeout (30 s).
	WriteTimeout time.Duration
	// FlushInterval is the least time between two writes of frames to
	// one client. A frame that follows a quiet spell goes out at once; one
	// that follows another within the interval waits for the rest of it
	// and goes out with whatever else arrived, so a burst costs a write
	// per client per interval instead of a write per client per entry. It
	// adds at most the interval to a frame's delivery. Zero means
	// defaultStreamFlushInterval (10 ms); negative means no holding back.
	FlushInterval time.Duration
	// Logger receives streams ended by the server's own faults at Error
	// and other endings at Debug. Default slog.Default().
	Logger *slog.Logger
}

// resumePoint returns the seq after which a stream starts: the
// Last-Event-ID a reconnecting EventSource sends, when there is one, else
// the after query parameter. An EventSource reconnects to the URL it was
// opened with, so after still names the first start; the header is the
// newer position. A Last-Event-ID that is not a decimal seq is refused
// rather than ignored: silently restarting from after would replay or skip
// entries.
func resumePoint(lastEventID string, after uint64) (uint64, error) {
	if lastEventID == "" {
		return after, nil
	}
	seq, err := strconv.ParseUint(lastEventID, 10, 64)
	if err != nil {
		return 0, &contract.ValidationError{Errors: []contract.FieldError{{
			Field: headerLastEventID, Rule: "type",
			Message: "must be the id of an event of this stream: a non-negative integer"}}}
	}
	return seq, nil
}

// serveAuditStream answers audit.stream: it subscribes to hub after seq
// after and streams entries until the client leaves, the hub drops it, or
// the hub closes. It returns an error only before the response starts (no
// hub, after past the newest entry, hub closed); once the stream runs it
// logs how it ended and returns nil, because a problem can no longer be
// sent.
func serveAuditStream(w http.ResponseWriter, r *http.Request, hub *audit.Hub, after uint64, opts streamOptions) error {
	if hub == nil {
		return errNoHub
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultStreamHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultStreamWriteTimeout
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = defaultStreamFlushInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx := r.Context()
	sub, err := hub.Subscribe(ctx, after)
	if errors.Is(err, audit.ErrHubClosed) {
		return errStreamClosed
	}
	if err != nil {
		return err
	}
	defer sub.Close()

	h := w.Header()
	h.Set("Content-Type", mediaEventStream)
	h.Set("Cache-Control", "no-store")
	// Tells nginx-style proxies not to buffer the stream.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	st := &stream{w: w, rc: http.NewResponseController(w), timeout: opts.WriteTimeout, interval: opts.FlushInterval}
	unwatch := st.cutWhenSlow(sub)
	defer unwatch()

	reason := st.run(r, sub, opts.Heartbeat)
	if err := sub.Err(); errors.Is(err, audit.ErrSlowSubscriber) {
		reason = err // rather than the write it cut short
	}
	attrs := []slog.Attr{
		slog.String("requestId", RequestID(ctx)),
		slog.Uint64("after", after),
		slog.Uint64("lastSeq", st.last),
		slog.Int("events", st.events),
		slog.String("end", reason.Error()),
	}
	if expectedStreamEnd(reason) {
		opts.Logger.LogAttrs(ctx, slog.LevelDebug, "audit stream ended", attrs...)
	} else {
		// A store failure or a damaged entry (audit.ErrTampered).
		opts.Logger.LogAttrs(ctx, slog.LevelError, "audit stream ended by a server fault", attrs...)
	}
	return nil
}

// expectedStreamEnd reports whether a stream ended for a reason that is
// part of normal operation rather than a fault of ours.
func expectedStreamEnd(err error) bool {
	var we *streamWriteError
	return errors.Is(err, audit.ErrSlowSubscriber) || errors.Is(err, audit.ErrHubClosed) ||
		errors.Is(err, errClientGone) || errors.As(err, &we)
}

// errClientGone ends a stream whose request context is done: the client
// disconnected or the server is closing connections.
var errClientGone = errors.New("httpserver: audit stream: client gone")

// streamWriteError is a failed write to the client: it went away, stopped
// reading, or was cut off as slow.
type streamWriteError struct{ err error }

func (e *streamWriteError) Error() string { return "httpserver: audit stream: write: " + e.err.Error() }
func (e *streamWriteError) Unwrap() error { return e.err }

// stream writes SSE frames to one client.
type stream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	interval time.Duration // least time between two sends of frames
	sent     time.Time     // when frames were last sent
	buf      []byte
	last     uint64 // seq of the newest entry sent
	events   int
}

// run streams until the subscription or the client ends, and returns why.
func (st *stream) run(r *http.Request, sub *audit.HubSub, heartbeat time.Duration) error {
	ctx := r.Context()
	st.buf = append(st.buf[:0], streamRetry...)
	if err := st.send(); err != nil {
		return err
	}
	st.buf = st.buf[:0]
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	var hold *time.Timer
	defer func() {
		if hold != nil {
			hold.Stop()
		}
	}()
	for {
		var end error
		for len(st.buf) < streamFlushBytes {
			e, ok, err := sub.TryNext(ctx)
			if err != nil {
				end = err
				break
			}
			if !ok {
				break
			}
			st.buf = appendFrame(st.buf, &e)
			st.last = e.Entry.Seq
			st.events++
		}
		if len(st.buf) > 0 {
			if end == nil && len(st.buf) < streamFlushBytes {
				// Entries are arriving faster than the flush interval:
				// hold these frames back a little and send them with the
				// next ones, rather than pay a write per entry per client.
				if wait := time.Until(st.sent.Add(st.interval)); wait > 0 {
					if hold == nil {
						hold = time.NewTimer(wait)
					} else {
						hold.Reset(wait)
					}
					select {
					case <-hold.C:
					case <-ctx.Done():
						return errClientGone
					}
					continue
				}
			}
			// Frames read before an ending are complete and in order:
			// send them, so the client resumes after them.
			if err := st.send(); err != nil && end == nil {
				end = err
			}
			st.buf = st.buf[:0]
			st.sent = time.Now()
			if end == nil {
				continue
			}
		}
		if end != nil {
			if ctx.Err() != nil {
				return errClientGone
			}
			return end
		}
		select {
		case <-sub.Ready():
		case <-tick.C:
			if cap(st.buf) > streamIdleBytes && time.Since(st.sent) >= heartbeat {
				// Idle for a whole interval after a burst: a thousand
				// idle streams should not each keep a burst-sized
				// buffer. (Dropping it on every pause instead would
				// reallocate it on every flush interval of a burst.)
				st.buf = nil
			}
			st.buf = append(st.buf, ": heartbeat\n\n"...)
			err := st.send()
			st.buf = st.buf[:0]
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return errClientGone
		}
	}
}

// send writes st.buf and flushes it, within the write timeout.
func (st *stream) send() error {
	// A writer without deadlines (a test recorder) simply has none.
	_ = st.rc.SetWriteDeadline(time.Now().Add(st.timeout))
	if _, err := st.w.Write(st.buf); err != nil {
		return &streamWriteError{err}
	}
	if err := st.rc.Flush(); err != nil {
		return &streamWriteError{err}
	}
	return nil
}

// cutWhenSlow makes a write blocked on a client that stopped reading fail
// as soon as the hub drops that client, rather than when the write timeout
// expires: the hub has already let go of its buffer, and this frees the
// connection. The returned func stops the watch and waits for it, so that
// nothing touches the ResponseWriter after the handler returns; a
// connection cut this way is not reused.
func (st *stream) cutWhenSlow(sub *audit.HubSub) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-sub.Done():
			if errors.Is(sub.Err(), audit.ErrSlowSubscriber) {
				_ = st.rc.SetWriteDeadline(time.Unix(1, 0)) // in the past: fail now
			}
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
		if !errors.Is(sub.Err(), audit.ErrSlowSubscriber) {
			// A keep-alive connection must not carry our deadline into
			// its next request.
			_ = st.rc.SetWriteDeadline(time.Time{})
		}
	}
}

// appendFrame appends the SSE frame of e to b.
func appendFrame(b []byte, e *audit.HubEntry) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, e.Entry.Seq, 10)
	b = append(b, '\n')
	if t := e.Entry.Type; !strings.ContainsAny(t, "\r\n") {
		b = append(b, "event: "...)
		b = append(b, t...)
		b = append(b, '\n')
	}
	// encoding/json escapes every control character in strings and adds
	// no whitespace, so the entry is one line.
	b = append(b, "data: "...)
	b = append(b, e.JSON...)
	return append(b, "\n\n"...)
}
