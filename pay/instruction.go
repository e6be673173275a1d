// Package pay holds payment instructions (intents) and mandates, and the
// checks that stand between an agent's request and the gate.
//
// Its storage-free core is the money path's front half: the wire types,
// the strict decoder, the signatures, and mandate verification. That part
// is pure (no I/O) and safe for concurrent use.
//
// # The instruction
//
// An [Instruction] is the body of POST /pay (DESIGN §4):
//
//	{"idempotencyKey":"7f3c...","payee":"acct:seller.example",
//	 "amount":{"minor":1250,"currency":"USD"},"purpose":"invoice 1182",
//	 "terms":{"rail":"sandbox-card","reversibility":"reversible","finality":"instant",
//	          "credential":"api-key","capitalSource":"payer","presence":"delegated"},
//	 "envelope":{"agent":"<64 hex>","mandate":"<compact JWS>","signature":"<compact JWS, detached>"}}
//
// Decode untrusted bytes with [DecodeInstruction] only: it refuses unknown
// and duplicate members, trailing data, invalid UTF-8, numbers that are not
// plain integers, and everything [Instruction.Check] refuses, and it reports
// every bad field at once as a [*MalformedError] with JSON field paths.
//
// # The server's checks, in order (DESIGN §4)
//
//  1. Structure: [DecodeInstruction] (400 intent.malformed).
//  2. Agent credential: the caller's auth layer (401).
//  3. Envelope: [VerifyEnvelope] checks the mandate ([MandateVerifier]),
//     that its subject is envelope.agent, and the intent signature
//     ([VerifyInstruction]). The caller then checks what needs storage:
//     that the mandate is not revoked (by [Mandate.ID]) and that the agent
//     credential may act for envelope.agent. Every failure is a
//     [*UnauthorizedError] (403 intent.unauthorized) with a precise
//     [AuthReason]; the caller uses [ReasonMandateRevoked] and
//     [ReasonAgentNotPermitted] for its own two checks.
//  4. The gate (deny rules, confirm rules, allow):
//     [Instruction.GateInput] builds the input of gate.Decide.
//
// # Client side
//
// An agent builds an Instruction, sets envelope.mandate to the token its
// operator issued, and calls [SignInstruction]. What is signed is
// [SigningBytes]: the RFC 8785 (JCS) canonical JSON of the instruction
// without envelope.signature, so any JSON library that can canonicalise can
// produce or check the signature.
//
// # Errors
//
// Domain errors carry a stable code for the HTTP layer through a
// Code() string method: [*MalformedError] (intent.malformed) and
// [*UnauthorizedError] (intent.unauthorized). They also match the sentinels
// [ErrMalformed] and [ErrUnauthorized] with errors.Is.
package pay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/fielderr"
	"github.com/countersign/countersign/internal/jsonscan"
	"github.com/go-playground/validator/v10"
)

// Error codes, returned by the Code method of the domain errors.
const (
	CodeMalformed    = "intent.malformed"
	CodeUnauthorized = "intent.unauthorized"
)

// ErrMalformed is matched by every [*MalformedError]; check with errors.Is.
var ErrMalformed = errors.New("pay: malformed instruction")

// Limits of the instruction's fields.
const (
	MaxIdempotencyKeyLen = 255 // bytes of visible ASCII
	MaxPayeeLen          = 255 // bytes; see gate.ValidPayee
	MaxPurposeLen        = 500 // characters (Unicode code points)
	MaxCurrencyLen       = 258 // bytes: the longest CAIP-19 asset id without serial
	MaxMinor             = 1<<53 - 1
	MaxMandateLen        = 16384 // bytes of the compact mandate token
	MaxSignatureLen      = 2048  // bytes of the compact detached signature
	maxFieldErrors       = 20    // a hostile body cannot make the error list huge
	maxReportedNameLen   = 64    // unknown member names are cut in error paths
)

