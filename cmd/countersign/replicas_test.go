package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pgstore"
)

// pgTestStore returns a --store URL on a schema of its own in the test
// database (COUNTERSIGN_TEST_POSTGRES), dropped when the test ends; the
// test is skipped without the variable.
func pgTestStore(t *testing.T, prefix string) (storeURL string) {
	t.Helper()
	base := os.Getenv("COUNTERSIGN_TEST_POSTGRES")
	if base == "" {
		t.Skip("set COUNTERSIGN_TEST_POSTGRES (e.g. postgres://postgres@127.0.0.1:5432/test) to run the server on PostgreSQL")
	}
	schema := fmt.Sprintf("%s_%d_%d", prefix, os.Getpid(), time.Now().UnixNano()%1_000_000)
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	return base + sep + "schema=" + schema
}

// openTestStore opens a --store URL the way serve does.
func openTestStore(t *testing.T, storeURL string) store.Store {
	t.Helper()
	st, err := openStore(context.Background(), serveConfig{store: storeURL}, nil, &pgstore.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// replicas is several reference servers on one data directory (their
// keys and sandbox) and one database, each on its own port with a base
// URL of its own, as a team runs them behind a load balancer.
type replicas struct {
	bin, dir string
	flags    []string
	mu       sync.Mutex // guards procs
	procs    []*serverProc
	addrs    []string
}

func startReplicas(t *testing.T, n int, storeURL string, flags ...string) *replicas {
	t.Helper()
	// A short rail timeout: a payment a killed replica left settling is
	// resumed by the others within twice that (pay.Options.SharedStore).
	r := &replicas{bin: binary(t), dir: t.TempDir(), flags: append([]string{"--store", storeURL, "--rail-timeout", "2s"}, flags...)}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.addrs = append(r.addrs, l.Addr().String())
		l.Close()
	}
	r.procs = make([]*serverProc, n)
	for i := range n { // the first start provisions the sandbox; the others find it
		r.procs[i] = r.start(t, i)
	}
	t.Cleanup(func() {
		for _, p := range r.all() {
			p.term()
		}
	})
	return r
}

func (r *replicas) start(t *testing.T, i int) *serverProc {
	args := append([]string{"--addr", r.addrs[i], "--base-url", "http://" + r.addrs[i]}, r.flags...)
	return startProc(t, r.bin, r.dir, args...)
}

func (r *replicas) all() []*serverProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*serverProc(nil), r.procs...)
}

func (r *replicas) url(i int) string { return "http://" + r.addrs[i] }

// revive restarts every replica that was killed.
func (r *replicas) revive(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.procs {
		if p.cmd.ProcessState != nil {
			r.procs[i] = r.start(t, i)
		}
	}
}

func (r *replicas) sandbox() string { return filepath.Join(r.dir, "sandbox") }

// streamSeqs follows /audit/stream on base from the start of the record
// and sends the seq of every entry it receives, until ctx ends.
func streamSeqs(ctx context.Context, t *testing.T, base, bearer string, out chan<- uint64) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/audit/stream?after=0", nil)
	req.Header.Set("Authorization", bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.Errorf("stream on %s: %v", base, err)
		}
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("stream on %s: HTTP %d", base, resp.StatusCode)
		return
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct{ Seq uint64 }
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Errorf("stream on %s: %v", base, err)
			return
		}
		select {
		case out <- e.Seq:
		case <-ctx.Done():
			return
		}
	}
}

// TestReplicas runs three reference servers on one PostgreSQL database and
// drives them as one service: payments spread over all three, some keys
// sent to two replicas at once, held payments approved through another
// replica than the one that held them, and the kill switch engaged
// through one replica refusing payments on the others before the
// operator's call returns. Then: every acknowledged payment settled
// exactly once (the rail's ledger, the record's receipts and the answers
// agree), every key replays its first answer on any replica, the record
// verifies, and each replica's /audit/stream delivered every entry, the
// others' included, in order and without a gap.
//
// It runs twice: with the sandbox rails' latency, where a payment is
// decided, then settled and recorded (two commits), and with it off,
// where the rails answer at once and a payment is decided, settled and
// recorded in one commit (settle.InstantSettler).
func TestReplicas(t *testing.T) {
	for _, tc := range []struct{ name, schema, latency string }{
		{"rail latency", "cs_replicas", "1ms-3ms"},
		{"rails answer at once", "cs_replicas_instant", "off"},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplicas(t, tc.schema, tc.latency) })
	}
}

