package identity

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Structural validation (SPEC §3.11) is hand-written rather than run through
// a generic JSON Schema engine: it is on the path of every verification, and
// walking the parsed tree once while filling the typed [Disclosure] costs a
// few microseconds where a reflective validator plus a second decode would
// cost many times that. It implements every rule of disclosure.schema.json,
// signed-disclosure.schema.json and jws-signed-disclosure.schema.json —
// types, required members, additionalProperties: false, enums and consts,
// the hex and reverse-domain patterns, integer minimums and maximums, the
// attestation-scheme union — and a differential test holds it to the
// verdicts of an independent validator (santhosh-tekuri/jsonschema) run on
// the official schema files.
//
// It is stricter than a schema validator in three ways, all refusals of
// input no conformant emitter produces: duplicate object keys, nesting
// deeper than maxJSONDepth, and numbers outside the IEEE 754 double range
// (which have no canonical form, so could never be signed) are refused.

const (
	// MaxEnvelopeSize is the largest input [Verify] and [ParseDisclosure]
	// read, 256 KiB. A typical disclosure is 1–3 KiB; the bound caps the
	// memory and CPU an unauthenticated caller can make a verifier spend.
	MaxEnvelopeSize = 256 << 10

	// maxJSONDepth bounds nesting in any JSON this package parses. A
	// disclosure envelope nests 6 deep; the headroom is for extensions.
	maxJSONDepth = 64
)

// schemaError is a structural-validation failure with the JSON path where it
// was found, e.g. "disclosure.capital.custody: must be one of …". It matches
// ErrMalformed.
type schemaError struct {
	path string
	msg  string
}

func (e *schemaError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

func (e *schemaError) Unwrap() error { return ErrMalformed }

// at prefixes err's path with the member name or [index] it was found under.
// Errors are built only on failure, so the happy path allocates nothing here.
func at(seg string, err error) error {
	se, ok := err.(*schemaError)
	if !ok {
		return err
	}
	switch {
	case se.path == "":
		se.path = seg
	case se.path[0] == '[':
		se.path = seg + se.path
	default:
		se.path = seg + "." + se.path
	}
	return se
}

func atIndex(i int, err error) error { return at("["+strconv.Itoa(i)+"]", err) }

func mustBe(what string) error { return &schemaError{msg: "must be " + what} }

func unknownField(k string) error {
	return &schemaError{path: k, msg: "unknown field (additionalProperties is false)"}
}

// missing reports the first required member not seen. names lists the
// required members in bit order: bit i of seen is set when names' i-th word
// was present.
func missing(names string, seen uint32) error {
	i := 0
	for name := range strings.FieldsSeq(names) {
		if seen&(1<<i) == 0 {
			return &schemaError{path: name, msg: "required field is missing"}
		}
		i++
	}
	return nil
}

func wantObject(v *jsonValue) error {
	if v.kind != kindObject {
		return mustBe("an object")
	}
	return nil
}

func decString(v *jsonValue) (string, error) {
	if v.kind != kindString {
		return "", mustBe("a string")
	}
	return v.text, nil
}

func decBool(v *jsonValue) (bool, error) {
	switch v.kind {
	case kindTrue:
		return true, nil
	case kindFalse:
		return false, nil
	}
	return false, mustBe("a boolean")
}

func decHex(v *jsonValue) (string, error) {
	s, err := decString(v)
	if err != nil {
		return "", err
	}
	if !isHex(s) {
		return "", mustBe("a hex string (^[0-9a-fA-F]+$)")
	}
	return s, nil
}

func decConst(v *jsonValue, want string) error {
	if v.kind != kindString || v.text != want {
		return mustBe(strconv.Quote(want))
	}
	return nil
}

func decEnum(v *jsonValue, ok func(string) bool, list string) (string, error) {
	if v.kind != kindString || !ok(v.text) {
		return "", mustBe("one of " + list)
	}
	return v.text, nil
}

func decStringArray(v *jsonValue) ([]string, error) {
	if v.kind != kindArray {
		return nil, mustBe("an array")
	}
	out := make([]string, len(v.vals))
	for i := range v.vals {
		s, err := decString(&v.vals[i])
		if err != nil {
			return nil, atIndex(i, err)
		}
		out[i] = s
	}
	return out, nil
}

// maxSafeInteger is the schema's maximum for every integer field (2^53-1).
const maxSafeInteger = 1<<53 - 1

// decUint53 reads a JSON Schema "integer" with minimum 0 and maximum 2^53-1.
// Like the schema, it judges the exact decimal value: 5, 5.0 and 5e0 are
// the integer 5, while 5.000000000000000001 is not an integer at all.
func decUint53(v *jsonValue) (int64, error) {
	if v.kind != kindNumber {
		return 0, mustBe("an integer")
	}
	if lit := v.text; len(lit) <= 16 && allDigits(lit) {
		n, err := strconv.ParseInt(lit, 10, 64)
		if err == nil && n <= maxSafeInteger {
			return n, nil
		}
	}
	d := parseDecimal(v.text)
	if d.digits == "" {
		return 0, nil
	}
	if d.exp < 0 {
		return 0, mustBe("an integer")
	}
	if d.neg {
		return 0, mustBe("an integer ≥ 0")
	}
	if len(d.digits)+d.exp > 16 {
		return 0, mustBe("an integer ≤ 9007199254740991")
	}
	n, _ := strconv.ParseInt(d.digits, 10, 64)
	for range d.exp {
		n *= 10
	}
	if n > maxSafeInteger {
		return 0, mustBe("an integer ≤ 9007199254740991")
	}
	return n, nil
}

// decFloat reads a JSON Schema "number" as a double. A number outside the
// double range is refused because it has no canonical form.
func decFloat(v *jsonValue) (float64, error) {
	if v.kind != kindNumber {
		return 0, mustBe("a number")
	}
	f, err := strconv.ParseFloat(v.text, 64)
	if err != nil {
		return 0, mustBe("a number within the IEEE 754 double range")
	}
	return f, nil
}

// decimal is the exact value of a JSON number literal:
// (-1)^neg × digits × 10^exp, digits without leading or trailing zeros, ""
// for zero.
type decimal struct {
	neg    bool
	digits string
	exp    int
}

func parseDecimal(lit string) decimal {
	var d decimal
	s := lit
	if s != "" && s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	e := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		es := s[i+1:]
		s = s[:i]
		neg := false
		if es != "" && (es[0] == '+' || es[0] == '-') {
			neg = es[0] == '-'
			es = es[1:]
		}
		for j := 0; j < len(es); j++ {
			// Saturate: 10^±1e9 is beyond any bound checked here, and
			// saturating keeps the arithmetic below from overflowing.
			if e < 1e9 {
				e = e*10 + int(es[j]-'0')
			}
		}
		if neg {
			e = -e
		}
	}
	intPart, frac, _ := strings.Cut(s, ".")
	all := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(all, "0")
	if trimmed == "" {
		return decimal{}
	}
	d.digits = trimmed
	d.exp = e - len(frac) + (len(all) - len(trimmed))
	return d
}

