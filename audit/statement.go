package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
)

// statementPrefix starts every message a statement signature covers. An
// entry's signature covers exactly its 32 hash bytes; a statement's
// message is longer and starts with this prefix, so neither can ever be
// presented as the other although one key signs both.
const statementPrefix = "countersign statement v1\n"

// MaxStatementPurpose bounds the purpose string of a statement.
const MaxStatementPurpose = 64

// statementMessage is what a statement signature covers:
// prefix || purpose || "\n" || the 32 digest bytes.
func statementMessage(purpose string, digest [32]byte) ([]byte, error) {
	if purpose == "" || len(purpose) > MaxStatementPurpose {
		return nil, fmt.Errorf("audit: statement purpose must be 1 to %d bytes", MaxStatementPurpose)
	}
	for i := 0; i < len(purpose); i++ {
		if c := purpose[i]; c <= ' ' || c > '~' {
			return nil, errors.New("audit: statement purpose must be visible ASCII")
		}
	}
	msg := make([]byte, 0, len(statementPrefix)+len(purpose)+1+len(digest))
	msg = append(msg, statementPrefix...)
	msg = append(msg, purpose...)
	msg = append(msg, '\n')
	return append(msg, digest[:]...), nil
}

// SignStatement signs a digest with the record key, for an artifact the
// deployment hands out outside the record (a memory page, an assembled
// context) that anyone holding the verifier key must be able to check
// offline. purpose names the kind of artifact (visible ASCII, at most
// MaxStatementPurpose bytes) and is part of what is signed, so a signature
// over one kind never verifies as another. The result is base64url without
// padding. On a reader it returns ErrReadOnly.
func (l *Log) SignStatement(purpose string, digest [32]byte) (string, error) {
	if l.priv == nil {
		return "", ErrReadOnly
	}
	msg, err := statementMessage(purpose, digest)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(l.priv, msg)), nil
}

// VerifyStatement checks a signature made by [Log.SignStatement] with
// nothing but the log's verifier key. A signature that does not verify
// wraps ErrTampered; a malformed verifier key is reported as such.
func VerifyStatement(verifierKey, purpose string, digest [32]byte, sig string) error {
	_, pub, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	msg, err := statementMessage(purpose, digest)
	if err != nil {
		return err
	}
	s, err := base64.RawURLEncoding.Strict().DecodeString(sig)
	if err != nil || len(s) != ed25519.SignatureSize || !ed25519.Verify(pub, msg, s) {
		return fmt.Errorf("audit: %s statement signature does not verify: %w", purpose, ErrTampered)
	}
	return nil
}

// VerifyEntry checks, with nothing but the log's verifier key, that e is
// an entry the record key signed: e hashes to e.Hash and e.Sig verifies.
// It says nothing about where e sits in the log; [VerifyInclusion] does.
// A failure wraps ErrTampered, except for a malformed verifier key.
func VerifyEntry(verifierKey string, e Entry) error {
	_, pub, err := parseVerifierKey(verifierKey)
	if err != nil {
		return err
	}
	if e.Sig == "" {
		return fmt.Errorf("audit: verify entry %d: %w", e.Seq, ErrNoSignature)
	}
	if _, err := checkServedEntry(pub, e, true); err != nil {
		return fmt.Errorf("audit: verify entry %d: %v: %w", e.Seq, err, ErrTampered)
	}
	return nil
}
