package product_test

import (
	"fmt"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
)

// The definition is assembled part by part, each declared by the package
// whose behaviour it describes.
func ExampleDefinition() {
	def := product.Definition()
	fmt.Println(def.Title, def.Version)
	for _, p := range def.Parts {
		fmt.Printf("%-8s %2d operations %2d problem types %d event kinds\n", p.Name, len(p.Operations), len(p.Problems), len(p.Events))
	}
	// Output:
	// Countersign 0.1.0
	// contract  0 operations 15 problem types 0 event kinds
	// audit     5 operations  3 problem types 0 event kinds
	// pay      10 operations 16 problem types 0 event kinds
	// auth      4 operations  4 problem types 0 event kinds
	// webhook   7 operations  8 problem types 12 event kinds
	// identity 10 operations 10 problem types 0 event kinds
	// commerce  4 operations  8 problem types 0 event kinds
	// x402      1 operations  5 problem types 0 event kinds
	// memory    6 operations  8 problem types 0 event kinds
	// protocol 64 operations 65 problem types 0 event kinds
	// product   4 operations  0 problem types 0 event kinds
}

func ExampleModel() {
	m := product.Model()
	for _, op := range m.Operations() {
		fmt.Println(op.Method, op.Path, op.ID, op.Credential)
	}
	op, _ := m.Operation("audit.list")
	fmt.Println(m.ProblemCodes(op))
	p, _ := m.Problem(contract.CodeRateLimited)
	fmt.Println(p.Status, p.Action, p.RetryAfter)
	// Output:
	// GET /audit audit.list agent-or-operator
	// GET /audit/checkpoint audit.checkpoint agent-or-operator
	// GET /audit/entries/{seq} audit.entry agent-or-operator
	// GET /audit/consistency audit.consistency agent-or-operator
	// GET /audit/stream audit.stream agent
	// POST /pay pay.create agent
	// GET /intents/{id} intents.get agent-or-operator
	// GET /intents/{id}/events intents.events agent-or-operator
	// POST /operator/approve operator.approve operator
	// POST /operator/decline operator.decline operator
	// POST /operator/refund operator.refund operator
	// POST /operator/kill-switch operator.kill_switch operator
	// POST /operator/circuit-breaker/reset operator.breaker_reset operator
	// GET /operator/approvals operator.approvals operator
	// GET /operator/settling operator.settling operator
	// GET /usage usage.get agent
	// POST /operator/agents operator.agents.create operator
	// GET /operator/agents operator.agents.list operator
	// DELETE /operator/agents/{id} operator.agents.revoke operator
	// POST /webhooks/endpoints webhooks.create operator
	// GET /webhooks/endpoints webhooks.list operator
	// GET /webhooks/endpoints/{id} webhooks.get operator
	// PATCH /webhooks/endpoints/{id} webhooks.update operator
	// DELETE /webhooks/endpoints/{id} webhooks.delete operator
	// GET /webhooks/endpoints/{id}/deliveries webhooks.deliveries operator
	// POST /webhooks/endpoints/{id}/deliveries/{eventId}/retry webhooks.retry operator
	// POST /disclose identity.disclose agent
	// GET /.well-known/agent-disclosure identity.well_known none
	// POST /agent-disclosure/respond identity.respond none
	// POST /identity/challenges identity.challenge agent
	// POST /verify identity.verify agent
	// POST /resolve identity.resolve agent
	// POST /identity/counterparties identity.counterparties.create operator
	// GET /identity/counterparties identity.counterparties.list operator
	// POST /identity/revocations identity.revoke operator
	// POST /identity/rotate identity.rotate operator
	// POST /quote commerce.quote agent
	// POST /buy commerce.buy agent
	// POST /commerce/merchants commerce.merchants.create operator
	// GET /commerce/merchants commerce.merchants.list agent
	// POST /x402/fetch x402.fetch agent
	// POST /memory/remember memory.remember agent
	// POST /memory/recall memory.recall agent
	// POST /memory/assemble memory.assemble agent
	// POST /memory/verify memory.verify none
	// POST /memory/forget memory.forget operator
	// POST /memory/taint memory.taint operator
	// POST /protocol/mandate/get mandate.get agent
	// POST /protocol/mandate/list mandate.list agent
	// POST /protocol/mandate/verify mandate.verify agent
	// POST /protocol/mandate/revoke mandate.revoke operator
	// POST /protocol/session/open session.open agent
	// POST /protocol/session/get session.get agent
	// POST /protocol/session/close session.close agent
	// POST /protocol/hold/place hold.place agent
	// POST /protocol/hold/capture hold.capture agent
	// POST /protocol/hold/release hold.release agent
	// POST /protocol/hold/get hold.get agent
	// POST /protocol/meter/open meter.open agent
	// POST /protocol/meter/record meter.record agent
	// POST /protocol/meter/close meter.close agent
	// POST /protocol/meter/get meter.get agent
	// POST /protocol/custody/balance custody.balance agent
	// POST /protocol/custody/deposit custody.deposit agent
	// POST /protocol/custody/withdraw custody.withdraw agent
	// POST /protocol/custody/ledger custody.ledger agent
	// POST /protocol/stake/post stake.post agent
	// POST /protocol/stake/get stake.get agent
	// POST /protocol/stake/release stake.release agent
	// POST /protocol/economics/summary economics.summary agent
	// POST /protocol/economics/budget economics.budget agent
	// POST /protocol/oversight/status oversight.status agent
	// POST /protocol/oversight/policy oversight.policy agent
	// POST /protocol/oversight/queue oversight.queue agent
	// POST /protocol/revocation/list revocation.list agent
	// POST /protocol/revocation/check revocation.check agent
	// POST /protocol/revocation/revoke_identity revocation.revoke_identity operator
	// POST /protocol/proof/get proof.get agent
	// POST /protocol/proof/verify proof.verify agent
	// POST /protocol/terms/propose terms.propose agent
	// POST /protocol/terms/accept terms.accept agent
	// POST /protocol/terms/get terms.get agent
	// POST /protocol/negotiate/offer negotiate.offer agent
	// POST /protocol/negotiate/counter negotiate.counter agent
	// POST /protocol/negotiate/accept negotiate.accept agent
	// POST /protocol/negotiate/reject negotiate.reject agent
	// POST /protocol/negotiate/get negotiate.get agent
	// POST /protocol/obligation/create obligation.create agent
	// POST /protocol/obligation/get obligation.get agent
	// POST /protocol/obligation/list obligation.list agent
	// POST /protocol/obligation/cancel obligation.cancel agent
	// POST /protocol/evidence/submit evidence.submit agent
	// POST /protocol/evidence/get evidence.get agent
	// POST /protocol/evidence/list evidence.list agent
	// POST /protocol/clearing/status clearing.status agent
	// POST /protocol/clearing/attempt clearing.attempt agent
	// POST /protocol/delivery/record delivery.record agent
	// POST /protocol/delivery/accept delivery.accept agent
	// POST /protocol/delivery/get delivery.get agent
	// POST /protocol/delivery/dispute delivery.dispute operator
	// POST /protocol/dispute/open dispute.open agent
	// POST /protocol/dispute/respond dispute.respond agent
	// POST /protocol/dispute/get dispute.get agent
	// POST /protocol/dispute/list dispute.list agent
	// POST /protocol/dispute/resolve dispute.resolve operator
	// POST /protocol/insurance/quote insurance.quote agent
	// POST /protocol/insurance/bind insurance.bind agent
	// POST /protocol/insurance/get insurance.get agent
	// POST /protocol/claim/file claim.file agent
	// POST /protocol/claim/get claim.get agent
	// POST /protocol/claim/list claim.list agent
	// GET /openapi.json openapi.get none
	// GET /asyncapi.json asyncapi.get none
	// GET /healthz health.get none
	// GET /problems/{code} problems.get none
	// [audit.bad_cursor auth.invalid auth.missing internal operator.unauthorized rate_limited request.unknown_field request.validation store.unavailable unavailable]
	// 429 retry-as-is 1
}
