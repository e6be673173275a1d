package commerce

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// engineMerchant is a cart.Merchant straight over the fake merchant's
// engine, without HTTP: the service's logic is tested here; the protocol
// clients are tested against the same engine over the wire in their
// packages.
type engineMerchant struct {
	m        *fakemerchant.Merchant
	protocol string

	mu      sync.Mutex
	unknown bool        // the next completion's outcome is lost (timeout)
	status  cart.Status // when set, every session reads so
}

func (e *engineMerchant) Protocol() string { return e.protocol }
func (e *engineMerchant) Version() string  { return "test" }

func (e *engineMerchant) view(s fakemerchant.Session) cart.Cart {
	lines, ful, totals := e.m.Price(s)
	st := e.m.Status(s)
	e.mu.Lock()
	if e.status != "" {
		st = e.status
	}
	e.mu.Unlock()
	c := cart.Cart{ID: s.ID, Rail: e.protocol, Version: "test", Status: st, RawStatus: string(st), Currency: s.Currency,
		Lines: lines, Totals: totals, Fulfillment: ful, Messages: []cart.Message{}}
	if st == cart.StatusEscalation || st == cart.StatusAuth {
		c.ContinueURL = e.m.ContinueURL(s)
	}
	return c
}

func (e *engineMerchant) Create(_ context.Context, req cart.CreateRequest) (cart.Cart, error) {
	s, err := e.m.Create(e.protocol, "test", req.Currency, req.Lines, "")
	if err != nil {
		return cart.Cart{}, errors.Join(cart.ErrRejected, err)
	}
	return e.view(s), nil
}

func (e *engineMerchant) Get(_ context.Context, id string) (cart.Cart, error) {
	s, err := e.m.Read(id)
	if err != nil {
		return cart.Cart{}, errors.Join(cart.ErrNotFound, err)
	}
	return e.view(s), nil
}

func (e *engineMerchant) Complete(_ context.Context, id string, p cart.Payment) (cart.Order, error) {
	o, hang, err := e.m.Complete(id, "", p.IdempotencyKey, false)
	e.mu.Lock()
	lost := e.unknown
	e.unknown = false
	e.mu.Unlock()
	switch {
	case fakemerchant.IsServerFault(err):
		return cart.Order{}, errors.Join(cart.ErrUnknownOutcome, err)
	case errors.Is(err, fakemerchant.ErrDeclined):
		return cart.Order{}, errors.Join(cart.ErrDeclined, err)
	case errors.Is(err, fakemerchant.ErrNotReady):
		return cart.Order{}, errors.Join(cart.ErrNotReady, err)
	case err != nil:
		return cart.Order{}, errors.Join(cart.ErrRejected, err)
	case hang || lost:
		return cart.Order{}, cart.ErrUnknownOutcome
	}
	return o, nil
}

func (e *engineMerchant) Cancel(_ context.Context, id string) (cart.Cart, error) {
	s, err := e.m.Cancel(id)
	if err != nil {
		return cart.Cart{}, errors.Join(cart.ErrRejected, err)
	}
	return e.view(s), nil
}

// fixture is a money path with the commerce rails and one merchant.
type fixture struct {
	t        testing.TB
	st       store.Store
	log      *audit.Log
	svc      *Service
	pay      *pay.Service
	merchant *engineMerchant
	agentKey ed25519.PrivateKey
	caller   pay.Caller
	mandate  string
	clock    time.Time
	mu       sync.Mutex
}