// Instruction is a payment instruction: the body of POST /pay.
//
// The validate tags are the rules the contract projects into the OpenAPI
// schema; [Instruction.Check] applies them and the rules tags cannot say.
type Instruction struct {
	// IdempotencyKey: 1 to 255 bytes of visible ASCII (0x21–0x7E, no
	// spaces). Unique per route and agent key.
	IdempotencyKey string `json:"idempotencyKey" validate:"required,max=255,printascii"`
	// Payee: who is paid, a reference scheme:id such as
	// "acct:seller.example" (grammar: gate.ValidPayee).
	Payee string `json:"payee" validate:"required,max=255,printascii"`
	// Amount: how much, in minor units of a currency.
	Amount Amount `json:"amount"`
	// Purpose: why, for people: 1 to 500 characters (code points), not
	// only spaces, one line, no control or bidirectional-formatting
	// characters (it is shown to the person who approves).
	Purpose string `json:"purpose" validate:"required,max=500"`
	// Terms: how the money moves.
	Terms Terms `json:"terms"`
	// Envelope: who asks and under which mandate.
	Envelope Envelope `json:"envelope"`
	// SessionID optionally spends under a session (protocol session.open):
	// a sub-budget and lifetime under the same mandate, which the gate
	// checks (session.exhausted, session.expired). Signed like the rest.
	SessionID string `json:"sessionId,omitempty" validate:"omitempty,max=64,printascii"`
	// TermsID optionally cites two-party terms (protocol terms.accept,
	// negotiate.accept): the gate denies the instruction unless it matches
	// them (payee, amount, currency, rail) and they are accepted and in
	// force. Signed like the rest.
	TermsID string `json:"termsId,omitempty" validate:"omitempty,max=64,printascii"`
}

// Amount is an amount of money.
type Amount struct {
	// Minor is the amount in minor units (cents for USD): an integer
	// greater than 0 and less than 2^53, so every JSON client keeps it exact.
	// On the wire it must be a plain integer: 1.0, 1e3, -0 and "5" are
	// refused.
	Minor int64 `json:"minor" validate:"gt=0,lt=9007199254740992"`
	// Currency is an ISO 4217 alphabetic code (three upper-case letters,
	// e.g. "USD") or a CAIP-19 asset type or asset id (e.g.
	// "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"); see
	// [ValidCurrency]. Compared byte for byte.
	Currency string `json:"currency" validate:"required,min=3,max=258"`
}

// Terms say how the money moves. The rail's facts must agree with them
// (the gate checks). The enum values are defined in package gate.
type Terms struct {
	// Rail names the settlement rail, e.g. "sandbox-card" (grammar:
	// gate.ValidRail).
	Rail string `json:"rail" validate:"required,max=64"`
	// Reversibility: "reversible" or "irreversible".
	Reversibility gate.Reversibility `json:"reversibility" validate:"required,oneof=reversible irreversible"`
	// Finality: "instant" or "deferred".
	Finality gate.Finality `json:"finality" validate:"required,oneof=instant deferred"`
	// Credential: the kind of agent credential the request carries,
	// "api-key" or "dpop".
	Credential gate.Credential `json:"credential" validate:"required,oneof=api-key dpop"`
	// CapitalSource: whose money, "payer", "credit" or "escrow".
	CapitalSource gate.CapitalSource `json:"capitalSource" validate:"required,oneof=payer credit escrow"`
	// Presence: "delegated" (the agent acts alone) or "present" (a person
	// is in the session).
	Presence gate.Presence `json:"presence" validate:"required,oneof=delegated present"`
}

// Envelope binds the instruction to an agent and a mandate.
type Envelope struct {
	// Agent is the agent id: the agent's Ed25519 public key as 64
	// lower-case hex digits.
	Agent string `json:"agent" validate:"required,len=64,hexadecimal,lowercase"`
	// Mandate is the compact JWS of the mandate an operator issued to the
	// agent (see [SignMandate]).
	Mandate string `json:"mandate" validate:"required,max=16384,jwt"`
	// Signature is the agent's compact JWS with detached payload
	// ("header..signature") over [SigningBytes] (see [SignInstruction]).
	Signature string `json:"signature" validate:"required,max=2048"`
}

// FieldError is one reason an instruction is malformed.
type FieldError = fielderr.FieldError

// MalformedError is an instruction that breaks the structure rules
// (400 intent.malformed). It matches [ErrMalformed].
type MalformedError struct {
	// Fields lists every problem found, in a stable order (the order of
	// the fields in the instruction, unknown members last). Never empty.
	Fields []FieldError
}

func (e *MalformedError) Error() string {
	return fielderr.Join("pay: malformed instruction: ", e.Fields)
}

// Code returns "intent.malformed".
func (e *MalformedError) Code() string { return CodeMalformed }

