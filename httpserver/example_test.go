package httpserver_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/httpserver"
)

// emptyLog is an AuditLog with no entries.
type emptyLog struct{}

func (emptyLog) Page(context.Context, string, int) (audit.Page, error) { return audit.Page{}, nil }
func (emptyLog) Get(context.Context, uint64) (audit.Entry, error) {
	return audit.Entry{}, audit.ErrNotFound
}
func (emptyLog) Checkpoint(context.Context) (audit.Checkpoint, error) { return audit.Checkpoint{}, nil }
func (emptyLog) Inclusion(context.Context, uint64, uint64) (audit.InclusionProof, error) {
	return audit.InclusionProof{}, audit.ErrOutOfRange
}
func (emptyLog) Consistency(context.Context, uint64, uint64) (audit.ConsistencyProof, error) {
	return audit.ConsistencyProof{}, audit.ErrOutOfRange
}

func ExampleNew() {
	h, err := httpserver.New(httpserver.Config{
		BaseURL: "https://pay.example",
		Sandbox: true, // no Authenticator yet: only a sandbox may serve agent operations
		Audit:   emptyLog{},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	fmt.Println(w.Code, w.Header().Get("Content-Type"))
	fmt.Print(w.Body.String())

	w = httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/audit/entries/7", nil)
	r.Header.Set("X-Request-Id", "trace-1")
	h.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Header().Get("Content-Type"), w.Header().Get("X-Request-Id"))
	fmt.Print(w.Body.String())
	// Output:
	// 200 application/json
	// {"status":"ok"}
	// 404 application/problem+json trace-1
	// {"type":"https://pay.example/problems/audit.not_found","title":"No such entry","status":404,"detail":"the record has no entry with this sequence number","instance":"/audit/entries/7","code":"audit.not_found","action":"fix-request","requestId":"trace-1"}
}

func ExampleNew_production() {
	_, err := httpserver.New(httpserver.Config{
		BaseURL: "https://pay.example",
		Audit:   emptyLog{},
	})
	fmt.Println(err)
	// Output:
	// httpserver: outside sandbox mode an Authenticator is required; refusing to serve agent operations without credentials
}

func ExampleRequestID() {
	fmt.Printf("%q\n", httpserver.RequestID(context.Background()))
	// Output:
	// ""
}
