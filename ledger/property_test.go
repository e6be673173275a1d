package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
)

// pair is an (account, currency) of the model.
type pair struct{ account, currency string }

// TestRandomTransfers posts a few thousand random transfers among a handful
// of agent and world accounts, many of them refused, checking each outcome
// against a model, and then checks the books: Check passes, every currency
// sums to zero, and every balance is the sum of its lines.
func TestRandomTransfers(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			n := 3000
			if d.name != "memstore" && testing.Short() {
				n = 500
			}
			testRandomTransfers(t, d.open(t), 42, n)
		})
	}
}

func testRandomTransfers(t *testing.T, st store.Store, seed uint64, n int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var agents, worlds []string
	for _, a := range []string{"a1", "a2", "a3", "a4"} {
		for _, kind := range []string{"available", "stake/stk_1", "stake/stk_2", "withdrawing"} {
			agents = append(agents, "agent/"+a+"/"+kind)
		}
	}
	worlds = []string{"world/rail/card", "world/rail/bank", "world/fx"}
	accounts := append(slices.Clone(agents), worlds...)
	currencies := []string{"USD", "EUR", "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"}

	model := map[pair]int64{}
	var posted []Transfer
	var nPosted, nRefused, nReplayed, nConflicts int

	for i := range n {
		tr := Transfer{
			ID: fmt.Sprintf("xfer_%05d", i), Currency: currencies[rng.IntN(len(currencies))],
			Kind: "move", Ref: fmt.Sprintf("int_%d", rng.IntN(100)), At: t0.Add(time.Duration(i) * time.Second),
		}
		wantErr := error(nil)
		switch r := rng.IntN(100); {
		case r < 8 && len(posted) > 0: // replay, postings shuffled
			tr = posted[rng.IntN(len(posted))]
			tr.Postings = slices.Clone(tr.Postings)
			rng.Shuffle(len(tr.Postings), func(i, j int) { tr.Postings[i], tr.Postings[j] = tr.Postings[j], tr.Postings[i] })
			nReplayed++
		case r < 12 && len(posted) > 0: // an id reused for another transfer
			tr = posted[rng.IntN(len(posted))]
			tr.Kind = "other"
			wantErr = ErrConflict
			nConflicts++
		case r < 45: // a deposit or a withdrawal
			tr.Kind = "deposit"
			w, a, amt := worlds[rng.IntN(len(worlds))], agents[rng.IntN(len(agents))], int64(1+rng.IntN(5000))
			if rng.IntN(2) == 0 {
				tr.Kind, amt = "withdraw", -amt
			}
			tr.Postings = []Posting{{w, -amt}, {a, amt}}
		default: // a move among 2..4 accounts, any of them world
			k := 2 + rng.IntN(3)
			for tr.Postings == nil {
				var sum int64
				var ps []Posting
				perm := rng.Perm(len(accounts))[:k]
				for _, j := range perm[:k-1] {
					m := int64(1+rng.IntN(6000)) * int64(1-2*rng.IntN(2))
					ps = append(ps, Posting{accounts[j], m})
					sum += m
				}
				if sum != 0 { // else draw again: the last amount would be 0
					tr.Postings = append(ps, Posting{accounts[perm[k-1]], -sum})
				}
			}
		}
		fresh := tr.ID == fmt.Sprintf("xfer_%05d", i)

		// What the model expects of a new transfer: the first account
		// outside world/ that would go negative is named.
		var short string
		if fresh {
			for _, p := range tr.Postings {
				if model[pair{p.Account, tr.Currency}]+p.Minor < 0 && !isWorld(p.Account) {
					short = p.Account
					wantErr = ErrInsufficientFunds
					break
				}
			}
		}

		err := st.Update(ctx, func(tx store.Txn) error { return Post(tx, tr) })
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("step %d: Post(%+v) = %v, want %v", i, tr, err, wantErr)
		}
		var ife *InsufficientFundsError
		if errors.As(err, &ife) && ife.Account != short {
			t.Fatalf("step %d: insufficient funds in %s, want %s", i, ife.Account, short)
		}
		switch {
		case err != nil:
			nRefused++
		case fresh:
			for _, p := range tr.Postings {
				model[pair{p.Account, tr.Currency}] += p.Minor
			}
			posted = append(posted, tr)
			nPosted++
		}
	}
	t.Logf("%d steps: %d posted, %d refused (%d conflicts), %d replayed", n, nPosted, nRefused, nConflicts, nReplayed)
	if nPosted < n/4 || nRefused-nConflicts < n/8 {
		t.Errorf("a poor mix: %d posted, %d refused for funds", nPosted, nRefused-nConflicts)
	}

	view(t, st, func(r store.Reader) error {
		if err := Check(r); err != nil {
			t.Fatalf("Check: %v", err)
		}

		// Every balance is the model's, and the sum of its lines.
		for _, a := range accounts {
			for _, c := range currencies {
				want := model[pair{a, c}]
				bal, err := Balance(r, a, c)
				if err != nil || bal != want {
					t.Errorf("Balance(%s, %s) = %d, %v; want %d", a, c, bal, err, want)
				}
				var sum int64
				for i, l := range allLines(t, r, a, c, 1+rng.IntN(50)) {
					sum += l.Minor
					if l.Seq != uint64(i+1) || l.BalanceAfter != sum || (l.BalanceAfter < 0 && !isWorld(a)) {
						t.Fatalf("%s %s line %d: %+v, running sum %d", a, c, i, l, sum)
					}
				}
				if sum != bal {
					t.Errorf("%s %s: lines sum to %d, balance %d", a, c, sum, bal)
				}
			}
		}

		// Balances lists exactly the non-zero ones, in key order, and each
		// currency sums to zero.
		all, err := Balances(r, "")
		if err != nil {
			t.Fatal(err)
		}
		var want []AccountBalance
		for p, m := range model {
			if m != 0 {
				want = append(want, AccountBalance{p.account, p.currency, m})
			}
		}
		slices.SortFunc(want, func(x, y AccountBalance) int {
			return cmp.Or(cmp.Compare(x.Account, y.Account), cmp.Compare(x.Currency, y.Currency))
		})
		if !slices.Equal(all, want) {
			t.Errorf("Balances(\"\") = %v\nwant %v", all, want)
		}
		sums := map[string]int64{}
		for _, b := range all {
			sums[b.Currency] += b.Minor
		}
		for c, s := range sums {
			if s != 0 {
				t.Errorf("balances in %s sum to %d", c, s)
			}
		}
		return nil
	})
}

