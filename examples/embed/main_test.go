package main

import "context"

// Example runs the embedded payment end to end.
func Example() {
	if err := run(context.Background()); err != nil {
		panic(err)
	}
	// Output:
	// settled: 1250 USD to acct:seller.example on sandbox-card
	// receipt of entry payment.settled verifies: true; record of 2 entries verifies: true
}
