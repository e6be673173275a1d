package pay

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// fixture is a deterministic world: one operator key, one agent key, a
// fixed clock, a mandate and a verifier.
type fixture struct {
	now      time.Time
	opKey    ed25519.PrivateKey
	opKid    string
	agentKey ed25519.PrivateKey
	agent    string
	claims   MandateClaims
	mandate  string
	verifier *MandateVerifier
}

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func agentID(k ed25519.PrivateKey) string {
	return hex.EncodeToString(k.Public().(ed25519.PublicKey))
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{
		now:      time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		opKey:    seedKey(1),
		opKid:    "op-alice",
		agentKey: seedKey(2),
	}
	f.agent = agentID(f.agentKey)
	f.claims = MandateClaims{
		ID:                "mdt_01JDEMO",
		Agent:             f.agent,
		IssuedAt:          f.now.Add(-time.Hour),
		ExpiresAt:         f.now.Add(30 * 24 * time.Hour),
		Payees:            []string{"*"},
		Currency:          "USD",
		PerTxCapMinor:     50000,
		PerPeriodCapMinor: 1000000,
		Period:            gate.Day,
		Rails:             []string{"sandbox-card", "sandbox-bank", "sandbox-chain"},
		ConfirmAboveMinor: 10000,
		// Irreversible payments of 5,000 or more need a person.
		IrreversibleConfirmAboveMinor: 5000,
	}
	var err error
	f.mandate, err = SignMandate(f.claims, f.opKey, f.opKid)
	if err != nil {
		t.Fatal(err)
	}
	f.verifier = f.newVerifier(t, nil)
	return f
}

