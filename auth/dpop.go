package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/countersign/countersign/store"
)

// DPoP proofs (RFC 9449).
//
// A key issued with a JWK thumbprint (Key.JKT) is sender-constrained: it
// is sent as "Authorization: DPoP <credential>" and every request carries
// a fresh proof in the DPoP header, a JWT signed by the private key whose
// public half has that thumbprint. A stolen credential is then useless
// without the key. [DPoPVerifier] checks proofs on the server;
// [NewDPoPProof] and [Thumbprint] are the client half.

// DPoPType is the typ header every proof carries (RFC 9449 §4.2).
const DPoPType = "dpop+jwt"

// DefaultDPoPWindow is the [DPoPOptions.Window] used when it is zero.
const DefaultDPoPWindow = 60 * time.Second

// MaxDPoPProofLen bounds the proof a verifier will look at. An honest
// proof with an EC or OKP key is about 600 bytes.
const MaxDPoPProofLen = 4096

// maxJTILen bounds the jti claim. RFC 9449 asks for at least 96 bits of
// randomness; 256 bytes leaves room for any sane encoding.
const maxJTILen = 256

// DPoPReason says precisely why a proof was refused. The values are
// stable: clients and tests may branch on them, and they are sent as the
// error_description of the WWW-Authenticate challenge.
type DPoPReason string

// Reasons for refusing a proof, roughly in the order
// [DPoPVerifier.Verify] checks them (its doc gives the exact order).
const (
	// DPoPMissingProof: the request carried no DPoP header.
	DPoPMissingProof DPoPReason = "missing_proof"
	// DPoPMalformed: not a compact JWS of at most MaxDPoPProofLen bytes;
	// a header or claims set that is not one strict JSON object; a header
	// without jwk or with a member other than typ, alg, jwk and kid; a jwk
	// that does not parse; a claim of the wrong JSON type.
	DPoPMalformed DPoPReason = "malformed"
	// DPoPBadTyp: typ is not exactly "dpop+jwt".
	DPoPBadTyp DPoPReason = "bad_typ"
	// DPoPBadAlg: alg is not EdDSA or ES256 ("none", HMAC and RSA are
	// refused), or the jwk is not a key of that algorithm (an Ed25519 OKP
	// key for EdDSA, a P-256 EC key for ES256).
	DPoPBadAlg DPoPReason = "bad_alg"
	// DPoPPrivateKeyInHeader: the jwk header carries private key material.
	DPoPPrivateKeyInHeader DPoPReason = "private_key_in_header"
	// DPoPThumbprintMismatch: the jwk's RFC 7638 SHA-256 thumbprint is not
	// the one the credential is bound to.
	DPoPThumbprintMismatch DPoPReason = "thumbprint_mismatch"
	// DPoPBadSignature: the signature does not verify with the jwk.
	DPoPBadSignature DPoPReason = "bad_signature"
	// DPoPMissingClaim: one of jti, htm, htu, iat, ath is absent or empty.
	DPoPMissingClaim DPoPReason = "missing_claim"
	// DPoPHTMMismatch: htm is not the request's method.
	DPoPHTMMismatch DPoPReason = "htm_mismatch"
	// DPoPHTUMismatch: htu, normalised, is not the request's URI, or it
	// carries a query or fragment.
	DPoPHTUMismatch DPoPReason = "htu_mismatch"
	// DPoPIATOutOfWindow: iat is further than the window from now, in
	// either direction.
	DPoPIATOutOfWindow DPoPReason = "iat_out_of_window"
	// DPoPATHMismatch: ath is not base64url(SHA-256(credential)).
	DPoPATHMismatch DPoPReason = "ath_mismatch"
	// DPoPJTIReplayed: a proof with this jti was already accepted for this
	// key within the window.
	DPoPJTIReplayed DPoPReason = "jti_replayed"
)

// DPoPError is a refused proof. It matches errors.Is(err, [ErrInvalid])
// and its Code is "auth.invalid", so the HTTP layer answers 401 with
// action reauthenticate; it adds the RFC 9449 challenge from
// [DPoPError.WWWAuthenticate].
type DPoPError struct {
	// Reason is the precise, stable reason.
	Reason DPoPReason
	// Err is the underlying cause, for logs; may be nil. Its text may
	// name library internals, so it is not for the client.
	Err error
}

