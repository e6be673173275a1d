package pay

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/store"
)

// HeldHistoryLimit bounds how many of an agent key's intents one held
// item's context reads (the newest first): a page of the held list costs
// at most this many intent reads per agent key on it, whatever the key's
// age. HeldHistory.Truncated says when the bound was hit.
const HeldHistoryLimit = 500

// Kinds of held intent (HeldContext.Kind) that package pay names itself.
// Extensions name the kinds of their routes ([Effect].Kind).
const (
	KindPayment  = "payment"  // a payment instruction (/pay)
	KindPurchase = "purchase" // a commerce purchase (/buy): it carries a cart
	KindHold     = "hold"     // a hold of a route that names no kind
)

// Money is an amount that may be zero: a sum, a budget's use or what is
// left of it. It has the shape of [Amount].
type Money struct {
	Minor    int64  `json:"minor" validate:"gte=0,lt=9007199254740992" doc:"Minor units (cents for USD), 0 or more."`
	Currency string `json:"currency" doc:"ISO 4217 code or CAIP-19 asset id, as in Amount."`
}

// HeldContext is what an operator needs to judge a held intent without
// other tools: what kind of thing it is, how long is left, the agent key's
// history with the payee and its recent spending, the mandate's budget as
// the gate enforces it, and for a purchase the cart. It is computed when
// the held list is read, in the same view as the page.
type HeldContext struct {
	Kind          string       `json:"kind" doc:"payment, purchase (a commerce buy, with its cart), or the protocol kind of a held spend: hold, meter, obligation, insurance, deposit, withdrawal."`
	SecondsLeft   int64        `json:"secondsLeft" validate:"gte=0" doc:"Seconds until expiresAt at the service's clock; never negative."`
	Payee         HeldPayee    `json:"payee"`
	Velocity      HeldVelocity `json:"velocity"`
	Budget        *HeldBudget  `json:"budget" doc:"The mandate's period budget as the gate enforces it; null when the mandate is not known here."`
	PerPaymentCap *Amount      `json:"perPaymentCap" doc:"The mandate's per-payment cap; null when the mandate is not known here."`
	Cart          *HeldCart    `json:"cart" doc:"For a purchase: the merchant and the cart as the merchant priced it when the agent bought; null otherwise, or when it was not kept."`
	History       HeldHistory  `json:"history"`
}

// HeldPayee is the agent key's history with the held intent's payee.
type HeldPayee struct {
	FirstTime     bool       `json:"firstTime" doc:"No payment of this agent key to this payee was found settled (or refunded after settling)."`
	SettledCount  int        `json:"settledCount" validate:"gte=0" doc:"How many such payments were found, in any currency."`
	TypicalAmount *Amount    `json:"typicalAmount" doc:"The median of those payments in the held intent's currency (of an even count, the lower middle one, so it is an amount that was paid); null when there is none."`
	LastSettledAt *time.Time `json:"lastSettledAt" doc:"When the latest of them settled; null when there is none."`
}

// HeldVelocity is the agent key's recent spending in the held intent's
// currency: its intents that moved or are moving money (settling,
// authorized, settled, partially refunded, refunded), the held one aside,
// by when they were asked for (createdAt), as the gate's velocity rule
// counts them.
type HeldVelocity struct {
	LastHour HeldWindow `json:"lastHour"`
	LastDay  HeldWindow `json:"lastDay"`
}

// HeldWindow counts the intents of one window and sums their amounts.
type HeldWindow struct {
	Count  int64 `json:"count" validate:"gte=0"`
	Amount Money `json:"amount"`
}

// HeldBudget is the mandate's period budget as the gate reads it: its
// counter of the current window (settled + reserved) against its cap.
type HeldBudget struct {
	Period gate.Period `json:"period" doc:"day, week (ISO, from Monday) or month, UTC calendar windows."`
	Limit  Amount      `json:"limit" doc:"The mandate's period cap."`
	Used   Money       `json:"used" doc:"Settled plus reserved in the current window: what the gate adds a payment to."`
	// IncludesThis: the held intent's own reservation is counted in Used
	// (it was held in this window; one held in an earlier window is not).
	IncludesThis bool      `json:"includesThis" doc:"Used includes the held intent's own reservation (it was held in the current window)."`
	Remaining    Money     `json:"remaining" doc:"Limit minus used; never negative."`
	ResetsAt     time.Time `json:"resetsAt" doc:"When the current window ends and the counter starts again."`
}

