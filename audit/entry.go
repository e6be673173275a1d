package audit

import (
	"encoding/json"
	"errors"
)

// ErrTampered marks every integrity failure of the record: a broken hash
// chain, a hash that does not match its entry, a Merkle hash that does not
// match its leaves, a bad signature, or a stored entry that does not parse.
// Check for it with errors.Is; use errors.As with *[TamperError] to learn
// the first bad sequence number.
var ErrTampered = errors.New("audit: record tampered")

// ErrNoSignature is returned by [VerifyEntry] for an entry that has no
// signature of its own: the log's signed checkpoint covers it, and
// [VerifyInclusion] verifies it with an inclusion proof.
var ErrNoSignature = errors.New("audit: the entry carries no signature of its own; verify it by an inclusion proof")

// ErrNotFound is returned when an entry with the asked sequence number does
// not exist (yet). It wraps nothing; check with errors.Is.
var ErrNotFound = errors.New("audit: no such entry")

// ErrBadCursor is returned by Page for a cursor that is malformed or was not
// minted by this log (another deployment's, or one past the newest entry).
// Check with errors.Is.
var ErrBadCursor = errors.New("audit: malformed cursor")

// ErrOutOfRange is returned for proof requests outside the current tree
// (a tree size larger than the log, an index not below the tree size, or
// from > to). Check with errors.Is.
var ErrOutOfRange = errors.New("audit: out of range")

// TamperError names the first entry at which verification failed.
type TamperError struct {
	// Seq is the first bad sequence number. It is 0 when the damage is not
	// in an entry but in the log's head record (the stored size and newest
	// hash).
	Seq    uint64
	Reason string // what did not hold, for a person
}

func (e *TamperError) Error() string {
	return "audit: record tampered at seq " + uitoa(e.Seq) + ": " + e.Reason
}

// Unwrap makes every TamperError match ErrTampered.
func (e *TamperError) Unwrap() error { return ErrTampered }

// Actor says who caused an entry.
type Actor struct {
	// Kind is one of "agent", "operator", "system".
	Kind string `json:"kind"`
	// ID is the agent key id, operator key id, or a system component name.
	ID string `json:"id"`
}

// Record is what a caller supplies to Append; the log fills in the rest.
type Record struct {
	Type      string          // entry type, e.g. "gate.decision"
	IntentID  string          // optional
	Actor     Actor           // required
	RequestID string          // optional: the X-Request-Id of the causing request
	Rationale string          // optional: an operator's stated reason
	Data      json.RawMessage // optional: type-specific JSON object
	// Signed asks for a signature of the entry's own (Entry.Sig), for an
	// entry handed out as a standalone artifact that must verify without
	// an inclusion proof (a memory record's seal). It costs one Ed25519
	// signature in the transaction; every other entry is covered by the
	// checkpoint signed once per commit.
	Signed bool
}

// Entry is one hash-linked item of the record, exactly as served.
//
// Hash is the lowercase hex SHA-256 of the RFC 8785 canonical JSON of the
// entry without "hash" and "sig"; Prev is the previous entry's Hash (64
// zeros for seq 1). The record key signs the log's checkpoint once per
// commit, and the checkpoint's Merkle root commits to every entry, so an
// entry is verified by an inclusion proof against a signed checkpoint
// ([VerifyInclusion]) or by verifying the whole log. Sig is present only
// on an entry signed on its own (appended with [Record].Signed, or written
// before checkpoints were kept per commit): the base64url (no padding)
// Ed25519 signature by the record key over the 32 raw hash bytes, which
// [VerifyEntry] checks with the key alone.
type Entry struct {
	Seq       uint64          `json:"seq"`
	At        string          `json:"at"` // RFC 3339, UTC, exactly 6 fractional digits
	Type      string          `json:"type"`
	IntentID  string          `json:"intentId,omitempty"`
	Actor     Actor           `json:"actor"`
	RequestID string          `json:"requestId,omitempty"`
	Rationale string          `json:"rationale,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Prev      string          `json:"prev"`
	Hash      string          `json:"hash"`
	Sig       string          `json:"sig,omitempty"`
}

// Page is one page of entries in ascending seq order.
type Page struct {
	Data       []Entry `json:"data"`
	HasMore    bool    `json:"hasMore"`
	NextCursor *string `json:"nextCursor"` // nil at the end
}

// Checkpoint is a signed statement of the Merkle tree head.
type Checkpoint struct {
	Origin   string `json:"origin"`
	TreeSize uint64 `json:"treeSize"`
	RootHash string `json:"rootHash"` // standard base64, as in the note body
	// Note is the whole C2SP signed note (tlog-checkpoint body plus
	// signature lines), verifiable with the record's verifier key.
	Note string `json:"note"`
}

// InclusionProof proves that entry Seq (leaf index Seq-1) is in the tree of
// TreeSize leaves. Hashes are standard base64, in RFC 6962 order.
type InclusionProof struct {
	Seq        uint64     `json:"seq"`
	LeafIndex  uint64     `json:"leafIndex"`
	TreeSize   uint64     `json:"treeSize"`
	LeafHash   string     `json:"leafHash"`
	Hashes     []string   `json:"hashes"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// ConsistencyProof proves that the tree of size From is a prefix of the tree
// of size To. Hashes are standard base64, in RFC 6962 order.
type ConsistencyProof struct {
	From       uint64     `json:"from"`
	To         uint64     `json:"to"`
	Hashes     []string   `json:"hashes"`
	Checkpoint Checkpoint `json:"checkpoint"`
}

// Depth selects how much Verify checks.
type Depth int

const (
	// Hashes checks entry hashes, prev links, seq continuity and the Merkle
	// tree (stored hashes against leaves, root against the stored
	// checkpoint). It does not check Ed25519 signatures.
	Hashes Depth = iota
	// Full additionally checks the signature of every entry that has one
	// of its own, the canonical form of every entry, and the stored
	// checkpoint's signature.
	Full
)

func uitoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
