package audit

import (
	"reflect"

	"github.com/countersign/countersign/contract"
)

// Problem codes of the record's operations. The HTTP layer answers
// [ErrBadCursor], [ErrNotFound] and [ErrOutOfRange] with them.
const (
	CodeBadCursor  = "audit.bad_cursor"
	CodeNotFound   = "audit.not_found"
	CodeOutOfRange = "audit.out_of_range"
)

// Contract returns the record's declarations for the contract model: the
// operations that read the record (audit.*) and the problem types of its
// codes. An agent credential or an operator's signature reads the record
// (the operator's console has no agent credential); the live stream is
// for agents.
func Contract() contract.Part {
	return contract.Part{
		Name: "audit",
		Operations: []contract.Operation{
			{
				ID: "audit.list", Method: "GET", Path: "/audit",
				Summary: "List record entries",
				Description: "Returns one page of the signed record in ascending sequence order. Pass the page's " +
					"nextCursor as cursor to read on; nextCursor is null on the last page.",
				Credential: contract.CredentialAgentOrOperator,
				Params:     reflect.TypeFor[AuditListParams](),
				Responses:  []contract.Response{contract.JSON(200, "A page of entries.", reflect.TypeFor[Page]())},
				Problems:   []string{CodeBadCursor, contract.CodeUnavailable},
			},
			{
				ID: "audit.checkpoint", Method: "GET", Path: "/audit/checkpoint",
				Summary: "Latest signed checkpoint",
				Description: "Returns the latest signed Merkle tree head of the record. With Accept: text/plain " +
					"the C2SP signed note is returned as is, for note-verifying tools.",
				Credential: contract.CredentialAgentOrOperator,
				Responses: []contract.Response{{Status: 200, Description: "The latest checkpoint.", Content: []contract.Content{
					{MediaType: contract.MediaJSON, Type: reflect.TypeFor[Checkpoint]()},
					{MediaType: contract.MediaText},
				}}},
				Problems: []string{contract.CodeUnavailable},
			},
			{
				ID: "audit.entry", Method: "GET", Path: "/audit/entries/{seq}",
				Summary: "One entry with its inclusion proof",
				Description: "Returns the entry with sequence number seq and a proof that it is included in the " +
					"tree of treeSize entries (the latest checkpoint when treeSize is omitted).",
				Credential: contract.CredentialAgentOrOperator,
				Params:     reflect.TypeFor[AuditEntryParams](),
				Responses:  []contract.Response{contract.JSON(200, "The entry and its inclusion proof.", reflect.TypeFor[AuditEntryWithProof]())},
				Problems:   []string{CodeNotFound, CodeOutOfRange, contract.CodeUnavailable},
			},
			{
				ID: "audit.consistency", Method: "GET", Path: "/audit/consistency",
				Summary: "Consistency proof between two tree sizes",
				Description: "Proves that the tree of size from is a prefix of the tree of size to (the latest " +
					"checkpoint when to is omitted): the record only grew.",
				Credential: contract.CredentialAgentOrOperator,
				Params:     reflect.TypeFor[AuditConsistencyParams](),
				Responses:  []contract.Response{contract.JSON(200, "The consistency proof.", reflect.TypeFor[ConsistencyProof]())},
				Problems:   []string{CodeOutOfRange, contract.CodeUnavailable},
			},
			{
				ID: "audit.stream", Method: "GET", Path: "/audit/stream",
				Summary: "Live stream of record entries",
				Description: "Server-Sent Events: one event per record entry, in sequence order, after the sequence " +
					"number after (0, the default, streams the whole record) or, when sent, after Last-Event-ID, which " +
					"an EventSource sends when it reconnects. Each event has id = the entry's seq, event = its type and " +
					"data = the whole signed entry exactly as audit.list serves it, on one line. An idle stream carries " +
					"a comment line every 15 s. The server ends the stream when the client falls more than 1,024 entries " +
					"behind, and on shutdown; the client reconnects with Last-Event-ID (retry: 2000) and resumes with " +
					"no gap and no duplicate.",
				Credential: contract.CredentialAgent,
				Params:     reflect.TypeFor[AuditStreamParams](),
				Responses: []contract.Response{{Status: 200, Description: "An event stream of record entries.",
					Content: []contract.Content{{MediaType: contract.MediaEventStream}}}},
				Problems: []string{CodeOutOfRange, contract.CodeUnavailable},
			},
		},
		Problems: []contract.ProblemType{
			{Code: CodeBadCursor, Status: 400, Title: "Bad cursor", Action: contract.ActionFixRequest,
				Description: "The cursor is malformed or was not issued by this record. Cursors are opaque: pass back " +
					"exactly the nextCursor of a previous page, or omit the cursor to start from the first entry."},
			{Code: CodeNotFound, Status: 404, Title: "No such entry", Action: contract.ActionFixRequest,
				Description: "The record has no entry with this sequence number yet. Sequence numbers start at 1 and " +
					"have no gaps; the latest checkpoint's treeSize is the highest one that exists."},
			{Code: CodeOutOfRange, Status: 400, Title: "Out of range", Action: contract.ActionFixRequest,
				Description: "The proof asked for lies outside the record: a tree size larger than the record, an entry " +
					"not inside the requested tree size, or a consistency proof whose from is larger than its to. Ask " +
					"again with sizes no larger than the latest checkpoint's treeSize."},
		},
	}
}

// The types below are the parameters and responses of the operations
// above. Their names are those the OpenAPI document uses, so they keep
// their Audit prefix.

// AuditListParams are the parameters of audit.list.
type AuditListParams struct {
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page. Omit to start at the first entry."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Entries per page, 1 to 100."`
}

// AuditStreamParams are the parameters of audit.stream.
type AuditStreamParams struct {
	After       uint64 `query:"after" doc:"Stream the entries after this sequence number; 0 (the default) streams the whole record."`
	LastEventID string `header:"Last-Event-ID" doc:"Sent by an EventSource when it reconnects: the id (sequence number) of the last event it received. Takes precedence over after; anything but a decimal sequence number is refused."`
}

// AuditEntryParams are the parameters of audit.entry.
type AuditEntryParams struct {
	Seq      uint64 `path:"seq" validate:"min=1" doc:"Sequence number of the entry; the first entry is 1."`
	TreeSize uint64 `query:"treeSize" doc:"Tree size the proof is for; at least seq. Omit for the latest checkpoint."`
}

// AuditEntryWithProof is the response of audit.entry: an entry and the
// proof that the signed tree includes it, so a client holding the record's
// public key verifies both without trusting the server.
type AuditEntryWithProof struct {
	Entry Entry          `json:"entry"`
	Proof InclusionProof `json:"proof"`
}

// AuditConsistencyParams are the parameters of audit.consistency.
type AuditConsistencyParams struct {
	From *uint64 `query:"from" validate:"required,min=1" doc:"The older tree size."`
	To   uint64  `query:"to" doc:"The newer tree size. Omit for the latest checkpoint."`
}
