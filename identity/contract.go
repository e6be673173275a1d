package identity

import (
	"reflect"

	"github.com/countersign/countersign/contract"
)

// VerifyBody is the body of POST /verify as the contract describes it: a
// signed disclosure in either envelope, or the wrapped form that adds a
// per-call policy and a challenge response. The server reads the body raw
// ([ParseVerifyRequest]); this type only carries its schema.
type VerifyBody struct{}

// JSONSchema describes the three accepted shapes.
func (VerifyBody) JSONSchema() contract.Schema {
	return contract.Schema{
		"description": "A signed ADP disclosure as received: the v1 object envelope or the v2 flattened JWS. " +
			"Or {envelope, policy, challengeResponse}: policy (ADP §8 field names) may only tighten the " +
			"deployment's verification policy; challengeResponse answers a challenge from POST /identity/challenges.",
		"oneOf": []any{
			map[string]any{"$ref": "#/components/schemas/SignedDisclosure"},
			map[string]any{"$ref": "#/components/schemas/JWSDisclosure"},
			map[string]any{
				"type":     "object",
				"required": []any{"envelope"},
				"properties": map[string]any{
					"envelope":          map[string]any{"description": "The signed disclosure, either envelope."},
					"policy":            map[string]any{"type": "object", "description": "Requirements to add to the deployment's policy (ADP §8 names)."},
					"challengeResponse": map[string]any{"$ref": "#/components/schemas/ChallengeResponse"},
				},
				"additionalProperties": false,
			},
		},
	}
}

