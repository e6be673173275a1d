package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// adpKey is a deterministic test key.
func adpKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func adpHex(k ed25519.PrivateKey) string { return hex.EncodeToString(k.Public().(ed25519.PublicKey)) }

// adpNow is the clock of the tests: inside adpSample's freshness window.
var adpNow = time.Date(2026, 6, 24, 12, 30, 0, 0, time.UTC)

// adpSample builds a disclosure the way an emitter would: every required
// field, the optional ones a deployment typically sets.
func adpSample(agentID string) *Disclosure {
	d := &Disclosure{
		Version:      DisclosureVersion,
		DisclosureID: "disc_test",
		AgentID:      agentID,
		IssuedAt:     Timestamp(adpNow.Add(-30 * time.Minute)),
		ValidUntil:   Timestamp(adpNow.Add(30 * time.Minute)),
		Nonce:        "nonce_test",
		AuditAnchor:  strings.Repeat("ab", 32),
		SystemPrompt: SystemPrompt{Algorithm: "sha256", Digest: strings.Repeat("cd", 32), PromptVersion: "v1"},
		Constitution: Constitution{
			HardConstraints: []HardConstraint{{ID: "no_self_payment", Description: "no paying your own operator", Kind: "deny"}},
			Parameters:      map[string]any{"minRationaleChars": 10.0, "mode": "strict", "😀": true, "\uFB33": 1.5},
			Enforced:        true,
		},
		Tools: ToolInventory{Tools: []Tool{{Name: "pay", Access: "gated", MovesValue: true}}},
		Capital: Capital{
			Mandates: []MandateDisclosure{{Label: "ops", Scope: "saas", Currency: "USD", PerTxCapMinor: 10_000,
				PerPeriodCapMinor: 100_000, Period: "month", AllowedRails: []string{"card"}, ExpiresAt: "2026-12-31T00:00:00.000Z"}},
			Custody: "non_custodial",
		},
		Operator: OperatorIdentity{OperatorID: "op", Attestation: Attestation{Scheme: "dev.countersign.operator-keys", Level: "signed"},
			DeniabilityBoundary: "spend within mandates"},
		History: History{ChainAnchor: strings.Repeat("ef", 32), Summary: HistorySummary{TotalDecisions: 5, SettledCount: 4, BlockedCount: 1}},
		RedTeam: &RedTeam{Corpus: RedTeamCorpus{Name: "spendtrust", Version: "1.0.0"},
			Result: RedTeamResult{Grade: "A", Score: 95, Passed: true}, AttestedAt: "2026-06-24T12:00:00.000Z"},
		Model:      &ModelIdentity{Name: "m", FingerprintAlgorithm: "sha256", Digest: strings.Repeat("01", 32)},
		Provenance: map[string]FieldProvenance{"constitution": {DerivedFrom: "gate"}},
		Extensions: map[string]json.RawMessage{"dev.countersign.policy": json.RawMessage(`{"hash": "00"}`)},
	}
	d.Constitution.Digest = ConstitutionDigest(d.Constitution)
	return d
}

