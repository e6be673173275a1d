package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/webhook"
)

func entry(typ, data string) audit.Entry {
	e := audit.Entry{Type: typ}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

func compare(t *testing.T, m *Metrics, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestMetricsRecordEntries(t *testing.T) {
	m := New(nil)
	m.ObserveEntries([]audit.Entry{
		entry("gate.decision", `{"outcome":"allow","reasons":[],"metadata":{"outcome":"deny"}}`),
		entry("gate.decision", `{"outcome":"allow"}`),
		// The record's canonical form: keys sorted, outcome after nested
		// values that hold strings, brackets and an "outcome" of their own.
		entry("gate.decision", `{"agent":"ab","amount":{"currency":"USD","minor":1250},"metadata":{"note":"a \"}{[,","outcome":"deny"},"outcome":"confirm","reasons":[{"code":"confirm_threshold"}],"stage":"policy"}`),
		// Not pay's layout: outcome later, after a nested one, with whitespace.
		entry("gate.decision", `{ "metadata": {"outcome":"allow"}, "outcome" : "deny" }`),
		entry("gate.decision", `{"outcome":"de\u006ey"}`), // an escape: decoded properly
		entry("gate.decision", `{"outcome":"maybe"}`),
		entry("gate.decision", ``),
		entry("payment.settled", `{}`),
		entry("payment.settled", `{}`),
	})
	m.ObserveEntries([]audit.Entry{
		entry("payment.failed", `{}`),
		entry("payment.outcome_unknown", `{}`),
		entry("payment.refunded", `{}`),
		entry("system.started", `{}`),
	})
	m.ObserveEntries(nil)

	compare(t, m, `
# HELP countersign_gate_decisions_total gate.decision entries committed to the record, by outcome (allow, confirm, deny; other for an outcome this build does not know).
# TYPE countersign_gate_decisions_total counter
countersign_gate_decisions_total{outcome="allow"} 2
countersign_gate_decisions_total{outcome="confirm"} 1
countersign_gate_decisions_total{outcome="deny"} 2
countersign_gate_decisions_total{outcome="other"} 2
# HELP countersign_settlements_total Settlement outcomes committed to the record, by outcome: settled (payment.settled), failed (payment.failed), unknown (payment.outcome_unknown), refunded (payment.refunded).
# TYPE countersign_settlements_total counter
countersign_settlements_total{outcome="failed"} 1
countersign_settlements_total{outcome="refunded"} 1
countersign_settlements_total{outcome="settled"} 2
countersign_settlements_total{outcome="unknown"} 1
# HELP countersign_record_entries_total Entries committed to the record, by entry type.
# TYPE countersign_record_entries_total counter
countersign_record_entries_total{type="gate.decision"} 7
countersign_record_entries_total{type="other"} 0
countersign_record_entries_total{type="payment.failed"} 1
countersign_record_entries_total{type="payment.outcome_unknown"} 1
countersign_record_entries_total{type="payment.refunded"} 1
countersign_record_entries_total{type="payment.settled"} 2
countersign_record_entries_total{type="system.started"} 1
`, "countersign_gate_decisions_total", "countersign_settlements_total", "countersign_record_entries_total")
}

func TestMetricsEntryTypesAreCapped(t *testing.T) {
	m := New(nil)
	for i := range MaxEntryTypes + 10 {
		m.ObserveEntries([]audit.Entry{entry("made.up"+strconv.Itoa(i), "")})
	}
	m.ObserveEntries([]audit.Entry{entry("made.up0", ""), entry("bad\xff", "")})
	if n := testutil.CollectAndCount(m.entries); n != MaxEntryTypes+1 {
		t.Fatalf("%d series, want the cap %d plus other", n, MaxEntryTypes+1)
	}
	if v := testutil.ToFloat64(m.entries.WithLabelValues(Other)); v != 11 {
		t.Errorf("other = %v, want 11 (10 past the cap, 1 not UTF-8)", v)
	}
	if v := testutil.ToFloat64(m.entries.WithLabelValues("made.up0")); v != 2 {
		t.Errorf("made.up0 = %v, want 2", v)
	}

	// Below the cap, a type that is no valid label value counts as other.
	m = New(nil)
	m.ObserveEntries([]audit.Entry{entry("bad\xff", ""), entry("good", "")})
	if v := testutil.ToFloat64(m.entries.WithLabelValues(Other)); v != 1 {
		t.Errorf("other = %v, want 1", v)
	}
	if n := testutil.CollectAndCount(m.entries); n != 2 {
		t.Errorf("%d series, want good and other", n)
	}
}

func TestMetricsEntryTypesConcurrent(t *testing.T) {
	m := New(nil)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				m.ObserveEntries([]audit.Entry{entry("t"+strconv.Itoa((g+i)%7), `{"outcome":"allow"}`)})
			}
		})
	}
	wg.Wait()
	if n := testutil.CollectAndCount(m.entries); n != 8 {
		t.Errorf("%d series, want 7 types and other", n)
	}
	var total float64
	for i := range 7 {
		total += testutil.ToFloat64(m.entries.WithLabelValues("t" + strconv.Itoa(i)))
	}
	if total != 400 {
		t.Errorf("counted %v entries, want 400", total)
	}
}

