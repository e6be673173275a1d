package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors. Check with errors.Is.
var (
	// ErrMalformed: input is not structurally valid (not JSON, duplicate
	// keys, too large or deep, or not what the ADP schema allows).
	ErrMalformed = errors.New("identity: malformed input")
	// ErrAgentID: an agentId is neither 64 hex digits nor an Ed25519 did:key.
	ErrAgentID = errors.New("identity: agentId does not name an Ed25519 key")
	// ErrInvalidSignature: an Ed25519 signature does not verify.
	ErrInvalidSignature = errors.New("identity: signature does not verify")
	// ErrKeyBinding: an agentId is not bound to the key that signed.
	ErrKeyBinding = errors.New("identity: agentId is not bound to the signing key")
	// ErrRotationChain: a rotation chain does not link agentId to a key.
	ErrRotationChain = errors.New("identity: invalid rotation chain")
	// ErrPolicyLoosened: a requested policy would relax the base policy;
	// the error is a *LoosenedError naming the fields.
	ErrPolicyLoosened = errors.New("identity: request loosens the policy")
	// ErrInvalidPolicy: a policy has an unknown field, a bad type or an
	// out-of-range value.
	ErrInvalidPolicy = errors.New("identity: invalid policy")
	// ErrTampered: content does not recompute to the hash or commitment
	// that covers it (a transparency-log entry, a revealed field).
	ErrTampered = errors.New("identity: content does not match its hash")
)

// Outcomes of a [Decision].
const (
	OutcomeTransact = "transact"
	OutcomeRefuse   = "refuse"
)

// Check names, as reported in [Decision].Checks and Failed. They are the
// reference's names, which the conformance fixtures compare.
const (
	CheckSchema                  = "schema"
	CheckSignature               = "signature"
	CheckFreshness               = "freshness"
	CheckEnforcedConstitution    = "enforcedConstitution"
	CheckRequiredHardConstraints = "requiredHardConstraints"
	CheckRedTeamPresent          = "redTeamPresent"
	CheckRedTeamGrade            = "redTeamGrade"
	CheckRedTeamHardFails        = "redTeamHardFails"
	CheckNonCustodial            = "nonCustodial"
	CheckAttestationLevel        = "attestationLevel"
	CheckDeploymentHistory       = "deploymentHistory"
	CheckAuditAnchor             = "auditAnchor"
	CheckModelFingerprint        = "modelFingerprint"
	CheckModelDigest             = "modelDigest"
	CheckProvenance              = "provenance"
	CheckRevocation              = "revocation"
	CheckOperatorReputation      = "operatorReputation"
)

// Check is the result of one predicate. Reason says why it failed.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Decision is the verdict of [Verify]: transact only when no check failed.
// Failed lists the failed checks' names in evaluation order. Digest is the
// lowercase hex SHA-256 of the canonical disclosure document (the
// transparency-log digest, SPEC §10.2). RotationChain is the envelope's
// chain as carried, for a handshake with the same identity
// ([HandshakePolicy].RotationChain, where VerifyResponse verifies it); it
// was verified here only if the binding needed it. AgentID, DisclosureID, Digest,
// Disclosure and RotationChain are empty when the input did not parse;
// Envelope is set once the envelope's shape is known.
type Decision struct {
	Outcome       string              `json:"outcome"`
	Checks        []Check             `json:"checks"`
	Failed        []string            `json:"failed"`
	PolicyHash    string              `json:"policyHash"`
	Envelope      string              `json:"envelope"`
	AgentID       string              `json:"agentId"`
	DisclosureID  string              `json:"disclosureId"`
	Digest        string              `json:"digest"`
	Disclosure    *Disclosure         `json:"disclosure,omitempty"`
	RotationChain []RotationStatement `json:"rotationChain,omitempty"`
}

func (d *Decision) record(name string, ok bool, reason string) {
	if ok {
		reason = ""
	}
	d.Checks = append(d.Checks, Check{Name: name, OK: ok, Reason: reason})
}

