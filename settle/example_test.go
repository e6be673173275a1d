package settle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// What a caller may conclude from each Settle outcome: only a nil error, a
// decline, an invalid request and an unavailable rail are facts; everything
// else means the money may have moved.
func Example() {
	ctx := context.Background()
	rail, _ := fake.New("test-card", &fake.Options{
		DeclineAbove: 10_000,
		// The third call's response is lost after the money moved.
		Fault: func(op fake.Op, req any) error {
			if r, ok := req.(settle.SettleRequest); ok && r.Key == "int_3" {
				return fake.AfterMove(settle.ErrUnknownOutcome)
			}
			return nil
		},
	})
	describe := func(key string, amount int64) string {
		st, err := rail.Settle(ctx, settle.SettleRequest{Key: key, Payee: "acct:seller.example", Amount: amount, Currency: "USD"})
		var decline *settle.DeclineError
		switch {
		case err == nil:
			return string(st.Status)
		case errors.As(err, &decline):
			return "failed (final): " + decline.Code
		case errors.Is(err, settle.ErrInvalidRequest):
			return "rejected before sending"
		case errors.Is(err, settle.ErrUnavailable):
			return "not sent: retry later"
		default:
			return "unknown: keep settling, ask Lookup"
		}
	}
	fmt.Println("int_1:", describe("int_1", 1250))
	fmt.Println("int_2:", describe("int_2", 50_000))
	fmt.Println("int_3:", describe("int_3", 700))
	fmt.Println("int_4:", describe("int_4", 0))

	// The reconciler resolves int_3.
	st, err := rail.Lookup(ctx, "int_3")
	fmt.Println("int_3 after Lookup:", st.Status, err)
	// Output:
	// int_1: settled
	// int_2: failed (final): amount_too_large
	// int_3: unknown: keep settling, ask Lookup
	// int_4: rejected before sending
	// int_3 after Lookup: settled <nil>
}

func ExampleRegistry() {
	var reg settle.Registry
	card, _ := fake.New("card", nil)
	chain, _ := fake.New("chain", &fake.Options{
		Facts: settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant},
	})
	fmt.Println(reg.Register(card), reg.Register(chain))
	fmt.Println(errors.Is(reg.Register(card), settle.ErrDuplicateRail))
	fmt.Println(reg.Names())

	r, _ := reg.Get("chain")
	fmt.Println(r.Name(), r.Facts().Reversibility)
	_, err := reg.Get("wire")
	fmt.Println(errors.Is(err, settle.ErrUnknownRail))
	// Output:
	// <nil> <nil>
	// true
	// [card chain]
	// chain irreversible
	// true
}

func ExampleSettleRequest_Validate() {
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 0, Currency: "USD"}
	err := req.Validate()
	fmt.Println(errors.Is(err, settle.ErrInvalidRequest))
	fmt.Println(err)
	// Output:
	// true
	// settle: invalid request: amount 0 out of range [1, 9007199254740991]
}

func ExampleSettleRequest_Matches() {
	first := settle.SettleRequest{Key: "int_1", Payee: "acct:a", Amount: 100, Currency: "USD",
		Metadata: map[string]string{"attempt": "1"}}
	retry := first
	retry.Metadata = map[string]string{"attempt": "2"}
	changed := first
	changed.Amount = 101
	fmt.Println(first.Matches(retry), first.Matches(changed))
	// Output:
	// true false
}

func ExampleDeclineError() {
	var err error = fmt.Errorf("paying: %w", &settle.DeclineError{Code: "insufficient_funds", Message: "balance too low"})
	var decline *settle.DeclineError
	fmt.Println(errors.Is(err, settle.ErrDeclined), errors.As(err, &decline), decline.Code)
	fmt.Println(err)
	// Output:
	// true true insufficient_funds
	// paying: settle: declined (insufficient_funds): balance too low
}

func ExampleFacts_Validate() {
	fmt.Println(settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}.Validate())
	fmt.Println(settle.Facts{Reversibility: "sometimes", Finality: settle.Instant}.Validate())
	// Output:
	// <nil>
	// settle: invalid reversibility "sometimes" (want "reversible" or "irreversible")
}

func ExampleValidateName() {
	fmt.Println(settle.ValidateName("sandbox-card"))
	fmt.Println(settle.ValidateName("Sandbox Card"))
	// Output:
	// <nil>
	// settle: invalid rail name "Sandbox Card": want [a-z0-9][a-z0-9._-]*
}
