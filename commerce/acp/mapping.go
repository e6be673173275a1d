package acp

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/countersign/countersign/commerce/cart"
)

// statuses maps every ACP session status onto the cart vocabulary.
var statuses = map[string]cart.Status{
	StatusReadyForPayment:        cart.StatusReady,
	StatusNotReadyForPayment:     cart.StatusIncomplete,
	StatusIncomplete:             cart.StatusIncomplete,
	StatusRequiresEscalation:     cart.StatusEscalation,
	StatusAuthenticationRequired: cart.StatusAuth,
	StatusPendingApproval:        cart.StatusPending,
	StatusCompleteInProgress:     cart.StatusInProgress,
	StatusInProgress:             cart.StatusInProgress,
	StatusCompleted:              cart.StatusCompleted,
	StatusCanceled:               cart.StatusCanceled,
	StatusExpired:                cart.StatusExpired,
}

// MapStatus maps an ACP session status onto cart.Status; ok is false for
// a word outside the schema's enum.
func MapStatus(s string) (st cart.Status, ok bool) {
	st, ok = statuses[s]
	return st, ok
}

// toCart maps a checked session onto a cart. Beyond the schema it
// refuses what cannot be paid safely: totals without exactly one total,
// and a continue URL that is not http(s) (it is shown to a person).
func (c *Client) toCart(cs *CheckoutSession) (cart.Cart, error) {
	st, ok := statuses[cs.Status]
	if !ok { // unreachable: the schema's enum is the map's keys
		return cart.Cart{}, fmt.Errorf("%w: status %q", cart.ErrInvalidResponse, clip(cs.Status))
	}
	totals, err := mapTotals(cs.Totals, "$.totals")
	if err != nil {
		return cart.Cart{}, err
	}
	ct := cart.Cart{
		ID: cs.ID, Rail: "acp", Version: Version, Merchant: c.opts.MerchantID,
		Status: st, RawStatus: cs.Status, Currency: strings.ToUpper(cs.Currency),
		Totals: totals, Lines: []cart.Line{}, Fulfillment: []cart.Fulfillment{}, Messages: []cart.Message{},
	}
	for i, li := range cs.LineItems {
		l, err := mapLine(li, fmt.Sprintf("$.line_items[%d].totals", i))
		if err != nil {
			return cart.Cart{}, err
		}
		ct.Lines = append(ct.Lines, l)
	}
	for _, fo := range cs.FulfillmentOptions {
		f := cart.Fulfillment{ID: fo.ID, Type: fo.Type, Title: fo.Title, Selected: selected(cs, fo.ID)}
		f.Amount = sumType(fo.Totals, TotalTotal)
		if !hasType(fo.Totals, TotalTotal) {
			f.Amount = sumType(fo.Totals, TotalFulfillment)
		}
		ct.Fulfillment = append(ct.Fulfillment, f)
	}
	for _, m := range cs.Messages {
		ct.Messages = append(ct.Messages, cart.Message{Type: m.Type, Code: m.Code, Text: m.Content, Path: m.Param})
	}
	if cs.ContinueURL != "" {
		if !webURL(cs.ContinueURL) {
			return cart.Cart{}, fmt.Errorf("%w: $.continue_url: %q is not an http(s) URL", cart.ErrInvalidResponse, clip(cs.ContinueURL))
		}
		ct.ContinueURL = cs.ContinueURL
	}
	if cs.ExpiresAt != "" {
		t, err := parseTime(cs.ExpiresAt)
		if err != nil { // unreachable: the schema checked the format
			return cart.Cart{}, fmt.Errorf("%w: $.expires_at: %v", cart.ErrInvalidResponse, err)
		}
		ct.ExpiresAt = &t
	}
	return ct, nil
}

