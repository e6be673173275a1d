package durability

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/webhook"
)

var (
	seedFlag = flag.String("durability.seed", "",
		"run the power-cut test with this seed only (0: a fresh seed from the clock); default: the seeds in testdata/seeds.txt")
	cutsFlag = flag.Int("durability.cuts", 200, "power cuts per seed of the power-cut test")
)

// cutsPerEpoch is how many clones one running workload gives before the
// harness starts a fresh one: the record grows with the workload, and a
// full-depth verify of each clone costs in proportion.
const cutsPerEpoch = 10

// replaySample is how many payments acknowledged before the previous cut
// each cut replays, besides those acknowledged since.
const replaySample = 8

// seeds returns the seeds to run: -durability.seed, or testdata/seeds.txt.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	if *seedFlag != "" {
		s, err := strconv.ParseUint(*seedFlag, 10, 64)
		if err != nil {
			t.Fatalf("-durability.seed: %v", err)
		}
		if s == 0 {
			s = uint64(time.Now().UnixNano())
		}
		return []uint64{s}
	}
	f, err := os.Open("testdata/seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		s, err := strconv.ParseUint(line, 10, 64)
		if err != nil {
			t.Fatalf("testdata/seeds.txt: %v", err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("testdata/seeds.txt lists no seed")
	}
	return out
}

// epochConfig shapes one workload and its cuts.
type epochConfig struct {
	seed uint64
	cuts int
	// meanGap is the mean number of acknowledgements between two cuts.
	meanGap int
	// percent, if not nil, picks the UnsyncedDataPercent of each clone;
	// the default is rng.IntN(101).
	percent func(rng *rand.Rand) int
	// wrap, if set, wraps the crashable file system the live server uses
	// (the broken-sync test makes its syncs lie).
	wrap func(vfs.FS) vfs.FS
	// railFaults gives the live rail unknown outcomes at random.
	railFaults bool
	// afterSetup, if set, runs once the server is set up, before the
	// workload starts.
	afterSetup func()
	// ownLog keeps the rail's ledger in synchronous commits of its own
	// instead of sharing the store's log (fake.Options.SharedLog).
	ownLog bool
	// noShred keeps the maintenance goroutine from shredding (flushing).
	noShred bool
	payers  int
}

// cut is one clone and what had been acknowledged before it was taken.
type cut struct {
	n       int
	percent int
	fs      *vfs.MemFS
	exp     expectation
	at      time.Time // the live clock when it was taken
}

// epoch is one running workload over a crashable file system.
type epoch struct {
	cfg      epochConfig
	rng      *rand.Rand
	mem      *vfs.MemFS
	clk      *clock
	id       *identity
	w        *world
	acks     *acks
	receiver *httptest.Server
	endpoint string
	after    uint64 // seq of the endpoint's creation entry

	stop chan struct{}
	wg   sync.WaitGroup
	// errs are errors the live workload should never see.
	errMu sync.Mutex
	errs  []string
	// counts of what the workload did, for the log.
	statMu sync.Mutex
	stats  map[string]int
}

func (e *epoch) fail(format string, args ...any) {
	e.errMu.Lock()
	defer e.errMu.Unlock()
	if len(e.errs) < 20 {
		e.errs = append(e.errs, fmt.Sprintf(format, args...))
	}
}

func (e *epoch) count(what string) {
	e.statMu.Lock()
	defer e.statMu.Unlock()
	e.stats[what]++
}

// runEpoch starts a server on a fresh crashable file system, runs the
// workload, takes cfg.cuts clones at seeded random moments, stops, and
// returns the cuts and, last, the live file system after a clean stop.
func runEpoch(t *testing.T, ctx context.Context, cfg epochConfig) (e *epoch, cuts []cut) {
	t.Helper()
	e = &epoch{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0x6475726162696c)), mem: vfs.NewCrashableMem(),
		clk: newClock(), acks: newAcks(), stop: make(chan struct{}), stats: map[string]int{}}
	var err error
	if e.id, err = newIdentity(e.rng, e.clk); err != nil {
		t.Fatal(err)
	}
	var fs vfs.FS = e.mem
	if cfg.wrap != nil {
		fs = cfg.wrap(fs)
	}
	o := worldOptions{webhooks: true, ownLog: cfg.ownLog}
	if cfg.railFaults {
		o.rail = fake.Options{UnknownOutcomeRate: 0.03, Rand: fake.SeededRand(e.rng.Uint64())}
	}
	if e.w, err = openWorld(ctx, fs, e.id, e.clk, o); err != nil {
		t.Fatal(err)
	}
	e.receiver = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(e.receiver.Close)
	created, err := e.w.eps.Create(ctx, webhook.CreateRequest{URL: e.receiver.URL + "/hook", Events: []string{"payment.settled"}},
		audit.Actor{Kind: "operator", ID: operatorID}, "req_setup", "the durability receiver")
	if err != nil {
		t.Fatal(err)
	}
	e.endpoint = created.ID
	if e.after, err = e.w.log.Size(ctx); err != nil {
		t.Fatal(err)
	}

	if cfg.afterSetup != nil {
		cfg.afterSetup()
	}
	approvals := make(chan pay.Held, 64)
	refunds := make(chan refundable, 64)
	payers := cfg.payers
	if payers == 0 {
		payers = 4
	}
	for i := range payers {
		e.wg.Go(func() { e.payer(ctx, i, approvals, refunds) })
	}
	e.wg.Go(func() { e.approver(ctx, approvals, refunds) })
	e.wg.Go(func() { e.refunder(ctx, refunds) })
	e.wg.Go(func() { e.deliver(ctx) })
	e.wg.Go(func() { e.maintain(ctx) })

	// Cut at seeded random counts of acknowledgements.
	threshold, replayed := 0, 0
	for n := range cfg.cuts {
		threshold += 1 + e.rng.IntN(2*cfg.meanGap)
		for e.acks.count() < threshold {
			<-e.acks.progress
		}
		c := cut{n: n, exp: expectation{acks: e.acks.snapshot(), endpoint: e.endpoint, after: e.after}}
		// Replay what was acknowledged since the last cut, and a sample
		// of the rest (the clean stop at the end replays everything).
		c.exp.replay = map[int]bool{}
		for i := replayed; i < len(c.exp.acks.pays); i++ {
			c.exp.replay[i] = true
		}
		for range min(replayed, replaySample) {
			c.exp.replay[e.rng.IntN(replayed)] = true
		}
		replayed = len(c.exp.acks.pays)
		// A read shows only what is synced, so what it shows delivered
		// must survive the cut.
		if c.exp.delivered, err = deliveredEvents(ctx, e.w); err != nil {
			e.fail("listing deliveries before cut %d: %v", n, err)
		}
		if c.exp.seen, err = newestEntry(ctx, e.w); err != nil {
			e.fail("reading the record before cut %d: %v", n, err)
		}
		c.percent = e.rng.IntN(101)
		if cfg.percent != nil {
			c.percent = cfg.percent(e.rng)
		}
		c.at = e.clk.Now()
		c.fs = e.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.percent, RNG: e.rng})
		cuts = append(cuts, c)
	}
	close(e.stop)
	e.wg.Wait()
	// A clean stop keeps everything: the last check is the live files.
	final := cut{n: -1, percent: 100, exp: expectation{acks: e.acks.snapshot(), endpoint: e.endpoint, after: e.after}}
	if final.exp.delivered, err = deliveredEvents(ctx, e.w); err != nil {
		e.fail("listing deliveries at the end: %v", err)
	}
	final.at = e.clk.Now()
	if err := e.w.close(); err != nil {
		t.Errorf("closing the live server: %v", err)
	}
	final.fs = e.mem
	return e, append(cuts, final)
}

