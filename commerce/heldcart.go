package commerce

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// keyHeldCart + intent id → the cart.Cart a held purchase authorises, as
// the merchant priced it when the agent bought: what the operator's held
// list shows of the purchase (pay.HeldContext.Cart). Written in the
// transaction that holds the purchase, so a held purchase has it from the
// moment it is listed; kept afterwards, like the intent, as what the
// operator was shown.
const keyHeldCart = "commerce/held-cart/"

// heldCartEffect is the effect of /buy on the money path: it names the
// kind of a held purchase and reads its cart for the operator. pay does
// not import commerce; this is how the held list learns about carts.
func (s *Service) heldCartEffect() pay.Effect {
	return pay.Effect{Kind: pay.KindPurchase, Cart: heldCart}
}

// keepHeldCart returns the pay.Signed OnHeld hook of a purchase of ct: it
// stores ct under the held intent's id in the deciding transaction.
func keepHeldCart(ct *cart.Cart) func(txn store.Txn, in *pay.Intent) error {
	return func(txn store.Txn, in *pay.Intent) error {
		b, err := json.Marshal(ct)
		if err != nil {
			return fmt.Errorf("commerce: the cart of %s: %w", in.ID, err)
		}
		return txn.Set([]byte(keyHeldCart+in.ID), b)
	}
}

// heldCart reads the cart a held purchase kept, as pay.HeldCart; nil when
// none was kept (a purchase held before carts were kept).
func heldCart(r store.Reader, in *pay.Intent) (*pay.HeldCart, error) {
	b, err := r.Get([]byte(keyHeldCart + in.ID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ct cart.Cart
	if err := json.Unmarshal(b, &ct); err != nil {
		return nil, fmt.Errorf("commerce: stored cart of %s: %w", in.ID, err)
	}
	return heldCartOf(&ct), nil
}

// heldCartOf projects a priced cart onto the operator's view. Amounts are
// the merchant's own, never negative on the wire.
func heldCartOf(ct *cart.Cart) *pay.HeldCart {
	money := func(minor int64) pay.Money { return pay.Money{Minor: max(0, minor), Currency: ct.Currency} }
	out := &pay.HeldCart{Merchant: ct.Merchant, Lines: make([]pay.HeldCartLine, 0, len(ct.Lines)), Total: money(ct.Totals.Total)}
	for _, l := range ct.Lines {
		out.Lines = append(out.Lines, pay.HeldCartLine{SKU: l.ItemID, Title: l.Title, Quantity: max(0, l.Quantity),
			UnitPrice: money(l.Unit), Total: money(l.Total)})
	}
	return out
}
