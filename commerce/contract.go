package commerce

import (
	"reflect"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
)

// Contract declares the commerce operations and their problem types.
func Contract() contract.Part {
	return contract.Part{
		Name: "commerce",
		Operations: []contract.Operation{
			{
				ID: "commerce.quote", Method: "POST", Path: "/quote",
				Summary: "Get a priced cart from a merchant",
				Description: "Opens a checkout session at a registered merchant over its protocol (acp: ACP " +
					"2026-04-17; ucp: UCP 2026-01-11 or 2026-04-08, negotiated) and returns the priced Cart. It " +
					"commits nothing and moves no money; it is recorded as a commerce.quote entry with the cart's digest.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[QuoteRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The priced cart.", reflect.TypeFor[Quoted]())},
				Problems: []string{CodeMerchantNotFound, CodeRailMismatch, CodeMerchantUnavailable, CodeMerchantRejected,
					CodeMerchantInvalid, contract.CodeUnavailable},
			},
			{
				ID: "commerce.buy", Method: "POST", Path: "/buy", MovesValue: true,
				Summary: "Buy a cart",
				Description: "Re-reads the checkout session (cartId) or opens one for the lines, and only when the " +
					"merchant says it is ready to pay authorises the cart's total through the same gate, record and " +
					"two-phase settlement as /pay (payee merchant:<id>; idempotency in the buy namespace). 200: the " +
					"Order with its Receipt. 202: held for an operator; on approval the cart is re-read and completed " +
					"only if still ready at the same total. A cart that is not ready is intent.malformed with " +
					"cartStatus, continueUrl and the merchant's messages (action continue-at-link); no money moves.",
				Credential: contract.CredentialAgent,
				Params:     reflect.TypeFor[pay.PayParams](),
				Body:       reflect.TypeFor[PurchaseRequest](),
				// A cart that is not ready (NotReadyError).
				ProblemMembers: map[string]reflect.Type{pay.CodeMalformed: reflect.TypeFor[NotReadyMembers]()},
				Responses: []contract.Response{
					contract.JSON(200, "Bought: the Order, carrying the settlement Receipt.", reflect.TypeFor[Order]()),
					contract.JSON(202, "Accepted, not settled: held for an operator's approval.", reflect.TypeFor[pay.Held]()),
				},
				Problems: []string{pay.CodeMalformed, pay.CodeUnauthorized, pay.CodeDenied, pay.CodeDeclined,
					pay.CodeFrozen, pay.CodeRailUnavailable, pay.CodeIdempotencyConflict, pay.CodeInFlight,
					pay.CodeKeyMismatch, CodeMerchantNotFound, CodeRailMismatch, CodeMerchantUnavailable,
					CodeMerchantRejected, CodeMerchantInvalid, CodeCartNotFound, contract.CodeUnavailable},
			},
			{
				ID: "commerce.merchants.create", Method: "POST", Path: "/commerce/merchants",
				Summary: "Register a merchant",
				Description: "Registers a merchant agents may buy from: id, protocol (acp: base URL, bearer key, PSP; ucp: " +
					"profile URL, optionally the merchant's response-signing keys to pin: every checkout answer must then " +
					"carry a valid UCP 2026-04-08 signature by one of them, and the token credentials of payment handlers that take " +
					"one at complete, and readyWithoutErrors for a merchant that never reports ready_for_complete). The server connects first (a UCP merchant is discovered and its version negotiated) and " +
					"stores nothing if that fails: commerce.invalid_merchant when what the merchant publishes is unusable, " +
					"commerce.merchant_unavailable (retry) when it could not be reached. Credentials are sealed at rest and " +
					"never shown again, nor written to the record; pinned keys are public and listed by key id and thumbprint.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[MerchantRequest](),
				Responses:  []contract.Response{contract.JSON(201, "The registered merchant (no secrets).", reflect.TypeFor[MerchantView]())},
				Problems: []string{CodeInvalidMerchant, CodeMerchantExists, CodeMerchantUnavailable, contract.CodeOperatorUnauthorized,
					contract.CodeOperatorRationaleTooShort, contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable},
			},
			{
				ID: "commerce.merchants.list", Method: "GET", Path: "/commerce/merchants",
				Summary:     "The merchants agents may buy from",
				Description: "The registry, by id: protocol, negotiated version, where it is reached, pinned signing keys (key id and thumbprint), whether it came from configuration or an operator. Never a credential.",
				Credential:  contract.CredentialAgent,
				Responses:   []contract.Response{contract.JSON(200, "The registry.", reflect.TypeFor[MerchantPage]())},
				Problems:    []string{contract.CodeUnavailable},
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeInvalidMerchant, Status: 400, Title: "Invalid merchant registration", Action: contract.ActionFixRequest,
				Description: "The id, protocol, URLs or signing keys are malformed: an id of lowercase letters, digits, '-', '_' and '.'; acp needs an https baseUrl, ucp an https profileUrl; signingKeys are EC P-256 or P-384 public JWKs with distinct kids, for a ucp merchant that speaks 2026-04-08 (ACP defines no response signatures); paymentCredentials, for ucp only, each name a handler and carry a token; readyWithoutErrors is for ucp only. Also when the merchant's profile fails the protocol's schema in a part Countersign uses (the detail names the field), or shares no protocol version with us: a retry cannot fix that. Parts it never uses (a payment handler's version, say) are tolerated and listed as profileIgnored."},
			{Code: CodeMerchantExists, Status: 409, Title: "Merchant already registered", Action: contract.ActionStop,
				Description: "A merchant with this id is registered, in configuration or by an operator."},
			{Code: CodeMerchantNotFound, Status: 404, Title: "Unknown merchant", Action: contract.ActionFixRequest,
				Description: "No merchant with this id is registered. The server calls only registered merchants."},
			{Code: CodeRailMismatch, Status: 400, Title: "Rail does not match the merchant", Action: contract.ActionFixRequest,
				Description: "rail (and terms.rail) must be the protocol the merchant is registered with: acp or ucp."},
			{Code: CodeMerchantUnavailable, Status: 503, Title: "Merchant unavailable", Action: contract.ActionRetryAsIs, RetryAfter: 5,
				Description: "The merchant could not be reached or did not answer; nothing was bought by this request."},
			{Code: CodeMerchantRejected, Status: 422, Title: "Merchant refused the request", Action: contract.ActionFixRequest,
				Description: "The merchant refused the checkout request (unknown item, bad quantity, unsupported currency ...); its message is in the detail."},
			{Code: CodeMerchantInvalid, Status: 502, Title: "Merchant answered outside its protocol", Action: contract.ActionStop,
				Description: "The merchant's answer does not satisfy its protocol's schema; nothing of it was used.",
				Members:     reflect.TypeFor[InvalidResponseMembers]()},
			{Code: CodeCartNotFound, Status: 404, Title: "Unknown cart", Action: contract.ActionFixRequest,
				Description: "The merchant has no checkout session with this id; quote again."},
		},
	}
}

// NotReadyMembers are what commerce.buy's intent.malformed problem adds
// for a cart that is not ready to pay ([NotReadyError]).
type NotReadyMembers struct {
	CartID         string         `json:"cartId" doc:"The merchant's checkout session."`
	CartStatus     cart.Status    `json:"cartStatus" doc:"The state the cart stopped in."`
	MerchantStatus string         `json:"merchantStatus" doc:"The merchant's own name for that state."`
	ContinueURL    string         `json:"continueUrl" doc:"Where a person continues the checkout; empty when there is nowhere to go."`
	Messages       []cart.Message `json:"messages" doc:"The merchant's messages about the cart."`
}

// InvalidResponseMembers are what commerce.merchant_invalid_response adds
// when the answer's signature was refused.
type InvalidResponseMembers struct {
	SignatureRefused string `json:"signatureRefused,omitempty" doc:"The response-signature check that failed (UCP, RFC 9421)."`
}
