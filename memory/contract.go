package memory

import (
	"encoding/json"
	"reflect"

	"github.com/countersign/countersign/contract"
)

// VerifyRequest is the body of POST /memory/verify.
type VerifyRequest struct {
	Artifact json.RawMessage `json:"artifact" validate:"required" doc:"An artifact this store issued, exactly as received: a memory.record, memory.page, memory.context or memory.erasure object."`
}

// Contract declares the memory operations and their problem types.
func Contract() contract.Part {
	mandateProblems := []string{CodeMandateInvalid, CodeRightMissing, CodeInvalid, contract.CodeUnavailable}
	operatorProblems := []string{contract.CodeOperatorUnauthorized, contract.CodeOperatorRationaleTooShort,
		contract.CodeRequestTooLarge, contract.CodeRequestUnsupportedMediaType, contract.CodeUnavailable}
	return contract.Part{
		Name: "memory",
		Operations: []contract.Operation{
			{
				ID: "memory.remember", Method: "POST", Path: "/memory/remember",
				Summary: "Remember a fact",
				Description: "Stores a record with its valid time (validFrom/validTo, given) and transaction time " +
					"(recordedAt, set by the server). Needs a memory mandate granting canWrite over the namespace. " +
					"The body is encrypted under its own key; the record gets a memory.recorded entry carrying only " +
					"the content digest. A current record of the same subject that overlaps it in valid time is " +
					"superseded (memory.consolidated), the part of its valid time the new record does not cover kept " +
					"as a remainder derived from it. Edges must name existing records of the namespace. A record whose " +
					"source is untrusted, or that derives from or cites a tainted record, is tainted (memory.tainted). " +
					"Idempotent on idempotencyKey per agent key: a retry answers the same record (Idempotent-Replayed: true).",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[RememberRequest](),
				Responses: []contract.Response{
					contract.JSON(201, "The sealed record, signed.", reflect.TypeFor[RecordArtifact]()),
					contract.JSON(200, "A replay: the record first remembered under this idempotency key.", reflect.TypeFor[RecordArtifact]()),
				},
				Problems: append([]string{CodeNotFound, CodeErased, CodeIdempotencyReuse}, mandateProblems...),
			},
			{
				ID: "memory.recall", Method: "POST", Path: "/memory/recall",
				Summary: "Recall what was known at a moment",
				Description: "The records valid at validAt as the store knew them at txAt: a record recorded after txAt " +
					"is invisible and one superseded after txAt is still returned (no look-ahead); erased records never. " +
					"Newest recording first, as a page signed by the deployment's record key, which anyone can check " +
					"with POST /memory/verify or offline. txAt may not be after now nor before the mandate's asOfFloor. " +
					"Taint is reported on each record; excludeTainted leaves tainted records out.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[RecallRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The signed page.", reflect.TypeFor[RecallPage]())},
				Problems:   append([]string{CodeAsOfFloor, CodeBadCursor}, mandateProblems...),
			},
			{
				ID: "memory.assemble", Method: "POST", Path: "/memory/assemble",
				Summary: "Assemble a context within a token budget",
				Description: "Chooses, among the records recall would return (the newest 256), those relevant to the " +
					"query (containing at least one of its terms), by the number of terms, then newest first, while they " +
					"fit budget.maxTokens as the tokenizer counts (the default is a documented estimate: the larger of " +
					"bytes/4 and words plus punctuation). Says what was left out and why (irrelevant, tainted, " +
					"over_budget). When nothing relevant fits it abstains: 200 with abstained true and abstainReason, " +
					"never padding. Tainted records are left out unless excludeTainted is false. Signed like a page.",
				Credential: contract.CredentialAgent,
				Body:       reflect.TypeFor[AssembleRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The signed context.", reflect.TypeFor[AssembledContext]())},
				Problems:   append([]string{CodeAsOfFloor}, mandateProblems...),
			},
			{
				ID: "memory.verify", Method: "POST", Path: "/memory/verify",
				Summary: "Verify a memory artifact",
				Description: "Checks a record, recall page, assembled context or erasure proof this deployment issued: " +
					"its signature over the whole artifact, each record's content digest against the signed " +
					"memory.recorded entry that committed it, and for an erasure proof the memory.erased entry with its " +
					"inclusion proof and signed checkpoint. Always 200: holds, or the first check that failed. No " +
					"credential (rate-limited per client address). The same check runs offline: `countersign memory " +
					"verify FILE` and memory.Verify in Go, with only the deployment's verifier key.",
				Credential: contract.CredentialNone,
				Body:       reflect.TypeFor[VerifyRequest](),
				Responses:  []contract.Response{contract.JSON(200, "Whether the artifact holds.", reflect.TypeFor[Verification]())},
				Problems:   []string{contract.CodeUnavailable},
			},
			{
				ID: "memory.forget", Method: "POST", Path: "/memory/forget",
				Summary: "Erase a record and everything derived from it",
				Description: "Operator only, with a memory mandate granting canErase over the record's namespace. Erases " +
					"the root and every record derived_from it, transitively: body keys and ciphertexts destroyed, " +
					"index entries removed, tombstones keep only ids and content digests. Answers the erasure proof: the " +
					"erased ids with their digests, the memory.erased entry, its inclusion proof and a signed checkpoint. " +
					"No route, page, stream or webhook returns those bodies afterwards.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[ForgetRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The erasure proof, signed.", reflect.TypeFor[ErasureProof]())},
				Problems:   append([]string{CodeNotFound, CodeErased, CodeMandateInvalid, CodeRightMissing, CodeInvalid}, operatorProblems...),
			},
			{
				ID: "memory.taint", Method: "POST", Path: "/memory/taint",
				Summary: "Mark a source or a record untrusted",
				Description: "Operator only. Marks a source untrusted (its records, and every record it gives later, are " +
					"tainted) or taints one record; the taint flows along derived_from and cites edges to every " +
					"dependent record, each getting a memory.tainted entry.",
				Credential: contract.CredentialOperator,
				Body:       reflect.TypeFor[TaintRequest](),
				Responses:  []contract.Response{contract.JSON(200, "The records newly tainted.", reflect.TypeFor[Tainted]())},
				Problems:   append([]string{CodeNotFound, CodeInvalid}, operatorProblems...),
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeInvalid, Status: 400, Title: "Invalid memory request", Action: contract.ActionFixRequest,
				Description: "A field breaks a rule of the memory store (names without control characters, a body of valid JSON up to 64 KiB, validTo after validFrom, txAt not in the future, edges to records of the same namespace); field names it.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeMandateInvalid, Status: 403, Title: "Memory mandate not valid", Action: contract.ActionStop,
				Description: "The memory mandate does not verify (malformed, wrong type, unknown operator key, bad signature), has expired or is not yet valid, was revoked, or names an agent the credential may not act for; reason says which. Ask the operator for a new one.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeRightMissing, Status: 403, Title: "Memory right missing", Action: contract.ActionStop,
				Description: "The mandate is valid but does not grant the right this route needs (canRead, canWrite, canErase) or covers another namespace; reason names it.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeAsOfFloor, Status: 403, Title: "Before the mandate floor", Action: contract.ActionFixRequest,
				Description: "txAt is before the mandate's asOfFloor: this agent may not recall what the store knew that early.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeNotFound, Status: 404, Title: "No such memory record", Action: contract.ActionFixRequest,
				Description: "No record has this id in this store.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeErased, Status: 410, Title: "Memory record erased", Action: contract.ActionStop,
				Description: "The record was erased by an operator; only its id and content digest remain, in the erasure entry.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeBadCursor, Status: 400, Title: "Malformed memory cursor", Action: contract.ActionFixRequest,
				Description: "The cursor is not one a recall returned; start again without it.",
				Members:     reflect.TypeFor[ProblemMembers]()},
			{Code: CodeIdempotencyReuse, Status: 422, Title: "Idempotency key reused", Action: contract.ActionFixRequest,
				Description: "This idempotency key was already used to remember something else; a key names exactly one record.",
				Members:     reflect.TypeFor[ProblemMembers]()},
		},
	}
}

// ProblemMembers are what a memory problem may add to the standard
// members.
type ProblemMembers struct {
	Reason string `json:"reason,omitempty" doc:"Why the mandate or the request was refused, as a stable word."`
	Field  string `json:"field,omitempty" doc:"The request member that breaks a rule."`
}