func TestMetricsStoreCommits(t *testing.T) {
	m := New(nil)
	m.ObserveStoreCommit(1, 150*time.Microsecond, nil)
	m.ObserveStoreCommit(3, 2*time.Millisecond, nil)
	m.ObserveStoreCommit(200, 40*time.Millisecond, errors.New("fsync: input/output error"))
	compare(t, m, `
# HELP countersign_store_commit_errors_total Group commits of the store that failed, nothing of them written; after one, Pebble refuses every write.
# TYPE countersign_store_commit_errors_total counter
countersign_store_commit_errors_total 1
# HELP countersign_store_commit_group_size Transactions made durable by one group commit of the store.
# TYPE countersign_store_commit_group_size histogram
countersign_store_commit_group_size_bucket{le="1"} 1
countersign_store_commit_group_size_bucket{le="2"} 1
countersign_store_commit_group_size_bucket{le="4"} 2
countersign_store_commit_group_size_bucket{le="8"} 2
countersign_store_commit_group_size_bucket{le="16"} 2
countersign_store_commit_group_size_bucket{le="32"} 2
countersign_store_commit_group_size_bucket{le="64"} 2
countersign_store_commit_group_size_bucket{le="128"} 2
countersign_store_commit_group_size_bucket{le="256"} 3
countersign_store_commit_group_size_bucket{le="+Inf"} 3
countersign_store_commit_group_size_sum 204
countersign_store_commit_group_size_count 3
`, "countersign_store_commit_errors_total", "countersign_store_commit_group_size")
	if n := testutil.CollectAndCount(m.commitSeconds); n != 1 {
		t.Fatalf("commit seconds: %d series", n)
	}
	// 150 µs lands in the 200 µs bucket, 2 ms in 3.2 ms, 40 ms in 51.2 ms.
	want := map[float64]uint64{0.0001: 0, 0.0002: 1, 0.0016: 1, 0.0032: 2, 0.0256: 2, 0.0512: 3}
	got := histogramBuckets(t, m, "countersign_store_commit_seconds")
	for le, n := range want {
		if got[le] != n {
			t.Errorf("commit seconds bucket le=%v: %d, want %d (all: %v)", le, got[le], n, got)
		}
	}
}

func TestMetricsStoreGroups(t *testing.T) {
	m := New(nil)
	m.ObserveStoreGroup(2*time.Millisecond, 0)
	m.ObserveStoreGroup(150*time.Microsecond, 5*time.Millisecond)
	for _, tc := range []struct {
		name string
		want map[float64]uint64
	}{
		// 150 µs lands in the 200 µs bucket, 2 ms in 3.2 ms.
		{"countersign_store_group_run_seconds", map[float64]uint64{0.0001: 0, 0.0002: 1, 0.0016: 1, 0.0032: 2}},
		// 0 in the first bucket, 5 ms in 6.4 ms.
		{"countersign_store_commit_lock_wait_seconds", map[float64]uint64{0.0001: 1, 0.0032: 1, 0.0064: 2}},
	} {
		got := histogramBuckets(t, m, tc.name)
		for le, n := range tc.want {
			if got[le] != n {
				t.Errorf("%s bucket le=%v: %d, want %d (all: %v)", tc.name, le, got[le], n, got)
			}
		}
	}
}

// histogramBuckets returns the cumulative bucket counts of the one
// histogram named name.
func histogramBuckets(t *testing.T, m *Metrics, name string) map[float64]uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[float64]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			// Bucket bounds are computed by doubling; round to compare.
			le, _ := strconv.ParseFloat(strconv.FormatFloat(b.GetUpperBound(), 'g', 6, 64), 64)
			out[le] = b.GetCumulativeCount()
		}
	}
	return out
}

func TestMetricsWebhookDeliveries(t *testing.T) {
	m := New(nil)
	for _, s := range []string{webhook.StateDelivered, webhook.StateDelivered, webhook.StatePending, webhook.StateFailed} {
		m.ObserveWebhookDelivery(s)
	}
	compare(t, m, `
# HELP countersign_webhook_deliveries_total Webhook delivery attempts whose outcome was stored, by what the delivery came to: delivered (2xx), retrying (rescheduled), failed (given up: schedule exhausted, 410 Gone, endpoint inactive).
# TYPE countersign_webhook_deliveries_total counter
countersign_webhook_deliveries_total{outcome="delivered"} 2
countersign_webhook_deliveries_total{outcome="failed"} 1
countersign_webhook_deliveries_total{outcome="retrying"} 1
`, "countersign_webhook_deliveries_total")
}