// newestEntry reads the newest entry of the record (zero when empty).
func newestEntry(ctx context.Context, w *world) (audit.Entry, error) {
	size, err := w.log.Size(ctx)
	if err != nil || size == 0 {
		return audit.Entry{}, err
	}
	return w.log.Get(ctx, size)
}

func deliveredEvents(ctx context.Context, w *world) (map[string]bool, error) {
	eps, err := w.eps.List(ctx, "", 100)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, ep := range eps.Data {
		got, err := deliveries(ctx, w, ep.ID)
		if err != nil {
			return nil, err
		}
		for ev, state := range got {
			if state == "delivered" {
				out[ev] = true
			}
		}
	}
	return out, nil
}

// refundable is a settled payment the refunder may refund.
type refundable struct {
	intentID string
	minor    int64
}

func (e *epoch) stopped() bool {
	select {
	case <-e.stop:
		return true
	default:
		return false
	}
}

// payer pays under fresh idempotency keys until the epoch stops; a
// payment of confirmAbove or more is held and handed to the approver.
func (e *epoch) payer(ctx context.Context, n int, approvals chan<- pay.Held, refunds chan<- refundable) {
	rng := rand.New(rand.NewPCG(e.cfg.seed, uint64(n)+1))
	for i := 0; !e.stopped(); i++ {
		key := fmt.Sprintf("p%d-%d", n, i)
		minor := 100 + rng.Int64N(confirmAbove-100)
		if rng.IntN(8) == 0 {
			minor = confirmAbove + rng.Int64N(10_000)
		}
		body, err := e.id.instruction(key, minor)
		if err != nil {
			e.fail("sign: %v", err)
			return
		}
		var res *pay.Result
		for range 4 {
			// A rail that did not answer, or the reconciler finishing the
			// payment meanwhile: retry as is, which resumes.
			res, err = e.w.svc.Pay(ctx, e.id.caller, body, "", "req_"+key)
			if !retryable(err) {
				break
			}
			e.count("pay retried")
		}
		switch {
		case retryable(err):
			e.count("pay left settling")
		case err != nil:
			e.fail("pay %s: %v", key, err)
		case res.Outcome == pay.OutcomeSettled:
			e.acks.pay(paid{key: key, body: body, res: *res})
			e.count("settled")
			if rng.IntN(4) == 0 {
				offer(refunds, refundable{res.IntentID, minor})
			}
		case res.Outcome == pay.OutcomeHeld:
			e.acks.pay(paid{key: key, body: body, res: *res})
			e.count("held")
			offer(approvals, *res.Held)
		default:
			e.fail("pay %s: unexpected outcome %+v", key, res)
		}
	}
}

