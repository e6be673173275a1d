package memory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/countersign/countersign/store"
	"github.com/gowebpki/jcs"
)

// RememberRequest is the body of POST /memory/remember.
type RememberRequest struct {
	Mandate        string          `json:"mandate" validate:"required,max=8192" doc:"A memory mandate (operator-signed JWS, typ svc-memory-mandate+jwt) granting canWrite over the namespace."`
	IdempotencyKey string          `json:"idempotencyKey" validate:"required,max=255" doc:"Names this remember: a retry with the same key and body answers the same record; another body is refused."`
	Namespace      string          `json:"namespace" validate:"required,max=256"`
	Subject        string          `json:"subject" validate:"required,max=256"`
	Kind           string          `json:"kind" validate:"required,max=256"`
	Body           json.RawMessage `json:"body" validate:"required" doc:"Any JSON value, at most 64 KiB. Stored encrypted under its own key; never in the record."`
	ValidFrom      time.Time       `json:"validFrom" validate:"required" doc:"When the fact became true in the world."`
	ValidTo        *time.Time      `json:"validTo,omitempty" doc:"When it stopped being true; omit or null for open-ended. After validFrom."`
	Source         Source          `json:"source" validate:"required"`
	Edges          []Edge          `json:"edges,omitempty" validate:"max=32,dive" doc:"Links to existing records of the namespace."`

	canonBody []byte // Body's RFC 8785 form, set by validate
}

// Remembered is what Remember answers: the sealed record and whether it
// is the replay of an earlier request with the same idempotency key.
type Remembered struct {
	Artifact RecordArtifact
	Replayed bool
}

// validate checks the request's fields beyond their shapes.
func (q *RememberRequest) validate() error {
	for _, f := range []struct{ name, v string }{{"namespace", q.Namespace}, {"subject", q.Subject}, {"kind", q.Kind}} {
		if err := validName(f.v); err != nil {
			return invalid(f.name, "%v", err)
		}
	}
	if q.IdempotencyKey == "" || len(q.IdempotencyKey) > MaxKeyLen {
		return invalid("idempotencyKey", "must be 1 to %d bytes", MaxKeyLen)
	}
	if len(q.Body) == 0 {
		return invalid("body", "is required")
	}
	if len(q.Body) > MaxBodyLen {
		return invalid("body", "is longer than %d bytes", MaxBodyLen)
	}
	if !json.Valid(q.Body) {
		return invalid("body", "is not valid JSON")
	}
	// The content digest is taken over the RFC 8785 form, which some valid
	// JSON has not (a number beyond a double, a lone surrogate, a member
	// given twice) or has only by changing it (an integer beyond 2^53,
	// rounded): refuse it here as the client's fault, not later as a
	// server error or a silently different record.
	canon, err := jcsenc.Transform(q.Body)
	if err != nil {
		return invalid("body", "has no RFC 8785 canonical form: %v", err)
	}
	q.canonBody = canon
	if q.ValidFrom.IsZero() {
		return invalid("validFrom", "is required")
	}
	if q.ValidTo != nil && !q.ValidTo.After(q.ValidFrom) {
		return invalid("validTo", "must be after validFrom")
	}
	switch q.Source.Kind {
	case "agent", "tool", "url", "operator", "record":
	default:
		return invalid("source.kind", "must be agent, tool, url, operator or record")
	}
	if err := validName(q.Source.Ref); err != nil {
		return invalid("source.ref", "%v", err)
	}
	if len(q.Edges) > MaxEdges {
		return invalid("edges", "more than %d", MaxEdges)
	}
	seen := map[Edge]bool{}
	for i, e := range q.Edges {
		switch e.Type {
		case EdgeDerivedFrom, EdgeCites, EdgeSupersedes:
		default:
			return invalid(fmt.Sprintf("edges[%d].type", i), "must be derived_from, cites or supersedes")
		}
		if seen[e] {
			return invalid(fmt.Sprintf("edges[%d]", i), "is given twice")
		}
		seen[e] = true
	}
	return nil
}

