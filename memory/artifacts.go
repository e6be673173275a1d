package memory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/wirejson"
	"github.com/gowebpki/jcs"
)

// Artifact types: the "type" member of every artifact the store issues.
const (
	ArtifactRecord  = "memory.record"
	ArtifactPage    = "memory.page"
	ArtifactContext = "memory.context"
	ArtifactErasure = "memory.erasure"
)

// RecordArtifact is one record as the store hands it out (POST
// /memory/remember), signed as a whole.
type RecordArtifact struct {
	Type      string `json:"type" doc:"memory.record"`
	Record    Record `json:"record"`
	IssuedAt  string `json:"issuedAt"`
	Signature string `json:"signature,omitempty" doc:"The record key's statement signature (base64url) over the SHA-256 of the artifact's RFC 8785 form without this member."`
}

// RecallPage is a recall answer: the records valid at ValidAt as the store knew
// them at TxAt, newest recording first, signed as a whole.
type RecallPage struct {
	Type           string   `json:"type" doc:"memory.page"`
	Namespace      string   `json:"namespace"`
	ValidAt        string   `json:"validAt"`
	TxAt           string   `json:"txAt"`
	Subject        string   `json:"subject,omitempty"`
	Kind           string   `json:"kind,omitempty"`
	ExcludeTainted bool     `json:"excludeTainted"`
	Cursor         string   `json:"cursor,omitempty" doc:"The cursor this page continues from."`
	Data           []Record `json:"data"`
	HasMore        bool     `json:"hasMore"`
	NextCursor     *string  `json:"nextCursor"`
	IssuedAt       string   `json:"issuedAt"`
	Signature      string   `json:"signature,omitempty"`
}

// AssembledContext is an assembled context: the records chosen for a token budget,
// in order, with what was left out and why, signed as a whole.
type AssembledContext struct {
	Type           string        `json:"type" doc:"memory.context"`
	Namespace      string        `json:"namespace"`
	ValidAt        string        `json:"validAt"`
	TxAt           string        `json:"txAt"`
	Query          string        `json:"query,omitempty"`
	Subject        string        `json:"subject,omitempty"`
	Budget         Budget        `json:"budget"`
	Tokenizer      string        `json:"tokenizer" doc:"The tokenizer that counted: its name and version."`
	ExcludeTainted bool          `json:"excludeTainted"`
	Items          []ContextItem `json:"items"`
	TokensUsed     int           `json:"tokensUsed"`
	Omitted        []Omission    `json:"omitted" doc:"What was left out and why (at most 100; omittedCount counts them all)."`
	OmittedCount   int           `json:"omittedCount"`
	Abstained      bool          `json:"abstained" doc:"True when nothing relevant fits: a valid answer, never padding."`
	AbstainReason  string        `json:"abstainReason,omitempty" doc:"no_records, no_relevant_records, all_tainted or nothing_fits_budget."`
	IssuedAt       string        `json:"issuedAt"`
	Signature      string        `json:"signature,omitempty"`
}

// Budget bounds an assembled context.
type Budget struct {
	MaxTokens int `json:"maxTokens" validate:"required,min=1,max=1000000" doc:"The most tokens the context may use."`
}

// ContextItem is one record of a context.
type ContextItem struct {
	Record Record `json:"record"`
	Tokens int    `json:"tokens" doc:"Tokens of the record's rendering (subject, kind, body)."`
	Score  int    `json:"score" doc:"Distinct query terms the record contains (0 without a query)."`
}

// Omission is a record left out of a context.
type Omission struct {
	ID     string `json:"id"`
	Reason string `json:"reason" doc:"over_budget, tainted or irrelevant."`
	Tokens int    `json:"tokens"`
}

// ErasureProof is the answer of POST /memory/forget: what was erased, and
// the record entry of the erasure with its inclusion proof and a signed
// checkpoint, so anyone can check the erasure is in the record.
type ErasureProof struct {
	Type      string               `json:"type" doc:"memory.erasure"`
	RootID    string               `json:"rootId"`
	Namespace string               `json:"namespace"`
	Erased    []Erased             `json:"erased" doc:"The root and everything derived from it, transitively."`
	Entry     audit.Entry          `json:"entry" doc:"The memory.erased entry."`
	Inclusion audit.InclusionProof `json:"inclusion" doc:"The entry's inclusion proof, with its signed checkpoint."`
	IssuedAt  string               `json:"issuedAt"`
	Signature string               `json:"signature,omitempty"`
}

// Erased names an erased record by id and content digest: never its body.
type Erased struct {
	ID            string `json:"id"`
	ContentDigest string `json:"contentDigest"`
}

func (s *Service) issued() string { return formatTime(s.now()) }

func (s *Service) signRecord(a *RecordArtifact) error {
	a.Type, a.IssuedAt, a.Signature = ArtifactRecord, s.issued(), ""
	return s.sign(a.Type, a, func(sig string) { a.Signature = sig })
}

func (s *Service) signPage(p *RecallPage) error {
	p.Type, p.IssuedAt, p.Signature = ArtifactPage, s.issued(), ""
	return s.sign(p.Type, p, func(sig string) { p.Signature = sig })
}

func (s *Service) signContext(c *AssembledContext) error {
	c.Type, c.IssuedAt, c.Signature = ArtifactContext, s.issued(), ""
	return s.sign(c.Type, c, func(sig string) { c.Signature = sig })
}

func (s *Service) signErasure(p *ErasureProof) error {
	p.Type, p.IssuedAt, p.Signature = ArtifactErasure, s.issued(), ""
	return s.sign(p.Type, p, func(sig string) { p.Signature = sig })
}

