package agentclient

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
)

// HandlerTransport returns an http.RoundTripper that answers every request
// with h, in this process: no socket, no port. It is how a program that
// embeds the whole service (countersign.Open) talks to the node's
// Handler() through the same client code as to a remote server.
//
// Responses stream: the body is a pipe the handler writes into, and a
// flush reaches the reader at once, so Server-Sent Events (the record's
// live stream) work. Cancelling the request's context ends the handler's
// request context too. Requests appear to come from 127.0.0.1.
func HandlerTransport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.RequestURI = req.URL.RequestURI()
	// As a server sees it: the path and query only.
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	r.RemoteAddr = "127.0.0.1:1"
	r.Host = req.URL.Host
	if r.Body == nil {
		r.Body = http.NoBody
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				w.writeHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(fmt.Errorf("agentclient: handler panicked: %v", v))
				return
			}
			w.writeHeader(http.StatusOK)
			_ = pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		_ = pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// pipeResponse is the handler's side: headers are handed over once, at
// the first WriteHeader, Write or Flush, and the body goes down the pipe.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter

	once   sync.Once
	ready  chan struct{}
	status int
	sent   http.Header
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	if code >= 100 && code < 200 {
		return // informational answers are not passed on
	}
	w.writeHeader(code)
}

func (w *pipeResponse) writeHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the headers if they were not; the pipe passes every write
// on as it happens.
func (w *pipeResponse) Flush() { w.writeHeader(http.StatusOK) }
