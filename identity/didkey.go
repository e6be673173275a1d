package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"strings"
)

// didKeyPrefix is the did:key method prefix followed by the multibase
// base58btc marker 'z' (SPEC §11.1).
const didKeyPrefix = "did:key:z"

// base58Alphabet is the Bitcoin base58 alphabet used by base58btc.
const base58Alphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// DIDKey returns the did:key form of an Ed25519 public key:
// "did:key:z" + base58btc(0xed 0x01 || key), the ed25519-pub multicodec.
// It returns "" unless pub is 32 bytes, so that a malformed key can never
// name an identity.
func DIDKey(pub ed25519.PublicKey) string {
	if len(pub) != ed25519.PublicKeySize {
		return ""
	}
	return didKeyPrefix + multicodecKey(pub)
}

// multicodecKey is base58btc(0xed 0x01 || pub), the did:key method-specific
// id without its 'z' multibase marker.
func multicodecKey(pub ed25519.PublicKey) string {
	var buf [2 + ed25519.PublicKeySize]byte
	buf[0], buf[1] = 0xed, 0x01
	copy(buf[2:], pub)
	return base58Encode(buf[:])
}

// PublicKeyOf returns the Ed25519 public key an agentId names. Two forms are
// accepted, the two SPEC §5 binds without a rotation chain: 64 hexadecimal
// digits in either case (the raw 32-byte key) and an Ed25519 did:key. Any
// other string is refused with an error matching [ErrAgentID].
func PublicKeyOf(agentID string) (ed25519.PublicKey, error) {
	if len(agentID) == 2*ed25519.PublicKeySize && isHex(agentID) {
		k, err := hex.DecodeString(agentID)
		if err != nil {
			return nil, fmt.Errorf("identity: agentId: %w", ErrAgentID)
		}
		return ed25519.PublicKey(k), nil
	}
	if rest, ok := strings.CutPrefix(agentID, didKeyPrefix); ok {
		// A 34-byte payload is 46 or 47 base58 digits; the bound keeps
		// the quadratic decoder cheap on hostile input.
		if len(rest) > 64 {
			return nil, fmt.Errorf("identity: did:key is too long: %w", ErrAgentID)
		}
		raw, err := base58Decode(rest)
		if err != nil {
			return nil, fmt.Errorf("identity: did:key: %v: %w", err, ErrAgentID)
		}
		// base58 maps leading '1's to leading zero bytes, so a payload that
		// starts 0xed 0x01 has exactly one spelling: no non-canonical form
		// of the same key gets through.
		if len(raw) != 2+ed25519.PublicKeySize || raw[0] != 0xed || raw[1] != 0x01 {
			return nil, fmt.Errorf("identity: did:key is not an Ed25519 key: %w", ErrAgentID)
		}
		return ed25519.PublicKey(raw[2:]), nil
	}
	return nil, fmt.Errorf("identity: agentId %s is neither 64 hex digits nor an Ed25519 did:key: %w", quoteForError(agentID), ErrAgentID)
}

// isHex reports whether s is non-empty and all hexadecimal digits, the
// schema's ^[0-9a-fA-F]+$.
func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// DIDDoc is a W3C DID Core document for an agent's did:key (SPEC §11.1),
// as [DIDDocument] emits it.
type DIDDoc struct {
	Context            []string             `json:"@context"`
	ID                 string               `json:"id"`
	VerificationMethod []VerificationMethod `json:"verificationMethod"`
	Authentication     []string             `json:"authentication"`
	AssertionMethod    []string             `json:"assertionMethod"`
	Service            []DIDService         `json:"service,omitempty"`
}

// VerificationMethod is an Ed25519VerificationKey2020 entry.
type VerificationMethod struct {
	ID                 string `json:"id"`
	Type               string `json:"type"`
	Controller         string `json:"controller"`
	PublicKeyMultibase string `json:"publicKeyMultibase"`
}

// DIDService points at the agent's disclosure.
type DIDService struct {
	ID              string `json:"id"`
	Type            string `json:"type"`
	ServiceEndpoint string `json:"serviceEndpoint"`
}

// DIDDocument emits the DID document of agentID (hex or did:key form),
// shaped as the reference's agentIdToDidDocument: the did:key as id, one
// Ed25519VerificationKey2020 method listed under authentication and
// assertionMethod, and, when disclosureEndpoint is not empty, a service of
// type "AgentDisclosure" pointing at it (normally the agent's
// /.well-known/agent-disclosure URL, SPEC §14).
func DIDDocument(agentID, disclosureEndpoint string) (DIDDoc, error) {
	pub, err := PublicKeyOf(agentID)
	if err != nil {
		return DIDDoc{}, err
	}
	msid := multicodecKey(pub)
	did := didKeyPrefix + msid
	vm := did + "#z" + msid
	doc := DIDDoc{
		Context: []string{"https://www.w3.org/ns/did/v1", "https://w3id.org/security/suites/ed25519-2020/v1"},
		ID:      did,
		VerificationMethod: []VerificationMethod{{
			ID:                 vm,
			Type:               "Ed25519VerificationKey2020",
			Controller:         did,
			PublicKeyMultibase: "z" + msid,
		}},
		Authentication:  []string{vm},
		AssertionMethod: []string{vm},
	}
	if disclosureEndpoint != "" {
		doc.Service = []DIDService{{ID: did + "#agent-disclosure", Type: "AgentDisclosure", ServiceEndpoint: disclosureEndpoint}}
	}
	return doc, nil
}

// base58Encode encodes src in base58btc: leading zero bytes become leading
// '1's and the rest is the big-endian number in base 58.
func base58Encode(src []byte) string {
	zeros := 0
	for zeros < len(src) && src[zeros] == 0 {
		zeros++
	}
	// log(256)/log(58) < 1.37, so this many digits always suffice.
	digits := make([]byte, 0, (len(src)-zeros)*137/100+1)
	for _, c := range src[zeros:] {
		carry := int(c)
		for i := range digits {
			carry += int(digits[i]) << 8
			digits[i] = byte(carry % 58)
			carry /= 58
		}
		for carry > 0 {
			digits = append(digits, byte(carry%58))
			carry /= 58
		}
	}
	out := make([]byte, zeros+len(digits))
	for i := range zeros {
		out[i] = '1'
	}
	for i, d := range digits {
		out[len(out)-1-i] = base58Alphabet[d]
	}
	return string(out)
}

// base58Decode is the inverse of base58Encode.
func base58Decode(s string) ([]byte, error) {
	zeros := 0
	for zeros < len(s) && s[zeros] == '1' {
		zeros++
	}
	bytes := make([]byte, 0, len(s))
	for i := zeros; i < len(s); i++ {
		v := strings.IndexByte(base58Alphabet, s[i])
		if v < 0 {
			return nil, fmt.Errorf("invalid base58 character %q", s[i])
		}
		carry := v
		for j := range bytes {
			carry += int(bytes[j]) * 58
			bytes[j] = byte(carry)
			carry >>= 8
		}
		for carry > 0 {
			bytes = append(bytes, byte(carry))
			carry >>= 8
		}
	}
	out := make([]byte, zeros+len(bytes))
	for i, c := range bytes {
		out[len(out)-1-i] = c
	}
	return out, nil
}
