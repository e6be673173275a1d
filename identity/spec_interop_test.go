package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/gowebpki/jcs"
)

// This file holds the deployment to the letter of SPEC.md: a verifier
// written here from the spec text alone (strings compared as strings, keys
// read from hex, as §5, §5.1 and §7.4 say) must accept what the deployment
// emits. testdata/spec/vectors.json is written by hand from the spec.

type specVectors struct {
	Keys []struct {
		Name, Seed, PublicKeyHex string
	} `json:"keys"`
	Handshakes []struct {
		Name              string    `json:"name"`
		Key               string    `json:"key"`
		Challenge         Challenge `json:"challenge"`
		AuditHead         string    `json:"auditHead"`
		SignedAt          string    `json:"signedAt"`
		Now               string    `json:"now"`
		ExpectedAgentID   string    `json:"expectedAgentId"`
		DisclosureVersion *int      `json:"disclosureVersion"`
		SignatureInput    string    `json:"signatureInput"`
		SignatureBase     string    `json:"signatureBase"`
		Accept            bool      `json:"accept"`
		FailedCheck       string    `json:"failedCheck"`
	} `json:"handshakes"`
	Rotations []struct {
		Name       string            `json:"name"`
		FromKey    string            `json:"fromKey"`
		ToKey      string            `json:"toKey"`
		RotatedAt  string            `json:"rotatedAt"`
		Statement  RotationStatement `json:"statement"`
		SignedBody string            `json:"signedBody"`
	} `json:"rotations"`
}

func loadSpecVectors(t *testing.T) (specVectors, map[string]ed25519.PrivateKey) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "spec", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v specVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	keys := map[string]ed25519.PrivateKey{}
	for _, k := range v.Keys {
		seed, err := hex.DecodeString(k.Seed)
		if err != nil || len(seed) != ed25519.SeedSize {
			t.Fatalf("key %s: bad seed", k.Name)
		}
		keys[k.Name] = ed25519.NewKeyFromSeed(seed)
		if got := hex.EncodeToString(keys[k.Name].Public().(ed25519.PublicKey)); got != k.PublicKeyHex {
			t.Fatalf("key %s: public key %s, vector says %s", k.Name, got, k.PublicKeyHex)
		}
	}
	return v, keys
}

// letterResponse applies SPEC §7.4 steps 1–6 as written: the nonce and the
// agentId compared as strings, the Signature-Input and base rebuilt from
// §7.3, the signature checked against agentId read as a hex key, a declared
// version checked against supported (§7.5), 0 ≤ age ≤ 60 s. It returns the
// first failed step's name, or "".
func letterResponse(resp ChallengeResponse, ch Challenge, expected string, supported []int, now time.Time) string {
	if resp.Nonce != ch.Nonce {
		return "nonce"
	}
	if resp.AgentID != expected {
		return "agentId"
	}
	covered := `("adp-agent-id" "adp-audit-head"`
	if resp.DisclosureVersion != nil {
		covered += ` "adp-disclosure-version"`
	}
	params := covered + `);created="` + resp.SignedAt + `";keyid="` + resp.AgentID +
		`";alg="ed25519";nonce="` + ch.Nonce + `"`
	if ch.VerifierID != "" {
		params += `;tag="` + ch.VerifierID + `"`
	}
	if resp.SignatureInput != "sig="+params {
		return "signatureInput"
	}
	lines := []string{`"adp-agent-id": ` + resp.AgentID, `"adp-audit-head": ` + resp.AuditHead}
	if resp.DisclosureVersion != nil {
		lines = append(lines, `"adp-disclosure-version": `+strconv.Itoa(*resp.DisclosureVersion))
	}
	lines = append(lines, `"@signature-params": `+params)
	pub, err1 := hex.DecodeString(resp.AgentID)
	sig, err2 := hex.DecodeString(resp.Signature)
	if err1 != nil || err2 != nil || len(pub) != ed25519.PublicKeySize ||
		!ed25519.Verify(pub, []byte(strings.Join(lines, "\n")), sig) {
		return "signature"
	}
	if supported != nil && resp.DisclosureVersion != nil && !slices.Contains(supported, *resp.DisclosureVersion) {
		return "version"
	}
	signedAt, err := time.Parse(time.RFC3339Nano, resp.SignedAt)
	if age := now.Sub(signedAt); err != nil || age < 0 || age > time.Minute {
		return "freshness"
	}
	return ""
}