func (e *DPoPError) Error() string {
	if e.Err == nil {
		return "auth: invalid DPoP proof: " + string(e.Reason)
	}
	return "auth: invalid DPoP proof: " + string(e.Reason) + ": " + e.Err.Error()
}

// Code returns "auth.invalid".
func (e *DPoPError) Code() string { return ErrInvalid.Code() }

// Unwrap returns [ErrInvalid] and the cause, if any.
func (e *DPoPError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

// ProblemExtensions adds the stable reason to the HTTP problem.
func (e *DPoPError) ProblemExtensions() map[string]any {
	return map[string]any{"reason": string(e.Reason)}
}

// WWWAuthenticate returns the value of the WWW-Authenticate header for a
// 401 caused by this error (RFC 9449 §7.1):
//
//	DPoP algs="EdDSA ES256", error="invalid_dpop_proof", error_description="bad_signature"
//
// The reason is one of the DPoPReason constants, none of which needs
// quoting beyond the surrounding quotes.
func (e *DPoPError) WWWAuthenticate() string {
	return `DPoP algs="EdDSA ES256", error="invalid_dpop_proof", error_description="` + string(e.Reason) + `"`
}

func refuse(reason DPoPReason, err error) *DPoPError {
	return &DPoPError{Reason: reason, Err: err}
}

// DPoPOptions configure a DPoPVerifier. The zero value is usable.
type DPoPOptions struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Window is how far iat may be from now, in either direction, and so
	// also how long a jti is remembered. Zero or negative means
	// DefaultDPoPWindow (60 s).
	Window time.Duration
	// Logger receives a debug record for every refused proof, with the
	// reason, the cause and the bound thumbprint (never the proof or the
	// credential). Default slog.Default().
	Logger *slog.Logger
}

// DPoPVerifier checks DPoP proofs and remembers their jti values, durably,
// under the store prefix "auth/dpop/". It is safe for concurrent use.
//
// # Replay cache
//
// A proof is accepted at most once: Verify records (jkt, jti) in the same
// store transaction that checks it is new, so of two concurrent requests
// carrying one proof exactly one is accepted, and a proof accepted before
// a restart is still refused after it. A record is kept until the proof's
// iat has left the window (iat + Window, rounded up, plus one second), the
// moment the proof would be refused as stale anyway; [DPoPVerifier.SweepDPoP]
// deletes expired records. The key is SHA-256(jkt "." jti), so a caller's
// jti never becomes store key bytes, and two keys cannot collide on a jti.
//
// Each accepted proof costs one store.Update with two small writes; on a
// group-committing store that shares the fsync with concurrent requests.
// The checks that need no store run first, so a bad proof costs no write.
type DPoPVerifier struct {
	st     store.Store
	now    func() time.Time
	window time.Duration
	logger *slog.Logger
}

// Store layout of the replay cache:
//
//	auth/dpop/j/<sha256(jkt "." jti)>           -> expiry, unix seconds, BE8
//	auth/dpop/x/<expiry BE8><sha256(jkt "." jti)> -> empty (sweep index)
const (
	dpopPrefix      = "auth/dpop/"
	dpopJTIPrefix   = dpopPrefix + "j/"
	dpopIndexPrefix = dpopPrefix + "x/"
)

