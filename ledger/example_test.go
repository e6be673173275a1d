package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

var at = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// post posts transfers, each in its own transaction, and panics on error.
func post(st store.Store, ts ...ledger.Transfer) {
	for _, t := range ts {
		if err := st.Update(context.Background(), func(tx store.Txn) error { return ledger.Post(tx, t) }); err != nil {
			panic(err)
		}
	}
}

// An agent deposits 10.00 USD through a card payment and locks 2.50 of it
// as a stake. The card rail's world account goes negative by what came in;
// the three balances sum to zero.
func Example() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()

	err := st.Update(ctx, func(tx store.Txn) error {
		if err := ledger.Post(tx, ledger.Transfer{
			ID: "int_01.deposit", Currency: "USD", Kind: "deposit", Ref: "int_01", At: at,
			Postings: []ledger.Posting{
				{Account: "world/rail/sandbox-card", Minor: -1000},
				{Account: "agent/a1/available", Minor: 1000},
			},
		}); err != nil {
			return err
		}
		return ledger.Post(tx, ledger.Transfer{
			ID: "stk_123.lock", Currency: "USD", Kind: "stake.lock", Ref: "stk_123", At: at.Add(time.Minute),
			Postings: []ledger.Posting{
				{Account: "agent/a1/available", Minor: -250},
				{Account: "agent/a1/stake/stk_123", Minor: 250},
			},
		})
	})
	if err != nil {
		panic(err)
	}
	_ = st.View(ctx, func(r store.Reader) error {
		for _, a := range []string{"agent/a1/available", "agent/a1/stake/stk_123", "world/rail/sandbox-card", "agent/a2/available"} {
			bal, err := ledger.Balance(r, a, "USD")
			if err != nil {
				return err
			}
			fmt.Printf("%-24s %6d\n", a, bal)
		}
		return nil
	})
	// Output:
	// agent/a1/available          750
	// agent/a1/stake/stk_123      250
	// world/rail/sandbox-card   -1000
	// agent/a2/available            0
}

// Post is idempotent per transfer ID; it refuses to overdraw an account
// outside world/, and to reuse an ID for another transfer. A refusal writes
// nothing, so the transaction may go on.
func ExamplePost() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()

	deposit := ledger.Transfer{
		ID: "int_01.deposit", Currency: "USD", Kind: "deposit", Ref: "int_01", At: at,
		Postings: []ledger.Posting{
			{Account: "world/rail/sandbox-card", Minor: -1000},
			{Account: "agent/a1/available", Minor: 1000},
		},
	}
	withdraw := ledger.Transfer{
		ID: "int_02.reserve", Currency: "USD", Kind: "withdraw.reserve", Ref: "int_02", At: at,
		Postings: []ledger.Posting{
			{Account: "agent/a1/available", Minor: -1500},
			{Account: "agent/a1/withdrawing", Minor: 1500},
		},
	}
	// A transaction function may run more than once (memstore retries
	// some on purpose): it starts from scratch each time, and what it
	// reports is printed once it committed.
	var out []string
	_ = st.Update(ctx, func(tx store.Txn) error {
		out = out[:0]
		say := func(a ...any) { out = append(out, fmt.Sprintln(a...)) }
		say("deposit:", ledger.Post(tx, deposit))
		say("replay: ", ledger.Post(tx, deposit))

		err := ledger.Post(tx, withdraw)
		say(errors.Is(err, ledger.ErrInsufficientFunds), err)

		changed := deposit
		changed.Postings = []ledger.Posting{{Account: "world/rail/sandbox-card", Minor: -2000}, {Account: "agent/a1/available", Minor: 2000}}
		err = ledger.Post(tx, changed)
		say(errors.Is(err, ledger.ErrConflict), err)

		bal, _ := ledger.Balance(tx, "agent/a1/available", "USD")
		say("balance:", bal)
		return nil
	})
	fmt.Print(strings.Join(out, ""))
	// Output:
	// deposit: <nil>
	// replay:  <nil>
	// true ledger: insufficient funds in agent/a1/available: balance 1000 USD, debit 1500
	// true ledger: transfer id already used for a different transfer: "int_01.deposit"
	// balance: 1000
}

