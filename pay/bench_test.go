package pay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/pebblestore"
)

// benchWorkers is how many goroutines pay at once in BenchmarkPayInProcess.
var benchWorkers = 64

// BenchmarkPayInProcess measures the whole money path embedded in-process:
// decode, envelope verification (mandate cached), gate, two durable
// transactions with two record entries (one checkpoint signed per commit group), a zero-latency fake rail sharing the store (SharedLog).
// The store is pebblestore with fsync on a real temporary directory; 64
// goroutines pay concurrently, each with pre-signed instructions.
//
//	go test -run '^$' -bench PayInProcess -benchtime 20000x ./pay/
func BenchmarkPayInProcess(b *testing.B) {
	ctx := context.Background()
	st, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	lg, err := audit.Open(ctx, st, recKey, nil)
	if err != nil {
		b.Fatal(err)
	}
	rail, err := fake.New("sandbox-card", &fake.Options{Store: st, SharedLog: true})
	if err != nil {
		b.Fatal(err)
	}
	reg := &settle.Registry{}
	if err := reg.Register(rail); err != nil {
		b.Fatal(err)
	}
	_, opKey, _ := ed25519.GenerateKey(rand.Reader)
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agent := hex.EncodeToString(pub)
	now := time.Now().UTC().Truncate(time.Second)
	tok, err := SignMandate(MandateClaims{
		ID: "mdt-bench", Agent: agent, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 1000, PerPeriodCapMinor: 1 << 50, Period: gate.Day,
		Rails: []string{"sandbox-card"}, ConfirmAboveMinor: 1000, IrreversibleConfirmAboveMinor: 1000,
	}, opKey, "op")
	if err != nil {
		b.Fatal(err)
	}
	mv, err := NewMandateVerifier([]OperatorKey{{KeyID: "op", Public: opKey.Public()}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Options{Store: st, Log: lg, Rails: reg, Mandates: mv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	caller := Caller{KeyID: "ak_01JABCDEFGHJKMNPQRSTVWXYZ0", Agents: []string{agent}, Credential: gate.CredentialAPIKey}

	bodies := make([][]byte, b.N)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += 2 {
				in := &Instruction{
					IdempotencyKey: fmt.Sprintf("bench-%d", i), Payee: "acct:seller.example",
					Amount: Amount{Minor: 1, Currency: "USD"}, Purpose: "benchmark",
					Terms: Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
						Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
					Envelope: Envelope{Agent: agent, Mandate: tok},
				}
				if err := SignInstruction(in, agentKey); err != nil {
					panic(err)
				}
				bodies[i], _ = json.Marshal(in)
			}
		}()
	}
	wg.Wait()

	var next atomic.Int64
	var failed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	for range benchWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				res, err := svc.Pay(ctx, caller, bodies[i], "", "req_bench")
				if err != nil || res.Outcome != OutcomeSettled {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d payments did not settle", failed.Load())
	}
	b.ReportMetric(float64(b.N)/el.Seconds(), "payments/s")
	if st := st.Stats(); st.Groups > 0 {
		b.ReportMetric(float64(st.Txns)/float64(st.Groups), "txn/group")
		b.ReportMetric(float64(st.Groups)/el.Seconds(), "fsync/s")
	}
}
