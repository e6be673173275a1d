package fake

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// Key layout under the rail's prefix "settle/fake/<name>/":
//
//	a/<key>       an authorization, JSON (authorization)
//	p/<key>       a payment, JSON (payment), also one made by a capture
//	r/<refund id> a refund, JSON (refund)
//	u/<key>       what the key was first used for: "a/" or "p/"
//	seq           the last ledger sequence number, 8 bytes big-endian
//	layout        "2" once every a/ and p/ key has its u/ marker
//
// Payments are stored under their key, which is what makes a second payment
// under one key impossible rather than merely checked for; a capture writes
// its payment there too, so it is one capture per hold by the same token.
//
// One key, one use: a hold's key is not free for a payment, nor a
// payment's for a hold. The u/ marker answers that with one lookup of a key
// that usually does not exist yet, where reading a/ and p/ took two; in a
// store such misses are the costly reads (Pebble consults every level's
// filter), and the sandbox's are inside every payment's commit. Ledgers
// written before the marker existed get their markers once, inside the
// rail's first write transaction (markOldKeys). Every process writing one
// ledger must run code that keeps the markers: a key an older version
// wrote after the marking has none, and would be taken for unused.
const (
	authDir    = "a/"
	paymentDir = "p/"
	refundDir  = "r/"
	useDir     = "u/"
	seqName    = "seq"
	layoutName = "layout"
	layoutV2   = "2"
)

// payment is a stored payment record.
type payment struct {
	Seq            uint64            `json:"seq"`
	Key            string            `json:"key"`
	Payee          string            `json:"payee"`
	Amount         int64             `json:"amount"`
	Currency       string            `json:"currency"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Reference      string            `json:"reference"`
	Status         settle.Status     `json:"status"`
	DeclineCode    string            `json:"declineCode,omitempty"`
	DeclineMessage string            `json:"declineMessage,omitempty"`
	At             time.Time         `json:"at"`                // when the rail recorded it
	FinalAt        time.Time         `json:"finalAt,omitzero"`  // pending: when it becomes final
	Returns        bool              `json:"returns,omitempty"` // pending: fails when final
	SettledAt      time.Time         `json:"settledAt,omitzero"`
	Refunded       int64             `json:"refunded,omitempty"`
	Capture        bool              `json:"capture,omitempty"` // made by capturing the hold under Key
}

// refund is a stored refund record.
type refund struct {
	Seq       uint64            `json:"seq"`
	RefundID  string            `json:"refundId"`
	Key       string            `json:"key"`
	Amount    int64             `json:"amount"`
	Currency  string            `json:"currency"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	Reference string            `json:"reference"`
	Refunded  int64             `json:"refunded"` // the payment's refunds after this one
	At        time.Time         `json:"at"`
}

func (p *payment) request() settle.SettleRequest {
	return settle.SettleRequest{Key: p.Key, Payee: p.Payee, Amount: p.Amount, Currency: p.Currency}
}

// finalize makes a pending payment final if it is due at now, and reports
// whether it changed.
func (p *payment) finalize(now time.Time) bool {
	if p.Status != settle.StatusPending || now.Before(p.FinalAt) {
		return false
	}
	if p.Returns {
		p.Status = settle.StatusDeclined
		p.DeclineCode = CodeReturned
		p.DeclineMessage = "the payment was returned before it became final"
	} else {
		p.Status = settle.StatusSettled
		p.SettledAt = p.FinalAt
	}
	return true
}

func (p *payment) settlement() settle.Settlement {
	return settle.Settlement{
		Key:         p.Key,
		Reference:   p.Reference,
		Status:      p.Status,
		Amount:      p.Amount,
		Currency:    p.Currency,
		Payee:       p.Payee,
		SettledAt:   p.SettledAt,
		Refunded:    p.Refunded,
		DeclineCode: p.DeclineCode,
	}
}

// outcome is what Settle and Lookup return for the payment.
func (p *payment) outcome() (settle.Settlement, error) {
	s := p.settlement()
	if p.Status == settle.StatusDeclined {
		return s, &settle.DeclineError{Code: p.DeclineCode, Message: p.DeclineMessage}
	}
	return s, nil
}

func (f *refund) result() settle.RefundResult {
	return settle.RefundResult{
		RefundID:   f.RefundID,
		Key:        f.Key,
		Reference:  f.Reference,
		Amount:     f.Amount,
		Currency:   f.Currency,
		Refunded:   f.Refunded,
		RefundedAt: f.At,
	}
}

