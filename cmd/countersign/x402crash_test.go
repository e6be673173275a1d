package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/fakex402"
	"github.com/countersign/countersign/x402/fetch"
)

// killMidX402 is where a kill plan SIGKILLs the server in the x402 crash
// test: while the resource holds the answer of a paid request it has
// settled. The money moved; the server has not heard.
const killMidX402 = "x402-paid"

// paidTap is the front door of the fake x402 resource server in the crash
// test. A paid request (one carrying PAYMENT-SIGNATURE) runs at the fake
// at once, so it settles, while its answer is held for 1–5 ms; then the
// kill plan is told, and may SIGKILL the server right then. (A
// settle-then-drop resource drops the connection itself: it goes straight
// through.)
type paidTap struct {
	fake http.Handler
	plan *killPlan

	mu   sync.Mutex
	rng  *rand.Rand
	busy int // paid requests being handled
}

func (p *paidTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(x402.HeaderPaymentSignature) == "" {
		p.fake.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	p.busy++
	delay := time.Millisecond + time.Duration(p.rng.Int64N(int64(4*time.Millisecond)))
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.busy--
		p.mu.Unlock()
	}()
	if r.URL.Path == "/drop" {
		p.fake.ServeHTTP(w, r) // settles, then hijacks and closes the connection
		return
	}
	rec := httptest.NewRecorder()
	p.fake.ServeHTTP(rec, r) // settles (or answers a resend of a settled payment again)
	time.Sleep(delay)
	p.plan.event(killMidX402, false)
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// quiet reports whether no paid request is being handled.
func (p *paidTap) quiet() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy == 0
}

// fetchAnswer is a paid fetch's definite answer.
type fetchAnswer struct {
	intent, nonce, transaction, body string
}

