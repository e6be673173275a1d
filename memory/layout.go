package memory

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
)

// Store layout: the memory store owns the mem/ prefix. Names (namespace,
// subject, kind) hold no control characters, so 0x00 separates them in
// keys.
const (
	keyRecord  = "mem/r/"    // + id → stored (the record without its body)
	keyKey     = "mem/k/"    // + id → the body's key, sealed
	keyBody    = "mem/b/"    // + id → nonce || AES-256-GCM ciphertext of the body
	keyNS      = "mem/n/"    // + ns 0x00 + recordedAt BE8 + id → empty: every record by recording time
	keySubject = "mem/s/"    // + ns 0x00 subject 0x00 + recordedAt BE8 + id → empty
	keyCurrent = "mem/c/"    // + ns 0x00 subject 0x00 + id → empty: the subject's current records
	keyRev     = "mem/e/"    // + target id 0x00 edge type 0x00 + source id → empty: reverse edges
	keySource  = "mem/src/"  // + kind 0x00 ref 0x00 + id → empty: records by source
	keyUntrust = "mem/u/"    // + kind 0x00 ref → untrusted source marking
	keyErased  = "mem/x/"    // + id → tombstone
	keyIdem    = "mem/idem/" // + agent key id 0x00 idempotency key → idem
)

// stored is a record at rest: everything but the body, which is
// encrypted apart under its own key.
type stored struct {
	ID           string      `json:"id"`
	Namespace    string      `json:"ns"`
	Subject      string      `json:"subject"`
	Kind         string      `json:"kind"`
	ValidFrom    time.Time   `json:"validFrom"`
	ValidTo      *time.Time  `json:"validTo,omitempty"`
	RecordedAt   time.Time   `json:"recordedAt"`
	SupersededAt *time.Time  `json:"supersededAt,omitempty"`
	Source       Source      `json:"source"`
	Edges        []Edge      `json:"edges,omitempty"`
	Taint        *Taint      `json:"taint,omitempty"`
	Digest       string      `json:"digest"`
	BodyJCS      bool        `json:"bodyJcs,omitempty"` // the body is stored in RFC 8785 form
	Salt         string      `json:"salt"`
	Entry        audit.Entry `json:"entry"` // the memory.recorded entry (digests only)
}

// tombstone is what stays of an erased record: enough to answer that it
// was erased, never what it said.
type tombstone struct {
	ErasedAt time.Time `json:"erasedAt"`
	Digest   string    `json:"digest"`
	Seq      uint64    `json:"seq"` // the memory.erased entry
}

// idem is the stored outcome of a remember under an idempotency key.
type idem struct {
	Hash string `json:"hash"` // hex SHA-256 of the canonical request
	ID   string `json:"id"`
}

func be8(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMicro()))
	return b[:]
}

func cat(parts ...string) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func nsKey(s *stored) []byte {
	return cat(keyNS, s.Namespace, "\x00", string(be8(s.RecordedAt)), s.ID)
}
func subjectPrefix(ns, subject string) string { return keySubject + ns + "\x00" + subject + "\x00" }
func subjectKey(s *stored) []byte {
	return cat(subjectPrefix(s.Namespace, s.Subject), string(be8(s.RecordedAt)), s.ID)
}
func currentPrefix(ns, subject string) string { return keyCurrent + ns + "\x00" + subject + "\x00" }
func currentKey(s *stored) []byte             { return cat(currentPrefix(s.Namespace, s.Subject), s.ID) }
func revPrefix(target string) string          { return keyRev + target + "\x00" }
func revKey(target, typ, from string) []byte {
	return cat(revPrefix(target), typ, "\x00", from)
}
func sourcePrefix(src Source) string { return keySource + src.Kind + "\x00" + src.Ref + "\x00" }
func untrustKey(src Source) []byte   { return cat(keyUntrust, src.Kind, "\x00", src.Ref) }