// requestDigest identifies a remember for idempotency: every field but
// the mandate (a renewed mandate may carry a retry).
// The body is taken in its RFC 8785 form, so a retry that spells it
// differently is the same request; the rest is encoding/json's
// deterministic encoding of the struct. validate must have run.
func (q *RememberRequest) digest() (string, error) {
	c := *q
	c.Mandate = ""
	c.Body = q.canonBody
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return hexDigest(sha256.Sum256(b)), nil
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// Remember stores a fact (POST /memory/remember). In one transaction it
// checks the mandate (canWrite, namespace, not revoked), the edges (each
// names a live record of the namespace: an edge cannot point at a record
// that does not exist yet, so a cycle cannot be written), encrypts the
// body under a fresh key, supersedes the subject's current records whose
// valid time it overlaps (writing the uncovered remainder of each as a
// record derived from it), taints it when its source is untrusted or a
// record it derives from or cites is tainted, and appends memory.recorded
// (and memory.consolidated, memory.tainted) to the signed record.
func (s *Service) Remember(ctx context.Context, c Caller, q RememberRequest, requestID string) (Remembered, error) {
	if err := q.validate(); err != nil {
		return Remembered{}, err
	}
	q.Body = compactJSON(q.Body)
	m, err := s.authorize(q.Mandate, &c, q.Namespace, rightWrite)
	if err != nil {
		return Remembered{}, err
	}
	reqHash, err := q.digest()
	if err != nil {
		return Remembered{}, err
	}
	validFrom := q.ValidFrom.UTC().Truncate(time.Microsecond)
	var validTo *time.Time
	if q.ValidTo != nil {
		t := q.ValidTo.UTC().Truncate(time.Microsecond)
		if !t.After(validFrom) {
			return Remembered{}, invalid("validTo", "must be after validFrom")
		}
		validTo = &t
	}
	actor := audit.Actor{Kind: "agent", ID: c.KeyID}
	if c.KeyID == "" {
		actor.ID = "in-process"
	}
	idemKey := cat(keyIdem, c.KeyID, "\x00", q.IdempotencyKey)

	var out Remembered
	err = s.log.Update(ctx, func(txn store.Txn) error {
		out = Remembered{}
		if err := checkRevoked(txn, m); err != nil {
			return err
		}
		var prior idem
		found, err := getJSON(txn, idemKey, &prior)
		if err != nil {
			return err
		}
		if found {
			if prior.Hash != reqHash {
				return fail(CodeIdempotencyReuse, "idempotency key %q was used with a different request", q.IdempotencyKey)
			}
			rec, err := s.current(txn, prior.ID)
			if err != nil {
				return err
			}
			out = Remembered{Artifact: RecordArtifact{Record: rec}, Replayed: true}
			return nil
		}
		w := writer{s: s, txn: txn, actor: actor, requestID: requestID, now: s.stamp()}
		rec, err := w.remember(&q, validFrom, validTo)
		if err != nil {
			return err
		}
		out = Remembered{Artifact: RecordArtifact{Record: rec}}
		return putJSON(txn, idemKey, idem{Hash: reqHash, ID: rec.ID})
	})
	if err != nil {
		return Remembered{}, err
	}
	if err := s.signRecord(&out.Artifact); err != nil {
		return Remembered{}, err
	}
	return out, nil
}

// current reads a live record with its body, or answers why not.
func (s *Service) current(r store.Reader, id string) (Record, error) {
	st, err := getStored(r, id)
	if err != nil {
		return Record{}, err
	}
	if st == nil {
		return Record{}, s.missing(r, id)
	}
	return s.hydrate(r, st)
}

// missing is the error for an id with no live record: erased (410) or
// unknown (404).
func (s *Service) missing(r store.Reader, id string) error {
	var t tombstone
	found, err := getJSON(r, []byte(keyErased+id), &t)
	if err != nil {
		return err
	}
	if found {
		return fail(CodeErased, "record %s was erased at %s (record entry %d)", id, formatTime(t.ErasedAt), t.Seq)
	}
	return fail(CodeNotFound, "no record %s", id)
}

// writer makes the changes of one transaction.
type writer struct {
	s         *Service
	txn       store.Txn
	actor     audit.Actor
	requestID string
	now       time.Time
}

func (w *writer) append(typ string, data any) (audit.Entry, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return audit.Entry{}, err
	}
	// A record's seal carries its memory.recorded entry, which must verify
	// on its own wherever the record travels: that entry, alone, is
	// signed individually; the checkpoint covers the others.
	return w.s.log.Append(w.txn, audit.Record{Type: typ, Actor: w.actor, RequestID: w.requestID, Data: b,
		Signed: typ == EntryRecorded})
}

type recordedData struct {
	ID            string `json:"id"`
	Namespace     string `json:"namespace"`
	ContentDigest string `json:"contentDigest"`
}

