package memory

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// TestCanonicalMatchesJCS holds the direct canonical writer equal to the
// general canonicaliser (what Verify uses) for every artifact shape it
// writes, with awkward bodies and names: HTML characters, U+2028,
// escapes, numbers JCS rewrites, taint, open and closed times.
func TestCanonicalMatchesJCS(t *testing.T) {
	f := newFixture(t, nil)
	tok := f.mandate("n<s>", func(c *MandateClaims) { c.ID = "mm-canon" })
	bodies := []string{`"a<b>&c"`, `"line\u2028sep"`, `{"z":1,"a":[1.0,2e3,-0.5],"q":"\"quoted\"\n"}`,
		`[12345678901234567000,1E2,0.10]`, `{"é":"ü","a":null,"b":true}`, `[]`}
	var last Record
	for i, body := range bodies {
		to := t0.Add(time.Duration(i+1) * time.Hour)
		x := fact{subject: "s<&>" + string(rune('a'+i)), kind: "k\u00e9", from: t0.Add(-time.Hour), source: Source{Kind: "url", Ref: "https://x.example/?a=1&b=<2>"}}
		if i%2 == 0 {
			x.to = &to
		}
		if i > 0 {
			x.edges = []Edge{{EdgeCites, last.ID}}
		}
		r, err := f.svc.Remember(t.Context(), f.caller, RememberRequest{Mandate: tok, IdempotencyKey: "canon-" + string(rune('a'+i)),
			Namespace: "n<s>", Subject: x.subject, Kind: x.kind, Body: json.RawMessage(body), ValidFrom: x.from, ValidTo: x.to,
			Source: x.source, Edges: x.edges}, "req_1")
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		last = r.Artifact.Record
		check(t, &r.Artifact)
		// The content digest, written directly, is the general
		// canonicaliser's digest of the documented content.
		want, err := canonicalDigest(last.content())
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := contentDigest(&last); got != hexDigest(want) || last.Seal.ContentDigest != got {
			t.Fatalf("content digest of %s: direct %s, sealed %s, JCS %s", body, got, last.Seal.ContentDigest, hexDigest(want))
		}
	}
	if _, err := f.svc.Taint(t.Context(), TaintRequest{Source: &Source{Kind: "url", Ref: "https://x.example/?a=1&b=<2>"}, Rationale: "found to be wrong"}, f.op()); err != nil {
		t.Fatal(err)
	}
	for _, q := range []RecallRequest{{Limit: 2}, {Subject: "s<&>a"}, {Kind: "k\u00e9", Limit: 3}} {
		q.Mandate = tok
		p, err := f.recall("n<s>", q)
		if err != nil {
			t.Fatal(err)
		}
		check(t, &p)
		if p.NextCursor != nil {
			q.Cursor = *p.NextCursor
			p, err = f.recall("n<s>", q)
			if err != nil {
				t.Fatal(err)
			}
			check(t, &p)
		}
	}
	no := false
	for _, q := range []AssembleRequest{{Budget: Budget{MaxTokens: 40}, Query: "line sep é"}, {Budget: Budget{MaxTokens: 5000}, ExcludeTainted: &no}, {Budget: Budget{MaxTokens: 1}}} {
		q.Mandate, q.Namespace = tok, "n<s>"
		c, err := f.svc.Assemble(t.Context(), f.caller, q)
		if err != nil {
			t.Fatal(err)
		}
		check(t, &c)
	}
}

func check(t *testing.T, v any) {
	t.Helper()
	fast, ok, err := canonicalArtifact(v)
	if err != nil || !ok {
		t.Fatalf("no direct canonical form: %v", err)
	}
	// What a verifier computes: the artifact as sent, without its signature.
	raw, _ := json.Marshal(v)
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	delete(m, "signature")
	raw, _ = json.Marshal(m)
	want, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fast, want) {
		i := 0
		for i < len(fast) && i < len(want) && fast[i] == want[i] {
			i++
		}
		t.Fatalf("direct canonical form differs at byte %d:\n got %s\nwant %s", i, fast[max(0, i-60):min(len(fast), i+60)], want[max(0, i-60):min(len(want), i+60)])
	}
}
