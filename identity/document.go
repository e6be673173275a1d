package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/gowebpki/jcs"
)

// DisclosureVersion is the only disclosure-document version ADP defines
// (SPEC §1); every document carries it in its version field.
const DisclosureVersion = 1

// Disclosure is an ADP disclosure document (SPEC §3): the signed content an
// agent exposes before it transacts. Field names are the exact ADP JSON names.
//
// Optional fields canonicalize away when unset (SPEC §4's "undefined is
// dropped"): optional objects and the optional integer are pointers,
// optional maps are omitted when nil (an empty non-nil map is written as
// {}), and optional strings are omitted when "". Required slices marshal as
// [] when nil. Integers are int64 (the schema bounds them to [0, 2^53-1]).
//
// One consequence: a received document that carries an optional string
// explicitly set to "" (which the schema allows) decodes to the same value
// as one that omits it, so re-canonicalizing the decoded value drops that
// member. [Verify] never re-canonicalizes — its Digest and signature check
// use the canonical form of what was received — so this only matters to a
// caller that re-signs or re-hashes a parsed foreign document.
type Disclosure struct {
	Version      int              `json:"version"`
	DisclosureID string           `json:"disclosureId"`
	AgentID      string           `json:"agentId"`
	IssuedAt     string           `json:"issuedAt"`
	ValidUntil   string           `json:"validUntil"`
	Nonce        string           `json:"nonce"`
	AuditAnchor  string           `json:"auditAnchor,omitempty"`
	SystemPrompt SystemPrompt     `json:"systemPrompt"`
	Constitution Constitution     `json:"constitution"`
	Tools        ToolInventory    `json:"tools"`
	Capital      Capital          `json:"capital"`
	Operator     OperatorIdentity `json:"operator"`
	History      History          `json:"history"`
	RedTeam      *RedTeam         `json:"redTeam,omitempty"`
	Model        *ModelIdentity   `json:"model,omitempty"`
	// Provenance is keyed by top-level field name ("constitution", ...).
	Provenance map[string]FieldProvenance `json:"provenance,omitzero"`
	// Extensions is keyed by reverse-domain id ("com.vendor.feature"); each
	// value is arbitrary JSON. A verifier acts only on keys it recognises.
	Extensions map[string]json.RawMessage `json:"extensions,omitzero"`
}

// SystemPrompt pins the agent's composed system prompt by digest (SPEC §3.2).
type SystemPrompt struct {
	Algorithm     string `json:"algorithm"` // always "sha256"
	Digest        string `json:"digest"`    // hex
	PromptVersion string `json:"promptVersion,omitempty"`
}

// Constitution is the declared rule set (SPEC §3.3). Enforced is the
// load-bearing field: true means the constraints are the gate that runs.
type Constitution struct {
	HardConstraints []HardConstraint `json:"hardConstraints"`
	// Parameters values are float64, string or bool (the schema allows
	// number, string and boolean only).
	Parameters          map[string]any `json:"parameters,omitzero"`
	Digest              string         `json:"digest"` // hex; see ConstitutionDigest
	Enforced            bool           `json:"enforced"`
	EnforcementEvidence string         `json:"enforcementEvidence,omitempty"`
}

// MarshalJSON writes a nil HardConstraints as [], because the field is
// required and null would not validate.
func (c Constitution) MarshalJSON() ([]byte, error) {
	type plain Constitution
	if c.HardConstraints == nil {
		c.HardConstraints = []HardConstraint{}
	}
	return json.Marshal(plain(c))
}

// HardConstraint is one entry of the deny-list. Kind is one of deny, cap,
// velocity, rationale, scope, other.
type HardConstraint struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Kind        string `json:"kind"`
}

// ToolInventory lists the agent's tool surface (SPEC §3.4).
type ToolInventory struct {
	Tools     []Tool `json:"tools"`
	ValuePath string `json:"valuePath,omitempty"`
}

// MarshalJSON writes a nil Tools as [] (the field is required).
func (t ToolInventory) MarshalJSON() ([]byte, error) {
	type plain ToolInventory
	if t.Tools == nil {
		t.Tools = []Tool{}
	}
	return json.Marshal(plain(t))
}

