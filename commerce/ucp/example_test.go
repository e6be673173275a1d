package ucp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
)

// A client discovers a merchant, negotiates the protocol version, prices a
// cart and buys it.
func Example() {
	ctx := context.Background()
	srv := httptest.NewUnstartedServer(nil)
	merchant := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String()})
	srv.Config.Handler = merchant.UCPHandler()
	srv.Start()
	defer srv.Close()

	c, err := ucp.New(ctx, ucp.Options{
		ProfileURL: srv.URL + "/.well-known/ucp",
		MerchantID: "m_mugs",
		HTTPClient: srv.Client(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("speaking", c.Protocol(), c.Version())

	k, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 2}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(k.Status, k.Totals.Total, k.Currency)

	o, err := c.Complete(ctx, k.ID, cart.Payment{Amount: k.Totals.Total, Currency: k.Currency, IdempotencyKey: "intent-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("order placed:", o.ID != "", o.Total)
	// Output:
	// speaking ucp 2026-04-08
	// ready 3098 USD
	// order placed: true 3098
}

// Negotiate picks the newest version both sides speak.
func ExampleNegotiate() {
	v, err := ucp.Negotiate([]string{"2026-01-11", "2026-04-08"}, []string{"2026-01-11"})
	fmt.Println(v, err)
	_, err = ucp.Negotiate([]string{"2027-01-01"}, ucp.Versions())
	fmt.Println(errors.Is(err, ucp.ErrNoCommonVersion))
	// Output:
	// 2026-01-11 <nil>
	// true
}
