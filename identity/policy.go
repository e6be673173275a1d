package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/gowebpki/jcs"
)

// Policy is what a verifier demands of a counterparty before transacting
// (SPEC §8, the reference's VerificationPolicy). The zero Policy is the ADP
// baseline: only the signature (with the agentId binding) and freshness are
// checked. Every other requirement is opt-in.
//
// The JSON form uses the ADP field names; Now and the two oracles are not
// serialized — a remote caller never chooses the verifier's clock or its
// revocation and reputation sources.
type Policy struct {
	// RequireValidSignature (default true when nil): the signature must
	// verify and the agentId must bind to the signing key.
	RequireValidSignature *bool `json:"requireValidSignature,omitempty"`
	// RequireFresh (default true when nil): Now must lie in
	// [issuedAt, validUntil].
	RequireFresh *bool `json:"requireFresh,omitempty"`
	// RequireEnforcedConstitution: constitution.enforced must be true.
	RequireEnforcedConstitution bool `json:"requireEnforcedConstitution,omitempty"`
	// RequiredHardConstraints: each id must be among the hard constraints.
	RequiredHardConstraints []string `json:"requiredHardConstraints,omitempty"`
	// RequireRedTeam: a redTeam attestation must be present.
	RequireRedTeam bool `json:"requireRedTeam,omitempty"`
	// MinRedTeamGrade ("" or A–F): when a redTeam attestation is present,
	// its grade must rank at or above this (A > B > C > D > F).
	MinRedTeamGrade string `json:"minRedTeamGrade,omitempty"`
	// MaxRedTeamHardFails (default 0 when nil): when a redTeam attestation
	// is present, it may list at most this many hard fails. As in the
	// reference, this check runs whenever a redTeam attestation is present.
	MaxRedTeamHardFails *int `json:"maxRedTeamHardFails,omitempty"`
	// RequireNonCustodial: capital.custody must be non_custodial.
	RequireNonCustodial bool `json:"requireNonCustodial,omitempty"`
	// MinAttestationLevel ("" or none, signed, registry_attested): the
	// operator attestation level must rank at or above this.
	MinAttestationLevel string `json:"minAttestationLevel,omitempty"`
	// RequireDeploymentHistory: history.summary.totalDecisions must be > 0.
	RequireDeploymentHistory bool `json:"requireDeploymentHistory,omitempty"`
	// RequireAuditAnchor: auditAnchor must be present.
	RequireAuditAnchor bool `json:"requireAuditAnchor,omitempty"`
	// RequireModelFingerprint: a model identity must be present.
	RequireModelFingerprint bool `json:"requireModelFingerprint,omitempty"`
	// AllowedModelDigests (when not empty): model.digest must be one of
	// these, compared exactly.
	AllowedModelDigests []string `json:"allowedModelDigests,omitempty"`
	// RequireProvenanceFor: each named top-level field needs a provenance
	// entry.
	RequireProvenanceFor []string `json:"requireProvenanceFor,omitempty"`
	// MinOperatorReputation: the operator's reputation must be at least
	// this. Enforced only when OperatorReputation is also set.
	MinOperatorReputation *float64 `json:"minOperatorReputation,omitempty"`

	// Now is the verifier's clock for the freshness check; the zero value
	// means time.Now().
	Now time.Time `json:"-"`
	// IsRevoked, when set, refuses a disclosure whose disclosureId or
	// agentId it reports revoked (SPEC §10.1); a RevocationList's IsRevoked
	// method fits.
	IsRevoked func(id string) bool `json:"-"`
	// OperatorReputation, when set together with MinOperatorReputation,
	// returns the operator's reputation; ok false (unknown operator) fails
	// the check.
	OperatorReputation func(operatorID string) (score float64, ok bool) `json:"-"`
}

func (p *Policy) requireSignature() bool {
	return p.RequireValidSignature == nil || *p.RequireValidSignature
}

func (p *Policy) requireFresh() bool { return p.RequireFresh == nil || *p.RequireFresh }

func (p *Policy) maxHardFails() int {
	if p.MaxRedTeamHardFails == nil {
		return 0
	}
	return *p.MaxRedTeamHardFails
}

// gradeRank ranks red-team grades, A highest.
func gradeRank(g string) (int, bool) {
	switch g {
	case "A":
		return 4, true
	case "B":
		return 3, true
	case "C":
		return 2, true
	case "D":
		return 1, true
	case "F":
		return 0, true
	}
	return 0, false
}

// levelRank ranks attestation levels, registry_attested highest.
func levelRank(l string) (int, bool) {
	switch l {
	case "none":
		return 0, true
	case "signed":
		return 1, true
	case "registry_attested":
		return 2, true
	}
	return 0, false
}

