package pay

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// envelopeSeeds are (mandate, signature) pairs for FuzzVerifyEnvelope: the
// valid pair first, then near misses that reach every check.
func envelopeSeeds(t testing.TB) [][2]string {
	f := newFixture(t)
	in := f.signed(t)
	mandate, sig := in.Envelope.Mandate, in.Envelope.Signature
	enc := base64.RawURLEncoding
	hdr := func(h string) string { return enc.EncodeToString([]byte(h)) }
	mp := strings.Split(mandate, ".")
	sp := strings.Split(sig, ".")
	payload, err := SigningBytes(in)
	if err != nil {
		t.Fatal(err)
	}
	// HMAC keyed with the agent's public key: the alg-confusion attack.
	hs := signIntentWith(t, in, []byte(f.agentKey.Public().(ed25519.PublicKey)), jwa.HS256(), map[string]any{"typ": IntentType}, true)
	return [][2]string{
		{mandate, sig},
		{mandate, sp[0] + "." + enc.EncodeToString(payload) + "." + sp[2]},     // embedded payload
		{mandate, hdr(`{"alg":"none","typ":"svc-intent+jws"}`) + ".." + sp[2]}, // alg none
		{mandate, hs},
		{mandate, hdr(`{"alg":"EdDSA","typ":"svc-mandate+jwt"}`) + ".." + sp[2]},
		{mandate, hdr(`{"alg":"EdDSA","typ":"svc-intent+jws","b64":false,"crit":["b64"]}`) + ".." + sp[2]},
		{hdr(`{"alg":"none","kid":"op-alice","typ":"svc-mandate+jwt"}`) + "." + mp[1] + "." + mp[2], sig},
		{hdr(`{"alg":"HS256","kid":"op-alice","typ":"svc-mandate+jwt"}`) + "." + mp[1] + "." + mp[2], sig},
		{hdr(`{"alg":"EdDSA","kid":"op-bob","typ":"svc-mandate+jwt"}`) + "." + mp[1] + "." + mp[2], sig},
		{hdr(`{"alg":"EdDSA","kid":"op-alice","typ":"JWT"}`) + "." + mp[1] + "." + mp[2], sig},
		{mp[0] + ".." + mp[2], sig},
		{mp[0] + "." + mp[1] + "." + sp[2], sig},
		{"", ""},
		{"a.b.c", "a..c"},
		{"{}", "{}"},
	}
}

func FuzzVerifyEnvelope(f *testing.F) {
	fx := newFixture(f)
	seeds := envelopeSeeds(f)
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	valid := seeds[0]
	f.Fuzz(func(t *testing.T, mandate, sig string) {
		in := fx.instruction()
		in.Envelope.Mandate, in.Envelope.Signature = mandate, sig
		m, err := VerifyEnvelope(in, fx.verifier)
		if err == nil {
			// Only the one honestly signed pair may verify: anything else
			// is a forgery.
			if mandate != valid[0] || sig != valid[1] {
				t.Fatalf("verified a forged envelope:\nmandate %q\nsignature %q", mandate, sig)
			}
			if m == nil || m.ID != fx.claims.ID {
				t.Fatalf("mandate %+v", m)
			}
			return
		}
		var ue *UnauthorizedError
		if !errors.As(err, &ue) || m != nil || ue.Reason == "" {
			t.Fatalf("VerifyEnvelope = %v, %v", m, err)
		}
		// The pieces alone behave the same way.
		if _, err := fx.verifier.Verify(mandate); err == nil && mandate != valid[0] {
			t.Fatalf("verified a forged mandate %q", mandate)
		}
		ierr := VerifyInstruction(in)
		if ierr == nil && (sig != valid[1] || mandate != valid[0]) {
			t.Fatalf("verified a forged signature %q", sig)
		}
		// verifyDetached checks the Ed25519 signature itself; it must
		// agree with the JOSE library's own verification: never accept
		// what the library rejects, never call invalid what it accepts.
		payload, err := SigningBytes(in)
		if err != nil {
			return
		}
		_, jerr := jws.Verify([]byte(sig), jws.WithCompact(),
			jws.WithKey(jwa.EdDSA(), fx.agentKey.Public().(ed25519.PublicKey)), jws.WithDetachedPayload(payload))
		if ierr == nil && jerr != nil {
			t.Fatalf("accepted a signature jws.Verify rejects (%v): %q", jerr, sig)
		}
		if jerr == nil && errors.As(ierr, &ue) && ue.Reason == ReasonSignatureInvalid {
			t.Fatalf("called invalid a signature jws.Verify accepts: %q", sig)
		}
	})
}
