package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestTighten(t *testing.T) {
	strict := Policy{
		RequireEnforcedConstitution: true,
		RequiredHardConstraints:     []string{"no_self_payment"},
		MinRedTeamGrade:             "B",
		MaxRedTeamHardFails:         new(2),
		MinAttestationLevel:         "signed",
		AllowedModelDigests:         []string{"aa", "bb"},
		RequireProvenanceFor:        []string{"history"},
		MinOperatorReputation:       new(0.5),
	}
	for _, c := range []struct {
		name     string
		base     Policy
		req      Policy
		loosened []string // nil: no error
		check    func(t *testing.T, p Policy)
	}{
		{"empty request inherits", strict, Policy{}, nil, func(t *testing.T, p Policy) {
			if p.Hash() != strict.Hash() {
				t.Error("hash changed")
			}
		}},
		{"signature on", Policy{RequireValidSignature: new(false)}, Policy{RequireValidSignature: new(true)}, nil, func(t *testing.T, p Policy) {
			if !p.requireSignature() {
				t.Error("signature still off")
			}
		}},
		{"signature off refused", Policy{}, Policy{RequireValidSignature: new(false)}, []string{"requireValidSignature"}, nil},
		{"signature off when base off", Policy{RequireValidSignature: new(false)}, Policy{RequireValidSignature: new(false)}, nil, nil},
		{"fresh off refused", Policy{}, Policy{RequireFresh: new(false)}, []string{"requireFresh"}, nil},
		{"fresh on", Policy{RequireFresh: new(false)}, Policy{RequireFresh: new(true)}, nil, func(t *testing.T, p Policy) {
			if !p.requireFresh() {
				t.Error("freshness still off")
			}
		}},
		{"booleans on", Policy{}, Policy{RequireEnforcedConstitution: true, RequireRedTeam: true, RequireNonCustodial: true,
			RequireDeploymentHistory: true, RequireAuditAnchor: true, RequireModelFingerprint: true}, nil, func(t *testing.T, p Policy) {
			if !(p.RequireEnforcedConstitution && p.RequireRedTeam && p.RequireNonCustodial && p.RequireDeploymentHistory &&
				p.RequireAuditAnchor && p.RequireModelFingerprint) {
				t.Errorf("%+v", p)
			}
		}},
		{"booleans stay on", Policy{RequireEnforcedConstitution: true, RequireRedTeam: true, RequireNonCustodial: true,
			RequireDeploymentHistory: true, RequireAuditAnchor: true, RequireModelFingerprint: true}, Policy{}, nil, func(t *testing.T, p Policy) {
			if !(p.RequireEnforcedConstitution && p.RequireRedTeam && p.RequireNonCustodial && p.RequireDeploymentHistory &&
				p.RequireAuditAnchor && p.RequireModelFingerprint) {
				t.Errorf("%+v", p)
			}
		}},
		{"constraints union", strict, Policy{RequiredHardConstraints: []string{"cap_1", "no_self_payment"}}, nil, func(t *testing.T, p Policy) {
			if !slices.Equal(p.RequiredHardConstraints, []string{"no_self_payment", "cap_1"}) {
				t.Errorf("%v", p.RequiredHardConstraints)
			}
		}},
		{"provenance union", strict, Policy{RequireProvenanceFor: []string{"constitution"}}, nil, func(t *testing.T, p Policy) {
			if !slices.Equal(p.RequireProvenanceFor, []string{"history", "constitution"}) {
				t.Errorf("%v", p.RequireProvenanceFor)
			}
		}},
		{"grade raised", strict, Policy{MinRedTeamGrade: "A"}, nil, func(t *testing.T, p Policy) {
			if p.MinRedTeamGrade != "A" {
				t.Error(p.MinRedTeamGrade)
			}
		}},
		{"grade same", strict, Policy{MinRedTeamGrade: "B"}, nil, nil},
		{"grade lowered", strict, Policy{MinRedTeamGrade: "C"}, []string{"minRedTeamGrade"}, nil},
		{"grade set on empty base", Policy{}, Policy{MinRedTeamGrade: "F"}, nil, func(t *testing.T, p Policy) {
			if p.MinRedTeamGrade != "F" {
				t.Error(p.MinRedTeamGrade)
			}
		}},
		{"hard fails lowered", strict, Policy{MaxRedTeamHardFails: new(0)}, nil, func(t *testing.T, p Policy) {
			if p.maxHardFails() != 0 {
				t.Error(p.maxHardFails())
			}
		}},
		{"hard fails raised", strict, Policy{MaxRedTeamHardFails: new(3)}, []string{"maxRedTeamHardFails"}, nil},
		{"hard fails raised over the default 0", Policy{}, Policy{MaxRedTeamHardFails: new(1)}, []string{"maxRedTeamHardFails"}, nil},
		{"level raised", strict, Policy{MinAttestationLevel: "registry_attested"}, nil, func(t *testing.T, p Policy) {
			if p.MinAttestationLevel != "registry_attested" {
				t.Error(p.MinAttestationLevel)
			}
		}},
		{"level lowered", strict, Policy{MinAttestationLevel: "none"}, []string{"minAttestationLevel"}, nil},
		{"reputation raised", strict, Policy{MinOperatorReputation: new(0.9)}, nil, func(t *testing.T, p Policy) {
			if *p.MinOperatorReputation != 0.9 {
				t.Error(*p.MinOperatorReputation)
			}
		}},
		{"reputation lowered", strict, Policy{MinOperatorReputation: new(0.1)}, []string{"minOperatorReputation"}, nil},
		{"digests narrowed", strict, Policy{AllowedModelDigests: []string{"bb"}}, nil, func(t *testing.T, p Policy) {
			if !slices.Equal(p.AllowedModelDigests, []string{"bb"}) {
				t.Error(p.AllowedModelDigests)
			}
		}},
		{"digests widened", strict, Policy{AllowedModelDigests: []string{"bb", "cc"}}, []string{"allowedModelDigests"}, nil},
		{"digests set on open base", Policy{}, Policy{AllowedModelDigests: []string{"cc"}}, nil, func(t *testing.T, p Policy) {
			if !slices.Equal(p.AllowedModelDigests, []string{"cc"}) {
				t.Error(p.AllowedModelDigests)
			}
		}},
		{"several loosened", strict, Policy{RequireFresh: new(false), MinRedTeamGrade: "F", MaxRedTeamHardFails: new(9)},
			[]string{"requireFresh", "minRedTeamGrade", "maxRedTeamHardFails"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Tighten(c.base, c.req)
			if c.loosened != nil {
				var le *LoosenedError
				if !errors.Is(err, ErrPolicyLoosened) || !errors.As(err, &le) || !slices.Equal(le.Fields, c.loosened) {
					t.Fatalf("err = %v, want loosened %v", err, c.loosened)
				}
				for _, f := range c.loosened {
					if !strings.Contains(err.Error(), f) {
						t.Errorf("error %q does not name %s", err, f)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.check != nil {
				c.check(t, p)
			}
			// Tightening again with the same request changes nothing, and
			// the result never asks for less than the base.
			again, err := Tighten(p, c.req)
			if err != nil || again.Hash() != p.Hash() {
				t.Errorf("not idempotent: %v", err)
			}
			if _, err := Tighten(p, c.base); err != nil && !errors.Is(err, ErrPolicyLoosened) {
				t.Errorf("re-applying base: %v", err)
			}
		})
	}
}

func TestTightenOraclesAndInvalid(t *testing.T) {
	baseRevoked := func(id string) bool { return id == "a" }
	reqRevoked := func(id string) bool { return id == "b" }
	p, err := Tighten(Policy{IsRevoked: baseRevoked}, Policy{IsRevoked: reqRevoked})
	if err != nil || !p.IsRevoked("a") || !p.IsRevoked("b") || p.IsRevoked("c") {
		t.Errorf("revocation oracles not combined: %v", err)
	}
	rep := func(string) (float64, bool) { return 1, true }
	p, _ = Tighten(Policy{}, Policy{OperatorReputation: rep})
	if p.OperatorReputation == nil {
		t.Error("request oracle dropped when base has none")
	}
	for _, bad := range []Policy{{MinRedTeamGrade: "E"}, {MinAttestationLevel: "gold"}, {MaxRedTeamHardFails: new(-1)},
		{MinOperatorReputation: new(math.NaN())}} {
		if _, err := Tighten(Policy{}, bad); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("Tighten(req %+v) = %v, want ErrInvalidPolicy", bad, err)
		}
		if _, err := Tighten(bad, Policy{}); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("Tighten(base %+v) = %v, want ErrInvalidPolicy", bad, err)
		}
	}
}

func TestPolicyHash(t *testing.T) {
	empty := Policy{}.Hash()
	same := []Policy{
		{RequireValidSignature: new(true), RequireFresh: new(true)},
		{MaxRedTeamHardFails: new(0)},
		{RequiredHardConstraints: []string{}, AllowedModelDigests: []string{}},
		{Now: adpNow, IsRevoked: func(string) bool { return true }},
	}
	for _, p := range same {
		if p.Hash() != empty {
			t.Errorf("%+v hashes differently from the empty policy", p)
		}
	}
	a := Policy{RequiredHardConstraints: []string{"x", "y", "x"}, AllowedModelDigests: []string{"b", "a"}}
	b := Policy{RequiredHardConstraints: []string{"y", "x"}, AllowedModelDigests: []string{"a", "b"}}
	if a.Hash() != b.Hash() {
		t.Error("list order or duplicates change the hash")
	}
	distinct := map[string]Policy{}
	for _, p := range []Policy{{}, {RequireValidSignature: new(false)}, {RequireFresh: new(false)}, {RequireEnforcedConstitution: true},
		{RequiredHardConstraints: []string{"x"}}, {RequireRedTeam: true}, {MinRedTeamGrade: "A"}, {MaxRedTeamHardFails: new(1)},
		{RequireNonCustodial: true}, {MinAttestationLevel: "none"}, {RequireDeploymentHistory: true}, {RequireAuditAnchor: true},
		{RequireModelFingerprint: true}, {AllowedModelDigests: []string{"x"}}, {RequireProvenanceFor: []string{"x"}},
		{MinOperatorReputation: new(0.0)}, {MinOperatorReputation: new(math.Inf(1))}} {
		h := p.Hash()
		if prev, dup := distinct[h]; dup {
			t.Errorf("%+v and %+v hash alike", p, prev)
		}
		distinct[h] = p
	}
	// The hashed bytes are the canonical JSON of the explicit policy.
	var explicit = map[string]any{
		"allowedModelDigests": []string{}, "maxRedTeamHardFails": 0, "minAttestationLevel": "", "minOperatorReputation": nil,
		"minRedTeamGrade": "", "requireAuditAnchor": false, "requireDeploymentHistory": false, "requireEnforcedConstitution": false,
		"requireFresh": true, "requireModelFingerprint": false, "requireNonCustodial": false, "requireProvenanceFor": []string{},
		"requireRedTeam": false, "requireValidSignature": true, "requiredHardConstraints": []string{},
	}
	canon, err := Canonicalize(explicit)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canon)
	if got := hex.EncodeToString(sum[:]); got != empty {
		t.Errorf("empty policy hash %s, want sha256 of %s = %s", empty, canon, got)
	}
}