// Unwrap makes every MalformedError match [ErrMalformed].
func (e *MalformedError) Unwrap() error { return ErrMalformed }

// DecodeInstruction decodes and checks an instruction from untrusted bytes.
//
// It accepts exactly one JSON object (surrounding whitespace allowed) in
// valid UTF-8, with only the members of [Instruction] at every level, each
// at most once, each of the right JSON type (null is never accepted), and
// amount.minor written as a plain integer; then it applies
// [Instruction.Check]. Every problem is reported at once in a
// [*MalformedError], except a JSON syntax error, which is reported alone.
// On error the returned Instruction is nil.
func DecodeInstruction(b []byte) (*Instruction, error) {
	return decodeInstruction(b, json.Valid(b))
}

// decodeInstruction is DecodeInstruction; fast says b is valid JSON, to be
// walked without a json.Decoder. FuzzDecodeInstruction checks both ways
// give the same answer.
func decodeInstruction(b []byte, fast bool) (*Instruction, error) {
	if !utf8.Valid(b) {
		return nil, malformed(FieldError{Field: "", Rule: "utf8", Message: "the body is not valid UTF-8"})
	}
	var in Instruction
	d := &decoder{valid: fast}
	isObject := d.membersOf(b, "", func(name, path string, raw json.RawMessage) bool {
		switch name {
		case "idempotencyKey":
			d.str(path, raw, &in.IdempotencyKey)
		case "payee":
			d.str(path, raw, &in.Payee)
		case "amount":
			d.object(path, raw, func(name, path string, raw json.RawMessage) bool {
				switch name {
				case "minor":
					d.minor(path, raw, &in.Amount.Minor)
				case "currency":
					d.str(path, raw, &in.Amount.Currency)
				default:
					return false
				}
				return true
			})
		case "purpose":
			d.str(path, raw, &in.Purpose)
		case "sessionId":
			d.str(path, raw, &in.SessionID)
		case "termsId":
			d.str(path, raw, &in.TermsID)
		case "terms":
			t := &in.Terms
			d.object(path, raw, func(name, path string, raw json.RawMessage) bool {
				switch name {
				case "rail":
					d.str(path, raw, &t.Rail)
				case "reversibility":
					d.str(path, raw, (*string)(&t.Reversibility))
				case "finality":
					d.str(path, raw, (*string)(&t.Finality))
				case "credential":
					d.str(path, raw, (*string)(&t.Credential))
				case "capitalSource":
					d.str(path, raw, (*string)(&t.CapitalSource))
				case "presence":
					d.str(path, raw, (*string)(&t.Presence))
				default:
					return false
				}
				return true
			})
		case "envelope":
			e := &in.Envelope
			d.object(path, raw, func(name, path string, raw json.RawMessage) bool {
				switch name {
				case "agent":
					d.str(path, raw, &e.Agent)
				case "mandate":
					d.str(path, raw, &e.Mandate)
				case "signature":
					d.str(path, raw, &e.Signature)
				default:
					return false
				}
				return true
			})
		default:
			return false
		}
		return true
	})
	if d.syntax != nil {
		return nil, malformed(*d.syntax)
	}
	if !isObject {
		return nil, malformed(d.errs...)
	}
	// One JSON value only: whatever follows must be whitespace (which
	// json.Valid has checked when the body is valid).
	errs := d.errs
	if err := in.check(true); err != nil {
		var check *MalformedError
		if !errors.As(err, &check) {
			return nil, err
		}
		for _, f := range check.Fields {
			if !coveredBy(f.Field, d.errs) {
				errs = append(errs, f)
			}
		}
	}
	if len(errs) > 0 {
		return nil, malformed(errs...)
	}
	return &in, nil
}

// Check applies the structure rules: the validate tags of [Instruction]
// and its parts, and the rules tags cannot say (the payee and currency
// grammars, visible ASCII without spaces, text without control characters,
// the rail grammar, the exact agent id and signature shapes). It returns a
// [*MalformedError] listing every problem, or nil. It checks no signature;
// see [VerifyEnvelope].
func (in *Instruction) Check() error { return in.check(true) }