// NewDPoPVerifier returns a verifier whose replay cache lives in st.
// opts may be nil; it is copied.
func NewDPoPVerifier(st store.Store, opts *DPoPOptions) *DPoPVerifier {
	var o DPoPOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Window <= 0 {
		o.Window = DefaultDPoPWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &DPoPVerifier{st: st, now: o.Now, window: o.Window, logger: o.Logger}
}

// errReplayed leaves the replay transaction without writing.
var errReplayed = errors.New("auth: jti already used")

// Verify checks a DPoP proof for a request, as RFC 9449 §4.3 asks:
//
//   - proof is the DPoP header's value ("" if there was none);
//   - method is the request's method, compared exactly with htm;
//   - htu is the URI the server is reached at for this request,
//     {base_url} + path, compared with the proof's htu after both are
//     normalised (see below);
//   - credential is the credential from "Authorization: DPoP
//     <credential>"; ath must be base64url(SHA-256(credential));
//   - jkt is the thumbprint the credential is bound to ([Key.JKT]). An
//     empty jkt binds nothing and every proof is refused with
//     thumbprint_mismatch.
//
// A refused proof is a [*DPoPError] whose Reason names the first failed
// check. The checks run in this order: present (missing_proof); size,
// compact form and strict header (malformed); typ (bad_typ); alg
// (bad_alg); the jwk: no private members (private_key_in_header), a key
// of alg's type (bad_alg), parses (malformed); its thumbprint is jkt
// (thumbprint_mismatch); the signature (bad_signature); strict claims
// (malformed, missing_claim); htm, htu, iat, ath; and last, in the
// store, jti (jti_replayed), so a proof that fails any other check
// costs no write and burns no jti. Any other error (the store failed,
// or method or htu from the caller are unusable) is the server's and
// wraps the cause.
//
// # Normalising htu
//
// The proof's htu must be an absolute http or https URI with no query
// and no fragment (RFC 9449 §4.2 says it is sent without them; a proof
// that signs a query is refused rather than trusted to mean something it
// is not checked for). Before comparing, both URIs get the syntax- and
// scheme-based normalisation RFC 9449 §4.3 recommends (RFC 3986 §6.2.2
// and §6.2.3): scheme and host lower-cased, the scheme's default port
// dropped, an empty path read as "/", percent-encodings upper-cased and
// those of unreserved characters decoded, and dot segments removed. The
// query and fragment of the caller's htu, if any, are ignored.
func (v *DPoPVerifier) Verify(ctx context.Context, proof, method, htu, credential, jkt string) error {
	err := v.verify(ctx, proof, method, htu, credential, jkt)
	var de *DPoPError
	if errors.As(err, &de) {
		v.logger.DebugContext(ctx, "DPoP proof refused",
			slog.String("reason", string(de.Reason)), slog.String("jkt", jkt), slog.Any("cause", de.Err))
	}
	return err
}

func (v *DPoPVerifier) verify(ctx context.Context, proof, method, htu, credential, jkt string) error {
	if method == "" {
		return errors.New("auth: dpop: empty request method")
	}
	want, err := normalizeHTU(htu, true)
	if err != nil {
		return fmt.Errorf("auth: dpop: server htu: %w", err)
	}
	if proof == "" {
		return refuse(DPoPMissingProof, nil)
	}
	if len(proof) > MaxDPoPProofLen {
		return refuse(DPoPMalformed, fmt.Errorf("longer than %d bytes", MaxDPoPProofLen))
	}
	hb, cb, err := splitJWS(proof)
	if err != nil {
		return refuse(DPoPMalformed, err)
	}
	hdr, err := parseDPoPHeader(hb)
	if err != nil {
		return refuse(DPoPMalformed, err)
	}
	if hdr.typ != DPoPType {
		return refuse(DPoPBadTyp, fmt.Errorf("typ %.40q", hdr.typ))
	}
	var alg jwa.SignatureAlgorithm
	switch hdr.alg {
	case jwa.EdDSA().String():
		alg = jwa.EdDSA()
	case jwa.ES256().String():
		alg = jwa.ES256()
	default:
		return refuse(DPoPBadAlg, fmt.Errorf("alg %.20q", hdr.alg))
	}
	pub, tp, reason, err := headerKey(hdr.jwk, alg)
	if err != nil {
		return refuse(reason, err)
	}
	if jkt == "" || subtle.ConstantTimeCompare([]byte(tp), []byte(jkt)) != 1 {
		return refuse(DPoPThumbprintMismatch, nil)
	}
	payload, err := jws.VerifyCompactFast(pub, []byte(proof), alg)
	if err != nil {
		return refuse(DPoPBadSignature, err)
	}
	// VerifyCompactFast decodes the payload it verified; the claims we
	// parsed must be those bytes.
	if !bytes.Equal(payload, cb) {
		return refuse(DPoPBadSignature, errors.New("payload differs from the verified bytes"))
	}
	c, reason, err := parseDPoPClaims(cb)
	if err != nil {
		return refuse(reason, err)
	}
	if c.htm != method {
		return refuse(DPoPHTMMismatch, fmt.Errorf("htm %.20q, request %.20q", c.htm, method))
	}
	got, err := normalizeHTU(c.htu, false)
	if err != nil {
		return refuse(DPoPHTUMismatch, err)
	}
	if got != want {
		return refuse(DPoPHTUMismatch, fmt.Errorf("htu %.200q, request %.200q", got, want))
	}
	now := v.now()
	if d := now.Sub(c.iat); d > v.window || d < -v.window {
		return refuse(DPoPIATOutOfWindow, fmt.Errorf("iat %s is %s from now", c.iat.UTC().Format(time.RFC3339), d.Round(time.Second)))
	}
	sum := sha256.Sum256([]byte(credential))
	if credential == "" || subtle.ConstantTimeCompare([]byte(c.ath), []byte(b64.EncodeToString(sum[:]))) != 1 {
		return refuse(DPoPATHMismatch, nil)
	}
	return v.remember(ctx, tp, c.jti, dpopExpiry(c.iat, v.window), now)
}

// dpopExpiry is when a record of a proof with this iat may be forgotten:
// after iat + window the proof is stale and refused anyway. Rounded up to
// the second, plus one, so sub-second iat values cannot slip past.
func dpopExpiry(iat time.Time, window time.Duration) int64 {
	end := iat.Add(window)
	sec := end.Unix()
	if end.Nanosecond() > 0 {
		sec++
	}
	return sec + 1
}

// remember records the proof's jti, refusing it if it is already
// recorded and not expired. The check and the write are one transaction.
func (v *DPoPVerifier) remember(ctx context.Context, jkt, jti string, exp int64, now time.Time) error {
	h := sha256.Sum256([]byte(jkt + "." + jti))
	jkey := append([]byte(dpopJTIPrefix), h[:]...)
	val := binary.BigEndian.AppendUint64(nil, uint64(exp))
	err := v.st.Update(ctx, func(txn store.Txn) error {
		old, err := txn.Get(jkey)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case len(old) == 8 && now.Unix() < int64(binary.BigEndian.Uint64(old)):
			return errReplayed
		default:
			// Expired but not yet swept: the jti may be used again.
			// Drop the stale index entry so the sweep cannot delete
			// the new record.
			if len(old) == 8 {
				if err := txn.Delete(dpopIndexKey(binary.BigEndian.Uint64(old), h)); err != nil {
					return err
				}
			}
		}
		if err := txn.Set(jkey, val); err != nil {
			return err
		}
		return txn.Set(dpopIndexKey(uint64(exp), h), nil)
	})
	if errors.Is(err, errReplayed) {
		return refuse(DPoPJTIReplayed, nil)
	}
	if err != nil {
		return fmt.Errorf("auth: dpop: replay cache: %w", err)
	}
	return nil
}

