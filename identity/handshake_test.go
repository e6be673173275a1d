package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRespondReproducesInterop: answering the interop challenge with the
// interop key at its time reproduces the reference's response exactly.
func TestRespondReproducesInterop(t *testing.T) {
	f := loadInterop(t)
	key := interopKey(t, f)
	c := f.Handshakes[0]
	if !c.Expect {
		t.Fatal("first handshake case is not the valid one")
	}
	resp, err := Respond(c.Challenge, key, "", c.Response.AuditHead, mustTime(t, c.Response.SignedAt), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp != c.Response {
		t.Errorf("response %+v\nwant %+v", resp, c.Response)
	}
}

func TestSignatureBase(t *testing.T) {
	v := 1
	m := sigMaterial{agentID: "ff00", auditHead: "dead", signedAt: "2026-06-24T10:00:00.000Z", nonce: "n1", verifierID: "v", version: &v}
	want := `"adp-agent-id": ff00` + "\n" + `"adp-audit-head": dead` + "\n" + `"adp-disclosure-version": 1` + "\n" +
		`"@signature-params": ("adp-agent-id" "adp-audit-head" "adp-disclosure-version");created="2026-06-24T10:00:00.000Z";keyid="ff00";alg="ed25519";nonce="n1";tag="v"`
	if got := string(m.signatureBase()); got != want {
		t.Errorf("base\n%s\nwant\n%s", got, want)
	}
	m.version, m.verifierID = nil, ""
	if got, want := m.signatureInput(), `sig=("adp-agent-id" "adp-audit-head");created="2026-06-24T10:00:00.000Z";keyid="ff00";alg="ed25519";nonce="n1"`; got != want {
		t.Errorf("input %s, want %s", got, want)
	}
}

func TestHandshake(t *testing.T) {
	key := adpKey(30)
	agent := DIDKey(adpPub(key))
	anchor := strings.Repeat("ab", 32)
	now := adpNow
	ch, err := NewChallenge(bytes.NewReader(bytes.Repeat([]byte{7}, 16)), now, "verifier-X", []int{1})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Nonce != strings.Repeat("07", 16) || ch.IssuedAt != Timestamp(now) {
		t.Fatalf("challenge %+v", ch)
	}
	v1, v2 := 1, 2
	ok := func(version *int) ChallengeResponse {
		r, err := Respond(ch, key, agent, anchor, now.Add(time.Second), version)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := HandshakePolicy{ExpectedAgentID: agent, DisclosureAnchor: anchor, Now: now.Add(2 * time.Second), SupportedVersions: []int{1}}
	keys, chain := adpChain(t, 2)
	rotated, err := Respond(ch, keys[2], adpHex(keys[0]), anchor, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldKeyAnswer, _ := Respond(ch, keys[0], adpHex(keys[0]), anchor, now, nil)
	currentKeyAnswer, _ := Respond(ch, keys[2], "", anchor, now, nil) // SPEC §7.2: the responder's own key
	strangerAnswer, _ := Respond(ch, adpKey(31), "", anchor, now, nil)

	edit := func(r ChallengeResponse, f func(*ChallengeResponse)) ChallengeResponse { f(&r); return r }
	for _, c := range []struct {
		name   string
		resp   ChallengeResponse
		ch     Challenge
		hp     HandshakePolicy
		failed []string
		regr   bool
	}{
		{"valid", ok(nil), ch, base, nil, false},
		{"valid with version", ok(&v1), ch, base, nil, false},
		{"expected as hex", ok(nil), ch, func() HandshakePolicy { p := base; p.ExpectedAgentID = adpHex(key); return p }(), nil, false},
		{"unsupported version", ok(&v2), ch, base, []string{HandshakeCheckVersion}, false},
		{"empty supported set", ok(&v1), ch, func() HandshakePolicy { p := base; p.SupportedVersions = []int{}; return p }(),
			[]string{HandshakeCheckVersion}, false},
		// SPEC §7.5: the versions the challenge advertised bind the
		// verifier even when its policy names none.
		{"advertised versions apply", ok(&v2), ch, func() HandshakePolicy { p := base; p.SupportedVersions = nil; return p }(),
			[]string{HandshakeCheckVersion}, false},
		{"no version negotiation", ok(&v2), func() Challenge { c := ch; c.SupportedVersions = nil; return c }(),
			func() HandshakePolicy { p := base; p.SupportedVersions = nil; return p }(), nil, false},
		{"nonce mismatch", ok(nil), Challenge{Nonce: "other", VerifierID: "verifier-X"}, base,
			[]string{HandshakeCheckNonce, HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"verifier id swapped", ok(nil), Challenge{Nonce: ch.Nonce, VerifierID: "verifier-Y"}, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"verifier id dropped", ok(nil), Challenge{Nonce: ch.Nonce}, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"wrong agent", ok(nil), ch, func() HandshakePolicy { p := base; p.ExpectedAgentID = adpHex(adpKey(31)); return p }(),
			[]string{HandshakeCheckAgentID}, false},
		{"no expected agent", ok(nil), ch, func() HandshakePolicy { p := base; p.ExpectedAgentID = ""; return p }(),
			[]string{HandshakeCheckAgentID}, false},
		// The Signature-Input names the covered components, not their
		// values, so a tampered value is caught by the signature alone.
		{"audit head tampered", edit(ok(nil), func(r *ChallengeResponse) { r.AuditHead = "cafe" }), ch, base,
			[]string{HandshakeCheckSignature}, false},
		{"keyid tampered", edit(ok(nil), func(r *ChallengeResponse) {
			r.SignatureInput = strings.Replace(r.SignatureInput, "keyid=", "keyid=x", 1)
		}), ch, base, []string{HandshakeCheckSignatureInput}, false},
		{"version smuggled in", edit(ok(nil), func(r *ChallengeResponse) { r.DisclosureVersion = &v1 }), ch, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"version downgraded away", edit(ok(&v1), func(r *ChallengeResponse) { r.DisclosureVersion = nil }), ch, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"signature flipped", edit(ok(nil), func(r *ChallengeResponse) { r.Signature = "00" + r.Signature[2:] }), ch, base,
			[]string{HandshakeCheckSignature}, false},
		{"signature not hex", edit(ok(nil), func(r *ChallengeResponse) { r.Signature = "zz" }), ch, base,
			[]string{HandshakeCheckSignature}, false},
		{"newline smuggled", edit(ok(nil), func(r *ChallengeResponse) { r.AuditHead = "ab\n\"adp-disclosure-version\": 1" }), ch, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature}, false},
		{"stale", ok(nil), ch, func() HandshakePolicy { p := base; p.Now = now.Add(62 * time.Second); return p }(),
			[]string{HandshakeCheckFreshness}, false},
		{"within custom max age", ok(nil), ch, func() HandshakePolicy {
			p := base
			p.Now, p.MaxAge = now.Add(10*time.Minute), 11*time.Minute
			return p
		}(), nil, false},
		{"from the future", ok(nil), ch, func() HandshakePolicy { p := base; p.Now = now; return p }(),
			[]string{HandshakeCheckFreshness}, false},
		{"signedAt unparseable", edit(ok(nil), func(r *ChallengeResponse) { r.SignedAt = "later" }), ch, base,
			[]string{HandshakeCheckSignatureInput, HandshakeCheckSignature, HandshakeCheckFreshness}, false},
		{"newer head is fine", edit(ok(nil), func(r *ChallengeResponse) {}), ch, func() HandshakePolicy {
			p := base
			p.DisclosureAnchor = "0123"
			return p
		}(), nil, false},
		{"regression reported", ok(nil), ch, func() HandshakePolicy {
			p := base
			p.DisclosureAnchor, p.PriorHeads = "0123", []string{anchor}
			return p
		}(), nil, true},
		{"regression refused", ok(nil), ch, func() HandshakePolicy {
			p := base
			p.DisclosureAnchor, p.PriorHeads, p.RefuseRegression = "0123", []string{anchor}, true
			return p
		}(), []string{HandshakeCheckAuditHead}, true},
		{"rotated key answers for the identity", rotated, ch, HandshakePolicy{ExpectedAgentID: DIDKey(adpPub(keys[0])),
			Now: now, RotationChain: chain}, nil, false},
		{"rotated key without the chain", rotated, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now},
			[]string{HandshakeCheckSignature}, false},
		{"old key after rotation", oldKeyAnswer, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now,
			RotationChain: chain}, []string{HandshakeCheckSignature}, false},
		{"rotated key answers as itself", currentKeyAnswer, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]),
			Now: now, RotationChain: chain}, nil, false},
		{"rotated key as itself, did:key identity", currentKeyAnswer, ch, HandshakePolicy{ExpectedAgentID: DIDKey(adpPub(keys[0])),
			Now: now, RotationChain: chain}, nil, false},
		{"rotated key as itself without the chain", currentKeyAnswer, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now},
			[]string{HandshakeCheckAgentID}, false},
		{"rotated key as itself, broken chain", currentKeyAnswer, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now,
			RotationChain: chain[1:]}, []string{HandshakeCheckAgentID}, false},
		{"a stranger as itself", strangerAnswer, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now,
			RotationChain: chain}, []string{HandshakeCheckAgentID, HandshakeCheckSignature}, false},
		{"broken chain", rotated, ch, HandshakePolicy{ExpectedAgentID: adpHex(keys[0]), Now: now,
			RotationChain: chain[1:]}, []string{HandshakeCheckSignature}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := VerifyResponse(c.resp, c.ch, c.hp)
			if !slices.Equal(r.Failed, nonNilStrings(c.failed)) || r.OK != (len(c.failed) == 0) || r.Regression != c.regr {
				t.Errorf("ok=%v failed %v regression %v; want failed %v regression %v\n%+v", r.OK, r.Failed, r.Regression,
					c.failed, c.regr, r.Checks)
			}
			names := make([]string, len(r.Checks))
			for i, ch := range r.Checks {
				names[i] = ch.Name
			}
			order := []string{HandshakeCheckNonce, HandshakeCheckAgentID, HandshakeCheckSignatureInput, HandshakeCheckSignature,
				HandshakeCheckVersion, HandshakeCheckFreshness, HandshakeCheckAuditHead}
			if !slices.IsSortedFunc(names, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) }) {
				t.Errorf("checks out of SPEC order: %v", names)
			}
		})
	}
}

func TestHandshakeRefusesBadInput(t *testing.T) {
	key := adpKey(32)
	if _, err := NewChallenge(errReader{}, adpNow, "", nil); err == nil {
		t.Error("NewChallenge ignored a failing reader")
	}
	if _, err := NewChallenge(nil, adpNow, `a"b`, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("quote in verifierId: %v", err)
	}
	ch, err := NewChallenge(nil, adpNow, "", nil)
	if err != nil || len(ch.Nonce) != 32 {
		t.Fatalf("crypto/rand challenge %+v %v", ch, err)
	}
	if _, err := Respond(ch, key, "", "a\nb", adpNow, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("newline in auditHead: %v", err)
	}
	if _, err := Respond(Challenge{Nonce: `x"`}, key, "", "ab", adpNow, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("quote in nonce: %v", err)
	}
	if _, err := Respond(ch, key[:3], "", "ab", adpNow, nil); err == nil {
		t.Error("short key accepted")
	}
	r, err := Respond(ch, key, "", "ab", adpNow, nil)
	if err != nil || r.AgentID != hex.EncodeToString(key.Public().(ed25519.PublicKey)) {
		t.Errorf("default agentId %q, %v", r.AgentID, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }
