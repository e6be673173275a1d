package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"

	"github.com/countersign/countersign/store"
)

// Check recomputes the books from what is stored and returns the first
// inconsistency found, as an error matching [ErrInconsistent] that says what
// and where. It verifies that
//   - every stored transfer is valid (balanced, no account twice, amounts
//     in range) and each of its postings has its line, with the transfer's
//     id, kind, ref, instant and amount;
//   - every account's lines are numbered 1, 2, 3... with no gap, and each
//     line's BalanceAfter is the previous one plus its Minor (the first:
//     its Minor);
//   - no account outside world/ is ever negative;
//   - every line belongs to a stored transfer;
//   - the balances of all accounts sum to exactly 0 in every currency.
//
// Check reads the whole ledger: run it in a View, not on a hot path.
// Errors from the store are returned as they are, wrapped.
func Check(r store.Reader) error {
	postings, err := checkTransfers(r)
	if err != nil {
		return err
	}
	lines, err := checkLines(r)
	if err != nil {
		return err
	}
	if lines != postings {
		// Every posting has its own line (checkTransfers), so the extra
		// lines belong to no transfer: name the first one.
		if err := findOrphan(r); err != nil {
			return err
		}
		return inconsistentf("%d lines for %d postings", lines, postings)
	}
	return nil
}

// checkTransfers checks every stored transfer against its lines and returns
// how many postings they have.
func checkTransfers(r store.Reader) (postings int, err error) {
	pfx := []byte(transferPrefix)
	it := r.Iterate(pfx, store.PrefixEnd(pfx), false)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for it.Next() {
		id := string(it.Key()[len(pfx):])
		var rec transferRecord
		if err := json.Unmarshal(it.Value(), &rec); err != nil {
			return 0, inconsistentf("transfer %q: %v", id, err)
		}
		t := &rec.Transfer
		if t.ID != id {
			return 0, inconsistentf("transfer stored under %q has id %q", id, t.ID)
		}
		if err := validate(t); err != nil {
			return 0, inconsistentf("%v", err)
		}
		if len(rec.Seqs) != len(t.Postings) {
			return 0, inconsistentf("transfer %q: %d postings, %d line seqs", id, len(t.Postings), len(rec.Seqs))
		}
		for i, p := range t.Postings {
			where := fmt.Sprintf("transfer %q posting %d: line %s %s #%d", id, i, p.Account, t.Currency, rec.Seqs[i])
			v, err := r.Get(lineKey(p.Account, t.Currency, rec.Seqs[i]))
			if errors.Is(err, store.ErrNotFound) {
				return 0, inconsistentf("%s: missing", where)
			}
			if err != nil {
				return 0, fmt.Errorf("ledger: check: %s: %w", where, err)
			}
			l, err := decodeLine(v)
			switch {
			case err != nil:
				return 0, inconsistentf("%s: %v", where, err)
			case l.TransferID != id:
				return 0, inconsistentf("%s: belongs to transfer %q", where, l.TransferID)
			case l.Minor != p.Minor:
				return 0, inconsistentf("%s: minor %d, posting says %d", where, l.Minor, p.Minor)
			case l.Kind != t.Kind || l.Ref != t.Ref || !l.At.Equal(t.At):
				return 0, inconsistentf("%s: kind, ref or at differ from the transfer's", where)
			}
		}
		postings += len(t.Postings)
	}
	return postings, nil
}

// checkLines walks every line in key order, checking each account's line
// sequence and running balance, and that the balances sum to zero per
// currency. It returns how many lines there are.
func checkLines(r store.Reader) (lines int, err error) {
	pfx := []byte(linePrefix)
	it := r.Iterate(pfx, store.PrefixEnd(pfx), false)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	var (
		account, currency string
		seq               uint64 // of the previous line of (account, currency); 0 before the first
		balance           int64  // after it
		sums              = map[string]*big.Int{}
	)
	// flush adds the finished pair's balance to its currency's sum. A sum
	// of many balances of up to 2^53 may not fit an int64.
	flush := func() {
		if seq == 0 {
			return
		}
		s := sums[currency]
		if s == nil {
			s = new(big.Int)
			sums[currency] = s
		}
		s.Add(s, big.NewInt(balance))
	}
	for it.Next() {
		a, c, n, ok := parseLineKey(it.Key())
		if !ok {
			return 0, inconsistentf("malformed line key %q", it.Key())
		}
		if a != account || c != currency {
			flush()
			account, currency, seq, balance = a, c, 0, 0
		}
		where := fmt.Sprintf("line %s %s #%d", a, c, n)
		if n != seq+1 {
			return 0, inconsistentf("%s: follows #%d", where, seq)
		}
		l, err := decodeLine(it.Value())
		if err != nil {
			return 0, inconsistentf("%s: %v", where, err)
		}
		if want := balance + l.Minor; l.BalanceAfter != want {
			return 0, inconsistentf("%s (transfer %q): balanceAfter %d, want %d (%d %+d)",
				where, l.TransferID, l.BalanceAfter, want, balance, l.Minor)
		}
		if l.BalanceAfter < 0 && !isWorld(a) {
			return 0, inconsistentf("%s (transfer %q): balance %d below zero", where, l.TransferID, l.BalanceAfter)
		}
		seq, balance = n, l.BalanceAfter
		lines++
	}
	if err := it.Err(); err != nil {
		return 0, fmt.Errorf("ledger: check: %w", err)
	}
	flush()
	currencies := make([]string, 0, len(sums))
	for c := range sums {
		currencies = append(currencies, c)
	}
	slices.Sort(currencies)
	for _, c := range currencies {
		if sums[c].Sign() != 0 {
			return 0, inconsistentf("balances in %s sum to %s, not 0", c, sums[c])
		}
	}
	return lines, nil
}

// findOrphan returns an error naming the first line whose transfer is
// missing or does not post that line, or nil if there is none.
func findOrphan(r store.Reader) (err error) {
	pfx := []byte(linePrefix)
	it := r.Iterate(pfx, store.PrefixEnd(pfx), false)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for it.Next() {
		a, c, n, _ := parseLineKey(it.Key()) // checkLines has checked keys and values
		l, _ := decodeLine(it.Value())
		where := fmt.Sprintf("line %s %s #%d", a, c, n)
		v, err := r.Get(transferKey(l.TransferID))
		if errors.Is(err, store.ErrNotFound) {
			return inconsistentf("%s: its transfer %q is missing", where, l.TransferID)
		}
		if err != nil {
			return fmt.Errorf("ledger: check: %s: %w", where, err)
		}
		var rec transferRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return inconsistentf("transfer %q: %v", l.TransferID, err)
		}
		i := slices.IndexFunc(rec.Postings, func(p Posting) bool { return p.Account == a })
		if rec.Currency != c || i < 0 || rec.Seqs[i] != n {
			return inconsistentf("%s: its transfer %q does not post it", where, l.TransferID)
		}
	}
	return nil
}
