package httpserver

import (
	"net/http/httptest"
	"testing"
)

func benchmarkRoute(b *testing.B, target string) {
	ts := newTestServer(b, Config{})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		ts.h.ServeHTTP(w, httptest.NewRequest("GET", target, nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

func BenchmarkHealthz(b *testing.B)    { benchmarkRoute(b, "/healthz") }
func BenchmarkAuditList(b *testing.B)  { benchmarkRoute(b, "/audit?limit=20") }
func BenchmarkAuditEntry(b *testing.B) { benchmarkRoute(b, "/audit/entries/2?treeSize=3") }
func BenchmarkNotFound(b *testing.B) {
	ts := newTestServer(b, Config{})
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		ts.h.ServeHTTP(w, httptest.NewRequest("GET", "/nope", nil))
	}
}