// isOne reports whether the literal is exactly 1 (the schema's const 1).
func isOne(lit string) bool {
	if lit == "1" {
		return true
	}
	d := parseDecimal(lit)
	return !d.neg && d.digits == "1" && d.exp == 0
}

// between0and100 reports whether the literal lies in [0, 100] exactly.
func between0and100(lit string) bool {
	d := parseDecimal(lit)
	if d.digits == "" {
		return true
	}
	if d.neg {
		return false
	}
	switch mag := len(d.digits) + d.exp; {
	case mag < 3:
		return true
	case mag > 3:
		return false
	}
	return d.digits == "1" && d.exp == 2
}

// Enumerations of disclosure.schema.json (constraints.json).

func isConstraintKind(s string) bool {
	switch s {
	case "deny", "cap", "velocity", "rationale", "scope", "other":
		return true
	}
	return false
}

func isToolAccess(s string) bool {
	switch s {
	case "gated", "read_only", "operator_only":
		return true
	}
	return false
}

func isMandatePeriod(s string) bool {
	switch s {
	case "day", "week", "month":
		return true
	}
	return false
}

func isCustody(s string) bool { return s == "non_custodial" || s == "custodial" }

func isAttestationLevel(s string) bool {
	return s == "none" || s == "signed" || s == "registry_attested"
}

func isGrade(s string) bool {
	switch s {
	case "A", "B", "C", "D", "F":
		return true
	}
	return false
}

// isAttestationScheme: a known scheme or a reverse-domain namespace id.
func isAttestationScheme(s string) bool {
	switch s {
	case "AIP", "VisaTAP", "ERC8004", "DID", "none":
		return true
	}
	return isReverseDomain(s)
}

