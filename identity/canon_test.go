package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

func TestCompareUTF16(t *testing.T) {
	keys := []string{"😀", "\uFB33", "a", "A", "", "ab", "é", "\u00ff", "\uffff", "𝄞", "\U0010ffff", "aé", "a😀", "a\uffff", "z", "10", "2"}
	// The reference order: sort by UTF-16 code units.
	want := slices.Clone(keys)
	slices.SortFunc(want, func(a, b string) int {
		ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
		return slices.Compare(ua, ub)
	})
	got := slices.Clone(keys)
	slices.SortFunc(got, compareUTF16)
	if !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
	if compareUTF16("😀", "\uFB33") >= 0 {
		t.Error("the emoji must sort before U+FB33")
	}
	if compareUTF16("\xff", "\xfe") == 0 || compareUTF16("a\xff", "a\xff") != 0 {
		t.Error("invalid UTF-8 must still order totally")
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	for _, v := range []any{math.NaN(), math.Inf(1), map[string]any{"x": math.Inf(-1)}, make(chan int)} {
		if _, err := Canonicalize(v); err == nil {
			t.Errorf("Canonicalize(%v) succeeded", v)
		}
	}
	for _, raw := range []string{`{"a":1,"a":2}`, `{"a":1e400}`, `"\ud800"`, `[1,]`, ``, `{"a":1} x`, "\"\xff\""} {
		if _, err := CanonicalJSON([]byte(raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("CanonicalJSON(%q) = %v, want ErrMalformed", raw, err)
		}
	}
}

// TestCanonicalWriterMatchesJCS: the verifier's tree writer agrees with
// gowebpki/jcs on number forms and escapes the vectors do not reach.
func TestCanonicalWriterMatchesJCS(t *testing.T) {
	for _, in := range []string{
		`[0, -0, 1.0, 1e21, 1e-7, 123456789012345678, 0.1, 1.5e300, -2.5E-3, 9007199254740993, 100, 1e2, 5e-324]`,
		`["\u0000\u001f\u007f\u2028\u2029\ud83d\ude00\"\\\/\b\f\n\r\t", "é", "\u00e9"]`,
		`{"b":{"z":[{"y":1,"x":2}]},"a":[],"":null,"\u0000":true}`,
		`{"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k17":17,"😀":0,"\uFB33":0}`,
	} {
		want, err := CanonicalJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		v, err := parseStrictJSON(in, maxJSONDepth)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendCanonical(nil, &v)
		if err != nil || string(got) != string(want) {
			t.Errorf("tree writer %s, %v\njcs         %s", got, err, want)
		}
	}
}

func TestSpecWorkedExamples(t *testing.T) {
	// SPEC §4.2: undefined members (unset optional fields) are dropped,
	// null is kept.
	type handshakeLike struct {
		Nonce      string  `json:"nonce"`
		AgentID    string  `json:"agentId"`
		AuditHead  string  `json:"auditHead"`
		SignedAt   string  `json:"signedAt"`
		VerifierID *string `json:"verifierId,omitempty"`
	}
	got, err := Canonicalize(handshakeLike{Nonce: "ab12", AgentID: "ff00", AuditHead: "deadbeef", SignedAt: "2026-06-24T10:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"agentId":"ff00","auditHead":"deadbeef","nonce":"ab12","signedAt":"2026-06-24T10:00:00Z"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	got, _ = Canonicalize(map[string]any{"z": []int{3, 1, 2}, "a": map[string]any{"c": "x"}})
	if string(got) != `{"a":{"c":"x"},"z":[3,1,2]}` {
		t.Errorf("got %s", got)
	}
	got, _ = Canonicalize([]any{map[string]int{"b": 2, "a": 1}, nil})
	if string(got) != `[{"a":1,"b":2},null]` {
		t.Errorf("got %s", got)
	}
}

func TestConstitutionDigest(t *testing.T) {
	c := Constitution{
		HardConstraints: []HardConstraint{{ID: "no_self_payment", Description: "no paying your own operator", Kind: "deny"}},
		Enforced:        true,
	}
	// sha256Hex(JSON.stringify({hardConstraints, parameters: undefined, enforced}))
	pre := `{"hardConstraints":[{"id":"no_self_payment","description":"no paying your own operator","kind":"deny"}],"enforced":true}`
	sum := sha256.Sum256([]byte(pre))
	if got := ConstitutionDigest(c); got != hex.EncodeToString(sum[:]) {
		t.Errorf("digest %s, want sha256(%s)", got, pre)
	}
	c.Parameters = map[string]any{"b": "x", "a": 1.5, "10": true, "2": false, "😀": math.NaN()}
	c.EnforcementEvidence = "ignored"
	pre = `{"hardConstraints":[{"id":"no_self_payment","description":"no paying your own operator","kind":"deny"}],` +
		`"parameters":{"2":false,"10":true,"a":1.5,"b":"x","😀":null},"enforced":true}`
	sum = sha256.Sum256([]byte(pre))
	if got := ConstitutionDigest(c); got != hex.EncodeToString(sum[:]) {
		t.Errorf("digest with parameters %s, want sha256(%s)", got, pre)
	}
	c.Parameters = map[string]any{}
	if !strings.Contains(digestPreimageForTest(c), `"parameters":{}`) {
		t.Error("an empty parameters map must be written")
	}
}

// digestPreimageForTest recomputes what ConstitutionDigest hashes for the
// empty-map case by comparing against the two candidate preimages.
func digestPreimageForTest(c Constitution) string {
	with := `{"hardConstraints":[{"id":"no_self_payment","description":"no paying your own operator","kind":"deny"}],"parameters":{},"enforced":true}`
	sum := sha256.Sum256([]byte(with))
	if ConstitutionDigest(c) == hex.EncodeToString(sum[:]) {
		return with
	}
	return ""
}

func TestTimestamp(t *testing.T) {
	tm := time.Date(2026, 6, 24, 14, 30, 0, 123456789, time.FixedZone("x", 2*3600))
	if got := Timestamp(tm); got != "2026-06-24T12:30:00.123Z" {
		t.Errorf("Timestamp = %s", got)
	}
	parsed, ok := parseUTCTimestamp(Timestamp(tm))
	if !ok || !parsed.Equal(tm.Truncate(time.Millisecond)) {
		t.Errorf("round trip %v %v", parsed, ok)
	}
}

func TestParseUTCTimestamp(t *testing.T) {
	for s, ok := range map[string]bool{
		"2026-06-24T12:00:00Z": true, "2026-06-24T12:00:00.000Z": true, "2026-06-24T12:00:00.123456789Z": true,
		"2024-02-29T00:00:00Z": true, "2026-12-31T23:59:59.9Z": true,
		"2026-06-24T12:00:00.1234567891Z": false, "2026-06-24T12:00:00.Z": false, "2026-06-24T12:00:00.": false,
		"2026-06-24T12:00:00+00:00": false, "2026-06-24T12:00:00z": false, "2026-06-24t12:00:00Z": false,
		"2026-06-24 12:00:00Z": false, "2026-6-24T12:00:00Z": false, "2026-02-29T00:00:00Z": false,
		"2026-06-24T24:00:00Z": false, "2026-06-24T12:60:00Z": false, "2026-06-24T12:00:60Z": false,
		"2026-13-01T00:00:00Z": false, "2026-00-01T00:00:00Z": false, "2026-06-00T00:00:00Z": false,
		"": false, "2026-06-24": false, "2026-06-24T12:00:00.000Zjunk": false, "+2026-06-24T12:00:00Z": false,
	} {
		if _, got := parseUTCTimestamp(s); got != ok {
			t.Errorf("parseUTCTimestamp(%q) = %v, want %v", s, got, ok)
		}
	}
}

func TestDocumentJSONNames(t *testing.T) {
	// Every exported field marshals under its ADP name, and an emitted
	// document decodes back through encoding/json unchanged.
	d := adpSample(adpHex(adpKey(1)))
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Disclosure
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, _ := Canonicalize(&back)
	want, _ := Canonicalize(d)
	if string(again) != string(want) {
		t.Errorf("encoding/json round trip changed the document:\n%s\n%s", again, want)
	}
	if _, err := ParseDisclosure(want); err != nil {
		t.Errorf("canonical sample does not validate: %v", err)
	}
}