// retryable reports whether err asks the client to retry as is.
func retryable(err error) bool {
	return errors.Is(err, pay.ErrRailUnavailable) || errors.Is(err, pay.ErrInFlight)
}

// offer hands v on if there is room; the workload never waits on a helper.
func offer[T any](c chan<- T, v T) {
	select {
	case c <- v:
	default:
	}
}

// approver approves held payments.
func (e *epoch) approver(ctx context.Context, approvals <-chan pay.Held, refunds chan<- refundable) {
	for {
		var h pay.Held
		select {
		case <-e.stop:
			return
		case h = <-approvals:
		}
		res, err := e.w.svc.Approve(ctx, pay.ApproveRequest{IntentID: h.IntentID, Challenge: h.Challenge, MandateID: h.MandateID,
			Rationale: "checked with the vendor", Acknowledged: true},
			pay.OperatorCall{Operator: operatorID, RequestID: "req_approve", Rationale: "checked with the vendor"})
		switch {
		case retryable(err):
			e.count("approval left settling")
		case err != nil:
			e.fail("approve %s: %v", h.IntentID, err)
		case res.Outcome == pay.OutcomeSettled:
			e.acks.approve(approved{intentID: h.IntentID, receipt: *res.Receipt})
			e.count("approved")
			offer(refunds, refundable{h.IntentID, res.Receipt.Amount.Minor})
		default:
			e.fail("approve %s: unexpected outcome %+v", h.IntentID, res)
		}
	}
}

// refunder refunds part of a settled payment, and sometimes the rest.
func (e *epoch) refunder(ctx context.Context, refunds <-chan refundable) {
	rng := rand.New(rand.NewPCG(e.cfg.seed, 0x7265))
	call := pay.OperatorCall{Operator: operatorID, RequestID: "req_refund", Rationale: "the customer returned it"}
	for {
		var p refundable
		select {
		case <-e.stop:
			return
		case p = <-refunds:
		}
		parts := []int64{p.minor / 2}
		if rng.IntN(2) == 0 {
			parts = append(parts, p.minor-p.minor/2)
		}
		for _, minor := range parts {
			res, err := e.w.svc.Refund(ctx, pay.RefundRequest{IntentID: p.intentID, AmountMinor: &minor, Rationale: call.Rationale}, call)
			if retryable(err) || errors.Is(err, pay.ErrRefundRefused) {
				// Unknown outcome, or the one before it still pending: the
				// reconciler finishes it.
				e.count("refund unresolved")
				break
			}
			if err != nil {
				e.fail("refund %s: %v", p.intentID, err)
				break
			}
			e.acks.refund(refunded{intentID: p.intentID, minor: minor, res: *res})
			e.count("refunded")
		}
	}
}

