package pay_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

// world is the smallest complete money path: memory store, record, a fake
// card rail, an operator key, an agent with a mandate.
type world struct {
	svc      *pay.Service
	caller   pay.Caller
	agentKey ed25519.PrivateKey
	mandate  string
}

func newWorld() *world {
	st := &memstore.Store{}
	_, rk, _ := ed25519.GenerateKey(rand.Reader)
	record, _ := audit.Open(context.Background(), st, rk, nil)
	card, _ := fake.New("sandbox-card", &fake.Options{Store: st})
	rails := &settle.Registry{}
	_ = rails.Register(card)
	_, opKey, _ := ed25519.GenerateKey(rand.Reader)
	agentPub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agent := hex.EncodeToString(agentPub)
	now := time.Now().UTC().Truncate(time.Second)
	mandate, err := pay.SignMandate(pay.MandateClaims{
		ID: "mdt_1", Agent: agent, IssuedAt: now, ExpiresAt: now.Add(time.Hour), Payees: []string{"*"},
		Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
		Rails: []string{"sandbox-card"}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
	}, opKey, "op-alice")
	if err != nil {
		panic(err)
	}
	mv, _ := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-alice", Public: opKey.Public()}}, nil)
	svc, err := pay.New(pay.Options{Store: st, Log: record, Rails: rails, Mandates: mv})
	if err != nil {
		panic(err)
	}
	return &world{svc: svc, caller: pay.Caller{KeyID: "ak_example", Agents: []string{agent}}, agentKey: agentKey, mandate: mandate}
}

func (w *world) pay(key string, minor int64) *pay.Result {
	in := &pay.Instruction{
		IdempotencyKey: key, Payee: "acct:seller.example", Amount: pay.Amount{Minor: minor, Currency: "USD"},
		Purpose: "example", Envelope: pay.Envelope{Mandate: w.mandate},
		Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
	}
	if err := pay.SignInstruction(in, w.agentKey); err != nil {
		panic(err)
	}
	res, err := w.svc.PayInstruction(context.Background(), w.caller, in, "", "")
	if err != nil {
		panic(err)
	}
	return res
}

var alice = pay.OperatorCall{Operator: "op-alice", Rationale: "checked with the vendor"}

func ExampleService_PayInstruction() {
	w := newWorld()
	res := w.pay("order-1", 1250)
	again := w.pay("order-1", 1250) // the same idempotency key: a replay
	fmt.Println(res.Outcome, res.Receipt.Amount.Minor, again.Replayed, again.Receipt.ID == res.Receipt.ID)
	// Output: settled 1250 true true
}

func ExampleService_Approve() {
	w := newWorld()
	held := w.pay("big-order", 20_000).Held
	fmt.Println(held.Status, held.Decision.Reasons[0].Code)
	res, err := w.svc.Approve(context.Background(), pay.ApproveRequest{
		IntentID: held.IntentID, Challenge: held.Challenge, MandateID: held.MandateID, Acknowledged: true,
	}, alice)
	fmt.Println(res.Outcome, res.Receipt.Amount.Minor, err)
	// Output:
	// pending_approval confirm_threshold
	// settled 20000 <nil>
}

func ExampleService_Refund() {
	w := newWorld()
	res := w.pay("order-2", 5000)
	part := int64(2000)
	r, _ := w.svc.Refund(context.Background(), pay.RefundRequest{IntentID: res.IntentID, AmountMinor: &part}, alice)
	fmt.Println(r.Status, r.RefundedMinor, r.RemainingMinor)
	r, _ = w.svc.Refund(context.Background(), pay.RefundRequest{IntentID: res.IntentID}, alice)
	fmt.Println(r.Status, r.RefundedMinor, r.RemainingMinor)
	// Output:
	// partially_refunded 2000 3000
	// refunded 5000 0
}

func ExampleService_SetKillSwitch() {
	w := newWorld()
	ctl, _ := w.svc.SetKillSwitch(context.Background(), true, alice)
	_, err := w.svc.Pay(context.Background(), w.caller, []byte(`{}`), "", "")
	fmt.Println(ctl.KillSwitchEngaged, err != nil)
	ctl, _ = w.svc.SetKillSwitch(context.Background(), false, alice)
	fmt.Println(ctl.KillSwitchEngaged, w.pay("after", 100).Outcome)
	// Output:
	// true true
	// false settled
}

func ExampleService_Reconcile() {
	w := newWorld()
	rep, err := w.svc.Reconcile(context.Background())
	fmt.Printf("%+v %v\n", rep, err)
	// Output: {Settled:0 Failed:0 StillSettling:0 RefundsDone:0 RefundsPending:0} <nil>
}
