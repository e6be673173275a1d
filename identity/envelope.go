package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/countersign/countersign/internal/jcsenc"
)

// Envelope kinds, as reported in [Decision].Envelope.
const (
	EnvelopeV1  = "v1"  // the v1 object envelope (SPEC §3.12.1)
	EnvelopeJWS = "jws" // the v2 flattened JWS envelope (SPEC §3.12.2)
)

// jwsProtected is the protected header every ADP JWS carries, in the byte
// form the reference produces (JSON.stringify of {alg, typ}, keys in that
// order), and jwsProtectedB64 its unpadded base64url encoding, the exact
// "protected" string of the reference fixtures.
const (
	jwsProtected    = `{"alg":"EdDSA","typ":"application/adp+json"}`
	jwsProtectedB64 = "eyJhbGciOiJFZERTQSIsInR5cCI6ImFwcGxpY2F0aW9uL2FkcCtqc29uIn0"
)

// b64 is unpadded base64url as JWS uses it. Strict refuses non-zero padding
// bits, so each value has one spelling.
var b64 = base64.RawURLEncoding.Strict()

// Signature is the v1 envelope's signature block (and the redaction view's).
// Algorithm is always "ed25519"; PublicKey is the raw 32-byte key and Value
// the 64-byte signature, both hex.
type Signature struct {
	Algorithm string `json:"algorithm"`
	PublicKey string `json:"publicKey"`
	Value     string `json:"value"`
}

// SignedDisclosure is the v1 object envelope (SPEC §3.12.1). Disclosure is
// the document as it appears on the wire (canonical when this package wrote
// it); RotationChain is verification metadata outside the signed bytes.
type SignedDisclosure struct {
	Disclosure    json.RawMessage     `json:"disclosure"`
	Signature     Signature           `json:"signature"`
	RotationChain []RotationStatement `json:"rotationChain,omitempty"`
}

// JWSDisclosure is the v2 flattened JWS envelope (SPEC §3.12.2): Payload is
// base64url of the canonical document, Protected base64url of
// {"alg":"EdDSA","typ":"application/adp+json"}, Signature base64url of the
// Ed25519 signature over Protected + "." + Payload.
type JWSDisclosure struct {
	Payload       string              `json:"payload"`
	Protected     string              `json:"protected"`
	Header        JWSHeader           `json:"header"`
	Signature     string              `json:"signature"`
	RotationChain []RotationStatement `json:"rotationChain,omitempty"`
}

// JWSHeader is the unprotected header, carrying the signing key.
type JWSHeader struct {
	JWK JWK `json:"jwk"`
}

// JWK is an OKP Ed25519 public key: Kty "OKP", Crv "Ed25519", X base64url
// of the 32 key bytes.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
}

// envelope is a structurally valid signed disclosure of either shape, with
// the document decoded and canonicalized. Verify checks its signature.
type envelope struct {
	kind  string
	doc   *Disclosure
	canon []byte
	chain []RotationStatement

	sig Signature // v1

	payload, protected, signature, x string // jws, as on the wire
	payloadBytes                     []byte
}

// parseEnvelope discriminates, validates and decodes a signed disclosure
// (SPEC §3.12.3, §3.11). kind is set as soon as the shape is known, even
// when validation then fails.
func parseEnvelope(raw []byte) (envelope, error) {
	if len(raw) > MaxEnvelopeSize {
		return envelope{}, &schemaError{msg: fmt.Sprintf("input is larger than %d bytes", MaxEnvelopeSize)}
	}
	// One copy: every decoded string is a substring of src, so the
	// Disclosure the caller gets back does not alias raw.
	v, err := parseStrictJSON(string(raw), maxJSONDepth)
	if err != nil {
		return envelope{}, err
	}
	env, err := decodeEnvelopeShape(&v)
	if err != nil || env.kind != EnvelopeJWS {
		return env, err
	}
	if err := env.decodePayload(); err != nil {
		return env, at("payload", err)
	}
	return env, nil
}

// isJWSShape is the reference's discriminator: an object carrying both
// payload and protected is a JWS envelope, anything else is judged as v1.
func isJWSShape(v *jsonValue) bool {
	return v.kind == kindObject && v.member("payload") != nil && v.member("protected") != nil
}

// decodeEnvelopeShape validates v against signed-disclosure.schema.json or
// jws-signed-disclosure.schema.json, whichever its shape selects. A JWS
// payload is not decoded here (the schema types it as a string).
func decodeEnvelopeShape(v *jsonValue) (envelope, error) {
	if err := wantObject(v); err != nil {
		return envelope{}, err
	}
	if isJWSShape(v) {
		return decodeJWSShape(v)
	}
	env := envelope{kind: EnvelopeV1}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "disclosure":
			seen |= 1 << 0
			env.doc = new(Disclosure)
			if err = decodeDisclosure(m, env.doc); err == nil {
				env.canon, err = appendCanonical(make([]byte, 0, 2048), m)
			}
		case "signature":
			seen |= 1 << 1
			env.sig, err = decodeSignatureBlock(m)
		case "rotationChain":
			env.chain, err = decodeRotationChain(m)
		default:
			return env, unknownField(k)
		}
		if err != nil {
			return env, at(k, err)
		}
	}
	if seen != 1<<2-1 {
		return env, missing("disclosure signature", seen)
	}
	return env, nil
}

