package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/store"
)

const (
	card  = "world/rail/card"
	alice = "agent/alice/available"
	stake = "agent/alice/stake/stk_1"
	bob   = "agent/bob/available"
)

// seed posts the history every refusal case starts from: alice has 100
// USD, 60 of them deposited and then 40 more, and 10 EUR.
func seed(t testing.TB, st store.Store) {
	t.Helper()
	mustPost(t, st,
		xfer("dep1", "USD", card, -60, alice, 60),
		xfer("dep2", "USD", card, -40, alice, 40),
		xfer("dep3", "EUR", card, -10, alice, 10),
	)
}

func TestPostRefusals(t *testing.T) {
	long := strings.Repeat("a", 201)
	many := xfer("many", "USD")
	for i := range MaxPostings + 1 {
		many.Postings = append(many.Postings, Posting{Account: fmt.Sprintf("world/%d", i), Minor: 1})
	}
	many.Postings[0].Minor = -MaxPostings
	with := func(tr Transfer, edit func(*Transfer)) Transfer { edit(&tr); return tr }

	tests := []struct {
		name    string
		setup   []Transfer // posted after seed
		tr      Transfer
		want    error
		wantMsg string
	}{
		{name: "no postings", tr: xfer("x", "USD"), want: ErrInvalid, wantMsg: "0 postings"},
		{name: "one posting", tr: xfer("x", "USD", card, 0), want: ErrInvalid, wantMsg: "1 postings"},
		{name: "too many postings", tr: many, want: ErrInvalid, wantMsg: "1001 postings"},
		{name: "zero amount", tr: xfer("x", "USD", card, 0, alice, 0), want: ErrInvalid, wantMsg: "zero amount"},
		{name: "unbalanced", tr: xfer("x", "USD", card, -5, alice, 4), want: ErrInvalid, wantMsg: "sum to -1"},
		{name: "account twice", tr: xfer("x", "USD", card, -5, alice, 3, card, 2), want: ErrInvalid, wantMsg: "appears twice"},
		{name: "empty account", tr: xfer("x", "USD", card, -5, "", 5), want: ErrInvalid, wantMsg: `account ""`},
		{name: "account with space", tr: xfer("x", "USD", card, -5, "agent/a b", 5), want: ErrInvalid, wantMsg: "account"},
		{name: "account with NUL", tr: xfer("x", "USD", card, -5, "agent/a\x00USD", 5), want: ErrInvalid, wantMsg: "account"},
		{name: "account not ASCII", tr: xfer("x", "USD", card, -5, "agent/é", 5), want: ErrInvalid, wantMsg: "account"},
		{name: "account too long", tr: xfer("x", "USD", card, -5, long, 5), want: ErrInvalid, wantMsg: "account"},
		{name: "short currency", tr: xfer("x", "US", card, -5, alice, 5), want: ErrInvalid, wantMsg: "currency"},
		{name: "currency with space", tr: xfer("x", "US D", card, -5, alice, 5), want: ErrInvalid, wantMsg: "currency"},
		{name: "empty id", tr: xfer("", "USD", card, -5, alice, 5), want: ErrInvalid, wantMsg: "transfer id"},
		{name: "id with space", tr: xfer("x y", "USD", card, -5, alice, 5), want: ErrInvalid, wantMsg: "transfer id"},
		{name: "empty kind", tr: with(xfer("x", "USD", card, -5, alice, 5), func(t *Transfer) { t.Kind = "" }),
			want: ErrInvalid, wantMsg: "kind"},
		{name: "ref with newline", tr: with(xfer("x", "USD", card, -5, alice, 5), func(t *Transfer) { t.Ref = "a\n" }),
			want: ErrInvalid, wantMsg: "ref"},
		{name: "zero at", tr: with(xfer("x", "USD", card, -5, alice, 5), func(t *Transfer) { t.At = time.Time{} }),
			want: ErrInvalid, wantMsg: "zero At"},
		{name: "at after year 9999", tr: with(xfer("x", "USD", card, -5, alice, 5), func(t *Transfer) { t.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }),
			want: ErrInvalid, wantMsg: "outside years"},
		{name: "amount beyond 2^53", tr: xfer("x", "USD", card, -(MaxMinor + 1), alice, MaxMinor+1),
			want: ErrInvalid, wantMsg: "beyond"},
		{name: "world balance beyond -2^53",
			setup: []Transfer{xfer("big", "USD", "world/big", -MaxMinor, "agent/rich", MaxMinor)},
			tr:    xfer("x", "USD", "world/big", -1, bob, 1), want: ErrInvalid, wantMsg: "world/big): balance"},
		{name: "agent balance beyond 2^53",
			setup: []Transfer{xfer("big", "USD", "world/big", -MaxMinor, "agent/rich", MaxMinor)},
			tr:    xfer("x", "USD", card, -1, "agent/rich", 1), want: ErrInvalid, wantMsg: "agent/rich): balance"},
		{name: "insufficient funds", tr: xfer("x", "USD", alice, -101, bob, 101),
			want: ErrInsufficientFunds, wantMsg: "insufficient funds in agent/alice/available: balance 100 USD, debit 101"},
		{name: "insufficient funds in the second posting", tr: xfer("x", "USD", card, -5, alice, 5, bob, -1, stake, 1),
			want: ErrInsufficientFunds, wantMsg: "in agent/bob/available: balance 0 USD"},
		{name: "insufficient funds in another currency", tr: xfer("x", "EUR", alice, -11, bob, 11),
			want: ErrInsufficientFunds, wantMsg: "balance 10 EUR, debit 11"},
		{name: "insufficient funds in a world-like name", tr: xfer("x", "USD", "worlds/x", -1, bob, 1),
			want: ErrInsufficientFunds, wantMsg: "in worlds/x"},
		{name: "conflict: other amount", tr: xfer("dep1", "USD", card, -61, alice, 61), want: ErrConflict, wantMsg: `"dep1"`},
		{name: "conflict: other account", tr: xfer("dep1", "USD", card, -60, bob, 60), want: ErrConflict},
		{name: "conflict: other currency", tr: xfer("dep1", "EUR", card, -60, alice, 60), want: ErrConflict},
		{name: "conflict: other kind", tr: with(xfer("dep1", "USD", card, -60, alice, 60), func(t *Transfer) { t.Kind = "deposit" }),
			want: ErrConflict},
		{name: "conflict: other ref", tr: with(xfer("dep1", "USD", card, -60, alice, 60), func(t *Transfer) { t.Ref = "int_1" }),
			want: ErrConflict},
		{name: "conflict: other at", tr: with(xfer("dep1", "USD", card, -60, alice, 60), func(t *Transfer) { t.At = t0.Add(time.Nanosecond) }),
			want: ErrConflict},
		{name: "conflict: a posting more", tr: xfer("dep1", "USD", card, -60, alice, 50, bob, 10), want: ErrConflict},
		{name: "conflict wins over insufficient funds", tr: xfer("dep1", "USD", alice, -1000, bob, 1000), want: ErrConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMem(t)
			seed(t, st)
			mustPost(t, st, tc.setup...)
			before := dump(t, st)
			err := postCommitting(t, st, tc.tr)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Post = %v, want %v", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "ledger: ") || !contains(err.Error(), tc.wantMsg) {
				t.Errorf("Post = %q, want a message with %q", err, tc.wantMsg)
			}
			if after := dump(t, st); !slices.Equal(before, after) {
				t.Errorf("store changed by a refused Post:\n%s", cmp.Diff(before, after, cmp.AllowUnexported(kv{})))
			}
			if err := check(t, st); err != nil {
				t.Errorf("Check after refusal: %v", err)
			}
		})
	}
}