// isReverseDomain matches ^[a-z0-9]+(\.[a-z0-9-]+)+$ ("com.visa.tap").
func isReverseDomain(s string) bool {
	first, rest, ok := strings.Cut(s, ".")
	if !ok || first == "" {
		return false
	}
	for i := 0; i < len(first); i++ {
		if c := first[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	for {
		seg, more, found := strings.Cut(rest, ".")
		if seg == "" {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
		if !found {
			return true
		}
		rest = more
	}
}

const disclosureRequired = "version disclosureId agentId issuedAt validUntil nonce systemPrompt constitution tools capital operator history"

// decodeDisclosure validates v against disclosure.schema.json and fills d.
func decodeDisclosure(v *jsonValue, d *Disclosure) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "version":
			seen |= 1 << 0
			if m.kind != kindNumber || !isOne(m.text) {
				err = mustBe("the number 1")
			}
			d.Version = DisclosureVersion
		case "disclosureId":
			seen |= 1 << 1
			d.DisclosureID, err = decString(m)
		case "agentId":
			seen |= 1 << 2
			d.AgentID, err = decString(m)
		case "issuedAt":
			seen |= 1 << 3
			d.IssuedAt, err = decString(m)
		case "validUntil":
			seen |= 1 << 4
			d.ValidUntil, err = decString(m)
		case "nonce":
			seen |= 1 << 5
			d.Nonce, err = decString(m)
		case "auditAnchor":
			d.AuditAnchor, err = decHex(m)
		case "systemPrompt":
			seen |= 1 << 6
			err = decodeSystemPrompt(m, &d.SystemPrompt)
		case "constitution":
			seen |= 1 << 7
			err = decodeConstitution(m, &d.Constitution)
		case "tools":
			seen |= 1 << 8
			err = decodeTools(m, &d.Tools)
		case "capital":
			seen |= 1 << 9
			err = decodeCapital(m, &d.Capital)
		case "operator":
			seen |= 1 << 10
			err = decodeOperator(m, &d.Operator)
		case "history":
			seen |= 1 << 11
			err = decodeHistory(m, &d.History)
		case "redTeam":
			d.RedTeam = new(RedTeam)
			err = decodeRedTeam(m, d.RedTeam)
		case "model":
			d.Model = new(ModelIdentity)
			err = decodeModel(m, d.Model)
		case "provenance":
			d.Provenance, err = decodeProvenance(m)
		case "extensions":
			d.Extensions, err = decodeExtensions(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<12-1 {
		return missing(disclosureRequired, seen)
	}
	return nil
}

func decodeSystemPrompt(v *jsonValue, sp *SystemPrompt) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "algorithm":
			seen |= 1 << 0
			err = decConst(m, "sha256")
			sp.Algorithm = "sha256"
		case "digest":
			seen |= 1 << 1
			sp.Digest, err = decHex(m)
		case "promptVersion":
			sp.PromptVersion, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return missing("algorithm digest", seen)
	}
	return nil
}

func decodeConstitution(v *jsonValue, c *Constitution) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "hardConstraints":
			seen |= 1 << 0
			c.HardConstraints, err = decodeHardConstraints(m)
		case "parameters":
			c.Parameters, err = decodeParameters(m)
		case "digest":
			seen |= 1 << 1
			c.Digest, err = decHex(m)
		case "enforced":
			seen |= 1 << 2
			c.Enforced, err = decBool(m)
		case "enforcementEvidence":
			c.EnforcementEvidence, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return missing("hardConstraints digest enforced", seen)
	}
	return nil
}

func decodeHardConstraints(v *jsonValue) ([]HardConstraint, error) {
	if v.kind != kindArray {
		return nil, mustBe("an array")
	}
	out := make([]HardConstraint, len(v.vals))
	for n := range v.vals {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return nil, atIndex(n, err)
		}
		hc := &out[n]
		var seen uint32
		for i, k := range e.keys {
			m := &e.vals[i]
			var err error
			switch k {
			case "id":
				seen |= 1 << 0
				hc.ID, err = decString(m)
			case "description":
				seen |= 1 << 1
				hc.Description, err = decString(m)
			case "kind":
				seen |= 1 << 2
				hc.Kind, err = decEnum(m, isConstraintKind, "deny, cap, velocity, rationale, scope, other")
			default:
				return nil, atIndex(n, unknownField(k))
			}
			if err != nil {
				return nil, atIndex(n, at(k, err))
			}
		}
		if seen != 1<<3-1 {
			return nil, atIndex(n, missing("id description kind", seen))
		}
	}
	return out, nil
}

