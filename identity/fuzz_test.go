package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"
)

// The seed corpora in testdata/fuzz/<Fuzz…>/ are built from the ADP
// conformance data: every negative.json input, every interop envelope and
// redaction view, the vectors and all of fuzz.json.

// fuzzPolicy turns most predicates on, so that fuzzed documents reach them.
func fuzzPolicy() Policy {
	return Policy{
		Now:                         time.Date(2026, 6, 24, 12, 30, 0, 0, time.UTC),
		RequireEnforcedConstitution: true,
		RequiredHardConstraints:     []string{"no_self_payment"},
		MinRedTeamGrade:             "B",
		MinAttestationLevel:         "none",
		RequireAuditAnchor:          true,
		RequireProvenanceFor:        []string{"constitution"},
		AllowedModelDigests:         []string{"aa"},
		IsRevoked:                   func(id string) bool { return id == "revoked" },
		OperatorReputation:          func(string) (float64, bool) { return 0.5, true },
		MinOperatorReputation:       new(0.25),
	}
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"disclosure":{},"signature":{}}`))
	f.Add([]byte(`{"payload":"e30","protected":"e30","header":{"jwk":{"kty":"OKP","crv":"Ed25519","x":"AA"}},"signature":""}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, p := range []Policy{{Now: fuzzPolicy().Now}, fuzzPolicy()} {
			d := Verify(raw, p)
			checkDecision(t, raw, d)
			if d.Outcome != OutcomeTransact {
				continue
			}
			again := Verify(raw, p)
			a, _ := json.Marshal(d)
			b, _ := json.Marshal(again)
			if !bytes.Equal(a, b) {
				t.Fatalf("re-verification differs:\n%s\n%s", a, b)
			}
		}
	})
}

// checkDecision asserts what holds of every decision.
func checkDecision(t *testing.T, raw []byte, d Decision) {
	t.Helper()
	if d.Outcome != OutcomeTransact && d.Outcome != OutcomeRefuse {
		t.Fatalf("outcome %q", d.Outcome)
	}
	var failed []string
	for _, c := range d.Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	if !slices.Equal(failed, d.Failed) || (d.Outcome == OutcomeTransact) != (len(failed) == 0) {
		t.Fatalf("failed %v, checks %+v, outcome %s", d.Failed, d.Checks, d.Outcome)
	}
	if slices.Contains(d.Failed, CheckSchema) {
		if len(d.Checks) != 1 || d.Disclosure != nil || d.Digest != "" {
			t.Fatalf("schema failure did not stop evaluation: %+v", d)
		}
		return
	}
	if d.Disclosure == nil {
		t.Fatalf("no disclosure and no schema failure: %+v", d)
	}
	// The parsed document canonicalizes to a document that re-parses to the
	// same value and is a fixed point. (Its digest equals d.Digest unless
	// the input set an optional string to "", which the Go model reads as
	// unset; see Disclosure.)
	canon, err := Canonicalize(d.Disclosure)
	if err != nil {
		t.Fatalf("Canonicalize(decision.Disclosure): %v", err)
	}
	d2, err := ParseDisclosure(canon)
	if err != nil {
		t.Fatalf("canonical document does not re-parse: %v\n%s", err, canon)
	}
	if !reflect.DeepEqual(d2, d.Disclosure) {
		t.Fatalf("re-parsed document differs:\n%+v\n%+v", d2, d.Disclosure)
	}
	again, err := Canonicalize(d2)
	if err != nil || !bytes.Equal(again, canon) {
		t.Fatalf("canonical form is not a fixed point: %s\n%s", again, canon)
	}
	if len(d.Digest) != 64 {
		t.Fatalf("digest %q", d.Digest)
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"😀":1,"\uFB33":2}`))
	f.Add([]byte(`[1e21,1e-7,-0,0.1]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := CanonicalJSON(raw)
		// The verifier's parser and writer agree with gowebpki/jcs on what
		// is acceptable and on the output (at jcs's own depth limit).
		v, perr := parseStrictJSON(string(raw), 10000)
		var tree []byte
		if perr == nil {
			tree, perr = appendCanonical(nil, &v)
		}
		if (err == nil) != (perr == nil) {
			t.Fatalf("jcs err %v, tree err %v for %q", err, perr, raw)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		if !bytes.Equal(out, tree) {
			t.Fatalf("jcs %s\ntree %s", out, tree)
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %s → %s, %v", out, again, err)
		}
		if !json.Valid(out) {
			t.Fatalf("canonical output is not JSON: %s", out)
		}
	})
}

func FuzzPolicy(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"requireFresh":false,"maxRedTeamHardFails":2,"allowedModelDigests":["a","a"],"minOperatorReputation":0.5}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := ParsePolicy(raw)
		if err != nil {
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Fatalf("error %v does not match ErrInvalidPolicy", err)
			}
			return
		}
		h := p.Hash()
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParsePolicy(b)
		if err != nil || back.Hash() != h {
			t.Fatalf("marshal round trip: %v, %s", err, b)
		}
		if !reflect.DeepEqual(back, p) {
			t.Fatalf("round trip %+v != %+v", back, p)
		}
		for _, c := range []struct {
			base, req Policy
		}{{p, p}, {p, Policy{}}} {
			got, err := Tighten(c.base, c.req)
			if err != nil || got.Hash() != h {
				t.Fatalf("Tighten(%+v, %+v) = %v, hash changed", c.base, c.req, err)
			}
		}
		got, err := Tighten(Policy{}, p)
		switch {
		case err != nil && !errors.Is(err, ErrPolicyLoosened):
			t.Fatalf("Tighten(empty, p): %v", err)
		case err == nil && got.Hash() != h:
			t.Fatalf("Tighten(empty, p) hash differs")
		}
	})
}