func TestInsufficientFundsError(t *testing.T) {
	st := newMem(t)
	seed(t, st)
	err := postCommitting(t, st, xfer("x", "USD", alice, -150, stake, 150))
	var ife *InsufficientFundsError
	if !errors.As(err, &ife) {
		t.Fatalf("Post = %v, want an *InsufficientFundsError", err)
	}
	want := InsufficientFundsError{Account: alice, Currency: "USD", Balance: 100, Minor: -150}
	if *ife != want {
		t.Errorf("error = %+v, want %+v", *ife, want)
	}
}

func TestPostReplay(t *testing.T) {
	dep := xfer("dep1", "USD", card, -60, alice, 60)
	tests := []struct {
		name  string
		later []Transfer // posted between the original and the replay
		tr    Transfer
	}{
		{name: "identical", tr: dep},
		{name: "postings in another order", tr: xfer("dep1", "USD", alice, 60, card, -60)},
		{name: "same instant in UTC", tr: func() Transfer { d := dep; d.At = t0.UTC(); return d }()},
		{name: "would now be refused for funds",
			tr:    xfer("spend", "USD", alice, -60, bob, 60),
			later: []Transfer{xfer("spend", "USD", alice, -60, bob, 60)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMem(t)
			mustPost(t, st, dep)
			mustPost(t, st, tc.later...)
			before := dump(t, st)
			if err := postCommitting(t, st, tc.tr); err != nil {
				t.Fatalf("replay: %v", err)
			}
			if after := dump(t, st); !slices.Equal(before, after) {
				t.Errorf("store changed by a replay:\n%s", cmp.Diff(before, after, cmp.AllowUnexported(kv{})))
			}
		})
	}
}

