package pay

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/countersign/countersign/internal/jcsenc"
)

// IntentType is the "typ" header of an intent signature (RFC 8725 §3.11
// explicit typing). Verifiers compare it exactly: "application/" prefixes
// and other spellings are refused.
const IntentType = "svc-intent+jws"

// ErrUnauthorized is matched by every [*UnauthorizedError]; check with
// errors.Is.
var ErrUnauthorized = errors.New("pay: instruction not authorized")

// AuthReason says precisely why an envelope was refused. The values are
// stable; the HTTP layer may show them in the problem detail.
type AuthReason string

// Reasons for refusing an envelope, in the order of the checks.
const (
	// ReasonMandateMalformed: the mandate is not a compact JWS with an
	// attached payload, or its protected header is not a JSON object of
	// only "alg", "typ" and "kid" strings.
	ReasonMandateMalformed AuthReason = "mandate_malformed"
	// ReasonMandateBadAlg: the mandate's alg is not EdDSA or ES256, or does
	// not fit the key its kid names ("none", HS256, RS256, ... are refused).
	ReasonMandateBadAlg AuthReason = "mandate_bad_alg"
	// ReasonMandateWrongType: the mandate's typ is not exactly
	// "svc-mandate+jwt".
	ReasonMandateWrongType AuthReason = "mandate_wrong_type"
	// ReasonMandateUnknownKey: no kid, or a kid that is not a trusted
	// operator key.
	ReasonMandateUnknownKey AuthReason = "mandate_unknown_key"
	// ReasonMandateBadSignature: the operator's signature does not verify.
	ReasonMandateBadSignature AuthReason = "mandate_bad_signature"
	// ReasonMandateInvalidClaims: the signed claims break the rules of
	// [MandateClaims.Validate] or are not strict JSON.
	ReasonMandateInvalidClaims AuthReason = "mandate_invalid_claims"
	// ReasonMandateExpired: now is at or after the mandate's exp.
	ReasonMandateExpired AuthReason = "mandate_expired"
	// ReasonMandateNotYetValid: the mandate's iat is in the future by more
	// than the allowed clock skew.
	ReasonMandateNotYetValid AuthReason = "mandate_not_yet_valid"
	// ReasonMandateRevoked: the operator revoked the mandate. Not produced
	// here: the caller checks revocation against storage.
	ReasonMandateRevoked AuthReason = "mandate_revoked"
	// ReasonIdentityRevoked: the operator revoked the agent identity the
	// mandate was issued to (protocol revocation.revokeIdentity); every
	// mandate whose subject it is stops at once. Not produced by
	// VerifyEnvelope.
	ReasonIdentityRevoked AuthReason = "identity_revoked"
	// ReasonSubMismatch: the mandate was issued to another agent
	// (sub ≠ envelope.agent).
	ReasonSubMismatch AuthReason = "sub_mismatch"
	// ReasonAgentNotPermitted: the agent credential may not act for
	// envelope.agent. Not produced here: the caller checks the credential.
	ReasonAgentNotPermitted AuthReason = "agent_not_permitted"
	// ReasonAgentMalformed: envelope.agent is not 64 lower-case hex digits.
	ReasonAgentMalformed AuthReason = "agent_malformed"
	// ReasonSignatureMalformed: the signature is not a compact JWS, or its
	// protected header is not a JSON object of only "alg", "typ" and "kid"
	// strings.
	ReasonSignatureMalformed AuthReason = "signature_malformed"
	// ReasonSignatureNotDetached: the signature carries an embedded
	// payload; it must be detached (RFC 7515 appendix F).
	ReasonSignatureNotDetached AuthReason = "signature_not_detached"
	// ReasonSignatureBadAlg: the signature's alg is not EdDSA.
	ReasonSignatureBadAlg AuthReason = "signature_bad_alg"
	// ReasonSignatureWrongType: the signature's typ is not exactly
	// "svc-intent+jws".
	ReasonSignatureWrongType AuthReason = "signature_wrong_type"
	// ReasonSignatureInvalid: the signature does not verify with the key in
	// envelope.agent over [SigningBytes].
	ReasonSignatureInvalid AuthReason = "signature_invalid"
)

// UnauthorizedError is an envelope that does not authorise the instruction
// (403 intent.unauthorized). It matches [ErrUnauthorized].
type UnauthorizedError struct {
	// Reason is the precise, stable reason.
	Reason AuthReason
	// Err is the underlying cause, for logs; may be nil. Its text may name
	// library internals, so it is not for the client.
	Err error
}

