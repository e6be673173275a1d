package httpserver

import (
	"net/http"
	"time"
)

// UnmatchedOperation is the operation name [Metrics] receives for the
// requests no route matched (404 route.not_found, 405
// method_not_allowed): one name for every unknown path, so that probing
// random paths cannot grow a metric's series.
const UnmatchedOperation = "unmatched"

// Metrics observes every request the server answers. A
// *metrics.Metrics (package github.com/countersign/countersign/metrics)
// is one.
type Metrics interface {
	// RequestObserver returns the function that observes the requests of
	// one operation. New calls it once for every operation of the model,
	// by operation id, and once with UnmatchedOperation. The server calls
	// the returned function once per request, on the request's
	// goroutine, after the response is complete (for the live stream,
	// when it ends), with the status sent (0 when the handler aborted
	// before sending one) and the time since the request reached the
	// server. It must be safe for concurrent use, and cheap: it is on
	// every request's path.
	RequestObserver(operation string) func(status int, elapsed time.Duration)
}

// observers holds the request observers of a server, by route pattern.
type observers struct {
	src       Metrics
	byPattern map[string]func(int, time.Duration)
	unmatched func(int, time.Duration)
}

func newObservers(m Metrics) *observers {
	return &observers{src: m, byPattern: make(map[string]func(int, time.Duration)),
		unmatched: m.RequestObserver(UnmatchedOperation)}
}

// observe reports one request, routed to pattern ("" for none), which
// started at start.
func (o *observers) observe(w *trackingWriter, pattern string, start time.Time) {
	fn, ok := o.byPattern[pattern]
	if !ok {
		fn = o.unmatched
	}
	status := w.status
	if status == 0 && !w.aborted {
		status = http.StatusOK // what net/http sends for a handler that wrote nothing
	}
	fn(status, time.Since(start))
}