func dpopIndexKey(exp uint64, h [sha256.Size]byte) []byte {
	k := make([]byte, 0, len(dpopIndexPrefix)+8+sha256.Size)
	k = append(k, dpopIndexPrefix...)
	k = binary.BigEndian.AppendUint64(k, exp)
	return append(k, h[:]...)
}

// sweepBatch bounds the deletes of one sweep transaction, so a large
// backlog is removed in several modest commits rather than one huge one.
const sweepBatch = 1000

// SweepDPoP deletes the replay records that have expired and returns how
// many it deleted. Run it now and then (every few minutes is plenty);
// expired records are harmless but take space. It works in batches, one
// transaction each, and stops at the first error, returning the count so
// far. Its cost is proportional to the expired records, not to all of
// them.
func (v *DPoPVerifier) SweepDPoP(ctx context.Context) (int, error) {
	upper := binary.BigEndian.AppendUint64([]byte(dpopIndexPrefix), uint64(v.now().Unix())+1)
	total := 0
	for {
		var n int
		var more bool
		err := v.st.Update(ctx, func(txn store.Txn) error {
			n, more = 0, false // fn may run more than once
			var idx [][]byte
			it := txn.Iterate([]byte(dpopIndexPrefix), upper, false)
			for it.Next() {
				if len(idx) == sweepBatch {
					more = true
					break
				}
				idx = append(idx, bytes.Clone(it.Key()))
			}
			if err := it.Close(); err != nil {
				return err
			}
			for _, k := range idx {
				if err := txn.Delete(k); err != nil {
					return err
				}
				rest := k[len(dpopIndexPrefix):]
				if len(rest) != 8+sha256.Size {
					continue // not a key this code wrote; the index entry is gone
				}
				jkey := append([]byte(dpopJTIPrefix), rest[8:]...)
				val, err := txn.Get(jkey)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				// Delete the record only if this index entry is its
				// current one; a reused jti has a later expiry.
				if bytes.Equal(val, rest[:8]) {
					if err := txn.Delete(jkey); err != nil {
						return err
					}
					n++
				}
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("auth: dpop sweep: %w", err)
		}
		total += n
		if !more {
			return total, nil
		}
	}
}

var b64 = base64.RawURLEncoding

// splitJWS splits a compact JWS with an attached payload and returns the
// decoded header and claims. The signature is decoded by the verifier.
func splitJWS(tok string) (header, claims []byte, err error) {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return nil, nil, errors.New("not a compact JWS")
	}
	p, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return nil, nil, errors.New("not a compact JWS: want three segments")
	}
	if header, err = b64.DecodeString(h); err != nil {
		return nil, nil, errors.New("header is not base64url")
	}
	if claims, err = b64.DecodeString(p); err != nil || len(claims) == 0 {
		return nil, nil, errors.New("claims are not base64url")
	}
	if s, err := b64.DecodeString(sig); err != nil || len(s) == 0 {
		return nil, nil, errors.New("signature is not base64url")
	}
	return header, claims, nil
}

