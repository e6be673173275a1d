package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// adpSigned signs a sample disclosure after edit, as v1.
func adpSigned(t *testing.T, key ed25519.PrivateKey, edit func(*Disclosure)) []byte {
	t.Helper()
	d := adpSample(adpHex(key))
	if edit != nil {
		edit(d)
	}
	env, err := SignV1(d, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestVerifyPredicates(t *testing.T) {
	key := adpKey(20)
	revoked := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	reputation := func(score float64, known bool) func(string) (float64, bool) {
		return func(string) (float64, bool) { return score, known }
	}
	for _, c := range []struct {
		name   string
		edit   func(*Disclosure)
		policy Policy
		failed []string
		passed []string // checks that must be present and pass
	}{
		{"baseline", nil, Policy{}, nil, []string{CheckSignature, CheckFreshness, CheckRedTeamHardFails}},
		{"baseline without red team", func(d *Disclosure) { d.RedTeam = nil }, Policy{}, nil, []string{CheckSignature, CheckFreshness}},
		{"checks off", nil, Policy{RequireValidSignature: new(false), RequireFresh: new(false)}, nil, nil},
		{"enforced", nil, Policy{RequireEnforcedConstitution: true}, nil, []string{CheckEnforcedConstitution}},
		{"unenforced", func(d *Disclosure) { d.Constitution.Enforced = false }, Policy{RequireEnforcedConstitution: true},
			[]string{CheckEnforcedConstitution}, nil},
		{"constraints present", nil, Policy{RequiredHardConstraints: []string{"no_self_payment"}}, nil, []string{CheckRequiredHardConstraints}},
		{"constraint missing", nil, Policy{RequiredHardConstraints: []string{"no_self_payment", "cap"}}, []string{CheckRequiredHardConstraints}, nil},
		{"red team required, present", nil, Policy{RequireRedTeam: true}, nil, []string{CheckRedTeamPresent}},
		{"red team required, absent", func(d *Disclosure) { d.RedTeam = nil }, Policy{RequireRedTeam: true, MinRedTeamGrade: "A"},
			[]string{CheckRedTeamPresent}, nil},
		{"grade not judged without red team", func(d *Disclosure) { d.RedTeam = nil }, Policy{MinRedTeamGrade: "A"}, nil, nil},
		{"grade enough", nil, Policy{MinRedTeamGrade: "A"}, nil, []string{CheckRedTeamGrade}},
		{"grade low", func(d *Disclosure) { d.RedTeam.Result.Grade = "C" }, Policy{MinRedTeamGrade: "B"}, []string{CheckRedTeamGrade}, nil},
		{"grade F meets F", func(d *Disclosure) { d.RedTeam.Result.Grade = "F" }, Policy{MinRedTeamGrade: "F"}, nil, []string{CheckRedTeamGrade}},
		{"invalid policy grade fails closed", nil, Policy{MinRedTeamGrade: "Z"}, []string{CheckRedTeamGrade}, nil},
		{"hard fails over the default 0", func(d *Disclosure) { d.RedTeam.Result.HardFails = []string{"x"} }, Policy{},
			[]string{CheckRedTeamHardFails}, nil},
		{"hard fails within max", func(d *Disclosure) { d.RedTeam.Result.HardFails = []string{"x", "y"} }, Policy{MaxRedTeamHardFails: new(2)},
			nil, []string{CheckRedTeamHardFails}},
		{"custodial", func(d *Disclosure) { d.Capital.Custody = "custodial" }, Policy{RequireNonCustodial: true}, []string{CheckNonCustodial}, nil},
		{"attestation enough", nil, Policy{MinAttestationLevel: "signed"}, nil, []string{CheckAttestationLevel}},
		{"attestation low", nil, Policy{MinAttestationLevel: "registry_attested"}, []string{CheckAttestationLevel}, nil},
		{"no history", func(d *Disclosure) { d.History.Summary.TotalDecisions = 0 }, Policy{RequireDeploymentHistory: true},
			[]string{CheckDeploymentHistory}, nil},
		{"no anchor", func(d *Disclosure) { d.AuditAnchor = "" }, Policy{RequireAuditAnchor: true}, []string{CheckAuditAnchor}, nil},
		{"no model", func(d *Disclosure) { d.Model = nil }, Policy{RequireModelFingerprint: true, AllowedModelDigests: []string{"01"}},
			[]string{CheckModelFingerprint, CheckModelDigest}, nil},
		{"model allowed", nil, Policy{AllowedModelDigests: []string{"00", strings.Repeat("01", 32)}}, nil, []string{CheckModelDigest}},
		{"model not allowed", nil, Policy{AllowedModelDigests: []string{strings.Repeat("01", 31)}}, []string{CheckModelDigest}, nil},
		{"provenance present", nil, Policy{RequireProvenanceFor: []string{"constitution"}}, nil, []string{CheckProvenance}},
		{"provenance missing", nil, Policy{RequireProvenanceFor: []string{"constitution", "history"}}, []string{CheckProvenance}, nil},
		{"not revoked", nil, Policy{IsRevoked: revoked("other")}, nil, []string{CheckRevocation}},
		{"disclosure revoked", nil, Policy{IsRevoked: revoked("disc_test")}, []string{CheckRevocation}, nil},
		{"agent revoked by hex", nil, Policy{IsRevoked: revoked(adpHex(key))}, []string{CheckRevocation}, nil},
		{"agent revoked by did:key", nil, Policy{IsRevoked: revoked(DIDKey(adpPub(key)))}, []string{CheckRevocation}, nil},
		{"reputation enough", nil, Policy{OperatorReputation: reputation(0.8, true), MinOperatorReputation: new(0.8)}, nil,
			[]string{CheckOperatorReputation}},
		{"reputation low", nil, Policy{OperatorReputation: reputation(0.79, true), MinOperatorReputation: new(0.8)},
			[]string{CheckOperatorReputation}, nil},
		{"reputation unknown", nil, Policy{OperatorReputation: reputation(1, false), MinOperatorReputation: new(0.0)},
			[]string{CheckOperatorReputation}, nil},
		{"reputation needs both", nil, Policy{MinOperatorReputation: new(0.9)}, nil, nil},
		{"every failure reported", func(d *Disclosure) {
			d.Constitution.Enforced = false
			d.Capital.Custody = "custodial"
			d.History.Summary.TotalDecisions = 0
			d.ValidUntil = "2026-06-24T12:00:00.000Z"
		}, Policy{RequireEnforcedConstitution: true, RequireNonCustodial: true, RequireDeploymentHistory: true},
			[]string{CheckFreshness, CheckEnforcedConstitution, CheckNonCustodial, CheckDeploymentHistory}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.policy
			p.Now = adpNow
			d := Verify(adpSigned(t, key, c.edit), p)
			if !slices.Equal(d.Failed, nonNilStrings(c.failed)) {
				t.Errorf("failed %v, want %v (%+v)", d.Failed, c.failed, d.Checks)
			}
			if want := OutcomeTransact; len(c.failed) > 0 {
				if d.Outcome != OutcomeRefuse {
					t.Errorf("outcome %s", d.Outcome)
				}
			} else if d.Outcome != want {
				t.Errorf("outcome %s", d.Outcome)
			}
			for _, name := range c.passed {
				i := slices.IndexFunc(d.Checks, func(ch Check) bool { return ch.Name == name })
				if i < 0 || !d.Checks[i].OK || d.Checks[i].Reason != "" {
					t.Errorf("check %s not passed: %+v", name, d.Checks)
				}
			}
			for _, ch := range d.Checks {
				if !ch.OK && ch.Reason == "" {
					t.Errorf("failed check %s has no reason", ch.Name)
				}
			}
			if d.PolicyHash != p.Hash() {
				t.Error("policy hash not reported")
			}
		})
	}
}

func TestVerifyRevocationOfSigningKey(t *testing.T) {
	keys, chain := adpChain(t, 1)
	d := adpSample(adpHex(keys[0]))
	env, err := SignV1(d, keys[1], chain)
	if err != nil {
		t.Fatal(err)
	}
	dec := Verify(env, Policy{Now: adpNow, IsRevoked: func(id string) bool { return id == DIDKey(adpPub(keys[1])) }})
	if !slices.Equal(dec.Failed, []string{CheckRevocation}) {
		t.Errorf("revoked signing key: failed %v", dec.Failed)
	}
}

func TestVerifyFreshness(t *testing.T) {
	key := adpKey(21)
	issued := time.Date(2026, 6, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name        string
		issuedAt    string
		validUntil  string
		now         time.Time
		fresh       bool
		reasonMatch string
	}{
		{"inside", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued.Add(time.Minute), true, ""},
		{"at issuedAt", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued, true, ""},
		{"at validUntil", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued.Add(time.Hour), true, ""},
		{"just expired", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued.Add(time.Hour + time.Millisecond), false, "not fresh"},
		{"not yet valid", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued.Add(-time.Nanosecond), false, "not yet valid"},
		// Lexically "13:00:00Z" > "13:00:00.500Z", so a string comparison
		// would call this fresh; as instants it expired half a second ago.
		{"mixed precision", "2026-06-24T12:00:00Z", "2026-06-24T13:00:00Z", issued.Add(time.Hour + 500*time.Millisecond), false, "not fresh"},
		{"no fraction", "2026-06-24T12:00:00Z", "2026-06-24T13:00:00Z", issued, true, ""},
		{"offset refused", "2026-06-24T14:00:00+02:00", "2026-06-24T13:00:00.000Z", issued.Add(time.Minute), false, "issuedAt"},
		{"lowercase z refused", "2026-06-24T12:00:00.000Z", "2026-06-24T13:00:00.000z", issued.Add(time.Minute), false, "validUntil"},
		{"unpadded refused", "2026-6-24T12:00:00.000Z", "2026-06-24T13:00:00.000Z", issued.Add(time.Minute), false, "issuedAt"},
		{"not a time", "yesterday", "tomorrow", issued, false, "issuedAt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := adpSigned(t, key, func(d *Disclosure) { d.IssuedAt, d.ValidUntil = c.issuedAt, c.validUntil })
			d := Verify(env, Policy{Now: c.now})
			i := slices.IndexFunc(d.Checks, func(ch Check) bool { return ch.Name == CheckFreshness })
			if i < 0 || d.Checks[i].OK != c.fresh || !strings.Contains(d.Checks[i].Reason, c.reasonMatch) {
				t.Errorf("freshness %+v, want ok=%v reason ~%q", d.Checks, c.fresh, c.reasonMatch)
			}
		})
	}
	// A zero Now is the wall clock: the sample is years away from it.
	if d := Verify(adpSigned(t, key, func(d *Disclosure) { d.ValidUntil = "2000-01-01T00:00:00.000Z" }), Policy{}); d.Outcome != OutcomeRefuse {
		t.Error("zero Now did not use the wall clock")
	}
}

