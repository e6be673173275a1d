package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/jcsenc"
)

// MaxRotationChain is the most hops a rotation chain may have (SPEC §5.1);
// the bound caps the signature checks a hostile envelope can demand.
const MaxRotationChain = 32

// RotationStatement moves an identity from one key to the next (SPEC §5.1).
// Signature is the From key's hex Ed25519 signature over the canonical body
// {"from","rotatedAt","to","type":"rotation"}; only the old key signs, so
// trust flows forward from the established identity.
type RotationStatement struct {
	Type      string `json:"type"` // always "rotation"
	From      string `json:"from"`
	To        string `json:"to"`
	RotatedAt string `json:"rotatedAt"`
	Signature string `json:"signature"`
}

// rotationBody is canonicalize({type: "rotation", from, to, rotatedAt}),
// written directly: the keys in RFC 8785 order are from, rotatedAt, to, type.
func rotationBody(from, to, rotatedAt string) []byte {
	b := make([]byte, 0, 64+len(from)+len(to)+len(rotatedAt))
	b = append(b, `{"from":`...)
	b = jcsenc.AppendString(b, from)
	b = append(b, `,"rotatedAt":`...)
	b = jcsenc.AppendString(b, rotatedAt)
	b = append(b, `,"to":`...)
	b = jcsenc.AppendString(b, to)
	return append(b, `,"type":"rotation"}`...)
}

// Rotate issues the statement by which the holder of from hands its
// identity to the key to, at the given time. From and To are written as
// lowercase hex keys, RotatedAt with [Timestamp].
func Rotate(from ed25519.PrivateKey, to ed25519.PublicKey, at time.Time) (RotationStatement, error) {
	if len(from) != ed25519.PrivateKeySize {
		return RotationStatement{}, fmt.Errorf("identity: rotate: private key is %d bytes, want %d", len(from), ed25519.PrivateKeySize)
	}
	if len(to) != ed25519.PublicKeySize {
		return RotationStatement{}, fmt.Errorf("identity: rotate: public key is %d bytes, want %d", len(to), ed25519.PublicKeySize)
	}
	s := RotationStatement{
		Type:      "rotation",
		From:      hex.EncodeToString(from.Public().(ed25519.PublicKey)),
		To:        hex.EncodeToString(to),
		RotatedAt: Timestamp(at),
	}
	s.Signature = hex.EncodeToString(ed25519.Sign(from, rotationBody(s.From, s.To, s.RotatedAt)))
	return s, nil
}

// VerifyRotationChain checks that chain links agentID to signingKey
// (SPEC §5.1): it has 1 to [MaxRotationChain] hops; a cursor starts at
// agentID's key; each hop's From must name the cursor's key and its
// signature must verify against that key; no hop may move to a key already
// visited (agentID's included); and the last hop must end at signingKey.
//
// Keys are compared, not strings: agentID, From and To may each be 64 hex
// digits (either case) or an Ed25519 did:key, so a did:key agentId chains to
// the hex From a [Rotate] statement carries. (The reference compares the
// strings, so with it a did:key agentId cannot rotate at all.) The signed
// body is built from From, To and RotatedAt exactly as written.
//
// Errors match [ErrRotationChain], and also [ErrInvalidSignature] when a
// hop's signature is what failed.
func VerifyRotationChain(agentID string, chain []RotationStatement, signingKey ed25519.PublicKey) error {
	if err := checkRotationChain(agentID, chain, signingKey); err != nil {
		return err
	}
	return nil
}

// chainError is a rotation-chain failure. It matches ErrRotationChain, and
// ErrInvalidSignature when a hop's signature failed.
type chainError struct {
	msg string
	sig bool
}

func (e *chainError) Error() string { return "identity: rotation chain: " + e.msg }

func (e *chainError) Is(target error) bool {
	return target == ErrRotationChain || (e.sig && target == ErrInvalidSignature)
}

func chainErrorf(format string, args ...any) *chainError {
	return &chainError{msg: fmt.Sprintf(format, args...)}
}

func checkRotationChain(agentID string, chain []RotationStatement, signingKey ed25519.PublicKey) *chainError {
	switch {
	case len(chain) == 0:
		return chainErrorf("empty")
	case len(chain) > MaxRotationChain:
		return chainErrorf("%d hops, more than %d", len(chain), MaxRotationChain)
	case len(signingKey) != ed25519.PublicKeySize:
		return chainErrorf("signing key is %d bytes, want %d", len(signingKey), ed25519.PublicKeySize)
	}
	cursor, err := PublicKeyOf(agentID)
	if err != nil {
		return chainErrorf("agentId does not name an Ed25519 key")
	}
	seen := make([]ed25519.PublicKey, 0, len(chain)+1)
	seen = append(seen, cursor)
	for i, s := range chain {
		if s.Type != "rotation" {
			return chainErrorf("hop %d: type is not \"rotation\"", i)
		}
		if !utf8.ValidString(s.From) || !utf8.ValidString(s.To) || !utf8.ValidString(s.RotatedAt) {
			return chainErrorf("hop %d: invalid UTF-8", i)
		}
		from, err := PublicKeyOf(s.From)
		if err != nil || !bytes.Equal(from, cursor) {
			return chainErrorf("hop %d does not continue from the previous key", i)
		}
		sig, err := hex.DecodeString(s.Signature)
		if err != nil || len(sig) != ed25519.SignatureSize ||
			!ed25519.Verify(from, rotationBody(s.From, s.To, s.RotatedAt), sig) {
			e := chainErrorf("hop %d is not signed by its from key", i)
			e.sig = true
			return e
		}
		to, err := PublicKeyOf(s.To)
		if err != nil {
			return chainErrorf("hop %d: to does not name an Ed25519 key", i)
		}
		for _, k := range seen {
			if bytes.Equal(k, to) {
				return chainErrorf("hop %d returns to an earlier key (cycle)", i)
			}
		}
		seen = append(seen, to)
		cursor = to
	}
	if !bytes.Equal(cursor, signingKey) {
		return chainErrorf("does not end at the signing key")
	}
	return nil
}

// bindingError is an identity-binding failure; it matches ErrKeyBinding and
// unwraps to the rotation-chain failure when a chain was tried.
type bindingError struct {
	reason string
	chain  *chainError
}

func (e *bindingError) Error() string {
	return "identity: agentId is not bound to the signing key: " + e.reason
}

func (e *bindingError) Is(target error) bool { return target == ErrKeyBinding }

func (e *bindingError) Unwrap() error {
	if e.chain == nil {
		return nil
	}
	return e.chain
}

// VerifyKeyBinding checks the identity binding of SPEC §5: agentID names
// signingKey directly (64 hex digits in either case, or its did:key), or a
// non-empty chain links agentID to signingKey ([VerifyRotationChain]). A
// chain is consulted only when the direct forms fail, as in the reference.
// Errors match [ErrKeyBinding] (and the chain's errors when one was tried).
func VerifyKeyBinding(agentID string, signingKey ed25519.PublicKey, chain []RotationStatement) error {
	if len(signingKey) != ed25519.PublicKeySize {
		return &bindingError{reason: fmt.Sprintf("signing key is %d bytes, want %d", len(signingKey), ed25519.PublicKeySize)}
	}
	if k, err := PublicKeyOf(agentID); err == nil && bytes.Equal(k, signingKey) {
		return nil
	}
	if len(chain) > 0 {
		if err := checkRotationChain(agentID, chain, signingKey); err != nil {
			return &bindingError{reason: "rotation chain: " + err.msg, chain: err}
		}
		return nil
	}
	return &bindingError{reason: "agentId does not match the signing public key"}
}