// Verify evaluates a signed disclosure (either envelope) against p and never
// fails otherwise: malformed input is a refusal with the check "schema".
//
// The order is SPEC's: discriminate the envelope by shape (§3.12.3);
// validate it structurally (§3.11, see [ParseDisclosure]; at most
// [MaxEnvelopeSize] bytes), where a failure stops everything; canonicalize
// the document; then, each reported on its own, the signature — v1 over the
// canonical bytes; v2 with alg EdDSA, a 32-byte jwk.x and a payload that is
// exactly the canonical document — together with the agentId binding and
// rotation chain (§5); freshness (§6); and every enabled policy predicate
// (§8). Every failed check is reported.
//
// Freshness compares instants: issuedAt and validUntil must be RFC 3339
// timestamps in UTC ("Z"), with optional fractional seconds, and p.Now
// (time.Now() when zero) must lie between them inclusive. The reference
// compares the strings lexically, which agrees for the zero-padded UTC form
// it emits ([Timestamp]); for any other form lexical order is not time
// order, so such a timestamp fails the check rather than being misjudged.
//
// The revocation oracle is asked about the disclosureId, the agentId as
// written and, when it names a key, that key's hex and did:key forms and
// those of the signing key, so a list keyed by either form catches it.
func Verify(raw []byte, p Policy) Decision {
	d := Decision{Outcome: OutcomeRefuse, PolicyHash: p.Hash(), Checks: make([]Check, 0, 8)}
	env, err := parseEnvelope(raw)
	d.Envelope = env.kind
	if err != nil {
		d.record(CheckSchema, false, "malformed disclosure: "+err.Error())
		return d.finish()
	}
	doc := env.doc
	d.AgentID = doc.AgentID
	d.DisclosureID = doc.DisclosureID
	sum := sha256.Sum256(env.canon)
	d.Digest = hex.EncodeToString(sum[:])
	d.Disclosure = doc
	d.RotationChain = env.chain

	if p.requireSignature() {
		err := env.verifySignature()
		d.record(CheckSignature, err == nil, reasonOf(err))
	}
	if p.requireFresh() {
		now := p.Now
		if now.IsZero() {
			now = time.Now()
		}
		ok, reason := fresh(doc, now)
		d.record(CheckFreshness, ok, reason)
	}
	evaluatePredicates(&d, doc, &p, env.signingKey())
	return d.finish()
}

func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (d *Decision) finish() Decision {
	d.Failed = make([]string, 0, 2)
	for _, c := range d.Checks {
		if !c.OK {
			d.Failed = append(d.Failed, c.Name)
		}
	}
	if len(d.Failed) == 0 {
		d.Outcome = OutcomeTransact
	}
	return *d
}

// signingKey returns the envelope's claimed signing key, or nil when it is
// not a well-formed 32-byte key.
func (env *envelope) signingKey() ed25519.PublicKey {
	var k []byte
	var err error
	if env.kind == EnvelopeJWS {
		k, err = b64.DecodeString(env.x)
	} else {
		k, err = hex.DecodeString(env.sig.PublicKey)
	}
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil
	}
	return k
}

// verifySignature checks the envelope's signature and the agentId binding.
func (env *envelope) verifySignature() error {
	pub := env.signingKey()
	if env.kind == EnvelopeJWS {
		if err := checkProtectedHeader(env.protected); err != nil {
			return err
		}
		if pub == nil {
			return fmt.Errorf("jwk.x is not a 32-byte Ed25519 key: %w", ErrInvalidSignature)
		}
		sig, err := b64.DecodeString(env.signature)
		if err != nil || len(sig) != ed25519.SignatureSize {
			return fmt.Errorf("jws signature is not 64 base64url bytes: %w", ErrInvalidSignature)
		}
		input := make([]byte, 0, len(env.protected)+1+len(env.payload))
		input = append(append(append(input, env.protected...), '.'), env.payload...)
		if !ed25519.Verify(pub, input, sig) {
			return fmt.Errorf("jws signature mismatch: %w", ErrInvalidSignature)
		}
		// The signature covers the payload bytes as sent; ADP requires
		// them to be the canonical document, so that the bytes signed in
		// both envelopes are the same and Digest names what was signed.
		if !bytes.Equal(env.payloadBytes, env.canon) {
			return fmt.Errorf("jws payload is not the canonical (RFC 8785) form of the disclosure: %w", ErrInvalidSignature)
		}
	} else {
		if pub == nil {
			return fmt.Errorf("signature.publicKey is not a 32-byte Ed25519 key: %w", ErrInvalidSignature)
		}
		sig, err := hex.DecodeString(env.sig.Value)
		if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, env.canon, sig) {
			return fmt.Errorf("signature mismatch: %w", ErrInvalidSignature)
		}
	}
	return VerifyKeyBinding(env.doc.AgentID, pub, env.chain)
}

