package ledger

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/store"
)

// WorldPrefix starts the name of every account that stands for the outside
// world (a rail, a bank). Such an account may go negative; no other may.
const WorldPrefix = "world/"

// MaxMinor bounds every amount and every balance: |minor| <= 2^53, so each
// is exact in JSON and as a float64.
const MaxMinor = 1 << 53

// MaxPostings is the most postings one transfer may have.
const MaxPostings = 1000

// ErrInvalid is returned for a transfer or argument that can never be
// accepted: the wrapping error says why. Post returns it for fewer than 2
// or more than [MaxPostings] postings, a zero amount, postings that do not
// sum to 0, an account twice, a bad account, currency, id, kind or ref, a
// zero or out-of-range At, and an amount or resulting balance beyond ±[MaxMinor]. Check for
// it with errors.Is.
var ErrInvalid = errors.New("ledger: invalid")

// ErrInsufficientFunds is returned by [Post] when the transfer would take
// an account outside world/ below zero. The error is an
// *[InsufficientFundsError] naming the account. Check for it with
// errors.Is.
var ErrInsufficientFunds = errors.New("ledger: insufficient funds")

// ErrConflict is returned by [Post] when the transfer's ID was already used
// for a different transfer. Check for it with errors.Is.
var ErrConflict = errors.New("ledger: transfer id already used for a different transfer")

// ErrNotFound is returned by [Get] for an id that was never posted. Check
// for it with errors.Is.
var ErrNotFound = errors.New("ledger: no such transfer")

// ErrInconsistent marks every integrity failure of the stored books: a
// stored transfer or line that does not parse, does not balance, or does
// not agree with the others. [Check] returns it with what and where; the
// reading functions return it rather than serve a damaged line. Check for it
// with errors.Is.
var ErrInconsistent = errors.New("ledger: inconsistent")

// InsufficientFundsError is the error [Post] returns when a posting would
// take an account outside world/ below zero. It matches
// [ErrInsufficientFunds].
type InsufficientFundsError struct {
	Account  Account
	Currency string
	Balance  int64 // the account's balance before the transfer
	Minor    int64 // the posting that would take it below zero
}

func (e *InsufficientFundsError) Error() string {
	return fmt.Sprintf("ledger: insufficient funds in %s: balance %d %s, debit %d",
		e.Account, e.Balance, e.Currency, -e.Minor)
}

// Unwrap returns [ErrInsufficientFunds].
func (e *InsufficientFundsError) Unwrap() error { return ErrInsufficientFunds }

// Account is a ledger account name: "owner:kind" style strings chosen by
// the caller, 1..200 bytes of visible ASCII without spaces, e.g.
// "agent/<id>/available", "agent/<id>/stake/stk_123",
// "agent/<id>/withdrawing", "world/rail/sandbox-card". An account whose
// name starts with "world/" ([WorldPrefix]) represents the outside world
// and may go negative; every other account may never go below zero.
type Account = string

// Posting is one leg of a [Transfer].
type Posting struct {
	Account Account `json:"account"`
	Minor   int64   `json:"minor"` // credit positive, debit negative; never 0
}

// Transfer is a balanced set of postings in one currency: the only way
// money moves.
type Transfer struct {
	// ID is chosen by the caller (e.g. "xfer_..." or derived from an
	// intent id and a step) and is the transfer's idempotency key: 1..255
	// bytes of visible ASCII.
	ID string `json:"id"`
	// Currency is an ISO 4217 code or a CAIP-19 asset id, 3..258 bytes of
	// visible ASCII. All postings are in it.
	Currency string `json:"currency"`
	// Postings are at least 2 and at most MaxPostings, sum to exactly 0,
	// and name each account at most once.
	Postings []Posting `json:"postings"`
	// Kind says what the transfer is, e.g. "deposit", "withdraw.reserve",
	// "stake.lock": 1..100 bytes of visible ASCII.
	Kind string `json:"kind"`
	// Ref names what caused it (an intent id, a stake id): 0..255 bytes of
	// visible ASCII.
	Ref string `json:"ref,omitempty"`
	// At is when it happened: not zero, and in the years 1..9999 UTC (as
	// RFC 3339 requires). It is stored, and returned by Get and on each
	// Line, in UTC.
	At time.Time `json:"at"`
}