// strictObject parses one JSON object in valid UTF-8 whose members each
// appear once, with nothing after it. Duplicate members are refused
// because two JSON parsers may disagree on which one wins, and a proof
// must mean one thing.
func strictObject(b []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	m := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("not a JSON object")
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("not a JSON object")
		}
		if _, dup := m[name]; dup {
			return nil, fmt.Errorf("member %.32q given twice", name)
		}
		m[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	return m, nil
}

// jsonString decodes raw if it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

type dpopHeader struct {
	typ, alg string
	jwk      json.RawMessage
}

// parseDPoPHeader accepts exactly the members typ, alg, jwk and kid (kid
// is ignored). Refusing everything else refuses crit, b64 and the other
// key-carrying members (jku, x5u, x5c) in one rule: the verifying key is
// the jwk, and only the jwk.
func parseDPoPHeader(b []byte) (dpopHeader, error) {
	var h dpopHeader
	m, err := strictObject(b)
	if err != nil {
		return h, fmt.Errorf("header: %w", err)
	}
	for name, raw := range m {
		switch name {
		case "typ", "alg", "kid":
			s, ok := jsonString(raw)
			if !ok {
				return h, fmt.Errorf("header member %s is not a string", name)
			}
			switch name {
			case "typ":
				h.typ = s
			case "alg":
				h.alg = s
			}
		case "jwk":
			if len(raw) == 0 || raw[0] != '{' {
				return h, errors.New("header member jwk is not an object")
			}
			h.jwk = raw
		default:
			return h, fmt.Errorf("header member %.32q is not allowed", name)
		}
	}
	if h.jwk == nil {
		return h, errors.New("header has no jwk")
	}
	return h, nil
}

// headerKey parses the header's jwk and returns the public key in the
// form jws wants, and its thumbprint. It refuses private key material
// before anything else looks at the key: a client that put its private
// key in a header has published it, and must learn so.
func headerKey(raw json.RawMessage, alg jwa.SignatureAlgorithm) (crypto.PublicKey, string, DPoPReason, error) {
	members, err := strictObject(raw)
	if err != nil {
		return nil, "", DPoPMalformed, fmt.Errorf("jwk: %w", err)
	}
	// "d" is the private member of EC and OKP keys (RSA's too); "k" is
	// the secret of a symmetric key. Refuse them by name, whatever the
	// key type, before handing the key to a parser.
	for _, priv := range []string{"d", "k", "p", "q", "dp", "dq", "qi", "oth"} {
		if _, ok := members[priv]; ok {
			return nil, "", DPoPPrivateKeyInHeader, fmt.Errorf("jwk has private member %q", priv)
		}
	}
	// Refuse a key of the wrong type before parsing it, so no RSA or
	// other key reaches the parser at all.
	kty, _ := jsonString(members["kty"])
	crv, _ := jsonString(members["crv"])
	switch {
	case alg == jwa.EdDSA() && kty == "OKP" && crv == "Ed25519":
	case alg == jwa.ES256() && kty == "EC" && crv == "P-256":
	default:
		return nil, "", DPoPBadAlg, fmt.Errorf("a jwk with kty %.10q crv %.10q does not fit alg %s", kty, crv, alg)
	}
	key, err := jwk.ParseKey(raw)
	if err != nil {
		return nil, "", DPoPMalformed, fmt.Errorf("jwk: %w", err)
	}
	if priv, err := jwk.IsPrivateKey(key); err != nil || priv {
		if err == nil {
			return nil, "", DPoPPrivateKeyInHeader, errors.New("jwk is a private key")
		}
		return nil, "", DPoPBadAlg, fmt.Errorf("jwk: %w", err)
	}
	var pub any
	if err := jwk.Export(key, &pub); err != nil {
		return nil, "", DPoPMalformed, fmt.Errorf("jwk: %w", err)
	}
	if err := keyFitsAlg(pub, alg); err != nil {
		return nil, "", DPoPBadAlg, err
	}
	tp, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, "", DPoPMalformed, fmt.Errorf("jwk thumbprint: %w", err)
	}
	return pub, b64.EncodeToString(tp), "", nil
}

