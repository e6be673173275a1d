package ucp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/asn1"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/yaronf/httpsign"

	"github.com/countersign/countersign/commerce/cart"
)

// testKey is a fixed key (tests and fuzz seeds must agree on it).
func testKey(t testing.TB, curve elliptic.Curve, label string) *ecdsa.PrivateKey {
	t.Helper()
	var d []byte
	if curve == elliptic.P384() {
		s := sha512.Sum384([]byte(label))
		d = s[:]
	} else {
		s := sha256.Sum256([]byte(label))
		d = s[:]
	}
	k, err := ecdsa.ParseRawPrivateKey(curve, d)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func jwkOf(t testing.TB, kid string, k *ecdsa.PrivateKey) SigningKey {
	t.Helper()
	j, err := SigningKeyOf(kid, &k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// signOpts says how a test signs an answer.
type signOpts struct {
	key        *ecdsa.PrivateKey
	kid        string
	components []string // default @status, content-digest, content-type
	alg        bool     // send the alg parameter
	expires    int64
}

// signAnswer signs (status, body) the way a UCP merchant does, with
// httpsign: Content-Type, Content-Digest of the body, Signature-Input and
// Signature "sig1".
func signAnswer(t testing.TB, o signOpts, status int, body []byte) http.Header {
	t.Helper()
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if len(body) > 0 {
		rc := io.NopCloser(bytes.NewReader(body))
		d, err := httpsign.GenerateContentDigestHeader(&rc, []string{httpsign.DigestSha256})
		if err != nil {
			t.Fatal(err)
		}
		h.Set("Content-Digest", d)
	}
	comps := o.components
	if comps == nil {
		comps = []string{"@status", "content-digest", "content-type"}
	}
	cfg := httpsign.NewSignConfig().SignAlg(o.alg).SetKeyID(o.kid)
	if o.expires != 0 {
		cfg = cfg.SetExpires(o.expires)
	}
	newSigner := httpsign.NewP256Signer
	if o.key.Curve == elliptic.P384() {
		newSigner = httpsign.NewP384Signer
	}
	s, err := newSigner(*o.key, cfg, httpsign.Headers(comps...))
	if err != nil {
		t.Fatal(err)
	}
	in, sig, err := httpsign.SignResponse("sig1", *s, &http.Response{StatusCode: status, Header: h}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Signature-Input", in)
	h.Set("Signature", sig)
	return h
}

// toDER re-encodes the raw r||s signature of h as ASN.1 DER, the encoding
// UCP forbids.
func toDER(t testing.TB, h http.Header) {
	t.Helper()
	d, err := httpsfv.UnmarshalDictionary(h.Values("Signature"))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := d.Get("sig1")
	raw := m.(httpsfv.Item).Value.([]byte)
	n := len(raw) / 2
	der, err := asn1.Marshal(struct{ R, S *big.Int }{new(big.Int).SetBytes(raw[:n]), new(big.Int).SetBytes(raw[n:])})
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Signature", "sig1=:"+base64.StdEncoding.EncodeToString(der)+":")
}

func TestVerifyResponse(t *testing.T) {
	p256 := testKey(t, elliptic.P256(), "merchant p256")
	p384 := testKey(t, elliptic.P384(), "merchant p384")
	other := testKey(t, elliptic.P256(), "someone else")
	profile := profileRing([]SigningKey{jwkOf(t, "m-256", p256), jwkOf(t, "m-384", p384)}, slog.New(slog.DiscardHandler), "m")
	pinned, err := pinnedRing([]SigningKey{jwkOf(t, "pinned", other)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"cs_1","status":"ready_for_complete"}`)
	es256 := signOpts{key: p256, kid: "m-256"}

	type tc struct {
		name     string
		ring     keyRing
		required bool
		status   int // the status the client received (default 200)
		body     []byte
		header   func(t *testing.T) http.Header
		want     string // "" accepts; otherwise a fragment of the refusal
	}
	signed := func(o signOpts, status int, b []byte) func(t *testing.T) http.Header {
		return func(t *testing.T) http.Header { return signAnswer(t, o, status, b) }
	}
	with := func(f func(t *testing.T) http.Header, mod func(h http.Header)) func(t *testing.T) http.Header {
		return func(t *testing.T) http.Header { h := f(t); mod(h); return h }
	}
	cases := []tc{
		{name: "valid ES256", ring: profile, body: body, header: signed(es256, 200, body)},
		{name: "valid ES384", ring: profile, body: body, header: signed(signOpts{key: p384, kid: "m-384"}, 200, body)},
		{name: "valid, alg parameter matching the key", ring: profile, body: body, header: signed(signOpts{key: p256, kid: "m-256", alg: true}, 200, body)},
		{name: "valid, no body, @status only", ring: profile, status: 204, header: signed(signOpts{key: p256, kid: "m-256", components: []string{"@status"}}, 204, nil)},
		{name: "valid, not yet expired", ring: profile, body: body, header: signed(signOpts{key: p256, kid: "m-256", expires: now.Add(time.Minute).Unix()}, 200, body)},
		{name: "unsigned, nothing pinned", ring: profile, body: body, header: func(*testing.T) http.Header { return http.Header{"Content-Type": {"application/json"}} }},
		{name: "unsigned, no keys at all", body: body, header: func(*testing.T) http.Header { return http.Header{} }},
		{name: "pinned key required but the answer is unsigned", ring: pinned, required: true, body: body,
			header: func(*testing.T) http.Header { return http.Header{"Content-Type": {"application/json"}} }, want: "unsigned, but signing keys are pinned"},
		{name: "valid by the pinned key", ring: pinned, required: true, body: body, header: signed(signOpts{key: other, kid: "pinned"}, 200, body)},
		{name: "pinned key vs a key only the profile publishes", ring: pinned, required: true, body: body, header: signed(es256, 200, body),
			want: `keyid "m-256" is not a pinned key`},
		{name: "body tampered", ring: profile, body: append([]byte(`{"total":1,`), body[1:]...), header: signed(es256, 200, body),
			want: "Content-Digest does not match the body"},
		{name: "body tampered, digest recomputed", ring: profile, body: []byte(`{ "id":"cs_1","status":"ready_for_complete"}`),
			header: with(signed(es256, 200, body), func(h http.Header) {
				rc := io.NopCloser(strings.NewReader(`{ "id":"cs_1","status":"ready_for_complete"}`))
				d, _ := httpsign.GenerateContentDigestHeader(&rc, []string{httpsign.DigestSha256})
				h.Set("Content-Digest", d)
			}), want: "does not verify"},
		{name: "status differs", ring: profile, status: 201, body: body, header: signed(es256, 200, body), want: "does not verify"},
		{name: "unknown keyid", ring: profile, body: body, header: signed(signOpts{key: other, kid: "k-unknown"}, 200, body),
			want: `keyid "k-unknown" is not a usable key of the merchant's profile`},
		{name: "known keyid, another key", ring: profile, body: body, header: signed(signOpts{key: other, kid: "m-256"}, 200, body),
			want: "does not verify"},
		{name: "DER-encoded signature", ring: profile, body: body, header: with(signed(es256, 200, body), func(h http.Header) { toDER(t, h) }),
			want: "does not verify"},
		{name: "DER-encoded signature (P-384)", ring: profile, body: body,
			header: with(signed(signOpts{key: p384, kid: "m-384"}, 200, body), func(h http.Header) { toDER(t, h) }), want: "does not verify"},
		{name: "content-digest missing", ring: profile, body: body,
			header: with(signed(signOpts{key: p256, kid: "m-256", components: []string{"@status", "content-type"}}, 200, body),
				func(h http.Header) { h.Del("Content-Digest") }), want: "no Content-Digest"},
		{name: "content-digest not covered", ring: profile, body: body,
			header: signed(signOpts{key: p256, kid: "m-256", components: []string{"@status", "content-type"}}, 200, body),
			want:   "does not cover content-digest"},
		{name: "content-digest wrong", ring: profile, body: body, header: with(signed(es256, 200, body), func(h http.Header) {
			h.Set("Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(make([]byte, 32))+":")
		}), want: "Content-Digest does not match the body"},
		{name: "content-digest without sha-256", ring: profile, body: body, header: with(signed(es256, 200, body), func(h http.Header) {
			h.Set("Content-Digest", "md5=:AAAA:")
		}), want: "Content-Digest does not match the body"},
		{name: "content-type not covered", ring: profile, body: body,
			header: signed(signOpts{key: p256, kid: "m-256", components: []string{"@status", "content-digest"}}, 200, body),
			want:   "does not cover content-type"},
		{name: "@status not covered", ring: profile, body: body,
			header: signed(signOpts{key: p256, kid: "m-256", components: []string{"content-digest", "content-type"}}, 200, body),
			want:   "does not cover @status"},
		{name: "signature present but the profile publishes no key", body: body, header: signed(es256, 200, body),
			want: "publishes no usable signing key"},
		{name: "expired", ring: profile, body: body, header: signed(signOpts{key: p256, kid: "m-256", expires: now.Unix()}, 200, body),
			want: "expired at"},
		{name: "alg parameter of another curve", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				h.Set("Signature-Input", strings.Replace(h.Get("Signature-Input"), `keyid=`, `alg="ecdsa-p384-sha384";keyid=`, 1))
			}), want: `alg "ecdsa-p384-sha384" does not match`},
		{name: "Signature without Signature-Input", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) { h.Del("Signature-Input") }), want: "must come together"},
		{name: "malformed Signature", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) { h.Set("Signature", "sig1=:not base64") }), want: "malformed Signature header"},
		{name: "no keyid", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				in := h.Get("Signature-Input")
				h.Set("Signature-Input", in[:strings.Index(in, ";keyid=")])
			}), want: "names no keyid"},
		{name: "component with a malformed flag (httpsign would panic)", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				h.Set("Signature-Input", `sig1=("@status" "content-digest" "content-type";sf=1);keyid="m-256"`)
			}), want: `"content-type" has parameters`},
		{name: "component of the request", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				h.Set("Signature-Input", `sig1=("@status" "content-digest" "content-type" "@method";req);keyid="m-256"`)
			}), want: "has parameters"},
		{name: "signature label without input", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				h.Set("Signature", strings.Replace(h.Get("Signature"), "sig1=", "sig2=", 1))
			}), want: `signature "sig2": no Signature-Input member`},
		{name: "two signatures, one by an unknown key", ring: profile, body: body,
			header: func(t *testing.T) http.Header {
				good := signAnswer(t, es256, 200, body)
				bad := signAnswer(t, signOpts{key: other, kid: "k-unknown"}, 200, body)
				good.Set("Signature-Input", strings.Replace(bad.Get("Signature-Input"), "sig1=", "sig0=", 1)+", "+good.Get("Signature-Input"))
				good.Set("Signature", strings.Replace(bad.Get("Signature"), "sig1=", "sig0=", 1)+", "+good.Get("Signature"))
				return good
			}},
		{name: "too many signatures", ring: profile, body: body,
			header: with(signed(es256, 200, body), func(h http.Header) {
				s := h.Get("Signature")[len("sig1="):]
				h.Set("Signature", "a="+s+", b="+s+", c="+s+", d="+s+", e="+s)
			}), want: "more than the 4 accepted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := c.status
			if status == 0 {
				status = 200
			}
			err := verifyResponse(c.ring, c.required, now, status, c.header(t), c.body)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want a refusal with %q", c.want)
			}
			if !errors.Is(err, cart.ErrInvalidResponse) || !errors.Is(err, ErrSignature) || errors.Is(err, errVerifierPanic) {
				t.Errorf("%v does not match ErrInvalidResponse and ErrSignature (or is a panic)", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refused with %q, want it to say %q", err, c.want)
			}
		})
	}
}

