package memory

import (
	"encoding/json"
	"time"

	"github.com/countersign/countersign/audit"
)

// Record is one remembered fact, as the store hands it out.
type Record struct {
	ID        string          `json:"id" doc:"mem_ followed by a ULID."`
	Namespace string          `json:"namespace" doc:"The namespace the record lives in; a memory mandate grants rights over one namespace."`
	Subject   string          `json:"subject" doc:"What the record is about; several records share a subject over time."`
	Kind      string          `json:"kind" doc:"What sort of fact it is (free text, e.g. preference, address)."`
	Body      json.RawMessage `json:"body" doc:"The fact itself: any JSON value, at most 64 KiB."`
	ValidFrom time.Time       `json:"validFrom" doc:"Valid time: when the fact became true in the world."`
	ValidTo   *time.Time      `json:"validTo" doc:"Valid time: when it stopped being true; null while open-ended."`
	// RecordedAt and SupersededAt are transaction time, set by the server.
	RecordedAt   time.Time  `json:"recordedAt" doc:"Transaction time: when this store learned it (set by the server)."`
	SupersededAt *time.Time `json:"supersededAt" doc:"Transaction time: when this store stopped believing it; null while current."`
	Source       Source     `json:"source"`
	Edges        []Edge     `json:"edges" doc:"Links to other records: derived_from, cites, supersedes."`
	Taint        *Taint     `json:"taint" doc:"Set when the record, its source or a record it derives from or cites is untrusted; null otherwise."`
	Seal         Seal       `json:"seal"`

	// bodyCanonical says Body is already in RFC 8785 form (most bodies
	// are), so signing can copy it instead of canonicalizing it.
	bodyCanonical bool
}

// Source says who or what asserted a record.
type Source struct {
	Kind string `json:"kind" validate:"required,oneof=agent tool url operator record" doc:"agent, tool, url, operator or record."`
	Ref  string `json:"ref" validate:"required,max=512" doc:"Which one: an agent id, a tool name, a URL, an operator key id or a record id (kind record)."`
}

// Edge types.
const (
	EdgeDerivedFrom = "derived_from"
	EdgeCites       = "cites"
	EdgeSupersedes  = "supersedes"
)

// Edge links a record to another one.
type Edge struct {
	Type string `json:"type" validate:"required,oneof=derived_from cites supersedes" doc:"derived_from (erasing the target erases this record too; taint flows), cites (taint flows) or supersedes (the target stops being current)."`
	To   string `json:"to" validate:"required" doc:"The id of an existing record of the same namespace."`
}

// Taint reasons.
const (
	TaintUntrustedSource = "untrusted_source" // the record's source is marked untrusted
	TaintInherited       = "inherited"        // a record it derives from or cites is tainted
)

// Taint says why a record is not to be trusted.
type Taint struct {
	Reason   string    `json:"reason" doc:"untrusted_source or inherited."`
	Origin   string    `json:"origin" doc:"The untrusted source (kind:ref) or the tainted record it inherits from."`
	At       time.Time `json:"at"`
	AuditSeq uint64    `json:"auditSeq" doc:"The memory.tainted entry."`
}

// Seal binds a record's content to the signed record.
type Seal struct {
	// ContentDigest is the lowercase hex SHA-256 of the RFC 8785 canonical
	// JSON of {id, namespace, subject, kind, body, validFrom, validTo,
	// recordedAt, source, edges, salt}.
	ContentDigest string `json:"contentDigest" doc:"Hex SHA-256 of the canonical JSON of the record's content and salt."`
	// Salt is 16 random bytes (hex) mixed into the digest, so the digest of
	// an erased record does not let anyone confirm a guess of its body.
	Salt string `json:"salt" doc:"16 random bytes, hex: makes the digest of an erased record useless for confirming a guess of its body."`
	// Entry is the memory.recorded entry that commits ContentDigest.
	Entry audit.Entry `json:"entry" doc:"The signed memory.recorded entry carrying the digest."`
}