// keyFitsAlg checks the key is the one kind alg uses: EdDSA here means
// Ed25519 only, ES256 means P-256 only.
func keyFitsAlg(pub any, alg jwa.SignatureAlgorithm) error {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if alg == jwa.EdDSA() && len(k) == ed25519.PublicKeySize {
			return nil
		}
	case *ecdsa.PublicKey:
		if alg == jwa.ES256() && k.Curve == elliptic.P256() {
			return nil
		}
	}
	return fmt.Errorf("a %T jwk does not fit alg %s", pub, alg)
}

type dpopClaims struct {
	jti, htm, htu, ath string
	iat                time.Time
}

// parseDPoPClaims reads the claims set. Members other than the five we
// check are allowed and ignored (RFC 9449 lets a proof carry more, such
// as nonce, which this server does not issue).
func parseDPoPClaims(b []byte) (dpopClaims, DPoPReason, error) {
	var c dpopClaims
	m, err := strictObject(b)
	if err != nil {
		return c, DPoPMalformed, fmt.Errorf("claims: %w", err)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"jti", &c.jti}, {"htm", &c.htm}, {"htu", &c.htu}, {"ath", &c.ath}} {
		raw, ok := m[f.name]
		if !ok {
			return c, DPoPMissingClaim, fmt.Errorf("no %s claim", f.name)
		}
		s, ok := jsonString(raw)
		if !ok {
			return c, DPoPMalformed, fmt.Errorf("claim %s is not a string", f.name)
		}
		if s == "" {
			return c, DPoPMissingClaim, fmt.Errorf("claim %s is empty", f.name)
		}
		*f.dst = s
	}
	if len(c.jti) > maxJTILen {
		return c, DPoPMalformed, fmt.Errorf("jti longer than %d bytes", maxJTILen)
	}
	raw, ok := m["iat"]
	if !ok {
		return c, DPoPMissingClaim, errors.New("no iat claim")
	}
	iat, err := numericDate(raw)
	if err != nil {
		return c, DPoPMalformed, fmt.Errorf("claim iat: %w", err)
	}
	c.iat = iat
	return c, "", nil
}

// numericDate reads a JWT NumericDate: seconds since the epoch, possibly
// with a fraction (RFC 7519 §2).
func numericDate(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || !(raw[0] == '-' || ('0' <= raw[0] && raw[0] <= '9')) {
		return time.Time{}, errors.New("not a number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	// ±2^53 keeps the conversion exact and far from time.Time's limits.
	if err != nil || math.IsNaN(f) || math.Abs(f) > 1<<53 {
		return time.Time{}, errors.New("not a usable number")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// normalizeHTU returns the comparable form of an htu (RFC 3986 §6.2.2,
// §6.2.3). For the server's own URI (server true) a query and fragment
// are dropped; in a proof they are refused.
func normalizeHTU(s string, server bool) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("htu is not a URI")
	}
	if !server && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "?#")) {
		return "", errors.New("htu has a query or fragment")
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "https" && scheme != "http") || u.Host == "" || u.Opaque != "" {
		return "", errors.New("htu is not an absolute http(s) URI")
	}
	host := strings.ToLower(u.Host)
	switch {
	case scheme == "https" && strings.HasSuffix(host, ":443"):
		host = strings.TrimSuffix(host, ":443")
	case scheme == "http" && strings.HasSuffix(host, ":80"):
		host = strings.TrimSuffix(host, ":80")
	}
	host = strings.TrimSuffix(host, ":") // an empty port is the default port
	if host == "" || strings.HasPrefix(host, ":") {
		return "", errors.New("htu has no host")
	}
	path, err := normalizePercent(u.EscapedPath())
	if err != nil {
		return "", err
	}
	path = removeDotSegments(path)
	if path == "" {
		path = "/"
	}
	var b strings.Builder
	b.WriteString(scheme)
	b.WriteString("://")
	if u.User != nil {
		// Userinfo never belongs in an htu; keep it so the comparison
		// fails rather than silently dropping what the client signed.
		b.WriteString(u.User.String())
		b.WriteByte('@')
	}
	b.WriteString(host)
	b.WriteString(path)
	return b.String(), nil
}