func decodeParameters(v *jsonValue) (map[string]any, error) {
	if err := wantObject(v); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(v.keys))
	for i, k := range v.keys {
		m := &v.vals[i]
		switch m.kind {
		case kindString:
			out[k] = m.text
		case kindTrue, kindFalse:
			out[k] = m.kind == kindTrue
		case kindNumber:
			f, err := decFloat(m)
			if err != nil {
				return nil, at(k, err)
			}
			out[k] = f
		default:
			return nil, at(k, mustBe("a number, string or boolean"))
		}
	}
	return out, nil
}

func decodeTools(v *jsonValue, t *ToolInventory) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "tools":
			seen |= 1 << 0
			t.Tools, err = decodeToolList(m)
		case "valuePath":
			t.ValuePath, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1 {
		return missing("tools", seen)
	}
	return nil
}

func decodeToolList(v *jsonValue) ([]Tool, error) {
	if v.kind != kindArray {
		return nil, mustBe("an array")
	}
	out := make([]Tool, len(v.vals))
	for n := range v.vals {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return nil, atIndex(n, err)
		}
		t := &out[n]
		var seen uint32
		for i, k := range e.keys {
			m := &e.vals[i]
			var err error
			switch k {
			case "name":
				seen |= 1 << 0
				t.Name, err = decString(m)
			case "access":
				seen |= 1 << 1
				t.Access, err = decEnum(m, isToolAccess, "gated, read_only, operator_only")
			case "movesValue":
				seen |= 1 << 2
				t.MovesValue, err = decBool(m)
			case "description":
				t.Description, err = decString(m)
			default:
				return nil, atIndex(n, unknownField(k))
			}
			if err != nil {
				return nil, atIndex(n, at(k, err))
			}
		}
		if seen != 1<<3-1 {
			return nil, atIndex(n, missing("name access movesValue", seen))
		}
	}
	return out, nil
}

func decodeCapital(v *jsonValue, c *Capital) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "mandates":
			seen |= 1 << 0
			c.Mandates, err = decodeMandates(m)
		case "custody":
			seen |= 1 << 1
			c.Custody, err = decEnum(m, isCustody, "non_custodial, custodial")
		case "aggregatePerPeriodCapMinor":
			var n int64
			n, err = decUint53(m)
			c.AggregatePerPeriodCapMinor = &n
		case "riskModel":
			c.RiskModel = new(RiskModel)
			c.RiskModel.Name, c.RiskModel.Version, err = decodeNameVersion(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return missing("mandates custody", seen)
	}
	return nil
}

// decodeNameVersion reads the {name, version} shape of riskModel and
// redTeam.corpus.
func decodeNameVersion(v *jsonValue) (name, version string, err error) {
	if err := wantObject(v); err != nil {
		return "", "", err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		switch k {
		case "name":
			seen |= 1 << 0
			name, err = decString(m)
		case "version":
			seen |= 1 << 1
			version, err = decString(m)
		default:
			return "", "", unknownField(k)
		}
		if err != nil {
			return "", "", at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return "", "", missing("name version", seen)
	}
	return name, version, nil
}

const mandateRequired = "label scope currency perTxCapMinor perPeriodCapMinor period allowedRails expiresAt"

func decodeMandates(v *jsonValue) ([]MandateDisclosure, error) {
	if v.kind != kindArray {
		return nil, mustBe("an array")
	}
	out := make([]MandateDisclosure, len(v.vals))
	for n := range v.vals {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return nil, atIndex(n, err)
		}
		md := &out[n]
		var seen uint32
		for i, k := range e.keys {
			m := &e.vals[i]
			var err error
			switch k {
			case "label":
				seen |= 1 << 0
				md.Label, err = decString(m)
			case "scope":
				seen |= 1 << 1
				md.Scope, err = decString(m)
			case "currency":
				seen |= 1 << 2
				md.Currency, err = decString(m)
			case "perTxCapMinor":
				seen |= 1 << 3
				md.PerTxCapMinor, err = decUint53(m)
			case "perPeriodCapMinor":
				seen |= 1 << 4
				md.PerPeriodCapMinor, err = decUint53(m)
			case "period":
				seen |= 1 << 5
				md.Period, err = decEnum(m, isMandatePeriod, "day, week, month")
			case "allowedRails":
				seen |= 1 << 6
				md.AllowedRails, err = decStringArray(m)
			case "expiresAt":
				seen |= 1 << 7
				md.ExpiresAt, err = decString(m)
			default:
				return nil, atIndex(n, unknownField(k))
			}
			if err != nil {
				return nil, atIndex(n, at(k, err))
			}
		}
		if seen != 1<<8-1 {
			return nil, atIndex(n, missing(mandateRequired, seen))
		}
	}
	return out, nil
}