type fakeOutbox struct {
	n   int
	err error
}

func (f *fakeOutbox) OutboxDepth(context.Context) (int, error) { return f.n, f.err }

type fakeHub struct{ st audit.HubStats }

func (f *fakeHub) Stats() audit.HubStats { return f.st }

func TestMetricsWatchOutboxAndHub(t *testing.T) {
	m := New(nil)
	ob := &fakeOutbox{n: 7}
	hub := &fakeHub{st: audit.HubStats{Subscribers: 3, Dropped: 2}}
	if err := m.WatchOutbox(ob); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchHub(hub); err != nil {
		t.Fatal(err)
	}
	if m.WatchOutbox(ob) == nil || m.WatchHub(hub) == nil {
		t.Error("watching twice should fail")
	}
	want := `
# HELP countersign_sse_subscribers Live record stream (audit.stream) subscribers open now.
# TYPE countersign_sse_subscribers gauge
countersign_sse_subscribers 3
# HELP countersign_sse_subscribers_dropped_total Live record stream subscribers ended for falling too far behind (they resume with Last-Event-ID).
# TYPE countersign_sse_subscribers_dropped_total counter
countersign_sse_subscribers_dropped_total 2
# HELP countersign_webhook_outbox_depth Webhook deliveries waiting in the outbox: due, or scheduled for a retry.
# TYPE countersign_webhook_outbox_depth gauge
countersign_webhook_outbox_depth 7
`
	names := []string{"countersign_sse_subscribers", "countersign_sse_subscribers_dropped_total", "countersign_webhook_outbox_depth"}
	compare(t, m, want, names...)
	hub.st.Subscribers = 0
	ob.n = 0
	compare(t, m, strings.NewReplacer("subscribers 3", "subscribers 0", "depth 7", "depth 0").Replace(want), names...)

	// A failed outbox read drops that gauge from the scrape, not the scrape.
	ob.err = errors.New("store: closed")
	body := scrape(t, m)
	if strings.Contains(body, "\ncountersign_webhook_outbox_depth ") || !strings.Contains(body, "countersign_sse_subscribers 0") {
		t.Errorf("scrape with a failed outbox read:\n%s", body)
	}
	// The handler counts it after gathering: the next scrape shows it.
	if body := scrape(t, m); !strings.Contains(body, `promhttp_metric_handler_errors_total{cause="gathering"} 1`) {
		t.Errorf("the failed read is not counted:\n%s", body)
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", w.Code, w.Body)
	}
	b, _ := io.ReadAll(w.Body)
	return string(b)
}

func TestMetricsRequestObserver(t *testing.T) {
	m := New(nil)
	list := m.RequestObserver("audit.list")
	pay := m.RequestObserver("pay.create")
	_ = m.RequestObserver("idle.op") // never called: no series
	list(200, 3*time.Millisecond)
	list(200, 4*time.Millisecond)
	list(404, time.Millisecond)
	pay(503, 2*time.Second)
	pay(0, time.Millisecond) // aborted: 5xx
	pay(302, time.Millisecond)
	pay(999, time.Millisecond)
	compare(t, m, `
# HELP countersign_http_requests_total HTTP requests served, by contract operation id ("unmatched" when no route matched) and status class (2xx, 3xx, 4xx, 5xx).
# TYPE countersign_http_requests_total counter
countersign_http_requests_total{code="2xx",operation="audit.list"} 2
countersign_http_requests_total{code="4xx",operation="audit.list"} 1
countersign_http_requests_total{code="3xx",operation="pay.create"} 1
countersign_http_requests_total{code="5xx",operation="pay.create"} 2
countersign_http_requests_total{code="other",operation="pay.create"} 1
`, "countersign_http_requests_total")
	if n := testutil.CollectAndCount(m.httpDuration); n != 2 {
		t.Errorf("%d duration series, want 2 (an idle operation has none)", n)
	}
	if c := histogramCount(t, m, "audit.list"); c != 3 {
		t.Errorf("audit.list duration count %d, want 3", c)
	}
	// A second observer of the same operation shares its series.
	m.RequestObserver("audit.list")(200, time.Millisecond)
	if v := testutil.ToFloat64(m.httpRequests.WithLabelValues("audit.list", "2xx")); v != 3 {
		t.Errorf("audit.list 2xx = %v, want 3", v)
	}
}

func histogramCount(t *testing.T, m *Metrics, op string) uint64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "countersign_http_request_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if s.GetLabel()[0].GetValue() == op {
				return s.GetHistogram().GetSampleCount()
			}
		}
	}
	return 0
}