type consolidatedData struct {
	ID         string   `json:"id"`
	Namespace  string   `json:"namespace"`
	Superseded []string `json:"superseded"`
	Remainders []string `json:"remainders"`
}

type taintedData struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Origin string `json:"origin"`
}

func (w *writer) remember(q *RememberRequest, validFrom time.Time, validTo *time.Time) (Record, error) {
	// Edges and a record source must name live records of the namespace.
	var inherit *stored
	explicit := map[string]bool{} // supersedes edges not yet matched
	stated := map[string]bool{}   // every supersedes edge: no remainder is kept
	for i, e := range q.Edges {
		t, err := getStored(w.txn, e.To)
		if err != nil {
			return Record{}, err
		}
		if t == nil {
			err := w.s.missing(w.txn, e.To)
			if me, ok := err.(*Error); ok {
				me.field = fmt.Sprintf("edges[%d].to", i)
			}
			return Record{}, err
		}
		if t.Namespace != q.Namespace {
			return Record{}, invalid(fmt.Sprintf("edges[%d].to", i), "names a record of another namespace")
		}
		if (e.Type == EdgeDerivedFrom || e.Type == EdgeCites) && t.Taint != nil && inherit == nil {
			inherit = t
		}
		if e.Type == EdgeSupersedes {
			explicit[e.To], stated[e.To] = true, true
		}
	}
	if q.Source.Kind == "record" {
		t, err := getStored(w.txn, q.Source.Ref)
		if err != nil {
			return Record{}, err
		}
		if t == nil {
			return Record{}, w.s.missing(w.txn, q.Source.Ref)
		}
		if t.Taint != nil && inherit == nil {
			inherit = t
		}
	}

	// The subject's current records this one supersedes: those whose
	// valid time overlaps it, and those its supersedes edges name.
	var superseded []*stored
	lo := []byte(currentPrefix(q.Namespace, q.Subject))
	it := w.txn.Iterate(lo, store.PrefixEnd(lo), false)
	var currentIDs []string
	for it.Next() {
		currentIDs = append(currentIDs, string(it.Key()[len(lo):]))
	}
	if err := it.Close(); err != nil {
		return Record{}, err
	}
	probe := Record{ValidFrom: validFrom, ValidTo: validTo}
	for _, id := range currentIDs {
		o, err := getStored(w.txn, id)
		if err != nil {
			return Record{}, err
		}
		if o == nil {
			continue
		}
		if explicit[id] || (&Record{ValidFrom: o.ValidFrom, ValidTo: o.ValidTo}).overlaps(probe.ValidFrom, probe.ValidTo) {
			superseded = append(superseded, o)
			delete(explicit, id)
		}
	}
	for id := range explicit { // supersedes edges to records of other subjects
		o, err := getStored(w.txn, id)
		if err != nil {
			return Record{}, err
		}
		if o != nil && o.SupersededAt == nil {
			superseded = append(superseded, o)
		}
	}
	slices.SortFunc(superseded, func(a, b *stored) int { return strings.Compare(a.ID, b.ID) })

	edges := slices.Clone(q.Edges)
	for _, o := range superseded {
		e := Edge{Type: EdgeSupersedes, To: o.ID}
		if !slices.Contains(edges, e) {
			edges = append(edges, e)
		}
	}

	// Supersede, and keep what the new record does not cover.
	var remainders []string
	for _, o := range superseded {
		o.SupersededAt = &w.now
		if err := w.txn.Delete(currentKey(o)); err != nil {
			return Record{}, err
		}
		if err := putStored(w.txn, o); err != nil {
			return Record{}, err
		}
		if o.Subject != q.Subject || stated[o.ID] {
			continue
		}
		var pieces [][2]*time.Time
		if o.ValidFrom.Before(validFrom) {
			from, to := o.ValidFrom, validFrom
			pieces = append(pieces, [2]*time.Time{&from, &to})
		}
		if validTo != nil && (o.ValidTo == nil || o.ValidTo.After(*validTo)) {
			from := *validTo
			pieces = append(pieces, [2]*time.Time{&from, o.ValidTo})
		}
		if len(pieces) == 0 {
			continue
		}
		body, err := w.s.loadBody(w.txn, o.ID)
		if err != nil {
			return Record{}, err
		}
		for _, p := range pieces {
			r, err := w.write(writeSpec{
				ns: o.Namespace, subject: o.Subject, kind: o.Kind, body: body, from: *p[0], to: p[1],
				source: o.Source, edges: []Edge{{Type: EdgeDerivedFrom, To: o.ID}}, inherit: taintedOrNil(o),
			})
			if err != nil {
				return Record{}, err
			}
			remainders = append(remainders, r.ID)
		}
	}

	rec, err := w.write(writeSpec{ns: q.Namespace, subject: q.Subject, kind: q.Kind, body: q.Body, canon: q.canonBody,
		from: validFrom, to: validTo, source: q.Source, edges: edges, inherit: inherit})
	if err != nil {
		return Record{}, err
	}
	if len(superseded) > 0 {
		ids := make([]string, len(superseded))
		for i, o := range superseded {
			ids[i] = o.ID
		}
		if remainders == nil {
			remainders = []string{}
		}
		if _, err := w.append(EntryConsolidated, consolidatedData{ID: rec.ID, Namespace: q.Namespace, Superseded: ids, Remainders: remainders}); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}

func taintedOrNil(o *stored) *stored {
	if o.Taint != nil {
		return o
	}
	return nil
}

type writeSpec struct {
	ns, subject, kind string
	body              []byte
	canon             []byte // body's RFC 8785 form, when already known
	from              time.Time
	to                *time.Time
	source            Source
	edges             []Edge
	inherit           *stored // a tainted record this one derives from or cites
}

// write creates one current record: body encrypted, indexed, recorded,
// tainted when it must be.
func (w *writer) write(sp writeSpec) (Record, error) {
	salt, err := randomHex(16)
	if err != nil {
		return Record{}, err
	}
	rec := Record{ID: newID(), Namespace: sp.ns, Subject: sp.subject, Kind: sp.kind, Body: sp.body,
		ValidFrom: sp.from, ValidTo: sp.to, RecordedAt: w.now, Source: sp.source, Edges: sp.edges,
		Seal: Seal{Salt: salt}}
	if rec.Edges == nil {
		rec.Edges = []Edge{}
	}
	canon := sp.canon
	if canon == nil {
		if canon, err = jcs.Transform(sp.body); err != nil {
			return Record{}, invalid("body", "is not canonicalizable JSON: %v", err)
		}
	}
	rec.bodyCanonical = bytes.Equal(canon, sp.body)
	rec.Seal.ContentDigest = hexDigest(sha256.Sum256(appendContentJCS(nil, &rec, canon)))
	e, err := w.append(EntryRecorded, recordedData{ID: rec.ID, Namespace: rec.Namespace, ContentDigest: rec.Seal.ContentDigest})
	if err != nil {
		return Record{}, err
	}
	rec.Seal.Entry = e
	st := &stored{ID: rec.ID, Namespace: rec.Namespace, Subject: rec.Subject, Kind: rec.Kind,
		ValidFrom: rec.ValidFrom, ValidTo: rec.ValidTo, RecordedAt: rec.RecordedAt, Source: rec.Source,
		Edges: rec.Edges, Digest: rec.Seal.ContentDigest, Salt: salt, Entry: e, BodyJCS: rec.bodyCanonical}
	var reason, origin string
	marked, err := w.s.sourceUntrusted(w.txn, sp.source)
	if err != nil {
		return Record{}, err
	}
	switch {
	case marked:
		reason, origin = TaintUntrustedSource, sp.source.Kind+":"+sp.source.Ref
	case sp.inherit != nil:
		reason, origin = TaintInherited, sp.inherit.ID
	}
	if reason != "" {
		if err := w.taint(st, reason, origin); err != nil {
			return Record{}, err
		}
		rec.Taint = st.Taint
	}
	if err := w.s.storeBody(w.txn, rec.ID, sp.body); err != nil {
		return Record{}, err
	}
	return rec, index(w.txn, st)
}

// taint marks st tainted (not yet written back: the caller puts it) and
// records memory.tainted.
func (w *writer) taint(st *stored, reason, origin string) error {
	e, err := w.append(EntryTainted, taintedData{ID: st.ID, Reason: reason, Origin: origin})
	if err != nil {
		return err
	}
	st.Taint = &Taint{Reason: reason, Origin: origin, At: w.now, AuditSeq: e.Seq}
	return nil
}

// sourceUntrusted reports whether records of src are tainted when
// written: its kind is untrusted by policy, or an operator marked it.
func (s *Service) sourceUntrusted(r store.Reader, src Source) (bool, error) {
	if s.untrusted[src.Kind] {
		return true, nil
	}
	_, err := r.Get(untrustKey(src))
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
