package memory_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/memstore"
)

// deployment is a memory store over an in-memory store, with an operator
// key that issues memory mandates and a clock the example moves.
type deployment struct {
	svc   *memory.Service
	opKey ed25519.PrivateKey
	now   time.Time
}

func newDeployment() *deployment {
	d := &deployment{now: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	clock := func() time.Time { d.now = d.now.Add(time.Millisecond); return d.now }
	st := memstore.New(nil)
	_, recKey, _ := ed25519.GenerateKey(nil)
	lg, err := audit.Open(context.Background(), st, recKey, &audit.Options{Now: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(nil)
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-1", Public: opPub}}, &pay.MandateVerifierOptions{Now: clock})
	if err != nil {
		panic(err)
	}
	d.opKey = opKey
	if d.svc, err = memory.New(memory.Options{Store: st, Log: lg, Mandates: mv, Now: clock, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		panic(err)
	}
	return d
}

// mandate is what an operator issues (countersign memory mandate).
func (d *deployment) mandate(agent string) string {
	tok, err := memory.SignMandate(memory.MandateClaims{ID: "mm-assistant", Agent: agent,
		IssuedAt: d.now.Add(-time.Hour), ExpiresAt: d.now.Add(24 * time.Hour), Namespace: "assistant",
		CanRead: true, CanWrite: true, CanErase: true}, d.opKey, "op-1")
	if err != nil {
		panic(err)
	}
	return tok
}

// An agent remembers where a user lives, learns that it changed, and can
// still recall what it believed before; anyone checks the page it got; a
// person erases the fact.
func Example() {
	ctx := context.Background()
	d := newDeployment()
	agent := "4b1f6f3f8c0e2e7a1c9d5b3a7e6f0d2c4b1f6f3f8c0e2e7a1c9d5b3a7e6f0d2c"
	mandate := d.mandate(agent)
	c, err := memory.NewClient(d.svc, mandate, "assistant")
	if err != nil {
		panic(err)
	}
	movedAt := d.now.Add(-24 * time.Hour)
	paris, err := c.Remember(ctx, memory.Fact{Subject: "user:ada", Kind: "home", Body: "Paris", ValidFrom: d.now.Add(-365 * 24 * time.Hour)})
	if err != nil {
		panic(err)
	}
	before := d.now
	if _, err := c.Remember(ctx, memory.Fact{Subject: "user:ada", Kind: "home", Body: "Lyon", ValidFrom: movedAt}); err != nil {
		panic(err)
	}

	now, _ := c.Recall(ctx, memory.RecallRequest{Subject: "user:ada"})
	asBefore, _ := c.Recall(ctx, memory.RecallRequest{Subject: "user:ada", TxAt: &before})
	lastYear := movedAt.Add(-30 * 24 * time.Hour)
	history, _ := c.Recall(ctx, memory.RecallRequest{Subject: "user:ada", ValidAt: &lastYear})
	fmt.Println("lives now:", string(now.Data[0].Body))
	fmt.Println("believed before the move was learned:", string(asBefore.Data[0].Body))
	fmt.Println("lived a month before the move:", string(history.Data[0].Body))

	page, _ := json.Marshal(now)
	fmt.Println("page holds:", memory.Verify(d.svc.VerifierKey(), page).Holds)

	ctxt, _ := c.Assemble(ctx, memory.AssembleRequest{Budget: memory.Budget{MaxTokens: 50}, Query: "where does ada live"})
	fmt.Println("context items:", len(ctxt.Items), "abstained:", ctxt.Abstained)

	proof, err := d.svc.Forget(ctx, memory.ForgetRequest{Mandate: mandate, RootID: paris.ID, Rationale: "Ada asked to be forgotten"},
		memory.OperatorCall{Operator: "op-1", Rationale: "Ada asked to be forgotten"})
	if err != nil {
		panic(err)
	}
	raw, _ := json.Marshal(proof)
	fmt.Println("erased:", len(proof.Erased), "proof holds:", memory.Verify(d.svc.VerifierKey(), raw).Holds)
	history, _ = c.Recall(ctx, memory.RecallRequest{Subject: "user:ada", ValidAt: &lastYear})
	fmt.Println("a month before the move, after erasure:", len(history.Data), "records")
	// Output:
	// lives now: "Lyon"
	// believed before the move was learned: "Paris"
	// lived a month before the move: "Paris"
	// page holds: true
	// context items: 1 abstained: false
	// erased: 2 proof holds: true
	// a month before the move, after erasure: 0 records
}

// Verify needs nothing but the deployment's verifier key: a tampered
// artifact does not hold, and the answer says why.
func ExampleVerify() {
	ctx := context.Background()
	d := newDeployment()
	agent := "4b1f6f3f8c0e2e7a1c9d5b3a7e6f0d2c4b1f6f3f8c0e2e7a1c9d5b3a7e6f0d2c"
	c, _ := memory.NewClient(d.svc, d.mandate(agent), "assistant")
	_, _ = c.Remember(ctx, memory.Fact{Subject: "user:ada", Body: map[string]string{"likes": "tea"}})
	page, _ := c.Recall(ctx, memory.RecallRequest{})
	page.Data[0].Body = json.RawMessage(`{"likes":"coffee"}`)
	raw, _ := json.Marshal(page)
	v := memory.Verify(d.svc.VerifierKey(), raw)
	fmt.Println(v.Holds, v.Reason)
	// Output:
	// false the signature does not verify with this key
}
