package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// serverProc is the countersign binary serving a data directory.
type serverProc struct {
	cmd  *exec.Cmd
	base string
	once sync.Once // the process is signalled and waited for once, whoever stops it first
}

func startProc(t *testing.T, bin, dir string, extra ...string) *serverProc {
	t.Helper()
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", dir}, extra...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := addrLine.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, stdout)
			return &serverProc{cmd: cmd, base: "http://" + m[1]}
		}
	}
	_ = cmd.Wait()
	t.Fatalf("server did not start: %s", stderr.String())
	return nil
}

func (p *serverProc) kill() { p.stop(syscall.SIGKILL) }
func (p *serverProc) term() { p.stop(syscall.SIGTERM) }

func (p *serverProc) stop(sig syscall.Signal) {
	p.once.Do(func() { _ = p.cmd.Process.Signal(sig); _ = p.cmd.Wait() })
}

// recordReader opens the record of a stopped server's data directory over
// its open store, with the verifier key and origin the directory names.
func recordReader(t *testing.T, dir string, st store.Store) *audit.Log {
	t.Helper()
	_, origin, pub, err := (&source{data: dir}).verifier()
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.OpenReader(context.Background(), st, pub, &audit.Options{Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

var addrLine = regexp.MustCompile(`listening on \S+ at (127\.0\.0\.1:\d+)`)

// answer is a definite answer to a payment request.
type answer struct {
	status int
	body   []byte
}

// payKills is how many times TestPaymentsSurviveSIGKILL kills the server;
// the throughput issue's bar is 200:
//
//	go test ./cmd/countersign -run PaymentsSurviveSIGKILL -paycrash.kills 200 -timeout 30m
var payKills = flag.Int("paycrash.kills", 30, "SIGKILLs in TestPaymentsSurviveSIGKILL")

// payLoad is n signed payment instructions from a sandbox's agent, each
// under its own idempotency key: most small (settled), every tenth above
// the confirm threshold (held), some above the per-payment cap (denied).
type payLoad struct {
	bodies [][]byte
	bearer string
	client *http.Client
	// unavailable counts 503 store.unavailable/unavailable answers, each
	// checked to say retry-as-is with a Retry-After.
	unavailable atomic.Int64
}

func newPayLoad(t *testing.T, sandbox, prefix string, n int) *payLoad {
	t.Helper()
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, sandboxAgentKey))
	if err != nil {
		t.Fatal(err)
	}
	mandate, _ := os.ReadFile(filepath.Join(sandbox, sandboxMandate))
	cred, _ := os.ReadFile(filepath.Join(sandbox, sandboxCredential))
	l := &payLoad{bodies: make([][]byte, n), bearer: "Bearer " + strings.TrimSpace(string(cred)),
		client: &http.Client{Timeout: 10 * time.Second}}
	for i := range n {
		minor := int64(100 + i)
		switch {
		case i%10 == 3:
			minor = 20_000 // held for approval
		case i%13 == 5:
			minor = 60_000 // denied: above the per-payment cap
		}
		in := &pay.Instruction{
			IdempotencyKey: fmt.Sprintf("%s-%03d", prefix, i), Payee: "acct:seller.example",
			Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "crash test",
			Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Agent: hex.EncodeToString(agentKey.Public().(ed25519.PublicKey)), Mandate: strings.TrimSpace(string(mandate))},
		}
		if err := pay.SignInstruction(in, agentKey); err != nil {
			t.Fatal(err)
		}
		l.bodies[i], _ = json.Marshal(in)
	}
	return l
}

// send posts payment i to base. ok is false when the answer is not
// definite: the server died mid-request, or answered retry-as-is.
func (l *payLoad) send(t *testing.T, base string, i int) (answer, bool) {
	a, err := l.post(base, i)
	if err != nil {
		if !errors.Is(err, errNoAnswer) {
			t.Errorf("key %d: %v", i, err)
		}
		return answer{}, false // killed mid-request: outcome unknown to the client
	}
	switch a.status {
	case 200, 202, 402, 403:
		return a, true
	case 503, 409, 429:
		return answer{}, false // rail or store unavailable, in flight or rate limited: retry as is
	}
	t.Errorf("key %d: unexpected %d %s", i, a.status, a.body)
	return answer{}, false
}