// update runs one ledger transaction; see [Options.SharedLog]. Until this
// rail has seen the ledger's keys all marked, the transaction first marks
// any that are not (markOldKeys), in the same commit.
func (r *Rail) update(ctx context.Context, fn func(store.Txn) error) error {
	run := fn
	marked := r.layout.Load()
	if !marked {
		run = func(tx store.Txn) error {
			if err := r.markOldKeys(tx); err != nil {
				return fmt.Errorf("marking the ledger's used keys: %w", err)
			}
			return fn(tx)
		}
	}
	var err error
	if r.opts.SharedLog {
		err = store.UpdateDeferred(ctx, r.opts.Store, run)
	} else {
		err = r.opts.Store.Update(ctx, run)
	}
	if err == nil && !marked {
		r.layout.Store(true)
	}
	return err
}

// markOldKeys gives every a/ and p/ key of a ledger written before the u/
// markers existed its marker, unless layout says that was done: a key in
// a/ is marked "a/" (a capture's payment shares its hold's key), any other
// key in p/ "p/". It runs inside a ledger transaction, so the ledger is
// never seen half marked, and it is idempotent, so rails of several
// processes over one store may all run it.
func (r *Rail) markOldKeys(tx store.Txn) error {
	if b, err := tx.Get(r.key("", layoutName)); err == nil && string(b) == layoutV2 {
		return nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	for _, dir := range []string{authDir, paymentDir} {
		lo := r.key(dir, "")
		it := tx.Iterate(lo, store.PrefixEnd(lo), false)
		var keys []string
		for it.Next() {
			keys = append(keys, string(it.Key()[len(lo):]))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, k := range keys {
			if _, err := tx.Get(r.key(useDir, k)); err == nil {
				continue
			} else if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			if err := r.markUsed(tx, k, dir); err != nil {
				return err
			}
		}
	}
	return tx.Set(r.key("", layoutName), []byte(layoutV2))
}

// keyUse reports what key was first used for: authDir, paymentDir, or ""
// while it is unused.
func (r *Rail) keyUse(tx store.Reader, key string) (string, error) {
	b, err := tx.Get(r.key(useDir, key))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	case err != nil:
		return "", err
	}
	switch use := string(b); use {
	case authDir, paymentDir:
		return use, nil
	default:
		return "", fmt.Errorf("key %q is marked used for %q", key, use)
	}
}

// markUsed records key's first use, for dir.
func (r *Rail) markUsed(tx store.Txn, key, dir string) error {
	return tx.Set(r.key(useDir, key), []byte(dir))
}

func (r *Rail) key(dir, id string) []byte { return []byte(r.prefix + dir + id) }

// settleTxn records the payment planned by p, or returns the one already
// recorded under req.Key.
func (r *Rail) settleTxn(ctx context.Context, req settle.SettleRequest, p plan, now time.Time) (payment, error) {
	var out payment
	err := r.update(ctx, func(tx store.Txn) error {
		var err error
		out, err = r.settleIn(tx, req, p, now)
		return err
	})
	return out, err
}

// settleIn is settleTxn's transaction: it records the payment under
// req.Key in tx, or returns the one recorded before.
func (r *Rail) settleIn(tx store.Txn, req settle.SettleRequest, p plan, now time.Time) (payment, error) {
	k := r.key(paymentDir, req.Key)
	var out payment
	err := func() error {
		use, err := r.keyUse(tx, req.Key)
		switch {
		case err != nil:
			return err
		case use == authDir:
			// A hold's key is not free for a payment, even once its
			// capture has made one.
			return settle.ErrKeyReuse
		case use == paymentDir:
			prev, err := getJSON[payment](tx, k)
			if err != nil {
				return err
			}
			if !prev.request().Matches(req) {
				return settle.ErrKeyReuse
			}
			if prev.finalize(now) {
				if err := setJSON(tx, k, &prev); err != nil {
					return err
				}
			}
			out = prev
			return nil
		}
		if err := r.markUsed(tx, req.Key, paymentDir); err != nil {
			return err
		}
		seq, err := nextSeq(tx, r.key("", seqName))
		if err != nil {
			return err
		}
		pay := payment{
			Seq:       seq,
			Key:       req.Key,
			Payee:     req.Payee,
			Amount:    req.Amount,
			Currency:  req.Currency,
			Metadata:  req.Metadata,
			Reference: r.reference(r.opts.ReferencePrefix, "payment", req.Key),
			At:        now,
		}
		switch {
		case p.decline != nil:
			pay.Status = settle.StatusDeclined
			pay.DeclineCode = p.decline.Code
			pay.DeclineMessage = p.decline.Message
		case r.opts.Facts.Finality == settle.Deferred:
			pay.Status = settle.StatusPending
			pay.FinalAt = now.Add(r.opts.FinalityDelay)
			pay.Returns = p.returns
		default:
			pay.Status = settle.StatusSettled
			pay.SettledAt = now
		}
		if err := setJSON(tx, k, &pay); err != nil {
			return err
		}
		out = pay
		return nil
	}()
	return out, err
}

// refundTxn records the refund, or returns the one already recorded under
// req.RefundID.
func (r *Rail) refundTxn(ctx context.Context, req settle.RefundRequest, now time.Time) (refund, error) {
	rk := r.key(refundDir, req.RefundID)
	pk := r.key(paymentDir, req.Key)
	var out refund
	err := r.update(ctx, func(tx store.Txn) error {
		prev, err := getJSON[refund](tx, rk)
		switch {
		case err == nil:
			if !(settle.RefundRequest{RefundID: prev.RefundID, Key: prev.Key, Amount: prev.Amount}).Matches(req) {
				return settle.ErrKeyReuse
			}
			out = prev
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		pay, err := getJSON[payment](tx, pk)
		if errors.Is(err, store.ErrNotFound) {
			return settle.ErrUnknownKey
		} else if err != nil {
			return err
		}
		pay.finalize(now) // written below if the refund goes ahead
		if pay.Status != settle.StatusSettled {
			return fmt.Errorf("%w: it is %s", settle.ErrNotSettled, pay.Status)
		}
		// Both terms are at most settle.MaxAmount, so the sum cannot overflow.
		if pay.Refunded+req.Amount > pay.Amount {
			return fmt.Errorf("%w: %d of %d already refunded, %d asked", settle.ErrRefundExceeds, pay.Refunded, pay.Amount, req.Amount)
		}
		seq, err := nextSeq(tx, r.key("", seqName))
		if err != nil {
			return err
		}
		pay.Refunded += req.Amount
		f := refund{
			Seq:       seq,
			RefundID:  req.RefundID,
			Key:       req.Key,
			Amount:    req.Amount,
			Currency:  pay.Currency,
			Metadata:  req.Metadata,
			Reference: r.reference("re_", "refund", req.RefundID),
			Refunded:  pay.Refunded,
			At:        now,
		}
		if err := setJSON(tx, pk, &pay); err != nil {
			return err
		}
		if err := setJSON(tx, rk, &f); err != nil {
			return err
		}
		out = f
		return nil
	})
	return out, err
}

// lookup reads the payment under key, making it final first if it is due.
func (r *Rail) lookup(ctx context.Context, key string, now time.Time) (payment, error) {
	k := r.key(paymentDir, key)
	var pay payment
	err := r.opts.Store.View(ctx, func(tx store.Reader) error {
		var err error
		pay, err = getJSON[payment](tx, k)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return payment{}, settle.ErrUnknownKey
	}
	if err != nil || !pay.finalize(now) {
		return pay, err
	}
	// Due: persist the change, so that what Lookup has reported once stays
	// true even if the injected clock is later set back.
	err = r.update(ctx, func(tx store.Txn) error {
		var err error
		pay, err = getJSON[payment](tx, k)
		if err != nil {
			return err
		}
		if pay.finalize(now) {
			return setJSON(tx, k, &pay)
		}
		return nil
	})
	return pay, err
}

// Advance makes final every pending payment that is due at now, as if the
// rail's clock had reached now, and returns how many it changed. Each such
// payment settles (or, per [Options.PendingDeclineRate], is declined) as of
// the moment it was due, not as of now. Lookup and repeated Settle calls do
// the same for one payment with the time from [Options.Now], so Advance is
// only needed to finalize without moving that clock.
func (r *Rail) Advance(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC().Round(0)
	lo := r.key(paymentDir, "")
	var n int
	err := r.update(ctx, func(tx store.Txn) error {
		n = 0
		var due []payment
		it := tx.Iterate(lo, store.PrefixEnd(lo), false)
		for it.Next() {
			var pay payment
			if err := json.Unmarshal(it.Value(), &pay); err != nil {
				_ = it.Close()
				return fmt.Errorf("decode %q: %w", it.Key(), err)
			}
			if pay.finalize(now) {
				due = append(due, pay)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		for i := range due {
			if err := setJSON(tx, r.key(paymentDir, due[i].Key), &due[i]); err != nil {
				return err
			}
		}
		n = len(due)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("fake: %s: advance: %w", r.name, err)
	}
	return n, nil
}

// EntryKind says what a [LedgerEntry] records.
type EntryKind string

// To account for money: what moved is the Amount of every KindPayment and
// KindCapture entry whose Status is settled, less the KindRefund entries;
// what is held is the Amount of every KindAuthorization entry whose
// AuthStatus is authorized. Voids and expiries move nothing.
const (
	// KindPayment is a payment made by Settle: settled, pending or
	// declined.
	KindPayment EntryKind = "payment"
	// KindRefund is a refund of a settled payment (or capture).
	KindRefund EntryKind = "refund"
	// KindAuthorization is a hold placed by Authorize, or a declined one
	// (Status declined). Its AuthStatus is the hold's status now, so a
	// captured, voided or expired hold shows it here as well.
	KindAuthorization EntryKind = "authorization"
	// KindCapture is the payment a Capture made from a hold, under the
	// hold's key: like KindPayment, with the captured amount. A declined
	// capture (Status declined) released the hold and moved nothing.
	KindCapture EntryKind = "capture"
	// KindVoid is a Void that released a hold; Amount is the hold's. An
	// expiry makes no entry: it is not an act of the rail's customer.
	KindVoid EntryKind = "void"
)

// LedgerEntry is one record of a rail's ledger.
type LedgerEntry struct {
	// Seq orders the ledger: 1, 2, 3, ... in the order the rail recorded
	// the entries.
	Seq  uint64
	Kind EntryKind
	// Key is the payment's key (for a refund, the refunded payment's).
	Key string
	// RefundID is the refund's id; empty for a payment.
	RefundID string
	// Reference is the rail's id for the payment or refund.
	Reference string
	// Status is a payment's or capture's status now, StatusDeclined for a
	// declined authorization, and empty otherwise.
	Status settle.Status
	// AuthStatus is the hold's status now, for KindAuthorization and
	// KindVoid entries; empty otherwise, and for a declined authorization.
	AuthStatus settle.AuthorizationStatus
	// Payee of a payment, capture or hold; empty for a refund.
	Payee string
	// Amount paid or refunded, in minor units of Currency.
	Amount   int64
	Currency string
	// At is when the rail recorded the entry.
	At time.Time
}

// Ledger returns every payment, refund, authorization, capture and void the
// rail has recorded, in the order it recorded them. Pending payments that
// are due by [Options.Now] are shown final, and holds past their expiry
// expired (without being written back).
func (r *Rail) Ledger(ctx context.Context) ([]LedgerEntry, error) {
	pays, refs, auths, err := r.scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("fake: %s: ledger: %w", r.name, err)
	}
	now := r.now()
	out := make([]LedgerEntry, 0, len(pays)+len(refs)+len(auths))
	for _, p := range pays {
		p.finalize(now)
		kind := KindPayment
		if p.Capture {
			kind = KindCapture
		}
		out = append(out, LedgerEntry{
			Seq: p.Seq, Kind: kind, Key: p.Key, Reference: p.Reference, Status: p.Status,
			Payee: p.Payee, Amount: p.Amount, Currency: p.Currency, At: p.At,
		})
	}
	for _, a := range auths {
		a.expire(now)
		e := LedgerEntry{
			Seq: a.Seq, Kind: KindAuthorization, Key: a.Key, Reference: a.Reference, AuthStatus: a.Status,
			Payee: a.Payee, Amount: a.Amount, Currency: a.Currency, At: a.At,
		}
		if a.declined() {
			e.Status = settle.StatusDeclined
		}
		out = append(out, e)
		if a.VoidSeq != 0 {
			e.Seq, e.Kind, e.At = a.VoidSeq, KindVoid, a.VoidedAt
			out = append(out, e)
		}
	}
	for _, f := range refs {
		out = append(out, LedgerEntry{
			Seq: f.Seq, Kind: KindRefund, Key: f.Key, RefundID: f.RefundID, Reference: f.Reference,
			Amount: f.Amount, Currency: f.Currency, At: f.At,
		})
	}
	slices.SortFunc(out, func(a, b LedgerEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, nil
}

// Count returns the number of entries in the ledger, len(Ledger).
func (r *Rail) Count(ctx context.Context) (int, error) {
	l, err := r.Ledger(ctx)
	return len(l), err
}

// Settled reports whether the payment under key is settled (as of
// [Options.Now]): false if it is pending, declined, or unknown to the rail.
func (r *Rail) Settled(ctx context.Context, key string) (bool, error) {
	var pay payment
	err := r.opts.Store.View(ctx, func(tx store.Reader) error {
		var err error
		pay, err = getJSON[payment](tx, r.key(paymentDir, key))
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("fake: %s: settled: %w", r.name, err)
	}
	pay.finalize(r.now())
	return pay.Status == settle.StatusSettled, nil
}

// CheckLedger verifies the ledger's invariants and returns an error naming
// the first that does not hold: one payment per key, sequence numbers
// unique and in range, no pending payment on an instant rail, no refund on
// an irreversible rail, every refund of a settled payment in its currency,
// and each payment's refunds summing to its recorded refunded amount, never
// more than its amount. For authorizations: no key both settled and
// authorized, every capture made from a hold of its key, payee and currency,
// for no more than the hold, and each hold's status agreeing with its
// capture or void. Tests call it after exercising code that pays.
func (r *Rail) CheckLedger(ctx context.Context) error {
	pays, refs, auths, err := r.scan(ctx)
	if err != nil {
		return fmt.Errorf("fake: %s: check ledger: %w", r.name, err)
	}
	var last uint64
	err = r.opts.Store.View(ctx, func(tx store.Reader) error {
		b, err := tx.Get(r.key("", seqName))
		if errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if len(b) != 8 {
			return errors.New("sequence counter is not 8 bytes")
		}
		last = binary.BigEndian.Uint64(b)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fake: %s: check ledger: %w", r.name, err)
	}
	broken := func(format string, args ...any) error {
		return fmt.Errorf("fake: %s: ledger broken: "+format, append([]any{r.name}, args...)...)
	}
	seen := make(map[uint64]bool)
	useSeq := func(seq uint64) error {
		if seq == 0 || seq > last || seen[seq] {
			return broken("sequence number %d duplicated or out of range (last %d)", seq, last)
		}
		seen[seq] = true
		return nil
	}
	byKey := make(map[string]*payment, len(pays))
	for i := range pays {
		p := &pays[i]
		if byKey[p.Key] != nil {
			return broken("two payments under key %s", p.Key)
		}
		byKey[p.Key] = p
		if err := useSeq(p.Seq); err != nil {
			return err
		}
		if err := p.Status.Validate(); err != nil {
			return broken("payment %s: %v", p.Key, err)
		}
		if p.Status == settle.StatusPending && r.opts.Facts.Finality == settle.Instant {
			return broken("payment %s pending on an instant rail", p.Key)
		}
	}
	sums := make(map[string]int64)
	for _, f := range refs {
		if err := useSeq(f.Seq); err != nil {
			return err
		}
		if r.opts.Facts.Reversibility == settle.Irreversible {
			return broken("refund %s on an irreversible rail", f.RefundID)
		}
		p := byKey[f.Key]
		switch {
		case p == nil:
			return broken("refund %s of unknown payment %s", f.RefundID, f.Key)
		case p.Status != settle.StatusSettled:
			return broken("refund %s of payment %s, which is %s", f.RefundID, f.Key, p.Status)
		case f.Currency != p.Currency:
			return broken("refund %s in %s of a payment in %s", f.RefundID, f.Currency, p.Currency)
		case f.Amount < 1:
			return broken("refund %s of %d", f.RefundID, f.Amount)
		}
		sums[f.Key] += f.Amount
	}
	for _, p := range pays {
		if sums[p.Key] != p.Refunded || p.Refunded > p.Amount {
			return broken("payment %s of %d: refunds sum to %d, recorded %d", p.Key, p.Amount, sums[p.Key], p.Refunded)
		}
	}
	return checkAuthorizations(auths, pays, byKey, useSeq, broken)
}

// checkAuthorizations is CheckLedger's part for holds. byKey indexes pays;
// useSeq and broken are CheckLedger's.
func checkAuthorizations(auths []authorization, pays []payment, byKey map[string]*payment,
	useSeq func(uint64) error, broken func(string, ...any) error) error {
	held := make(map[string]bool, len(auths))
	for _, a := range auths {
		held[a.Key] = true
		if err := useSeq(a.Seq); err != nil {
			return err
		}
		if a.VoidSeq != 0 {
			if err := useSeq(a.VoidSeq); err != nil {
				return err
			}
		}
		if !a.declined() {
			if err := a.Status.Validate(); err != nil {
				return broken("authorization %s: %v", a.Key, err)
			}
		}
		p := byKey[a.Key]
		if p != nil && !p.Capture {
			return broken("key %s both settled and authorized", a.Key)
		}
		if p != nil && (p.Payee != a.Payee || p.Currency != a.Currency || p.Amount > a.Amount) {
			return broken("capture %s of %d %s to %s from a hold of %d %s to %s",
				a.Key, p.Amount, p.Currency, p.Payee, a.Amount, a.Currency, a.Payee)
		}
		// Declined when captured, that is; a pending capture that was
		// returned later (it has a FinalAt) was captured all the same.
		declinedCapture := p != nil && p.Status == settle.StatusDeclined && p.FinalAt.IsZero()
		var ok bool
		switch a.Status {
		case "", settle.AuthAuthorized, settle.AuthExpired:
			ok = p == nil && a.VoidSeq == 0
		case settle.AuthCaptured:
			ok = p != nil && !declinedCapture && p.Amount == a.CapturedMinor && a.VoidSeq == 0
		case settle.AuthVoided:
			// Released by Void, or by the decline of its capture.
			ok = p == nil && a.VoidSeq != 0 || declinedCapture && a.VoidSeq == 0
		}
		if !ok {
			return broken("authorization %s is %q, void entry %d, capture %v", a.Key, a.Status, a.VoidSeq, p != nil)
		}
		if a.Status != settle.AuthCaptured && a.CapturedMinor != 0 {
			return broken("authorization %s is %q with %d captured", a.Key, a.Status, a.CapturedMinor)
		}
	}
	for _, p := range pays {
		if p.Capture && !held[p.Key] {
			return broken("capture %s without an authorization", p.Key)
		}
	}
	return nil
}

// scan reads every payment, refund and authorization in one snapshot,
// checking that each record sits under its own key.
func (r *Rail) scan(ctx context.Context) (pays []payment, refs []refund, auths []authorization, err error) {
	err = r.opts.Store.View(ctx, func(tx store.Reader) error {
		pays, refs, auths = nil, nil, nil
		var err error
		if pays, err = scanDir(tx, r.prefix+paymentDir, func(p payment) string { return p.Key }); err != nil {
			return err
		}
		if refs, err = scanDir(tx, r.prefix+refundDir, func(f refund) string { return f.RefundID }); err != nil {
			return err
		}
		auths, err = scanDir(tx, r.prefix+authDir, func(a authorization) string { return a.Key })
		return err
	})
	return pays, refs, auths, err
}

func scanDir[T any](tx store.Reader, dir string, id func(T) string) ([]T, error) {
	lo := []byte(dir)
	it := tx.Iterate(lo, store.PrefixEnd(lo), false)
	var out []T
	for it.Next() {
		var v T
		if err := json.Unmarshal(it.Value(), &v); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("decode %q: %w", it.Key(), err)
		}
		if got, want := id(v), strings.TrimPrefix(string(it.Key()), dir); got != want {
			_ = it.Close()
			return nil, fmt.Errorf("record %q holds id %q", want, got)
		}
		out = append(out, v)
	}
	return out, it.Close()
}

func getJSON[T any](tx store.Reader, k []byte) (T, error) {
	var v T
	b, err := tx.Get(k)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("decode %q: %w", k, err)
	}
	return v, nil
}

func setJSON(tx store.Txn, k []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Set(k, b)
}

// nextSeq increments and returns the ledger's sequence counter.
func nextSeq(tx store.Txn, k []byte) (uint64, error) {
	var n uint64
	b, err := tx.Get(k)
	switch {
	case err == nil && len(b) == 8:
		n = binary.BigEndian.Uint64(b)
	case err == nil:
		return 0, errors.New("sequence counter is not 8 bytes")
	case !errors.Is(err, store.ErrNotFound):
		return 0, err
	}
	n++
	return n, tx.Set(k, binary.BigEndian.AppendUint64(nil, n))
}