func decodeSignatureBlock(v *jsonValue) (Signature, error) {
	var s Signature
	if err := wantObject(v); err != nil {
		return s, err
	}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "algorithm":
			seen |= 1 << 0
			err = decConst(m, "ed25519")
			s.Algorithm = "ed25519"
		case "publicKey":
			seen |= 1 << 1
			s.PublicKey, err = decHex(m)
		case "value":
			seen |= 1 << 2
			s.Value, err = decHex(m)
		default:
			return s, unknownField(k)
		}
		if err != nil {
			return s, at(k, err)
		}
	}
	if seen != 1<<3-1 {
		return s, missing("algorithm publicKey value", seen)
	}
	return s, nil
}

func decodeJWSShape(v *jsonValue) (envelope, error) {
	env := envelope{kind: EnvelopeJWS}
	var seen uint32
	for i, k := range v.keys {
		m := &v.vals[i]
		var err error
		switch k {
		case "payload":
			seen |= 1 << 0
			env.payload, err = decString(m)
		case "protected":
			seen |= 1 << 1
			env.protected, err = decString(m)
		case "header":
			seen |= 1 << 2
			env.x, err = decodeJWSHeader(m)
		case "signature":
			seen |= 1 << 3
			env.signature, err = decString(m)
		case "rotationChain":
			env.chain, err = decodeRotationChain(m)
		default:
			return env, unknownField(k)
		}
		if err != nil {
			return env, at(k, err)
		}
	}
	if seen != 1<<4-1 {
		return env, missing("payload protected header signature", seen)
	}
	return env, nil
}

// decodeJWSHeader validates {"jwk":{"kty":"OKP","crv":"Ed25519","x":…}} and
// returns x.
func decodeJWSHeader(v *jsonValue) (string, error) {
	if err := wantObject(v); err != nil {
		return "", err
	}
	var x string
	seenJWK := false
	for i, k := range v.keys {
		if k != "jwk" {
			return "", unknownField(k)
		}
		seenJWK = true
		jwk := &v.vals[i]
		if err := wantObject(jwk); err != nil {
			return "", at("jwk", err)
		}
		var seen uint32
		for j, jk := range jwk.keys {
			m := &jwk.vals[j]
			var err error
			switch jk {
			case "kty":
				seen |= 1 << 0
				err = decConst(m, "OKP")
			case "crv":
				seen |= 1 << 1
				err = decConst(m, "Ed25519")
			case "x":
				seen |= 1 << 2
				x, err = decString(m)
			default:
				return "", at("jwk", unknownField(jk))
			}
			if err != nil {
				return "", at("jwk", at(jk, err))
			}
		}
		if seen != 1<<3-1 {
			return "", at("jwk", missing("kty crv x", seen))
		}
	}
	if !seenJWK {
		return "", missing("jwk", 0)
	}
	return x, nil
}

// decodePayload decodes a JWS payload as the disclosure document it must be
// ("for v2 it base64url-decodes and schema-validates the JCS payload",
// SPEC §3.12.3). A payload that is not such a document is a structural
// failure; one that is a valid document but not in canonical form is judged
// later, by the signature check.
func (env *envelope) decodePayload() error {
	raw, err := b64.DecodeString(env.payload)
	if err != nil {
		return &schemaError{msg: "must be unpadded base64url"}
	}
	env.payloadBytes = raw
	env.doc, env.canon, err = decodeDocument(string(raw))
	return err
}

// SignV1 signs d as a v1 object envelope and returns the envelope's JSON
// (itself in canonical form). chain, which may be nil, is carried as the
// envelope's rotationChain: it is needed when d.AgentID names an earlier
// key than key's. d must be structurally valid and bound to key, or SignV1
// refuses to sign ([ErrMalformed], [ErrKeyBinding]): a signed document this
// package's own verifier would refuse helps nobody.
func SignV1(d *Disclosure, key ed25519.PrivateKey, chain []RotationStatement) ([]byte, error) {
	canon, err := Canonicalize(d)
	if err != nil {
		return nil, err
	}
	if err := checkSignable(canon, key, chain); err != nil {
		return nil, err
	}
	return signV1(canon, key, chain), nil
}