// letterBinding is SPEC §5's identity binding and §5.1's chain walk as
// written: agentId equals the signing key in hex, or its did:key, or a chain
// whose hops continue from agentId string for string, each signed by its
// from key (read as hex) over the canonical body, acyclic, ending at the
// signing key.
func letterBinding(agentID, signingKeyHex string, chain []RotationStatement) string {
	pub, _ := hex.DecodeString(signingKeyHex)
	if agentID == signingKeyHex || agentID == DIDKey(pub) {
		return ""
	}
	if len(chain) == 0 || len(chain) > 32 {
		return "agentId does not match the signing public key"
	}
	cursor, seen := agentID, map[string]bool{agentID: true}
	for _, hop := range chain {
		if hop.From != cursor {
			return "rotation chain is not contiguous from agentId"
		}
		body, _ := json.Marshal(map[string]string{"type": "rotation", "from": hop.From, "to": hop.To, "rotatedAt": hop.RotatedAt})
		from, err1 := hex.DecodeString(hop.From)
		sig, err2 := hex.DecodeString(hop.Signature)
		if err1 != nil || err2 != nil || len(from) != ed25519.PublicKeySize || !ed25519.Verify(from, body, sig) {
			return "a rotation statement signature does not verify against its from key"
		}
		if seen[hop.To] {
			return "rotation chain contains a cycle"
		}
		seen[hop.To], cursor = true, hop.To
	}
	if cursor != signingKeyHex {
		return "rotation chain does not end at the signing key"
	}
	return ""
}

