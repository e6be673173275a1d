package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
)

// notifyBuffer is a buffer the server writes its banner to; Wait returns
// once a pattern appears, woken by each write rather than by polling.
type notifyBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // capacity 1
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{wrote: make(chan struct{}, 1)} }

func (n *notifyBuffer) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case n.wrote <- struct{}{}:
	default:
	}
	return n.b.Write(p)
}

func (n *notifyBuffer) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.b.String()
}

var (
	metricsLine = regexp.MustCompile(`metrics: +http://(127\.0\.0\.1:\d+)/metrics`)
	pprofLine   = regexp.MustCompile(`pprof: +http://(127\.0\.0\.1:\d+)/debug/pprof/`)
)

// startServeBanner runs serve in-process and returns its stdout once the
// banner has been printed, and a stop function that returns the exit code.
func startServeBanner(t *testing.T, args ...string) (*notifyBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newNotifyBuffer(), &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"serve"}, args...), stdout, stderr) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !listenLine.MatchString(stdout.String()) || !strings.Contains(stdout.String(), "sandbox:") {
		select {
		case <-stdout.wrote:
		case code := <-done:
			cancel()
			t.Fatalf("serve exited with %d before listening:\n%s\n%s", code, stdout, stderr)
		case <-deadline.C:
			cancel()
			t.Fatalf("serve did not start:\n%s\n%s", stdout, stderr)
		}
	}
	var once sync.Once
	code := 0
	stop := func() int {
		once.Do(func() { cancel(); code = <-done })
		return code
	}
	t.Cleanup(func() { stop() })
	return stdout, stop
}

