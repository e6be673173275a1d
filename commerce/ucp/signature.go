package ucp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/yaronf/httpsign"

	"github.com/countersign/countersign/commerce/cart"
)

// This file verifies UCP 2026-04-08 response signatures (RFC 9421 over the
// REST binding, docs/specification/signatures.md): the merchant signs
// @status and, with a body, content-digest (RFC 9530, sha-256 over the raw
// bytes) and content-type, with an EC key from the signing_keys of its
// profile, named by keyid. httpsign parses the signature, rebuilds the
// signature base and checks the raw r||s ECDSA value; httpsfv (the
// structured-field parser httpsign itself uses) reads what httpsign does
// not expose: the covered components and the signature parameters.

// SigningKey is a merchant's public signing key as a JWK (RFC 7517), the
// shape UCP profiles publish in signing_keys. Only EC keys on P-256
// (ES256) and P-384 (ES384) are usable; the curve decides the algorithm.
type SigningKey struct {
	Kid string `json:"kid" validate:"required,max=256" doc:"Key id: the keyid the merchant's signatures name."`
	Kty string `json:"kty" validate:"required,max=16" doc:"Key type: EC."`
	Crv string `json:"crv,omitempty" validate:"omitempty,max=16" doc:"Curve: P-256 (ES256) or P-384 (ES384)."`
	X   string `json:"x,omitempty" validate:"omitempty,max=128" doc:"X coordinate, base64url without padding."`
	Y   string `json:"y,omitempty" validate:"omitempty,max=128" doc:"Y coordinate, base64url without padding."`
	Use string `json:"use,omitempty" validate:"omitempty,max=16" doc:"Key use; sig when present."`
	Alg string `json:"alg,omitempty" validate:"omitempty,max=16" doc:"ES256 or ES384 when present; it must match the curve."`
}

// errUnusableKey marks a key of a type or curve UCP does not sign with (as
// opposed to a malformed one). A profile may publish such keys (for other
// purposes); they are skipped.
var errUnusableKey = errors.New("not a UCP signing key")

// curves are the curves UCP signs with: JWK crv → curve, JWS alg, the
// RFC 9421 algorithm name and the coordinate size in bytes.
var curves = map[string]struct {
	curve       elliptic.Curve
	jws, rfc    string
	coordinates int
}{
	"P-256": {elliptic.P256(), "ES256", "ecdsa-p256-sha256", 32},
	"P-384": {elliptic.P384(), "ES384", "ecdsa-p384-sha384", 48},
}

// PublicKey checks k and returns its public key. Errors say what is
// wrong; a key that is well formed but not an EC P-256 or P-384 key is
// refused too (UCP signatures use no other).
func (k SigningKey) PublicKey() (*ecdsa.PublicKey, error) {
	if k.Kid == "" {
		return nil, errors.New("kid is required")
	}
	if k.Kty != "EC" {
		return nil, fmt.Errorf("%w: kty %q (UCP signs with EC keys)", errUnusableKey, k.Kty)
	}
	c, ok := curves[k.Crv]
	if !ok {
		return nil, fmt.Errorf("%w: crv %q (UCP signs with P-256 or P-384)", errUnusableKey, k.Crv)
	}
	if k.Use != "" && k.Use != "sig" {
		return nil, fmt.Errorf("%w: use %q", errUnusableKey, k.Use)
	}
	if k.Alg != "" && k.Alg != c.jws {
		return nil, fmt.Errorf("alg %q does not match crv %s (%s)", k.Alg, k.Crv, c.jws)
	}
	point := []byte{4}
	for _, coord := range []struct{ name, v string }{{"x", k.X}, {"y", k.Y}} {
		b, err := base64.RawURLEncoding.Strict().DecodeString(coord.v)
		if err != nil || len(b) != c.coordinates {
			return nil, fmt.Errorf("%s must be %d bytes in base64url without padding", coord.name, c.coordinates)
		}
		point = append(point, b...)
	}
	pub, err := ecdsa.ParseUncompressedPublicKey(c.curve, point)
	if err != nil {
		return nil, fmt.Errorf("not a point of %s: %v", k.Crv, err)
	}
	return pub, nil
}