// letterEnvelope verifies either envelope shape by SPEC §3.12 and §5 and
// returns the agentId, or the reason it failed.
func letterEnvelope(t *testing.T, raw []byte) (agentID, reason string) {
	t.Helper()
	var env struct {
		Disclosure json.RawMessage `json:"disclosure"`
		Signature  json.RawMessage `json:"signature"`
		Payload    string          `json:"payload"`
		Protected  string          `json:"protected"`
		Header     struct {
			JWK struct{ Kty, Crv, X string } `json:"jwk"`
		} `json:"header"`
		RotationChain []RotationStatement `json:"rotationChain"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	var signingKey []byte
	var doc []byte
	switch {
	case env.Payload != "" && env.Protected != "": // §3.12.2
		prot, _ := base64.RawURLEncoding.DecodeString(env.Protected)
		var h struct{ Alg, Typ string }
		if json.Unmarshal(prot, &h) != nil || h.Alg != "EdDSA" {
			return "", "alg is not EdDSA"
		}
		signingKey, _ = base64.RawURLEncoding.DecodeString(env.Header.JWK.X)
		var sigB64 string
		if json.Unmarshal(env.Signature, &sigB64) != nil {
			return "", "signature is not a string"
		}
		sig, _ := base64.RawURLEncoding.DecodeString(sigB64)
		if len(signingKey) != ed25519.PublicKeySize || !ed25519.Verify(signingKey, []byte(env.Protected+"."+env.Payload), sig) {
			return "", "jws signature mismatch"
		}
		doc, _ = base64.RawURLEncoding.DecodeString(env.Payload)
	default: // §3.12.1
		var s struct{ Algorithm, PublicKey, Value string }
		if err := json.Unmarshal(env.Signature, &s); err != nil || s.Algorithm != "ed25519" {
			return "", "signature.algorithm is not ed25519"
		}
		canon, err := jcs.Transform(env.Disclosure)
		if err != nil {
			t.Fatal(err)
		}
		signingKey, _ = hex.DecodeString(s.PublicKey)
		sig, _ := hex.DecodeString(s.Value)
		if len(signingKey) != ed25519.PublicKeySize || !ed25519.Verify(signingKey, canon, sig) {
			return "", "signature mismatch"
		}
		doc = env.Disclosure
	}
	var d struct {
		AgentID string `json:"agentId"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	return d.AgentID, letterBinding(d.AgentID, hex.EncodeToString(signingKey), env.RotationChain)
}

// TestSpecHandshakeVectors: §7.2 fields, §7.3 bytes, §7.4–7.5 verdicts.
func TestSpecHandshakeVectors(t *testing.T) {
	v, keys := loadSpecVectors(t)
	for _, c := range v.Handshakes {
		t.Run(c.Name, func(t *testing.T) {
			key := keys[c.Key]
			resp, err := Respond(c.Challenge, key, "", c.AuditHead, mustTime(t, c.SignedAt), c.DisclosureVersion)
			if err != nil {
				t.Fatal(err)
			}
			if resp.AgentID != c.ExpectedAgentID || resp.SignedAt != c.SignedAt || resp.Nonce != c.Challenge.Nonce {
				t.Fatalf("response %+v does not carry §7.2's fields", resp)
			}
			if resp.SignatureInput != c.SignatureInput {
				t.Errorf("Signature-Input\n got %s\nwant %s", resp.SignatureInput, c.SignatureInput)
			}
			sig, _ := hex.DecodeString(resp.Signature)
			if !ed25519.Verify(key.Public().(ed25519.PublicKey), []byte(c.SignatureBase), sig) {
				t.Error("the signature is not over §7.3's signature base")
			}
			now := mustTime(t, c.Now)
			if got := letterResponse(resp, c.Challenge, c.ExpectedAgentID, c.Challenge.SupportedVersions, now); got != c.FailedCheck {
				t.Errorf("the spec's checks: failed %q, want %q", got, c.FailedCheck)
			}
			r := VerifyResponse(resp, c.Challenge, HandshakePolicy{ExpectedAgentID: c.ExpectedAgentID, Now: now})
			want := []string{}
			if c.FailedCheck != "" {
				want = []string{c.FailedCheck}
			}
			if r.OK != c.Accept || !slices.Equal(r.Failed, want) {
				t.Errorf("VerifyResponse: ok=%v failed %v, want %v %v", r.OK, r.Failed, c.Accept, want)
			}
		})
	}
}

// TestSpecRotationVectors: §5.1's statement, signed body and chain walk.
func TestSpecRotationVectors(t *testing.T) {
	v, keys := loadSpecVectors(t)
	for _, c := range v.Rotations {
		t.Run(c.Name, func(t *testing.T) {
			from, to := keys[c.FromKey], keys[c.ToKey]
			s, err := Rotate(from, to.Public().(ed25519.PublicKey), mustTime(t, c.RotatedAt))
			if err != nil {
				t.Fatal(err)
			}
			want := c.Statement
			want.Signature = s.Signature
			if s != want {
				t.Fatalf("statement %+v, want %+v", s, want)
			}
			sig, _ := hex.DecodeString(s.Signature)
			if !ed25519.Verify(from.Public().(ed25519.PublicKey), []byte(c.SignedBody), sig) {
				t.Error("the from key's signature is not over the canonical body")
			}
			if got := letterBinding(c.Statement.From, c.Statement.To, []RotationStatement{s}); got != "" {
				t.Errorf("the spec's chain walk: %s", got)
			}
			if err := VerifyRotationChain(c.Statement.From, []RotationStatement{s}, to.Public().(ed25519.PublicKey)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSpecDeploymentInterop: the deployment's disclosures (both envelopes,
// before and after rotations) and its handshake responses pass the spec's
// rules as written.
func TestSpecDeploymentInterop(t *testing.T) {
	d := newDeployment(t, nil)
	agentID := d.svc.AgentID()
	if agentID != hex.EncodeToString(d.keys[0].Public().(ed25519.PublicKey)) {
		t.Fatalf("a new deployment's agentId %s is not its key in hex", agentID)
	}
	check := func(stage string, hops int) {
		t.Helper()
		for _, env := range []string{EnvelopeV1, EnvelopeJWS} {
			id, reason := letterEnvelope(t, d.disclose(t, env))
			if reason != "" || id != agentID {
				t.Errorf("%s %s: agentId %s: %s", stage, env, id, reason)
			}
		}
		if got := d.svc.RotationChain(); len(got) != hops || (hops > 0 && got[0].From != agentID) {
			t.Errorf("%s: chain %+v does not start at the agentId as written", stage, got)
		}
		ch := Challenge{Nonce: "0f1e2d3c4b5a69788796a5b4c3d2e1f0", IssuedAt: Timestamp(d.clock.Now()),
			VerifierID: "peer.example", SupportedVersions: []int{1}}
		resp, err := d.svc.Respond(t.Context(), ch)
		if err != nil {
			t.Fatal(err)
		}
		current := hex.EncodeToString(d.svc.PublicKey())
		if resp.AgentID != current {
			t.Errorf("%s: response agentId %s is not the responder's key in hex", stage, resp.AgentID)
		}
		if got := letterResponse(resp, ch, current, ch.SupportedVersions, d.clock.Now()); got != "" {
			t.Errorf("%s: the spec's handshake checks failed at %s", stage, got)
		}
		if hops == 0 && resp.AgentID != agentID {
			t.Errorf("%s: §7.4 step 2: response agentId %s, disclosure's %s", stage, resp.AgentID, agentID)
		}
		r := VerifyResponse(resp, ch, HandshakePolicy{ExpectedAgentID: agentID, Now: d.clock.Now(), RotationChain: d.svc.RotationChain()})
		if !r.OK {
			t.Errorf("%s: VerifyResponse: %v", stage, r.Checks)
		}
	}
	check("new", 0)
	for i := 1; i <= 2; i++ {
		if _, err := d.svc.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "rotation"}); err != nil {
			t.Fatal(err)
		}
		check("rotated "+strconv.Itoa(i), i)
	}
}

// TestSpecVersion2Refused: a challenge issued here advertises [1]; a signed
// response declaring version 2 is refused (§7.5), one declaring 1 passes.
func TestSpecVersion2Refused(t *testing.T) {
	us, them := newDeployment(t, nil), newDeployment(t, nil)
	them.clock.t = us.clock.t
	env := them.disclose(t, EnvelopeJWS)
	for _, c := range []struct {
		version int
		want    string
	}{{2, OutcomeRefuse}, {1, OutcomeTransact}} {
		ch, err := us.svc.Challenge(t.Context(), "us")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ch.SupportedVersions, []int{1}) {
			t.Fatalf("challenge advertises %v", ch.SupportedVersions)
		}
		resp, err := Respond(ch, them.keys[0], "", "ab", us.clock.Now(), &c.version)
		if err != nil {
			t.Fatal(err)
		}
		v, err := us.svc.Verify(t.Context(), VerifyRequest{Envelope: env, Response: &resp}, audit.Actor{Kind: "agent", ID: "ak_1"}, "")
		if err != nil || v.Outcome != c.want {
			t.Errorf("version %d: %v %s %v", c.version, err, v.Outcome, v.Checks)
		}
		if c.want == OutcomeRefuse && !slices.Contains(v.Failed, "handshake") {
			t.Errorf("version %d: failed %v", c.version, v.Failed)
		}
	}
}

// TestSpecDIDKeyIdentity: an identity created with a did:key agentId (a
// deployment from before hex was the default, or another implementation's)
// still opens, keeps its agentId, verifies, answers the handshake and
// rotates.
func TestSpecDIDKeyIdentity(t *testing.T) {
	us, l := newDeployment(t, nil), newDeployment(t, nil)
	l.clock.t = us.clock.t
	did := DIDKey(l.keys[0].Public().(ed25519.PublicKey))
	b, _ := json.Marshal(selfState{AgentID: did})
	if err := l.st.Update(t.Context(), func(txn store.Txn) error { return txn.Set([]byte(keySelf), b) }); err != nil {
		t.Fatal(err)
	}
	l.reopen(t)
	if l.svc.AgentID() != did {
		t.Fatalf("a stored did:key identity opened as %s", l.svc.AgentID())
	}
	agent := audit.Actor{Kind: "agent", ID: "ak_1"}
	verify := func(stage string) {
		t.Helper()
		for _, env := range []string{EnvelopeV1, EnvelopeJWS} {
			raw := l.disclose(t, env)
			if v := Verify(raw, Policy{Now: l.clock.Now()}); v.Outcome != OutcomeTransact || v.AgentID != did {
				t.Errorf("%s %s: %s %v", stage, env, v.Outcome, v.Checks)
			}
			if _, reason := letterEnvelope(t, raw); stage == "new" && reason != "" {
				t.Errorf("%s %s: §5 case 2: %s", stage, env, reason)
			}
			ch, _ := us.svc.Challenge(t.Context(), "")
			resp, err := l.svc.Respond(t.Context(), ch)
			if err != nil {
				t.Fatal(err)
			}
			v, err := us.svc.Verify(t.Context(), VerifyRequest{Envelope: raw, Response: &resp}, agent, "")
			if err != nil || v.Outcome != OutcomeTransact {
				t.Errorf("%s %s with handshake: %v %v", stage, env, err, v.Checks)
			}
		}
	}
	verify("new")
	if _, err := l.svc.Rotate(t.Context(), OperatorCall{Operator: "op-test", Rationale: "rotation"}); err != nil {
		t.Fatal(err)
	}
	l.reopen(t)
	if l.svc.AgentID() != did || !bytes.Equal(l.svc.PublicKey(), l.keys[1].Public().(ed25519.PublicKey)) {
		t.Fatal("a restart lost the did:key identity's rotation")
	}
	verify("rotated")

	// Options.HexAgentID moves the identity to the same key in hex, once:
	// the stored chain then continues from the agentId as written.
	us.opts.HexAgentID = true // a hex identity is left as it is
	if us.reopen(t); len(us.entries(t, EntryAgentIDForm)) != 0 {
		t.Error("HexAgentID rewrote a hex agent id")
	}
	l.opts.HexAgentID = true
	l.reopen(t)
	l.reopen(t)
	hexID := hex.EncodeToString(l.keys[0].Public().(ed25519.PublicKey))
	if l.svc.AgentID() != hexID || len(l.entries(t, EntryAgentIDForm)) != 1 {
		t.Fatalf("HexAgentID: agentId %s, %d entries", l.svc.AgentID(), len(l.entries(t, EntryAgentIDForm)))
	}
	for _, env := range []string{EnvelopeV1, EnvelopeJWS} {
		if id, reason := letterEnvelope(t, l.disclose(t, env)); id != hexID || reason != "" {
			t.Errorf("after HexAgentID, %s: agentId %s: %s", env, id, reason)
		}
	}
}
