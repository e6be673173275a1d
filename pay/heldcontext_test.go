package pay

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/store"
)

// past is an intent of the harness's agent key written straight into the
// store (with its by-key index row), as a history the held list reads.
type past struct {
	payee    string
	minor    int64
	currency string // "" is USD
	status   Status
	ago      time.Duration // created this long before the clock
}

// seed writes the intents of ps for the harness's agent key. Those that
// settled carry a receipt of their amount, settled a minute after they
// were created.
func (h *harness) seed(ps ...past) {
	h.t.Helper()
	now := h.clock.Now()
	err := h.st.Update(context.Background(), func(txn store.Txn) error {
		for _, p := range ps {
			cur := p.currency
			if cur == "" {
				cur = "USD"
			}
			at := now.Add(-p.ago)
			in := &Intent{ID: ids.New(ids.Intent), Status: p.status, Route: RoutePay, AgentKeyID: h.caller.KeyID,
				Agent: h.agent, Payee: p.payee, Amount: Amount{Minor: p.minor, Currency: cur}, MandateID: "mdt-1",
				Refunds: []Refund{}, CreatedAt: at, UpdatedAt: at}
			switch p.status {
			case StatusSettled, StatusPartiallyRefunded, StatusRefunded:
				in.Receipt = &Receipt{IntentID: in.ID, Payee: p.payee, Amount: in.Amount, SettledAt: at.Add(time.Minute)}
			}
			if err := h.svc.indexIntent(txn, in); err != nil {
				return err
			}
			if _, err := writeIntent(txn, in); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// heldContext reads the held list and returns the context of the held
// intent id.
func (h *harness) heldContext(id string) HeldContext {
	h.t.Helper()
	page, err := h.svc.Held(context.Background(), "", 100)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, it := range page.Data {
		if it.IntentID == id {
			return it.Context
		}
	}
	h.t.Fatalf("%s is not in the held list: %+v", id, page)
	return HeldContext{}
}

const seller = "acct:seller.example" // the payee of the harness's instructions

func usd(minor int64) *Amount { return &Amount{Minor: minor, Currency: "USD"} }

// TestHeldContextPayeeAndVelocity: the payee's history and the agent
// key's velocity, from a history written into the store around a fixed
// clock.
func TestHeldContextPayeeAndVelocity(t *testing.T) {
	type window struct{ count, minor int64 }
	for _, tc := range []struct {
		name          string
		history       []past
		firstTime     bool
		settledCount  int
		typical       *Amount
		lastSettled   time.Duration // ago, +1 minute of the seed; 0: none
		hour, day     window
		scanned       int
		wantTruncated bool
	}{
		{name: "no history at all", firstTime: true},
		{
			name: "first time: only other payees were paid",
			history: []past{
				{payee: "acct:other.example", minor: 700, status: StatusSettled, ago: 3 * time.Hour},
				{payee: "acct:other.example", minor: 300, status: StatusSettled, ago: 2 * 24 * time.Hour},
			},
			firstTime: true, day: window{1, 700}, scanned: 2,
		},
		{
			name: "first time: payments to the payee that never settled do not count",
			history: []past{
				{payee: seller, minor: 100, status: StatusFailed, ago: 48 * time.Hour},
				{payee: seller, minor: 100, status: StatusDenied, ago: 48 * time.Hour},
				{payee: seller, minor: 100, status: StatusDeclined, ago: 48 * time.Hour},
				{payee: seller, minor: 100, status: StatusExpired, ago: 48 * time.Hour},
				{payee: seller, minor: 100, status: StatusPendingApproval, ago: 48 * time.Hour},
			},
			firstTime: true, scanned: 5,
		},
		{
			name: "known payee: the median of an odd count",
			history: []past{
				{payee: seller, minor: 100, status: StatusSettled, ago: 72 * time.Hour},
				{payee: seller, minor: 500, status: StatusSettled, ago: 50 * time.Hour},
				{payee: seller, minor: 300, status: StatusSettled, ago: 49 * time.Hour},
			},
			settledCount: 3, typical: usd(300), lastSettled: 49 * time.Hour, scanned: 3,
		},
		{
			name: "known payee: the median of an even count is the lower middle one",
			history: []past{
				{payee: seller, minor: 900, status: StatusSettled, ago: 80 * time.Hour},
				{payee: seller, minor: 100, status: StatusSettled, ago: 70 * time.Hour},
				{payee: seller, minor: 300, status: StatusSettled, ago: 60 * time.Hour},
				{payee: seller, minor: 200, status: StatusSettled, ago: 50 * time.Hour},
			},
			settledCount: 4, typical: usd(200), lastSettled: 50 * time.Hour, scanned: 4,
		},
		{
			name: "refunded payments settled once; another currency counts but is no typical amount",
			history: []past{
				{payee: seller, minor: 400, status: StatusRefunded, ago: 30 * time.Hour},
				{payee: seller, minor: 600, status: StatusPartiallyRefunded, ago: 40 * time.Hour},
				{payee: seller, minor: 9_000, currency: "EUR", status: StatusSettled, ago: 26 * time.Hour},
			},
			settledCount: 3, typical: usd(400), lastSettled: 26 * time.Hour, scanned: 3,
		},
		{
			name: "velocity windows: both ends included, money that did not move left out",
			history: []past{
				{payee: "acct:a.example", minor: 1_000, status: StatusSettled, ago: 30 * time.Minute},
				{payee: "acct:a.example", minor: 2_000, status: StatusSettling, ago: 59 * time.Minute},
				{payee: "acct:a.example", minor: 400, status: StatusAuthorized, ago: time.Hour},
				{payee: "acct:a.example", minor: 3_000, status: StatusSettled, ago: time.Hour + time.Second},
				{payee: "acct:a.example", minor: 500, status: StatusRefunded, ago: 24 * time.Hour},
				{payee: "acct:a.example", minor: 7_000, status: StatusSettled, ago: 24*time.Hour + time.Second},
				{payee: "acct:a.example", minor: 9_999, status: StatusFailed, ago: 10 * time.Minute},
				{payee: "acct:a.example", minor: 9_999, status: StatusPendingApproval, ago: 10 * time.Minute},
				{payee: "acct:a.example", minor: 9_999, status: StatusDenied, ago: 10 * time.Minute},
				{payee: "acct:a.example", minor: 9_999, currency: "EUR", status: StatusSettled, ago: 10 * time.Minute},
			},
			firstTime: true, hour: window{3, 3_400}, day: window{5, 6_900}, scanned: 10,
		},
		{
			name:      "history at the bound exactly: not truncated",
			history:   repeat(HeldHistoryLimit, past{payee: "acct:a.example", minor: 1, status: StatusFailed, ago: 48 * time.Hour}),
			firstTime: true, scanned: HeldHistoryLimit,
		},
		{
			name: "history past the bound: truncated, and the oldest payment to the payee is not seen",
			history: append([]past{{payee: seller, minor: 100, status: StatusSettled, ago: 90 * 24 * time.Hour}},
				repeat(HeldHistoryLimit, past{payee: "acct:a.example", minor: 1, status: StatusFailed, ago: 48 * time.Hour})...),
			firstTime: true, scanned: HeldHistoryLimit, wantTruncated: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			h.seed(tc.history...)
			held := h.hold("held", 20_000)
			c := h.heldContext(held.IntentID)
			p := c.Payee
			if p.FirstTime != tc.firstTime || p.SettledCount != tc.settledCount {
				t.Errorf("payee firstTime %v settledCount %d, want %v %d", p.FirstTime, p.SettledCount, tc.firstTime, tc.settledCount)
			}
			if fmt.Sprint(p.TypicalAmount) != fmt.Sprint(tc.typical) {
				t.Errorf("typicalAmount %v, want %v", p.TypicalAmount, tc.typical)
			}
			var wantLast *time.Time
			if tc.lastSettled != 0 {
				at := h.clock.Now().Add(-tc.lastSettled + time.Minute)
				wantLast = &at
			}
			if fmt.Sprint(p.LastSettledAt) != fmt.Sprint(wantLast) {
				t.Errorf("lastSettledAt %v, want %v", p.LastSettledAt, wantLast)
			}
			for _, w := range []struct {
				name string
				got  HeldWindow
				want window
			}{{"lastHour", c.Velocity.LastHour, tc.hour}, {"lastDay", c.Velocity.LastDay, tc.day}} {
				if w.got.Count != w.want.count || w.got.Amount != (Money{Minor: w.want.minor, Currency: "USD"}) {
					t.Errorf("%s %+v, want count %d amount %d USD", w.name, w.got, w.want.count, w.want.minor)
				}
			}
			if c.History != (HeldHistory{Scanned: tc.scanned, Truncated: tc.wantTruncated}) {
				t.Errorf("history %+v, want scanned %d truncated %v", c.History, tc.scanned, tc.wantTruncated)
			}
		})
	}
}

func repeat(n int, p past) []past {
	out := make([]past, n)
	for i := range out {
		out[i] = p
	}
	return out
}

// TestHeldContextBudget: the mandate's budget from the counter the gate
// reads, with the held payment's own reservation, across windows and
// periods; the per-payment cap; and no budget for a mandate not known.
func TestHeldContextBudget(t *testing.T) {
	// The harness's clock: Monday 2026-11-23 10:00 UTC.
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name    string
		claims  func(*MandateClaims)
		settle  []int64                                    // paid (and settled) before the held payment
		prepare func(t *testing.T, h *harness, held *Held) // after it was held
		later   time.Duration                              // the clock moves on before the list is read
		want    *HeldBudget                                // currency USD
		cap     *Amount
	}{
		{
			name: "a day's budget counts what settled and the held payment's reservation", settle: []int64{3_000, 1_500},
			want: &HeldBudget{Period: gate.Day, Limit: Amount{1_000_000, "USD"}, Used: Money{24_500, "USD"}, IncludesThis: true,
				Remaining: Money{975_500, "USD"}, ResetsAt: day(24)},
			cap: usd(50_000),
		},
		{
			name: "the next day's window holds nothing, the held payment's reservation neither", settle: []int64{3_000},
			later: 15 * time.Hour,
			want: &HeldBudget{Period: gate.Day, Limit: Amount{1_000_000, "USD"}, Used: Money{0, "USD"},
				Remaining: Money{1_000_000, "USD"}, ResetsAt: day(25)},
			cap: usd(50_000),
		},
		{
			name:   "a week's budget resets on Monday",
			claims: func(c *MandateClaims) { c.Period, c.PerTxCapMinor, c.PerPeriodCapMinor = gate.Week, 30_000, 100_000 },
			settle: []int64{5_000},
			want: &HeldBudget{Period: gate.Week, Limit: Amount{100_000, "USD"}, Used: Money{25_000, "USD"}, IncludesThis: true,
				Remaining: Money{75_000, "USD"}, ResetsAt: day(30)},
			cap: usd(30_000),
		},
		{
			name:   "a month's budget",
			claims: func(c *MandateClaims) { c.Period = gate.Month },
			want: &HeldBudget{Period: gate.Month, Limit: Amount{1_000_000, "USD"}, Used: Money{20_000, "USD"}, IncludesThis: true,
				Remaining: Money{980_000, "USD"}, ResetsAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
			cap: usd(50_000),
		},
		{
			name: "remaining is never negative",
			prepare: func(t *testing.T, h *harness, held *Held) {
				// A counter past the cap (another server's reservations
				// under a cap since lowered cannot happen; a hand-edited
				// store can): remaining stops at 0.
				key := keyPeriod + held.MandateID + "/" + strconv.FormatInt(day(23).Unix(), 10)
				if err := h.st.Update(context.Background(), func(txn store.Txn) error { return putInt(txn, []byte(key), 1_200_000) }); err != nil {
					t.Fatal(err)
				}
			},
			want: &HeldBudget{Period: gate.Day, Limit: Amount{1_000_000, "USD"}, Used: Money{1_200_000, "USD"}, IncludesThis: true,
				Remaining: Money{0, "USD"}, ResetsAt: day(24)},
			cap: usd(50_000),
		},
		{
			name: "a mandate not known here has no budget and no cap",
			prepare: func(t *testing.T, h *harness, held *Held) {
				if err := h.st.Update(context.Background(), func(txn store.Txn) error { return txn.Delete([]byte(keyMandate + held.MandateID)) }); err != nil {
					t.Fatal(err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{claims: tc.claims})
			for i, minor := range tc.settle {
				if res, err := h.pay(h.instruction(fmt.Sprintf("s%d", i), minor, nil)); err != nil || res.Outcome != OutcomeSettled {
					t.Fatalf("pay %d: %+v %v", minor, res, err)
				}
			}
			held := h.hold("held", 20_000)
			if tc.prepare != nil {
				tc.prepare(t, h, held)
			}
			h.clock.Add(tc.later)
			c := h.heldContext(held.IntentID)
			if fmt.Sprintf("%+v", c.Budget) != fmt.Sprintf("%+v", tc.want) {
				t.Errorf("budget\n got %+v\nwant %+v", c.Budget, tc.want)
			}
			if fmt.Sprint(c.PerPaymentCap) != fmt.Sprint(tc.cap) {
				t.Errorf("perPaymentCap %v, want %v", c.PerPaymentCap, tc.cap)
			}
		})
	}
}

// TestHeldContextKindCartAndTime: the kind of each held thing, the cart
// an extension keeps through Signed.OnHeld (which runs for a held intent
// only) and reads through Effect.Cart, and the seconds left, which never
// go below zero.
func TestHeldContextKindCartAndTime(t *testing.T) {
	ctx := context.Background()
	const meter Route = "protocol/meter.open"
	const custom Route = "custom/place"
	cart := &HeldCart{Merchant: "sandbox-acp", Total: Money{20_000, "USD"}, Lines: []HeldCartLine{
		{SKU: "sku-mug", Title: "Mug", Quantity: 2, UnitPrice: Money{5_000, "USD"}, Total: Money{10_000, "USD"}},
		{SKU: "sku-tee", Title: "Tee", Quantity: 1, UnitPrice: Money{10_000, "USD"}, Total: Money{10_000, "USD"}},
	}}
	for _, tc := range []struct {
		name      string
		route     Route
		hold      bool
		minor     int64
		later     time.Duration
		wantKind  string
		wantCart  *HeldCart
		wantLeft  int64
		wantEnded bool // the decision did not hold it
	}{
		{name: "a payment", route: RoutePay, minor: 20_000, wantKind: KindPayment, wantLeft: 24 * 3600},
		{name: "a purchase keeps and shows its cart", route: RouteBuy, minor: 20_000, wantKind: KindPurchase, wantCart: cart, wantLeft: 24 * 3600},
		{name: "a purchase that is not held keeps nothing", route: RouteBuy, minor: 2_000, wantEnded: true},
		{name: "a route's own kind", route: meter, hold: true, minor: 20_000, wantKind: "meter", wantLeft: 24 * 3600},
		{name: "a hold of a route without a kind", route: custom, hold: true, minor: 20_000, wantKind: KindHold, wantLeft: 24 * 3600},
		{name: "seconds left are whole seconds", route: RoutePay, minor: 20_000, later: time.Hour + 1500*time.Millisecond, wantKind: KindPayment, wantLeft: 23*3600 - 2},
		{name: "past the window, before the sweep: zero", route: RoutePay, minor: 20_000, later: 25 * time.Hour, wantKind: KindPayment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			keyOf := func(in *Intent) []byte { return []byte("test/cart/" + in.ID) }
			watchEffect(h.svc, meter, Effect{Kind: "meter"})
			watchEffect(h.svc, RouteBuy, Effect{Kind: KindPurchase, Cart: func(r store.Reader, in *Intent) (*HeldCart, error) {
				if _, err := r.Get(keyOf(in)); err != nil {
					return nil, err
				}
				return cart, nil
			}})
			sg := Signed{OnHeld: func(txn store.Txn, in *Intent) error {
				if in.Status != StatusPendingApproval {
					t.Errorf("OnHeld of an intent %s", in.Status)
				}
				return txn.Set(keyOf(in), []byte("kept"))
			}}
			if tc.hold {
				sg.Hold = &HoldOptions{TTL: time.Hour}
			}
			res, err := h.svc.authorizeSigned(ctx, tc.route, h.caller, h.instruction("k", tc.minor, nil), sg, "", "req_k")
			if err != nil {
				t.Fatal(err)
			}
			kept := h.st.View(ctx, func(r store.Reader) error {
				_, err := r.Get(keyOf(&Intent{ID: res.IntentID}))
				return err
			}) == nil
			if kept == tc.wantEnded {
				t.Errorf("OnHeld ran: %v; the intent was held: %v", kept, !tc.wantEnded)
			}
			if tc.wantEnded {
				if res.Outcome == OutcomeHeld {
					t.Fatalf("held: %+v", res)
				}
				return
			}
			if res.Outcome != OutcomeHeld {
				t.Fatalf("not held: %+v", res)
			}
			h.clock.Add(tc.later)
			c := h.heldContext(res.IntentID)
			if c.Kind != tc.wantKind || c.SecondsLeft != tc.wantLeft {
				t.Errorf("kind %q secondsLeft %d, want %q %d", c.Kind, c.SecondsLeft, tc.wantKind, tc.wantLeft)
			}
			if fmt.Sprintf("%+v", c.Cart) != fmt.Sprintf("%+v", tc.wantCart) {
				t.Errorf("cart %+v, want %+v", c.Cart, tc.wantCart)
			}
		})
	}
}

// TestHeldContextReadsBoundedHistory: one page holds several payments of
// one agent key; its history is read once for all of them, and each
// leaves itself out of its own figures.
func TestHeldContextReadsBoundedHistory(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	h.seed(past{payee: seller, minor: 700, status: StatusSettled, ago: 48 * time.Hour})
	a, b := h.hold("a", 20_000), h.hold("b", 30_000)
	page, err := h.svc.Held(context.Background(), "", 10)
	if err != nil || len(page.Data) != 2 {
		t.Fatalf("held: %+v %v", page, err)
	}
	for i, want := range []string{a.IntentID, b.IntentID} {
		c := page.Data[i].Context
		if page.Data[i].IntentID != want || c.History.Scanned != 2 || c.Payee.SettledCount != 1 || *c.Payee.TypicalAmount != (Amount{700, "USD"}) {
			t.Errorf("item %d: %s %+v", i, page.Data[i].IntentID, c)
		}
	}
}
