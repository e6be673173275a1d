package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestWarmConnectionsOpensOnePerWorker checks that the warm-up leaves as
// many connections open as the run has workers, so that no timed request
// waits for a handshake.
func TestWarmConnectionsOpensOnePerWorker(t *testing.T) {
	var opened atomic.Int64
	// Like /healthz, the handler answers with a body: the transport
	// frees a connection at once when a response has none.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	const conc = 17
	tr := &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	if err := warmConnections(t.Context(), client, srv.URL+"/healthz", conc); err != nil {
		t.Fatal(err)
	}
	if got := opened.Load(); got != conc {
		t.Fatalf("warm-up opened %d connections, want %d", got, conc)
	}
	// A second warm-up finds them all idle and opens none.
	if err := warmConnections(t.Context(), client, srv.URL+"/healthz", conc); err != nil {
		t.Fatal(err)
	}
	if got := opened.Load(); got != conc {
		t.Errorf("after a second warm-up, %d connections opened in all, want still %d", got, conc)
	}
}

func TestWarmConnectionsReportsAFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if err := warmConnections(t.Context(), http.DefaultClient, url+"/healthz", 3); err == nil {
		t.Fatal("warming connections to a closed server succeeded")
	}
}

// TestWriteTimeline checks the CSV a run's --timeline leaves: a header,
// then one line per request in scheduled order, in microseconds, with a
// transport error as status -1.
func TestWriteTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.csv")
	began := []time.Duration{0, 500 * time.Microsecond, time.Second}
	lat := []time.Duration{2 * time.Millisecond, 31500 * time.Microsecond, 1500 * time.Nanosecond}
	status := []int{200, 200, -1}
	if err := writeTimeline(path, began, lat, status); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "start_us,latency_us,status\n0,2000,200\n500,31500,200\n1000000,1,-1\n"
	if string(got) != want {
		t.Errorf("timeline:\n%s\nwant:\n%s", got, want)
	}
	if err := writeTimeline(filepath.Join(t.TempDir(), "no", "such", "dir.csv"), began, lat, status); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
