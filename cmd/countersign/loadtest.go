package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

const loadtestSynopsis = `loadtest pay|flood|baseline [flags]

  pay       --url URL[,URL...] --sandbox DIR [--n 20000] [--concurrency 64] [--rate R]
            [--timeline FILE]
            Pre-signs N payment instructions with the sandbox agent's key and
            mandate (1 minor unit each, unique idempotency keys), then sends
            them to POST /pay: closed loop with C workers, or open loop at R
            requests/s (latency measured from each request's scheduled time,
            so a slow server cannot hide its queueing). Prints throughput,
            status counts and latency percentiles; --timeline writes one CSV
            line per request (start offset and latency in microseconds,
            status), to find when in a run the slow requests came.
  flood     --url URL [--n 100000] [--concurrency 16]
            Sends N operator requests that prove no identity (no
            Svc-Operator header, a malformed one, an unknown key id, in
            turn) to POST /operator/kill-switch, and prints the statuses and
            the rate. Run it beside "loadtest pay" to see what such a flood
            costs payments, and read the record's size before and after:
            it must grow by at most one summary entry a minute.
  baseline  --addr HOST:PORT --sandbox DIR --data DIR
            Serves POST /pay with only the irreducible work of a payment:
            decode, verify the mandate and the intent signature, sign one
            hash, one durable 2 KB write, a 0.5 KB reply. It is the yardstick
            the real server's rate is compared with (docs/PERFORMANCE.md).`

func cmdLoadtest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", loadtestSynopsis)
		return errUsage
	}
	switch args[0] {
	case "pay":
		return cmdLoadPay(ctx, args[1:], stdout, stderr)
	case "flood":
		return cmdLoadFlood(ctx, args[1:], stdout, stderr)
	case "baseline":
		return cmdLoadBaseline(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "Usage: countersign %s\n", loadtestSynopsis)
		return errUsage
	}
}

// sandboxClient is what a load generator needs from a sandbox directory.
type sandboxClient struct {
	key     ed25519.PrivateKey
	agent   string
	mandate string
	bearer  string
}

func loadSandboxClient(dir string) (*sandboxClient, error) {
	key, _, err := keyfile.ReadEd25519(filepath.Join(dir, sandboxAgentKey))
	if err != nil {
		return nil, err
	}
	m, err := os.ReadFile(filepath.Join(dir, sandboxMandate))
	if err != nil {
		return nil, err
	}
	c, err := os.ReadFile(filepath.Join(dir, sandboxCredential))
	if err != nil {
		return nil, err
	}
	return &sandboxClient{key: key, agent: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
		mandate: strings.TrimSpace(string(m)), bearer: "Bearer " + strings.TrimSpace(string(c))}, nil
}

