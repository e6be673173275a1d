package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

const (
	testHTU  = "https://api.example.com/pay"
	testCred = "svc_ak_01JDQ3V6Z0000000000000000_c2VjcmV0"
)

var dpopNow = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// fakeClock is a settable clock, safe for concurrent reads.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testKeys are deterministic, so fuzz seeds in testdata stay valid.
type testKeys struct {
	ed, ed2 ed25519.PrivateKey
	ec      *ecdsa.PrivateKey
}

func newTestKeys(t testing.TB) testKeys {
	t.Helper()
	seed := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	ec, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), seed(3))
	if err != nil {
		t.Fatal(err)
	}
	return testKeys{ed: ed25519.NewKeyFromSeed(seed(1)), ed2: ed25519.NewKeyFromSeed(seed(2)), ec: ec}
}

func mustThumbprint(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	tp, err := Thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// publicJWK is the jwk header member for a key, built by hand so the
// tests do not trust the code under test to build it.
func publicJWK(t testing.TB, pub crypto.PublicKey) map[string]any {
	t.Helper()
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(k)}
	case *ecdsa.PublicKey:
		b, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return map[string]any{"kty": "EC", "crv": "P-256", "x": b64.EncodeToString(b[1:33]), "y": b64.EncodeToString(b[33:])}
	}
	t.Fatalf("no jwk for %T", pub)
	return nil
}

func algOf(s crypto.Signer) string {
	if _, ok := s.(ed25519.PrivateKey); ok {
		return "EdDSA"
	}
	return "ES256"
}

func athOf(cred string) string {
	sum := sha256.Sum256([]byte(cred))
	return b64.EncodeToString(sum[:])
}

