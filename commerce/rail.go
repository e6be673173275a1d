package commerce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// rails returns the settlement rails "acp" and "ucp": settling a purchase
// on one completes its checkout session at the merchant. [Service.Attach]
// brings them to the money path.
func (s *Service) rails() []settle.Rail {
	return []settle.Rail{&rail{s: s, name: "acp"}, &rail{s: s, name: "ucp"}}
}

// rail completes checkouts. Completed orders cannot be reversed through
// either protocol, so the rails are irreversible (a purchase at or above a
// mandate's irreversible threshold waits for a person) and refunds are
// refused: returns go through the merchant.
type rail struct {
	s    *Service
	name string
}

func (r *rail) Name() string { return r.name }

func (r *rail) Facts() settle.Facts {
	return settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}
}

// attempt is what a settlement completes: the merchant and checkout
// session from the request's metadata (kept durably on the intent), and
// the authorised amount.
type attempt struct {
	Merchant string
	Cart     string
	Amount   int64
	Currency string
	Payee    string
}

func (r *rail) merchant(id string) (cart.Merchant, error) {
	m, err := r.s.Merchant(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", settle.ErrInvalidRequest, err)
	}
	if m.Protocol() != r.name {
		return nil, fmt.Errorf("%w: merchant %s is not on rail %s", settle.ErrInvalidRequest, id, r.name)
	}
	return m, nil
}

func declined(key string, a attempt, code, msg string) (settle.Settlement, error) {
	return settle.Settlement{Key: key, Status: settle.StatusDeclined, Amount: a.Amount, Currency: a.Currency,
		Payee: a.Payee, DeclineCode: code, Reference: a.Cart}, &settle.DeclineError{Code: code, Message: msg}
}

func (r *rail) Settle(ctx context.Context, req settle.SettleRequest) (settle.Settlement, error) {
	if err := req.Validate(); err != nil {
		return settle.Settlement{}, err
	}
	a := attempt{Merchant: req.Metadata["merchant"], Cart: req.Metadata["cart"], Amount: req.Amount,
		Currency: req.Currency, Payee: req.Payee}
	if id, ok := merchantOfPayee(req.Payee); !ok || id != a.Merchant || a.Cart == "" {
		return settle.Settlement{}, fmt.Errorf("%w: a purchase names its merchant as payee and in metadata, and its cart", settle.ErrInvalidRequest)
	}
	m, err := r.merchant(a.Merchant)
	if err != nil {
		return settle.Settlement{}, err
	}
	if s, ok, err := r.s.settledOrder(ctx, req.Key); err != nil || ok {
		return s, err // a repeat: the order is already placed
	}
	// Re-read first: a purchase held for a person may have waited for
	// hours, and only the merchant knows whether it is still payable.
	ct, err := m.Get(ctx, a.Cart)
	switch {
	case errors.Is(err, cart.ErrNotFound):
		return declined(req.Key, a, "cart_not_found", "the merchant no longer has the checkout session")
	case err != nil:
		return settle.Settlement{}, fmt.Errorf("%w: re-reading the cart: %v", settle.ErrUnavailable, err)
	}
	switch {
	case ct.Status == cart.StatusCompleted:
		// Completed by this purchase (the same key sent to another
		// server, which joined the settlement through Settle and got to
		// the merchant first) or by another one. Completion under this
		// key answers the order it placed; refused, another purchase
		// completed the session and this one moved no money.
		return r.completed(ctx, req.Key, a, m)
	case ct.Status == cart.StatusInProgress, ct.Status == cart.StatusPending:
		// A completion is under way, perhaps this purchase's own from
		// another server: not a decline. The intent stays settling and
		// LookupRequest resolves it from the merchant's state.
		return settle.Settlement{}, fmt.Errorf("commerce: completing %s at %s: %w: the merchant is completing the session", a.Cart, a.Merchant, cart.ErrUnknownOutcome)
	case !ct.Ready():
		return declined(req.Key, a, "cart_not_ready", fmt.Sprintf("the cart is %s at the merchant, not ready for payment", ct.RawStatus))
	case ct.Totals.Total != req.Amount || ct.Currency != req.Currency:
		return declined(req.Key, a, "cart_total_changed", fmt.Sprintf("the cart's total is now %d %s, not the %d %s authorised; quote again",
			ct.Totals.Total, ct.Currency, req.Amount, req.Currency))
	}
	o, err := m.Complete(ctx, a.Cart, cart.Payment{Amount: req.Amount, Currency: req.Currency, IdempotencyKey: req.Key})
	switch {
	case err == nil:
		return r.s.placed(ctx, req.Key, a, m, o)
	case errors.Is(err, cart.ErrDeclined):
		return declined(req.Key, a, "payment_declined", "the merchant declined the payment: "+err.Error())
	case errors.Is(err, cart.ErrNotReady):
		return declined(req.Key, a, "cart_not_ready", "the merchant refused completion: the cart is not ready")
	case errors.Is(err, cart.ErrUnavailable):
		return settle.Settlement{}, fmt.Errorf("%w: %v", settle.ErrUnavailable, err)
	case errors.Is(err, cart.ErrRejected), errors.Is(err, cart.ErrNotFound):
		return declined(req.Key, a, "merchant_rejected", err.Error())
	default:
		// Unknown outcome (a timeout, a 5xx, an answer outside the
		// protocol): the order may exist. Not a decline: the money path
		// keeps the intent settling and asks Lookup later.
		return settle.Settlement{}, fmt.Errorf("commerce: completing %s at %s: %w", a.Cart, a.Merchant, err)
	}
}