// check is Check; signed=false skips envelope.signature, for signing.
func (in *Instruction) check(signed bool) error {
	var errs []FieldError
	if err := structValidator().Struct(in); err != nil {
		var verrs validator.ValidationErrors
		if !errors.As(err, &verrs) {
			// Only a programming error (a bad tag) gets here.
			return fmt.Errorf("pay: check: %w", err)
		}
		for _, fe := range verrs {
			errs = append(errs, FieldError{Field: fieldPath(fe.Namespace()), Rule: fe.Tag(), Message: tagMessage(fe)})
		}
	}
	extra := func(field, rule, msg string, ok bool) {
		if !ok && !slices.ContainsFunc(errs, func(f FieldError) bool { return f.Field == field }) {
			errs = append(errs, FieldError{Field: field, Rule: rule, Message: msg})
		}
	}
	extra("idempotencyKey", "visibleascii", "must be visible ASCII without spaces", visibleASCII(in.IdempotencyKey))
	extra("payee", "payee", "must be a payee reference scheme:id (a lower-case scheme, then letters, digits and ._~@:+%-)",
		gate.ValidPayee(in.Payee))
	extra("amount.currency", "currency", "must be an ISO 4217 code (three upper-case letters) or a CAIP-19 asset id",
		ValidCurrency(in.Amount.Currency))
	extra("purpose", "required", "must not be only spaces", strings.TrimSpace(in.Purpose) != "")
	extra("purpose", "text", "must not contain control or bidirectional formatting characters", plainText(in.Purpose))
	extra("terms.rail", "rail", "must be a rail name: lower-case letters, digits and ._- starting with a letter or digit",
		gate.ValidRail(in.Terms.Rail))
	extra("envelope.agent", "hexadecimal", "must be 64 lower-case hex digits (an Ed25519 public key)",
		isAgentID(in.Envelope.Agent))
	if signed {
		extra("envelope.signature", "jws", "must be a compact JWS with detached payload (header..signature)",
			compactShape(in.Envelope.Signature))
	} else {
		errs = slices.DeleteFunc(errs, func(f FieldError) bool { return f.Field == "envelope.signature" })
	}
	if len(errs) == 0 {
		return nil
	}
	return malformed(errs...)
}

// GateInput returns the input of gate.Decide for in under the verified
// mandate m: the instruction's facts and the mandate's policy. The caller
// completes it with what it gathered: Credential, Counters, Policy and
// BreakerOpen.
func (in *Instruction) GateInput(m *Mandate) gate.Input {
	return gate.Input{
		Agent:    in.Envelope.Agent,
		Payee:    in.Payee,
		Amount:   in.Amount.Minor,
		Currency: in.Amount.Currency,
		Terms:    gate.Terms(in.Terms),
		Mandate:  m.Gate(),
	}
}

// ValidCurrency reports whether s is a currency an amount may name:
//
//   - an ISO 4217 alphabetic code: exactly three upper-case ASCII letters
//     (membership in the ISO list is not checked; a mandate names the one
//     currency it spends, and a rail refuses what it cannot settle), or
//   - a CAIP-19 asset type chain_id "/" asset_namespace ":" asset_reference,
//     optionally followed by "/" token_id, where chain_id is a CAIP-2
//     namespace ":" reference: namespace and asset_namespace [-a-z0-9]{3,8},
//     reference [-_a-zA-Z0-9]{1,32}, asset_reference [-.%a-zA-Z0-9]{1,128},
//     token_id [-.%a-zA-Z0-9]{1,78}. The asset_reference is required (a
//     currency must name one asset) and the collection serial number of
//     CAIP-19 asset ids is not accepted (a unique item has no minor units).
func ValidCurrency(s string) bool {
	if len(s) == 3 && isUpper(s[0]) && isUpper(s[1]) && isUpper(s[2]) {
		return true
	}
	if len(s) > MaxCurrencyLen {
		return false
	}
	parts := strings.Split(s, "/")
	if len(parts) != 2 && len(parts) != 3 {
		return false
	}
	ns, ref, ok := strings.Cut(parts[0], ":")
	if !ok || !caipToken(ns, 3, 8, false, "-") || !caipToken(ref, 1, 32, true, "-_") {
		return false
	}
	ans, aref, ok := strings.Cut(parts[1], ":")
	if !ok || !caipToken(ans, 3, 8, false, "-") || !caipToken(aref, 1, 128, true, "-.%") {
		return false
	}
	return len(parts) == 2 || caipToken(parts[2], 1, 78, true, "-.%")
}