func (e *UnauthorizedError) Error() string {
	if e.Err == nil {
		return "pay: not authorized: " + string(e.Reason)
	}
	return "pay: not authorized: " + string(e.Reason) + ": " + e.Err.Error()
}

// Code returns "intent.unauthorized".
func (e *UnauthorizedError) Code() string { return CodeUnauthorized }

// ProblemExtensions adds the stable reason to the HTTP problem.
func (e *UnauthorizedError) ProblemExtensions() map[string]any {
	return map[string]any{"reason": string(e.Reason)}
}

// Unwrap returns [ErrUnauthorized] and the cause, if any.
func (e *UnauthorizedError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUnauthorized}
	}
	return []error{ErrUnauthorized, e.Err}
}

func unauthorized(r AuthReason, err error) *UnauthorizedError {
	return &UnauthorizedError{Reason: r, Err: err}
}

// signingView is the instruction as signed: everything but
// envelope.signature.
type signingView struct {
	IdempotencyKey string       `json:"idempotencyKey"`
	Payee          string       `json:"payee"`
	Amount         Amount       `json:"amount"`
	Purpose        string       `json:"purpose"`
	SessionID      string       `json:"sessionId,omitempty"`
	Terms          Terms        `json:"terms"`
	TermsID        string       `json:"termsId,omitempty"`
	Envelope       signingEnvel `json:"envelope"`
}

type signingEnvel struct {
	Agent   string `json:"agent"`
	Mandate string `json:"mandate"`
}

// SigningBytes returns the bytes an intent signature covers: the RFC 8785
// (JCS) canonical JSON of in with envelope.signature removed. The envelope
// object stays, with agent and mandate, so the signature binds the mandate
// too. For example:
//
//	{"amount":{"currency":"USD","minor":1250},"envelope":{"agent":"...","mandate":"..."},
//	 "idempotencyKey":"...","payee":"acct:seller.example","purpose":"invoice 1182",
//	 "terms":{"capitalSource":"payer","credential":"api-key",...}}
//
// (without the line breaks). Values are taken as they are; run
// [Instruction.Check] first, since amounts of 2^53 or more have no exact
// canonical form.
func SigningBytes(in *Instruction) ([]byte, error) {
	if in.Amount.Minor <= -MaxMinor || in.Amount.Minor >= MaxMinor || !validUTF8(in) {
		// Outside the range where an integer and its JCS number form agree,
		// or not text: let the general canonicaliser decide (and refuse).
		return signingBytesSlow(in)
	}
	// Members in RFC 8785 order (all names are ASCII, so UTF-16 order is
	// byte order). TestSigningBytesMatchesJCS holds this to jcs.Transform.
	b := make([]byte, 0, 256+len(in.Envelope.Mandate)+len(in.Purpose)+len(in.Payee)+len(in.IdempotencyKey))
	b = append(b, `{"amount":{"currency":`...)
	b = jcsenc.AppendString(b, in.Amount.Currency)
	b = append(b, `,"minor":`...)
	b = strconv.AppendInt(b, in.Amount.Minor, 10)
	b = append(b, `},"envelope":{"agent":`...)
	b = jcsenc.AppendString(b, in.Envelope.Agent)
	b = append(b, `,"mandate":`...)
	b = jcsenc.AppendString(b, in.Envelope.Mandate)
	b = append(b, `},"idempotencyKey":`...)
	b = jcsenc.AppendString(b, in.IdempotencyKey)
	b = append(b, `,"payee":`...)
	b = jcsenc.AppendString(b, in.Payee)
	b = append(b, `,"purpose":`...)
	b = jcsenc.AppendString(b, in.Purpose)
	if in.SessionID != "" {
		b = append(b, `,"sessionId":`...)
		b = jcsenc.AppendString(b, in.SessionID)
	}
	t := &in.Terms
	b = append(b, `,"terms":{"capitalSource":`...)
	b = jcsenc.AppendString(b, string(t.CapitalSource))
	b = append(b, `,"credential":`...)
	b = jcsenc.AppendString(b, string(t.Credential))
	b = append(b, `,"finality":`...)
	b = jcsenc.AppendString(b, string(t.Finality))
	b = append(b, `,"presence":`...)
	b = jcsenc.AppendString(b, string(t.Presence))
	b = append(b, `,"rail":`...)
	b = jcsenc.AppendString(b, t.Rail)
	b = append(b, `,"reversibility":`...)
	b = jcsenc.AppendString(b, string(t.Reversibility))
	b = append(b, '}')
	if in.TermsID != "" {
		b = append(b, `,"termsId":`...)
		b = jcsenc.AppendString(b, in.TermsID)
	}
	return append(b, '}'), nil
}

