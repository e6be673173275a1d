// Package sealbox seals secrets the server must keep and use again (a
// webhook endpoint's signing secret, a merchant's API key) under the
// server's seal key, so that the store never holds them in the clear.
//
// A sealed secret is
//
//	"s1." + base64url(keyID[4] ‖ nonce[12] ‖ AES-256-GCM(secret, aad = the owner's id))
//
// The AES key is derived from the configured master key with HKDF-SHA256
// and a purpose string, so one master key can serve several components
// without their keys colliding. keyID names the derived key (the first 4
// bytes of its SHA-256) so that a master key can be rotated: old keys stay
// configured until every secret has been rewritten. The owner's id as
// additional data binds a sealed value to its owner: copied onto another
// record it does not open. Without a master key a secret is stored as
// "c1." + the secret itself (sandbox only).
package sealbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// KeySize is the size of a master key.
const KeySize = 32

// ErrUnseal is returned when a stored secret cannot be opened: it was
// sealed under a key that is not configured, or it was altered. Check with
// errors.Is.
var ErrUnseal = errors.New("sealbox: cannot open stored secret")

const (
	sealedPrefix = "s1."
	clearPrefix  = "c1."
	keyIDSize    = 4
	nonceSize    = 12
)

// Box seals and opens secrets for one purpose. It is immutable after New
// and safe for concurrent use.
type Box struct {
	primary *key // nil: store secrets in the clear
	byID    map[[keyIDSize]byte]*key
}

type key struct {
	id   [keyIDSize]byte
	aead cipher.AEAD
}

// New returns a box sealing under master (nil: in the clear) and opening
// under master and every old key, with keys derived for purpose.
func New(master []byte, old [][]byte, purpose string) (*Box, error) {
	b := &Box{byID: map[[keyIDSize]byte]*key{}}
	if master != nil {
		k, err := derive(master, purpose)
		if err != nil {
			return nil, fmt.Errorf("sealbox: key: %w", err)
		}
		b.primary = k
		b.byID[k.id] = k
	}
	for i, o := range old {
		k, err := derive(o, purpose)
		if err != nil {
			return nil, fmt.Errorf("sealbox: old key %d: %w", i, err)
		}
		if _, dup := b.byID[k.id]; !dup {
			b.byID[k.id] = k
		}
	}
	return b, nil
}

func derive(master []byte, purpose string) (*key, error) {
	if len(master) != KeySize {
		return nil, fmt.Errorf("has %d bytes, want %d", len(master), KeySize)
	}
	aesKey, err := hkdf.Key(sha256.New, master, nil, purpose, 32)
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
	k := &key{aead: aead}
	copy(k.id[:], sum[:keyIDSize])
	return k, nil
}

// Sealed reports whether the box seals (a master key is configured).
func (b *Box) Sealed() bool { return b.primary != nil }

// Seal returns the stored form of secret for the owner id.
func (b *Box) Seal(id, secret string, rnd io.Reader) (string, error) {
	if b.primary == nil {
		return clearPrefix + secret, nil
	}
	buf := make([]byte, keyIDSize+nonceSize, keyIDSize+nonceSize+len(secret)+b.primary.aead.Overhead())
	copy(buf, b.primary.id[:])
	if _, err := io.ReadFull(rnd, buf[keyIDSize:]); err != nil {
		return "", fmt.Errorf("sealbox: sealing: %w", err)
	}
	buf = b.primary.aead.Seal(buf, buf[keyIDSize:], []byte(secret), []byte(id))
	return sealedPrefix + base64.RawURLEncoding.EncodeToString(buf), nil
}

// Open returns the secret in stored, which was sealed for the owner id.
func (b *Box) Open(id, stored string) (string, error) {
	if v, ok := strings.CutPrefix(stored, clearPrefix); ok {
		return v, nil
	}
	v, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return "", fmt.Errorf("%w: unknown format", ErrUnseal)
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < keyIDSize+nonceSize {
		return "", fmt.Errorf("%w: malformed", ErrUnseal)
	}
	var kid [keyIDSize]byte
	copy(kid[:], raw)
	k := b.byID[kid]
	if k == nil {
		return "", fmt.Errorf("%w: sealed under a key that is not configured", ErrUnseal)
	}
	plain, err := k.aead.Open(nil, raw[keyIDSize:keyIDSize+nonceSize], raw[keyIDSize+nonceSize:], []byte(id))
	if err != nil {
		return "", fmt.Errorf("%w: authentication failed", ErrUnseal)
	}
	return string(plain), nil
}

// Stale reports whether stored should be rewritten under the primary key:
// it is in the clear while a key is configured, or sealed under an old key.
func (b *Box) Stale(stored string) bool {
	if b.primary == nil {
		return false
	}
	v, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return true
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	return err != nil || len(raw) < keyIDSize || [keyIDSize]byte(raw[:keyIDSize]) != b.primary.id
}
