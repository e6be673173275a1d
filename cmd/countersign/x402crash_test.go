package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/fakex402"
	"github.com/countersign/countersign/x402/fetch"
)

// paidTap is the front door of the fake x402 resource server in the crash
// test. A paid request (PAYMENT-SIGNATURE) is settled by the fake; when
// armed, the tap then SIGKILLs the server before the answer leaves: the
// money moved and the server never heard of it.
type paidTap struct {
	fake  http.Handler
	kill  func()
	armed atomic.Bool

	mu  sync.Mutex
	rng *rand.Rand
}

func (p *paidTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(x402.HeaderPaymentSignature) == "" || r.URL.Path != "/paid" || !p.armed.Load() {
		p.fake.ServeHTTP(w, r)
		return
	}
	p.mu.Lock()
	now := p.rng.IntN(3) == 0
	p.mu.Unlock()
	if !now || !p.armed.CompareAndSwap(true, false) {
		p.fake.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.fake.ServeHTTP(rec, r) // settles
	p.kill()
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// fetchAnswer is a paid fetch's definite answer.
type fetchAnswer struct {
	intent, transaction, body string
}

// TestX402FetchesSurviveSIGKILL sends x402 fetches through the server to a
// fake resource server in this process, SIGKILLs the server between the
// resource's settlement and its answer (and at random), restarts it, and
// retries every fetch under its idempotency key until it answers. Then:
// every settlement at the resource belongs to exactly one fetch and every
// fetch to one settlement (0 double payments, 0 lost ones); every answer,
// asked again, is the same; the record verifies.
func TestX402FetchesSurviveSIGKILL(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	fake := fakex402.New(&fakex402.Options{ReplaySettled: true, Resources: []fakex402.Resource{
		{Path: "/paid"}, {Path: "/drop", Scenario: fakex402.ScenarioSettleThenDrop}}})
	var (
		mu     sync.Mutex
		srv    *serverProc
		killed atomic.Int64 // SIGKILLs made; the server of the moment is dead when it grew
	)
	current := func() *serverProc { mu.Lock(); defer mu.Unlock(); return srv }
	kill := func(p *serverProc) { p.kill(); killed.Add(1) }
	tap := &paidTap{fake: fake.Handler(), kill: func() { kill(current()) }, rng: rand.New(rand.NewPCG(uint64(os.Getpid()), 31))}
	resource := httptest.NewServer(tap)
	defer resource.Close()
	args := []string{"--sandbox-latency", "off", "--x402-fake-chain", resource.URL, "--agent-rate", "100000", "--agent-burst", "100000"}
	start := func() {
		p := startProc(t, bin, dir, args...)
		mu.Lock()
		srv = p
		mu.Unlock()
	}
	start()

	sandbox := filepath.Join(dir, sandboxDirName)
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, sandboxAgentKey))
	if err != nil {
		t.Fatal(err)
	}
	mandate := strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxMandate)))
	bearer := "Bearer " + strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxCredential)))
	const n = 120
	bodies := make([][]byte, n)
	for i := range n {
		path := "/paid"
		if i%4 == 3 {
			path = "/drop"
		}
		r := fetch.Request{Method: http.MethodGet, URL: resource.URL + path, MaxAmount: pay.Amount{Minor: 5, Currency: "USD"},
			IdempotencyKey: fmt.Sprintf("x402-crash-%03d", i), Purpose: "crash test",
			Terms: pay.Terms{Rail: fetch.RailName, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Mandate: mandate}}
		if err := fetch.Sign(&r, agentKey); err != nil {
			t.Fatal(err)
		}
		bodies[i], _ = json.Marshal(r)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	// send asks fetch i once; ok is a definite paid answer. Anything else
	// (no answer, rail.unavailable, in flight) is asked again later.
	send := func(base string, i int) (fetchAnswer, bool) {
		req, _ := http.NewRequest(http.MethodPost, base+"/x402/fetch", bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		resp, err := client.Do(req)
		if err != nil {
			return fetchAnswer{}, false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fetchAnswer{}, false
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var f fetch.Fetched
			if err := json.Unmarshal(b, &f); err != nil || !f.Paid || f.Payment == nil || f.Receipt == nil {
				t.Errorf("fetch %d: 200 without a payment: %s", i, b)
				return fetchAnswer{}, false
			}
			return fetchAnswer{intent: f.IntentID, transaction: f.Payment.Transaction, body: f.Body}, true
		case http.StatusServiceUnavailable, http.StatusConflict:
			return fetchAnswer{}, false
		}
		t.Errorf("fetch %d: unexpected %d %s", i, resp.StatusCode, b)
		return fetchAnswer{}, false
	}

	answers := make([]*fetchAnswer, n)
	seen := int64(0) // kills already restarted from
	deadline := time.Now().Add(90 * time.Second)
	for round := 0; ; round++ {
		var pending []int
		for i, a := range answers {
			if a == nil {
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fetches never answered: %v", len(pending), pending)
		}
		if k := killed.Load(); k != seen {
			seen = k
			start()
		}
		p := current()
		// Kills in the first rounds: between a settlement and its answer,
		// or at a random moment of the round.
		tap.armed.Store(round < 6)
		var randomKill *time.Timer
		if round < 6 && round%2 == 1 {
			randomKill = time.AfterFunc(time.Duration(5+rand.IntN(40))*time.Millisecond, func() { kill(p) })
		}
		jobs := make(chan int)
		var wg sync.WaitGroup
		var amu sync.Mutex
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					if a, ok := send(p.base, i); ok {
						amu.Lock()
						answers[i] = &a
						amu.Unlock()
					}
				}
			}()
		}
		for _, i := range pending {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		if randomKill != nil && !randomKill.Stop() {
			// It fired: wait until the kill is counted.
			for killed.Load() == seen {
				time.Sleep(time.Millisecond)
			}
		}
		// A killed server is restarted at the top of the next round;
		// resends of lost answers happen as each fetch is asked again.
	}
	tap.armed.Store(false)

	// Asked again, every fetch answers what it answered first.
	base := current().base
	for i, a := range answers {
		again, ok := send(base, i)
		if !ok || again != *a {
			t.Fatalf("fetch %d answered %+v, then %+v", i, *a, again)
		}
	}
	current().term()

	// The resource's settlements and the fetches agree one to one.
	settled := map[[32]byte]fakex402.Settlement{}
	for _, s := range fake.Settlements() {
		if _, dup := settled[s.Authorization.Nonce]; dup {
			t.Fatalf("nonce %x settled twice", s.Authorization.Nonce)
		}
		settled[s.Authorization.Nonce] = s
	}
	intents := map[string]bool{}
	for i, a := range answers {
		if intents[a.intent] {
			t.Fatalf("two fetches answered intent %s", a.intent)
		}
		intents[a.intent] = true
		s, ok := settled[x402.NonceFromID(a.intent)]
		if !ok || s.Transaction != a.transaction {
			t.Fatalf("fetch %d (intent %s, transaction %s) has no settlement of its own at the resource", i, a.intent, a.transaction)
		}
	}
	if len(settled) != n {
		t.Fatalf("%d settlements at the resource for %d fetches", len(settled), n)
	}

	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg := recordReader(t, dir, st)
	ctx := context.Background()
	size, err := lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	authorizations, resent := 0, 0
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case fetch.EntryAuthorization:
			authorizations++
		case fetch.EntryPaid:
			var d struct{ ResolvedBy string }
			if json.Unmarshal(e.Data, &d) == nil && d.ResolvedBy == "resend" {
				resent++
			}
		}
	}
	// Every /drop fetch lost its first answer and was paid by the resend
	// of its one authorization; so were those killed before their answer.
	if resent < n/4 {
		t.Fatalf("only %d payments resolved by a resend", resent)
	}
	if authorizations != n {
		t.Fatalf("%d authorizations signed for %d fetches", authorizations, n)
	}
	kills := killed.Load()
	t.Logf("%d SIGKILLs; %d fetches paid once each (%d settlements, %d of them learnt by resending the same authorization); %d record entries verify",
		kills, n, len(settled), resent, size)
	if kills < 3 {
		t.Fatalf("only %d kills", kills)
	}
}