func TestSignRoundTrip(t *testing.T) {
	key := adpKey(1)
	s := loadSchemas(t)
	for _, agentID := range []string{adpHex(key), strings.ToUpper(adpHex(key)), DIDKey(key.Public().(ed25519.PublicKey))} {
		d := adpSample(agentID)
		v1, err := SignV1(d, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		jws, err := SignJWS(d, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, env := range [][]byte{v1, jws} {
			dec := Verify(env, Policy{Now: adpNow, RequireEnforcedConstitution: true, RequireAuditAnchor: true,
				RequireModelFingerprint: true, RequireProvenanceFor: []string{"constitution"}})
			if dec.Outcome != OutcomeTransact {
				t.Fatalf("%s: %s %+v", agentID, dec.Outcome, dec.Checks)
			}
			// The emitted envelope validates against the official schema
			// (independent validator) and is itself canonical JSON.
			theirs, _ := s.envelopeVerdicts(t, env)
			if theirs != nil {
				t.Errorf("emitted envelope fails the official schema: %v\n%s", theirs, env)
			}
			if c, err := CanonicalJSON(env); err != nil || !bytes.Equal(c, env) {
				t.Errorf("emitted envelope is not canonical JSON")
			}
			again, err := Canonicalize(dec.Disclosure)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := Canonicalize(d)
			if !bytes.Equal(again, want) {
				t.Errorf("decoded disclosure re-canonicalizes differently:\n%s\n%s", again, want)
			}
		}
		// The JWS payload is the v1 disclosure, byte for byte.
		var a SignedDisclosure
		var b JWSDisclosure
		if err := json.Unmarshal(v1, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(jws, &b); err != nil {
			t.Fatal(err)
		}
		p, _ := b64.DecodeString(b.Payload)
		if !bytes.Equal(p, a.Disclosure) {
			t.Error("JWS payload differs from the v1 disclosure bytes")
		}
		if b.Protected != jwsProtectedB64 || b64.EncodeToString([]byte(jwsProtected)) != jwsProtectedB64 {
			t.Errorf("protected header %q", b.Protected)
		}
	}
}

func TestSignRefuses(t *testing.T) {
	key, other := adpKey(1), adpKey(2)
	bad := adpSample(adpHex(key))
	bad.Capital.Custody = "escrow"
	if _, err := SignV1(bad, key, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("invalid document: err = %v, want ErrMalformed", err)
	}
	if _, err := SignJWS(adpSample(adpHex(other)), key, nil); !errors.Is(err, ErrKeyBinding) {
		t.Errorf("foreign agentId: err = %v, want ErrKeyBinding", err)
	}
	if _, err := SignV1(adpSample(adpHex(key)), key[:10], nil); err == nil {
		t.Error("short key accepted")
	}
	nilSlices := adpSample(adpHex(key))
	nilSlices.Constitution.HardConstraints = nil
	nilSlices.Tools.Tools = nil
	nilSlices.Capital.Mandates = nil
	nilSlices.RedTeam.Result.HardFails = nil
	if _, err := SignV1(nilSlices, key, nil); err != nil {
		t.Errorf("nil required slices should marshal as []: %v", err)
	}
	canon, _ := Canonicalize(adpSample(adpHex(key)))
	pretty := bytes.Replace(canon, []byte(`{"agentId"`), []byte(`{ "agentId"`), 1)
	if _, _, err := SignCanonical(pretty, key, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("non-canonical bytes: err = %v", err)
	}
	// A chain is only carried to link an earlier identity, and must verify.
	rot, _ := Rotate(other, key.Public().(ed25519.PublicKey), adpNow)
	if _, err := SignV1(adpSample(adpHex(key)), key, []RotationStatement{rot}); !errors.Is(err, ErrKeyBinding) {
		t.Errorf("chain with a direct binding: err = %v", err)
	}
	env, err := SignV1(adpSample(adpHex(other)), key, []RotationStatement{rot})
	if err != nil {
		t.Fatal(err)
	}
	if d := Verify(env, Policy{Now: adpNow}); d.Outcome != OutcomeTransact {
		t.Errorf("rotated identity: %+v", d.Checks)
	}
}

// jwsVariant re-signs a JWS envelope after edit changes its parts, so that
// only the edited property is wrong.
func jwsVariant(t *testing.T, key ed25519.PrivateKey, protected string, payload []byte, edit func(*JWSDisclosure)) []byte {
	t.Helper()
	j := JWSDisclosure{
		Payload:   b64.EncodeToString(payload),
		Protected: b64.EncodeToString([]byte(protected)),
		Header:    JWSHeader{JWK: JWK{Kty: "OKP", Crv: "Ed25519", X: b64.EncodeToString(key.Public().(ed25519.PublicKey))}},
	}
	j.Signature = b64.EncodeToString(ed25519.Sign(key, []byte(j.Protected+"."+j.Payload)))
	if edit != nil {
		edit(&j)
	}
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVerifyJWSEdges(t *testing.T) {
	key := adpKey(3)
	canon, err := Canonicalize(adpSample(adpHex(key)))
	if err != nil {
		t.Fatal(err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, canon, "", " "); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		protected string
		payload   []byte
		edit      func(*JWSDisclosure)
		failed    []string
	}{
		{"reference header", jwsProtected, canon, nil, nil},
		{"other header order with kid", `{"typ":"application/adp+json","kid":"k1","alg":"EdDSA"}`, canon, nil, nil},
		{"alg none", `{"alg":"none"}`, canon, nil, []string{CheckSignature}},
		{"alg HS256", `{"alg":"HS256","typ":"application/adp+json"}`, canon, nil, []string{CheckSignature}},
		{"crit", `{"alg":"EdDSA","crit":["b64"],"b64":false}`, canon, nil, []string{CheckSignature}},
		{"header not json", `alg=EdDSA`, canon, nil, []string{CheckSignature}},
		{"header duplicate alg", `{"alg":"none","alg":"EdDSA"}`, canon, nil, []string{CheckSignature}},
		{"non-canonical payload", jwsProtected, pretty.Bytes(), nil, []string{CheckSignature}},
		{"short x", jwsProtected, canon, func(j *JWSDisclosure) { j.Header.JWK.X = "AAAA" }, []string{CheckSignature}},
		{"padded signature", jwsProtected, canon, func(j *JWSDisclosure) { j.Signature += "==" }, []string{CheckSignature}},
		{"signature by another key", jwsProtected, canon, func(j *JWSDisclosure) {
			j.Signature = b64.EncodeToString(ed25519.Sign(adpKey(4), []byte(j.Protected+"."+j.Payload)))
		}, []string{CheckSignature}},
		{"payload not base64url", jwsProtected, canon, func(j *JWSDisclosure) { j.Payload = "!!" }, []string{CheckSchema}},
		{"payload not a disclosure", jwsProtected, []byte(`{"a":1}`), nil, []string{CheckSchema}},
		{"wrong kty", jwsProtected, canon, func(j *JWSDisclosure) { j.Header.JWK.Kty = "EC" }, []string{CheckSchema}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Verify(jwsVariant(t, key, c.protected, c.payload, c.edit), Policy{Now: adpNow})
			if !slices.Equal(d.Failed, nonNilStrings(c.failed)) {
				t.Errorf("failed %v, want %v (%+v)", d.Failed, c.failed, d.Checks)
			}
			if d.Envelope != EnvelopeJWS {
				t.Errorf("envelope %q", d.Envelope)
			}
		})
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestVerifyV1Edges(t *testing.T) {
	key := adpKey(5)
	env, err := SignV1(adpSample(adpHex(key)), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sd SignedDisclosure
	if err := json.Unmarshal(env, &sd); err != nil {
		t.Fatal(err)
	}
	mk := func(edit func(*SignedDisclosure)) []byte {
		c := sd
		edit(&c)
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		name   string
		env    []byte
		failed []string
	}{
		{"as signed", env, nil},
		{"whitespace in the document", mk(func(s *SignedDisclosure) {
			var b bytes.Buffer
			_ = json.Indent(&b, s.Disclosure, "", "  ")
			s.Disclosure = b.Bytes()
		}), nil},
		{"uppercase hex", mk(func(s *SignedDisclosure) {
			s.Signature.PublicKey = strings.ToUpper(s.Signature.PublicKey)
			s.Signature.Value = strings.ToUpper(s.Signature.Value)
		}), nil},
		{"odd-length signature", mk(func(s *SignedDisclosure) { s.Signature.Value += "0" }), []string{CheckSignature}},
		{"truncated signature", mk(func(s *SignedDisclosure) { s.Signature.Value = s.Signature.Value[:126] }), []string{CheckSignature}},
		{"33-byte key", mk(func(s *SignedDisclosure) { s.Signature.PublicKey += "00" }), []string{CheckSignature}},
		{"empty rotation chain", mk(func(s *SignedDisclosure) { s.RotationChain = []RotationStatement{} }), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Verify(c.env, Policy{Now: adpNow})
			if !slices.Equal(d.Failed, nonNilStrings(c.failed)) {
				t.Errorf("failed %v, want %v (%+v)", d.Failed, c.failed, d.Checks)
			}
		})
	}
	// An explicitly empty rotationChain is kept by the wire form (the
	// struct tag drops it, so build it by hand).
	raw := bytes.Replace(env, []byte(`,"signature"`), []byte(`,"rotationChain":[],"signature"`), 1)
	if d := Verify(raw, Policy{Now: adpNow}); d.Outcome != OutcomeTransact {
		t.Errorf("empty chain with a direct binding: %+v", d.Checks)
	}
	s := loadSchemas(t)
	if theirs, _ := s.envelopeVerdicts(t, raw); theirs != nil {
		t.Errorf("schema refuses an empty chain: %v", theirs)
	}
}

func TestEnvelopeDiscrimination(t *testing.T) {
	for _, c := range []struct {
		in   string
		kind string
	}{
		{`{"payload":"x","protected":"y"}`, EnvelopeJWS},
		{`{"payload":1,"protected":null,"disclosure":{}}`, EnvelopeJWS},
		{`{"payload":"x","disclosure":{}}`, EnvelopeV1},
		{`{}`, EnvelopeV1},
		{`[]`, ""},
		{`null`, ""},
		{`not json`, ""},
	} {
		d := Verify([]byte(c.in), Policy{})
		if d.Envelope != c.kind || !slices.Equal(d.Failed, []string{CheckSchema}) || d.Disclosure != nil || d.Digest != "" {
			t.Errorf("%s: envelope %q failed %v, want %q [schema]", c.in, d.Envelope, d.Failed, c.kind)
		}
	}
}

// TestSchemaValidatesEmitted runs the official schemas over many emitted
// envelopes, with and without every optional field.
func TestSchemaValidatesEmitted(t *testing.T) {
	s := loadSchemas(t)
	key := adpKey(6)
	minimal := adpSample(adpHex(key))
	minimal.AuditAnchor = ""
	minimal.SystemPrompt.PromptVersion = ""
	minimal.Constitution.Parameters = nil
	minimal.RedTeam, minimal.Model, minimal.Provenance, minimal.Extensions = nil, nil, nil, nil
	minimal.Capital.Mandates = nil
	v1, jws, err := func() ([]byte, []byte, error) {
		canon, err := Canonicalize(minimal)
		if err != nil {
			return nil, nil, err
		}
		return SignCanonical(canon, key, nil)
	}()
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range [][]byte{v1, jws} {
		if theirs, ours := s.envelopeVerdicts(t, env); theirs != nil || ours != nil {
			t.Errorf("minimal envelope: schema %v, ours %v", theirs, ours)
		}
	}
	var sd SignedDisclosure
	if err := json.Unmarshal(v1, &sd); err != nil {
		t.Fatal(err)
	}
	if theirs, _ := s.documentVerdicts(t, sd.Disclosure); theirs != nil {
		t.Errorf("minimal document: %v", theirs)
	}
	if strings.Contains(string(sd.Disclosure), "auditAnchor") || strings.Contains(string(sd.Disclosure), "null") {
		t.Errorf("unset optional fields were emitted: %s", sd.Disclosure)
	}
}