func testReplicas(t *testing.T, schema, latency string) {
	storeURL := pgTestStore(t, schema)
	rs := startReplicas(t, 3, storeURL, "--sandbox-latency", latency, "--agent-rate", "100000", "--agent-burst", "100000",
		"--breaker-after", "100000")
	load := newPayLoad(t, rs.sandbox(), "replica", 240)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	streams := make([]chan uint64, 3)
	for i := range streams {
		streams[i] = make(chan uint64, 100_000)
		go streamSeqs(ctx, t, rs.url(i), load.bearer, streams[i])
	}

	// Purchases first, while the mandate's period budget is whole.
	operatorKey := filepath.Join(rs.sandbox(), sandboxOperatorKey)
	orders := buyAcrossReplicas(t, rs, operatorKey, "shop")

	// Payments over all three; every fifth key is also sent, at the same
	// moment, to the next replica.
	answers := make([]*answer, len(load.bodies))
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				targets := []int{i % 3}
				if i%5 == 0 {
					targets = append(targets, (i+1)%3)
				}
				var both sync.WaitGroup
				got := make([]*answer, len(targets))
				for j, r := range targets {
					both.Add(1)
					go func() {
						defer both.Done()
						for attempt := 0; attempt < 50; attempt++ {
							if a, ok := load.send(t, rs.url(r), i); ok {
								got[j] = &a
								return
							}
							time.Sleep(20 * time.Millisecond)
						}
					}()
				}
				both.Wait()
				for _, a := range got {
					if a == nil {
						t.Errorf("key %d: no definite answer", i)
						continue
					}
					if got[0] != nil && (a.status != got[0].status || (a.status == 200 && receiptID(t, a) != receiptID(t, got[0]))) {
						t.Errorf("key %d sent to two replicas at once: %d %s and %d %s", i, got[0].status, got[0].body, a.status, a.body)
					}
				}
				mu.Lock()
				answers[i] = got[0]
				mu.Unlock()
			}
		}()
	}
	for i := range load.bodies {
		work <- i
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Held payments approved through another replica than the one that
	// held them.
	approved := 0
	for i, a := range answers {
		if a.status != 202 || approved == 6 {
			continue
		}
		var held map[string]any
		if err := json.Unmarshal(a.body, &held); err != nil {
			t.Fatal(err)
		}
		str := func(k string) string { s, _ := held[k].(string); return s }
		r := cli(t, "operator", "approve", "--url", rs.url((i+1)%3), "--key", operatorKey, "--intent", str("intentId"),
			"--challenge", str("challenge"), "--mandate-id", str("mandateId"), "--ack", "--rationale", "checked the invoice with the vendor")
		if r.status != 200 || r.str("intentId") != str("intentId") {
			t.Fatalf("approval of %s through another replica: %s", str("intentId"), r.out)
		}
		approved++
	}
	if approved == 0 {
		t.Fatal("no payment was held")
	}

	// The kill switch engaged through one replica stops the others at once.
	extra := newPayLoad(t, rs.sandbox(), "frozen", 8)
	if r := cli(t, "operator", "kill-switch", "--url", rs.url(2), "--key", operatorKey, "--engage", "--rationale", "replica drill: freeze"); r.status != 200 {
		t.Fatalf("engage: %s", r.out)
	}
	for i := range 2 {
		a, err := extra.post(rs.url(i), i)
		if err != nil || a.status != 503 || !strings.Contains(string(a.body), "frozen") {
			t.Fatalf("payment on replica %d right after the kill switch was engaged on replica 2: %d %s", i, a.status, a.body)
		}
	}
	if r := cli(t, "operator", "kill-switch", "--url", rs.url(0), "--key", operatorKey, "--release", "--rationale", "replica drill: thaw"); r.status != 200 {
		t.Fatalf("release: %s", r.out)
	}
	if a, ok := extra.send(t, rs.url(1), 2); !ok || a.status != 200 {
		t.Fatalf("payment on replica 1 after the release on replica 0: %d %s", a.status, a.body)
	}

	load.checkReplays(t, answers, rs.url(1), rs.url(2), rs.url(0))
	orders += buyAcrossReplicas(t, rs, operatorKey, "shop-late")

	// Every stream catches up with the record, without a gap.
	st := openTestStore(t, storeURL)
	lg := recordReader(t, rs.dir, st)
	size, err := lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range streams {
		next := uint64(1)
		deadline := time.After(30 * time.Second)
		for next <= size {
			select {
			case seq := <-ch:
				if seq != next {
					t.Fatalf("replica %d's stream sent entry %d where %d was due", i, seq, next)
				}
				next++
			case <-deadline:
				t.Fatalf("replica %d's stream stopped at entry %d of %d", i, next-1, size)
			}
		}
	}
	cancel()
	v := cli(t, "audit", "verify", "--url", rs.url(2), "--credential", filepath.Join(rs.sandbox(), sandboxCredential),
		"--key", filepath.Join(rs.dir, recordPubFile))
	if v.code != 0 {
		t.Fatalf("audit verify through replica 2: %s", v.out)
	}
	for _, p := range rs.all() {
		p.term()
	}
	settled, answered, size := checkExactlyOnce(t, st, lg, answers)
	completed := 0
	for e, err := range lg.Entries(context.Background(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "commerce.completed" {
			completed++
		}
	}
	if completed != orders {
		t.Fatalf("%d purchases answered with an order, %d commerce.completed entries", orders, completed)
	}
	t.Logf("3 replicas: %d payments, %d settled (%d answered 200, %d approved), %d purchases, %d record entries, streams gap-free on all three",
		len(answers), settled, answered, approved, orders, size)
}

// buyAcrossReplicas registers a fake UCP merchant through replica 0,
// quotes through replica 1 and buys the cart through replicas 2 and 0 at
// once under one idempotency key, several times: one order each, the same
// on both. It returns the number of orders.
func buyAcrossReplicas(t *testing.T, rs *replicas, operatorKey, id string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	fm := exec.Command(rs.bin, "fake-merchant", "--protocol", "ucp", "--addr", addr)
	if err := fm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fm.Process.Kill(); _ = fm.Wait() })
	profile := "http://" + addr + "/.well-known/ucp"
	for range 100 {
		if resp, err := http.Get(profile); err == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := cli(t, "operator", "merchant", "add", "--url", rs.url(0), "--key", operatorKey, "--id", id, "--protocol", "ucp",
		"--profile-url", profile, "--rationale", "a merchant for every replica"); r.status != 201 {
		t.Fatalf("register the merchant through replica 0: %s", r.out)
	}
	sandbox := rs.sandbox()
	buy := func(replica int, extra ...string) cliResult {
		return cli(t, append([]string{"buy", "--url", rs.url(replica), "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
			"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", filepath.Join(sandbox, sandboxMandate),
			"--merchant", id, "--rail", "ucp"}, extra...)...)
	}
	orders := 0
	for i := range 4 {
		q := buy(1, "--quote", "--line", "sku-mug:2,sku-book")
		if q.status != 200 || q.str("status") != "ready" {
			t.Fatalf("quote through replica 1: %s", q.out)
		}
		key := fmt.Sprintf("%s-buy-%d", id, i)
		got := make([]cliResult, 2)
		var wg sync.WaitGroup
		for j, r := range []int{2, 0} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// At the same instant, or a moment after the first while
				// it is in flight. The second server may find the intent
				// settling with the first's completion on its way to the
				// merchant: it answers 409 in flight, and a careful
				// client sends the same request again until the first
				// has answered.
				time.Sleep(time.Duration(i%2*j) * 30 * time.Millisecond)
				for try := 0; ; try++ {
					got[j] = buy(r, "--cart", q.str("id"), "--line", "sku-mug:2,sku-book", "--idempotency-key", key)
					if got[j].status != 409 || try == 100 {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		for _, g := range got {
			if g.status != 200 || g.str("id") == "" || g.str("id") != got[0].str("id") {
				t.Fatalf("the same purchase through replicas 2 and 0 at once: %s\n%s", got[0].out, got[1].out)
			}
		}
		orders++
	}
	return orders
}

// failoverLoad sends every payment of load to the replicas, each failing
// over to the next replica until it has a definite answer (as a load
// balancer does), while disrupt is called times, at random moments, from
// another goroutine. It returns the answers and how many disruptions
// happened before the load was done.
func failoverLoad(t *testing.T, rs *replicas, load *payLoad, times int, disrupt func(*rand.Rand)) ([]*answer, int) {
	answers := make([]*answer, len(load.bodies))
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
		n := 0
		defer func() { done <- n }()
		for n < times {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
			}
			disrupt(rng)
			n++
		}
	}()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				for try := 0; answers[i] == nil; try++ {
					if try == 600 {
						t.Errorf("key %d: no definite answer from any replica", i)
						break
					}
					if a, ok := load.send(t, rs.url((i+try)%3), i); ok {
						answers[i] = &a
					} else if try%3 == 2 {
						time.Sleep(50 * time.Millisecond) // every replica refused: wait a little
					}
				}
			}
		}()
	}
	// Paced, so that the load lasts as long as the disruptions take
	// however fast the replicas answer.
	pace := time.NewTicker(time.Duration(times) * 600 * time.Millisecond / time.Duration(len(load.bodies)))
	for i := range load.bodies {
		<-pace.C
		work <- i
	}
	pace.Stop()
	close(work)
	wg.Wait()
	close(stop)
	n := <-done
	if t.Failed() {
		t.FailNow()
	}
	return answers, n
}

