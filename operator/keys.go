package operator

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// PublicKey is an operator's public key: its kid and an ed25519.PublicKey
// or a *ecdsa.PublicKey on P-256. The pay package verifies mandates with
// the same type (pay.OperatorKey is an alias), so a key set loaded once
// serves both.
type PublicKey struct {
	// KeyID is the key's kid: 1 to 128 bytes of visible ASCII, unique.
	KeyID string
	// Public is an ed25519.PublicKey or a *ecdsa.PublicKey on P-256.
	Public crypto.PublicKey
}

// AlgForKey returns the only JWS algorithm a public key may verify: EdDSA
// for Ed25519, ES256 for P-256. Binding the algorithm to the key, never
// to a token's header, is what defeats algorithm-confusion attacks.
func AlgForKey(pub crypto.PublicKey) (jwa.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return jwa.EdDSA(), nil
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return jwa.ES256(), nil
		}
	}
	return jwa.EmptySignatureAlgorithm(), fmt.Errorf("want an Ed25519 or P-256 key, not %T", pub)
}

// LoadKeySet parses the server's trusted operator keys: a JWK Set
// ({"keys": [...]}) of public OKP Ed25519 and EC P-256 keys. Every key
// must have a kid of 1 to 128 visible ASCII bytes, kids must be unique, and
// no public key may appear twice (keyid is not signed, so two kids for one
// key would make the signer's identity ambiguous). A private key in the
// set is refused: the server holds public keys only, and a private key
// there has leaked. A "use" or "alg" a key states must be "sig" and the
// algorithm of its type.
func LoadKeySet(b []byte) ([]PublicKey, error) {
	// jwk.Parse also takes a single key; the file is documented as a set,
	// and a lone key is more likely a private key file given by mistake.
	var shape struct {
		Keys json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &shape); err != nil {
		return nil, fmt.Errorf("operator: key set: %w", err)
	}
	if len(shape.Keys) == 0 || shape.Keys[0] != '[' {
		return nil, errors.New(`operator: key set: not a JWK Set (want {"keys": [...]})`)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("operator: key set: %w", err)
	}
	keys, err := KeysFromSet(set)
	if err != nil {
		return nil, fmt.Errorf("operator: key set: %w", err)
	}
	if _, err := indexKeys(keys); err != nil {
		return nil, fmt.Errorf("operator: key set: %w", err)
	}
	return keys, nil
}

// ReadKeySet reads a JWK Set file with [LoadKeySet].
func ReadKeySet(path string) ([]PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("operator: %w", err)
	}
	keys, err := LoadKeySet(b)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return keys, nil
}

// algorithm is a signature algorithm an operator key uses. The key
// decides it; nothing in the header names it, so there is no algorithm to
// confuse.
type algorithm uint8

const (
	algEdDSA algorithm = iota + 1
	algES256
)

func (a algorithm) String() string {
	if a == algEdDSA {
		return "EdDSA"
	}
	return "ES256"
}

// signatureLen is 64 for both: an Ed25519 signature, and r||s of P-256.
const signatureLen = 64

// algorithmOf returns the algorithm of a public key, or an error for any
// key that is not Ed25519 or ECDSA P-256.
func algorithmOf(pub crypto.PublicKey) (algorithm, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return algEdDSA, nil
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return algES256, nil
		}
	}
	return 0, fmt.Errorf("want an Ed25519 or P-256 public key, not %T", pub)
}

// trustedKey is a key of the verifier, ready to use.
type trustedKey struct {
	id  string
	alg algorithm
	pub crypto.PublicKey
}

// indexKeys checks keys (at least one, valid unique kids, supported types,
// no key twice) and indexes them by kid.
func indexKeys(keys []PublicKey) (map[string]trustedKey, error) {
	if len(keys) == 0 {
		return nil, errors.New("no operator keys")
	}
	out := make(map[string]trustedKey, len(keys))
	for i, k := range keys {
		if !validKeyID(k.KeyID) {
			return nil, fmt.Errorf("key %d: kid must be 1 to %d bytes of visible ASCII", i, MaxKeyIDLen)
		}
		if _, dup := out[k.KeyID]; dup {
			return nil, fmt.Errorf("kid %q given twice", k.KeyID)
		}
		alg, err := algorithmOf(k.Public)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.KeyID, err)
		}
		for _, o := range keys[:i] {
			if eq, ok := o.Public.(interface{ Equal(crypto.PublicKey) bool }); ok && eq.Equal(k.Public) {
				return nil, fmt.Errorf("keys %q and %q are the same key", o.KeyID, k.KeyID)
			}
		}
		out[k.KeyID] = trustedKey{id: k.KeyID, alg: alg, pub: k.Public}
	}
	return out, nil
}

// KeysFromSet converts the server's operator JWK Set (DESIGN §5)
// to PublicKeys. Every key must have a kid, be an OKP Ed25519 or EC
// P-256 public key, and if it states "use" or "alg" they must be "sig" and
// EdDSA or ES256 (matching the key type). A private key in the set is an
// error: the server holds public keys only, and a private key there means
// it has leaked.
func KeysFromSet(set jwk.Set) ([]PublicKey, error) {
	if set == nil || set.Len() == 0 {
		return nil, errors.New("operator: keys: the set is empty")
	}
	out := make([]PublicKey, 0, set.Len())
	for i := range set.Len() {
		k, _ := set.Key(i)
		kid, ok := k.KeyID()
		if !ok || kid == "" {
			return nil, fmt.Errorf("operator: keys: key %d has no kid", i)
		}
		if priv, err := jwk.IsPrivateKey(k); err == nil && priv {
			return nil, fmt.Errorf("operator: keys: key %q is a private key; the server must hold public keys only", kid)
		}
		if use, ok := k.KeyUsage(); ok && use != "" && use != jwk.ForSignature.String() {
			return nil, fmt.Errorf("operator: keys: key %q has use %q, want sig", kid, use)
		}
		var raw any
		if err := jwk.Export(k, &raw); err != nil {
			return nil, fmt.Errorf("operator: keys: key %q: %w", kid, err)
		}
		alg, err := AlgForKey(raw)
		if err != nil {
			return nil, fmt.Errorf("operator: keys: key %q: %w", kid, err)
		}
		if a, ok := k.Algorithm(); ok && a.String() != alg.String() {
			return nil, fmt.Errorf("operator: keys: key %q states alg %s, want %s", kid, a, alg)
		}
		out = append(out, PublicKey{KeyID: kid, Public: raw})
	}
	return out, nil
}