func decodeOperator(v *jsonValue, o *OperatorIdentity) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "operatorId":
			seen |= 1 << 0
			o.OperatorID, err = decString(m)
		case "attestation":
			seen |= 1 << 1
			err = decodeAttestation(m, &o.Attestation)
		case "deniabilityBoundary":
			seen |= 1 << 2
			o.DeniabilityBoundary, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return missing("operatorId attestation deniabilityBoundary", seen)
	}
	return nil
}

func decodeAttestation(v *jsonValue, a *Attestation) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "scheme":
			seen |= 1 << 0
			a.Scheme, err = decEnum(m, isAttestationScheme, "AIP, VisaTAP, ERC8004, DID, none or a reverse-domain id")
		case "level":
			seen |= 1 << 1
			a.Level, err = decEnum(m, isAttestationLevel, "none, signed, registry_attested")
		case "evidence":
			a.Evidence, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return missing("scheme level", seen)
	}
	return nil
}

func decodeHistory(v *jsonValue, h *History) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "chainAnchor":
			seen |= 1 << 0
			h.ChainAnchor, err = decHex(m)
		case "summary":
			seen |= 1 << 1
			err = decodeSummary(m, &h.Summary)
		case "verificationHint":
			h.VerificationHint, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return missing("chainAnchor summary", seen)
	}
	return nil
}

func decodeSummary(v *jsonValue, s *HistorySummary) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "totalDecisions":
			seen |= 1 << 0
			s.TotalDecisions, err = decUint53(m)
		case "settledCount":
			seen |= 1 << 1
			s.SettledCount, err = decUint53(m)
		case "blockedCount":
			seen |= 1 << 2
			s.BlockedCount, err = decUint53(m)
		case "firstSeen":
			s.FirstSeen, err = decString(m)
		case "lastActive":
			s.LastActive, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return missing("totalDecisions settledCount blockedCount", seen)
	}
	return nil
}

func decodeRedTeam(v *jsonValue, r *RedTeam) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "corpus":
			seen |= 1 << 0
			r.Corpus.Name, r.Corpus.Version, err = decodeNameVersion(m)
		case "result":
			seen |= 1 << 1
			err = decodeRedTeamResult(m, &r.Result)
		case "attestedAt":
			seen |= 1 << 2
			r.AttestedAt, err = decString(m)
		case "attestationRef":
			r.AttestationRef, err = decString(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return missing("corpus result attestedAt", seen)
	}
	return nil
}

func decodeRedTeamResult(v *jsonValue, r *RedTeamResult) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "grade":
			seen |= 1 << 0
			r.Grade, err = decEnum(m, isGrade, "A, B, C, D, F")
		case "score":
			seen |= 1 << 1
			if m.kind == kindNumber && !between0and100(m.text) {
				err = mustBe("a number in [0, 100]")
				break
			}
			r.Score, err = decFloat(m)
		case "passed":
			seen |= 1 << 2
			r.Passed, err = decBool(m)
		case "hardFails":
			// Required by the published schema; the reference's zod parser
			// would default it to [], but the schema is the interoperable
			// contract and the reference emitter always writes it.
			seen |= 1 << 3
			r.HardFails, err = decStringArray(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<4-1 {
		return missing("grade score passed hardFails", seen)
	}
	return nil
}

func decodeModel(v *jsonValue, mi *ModelIdentity) error {
	if err := wantObject(v); err != nil {
		return err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "name":
			seen |= 1 << 0
			mi.Name, err = decString(m)
		case "fingerprintAlgorithm":
			seen |= 1 << 1
			err = decConst(m, "sha256")
			mi.FingerprintAlgorithm = "sha256"
		case "digest":
			seen |= 1 << 2
			mi.Digest, err = decHex(m)
		default:
			return unknownField(k)
		}
		if err != nil {
			return at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return missing("name fingerprintAlgorithm digest", seen)
	}
	return nil
}