// HeldCart is the cart of a held purchase, as kept by the extension that
// brought the route ([Effect].Cart).
type HeldCart struct {
	Merchant string         `json:"merchant" doc:"The merchant's registry id."`
	Lines    []HeldCartLine `json:"lines"`
	Total    Money          `json:"total" doc:"The cart's total: what the purchase authorises."`
}

// HeldCartLine is one line of a held purchase's cart.
type HeldCartLine struct {
	SKU       string `json:"sku" doc:"The item (SKU) the agent asked for."`
	Title     string `json:"title" doc:"The merchant's title of the item; empty when it gave none."`
	Quantity  int64  `json:"quantity" validate:"gte=0"`
	UnitPrice Money  `json:"unitPrice"`
	Total     Money  `json:"total" doc:"The line's total as the merchant priced it (after tax and discount)."`
}

// HeldHistory says how much of the agent key's history the payee and
// velocity figures rest on.
type HeldHistory struct {
	Scanned   int  `json:"scanned" validate:"gte=0" doc:"How many of the agent key's other intents were read, newest first."`
	Truncated bool `json:"truncated" doc:"The bound (the newest 500 intents) was hit: older intents were not read, so firstTime and the counts may miss them."`
}

// heldContexts computes the contexts of one page's held intents inside
// one view. The agent keys' histories are read once per key and page.
type heldContexts struct {
	s       *Service
	r       store.Reader
	now     time.Time
	history map[string][]*Intent // agent key id → its newest intents, up to HeldHistoryLimit+2
	known   map[string]*KnownMandate
}

func (s *Service) newHeldContexts(r store.Reader, now time.Time) *heldContexts {
	return &heldContexts{s: s, r: r, now: now, history: map[string][]*Intent{}, known: map[string]*KnownMandate{}}
}

// of computes the context of the held intent in.
func (hc *heldContexts) of(in *Intent) (HeldContext, error) {
	c := HeldContext{Kind: hc.s.kindOf(in)}
	if in.Approval != nil {
		c.SecondsLeft = max(0, int64(in.Approval.ExpiresAt.Sub(hc.now)/time.Second))
	}
	if err := hc.agentHistory(in, &c); err != nil {
		return HeldContext{}, err
	}
	if err := hc.budget(in, &c); err != nil {
		return HeldContext{}, err
	}
	if e := hc.s.effect(in.Route); e.Cart != nil {
		cart, err := e.Cart(hc.r, in)
		if err != nil {
			return HeldContext{}, fmt.Errorf("pay: the cart of %s: %w", in.ID, err)
		}
		c.Cart = cart
	}
	return c, nil
}

// kindOf names what a held intent is: the kind its route's effect names,
// or payment, purchase or hold.
func (s *Service) kindOf(in *Intent) string {
	switch {
	case in.Route == RoutePay:
		return KindPayment
	case in.Route == RouteBuy:
		return KindPurchase
	}
	if k := s.effect(in.Route).Kind; k != "" {
		return k
	}
	if in.Hold != nil {
		return KindHold
	}
	return KindPayment
}

// movesMoney reports the statuses of an intent that moved money or is
// moving it.
func movesMoney(st Status) bool {
	switch st {
	case StatusSettling, StatusAuthorized, StatusSettled, StatusPartiallyRefunded, StatusRefunded:
		return true
	}
	return false
}

