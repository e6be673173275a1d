package acp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
)

// A quote and a purchase at the fake merchant, over HTTP.
func ExampleClient() {
	ctx := context.Background()
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	defer srv.Close()
	h = fakemerchant.New(&fakemerchant.Options{BaseURL: srv.URL, APIKey: "sk_test"}).ACPHandler()

	c, err := acp.New(acp.Options{BaseURL: srv.URL, APIKey: "sk_test", MerchantID: "mugs", HTTPClient: srv.Client()})
	if err != nil {
		panic(err)
	}
	quote, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 2}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(quote.Status, quote.RawStatus, quote.Totals.Total, quote.Currency)

	order, err := c.Complete(ctx, quote.ID, cart.Payment{Amount: quote.Totals.Total, Currency: quote.Currency, IdempotencyKey: "intent-1"})
	if err != nil {
		panic(err)
	}
	fmt.Println(order.Status, order.Total, order.CartID == quote.ID)

	// An item that is out of stock: the cart is not ready, and completing
	// it is refused.
	sold, _ := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-soldout", Quantity: 1}}})
	fmt.Println(sold.Status, sold.Messages[0].Code)
	_, err = c.Complete(ctx, sold.ID, cart.Payment{Amount: sold.Totals.Total, Currency: "USD", IdempotencyKey: "intent-2"})
	fmt.Println(errors.Is(err, cart.ErrNotReady))
	// Output:
	// ready ready_for_payment 3098 USD
	// confirmed 3098 true
	// incomplete out_of_stock
	// true
}