func decodeProvenance(v *jsonValue) (map[string]FieldProvenance, error) {
	if err := wantObject(v); err != nil {
		return nil, err
	}
	out := make(map[string]FieldProvenance, len(v.keys))
	for n, field := range v.keys {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return nil, at(field, err)
		}
		var fp FieldProvenance
		var seen uint32
		for i, k := range e.keys {
			m := &e.vals[i]
			var err error
			switch k {
			case "derivedFrom":
				seen |= 1 << 0
				fp.DerivedFrom, err = decString(m)
			case "attestedBy":
				fp.AttestedBy, err = decString(m)
			default:
				return nil, at(field, unknownField(k))
			}
			if err != nil {
				return nil, at(field, at(k, err))
			}
		}
		if seen != 1 {
			return nil, at(field, missing("derivedFrom", seen))
		}
		out[field] = fp
	}
	return out, nil
}

func decodeExtensions(v *jsonValue) (map[string]json.RawMessage, error) {
	if err := wantObject(v); err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(v.keys))
	for i, k := range v.keys {
		if !isReverseDomain(k) {
			return nil, &schemaError{path: k, msg: "extension key must be a reverse-domain id (^[a-z0-9]+(\\.[a-z0-9-]+)+$)"}
		}
		raw, err := appendCanonical(nil, &v.vals[i])
		if err != nil {
			return nil, at(k, err)
		}
		out[k] = raw
	}
	return out, nil
}

const rotationRequired = "type from to rotatedAt signature"

// decodeRotationChain validates a rotationChain array (the item schema is
// the same in both envelopes). Its length is judged by the binding check,
// not here: the schema puts no bound on it.
func decodeRotationChain(v *jsonValue) ([]RotationStatement, error) {
	if v.kind != kindArray {
		return nil, mustBe("an array")
	}
	out := make([]RotationStatement, len(v.vals))
	for n := range v.vals {
		e := &v.vals[n]
		if err := wantObject(e); err != nil {
			return nil, atIndex(n, err)
		}
		rs := &out[n]
		var seen uint32
		for i, k := range e.keys {
			m := &e.vals[i]
			var err error
			switch k {
			case "type":
				seen |= 1 << 0
				err = decConst(m, "rotation")
				rs.Type = "rotation"
			case "from":
				seen |= 1 << 1
				rs.From, err = decString(m)
			case "to":
				seen |= 1 << 2
				rs.To, err = decString(m)
			case "rotatedAt":
				seen |= 1 << 3
				rs.RotatedAt, err = decString(m)
			case "signature":
				seen |= 1 << 4
				rs.Signature, err = decHex(m)
			default:
				return nil, atIndex(n, unknownField(k))
			}
			if err != nil {
				return nil, atIndex(n, at(k, err))
			}
		}
		if seen != 1<<5-1 {
			return nil, atIndex(n, missing(rotationRequired, seen))
		}
	}
	return out, nil
}

// decodeDocument parses and validates a bare disclosure document and returns
// it with its canonical bytes.
func decodeDocument(src string) (*Disclosure, []byte, error) {
	v, err := parseStrictJSON(src, maxJSONDepth)
	if err != nil {
		return nil, nil, err
	}
	d := new(Disclosure)
	if err := decodeDisclosure(&v, d); err != nil {
		return nil, nil, err
	}
	canon, err := appendCanonical(make([]byte, 0, len(src)), &v)
	if err != nil {
		return nil, nil, err
	}
	return d, canon, nil
}

// ParseDisclosure parses a bare disclosure document (not an envelope) and
// validates it structurally against disclosure.schema.json (SPEC §3.11). It
// checks no signature. Errors match [ErrMalformed] and name the offending
// field, e.g. "identity: malformed disclosure: capital.custody: must be one
// of non_custodial, custodial".
func ParseDisclosure(doc []byte) (*Disclosure, error) {
	if len(doc) > MaxEnvelopeSize {
		return nil, fmt.Errorf("identity: disclosure is larger than %d bytes: %w", MaxEnvelopeSize, ErrMalformed)
	}
	d, _, err := decodeDocument(string(doc))
	if err != nil {
		return nil, fmt.Errorf("identity: malformed disclosure: %w", err)
	}
	return d, nil
}
