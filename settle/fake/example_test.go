package fake_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// Settle a payment on a fake rail.
func Example() {
	ctx := context.Background()
	rail, err := fake.New("test-card", &fake.Options{
		Now: func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	s, err := rail.Settle(ctx, settle.SettleRequest{
		Key:      "int_01JD5Z8Q7K6W2V3N4M5P6R7S8T",
		Payee:    "acct:seller.example",
		Amount:   1250,
		Currency: "USD",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Status, s.Amount, s.Currency, s.SettledAt.Format(time.RFC3339))
	fmt.Println(regexp.MustCompile(`^fk_[0-9a-f]{24}$`).MatchString(s.Reference))
	// Output:
	// settled 1250 USD 2026-11-22T10:00:00Z
	// true
}

// The response to a payment is lost after the money moved. The caller must
// not call the payment failed: Lookup tells the truth.
func ExampleRail_Lookup() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", &fake.Options{
		// Lose the response of the first Settle, after the rail acted.
		Fault: fake.FailNext(fake.OpSettle, 1, fake.AfterMove(settle.ErrUnknownOutcome)),
	})
	_, err := rail.Settle(ctx, settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 500, Currency: "EUR"})
	fmt.Println("settle:", errors.Is(err, settle.ErrUnknownOutcome))

	s, err := rail.Lookup(ctx, "int_1")
	fmt.Println("lookup:", s.Status, s.Amount, err)

	_, err = rail.Lookup(ctx, "int_2")
	fmt.Println("never sent:", errors.Is(err, settle.ErrUnknownKey))
	// Output:
	// settle: true
	// lookup: settled 500 <nil>
	// never sent: true
}

// Partial refunds, idempotent on the refund id, up to the settled amount.
func ExampleRail_Refund() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", nil)
	_, _ = rail.Settle(ctx, settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 1000, Currency: "USD"})

	for _, rf := range []settle.RefundRequest{
		{RefundID: "rf_1", Key: "int_1", Amount: 400},
		{RefundID: "rf_1", Key: "int_1", Amount: 400}, // a retry: refunds nothing more
		{RefundID: "rf_2", Key: "int_1", Amount: 700},
		{RefundID: "rf_3", Key: "int_1", Amount: 600},
	} {
		res, err := rail.Refund(ctx, rf)
		switch {
		case errors.Is(err, settle.ErrRefundExceeds):
			fmt.Println(rf.RefundID, "refused: exceeds")
		case err != nil:
			fmt.Println(rf.RefundID, "error:", err)
		default:
			fmt.Println(rf.RefundID, "refunded", res.Amount, "total", res.Refunded)
		}
	}
	// Output:
	// rf_1 refunded 400 total 400
	// rf_1 refunded 400 total 400
	// rf_2 refused: exceeds
	// rf_3 refunded 600 total 1000
}

// A deferred rail answers pending; the payment settles when its finality
// delay has passed.
func ExampleRail_Advance() {
	ctx := context.Background()
	accepted := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rail, _ := fake.New("test-bank", &fake.Options{
		Facts:         settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred},
		FinalityDelay: 2 * time.Hour,
		Now:           func() time.Time { return accepted }, // a clock that stands still
	})
	s, _ := rail.Settle(ctx, settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"})
	fmt.Println(s.Status)

	n, _ := rail.Advance(ctx, accepted.Add(3*time.Hour))
	s, _ = rail.Lookup(ctx, "int_1")
	fmt.Println(n, s.Status, s.SettledAt.Format(time.RFC3339))
	// Output:
	// pending
	// 1 settled 2026-11-22T12:00:00Z
}

// The response to an authorization is lost after the rail placed the hold:
// LookupAuthorization tells the truth, and repeating the same Authorize
// replays the hold rather than placing a second one.
func ExampleRail_Authorize() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", &fake.Options{
		Authorizations: true,
		Fault:          fake.FailNext(fake.OpAuthorize, 1, fake.AfterMove(nil)),
	})
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 900, Currency: "EUR"}
	_, err := rail.Authorize(ctx, req)
	fmt.Println("authorize:", errors.Is(err, settle.ErrUnknownOutcome))

	a, err := rail.LookupAuthorization(ctx, "int_1")
	fmt.Println("lookup:", a.Status, a.Amount, err)

	a, err = rail.Authorize(ctx, req)
	fmt.Println("again:", a.Status, err)
	entries, _ := rail.Ledger(ctx)
	fmt.Println("holds:", len(entries))
	// Output:
	// authorize: true
	// lookup: authorized 900 <nil>
	// again: authorized <nil>
	// holds: 1
}

// A hold expires by the rail's clock; after that nothing can be captured
// under its key, and voiding it only reports the expiry.
func ExampleRail_Capture() {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rail, _ := fake.New("test-card", &fake.Options{
		Authorizations:   true,
		AuthorizationTTL: 24 * time.Hour,
		Now:              func() time.Time { return now },
	})
	a, _ := rail.Authorize(ctx, settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 700, Currency: "USD"})
	fmt.Println(a.Status, a.ExpiresAt.Format(time.RFC3339))

	now = a.ExpiresAt // the rail's clock reaches the expiry
	_, err := rail.Capture(ctx, "int_1", 700)
	fmt.Println("capture:", errors.Is(err, settle.ErrAuthorizationClosed))
	a, err = rail.Void(ctx, "int_1")
	fmt.Println("void:", a.Status, err)
	_, err = rail.Lookup(ctx, "int_1")
	fmt.Println("nothing paid:", errors.Is(err, settle.ErrUnknownKey))
	// Output:
	// authorized 2026-11-23T10:00:00Z
	// capture: true
	// void: expired <nil>
	// nothing paid: true
}

