package commerce

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// zeroMerchant answers at once with a ready cart and completes at once: a
// merchant that costs nothing, so the benchmarks below measure /buy's own
// work beyond the merchant's calls.
type zeroMerchant struct{ n atomic.Int64 }

func (z *zeroMerchant) Protocol() string { return "acp" }
func (z *zeroMerchant) Version() string  { return "bench" }
func (z *zeroMerchant) ready(id string) cart.Cart {
	return cart.Cart{ID: id, Rail: "acp", Version: "bench", Status: cart.StatusReady, RawStatus: "ready_for_payment",
		Currency: "USD", Lines: []cart.Line{{ID: "li_1", ItemID: "sku-mug", Quantity: 1, Unit: 1000, Subtotal: 1000, Total: 1000}},
		Totals: cart.Totals{Subtotal: 1000, Total: 1000}, Fulfillment: []cart.Fulfillment{}, Messages: []cart.Message{}}
}
func (z *zeroMerchant) Create(context.Context, cart.CreateRequest) (cart.Cart, error) {
	return z.ready(fmt.Sprintf("cs_%d", z.n.Add(1))), nil
}
func (z *zeroMerchant) Get(_ context.Context, id string) (cart.Cart, error) { return z.ready(id), nil }
func (z *zeroMerchant) Complete(_ context.Context, id string, p cart.Payment) (cart.Order, error) {
	return cart.Order{ID: "ord_" + id, CartID: id, Status: "confirmed", Total: p.Amount, Currency: p.Currency}, nil
}
func (z *zeroMerchant) Cancel(_ context.Context, id string) (cart.Cart, error) {
	return z.ready(id), nil
}

// BenchmarkBuyOverhead runs purchases against a merchant that costs
// nothing; compare with BenchmarkPayBaseline (the same money path, the
// same store, a payment on the fake card rail).
func BenchmarkBuyOverhead(b *testing.B) {
	f := newFixture(b)
	z := &zeroMerchant{}
	if err := f.svc.Register(MerchantConfig{ID: "zero", Merchant: z}); err != nil {
		b.Fatal(err)
	}
	ps := make([]PurchaseRequest, b.N)
	for i := range ps {
		ps[i] = f.purchase(fmt.Sprintf("bench-%d", i), line("sku-mug", 1))
		ps[i].Merchant = "zero"
		if err := SignPurchase(&ps[i], f.agentKey); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range ps {
		res, err := f.svc.Buy(context.Background(), f.caller, ps[i], "", "req")
		if err != nil || res.Outcome != pay.OutcomeSettled {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// BenchmarkPayBaseline is /pay on the same fixture: a payment of the same
// amount on a zero-latency fake card rail.
func BenchmarkPayBaseline(b *testing.B) {
	f := newFixture(b)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		in := &pay.Instruction{IdempotencyKey: fmt.Sprintf("pay-%d", i), Payee: "acct:bench.example",
			Amount: pay.Amount{Minor: 1000, Currency: "USD"}, Purpose: "bench",
			Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Mandate: f.mandate}}
		if err := pay.SignInstruction(in, f.agentKey); err != nil {
			b.Fatal(err)
		}
		var err error
		if bodies[i], err = json.Marshal(in); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range bodies {
		res, err := f.pay.Pay(context.Background(), f.caller, bodies[i], "", "req")
		if err != nil || res.Outcome != pay.OutcomeSettled {
			b.Fatalf("%v %+v", err, res)
		}
	}
}
