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

// Hold funds on a card, then take part of them. A caller finds the
// capability with AuthorizerOf and reads every error as the package
// documentation says.
func ExampleAuthorizer() {
	ctx := context.Background()
	card, _ := fake.New("test-card", &fake.Options{Authorizations: true})
	var rail settle.Rail = card
	auth, ok := settle.AuthorizerOf(rail)
	if !ok {
		fmt.Println("this rail cannot hold funds: settle instead")
		return
	}
	req := settle.SettleRequest{Key: "int_1", Payee: "acct:seller.example", Amount: 5000, Currency: "USD"}
	hold, err := auth.Authorize(ctx, req)
	if err != nil {
		fmt.Println("authorize:", err)
		return
	}
	fmt.Println(hold.Status, hold.Amount, hold.ExpiresAt.Sub(hold.AuthorizedAt))

	// Before a capture, Lookup knows no payment under the key.
	_, err = rail.Lookup(ctx, "int_1")
	fmt.Println("before capture:", errors.Is(err, settle.ErrUnknownKey))

	st, err := auth.Capture(ctx, "int_1", 3200)
	switch {
	case err == nil:
		fmt.Println("captured:", st.Status, st.Amount)
	case errors.Is(err, settle.ErrDeclined), errors.Is(err, settle.ErrAuthorizationClosed),
		errors.Is(err, settle.ErrInvalidRequest), errors.Is(err, settle.ErrUnavailable):
		fmt.Println("nothing moved:", err)
	default:
		fmt.Println("unknown: keep settling, ask Lookup")
	}
	st, _ = rail.Lookup(ctx, "int_1")
	fmt.Println("lookup:", st.Status, st.Amount)

	// The hold is spent: a void cannot undo a capture, only a refund can.
	_, err = auth.Void(ctx, "int_1")
	fmt.Println("void:", errors.Is(err, settle.ErrAuthorizationClosed))
	// Output:
	// authorized 5000 168h0m0s
	// before capture: true
	// captured: settled 3200
	// lookup: settled 3200
	// void: true
}

func ExampleAuthorizerOf() {
	card, _ := fake.New("card", &fake.Options{Authorizations: true})
	chain, _ := fake.New("chain", &fake.Options{
		Facts: settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant},
	})
	for _, r := range []settle.Rail{card, chain} {
		_, ok := settle.AuthorizerOf(r)
		fmt.Println(r.Name(), ok)
	}
	// Output:
	// card true
	// chain false
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
