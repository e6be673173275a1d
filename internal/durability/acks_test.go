package durability

import (
	"slices"
	"sync"

	"github.com/countersign/countersign/pay"
)

// paid is a Pay call that returned an outcome: settled (with its receipt)
// or held for approval.
type paid struct {
	key  string
	body []byte // the signed instruction, for the idempotency replay
	res  pay.Result
}

// approved is an Approve call that returned a settled result.
type approved struct {
	intentID string
	receipt  pay.Receipt
}

// refunded is a Refund call that returned.
type refunded struct {
	intentID string
	minor    int64 // the amount this refund asked for
	res      pay.RefundResult
}

// acks is what callers were told, appended only after the call returned.
type acks struct {
	mu        sync.Mutex
	pays      []paid
	approvals []approved
	refunds   []refunded
	n         int
	// progress is poked (never blocking) after every acknowledgement, for
	// whoever waits on the count.
	progress chan struct{}
	// work and maintain are poked likewise, for the webhook and the
	// maintenance goroutines.
	work, maintain chan struct{}
}

func newAcks() *acks {
	return &acks{progress: make(chan struct{}, 1), work: make(chan struct{}, 1), maintain: make(chan struct{}, 1)}
}

func (a *acks) add(f func()) {
	a.mu.Lock()
	f()
	a.n++
	a.mu.Unlock()
	for _, c := range []chan struct{}{a.progress, a.work, a.maintain} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (a *acks) pay(p paid)         { a.add(func() { a.pays = append(a.pays, p) }) }
func (a *acks) approve(p approved) { a.add(func() { a.approvals = append(a.approvals, p) }) }
func (a *acks) refund(r refunded)  { a.add(func() { a.refunds = append(a.refunds, r) }) }

func (a *acks) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// ackSnap is a copy of the acknowledgements at one instant.
type ackSnap struct {
	pays      []paid
	approvals []approved
	refunds   []refunded
}

func (a *acks) snapshot() ackSnap {
	a.mu.Lock()
	defer a.mu.Unlock()
	return ackSnap{pays: slices.Clone(a.pays), approvals: slices.Clone(a.approvals), refunds: slices.Clone(a.refunds)}
}

func (s ackSnap) len() int { return len(s.pays) + len(s.approvals) + len(s.refunds) }