// agentHistory fills the payee, velocity and history figures of in from
// its agent key's newest intents.
func (hc *heldContexts) agentHistory(in *Intent, c *HeldContext) error {
	all, err := hc.newest(in.AgentKeyID)
	if err != nil {
		return err
	}
	cur := in.Amount.Currency
	c.Velocity.LastHour.Amount.Currency, c.Velocity.LastDay.Amount.Currency = cur, cur
	hour, day := hc.now.Add(-time.Hour), hc.now.Add(-24*time.Hour)
	var settled []int64 // in the held intent's currency
	for _, o := range all {
		if o.ID == in.ID {
			continue
		}
		if c.History.Scanned == HeldHistoryLimit {
			c.History.Truncated = true
			break
		}
		c.History.Scanned++
		if o.Payee == in.Payee && o.Receipt != nil {
			c.Payee.SettledCount++
			if at := o.Receipt.SettledAt; c.Payee.LastSettledAt == nil || at.After(*c.Payee.LastSettledAt) {
				c.Payee.LastSettledAt = &at
			}
			if o.Receipt.Amount.Currency == cur {
				settled = append(settled, o.Receipt.Amount.Minor)
			}
		}
		if !movesMoney(o.Status) || o.Amount.Currency != cur {
			continue
		}
		moved := o.Amount.Minor
		if o.Receipt != nil {
			moved = o.Receipt.Amount.Minor
		}
		if !o.CreatedAt.Before(day) {
			c.Velocity.LastDay.Count++
			c.Velocity.LastDay.Amount.Minor += moved
		}
		if !o.CreatedAt.Before(hour) {
			c.Velocity.LastHour.Count++
			c.Velocity.LastHour.Amount.Minor += moved
		}
	}
	c.Payee.FirstTime = c.Payee.SettledCount == 0
	if len(settled) > 0 {
		slices.Sort(settled)
		c.Payee.TypicalAmount = &Amount{Minor: settled[(len(settled)-1)/2], Currency: cur}
	}
	return nil
}

// newest returns the newest intents of an agent key, newest first (the
// index is in creation order): up to
// HeldHistoryLimit+2 of them, so that, whichever one of them is the held
// intent, agentHistory can tell whether more than HeldHistoryLimit others
// exist. They are read once per key and view.
func (hc *heldContexts) newest(agentKeyID string) ([]*Intent, error) {
	if out, ok := hc.history[agentKeyID]; ok {
		return out, nil
	}
	prefix := []byte(keyByKey + agentKeyID + "/")
	it := hc.r.Iterate(prefix, store.PrefixEnd(prefix), true)
	var out []*Intent
	for len(out) < HeldHistoryLimit+2 && it.Next() {
		k := it.Key()
		if len(k) < len(prefix)+8 {
			continue
		}
		o, err := getIntent(hc.r, string(k[len(prefix)+8:]))
		if err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, o)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	hc.history[agentKeyID] = out
	return out, nil
}

// budget fills the mandate's budget and per-payment cap of in, from the
// mandate as the service honoured it and the period counter the gate
// reads (DESIGN §4, pay/period/<mandate>/<window start>).
func (hc *heldContexts) budget(in *Intent, c *HeldContext) error {
	km, err := hc.mandate(in.MandateID)
	if err != nil || km == nil {
		return err
	}
	if km.PerTxCapMinor > 0 {
		c.PerPaymentCap = &Amount{Minor: km.PerTxCapMinor, Currency: km.Currency}
	}
	if km.PerPeriodCapMinor <= 0 || !km.Period.Valid() {
		return nil
	}
	start, end := gate.PeriodWindow(km.Period, hc.now)
	key := keyPeriod + km.ID + "/" + strconv.FormatInt(start.Unix(), 10)
	used, err := getInt(hc.r, []byte(key))
	if err != nil {
		return err
	}
	c.Budget = &HeldBudget{
		Period: km.Period, Limit: Amount{Minor: km.PerPeriodCapMinor, Currency: km.Currency},
		Used:         Money{Minor: max(0, used), Currency: km.Currency},
		IncludesThis: in.PeriodKey == key && in.ReservedMinor > 0,
		Remaining:    Money{Minor: max(0, km.PerPeriodCapMinor-used), Currency: km.Currency},
		ResetsAt:     end,
	}
	return nil
}

// mandate reads a mandate the service honoured, once per view; nil when
// it is not known.
func (hc *heldContexts) mandate(id string) (*KnownMandate, error) {
	if km, ok := hc.known[id]; ok {
		return km, nil
	}
	var km *KnownMandate
	b, err := hc.r.Get([]byte(keyMandate + id))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		km = new(KnownMandate)
		if err := json.Unmarshal(b, km); err != nil {
			return nil, fmt.Errorf("pay: stored mandate %s: %w", id, err)
		}
	}
	hc.known[id] = km
	return km, nil
}
