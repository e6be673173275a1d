package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
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
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

// TestProtocolMoneyConservedUnderSIGKILL runs randomized flows of the
// protocol surface (holds captured, released and refunded on a rail that
// authorizes and on one that does not, meters recorded and closed,
// custody deposits, withdrawals and refunds) against the reference server
// with rail latency and unknown outcomes, SIGKILLing it at random moments
// at least 20 times. Every step is retried as is until it has a definite
// answer. Afterwards: every settlement the record holds is on a rail once,
// for the same amount, and every rail settlement is in the record once;
// captures never exceed their holds; the custody ledger balances and its
// world account mirrors the custody money the rails moved; the record
// verifies.
func TestProtocolMoneyConservedUnderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server dozens of times")
	}
	bin := binary(t)
	dir := t.TempDir()
	faults := []string{"--base-url", "http://countersign.test", "--sandbox-latency", "1ms-4ms", "--sandbox-unknown-rate", "0.05",
		"--breaker-after", "100000", "--agent-rate", "100000", "--agent-burst", "100000"}
	var mu sync.Mutex // guards srv
	srv := startProc(t, bin, dir, faults...)
	base := func() string { mu.Lock(); defer mu.Unlock(); return srv.base }
	sandbox := filepath.Join(dir, "sandbox")
	agentKey, _, err := keyfile.ReadEd25519(filepath.Join(sandbox, "agent.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	mandateRaw, _ := os.ReadFile(filepath.Join(sandbox, "mandate.jws"))
	mandate := strings.TrimSpace(string(mandateRaw))
	cred, _ := os.ReadFile(filepath.Join(sandbox, "agent-credential.txt"))
	bearer := "Bearer " + strings.TrimSpace(string(cred))
	opKey, err := keyfile.Read(filepath.Join(sandbox, "operator.jwk.json"))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := operator.NewSigner(opKey.Signer, opKey.KeyID, "http://countersign.test", nil)
	if err != nil {
		t.Fatal(err)
	}
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	spend := func(method, key, payee, rail string, minor int64) pay.Instruction {
		rev, fin := gate.Reversible, gate.FinalityInstant
		if rail == "sandbox-chain" {
			rev = gate.Irreversible
		}
		in := pay.Instruction{IdempotencyKey: key, Payee: payee, Amount: pay.Amount{Minor: minor, Currency: "USD"},
			Purpose: "protocol crash test", Terms: pay.Terms{Rail: rail, Reversibility: rev, Finality: fin,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Agent: agent, Mandate: mandate}}
		if err := protocol.SignSpend(method, &in, agentKey); err != nil {
			t.Fatal(err)
		}
		return in
	}

	client := &http.Client{Timeout: 10 * time.Second}
	// call sends one request until it has a definite answer: anything but
	// a broken connection, 503 (rail unavailable, store), 409
	// idempotency.in_flight or 429.
	call := func(path, op string, body any, operatorSigned bool) (int, map[string]any) {
		raw, _ := json.Marshal(body)
		for attempt := 0; ; attempt++ {
			if attempt > 2000 {
				t.Errorf("%s: no definite answer after 2000 attempts", path)
				return 0, nil
			}
			req, _ := http.NewRequest(http.MethodPost, base()+path, bytes.NewReader(raw))
			req.Header.Set("Content-Type", "application/json")
			if operatorSigned {
				if err := signer.Sign(req, op, raw); err != nil {
					t.Error(err)
					return 0, nil
				}
			} else {
				req.Header.Set("Authorization", bearer)
			}
			resp, err := client.Do(req)
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the server is down: it restarts
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var m map[string]any
			_ = json.Unmarshal(b, &m)
			if resp.StatusCode == 503 || resp.StatusCode == 429 || (resp.StatusCode == 409 && m["code"] == pay.CodeInFlight) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			if resp.StatusCode >= 500 {
				t.Errorf("%s: %d %s", path, resp.StatusCode, b)
				return resp.StatusCode, m
			}
			return resp.StatusCode, m
		}
	}
	refund := func(intentID string) {
		// A full refund, retried: once done, "nothing remains" is the
		// definite answer (refund.exceeds / refund.refused).
		status, m := call("/operator/refund", "operator.refund", map[string]any{"intentId": intentID, "rationale": "crash test refund"}, true)
		if status != 200 && m["code"] != pay.CodeRefundExceeds && m["code"] != pay.CodeRefundRefused && m["code"] != protocol.CodeCustodyInsufficient {
			t.Errorf("refund %s: %d %v", intentID, status, m)
		}
	}
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }

	const minKills = 20
	flow := func(i int) {
		key := fmt.Sprintf("flow-%03d", i)
		switch i % 4 {
		case 0, 3: // a hold on the card rail (authorized) or the chain rail (reservation only)
			rail := "sandbox-card"
			if i%4 == 3 {
				rail = "sandbox-chain"
			}
			amount := int64(200 + 7*(i%100))
			status, m := call("/protocol/hold/place", "hold.place", protocol.HoldPlaceRequest{Spend: spend("hold.place", key, "acct:hotel.example", rail, amount), TTLSeconds: 3600}, false)
			if status != 200 {
				if status != 402 && status != 403 {
					t.Errorf("hold %d: %d %v", i, status, m)
				}
				return
			}
			hold := str(m, "holdId")
			if i%8 == 0 {
				status, m = call("/protocol/hold/release", "hold.release", protocol.HoldRef{HoldID: hold}, false)
				if status != 200 && m["code"] != pay.CodeHoldReleased {
					t.Errorf("release %d: %d %v", i, status, m)
				}
				return
			}
			status, m = call("/protocol/hold/capture", "hold.capture", protocol.HoldCaptureRequest{HoldID: hold, AmountMinor: amount - int64(i%50), IdempotencyKey: key + "-capture"}, false)
			if status != 200 && status != 402 {
				t.Errorf("capture %d: %d %v", i, status, m)
				return
			}
			if status == 200 && i%3 == 0 {
				refund(str(m, "intentId"))
			}
		case 1: // a meter
			status, m := call("/protocol/meter/open", "meter.open", protocol.MeterOpenRequest{Spend: spend("meter.open", key, "acct:api.example", "sandbox-card", 500), UnitPriceMinor: 7, TTLSeconds: 3600}, false)
			if status != 200 {
				if status != 402 && status != 403 {
					t.Errorf("meter %d: %d %v", i, status, m)
				}
				return
			}
			meter := str(m, "meterId")
			for j := range 1 + i%5 {
				status, m = call("/protocol/meter/record", "meter.record", protocol.MeterRecordRequest{MeterID: meter, Units: int64(1 + j), UsageID: fmt.Sprintf("%s-u%d", key, j)}, false)
				if status != 200 {
					t.Errorf("record %d/%d: %d %v", i, j, status, m)
				}
			}
			status, m = call("/protocol/meter/close", "meter.close", protocol.MeterCloseRequest{MeterID: meter, IdempotencyKey: key + "-close"}, false)
			if status != 200 && status != 402 {
				t.Errorf("close %d: %d %v", i, status, m)
			}
		case 2: // custody: deposit, withdraw, and sometimes refund the deposit
			status, m := call("/protocol/custody/deposit", "custody.deposit", protocol.CustodySpendRequest{Spend: spend("custody.deposit", key, protocol.DefaultCustodyPayee, "sandbox-card", 300)}, false)
			if status != 200 {
				if status != 402 && status != 403 {
					t.Errorf("deposit %d: %d %v", i, status, m)
				}
				return
			}
			deposit := str(m, "intentId")
			status, m = call("/protocol/custody/withdraw", "custody.withdraw", protocol.CustodySpendRequest{Spend: spend("custody.withdraw", key+"-w", "acct:dest.example", "sandbox-card", int64(50+i%100))}, false)
			if status != 200 && status != 402 && status != 403 {
				t.Errorf("withdraw %d: %d %v", i, status, m)
			}
			if i%5 == 2 {
				refund(deposit)
			}
		}
	}

	// Kill the server at random moments while the flows run.
	stopKilling := make(chan struct{})
	killerDone := make(chan int)
	var killed atomic.Int64
	go func() {
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
		kills := 0
		for {
			select {
			case <-stopKilling:
				killerDone <- kills
				return
			case <-time.After(time.Duration(40+rng.IntN(160)) * time.Millisecond):
			}
			mu.Lock()
			srv.kill()
			srv = startProc(t, bin, dir, faults...)
			mu.Unlock()
			kills++
			killed.Add(1)
		}
	}()
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				flow(i)
			}
		}()
	}
	// Flows keep coming until the server was killed often enough under
	// them (and at least 200 ran).
	flows := 0
	for ; flows < 200 || (killed.Load() < minKills+1 && flows < 5000); flows++ {
		work <- flows
	}
	close(work)
	wg.Wait()
	close(stopKilling)
	kills := <-killerDone
	// Let the reconciler finish what a kill left settling, then stop.
	mu.Lock()
	srv.term()
	mu.Unlock()
	srv = startProc(t, bin, dir, faults...)
	srv.term()

	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	// What the rails moved, by key (the intent id).
	railMoved := map[string]int64{}
	for _, name := range []string{fake.SandboxCard, fake.SandboxChain} {
		r, err := fake.New(name, &fake.Options{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckLedger(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		entries, err := r.Ledger(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if (e.Kind == fake.KindPayment || e.Kind == fake.KindCapture) && (e.Status == settle.StatusSettled || e.Status == settle.StatusPending) {
				if _, dup := railMoved[e.Key]; dup {
					t.Fatalf("%s moved money twice under key %s", name, e.Key)
				}
				railMoved[e.Key] = e.Amount
			}
		}
	}
	lg := recordReader(t, dir, st)
	settled := map[string]int64{}
	for e, err := range lg.Entries(ctx, 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "payment.settled" {
			var r pay.Receipt
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			if _, dup := settled[e.IntentID]; dup {
				t.Fatalf("intent %s settled twice in the record", e.IntentID)
			}
			settled[e.IntentID] = r.Amount.Minor
		}
	}
	// Every settlement in the record is on a rail for the same amount, and
	// every rail settlement is in the record (or its intent is still
	// settling, which the rail's answer would finish).
	var custodyIn, custodyOut int64
	err = st.View(ctx, func(r store.Reader) error {
		for id, amt := range settled {
			if railMoved[id] != amt {
				return fmt.Errorf("intent %s: record settled %d, rail moved %d", id, amt, railMoved[id])
			}
		}
		for id, amt := range railMoved {
			in, err := pay.GetIntent(r, id)
			if err != nil {
				return fmt.Errorf("rail key %s: %w", id, err)
			}
			if _, ok := settled[id]; !ok && in.Status != pay.StatusSettling {
				return fmt.Errorf("rail moved %d under %s but the intent is %s", amt, id, in.Status)
			}
			if in.Hold != nil && amt > in.Amount.Minor {
				return fmt.Errorf("capture of %s moved %d, more than the %d held", id, amt, in.Amount.Minor)
			}
			refunded := in.RefundedMinor
			switch in.Route {
			case "protocol/custody.deposit":
				custodyIn += amt - refunded
			case "protocol/custody.withdraw":
				custodyOut += amt - refunded
			}
		}
		if err := ledger.Check(r); err != nil {
			return err
		}
		world, err := ledger.Balance(r, "world/rail/sandbox-card", "USD")
		if err != nil {
			return err
		}
		if world != -(custodyIn - custodyOut) {
			return fmt.Errorf("custody's world account is %d; the rails moved %d in and %d out", world, custodyIn, custodyOut)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	size, _ := lg.Size(ctx)
	if err := lg.Verify(ctx, 1, size, audit.Full, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d SIGKILLs; %d flows; %d settlements (record = rails); custody in %d, out %d; %d record entries verify", kills, flows, len(settled), custodyIn, custodyOut, size)
	if kills < minKills {
		t.Fatalf("only %d kills", kills)
	}
}
