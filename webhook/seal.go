package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// SealKeySize is the size of [Options.SealKey] and of each of
// [Options.OldSealKeys].
const SealKeySize = 32

// ErrUnseal is returned when a stored endpoint secret cannot be opened: it
// was sealed under a key that is not configured (neither SealKey nor one
// of OldSealKeys), or the stored value was altered. It means a
// configuration problem or a damaged store, never a caller mistake. Check
// with errors.Is.
var ErrUnseal = errors.New("webhook: cannot open stored endpoint secret")

// Stored secret formats. A sealed secret is
//
//	"s1." + base64url(keyID[4] ‖ nonce[12] ‖ AES-256-GCM(secret, aad = endpoint id))
//
// keyID names the seal key (the first 4 bytes of SHA-256 of the derived
// AES key) so that a key can be rotated: old keys stay listed in
// OldSealKeys until every endpoint has been rewritten. The endpoint id as
// additional data binds a sealed secret to its endpoint, so a sealed value
// copied onto another endpoint does not open. A secret stored without a
// seal key is "c1." + the secret itself.
const (
	sealedPrefix = "s1."
	clearPrefix  = "c1."
	keyIDSize    = 4
	nonceSize    = 12
)

// sealInfo is the HKDF info string: the AES key is derived from the
// configured seal key rather than used directly, so a deployment may hand
// the same master secret to other components without the keys colliding.
const sealInfo = "countersign webhook endpoint secret seal v1"

// sealer seals and opens endpoint secrets. It is immutable after
// newSealer and safe for concurrent use.
type sealer struct {
	primary *sealKey // nil: store secrets in the clear
	byID    map[[keyIDSize]byte]*sealKey
}

type sealKey struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

func newSealer(key []byte, old [][]byte) (*sealer, error) {
	s := &sealer{byID: map[[keyIDSize]byte]*sealKey{}}
	if key != nil {
		k, err := deriveSealKey(key)
		if err != nil {
			return nil, fmt.Errorf("webhook: SealKey: %w", err)
		}
		s.primary = k
		s.byID[k.id] = k
	}
	for i, o := range old {
		k, err := deriveSealKey(o)
		if err != nil {
			return nil, fmt.Errorf("webhook: OldSealKeys[%d]: %w", i, err)
		}
		if _, dup := s.byID[k.id]; !dup {
			s.byID[k.id] = k
		}
	}
	return s, nil
}

func deriveSealKey(master []byte) (*sealKey, error) {
	if len(master) != SealKeySize {
		return nil, fmt.Errorf("has %d bytes, want %d", len(master), SealKeySize)
	}
	aesKey, err := hkdf.Key(sha256.New, master, nil, sealInfo, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(aesKey)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(aesKey)
	k := &sealKey{aead: aead}
	copy(k.id[:], sum[:keyIDSize])
	return k, nil
}

// seal returns the stored form of secret for endpoint id.
func (s *sealer) seal(id, secret string, rnd io.Reader) (string, error) {
	if s.primary == nil {
		return clearPrefix + secret, nil
	}
	buf := make([]byte, keyIDSize+nonceSize, keyIDSize+nonceSize+len(secret)+s.primary.aead.Overhead())
	copy(buf, s.primary.id[:])
	if _, err := io.ReadFull(rnd, buf[keyIDSize:]); err != nil {
		return "", fmt.Errorf("webhook: sealing secret: %w", err)
	}
	buf = s.primary.aead.Seal(buf, buf[keyIDSize:], []byte(secret), []byte(id))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(buf), nil
}

// open returns the secret in stored, which was sealed for endpoint id.
func (s *sealer) open(id, stored string) (string, error) {
	if v, ok := strings.CutPrefix(stored, clearPrefix); ok {
		return v, nil
	}
	v, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return "", fmt.Errorf("%w: unknown format", ErrUnseal)
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) < keyIDSize+nonceSize {
		return "", fmt.Errorf("%w: malformed", ErrUnseal)
	}
	var kid [keyIDSize]byte
	copy(kid[:], b)
	k := s.byID[kid]
	if k == nil {
		return "", fmt.Errorf("%w: sealed under a key that is not configured (set SealKey or OldSealKeys)", ErrUnseal)
	}
	plain, err := k.aead.Open(nil, b[keyIDSize:keyIDSize+nonceSize], b[keyIDSize+nonceSize:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("%w: authentication failed", ErrUnseal)
	}
	return string(plain), nil
}

// stale reports whether stored should be rewritten under the primary key:
// it is in the clear while a key is configured, or sealed under an old key.
func (s *sealer) stale(stored string) bool {
	if s.primary == nil {
		return false
	}
	v, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return true
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err != nil || len(b) < keyIDSize || [keyIDSize]byte(b[:keyIDSize]) != s.primary.id
}

// NewSealKey returns a fresh random seal key of SealKeySize bytes from
// crypto/rand, for a deployment that keeps its own key file.
func NewSealKey() []byte {
	k := make([]byte, SealKeySize)
	rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}