// Tool is one tool. Access is one of gated, read_only, operator_only.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Access      string `json:"access"`
	MovesValue  bool   `json:"movesValue"`
}

// Capital is the capital envelope (SPEC §3.5). Custody is non_custodial or
// custodial. Amounts are integer minor units no larger than 2^53-1.
type Capital struct {
	Mandates                   []MandateDisclosure `json:"mandates"`
	AggregatePerPeriodCapMinor *int64              `json:"aggregatePerPeriodCapMinor,omitempty"`
	Custody                    string              `json:"custody"`
	RiskModel                  *RiskModel          `json:"riskModel,omitempty"`
}

// MarshalJSON writes a nil Mandates as [] (the field is required).
func (c Capital) MarshalJSON() ([]byte, error) {
	type plain Capital
	if c.Mandates == nil {
		c.Mandates = []MandateDisclosure{}
	}
	return json.Marshal(plain(c))
}

// RiskModel names the declared risk classifier.
type RiskModel struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// MandateDisclosure is one granted spend mandate. Period is day, week or
// month; ExpiresAt is an ISO-8601 timestamp.
type MandateDisclosure struct {
	Label             string   `json:"label"`
	Scope             string   `json:"scope"`
	Currency          string   `json:"currency"`
	PerTxCapMinor     int64    `json:"perTxCapMinor"`
	PerPeriodCapMinor int64    `json:"perPeriodCapMinor"`
	Period            string   `json:"period"`
	AllowedRails      []string `json:"allowedRails"`
	ExpiresAt         string   `json:"expiresAt"`
}

// MarshalJSON writes a nil AllowedRails as [] (the field is required).
func (m MandateDisclosure) MarshalJSON() ([]byte, error) {
	type plain MandateDisclosure
	if m.AllowedRails == nil {
		m.AllowedRails = []string{}
	}
	return json.Marshal(plain(m))
}

// OperatorIdentity names the deploying party and its accountability
// statement (SPEC §3.6).
type OperatorIdentity struct {
	OperatorID          string      `json:"operatorId"`
	Attestation         Attestation `json:"attestation"`
	DeniabilityBoundary string      `json:"deniabilityBoundary"`
}

// Attestation is the operator's identity attestation. Scheme is AIP,
// VisaTAP, ERC8004, DID, none, or a reverse-domain id such as
// "com.visa.tap"; Level is none, signed or registry_attested.
type Attestation struct {
	Scheme   string `json:"scheme"`
	Level    string `json:"level"`
	Evidence string `json:"evidence,omitempty"`
}

// History is the deployment history summary anchored at an audit-chain head
// (SPEC §3.7).
type History struct {
	ChainAnchor      string         `json:"chainAnchor"` // hex
	Summary          HistorySummary `json:"summary"`
	VerificationHint string         `json:"verificationHint,omitempty"`
}

// HistorySummary holds the aggregate counts (integers no larger than 2^53-1).
type HistorySummary struct {
	TotalDecisions int64  `json:"totalDecisions"`
	SettledCount   int64  `json:"settledCount"`
	BlockedCount   int64  `json:"blockedCount"`
	FirstSeen      string `json:"firstSeen,omitempty"`
	LastActive     string `json:"lastActive,omitempty"`
}

// RedTeam is a red-team attestation against a public corpus (SPEC §3.8).
type RedTeam struct {
	Corpus         RedTeamCorpus `json:"corpus"`
	Result         RedTeamResult `json:"result"`
	AttestedAt     string        `json:"attestedAt"`
	AttestationRef string        `json:"attestationRef,omitempty"`
}

// RedTeamCorpus names the versioned public corpus.
type RedTeamCorpus struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// RedTeamResult is the graded outcome. Grade is A, B, C, D or F; Score is
// in [0, 100].
type RedTeamResult struct {
	Grade     string   `json:"grade"`
	Score     float64  `json:"score"`
	Passed    bool     `json:"passed"`
	HardFails []string `json:"hardFails"`
}

// MarshalJSON writes a nil HardFails as [] (the schema requires the field;
// the reference defaults it to []).
func (r RedTeamResult) MarshalJSON() ([]byte, error) {
	type plain RedTeamResult
	if r.HardFails == nil {
		r.HardFails = []string{}
	}
	return json.Marshal(plain(r))
}

