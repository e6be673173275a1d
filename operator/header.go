package operator

import (
	"encoding/base64"
	"errors"
	"fmt"
)

// HeaderName is the request header that carries an operator signature.
const HeaderName = "Svc-Operator"

// Limits of the Svc-Operator header.
const (
	// MaxHeaderLen is the longest header value accepted, in bytes. A
	// well-formed header is under 300 bytes; the cap keeps a hostile one
	// from costing more than a glance.
	MaxHeaderLen = 4096
	// MaxKeyIDLen is the longest keyid, in bytes: the limit on a kid in
	// the operator key set.
	MaxKeyIDLen = 128
	// MinNonceBytes and MaxNonceBytes bound the decoded nonce.
	MinNonceBytes = 16
	MaxNonceBytes = 64
	// MaxSignatureLen is the longest sig accepted, in bytes. Both
	// algorithms make 64-byte signatures; the slack lets a wrong-length
	// signature reach the precise alg_mismatch refusal.
	MaxSignatureLen = 512
)

// ErrMalformedHeader is wrapped by every error of [ParseHeader]; check with
// errors.Is.
var ErrMalformedHeader = errors.New("operator: malformed Svc-Operator header")

// Header is a parsed Svc-Operator header.
type Header struct {
	// KeyID names the operator key (member keyid).
	KeyID string
	// Timestamp is the signing time in Unix seconds (member ts).
	Timestamp int64
	// Nonce is base64url without padding of 16 to 64 random bytes
	// (member nonce), kept as sent: it is signed as a string.
	Nonce string
	// Signature is the raw signature (member sig).
	Signature []byte
}

// Member keys of the header.
const (
	memberKeyID = "keyid"
	memberTS    = "ts"
	memberNonce = "nonce"
	memberSig   = "sig"
)

// ParseHeader parses the value of a Svc-Operator header (all field lines
// joined by ", ", as RFC 8941 §4.2 prescribes). It needs exactly the
// members keyid (String), ts (Integer), nonce (String) and sig (Byte
// Sequence), in any order, and refuses unknown members, repeated members,
// parameters and inner lists; see the package documentation for why.
// Errors match [ErrMalformedHeader] and never quote the input beyond a
// member key, so they may be shown to the client.
func ParseHeader(s string) (Header, error) {
	if len(s) > MaxHeaderLen {
		return Header{}, fmt.Errorf("%w: longer than %d bytes", ErrMalformedHeader, MaxHeaderLen)
	}
	ms, err := parseDictionary(s)
	if err != nil {
		return Header{}, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	var h Header
	var seen [4]bool
	for _, m := range ms {
		var i int
		var want itemKind
		switch m.key {
		case memberKeyID:
			i, want = 0, kindString
		case memberTS:
			i, want = 1, kindInteger
		case memberNonce:
			i, want = 2, kindString
		case memberSig:
			i, want = 3, kindBytes
		default:
			return Header{}, fmt.Errorf("%w: unknown member %.32q (only keyid, ts, nonce and sig are allowed)", ErrMalformedHeader, m.key)
		}
		if m.val.kind != want {
			return Header{}, fmt.Errorf("%w: member %s must be %v, not %v", ErrMalformedHeader, m.key, want, m.val.kind)
		}
		seen[i] = true
		switch i {
		case 0:
			h.KeyID = m.val.str
		case 1:
			h.Timestamp = m.val.num
		case 2:
			h.Nonce = m.val.str
		case 3:
			h.Signature = m.val.bytes
		}
	}
	for i, k := range [...]string{memberKeyID, memberTS, memberNonce, memberSig} {
		if !seen[i] {
			return Header{}, fmt.Errorf("%w: member %s is missing", ErrMalformedHeader, k)
		}
	}
	if err := h.check(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// check enforces the rules on member values that RFC 8941 does not.
func (h Header) check() error {
	if !validKeyID(h.KeyID) {
		return fmt.Errorf("%w: keyid must be 1 to %d bytes of visible ASCII", ErrMalformedHeader, MaxKeyIDLen)
	}
	if h.Timestamp > maxInteger || h.Timestamp < -maxInteger {
		return fmt.Errorf("%w: ts is out of range", ErrMalformedHeader)
	}
	if len(h.Nonce) > base64.RawURLEncoding.EncodedLen(MaxNonceBytes) {
		return fmt.Errorf("%w: nonce must encode %d to %d bytes", ErrMalformedHeader, MinNonceBytes, MaxNonceBytes)
	}
	n, err := strictRawURL.DecodeString(h.Nonce)
	if err != nil {
		return fmt.Errorf("%w: nonce must be canonical base64url without padding", ErrMalformedHeader)
	}
	if len(n) < MinNonceBytes || len(n) > MaxNonceBytes {
		return fmt.Errorf("%w: nonce must encode %d to %d bytes, not %d", ErrMalformedHeader, MinNonceBytes, MaxNonceBytes, len(n))
	}
	if len(h.Signature) == 0 || len(h.Signature) > MaxSignatureLen {
		return fmt.Errorf("%w: sig must be 1 to %d bytes", ErrMalformedHeader, MaxSignatureLen)
	}
	return nil
}

// strictRawURL decodes base64url without padding and refuses non-zero
// unused bits, so a nonce has one spelling.
var strictRawURL = base64.RawURLEncoding.Strict()

// MarshalText returns the header value in RFC 8941 form, members in the
// order keyid, ts, nonce, sig. It fails for a header that [ParseHeader]
// would refuse, so what it returns always parses back to h.
func (h Header) MarshalText() ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, err
	}
	s, err := serializeDictionary([]member{
		{memberKeyID, item{kind: kindString, str: h.KeyID}},
		{memberTS, item{kind: kindInteger, num: h.Timestamp}},
		{memberNonce, item{kind: kindString, str: h.Nonce}},
		{memberSig, item{kind: kindBytes, bytes: h.Signature}},
	})
	if err != nil { // unreachable after check; kept so a future member cannot slip through
		return nil, fmt.Errorf("%w: %w", ErrMalformedHeader, err)
	}
	return []byte(s), nil
}

// UnmarshalText parses b with [ParseHeader].
func (h *Header) UnmarshalText(b []byte) error {
	v, err := ParseHeader(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// validKeyID reports whether kid is 1 to MaxKeyIDLen bytes of visible
// ASCII, the rule pay applies to the kids of the operator key set.
func validKeyID(kid string) bool {
	if kid == "" || len(kid) > MaxKeyIDLen {
		return false
	}
	for i := 0; i < len(kid); i++ {
		if kid[i] < 0x21 || kid[i] > 0x7e {
			return false
		}
	}
	return true
}
