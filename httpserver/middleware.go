package httpserver

import (
	"context"
	"crypto/rand"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/countersign/countersign/contract"
)

// ServeHTTP is the outer layer every request passes: metrics, request id,
// panic recovery, body limit, then routing with 404 and 405 as problems.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var start time.Time
	if s.metrics != nil {
		start = time.Now()
	}
	id := r.Header.Get(contract.HeaderRequestID)
	if !validRequestID(id) {
		id = s.mintRequestID()
	}
	// Set before anything else runs, so every response carries it.
	h := w.Header()
	h.Set(contract.HeaderRequestID, id)
	h.Set("X-Content-Type-Options", "nosniff")
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))

	tw := &trackingWriter{ResponseWriter: w}
	_, pattern := s.mux.Handler(r)
	if s.metrics != nil {
		// Deferred before recoverPanic, so it runs after it and sees the
		// problem a panic was answered with.
		defer s.metrics.observe(tw, pattern, start)
	}
	defer s.recoverPanic(tw, r)

	if r.ContentLength > s.maxBody {
		s.writeError(tw, r, &http.MaxBytesError{Limit: s.maxBody})
		return
	}
	if r.Body != nil {
		// The server's own writer, not the wrapper: MaxBytesReader tells it
		// to close the connection once the limit is hit.
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
	}
	if pattern == "" {
		s.notRouted(tw, r)
		return
	}
	s.mux.ServeHTTP(tw, r)
}

// validRequestID accepts 1–128 visible ASCII characters.
func validRequestID(id string) bool {
	if len(id) < 1 || len(id) > 128 {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *server) mintRequestID() string {
	ms := ulid.Timestamp(s.now())
	id, err := ulid.New(ms, s.entropy)
	if err != nil {
		// The monotonic source overflowed within one millisecond (2^80
		// ids) or the clock is beyond the ULID range: fall back to fresh
		// randomness, losing only the ordering.
		id, err = ulid.New(ms, rand.Reader)
		if err != nil {
			id = ulid.MustNew(0, rand.Reader)
		}
	}
	return "req_" + id.String()
}

// notRouted answers a request no pattern matched. It lets the mux decide
// between 404 and 405 (and compute Allow), then answers with a problem.
func (s *server) notRouted(w http.ResponseWriter, r *http.Request) {
	h, _ := s.mux.Handler(r)
	rec := &captureWriter{header: make(http.Header)}
	h.ServeHTTP(rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", rec.header.Get("Allow"))
		s.writeProblem(w, r, s.newProblem(r, contract.CodeMethodNotAllowed,
			r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+rec.header.Get("Allow")), nil)
		return
	}
	s.writeProblem(w, r, s.newProblem(r, contract.CodeRouteNotFound,
		"no operation is served at "+r.URL.Path), nil)
}

// captureWriter records what the mux's fallback handler would answer.
type captureWriter struct {
	header http.Header
	status int
}

func (c *captureWriter) Header() http.Header { return c.header }
func (c *captureWriter) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

// trackingWriter remembers whether the response has started, so a panic
// is answered with a problem only when nothing was sent yet, and which
// status was sent, for metrics.
type trackingWriter struct {
	http.ResponseWriter
	wrote   bool
	aborted bool // the request ended in http.ErrAbortHandler
	status  int  // the final status sent; 0 before one is
}

func (t *trackingWriter) WriteHeader(status int) {
	if status >= 200 {
		t.wrote = true
		if t.status == 0 {
			t.status = status
		}
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.sent()
	return t.ResponseWriter.Write(b)
}

// Flush passes through, so streaming handlers work through the wrapper.
func (t *trackingWriter) Flush() {
	t.sent()
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

// sent notes a response that starts without WriteHeader: 200.
func (t *trackingWriter) sent() {
	t.wrote = true
	if t.status == 0 {
		t.status = http.StatusOK
	}
}

// Unwrap lets http.ResponseController reach the server's writer.
func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (s *server) recoverPanic(w *trackingWriter, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		w.aborted = true
		panic(v)
	}
	s.log.ErrorContext(r.Context(), "panic serving request",
		slog.String("requestId", RequestID(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Any("panic", v),
		slog.String("stack", string(debug.Stack())))
	if w.wrote {
		// Too late for a problem: abort so the client sees a broken
		// response rather than a complete-looking one.
		w.aborted = true
		panic(http.ErrAbortHandler)
	}
	s.writeProblem(w, r, s.newProblem(r, contract.CodeInternal, ""), nil)
}

// isJSONContentType accepts application/json, optionally with
// charset=utf-8 (any case), and nothing else.
func isJSONContentType(v string) bool {
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != contract.MediaJSON {
		return false
	}
	for k, val := range params {
		if k != "charset" || !strings.EqualFold(val, "utf-8") {
			return false
		}
	}
	return true
}
