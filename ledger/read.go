package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/countersign/countersign/store"
)

// MaxLinesLimit is the largest page [Lines] returns.
const MaxLinesLimit = 1000

// binary64 returns pfx followed by seq, 8 bytes big-endian, in a new slice.
func binary64(pfx []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(slices.Clip(pfx), seq)
}

// decodeLine decodes and range-checks a stored line.
func decodeLine(v []byte) (lineRecord, error) {
	var l lineRecord
	if err := json.Unmarshal(v, &l); err != nil {
		return l, err
	}
	return l, checkAmounts(l.Minor, l.BalanceAfter)
}

// lineAmounts is the part of a stored line that Post and Balance need:
// decoding only it skips parsing the strings and the time.
type lineAmounts struct {
	Minor        int64 `json:"minor"`
	BalanceAfter int64 `json:"balanceAfter"`
}

// checkAmounts reports a stored amount or balance that Post could not have
// written. Within these bounds, a balance plus an amount cannot overflow.
func checkAmounts(minor, balanceAfter int64) error {
	if minor == 0 || !inRange(minor) || !inRange(balanceAfter) {
		return fmt.Errorf("minor %d, balanceAfter %d out of range", minor, balanceAfter)
	}
	return nil
}

// last returns the seq and BalanceAfter of the last line under the pair
// prefix pfx, or zeros if there is none.
func last(r store.Reader, pfx []byte) (seq uint64, balance int64, err error) {
	it := r.Iterate(pfx, store.PrefixEnd(pfx), true)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if !it.Next() {
		return 0, 0, nil
	}
	k := it.Key()
	if len(k) != len(pfx)+8 {
		return 0, 0, inconsistentf("malformed line key %q", k)
	}
	seq = binary.BigEndian.Uint64(k[len(pfx):])
	var l lineAmounts
	if err := json.Unmarshal(it.Value(), &l); err != nil {
		return 0, 0, inconsistentf("line %q: %v", k, err)
	}
	if err := checkAmounts(l.Minor, l.BalanceAfter); err != nil {
		return 0, 0, inconsistentf("line %q: %v", k, err)
	}
	return seq, l.BalanceAfter, nil
}

// Balance returns the balance of account in currency: the BalanceAfter of
// its last line, or 0 for an account never posted to. A malformed account
// or currency is an error matching [ErrInvalid].
func Balance(r store.Reader, account Account, currency string) (int64, error) {
	if !validAccount(account) || !validCurrency(currency) {
		return 0, invalidf("balance of %q in %q: bad account or currency", account, currency)
	}
	_, bal, err := last(r, pairPrefix(account, currency))
	if err != nil {
		return 0, fmt.Errorf("ledger: balance of %s %s: %w", account, currency, err)
	}
	return bal, nil
}

// Lines pages the lines of account in currency, oldest first, starting
// after seq after (0 = from the start), at most limit (1..[MaxLinesLimit])
// of them. hasMore says whether more follow. A malformed account or
// currency, or a limit out of range, is an error matching [ErrInvalid].
func Lines(r store.Reader, account Account, currency string, after uint64, limit int) (lines []Line, hasMore bool, err error) {
	if !validAccount(account) || !validCurrency(currency) {
		return nil, false, invalidf("lines of %q in %q: bad account or currency", account, currency)
	}
	if limit < 1 || limit > MaxLinesLimit {
		return nil, false, invalidf("lines: limit %d, want 1..%d", limit, MaxLinesLimit)
	}
	if after == math.MaxUint64 {
		return nil, false, nil
	}
	pfx := pairPrefix(account, currency)
	it := r.Iterate(binary64(pfx, after+1), store.PrefixEnd(pfx), false)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			lines, hasMore = nil, false
		}
	}()
	for it.Next() {
		if len(lines) == limit {
			return lines, true, nil
		}
		k := it.Key()
		if len(k) != len(pfx)+8 {
			return nil, false, inconsistentf("malformed line key %q", k)
		}
		seq := binary.BigEndian.Uint64(k[len(pfx):])
		l, err := decodeLine(it.Value())
		if err != nil {
			return nil, false, inconsistentf("line %s %s #%d: %v", account, currency, seq, err)
		}
		lines = append(lines, Line{Seq: seq, TransferID: l.TransferID, Kind: l.Kind, Ref: l.Ref,
			Minor: l.Minor, BalanceAfter: l.BalanceAfter, At: l.At})
	}
	return lines, false, nil
}

// Balances lists the (account, currency) pairs whose account name starts
// with prefix and whose balance is not zero, with their balances, in key
// order: by account name, then currency, bytewise, an account name sorting
// before every longer name it is a prefix of. The empty prefix lists every
// account. A prefix that is not visible ASCII of at most 200 bytes is an
// error matching [ErrInvalid].
//
// Balances reads one line per (account, currency) pair that was ever
// posted to under prefix.
func Balances(r store.Reader, prefix string) ([]AccountBalance, error) {
	if !validPrefix(prefix) {
		return nil, invalidf("balances: prefix %q: want visible ASCII", prefix)
	}
	// Walk the pairs from the last backwards: the first key below each
	// upper bound is the last line of the pair before it, which carries its
	// balance. One seek per pair, however many lines each has.
	lower := []byte(linePrefix + prefix)
	upper := store.PrefixEnd(lower)
	var out []AccountBalance
	for {
		ab, pfx, ok, err := lastBelow(r, lower, upper)
		if err != nil {
			return nil, fmt.Errorf("ledger: balances %q: %w", prefix, err)
		}
		if !ok {
			break
		}
		if ab.Minor != 0 {
			out = append(out, ab)
		}
		upper = pfx
	}
	slices.Reverse(out)
	return out, nil
}

// lastBelow returns the balance in the last line in [lower, upper) and the
// prefix of its pair.
func lastBelow(r store.Reader, lower, upper []byte) (ab AccountBalance, pfx []byte, ok bool, err error) {
	it := r.Iterate(lower, upper, true)
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	if !it.Next() {
		return ab, nil, false, nil
	}
	account, currency, seq, ok := parseLineKey(it.Key())
	if !ok {
		return ab, nil, false, inconsistentf("malformed line key %q", it.Key())
	}
	l, err := decodeLine(it.Value())
	if err != nil {
		return ab, nil, false, inconsistentf("line %s %s #%d: %v", account, currency, seq, err)
	}
	return AccountBalance{Account: account, Currency: currency, Minor: l.BalanceAfter},
		pairPrefix(account, currency), true, nil
}