// LookupRequest learns what happened to a purchase from the merchant's own
// state, with the request the money path sent (its metadata names the
// merchant and the checkout session, which the intent keeps durably): a
// completed session is the order (completion under the same key answers it
// again, never places another); a canceled or expired one proves no order
// was placed, which declines the intent and releases its reservation; an
// open one is canceled first, since only then does it prove anything.
func (r *rail) LookupRequest(ctx context.Context, req settle.SettleRequest) (settle.Settlement, error) {
	if s, ok, err := r.s.settledOrder(ctx, req.Key); err != nil || ok {
		return s, err
	}
	a := attempt{Merchant: req.Metadata["merchant"], Cart: req.Metadata["cart"], Amount: req.Amount,
		Currency: req.Currency, Payee: req.Payee}
	m, err := r.merchant(a.Merchant)
	if err != nil {
		return settle.Settlement{}, err
	}
	ct, err := m.Get(ctx, a.Cart)
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: %w", req.Key, err)
	}
	switch ct.Status {
	case cart.StatusCompleted:
		return r.orderOf(ctx, req.Key, a, m)
	case cart.StatusInProgress, cart.StatusPending:
		return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: completion still in progress at the merchant", req.Key)
	case cart.StatusCanceled, cart.StatusExpired:
		return declined(req.Key, a, "not_completed", fmt.Sprintf("the merchant's session is %s: no order was placed", ct.RawStatus))
	}
	// An open session proves nothing yet: a completion sent before a crash
	// may still be on its way to the merchant, with a payment credential
	// that is still valid. Close the session first; only a closed session
	// without an order proves that none will be placed.
	closed, err := m.Cancel(ctx, a.Cart)
	if err != nil {
		// Refused: perhaps because the late completion just won. Look again.
		again, gerr := m.Get(ctx, a.Cart)
		if gerr == nil && again.Status == cart.StatusCompleted {
			return r.orderOf(ctx, req.Key, a, m)
		}
		return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: closing the open session before declaring no order: %w", req.Key, err)
	}
	switch closed.Status {
	case cart.StatusCompleted:
		return r.orderOf(ctx, req.Key, a, m)
	case cart.StatusCanceled, cart.StatusExpired:
		return declined(req.Key, a, "not_completed", "the merchant's session was still open and is now canceled: no order was placed")
	}
	return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: the session is %s after cancelling it; asking again later", req.Key, closed.RawStatus)
}

// completed settles a purchase whose checkout session Settle found
// completed: by this key's completion, whose order the merchant answers
// again, or by another purchase, which the merchant refuses this key.
// Anything else leaves the outcome unknown.
func (r *rail) completed(ctx context.Context, key string, a attempt, m cart.Merchant) (settle.Settlement, error) {
	o, err := m.Complete(ctx, a.Cart, cart.Payment{Amount: a.Amount, Currency: a.Currency, IdempotencyKey: key})
	switch {
	case err == nil:
		return r.s.placed(ctx, key, a, m, o)
	case errors.Is(err, cart.ErrRejected), errors.Is(err, cart.ErrNotReady):
		return declined(key, a, "cart_completed", "the checkout session is already completed by another purchase")
	}
	return settle.Settlement{}, fmt.Errorf("commerce: %s at %s is completed, but its order could not be read: %w", a.Cart, a.Merchant, err)
}