// receiptID is the intent a 200 answer's receipt is for.
func receiptID(t *testing.T, a *answer) string {
	var r struct{ IntentID string }
	if err := json.Unmarshal(a.body, &r); err != nil {
		t.Fatal(err)
	}
	return r.IntentID
}

// TestReplicasSurviveSIGKILL is the SIGKILL harness against one of three
// replicas under load: payments go to all three, each failing over to the
// next replica until it has a definite answer (as a load balancer does),
// while one replica at a time is killed at random moments and restarted;
// then nothing acknowledged is lost, nothing settled twice, every key
// replays its first answer, and the record verifies. It runs on rails with
// latency and faults, and on rails that answer at once (one commit a
// payment).
func TestReplicasSurviveSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		rail         []string
	}{
		{"latency and faults", "cs_replicakill", []string{"--sandbox-latency", "1ms-4ms", "--sandbox-unknown-rate", "0.05"}},
		{"rails answer at once", "cs_replicakill_instant", []string{"--sandbox-latency", "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplicasSurviveSIGKILL(t, tc.schema, tc.rail) })
	}
}

func testReplicasSurviveSIGKILL(t *testing.T, schema string, rail []string) {
	storeURL := pgTestStore(t, schema)
	rs := startReplicas(t, 3, storeURL, append([]string{"--agent-rate", "100000", "--agent-burst", "100000", "--breaker-after", "100000"}, rail...)...)
	kills := max(6, *payKills/3)
	load := newPayLoad(t, rs.sandbox(), "replicakill", 50*kills)
	answers, n := failoverLoad(t, rs, load, kills, func(rng *rand.Rand) {
		rs.all()[rng.IntN(3)].kill()
		rs.revive(t)
	})
	rs.revive(t)
	load.checkReplays(t, answers, rs.url(0), rs.url(1), rs.url(2))
	for _, p := range rs.all() {
		p.term()
	}
	st := openTestStore(t, storeURL)
	settled, settledAnswers, size := checkExactlyOnce(t, st, recordReader(t, rs.dir, st), answers)
	if settledAnswers != settled {
		t.Fatalf("%d settlements, %d settled answers: with no approvals they must be equal", settled, settledAnswers)
	}
	t.Logf("%d SIGKILLs of one of 3 replicas under load; %d payments; %d settled; %d record entries verify", n, len(answers), settled, size)
	if n < kills/2 {
		t.Fatalf("only %d kills of %d happened under load", n, kills)
	}
}