// errNoAnswer: the request got no (whole) answer.
var errNoAnswer = errors.New("no answer")

// post posts payment i to base and returns whatever it answered; a store
// fault's 503 that does not say retry-as-is with a Retry-After is an
// error.
func (l *payLoad) post(base string, i int) (answer, error) {
	req, _ := http.NewRequest(http.MethodPost, base+"/pay", bytes.NewReader(l.bodies[i]))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", l.bearer)
	resp, err := l.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	if resp.StatusCode == 503 {
		var p struct{ Code, Action string }
		_ = json.Unmarshal(b, &p)
		if p.Code == "unavailable" || p.Code == "store.unavailable" {
			if p.Action != "retry-as-is" || resp.Header.Get("Retry-After") == "" {
				return answer{}, fmt.Errorf("a store fault answered without retry-as-is and Retry-After: %s", b)
			}
			l.unavailable.Add(1)
		}
	}
	return answer{resp.StatusCode, b}, err
}

// crashLoop sends every payment until each has a definite answer, in
// rounds over the servers live returns (payment i to one of them, in
// turn), with 8 clients. In each round while kills remain, kill is
// called once after a random number of answers; between rounds, revive
// restarts what was killed. It returns the first definite answer of
// every key and how many kills there were.
func (l *payLoad) crashLoop(t *testing.T, kills int, live func() []*serverProc, kill func(), revive func()) ([]*answer, int) {
	n := len(l.bodies)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	answers := make([]*answer, n)
	var mu sync.Mutex // guards answers
	killed := 0
	for round := 0; ; round++ {
		var todo []int
		for i := range n {
			if answers[i] == nil {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			return answers, killed
		}
		if round > kills+200 {
			t.Fatalf("%d payments still without a definite answer after %d rounds", len(todo), round)
		}
		killAfter := -1
		if killed < kills {
			killAfter = 1 + rng.IntN(max(1, min(20, len(todo))))
		}
		procs := live()
		work := make(chan int)
		var wg sync.WaitGroup
		var done int
		var once sync.Once
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					a, ok := l.send(t, procs[i%len(procs)].base, i)
					if !ok {
						continue
					}
					mu.Lock()
					if answers[i] == nil {
						answers[i] = &a
					}
					done++
					if done == killAfter {
						once.Do(func() { kill(); killed++ })
					}
					mu.Unlock()
				}
			}()
		}
		for _, i := range todo {
			work <- i
		}
		close(work)
		wg.Wait()
		revive()
	}
}

// checkReplays sends every key again: each answers its first definite
// answer byte for byte, but for the base URL of the server that answered
// (replicas in a test each have their own; behind a load balancer they
// share one).
func (l *payLoad) checkReplays(t *testing.T, answers []*answer, bases ...string) {
	t.Helper()
	local := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	for i := range l.bodies {
		base := bases[i%len(bases)]
		a, ok := l.send(t, base, i)
		if !ok || a.status != answers[i].status || !bytes.Equal(local.ReplaceAll(a.body, nil), local.ReplaceAll(answers[i].body, nil)) {
			t.Fatalf("key %d replay on %s: %d %s, first answer %d %s", i, base, a.status, a.body, answers[i].status, answers[i].body)
		}
	}
}

