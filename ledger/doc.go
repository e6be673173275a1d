// Package ledger is a double-entry ledger kept inside a [store.Txn]: the
// books of the custody namespace, where each agent identity holds balances
// per currency that it deposited through a real payment, locks part of them
// as stakes, and withdraws.
//
// # Double entry
//
// Money is never created or destroyed by a write: every change is a
// [Transfer], a set of [Posting]s in one currency whose amounts sum to
// exactly zero (credits positive, debits negative). Moving 500 minor units
// from an agent's available balance into a stake is
//
//	ledger.Post(txn, ledger.Transfer{
//		ID: "stk_123.lock", Currency: "USD", Kind: "stake.lock", Ref: "stk_123", At: now,
//		Postings: []ledger.Posting{
//			{Account: "agent/a1/available", Minor: -500},
//			{Account: "agent/a1/stake/stk_123", Minor: +500},
//		},
//	})
//
// so at every moment, in every currency, the balances of all accounts sum
// to zero, and [Check] can prove it.
//
// # World accounts
//
// Money does enter and leave custody: a card payment deposits it, a payout
// withdraws it. The other side of such a transfer is an account whose name
// starts with "world/" ([WorldPrefix]), e.g. "world/rail/sandbox-card". A
// world account stands for everything outside the books and may go
// negative: its balance is minus what the rail has brought in net. Every
// other account may never go below zero, and [Post] refuses a transfer that
// would take one there with an error matching [ErrInsufficientFunds] and
// writes nothing. Keeping the outside world inside the books is what lets
// the sum-to-zero invariant hold for deposits and withdrawals too, instead
// of only for internal moves.
//
// # Derived balances
//
// There is no balance counter that could disagree with the entries. Each
// posting is stored as a [Line] of its (account, currency), numbered 1, 2,
// 3... and carrying the running balance after it; the balance of an
// account is the BalanceAfter of its last line, which Post derives from the
// line before (first line: BalanceAfter = Minor) and [Check] recomputes.
// Reading a balance or posting to an account reads one line, however long
// the account's history.
//
// Amounts and balances stay within ±2^53 ([MaxMinor]), so every value is
// exact in JSON and in a float64 on the other side of the API.
//
// # Idempotency
//
// A transfer's ID is its idempotency key. Posting an ID again with the same
// transfer (same currency, kind, ref, instant and postings, in any order)
// is a no-op that returns nil, so a step of a saga can be retried blindly;
// posting it with a different transfer is refused with [ErrConflict].
//
// # Transactions
//
// Every function takes the caller's transaction or reader and keeps nothing
// between calls, so it is correct when [store.Store.Update] runs its
// function again, and a transfer commits exactly when the caller's other
// writes do. Because store transactions are serializable, two transfers
// touching the same account never both extend its line sequence from the
// same point. A refusal (an error matching [ErrInvalid],
// [ErrInsufficientFunds] or [ErrConflict]) has written nothing, so the
// caller may go on with the transaction and commit its other writes; after
// any other error from Post the transaction must be abandoned.
//
// # Key layout
//
// The package owns the keys under "ledger/":
//
//	ledger/t/<transfer id>                                the transfer, JSON, with the seq of each posting's line
//	ledger/l/<account> 0x00 <currency> 0x00 <seq, 8 bytes big-endian>   one line, JSON
//
// Account names, currencies and transfer ids are visible ASCII, which never
// contains 0x00, so no two (account, currency) pairs share a key prefix and
// a prefix scan over one pair, or over the accounts whose names start with
// a given prefix, is exact. Lines of a pair sort by seq, so the last line
// is one reverse seek away.
package ledger