// rawProof signs header and claims bytes as given.
func rawProof(t testing.TB, key crypto.Signer, header, claims []byte) string {
	t.Helper()
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(claims)
	var sig []byte
	switch k := key.(type) {
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(input))
	case *ecdsa.PrivateKey:
		h := sha256.Sum256([]byte(input))
		r, s, err := ecdsa.Sign(rand.Reader, k, h[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	default:
		t.Fatalf("no signer for %T", key)
	}
	return input + "." + b64.EncodeToString(sig)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func defaultHeader(t testing.TB, key crypto.Signer) map[string]any {
	return map[string]any{"typ": DPoPType, "alg": algOf(key), "jwk": publicJWK(t, key.Public())}
}

func defaultClaims(jti string) map[string]any {
	return map[string]any{"jti": jti, "htm": "POST", "htu": testHTU, "iat": dpopNow.Unix(), "ath": athOf(testCred)}
}

func TestDPoPVerify(t *testing.T) {
	keys := newTestKeys(t)
	edJKT := mustThumbprint(t, keys.ed.Public())
	ecJKT := mustThumbprint(t, keys.ec.Public())

	type tc struct {
		name string
		key  crypto.Signer // default keys.ed
		hdr  func(h map[string]any)
		clm  func(c map[string]any)
		// proof, if set, replaces the built proof.
		proof func(t *testing.T) string
		jkt   *string // default: the signing key's thumbprint
		// request side; defaults POST, testHTU, testCred
		method, htu, cred string
		want              DPoPReason // "" means accepted
	}
	str := func(s string) *string { return &s }
	tests := []tc{
		{name: "eddsa", want: ""},
		{name: "es256", key: keys.ec, want: ""},
		{name: "htu normalised scheme host port", clm: func(c map[string]any) { c["htu"] = "HTTPS://API.Example.COM:443/pay" }},
		{name: "htu percent and dots", clm: func(c map[string]any) { c["htu"] = "https://api.example.com/v1/../p%61y" }},
		{name: "server htu query ignored", htu: testHTU + "?x=1#f"},
		{name: "iat at window past edge", clm: func(c map[string]any) { c["iat"] = dpopNow.Add(-60 * time.Second).Unix() }},
		{name: "iat at window future edge", clm: func(c map[string]any) { c["iat"] = dpopNow.Add(60 * time.Second).Unix() }},
		{name: "fractional iat", clm: func(c map[string]any) { c["iat"] = float64(dpopNow.Unix()) + 0.25 }},
		{name: "extra claims ignored", clm: func(c map[string]any) { c["nonce"] = "n"; c["exp"] = 1 }},
		{name: "kid allowed", hdr: func(h map[string]any) { h["kid"] = "k1" }},

		{name: "no proof", proof: func(*testing.T) string { return "" }, want: DPoPMissingProof},
		{name: "two segments", proof: func(*testing.T) string { return "a.b" }, want: DPoPMalformed},
		{name: "four segments", proof: func(*testing.T) string { return "a.b.c.d" }, want: DPoPMalformed},
		{name: "header not base64", proof: func(*testing.T) string { return "!!.e30.c2ln" }, want: DPoPMalformed},
		{name: "empty signature", proof: func(t *testing.T) string {
			p := rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), mustJSON(t, defaultClaims("j")))
			return p[:strings.LastIndexByte(p, '.')+1]
		}, want: DPoPMalformed},
		{name: "too long", proof: func(*testing.T) string { return strings.Repeat("a", MaxDPoPProofLen+1) }, want: DPoPMalformed},
		{name: "header not JSON", proof: func(t *testing.T) string {
			return rawProof(t, keys.ed, []byte("not json"), mustJSON(t, defaultClaims("j")))
		}, want: DPoPMalformed},
		{name: "header member twice", proof: func(t *testing.T) string {
			h := mustJSON(t, defaultHeader(t, keys.ed))
			h = append([]byte(`{"typ":"jwt",`), h[1:]...)
			return rawProof(t, keys.ed, h, mustJSON(t, defaultClaims("j")))
		}, want: DPoPMalformed},
		{name: "header trailing data", proof: func(t *testing.T) string {
			h := append(mustJSON(t, defaultHeader(t, keys.ed)), "{}"...)
			return rawProof(t, keys.ed, h, mustJSON(t, defaultClaims("j")))
		}, want: DPoPMalformed},
		{name: "crit header", hdr: func(h map[string]any) { h["crit"] = []string{"exp"} }, want: DPoPMalformed},
		{name: "b64 header", hdr: func(h map[string]any) { h["b64"] = false }, want: DPoPMalformed},
		{name: "jku header", hdr: func(h map[string]any) { h["jku"] = "https://evil.example/jwks" }, want: DPoPMalformed},
		{name: "no jwk", hdr: func(h map[string]any) { delete(h, "jwk") }, want: DPoPMalformed},
		{name: "jwk not object", hdr: func(h map[string]any) { h["jwk"] = "x" }, want: DPoPMalformed},
		{name: "jwk without x", hdr: func(h map[string]any) { delete(h["jwk"].(map[string]any), "x") }, want: DPoPMalformed},
		{name: "jwk x short", hdr: func(h map[string]any) { h["jwk"].(map[string]any)["x"] = b64.EncodeToString([]byte("short")) }, want: DPoPMalformed},
		{name: "jwk EC point off curve", key: keys.ec, hdr: func(h map[string]any) {
			h["jwk"].(map[string]any)["y"] = b64.EncodeToString(bytes.Repeat([]byte{7}, 32))
		}, want: DPoPMalformed},
		{name: "typ not string", hdr: func(h map[string]any) { h["typ"] = 1 }, want: DPoPMalformed},
		{name: "claims not JSON", proof: func(t *testing.T) string {
			return rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), []byte("[1]"))
		}, want: DPoPMalformed},
		{name: "claim twice", proof: func(t *testing.T) string {
			c := mustJSON(t, defaultClaims("j"))
			c = append([]byte(`{"htm":"GET",`), c[1:]...)
			return rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), c)
		}, want: DPoPMalformed},
		{name: "jti not string", clm: func(c map[string]any) { c["jti"] = 7 }, want: DPoPMalformed},
		{name: "jti too long", clm: func(c map[string]any) { c["jti"] = strings.Repeat("j", maxJTILen+1) }, want: DPoPMalformed},
		{name: "iat string", clm: func(c map[string]any) { c["iat"] = "1800000000" }, want: DPoPMalformed},
		{name: "iat huge", clm: func(c map[string]any) { c["iat"] = 1e300 }, want: DPoPMalformed},

		{name: "typ jwt", hdr: func(h map[string]any) { h["typ"] = "jwt" }, want: DPoPBadTyp},
		{name: "typ case", hdr: func(h map[string]any) { h["typ"] = "DPoP+jwt" }, want: DPoPBadTyp},
		{name: "no typ", hdr: func(h map[string]any) { delete(h, "typ") }, want: DPoPBadTyp},

		{name: "alg none", hdr: func(h map[string]any) { h["alg"] = "none" }, want: DPoPBadAlg},
		{name: "alg HS256", hdr: func(h map[string]any) {
			h["alg"] = "HS256"
			h["jwk"] = map[string]any{"kty": "oct", "k": b64.EncodeToString([]byte("secret"))}
		}, want: DPoPBadAlg},
		{name: "alg RS256", hdr: func(h map[string]any) { h["alg"] = "RS256" }, want: DPoPBadAlg},
		{name: "alg ES384", hdr: func(h map[string]any) { h["alg"] = "ES384" }, want: DPoPBadAlg},
		{name: "alg Ed25519", hdr: func(h map[string]any) { h["alg"] = "Ed25519" }, want: DPoPBadAlg},
		{name: "no alg", hdr: func(h map[string]any) { delete(h, "alg") }, want: DPoPBadAlg},
		{name: "EdDSA with EC key", key: keys.ec, hdr: func(h map[string]any) { h["alg"] = "EdDSA" }, want: DPoPBadAlg},
		{name: "ES256 with OKP key", hdr: func(h map[string]any) { h["alg"] = "ES256" }, want: DPoPBadAlg},
		{name: "RSA jwk", hdr: func(h map[string]any) {
			rk, err := rsa.GenerateKey(rand.Reader, 1024)
			if err != nil {
				t.Fatal(err)
			}
			h["jwk"] = map[string]any{"kty": "RSA", "n": b64.EncodeToString(rk.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(rk.E)).Bytes())}
		}, want: DPoPBadAlg},

		{name: "private Ed25519 jwk", hdr: func(h map[string]any) {
			h["jwk"].(map[string]any)["d"] = b64.EncodeToString(keys.ed.Seed())
		}, want: DPoPPrivateKeyInHeader},
		{name: "private EC jwk", key: keys.ec, hdr: func(h map[string]any) {
			d, err := keys.ec.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			h["jwk"].(map[string]any)["d"] = b64.EncodeToString(d)
		}, want: DPoPPrivateKeyInHeader},

		{name: "other key's jkt", jkt: str(mustThumbprint(t, keys.ed2.Public())), want: DPoPThumbprintMismatch},
		{name: "ES256 proof for Ed25519 jkt", key: keys.ec, jkt: &edJKT, want: DPoPThumbprintMismatch},
		{name: "empty jkt", jkt: str(""), want: DPoPThumbprintMismatch},

		{name: "signed by another key", key: keys.ed2, hdr: func(h map[string]any) {
			h["jwk"] = publicJWK(t, keys.ed.Public())
		}, jkt: &edJKT, want: DPoPBadSignature},
		{name: "ES256 signed by Ed25519", proof: func(t *testing.T) string {
			return rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ec)), mustJSON(t, defaultClaims("j")))
		}, jkt: &ecJKT, want: DPoPBadSignature},
		{name: "claims swapped after signing", proof: func(t *testing.T) string {
			p := rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), mustJSON(t, defaultClaims("j")))
			parts := strings.Split(p, ".")
			c := defaultClaims("j")
			c["htm"] = "DELETE"
			parts[1] = b64.EncodeToString(mustJSON(t, c))
			return strings.Join(parts, ".")
		}, method: "DELETE", want: DPoPBadSignature},

		{name: "no jti", clm: func(c map[string]any) { delete(c, "jti") }, want: DPoPMissingClaim},
		{name: "empty jti", clm: func(c map[string]any) { c["jti"] = "" }, want: DPoPMissingClaim},
		{name: "no htm", clm: func(c map[string]any) { delete(c, "htm") }, want: DPoPMissingClaim},
		{name: "no htu", clm: func(c map[string]any) { delete(c, "htu") }, want: DPoPMissingClaim},
		{name: "no iat", clm: func(c map[string]any) { delete(c, "iat") }, want: DPoPMissingClaim},
		{name: "no ath", clm: func(c map[string]any) { delete(c, "ath") }, want: DPoPMissingClaim},

		{name: "htm GET for POST", clm: func(c map[string]any) { c["htm"] = "GET" }, want: DPoPHTMMismatch},
		{name: "htm lower case", clm: func(c map[string]any) { c["htm"] = "post" }, want: DPoPHTMMismatch},

		{name: "other path", clm: func(c map[string]any) { c["htu"] = "https://api.example.com/payments" }, want: DPoPHTUMismatch},
		{name: "other host", clm: func(c map[string]any) { c["htu"] = "https://evil.example.com/pay" }, want: DPoPHTUMismatch},
		{name: "other scheme", clm: func(c map[string]any) { c["htu"] = "http://api.example.com/pay" }, want: DPoPHTUMismatch},
		{name: "other port", clm: func(c map[string]any) { c["htu"] = "https://api.example.com:8443/pay" }, want: DPoPHTUMismatch},
		{name: "query in proof", clm: func(c map[string]any) { c["htu"] = testHTU + "?amount=1" }, want: DPoPHTUMismatch},
		{name: "empty query in proof", clm: func(c map[string]any) { c["htu"] = testHTU + "?" }, want: DPoPHTUMismatch},
		{name: "fragment in proof", clm: func(c map[string]any) { c["htu"] = testHTU + "#x" }, want: DPoPHTUMismatch},
		{name: "userinfo in proof", clm: func(c map[string]any) { c["htu"] = "https://u:p@api.example.com/pay" }, want: DPoPHTUMismatch},
		{name: "relative htu", clm: func(c map[string]any) { c["htu"] = "/pay" }, want: DPoPHTUMismatch},
		{name: "encoded slash differs", clm: func(c map[string]any) { c["htu"] = "https://api.example.com%2Fpay" }, want: DPoPHTUMismatch},

		{name: "iat too old", clm: func(c map[string]any) { c["iat"] = dpopNow.Add(-61 * time.Second).Unix() }, want: DPoPIATOutOfWindow},
		{name: "iat too new", clm: func(c map[string]any) { c["iat"] = dpopNow.Add(61 * time.Second).Unix() }, want: DPoPIATOutOfWindow},
		{name: "iat zero", clm: func(c map[string]any) { c["iat"] = 0 }, want: DPoPIATOutOfWindow},

		{name: "ath of another credential", clm: func(c map[string]any) { c["ath"] = athOf(testCred + "x") }, want: DPoPATHMismatch},
		{name: "ath hex not base64url", clm: func(c map[string]any) {
			sum := sha256.Sum256([]byte(testCred))
			c["ath"] = fmt.Sprintf("%x", sum)
		}, want: DPoPATHMismatch},
		{name: "empty credential", cred: "-", clm: func(c map[string]any) { c["ath"] = athOf("") }, want: DPoPATHMismatch},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == nil {
				key = keys.ed
			}
			var proof string
			if tt.proof != nil {
				proof = tt.proof(t)
			} else {
				h := defaultHeader(t, key)
				if tt.hdr != nil {
					tt.hdr(h)
				}
				c := defaultClaims(fmt.Sprintf("jti-%d", i))
				if tt.clm != nil {
					tt.clm(c)
				}
				proof = rawProof(t, key, mustJSON(t, h), mustJSON(t, c))
			}
			jkt := mustThumbprint(t, key.Public())
			if tt.jkt != nil {
				jkt = *tt.jkt
			}
			method, htu, cred := "POST", testHTU, testCred
			if tt.method != "" {
				method = tt.method
			}
			if tt.htu != "" {
				htu = tt.htu
			}
			switch tt.cred {
			case "":
			case "-":
				cred = ""
			default:
				cred = tt.cred
			}
			v := NewDPoPVerifier(&memstore.Store{}, &DPoPOptions{Now: func() time.Time { return dpopNow }})
			err := v.Verify(t.Context(), proof, method, htu, cred, jkt)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				// Accepted once; the same proof again is a replay.
				err = v.Verify(t.Context(), proof, method, htu, cred, jkt)
				if de := asDPoPError(t, err); de.Reason != DPoPJTIReplayed {
					t.Fatalf("second Verify: reason %q, want %q", de.Reason, DPoPJTIReplayed)
				}
				return
			}
			if de := asDPoPError(t, err); de.Reason != tt.want {
				t.Fatalf("reason %q (%v), want %q", de.Reason, err, tt.want)
			}
		})
	}
}