// toOrder maps a completion's answer (a session with its order) onto an
// order. Any refusal here leaves the outcome unknown: the merchant said
// something about an order, but not something we can use.
func (c *Client) toOrder(cs *CheckoutSession, id string) (cart.Order, error) {
	unusable := func(format string, args ...any) error {
		return fmt.Errorf("%w: %w: %s", cart.ErrUnknownOutcome, cart.ErrInvalidResponse, fmt.Sprintf(format, args...))
	}
	o := cs.Order
	switch {
	case cs.ID != id:
		return cart.Order{}, unusable("asked for session %q, answered %q", clip(id), clip(cs.ID))
	case o.CheckoutSessionID != id:
		return cart.Order{}, unusable("the order is for session %q, not %q", clip(o.CheckoutSessionID), clip(id))
	case o.ID == "":
		return cart.Order{}, unusable("the order has no id")
	}
	switch cs.Status {
	case StatusCompleted, StatusCompleteInProgress, StatusInProgress, StatusPendingApproval:
	default:
		return cart.Order{}, unusable("an order with the session %s", clip(cs.Status))
	}
	ct, err := c.toCart(cs)
	if err != nil {
		return cart.Order{}, fmt.Errorf("%w: %w", cart.ErrUnknownOutcome, err)
	}
	status := o.Status
	if status == "" {
		status = "created"
	}
	out := cart.Order{
		ID: o.ID, CartID: o.CheckoutSessionID, Status: status, PlacedAt: c.opts.Now().UTC(),
		Lines: ct.Lines, Total: ct.Totals.Total, Currency: ct.Currency,
	}
	if webURL(o.PermalinkURL) {
		out.Permalink = o.PermalinkURL
	}
	return out, nil
}

// mapTotals reads a totals breakdown: exactly one total; the other types
// are summed (a merchant may list several fees).
//
//	cart.Subtotal = items_base_amount, or subtotal when there is none
//	cart.Discount = items_discount + discount
//	cart.Tax      = tax
//	cart.Shipping = fulfillment
//	cart.Total    = total (it includes fee, gift_wrap, tip, store_credit)
func mapTotals(ts []Total, at string) (cart.Totals, error) {
	n := 0
	for _, t := range ts {
		if t.Type == TotalTotal {
			n++
		}
	}
	if n != 1 {
		return cart.Totals{}, fmt.Errorf("%w: %s: want exactly one total of type total, got %d", cart.ErrInvalidResponse, at, n)
	}
	out := cart.Totals{
		Subtotal: sumType(ts, TotalItemsBaseAmount),
		Discount: sumType(ts, TotalItemsDiscount) + sumType(ts, TotalDiscount),
		Tax:      sumType(ts, TotalTax),
		Shipping: sumType(ts, TotalFulfillment),
		Total:    sumType(ts, TotalTotal),
	}
	if !hasType(ts, TotalItemsBaseAmount) {
		out.Subtotal = sumType(ts, TotalSubtotal)
	}
	return out, nil
}

func mapLine(li LineItem, at string) (cart.Line, error) {
	t, err := mapTotals(li.Totals, at)
	if err != nil {
		return cart.Line{}, err
	}
	l := cart.Line{
		ID: li.ID, ItemID: li.Item.ID, Title: li.Name, Quantity: li.Quantity,
		Subtotal: t.Subtotal, Tax: t.Tax, Discount: t.Discount, Total: t.Total,
	}
	if l.Title == "" {
		l.Title = li.Item.Name
	}
	switch {
	case li.UnitAmount != nil:
		l.Unit = *li.UnitAmount
	case li.Item.UnitAmount != nil:
		l.Unit = *li.Item.UnitAmount
	}
	return l, nil
}

// sumType adds the amounts of the totals of type typ, saturating rather
// than wrapping around on (absurd) overflow.
func sumType(ts []Total, typ string) int64 {
	var s int64
	for _, t := range ts {
		if t.Type != typ {
			continue
		}
		switch {
		case t.Amount > 0 && s > maxInt64-t.Amount:
			s = maxInt64
		case t.Amount < 0 && s < minInt64-t.Amount:
			s = minInt64
		default:
			s += t.Amount
		}
	}
	return s
}

const (
	maxInt64 = 1<<63 - 1
	minInt64 = -1 << 63
)

func hasType(ts []Total, typ string) bool {
	for _, t := range ts {
		if t.Type == typ {
			return true
		}
	}
	return false
}

// webURL reports whether s is an absolute http(s) URL with a host.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}