// checkProtectedHeader requires the JWS protected header to be a JSON
// object declaring alg EdDSA (SPEC §3.12.2 step 1). A header with "crit" is
// refused: it would name extensions (such as RFC 7797's unencoded payload)
// this verifier does not implement.
func checkProtectedHeader(protected string) error {
	raw, err := b64.DecodeString(protected)
	if err != nil {
		return fmt.Errorf("unreadable protected header: %w", ErrInvalidSignature)
	}
	if string(raw) == jwsProtected {
		return nil
	}
	v, err := parseStrictJSON(string(raw), 8)
	if err != nil || v.kind != kindObject {
		return fmt.Errorf("unreadable protected header: %w", ErrInvalidSignature)
	}
	if v.member("crit") != nil {
		return fmt.Errorf("protected header has crit: %w", ErrInvalidSignature)
	}
	alg := v.member("alg")
	if alg == nil || alg.kind != kindString || alg.text != "EdDSA" {
		return fmt.Errorf("unsupported JWS alg (want EdDSA): %w", ErrInvalidSignature)
	}
	return nil
}

// fresh reports whether now lies in [issuedAt, validUntil].
func fresh(doc *Disclosure, now time.Time) (bool, string) {
	issued, ok := parseUTCTimestamp(doc.IssuedAt)
	if !ok {
		return false, "issuedAt " + quoteForError(doc.IssuedAt) + " is not an RFC 3339 UTC timestamp"
	}
	until, ok := parseUTCTimestamp(doc.ValidUntil)
	if !ok {
		return false, "validUntil " + quoteForError(doc.ValidUntil) + " is not an RFC 3339 UTC timestamp"
	}
	switch {
	case now.Before(issued):
		return false, "disclosure not yet valid (issued at " + doc.IssuedAt + ", now " + Timestamp(now) + ")"
	case now.After(until):
		return false, "disclosure not fresh (valid until " + doc.ValidUntil + ", now " + Timestamp(now) + ")"
	}
	return true, ""
}

// parseUTCTimestamp parses YYYY-MM-DDTHH:MM:SS[.fraction]Z (1 to 9
// fraction digits), the UTC subset of RFC 3339 every ADP emitter writes.
func parseUTCTimestamp(s string) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for j := i; j < i+n; j++ {
			if !isDigit(s[j]) {
				return 0, false
			}
			v = v*10 + int(s[j]-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, false
	}
	nsec := 0
	rest := s[19:]
	if rest[0] == '.' {
		if len(rest) < 3 {
			return time.Time{}, false
		}
		frac := rest[1 : len(rest)-1]
		if len(frac) < 1 || len(frac) > 9 || !allDigits(frac) {
			return time.Time{}, false
		}
		n, _ := strconv.Atoi(frac)
		for range 9 - len(frac) {
			n *= 10
		}
		nsec = n
		rest = rest[len(rest)-1:]
	}
	if rest != "Z" || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day { // 2026-02-30 normalizes into March
		return time.Time{}, false
	}
	return t, true
}