// checkExactlyOnce checks a stopped deployment's store: the sandbox card
// rail's ledger, its receipts in the record and the settled answers agree
// one to one, nothing settled twice, and the record verifies to its checkpoint.
// It returns the number of settlements, of settled answers among them,
// and the record's size.
func checkExactlyOnce(t *testing.T, st store.Store, lg *audit.Log, answers []*answer) (settled, answered int, size uint64) {
	t.Helper()
	ctx := context.Background()
	rail, err := fake.New(fake.SandboxCard, &fake.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	if err := rail.CheckLedger(ctx); err != nil {
		t.Fatal(err)
	}
	ledger, err := rail.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := map[string]bool{}
	for _, e := range ledger {
		if e.Kind == fake.KindPayment && e.Status == settle.StatusSettled {
			if moved[e.Key] {
				t.Fatalf("intent %s settled twice on the rail", e.Key)
			}
			moved[e.Key] = true
		}
	}
	receipts := map[string]bool{}
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "payment.settled" && bytes.Contains(e.Data, []byte(`"rail":"sandbox-card"`)) { // the card rail's: purchases settle on their merchant's
			if receipts[e.IntentID] {
				t.Fatalf("intent %s has two payment.settled entries", e.IntentID)
			}
			receipts[e.IntentID] = true
		}
	}
	settledAnswers := map[string]bool{}
	for i, a := range answers {
		if a != nil && a.status == 200 {
			var r pay.Receipt
			if err := json.Unmarshal(a.body, &r); err != nil {
				t.Fatal(err)
			}
			if !receipts[r.IntentID] {
				t.Fatalf("key %d was answered with a receipt the record does not hold", i)
			}
			settledAnswers[r.IntentID] = true
		}
	}
	for id := range receipts {
		if !moved[id] {
			t.Fatalf("receipt for %s but the rail never settled it", id)
		}
	}
	if len(moved) != len(receipts) {
		t.Fatalf("ledger settlements %d, receipts in the record %d: must be equal", len(moved), len(receipts))
	}
	for id := range settledAnswers {
		if !receipts[id] {
			t.Fatalf("settled answer for %s without a receipt", id)
		}
	}
	size, err = lg.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	return len(receipts), len(settledAnswers), size
}

// TestPaymentsSurviveSIGKILL sends payments (500, or 12 per kill if more)
// through the reference server on a fake rail with latency and
// unknown-outcome faults, SIGKILLs the server at random moments
// (-paycrash.kills times, 30 by default), restarts it, and checks:
// the rail's ledger, the receipts in the record and the settled intents
// agree one to one; nothing settled twice; every idempotency key, retried,
// answers exactly its first definite answer; the record verifies. It runs
// again with the rails answering at once (no latency, no faults), where
// each payment is decided, settled and recorded in one commit.
func TestPaymentsSurviveSIGKILL(t *testing.T) {
	for _, tc := range []struct {
		name string
		rail []string
	}{
		{"latency and faults", []string{"--sandbox-latency", "1ms-4ms", "--sandbox-unknown-rate", "0.05"}},
		{"rails answer at once", []string{"--sandbox-latency", "off"}},
	} {
		t.Run(tc.name, func(t *testing.T) { testPaymentsSurviveSIGKILL(t, tc.rail) })
	}
}

func testPaymentsSurviveSIGKILL(t *testing.T, rail []string) {
	bin := binary(t)
	dir := t.TempDir()
	faults := append([]string{"--base-url", "http://countersign.test", "--breaker-after", "100000", "--agent-rate", "100000", "--agent-burst", "100000"}, rail...)
	srv := startProc(t, bin, dir, faults...)
	load := newPayLoad(t, filepath.Join(dir, "sandbox"), "crash", max(500, 12**payKills))
	answers, kills := load.crashLoop(t, *payKills,
		func() []*serverProc { return []*serverProc{srv} },
		func() { srv.kill() }, // the server of the moment, not the first
		func() {
			if srv.cmd.ProcessState != nil {
				srv = startProc(t, bin, dir, faults...)
			}
		})
	load.checkReplays(t, answers, srv.base)
	srv.term()

	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	settled, answered, size := checkExactlyOnce(t, st, recordReader(t, dir, st), answers)
	if answered != settled {
		t.Fatalf("%d settlements, %d settled answers: with no approvals they must be equal", settled, answered)
	}
	t.Logf("%d SIGKILLs; %d payments; %d settled (ledger = receipts = answers); %d record entries verify to the signed checkpoint",
		kills, len(answers), settled, size)
	if kills < *payKills*2/3 {
		t.Fatalf("only %d kills of %d", kills, *payKills)
	}
}