func asDPoPError(t *testing.T, err error) *DPoPError {
	t.Helper()
	var de *DPoPError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DPoPError", err, err)
	}
	return de
}

func TestDPoPErrorShape(t *testing.T) {
	err := error(&DPoPError{Reason: DPoPBadSignature, Err: errors.New("cause")})
	if !errors.Is(err, ErrInvalid) {
		t.Error("not errors.Is ErrInvalid")
	}
	var c interface{ Code() string }
	if !errors.As(err, &c) || c.Code() != "auth.invalid" {
		t.Errorf("code %v", c)
	}
	var de *DPoPError
	if !errors.As(err, &de) {
		t.Fatal("not a DPoPError")
	}
	want := `DPoP algs="EdDSA ES256", error="invalid_dpop_proof", error_description="bad_signature"`
	if got := de.WWWAuthenticate(); got != want {
		t.Errorf("WWWAuthenticate = %s\nwant %s", got, want)
	}
	if got := err.Error(); got != "auth: invalid DPoP proof: bad_signature: cause" {
		t.Errorf("Error() = %q", got)
	}
	if got := de.ProblemExtensions()["reason"]; got != "bad_signature" {
		t.Errorf("reason extension %v", got)
	}
}

func TestDPoPServerInputs(t *testing.T) {
	keys := newTestKeys(t)
	v := NewDPoPVerifier(&memstore.Store{}, &DPoPOptions{Now: func() time.Time { return dpopNow }})
	p, err := NewDPoPProof(keys.ed, "POST", testHTU, testCred, dpopNow)
	if err != nil {
		t.Fatal(err)
	}
	jkt := mustThumbprint(t, keys.ed.Public())
	for _, tt := range []struct{ method, htu string }{{"", testHTU}, {"POST", "/pay"}, {"POST", "ftp://x/pay"}} {
		err := v.Verify(t.Context(), p, tt.method, tt.htu, testCred, jkt)
		var de *DPoPError
		if err == nil || errors.As(err, &de) {
			t.Errorf("Verify(method %q, htu %q) = %v, want a server-side error", tt.method, tt.htu, err)
		}
	}
}

