// Package fakemerchant is a real HTTP merchant for tests and demos: it
// speaks the Agentic Commerce Protocol (ACP 2026-04-17) and the Universal
// Commerce Protocol (UCP 2026-01-11 and 2026-04-08) over the wire, with a
// small catalogue whose SKUs choose a scenario: ready to pay, out of stock,
// escalation with a continue URL, authentication required, a declined
// payment, a slow merchant, a 5xx or a timeout on complete, expiry, a total
// that changes between quote and buy, UCP answers whose signature does not
// verify. It behaves like a merchant, not like a stub: sessions are
// stateful, completion is idempotent, UCP 2026-04-08 answers are signed
// (RFC 9421) with a key its profile publishes, and the failure scenarios
// fail the way real merchants do.
package fakemerchant

import "time"

// Scenario is what a SKU makes the merchant do.
type Scenario string

// The scenarios. A cart's scenario is that of its first line whose
// scenario is not ScenarioReady; a request header X-Fake-Scenario, when
// present on session creation, overrides it for the whole session.
const (
	// ScenarioReady: priced, in stock, ready for payment.
	ScenarioReady Scenario = "ready"
	// ScenarioOutOfStock: the session stays not ready (ACP
	// not_ready_for_payment with an out_of_stock message; UCP incomplete).
	ScenarioOutOfStock Scenario = "out_of_stock"
	// ScenarioEscalation: requires escalation, with a continue URL (ACP
	// requires_escalation; UCP requires_escalation + continue_url).
	ScenarioEscalation Scenario = "requires_escalation"
	// ScenarioAuthentication: ACP authentication_required (UCP: requires
	// escalation with a continue URL for 3-D Secure).
	ScenarioAuthentication Scenario = "authentication_required"
	// ScenarioDeclined: ready, but completion is refused with a payment
	// declined error and the session stays open.
	ScenarioDeclined Scenario = "payment_declined"
	// ScenarioSlow: every answer takes SlowDelay.
	ScenarioSlow Scenario = "slow"
	// ScenarioCompleteFails: completion answers 500 every time and
	// completes nothing.
	ScenarioCompleteFails Scenario = "complete_5xx"
	// ScenarioTimeoutThenSuccess: the first completion completes the order
	// but does not answer until the client gives up (it hangs past
	// HangFor); a later GET or retried completion shows it completed.
	ScenarioTimeoutThenSuccess Scenario = "timeout_then_success"
	// ScenarioExpires: the session expires ExpiresAfter after creation
	// (ACP/UCP status expired/canceled thereafter).
	ScenarioExpires Scenario = "expires"
	// ScenarioPriceChanges: the total grows by PriceIncrease minor units
	// after the session was first read back (between quote and buy).
	ScenarioPriceChanges Scenario = "price_changes"
	// ScenarioBadSignature: UCP 2026-04-08 only — every answer about the
	// session carries a signature that does not verify (the body is
	// altered after signing). Otherwise ready. As an X-Fake-Scenario
	// header it spoils the answer to that request, whatever it is.
	ScenarioBadSignature Scenario = "bad-signature"
	// ScenarioBadSignatureOnComplete: UCP 2026-04-08 only — the first
	// completion places the order, but its answer carries a signature that
	// does not verify; every other answer is signed properly.
	ScenarioBadSignatureOnComplete Scenario = "bad-signature-on-complete"
	// ScenarioNeverReady: priced and in stock, but the session never
	// reports it is ready for payment (UCP incomplete, ACP
	// not_ready_for_payment, with no message), and completing it places
	// the order all the same, as merchants built on the protocol's drafts
	// do (the UCP public sample merchant).
	ScenarioNeverReady Scenario = "never_ready"
	// ScenarioMissingInfo: priced and in stock, but the session stays not
	// ready: it asks for the buyer's phone number, which the clients never
	// send (UCP incomplete, ACP not_ready_for_payment, with an error
	// message of code missing at $.buyer.phone_number). Completing it is
	// refused.
	ScenarioMissingInfo Scenario = "missing_info"
)

// Item is one catalogue entry.
type Item struct {
	SKU         string
	Title       string
	PriceMinor  int64 // unit price, tax excluded
	TaxBasisPts int64 // tax rate in basis points (825 = 8.25 %)
	Scenario    Scenario
}

// Catalogue is the merchant's fixed catalogue, in USD. Shipping is a flat
// 500 minor units per order with a standard and an express (1,500)
// fulfilment option; a discount code "SAVE10" takes 10 % off the subtotal.
var Catalogue = []Item{
	{SKU: "sku-mug", Title: "Ceramic mug", PriceMinor: 1_200, TaxBasisPts: 825, Scenario: ScenarioReady},
	{SKU: "sku-book", Title: "Paperback book", PriceMinor: 2_500, TaxBasisPts: 0, Scenario: ScenarioReady},
	{SKU: "sku-laptop", Title: "Laptop", PriceMinor: 150_000, TaxBasisPts: 825, Scenario: ScenarioReady},
	{SKU: "sku-soldout", Title: "Sold-out sneakers", PriceMinor: 9_000, TaxBasisPts: 825, Scenario: ScenarioOutOfStock},
	{SKU: "sku-age", Title: "Age-restricted item", PriceMinor: 3_000, TaxBasisPts: 825, Scenario: ScenarioEscalation},
	{SKU: "sku-3ds", Title: "Item needing 3-D Secure", PriceMinor: 4_000, TaxBasisPts: 825, Scenario: ScenarioAuthentication},
	{SKU: "sku-declined", Title: "Card always declined", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioDeclined},
	{SKU: "sku-slow", Title: "Slow merchant", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioSlow},
	{SKU: "sku-5xx", Title: "Completion fails", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioCompleteFails},
	{SKU: "sku-timeout", Title: "Completion times out, then succeeded", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioTimeoutThenSuccess},
	{SKU: "sku-expiring", Title: "Short-lived offer", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioExpires},
	{SKU: "sku-surge", Title: "Surge-priced ticket", PriceMinor: 5_000, TaxBasisPts: 0, Scenario: ScenarioPriceChanges},
	{SKU: "sku-badsig", Title: "Answers signed badly (UCP)", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioBadSignature},
	{SKU: "sku-never-ready", Title: "Never ready to pay", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioNeverReady},
	{SKU: "sku-needs-phone", Title: "Needs the buyer's phone number", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioMissingInfo},
	{SKU: "sku-badsig-complete", Title: "Completion answer signed badly (UCP)", PriceMinor: 1_000, TaxBasisPts: 0, Scenario: ScenarioBadSignatureOnComplete},
}

// Timing and amounts of the scenarios (fields of Options override them).
const (
	SlowDelay       = 2 * time.Second
	HangFor         = 30 * time.Second
	ExpiresAfter    = 2 * time.Minute
	PriceIncrease   = 700
	ShippingMinor   = 500
	ExpressMinor    = 1_500
	DiscountPercent = 10
	DiscountCode    = "SAVE10"
)

// Find returns the catalogue item with the given SKU.
func Find(sku string) (Item, bool) {
	for _, it := range Catalogue {
		if it.SKU == sku {
			return it, true
		}
	}
	return Item{}, false
}