// Line is one posting as stored, with the running balance of its account
// after it.
type Line struct {
	Seq          uint64    `json:"seq"` // 1-based per (account, currency)
	TransferID   string    `json:"transferId"`
	Kind         string    `json:"kind"`
	Ref          string    `json:"ref,omitempty"`
	Minor        int64     `json:"minor"`
	BalanceAfter int64     `json:"balanceAfter"`
	At           time.Time `json:"at"`
}

// AccountBalance is the balance of one account in one currency.
type AccountBalance struct {
	Account  Account `json:"account"`
	Currency string  `json:"currency"`
	Minor    int64   `json:"minor"`
}

// transferRecord is a stored transfer: the transfer as posted (At in UTC)
// and, for each posting, the seq of the line it became.
type transferRecord struct {
	Transfer
	Seqs []uint64 `json:"seqs"`
}

// lineRecord is a stored line. Its seq, account and currency are in its key.
type lineRecord struct {
	TransferID   string    `json:"transferId"`
	Kind         string    `json:"kind"`
	Ref          string    `json:"ref,omitempty"`
	Minor        int64     `json:"minor"`
	BalanceAfter int64     `json:"balanceAfter"`
	At           time.Time `json:"at"`
}

// invalidf returns an error matching ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// inconsistentf returns an error matching ErrInconsistent.
func inconsistentf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInconsistent, fmt.Sprintf(format, args...))
}

// validate says why t can never be posted, or returns nil. Its errors
// match no sentinel: Post wraps them in ErrInvalid, Check in ErrInconsistent.
func validate(t *Transfer) error {
	if !visible(t.ID, 1, maxIDLen) {
		return fmt.Errorf("transfer id %q: want 1..%d bytes of visible ASCII", t.ID, maxIDLen)
	}
	if !validCurrency(t.Currency) {
		return fmt.Errorf("transfer %q: currency %q: want %d..%d bytes of visible ASCII",
			t.ID, t.Currency, minCurrencyLen, maxCurrencyLen)
	}
	if !visible(t.Kind, 1, maxKindLen) {
		return fmt.Errorf("transfer %q: kind %q: want 1..%d bytes of visible ASCII", t.ID, t.Kind, maxKindLen)
	}
	if !visible(t.Ref, 0, maxRefLen) {
		return fmt.Errorf("transfer %q: ref %q: want 0..%d bytes of visible ASCII", t.ID, t.Ref, maxRefLen)
	}
	if t.At.IsZero() {
		return fmt.Errorf("transfer %q: zero At", t.ID)
	}
	if y := t.At.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("transfer %q: At %v outside years 1..9999", t.ID, t.At)
	}
	if n := len(t.Postings); n < 2 || n > MaxPostings {
		return fmt.Errorf("transfer %q: %d postings, want 2..%d", t.ID, n, MaxPostings)
	}
	seen := make(map[Account]struct{}, len(t.Postings))
	var sum int64 // at most MaxPostings * MaxMinor < 2^63: cannot overflow
	for i, p := range t.Postings {
		if !validAccount(p.Account) {
			return fmt.Errorf("transfer %q: posting %d: account %q: want 1..%d bytes of visible ASCII",
				t.ID, i, p.Account, maxAccountLen)
		}
		if _, dup := seen[p.Account]; dup {
			return fmt.Errorf("transfer %q: posting %d: account %s appears twice", t.ID, i, p.Account)
		}
		seen[p.Account] = struct{}{}
		if p.Minor == 0 {
			return fmt.Errorf("transfer %q: posting %d (%s): zero amount", t.ID, i, p.Account)
		}
		if !inRange(p.Minor) {
			return fmt.Errorf("transfer %q: posting %d (%s): amount %d beyond ±2^53", t.ID, i, p.Account, p.Minor)
		}
		sum += p.Minor
	}
	if sum != 0 {
		return fmt.Errorf("transfer %q: unbalanced: postings sum to %d, not 0", t.ID, sum)
	}
	return nil
}