func validUTF8(in *Instruction) bool {
	for _, s := range []string{in.IdempotencyKey, in.Payee, in.Amount.Currency, in.Purpose, in.Terms.Rail,
		string(in.Terms.Reversibility), string(in.Terms.Finality), string(in.Terms.Credential),
		string(in.Terms.CapitalSource), string(in.Terms.Presence), in.Envelope.Agent, in.Envelope.Mandate, in.SessionID, in.TermsID} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// signingBytesSlow is SigningBytes through the general canonicaliser.
func signingBytesSlow(in *Instruction) ([]byte, error) {
	b, err := json.Marshal(signingView{
		IdempotencyKey: in.IdempotencyKey,
		Payee:          in.Payee,
		Amount:         in.Amount,
		Purpose:        in.Purpose,
		SessionID:      in.SessionID,
		Terms:          in.Terms,
		TermsID:        in.TermsID,
		Envelope:       signingEnvel{Agent: in.Envelope.Agent, Mandate: in.Envelope.Mandate},
	})
	if err != nil {
		return nil, fmt.Errorf("pay: signing bytes: %w", err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("pay: signing bytes: %w", err)
	}
	return c, nil
}

// SignInstruction signs in with the agent's key and sets
// in.Envelope.Signature: a compact JWS with detached payload over
// [SigningBytes], protected header {"alg":"EdDSA","typ":"svc-intent+jws"}.
//
// If in.Envelope.Agent is empty it is set to the key's agent id; if it is
// set, it must be that id. Every other field, envelope.mandate included,
// must already be final and pass [Instruction.Check] (except for the
// signature itself); otherwise SignInstruction returns the
// [*MalformedError] the server would, and in is left unchanged.
func SignInstruction(in *Instruction, agentKey ed25519.PrivateKey) error {
	if len(agentKey) != ed25519.PrivateKeySize {
		return errors.New("pay: sign instruction: not an Ed25519 private key")
	}
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	c := *in
	switch c.Envelope.Agent {
	case "":
		c.Envelope.Agent = agent
	case agent:
	default:
		return errors.New("pay: sign instruction: envelope.agent is not the public key of agentKey")
	}
	if err := c.check(false); err != nil {
		return err
	}
	payload, err := SigningBytes(&c)
	if err != nil {
		return err
	}
	sig, err := SignDetached(agentKey, IntentType, payload)
	if err != nil {
		return fmt.Errorf("pay: sign instruction: %w", err)
	}
	in.Envelope.Agent = c.Envelope.Agent
	in.Envelope.Signature = sig
	return nil
}

// SignDetached is the agent's signature scheme: a compact JWS with
// detached payload, protected header {"alg":"EdDSA","typ":typ}. The
// payment instruction uses it with [IntentType] over [SigningBytes]; a
// purchase (commerce) with its own type over its own canonical bytes.
func SignDetached(agentKey ed25519.PrivateKey, typ string, payload []byte) (string, error) {
	hdrs := jws.NewHeaders()
	if err := hdrs.Set(jws.TypeKey, typ); err != nil {
		return "", err
	}
	sig, err := jws.Sign(nil,
		jws.WithKey(jwa.EdDSA(), agentKey, jws.WithProtectedHeaders(hdrs)),
		jws.WithDetachedPayload(payload))
	if err != nil {
		return "", err
	}
	return string(sig), nil
}

// SignEnvelope signs, as the agent of agentKey, a request other than an
// instruction that carries env (a purchase, an x402 fetch): it sets
// env.Agent (when empty; otherwise it must be agentKey's), then signs with
// typ the bytes signing returns (computed after the agent is set, since
// they cover it) and sets env.Signature.
func SignEnvelope(env *Envelope, agentKey ed25519.PrivateKey, typ string, signing func() ([]byte, error)) error {
	if len(agentKey) != ed25519.PrivateKeySize {
		return errors.New("not an Ed25519 private key")
	}
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	switch env.Agent {
	case "":
		env.Agent = agent
	case agent:
	default:
		return errors.New("envelope.agent is not the public key of agentKey")
	}
	b, err := signing()
	if err != nil {
		return err
	}
	sig, err := SignDetached(agentKey, typ, b)
	if err != nil {
		return err
	}
	env.Signature = sig
	return nil
}

// SignedDigest is the idempotency digest of a request signed with
// [SignEnvelope], as the agent sent it: its signing bytes and its
// signature, so one canonicalisation serves the signature check and
// idempotency (the Digest of [Signed]).
func SignedDigest(signed []byte, signature string) string {
	h := sha256.New()
	h.Write(signed)
	h.Write([]byte{0})
	h.Write([]byte(signature))
	return hex.EncodeToString(h.Sum(nil))
}

// VerifyInstruction checks the intent signature: envelope.signature must be
// a compact JWS with detached payload (an embedded payload is refused, even
// one equal to the signing bytes), protected header alg exactly "EdDSA",
// typ exactly "svc-intent+jws", no header parameters but alg, typ and kid
// (kid is ignored), and a valid Ed25519 signature by the key in
// envelope.agent over [SigningBytes](in). Any failure is a
// [*UnauthorizedError]. It does not look at the mandate; see
// [VerifyEnvelope].
func VerifyInstruction(in *Instruction) error {
	if !isAgentID(in.Envelope.Agent) {
		return unauthorized(ReasonAgentMalformed, nil)
	}
	signed, err := SigningBytes(in)
	if err != nil {
		return unauthorized(ReasonSignatureInvalid, err)
	}
	return verifyDetached(in.Envelope, IntentType, signed)
}

// verifyDetached checks env.Signature: a compact JWS with detached payload
// (an embedded payload is refused, even one equal to signed), protected
// header alg exactly EdDSA, typ exactly typ, no header parameters but alg,
// typ and kid, and a valid Ed25519 signature by the key in env.Agent over
// signed. Any failure is a [*UnauthorizedError].
func verifyDetached(env Envelope, typ string, signed []byte) error {
	if !isAgentID(env.Agent) {
		return unauthorized(ReasonAgentMalformed, nil)
	}
	pub, _ := hex.DecodeString(env.Agent) // isAgentID: 32 bytes of hex
	tok := env.Signature
	if len(tok) > MaxSignatureLen {
		return unauthorized(ReasonSignatureMalformed, fmt.Errorf("longer than %d bytes", MaxSignatureLen))
	}
	h, payload, sig, err := splitCompact(tok)
	if err != nil {
		return unauthorized(ReasonSignatureMalformed, err)
	}
	if payload != "" {
		return unauthorized(ReasonSignatureNotDetached, nil)
	}
	hdr, err := parseHeader(h)
	if err != nil {
		return unauthorized(ReasonSignatureMalformed, err)
	}
	if hdr.alg != jwa.EdDSA().String() {
		return unauthorized(ReasonSignatureBadAlg, fmt.Errorf("alg %q", hdr.alg))
	}
	if hdr.typ != typ {
		return unauthorized(ReasonSignatureWrongType, fmt.Errorf("typ %q", hdr.typ))
	}
	// The header is parsed and checked above, strictly (only alg EdDSA,
	// typ and kid; no b64 or crit), so what is left of JWS verification
	// (RFC 7515 §5.2 with a detached payload, Appendix F) is one Ed25519
	// check over the signing input: the header as sent, '.', and the
	// base64url of the payload. Done here rather than through jws.Verify,
	// which parses the token and its header a second time (about a
	// tenth of a payment's CPU on the money path).
	if !verifyEd25519Compact(ed25519.PublicKey(pub), tok[:strings.IndexByte(tok, '.')], signed, sig) {
		return unauthorized(ReasonSignatureInvalid, errors.New("the signature does not verify"))
	}
	return nil
}

// verifyEd25519Compact checks sig (base64url, unpadded) as an Ed25519
// signature of the JWS signing input encHeader || '.' ||
// BASE64URL(payload).
func verifyEd25519Compact(pub ed25519.PublicKey, encHeader string, payload []byte, sig string) bool {
	var raw [ed25519.SignatureSize + 3]byte
	if b64.DecodedLen(len(sig)) > len(raw) {
		return false
	}
	n, err := b64.Decode(raw[:], []byte(sig))
	if err != nil || n != ed25519.SignatureSize {
		return false
	}
	input := make([]byte, 0, len(encHeader)+1+b64.EncodedLen(len(payload)))
	input = append(input, encHeader...)
	input = append(input, '.')
	input = b64.AppendEncode(input, payload)
	return ed25519.Verify(pub, input, raw[:n])
}

// VerifyEnvelope does step 3 of DESIGN §4 as far as it needs no storage,
// in order: the mandate verifies with mandates ([MandateVerifier.Verify]:
// known operator key, right alg and typ, valid claims, not expired), its
// subject is envelope.agent, and the intent signature verifies
// ([VerifyInstruction]). It returns the verified mandate, or a
// [*UnauthorizedError].
//
// Two checks of step 3 remain the caller's, because they need storage:
// the mandate must not be revoked (look up [Mandate.ID]; refuse with
// [ReasonMandateRevoked]) and the agent credential must be allowed to act
// for envelope.agent ([ReasonAgentNotPermitted]). Every step-3 failure is
// the same 403 intent.unauthorized, so doing those two after this call
// changes at most which reason a request that fails several checks gets.
func VerifyEnvelope(in *Instruction, mandates *MandateVerifier) (*Mandate, error) {
	return verifyEnvelope(in.Envelope, mandates, func() error { return VerifyInstruction(in) })
}

// VerifySignedEnvelope is [VerifyEnvelope] for a request the agent signed
// as something other than a payment instruction (a purchase, whose amount
// the merchant sets): env's signature must be of type typ over signed.
func VerifySignedEnvelope(env Envelope, typ string, signed []byte, mandates *MandateVerifier) (*Mandate, error) {
	return verifyEnvelope(env, mandates, func() error { return verifyDetached(env, typ, signed) })
}

func verifyEnvelope(env Envelope, mandates *MandateVerifier, verifySig func() error) (*Mandate, error) {
	if mandates == nil {
		// A wiring bug, not the client's fault: not an UnauthorizedError.
		return nil, errors.New("pay: verify envelope: no mandate verifier")
	}
	m, err := mandates.Verify(env.Mandate)
	if err != nil {
		return nil, err
	}
	if m.Claims.Agent != env.Agent {
		return nil, unauthorized(ReasonSubMismatch, nil)
	}
	if err := verifySig(); err != nil {
		return nil, err
	}
	return m, nil
}

// b64 is the base64url alphabet without padding, refusing non-zero
// trailing bits, so every token has exactly one encoding.
var b64 = base64.RawURLEncoding.Strict()

// splitCompact splits a compact JWS into its three segments and checks
// that the header and signature decode; the payload segment is returned as
// is (empty when detached).
func splitCompact(tok string) (header []byte, payload, sig string, err error) {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return nil, "", "", errors.New("not a compact JWS: no '.'")
	}
	payload, sig, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return nil, "", "", errors.New("not a compact JWS: want three segments")
	}
	if header, err = b64.DecodeString(h); err != nil || len(header) == 0 {
		return nil, "", "", errors.New("header is not base64url")
	}
	if s, err := b64.DecodeString(sig); err != nil || len(s) == 0 {
		return nil, "", "", errors.New("signature is not base64url")
	}
	if _, err := b64.DecodeString(payload); err != nil {
		return nil, "", "", errors.New("payload is not base64url")
	}
	return header, payload, sig, nil
}