// failingStore refuses every Update.
type failingStore struct{ store.Store }

func (failingStore) Update(context.Context, func(store.Txn) error) error {
	return errors.New("disk on fire")
}

func TestDPoPStoreFailure(t *testing.T) {
	keys := newTestKeys(t)
	v := NewDPoPVerifier(failingStore{&memstore.Store{}}, &DPoPOptions{Now: func() time.Time { return dpopNow }})
	p, err := NewDPoPProof(keys.ed, "POST", testHTU, testCred, dpopNow)
	if err != nil {
		t.Fatal(err)
	}
	err = v.Verify(t.Context(), p, "POST", testHTU, testCred, mustThumbprint(t, keys.ed.Public()))
	var de *DPoPError
	if err == nil || errors.As(err, &de) || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Verify = %v, want the store's error", err)
	}
}

func TestDPoPReplayAfterRestart(t *testing.T) {
	keys := newTestKeys(t)
	dir := t.TempDir()
	opts := &pebblestore.Options{Logger: discardLogger()}
	jkt := mustThumbprint(t, keys.ec.Public())
	p, err := NewDPoPProof(keys.ec, "POST", testHTU, testCred, dpopNow)
	if err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return dpopNow.Add(5 * time.Second) }

	st, err := pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := NewDPoPVerifier(st, &DPoPOptions{Now: clock}).Verify(t.Context(), p, "POST", testHTU, testCred, jkt); err != nil {
		t.Fatalf("first Verify: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = pebblestore.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = NewDPoPVerifier(st, &DPoPOptions{Now: clock}).Verify(t.Context(), p, "POST", testHTU, testCred, jkt)
	if de := asDPoPError(t, err); de.Reason != DPoPJTIReplayed {
		t.Fatalf("after restart: reason %q, want %q", de.Reason, DPoPJTIReplayed)
	}
}

func TestDPoPConcurrentReplay(t *testing.T) {
	keys := newTestKeys(t)
	jkt := mustThumbprint(t, keys.ed.Public())
	stores := map[string]func(t *testing.T) store.Store{
		"memstore": func(*testing.T) store.Store { return &memstore.Store{} },
		"pebblestore": func(t *testing.T) store.Store {
			st, err := pebblestore.Open(t.TempDir(), &pebblestore.Options{Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			v := NewDPoPVerifier(open(t), &DPoPOptions{Now: func() time.Time { return dpopNow }})
			p, err := NewDPoPProof(keys.ed, "POST", testHTU, testCred, dpopNow)
			if err != nil {
				t.Fatal(err)
			}
			const n = 16
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { errs[i] = v.Verify(t.Context(), p, "POST", testHTU, testCred, jkt) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
					continue
				}
				if de := asDPoPError(t, err); de.Reason != DPoPJTIReplayed {
					t.Errorf("reason %q", de.Reason)
				}
			}
			if won != 1 {
				t.Fatalf("%d of %d concurrent replays accepted, want exactly 1", won, n)
			}
		})
	}
}

func TestDPoPSweepAndJTIReuse(t *testing.T) {
	keys := newTestKeys(t)
	jkt := mustThumbprint(t, keys.ed.Public())
	clock := newFakeClock(dpopNow)
	st := &memstore.Store{}
	v := NewDPoPVerifier(st, &DPoPOptions{Now: clock.Now})
	ctx := t.Context()

	proof := func(jti string) string {
		c := defaultClaims(jti)
		c["iat"] = clock.Now().Unix()
		return rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), mustJSON(t, c))
	}
	for _, jti := range []string{"a", "b", "c"} {
		if err := v.Verify(ctx, proof(jti), "POST", testHTU, testCred, jkt); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := v.SweepDPoP(ctx); err != nil || n != 0 {
		t.Fatalf("early sweep = %d, %v; want 0", n, err)
	}

	// 62 s later the records of a, b and c have expired (iat + 60 s + 1 s).
	// Reusing jti "a" is allowed again and replaces its record.
	clock.Advance(62 * time.Second)
	pa := proof("a")
	if err := v.Verify(ctx, pa, "POST", testHTU, testCred, jkt); err != nil {
		t.Fatalf("jti reused after expiry: %v", err)
	}
	if n, err := v.SweepDPoP(ctx); err != nil || n != 2 {
		t.Fatalf("sweep = %d, %v; want 2 (b and c)", n, err)
	}
	// The new record of "a" survived the sweep.
	err := v.Verify(ctx, pa, "POST", testHTU, testCred, jkt)
	if de := asDPoPError(t, err); de.Reason != DPoPJTIReplayed {
		t.Fatalf("reason %q, want %q", de.Reason, DPoPJTIReplayed)
	}
	clock.Advance(62 * time.Second)
	if n, err := v.SweepDPoP(ctx); err != nil || n != 1 {
		t.Fatalf("final sweep = %d, %v; want 1", n, err)
	}
	if left := countPrefix(t, st, dpopPrefix); left != 0 {
		t.Fatalf("%d keys left under %s", left, dpopPrefix)
	}
}