// caipToken reports whether s has minLen..maxLen bytes of lower-case ASCII
// letters, digits, the given punctuation and, if upper, upper-case letters.
func caipToken(s string, minLen, maxLen int, upper bool, punct string) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || upper && 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(punct, c) >= 0) {
			return false
		}
	}
	return true
}

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// visibleASCII reports whether s is only bytes 0x21–0x7E.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// plainText reports whether s has no control characters (Unicode Cc, line
// breaks included), no line or paragraph separators, and no bidirectional
// formatting characters, which could make the text a person approves read
// differently from what it is.
func plainText(s string) bool {
	for _, r := range s {
		switch {
		case unicode.IsControl(r), r == '\u2028', r == '\u2029',
			r == '\u061c', r == '\u200e', r == '\u200f',
			'\u202a' <= r && r <= '\u202e',
			'\u2066' <= r && r <= '\u2069':
			return false
		}
	}
	return true
}

// isAgentID reports whether s is exactly 64 lower-case hex digits.
func isAgentID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// compactShape reports whether s looks like a compact JWS: three base64url
// segments, the first and last non-empty (the middle is empty when the
// payload is detached; whether it must be is decided when verifying).
func compactShape(s string) bool {
	h, rest, ok := strings.Cut(s, ".")
	if !ok {
		return false
	}
	p, sig, ok := strings.Cut(rest, ".")
	return ok && h != "" && sig != "" && b64urlChars(h) && b64urlChars(p) && b64urlChars(sig)
}

func b64urlChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// malformed builds a MalformedError with errs in the stable order.
func malformed(errs ...FieldError) *MalformedError {
	errs = slices.Clone(errs)
	slices.SortStableFunc(errs, func(a, b FieldError) int {
		if c := fieldRank(a.Field) - fieldRank(b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Field, b.Field)
	})
	if len(errs) > maxFieldErrors {
		errs = errs[:maxFieldErrors]
	}
	return &MalformedError{Fields: errs}
}

// fieldOrder is the order of the instruction's fields in error lists.
var fieldOrder = []string{
	"", "idempotencyKey", "payee", "amount", "amount.minor", "amount.currency", "purpose",
	"terms", "terms.rail", "terms.reversibility", "terms.finality", "terms.credential",
	"terms.capitalSource", "terms.presence",
	"envelope", "envelope.agent", "envelope.mandate", "envelope.signature",
}

func fieldRank(field string) int {
	if i := slices.Index(fieldOrder, field); i >= 0 {
		return i
	}
	return len(fieldOrder) // unknown members last, by name
}

// coveredBy reports whether field is, or is inside, a field that already
// has a decoding error (so "amount.minor: required" is not added to
// "amount: must be an object").
func coveredBy(field string, errs []FieldError) bool {
	for _, e := range errs {
		if field == e.Field || e.Field == "" || strings.HasPrefix(field, e.Field+".") {
			return true
		}
	}
	return false
}

// structValidator returns the package's validator. It is built once,
// lazily, and never changes afterwards: a cache of parsed struct tags
// rather than configuration, so it is not the kind of global the style
// guide forbids, and building one per call would cost more than the checks.
var structValidator = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	// The validator implements these three tags with regular expressions,
	// which cost ~30 µs per instruction (the mandate token is long). The
	// byte loops below accept exactly the same strings (a test compares them
	// with the validator's own expressions) and keep the tag names, so the
	// contract still projects them into the schema.
	for tag, fn := range fastTags {
		if err := v.RegisterValidation(tag, func(fl validator.FieldLevel) bool { return fn(fl.Field().String()) }); err != nil {
			panic(err) // a programming error: the tags are fixed here
		}
	}
	return v
})

// fastTags are byte-loop equivalents of validator tags that are regular
// expressions in go-playground/validator.
var fastTags = map[string]func(string) bool{
	// ^[\x20-\x7E]*$
	"printascii": func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return false
			}
		}
		return true
	},
	// ^(0[xX])?[0-9a-fA-F]+$
	"hexadecimal": func(s string) bool {
		if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
			s = s[2:]
		}
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if !isHexDigit(s[i]) {
				return false
			}
		}
		return true
	},
	// ^[A-Za-z0-9-_]+\.[A-Za-z0-9-_]+\.[A-Za-z0-9-_]*$
	"jwt": func(s string) bool {
		part, dots := 0, 0
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c == '.':
				if part == 0 || dots == 2 {
					return false
				}
				dots++
				part = 0
			case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
				part++
			default:
				return false
			}
		}
		return dots == 2
	},
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// fieldPath turns a validator namespace ("Instruction.amount.minor") into a
// JSON path ("amount.minor").
func fieldPath(ns string) string {
	_, rest, _ := strings.Cut(ns, ".")
	return rest
}