// Lines pages an account's history, oldest first, each line with the
// running balance after it.
func ExampleLines() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	for i, minor := range []int64{500, 700, -300, 100, -200} {
		a, b := "world/rail/sandbox-card", "agent/a1/available"
		if minor < 0 {
			a, b, minor = b, "world/payout", -minor
		}
		post(st, ledger.Transfer{
			ID: fmt.Sprintf("xfer_%d", i+1), Currency: "USD", Kind: "test", At: at.Add(time.Duration(i) * time.Hour),
			Postings: []ledger.Posting{{Account: a, Minor: -minor}, {Account: b, Minor: minor}},
		})
	}

	_ = st.View(ctx, func(r store.Reader) error {
		var after uint64
		for page := 1; ; page++ {
			lines, more, err := ledger.Lines(r, "agent/a1/available", "USD", after, 2)
			if err != nil {
				return err
			}
			for _, l := range lines {
				fmt.Printf("page %d  #%d %-7s %5d -> %4d  %s\n", page, l.Seq, l.TransferID, l.Minor, l.BalanceAfter, l.At.Format(time.Kitchen))
			}
			if !more {
				return nil
			}
			after = lines[len(lines)-1].Seq
		}
	})
	// Output:
	// page 1  #1 xfer_1    500 ->  500  10:00AM
	// page 1  #2 xfer_2    700 -> 1200  11:00AM
	// page 2  #3 xfer_3   -300 ->  900  12:00PM
	// page 2  #4 xfer_4    100 -> 1000  1:00PM
	// page 3  #5 xfer_5   -200 ->  800  2:00PM
}

// Balances lists an agent's non-zero balances across accounts and
// currencies.
func ExampleBalances() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	post(st,
		ledger.Transfer{ID: "d1", Currency: "USD", Kind: "deposit", At: at, Postings: []ledger.Posting{
			{Account: "world/rail/sandbox-card", Minor: -1000}, {Account: "agent/a1/available", Minor: 1000}}},
		ledger.Transfer{ID: "d2", Currency: "EUR", Kind: "deposit", At: at, Postings: []ledger.Posting{
			{Account: "world/rail/sandbox-card", Minor: -300}, {Account: "agent/a1/available", Minor: 300}}},
		ledger.Transfer{ID: "s1", Currency: "USD", Kind: "stake.lock", Ref: "stk_1", At: at, Postings: []ledger.Posting{
			{Account: "agent/a1/available", Minor: -400}, {Account: "agent/a1/stake/stk_1", Minor: 400}}},
	)
	_ = st.View(ctx, func(r store.Reader) error {
		bals, err := ledger.Balances(r, "agent/a1/")
		if err != nil {
			return err
		}
		for _, b := range bals {
			fmt.Println(b.Account, b.Currency, b.Minor)
		}
		return nil
	})
	// Output:
	// agent/a1/available EUR 300
	// agent/a1/available USD 600
	// agent/a1/stake/stk_1 USD 400
}

// Check recomputes the books from the stored transfers and lines. Here a
// transfer is deleted behind the ledger's back (its key is "ledger/t/" and
// its id), leaving lines that no transfer accounts for.
func ExampleCheck() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	post(st,
		ledger.Transfer{ID: "d1", Currency: "USD", Kind: "deposit", At: at, Postings: []ledger.Posting{
			{Account: "world/rail/sandbox-card", Minor: -1000}, {Account: "agent/a1/available", Minor: 1000}}},
		ledger.Transfer{ID: "s1", Currency: "USD", Kind: "stake.lock", Ref: "stk_1", At: at, Postings: []ledger.Posting{
			{Account: "agent/a1/available", Minor: -400}, {Account: "agent/a1/stake/stk_1", Minor: 400}}},
	)
	check := func() {
		_ = st.View(ctx, func(r store.Reader) error {
			err := ledger.Check(r)
			fmt.Println(errors.Is(err, ledger.ErrInconsistent), err)
			return nil
		})
	}
	check()
	_ = st.Update(ctx, func(tx store.Txn) error { return tx.Delete([]byte("ledger/t/s1")) })
	check()
	// Output:
	// false <nil>
	// true ledger: inconsistent: line agent/a1/available USD #2: its transfer "s1" is missing
}

// Get returns a transfer as posted, with At in UTC.
func ExampleGet() {
	ctx := context.Background()
	st := memstore.New(nil)
	defer st.Close()
	post(st, ledger.Transfer{
		ID: "int_01.deposit", Currency: "USD", Kind: "deposit", Ref: "int_01",
		At: time.Date(2026, 11, 22, 11, 0, 0, 0, time.FixedZone("CET", 3600)),
		Postings: []ledger.Posting{
			{Account: "world/rail/sandbox-card", Minor: -1000},
			{Account: "agent/a1/available", Minor: 1000},
		},
	})
	_ = st.View(ctx, func(r store.Reader) error {
		t, err := ledger.Get(r, "int_01.deposit")
		fmt.Println(t.Kind, t.Ref, t.At, t.Postings, err)
		_, err = ledger.Get(r, "int_02.deposit")
		fmt.Println(errors.Is(err, ledger.ErrNotFound), err)
		return nil
	})
	// Output:
	// deposit int_01 2026-11-22 10:00:00 +0000 UTC [{world/rail/sandbox-card -1000} {agent/a1/available 1000}] <nil>
	// true ledger: no such transfer: "int_02.deposit"
}