func TestVerifyForgedAgentID(t *testing.T) {
	key, other := adpKey(22), adpKey(23)
	// Signed honestly by key, claiming other's identity: the signature is
	// fine, the binding is not.
	d := adpSample(adpHex(other))
	canon, _ := Canonicalize(d)
	sig := ed25519.Sign(key, canon)
	env, _ := json.Marshal(SignedDisclosure{Disclosure: canon, Signature: Signature{Algorithm: "ed25519",
		PublicKey: adpHex(key), Value: hex.EncodeToString(sig)}})
	dec := Verify(env, Policy{Now: adpNow})
	if !slices.Equal(dec.Failed, []string{CheckSignature}) || !strings.Contains(dec.Checks[0].Reason, "agentId") {
		t.Errorf("%+v", dec.Checks)
	}
}

func TestDecisionJSON(t *testing.T) {
	d := Verify(adpSigned(t, adpKey(24), nil), Policy{Now: adpNow})
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"outcome", "checks", "failed", "policyHash", "envelope", "agentId", "disclosureId", "digest", "disclosure"} {
		if _, ok := m[k]; !ok {
			t.Errorf("decision JSON lacks %q: %s", k, b)
		}
	}
	if string(m["failed"]) != "[]" || string(m["outcome"]) != `"transact"` {
		t.Errorf("failed %s outcome %s", m["failed"], m["outcome"])
	}
	bad := Verify([]byte("{"), Policy{})
	b, _ = json.Marshal(bad)
	if !strings.Contains(string(b), `"failed":["schema"]`) || strings.Contains(string(b), `"disclosure":`) {
		t.Errorf("malformed decision JSON: %s", b)
	}
}

func TestVerifyDoesNotAliasInput(t *testing.T) {
	env := adpSigned(t, adpKey(25), nil)
	d := Verify(env, Policy{Now: adpNow})
	want := d.Disclosure.Nonce
	for i := range env {
		env[i] = 'x'
	}
	if d.Disclosure.Nonce != want {
		t.Error("the decision's disclosure aliases the input buffer")
	}
}