// orderOf asks a completed session for its order, under the intent's
// idempotency key (never a second completion), and records it.
func (r *rail) orderOf(ctx context.Context, key string, a attempt, m cart.Merchant) (settle.Settlement, error) {
	o, err := m.Complete(ctx, a.Cart, cart.Payment{Amount: a.Amount, Currency: a.Currency, IdempotencyKey: key})
	if err != nil {
		return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: the session is completed but its order could not be read: %w", key, err)
	}
	return r.s.placed(ctx, key, a, m, o)
}

// Lookup answers a purchase whose order is on file. Without the request it
// cannot tell which checkout session to ask about, so it never claims the
// key is unknown (that would invite a second completion): callers resume
// purchases through LookupRequest, as the money path does.
func (r *rail) Lookup(ctx context.Context, key string) (settle.Settlement, error) {
	if s, ok, err := r.s.settledOrder(ctx, key); err != nil || ok {
		return s, err
	}
	return settle.Settlement{}, fmt.Errorf("commerce: lookup %s: no order on file; ask with the request (LookupRequest)", key)
}

func (r *rail) Refund(context.Context, settle.RefundRequest) (settle.RefundResult, error) {
	return settle.RefundResult{}, fmt.Errorf("%w: a completed order is returned through the merchant", settle.ErrIrreversible)
}

// placed records a completed checkout: the order is stored under the
// intent and appended to the record, then reported settled.
func (s *Service) placed(ctx context.Context, key string, a attempt, m cart.Merchant, o cart.Order) (settle.Settlement, error) {
	order := Order{ID: o.ID, CartID: a.Cart, IntentID: key, Rail: m.Protocol(), Merchant: a.Merchant, Status: o.Status,
		PlacedAt: o.PlacedAt.UTC(), Lines: o.Lines, Total: pay.Amount{Minor: a.Amount, Currency: a.Currency}}
	if order.Lines == nil {
		order.Lines = []cart.Line{}
	}
	if order.PlacedAt.IsZero() {
		order.PlacedAt = s.now().UTC()
	}
	b, err := json.Marshal(order)
	if err != nil {
		return settle.Settlement{}, err
	}
	data, _ := json.Marshal(map[string]any{"orderId": o.ID, "cartId": a.Cart, "merchant": a.Merchant,
		"rail": m.Protocol(), "version": m.Version(), "totalMinor": a.Amount, "currency": a.Currency, "merchantTotalMinor": o.Total})
	// The order exists at the merchant: write it down whatever the
	// caller's context says.
	err = s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		if _, err := txn.Get([]byte(keyOrder + key)); err == nil {
			return nil // recorded by an earlier call
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if _, err := s.log.Append(txn, audit.Record{Type: EntryCompleted, IntentID: key,
			Actor: audit.Actor{Kind: "system", ID: "commerce"}, Data: data}); err != nil {
			return err
		}
		return txn.Set([]byte(keyOrder+key), b)
	})
	if err != nil {
		// Not recorded: report an unknown outcome, so the money path
		// asks again rather than settle without the order on file.
		return settle.Settlement{}, fmt.Errorf("commerce: recording order %s: %w", o.ID, err)
	}
	return settle.Settlement{Key: key, Reference: o.ID, Status: settle.StatusSettled, Amount: a.Amount,
		Currency: a.Currency, Payee: a.Payee, SettledAt: order.PlacedAt}, nil
}

func (s *Service) settledOrder(ctx context.Context, key string) (settle.Settlement, bool, error) {
	var o Order
	err := s.st.View(ctx, func(r store.Reader) error {
		b, err := r.Get([]byte(keyOrder + key))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &o)
	})
	if errors.Is(err, store.ErrNotFound) {
		return settle.Settlement{}, false, nil
	}
	if err != nil {
		return settle.Settlement{}, false, err
	}
	return settle.Settlement{Key: key, Reference: o.ID, Status: settle.StatusSettled, Amount: o.Total.Minor,
		Currency: o.Total.Currency, Payee: Payee(o.Merchant), SettledAt: o.PlacedAt}, true, nil
}