// presign signs n instructions on all cores.
func (c *sandboxClient) presign(n int) ([][]byte, error) {
	run := make([]byte, 6)
	_, _ = rand.Read(run)
	prefix := "lt-" + hex.EncodeToString(run) + "-"
	out := make([][]byte, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				in := &pay.Instruction{
					IdempotencyKey: fmt.Sprintf("%s%d", prefix, i), Payee: "acct:load.example",
					Amount: pay.Amount{Minor: 1, Currency: "USD"}, Purpose: "load test",
					Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
						Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
					Envelope: pay.Envelope{Agent: c.agent, Mandate: c.mandate},
				}
				if err := pay.SignInstruction(in, c.key); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				out[i], _ = json.Marshal(in)
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return out, nil
}

func cmdLoadPay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("loadtest pay", "loadtest pay --url URL[,URL...] --sandbox DIR [--n N] [--concurrency C] [--rate R]", stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "server base `URL`s, comma-separated: several servers of one deployment share the load in turn")
	sandbox := fs.String("sandbox", "countersign-data/sandbox", "sandbox `directory` (agent key, mandate, credential)")
	n := fs.Int("n", 20000, "payments to send")
	conc := fs.Int("concurrency", 64, "concurrent connections")
	rate := fs.Float64("rate", 0, "open-loop rate in requests/s (0: closed loop)")
	timeline := fs.String("timeline", "", "write each request's start offset, latency (µs) and status to this CSV `file`")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	c, err := loadSandboxClient(*sandbox)
	if err != nil {
		return err
	}
	bodies, err := c.presign(*n)
	if err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	var urls []string
	for _, b := range strings.Split(*base, ",") {
		b = strings.TrimRight(strings.TrimSpace(b), "/")
		urls = append(urls, b+"/pay")
		if err := warmConnections(ctx, client, b+"/healthz", *conc); err != nil {
			return err
		}
	}

	lat := make([]time.Duration, *n)
	began := make([]time.Duration, *n) // scheduled start, from the run's start
	status := make([]int, *n)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *n || ctx.Err() != nil {
					return
				}
				sched := time.Now()
				if *rate > 0 {
					sched = start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
					if d := time.Until(sched); d > 0 {
						time.Sleep(d)
					}
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, urls[i%len(urls)], bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", c.bearer)
				resp, err := client.Do(req)
				if err != nil {
					status[i] = -1
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status[i] = resp.StatusCode
				}
				lat[i], began[i] = time.Since(sched), sched.Sub(start)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if *timeline != "" {
		if err := writeTimeline(*timeline, began, lat, status); err != nil {
			return err
		}
	}
	counts := map[int]int{}
	for _, s := range status {
		counts[s]++
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	sc := statusCounts(counts)
	mode := fmt.Sprintf("closed loop, %d connections", *conc)
	if *rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f/s, up to %d connections", *rate, *conc)
	}
	fmt.Fprintf(stdout, "%d requests in %.2fs (%s): %.0f/s; statuses %s; latency p50 %v p99 %v max %v\n",
		*n, el.Seconds(), mode, float64(*n)/el.Seconds(), strings.Join(sc, " "),
		pct(0.50).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	if *timeline != "" {
		// The wall-clock start lines the offsets up with a server's logs.
		fmt.Fprintf(stdout, "timeline in %s, offsets from %s\n", *timeline, start.UTC().Format(time.RFC3339Nano))
	}
	if counts[200] != *n {
		return errors.New("not every payment settled")
	}
	return nil
}

// statusCounts formats counts by status as "N×status", by status.
func statusCounts(counts map[int]int) []string {
	keys := make([]int, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%d×%d", counts[k], k)
	}
	return out
}

// floodHeaders are the Svc-Operator values of a flood, used in turn: none,
// garbage, and a well-formed header naming a key nobody trusts.
var floodHeaders = []string{"", "garbage", `keyid="op-mallory", ts=1, nonce="AAAAAAAAAAAAAAAAAAAAAA", sig=:AAAA:`}

func cmdLoadFlood(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("loadtest flood", "loadtest flood --url URL [--n N] [--concurrency C]", stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "server base `URL`")
	n := fs.Int("n", 100000, "requests to send")
	conc := fs.Int("concurrency", 16, "concurrent connections")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	tr := &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	url := strings.TrimRight(*base, "/") + "/operator/kill-switch"
	body := []byte(`{"engaged":true,"rationale":"flood: an attacker with no key"}`)
	var next atomic.Int64
	var mu sync.Mutex
	counts := map[int]int{}
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Go(func() {
			local := map[int]int{}
			for {
				i := int(next.Add(1)) - 1
				if i >= *n || ctx.Err() != nil {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if h := floodHeaders[i%len(floodHeaders)]; h != "" {
					req.Header.Set("Svc-Operator", h)
				}
				resp, err := client.Do(req)
				if err != nil {
					local[-1]++
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				local[resp.StatusCode]++
			}
			mu.Lock()
			for k, v := range local {
				counts[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	sc := statusCounts(counts)
	fmt.Fprintf(stdout, "%d unauthenticated operator requests in %.2fs (%d connections): %.0f/s; statuses %s\n",
		*n, el.Seconds(), *conc, float64(*n)/el.Seconds(), strings.Join(sc, " "))
	if counts[200] > 0 {
		return errors.New("an unauthenticated operator request succeeded")
	}
	return nil
}

// writeTimeline writes one CSV line per request, in the order they were
// scheduled: start offset and latency in microseconds, and status (-1 for a
// transport error).
func writeTimeline(path string, began, lat []time.Duration, status []int) error {
	var b bytes.Buffer
	b.WriteString("start_us,latency_us,status\n")
	for i := range lat {
		fmt.Fprintf(&b, "%d,%d,%d\n", began[i].Microseconds(), lat[i].Microseconds(), status[i])
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("loadtest: timeline: %w", err)
	}
	return nil
}

// warmConnections opens the client's connections before the clock starts.
// Otherwise an open-loop run's first requests each wait for a TCP handshake
// while up to conc connections are dialled at once, and the tail measures
// the load generator's start rather than the server. Each request holds its
// response unread until every one has been answered: a connection whose
// body is unread cannot be reused (/healthz answers with a body; one
// without would free its connection at once), so the conc requests open
// conc connections, left idle in the pool for the run.
func warmConnections(ctx context.Context, client *http.Client, url string, conc int) error {
	var wg sync.WaitGroup
	var answered sync.WaitGroup
	answered.Add(conc)
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			answered.Done()
			answered.Wait()
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("loadtest: opening %d connections: %w", conc, err)
	}
	return nil
}

func cmdLoadBaseline(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("loadtest baseline", "loadtest baseline --addr HOST:PORT --sandbox DIR --data DIR", stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "`host:port` to listen on")
	sandbox := fs.String("sandbox", "countersign-data/sandbox", "sandbox `directory` (operator keys)")
	data := fs.String("data", "", "`directory` for the baseline's own store (required)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *data == "" {
		fs.Usage()
		return errUsage
	}
	opKeys, err := loadOperatorKeys(filepath.Join(*sandbox, sandboxOperatorSet))
	if err != nil {
		return err
	}
	// The mandate cache is switched off: the baseline verifies both
	// signatures on every request.
	mv, err := pay.NewMandateVerifier(opKeys, &pay.MandateVerifierOptions{CacheSize: -1})
	if err != nil {
		return err
	}
	st, err := pebblestore.Open(*data, &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		return err
	}
	defer st.Close()
	_, sign, _ := ed25519.GenerateKey(rand.Reader)
	pad := bytes.Repeat([]byte("x"), 2048)
	reply := bytes.Repeat([]byte("y"), 440)
	var seq atomic.Uint64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var in pay.Instruction
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if _, err := pay.VerifyEnvelope(&in, mv); err != nil {
			http.Error(w, err.Error(), http.StatusForbidden)
			return
		}
		sum := sha256.Sum256(body)
		sig := ed25519.Sign(sign, sum[:])
		val := append(append(append([]byte(nil), sig...), sum[:]...), pad...)
		key := fmt.Appendf(nil, "baseline/%020d", seq.Add(1))
		if err := st.Update(r.Context(), func(txn store.Txn) error { return txn.Set(key, val[:2048]) }); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"sig":%q,"pad":%q}`, key, hex.EncodeToString(sig), reply)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(quietLogger().Handler(), slog.LevelWarn)}
	fmt.Fprintf(stdout, "baseline listening on http://%s\n", ln.Addr())
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
