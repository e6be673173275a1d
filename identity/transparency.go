package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"

	"github.com/countersign/countersign/internal/jcsenc"
)

// Genesis is the previous hash of a transparency log's first entry, and the
// head of an empty log: 64 zero hex digits (SPEC §10.2).
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// TransparencyEntry is one entry of the transparency log (SPEC §10.2).
// DisclosureDigest is the hex SHA-256 of the canonical disclosure document
// (not of the envelope, so re-signing the same content is visible); Hash is
// [EntryHash] of the other fields.
type TransparencyEntry struct {
	Index            int    `json:"index"`
	DisclosureDigest string `json:"disclosureDigest"`
	AgentID          string `json:"agentId"`
	IssuedAt         string `json:"issuedAt"`
	PrevHash         string `json:"prevHash"`
	Hash             string `json:"hash"`
}

// EntryHash is the hash preimage every implementation must reproduce:
// sha256Hex(canonicalize({index, disclosureDigest, agentId, issuedAt,
// prevHash})).
func EntryHash(index int, disclosureDigest, agentID, issuedAt, prevHash string) string {
	b := make([]byte, 0, 96+len(disclosureDigest)+len(agentID)+len(issuedAt)+len(prevHash))
	b = append(b, `{"agentId":`...)
	b = jcsenc.AppendString(b, agentID)
	b = append(b, `,"disclosureDigest":`...)
	b = jcsenc.AppendString(b, disclosureDigest)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"issuedAt":`...)
	b = jcsenc.AppendString(b, issuedAt)
	b = append(b, `,"prevHash":`...)
	b = jcsenc.AppendString(b, prevHash)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// VerifyInclusionProof checks an entry on its own: its hash must recompute
// from its fields. That catches a log handing back a tampered entry; it
// does not prove the entry is in any particular log (that takes the chain,
// see [VerifyLog]). Errors match [ErrTampered].
func VerifyInclusionProof(e TransparencyEntry) error {
	if EntryHash(e.Index, e.DisclosureDigest, e.AgentID, e.IssuedAt, e.PrevHash) != e.Hash {
		return fmt.Errorf("identity: transparency entry %d: hash does not recompute: %w", e.Index, ErrTampered)
	}
	return nil
}

// LogBrokenError reports the first entry at which a transparency log fails
// to verify. It matches [ErrTampered].
type LogBrokenError struct {
	Index  int
	Reason string
}

func (e *LogBrokenError) Error() string {
	return fmt.Sprintf("identity: transparency log broken at entry %d: %s", e.Index, e.Reason)
}

// Is reports whether target is ErrTampered.
func (e *LogBrokenError) Is(target error) bool { return target == ErrTampered }

// VerifyLog recomputes a whole chain of entries, as TransparencyLog.verify
// does in the reference: entries are numbered from 0, each prevHash is the
// previous entry's hash (Genesis for the first) and each hash recomputes.
// Any edit, insertion or deletion is reported as a *LogBrokenError.
func VerifyLog(entries []TransparencyEntry) error {
	prev := Genesis
	for i, e := range entries {
		switch {
		case e.Index != i:
			return &LogBrokenError{Index: i, Reason: "index out of sequence"}
		case e.PrevHash != prev:
			return &LogBrokenError{Index: i, Reason: "prevHash does not link to the previous entry"}
		case EntryHash(e.Index, e.DisclosureDigest, e.AgentID, e.IssuedAt, e.PrevHash) != e.Hash:
			return &LogBrokenError{Index: i, Reason: "hash does not recompute"}
		}
		prev = e.Hash
	}
	return nil
}

// TransparencyLog is an in-memory, append-only, hash-linked log of
// disclosure digests (SPEC §10.2). The zero value is an empty log; it is
// safe for concurrent use and must not be copied after first use.
type TransparencyLog struct {
	mu      sync.RWMutex // guards entries
	entries []TransparencyEntry
}

// Append logs d: its digest is the SHA-256 of its canonical form.
func (l *TransparencyLog) Append(d *Disclosure) (TransparencyEntry, error) {
	canon, err := Canonicalize(d)
	if err != nil {
		return TransparencyEntry{}, err
	}
	sum := sha256.Sum256(canon)
	return l.AppendDigest(hex.EncodeToString(sum[:]), d.AgentID, d.IssuedAt), nil
}

// AppendDigest logs a disclosure by digest, for a caller that already has
// it (a [Decision] carries Digest, AgentID and Disclosure.IssuedAt).
func (l *TransparencyLog) AppendDigest(disclosureDigest, agentID, issuedAt string) TransparencyEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := Genesis
	if n := len(l.entries); n > 0 {
		prev = l.entries[n-1].Hash
	}
	e := TransparencyEntry{
		Index:            len(l.entries),
		DisclosureDigest: disclosureDigest,
		AgentID:          agentID,
		IssuedAt:         issuedAt,
		PrevHash:         prev,
	}
	e.Hash = EntryHash(e.Index, e.DisclosureDigest, e.AgentID, e.IssuedAt, e.PrevHash)
	l.entries = append(l.entries, e)
	return e
}

// Entries returns a copy of the log.
func (l *TransparencyLog) Entries() []TransparencyEntry {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return append([]TransparencyEntry{}, l.entries...)
}

// Head is the last entry's hash, or Genesis for an empty log: the value a
// watcher pins to notice any later rewrite.
func (l *TransparencyLog) Head() string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := len(l.entries); n > 0 {
		return l.entries[n-1].Hash
	}
	return Genesis
}

// Verify recomputes the whole chain ([VerifyLog]).
func (l *TransparencyLog) Verify() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return VerifyLog(l.entries)
}

// Contains reports whether a disclosure with this digest was logged.
func (l *TransparencyLog) Contains(disclosureDigest string) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, e := range l.entries {
		if e.DisclosureDigest == disclosureDigest {
			return true
		}
	}
	return false
}

// InclusionProof is the reference's minimal membership proof: the entry and
// whether its hash recomputes from its own fields.
type InclusionProof struct {
	Entry      TransparencyEntry `json:"entry"`
	Recomputes bool              `json:"recomputes"`
}

// InclusionProof returns the proof for the entry at index, or false when
// there is none.
func (l *TransparencyLog) InclusionProof(index int) (InclusionProof, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if index < 0 || index >= len(l.entries) {
		return InclusionProof{}, false
	}
	e := l.entries[index]
	return InclusionProof{Entry: e, Recomputes: VerifyInclusionProof(e) == nil}, true
}
