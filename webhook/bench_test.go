package webhook

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// BenchmarkDeliver measures end-to-end delivery: b.N events (entries ×
// 100 endpoints, each subscribed to audit.appended) are tailed from the
// record into the outbox, signed, POSTed to a receiver on 127.0.0.1 and
// recorded as delivered. Run:
//
//	go test -run '^$' -bench Deliver -benchtime 20000x ./webhook/
func BenchmarkDeliver(b *testing.B) {
	for _, backend := range []string{"memstore", "pebblestore"} {
		b.Run(backend, func(b *testing.B) {
			var st store.Store
			if backend == "memstore" {
				st = memstore.New(&memstore.Options{RetryRate: -1})
			} else {
				p, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				st = p
			}
			defer st.Close()
			benchDeliver(b, st, 100)
		})
	}
}

func benchDeliver(b *testing.B, st store.Store, endpoints int) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l, err := audit.Open(ctx, st, testKey(), &audit.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	eps, err := NewEndpoints(st, l, &Options{SealKey: testSealKey(), AllowLoopbackHTTP: true, MaxEndpoints: endpoints, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDispatcher(st, l, eps, &DispatcherOptions{AllowLoopback: true, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close(ctx)
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		got.Add(1)
	}))
	defer srv.Close()
	for i := range endpoints {
		if _, err := eps.Create(ctx, CreateRequest{URL: fmt.Sprintf("%s/%d", srv.URL, i), Events: []string{EventAuditAppended}},
			operator, "", "benchmark endpoint"); err != nil {
			b.Fatal(err)
		}
	}
	entries := (b.N + endpoints - 1) / endpoints
	for i := 0; i < entries; {
		err := l.Update(ctx, func(txn store.Txn) error {
			for j := 0; j < 100 && i+j < entries; j++ {
				if _, err := l.Append(txn, audit.Record{Type: "agent.created", Actor: audit.Actor{Kind: "system", ID: "bench"},
					Data: []byte(`{"n":1}`)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i += 100
	}
	b.ResetTimer()
	start := time.Now()
	if _, err := d.Tick(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	// Each endpoint also gets the creation entries of the endpoints
	// created after it.
	want := int64(entries*endpoints + endpoints*(endpoints-1)/2)
	if got.Load() != want {
		b.Fatalf("delivered %d of %d", got.Load(), want)
	}
	b.ReportMetric(float64(want)/elapsed.Seconds(), "events/s")
}
