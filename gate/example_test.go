package gate_test

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/gate"
)

func ExampleDecide() {
	agent := "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"
	in := gate.Input{
		Agent:    agent,
		Payee:    "acct:seller.example",
		Amount:   12000, // $120.00
		Currency: "USD",
		Terms: gate.Terms{
			Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated,
		},
		Credential: gate.CredentialAPIKey,
		Mandate: gate.Mandate{
			ID: "mdt_01JDEMO", Agent: agent, Payees: []string{"*"}, Currency: "USD",
			PerTxCapMinor: 50000, PerPeriodCapMinor: 1000000, Period: gate.Day,
			Rails:             []string{"sandbox-card"},
			ConfirmAboveMinor: 10000, IrreversibleConfirmAboveMinor: 0,
		},
		Counters: gate.Counters{PeriodMinor: 995000},
		Policy: gate.Policy{Rails: map[string]gate.RailFacts{
			"sandbox-card": {Reversibility: gate.Reversible, Finality: gate.FinalityInstant},
		}},
	}
	d := gate.Decide(in)
	fmt.Println(d.Outcome)
	for _, r := range d.Reasons {
		fmt.Printf("%s: %s\n", r.Code, r.Message)
	}

	// With less spent today, the same payment only needs a person.
	in.Counters.PeriodMinor = 0
	d = gate.Decide(in)
	fmt.Println(d.Outcome, d.Reasons[0].Code)
	// Output:
	// deny
	// period_cap: 995000 already spent or reserved this day; 12000 more would pass the cap 1000000
	// confirm confirm_threshold
}

func ExamplePeriodWindow() {
	sunday := time.Date(2026, 11, 22, 23, 59, 59, 0, time.UTC)
	start, end := gate.PeriodWindow(gate.Week, sunday)
	fmt.Println(start.Format(time.RFC3339), end.Format(time.RFC3339))
	start, _ = gate.PeriodWindow(gate.Week, sunday.Add(time.Second))
	fmt.Println(start.Format(time.RFC3339))
	start, end = gate.PeriodWindow(gate.Month, time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC))
	fmt.Println(start.Format(time.RFC3339), end.Format(time.RFC3339))
	// Output:
	// 2026-11-16T00:00:00Z 2026-11-23T00:00:00Z
	// 2026-11-23T00:00:00Z
	// 2024-02-01T00:00:00Z 2024-03-01T00:00:00Z
}

func ExampleVelocityWindow() {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	start, end := gate.VelocityWindow(gate.Velocity{Count: 5, Seconds: 3600}, now)
	fmt.Println(start.Format(time.RFC3339), end.Format(time.RFC3339))
	// Output:
	// 2026-11-22T09:00:00Z 2026-11-22T10:00:00Z
}

func ExampleMatchPayee() {
	for _, payee := range []string{"acct:a.example.com", "acct:example.com", "acct:badexample.com"} {
		fmt.Println(payee, gate.MatchPayee("*.example.com", payee))
	}
	// Output:
	// acct:a.example.com true
	// acct:example.com false
	// acct:badexample.com false
}

func ExampleValidPayee() {
	fmt.Println(gate.ValidPayee("acct:seller.example"), gate.ValidPayee("https://seller.example/"))
	// Output: true false
}

func ExampleValidPayeePattern() {
	fmt.Println(gate.ValidPayeePattern("*.seller.example"), gate.ValidPayeePattern("*seller.example"))
	// Output: true false
}

func ExampleValidRail() {
	fmt.Println(gate.ValidRail("sandbox-card"), gate.ValidRail("Sandbox Card"))
	// Output: true false
}