// TestX402FetchesSurviveSIGKILL sends 240 x402 fetches from 6 concurrent
// clients through the server to a fake resource server in this process
// that outlives the server (a resource that settles and answers, one that
// settles and drops the connection, one that settles and answers 500),
// while the server is SIGKILLed 16 times — while the resource holds the
// answer of a payment it settled, and after a random number of answers —
// and restarted on the same data directory. Every fetch is sent again,
// the same signed request under the same idempotency key, until it
// answers 200. Then: no double payment (one settlement per nonce, one
// settlement per fetch, one intent per fetch); no lost acknowledged
// payment (every 200, asked again, is the same intent, transaction and
// body, and the resource holds that settlement); no money moved that the
// server does not know about (every settlement at the resource belongs to
// a fetch answered 200, of the path it paid for); one authorization was
// signed per fetch (lost answers are learnt by resending it, never by
// signing another); and the record verifies with signatures.
//
// X402CRASH_SEED=N replays a run's kill schedule (the kill points, not
// the timing).
func TestX402FetchesSurviveSIGKILL(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("X402CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("X402CRASH_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with X402CRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 31))

	// The resource lives in the test process, so it outlives every kill.
	// It remembers its payments (ReplaySettled): a resent authorization
	// it settled answers 200 again with the same PAYMENT-RESPONSE. Its
	// offers last 30 s, within the server's cap of 60 s: every lost answer
	// is learnt by a resend well before validBefore (the chain is asked
	// only validBefore plus 2 minutes of finality later).
	paths := []string{"/paid", "/paid", "/drop", "/unknown"}
	fake := fakex402.New(&fakex402.Options{ReplaySettled: true, MaxTimeoutSeconds: 30, Resources: []fakex402.Resource{
		{Path: "/paid"},
		{Path: "/drop", Scenario: fakex402.ScenarioSettleThenDrop},
		{Path: "/unknown", Scenario: fakex402.ScenarioUnknownOutcome},
	}})
	plan := &killPlan{}
	tap := &paidTap{fake: fake.Handler(), plan: plan, rng: rand.New(rand.NewPCG(seed, 32))}
	resource := httptest.NewServer(tap)
	defer resource.Close()
	flags := []string{"--sandbox-latency", "off", "--x402-fake-chain", resource.URL, "--x402-max-timeout", "60s",
		"--breaker-after", "100000", "--agent-rate", "100000", "--agent-burst", "100000"}
	srv := startProc(t, bin, dir, flags...)
	defer func() { srv.kill() }()

	sandbox := filepath.Join(dir, sandboxDirName)
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, sandboxAgentKey))
	if err != nil {
		t.Fatal(err)
	}
	mandate := strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxMandate)))
	bearer := "Bearer " + strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxCredential)))

	// Fetches of 1 cent each (10,000 base units of USDC), below the
	// mandate's confirmation threshold: nothing is held or denied.
	const n, wantKills, workers = 240, 16, 6
	pathOf := make([]string, n)
	bodies := make([][]byte, n)
	for i := range n {
		pathOf[i] = paths[i%len(paths)]
		r := fetch.Request{Method: http.MethodGet, URL: resource.URL + pathOf[i], MaxAmount: pay.Amount{Minor: 5, Currency: "USD"},
			IdempotencyKey: fmt.Sprintf("x402crash-%03d", i), Purpose: "x402 crash test",
			Terms: pay.Terms{Rail: fetch.RailName, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Mandate: mandate}}
		if err := fetch.Sign(&r, agentKey); err != nil {
			t.Fatal(err)
		}
		bodies[i], _ = json.Marshal(r)
	}

	client := &http.Client{Timeout: 20 * time.Second}
	// send posts fetch i once; final is true for a definite paid answer.
	// No answer (the server died), rail.unavailable (the outcome is not
	// known yet) and idempotency.in_flight are asked again later.
	send := func(base string, i int) (a fetchAnswer, final bool) {
		req, _ := http.NewRequest(http.MethodPost, base+"/x402/fetch", bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		resp, err := client.Do(req)
		if err != nil {
			return fetchAnswer{}, false // killed mid-request: outcome unknown to the client
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fetchAnswer{}, false
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var f fetch.Fetched
			if err := json.Unmarshal(b, &f); err != nil || !f.Paid || !f.Delivered || f.Status != http.StatusOK ||
				f.IntentID == "" || f.Body == "" || f.Payment == nil || f.Payment.Transaction == "" ||
				f.Receipt == nil || f.Receipt.IntentID != f.IntentID || f.Receipt.Reference != f.Payment.Transaction {
				t.Errorf("fetch %d: a 200 that is not a delivered payment: %s", i, b)
				return fetchAnswer{}, false
			}
			return fetchAnswer{intent: f.IntentID, nonce: f.Payment.Nonce, transaction: f.Payment.Transaction, body: f.Body}, true
		case http.StatusServiceUnavailable, http.StatusConflict:
			var p struct{ Code string }
			_ = json.Unmarshal(b, &p)
			if p.Code == pay.CodeRailUnavailable || p.Code == pay.CodeInFlight || p.Code == contract.CodeStoreUnavailable {
				return fetchAnswer{}, false
			}
		}
		t.Errorf("fetch %d: unexpected %d %s", i, resp.StatusCode, b)
		return fetchAnswer{}, false
	}

	kinds := []string{killMidX402, killAfterAnswer}
	answers := make([]*fetchAnswer, n)
	var mu sync.Mutex // guards answers
	killsOf := map[string]int{}
	kills, rounds := 0, 0
	start := time.Now()
	for ; ; rounds++ {
		var todo []int
		for i := range n {
			if answers[i] == nil {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatalf("%d fetches still without a 200 after %d rounds and %d kills: %v", len(todo), rounds, kills, todo)
		}
		kind := ""
		if kills < wantKills {
			kind = kinds[kills%len(kinds)]
		}
		// Kill after 1 to 20 events, so the kills spread over the run.
		plan.arm(srv, kind, 1+rng.IntN(max(1, min(20, len(todo)/4))))
		sendRound(plan, workers, todo, func(i int) {
			a, ok := send(srv.base, i)
			if !ok {
				return
			}
			mu.Lock()
			if answers[i] == nil {
				answers[i] = &a
			} else if *answers[i] != a {
				t.Errorf("fetch %d answered %+v, then %+v", i, *answers[i], a)
			}
			mu.Unlock()
			plan.event(killAfterAnswer, false)
		})
		if plan.killed() {
			kills++
			killsOf[kind]++
			srv = startProc(t, bin, dir, flags...)
		} else if kind == "" {
			// The last fetches wait on their resolution: ask again in a moment.
			time.Sleep(20 * time.Millisecond)
		}
	}
	loop := time.Since(start)
	// A round whose kill never came leaves the plan armed: disarm it, or
	// the replays below could kill the server they are checking.
	plan.arm(srv, "", 0)
	waitFor(t, tap.quiet)

	// Asked again, every fetch answers what it answered first.
	for i, a := range answers {
		again, ok := send(srv.base, i)
		if !ok || again != *a {
			t.Fatalf("fetch %d answered %+v, then %+v", i, *a, again)
		}
	}
	srv.term()

	out, err := exec.Command(bin, "audit", "verify", "--data", dir, "--signatures").CombinedOutput()
	if err != nil {
		t.Fatalf("audit verify after %d kills: %v\n%s", kills, err, out)
	}

	// No double payment: one settlement per nonce at the resource.
	settled := map[[32]byte]fakex402.Settlement{}
	for _, s := range fake.Settlements() {
		if prev, dup := settled[s.Authorization.Nonce]; dup {
			t.Errorf("double payment: nonce %x settled twice (transactions %s and %s)", s.Authorization.Nonce, prev.Transaction, s.Transaction)
		}
		settled[s.Authorization.Nonce] = s
	}
	// No lost payment: every fetch's 200 is a settlement of its own, of
	// the path it asked for.
	fetchOf := map[[32]byte]int{} // nonce → fetch
	for i, a := range answers {
		nonce := x402.NonceFromID(a.intent)
		if a.nonce != "0x"+hex.EncodeToString(nonce[:]) {
			t.Errorf("fetch %d: intent %s answered nonce %s", i, a.intent, a.nonce)
		}
		if j, dup := fetchOf[nonce]; dup {
			t.Errorf("double payment: fetches %d and %d answered the same intent %s", j, i, a.intent)
		}
		fetchOf[nonce] = i
		s, ok := settled[nonce]
		switch {
		case !ok:
			t.Errorf("lost payment: fetch %d was answered 200 (intent %s, transaction %s) but the resource holds no settlement of its nonce", i, a.intent, a.transaction)
		case s.Transaction != a.transaction || s.Path != pathOf[i]:
			t.Errorf("fetch %d answered transaction %s for %s; the resource settled %s for %s", i, a.transaction, pathOf[i], s.Transaction, s.Path)
		}
	}
	// No money moved that the server does not know about.
	for nonce, s := range settled {
		if _, ok := fetchOf[nonce]; !ok {
			t.Errorf("the resource settled nonce %x (transaction %s, %s), which no fetch was answered with", nonce, s.Transaction, s.Path)
		}
	}

	// What the record says: one authorization and one x402.paid per
	// fetch, each paid on the resource's answer or by resending the same
	// authorization; never by the chain (no authorization expired).
	ctx := context.Background()
	lg, closeData := openStoppedRecord(t, dir)
	defer closeData()
	authorized := map[string]int{}  // intent → x402.authorization entries
	paidBy := map[string][]string{} // intent → resolvedBy of its x402.paid entries
	resent := 0
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case fetch.EntryAuthorization:
			authorized[e.IntentID]++
		case fetch.EntryPaid:
			var d struct {
				ResolvedBy  string `json:"resolvedBy"`
				Transaction string `json:"transaction"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			paidBy[e.IntentID] = append(paidBy[e.IntentID], d.ResolvedBy)
			if d.ResolvedBy == "resend" {
				resent++
			}
		}
	}
	for i, a := range answers {
		if authorized[a.intent] != 1 || len(paidBy[a.intent]) != 1 {
			t.Errorf("fetch %d (intent %s): %d x402.authorization entries, x402.paid %v", i, a.intent, authorized[a.intent], paidBy[a.intent])
		}
		if by := paidBy[a.intent]; len(by) == 1 && by[0] != "answer" && by[0] != "resend" {
			t.Errorf("fetch %d (intent %s) paid by %q", i, a.intent, by[0])
		}
	}
	if len(authorized) != n || len(paidBy) != n {
		t.Errorf("%d intents authorized, %d paid, for %d fetches", len(authorized), len(paidBy), n)
	}
	// Every /drop and /unknown fetch lost its first answer and was paid
	// by the resend of its one authorization; so were those killed before
	// their answer.
	if resent < n/2 {
		t.Errorf("only %d payments learnt by a resend; %d fetches lost their first answer", resent, n/2)
	}

	t.Logf("%d SIGKILLs in %d rounds (%d while the resource held a settled payment's answer, %d after an answer) in %v; "+
		"%d fetches paid once each (%d settlements at the resource = 200 answers = x402.paid entries, %d learnt by resending the same authorization); %s",
		kills, rounds, killsOf[killMidX402], killsOf[killAfterAnswer], loop.Round(time.Millisecond),
		n, len(settled), resent, strings.TrimSpace(string(out)))
	if kills < wantKills*2/3 || killsOf[killMidX402] < 3 {
		t.Fatalf("only %d kills, %d while the resource held a settled payment's answer", kills, killsOf[killMidX402])
	}
}