// Hash identifies the policy: the lowercase hex SHA-256 of the canonical
// JSON of its serializable fields with every default made explicit
// (requireValidSignature and requireFresh true, maxRedTeamHardFails 0,
// booleans false, unset minimums "" or null) and each list sorted and
// de-duplicated, so two policies that demand the same thing hash the same.
// Now and the oracles are not part of it.
func (p Policy) Hash() string {
	b := make([]byte, 0, 512)
	b = append(b, `{"allowedModelDigests":`...)
	b = appendStringSet(b, p.AllowedModelDigests)
	b = append(b, `,"maxRedTeamHardFails":`...)
	b = strconv.AppendInt(b, int64(p.maxHardFails()), 10)
	b = append(b, `,"minAttestationLevel":`...)
	b = jcsenc.AppendString(b, p.MinAttestationLevel)
	b = append(b, `,"minOperatorReputation":`...)
	b = appendOptFloat(b, p.MinOperatorReputation)
	b = append(b, `,"minRedTeamGrade":`...)
	b = jcsenc.AppendString(b, p.MinRedTeamGrade)
	b = append(b, `,"requireAuditAnchor":`...)
	b = strconv.AppendBool(b, p.RequireAuditAnchor)
	b = append(b, `,"requireDeploymentHistory":`...)
	b = strconv.AppendBool(b, p.RequireDeploymentHistory)
	b = append(b, `,"requireEnforcedConstitution":`...)
	b = strconv.AppendBool(b, p.RequireEnforcedConstitution)
	b = append(b, `,"requireFresh":`...)
	b = strconv.AppendBool(b, p.requireFresh())
	b = append(b, `,"requireModelFingerprint":`...)
	b = strconv.AppendBool(b, p.RequireModelFingerprint)
	b = append(b, `,"requireNonCustodial":`...)
	b = strconv.AppendBool(b, p.RequireNonCustodial)
	b = append(b, `,"requireProvenanceFor":`...)
	b = appendStringSet(b, p.RequireProvenanceFor)
	b = append(b, `,"requireRedTeam":`...)
	b = strconv.AppendBool(b, p.RequireRedTeam)
	b = append(b, `,"requireValidSignature":`...)
	b = strconv.AppendBool(b, p.requireSignature())
	b = append(b, `,"requiredHardConstraints":`...)
	b = appendStringSet(b, p.RequiredHardConstraints)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendStringSet writes ss sorted (UTF-16 order) and de-duplicated.
func appendStringSet(b []byte, ss []string) []byte {
	b = append(b, '[')
	if len(ss) > 0 {
		sorted := slices.Clone(ss)
		slices.SortFunc(sorted, compareUTF16)
		sorted = slices.Compact(sorted)
		for i, s := range sorted {
			if i > 0 {
				b = append(b, ',')
			}
			b = jcsenc.AppendString(b, s)
		}
	}
	return append(b, ']')
}

func appendOptFloat(b []byte, f *float64) []byte {
	if f == nil {
		return append(b, "null"...)
	}
	s, err := jcs.NumberToJSON(*f)
	if err != nil {
		// NaN and ±Inf have no JSON number form; a string keeps the hash
		// total (such a policy refuses every operator anyway).
		return jcsenc.AppendString(b, strconv.FormatFloat(*f, 'g', -1, 64))
	}
	return append(b, s...)
}

// maxPolicySize bounds the JSON ParsePolicy reads.
const maxPolicySize = 64 << 10

// ParsePolicy decodes a policy from JSON strictly: the document must be an
// object of known ADP policy fields with the declared types (null is not
// accepted for any field), minRedTeamGrade and minAttestationLevel must be
// valid enum values, maxRedTeamHardFails a non-negative integer and
// minOperatorReputation a finite number. Field names are matched exactly
// (encoding/json would also accept "RequireFresh"). "now" is refused like
// any unknown field: the clock is the verifier's. Errors match
// [ErrInvalidPolicy].
func ParsePolicy(data []byte) (Policy, error) {
	var p Policy
	if len(data) > maxPolicySize {
		return p, fmt.Errorf("%w: larger than %d bytes", ErrInvalidPolicy, maxPolicySize)
	}
	v, err := parseStrictJSON(string(data), 8)
	if err != nil {
		return Policy{}, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	if err := decodePolicy(&v, &p); err != nil {
		return Policy{}, fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
	}
	return p, nil
}

func decodePolicy(v *jsonValue, p *Policy) error {
	if err := wantObject(v); err != nil {
		return err
	}
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "requireValidSignature":
			var b bool
			b, err = decBool(m)
			p.RequireValidSignature = &b
		case "requireFresh":
			var b bool
			b, err = decBool(m)
			p.RequireFresh = &b
		case "requireEnforcedConstitution":
			p.RequireEnforcedConstitution, err = decBool(m)
		case "requiredHardConstraints":
			p.RequiredHardConstraints, err = decStringArray(m)
		case "requireRedTeam":
			p.RequireRedTeam, err = decBool(m)
		case "minRedTeamGrade":
			p.MinRedTeamGrade, err = decEnum(m, isGrade, "A, B, C, D, F")
		case "maxRedTeamHardFails":
			var n int64
			n, err = decUint53(m)
			if err == nil && n > math.MaxInt32 {
				err = mustBe("at most 2147483647")
			}
			limit := int(n)
			p.MaxRedTeamHardFails = &limit
		case "requireNonCustodial":
			p.RequireNonCustodial, err = decBool(m)
		case "minAttestationLevel":
			p.MinAttestationLevel, err = decEnum(m, isAttestationLevel, "none, signed, registry_attested")
		case "requireDeploymentHistory":
			p.RequireDeploymentHistory, err = decBool(m)
		case "requireAuditAnchor":
			p.RequireAuditAnchor, err = decBool(m)
		case "requireModelFingerprint":
			p.RequireModelFingerprint, err = decBool(m)
		case "allowedModelDigests":
			p.AllowedModelDigests, err = decStringArray(m)
		case "requireProvenanceFor":
			p.RequireProvenanceFor, err = decStringArray(m)
		case "minOperatorReputation":
			var f float64
			f, err = decFloat(m)
			p.MinOperatorReputation = &f
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	// An empty list asks for nothing; hold it as nil so that a policy and
	// its JSON round trip (where omitempty drops it) are the same value.
	for _, l := range []*[]string{&p.RequiredHardConstraints, &p.AllowedModelDigests, &p.RequireProvenanceFor} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	return nil
}

// validate reports enum and range errors in a programmatically built
// policy (ParsePolicy never produces one).
func (p *Policy) validate() error {
	var bad []string
	if _, ok := gradeRank(p.MinRedTeamGrade); p.MinRedTeamGrade != "" && !ok {
		bad = append(bad, "minRedTeamGrade")
	}
	if _, ok := levelRank(p.MinAttestationLevel); p.MinAttestationLevel != "" && !ok {
		bad = append(bad, "minAttestationLevel")
	}
	if p.MaxRedTeamHardFails != nil && *p.MaxRedTeamHardFails < 0 {
		bad = append(bad, "maxRedTeamHardFails")
	}
	if f := p.MinOperatorReputation; f != nil && (math.IsNaN(*f) || math.IsInf(*f, 0)) {
		bad = append(bad, "minOperatorReputation")
	}
	if bad != nil {
		return fmt.Errorf("%w: bad value of %s", ErrInvalidPolicy, strings.Join(bad, ", "))
	}
	return nil
}

// LoosenedError is returned by [Tighten] when the request would relax the
// base policy. Fields names every offending ADP policy field. It matches
// [ErrPolicyLoosened].
type LoosenedError struct {
	Fields []string
}

func (e *LoosenedError) Error() string {
	return "identity: request loosens the policy: " + strings.Join(e.Fields, ", ")
}

// Is reports whether target is ErrPolicyLoosened.
func (e *LoosenedError) Is(target error) bool { return target == ErrPolicyLoosened }

// Tighten returns the effective policy of a caller asking for req under a
// server's base policy. A request may only add requirements:
//
//   - requireValidSignature, requireFresh: may be turned on, never off
//     while base has them on (nil inherits base);
//   - the other booleans: OR (false means "nothing added");
//   - requiredHardConstraints, requireProvenanceFor: union;
//   - minRedTeamGrade, minAttestationLevel, minOperatorReputation: may be
//     raised, never lowered;
//   - maxRedTeamHardFails: may be lowered, never raised (base nil is 0);
//   - allowedModelDigests: may narrow base's set, never widen it. When base
//     has a set, every digest req names must be in it (the result, req's
//     set, is the intersection); when base has none, req's set applies.
//
// Any relaxation fails with a *LoosenedError naming each field (check with
// errors.Is(err, ErrPolicyLoosened)); an invalid enum or range in either
// policy fails with ErrInvalidPolicy. The clock and the oracles are the
// server's: Now and OperatorReputation come from base (req's reputation
// oracle only when base has none), and IsRevoked refuses an id either
// policy's oracle reports revoked.
func Tighten(base, req Policy) (Policy, error) {
	if err := base.validate(); err != nil {
		return Policy{}, fmt.Errorf("identity: base policy: %w", err)
	}
	if err := req.validate(); err != nil {
		return Policy{}, fmt.Errorf("identity: requested policy: %w", err)
	}
	out := base
	out.RequiredHardConstraints = slices.Clone(base.RequiredHardConstraints)
	out.AllowedModelDigests = slices.Clone(base.AllowedModelDigests)
	out.RequireProvenanceFor = slices.Clone(base.RequireProvenanceFor)
	var loosened []string

	tightenSwitch := func(name string, baseOn bool, reqv *bool, dst **bool) {
		if reqv == nil {
			return
		}
		if !*reqv && baseOn {
			loosened = append(loosened, name)
			return
		}
		v := *reqv
		*dst = &v
	}
	tightenSwitch("requireValidSignature", base.requireSignature(), req.RequireValidSignature, &out.RequireValidSignature)
	tightenSwitch("requireFresh", base.requireFresh(), req.RequireFresh, &out.RequireFresh)

	out.RequireEnforcedConstitution = base.RequireEnforcedConstitution || req.RequireEnforcedConstitution
	out.RequireRedTeam = base.RequireRedTeam || req.RequireRedTeam
	out.RequireNonCustodial = base.RequireNonCustodial || req.RequireNonCustodial
	out.RequireDeploymentHistory = base.RequireDeploymentHistory || req.RequireDeploymentHistory
	out.RequireAuditAnchor = base.RequireAuditAnchor || req.RequireAuditAnchor
	out.RequireModelFingerprint = base.RequireModelFingerprint || req.RequireModelFingerprint

	out.RequiredHardConstraints = union(out.RequiredHardConstraints, req.RequiredHardConstraints)
	out.RequireProvenanceFor = union(out.RequireProvenanceFor, req.RequireProvenanceFor)

	if req.MinRedTeamGrade != "" {
		r, _ := gradeRank(req.MinRedTeamGrade)
		b, baseSet := gradeRank(base.MinRedTeamGrade)
		switch {
		case baseSet && r < b:
			loosened = append(loosened, "minRedTeamGrade")
		case !baseSet || r > b:
			out.MinRedTeamGrade = req.MinRedTeamGrade
		}
	}
	if req.MinAttestationLevel != "" {
		r, _ := levelRank(req.MinAttestationLevel)
		b, baseSet := levelRank(base.MinAttestationLevel)
		switch {
		case baseSet && r < b:
			loosened = append(loosened, "minAttestationLevel")
		case !baseSet || r > b:
			out.MinAttestationLevel = req.MinAttestationLevel
		}
	}
	if req.MaxRedTeamHardFails != nil {
		if *req.MaxRedTeamHardFails > base.maxHardFails() {
			loosened = append(loosened, "maxRedTeamHardFails")
		} else {
			n := *req.MaxRedTeamHardFails
			out.MaxRedTeamHardFails = &n
		}
	}
	if req.MinOperatorReputation != nil {
		r := *req.MinOperatorReputation
		switch {
		case base.MinOperatorReputation != nil && r < *base.MinOperatorReputation:
			loosened = append(loosened, "minOperatorReputation")
		case base.MinOperatorReputation == nil || r > *base.MinOperatorReputation:
			out.MinOperatorReputation = &r
		}
	}
	if len(req.AllowedModelDigests) > 0 {
		widened := false
		if len(base.AllowedModelDigests) > 0 {
			for _, d := range req.AllowedModelDigests {
				if !slices.Contains(base.AllowedModelDigests, d) {
					widened = true
				}
			}
		}
		if widened {
			loosened = append(loosened, "allowedModelDigests")
		} else {
			out.AllowedModelDigests = union(nil, req.AllowedModelDigests)
		}
	}

	switch {
	case base.IsRevoked != nil && req.IsRevoked != nil:
		b, r := base.IsRevoked, req.IsRevoked
		out.IsRevoked = func(id string) bool { return b(id) || r(id) }
	case base.IsRevoked == nil:
		out.IsRevoked = req.IsRevoked
	}
	if base.OperatorReputation == nil {
		out.OperatorReputation = req.OperatorReputation
	}
	if loosened != nil {
		return Policy{}, &LoosenedError{Fields: loosened}
	}
	return out, nil
}

// union appends to dst the strings of add it does not hold yet.
func union(dst, add []string) []string {
	for _, s := range add {
		if !slices.Contains(dst, s) {
			dst = append(dst, s)
		}
	}
	return dst
}
