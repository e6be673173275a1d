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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
)

// shopTap is the front door of the fake merchant (ACP or UCP) in the buy crash
// test. It passes every request to the merchant and watches two kinds: a
// create's answer names a checkout session the server opened, and a
// completion runs at the merchant at once while its answer is held for
// 1–5 ms — the window in which the order exists and the server does not
// know it yet. Before answering either, it tells the kill plan, which may
// SIGKILL the server right then. (With killLateComplete, the plan may
// also kill the server as a completion arrives and hold that completion
// until the next server has started.)
type shopTap struct {
	h    http.Handler
	plan *killPlan
	// collection is the path of the checkout sessions collection:
	// /checkout_sessions (ACP) or /ucp/<version>/checkout-sessions (UCP).
	collection string

	mu       sync.Mutex
	rng      *rand.Rand
	sessions map[string]bool   // every session a create answered
	orderOf  map[string]string // session → the order id its successful completions answered
	twice    []string          // sessions whose completions answered two different orders
	busy     int               // completions being handled
	held     int               // of which held until the next server has started
}

func (s *shopTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	create := r.Method == http.MethodPost && r.URL.Path == s.collection
	rest, session := strings.CutPrefix(r.URL.Path, s.collection+"/")
	id, complete := strings.CutSuffix(rest, "/complete")
	complete = complete && session && r.Method == http.MethodPost
	if !create && !complete {
		s.h.ServeHTTP(w, r)
		return
	}
	var release <-chan struct{}
	if complete {
		s.mu.Lock()
		s.busy++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.busy--
			s.mu.Unlock()
		}()
		// Read before any hold: a held request's sender is dead.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if release = s.plan.event(killLateComplete, false); release != nil {
			s.mu.Lock()
			s.held++
			s.mu.Unlock()
			<-release
			s.mu.Lock()
			s.held--
			s.mu.Unlock()
		}
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	var answer struct {
		ID    string `json:"id"`
		Order *struct {
			ID string `json:"id"`
		} `json:"order"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &answer)
	s.mu.Lock()
	switch {
	case create && rec.Code == http.StatusCreated && answer.ID != "":
		s.sessions[answer.ID] = true
	case complete && rec.Code == http.StatusOK && answer.Order != nil:
		if prev, ok := s.orderOf[id]; ok && prev != answer.Order.ID {
			s.twice = append(s.twice, fmt.Sprintf("%s: %s then %s", id, prev, answer.Order.ID))
		}
		s.orderOf[id] = answer.Order.ID
	}
	var delay time.Duration
	if complete {
		delay = time.Millisecond + time.Duration(s.rng.Int64N(int64(4*time.Millisecond)))
	}
	s.mu.Unlock()
	switch {
	case release != nil: // its sender is dead: nobody to answer
	case complete:
		time.Sleep(delay)
		s.plan.event(killMidComplete, rec.Code == http.StatusOK)
	default:
		s.plan.event(killMidCreate, false)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// idle reports whether every completion the merchant received has run,
// but those held for the next server.
func (s *shopTap) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy == s.held
}

func (s *shopTap) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy == 0
}

// Where a kill plan SIGKILLs the server: while the merchant holds the
// answer of a completion it has run (the order is placed, the server has
// not heard), while it holds the answer of a create (a session is open,
// no decision recorded), or after a client got a definite answer (any
// state of the purchases still in flight). killLateComplete kills as a
// completion arrives and lets the merchant run it only once the next server
// has started (and reconciled): a merchant that processes a request after
// its sender died. It found a lost order (the reconciler took an open
// session for proof that no order would come); the rail now cancels an
// open session before declaring no order.
const (
	killMidComplete  = "complete"
	killMidCreate    = "create"
	killAfterAnswer  = "answer"
	killLateComplete = "late-complete"
)

// killPlan kills the server at the after-th event of its kind, once.
// sendRound hands todo to workers goroutines running send, one index at
// a time, until the plan has killed the server, and waits for them.
func sendRound(plan *killPlan, workers int, todo []int, send func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				send(i)
			}
		}()
	}
	for _, i := range todo {
		if plan.killed() {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
}

type killPlan struct {
	mu      sync.Mutex
	srv     *serverProc
	kind    string // "" when disarmed
	after   int
	seen    int
	dead    bool
	placed  int           // kills while the merchant held the answer of an order it placed
	late    int           // kills with a completion held for the next server
	release chan struct{} // closed when the next server has started
}

func (k *killPlan) arm(srv *serverProc, kind string, after int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.srv, k.kind, k.after, k.seen, k.dead = srv, kind, after, 0, false
}

// event counts an event of kind and kills the server at the after-th. For
// killLateComplete it returns, when it killed, a channel closed once the
// next server has started.
func (k *killPlan) event(kind string, orderPlaced bool) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.dead || k.kind != kind {
		return nil
	}
	if k.seen++; k.seen != k.after {
		return nil
	}
	k.srv.kill()
	k.dead = true
	switch {
	case kind == killMidComplete && orderPlaced:
		k.placed++
	case kind == killLateComplete:
		k.late++
		k.release = make(chan struct{})
		return k.release
	}
	return nil
}

// restarted lets a completion held for the next server run.
func (k *killPlan) restarted() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.release != nil {
		close(k.release)
		k.release = nil
	}
}

func (k *killPlan) killed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead
}

// TestBuySurvivesSIGKILL buys from a fake ACP merchant that outlives the
// server: 200 purchases from 6 concurrent clients, each retried with its
// same body and idempotency key until it gets a definite answer, while the
// server is SIGKILLed 20 times — in the middle of completions (the merchant
// placed the order and holds its answer), in the middle of creates, and at
// random moments — and restarted on the same data directory. Then: no
// double charge (one purchase, at most one order; one session, one order;
// orders placed = purchases answered 200), no lost order (every order at
// the merchant is in the record once as commerce.completed and once as
// payment.settled of the same intent, whose decision names its cart; every
// 200 answer is one of them; a declined purchase placed nothing), every
// key replays its answer, and the record verifies with signatures.
//
// BUYCRASH_SEED=N replays a run's kill schedule (the kill points, not the
// timing).
func TestBuySurvivesSIGKILL(t *testing.T) { buySurvivesSIGKILL(t, "acp") }

// TestBuySurvivesSIGKILLCredentialHandler is the same over UCP 2026-01-11
// with a merchant whose payment handler takes a token credential at
// complete (no tokenization endpoint) and whose profile declares a
// handler with an undated version it never uses: the credential is handed
// over in the completion, under the same settlement rail and the same
// unknown-outcome reconciliation.
func TestBuySurvivesSIGKILLCredentialHandler(t *testing.T) { buySurvivesSIGKILL(t, "ucp") }

func buySurvivesSIGKILL(t *testing.T, rail string) {
	bin := binary(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BUYCRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BUYCRASH_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (rerun with BUYCRASH_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 11))

	// The merchant lives in the test process, so it outlives every kill.
	plan := &killPlan{}
	tap := &shopTap{plan: plan, rng: rand.New(rand.NewPCG(seed, 12)), collection: "/checkout_sessions",
		sessions: map[string]bool{}, orderOf: map[string]string{}}
	ts := httptest.NewUnstartedServer(tap)
	fo := &fakemerchant.Options{BaseURL: "http://" + ts.Listener.Addr().String()}
	if rail == "ucp" {
		fo.UCPPayment = fakemerchant.UCPPaymentCredential
	}
	fm := fakemerchant.New(fo)
	tap.h = fm.ACPHandler()
	shop := merchantFile{ID: "shop", Protocol: "acp", BaseURL: "http://" + ts.Listener.Addr().String()}
	if rail == "ucp" {
		tap.h = fm.UCPHandler(fakemerchant.UCP20260111)
		tap.collection = "/ucp/" + fakemerchant.UCP20260111 + "/checkout-sessions"
		shop = merchantFile{ID: "shop", Protocol: "ucp", ProfileURL: shop.BaseURL + "/.well-known/ucp",
			PaymentCredentials: []ucp.PaymentCredential{{Handler: fakemerchant.UCPWalletID, Token: fakemerchant.UCPWalletToken}}}
	}
	ts.Start()
	defer ts.Close()
	defer plan.restarted() // a completion still held would block Close
	merchants := filepath.Join(t.TempDir(), "merchants.json")
	mf, _ := json.Marshal([]merchantFile{shop})
	if err := os.WriteFile(merchants, mf, 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--merchants", merchants, "--sandbox-latency", "off", "--breaker-after", "100000",
		"--agent-rate", "100000", "--agent-burst", "100000"}
	srv := startProc(t, bin, dir, flags...)
	defer func() { srv.kill() }()

	sandbox := filepath.Join(dir, "sandbox")
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, sandboxAgentKey))
	if err != nil {
		t.Fatal(err)
	}
	mandate := strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxMandate)))
	bearer := "Bearer " + strings.TrimSpace(readFile(t, filepath.Join(sandbox, sandboxCredential)))

	// Purchases of 1 to 3 mugs or books: 1,799 to 8,000 minor units, all
	// below the mandate's confirmation threshold (10,001), 856,001 in
	// all, below its daily cap (1,000,000). Nothing is held or denied.
	const n = 200
	keys := make([]string, n)
	bodies := make([][]byte, n)
	for i := range n {
		sku := []string{"sku-mug", "sku-book"}[i%2]
		keys[i] = fmt.Sprintf("buycrash-%03d", i)
		p := commerce.PurchaseRequest{
			QuoteRequest: commerce.QuoteRequest{Rail: rail, Merchant: "shop", Currency: "USD",
				Lines: []cart.LineRequest{{ID: sku, Quantity: int64(1 + (i/2)%3)}}},
			IdempotencyKey: keys[i], Purpose: "buy crash test",
			Terms: pay.Terms{Rail: rail, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Mandate: mandate},
		}
		if err := commerce.SignPurchase(&p, agentKey); err != nil {
			t.Fatal(err)
		}
		bodies[i], _ = json.Marshal(p)
	}

	client := &http.Client{Timeout: 20 * time.Second}
	// send posts purchase i once; final is false when the answer is not
	// definite (no answer, or a problem whose action is retry-as-is).
	send := func(base string, i int) (a answer, final bool) {
		req, _ := http.NewRequest(http.MethodPost, base+"/buy", bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		req.Header.Set("Idempotency-Key", keys[i])
		resp, err := client.Do(req)
		if err != nil {
			return answer{}, false // killed mid-request: outcome unknown to the client
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{}, false
		}
		a = answer{resp.StatusCode, b}
		if resp.StatusCode == http.StatusOK {
			return a, true
		}
		var p struct {
			Code   string          `json:"code"`
			Action contract.Action `json:"action"`
		}
		_ = json.Unmarshal(b, &p)
		switch {
		case p.Action == contract.ActionRetryAsIs:
			return answer{}, false // merchant or rail unavailable, in flight: retry as is
		case resp.StatusCode == http.StatusPaymentRequired && p.Code == pay.CodeDeclined:
			return a, true // no money moved; final
		}
		t.Errorf("purchase %d: unexpected %d %s", i, resp.StatusCode, b)
		return a, true
	}

	const wantKills, workers = 20, 6
	kinds := []string{killMidComplete, killAfterAnswer, killMidCreate, killLateComplete}
	answers := make([]*answer, n)
	var mu sync.Mutex // guards answers
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
		if time.Since(start) > 45*time.Second {
			t.Fatalf("%d purchases still without a definite answer after %d rounds and %d kills", len(todo), rounds, kills)
		}
		kind := ""
		if kills < wantKills {
			kind = kinds[kills%len(kinds)]
		}
		// Kill after 2 to 21 events, so the kills spread over the run.
		plan.arm(srv, kind, 2+rng.IntN(max(1, min(20, len(todo)/3))))
		sendRound(plan, workers, todo, func(i int) {
			a, ok := send(srv.base, i)
			if !ok {
				return
			}
			mu.Lock()
			if answers[i] == nil {
				answers[i] = &a
			}
			mu.Unlock()
			plan.event(killAfterAnswer, false)
		})
		if plan.killed() {
			kills++
			// Completions the dead server sent finish at the merchant
			// before the next server reconciles.
			waitFor(t, tap.idle)
			srv = startProc(t, bin, dir, flags...)
			plan.restarted()
		}
	}
	loop := time.Since(start)
	// A round whose kill never came leaves the plan armed: disarm it, or
	// the replays below (which open checkout sessions too) could kill the
	// server they are checking.
	plan.arm(srv, "", 0)
	waitFor(t, tap.quiet)

	// Every key, sent again, answers its definite answer: the same order
	// of the same intent, or the same decline.
	type orderAnswer struct {
		ID       string `json:"id"`
		CartID   string `json:"cartId"`
		IntentID string `json:"intentId"`
		Receipt  struct {
			IntentID  string `json:"intentId"`
			Reference string `json:"reference"`
		} `json:"receipt"`
	}
	type declineAnswer struct {
		Code        string `json:"code"`
		IntentID    string `json:"intentId"`
		DeclineCode string `json:"declineCode"`
	}
	orders := map[int]orderAnswer{}
	declines := map[int]declineAnswer{}
	for i, a := range answers {
		again, ok := send(srv.base, i)
		if !ok || again.status != a.status {
			t.Fatalf("purchase %d replay: %d %s; first answer %d %s", i, again.status, again.body, a.status, a.body)
		}
		switch a.status {
		case http.StatusOK:
			var o, o2 orderAnswer
			if json.Unmarshal(a.body, &o) != nil || json.Unmarshal(again.body, &o2) != nil || o.ID == "" ||
				o.Receipt.Reference != o.ID || o.Receipt.IntentID != o.IntentID {
				t.Fatalf("purchase %d: order %s", i, a.body)
			}
			if o2 != o {
				t.Fatalf("purchase %d replay: %s; first answer %s", i, again.body, a.body)
			}
			orders[i] = o
		default:
			var d, d2 declineAnswer
			_ = json.Unmarshal(a.body, &d)
			_ = json.Unmarshal(again.body, &d2)
			if d2 != d {
				t.Fatalf("purchase %d replay: %s; first answer %s", i, again.body, a.body)
			}
			declines[i] = d
		}
	}
	srv.term()

	out, err := exec.Command(bin, "audit", "verify", "--data", dir, "--signatures").CombinedOutput()
	if err != nil {
		t.Fatalf("audit verify after %d kills: %v\n%s", kills, err, out)
	}

	// What the record says about purchases.
	ctx := context.Background()
	lg, closeData := openStoppedRecord(t, dir)
	defer closeData()
	type decision struct{ key, cart string }
	decisions := map[string]decision{} // intent → its purchase key and cart
	intentOfKey := map[string]string{}
	completedOf := map[string][]string{} // order id → intents of its commerce.completed entries
	completedBy := map[string][]string{} // intent → order ids of its commerce.completed entries
	settledBy := map[string][]string{}   // intent → references of its payment.settled entries
	failedBy := map[string]int{}         // intent → payment.failed entries
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		switch e.Type {
		case "gate.decision":
			var d struct {
				Route          pay.Route         `json:"route"`
				IdempotencyKey string            `json:"idempotencyKey"`
				Metadata       map[string]string `json:"metadata"`
			}
			if e.IntentID == "" || json.Unmarshal(e.Data, &d) != nil || d.Route != pay.RouteBuy {
				continue
			}
			if prev, dup := intentOfKey[d.IdempotencyKey]; dup {
				t.Errorf("purchase key %s decided twice: intents %s and %s", d.IdempotencyKey, prev, e.IntentID)
			}
			intentOfKey[d.IdempotencyKey] = e.IntentID
			decisions[e.IntentID] = decision{d.IdempotencyKey, d.Metadata["cart"]}
		case commerce.EntryCompleted:
			var d struct {
				OrderID string `json:"orderId"`
				CartID  string `json:"cartId"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			completedOf[d.OrderID] = append(completedOf[d.OrderID], e.IntentID)
			completedBy[e.IntentID] = append(completedBy[e.IntentID], d.OrderID)
			if decisions[e.IntentID].cart != d.CartID {
				t.Errorf("intent %s completed cart %s, its decision names %q", e.IntentID, d.CartID, decisions[e.IntentID].cart)
			}
		case "payment.settled":
			var r pay.Receipt
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			settledBy[e.IntentID] = append(settledBy[e.IntentID], r.Reference)
		case "payment.failed":
			failedBy[e.IntentID]++
		}
	}

	// Every session the server could have completed, read at the merchant:
	// those it opened, those its decisions name, those it answered.
	tap.mu.Lock() // the merchant is idle: no server is running
	defer tap.mu.Unlock()
	sessions := map[string]bool{}
	for id := range tap.sessions {
		sessions[id] = true
	}
	for _, d := range decisions {
		sessions[d.cart] = true
	}
	for _, o := range orders {
		sessions[o.CartID] = true
	}
	placed := map[string]string{}      // order id → session
	orderOnCart := map[string]string{} // session → order id
	for id := range sessions {
		s, err := fm.Read(id)
		if err != nil {
			t.Errorf("session %s: %v", id, err)
			continue
		}
		if s.Order == nil {
			continue
		}
		if prev, dup := placed[s.Order.ID]; dup {
			t.Errorf("order %s placed on two sessions, %s and %s", s.Order.ID, prev, id)
		}
		placed[s.Order.ID] = id
		orderOnCart[id] = s.Order.ID
		if got, ok := tap.orderOf[id]; !ok || got != s.Order.ID {
			t.Errorf("session %s has order %s; its completions answered %q", id, s.Order.ID, got)
		}
	}
	for _, s := range tap.twice {
		t.Errorf("no double charge: completions of session %s", s)
	}

	// No double charge: one order per purchase, orders = 200 answers.
	orderOfKey := map[string]string{}
	for oid, sid := range placed {
		intents := completedOf[oid]
		if len(intents) != 1 {
			t.Errorf("no lost order: order %s (session %s) has %d commerce.completed entries", oid, sid, len(intents))
			continue
		}
		in := intents[0]
		d := decisions[in]
		if d.cart != sid {
			t.Errorf("order %s is on session %s; intent %s's decision names %q", oid, sid, in, d.cart)
		}
		if got := settledBy[in]; len(got) != 1 || got[0] != oid {
			t.Errorf("no lost order: intent %s placed order %s; its payment.settled entries name %v", in, oid, got)
		}
		if prev, dup := orderOfKey[d.key]; dup {
			t.Errorf("double charge: purchase %s placed orders %s and %s", d.key, prev, oid)
		}
		orderOfKey[d.key] = oid
	}
	if len(placed) != len(orders) {
		t.Errorf("orders placed at the merchant %d, purchases answered 200 %d: must be equal", len(placed), len(orders))
	}
	for oid := range completedOf {
		if _, ok := placed[oid]; !ok {
			t.Errorf("the record has commerce.completed for order %s, which the merchant never placed", oid)
		}
	}
	for in, oids := range completedBy {
		if len(oids) != 1 {
			t.Errorf("intent %s has %d commerce.completed entries: %v", in, len(oids), oids)
		}
	}
	for in, refs := range settledBy {
		if len(completedBy[in]) == 0 {
			t.Errorf("intent %s settled (%v) without a commerce.completed entry", in, refs)
		}
	}
	for i, o := range orders {
		if placed[o.ID] != o.CartID || orderOfKey[keys[i]] != o.ID || intentOfKey[keys[i]] != o.IntentID {
			t.Errorf("purchase %d answered order %s of intent %s on session %s; the merchant and the record disagree",
				i, o.ID, o.IntentID, o.CartID)
		}
	}
	declineCodes := map[string]int{}
	for i, d := range declines {
		in := intentOfKey[keys[i]]
		if _, ok := orderOfKey[keys[i]]; ok || d.IntentID != in || failedBy[in] != 1 || len(settledBy[in]) != 0 {
			t.Errorf("purchase %d declined (%s, intent %s): the record's intent %s has %d payment.failed, %d payment.settled; order placed %v",
				i, d.DeclineCode, d.IntentID, in, failedBy[in], len(settledBy[in]), ok)
		}
		if oid, ok := orderOnCart[decisions[in].cart]; ok {
			t.Errorf("no lost order: purchase %d was answered 402 %s (intent %s, payment.failed) but the merchant placed order %s on its cart %s",
				i, d.DeclineCode, in, oid, decisions[in].cart)
		}
		declineCodes[d.DeclineCode]++
	}

	plan.mu.Lock()
	midComplete, late := plan.placed, plan.late
	plan.mu.Unlock()
	t.Logf("%d SIGKILLs in %d rounds (%d while the merchant held a placed order's answer, %d with a completion held for the next server) in %v; %d purchases: %d ordered "+
		"(orders at the merchant = commerce.completed = payment.settled = 200 answers), %d declined %v; %d sessions opened; %s",
		kills, rounds, midComplete, late, loop.Round(time.Millisecond), n, len(orders), len(declines), declineCodes, len(tap.sessions),
		strings.TrimSpace(string(out)))
	if kills < wantKills*2/3 || midComplete < 3 {
		t.Fatalf("only %d kills, %d in the middle of a completion", kills, midComplete)
	}
}
