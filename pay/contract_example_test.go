package pay_test

import (
	"fmt"

	"github.com/countersign/countersign/pay"
)

// The package's declarations for the contract model; package product
// assembles them with the other packages'.
func ExampleContract() {
	part := pay.Contract()
	for _, op := range part.Operations {
		fmt.Println(op.ID, op.Method, op.Path, op.Credential)
	}
	for _, pt := range part.Problems {
		fmt.Println(pt.Code, pt.Status, pt.Action)
	}
	fmt.Println(len(part.Events), "event kinds")
	// Output:
	// pay.create POST /pay agent
	// intents.get GET /intents/{id} agent-or-operator
	// intents.events GET /intents/{id}/events agent-or-operator
	// operator.approve POST /operator/approve operator
	// operator.decline POST /operator/decline operator
	// operator.refund POST /operator/refund operator
	// operator.kill_switch POST /operator/kill-switch operator
	// operator.breaker_reset POST /operator/circuit-breaker/reset operator
	// operator.approvals GET /operator/approvals operator
	// operator.settling GET /operator/settling operator
	// intent.malformed 400 fix-request
	// intent.unauthorized 403 stop
	// intent.denied 403 stop
	// settlement.frozen 503 await-operator
	// rail.unavailable 503 retry-as-is
	// idempotency.conflict 422 fix-request
	// idempotency.in_flight 409 retry-as-is
	// idempotency.key_mismatch 400 fix-request
	// payment.declined 402 stop
	// approval.expired 409 stop
	// approval.mismatch 409 fix-request
	// approval.not_pending 409 stop
	// refund.exceeds 422 fix-request
	// breaker.not_tripped 409 stop
	// intent.not_found 404 fix-request
	// refund.refused 409 stop
	// 0 event kinds
}