func TestMetricsRequestObserverAllocatesNothing(t *testing.T) {
	m := New(nil)
	obs := m.RequestObserver("health.get")
	obs(200, time.Millisecond) // makes the series
	if n := testing.AllocsPerRun(100, func() { obs(200, time.Millisecond) }); n != 0 {
		t.Errorf("%v allocations per observation, want 0", n)
	}
	entries := []audit.Entry{entry("gate.decision", `{"outcome":"allow","stage":"policy"}`), entry("payment.settled", "{}")}
	m.ObserveEntries(entries)
	if n := testing.AllocsPerRun(100, func() { m.ObserveEntries(entries) }); n != 0 {
		t.Errorf("%v allocations per committed transaction, want 0", n)
	}
}

func TestMetricsRegisterAndDefaults(t *testing.T) {
	m := New(nil)
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "countersign_pg_pool_acquires_total", Help: "A driver's own."})
	if err := m.Register(c); err != nil {
		t.Fatal(err)
	}
	c.Add(5)
	if err := m.Register(c); err == nil {
		t.Error("registering twice should fail")
	}
	body := scrape(t, m)
	for _, want := range []string{
		"countersign_pg_pool_acquires_total 5",
		"go_goroutines ",
		"process_start_time_seconds ",
		`countersign_gate_decisions_total{outcome="deny"} 0`, // known outcomes start at zero
		`countersign_webhook_deliveries_total{outcome="failed"} 0`,
		"countersign_store_commit_errors_total 0",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(body, "countersign_http_requests_total") {
		t.Error("no request was observed, yet there are request series")
	}
	// A private registry: nothing went to the global one.
	if n, _ := testutil.GatherAndCount(prometheus.DefaultGatherer, "countersign_gate_decisions_total"); n != 0 {
		t.Error("metrics leaked into the default registry")
	}
}

func TestMetricsGateOutcomeScan(t *testing.T) {
	for _, tc := range []struct{ data, want string }{
		{`{"outcome":"allow"}`, "allow"},
		{`{"a":[1,{"outcome":"deny"}],"outcome":"confirm"}`, "confirm"},
		{`{"a":"outcome","b":"x"}`, ""},
		{`{"outcome":"allow","outcome":"deny"}`, "deny"}, // the last one, as encoding/json
		{`{"outcome":null}`, ""},
		{`{"outcome":1}`, ""},
		{`{"outcome":"al\u006cow"}`, "allow"}, // escaped: decoded
		{`{"outc\u006fme":"deny"}`, "deny"},
		{`{"OUTCOME":"deny"}`, ""}, // the exact key only
		{`{"outcome":"later"}`, Other},
		{`[]`, ""},
		{``, ""},
	} {
		if got := gateOutcome([]byte(tc.data)); got != tc.want {
			t.Errorf("gateOutcome(%s) = %q, want %q", tc.data, got, tc.want)
		}
	}
}

// FuzzGateOutcome checks the in-place scan against decoding.
func FuzzGateOutcome(f *testing.F) {
	for _, s := range []string{
		`{"outcome":"allow"}`, `{"a":{"outcome":"deny"},"outcome":"confirm"}`, `{"a":"\"","outcome":"deny"}`,
		`{ "b" : [ "]" , { } ] , "outcome" : "allow" }`, `{"outcome":"x","outcome":"allow"}`, `{"outcome":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		if _, ok := topLevelString(data, "outcome"); !ok {
			return // decoded anyway
		}
		if got, want := gateOutcome(data), decodeOutcome(data); got != want {
			t.Errorf("%s: scan %q, decode %q", data, got, want)
		}
	})
}

// BenchmarkRequestObserver is what metrics add to each request.
func BenchmarkRequestObserver(b *testing.B) {
	obs := New(nil).RequestObserver("pay.create")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			obs(200, 3*time.Millisecond)
		}
	})
}

// BenchmarkObserveEntries is what metrics add to a payment's commit: its
// gate decision and settlement, in the record's canonical form.
func BenchmarkObserveEntries(b *testing.B) {
	m := New(nil)
	entries := []audit.Entry{
		entry("gate.decision", `{"agent":"`+strings.Repeat("ab", 32)+`","agentKeyId":"ak_01J","amount":{"currency":"USD","minor":1250},"idempotencyKey":"k-1","mandateId":"mdt_01J","metadata":{"order":"42"},"outcome":"allow","payee":"acct:seller.example","policyHash":"`+strings.Repeat("0", 64)+`","rail":"sandbox-card","reasons":[],"route":"pay","stage":"policy"}`),
		entry("payment.settled", `{"receipt":{"id":"rcpt_01J"}}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveEntries(entries)
	}
}