// Thumbprint is the key's RFC 7638 JWK thumbprint (SHA-256, base64url),
// which names a key independently of its kid.
func (k SigningKey) Thumbprint() (string, error) {
	if _, err := k.PublicKey(); err != nil {
		return "", err
	}
	// The required members of an EC key, in lexicographic order, no
	// white space (RFC 7638 §3.2); x and y are base64url, which JSON
	// never escapes.
	b, err := json.Marshal(struct {
		Crv string `json:"crv"`
		Kty string `json:"kty"`
		X   string `json:"x"`
		Y   string `json:"y"`
	}{k.Crv, k.Kty, k.X, k.Y})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// SigningKeyOf is the public JWK of pub (P-256 or P-384) under kid.
func SigningKeyOf(kid string, pub *ecdsa.PublicKey) (SigningKey, error) {
	if pub == nil {
		return SigningKey{}, errors.New("ucp: no public key")
	}
	for name, c := range curves {
		if pub.Curve != c.curve {
			continue
		}
		b, err := pub.Bytes()
		if err != nil {
			return SigningKey{}, fmt.Errorf("ucp: %w", err)
		}
		n := c.coordinates
		return SigningKey{Kid: kid, Kty: "EC", Crv: name, X: base64.RawURLEncoding.EncodeToString(b[1 : 1+n]),
			Y: base64.RawURLEncoding.EncodeToString(b[1+n:]), Use: "sig", Alg: c.jws}, nil
	}
	return SigningKey{}, errors.New("ucp: signing keys are EC P-256 or P-384")
}

// CheckSigningKeys checks keys an operator pins: each must be a usable EC
// P-256 or P-384 public key, and no kid may repeat.
func CheckSigningKeys(keys []SigningKey) error {
	_, err := pinnedRing(keys)
	return err
}

// verifyKey is one usable key.
type verifyKey struct {
	pub *ecdsa.PublicKey
	alg string // the RFC 9421 algorithm name
}

// keyRing is the keys a client trusts for response signatures, by kid:
// the operator's pinned keys, or (when none are pinned) the usable keys of
// the merchant's profile.
type keyRing struct {
	keys   map[string]verifyKey
	pinned bool
}

func pinnedRing(keys []SigningKey) (keyRing, error) {
	r := keyRing{keys: map[string]verifyKey{}, pinned: true}
	for i, k := range keys {
		pub, err := k.PublicKey()
		if err != nil {
			return keyRing{}, fmt.Errorf("signing key %d (kid %q): %w", i, k.Kid, err)
		}
		if _, dup := r.keys[k.Kid]; dup {
			return keyRing{}, fmt.Errorf("signing key %d: kid %q is given twice", i, k.Kid)
		}
		r.keys[k.Kid] = verifyKey{pub: pub, alg: curves[k.Crv].rfc}
	}
	return r, nil
}

// profileRing keeps the usable keys of a profile. Keys UCP does not sign
// with, malformed keys and kids published twice are left out (logged at
// debug): a signature naming one of them does not verify.
func profileRing(keys []SigningKey, log *slog.Logger, merchant string) keyRing {
	r := keyRing{keys: map[string]verifyKey{}}
	twice := map[string]bool{}
	for _, k := range keys {
		pub, err := k.PublicKey()
		if err != nil {
			log.Debug("ucp: skipping a signing key of the merchant's profile", slog.String("merchant", merchant),
				slog.String("kid", k.Kid), slog.Any("error", err))
			continue
		}
		if _, dup := r.keys[k.Kid]; dup || twice[k.Kid] {
			twice[k.Kid] = true
			delete(r.keys, k.Kid)
			log.Debug("ucp: skipping a kid the merchant's profile publishes twice", slog.String("merchant", merchant), slog.String("kid", k.Kid))
			continue
		}
		r.keys[k.Kid] = verifyKey{pub: pub, alg: curves[k.Crv].rfc}
	}
	return r
}

// ErrSignature: a merchant's answer is not signed as this client requires
// (see the package doc). Errors matching it match cart.ErrInvalidResponse
// too; their text says which check failed.
var ErrSignature = errors.New("response signature refused")

// ErrSignaturesUnsupported: signing keys are pinned for a merchant whose
// negotiated protocol version defines no response signatures
// (2026-01-11). A configuration error, found at connect time.
var ErrSignaturesUnsupported = errors.New("ucp: signing keys are pinned, but the negotiated protocol version defines no response signatures")

// SignatureError is a merchant's answer refused by the signature policy.
// It matches ErrSignature and cart.ErrInvalidResponse.
type SignatureError struct {
	// Reason says which check failed.
	Reason string
	err    error // an underlying cause, for errors.Is
}

func (e *SignatureError) Error() string {
	return cart.ErrInvalidResponse.Error() + ": " + ErrSignature.Error() + ": " + e.Reason
}

// Unwrap returns cart.ErrInvalidResponse, ErrSignature and the cause.
func (e *SignatureError) Unwrap() []error {
	if e.err == nil {
		return []error{cart.ErrInvalidResponse, ErrSignature}
	}
	return []error{cart.ErrInvalidResponse, ErrSignature, e.err}
}

func sigErr(format string, args ...any) error {
	return &SignatureError{Reason: fmt.Sprintf(format, args...)}
}

// errVerifierPanic marks a signature the verifier could not process
// without panicking: refused (fail closed), and a bug the fuzz target
// reports.
var errVerifierPanic = errors.New("the signature could not be processed")

// errUnknownKey marks a refusal in which a signature names a keyid the
// ring does not hold (or the ring is empty): the merchant may have rotated
// its key, so the profile is worth reading again.
var errUnknownKey = errors.New("unknown keyid")

// maxSignatures bounds the signatures one answer may carry.
const maxSignatures = 4

// verifyResponse checks the signature of one answer (status, headers and
// the raw body bytes, before any of it is parsed) against ring. An
// unsigned answer passes unless required. A signed one passes when one of
// its signatures (at most maxSignatures) verifies with a key of ring and
// covers @status, plus content-digest and content-type when there is a
// body, and a Content-Digest header, when present, matches the body. now
// judges the optional expires parameter; created is not judged (UCP
// leaves replay protection to idempotency keys). Errors match
// ErrSignature and cart.ErrInvalidResponse.
func verifyResponse(ring keyRing, required bool, now time.Time, status int, h http.Header, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &SignatureError{Reason: fmt.Sprintf("%v (%v)", errVerifierPanic, r), err: errVerifierPanic}
		}
	}()
	sigs, inputs := h.Values("Signature"), h.Values("Signature-Input")
	if len(sigs) == 0 && len(inputs) == 0 {
		if required {
			return sigErr("the answer is unsigned, but signing keys are pinned for this merchant")
		}
		return nil
	}
	if len(sigs) == 0 || len(inputs) == 0 {
		return sigErr("Signature and Signature-Input must come together")
	}
	sigDict, err := httpsfv.UnmarshalDictionary(sigs)
	if err != nil {
		return sigErr("malformed Signature header: %v", err)
	}
	inDict, err := httpsfv.UnmarshalDictionary(inputs)
	if err != nil {
		return sigErr("malformed Signature-Input header: %v", err)
	}
	names := sigDict.Names()
	switch {
	case len(names) == 0:
		return sigErr("the Signature header holds no signature")
	case len(names) > maxSignatures:
		return sigErr("%d signatures, more than the %d accepted", len(names), maxSignatures)
	case len(ring.keys) == 0:
		return &SignatureError{Reason: "the answer is signed, but the merchant's profile publishes no usable signing key", err: errUnknownKey}
	}
	if cd := h.Values("Content-Digest"); len(cd) > 0 {
		rc := io.NopCloser(bytes.NewReader(body))
		if err := httpsign.ValidateContentDigestHeader(cd, &rc, []string{httpsign.DigestSha256}); err != nil {
			return sigErr("Content-Digest does not match the body: %v", err)
		}
	} else if len(body) > 0 {
		return sigErr("the answer has a body but no Content-Digest")
	}
	var fails []string
	var unknown error
	for _, name := range names {
		err := verifyOne(ring, now, status, h, body, name, inDict)
		if err == nil {
			return nil
		}
		if errors.Is(err, errUnknownKey) {
			unknown = errUnknownKey
		}
		fails = append(fails, fmt.Sprintf("signature %q: %v", name, err))
	}
	return &SignatureError{Reason: strings.Join(fails, "; "), err: unknown}
}