func TestParsePolicy(t *testing.T) {
	full := `{"requireValidSignature":true,"requireFresh":false,"requireEnforcedConstitution":true,"requiredHardConstraints":["a"],
	"requireRedTeam":true,"minRedTeamGrade":"B","maxRedTeamHardFails":1,"requireNonCustodial":true,"minAttestationLevel":"signed",
	"requireDeploymentHistory":true,"requireAuditAnchor":true,"requireModelFingerprint":true,"allowedModelDigests":["d"],
	"requireProvenanceFor":["history"],"minOperatorReputation":0.25}`
	p, err := ParsePolicy([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{RequireValidSignature: new(true), RequireFresh: new(false), RequireEnforcedConstitution: true,
		RequiredHardConstraints: []string{"a"}, RequireRedTeam: true, MinRedTeamGrade: "B", MaxRedTeamHardFails: new(1),
		RequireNonCustodial: true, MinAttestationLevel: "signed", RequireDeploymentHistory: true, RequireAuditAnchor: true,
		RequireModelFingerprint: true, AllowedModelDigests: []string{"d"}, RequireProvenanceFor: []string{"history"},
		MinOperatorReputation: new(0.25)}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("parsed %+v\nwant %+v", p, want)
	}
	// Marshal and parse again: same policy.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParsePolicy(b)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Errorf("round trip %+v, %v", back, err)
	}
	if p, err := ParsePolicy([]byte(`{}`)); err != nil || p.Hash() != (Policy{}).Hash() {
		t.Errorf("empty policy: %v", err)
	}
	for _, bad := range []string{
		``, `[]`, `null`, `{"now":"2026-06-24T12:30:00.000Z"}`, `{"RequireFresh":true}`, `{"requireFresh":null}`,
		`{"requireFresh":"true"}`, `{"minRedTeamGrade":"E"}`, `{"minRedTeamGrade":"a"}`, `{"minAttestationLevel":"verified"}`,
		`{"maxRedTeamHardFails":-1}`, `{"maxRedTeamHardFails":1.5}`, `{"maxRedTeamHardFails":3000000000}`,
		`{"minOperatorReputation":1e999}`, `{"requiredHardConstraints":"a"}`, `{"requiredHardConstraints":[1]}`,
		`{"requireFresh":true,"requireFresh":false}`, `{"extra":1}`, `{"requireFresh":true} {}`,
	} {
		if _, err := ParsePolicy([]byte(bad)); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("ParsePolicy(%s) = %v, want ErrInvalidPolicy", bad, err)
		}
	}
}