func TestSigningKeys(t *testing.T) {
	k := jwkOf(t, "k1", testKey(t, elliptic.P256(), "k1"))
	k384 := jwkOf(t, "k2", testKey(t, elliptic.P384(), "k2"))
	if k.Crv != "P-256" || k.Alg != "ES256" || k384.Crv != "P-384" || k384.Alg != "ES384" {
		t.Fatalf("%+v %+v", k, k384)
	}
	if err := CheckSigningKeys([]SigningKey{k, k384}); err != nil {
		t.Fatal(err)
	}
	// RFC 7638 §3.1's example is RSA; this is the thumbprint of the EC
	// key of RFC 7517 appendix A.1, computed independently.
	rfc := SigningKey{Kid: "1", Kty: "EC", Crv: "P-256", X: "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4", Y: "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"}
	if tp, err := rfc.Thumbprint(); err != nil || tp != "cn-I_WNMClehiVp51i_0VpOENW1upEerA8sEam5hn-s" {
		t.Errorf("thumbprint %q %v", tp, err)
	}
	mod := func(f func(*SigningKey)) SigningKey { c := k; f(&c); return c }
	for _, tc := range []struct {
		name string
		keys []SigningKey
		want string
	}{
		{"no kid", []SigningKey{mod(func(k *SigningKey) { k.Kid = "" })}, "kid is required"},
		{"RSA", []SigningKey{{Kid: "r", Kty: "RSA"}}, `kty "RSA"`},
		{"P-521", []SigningKey{mod(func(k *SigningKey) { k.Crv = "P-521" })}, `crv "P-521"`},
		{"encryption key", []SigningKey{mod(func(k *SigningKey) { k.Use = "enc" })}, `use "enc"`},
		{"alg of another curve", []SigningKey{mod(func(k *SigningKey) { k.Alg = "ES384" })}, "does not match crv"},
		{"x padded", []SigningKey{mod(func(k *SigningKey) { k.X += "=" })}, "x must be 32 bytes"},
		{"y short", []SigningKey{mod(func(k *SigningKey) { k.Y = k.Y[:20] })}, "y must be 32 bytes"},
		{"not on the curve", []SigningKey{mod(func(k *SigningKey) { k.Y = k.X })}, "not a point of P-256"},
		{"P-384 coordinates on P-256", []SigningKey{mod(func(k *SigningKey) { k.X, k.Y = k384.X, k384.Y })}, "x must be 32 bytes"},
		{"kid twice", []SigningKey{k, mod(func(k *SigningKey) { *k = k384; k.Kid = "k1" })}, `kid "k1" is given twice`},
	} {
		err := CheckSigningKeys(tc.keys)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A profile's unusable or ambiguous keys are skipped, not fatal.
	r := profileRing([]SigningKey{{Kid: "r", Kty: "RSA"}, k, k384, mod(func(k *SigningKey) { k.Kid = "k2" }),
		mod(func(k *SigningKey) { k.Kid = "bad"; k.X = "!" })}, slog.New(slog.DiscardHandler), "m")
	if len(r.keys) != 1 || r.keys["k1"].pub == nil || r.pinned {
		t.Errorf("profile ring %+v", r)
	}
}