// The sandbox server's rails, registered by name.
func ExampleNewSandbox() {
	rails, err := fake.NewSandbox(&fake.SandboxOptions{NoLatency: true})
	if err != nil {
		panic(err)
	}
	var reg settle.Registry
	for _, r := range rails {
		if err := reg.Register(r); err != nil {
			panic(err)
		}
	}
	for _, name := range reg.Names() {
		r, _ := reg.Get(name)
		_, holds := settle.AuthorizerOf(r)
		fmt.Println(name, r.Facts().Reversibility, r.Facts().Finality, holds)
	}
	// Output:
	// sandbox-bank reversible deferred false
	// sandbox-card reversible instant true
	// sandbox-chain irreversible instant false
}

// Script the next calls to fail, then recover.
func ExampleFailNext() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", &fake.Options{
		Fault: fake.FailNext(fake.OpSettle, 2, settle.ErrUnavailable),
	})
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"}
	for range 3 {
		s, err := rail.Settle(ctx, req)
		fmt.Println(s.Status, errors.Is(err, settle.ErrUnavailable))
	}
	// Output:
	//  true
	//  true
	// settled false
}

// A rail whose random faults are reproducible.
func ExampleSeededRand() {
	ctx := context.Background()
	outcomes := func() string {
		rail, _ := fake.New("test-card", &fake.Options{DeclineRate: 0.5, Rand: fake.SeededRand(42)})
		out := ""
		for i := range 12 {
			_, err := rail.Settle(ctx, settle.SettleRequest{Key: fmt.Sprint("int_", i), Payee: "acct:p", Amount: 1, Currency: "USD"})
			if errors.Is(err, settle.ErrDeclined) {
				out += "d"
			} else {
				out += "s"
			}
		}
		return out
	}
	first, second := outcomes(), outcomes()
	fmt.Println(first == second, len(first))
	// Output:
	// true 12
}

// After a process restart, a new rail over the same store still knows
// every payment the old one made. With the server's Pebble store this holds
// across a crash.
func ExampleNew_restart() {
	ctx := context.Background()
	st := &memstore.Store{}
	before, _ := fake.New("test-card", &fake.Options{Store: st})
	_, _ = before.Settle(ctx, settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"})

	after, _ := fake.New("test-card", &fake.Options{Store: st})
	s, err := after.Lookup(ctx, "int_1")
	fmt.Println(s.Status, err)
	// Output:
	// settled <nil>
}

// Prove in a test that nothing was paid twice.
func ExampleRail_CheckLedger() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", &fake.Options{UnknownOutcomeRate: 0.5, Rand: fake.SeededRand(1)})
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"}
	for {
		// Retry until the outcome is known, as a caller must.
		if _, err := rail.Settle(ctx, req); !errors.Is(err, settle.ErrUnknownOutcome) {
			break
		}
	}
	_, _ = rail.Settle(ctx, req) // and once more for luck
	entries, _ := rail.Ledger(ctx)
	for _, e := range entries {
		fmt.Println(e.Seq, e.Kind, e.Key, e.Status, e.Amount)
	}
	fmt.Println(rail.CheckLedger(ctx))
	// Output:
	// 1 payment int_1 settled 100
	// <nil>
}

// A rail whose ledger shares the caller's store settles inside the
// caller's transaction: its entry and the caller's record of the outcome
// commit together, or neither does.
func ExampleRail_SettleInTxn() {
	ctx := context.Background()
	st := &memstore.Store{}
	rail, _ := fake.New("test-card", &fake.Options{Store: st, SharedLog: true})
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"}
	step, s, err := rail.SettleInTxn(ctx, st, req)
	if step == nil {
		// A fault of the simulation around the write: Settle's answer.
		fmt.Println(s.Status, err)
		return
	}
	err = st.Update(ctx, func(tx store.Txn) error {
		s, err := step(tx)
		if err != nil {
			return err
		}
		return tx.Set([]byte("outcome/int_1"), []byte(s.Status))
	})
	fmt.Println(err)
	s, _ = rail.Lookup(ctx, "int_1")
	fmt.Println(s.Status)
	// Output:
	// <nil>
	// settled
}

// A rail that answers at once can be prepared before the payment is
// decided: the step is the payment, sent only if the caller runs it in the
// transaction that records the decision (here, an allowed one).
func ExampleRail_PrepareInTxn() {
	ctx := context.Background()
	st := &memstore.Store{}
	rail, _ := fake.New("test-card", &fake.Options{Store: st, SharedLog: true})
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 100, Currency: "USD"}
	step := rail.PrepareInTxn(ctx, st, req)
	if step == nil {
		// Latency or faults to simulate: decide first, then SettleInTxn.
		return
	}
	err := st.Update(ctx, func(tx store.Txn) error {
		if err := tx.Set([]byte("decision/int_1"), []byte("allow")); err != nil {
			return err
		}
		s, err := step(tx)
		if err != nil {
			return err
		}
		return tx.Set([]byte("outcome/int_1"), []byte(s.Status))
	})
	fmt.Println(err)
	s, _ := rail.Lookup(ctx, "int_1")
	fmt.Println(s.Status)
	// Output:
	// <nil>
	// settled
}
