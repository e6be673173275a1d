package pay

import (
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
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/operator"
	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// signRaw signs an arbitrary payload with arbitrary headers, for tokens
// SignMandate would refuse to make.
func signRaw(t *testing.T, payload []byte, key any, alg jwa.SignatureAlgorithm, hdr map[string]any) string {
	t.Helper()
	h := jws.NewHeaders()
	for k, v := range hdr {
		if err := h.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMandateRoundTrip(t *testing.T) {
	f := newFixture(t)
	m, err := f.verifier.Verify(f.mandate)
	if err != nil {
		t.Fatal(err)
	}
	want := f.claims
	want.IssuedAt = want.IssuedAt.UTC()
	want.ExpiresAt = want.ExpiresAt.UTC()
	want.Approvals = 1 // the default, made explicit
	if diff := cmp.Diff(want, m.Claims); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	if m.ID != "mdt_01JDEMO" || m.KeyID != f.opKid {
		t.Errorf("id/kid = %s/%s", m.ID, m.KeyID)
	}
	h, _, _, _ := splitCompact(f.mandate)
	if got, want := string(h), `{"alg":"EdDSA","kid":"op-alice","typ":"svc-mandate+jwt"}`; got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
}

func TestMandateES256(t *testing.T) {
	f := newFixture(t)
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := SignMandate(f.claims, ec, "op-bob")
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewMandateVerifier([]OperatorKey{
		{KeyID: f.opKid, Public: f.opKey.Public()},
		{KeyID: "op-bob", Public: ec.Public()},
	}, &MandateVerifierOptions{Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	m, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if m.KeyID != "op-bob" {
		t.Errorf("kid = %s", m.KeyID)
	}
	h, _, _, _ := splitCompact(tok)
	if !strings.Contains(string(h), `"alg":"ES256"`) {
		t.Errorf("header %s does not say ES256", h)
	}

	// The same P-256 key under an EdDSA header, and the Ed25519 key under
	// an ES256 header: the alg must fit the key the kid names.
	payload := mustJSON(t, f.claims)
	forged := rawToken(`{"alg":"EdDSA","kid":"op-bob","typ":"svc-mandate+jwt"}`, payload, make([]byte, 64))
	_, err = v.Verify(forged)
	wantReason(t, err, ReasonMandateBadAlg)
	esUnderEd := signRaw(t, payload, ec, jwa.ES256(), map[string]any{"kid": f.opKid, "typ": MandateType})
	_, err = v.Verify(esUnderEd)
	wantReason(t, err, ReasonMandateBadAlg)
}

// signerOnly hides the concrete key type, as an HSM-backed signer would.
type signerOnly struct{ crypto.Signer }

func TestSignMandateWithOpaqueSigner(t *testing.T) {
	f := newFixture(t)
	tok, err := SignMandate(f.claims, signerOnly{f.opKey}, f.opKid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(tok); err != nil {
		t.Fatal(err)
	}
}

func TestSignMandateRefuses(t *testing.T) {
	f := newFixture(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	bad := f.claims
	bad.PerTxCapMinor = 0
	for name, tc := range map[string]struct {
		c   MandateClaims
		key crypto.Signer
		kid string
	}{
		"invalid claims": {bad, f.opKey, f.opKid},
		"RSA key":        {f.claims, rsaKey, f.opKid},
		"P-384 key":      {f.claims, p384, f.opKid},
		"nil key":        {f.claims, nil, f.opKid},
		"empty kid":      {f.claims, f.opKey, ""},
		"kid with space": {f.claims, f.opKey, "op alice"},
		"long kid":       {f.claims, f.opKey, strings.Repeat("k", MaxKeyIDLen+1)},
	} {
		t.Run(name, func(t *testing.T) {
			if tok, err := SignMandate(tc.c, tc.key, tc.kid); err == nil {
				t.Fatalf("signed %s", tok)
			}
		})
	}
	if _, err := SignMandate(bad, f.opKey, f.opKid); !errors.Is(err, ErrInvalidClaims) {
		t.Errorf("invalid claims error %v does not match ErrInvalidClaims", err)
	}
}

func TestMandateVerifyRefuses(t *testing.T) {
	f := newFixture(t)
	payload := mustJSON(t, f.claims)
	pub := []byte(f.opKey.Public().(ed25519.PublicKey))
	stranger := seedKey(7)
	enc := base64.RawURLEncoding
	hdr := map[string]any{"kid": f.opKid, "typ": MandateType}
	withClaims := func(edit func(map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		return signRaw(t, mustJSON(t, m), f.opKey, jwa.EdDSA(), hdr)
	}
	tests := []struct {
		name  string
		token string
		want  AuthReason
	}{
		{"empty", "", ReasonMandateMalformed},
		{"not a JWS", "hello", ReasonMandateMalformed},
		{"too long", strings.Repeat("a", MaxMandateLen+1), ReasonMandateMalformed},
		{"detached", func() string { p := strings.Split(f.mandate, "."); return p[0] + ".." + p[2] }(), ReasonMandateMalformed},
		{"JSON serialization", `{"payload":"e30","signatures":[]}`, ReasonMandateMalformed},
		{"extra header", signRaw(t, payload, f.opKey, jwa.EdDSA(), map[string]any{"kid": f.opKid, "typ": MandateType, "cty": "JWT"}), ReasonMandateMalformed},
		{"jku header", rawToken(`{"alg":"EdDSA","kid":"op-alice","typ":"svc-mandate+jwt","jku":"https://evil.example/keys"}`, payload, make([]byte, 64)), ReasonMandateMalformed},
		{"alg none", rawToken(`{"alg":"none","kid":"op-alice","typ":"svc-mandate+jwt"}`, payload, []byte{0}), ReasonMandateBadAlg},
		{"alg none, empty signature", enc.EncodeToString([]byte(`{"alg":"none","kid":"op-alice","typ":"svc-mandate+jwt"}`)) + "." + enc.EncodeToString(payload) + ".", ReasonMandateMalformed},
		// The classic confusion: HMAC keyed with the public key bytes.
		{"HS256 with the public key as secret", signRaw(t, payload, pub, jwa.HS256(), hdr), ReasonMandateBadAlg},
		{"RS256", rawToken(`{"alg":"RS256","kid":"op-alice","typ":"svc-mandate+jwt"}`, payload, make([]byte, 256)), ReasonMandateBadAlg},
		{"missing alg", rawToken(`{"kid":"op-alice","typ":"svc-mandate+jwt"}`, payload, make([]byte, 64)), ReasonMandateBadAlg},
		{"typ JWT", signRaw(t, payload, f.opKey, jwa.EdDSA(), map[string]any{"kid": f.opKid, "typ": "JWT"}), ReasonMandateWrongType},
		{"typ of an intent", signRaw(t, payload, f.opKey, jwa.EdDSA(), map[string]any{"kid": f.opKid, "typ": IntentType}), ReasonMandateWrongType},
		{"no typ", signRaw(t, payload, f.opKey, jwa.EdDSA(), map[string]any{"kid": f.opKid}), ReasonMandateWrongType},
		{"unknown kid", signRaw(t, payload, stranger, jwa.EdDSA(), map[string]any{"kid": "op-mallory", "typ": MandateType}), ReasonMandateUnknownKey},
		{"no kid", signRaw(t, payload, f.opKey, jwa.EdDSA(), map[string]any{"typ": MandateType}), ReasonMandateUnknownKey},
		{"known kid, other key", signRaw(t, payload, stranger, jwa.EdDSA(), hdr), ReasonMandateBadSignature},
		{"flipped signature", flipLastChar(f.mandate), ReasonMandateBadSignature},
		{"swapped payload", func() string {
			parts := strings.Split(f.mandate, ".")
			c := f.claims
			c.PerTxCapMinor = 999999
			parts[1] = enc.EncodeToString(mustJSON(t, c))
			return strings.Join(parts, ".")
		}(), ReasonMandateBadSignature},
		{"unknown claim", withClaims(func(m map[string]any) { m["nbf"] = 1 }), ReasonMandateInvalidClaims},
		{"fractional exp", withClaims(func(m map[string]any) { m["exp"] = 1.5e9 + 0.5 }), ReasonMandateInvalidClaims},
		{"cap zero", withClaims(func(m map[string]any) { m["perTxCapMinor"] = 0 }), ReasonMandateInvalidClaims},
		{"no sub", withClaims(func(m map[string]any) { delete(m, "sub") }), ReasonMandateInvalidClaims},
		{"zero velocity", withClaims(func(m map[string]any) { m["velocity"] = map[string]any{"count": 0, "seconds": 0} }), ReasonMandateInvalidClaims},
		{"duplicate claim", signRaw(t, []byte(strings.Replace(string(payload), `{"jti":"mdt_01JDEMO",`, `{"jti":"x","jti":"mdt_01JDEMO",`, 1)), f.opKey, jwa.EdDSA(), hdr), ReasonMandateInvalidClaims},
		{"claims not an object", signRaw(t, []byte(`[1]`), f.opKey, jwa.EdDSA(), hdr), ReasonMandateInvalidClaims},
		{"expired", withClaims(func(m map[string]any) { m["exp"] = f.now.Unix() }), ReasonMandateExpired},
		{"issued in the future", withClaims(func(m map[string]any) { m["iat"] = f.now.Add(DefaultIssuedAtSkew + time.Second).Unix() }), ReasonMandateNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := f.verifier.Verify(tt.token)
			if m != nil {
				t.Errorf("returned a mandate with error %v", err)
			}
			wantReason(t, err, tt.want)
		})
	}
}

func TestMandateTimes(t *testing.T) {
	f := newFixture(t)
	at := func(now time.Time, skew time.Duration) error {
		v := f.newVerifier(t, &MandateVerifierOptions{Now: func() time.Time { return now }, IssuedAtSkew: skew})
		_, err := v.Verify(f.mandate)
		return err
	}
	exp, iat := f.claims.ExpiresAt, f.claims.IssuedAt
	if err := at(exp.Add(-time.Nanosecond), 0); err != nil {
		t.Errorf("just before exp: %v", err)
	}
	wantReason(t, at(exp, 0), ReasonMandateExpired)
	if err := at(iat.Add(-DefaultIssuedAtSkew), 0); err != nil {
		t.Errorf("iat exactly one skew ahead: %v", err)
	}
	wantReason(t, at(iat.Add(-DefaultIssuedAtSkew-time.Nanosecond), 0), ReasonMandateNotYetValid)
	wantReason(t, at(iat.Add(-time.Nanosecond), -1), ReasonMandateNotYetValid)
	if err := at(iat.Add(-time.Hour), 2*time.Hour); err != nil {
		t.Errorf("custom skew: %v", err)
	}
}

func TestMandateCache(t *testing.T) {
	f := newFixture(t)
	now := f.now
	v := f.newVerifier(t, &MandateVerifierOptions{Now: func() time.Time { return now }, CacheSize: 2})

	m1, err := v.Verify(f.mandate)
	if err != nil {
		t.Fatal(err)
	}
	if v.cache.len() != 1 {
		t.Fatalf("cache len = %d, want 1", v.cache.len())
	}
	// The caller owns what it gets: changing it changes nothing cached.
	m1.Claims.Payees[0] = "acct:changed.example"
	m1.Claims.PerTxCapMinor = 1
	m2, err := v.Verify(f.mandate)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Claims.Payees[0] != "*" || m2.Claims.PerTxCapMinor != 50000 {
		t.Errorf("cached mandate was changed through a returned copy: %+v", m2.Claims)
	}
	if m2.TokenHash != m1.TokenHash {
		t.Error("token hash differs between cold and cached")
	}

	// Bounded: a third token evicts the least recently used.
	tok := func(id string) string {
		c := f.claims
		c.ID = id
		s, err := SignMandate(c, f.opKey, f.opKid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := tok("a"), tok("b")
	for _, s := range []string{a, f.mandate, b} { // f.mandate is now more recent than a
		if _, err := v.Verify(s); err != nil {
			t.Fatal(err)
		}
	}
	if v.cache.len() != 2 {
		t.Fatalf("cache len = %d, want 2", v.cache.len())
	}
	if v.cache.get(sha256Of(a)) != nil || v.cache.get(sha256Of(f.mandate)) == nil || v.cache.get(sha256Of(b)) == nil {
		t.Error("eviction did not drop the least recently used token")
	}

	// Expiry is checked on every use, cached or not, and drops the entry.
	now = f.claims.ExpiresAt
	_, err = v.Verify(f.mandate)
	wantReason(t, err, ReasonMandateExpired)
	if v.cache.get(sha256Of(f.mandate)) != nil {
		t.Error("expired mandate stays cached")
	}

	// Failures are never cached.
	now = f.now
	_, _ = v.Verify(flipLastChar(a))
	if v.cache.len() != 1 {
		t.Errorf("cache len = %d after a failure, want 1", v.cache.len())
	}
}

func TestMandateCacheDisabled(t *testing.T) {
	f := newFixture(t)
	v := f.newVerifier(t, &MandateVerifierOptions{CacheSize: -1})
	for range 2 {
		if _, err := v.Verify(f.mandate); err != nil {
			t.Fatal(err)
		}
	}
	if v.cache != nil || v.cache.len() != 0 {
		t.Error("cache not disabled")
	}
}

func TestMandateVerifierConcurrent(t *testing.T) {
	f := newFixture(t)
	v := f.newVerifier(t, &MandateVerifierOptions{CacheSize: 1})
	other, err := SignMandate(func() MandateClaims { c := f.claims; c.ID = "other"; return c }(), f.opKey, f.opKid)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := range 8 {
		go func() {
			var err error
			for j := range 20 {
				tok := f.mandate
				if (i+j)%2 == 0 {
					tok = other
				}
				if _, e := v.Verify(tok); e != nil {
					err = e
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

func TestNewMandateVerifierRefuses(t *testing.T) {
	ed := seedKey(1).Public()
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, keys := range map[string][]OperatorKey{
		"none":      nil,
		"empty kid": {{KeyID: "", Public: ed}},
		"dup kid":   {{KeyID: "a", Public: ed}, {KeyID: "a", Public: seedKey(2).Public()}},
		"P-384":     {{KeyID: "a", Public: p384.Public()}},
		"private":   {{KeyID: "a", Public: seedKey(1)}},
		"short ed":  {{KeyID: "a", Public: ed25519.PublicKey{1, 2}}},
		"nil key":   {{KeyID: "a"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := NewMandateVerifier(keys, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestOperatorKeysFromSet(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	pubJWK := func(raw any, kv ...string) jwk.Key {
		k, err := jwk.Import(raw)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			var v any = kv[i+1]
			if kv[i] == jwk.AlgorithmKey {
				alg, ok := jwa.LookupSignatureAlgorithm(kv[i+1])
				if !ok {
					t.Fatalf("alg %s", kv[i+1])
				}
				v = alg
			}
			if err := k.Set(kv[i], v); err != nil {
				t.Fatal(err)
			}
		}
		return k
	}
	set := func(keys ...jwk.Key) jwk.Set {
		s := jwk.NewSet()
		for _, k := range keys {
			if err := s.AddKey(k); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	ed := seedKey(1)

	keys, err := operator.KeysFromSet(set(
		pubJWK(ed.Public(), jwk.KeyIDKey, "op-alice", jwk.KeyUsageKey, "sig", jwk.AlgorithmKey, "EdDSA"),
		pubJWK(&ec.PublicKey, jwk.KeyIDKey, "op-bob"),
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].KeyID != "op-alice" || keys[1].KeyID != "op-bob" {
		t.Fatalf("keys = %+v", keys)
	}
	if _, ok := keys[0].Public.(ed25519.PublicKey); !ok {
		t.Errorf("key 0 is %T", keys[0].Public)
	}
	if _, err := NewMandateVerifier(keys, nil); err != nil {
		t.Errorf("NewMandateVerifier: %v", err)
	}

	for name, s := range map[string]jwk.Set{
		"empty":        jwk.NewSet(),
		"no kid":       set(pubJWK(ed.Public())),
		"private key":  set(pubJWK(ed, jwk.KeyIDKey, "op")),
		"use enc":      set(pubJWK(ed.Public(), jwk.KeyIDKey, "op", jwk.KeyUsageKey, "enc")),
		"alg mismatch": set(pubJWK(&ec.PublicKey, jwk.KeyIDKey, "op", jwk.AlgorithmKey, "EdDSA")),
		"RSA":          set(pubJWK(&rsaKey.PublicKey, jwk.KeyIDKey, "op")),
	} {
		t.Run(name, func(t *testing.T) {
			if keys, err := operator.KeysFromSet(s); err == nil {
				t.Fatalf("accepted %+v", keys)
			}
		})
	}
	if _, err := operator.KeysFromSet(nil); err == nil {
		t.Error("accepted a nil set")
	}
}

func TestClaimsValidate(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name  string
		edit  func(*MandateClaims)
		field string
		rule  string
	}{
		{"no jti", func(c *MandateClaims) { c.ID = "" }, "jti", "required"},
		{"jti with space", func(c *MandateClaims) { c.ID = "a b" }, "jti", "id"},
		{"long jti", func(c *MandateClaims) { c.ID = strings.Repeat("a", 129) }, "jti", "id"},
		{"no sub", func(c *MandateClaims) { c.Agent = "" }, "sub", "required"},
		{"upper-case sub", func(c *MandateClaims) { c.Agent = strings.ToUpper(c.Agent) }, "sub", "hexadecimal"},
		{"no iat", func(c *MandateClaims) { c.IssuedAt = time.Time{} }, "iat", "required"},
		{"iat before 1970", func(c *MandateClaims) { c.IssuedAt = time.Unix(-5, 0) }, "iat", "range"},
		{"no exp", func(c *MandateClaims) { c.ExpiresAt = time.Time{} }, "exp", "required"},
		{"exp = iat", func(c *MandateClaims) { c.ExpiresAt = c.IssuedAt }, "exp", "gtfield"},
		{"exp far away", func(c *MandateClaims) { c.ExpiresAt = time.Unix(1<<53, 0) }, "exp", "range"},
		{"no payees", func(c *MandateClaims) { c.Payees = nil }, "payees", "required"},
		{"too many payees", func(c *MandateClaims) { c.Payees = make([]string, 65) }, "payees", "max"},
		{"bad payee", func(c *MandateClaims) { c.Payees = []string{"*", "*example.com"} }, "payees[1]", "payee"},
		{"bad pattern", func(c *MandateClaims) { c.Payees = []string{"*.a/b"} }, "payees[0]", "payee"},
		{"no currency", func(c *MandateClaims) { c.Currency = "" }, "currency", "required"},
		{"lower-case currency", func(c *MandateClaims) { c.Currency = "usd" }, "currency", "currency"},
		{"tx cap 0", func(c *MandateClaims) { c.PerTxCapMinor = 0 }, "perTxCapMinor", "min"},
		{"tx cap 2^53", func(c *MandateClaims) { c.PerTxCapMinor = 1 << 53 }, "perTxCapMinor", "max"},
		{"period cap -1", func(c *MandateClaims) { c.PerPeriodCapMinor = -1 }, "perPeriodCapMinor", "min"},
		{"period year", func(c *MandateClaims) { c.Period = "year" }, "period", "oneof"},
		{"no rails", func(c *MandateClaims) { c.Rails = []string{} }, "rails", "required"},
		{"too many rails", func(c *MandateClaims) { c.Rails = make([]string, 17) }, "rails", "max"},
		{"bad rail", func(c *MandateClaims) { c.Rails = []string{"Card"} }, "rails[0]", "rail"},
		{"dup rail", func(c *MandateClaims) { c.Rails = []string{"a", "b", "a"} }, "rails[2]", "unique"},
		{"confirm -1", func(c *MandateClaims) { c.ConfirmAboveMinor = -1 }, "confirmAboveMinor", "min"},
		{"irreversible 2^53", func(c *MandateClaims) { c.IrreversibleConfirmAboveMinor = 1 << 53 }, "irreversibleConfirmAboveMinor", "max"},
		{"velocity count 0", func(c *MandateClaims) { c.Velocity = gate.Velocity{Seconds: 60} }, "velocity.count", "max"},
		{"velocity 32 days", func(c *MandateClaims) { c.Velocity = gate.Velocity{Count: 1, Seconds: 32 * 86400} }, "velocity.seconds", "max"},
		{"approvals 11", func(c *MandateClaims) { c.Approvals = 11 }, "approvals", "max"},
		{"approvals -1", func(c *MandateClaims) { c.Approvals = -1 }, "approvals", "max"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := f.claims
			c.Payees = append([]string(nil), c.Payees...)
			tt.edit(&c)
			err := c.Validate()
			var ce *ClaimsError
			if !errors.As(err, &ce) {
				t.Fatalf("Validate = %v, want a ClaimsError", err)
			}
			if len(ce.Fields) != 1 || ce.Fields[0].Field != tt.field || ce.Fields[0].Rule != tt.rule {
				t.Fatalf("fields = %+v, want one %s/%s", ce.Fields, tt.field, tt.rule)
			}
		})
	}

	// Edges that are valid.
	for name, edit := range map[string]func(*MandateClaims){
		"thresholds 0":   func(c *MandateClaims) { c.ConfirmAboveMinor, c.IrreversibleConfirmAboveMinor = 0, 0 },
		"thresholds max": func(c *MandateClaims) { c.ConfirmAboveMinor, c.IrreversibleConfirmAboveMinor = MaxMinor, MaxMinor },
		"caps max":       func(c *MandateClaims) { c.PerTxCapMinor, c.PerPeriodCapMinor = MaxMinor, MaxMinor },
		"velocity max": func(c *MandateClaims) {
			c.Velocity = gate.Velocity{Count: MaxVelocityCount, Seconds: gate.MaxVelocitySeconds}
		},
		"approvals 10":       func(c *MandateClaims) { c.Approvals = 10 },
		"CAIP-19 currency":   func(c *MandateClaims) { c.Currency = "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48" },
		"patterns and exact": func(c *MandateClaims) { c.Payees = []string{"acct:a.example", "*.shop.example"} },
	} {
		t.Run(name, func(t *testing.T) {
			c := f.claims
			edit(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestClaimsJSON(t *testing.T) {
	f := newFixture(t)
	c := f.claims
	c.Velocity = gate.Velocity{Count: 10, Seconds: 3600}
	c.Approvals = 2
	b := mustJSON(t, c)
	want := `{"jti":"mdt_01JDEMO","sub":"` + f.agent + `","iat":1795338000,"exp":1797933600,` +
		`"payees":["*"],"currency":"USD","perTxCapMinor":50000,"perPeriodCapMinor":1000000,"period":"day",` +
		`"rails":["sandbox-card","sandbox-bank","sandbox-chain"],"confirmAboveMinor":10000,` +
		`"irreversibleConfirmAboveMinor":5000,"velocity":{"count":10,"seconds":3600},"approvals":2}`
	if string(b) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", b, want)
	}
	var back MandateClaims
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	// The optional members are left out when zero.
	c = f.claims
	if s := string(mustJSON(t, c)); strings.Contains(s, "velocity") || strings.Contains(s, "approvals") {
		t.Errorf("zero velocity/approvals written: %s", s)
	}

	for name, in := range map[string]string{
		"trailing":     want + "{}",
		"unknown":      strings.Replace(want, `"jti"`, `"aud":"x","jti"`, 1),
		"duplicate":    strings.Replace(want, `"jti"`, `"sub":"x","jti"`, 1),
		"nested dup":   strings.Replace(want, `"count":10`, `"count":1,"count":10`, 1),
		"nested extra": strings.Replace(want, `"count":10`, `"count":10,"burst":2`, 1),
		"string iat":   strings.Replace(want, `1795338000`, `"1795338000"`, 1),
		"exponent":     strings.Replace(want, `1795338000`, `1.795338e9`, 1),
		"fraction":     strings.Replace(want, `1795338000`, `1795338000.5`, 1),
		"zero vel":     strings.Replace(want, `{"count":10,"seconds":3600}`, `{"count":0,"seconds":0}`, 1),
		"null":         `null`,
	} {
		t.Run(name, func(t *testing.T) {
			var c MandateClaims
			err := json.Unmarshal([]byte(in), &c)
			if name == "null" {
				// encoding/json never calls UnmarshalJSON for null; the
				// zero claims then fail Validate.
				if err == nil && c.Validate() == nil {
					t.Fatal("null claims validate")
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", in)
			}
		})
	}
}

func TestMandateGate(t *testing.T) {
	f := newFixture(t)
	m, err := f.verifier.Verify(f.mandate)
	if err != nil {
		t.Fatal(err)
	}
	g := m.Gate()
	want := gate.Mandate{
		ID: "mdt_01JDEMO", Agent: f.agent, Payees: []string{"*"}, Currency: "USD",
		PerTxCapMinor: 50000, PerPeriodCapMinor: 1000000, Period: gate.Day,
		Rails:             []string{"sandbox-card", "sandbox-bank", "sandbox-chain"},
		ConfirmAboveMinor: 10000, IrreversibleConfirmAboveMinor: 5000,
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("Gate() (-want +got):\n%s", diff)
	}
	g.Payees[0] = "changed"
	if m.Claims.Payees[0] != "*" {
		t.Error("Gate() shares the payees slice")
	}
}

func sha256Of(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func BenchmarkMandateVerify(b *testing.B) {
	f := newFixture(b)
	b.Run("cold", func(b *testing.B) {
		v := f.newVerifier(b, &MandateVerifierOptions{CacheSize: -1})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(f.mandate); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		v := f.newVerifier(b, nil)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := v.Verify(f.mandate); err != nil {
				b.Fatal(err)
			}
		}
	})
}
