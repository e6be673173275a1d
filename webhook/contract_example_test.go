package webhook_test

import (
	"fmt"

	"github.com/countersign/countersign/webhook"
)

// The package's declarations for the contract model; package product
// assembles them with the other packages'.
func ExampleContract() {
	part := webhook.Contract()
	for _, op := range part.Operations {
		fmt.Println(op.ID, op.Method, op.Path, op.Credential)
	}
	for _, pt := range part.Problems {
		fmt.Println(pt.Code, pt.Status, pt.Action)
	}
	fmt.Println(len(part.Events), "event kinds")
	// Output:
	// webhooks.create POST /webhooks/endpoints operator
	// webhooks.list GET /webhooks/endpoints operator
	// webhooks.get GET /webhooks/endpoints/{id} operator
	// webhooks.update PATCH /webhooks/endpoints/{id} operator
	// webhooks.delete DELETE /webhooks/endpoints/{id} operator
	// webhooks.deliveries GET /webhooks/endpoints/{id}/deliveries operator
	// webhooks.retry POST /webhooks/endpoints/{id}/deliveries/{eventId}/retry operator
	// webhook.invalid_url 400 fix-request
	// webhook.invalid_events 400 fix-request
	// webhook.not_found 404 fix-request
	// webhook.bad_cursor 400 fix-request
	// webhook.too_many_endpoints 409 stop
	// webhook.delivery_not_found 404 fix-request
	// webhook.endpoint_inactive 409 fix-request
	// webhook.bad_limit 400 fix-request
	// 12 event kinds
}