// Concurrent transfers over shared accounts stay consistent: the store
// serializes them, and none extends an account's lines from a stale point.
func TestConcurrentPosts(t *testing.T) {
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			st := d.open(t)
			const workers, each = 4, 100
			var wg sync.WaitGroup
			var mu sync.Mutex // guards errs
			var errs []error
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("w%d_%d", w, i)
						trs := []Transfer{
							xfer(id+"_dep", "USD", card, -2, alice, 2),
							xfer(id+"_mv", "USD", alice, -3, bob, 3), // refused until alice has 3
						}
						for _, tr := range trs {
							err := st.Update(t.Context(), func(tx store.Txn) error { return Post(tx, tr) })
							if err != nil && !errors.Is(err, ErrInsufficientFunds) {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
							}
						}
					}
				})
			}
			wg.Wait()
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			view(t, st, func(r store.Reader) error {
				if err := Check(r); err != nil {
					t.Fatal(err)
				}
				a, _ := Balance(r, alice, "USD")
				b, _ := Balance(r, bob, "USD")
				c, _ := Balance(r, card, "USD")
				if a+b != workers*each*2 || c != -workers*each*2 || b%3 != 0 {
					t.Errorf("balances alice %d, bob %d, card %d", a, b, c)
				}
				return nil
			})
		})
	}
}