// Contract declares the identity operations and their problem types.
func Contract() contract.Part {
	disclosure := []contract.Response{{Status: 200,
		Description: "This deployment's signed disclosure: the v1 object envelope (application/json) or the v2 flattened JWS (application/jose+json).",
		Content: []contract.Content{
			{MediaType: contract.MediaJSON, Type: reflect.TypeFor[SignedDisclosure]()},
			{MediaType: MediaJWS, Type: reflect.TypeFor[JWSDisclosure]()},
		}}}
	discloseDesc := "Every field is read from the running server: the constitution is the gate's policy in force " +
		"(its digest is the policy hash the record shows in gate.policy entries), the tools are this contract's " +
		"operations, the capital the live mandates, the history recomputed from the signed record up to its head " +
		"(the audit anchor). Signed by the deployment's identity key; its agentId is a did:key that survives key " +
		"rotation (the envelope then carries the rotation chain). A disclosure is re-signed, with a new id and " +
		"nonce, when the record head moved (at most once a second), the key rotated, or half its freshness " +
		"window passed."
	operatorProblems := []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort,
		contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable}
	return contract.Part{
		Name: "identity",
		Operations: []contract.Operation{
			{
				ID: "identity.disclose", Method: "POST", Path: "/disclose",
				Summary:     "This deployment's signed disclosure",
				Description: "Agent Disclosure Protocol (ADP) disclosure of this deployment. " + discloseDesc,
				Credential:  contract.CredentialAgent,
				Params:      reflect.TypeFor[DiscloseParams](),
				Responses:   disclosure,
				Problems:    []string{CodeDisclosureDisabled, contract.CodeUnavailable},
			},
			{
				ID: "identity.well_known", Method: "GET", Path: "/.well-known/agent-disclosure",
				Summary:     "The disclosure at the ADP well-known URI",
				Description: "The same disclosure as identity.disclose, without a credential (ADP §14), for any counterparty. " + discloseDesc,
				Credential:  contract.CredentialNone,
				Params:      reflect.TypeFor[DiscloseParams](),
				Responses:   disclosure,
				Problems:    []string{CodeDisclosureDisabled, contract.CodeUnavailable},
			},
			{
				ID: "identity.respond", Method: "POST", Path: "/agent-disclosure/respond",
				Summary: "Answer a live-handshake challenge",
				Description: "ADP §7: signs an RFC 9421 signature base over this deployment's agent id, the record's " +
					"current head and the disclosure version, with the challenge's nonce (and verifierId as tag), " +
					"proving the identity key is held now. No credential (ADP §14).",
				Credential: contract.CredentialNone,
				Body:       reflect.TypeFor[Challenge](),
				Responses:  []contract.Response{contract.JSON(200, "The signed challenge response.", reflect.TypeFor[ChallengeResponse]())},
				Problems:   []string{CodeBadChallenge, contract.CodeUnavailable},
			},
			{
				ID: "identity.challenge", Method: "POST", Path: "/identity/challenges",
				Summary: "Issue a live-handshake challenge",
				Description: "A fresh challenge (ADP §7.1) to send to a counterparty's /agent-disclosure/respond; " +
					"POST /verify accepts its answer once, within 5 minutes.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[ChallengeRequest](),
				Responses:  []contract.Response{contract.JSON(201, "The challenge.", reflect.TypeFor[Challenge]())},
				Problems:   []string{CodeBadChallenge, contract.CodeUnavailable},
			},
			{
				ID: "identity.verify", Method: "POST", Path: "/verify",
				Summary: "Verify a counterparty's disclosure",
				Description: "Checks an ADP disclosure, in SPEC order: structure against the ADP schemas, RFC 8785 " +
					"canonicalization, signature, agentId-to-key binding (hex, did:key or rotation chain), freshness, " +
					"revocations this deployment recorded, every predicate of the deployment's verification policy " +
					"(tightened, never loosened, by the call's), and the live handshake when a challenge response is " +
					"given. Always 200 with a Decision: outcome transact or refuse, every failed check with its " +
					"reason. A malformed disclosure is a refusal, not an error. Every decision is appended to the " +
					"record (identity.verified) and becomes the counterparty's trust.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[VerifyBody](),
				Responses:  []contract.Response{contract.JSON(200, "The decision.", reflect.TypeFor[Verified]())},
				Problems:   []string{CodeBadPolicy, CodeBadChallenge, contract.CodeUnavailable},
			},
			{
				ID: "identity.resolve", Method: "POST", Path: "/resolve",
				Summary: "Resolve a counterparty reference",
				Description: "Offline: a did:key or 64-hex ADP agent id, a CAIP-10 account id, a counterparty an " +
					"operator registered, or a registered merchant. trust is the last recorded verification decision. " +
					"With verify: true, a registered counterparty's disclosure is fetched from its registered base URL " +
					"(never a URL from the request; private addresses refused), verified with the live handshake, and " +
					"the decision recorded.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[ResolveRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The counterparty.", reflect.TypeFor[Counterparty]())},
				Problems:   []string{CodeBadRef, CodeNotFound, contract.CodeUnavailable},
			},
			{
				ID: "identity.counterparties.create", Method: "POST", Path: "/identity/counterparties",
				Summary: "Register a counterparty",
				Description: "Registers a counterparty by id, base URL and the agent id it must disclose as. Only a " +
					"registered counterparty's base URL is ever fetched.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[CounterpartyRequest](),
				Responses:  []contract.Response{contract.JSON(201, "The registration.", reflect.TypeFor[Registration]())},
				Problems:   append([]string{CodeInvalidParty, CodePartyExists}, operatorProblems...),
			},
			{
				ID: "identity.counterparties.list", Method: "GET", Path: "/identity/counterparties",
				Summary:     "List registered counterparties",
				Description: "Pages through the registrations in the order they were registered (commit order).",
				Credential:  contract.CredentialOperator,
				Params:      reflect.TypeFor[CounterpartyListParams](),
				Responses:   []contract.Response{contract.JSON(200, "A page of registrations.", reflect.TypeFor[RegistrationPage]())},
				Problems:    append([]string{CodeBadCursor}, operatorProblems...),
			},
			{
				ID: "identity.revoke", Method: "POST", Path: "/identity/revocations",
				Summary: "Revoke an agent or a disclosure",
				Description: "Records a revocation (ADP §10.1) of an agent id (hex or did:key: the same key) or a " +
					"disclosure id, named by the operator or carried by a signed revocation whose signature is " +
					"checked. Every later verification refuses it.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[RevokeBody](),
				Responses:  []contract.Response{contract.JSON(201, "The revocation.", reflect.TypeFor[RevocationRecord]())},
				Problems:   append([]string{CodeBadRevocation}, operatorProblems...),
			},
			{
				ID: "identity.rotate", Method: "POST", Path: "/identity/rotate",
				Summary: "Rotate the identity key",
				Description: "Moves this deployment's identity to a new Ed25519 key (ADP §5.1): the current key signs " +
					"a rotation statement, the chain is stored and recorded, agentId stays the same, and disclosures " +
					"are signed by the new key from then on, carrying the chain.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[RotateRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The rotation.", reflect.TypeFor[Rotation]())},
				Problems:   append([]string{CodeRotationFailed}, operatorProblems...),
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeBadRef, Status: 400, Title: "Unparseable reference", Action: contract.ActionFixRequest,
				Description: "The reference is empty, too long, or of no known form: send a did:key, a 64-hex agent id, a CAIP-10 account id or a registry id."},
			{Code: CodeNotFound, Status: 404, Title: "Unknown counterparty", Action: contract.ActionStop,
				Description: "The reference is well formed but names no registered counterparty or merchant. An operator can register it."},
			{Code: CodeBadPolicy, Status: 400, Title: "Verification policy refused", Action: contract.ActionFixRequest,
				Description: "The call's policy is malformed (unknown field, bad value) or would loosen the deployment's verification policy, which a caller may only tighten."},
			{Code: CodeInvalidParty, Status: 400, Title: "Invalid counterparty registration", Action: contract.ActionFixRequest,
				Description: "The id, base URL (https, no user info, query or fragment) or agent id (64 hex or did:key) is malformed."},
			{Code: CodePartyExists, Status: 409, Title: "Counterparty already registered", Action: contract.ActionStop,
				Description: "A counterparty with this id, or with this agent id, is already registered."},
			{Code: CodeBadRevocation, Status: 400, Title: "Invalid revocation", Action: contract.ActionFixRequest,
				Description: "The revocation names no id, or its signature does not verify against its public key."},
			{Code: CodeRotationFailed, Status: 503, Title: "Key rotation unavailable", Action: contract.ActionStop,
				Description: "This deployment cannot make or persist a new identity key; nothing was changed."},
			{Code: CodeBadChallenge, Status: 400, Title: "Malformed challenge", Action: contract.ActionFixRequest,
				Description: "The challenge or challenge response is malformed: a nonce of at most 256 bytes is required."},
			{Code: CodeBadCursor, Status: 400, Title: "Malformed cursor", Action: contract.ActionFixRequest,
				Description: "The cursor is not one this listing returned; start again without it."},
			{Code: CodeDisclosureDisabled, Status: 503, Title: "Disclosure unavailable", Action: contract.ActionRetryAsIs, RetryAfter: 5,
				Description: "The facts a disclosure states could not be read from the running server, so none is served rather than a partial one."},
		},
	}
}