func tagMessage(fe validator.FieldError) string {
	p := fe.Param()
	isString := fe.Kind() == reflect.String
	switch fe.Tag() {
	case "required":
		return "is required"
	case "max":
		if isString {
			return "must be at most " + p + " characters"
		}
		return "must be at most " + p
	case "min":
		if isString {
			return "must be at least " + p + " characters"
		}
		return "must be at least " + p
	case "len":
		return "must be exactly " + p + " characters"
	case "gt":
		return "must be greater than " + p
	case "lt":
		return "must be less than " + p
	case "oneof":
		return "must be one of: " + strings.ReplaceAll(p, " ", ", ")
	case "printascii":
		return "must be printable ASCII"
	case "hexadecimal":
		return "must be hexadecimal"
	case "lowercase":
		return "must be lower-case"
	case "jwt":
		return "must be a compact JWS (three base64url parts)"
	}
	return "breaks the rule " + fe.Tag()
}

// decoder walks untrusted JSON of a known shape, recording every problem
// with its path. A syntax error stops it; anything else is recorded and
// the walk goes on, so one response can list every bad field.
type decoder struct {
	errs   []FieldError
	syntax *FieldError
	// valid is set when the whole body is valid JSON (json.Valid): its
	// objects are then walked by fastMembers, without a json.Decoder.
	// Otherwise a Decoder finds and reports the syntax error.
	valid bool
}

// membersOf calls member for each member of the object raw (see members).
func (d *decoder) membersOf(raw []byte, path string, member func(name, path string, raw json.RawMessage) bool) bool {
	if d.valid {
		return d.fastMembers(raw, path, member)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	ok := d.members(dec, path, member)
	if ok && path == "" && d.syntax == nil {
		// One JSON value only: whatever follows must be whitespace.
		if _, err := dec.Token(); err != io.EOF {
			d.syntax = &FieldError{Field: "", Rule: "syntax", Message: "the body must hold exactly one JSON object"}
		}
	}
	return ok
}

// fastMembers is members for a value already known to be valid JSON: it
// finds each member's name and value by scanning raw, where a Decoder
// would tokenize and copy it (jsonscan). What it reports is what members
// reports.
func (d *decoder) fastMembers(raw []byte, path string, member func(name, path string, raw json.RawMessage) bool) bool {
	i := skipJSONSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		d.notObject(path)
		return false
	}
	seen := make(map[string]bool)
	i = skipJSONSpace(raw, i+1)
	for i < len(raw) && raw[i] == '"' {
		end, _ := jsonscan.ValueEnd(raw, i) // raw is valid JSON: exact
		var name string
		if key := raw[i:end]; bytes.IndexByte(key, '\\') < 0 {
			name = string(key[1 : len(key)-1])
		} else if err := json.Unmarshal(key, &name); err != nil {
			d.syntaxError(err) // cannot happen: raw is valid
			return false
		}
		i = skipJSONSpace(raw, end) // at ':'
		i = skipJSONSpace(raw, i+1) // at the value
		end, _ = jsonscan.ValueEnd(raw, i)
		d.member(seen, path, name, json.RawMessage(raw[i:end]), member)
		i = skipJSONSpace(raw, end) // at ',' or '}'
		if i < len(raw) && raw[i] == ',' {
			i = skipJSONSpace(raw, i+1)
		}
	}
	return true
}

// notObject reports that the value at path (the body, if path is empty)
// is not a JSON object.
func (d *decoder) notObject(path string) {
	if path == "" {
		d.add(path, "type", "the body must be a JSON object")
	} else {
		d.add(path, "type", "must be an object")
	}
}