// A transfer and its replay in one transaction: the second Post sees the
// first one's writes.
func TestPostReplayInOneTransaction(t *testing.T) {
	st := newMem(t)
	dep := xfer("dep1", "USD", card, -60, alice, 60)
	err := st.Update(context.Background(), func(tx store.Txn) error {
		if err := Post(tx, dep); err != nil {
			return err
		}
		if err := Post(tx, dep); err != nil {
			return err
		}
		if err := Post(tx, xfer("dep1", "USD", card, -1, alice, 1)); !errors.Is(err, ErrConflict) {
			return fmt.Errorf("conflicting Post = %v, want ErrConflict", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, st, func(r store.Reader) error {
		if bal, err := Balance(r, alice, "USD"); err != nil || bal != 60 {
			t.Errorf("Balance = %d, %v; want 60", bal, err)
		}
		return nil
	})
}

// Post keeps no reference to the caller's postings.
func TestPostCopiesPostings(t *testing.T) {
	st := newMem(t)
	dep := xfer("dep1", "USD", card, -60, alice, 60)
	mustPost(t, st, dep)
	dep.Postings[1].Minor = 1
	view(t, st, func(r store.Reader) error {
		got, err := Get(r, "dep1")
		if err != nil {
			return err
		}
		if got.Postings[1].Minor != 60 {
			t.Errorf("stored posting changed with the caller's slice: %+v", got.Postings)
		}
		return nil
	})
}

func TestGet(t *testing.T) {
	st := newMem(t)
	tr := xfer("stk_1.lock", "USD", card, -60, alice, 60)
	tr.Kind, tr.Ref = "stake.lock", "stk_1"
	mustPost(t, st, tr)
	view(t, st, func(r store.Reader) error {
		got, err := Get(r, tr.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.At.Location() != time.UTC || !got.At.Equal(tr.At) {
			t.Errorf("At = %v, want %v in UTC", got.At, tr.At)
		}
		want := tr
		want.At = tr.At.UTC()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get (-want +got):\n%s", diff)
		}
		for _, id := range []string{"nope", "", "stk_1", "stk_1.lock\x00"} {
			if _, err := Get(r, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
			}
		}
		return nil
	})
}

func TestBalanceAndLines(t *testing.T) {
	st := newMem(t)
	var ts []Transfer
	for i := range 25 {
		tr := xfer(fmt.Sprintf("x%02d", i), "USD", card, -(i + 1), alice, i+1)
		tr.At = t0.Add(time.Duration(i) * time.Second)
		ts = append(ts, tr)
	}
	// An account and a currency that extend alice's and USD: their lines
	// must not show up among alice's USD lines.
	ts = append(ts,
		xfer("y1", "USDC", card, -1000, alice, 1000),
		xfer("y2", "USD", card, -2000, alice+"x", 2000))
	mustPost(t, st, ts...)
	view(t, st, func(r store.Reader) error {
		bal, err := Balance(r, alice, "USD")
		if want := int64(25 * 26 / 2); err != nil || bal != want {
			t.Errorf("Balance = %d, %v; want %d", bal, err, want)
		}
		if bal, err := Balance(r, card, "USD"); err != nil || bal != -25*26/2-2000 {
			t.Errorf("Balance(card) = %d, %v", bal, err)
		}
		if bal, err := Balance(r, bob, "USD"); err != nil || bal != 0 {
			t.Errorf("Balance(never posted) = %d, %v; want 0", bal, err)
		}
		if _, err := Balance(r, "a b", "USD"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Balance(bad account) = %v, want ErrInvalid", err)
		}

		lines := allLines(t, r, alice, "USD", 4)
		if len(lines) != 25 {
			t.Fatalf("%d lines, want 25", len(lines))
		}
		var sum int64
		for i, l := range lines {
			sum += int64(i + 1)
			want := Line{Seq: uint64(i + 1), TransferID: fmt.Sprintf("x%02d", i), Kind: "test",
				Minor: int64(i + 1), BalanceAfter: sum, At: t0.Add(time.Duration(i) * time.Second).UTC()}
			if diff := cmp.Diff(want, l); diff != "" {
				t.Errorf("line %d (-want +got):\n%s", i, diff)
			}
		}

		pages := []struct {
			after     uint64
			limit     int
			wantFirst uint64
			wantN     int
			wantMore  bool
		}{
			{0, 1, 1, 1, true},
			{0, 25, 1, 25, false},
			{0, 1000, 1, 25, false},
			{24, 1, 25, 1, false},
			{24, 2, 25, 1, false},
			{25, 10, 0, 0, false},
			{1 << 40, 10, 0, 0, false},
			{^uint64(0), 10, 0, 0, false},
		}
		for _, p := range pages {
			got, more, err := Lines(r, alice, "USD", p.after, p.limit)
			if err != nil || len(got) != p.wantN || more != p.wantMore || (p.wantN > 0 && got[0].Seq != p.wantFirst) {
				t.Errorf("Lines(after %d, limit %d) = %d lines, %v, %v; want %d from #%d, %v",
					p.after, p.limit, len(got), more, err, p.wantN, p.wantFirst, p.wantMore)
			}
		}
		for _, limit := range []int{0, -1, 1001} {
			if _, _, err := Lines(r, alice, "USD", 0, limit); !errors.Is(err, ErrInvalid) {
				t.Errorf("Lines(limit %d) = %v, want ErrInvalid", limit, err)
			}
		}
		if _, _, err := Lines(r, alice, "U", 0, 10); !errors.Is(err, ErrInvalid) {
			t.Errorf("Lines(bad currency) = %v, want ErrInvalid", err)
		}
		if got, more, err := Lines(r, bob, "USD", 0, 10); err != nil || len(got) != 0 || more {
			t.Errorf("Lines(never posted) = %v, %v, %v", got, more, err)
		}
		return nil
	})
}

func TestBalances(t *testing.T) {
	st := newMem(t)
	mustPost(t, st,
		xfer("d1", "USD", card, -100, alice, 100),
		xfer("d2", "EUR", card, -7, alice, 7),
		xfer("d3", "USDC", card, -5, bob, 5),
		xfer("s1", "USD", alice, -30, stake, 30),
		xfer("d4", "USD", card, -9, "agent/alicex/available", 9),
		xfer("d5", "USD", card, -4, "agent/carol/available", 4),
		xfer("w5", "USD", "agent/carol/available", -4, "world/payout", 4), // carol back to 0
	)
	tests := []struct {
		prefix string
		want   []AccountBalance
	}{
		{"agent/alice/", []AccountBalance{{alice, "EUR", 7}, {alice, "USD", 70}, {stake, "USD", 30}}},
		{"agent/alice", []AccountBalance{{alice, "EUR", 7}, {alice, "USD", 70}, {stake, "USD", 30},
			{"agent/alicex/available", "USD", 9}}},
		{alice, []AccountBalance{{alice, "EUR", 7}, {alice, "USD", 70}}},
		{"agent/carol/", nil},
		{"agent/", []AccountBalance{{alice, "EUR", 7}, {alice, "USD", 70}, {stake, "USD", 30},
			{"agent/alicex/available", "USD", 9}, {bob, "USDC", 5}}},
		{"world/", []AccountBalance{{"world/payout", "USD", 4}, {card, "EUR", -7}, {card, "USD", -113}, {card, "USDC", -5}}},
		{"nobody", nil},
	}
	view(t, st, func(r store.Reader) error {
		for _, tc := range tests {
			got, err := Balances(r, tc.prefix)
			if err != nil {
				t.Errorf("Balances(%q): %v", tc.prefix, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Balances(%q) (-want +got):\n%s", tc.prefix, diff)
			}
		}
		all, err := Balances(r, "")
		if err != nil || len(all) != 9 {
			t.Errorf("Balances(\"\") = %d balances, %v; want 9", len(all), err)
		}
		for _, bad := range []string{"agent/\x00", "a b", strings.Repeat("a", 201)} {
			if _, err := Balances(r, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("Balances(%q) = %v, want ErrInvalid", bad, err)
			}
		}
		return nil
	})
}

// TestCheckDetectsTampering writes damage straight through the store, behind
// the package's back, and expects Check to name it.
func TestCheckDetectsTampering(t *testing.T) {
	history := []Transfer{
		xfer("dep1", "USD", card, -100, alice, 100),
		xfer("lock", "USD", alice, -30, stake, 30),
		xfer("pay", "USD", alice, -20, bob, 20),
		xfer("dep2", "EUR", card, -5, bob, 5),
	}
	tests := []struct {
		name    string
		tamper  func(store.Txn) error
		wantMsg string
	}{
		{
			name: "line amount changed",
			tamper: func(tx store.Txn) error {
				return editLine(tx, stake, "USD", 1, func(l *lineRecord) { l.Minor, l.BalanceAfter = 300, 300 })
			},
			wantMsg: `transfer "lock" posting 1: line agent/alice/stake/stk_1 USD #1: minor 300, posting says 30`,
		},
		{
			name: "balanceAfter changed",
			tamper: func(tx store.Txn) error {
				return editLine(tx, alice, "USD", 2, func(l *lineRecord) { l.BalanceAfter++ })
			},
			wantMsg: `line agent/alice/available USD #2 (transfer "lock"): balanceAfter 71, want 70`,
		},
		{
			name: "line moved to another transfer",
			tamper: func(tx store.Txn) error {
				return editLine(tx, bob, "USD", 1, func(l *lineRecord) { l.TransferID = "dep1" })
			},
			wantMsg: `transfer "pay" posting 1: line agent/bob/available USD #1: belongs to transfer "dep1"`,
		},
		{
			name: "line kind changed",
			tamper: func(tx store.Txn) error {
				return editLine(tx, bob, "USD", 1, func(l *lineRecord) { l.Kind = "gift" })
			},
			wantMsg: `line agent/bob/available USD #1: kind, ref or at differ`,
		},
		{
			name:    "line not JSON",
			tamper:  func(tx store.Txn) error { return tx.Set(lineKey(bob, "EUR", 1), []byte("{")) },
			wantMsg: `line agent/bob/available EUR #1: unexpected end of JSON input`,
		},
		{
			name:    "transfer deleted",
			tamper:  func(tx store.Txn) error { return tx.Delete(transferKey("pay")) },
			wantMsg: `line agent/alice/available USD #3: its transfer "pay" is missing`,
		},
		{
			name:    "last line deleted",
			tamper:  func(tx store.Txn) error { return tx.Delete(lineKey(bob, "USD", 1)) },
			wantMsg: `transfer "pay" posting 1: line agent/bob/available USD #1: missing`,
		},
		{
			name: "middle line deleted with its transfer",
			tamper: func(tx store.Txn) error {
				for _, k := range [][]byte{transferKey("lock"), lineKey(alice, "USD", 2), lineKey(stake, "USD", 1)} {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
				return nil
			},
			wantMsg: `line agent/alice/available USD #3: follows #1`,
		},
		{
			name: "transfer amount changed",
			tamper: func(tx store.Txn) error {
				return editTransfer(tx, "dep2", func(r *transferRecord) { r.Postings[1].Minor = 6 })
			},
			wantMsg: `transfer "dep2": unbalanced: postings sum to 1`,
		},
		{
			name: "transfer stored under another id",
			tamper: func(tx store.Txn) error {
				return editTransfer(tx, "dep2", func(r *transferRecord) { r.ID = "dep3" })
			},
			wantMsg: `transfer stored under "dep2" has id "dep3"`,
		},
		{
			name: "line added: money from nowhere",
			tamper: func(tx store.Txn) error {
				return putLine(tx, bob, "USD", 2, lineRecord{TransferID: "pay", Kind: "test", Minor: 5, BalanceAfter: 25, At: t0})
			},
			wantMsg: `balances in USD sum to 5, not 0`,
		},
		{
			name: "balanced lines added without a transfer",
			tamper: func(tx store.Txn) error {
				if err := putLine(tx, bob, "USD", 2, lineRecord{TransferID: "ghost", Kind: "test", Minor: 5, BalanceAfter: 25, At: t0}); err != nil {
					return err
				}
				return putLine(tx, card, "USD", 2, lineRecord{TransferID: "ghost", Kind: "test", Minor: -5, BalanceAfter: -105, At: t0})
			},
			wantMsg: `line agent/bob/available USD #2: its transfer "ghost" is missing`,
		},
		{
			name: "overdraft written consistently",
			tamper: func(tx store.Txn) error {
				// dep2 reversed in its transfer and both lines: every
				// transfer balances and every running balance adds up,
				// but bob is at -5 EUR.
				if err := editTransfer(tx, "dep2", func(r *transferRecord) {
					r.Postings[0].Minor, r.Postings[1].Minor = 5, -5
				}); err != nil {
					return err
				}
				if err := editLine(tx, card, "EUR", 1, func(l *lineRecord) { l.Minor, l.BalanceAfter = 5, 5 }); err != nil {
					return err
				}
				return editLine(tx, bob, "EUR", 1, func(l *lineRecord) { l.Minor, l.BalanceAfter = -5, -5 })
			},
			wantMsg: `line agent/bob/available EUR #1 (transfer "dep2"): balance -5 below zero`,
		},
		{
			name: "line with an amount beyond 2^53",
			tamper: func(tx store.Txn) error {
				return editLine(tx, bob, "EUR", 1, func(l *lineRecord) { l.BalanceAfter = MaxMinor + 1 })
			},
			wantMsg: `line agent/bob/available EUR #1: minor 5, balanceAfter 9007199254740993 out of range`,
		},
		{
			name:    "malformed line key",
			tamper:  func(tx store.Txn) error { return tx.Set([]byte(linePrefix+"junk"), []byte("{}")) },
			wantMsg: `malformed line key "ledger/l/junk"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMem(t)
			mustPost(t, st, history...)
			if err := check(t, st); err != nil {
				t.Fatalf("Check before tampering: %v", err)
			}
			if err := st.Update(context.Background(), tc.tamper); err != nil {
				t.Fatal(err)
			}
			err := check(t, st)
			if !errors.Is(err, ErrInconsistent) {
				t.Fatalf("Check = %v, want ErrInconsistent", err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Check = %q\nwant a message with %q", err, tc.wantMsg)
			}
		})
	}
}

// The reading functions refuse to serve a damaged line.
func TestReadsRefuseDamagedLines(t *testing.T) {
	st := newMem(t)
	mustPost(t, st, xfer("dep1", "USD", card, -100, alice, 100))
	if err := st.Update(context.Background(), func(tx store.Txn) error {
		return tx.Set(lineKey(alice, "USD", 1), []byte(`{"minor":0}`))
	}); err != nil {
		t.Fatal(err)
	}
	view(t, st, func(r store.Reader) error {
		if _, err := Balance(r, alice, "USD"); !errors.Is(err, ErrInconsistent) {
			t.Errorf("Balance = %v, want ErrInconsistent", err)
		}
		if _, _, err := Lines(r, alice, "USD", 0, 10); !errors.Is(err, ErrInconsistent) {
			t.Errorf("Lines = %v, want ErrInconsistent", err)
		}
		if _, err := Balances(r, "agent/"); !errors.Is(err, ErrInconsistent) {
			t.Errorf("Balances = %v, want ErrInconsistent", err)
		}
		return nil
	})
	err := st.Update(context.Background(), func(tx store.Txn) error {
		return Post(tx, xfer("dep2", "USD", card, -1, alice, 1))
	})
	if !errors.Is(err, ErrInconsistent) {
		t.Errorf("Post on a damaged account = %v, want ErrInconsistent", err)
	}
}

func TestLineKeyRoundTrip(t *testing.T) {
	tests := []struct {
		account, currency string
		seq               uint64
	}{
		{alice, "USD", 1},
		{"a", "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", 0x0100000000000000},
		{card, "EUR", 256}, // a seq with 0x00 bytes
		{"world/", "XAU", ^uint64(0)},
	}
	for _, tc := range tests {
		a, c, s, ok := parseLineKey(lineKey(tc.account, tc.currency, tc.seq))
		if !ok || a != tc.account || c != tc.currency || s != tc.seq {
			t.Errorf("parseLineKey(lineKey(%q, %q, %d)) = %q, %q, %d, %v", tc.account, tc.currency, tc.seq, a, c, s, ok)
		}
	}
	for _, k := range []string{"ledger/l/", "ledger/l/a\x00USD\x00", "ledger/l/a\x00USD\x01\x00\x00\x00\x00\x00\x00\x00\x01",
		"ledger/l/a USD\x00\x00\x00\x00\x00\x00\x00\x00\x01", "ledger/t/x"} {
		if _, _, _, ok := parseLineKey([]byte(k)); ok {
			t.Errorf("parseLineKey(%q) ok", k)
		}
	}
}
