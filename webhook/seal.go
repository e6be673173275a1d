package webhook

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/countersign/countersign/internal/sealbox"
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

// sealInfo is the HKDF purpose of webhook secrets (package sealbox): the
// AES key is derived from the configured seal key rather than used
// directly, so a deployment may hand the same master secret to other
// components (commerce seals merchant credentials with it) without the
// keys colliding. It never changes: stored secrets depend on it.
const sealInfo = "countersign webhook endpoint secret seal v1"

// sealer seals and opens endpoint secrets, bound to the endpoint id.
type sealer struct{ box *sealbox.Box }

func newSealer(key []byte, old [][]byte) (*sealer, error) {
	if key != nil && len(key) != SealKeySize {
		return nil, fmt.Errorf("webhook: SealKey: has %d bytes, want %d", len(key), SealKeySize)
	}
	for i, o := range old {
		if len(o) != SealKeySize {
			return nil, fmt.Errorf("webhook: OldSealKeys[%d]: has %d bytes, want %d", i, len(o), SealKeySize)
		}
	}
	b, err := sealbox.New(key, old, sealInfo)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &sealer{box: b}, nil
}

// seal returns the stored form of secret for endpoint id.
func (s *sealer) seal(id, secret string, rnd io.Reader) (string, error) {
	v, err := s.box.Seal(id, secret, rnd)
	if err != nil {
		return "", fmt.Errorf("webhook: sealing secret: %w", err)
	}
	return v, nil
}

// open returns the secret in stored, which was sealed for endpoint id.
func (s *sealer) open(id, stored string) (string, error) {
	v, err := s.box.Open(id, stored)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnseal, err)
	}
	return v, nil
}

// stale reports whether stored should be rewritten under the primary key.
func (s *sealer) stale(stored string) bool { return s.box.Stale(stored) }

// NewSealKey returns a fresh random seal key of SealKeySize bytes from
// crypto/rand, for a deployment that keeps its own key file.
func NewSealKey() []byte {
	k := make([]byte, SealKeySize)
	rand.Read(k) // crypto/rand.Read never fails (Go 1.24+)
	return k
}