// sample returns the value of one series in a text exposition.
func sample(body, series string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// payAndScrape makes one sandbox payment through the server at base and
// returns a scrape of its metrics.
func payAndScrape(t *testing.T, base, sandbox, metricsURL string) string {
	t.Helper()
	var payOut, payErr bytes.Buffer
	if code := run(context.Background(), []string{"pay", "--url", base, "--agent-key", filepath.Join(sandbox, "agent.jwk.json"),
		"--credential", filepath.Join(sandbox, "agent-credential.txt"), "--mandate", filepath.Join(sandbox, "mandate.jws"),
		"--payee", "acct:seller.example", "--amount", "1250", "--currency", "USD", "--rail", "sandbox-card",
		"--idempotency-key", "k-metrics"}, &payOut, &payErr); code != 0 || !strings.HasPrefix(payOut.String(), "200 OK") {
		t.Fatalf("pay: exit %d\n%s%s", code, payOut.String(), payErr.String())
	}
	resp, body := get(t, metricsURL+"/metrics")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("scrape: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return string(body)
}

// TestServeStoreMetricsOnPostgres: with --store postgres://… the store's
// commits are in the metrics too, with where each group's time went.
func TestServeStoreMetricsOnPostgres(t *testing.T) {
	storeURL := pgTestStore(t, "metrics")
	dir := filepath.Join(t.TempDir(), "data")
	out, _ := startServeBanner(t, "--addr", "127.0.0.1:0", "--data", dir, "--sandbox-latency", "off",
		"--store", storeURL, "--metrics-addr", "127.0.0.1:0")
	banner := out.String()
	mm := metricsLine.FindStringSubmatch(banner)
	if mm == nil {
		t.Fatalf("the banner does not name the metrics listener:\n%s", banner)
	}
	text := payAndScrape(t, listenLine.FindStringSubmatch(banner)[1], filepath.Join(dir, "sandbox"), "http://"+mm[1])
	for series, least := range map[string]float64{
		`countersign_store_commit_group_size_count`:        1,
		`countersign_store_commit_group_size_sum`:          1,
		`countersign_store_commit_seconds_count`:           1,
		`countersign_store_commit_seconds_sum`:             1e-9,
		`countersign_store_group_run_seconds_count`:        1,
		`countersign_store_group_run_seconds_sum`:          1e-9,
		`countersign_store_commit_lock_wait_seconds_count`: 1,
		`countersign_settlements_total{outcome="settled"}`: 1,
	} {
		if v, ok := sample(text, series); !ok || v < least {
			t.Errorf("%s = %v (present %v), want at least %v", series, v, ok, least)
		}
	}
	if v, ok := sample(text, `countersign_store_commit_errors_total`); !ok || v != 0 {
		t.Errorf("countersign_store_commit_errors_total = %v (present %v), want 0", v, ok)
	}
}

// TestServeMetricsAndPprof runs serve with both operator listeners, makes a
// payment, and finds it in the metrics; the API listener still answers
// /metrics as an unknown route, to an agent credential and to an operator
// signature alike.
func TestServeMetricsAndPprof(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	out, stop := startServeBanner(t, "--addr", "127.0.0.1:0", "--data", dir, "--sandbox-latency", "off",
		"--metrics-addr", "127.0.0.1:0", "--pprof-addr", "127.0.0.1:0")
	banner := out.String()
	base := listenLine.FindStringSubmatch(banner)[1]
	mm, pm := metricsLine.FindStringSubmatch(banner), pprofLine.FindStringSubmatch(banner)
	if mm == nil || pm == nil {
		t.Fatalf("the banner does not name the operator's listeners:\n%s", banner)
	}
	metricsURL, pprofURL := "http://"+mm[1], "http://"+pm[1]
	sandbox := filepath.Join(dir, "sandbox")
	text := payAndScrape(t, base, sandbox, metricsURL)
	for series, least := range map[string]float64{
		`countersign_gate_decisions_total{outcome="allow"}`:                  1,
		`countersign_settlements_total{outcome="settled"}`:                   1,
		`countersign_record_entries_total{type="system.started"}`:            1,
		`countersign_record_entries_total{type="gate.decision"}`:             1,
		`countersign_http_requests_total{code="2xx",operation="pay.create"}`: 1,
		`countersign_store_commit_group_size_count`:                          1,
		`countersign_store_commit_seconds_count`:                             1,
		`countersign_store_commit_group_size_sum`:                            1,
	} {
		if v, ok := sample(text, series); !ok || v < least {
			t.Errorf("%s = %v (present %v), want at least %v", series, v, ok, least)
		}
	}
	for series, want := range map[string]float64{
		`countersign_gate_decisions_total{outcome="deny"}`: 0,
		`countersign_store_commit_errors_total`:            0,
		`countersign_sse_subscribers`:                      0,
		`countersign_webhook_outbox_depth`:                 0,
	} {
		if v, ok := sample(text, series); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := sample(text, family); !ok {
			t.Errorf("the scrape lacks %s", family)
		}
	}

	// The API listener: /metrics is an unknown route, whoever asks.
	cred := strings.TrimSpace(readFile(t, filepath.Join(sandbox, "agent-credential.txt")))
	k, err := keyfile.Read(filepath.Join(sandbox, "operator.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := operator.NewSigner(k.Signer, k.KeyID, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, prepare := range map[string]func(*http.Request){
		"agent credential":   func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+cred) },
		"operator signature": func(r *http.Request) { _ = signer.Sign(r, "metrics.get", nil) },
	} {
		for _, path := range []string{"/metrics", "/debug/pprof/"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			prepare(req)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(b.String(), `"code":"route.not_found"`) ||
				strings.Contains(b.String(), "countersign_") {
				t.Errorf("API GET %s with an %s: %d %s", path, name, resp.StatusCode, b.String())
			}
		}
	}

	// pprof answers on its own listener, and each listener serves only
	// its own paths.
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1"} {
		if resp, body := get(t, pprofURL+path); resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("pprof %s: %d", path, resp.StatusCode)
		}
	}
	if resp, _ := get(t, pprofURL+"/metrics"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the pprof listener serves /metrics: %d", resp.StatusCode)
	}
	if resp, _ := get(t, metricsURL+"/debug/pprof/"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the metrics listener serves pprof: %d", resp.StatusCode)
	}
	if req, _ := http.NewRequest("POST", metricsURL+"/metrics", nil); true {
		if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST /metrics: %v %v", resp, err)
		} else {
			resp.Body.Close()
		}
	}

	// The scrape is counted: the metrics listener's own requests are not
	// API requests.
	_, body := get(t, metricsURL+"/metrics")
	if v, _ := sample(string(body), `promhttp_metric_handler_requests_total{code="200"}`); v < 1 {
		t.Errorf("scrapes are not counted:\n%s", body)
	}
	if strings.Contains(string(body), `operation="metrics`) {
		t.Error("a scrape shows up as an API operation")
	}

	// A clean shutdown closes all three listeners.
	if code := stop(); code != 0 {
		t.Fatalf("serve exit code %d after shutdown", code)
	}
	for _, u := range []string{base, metricsURL, pprofURL} {
		if c, err := net.Dial("tcp", strings.TrimPrefix(u, "http://")); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after shutdown", u)
		}
	}
}

// TestServePprofRefusesNonLoopback: the profiler never listens beyond
// loopback, and serve says so before it opens anything.
func TestServePprofRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "[::]:6060", "10.1.2.3:6060", "192.168.1.1:0", "example.com:6060", "[::ffff:10.0.0.1]:6060", "nonsense"} {
		dir := filepath.Join(t.TempDir(), "data")
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--pprof-addr", addr}, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "--pprof-addr") || !strings.Contains(errOut.String(), "loopback") {
			t.Errorf("--pprof-addr %s: exit %d, %s", addr, code, errOut.String())
		}
		if strings.Contains(out.String(), "listening on") {
			t.Errorf("--pprof-addr %s: the server started", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "127.8.9.10:6060", "[::1]:0", "localhost:0", "LOCALHOST:6060", "[::ffff:127.0.0.1]:0"} {
		if err := checkPprofAddr(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
}

// TestServeMetricsAddrInUse: a metrics address that cannot be bound stops
// the start with the flag's name, as the API's own address does.
func TestServeMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(t.TempDir(), "data"),
		"--metrics-addr", ln.Addr().String()}, &out, &errOut)
	if code == 0 || !strings.Contains(errOut.String(), "--metrics-addr: listen") {
		t.Fatalf("exit %d, %s", code, errOut.String())
	}
}