// normalizePercent upper-cases the hex digits of percent-encodings and
// decodes those of unreserved characters (RFC 3986 §6.2.2.1, §6.2.2.2).
func normalizePercent(p string) (string, error) {
	if !strings.Contains(p, "%") {
		return p, nil
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' {
			b.WriteByte(p[i])
			continue
		}
		if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
			return "", errors.New("htu has a bad percent-encoding")
		}
		c := unhex(p[i+1])<<4 | unhex(p[i+2])
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteString(strings.ToUpper(p[i+1 : i+3]))
		}
		i += 2
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// removeDotSegments is RFC 3986 §5.2.4 for an absolute path.
func removeDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	var out []string
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") && strings.HasPrefix(p, "/") {
		r = "/" + r
	}
	return r
}

// NewDPoPProof returns a DPoP proof for one request: a compact JWS with
// typ "dpop+jwt", alg EdDSA for an Ed25519 key or ES256 for a P-256 key,
// the public key as jwk, and claims jti (128 random bits), htm (method),
// htu, iat (now, whole seconds) and ath (base64url SHA-256 of the
// credential). htu is used as given; send it without query or fragment.
// key may be any crypto.Signer of those two kinds (for example a KMS
// handle); each call mints a new jti, so each proof is good for one
// request.
func NewDPoPProof(key crypto.Signer, method, htu, credential string, now time.Time) (string, error) {
	alg, err := dpopAlg(key.Public())
	if err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	pub, err := jwk.PublicKeyOf(key.Public())
	if err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	sum := sha256.Sum256([]byte(credential))
	claims, err := json.Marshal(struct {
		JTI string `json:"jti"`
		HTM string `json:"htm"`
		HTU string `json:"htu"`
		IAT int64  `json:"iat"`
		ATH string `json:"ath"`
	}{b64.EncodeToString(jti[:]), method, htu, now.Unix(), b64.EncodeToString(sum[:])})
	if err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	hdrs := jws.NewHeaders()
	if err := hdrs.Set(jws.TypeKey, DPoPType); err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	if err := hdrs.Set(jws.JWKKey, pub); err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	tok, err := jws.Sign(claims, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdrs)))
	if err != nil {
		return "", fmt.Errorf("auth: dpop proof: %w", err)
	}
	return string(tok), nil
}

// Thumbprint returns the RFC 7638 JWK thumbprint (SHA-256, base64url, no
// padding) of an Ed25519 or P-256 public key: the value to bind a key to
// at issuance ([CreateRequest].JKT) and that [DPoPVerifier.Verify]
// compares with the proof's jwk.
func Thumbprint(pub crypto.PublicKey) (string, error) {
	if _, err := dpopAlg(pub); err != nil {
		return "", fmt.Errorf("auth: thumbprint: %w", err)
	}
	k, err := jwk.Import(pub)
	if err != nil {
		return "", fmt.Errorf("auth: thumbprint: %w", err)
	}
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("auth: thumbprint: %w", err)
	}
	return b64.EncodeToString(tp), nil
}

// dpopAlg is the algorithm a DPoP key uses.
func dpopAlg(pub crypto.PublicKey) (jwa.SignatureAlgorithm, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return jwa.EdDSA(), nil
		}
	case *ecdsa.PublicKey:
		if k.Curve == elliptic.P256() {
			return jwa.ES256(), nil
		}
	}
	return jwa.EmptySignatureAlgorithm(), fmt.Errorf("want an Ed25519 or P-256 public key, not %T", pub)
}