// contentOf is the part of a record its ContentDigest covers.
type content struct {
	ID         string          `json:"id"`
	Namespace  string          `json:"namespace"`
	Subject    string          `json:"subject"`
	Kind       string          `json:"kind"`
	Body       json.RawMessage `json:"body"`
	ValidFrom  string          `json:"validFrom"`
	ValidTo    *string         `json:"validTo"`
	RecordedAt string          `json:"recordedAt"`
	Source     Source          `json:"source"`
	Edges      []Edge          `json:"edges"`
	Salt       string          `json:"salt"`
}

// timeFormat is how the store writes instants: RFC 3339 in UTC with
// exactly six fractional digits, so a time has one spelling and sorts as a
// string.
const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// MarshalJSON writes the record with the store's one spelling of times.
func (r Record) MarshalJSON() ([]byte, error) {
	type wire struct {
		ID           string          `json:"id"`
		Namespace    string          `json:"namespace"`
		Subject      string          `json:"subject"`
		Kind         string          `json:"kind"`
		Body         json.RawMessage `json:"body"`
		ValidFrom    string          `json:"validFrom"`
		ValidTo      *string         `json:"validTo"`
		RecordedAt   string          `json:"recordedAt"`
		SupersededAt *string         `json:"supersededAt"`
		Source       Source          `json:"source"`
		Edges        []Edge          `json:"edges"`
		Taint        *Taint          `json:"taint"`
		Seal         Seal            `json:"seal"`
	}
	edges := r.Edges
	if edges == nil {
		edges = []Edge{}
	}
	return marshal(wire{
		ID: r.ID, Namespace: r.Namespace, Subject: r.Subject, Kind: r.Kind, Body: r.Body,
		ValidFrom: formatTime(r.ValidFrom), ValidTo: optTime(r.ValidTo), RecordedAt: formatTime(r.RecordedAt),
		SupersededAt: optTime(r.SupersededAt), Source: r.Source, Edges: edges, Taint: r.Taint, Seal: r.Seal,
	})
}

// MarshalJSON writes the taint with the store's one spelling of times.
func (t Taint) MarshalJSON() ([]byte, error) {
	return marshal(struct {
		Reason   string `json:"reason"`
		Origin   string `json:"origin"`
		At       string `json:"at"`
		AuditSeq uint64 `json:"auditSeq"`
	}{t.Reason, t.Origin, formatTime(t.At), t.AuditSeq})
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := formatTime(*t)
	return &s
}

func (r *Record) content() content {
	edges := r.Edges
	if edges == nil {
		edges = []Edge{}
	}
	return content{
		ID: r.ID, Namespace: r.Namespace, Subject: r.Subject, Kind: r.Kind, Body: r.Body,
		ValidFrom: formatTime(r.ValidFrom), ValidTo: optTime(r.ValidTo), RecordedAt: formatTime(r.RecordedAt),
		Source: r.Source, Edges: edges, Salt: r.Seal.Salt,
	}
}

// validAt reports whether the record is valid at t (valid time).
func (r *Record) validAt(t time.Time) bool {
	return !t.Before(r.ValidFrom) && (r.ValidTo == nil || t.Before(*r.ValidTo))
}

// knownAt reports whether the store believed the record at t (transaction
// time): recorded at or before t and not superseded by then.
func (r *Record) knownAt(t time.Time) bool {
	return !r.RecordedAt.After(t) && (r.SupersededAt == nil || r.SupersededAt.After(t))
}

// overlaps reports whether the record's valid time overlaps [from, to).
func (r *Record) overlaps(from time.Time, to *time.Time) bool {
	startsBeforeEnd := to == nil || r.ValidFrom.Before(*to)
	endsAfterStart := r.ValidTo == nil || r.ValidTo.After(from)
	return startsBeforeEnd && endsAfterStart
}
