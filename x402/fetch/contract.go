package fetch

import (
	"reflect"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402"
)

// Contract declares the x402 fetch operation and its problem types.
func Contract() contract.Part {
	return contract.Part{
		Name: "x402",
		Operations: []contract.Operation{
			{
				ID: "x402.fetch", Method: "POST", Path: "/x402/fetch", MovesValue: true,
				Summary: "Fetch an HTTP resource, paying its x402 price through the gate",
				Description: "The agent signs what it wants (method, url, bodyDigest, maxAmount, idempotencyKey, purpose; " +
					"typ svc-x402-fetch+jws), never a price. The server makes the request; an answer that is not a 402 is " +
					"relayed (paid false) and nothing is paid. A 402's PAYMENT-REQUIRED offers (x402 version 2) are kept only " +
					"when the deployment can honour them (scheme exact on an allowed EVM network and asset with its pinned " +
					"EIP-712 name and version, payTo allowed by the mandate, resource.url on the origin asked for, " +
					"maxTimeoutSeconds under the cap, amount within maxAmount); the cheapest goes through the same gate, record " +
					"and two-phase settlement as /pay (payee the CAIP-10 payTo, rail x402; idempotency in the x402 namespace). " +
					"200: the resource's answer with the payment and its Receipt. 202: held for an operator; nothing is signed " +
					"before approval, which asks for the offer again and pays only the approved price; the same request sent " +
					"again then answers the resource. A lost answer leaves the payment settling (rail.unavailable): the signed " +
					"authorization is resent unchanged, never signed again with a new nonce.",
				Credential: contract.CredentialAgent,
				Params:     reflect.TypeFor[pay.PayParams](),
				Body:       reflect.TypeFor[Request](),
				Responses: []contract.Response{
					contract.JSON(200, "The resource's answer: paid, with the payment and its Receipt, or relayed unpaid.", reflect.TypeFor[Fetched]()),
					contract.JSON(202, "Accepted, not paid: held for an operator's approval.", reflect.TypeFor[pay.Held]()),
				},
				ProblemMembers: map[string]reflect.Type{CodeNoOffer: reflect.TypeFor[NoOfferMembers]()},
				Problems: []string{pay.CodeMalformed, pay.CodeUnauthorized, pay.CodeDenied, pay.CodeDeclined,
					pay.CodeFrozen, pay.CodeRailUnavailable, pay.CodeIdempotencyConflict, pay.CodeInFlight,
					pay.CodeKeyMismatch, CodeNoOffer, CodeInvalidURL, CodeResourceUnavailable, CodeInvalidOffer,
					CodeNotConfigured, contract.CodeAuthMissing, contract.CodeAuthInvalid, contract.CodeRequestTooLarge,
					contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeNoOffer, Status: 422, Title: "No x402 offer can be honoured", Action: contract.ActionFixRequest,
				Description: "The resource asked for payment, and none of its offers passes the deployment's checks; refusals " +
					"lists each offer with the check that refused it (asset, extra.name, extra.version, payTo, amount, " +
					"maxTimeoutSeconds, resource.url, scheme, network). Nothing was signed. Raise maxAmount, or ask the operator " +
					"to allow the asset or the payee.",
				Members: reflect.TypeFor[NoOfferMembers]()},
			{Code: CodeInvalidURL, Status: 400, Title: "URL not allowed", Action: contract.ActionFixRequest,
				Description: "The deployment's outbound policy refuses the URL (production: https to a public address only). Nothing was sent."},
			{Code: CodeResourceUnavailable, Status: 502, Title: "Resource did not answer", Action: contract.ActionRetryAsIs, RetryAfter: 5,
				Description: "The unpaid request got no answer (refused, timed out, dropped). Nothing was signed or paid."},
			{Code: CodeInvalidOffer, Status: 502, Title: "Unreadable x402 offer", Action: contract.ActionStop,
				Description: "The resource answered 402 without a readable PAYMENT-REQUIRED header (x402 version 2), or with a " +
					"version 1 offer, which Countersign does not pay. Nothing was signed."},
			{Code: CodeNotConfigured, Status: 501, Title: "x402 payments are not configured", Action: contract.ActionStop,
				Description: "The resource asked for payment, and this deployment holds no wallet key or allows no asset " +
					"(countersign serve --x402-wallet-key and --x402-assets). Nothing was signed."},
		},
	}
}

// NoOfferMembers are what x402.no_offer adds.
type NoOfferMembers struct {
	Refusals []x402.Refusal `json:"refusals" doc:"Every offer of the 402, by index, with the check that refused it."`
}