// joseHeader is a protected header that passed parseHeader.
type joseHeader struct {
	alg, typ, kid string
	hasKid        bool
}

// parseHeader parses a protected header strictly: one JSON object in
// valid UTF-8, each member at most once, and only the members alg, typ and
// kid, each a string. Refusing every other member refuses crit, b64 (RFC
// 7797 unencoded payloads) and the key-carrying headers jwk, jku, x5u and
// x5c at once: the verifying key always comes from our side.
func parseHeader(b []byte) (joseHeader, error) {
	var h joseHeader
	if !utf8.Valid(b) {
		return h, errors.New("header is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return h, errors.New("header is not a JSON object")
	}
	seen := make(map[string]bool)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h, errors.New("header is not a JSON object")
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return h, errors.New("header is not a JSON object")
		}
		if seen[name] {
			return h, fmt.Errorf("header parameter %.32q given twice", name)
		}
		seen[name] = true
		var dst *string
		switch name {
		case "alg":
			dst = &h.alg
		case "typ":
			dst = &h.typ
		case "kid":
			dst, h.hasKid = &h.kid, true
		default:
			return h, fmt.Errorf("header parameter %.32q is not allowed", name)
		}
		if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
			return h, fmt.Errorf("header parameter %s is not a string", name)
		}
	}
	if _, err := dec.Token(); err != nil {
		return h, errors.New("header is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return h, errors.New("header has data after the JSON object")
	}
	return h, nil
}
