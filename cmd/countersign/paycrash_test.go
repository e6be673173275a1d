package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
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

// TestPaymentsSurviveSIGKILL sends payments (500, or 12 per kill if more)
// through the reference server on a fake rail with latency and
// unknown-outcome faults, SIGKILLs the server at random moments
// (-paycrash.kills times, 30 by default), restarts it, and checks:
// the rail's ledger, the receipts in the record and the settled intents
// agree one to one; nothing settled twice; every idempotency key, retried,
// answers exactly its first definite answer; the record verifies.
func TestPaymentsSurviveSIGKILL(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	faults := []string{"--base-url", "http://countersign.test", "--sandbox-latency", "1ms-4ms", "--sandbox-unknown-rate", "0.05", "--breaker-after", "100000", "--agent-rate", "100000", "--agent-burst", "100000"}
	srv := startProc(t, bin, dir, faults...)
	sandbox := filepath.Join(dir, "sandbox")
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, "agent.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	mandate, _ := os.ReadFile(filepath.Join(sandbox, "mandate.jws"))
	cred, _ := os.ReadFile(filepath.Join(sandbox, "agent-credential.txt"))
	bearer := "Bearer " + strings.TrimSpace(string(cred))

	n := max(500, 12**payKills)
	bodies := make([][]byte, n)
	for i := range n {
		minor := int64(100 + i)
		switch {
		case i%10 == 3:
			minor = 20_000 // held for approval
		case i%13 == 5:
			minor = 60_000 // denied: above the per-payment cap
		}
		in := &pay.Instruction{
			IdempotencyKey: fmt.Sprintf("crash-%03d", i), Payee: "acct:seller.example",
			Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "crash test",
			Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Agent: hex.EncodeToString(agentKey.Public().(ed25519.PublicKey)), Mandate: strings.TrimSpace(string(mandate))},
		}
		if err := pay.SignInstruction(in, agentKey); err != nil {
			t.Fatal(err)
		}
		bodies[i], _ = json.Marshal(in)
	}

	client := &http.Client{Timeout: 10 * time.Second}
	send := func(base string, i int) (answer, bool) {
		req, _ := http.NewRequest(http.MethodPost, base+"/pay", bytes.NewReader(bodies[i]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", bearer)
		resp, err := client.Do(req)
		if err != nil {
			return answer{}, false // killed mid-request: outcome unknown to the client
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{}, false
		}
		switch resp.StatusCode {
		case 200, 202, 402, 403:
			return answer{resp.StatusCode, b}, true
		case 503, 409, 429:
			return answer{}, false // rail unavailable, in flight or rate limited: retry as is
		}
		t.Errorf("key %d: unexpected %d %s", i, resp.StatusCode, b)
		return answer{}, false
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	answers := make([]*answer, n)
	var mu sync.Mutex // guards answers
	kills := 0
	for round := 0; ; round++ {
		var todo []int
		for i := range n {
			if answers[i] == nil {
				todo = append(todo, i)
			}
		}
		if len(todo) == 0 {
			break
		}
		if round > *payKills+200 {
			t.Fatalf("%d payments still without a definite answer after %d rounds", len(todo), round)
		}
		killAfter := -1
		if kills < *payKills {
			killAfter = 1 + rng.IntN(max(1, min(20, len(todo))))
		}
		work := make(chan int)
		var wg sync.WaitGroup
		var done int
		var once sync.Once
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					a, ok := send(srv.base, i)
					if !ok {
						continue
					}
					mu.Lock()
					if answers[i] == nil {
						answers[i] = &a
					}
					done++
					if done == killAfter {
						once.Do(srv.kill)
					}
					mu.Unlock()
				}
			}()
		}
		for _, i := range todo {
			mu.Lock()
			dead := srv.cmd.ProcessState != nil
			mu.Unlock()
			if dead {
				break
			}
			work <- i
		}
		close(work)
		wg.Wait()
		if srv.cmd.ProcessState != nil {
			kills++
			srv = startProc(t, bin, dir, faults...)
		}
	}

	// Every key, retried, answers its first definite answer byte for byte.
	for i := range n {
		a, ok := send(srv.base, i)
		if !ok || a.status != answers[i].status || !bytes.Equal(a.body, answers[i].body) {
			t.Fatalf("key %d replay: %d %s, first answer %d %s", i, a.status, a.body, answers[i].status, answers[i].body)
		}
	}
	srv.term()

	// Ledger, receipts and settled intents agree one to one.
	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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
	lg := recordReader(t, dir, st)
	receipts := map[string]bool{}
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "payment.settled" {
			if receipts[e.IntentID] {
				t.Fatalf("intent %s has two payment.settled entries", e.IntentID)
			}
			receipts[e.IntentID] = true
		}
	}
	settledAnswers := map[string]bool{}
	for i, a := range answers {
		if a.status == 200 {
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
	if len(moved) != len(receipts) || len(receipts) != len(settledAnswers) {
		t.Fatalf("ledger settlements %d, receipts in the record %d, settled answers %d: must be equal", len(moved), len(receipts), len(settledAnswers))
	}
	for id := range receipts {
		if !moved[id] {
			t.Fatalf("receipt for %s but the rail never settled it", id)
		}
	}
	size, _ := lg.Size(ctx)
	if err := lg.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d SIGKILLs; %d payments; %d settled (ledger = receipts = answers); %d record entries verify to the signed checkpoint",
		kills, n, len(receipts), size)
	if kills < *payKills*2/3 {
		t.Fatalf("only %d kills of %d", kills, *payKills)
	}
}