func TestDPoPSweepBatches(t *testing.T) {
	keys := newTestKeys(t)
	jkt := mustThumbprint(t, keys.ed.Public())
	clock := newFakeClock(dpopNow)
	st := &memstore.Store{}
	v := NewDPoPVerifier(st, &DPoPOptions{Now: clock.Now})
	const n = sweepBatch + 10
	for i := range n {
		c := defaultClaims(fmt.Sprint(i))
		if err := v.Verify(t.Context(), rawProof(t, keys.ed, mustJSON(t, defaultHeader(t, keys.ed)), mustJSON(t, c)), "POST", testHTU, testCred, jkt); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Hour)
	if got, err := v.SweepDPoP(t.Context()); err != nil || got != n {
		t.Fatalf("sweep = %d, %v; want %d", got, err, n)
	}
	if left := countPrefix(t, st, dpopPrefix); left != 0 {
		t.Fatalf("%d keys left", left)
	}
}

func countPrefix(t *testing.T, st store.Store, prefix string) int {
	t.Helper()
	n := 0
	err := st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate([]byte(prefix), store.PrefixEnd([]byte(prefix)), false)
		for it.Next() {
			n++
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNewDPoPProofShape(t *testing.T) {
	keys := newTestKeys(t)
	for _, key := range []crypto.Signer{keys.ed, keys.ec} {
		p, err := NewDPoPProof(key, "GET", "https://api.example.com/usage", "cred", dpopNow)
		if err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(p, ".")
		if len(parts) != 3 {
			t.Fatalf("%d segments", len(parts))
		}
		hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
		cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var h struct {
			Typ, Alg string
			JWK      map[string]any
		}
		var c map[string]any
		if err := json.Unmarshal(hb, &h); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(cb, &c); err != nil {
			t.Fatal(err)
		}
		if h.Typ != DPoPType || h.Alg != algOf(key) {
			t.Errorf("header %s", hb)
		}
		if _, ok := h.JWK["d"]; ok {
			t.Errorf("private key in header %s", hb)
		}
		jti, _ := c["jti"].(string)
		if raw, err := b64.DecodeString(jti); err != nil || len(raw) != 16 {
			t.Errorf("jti %q is not 128 bits of base64url", jti)
		}
		if c["htm"] != "GET" || c["htu"] != "https://api.example.com/usage" || c["iat"] != float64(dpopNow.Unix()) || c["ath"] != athOf("cred") {
			t.Errorf("claims %s", cb)
		}
		q, err := NewDPoPProof(key, "GET", "https://api.example.com/usage", "cred", dpopNow)
		if err != nil || q == p {
			t.Errorf("two proofs are equal (or %v): jti must be fresh", err)
		}
	}
	if _, err := NewDPoPProof(mustRSA(t), "GET", testHTU, "c", dpopNow); err == nil {
		t.Error("RSA key accepted")
	}
}

func mustRSA(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestThumbprint(t *testing.T) {
	// RFC 8037 Appendix A.3: the thumbprint of the Ed25519 key of A.2.
	x, err := b64.DecodeString("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Thumbprint(ed25519.PublicKey(x))
	if err != nil {
		t.Fatal(err)
	}
	if want := "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("Thumbprint = %s, want %s", got, want)
	}

	// A P-256 thumbprint computed by hand per RFC 7638: the required
	// members in lexicographic order, no white space.
	keys := newTestKeys(t)
	j := publicJWK(t, keys.ec.Public())
	canon := fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}`, j["x"], j["y"])
	sum := sha256.Sum256([]byte(canon))
	if got := mustThumbprint(t, keys.ec.Public()); got != b64.EncodeToString(sum[:]) {
		t.Errorf("P-256 thumbprint %s, want %s", got, b64.EncodeToString(sum[:]))
	}

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, pub := range []crypto.PublicKey{p384.Public(), mustRSA(t).Public(), keys.ed, ed25519.PublicKey{1, 2}} {
		if _, err := Thumbprint(pub); err == nil {
			t.Errorf("Thumbprint(%T) succeeded", pub)
		}
	}
}

func TestNormalizeHTU(t *testing.T) {
	tests := []struct {
		in, want string
		server   bool
		bad      bool
	}{
		{in: "https://api.example.com/pay", want: "https://api.example.com/pay"},
		{in: "HTTPS://API.EXAMPLE.COM/pay", want: "https://api.example.com/pay"},
		{in: "https://api.example.com:443/pay", want: "https://api.example.com/pay"},
		{in: "https://api.example.com:/pay", want: "https://api.example.com/pay"},
		{in: "http://api.example.com:80/pay", want: "http://api.example.com/pay"},
		{in: "http://api.example.com:443/pay", want: "http://api.example.com:443/pay"},
		{in: "https://api.example.com", want: "https://api.example.com/"},
		{in: "https://api.example.com/a/./b/../c", want: "https://api.example.com/a/c"},
		{in: "https://api.example.com/%7euser/%2f", want: "https://api.example.com/~user/%2F"},
		{in: "https://[::1]:443/pay", want: "https://[::1]/pay"},
		{in: "https://api.example.com/Pay", want: "https://api.example.com/Pay"},
		{in: "https://api.example.com/pay?x=1#f", want: "https://api.example.com/pay", server: true},
		{in: "https://api.example.com/pay?x=1", bad: true},
		{in: "https://api.example.com/pay#f", bad: true},
		{in: "https://api.example.com/pay?", bad: true},
		{in: "/pay", bad: true},
		{in: "mailto:a@example.com", bad: true},
		{in: "ftp://api.example.com/pay", bad: true},
		{in: "https:///pay", bad: true},
		{in: "https://api.example.com/%zz", bad: true},
		{in: "", bad: true},
		{in: "http://:", bad: true},
		{in: "https://:443/pay", bad: true},
	}
	for _, tt := range tests {
		got, err := normalizeHTU(tt.in, tt.server)
		if tt.bad {
			if err == nil {
				t.Errorf("normalizeHTU(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("normalizeHTU(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestRemoveDotSegments(t *testing.T) {
	// RFC 3986 §5.2.4 and §5.4 examples, as absolute paths.
	for in, want := range map[string]string{
		"/a/b/c/./../../g": "/a/g",
		"/..":              "/",
		"/.":               "/",
		"/a/..":            "/",
		"/a/.":             "/a/",
		"/a/b/..":          "/a/",
		"/a/../../b":       "/b",
		"/a/.../b":         "/a/.../b",
		"/a/b.c/d":         "/a/b.c/d",
		"":                 "",
	} {
		if got := removeDotSegments(in); got != want {
			t.Errorf("removeDotSegments(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkDPoPVerify(b *testing.B) {
	keys := newTestKeys(b)
	for _, alg := range []struct {
		name string
		key  crypto.Signer
	}{{"EdDSA", keys.ed}, {"ES256", keys.ec}} {
		for _, backend := range []string{"memstore", "pebblestore"} {
			b.Run(alg.name+"/"+backend, func(b *testing.B) {
				var st store.Store = &memstore.Store{}
				if backend == "pebblestore" {
					ps, err := pebblestore.Open(b.TempDir(), &pebblestore.Options{Logger: discardLogger()})
					if err != nil {
						b.Fatal(err)
					}
					defer ps.Close()
					st = ps
				}
				jkt := mustThumbprint(b, alg.key.Public())
				v := NewDPoPVerifier(st, &DPoPOptions{Now: func() time.Time { return dpopNow }, Logger: discardLogger()})
				proofs := make([]string, b.N)
				for i := range proofs {
					p, err := NewDPoPProof(alg.key, "POST", testHTU, testCred, dpopNow)
					if err != nil {
						b.Fatal(err)
					}
					proofs[i] = p
				}
				ctx := context.Background()
				b.ResetTimer()
				for i := range b.N {
					if err := v.Verify(ctx, proofs[i], "POST", testHTU, testCred, jkt); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