// ModelIdentity is the declared model fingerprint (SPEC §3.9).
type ModelIdentity struct {
	Name                 string `json:"name"`
	FingerprintAlgorithm string `json:"fingerprintAlgorithm"` // always "sha256"
	Digest               string `json:"digest"`               // hex
}

// FieldProvenance says how a top-level field was derived (SPEC §3.10).
type FieldProvenance struct {
	DerivedFrom string `json:"derivedFrom"`
	AttestedBy  string `json:"attestedBy,omitempty"`
}

// Timestamp formats t the way the reference implementation formats every
// ADP timestamp (JavaScript's Date.prototype.toISOString): UTC, millisecond
// precision, "Z" suffix, e.g. 2026-06-24T12:30:00.000Z. Use it for issuedAt,
// validUntil and the other timestamp fields so that timestamps from every
// emitter compare the same way.
func Timestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// ConstitutionDigest computes constitution.digest the way the reference
// emitter does (DisclosureBuilder.constitution in src/builder.ts):
//
//	sha256Hex(JSON.stringify({ hardConstraints, parameters, enforced }))
//
// This is JSON.stringify, not the RFC 8785 canonical form: keys appear in
// insertion order, each hard constraint as {"id","description","kind"}, and
// parameters is left out when nil. Go maps have no insertion order, so
// parameters keys are written in the order a JavaScript object would list
// them had they been inserted sorted: integer-like keys ascending by value,
// then the others by UTF-16 code unit. enforcementEvidence is not covered.
//
// No verifier recomputes the digest — neither the reference nor [Verify]
// (the conformance fixtures carry arbitrary digests and expect transact) —
// so it is informative, for binding and diffing constitutions; a mismatch
// is never a refusal. Parameters values should be float64, string or bool;
// other values are written as their canonical JSON.
func ConstitutionDigest(c Constitution) string {
	b := make([]byte, 0, 256)
	b = append(b, `{"hardConstraints":[`...)
	for i, hc := range c.HardConstraints {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jcsenc.AppendString(b, hc.ID)
		b = append(b, `,"description":`...)
		b = jcsenc.AppendString(b, hc.Description)
		b = append(b, `,"kind":`...)
		b = jcsenc.AppendString(b, hc.Kind)
		b = append(b, '}')
	}
	b = append(b, ']')
	if c.Parameters != nil {
		b = append(b, `,"parameters":{`...)
		keys := make([]string, 0, len(c.Parameters))
		for k := range c.Parameters {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, jsPropertyOrder)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcsenc.AppendString(b, k)
			b = append(b, ':')
			b = appendStringifyScalar(b, c.Parameters[k])
		}
		b = append(b, '}')
	}
	b = append(b, `,"enforced":`...)
	b = strconv.AppendBool(b, c.Enforced)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// jsPropertyOrder orders object keys the way a JavaScript engine enumerates
// them when they were inserted in sorted order: array-index keys (canonical
// decimal integers below 2^32-1) first by numeric value, then the rest.
func jsPropertyOrder(a, b string) int {
	ai, aIdx := arrayIndex(a)
	bi, bIdx := arrayIndex(b)
	switch {
	case aIdx && bIdx:
		return cmpUint(ai, bi)
	case aIdx:
		return -1
	case bIdx:
		return 1
	}
	return compareUTF16(a, b)
}

func cmpUint(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// arrayIndex reports whether s is a JavaScript array index: "0" or a decimal
// integer without leading zeros below 2^32-1.
func arrayIndex(s string) (int64, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int64(s[i]-'0')
	}
	return n, n < math.MaxUint32
}

// appendStringifyScalar writes v as JSON.stringify would.
func appendStringifyScalar(b []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return jcsenc.AppendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case float64:
		s, err := jcs.NumberToJSON(x)
		if err != nil {
			return append(b, "null"...) // JSON.stringify(NaN) is "null"
		}
		return append(b, s...)
	case nil:
		return append(b, "null"...)
	}
	c, err := Canonicalize(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, c...)
}