func (f *fixture) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.clock }

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, st: memstore.New(&memstore.Options{RetryRate: 0.05}), clock: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	quiet := slog.New(slog.DiscardHandler)
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	var err error
	if f.log, err = audit.Open(t.Context(), f.st, recKey, &audit.Options{Now: f.now, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	f.merchant = &engineMerchant{m: fakemerchant.New(&fakemerchant.Options{Now: f.now}), protocol: "acp"}
	if f.svc, err = New(Options{Store: f.st, Log: f.log, Now: f.now, Logger: quiet,
		Merchants: []MerchantConfig{{ID: "shop", Merchant: f.merchant}}}); err != nil {
		t.Fatal(err)
	}
	reg := &settle.Registry{}
	card, err := fake.New(fake.SandboxCard, &fake.Options{Store: f.st, Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(card); err != nil {
		t.Fatal(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(rand.Reader)
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opPub}}, &pay.MandateVerifierOptions{Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if f.pay, err = pay.New(pay.Options{Store: f.st, Log: f.log, Rails: reg, Mandates: mv, Now: f.now, Logger: quiet,
		Extensions: []pay.Extension{f.svc}}); err != nil {
		t.Fatal(err)
	}
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	f.agentKey = agentKey
	agent := hex.EncodeToString(pub)
	f.caller = pay.Caller{KeyID: "ak_1", Agents: []string{agent}, Credential: gate.CredentialAPIKey}
	f.mandate, err = pay.SignMandate(pay.MandateClaims{ID: "mdt-buy", Agent: agent,
		IssuedAt: f.now().Add(-time.Hour), ExpiresAt: f.now().Add(24 * time.Hour),
		Payees: []string{"merchant:shop", "merchant:zero", "merchant:ucpshop", "acct:bench.example"}, Currency: "USD", PerTxCapMinor: 500_000,
		PerPeriodCapMinor: gate.MaxMinor, Period: gate.Day, Rails: []string{"acp", "ucp", fake.SandboxCard}, ConfirmAboveMinor: 100_000, IrreversibleConfirmAboveMinor: 100_000,
	}, opKey, "op")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) purchase(key string, lines ...cart.LineRequest) PurchaseRequest {
	f.t.Helper()
	p := PurchaseRequest{
		QuoteRequest:   QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD", Lines: lines},
		IdempotencyKey: key, Purpose: "office supplies",
		Terms: pay.Terms{Rail: "acp", Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: f.mandate},
	}
	if err := SignPurchase(&p, f.agentKey); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) buy(p PurchaseRequest) (*BuyResult, error) {
	return f.svc.Buy(f.t.Context(), f.caller, p, "", "req_1")
}

func (f *fixture) types() []string {
	var out []string
	for e, err := range f.log.Entries(f.t.Context(), 1, 0) {
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e.Type)
	}
	return out
}

func line(sku string, n int64) cart.LineRequest { return cart.LineRequest{ID: sku, Quantity: n} }

func TestQuoteMovesNoMoney(t *testing.T) {
	f := newFixture(t)
	q, err := f.svc.Quote(t.Context(), f.caller, QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-mug", 2)}}, "req")
	if err != nil {
		t.Fatal(err)
	}
	// 2 × 1,200 + 8.25 % tax (198) + 500 shipping.
	if q.Totals != (cart.Totals{Subtotal: 2400, Tax: 198, Shipping: 500, Total: 3098}) || q.Merchant != "shop" || !q.Ready() {
		t.Fatalf("quote %+v", q.Cart)
	}
	if got := f.types(); !slices.Equal(got, []string{EntryQuote}) || q.AuditSeq != 1 {
		t.Fatalf("record %v, seq %d", got, q.AuditSeq)
	}
	for _, tc := range []struct {
		q    QuoteRequest
		want error
	}{
		{QuoteRequest{Rail: "acp", Merchant: "nope", Currency: "USD", Lines: []cart.LineRequest{line("sku-mug", 1)}}, ErrMerchantNotFound},
		{QuoteRequest{Rail: "ucp", Merchant: "shop", Currency: "USD", Lines: []cart.LineRequest{line("sku-mug", 1)}}, ErrRailMismatch},
		{QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD", Lines: []cart.LineRequest{line("sku-unknown", 1)}}, ErrMerchantRejected},
	} {
		if _, err := f.svc.Quote(t.Context(), f.caller, tc.q, ""); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.q, err, tc.want)
		}
	}
}

func TestBuySettlesThroughTheGate(t *testing.T) {
	f := newFixture(t)
	res, err := f.buy(f.purchase("b-1", line("sku-mug", 2)))
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != pay.OutcomeSettled || res.Order == nil || res.Order.Total.Minor != 3098 ||
		res.Order.Receipt.Payee != "merchant:shop" || res.Order.Receipt.Amount.Minor != 3098 || res.Order.Receipt.Rail != "acp" {
		t.Fatalf("result %+v order %+v", res.Result, res.Order)
	}
	want := []string{"gate.decision", EntryCompleted, "payment.settled"}
	if got := f.types(); !slices.Equal(got, want) {
		t.Fatalf("record %v, want %v", got, want)
	}
	// The cart as read is in the decision's entry.
	var dec struct {
		Metadata map[string]string `json:"metadata"`
	}
	for e, err := range f.log.Entries(t.Context(), 1, 1) {
		if err != nil || json.Unmarshal(e.Data, &dec) != nil {
			t.Fatal(err)
		}
	}
	if dec.Metadata["merchant"] != "shop" || dec.Metadata["cartDigest"] == "" || dec.Metadata["merchantStatus"] != "ready" {
		t.Errorf("decision metadata %v", dec.Metadata)
	}
	// A replay answers the same order and buys nothing more.
	again, err := f.buy(f.purchase("b-1", line("sku-mug", 2)))
	if err != nil || !again.Replayed || again.IntentID != res.IntentID {
		t.Fatalf("replay %v %+v", err, again)
	}
	// The same key on /pay is another namespace; a different purchase
	// under the key is a conflict.
	if _, err := f.buy(f.purchase("b-1", line("sku-book", 1))); !errors.Is(err, pay.ErrIdempotencyConflict) {
		t.Errorf("another purchase under the key: %v", err)
	}
}

func TestBuyRefusals(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		lines  []cart.LineRequest
		status cart.Status
		link   bool
	}{
		{"out of stock", []cart.LineRequest{line("sku-soldout", 1)}, cart.StatusIncomplete, false},
		{"escalation", []cart.LineRequest{line("sku-age", 1)}, cart.StatusEscalation, true},
		{"authentication", []cart.LineRequest{line("sku-3ds", 1)}, cart.StatusAuth, true},
	} {
		_, err := f.buy(f.purchase("nr-"+tc.name, tc.lines...))
		var nr *NotReadyError
		if !errors.As(err, &nr) || nr.Cart.Status != tc.status || (nr.Cart.ContinueURL != "") != tc.link || nr.Code() != pay.CodeMalformed {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	for _, ty := range f.types() {
		if ty != EntryCartRead {
			t.Fatalf("a cart that is not ready reached the gate: %v", f.types())
		}
	}
	// Declined by the merchant: the intent fails, no money moved.
	res, err := f.buy(f.purchase("declined", line("sku-declined", 1)))
	if err != nil || res.Outcome != pay.OutcomeFailed || res.Failure.DeclineCode != "payment_declined" {
		t.Fatalf("declined: %v %+v", err, res)
	}
	// The mandate's caps apply to the cart's total: 4 laptops is 600,000+.
	res, err = f.buy(f.purchase("too-much", line("sku-laptop", 4)))
	if err != nil || res.Outcome != pay.OutcomeDenied || res.Denial.Reasons[0].Code != gate.CodePerTxCap {
		t.Fatalf("over the cap: %v %+v", err, res)
	}
	// A tampered purchase is not the agent's.
	p := f.purchase("tampered", line("sku-mug", 1))
	p.Lines[0].Quantity = 50
	if _, err := f.buy(p); !errors.Is(err, pay.ErrUnauthorized) {
		t.Errorf("tampered purchase: %v", err)
	}
}

func TestHeldPurchaseCompletesOnApproval(t *testing.T) {
	f := newFixture(t)
	res, err := f.buy(f.purchase("big", line("sku-laptop", 1)))
	if err != nil || res.Outcome != pay.OutcomeHeld {
		t.Fatalf("%v %+v", err, res)
	}
	call := pay.OperatorCall{Operator: "op", Rationale: "laptop for the new hire"}
	ok, err := f.pay.Approve(t.Context(), pay.ApproveRequest{IntentID: res.IntentID, Challenge: res.Held.Challenge,
		MandateID: "mdt-buy", Rationale: call.Rationale, Acknowledged: true}, call)
	if err != nil || ok.Outcome != pay.OutcomeSettled {
		t.Fatalf("approve: %v %+v", err, ok)
	}
	if o, err := f.svc.OrderOf(t.Context(), res.IntentID); err != nil || o.Total.Minor != ok.Receipt.Amount.Minor {
		t.Fatalf("order %+v %v", o, err)
	}
}

func TestHeldPurchaseWhoseTotalGrewIsDeclined(t *testing.T) {
	f := newFixture(t)
	res, err := f.buy(f.purchase("grows", line("sku-laptop", 1)))
	if err != nil || res.Outcome != pay.OutcomeHeld {
		t.Fatalf("%v %+v", err, res)
	}
	in, err := f.pay.Intent(t.Context(), f.caller, res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	// While it waits for a person, the cart changes at the merchant: the
	// total grows beyond what the gate authorised.
	if _, err := f.merchant.m.Update(in.Metadata["cart"], func(s *fakemerchant.Session) error {
		s.Fulfillment = "express"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	call := pay.OperatorCall{Operator: "op", Rationale: "laptop for the new hire"}
	out, err := f.pay.Approve(t.Context(), pay.ApproveRequest{IntentID: res.IntentID, Challenge: res.Held.Challenge,
		MandateID: "mdt-buy", Rationale: call.Rationale, Acknowledged: true}, call)
	if err != nil || out.Outcome != pay.OutcomeFailed || out.Failure.DeclineCode != "cart_total_changed" {
		t.Fatalf("approve after the total grew: %v %+v", err, out)
	}
	for _, ty := range f.types() {
		if ty == EntryCompleted {
			t.Fatal("an order was placed for a total nobody authorised")
		}
	}
}

// TestBuyAuthorisesTheTotalAsReread: between quote and buy the merchant
// repriced; the gate decides on the re-read total, which the agent never
// signed (it signed what to buy).
func TestBuyAuthorisesTheTotalAsReread(t *testing.T) {
	f := newFixture(t)
	q, err := f.svc.Quote(t.Context(), f.caller, QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-surge", 2)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	p := f.purchase("surge", line("sku-surge", 2))
	p.CartID = q.ID
	if err := SignPurchase(&p, f.agentKey); err != nil {
		t.Fatal(err)
	}
	res, err := f.buy(p)
	if err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatalf("%v %+v", err, res)
	}
	if want := q.Totals.Total + 2*fakemerchant.PriceIncrease; res.Order.Total.Minor != want || res.Order.CartID != q.ID {
		t.Errorf("order total %d, want the re-read %d", res.Order.Total.Minor, want)
	}
	// The cart is completed now; the same purchase again replays its order.
	again, err := f.buy(p)
	if err != nil || !again.Replayed || again.Order == nil || again.Order.ID != res.Order.ID {
		t.Fatalf("replay of a purchase of a quoted cart: %v %+v", err, again)
	}
	// Another purchase of the completed cart moves no money.
	other := f.purchase("surge-2", line("sku-surge", 2))
	other.CartID = q.ID
	if err := SignPurchase(&other, f.agentKey); err != nil {
		t.Fatal(err)
	}
	if res, err := f.buy(other); err != nil || res.Outcome != pay.OutcomeFailed || res.Failure.DeclineCode != "cart_completed" {
		t.Fatalf("a second purchase of a completed cart: %v %+v", err, res)
	}
}

func TestUnknownCompletionIsResolvedFromTheMerchant(t *testing.T) {
	f := newFixture(t)
	// complete_5xx: nothing completed; the intent stays settling until the
	// merchant's state (an open session) proves no order exists.
	if _, err := f.buy(f.purchase("fails", line("sku-5xx", 1))); !errors.Is(err, pay.ErrRailUnavailable) {
		t.Fatalf("5xx on complete: %v", err)
	}
	// The order happened but the answer was lost.
	f.merchant.mu.Lock()
	f.merchant.unknown = true
	f.merchant.mu.Unlock()
	_, err := f.buy(f.purchase("lost", line("sku-book", 1)))
	if !errors.Is(err, pay.ErrRailUnavailable) {
		t.Fatalf("lost answer: %v", err)
	}
	// Until then the operator sees both, with the merchant and the cart.
	page, err := f.pay.Settling(t.Context(), "", 10)
	if err != nil || len(page.Data) != 2 || page.Data[0].Metadata["merchant"] != "shop" || page.Data[1].Metadata["cart"] == "" {
		t.Fatalf("settling %+v %v", page, err)
	}
	rep, err := f.pay.Reconcile(t.Context())
	if err != nil || rep.Settled != 1 || rep.Failed != 1 {
		t.Fatalf("reconcile %+v %v", rep, err)
	}
	if page, _ := f.pay.Settling(t.Context(), "", 10); len(page.Data) != 0 {
		t.Errorf("still settling after reconcile: %+v", page.Data)
	}
	// The failed one's session was closed before the purchase was declared
	// failed: a completion still on its way (sent before a crash, with a
	// credential still valid) can no longer place an order.
	failedCart := page.Data[0].Metadata["cart"]
	if page.Data[0].IdempotencyKey != "fails" {
		failedCart = page.Data[1].Metadata["cart"]
	}
	if _, _, err := f.merchant.m.Complete(failedCart, "", "late", false); !errors.Is(err, fakemerchant.ErrClosed) {
		t.Errorf("a late completion of the declined purchase: %v", err)
	}
	// The lost one is settled with its order, once; a retry replays it.
	res, err := f.buy(f.purchase("lost", line("sku-book", 1)))
	if err != nil || res.Outcome != pay.OutcomeSettled || res.Order == nil {
		t.Fatalf("after reconcile: %v %+v", err, res)
	}
	n := 0
	for _, ty := range f.types() {
		if ty == EntryCompleted {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d orders recorded, want 1", n)
	}
}

// TestSettleJoinsACompletionUnderTheSameKey: Settle may run again under
// the same key (the same purchase sent to two servers at once: the second
// joins the settlement through the rail). Finding the session completed
// by the first, before the first recorded its order, it answers that
// order, not a decline; a completion under way is an unknown outcome,
// never a decline; and another purchase of the completed session is
// still declined.
func TestSettleJoinsACompletionUnderTheSameKey(t *testing.T) {
	f := newFixture(t)
	res, err := f.buy(f.purchase("first", line("sku-book", 1)))
	if err != nil || res.Outcome != pay.OutcomeSettled || res.Order == nil {
		t.Fatalf("%v %+v", err, res)
	}
	in, err := f.pay.Intent(t.Context(), f.caller, res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	// The joining server has not seen the order recorded yet.
	if err := f.st.Update(t.Context(), func(txn store.Txn) error { return txn.Delete([]byte(keyOrder + res.IntentID)) }); err != nil {
		t.Fatal(err)
	}
	r := &rail{s: f.svc, name: "acp"}
	req := settle.SettleRequest{Key: res.IntentID, Amount: in.Amount.Minor, Currency: in.Amount.Currency, Payee: in.Payee, Metadata: in.Metadata}
	s, err := r.Settle(t.Context(), req)
	if err != nil || s.Status != settle.StatusSettled {
		t.Fatalf("joining a completed purchase: %+v, %v; want settled", s, err)
	}
	if o, err := f.svc.OrderOf(t.Context(), res.IntentID); err != nil || o.ID != res.Order.ID {
		t.Errorf("order after the join: %+v, %v; want %s", o, err, res.Order.ID)
	}
	// Another purchase of the same session moves no money.
	other := req
	other.Key = "int_other"
	if s, err := r.Settle(t.Context(), other); s.Status != settle.StatusDeclined || s.DeclineCode != "cart_completed" {
		t.Errorf("another purchase of the completed session: %+v, %v; want declined cart_completed", s, err)
	}

	// A session whose completion is under way: unknown, not declined.
	q, err := f.svc.Quote(t.Context(), f.caller, QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD",
		Lines: []cart.LineRequest{line("sku-book", 1)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	f.merchant.mu.Lock()
	f.merchant.status = cart.StatusInProgress
	f.merchant.mu.Unlock()
	busy := req
	busy.Key, busy.Metadata = "int_busy", map[string]string{"merchant": "shop", "cart": q.ID, "rail": "acp"}
	busy.Amount = q.Totals.Total
	if s, err := r.Settle(t.Context(), busy); err == nil || s.Status == settle.StatusDeclined || !errors.Is(err, cart.ErrUnknownOutcome) {
		t.Errorf("a session being completed: %+v, %v; want an unknown outcome", s, err)
	}
}

// TestHeldPurchaseShowsItsCart: the operator's held list shows a held
// purchase's cart as the merchant priced it when the agent bought (kept
// in the deciding transaction); a purchase that is not held keeps none.
func TestHeldPurchaseShowsItsCart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []cart.LineRequest
		held  bool
	}{
		{"held: a laptop and two mugs", []cart.LineRequest{line("sku-laptop", 1), line("sku-mug", 2)}, true},
		{"held: one line", []cart.LineRequest{line("sku-laptop", 1)}, true},
		{"settled at once: nothing kept", []cart.LineRequest{line("sku-mug", 2)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			q, err := f.svc.Quote(t.Context(), f.caller, QuoteRequest{Rail: "acp", Merchant: "shop", Currency: "USD", Lines: tc.lines}, "req")
			if err != nil {
				t.Fatal(err)
			}
			res, err := f.buy(f.purchase("cart", tc.lines...))
			if err != nil || (res.Outcome == pay.OutcomeHeld) != tc.held {
				t.Fatalf("buy: %v %+v", err, res)
			}
			var kept error
			_ = f.st.View(t.Context(), func(r store.Reader) error { _, kept = r.Get([]byte(keyHeldCart + res.IntentID)); return nil })
			if !tc.held {
				if !errors.Is(kept, store.ErrNotFound) {
					t.Fatalf("a settled purchase kept a cart: %v", kept)
				}
				return
			}
			page, err := f.pay.Held(t.Context(), "", 10)
			if err != nil || len(page.Data) != 1 {
				t.Fatalf("held list: %+v %v", page, err)
			}
			c := page.Data[0].Context
			if c.Kind != pay.KindPurchase || c.Cart == nil {
				t.Fatalf("kind %q cart %+v", c.Kind, c.Cart)
			}
			want := &pay.HeldCart{Merchant: "shop", Total: pay.Money{Minor: q.Totals.Total, Currency: "USD"}}
			for _, l := range q.Lines {
				want.Lines = append(want.Lines, pay.HeldCartLine{SKU: l.ItemID, Title: l.Title, Quantity: l.Quantity,
					UnitPrice: pay.Money{Minor: l.Unit, Currency: "USD"}, Total: pay.Money{Minor: l.Total, Currency: "USD"}})
			}
			if !reflect.DeepEqual(c.Cart, want) {
				t.Errorf("cart\n got %+v\nwant %+v", c.Cart, want)
			}
			if l := c.Cart.Lines[0]; l.SKU != "sku-laptop" || l.Title != "Laptop" || l.Quantity != 1 || l.UnitPrice.Minor != 150_000 ||
				c.Cart.Total.Minor != page.Data[0].Amount.Minor {
				t.Errorf("first line %+v, total %+v, held amount %+v", l, c.Cart.Total, page.Data[0].Amount)
			}
		})
	}
}
