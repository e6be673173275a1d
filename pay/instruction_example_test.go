package pay_test

import (
	"errors"
	"fmt"

	"github.com/countersign/countersign/pay"
)

func ExampleDecodeInstruction() {
	body := []byte(`{"idempotencyKey":"7f3c 6a2e","payee":"acct:seller.example",
		"amount":{"minor":12.50,"currency":"USD"},"purpose":"invoice 1182",
		"terms":{"rail":"sandbox-card","reversibility":"reversible","finality":"instant",
		         "credential":"api-key","capitalSource":"payer","presence":"delegated","fee":0},
		"envelope":{"agent":"8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394",
		            "mandate":"eyJhbGciOiJFZERTQSJ9.e30.c2ln","signature":"eyJhbGciOiJFZERTQSJ9..c2ln"}}`)
	_, err := pay.DecodeInstruction(body)
	var me *pay.MalformedError
	if errors.As(err, &me) {
		fmt.Println(me.Code())
		for _, f := range me.Fields {
			fmt.Printf("%s (%s): %s\n", f.Field, f.Rule, f.Message)
		}
	}
	// Output:
	// intent.malformed
	// idempotencyKey (visibleascii): must be visible ASCII without spaces
	// amount.minor (integer): must be an integer number of minor units, without fraction or exponent
	// terms.fee (unknown): is not a known field
}

func ExampleInstruction_Check() {
	in := &pay.Instruction{
		IdempotencyKey: "k1",
		Payee:          "seller.example",
		Amount:         pay.Amount{Minor: 1250, Currency: "EURO"},
		Purpose:        "invoice 1182",
	}
	err := in.Check()
	fmt.Println(errors.Is(err, pay.ErrMalformed))
	var me *pay.MalformedError
	errors.As(err, &me)
	for _, f := range me.Fields[:2] {
		fmt.Println(f.Field, f.Rule)
	}
	fmt.Println(len(me.Fields), "problems in all")
	// Output:
	// true
	// payee payee
	// amount.currency currency
	// 11 problems in all
}

func ExampleValidCurrency() {
	for _, c := range []string{"USD", "usd", "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "eip155:1"} {
		fmt.Println(c, pay.ValidCurrency(c))
	}
	// Output:
	// USD true
	// usd false
	// eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48 true
	// eip155:1 false
}
