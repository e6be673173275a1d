package operator

import (
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"time"
)

// SignerOptions configures a [Signer]. The zero value gives the defaults.
type SignerOptions struct {
	// Now returns the signing time. The default is time.Now.
	Now func() time.Time
	// Rand is the source of nonces. The default is crypto/rand.Reader. It
	// is read on every Sign, so when the Signer is shared between
	// goroutines Rand must be safe for concurrent use. Signatures always
	// use crypto/rand: Rand exists to make nonces reproducible in tests and
	// examples, never to weaken a signature.
	Rand io.Reader
}

// NonceBytes is how many random bytes a [Signer] puts in each nonce.
const NonceBytes = 16

// Signer signs operator requests: the client half of the scheme. It is
// safe for concurrent use (see [SignerOptions.Rand]).
type Signer struct {
	key      crypto.Signer
	alg      algorithm
	keyID    string
	base     string // the base URL, trailing "/" removed
	basePath string // its escaped path, "" when it has none
	now      func() time.Time
	rand     io.Reader
}

// NewSigner returns a Signer for the operator key key (an
// ed25519.PrivateKey, a *ecdsa.PrivateKey on P-256, or any crypto.Signer
// whose public key is one of those, such as a hardware token), known to
// the server as keyID, for the server whose public base URL is baseURL
// (its --base-url, as /openapi.json publishes it). opts may be nil; it is
// copied.
func NewSigner(key crypto.Signer, keyID, baseURL string, opts *SignerOptions) (*Signer, error) {
	var o SignerOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	if key == nil {
		return nil, errors.New("operator: signer: no key")
	}
	alg, err := algorithmOf(key.Public())
	if err != nil {
		return nil, fmt.Errorf("operator: signer: %w", err)
	}
	if !validKeyID(keyID) {
		return nil, fmt.Errorf("operator: signer: key id must be 1 to %d bytes of visible ASCII", MaxKeyIDLen)
	}
	base, err := normalizeBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(base) // normalizeBaseURL parsed it already
	return &Signer{
		key: key, alg: alg, keyID: keyID, base: base, basePath: u.EscapedPath(),
		now: o.Now, rand: o.Rand,
	}, nil
}

// KeyID returns the key id the Signer puts in every header.
func (s *Signer) KeyID() string { return s.keyID }

// Sign sets the Svc-Operator header of req for the operation operationID
// (its id in /openapi.json, e.g. "operator.approve"). body must be exactly
// the bytes req will send (nil for none): Sign does not read req.Body.
// Every call draws a fresh nonce, so sign each attempt again, retries
// included: a header can be accepted once.
//
// The signed URL is the base URL followed by req.URL's path (with the base
// URL's own path removed from its front, if present) and its query; the
// scheme and host of req.URL are not signed, so a client may reach the
// server by another address than its public one.
func (s *Signer) Sign(req *http.Request, operationID string, body []byte) error {
	if req == nil || req.URL == nil {
		return errors.New("operator: sign: no request URL")
	}
	if req.URL.Opaque != "" {
		// net/http would send Opaque as the path, unescaped and unchecked;
		// there is no path as sent to sign.
		return errors.New("operator: sign: opaque request URLs are not supported")
	}
	if err := checkOperationID(operationID); err != nil {
		return err
	}
	var raw [NonceBytes]byte
	if _, err := io.ReadFull(s.rand, raw[:]); err != nil {
		return fmt.Errorf("operator: sign: nonce: %w", err)
	}
	h := Header{
		KeyID:     s.keyID,
		Timestamp: s.now().Unix(),
		Nonce:     base64.RawURLEncoding.EncodeToString(raw[:]),
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet // what net/http sends for an empty method
	}
	msg, err := signedMessage(operationID, method, requestTarget(s.base, s.basePath, req.URL), h.Timestamp, h.Nonce, body)
	if err != nil {
		return err
	}
	if h.Signature, err = s.sign(msg); err != nil {
		return fmt.Errorf("operator: sign: %w", err)
	}
	v, err := h.MarshalText()
	if err != nil {
		return err
	}
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	req.Header.Set(HeaderName, string(v))
	return nil
}

// sign signs msg with the key's algorithm and returns the wire form.
func (s *Signer) sign(msg []byte) ([]byte, error) {
	switch s.alg {
	case algEdDSA:
		sig, err := s.key.Sign(rand.Reader, msg, crypto.Hash(0))
		if err != nil {
			return nil, err
		}
		if len(sig) != signatureLen {
			return nil, fmt.Errorf("the Ed25519 signer returned %d bytes, want %d", len(sig), signatureLen)
		}
		return sig, nil
	default:
		digest := sha256.Sum256(msg)
		der, err := s.key.Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			return nil, err
		}
		return derToFixed(der)
	}
}

// derToFixed converts an ASN.1 DER ECDSA P-256 signature (what
// crypto.Signer returns) to the 64-byte r||s form of JWS (RFC 7518 §3.4).
func derToFixed(der []byte) ([]byte, error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) != 0 || sig.R == nil || sig.S == nil ||
		sig.R.Sign() <= 0 || sig.S.Sign() <= 0 || sig.R.BitLen() > 256 || sig.S.BitLen() > 256 {
		return nil, errors.New("the P-256 signer returned a malformed signature")
	}
	out := make([]byte, signatureLen)
	sig.R.FillBytes(out[:32])
	sig.S.FillBytes(out[32:])
	return out, nil
}
