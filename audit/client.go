package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// ErrBadVerifierKey is returned for a verifier key that is not a C2SP
// signed-note Ed25519 verifier key ("<origin>+<key hash>+<base64 key>"
// whose key hash matches its origin and key). Every function of the
// package that takes a verifier key returns an error matching it, with
// errors.Is, for such a key; it is a caller's mistake, never a finding
// about the record.
var ErrBadVerifierKey = errors.New("audit: malformed verifier key")

// ParseVerifierKey parses a record verifier key, the one line of
// record.pub and of [Log.VerifierKey], and returns the record's origin
// (the key name) and its Ed25519 public key. White space around the key,
// such as the newline that ends record.pub, is ignored. A malformed key,
// or one whose key hash does not match its origin and key, yields an error
// matching [ErrBadVerifierKey].
//
// The key says which record to trust, so it must come from the
// deployment out of band, never from the server being checked.
func ParseVerifierKey(verifierKey string) (origin string, pub ed25519.PublicKey, err error) {
	v, pub, err := parseVerifierKey(strings.TrimSpace(verifierKey))
	if err != nil {
		return "", nil, err
	}
	return v.Name(), pub, nil
}

// parseVerifierKey checks a note verifier key and extracts the Ed25519
// public key from it. Errors match ErrBadVerifierKey.
func parseVerifierKey(vkey string) (note.Verifier, ed25519.PublicKey, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadVerifierKey, err)
	}
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return nil, nil, fmt.Errorf("%w: want name+hash+key", ErrBadVerifierKey)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return nil, nil, fmt.Errorf("%w: not an Ed25519 key", ErrBadVerifierKey)
	}
	return v, ed25519.PublicKey(raw[1:]), nil
}

// ParseCheckpoint opens a checkpoint in its bare form, the C2SP signed
// note that GET /audit/checkpoint answers with Accept: text/plain and
// "countersign audit checkpoint" prints, and returns it as a [Checkpoint]
// with every field filled in from the signed text. It checks the note's
// signature by the verifier key's owner, that the text is a C2SP
// tlog-checkpoint (extension lines are allowed and ignored) and that its
// origin is the key's name; any failure wraps [ErrTampered]. A malformed
// verifier key yields [ErrBadVerifierKey] instead.
//
// The result can be kept and later given as [RemoteOptions].Trusted or to
// [VerifyConsistency] as the old checkpoint.
func ParseCheckpoint(verifierKey, signedNote string) (Checkpoint, error) {
	v, _, err := parseVerifierKey(strings.TrimSpace(verifierKey))
	if err != nil {
		return Checkpoint{}, err
	}
	n, err := note.Open([]byte(signedNote), note.VerifierList(v))
	if err != nil {
		// %v: the note error is detail; the class is ErrTampered.
		return Checkpoint{}, fmt.Errorf("audit: parse checkpoint: signature does not verify (%v): %w", err, ErrTampered)
	}
	origin, size, root, err := parseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("audit: parse checkpoint: %v: %w", err, ErrTampered)
	}
	if origin != v.Name() {
		return Checkpoint{}, fmt.Errorf("audit: parse checkpoint: origin %q is not the key name %q: %w", origin, v.Name(), ErrTampered)
	}
	return Checkpoint{
		Origin:   origin,
		TreeSize: size,
		RootHash: base64.StdEncoding.EncodeToString(root[:]),
		Note:     signedNote,
	}, nil
}