func getJSON(r store.Reader, key []byte, v any) (bool, error) {
	b, err := r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

func putJSON(txn store.Txn, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return txn.Set(key, b)
}

func getStored(r store.Reader, id string) (*stored, error) {
	var s stored
	ok, err := getJSON(r, []byte(keyRecord+id), &s)
	if err != nil || !ok {
		return nil, err
	}
	return &s, nil
}

// index writes every index entry of a new record.
func index(txn store.Txn, s *stored) error {
	keys := [][]byte{cat(sourcePrefix(s.Source), s.ID)}
	if s.SupersededAt == nil {
		keys = append(keys, currentKey(s))
	}
	for _, e := range s.Edges {
		keys = append(keys, revKey(e.To, e.Type, s.ID))
	}
	for _, k := range keys {
		if err := txn.Set(k, nil); err != nil {
			return err
		}
	}
	return putStored(txn, s)
}

// putStored writes a record's stored fields and the summary its two
// time-ordered index entries carry, which a recall filters on before it
// reads the record: a subject's superseded versions and the records not
// valid at the time asked cost one index entry each, not a read.
func putStored(txn store.Txn, s *stored) error {
	sum := summarize(s)
	if err := txn.Set(nsKey(s), sum); err != nil {
		return err
	}
	if err := txn.Set(subjectKey(s), sum); err != nil {
		return err
	}
	return putJSON(txn, []byte(keyRecord+s.ID), s)
}

// Summary flags.
const (
	sumHasValidTo = 1 << iota
	sumSuperseded
	sumTainted
)

// summarize encodes what a recall filters on: flags, validFrom, validTo,
// supersededAt (unix microseconds, big-endian) and the kind.
func summarize(s *stored) []byte {
	b := make([]byte, 25, 25+len(s.Kind))
	var flags byte
	binary.BigEndian.PutUint64(b[1:9], uint64(s.ValidFrom.UnixMicro()))
	if s.ValidTo != nil {
		flags |= sumHasValidTo
		binary.BigEndian.PutUint64(b[9:17], uint64(s.ValidTo.UnixMicro()))
	}
	if s.SupersededAt != nil {
		flags |= sumSuperseded
		binary.BigEndian.PutUint64(b[17:25], uint64(s.SupersededAt.UnixMicro()))
	}
	if s.Taint != nil {
		flags |= sumTainted
	}
	b[0] = flags
	return append(b, s.Kind...)
}

// admitsSummary is view.admits on an index entry's summary (recordedAt is
// already bounded by the scan). A summary it cannot read admits, so the
// record itself decides.
func (vw view) admitsSummary(b []byte) bool {
	if len(b) < 25 {
		return true
	}
	flags := b[0]
	va, ta := vw.validAt.UnixMicro(), vw.txAt.UnixMicro()
	if va < int64(binary.BigEndian.Uint64(b[1:9])) {
		return false
	}
	if flags&sumHasValidTo != 0 && va >= int64(binary.BigEndian.Uint64(b[9:17])) {
		return false
	}
	if flags&sumSuperseded != 0 && int64(binary.BigEndian.Uint64(b[17:25])) <= ta {
		return false
	}
	if vw.excludeTainted && flags&sumTainted != 0 {
		return false
	}
	return vw.kind == "" || string(b[25:]) == vw.kind
}

// unindex removes every trace of a record: its entry, body, key and index
// entries, including the reverse edges that point at it.
func unindex(txn store.Txn, s *stored) error {
	keys := [][]byte{[]byte(keyRecord + s.ID), []byte(keyKey + s.ID), []byte(keyBody + s.ID),
		nsKey(s), subjectKey(s), currentKey(s), cat(sourcePrefix(s.Source), s.ID)}
	for _, e := range s.Edges {
		keys = append(keys, revKey(e.To, e.Type, s.ID))
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	// Reverse edges of records pointing at this one.
	lo := []byte(revPrefix(s.ID))
	var rev [][]byte
	it := txn.Iterate(lo, store.PrefixEnd(lo), false)
	for it.Next() {
		rev = append(rev, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range rev {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// dependents returns the ids of records with an edge of one of types to
// id, in id order.
func dependents(r store.Reader, id string, types ...string) ([]string, error) {
	var out []string
	for _, typ := range types {
		lo := []byte(revPrefix(id) + typ + "\x00")
		it := r.Iterate(lo, store.PrefixEnd(lo), false)
		for it.Next() {
			out = append(out, string(it.Key()[len(lo):]))
		}
		if err := it.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}