// verifyOne checks signature name: our policy on its parameters and
// covered components, then httpsign's verification of the value.
func verifyOne(ring keyRing, now time.Time, status int, h http.Header, body []byte, name string, inDict *httpsfv.Dictionary) error {
	m, ok := inDict.Get(name)
	if !ok {
		return errors.New("no Signature-Input member for it")
	}
	il, ok := m.(httpsfv.InnerList)
	if !ok || il.Params == nil {
		return errors.New("its Signature-Input member is not an inner list")
	}
	covered := map[string]bool{}
	for _, it := range il.Items {
		c, ok := it.Value.(string)
		if !ok {
			return fmt.Errorf("covered component %v is not a string", it.Value)
		}
		// Parameters (sf, bs, req, key, name ...) are not part of a UCP
		// response signature; httpsign also panics on some malformed ones.
		if it.Params != nil && len(it.Params.Names()) > 0 {
			return fmt.Errorf("covered component %q has parameters; only plain components are accepted", c)
		}
		if covered[c] {
			return fmt.Errorf("component %q is covered twice", c)
		}
		covered[c] = true
	}
	required := []string{"@status"}
	if len(body) > 0 {
		required = append(required, "content-digest", "content-type")
	}
	for _, c := range required {
		if !covered[c] {
			if c == "@status" {
				return errors.New("it does not cover @status")
			}
			return fmt.Errorf("it does not cover %s, which UCP requires when there is a body", c)
		}
	}
	kidParam, _ := il.Params.Get("keyid")
	kid, _ := kidParam.(string)
	if kid == "" {
		return errors.New("it names no keyid")
	}
	key, ok := ring.keys[kid]
	if !ok {
		if ring.pinned {
			return fmt.Errorf("keyid %q is not a pinned key of this merchant", kid)
		}
		return fmt.Errorf("keyid %q is not a usable key of the merchant's profile signing_keys (%w)", kid, errUnknownKey)
	}
	if p, ok := il.Params.Get("expires"); ok {
		exp, isInt := p.(int64)
		if !isInt {
			return errors.New("malformed expires parameter")
		}
		if !now.Before(time.Unix(exp, 0)) {
			return fmt.Errorf("it expired at %s", time.Unix(exp, 0).UTC().Format(time.RFC3339))
		}
	}
	res := &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body))}
	// The parse of the signature that the verification uses.
	details, err := httpsign.ResponseDetails(name, res)
	if err != nil {
		return err
	}
	if details.KeyID != kid {
		return fmt.Errorf("keyid parses as both %q and %q", kid, details.KeyID)
	}
	if details.Alg != "" && details.Alg != key.alg {
		return fmt.Errorf("alg %q does not match key %q (%s)", details.Alg, kid, key.alg)
	}
	// created and expires are ours to judge (above), by our clock.
	cfg := httpsign.NewVerifyConfig().SetVerifyCreated(false).SetRejectExpired(false).SetKeyID(kid)
	fields := httpsign.Headers(required...)
	var v *httpsign.Verifier
	if key.alg == curves["P-384"].rfc {
		v, err = httpsign.NewP384Verifier(*key.pub, cfg, fields)
	} else {
		v, err = httpsign.NewP256Verifier(*key.pub, cfg, fields)
	}
	if err != nil {
		return err
	}
	if err := httpsign.VerifyResponse(name, *v, res, nil); err != nil {
		return fmt.Errorf("does not verify with key %q: %v", kid, err)
	}
	return nil
}