// SignJWS signs d as a v2 flattened JWS envelope, with the same rules as
// [SignV1].
func SignJWS(d *Disclosure, key ed25519.PrivateKey, chain []RotationStatement) ([]byte, error) {
	canon, err := Canonicalize(d)
	if err != nil {
		return nil, err
	}
	if err := checkSignable(canon, key, chain); err != nil {
		return nil, err
	}
	return signJWS(canon, key, chain), nil
}

// SignCanonical signs a document the caller has already canonicalized
// (with [Canonicalize]) and returns both envelopes over the same bytes, so
// a dual-encoding emitter canonicalizes once. canon must be exactly the
// canonical form of a structurally valid disclosure bound to key.
func SignCanonical(canon []byte, key ed25519.PrivateKey, chain []RotationStatement) (v1, jws []byte, err error) {
	if err := checkSignable(canon, key, chain); err != nil {
		return nil, nil, err
	}
	return signV1(canon, key, chain), signJWS(canon, key, chain), nil
}

// checkSignable makes sure canon is a canonical, structurally valid
// disclosure whose agentId binds to key (directly or through chain).
func checkSignable(canon []byte, key ed25519.PrivateKey, chain []RotationStatement) error {
	if len(key) != ed25519.PrivateKeySize {
		return fmt.Errorf("identity: sign: private key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if len(canon) > MaxEnvelopeSize {
		return fmt.Errorf("identity: sign: disclosure is larger than %d bytes: %w", MaxEnvelopeSize, ErrMalformed)
	}
	d, again, err := decodeDocument(string(canon))
	if err != nil {
		return fmt.Errorf("identity: sign: malformed disclosure: %w", err)
	}
	if !bytes.Equal(again, canon) {
		return fmt.Errorf("identity: sign: disclosure bytes are not in canonical form: %w", ErrMalformed)
	}
	pub := key.Public().(ed25519.PublicKey)
	if len(chain) > 0 {
		// A chain is carried only to link an earlier identity to key, so it
		// must verify in full; this also guarantees it serializes cleanly.
		if err := VerifyRotationChain(d.AgentID, chain, pub); err != nil {
			return fmt.Errorf("identity: sign: %w: %w", ErrKeyBinding, err)
		}
		return nil
	}
	if err := VerifyKeyBinding(d.AgentID, pub, nil); err != nil {
		return fmt.Errorf("identity: sign: %w", err)
	}
	return nil
}

func signV1(canon []byte, key ed25519.PrivateKey, chain []RotationStatement) []byte {
	sig := ed25519.Sign(key, canon)
	pub := key.Public().(ed25519.PublicKey)
	b := make([]byte, 0, len(canon)+300+len(chain)*400)
	b = append(b, `{"disclosure":`...)
	b = append(b, canon...)
	if len(chain) > 0 {
		b = append(b, `,"rotationChain":`...)
		b = appendChain(b, chain)
	}
	b = append(b, `,"signature":{"algorithm":"ed25519","publicKey":"`...)
	b = hex.AppendEncode(b, pub)
	b = append(b, `","value":"`...)
	b = hex.AppendEncode(b, sig)
	return append(b, `"}}`...)
}

func signJWS(canon []byte, key ed25519.PrivateKey, chain []RotationStatement) []byte {
	pub := key.Public().(ed25519.PublicKey)
	input := make([]byte, 0, len(jwsProtectedB64)+1+b64.EncodedLen(len(canon)))
	input = append(input, jwsProtectedB64...)
	input = append(input, '.')
	input = b64.AppendEncode(input, canon)
	sig := ed25519.Sign(key, input)

	b := make([]byte, 0, len(input)+300+len(chain)*400)
	b = append(b, `{"header":{"jwk":{"crv":"Ed25519","kty":"OKP","x":"`...)
	b = b64.AppendEncode(b, pub)
	b = append(b, `"}},"payload":"`...)
	b = append(b, input[len(jwsProtectedB64)+1:]...)
	b = append(b, `","protected":"`...)
	b = append(b, jwsProtectedB64...)
	b = append(b, '"')
	if len(chain) > 0 {
		b = append(b, `,"rotationChain":`...)
		b = appendChain(b, chain)
	}
	b = append(b, `,"signature":"`...)
	b = b64.AppendEncode(b, sig)
	return append(b, `"}`...)
}

// appendChain writes a rotation chain in canonical form.
func appendChain(b []byte, chain []RotationStatement) []byte {
	b = append(b, '[')
	for i, s := range chain {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"from":`...)
		b = jcsenc.AppendString(b, s.From)
		b = append(b, `,"rotatedAt":`...)
		b = jcsenc.AppendString(b, s.RotatedAt)
		b = append(b, `,"signature":`...)
		b = jcsenc.AppendString(b, s.Signature)
		b = append(b, `,"to":`...)
		b = jcsenc.AppendString(b, s.To)
		b = append(b, `,"type":`...)
		b = jcsenc.AppendString(b, s.Type)
		b = append(b, '}')
	}
	return append(b, ']')
}