// Verification is the answer of [Verify] and POST /memory/verify.
type Verification struct {
	Holds  bool   `json:"holds" doc:"True when every check passed."`
	Type   string `json:"type,omitempty" doc:"The artifact's type, when it could be read."`
	Reason string `json:"reason,omitempty" doc:"The first check that failed, when one did."`
	// Records counts the record seals checked (each record's content
	// digest against its memory.recorded entry, and that entry's signature).
	Records int `json:"records"`
}

// MaxArtifactLen bounds an artifact to verify.
const MaxArtifactLen = 16 << 20

// Verify checks an artifact the memory store issued — a record, a recall
// page, an assembled context or an erasure proof — with nothing but the
// deployment's verifier key (the record's; `countersign keys` prints it).
// It checks the statement signature over the whole artifact, then every
// record's content digest against the memory.recorded entry that
// committed it and that entry's signature, and for an erasure proof the
// memory.erased entry, its inclusion proof and checkpoint, and that the
// entry lists exactly the erased ids and digests. It never fails: a
// malformed artifact is a Verification that does not hold.
func Verify(verifierKey string, artifact []byte) Verification {
	v := Verification{}
	refuse := func(format string, args ...any) Verification {
		v.Holds, v.Reason = false, fmt.Sprintf(format, args...)
		return v
	}
	if len(artifact) > MaxArtifactLen {
		return refuse("the artifact is longer than %d bytes", MaxArtifactLen)
	}
	var members map[string]json.RawMessage
	if err := strictDecode(artifact, &members, false); err != nil {
		return refuse("the artifact %s", wirejson.Describe(err))
	}
	// A member given twice makes one artifact say two things: decoding
	// into members keeps the last and drops the other silently, so
	// {"data":[forged],"data":[signed]} would verify while a reader that
	// keeps the first sees the forgery. RFC 8785 refuses duplicates at
	// every depth; nested ones already fail below, top-level ones here.
	if _, err := jcs.Transform(artifact); err != nil {
		return refuse("not canonicalizable: %v", err)
	}
	var typ, sig string
	if err := json.Unmarshal(members["type"], &typ); err != nil {
		return refuse("no type member")
	}
	v.Type = typ
	if err := json.Unmarshal(members["signature"], &sig); err != nil || sig == "" {
		return refuse("no signature member")
	}
	switch typ {
	case ArtifactRecord, ArtifactPage, ArtifactContext, ArtifactErasure:
	default:
		return refuse("unknown artifact type %q", typ)
	}
	delete(members, "signature")
	d, err := canonicalDigest(members)
	if err != nil {
		return refuse("not canonicalizable: %v", err)
	}
	if err := audit.VerifyStatement(verifierKey, typ, d, sig); err != nil {
		return refuse("the signature does not verify with this key")
	}
	// The whole artifact is authentic; now check the seals inside it.
	var records []Record
	switch typ {
	case ArtifactRecord:
		var a RecordArtifact
		if err := strictDecode(artifact, &a, true); err != nil {
			return refuse("malformed record artifact: the artifact %s", wirejson.Describe(err))
		}
		records = []Record{a.Record}
	case ArtifactPage:
		var p RecallPage
		if err := strictDecode(artifact, &p, true); err != nil {
			return refuse("malformed page: the artifact %s", wirejson.Describe(err))
		}
		records = p.Data
	case ArtifactContext:
		var c AssembledContext
		if err := strictDecode(artifact, &c, true); err != nil {
			return refuse("malformed context: the artifact %s", wirejson.Describe(err))
		}
		for _, it := range c.Items {
			records = append(records, it.Record)
		}
	case ArtifactErasure:
		var p ErasureProof
		if err := strictDecode(artifact, &p, true); err != nil {
			return refuse("malformed erasure proof: the artifact %s", wirejson.Describe(err))
		}
		if reason := checkErasure(verifierKey, &p); reason != "" {
			return refuse("%s", reason)
		}
	}
	for i := range records {
		if reason := checkSeal(verifierKey, &records[i]); reason != "" {
			return refuse("record %s: %s", records[i].ID, reason)
		}
		v.Records++
	}
	v.Holds = true
	return v
}

// checkSeal checks one record's seal: its content digest, and the signed
// memory.recorded entry that carries it.
func checkSeal(verifierKey string, r *Record) string {
	d, err := contentDigest(r)
	if err != nil {
		return "content not canonicalizable"
	}
	if d != r.Seal.ContentDigest {
		return "the content does not match its digest"
	}
	e := r.Seal.Entry
	if err := audit.VerifyEntry(verifierKey, e); err != nil {
		return "the seal's record entry does not verify"
	}
	if e.Type != EntryRecorded {
		return "the seal's record entry is a " + e.Type
	}
	var data recordedData
	if err := json.Unmarshal(e.Data, &data); err != nil || data.ID != r.ID || data.ContentDigest != d || data.Namespace != r.Namespace {
		return "the seal's record entry commits another record"
	}
	return ""
}

func checkErasure(verifierKey string, p *ErasureProof) string {
	if err := audit.VerifyInclusion(verifierKey, p.Entry, p.Inclusion); err != nil {
		return "the erasure entry's inclusion proof does not verify"
	}
	if p.Entry.Type != EntryErased {
		return "the entry is a " + p.Entry.Type
	}
	var data erasedData
	if err := json.Unmarshal(p.Entry.Data, &data); err != nil {
		return "the erasure entry's data is malformed"
	}
	if data.RootID != p.RootID || data.Namespace != p.Namespace || !slices.Equal(data.Erased, p.Erased) {
		return "the erasure entry lists other records than the proof"
	}
	if len(p.Erased) == 0 || p.Erased[0].ID != p.RootID {
		return "the root is not the first erased record"
	}
	return ""
}

// strictDecode decodes exactly one JSON value; with known, unknown
// members are refused.
func strictDecode(b []byte, v any, known bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if known {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}