// deliver runs the webhook dispatcher after each bit of work, as its
// background loop would.
func (e *epoch) deliver(ctx context.Context) {
	for {
		select {
		case <-e.stop:
			return
		case <-e.acks.work:
		}
		if _, err := e.w.disp.Tick(ctx); err != nil {
			e.fail("webhook tick: %v", err)
		}
		e.count("webhook ticks")
	}
}

// maintain does the server's other background work, at seeded random
// counts of acknowledgements: reconcile, and shred (as memory erasure
// does), which flushes the memtable, compacts, and overwrites the obsolete
// write-ahead logs. Without the shreds the workload would never leave its
// first log, and no cut would fall on a flush or a compaction.
func (e *epoch) maintain(ctx context.Context) {
	rng := rand.New(rand.NewPCG(e.cfg.seed, 0x6d61))
	nextReconcile, nextShred := 1+rng.IntN(12), 1+rng.IntN(12)
	for {
		select {
		case <-e.stop:
			return
		case <-e.acks.maintain:
		}
		n := e.acks.count()
		if n >= nextReconcile {
			if _, err := e.w.svc.Reconcile(ctx); err != nil {
				e.fail("reconcile: %v", err)
			}
			e.count("reconciles")
			nextReconcile = n + 1 + rng.IntN(12)
		}
		if n >= nextShred && !e.cfg.noShred {
			if err := e.w.st.Shred(ctx, [][2][]byte{{[]byte("durability/"), []byte("durability0")}}); err != nil {
				e.fail("shred: %v", err)
			}
			e.count("shreds")
			nextShred = n + 1 + rng.IntN(12)
		}
	}
}

// checkCuts recovers every cut, two at a time, and returns their reports
// in order.
func (e *epoch) checkCuts(ctx context.Context, cuts []cut) []*report {
	out := make([]*report, len(cuts))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, c := range cuts {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			clk := newClock()
			clk.base = c.at.Add(time.Hour)
			out[i] = recoverAndCheck(ctx, c.fs, e.id, clk, c.exp, worldOptions{webhooks: true, ownLog: e.cfg.ownLog})
		})
	}
	wg.Wait()
	return out
}

// TestPowerCut runs the workload under hundreds of power cuts and holds
// every recovered server to what was acknowledged before its cut.
func TestPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("power cuts take tens of seconds")
	}
	ctx := t.Context()
	start := time.Now()
	total, checked := 0, 0
	for _, seed := range seeds(t) {
		t.Logf("seed %d (replay: go test ./internal/durability -run 'TestPowerCut$' -durability.seed %d)", seed, seed)
		master := rand.New(rand.NewPCG(seed, 0))
		for ep := 0; ep*cutsPerEpoch < *cutsFlag; ep++ {
			cfg := epochConfig{seed: master.Uint64(), cuts: min(cutsPerEpoch, *cutsFlag-ep*cutsPerEpoch),
				meanGap: 3 + master.IntN(6), railFaults: true, ownLog: master.IntN(4) == 0}
			e, cuts := runEpoch(t, ctx, cfg)
			for _, s := range e.errs {
				t.Errorf("seed %d epoch %d (%d): live workload: %s", seed, ep, cfg.seed, s)
			}
			reps := e.checkCuts(ctx, cuts)
			maxEntries, delivered := 0, 0
			for i, rep := range reps {
				c := cuts[i]
				if c.n >= 0 {
					total++
				}
				checked += c.exp.acks.len()
				maxEntries = max(maxEntries, rep.entries)
				delivered = max(delivered, len(c.exp.delivered))
				if !rep.ok() {
					what := fmt.Sprintf("cut %d (unsynced kept %d%%", c.n, c.percent)
					if c.n < 0 {
						what = "restart after the clean stop (nothing cut"
					}
					t.Errorf("seed %d epoch %d (epoch seed %d) %s, %d acknowledged, %d intents, %d entries):%s",
						seed, ep, cfg.seed, what, c.exp.acks.len(), rep.intents, rep.entries, rep)
				}
			}
			t.Logf("epoch %d (seed %d, rail ledger own log %v): %d cuts, up to %d entries and %d webhook deliveries; workload %v",
				ep, cfg.seed, cfg.ownLog, len(cuts)-1, maxEntries, delivered, e.stats)
		}
	}
	t.Logf("%d power cuts, %d acknowledged outcomes held against them, in %v", total, checked, time.Since(start).Round(time.Millisecond))
}