// member hands one member of the object at path to member, once: a name
// seen before is a duplicate, and a name member refuses is unknown.
func (d *decoder) member(seen map[string]bool, path, name string, raw json.RawMessage, member func(name, path string, raw json.RawMessage) bool) {
	p := joinPath(path, name)
	switch {
	case seen[name]:
		d.add(p, "duplicate", "appears more than once")
	case !member(name, p, raw):
		d.add(p, "unknown", "is not a known field")
	}
	seen[name] = true
}

func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func (d *decoder) add(path, rule, msg string) {
	if len(d.errs) < maxFieldErrors {
		d.errs = append(d.errs, FieldError{Field: path, Rule: rule, Message: msg})
	}
}

// object decodes raw, an already well-formed JSON value, as an object.
func (d *decoder) object(path string, raw json.RawMessage, member func(name, path string, raw json.RawMessage) bool) {
	if len(raw) == 0 || raw[0] != '{' {
		d.add(path, "type", "must be an object")
		return
	}
	d.membersOf(raw, path, member)
}

// members reads one object from dec and calls member for each member; a
// false result means the name is unknown. It reports false if the value
// is not an object (or not JSON).
func (d *decoder) members(dec *json.Decoder, path string, member func(name, path string, raw json.RawMessage) bool) bool {
	tok, err := dec.Token()
	if err != nil {
		d.syntaxError(err)
		return false
	}
	if tok != json.Delim('{') {
		d.notObject(path)
		return false
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			d.syntaxError(err)
			return false
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			d.syntaxError(err)
			return false
		}
		d.member(seen, path, name, raw, member)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		d.syntaxError(err)
		return false
	}
	return true
}

func (d *decoder) syntaxError(err error) {
	if d.syntax != nil {
		return
	}
	msg := "the body is not valid JSON"
	var se *json.SyntaxError
	if errors.As(err, &se) {
		msg += " (at byte " + strconv.FormatInt(se.Offset, 10) + ")"
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		msg += " (it ends early)"
	}
	d.syntax = &FieldError{Field: "", Rule: "syntax", Message: msg}
}

func joinPath(path, name string) string {
	if len(name) > maxReportedNameLen {
		name = name[:maxReportedNameLen] + "…"
	}
	if path == "" {
		return name
	}
	return path + "." + name
}

// str decodes a JSON string into dst.
func (d *decoder) str(path string, raw json.RawMessage, dst *string) {
	if len(raw) == 0 || raw[0] != '"' {
		d.add(path, "type", "must be a string")
		return
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		// No escapes: the scanner has already checked it is a well-formed
		// string of valid UTF-8, so its content is the bytes between the
		// quotes.
		*dst = string(raw[1 : len(raw)-1])
		return
	}
	if hasLoneSurrogate(raw) {
		d.add(path, "utf8", "must not contain an unpaired UTF-16 surrogate escape")
		return
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		d.add(path, "type", "must be a string")
	}
}

// minor decodes amount.minor: a JSON number that is a plain integer.
func (d *decoder) minor(path string, raw json.RawMessage, dst *int64) {
	if len(raw) == 0 || !(raw[0] == '-' || '0' <= raw[0] && raw[0] <= '9') {
		d.add(path, "type", "must be a number")
		return
	}
	if bytes.ContainsAny(raw, ".eE") {
		d.add(path, "integer", "must be an integer number of minor units, without fraction or exponent")
		return
	}
	// The JSON grammar already refused leading zeros and a lone '-'.
	if raw[0] == '-' || string(raw) == "0" {
		d.add(path, "gt", "must be greater than 0")
		return
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > MaxMinor {
		d.add(path, "lt", "must be less than 9007199254740992")
		return
	}
	*dst = n
}

// hasLoneSurrogate reports whether the JSON string literal raw escapes a
// UTF-16 surrogate that is not part of a pair. encoding/json would quietly
// turn it into U+FFFD, so what was signed and what is stored would differ.
func hasLoneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' || i+4 >= len(raw) {
			continue
		}
		r := hex4(raw[i+1 : i+5])
		i += 4
		switch {
		case 0xdc00 <= r && r < 0xe000:
			return true // a low surrogate with no high one before it
		case 0xd800 <= r && r < 0xdc00:
			if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3 : i+7]); 0xdc00 <= lo && lo < 0xe000 {
					i += 6
					continue
				}
			}
			return true
		}
	}
	return false
}

// hex4 decodes four hex digits (already validated by the JSON scanner).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