// evaluatePredicates runs the opt-in policy predicates of SPEC §8 in the
// reference's order. signingKey may be nil.
func evaluatePredicates(d *Decision, doc *Disclosure, p *Policy, signingKey ed25519.PublicKey) {
	if p.RequireEnforcedConstitution {
		d.record(CheckEnforcedConstitution, doc.Constitution.Enforced, "constitution is declared but not enforced at runtime")
	}
	if len(p.RequiredHardConstraints) > 0 {
		var missing []string
		for _, id := range p.RequiredHardConstraints {
			found := false
			for _, hc := range doc.Constitution.HardConstraints {
				if hc.ID == id {
					found = true
					break
				}
			}
			if !found {
				missing = append(missing, id)
			}
		}
		d.record(CheckRequiredHardConstraints, missing == nil, "missing required hard constraints: "+strings.Join(missing, ", "))
	}
	switch rt := doc.RedTeam; {
	case rt == nil && p.RequireRedTeam:
		d.record(CheckRedTeamPresent, false, "no red-team attestation")
	case rt != nil:
		if p.RequireRedTeam {
			d.record(CheckRedTeamPresent, true, "")
		}
		if p.MinRedTeamGrade != "" {
			want, okWant := gradeRank(p.MinRedTeamGrade)
			got, _ := gradeRank(rt.Result.Grade)
			reason := "red-team grade " + rt.Result.Grade + " below minimum " + p.MinRedTeamGrade
			if !okWant {
				reason = "policy minRedTeamGrade " + quoteForError(p.MinRedTeamGrade) + " is not a grade"
			}
			d.record(CheckRedTeamGrade, okWant && got >= want, reason)
		}
		limit := p.maxHardFails()
		d.record(CheckRedTeamHardFails, len(rt.Result.HardFails) <= limit,
			fmt.Sprintf("red-team hard-fails %d exceed max %d", len(rt.Result.HardFails), limit))
	}
	if p.RequireNonCustodial {
		d.record(CheckNonCustodial, doc.Capital.Custody == "non_custodial", "operation is custodial")
	}
	if p.MinAttestationLevel != "" {
		want, okWant := levelRank(p.MinAttestationLevel)
		got, _ := levelRank(doc.Operator.Attestation.Level)
		reason := "attestation level " + doc.Operator.Attestation.Level + " below " + p.MinAttestationLevel
		if !okWant {
			reason = "policy minAttestationLevel " + quoteForError(p.MinAttestationLevel) + " is not a level"
		}
		d.record(CheckAttestationLevel, okWant && got >= want, reason)
	}
	if p.RequireDeploymentHistory {
		d.record(CheckDeploymentHistory, doc.History.Summary.TotalDecisions > 0, "no deployment history")
	}
	if p.RequireAuditAnchor {
		d.record(CheckAuditAnchor, doc.AuditAnchor != "", "disclosure is not bound to an audit anchor")
	}
	if p.RequireModelFingerprint {
		d.record(CheckModelFingerprint, doc.Model != nil, "no declared model identity")
	}
	if len(p.AllowedModelDigests) > 0 {
		switch {
		case doc.Model == nil:
			d.record(CheckModelDigest, false, "no declared model to match")
		default:
			ok := false
			for _, a := range p.AllowedModelDigests {
				if a == doc.Model.Digest {
					ok = true
					break
				}
			}
			d.record(CheckModelDigest, ok, "declared model digest is not in the allowed set")
		}
	}
	if len(p.RequireProvenanceFor) > 0 {
		var missing []string
		for _, f := range p.RequireProvenanceFor {
			if _, ok := doc.Provenance[f]; !ok {
				missing = append(missing, f)
			}
		}
		d.record(CheckProvenance, missing == nil, "missing provenance for: "+strings.Join(missing, ", "))
	}
	if p.IsRevoked != nil {
		revoked := ""
		for _, id := range revocationIDs(doc, signingKey) {
			if p.IsRevoked(id) {
				revoked = id
				break
			}
		}
		d.record(CheckRevocation, revoked == "", "disclosure or agent identity is revoked ("+quoteForError(revoked)+")")
	}
	if p.OperatorReputation != nil && p.MinOperatorReputation != nil {
		score, known := p.OperatorReputation(doc.Operator.OperatorID)
		minimum := *p.MinOperatorReputation
		switch {
		case !known:
			d.record(CheckOperatorReputation, false, "operator reputation is unknown")
		default:
			d.record(CheckOperatorReputation, score >= minimum,
				fmt.Sprintf("operator reputation %s below minimum %s",
					strconv.FormatFloat(score, 'f', 2, 64), strconv.FormatFloat(minimum, 'g', -1, 64)))
		}
	}
}

// revocationIDs lists the ids a revocation oracle is asked about.
func revocationIDs(doc *Disclosure, signingKey ed25519.PublicKey) []string {
	ids := make([]string, 0, 6)
	add := func(id string) {
		for _, have := range ids {
			if have == id {
				return
			}
		}
		ids = append(ids, id)
	}
	add(doc.DisclosureID)
	add(doc.AgentID)
	if k, err := PublicKeyOf(doc.AgentID); err == nil {
		add(hex.EncodeToString(k))
		add(DIDKey(k))
	}
	if signingKey != nil {
		add(hex.EncodeToString(signingKey))
		add(DIDKey(signingKey))
	}
	return ids
}