// sameTransfer reports whether a and b are the same transfer: equal fields,
// the same instant, and the same postings in any order.
func sameTransfer(a, b *Transfer) bool {
	if a.ID != b.ID || a.Currency != b.Currency || a.Kind != b.Kind || a.Ref != b.Ref ||
		!a.At.Equal(b.At) || len(a.Postings) != len(b.Postings) {
		return false
	}
	byAccount := func(p, q Posting) int { return cmp.Compare(p.Account, q.Account) }
	pa, pb := slices.Clone(a.Postings), slices.Clone(b.Postings)
	slices.SortFunc(pa, byAccount)
	slices.SortFunc(pb, byAccount)
	return slices.Equal(pa, pb)
}

// Post applies t inside txn.
//
// It refuses, writing nothing, with an error matching
//   - [ErrInvalid] (with the reason) for a transfer that can never be
//     posted: see ErrInvalid and the field docs of [Transfer];
//   - [ErrInsufficientFunds] (an *[InsufficientFundsError] naming the
//     account) if an account outside world/ would go below zero;
//   - [ErrConflict] if t.ID was already used for a different transfer.
//
// Posting the same ID with an identical transfer again (postings in any
// order) is a no-op returning nil: an idempotent replay. Post reads only the
// transfer's id and the last line of each account it touches.
//
// Any other error comes from the store or from damaged data (matching
// [ErrInconsistent]); the transaction must then be abandoned.
func Post(txn store.Txn, t Transfer) error {
	if err := validate(&t); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	t.At = t.At.UTC()

	tkey := transferKey(t.ID)
	switch v, err := txn.Get(tkey); {
	case err == nil:
		var old transferRecord
		if err := json.Unmarshal(v, &old); err != nil {
			return inconsistentf("transfer %q: %v", t.ID, err)
		}
		if !sameTransfer(&old.Transfer, &t) {
			return fmt.Errorf("%w: %q", ErrConflict, t.ID)
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("ledger: post %q: %w", t.ID, err)
	}

	// Read every account first and write only once all are known good, so
	// that a refusal leaves the transaction as it was.
	rec := transferRecord{Transfer: t, Seqs: make([]uint64, len(t.Postings))}
	keys := make([][]byte, len(t.Postings))
	vals := make([][]byte, len(t.Postings))
	for i, p := range t.Postings {
		pfx := pairPrefix(p.Account, t.Currency)
		seq, bal, err := last(txn, pfx)
		if err != nil {
			return fmt.Errorf("ledger: post %q: account %s %s: %w", t.ID, p.Account, t.Currency, err)
		}
		after := bal + p.Minor // both within ±2^53: cannot overflow
		if !inRange(after) {
			return invalidf("transfer %q: posting %d (%s): balance %d %+d beyond ±2^53",
				t.ID, i, p.Account, bal, p.Minor)
		}
		if after < 0 && !isWorld(p.Account) {
			return &InsufficientFundsError{Account: p.Account, Currency: t.Currency, Balance: bal, Minor: p.Minor}
		}
		rec.Seqs[i] = seq + 1
		keys[i] = binary64(pfx, seq+1)
		vals[i], err = json.Marshal(lineRecord{
			TransferID: t.ID, Kind: t.Kind, Ref: t.Ref, Minor: p.Minor, BalanceAfter: after, At: t.At,
		})
		if err != nil {
			return fmt.Errorf("ledger: post %q: %w", t.ID, err)
		}
	}
	tval, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("ledger: post %q: %w", t.ID, err)
	}
	for i := range keys {
		if err := txn.Set(keys[i], vals[i]); err != nil {
			return fmt.Errorf("ledger: post %q: %w", t.ID, err)
		}
	}
	if err := txn.Set(tkey, tval); err != nil {
		return fmt.Errorf("ledger: post %q: %w", t.ID, err)
	}
	return nil
}

// Get returns the stored transfer with the given id, or an error matching
// [ErrNotFound]. Its At is in UTC.
func Get(r store.Reader, id string) (Transfer, error) {
	v, err := r.Get(transferKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return Transfer{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Transfer{}, fmt.Errorf("ledger: get %q: %w", id, err)
	}
	var rec transferRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return Transfer{}, inconsistentf("transfer %q: %v", id, err)
	}
	return rec.Transfer, nil
}