func (f *fixture) newVerifier(t testing.TB, opts *MandateVerifierOptions) *MandateVerifier {
	t.Helper()
	var o MandateVerifierOptions
	if opts != nil {
		o = *opts
	}
	if o.Now == nil {
		o.Now = func() time.Time { return f.now }
	}
	v, err := NewMandateVerifier([]OperatorKey{{KeyID: f.opKid, Public: f.opKey.Public()}}, &o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// instruction returns a valid, unsigned instruction under the mandate.
func (f *fixture) instruction() *Instruction {
	return &Instruction{
		IdempotencyKey: "7f3c6a2e-key",
		Payee:          "acct:seller.example",
		Amount:         Amount{Minor: 1250, Currency: "USD"},
		Purpose:        "invoice 1182",
		Terms: Terms{
			Rail:          "sandbox-card",
			Reversibility: gate.Reversible,
			Finality:      gate.FinalityInstant,
			Credential:    gate.CredentialAPIKey,
			CapitalSource: gate.CapitalPayer,
			Presence:      gate.PresenceDelegated,
		},
		Envelope: Envelope{Agent: f.agent, Mandate: f.mandate},
	}
}

func (f *fixture) signed(t testing.TB) *Instruction {
	t.Helper()
	in := f.instruction()
	if err := SignInstruction(in, f.agentKey); err != nil {
		t.Fatal(err)
	}
	return in
}

// wantReason fails unless err is an *UnauthorizedError with reason r.
func wantReason(t *testing.T, err error, r AuthReason) {
	t.Helper()
	var ue *UnauthorizedError
	if !errors.As(err, &ue) {
		t.Fatalf("error = %v, want *UnauthorizedError %s", err, r)
	}
	if ue.Reason != r {
		t.Fatalf("reason = %s (%v), want %s", ue.Reason, err, r)
	}
	if !errors.Is(err, ErrUnauthorized) || ue.Code() != CodeUnauthorized {
		t.Fatalf("error %v does not match ErrUnauthorized / code", err)
	}
	if errors.Is(err, ErrMalformed) {
		t.Fatalf("unauthorized error %v also matches ErrMalformed", err)
	}
}

// rawToken builds a compact JWS from a literal header, payload and
// signature bytes, for tokens no honest library would make.
func rawToken(header string, payload []byte, sig []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString(sig)
}

// signIntentWith signs in's signing bytes with arbitrary headers and
// options, for negative tests.
func signIntentWith(t testing.TB, in *Instruction, key any, alg jwa.SignatureAlgorithm, hdr map[string]any, detached bool) string {
	t.Helper()
	payload, err := SigningBytes(in)
	if err != nil {
		t.Fatal(err)
	}
	h := jws.NewHeaders()
	for k, v := range hdr {
		if err := h.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var tok []byte
	if detached {
		tok, err = jws.Sign(nil, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)), jws.WithDetachedPayload(payload))
	} else {
		tok, err = jws.Sign(payload, jws.WithKey(alg, key, jws.WithProtectedHeaders(h)))
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(tok)
}

func TestSignVerifyInstruction(t *testing.T) {
	f := newFixture(t)
	in := f.signed(t)
	if err := VerifyInstruction(in); err != nil {
		t.Fatalf("VerifyInstruction: %v", err)
	}
	m, err := VerifyEnvelope(in, f.verifier)
	if err != nil {
		t.Fatalf("VerifyEnvelope: %v", err)
	}
	if m.ID != f.claims.ID || m.KeyID != f.opKid {
		t.Errorf("mandate = %s/%s, want %s/%s", m.ID, m.KeyID, f.claims.ID, f.opKid)
	}
	h, p, _, err := splitCompact(in.Envelope.Signature)
	if err != nil || p != "" {
		t.Fatalf("signature %q is not detached compact: %v", in.Envelope.Signature, err)
	}
	if got, want := string(h), `{"alg":"EdDSA","typ":"svc-intent+jws"}`; got != want {
		t.Errorf("protected header = %s, want %s", got, want)
	}
	// The decoder accepts what a signed instruction encodes to.
	if err := in.Check(); err != nil {
		t.Errorf("Check on a signed instruction: %v", err)
	}
}

func TestSignInstructionSetsAgent(t *testing.T) {
	f := newFixture(t)
	in := f.instruction()
	in.Envelope.Agent = ""
	if err := SignInstruction(in, f.agentKey); err != nil {
		t.Fatal(err)
	}
	if in.Envelope.Agent != f.agent {
		t.Errorf("agent = %s, want %s", in.Envelope.Agent, f.agent)
	}
	if err := VerifyInstruction(in); err != nil {
		t.Error(err)
	}
}

func TestSignInstructionRefuses(t *testing.T) {
	f := newFixture(t)

	t.Run("other agent", func(t *testing.T) {
		in := f.instruction()
		in.Envelope.Agent = agentID(seedKey(9))
		before := *in
		if err := SignInstruction(in, f.agentKey); err == nil {
			t.Fatal("signed for another agent id")
		}
		if *in != before {
			t.Error("instruction changed on error")
		}
	})
	t.Run("malformed", func(t *testing.T) {
		in := f.instruction()
		in.Envelope.Agent = ""
		in.Amount.Minor = 0
		err := SignInstruction(in, f.agentKey)
		var me *MalformedError
		if !errors.As(err, &me) || len(me.Fields) != 1 || me.Fields[0].Field != "amount.minor" {
			t.Fatalf("err = %v, want one amount.minor problem", err)
		}
		if in.Envelope.Agent != "" || in.Envelope.Signature != "" {
			t.Error("instruction changed on error")
		}
	})
	t.Run("bad key", func(t *testing.T) {
		if err := SignInstruction(f.instruction(), ed25519.PrivateKey{1, 2, 3}); err == nil {
			t.Fatal("signed with a 3-byte key")
		}
	})
}

func TestVerifyInstructionTamper(t *testing.T) {
	f := newFixture(t)
	other, err := SignMandate(func() MandateClaims { c := f.claims; c.ID = "mdt_other"; return c }(), f.opKey, f.opKid)
	if err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Instruction){
		"idempotencyKey":        func(in *Instruction) { in.IdempotencyKey += "x" },
		"payee":                 func(in *Instruction) { in.Payee = "acct:seller.example2" },
		"amount.minor":          func(in *Instruction) { in.Amount.Minor++ },
		"amount.currency":       func(in *Instruction) { in.Amount.Currency = "EUR" },
		"purpose":               func(in *Instruction) { in.Purpose += "." },
		"terms.rail":            func(in *Instruction) { in.Terms.Rail = "sandbox-chain" },
		"terms.reversibility":   func(in *Instruction) { in.Terms.Reversibility = gate.Irreversible },
		"terms.finality":        func(in *Instruction) { in.Terms.Finality = gate.FinalityDeferred },
		"terms.credential":      func(in *Instruction) { in.Terms.Credential = gate.CredentialDPoP },
		"terms.capitalSource":   func(in *Instruction) { in.Terms.CapitalSource = gate.CapitalCredit },
		"terms.presence":        func(in *Instruction) { in.Terms.Presence = gate.PresencePresent },
		"envelope.mandate":      func(in *Instruction) { in.Envelope.Mandate = other },
		"envelope.agent":        func(in *Instruction) { in.Envelope.Agent = agentID(seedKey(9)) },
		"signature byte":        func(in *Instruction) { in.Envelope.Signature = flipLastChar(in.Envelope.Signature) },
		"signature of other in": func(in *Instruction) { in.Envelope.Signature = signedOther(t, f) },
	} {
		t.Run(name, func(t *testing.T) {
			in := f.signed(t)
			mutate(in)
			wantReason(t, VerifyInstruction(in), ReasonSignatureInvalid)
		})
	}
}

func flipLastChar(s string) string {
	b := []byte(s)
	// Flip a character in the middle of the signature segment, so the
	// base64url stays canonical.
	i := strings.LastIndexByte(s, '.') + 5
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func signedOther(t *testing.T, f *fixture) string {
	in := f.instruction()
	in.Purpose = "something else"
	if err := SignInstruction(in, f.agentKey); err != nil {
		t.Fatal(err)
	}
	return in.Envelope.Signature
}

func TestVerifyInstructionRefuses(t *testing.T) {
	f := newFixture(t)
	otherKey := seedKey(9)
	enc := base64.RawURLEncoding
	tests := []struct {
		name string
		sig  func(in *Instruction) string
		want AuthReason
	}{
		{"wrong agent key", func(in *Instruction) string {
			return signIntentWith(t, in, otherKey, jwa.EdDSA(), map[string]any{"typ": IntentType}, true)
		}, ReasonSignatureInvalid},
		{"typ JWT", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), map[string]any{"typ": "JWT"}, true)
		}, ReasonSignatureWrongType},
		{"typ of a mandate", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), map[string]any{"typ": MandateType}, true)
		}, ReasonSignatureWrongType},
		{"typ with application/ prefix", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), map[string]any{"typ": "application/" + IntentType}, true)
		}, ReasonSignatureWrongType},
		{"typ upper-case", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), map[string]any{"typ": strings.ToUpper(IntentType)}, true)
		}, ReasonSignatureWrongType},
		{"no typ", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), nil, true)
		}, ReasonSignatureWrongType},
		{"embedded payload", func(in *Instruction) string {
			return signIntentWith(t, in, f.agentKey, jwa.EdDSA(), map[string]any{"typ": IntentType}, false)
		}, ReasonSignatureNotDetached},
		{"alg none", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"none","typ":"svc-intent+jws"}`)) + "..AA"
		}, ReasonSignatureBadAlg},
		{"alg none, empty signature", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"none","typ":"svc-intent+jws"}`)) + ".."
		}, ReasonSignatureMalformed},
		{"HS256 keyed with the agent id", func(in *Instruction) string {
			pub := f.agentKey.Public().(ed25519.PublicKey)
			return signIntentWith(t, in, []byte(pub), jwa.HS256(), map[string]any{"typ": IntentType}, true)
		}, ReasonSignatureBadAlg},
		{"crit b64 false", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"svc-intent+jws","b64":false,"crit":["b64"]}`)) + "..AAAA"
		}, ReasonSignatureMalformed},
		{"embedded jwk", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"svc-intent+jws","jwk":{}}`)) + "..AAAA"
		}, ReasonSignatureMalformed},
		{"duplicate typ", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"JWT","typ":"svc-intent+jws"}`)) + "..AAAA"
		}, ReasonSignatureMalformed},
		{"typ not a string", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":1}`)) + "..AAAA"
		}, ReasonSignatureMalformed},
		{"header not JSON", func(in *Instruction) string { return enc.EncodeToString([]byte(`{"alg"`)) + "..AAAA" }, ReasonSignatureMalformed},
		{"header array", func(in *Instruction) string { return enc.EncodeToString([]byte(`[]`)) + "..AAAA" }, ReasonSignatureMalformed},
		{"header trailing", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"svc-intent+jws"}{}`)) + "..AAAA"
		}, ReasonSignatureMalformed},
		{"two segments", func(in *Instruction) string { return "eyJhbGciOiJFZERTQSJ9.AAAA" }, ReasonSignatureMalformed},
		{"four segments", func(in *Instruction) string { return "eyJhbGciOiJFZERTQSJ9...AAAA" }, ReasonSignatureMalformed},
		{"padded base64", func(in *Instruction) string {
			return enc.EncodeToString([]byte(`{"alg":"EdDSA","typ":"svc-intent+jws"}`)) + "..AAAA=="
		}, ReasonSignatureMalformed},
		{"JSON serialization", func(in *Instruction) string { return `{"payload":"","signatures":[]}` }, ReasonSignatureMalformed},
		{"empty", func(in *Instruction) string { return "" }, ReasonSignatureMalformed},
		{"too long", func(in *Instruction) string { return strings.Repeat("A", MaxSignatureLen+1) }, ReasonSignatureMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := f.instruction()
			in.Envelope.Signature = tt.sig(in)
			wantReason(t, VerifyInstruction(in), tt.want)
		})
	}

	t.Run("agent malformed", func(t *testing.T) {
		in := f.signed(t)
		in.Envelope.Agent = strings.ToUpper(in.Envelope.Agent)
		wantReason(t, VerifyInstruction(in), ReasonAgentMalformed)
	})
}

func TestVerifyEnvelope(t *testing.T) {
	f := newFixture(t)
	other := seedKey(9)

	t.Run("sub mismatch", func(t *testing.T) {
		// The instruction is validly signed by another agent, but the
		// mandate was issued to f.agent.
		in := f.instruction()
		in.Envelope.Agent = ""
		if err := SignInstruction(in, other); err != nil {
			t.Fatal(err)
		}
		if err := VerifyInstruction(in); err != nil {
			t.Fatalf("the signature itself should verify: %v", err)
		}
		_, err := VerifyEnvelope(in, f.verifier)
		wantReason(t, err, ReasonSubMismatch)
	})
	t.Run("mandate first", func(t *testing.T) {
		in := f.signed(t)
		in.Envelope.Mandate = flipLastChar(in.Envelope.Mandate)
		in.Envelope.Signature = "garbage"
		_, err := VerifyEnvelope(in, f.verifier)
		wantReason(t, err, ReasonMandateBadSignature)
	})
	t.Run("then signature", func(t *testing.T) {
		in := f.signed(t)
		in.Purpose = "changed"
		_, err := VerifyEnvelope(in, f.verifier)
		wantReason(t, err, ReasonSignatureInvalid)
	})
	t.Run("expired mandate", func(t *testing.T) {
		in := f.signed(t)
		v := f.newVerifier(t, &MandateVerifierOptions{Now: func() time.Time { return f.claims.ExpiresAt }})
		_, err := VerifyEnvelope(in, v)
		wantReason(t, err, ReasonMandateExpired)
	})
}

func TestSigningBytesGolden(t *testing.T) {
	in := &Instruction{
		IdempotencyKey: "k1",
		Payee:          "acct:seller.example",
		Amount:         Amount{Minor: 1250, Currency: "USD"},
		Purpose:        "caf\u00e9 <&> \u20ac",
		Terms: Terms{Rail: "sandbox-card", Reversibility: "reversible", Finality: "instant",
			Credential: "api-key", CapitalSource: "payer", Presence: "delegated"},
		Envelope: Envelope{Agent: "ab", Mandate: "m.m.m", Signature: "ignored..sig"},
	}
	got, err := SigningBytes(in)
	if err != nil {
		t.Fatal(err)
	}
	// Members sorted by UTF-16 code units, no whitespace, non-ASCII kept
	// as UTF-8, no HTML escaping, no signature.
	want := `{"amount":{"currency":"USD","minor":1250},"envelope":{"agent":"ab","mandate":"m.m.m"},` +
		`"idempotencyKey":"k1","payee":"acct:seller.example","purpose":"café <&> €",` +
		`"terms":{"capitalSource":"payer","credential":"api-key","finality":"instant",` +
		`"presence":"delegated","rail":"sandbox-card","reversibility":"reversible"}}`
	if string(got) != want {
		t.Errorf("SigningBytes =\n%s\nwant\n%s", got, want)
	}
}

func BenchmarkVerifyInstruction(b *testing.B) {
	f := newFixture(b)
	in := f.signed(b)
	b.ReportAllocs()
	for b.Loop() {
		if err := VerifyInstruction(in); err != nil {
			b.Fatal(err)
		}
	}
}
