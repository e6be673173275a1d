package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/schematest"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// adpSchemas compiles the official schema files with the independent
// validator.
type adpSchemas struct {
	doc, v1, jws *jsonschema.Schema
}

func loadSchemas(t testing.TB) adpSchemas {
	t.Helper()
	dir := filepath.Join(adpDir(t), "schema")
	return adpSchemas{
		doc: schematest.Compile(t, filepath.Join(dir, "disclosure.schema.json")),
		v1:  schematest.Compile(t, filepath.Join(dir, "signed-disclosure.schema.json")),
		jws: schematest.Compile(t, filepath.Join(dir, "jws-signed-disclosure.schema.json")),
	}
}

// envelopeVerdicts judges one envelope both ways: with the official schema
// its shape selects (the reference's discriminator) and with ours.
func (s adpSchemas) envelopeVerdicts(t testing.TB, raw []byte) (theirs, ours error) {
	t.Helper()
	v, err := parseStrictJSON(string(raw), maxJSONDepth)
	if err != nil {
		t.Fatalf("differential input does not parse strictly: %v\n%s", err, raw)
	}
	sch := s.v1
	if isJWSShape(&v) {
		sch = s.jws
	}
	_, ours = decodeEnvelopeShape(&v)
	return schematest.Validate(t, sch, raw), ours
}

func (s adpSchemas) documentVerdicts(t testing.TB, raw []byte) (theirs, ours error) {
	t.Helper()
	v, err := parseStrictJSON(string(raw), maxJSONDepth)
	if err != nil {
		t.Fatalf("differential input does not parse strictly: %v\n%s", err, raw)
	}
	var d Disclosure
	ours = decodeDisclosure(&v, &d)
	return schematest.Validate(t, s.doc, raw), ours
}

// fullDocument is a disclosure with every optional field present, so that
// mutations reach every rule of the schema.
const fullDocument = `{
 "version": 1, "disclosureId": "disc_full", "agentId": "ef4931f78822741b7eccd616712ff1367d308537828b083ea1326b9ba583cb9d",
 "issuedAt": "2026-06-24T12:00:00.000Z", "validUntil": "2026-06-24T13:00:00.000Z", "nonce": "n1",
 "auditAnchor": "79bfb0e2ba76b9d447606ddbcc494834f05a4c11deb052e74b49ea307a3c5bcd",
 "systemPrompt": {"algorithm": "sha256", "digest": "ABCdef01", "promptVersion": "v3"},
 "constitution": {"hardConstraints": [{"id": "no_self_payment", "description": "d", "kind": "deny"}],
   "parameters": {"minRationale": 10, "mode": "strict", "on": true}, "digest": "00ff", "enforced": true, "enforcementEvidence": "gate"},
 "tools": {"tools": [{"name": "pay", "description": "pays", "access": "gated", "movesValue": true}], "valuePath": "pay"},
 "capital": {"mandates": [{"label": "l", "scope": "s", "currency": "USD", "perTxCapMinor": 100, "perPeriodCapMinor": 1000,
   "period": "day", "allowedRails": ["card"], "expiresAt": "2026-07-01T00:00:00.000Z"}],
   "aggregatePerPeriodCapMinor": 5000, "custody": "non_custodial", "riskModel": {"name": "r", "version": "1"}},
 "operator": {"operatorId": "op", "attestation": {"scheme": "com.visa.tap", "level": "signed", "evidence": "e"}, "deniabilityBoundary": "b"},
 "history": {"chainAnchor": "aa", "summary": {"totalDecisions": 5, "settledCount": 4, "blockedCount": 1,
   "firstSeen": "2026-01-01T00:00:00.000Z", "lastActive": "2026-06-01T00:00:00.000Z"}, "verificationHint": "h"},
 "redTeam": {"corpus": {"name": "c", "version": "1"}, "result": {"grade": "A", "score": 87.5, "passed": true, "hardFails": ["x"]},
   "attestedAt": "2026-06-24T12:00:00.000Z", "attestationRef": "ref"},
 "model": {"name": "m", "fingerprintAlgorithm": "sha256", "digest": "beef"},
 "provenance": {"constitution": {"derivedFrom": "gate", "attestedBy": "op"}, "history": {"derivedFrom": "audit-chain"}},
 "extensions": {"com.vendor.feature": {"a": [1, 2, {"b": null}]}, "dev.countersign.x": "y"}
}`

const fullRotation = `[{"type": "rotation", "from": "aa", "to": "bb", "rotatedAt": "2026-06-24T12:00:00.000Z", "signature": "abcd"}]`

func fullEnvelopes(t testing.TB) (v1, jws []byte) {
	v1 = []byte(`{"disclosure": ` + fullDocument + `, "signature": {"algorithm": "ed25519", "publicKey": "ab", "value": "cd"}, "rotationChain": ` + fullRotation + `}`)
	jws = []byte(`{"payload": "e30", "protected": "e30", "header": {"jwk": {"kty": "OKP", "crv": "Ed25519", "x": "AA"}}, "signature": "AA", "rotationChain": ` + fullRotation + `}`)
	return v1, jws
}

// decodeAny decodes JSON keeping number literals (json.Number).
func decodeAny(t testing.TB, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// mutations returns variants of doc, each differing at one place: a member
// removed or an unknown one added, a value replaced by each JSON type, and
// strings, numbers and arrays replaced by values chosen to sit on either
// side of the schema's enums, patterns and bounds.
func mutations(t testing.TB, doc any) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	emit := func(name string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	strs := []string{"", "x", "banana", "Unknown", "com.visa.tap", "com.visa-x.y-", "Com.visa", "com..visa", "a.", ".a",
		"ABCdef0123", "12g", "sha512", "sha256", "ed25519", "OKP", "Ed25519", "rotation", "deny", "other", "scope", "gated",
		"read_only", "operator_only", "week", "month", "year", "custodial", "escrow", "none", "signed", "registry_attested",
		"verified", "A", "F", "E", "AIP", "VisaTAP", "ERC8004", "DID", "did", "dev.countersign.x"}
	nums := []string{"-1", "1.5", "1e3", "1.0", "10e-1", "9007199254740991", "9007199254740992", "0", "-0", "0.0e5",
		"100", "100.5", "1e2", "99.999", "2", "1", "100.000000000000000001", "-0.000000000000000001"}
	var walk func(path string, v any, set func(any))
	walk = func(path string, v any, set func(any)) {
		for _, r := range []any{nil, true, json.Number("7"), "s", []any{}, map[string]any{}} {
			set(r)
			emit(fmt.Sprintf("%s=%T:%v", path, r, r), doc)
		}
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				val := x[k]
				delete(x, k)
				set(x)
				emit(path+"-"+k, doc)
				x[k] = val
			}
			x["zzExtra"] = json.Number("1")
			set(x)
			emit(path+"+zzExtra", doc)
			delete(x, "zzExtra")
			x["bad key"] = "v"
			set(x)
			emit(path+"+badkey", doc)
			delete(x, "bad key")
			x["org.example.ok"] = json.Number("1")
			set(x)
			emit(path+"+revdomain", doc)
			delete(x, "org.example.ok")
			set(x)
			for _, k := range keys {
				walk(path+"/"+k, x[k], func(nv any) { x[k] = nv; set(x) })
			}
		case []any:
			for _, extra := range []any{"x", json.Number("1"), map[string]any{}} {
				set(append(slices.Clone(x), extra))
				emit(fmt.Sprintf("%s+[%v]", path, extra), doc)
			}
			set(x)
			for i := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), x[i], func(nv any) { x[i] = nv; set(x) })
			}
		case string:
			for _, s := range strs {
				set(s)
				emit(path+"="+s, doc)
			}
		case json.Number:
			for _, n := range nums {
				set(json.Number(n))
				emit(path+"="+n, doc)
			}
		}
		set(v)
	}
	walk("", doc, func(nv any) { doc = nv })
	return out
}

// TestStructureDifferential holds the hand-written validator to the verdict
// of an independent JSON Schema validator on the official schema files, for
// every conformance input and thousands of one-place mutations.
func TestStructureDifferential(t *testing.T) {
	s := loadSchemas(t)
	var envelopes [][]byte
	var names []string
	add := func(name string, b []byte) { names = append(names, name); envelopes = append(envelopes, b) }

	f := loadInterop(t)
	for _, c := range append(slices.Clone(f.Disclosures), f.JWSDisclosures...) {
		add("interop/"+c.Name, c.Signed)
	}
	var neg struct {
		Cases []struct {
			Name        string          `json:"name"`
			Raw         json.RawMessage `json:"raw"`
			IsRawString bool            `json:"isRawString"`
		} `json:"cases"`
	}
	adpDecode(t, "negative.json", &neg)
	for _, c := range neg.Cases {
		if !c.IsRawString {
			add("negative/"+c.Name, c.Raw)
		}
	}
	var fz []struct {
		Input json.RawMessage `json:"input"`
	}
	adpDecode(t, "fuzz.json", &fz)
	for i, c := range fz {
		add(fmt.Sprintf("fuzz/%d", i), c.Input)
	}
	v1, jws := fullEnvelopes(t)
	add("full/v1", v1)
	add("full/jws", jws)
	for name, b := range mutations(t, decodeAny(t, v1)) {
		add("v1"+name, b)
	}
	for name, b := range mutations(t, decodeAny(t, jws)) {
		add("jws"+name, b)
	}

	accepted := 0
	for i, raw := range envelopes {
		theirs, ours := s.envelopeVerdicts(t, raw)
		if (theirs == nil) != (ours == nil) {
			t.Errorf("%s: schema validator says %v, ours says %v\n%s", names[i], theirs, ours, raw)
		}
		if ours == nil {
			accepted++
		}
		if ours != nil && !errors.Is(ours, ErrMalformed) {
			t.Errorf("%s: error %v does not match ErrMalformed", names[i], ours)
		}
	}

	// Bare documents: the interop documents, the JWS payloads and the full
	// document with all its mutations.
	docs := map[string][]byte{"full": []byte(fullDocument)}
	for _, c := range f.JWSDisclosures {
		var j JWSDisclosure
		if err := json.Unmarshal(c.Signed, &j); err != nil {
			t.Fatal(err)
		}
		p, err := b64.DecodeString(j.Payload)
		if err != nil {
			t.Fatal(err)
		}
		docs["payload/"+c.Name] = p
	}
	for name, b := range mutations(t, decodeAny(t, []byte(fullDocument))) {
		docs["doc"+name] = b
	}
	for name, raw := range docs {
		theirs, ours := s.documentVerdicts(t, raw)
		if (theirs == nil) != (ours == nil) {
			t.Errorf("%s: schema validator says %v, ours says %v\n%s", name, theirs, ours, raw)
		}
		if ours == nil {
			accepted++
		}
	}
	total := len(envelopes) + len(docs)
	t.Logf("%d inputs judged alike by both validators, %d accepted", total, accepted)
	if total < 2000 || accepted < 100 {
		t.Errorf("differential corpus too small or too one-sided: %d inputs, %d accepted", total, accepted)
	}
}

func TestStructureStricterThanSchema(t *testing.T) {
	v1, _ := fullEnvelopes(t)
	doc := string(v1)
	cases := map[string]string{
		"duplicate key":     strings.Replace(doc, `"nonce": "n1"`, `"nonce": "n1", "nonce": "n2"`, 1),
		"deep extension":    strings.Replace(doc, `"y"`, strings.Repeat("[", 70)+strings.Repeat("]", 70), 1),
		"number overflow":   strings.Replace(doc, `"minRationale": 10`, `"minRationale": 1e400`, 1),
		"lone surrogate":    strings.Replace(doc, `"n1"`, `"\ud800"`, 1),
		"invalid utf-8":     strings.Replace(doc, `"n1"`, "\"\xff\"", 1),
		"trailing data":     doc + " {}",
		"control character": strings.Replace(doc, `"n1"`, "\"a\x01b\"", 1),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if in == doc {
				t.Fatal("mutation did not apply")
			}
			_, err := parseEnvelope([]byte(in))
			if err == nil || !errors.Is(err, ErrMalformed) {
				t.Fatalf("parseEnvelope = %v, want ErrMalformed", err)
			}
		})
	}
	big := append([]byte(`{"disclosure":"`), bytes.Repeat([]byte("a"), MaxEnvelopeSize)...)
	if d := Verify(append(big, `"}`...), Policy{}); !slices.Equal(d.Failed, []string{CheckSchema}) {
		t.Errorf("oversized input: failed %v, want [schema]", d.Failed)
	}
}

func TestParseDecimal(t *testing.T) {
	for _, c := range []struct {
		lit    string
		digits string
		exp    int
		neg    bool
	}{
		{"0", "", 0, false},
		{"-0", "", 0, false},
		{"0.000e7", "", 0, false},
		{"1", "1", 0, false},
		{"1.0", "1", 0, false},
		{"10e-1", "1", 0, false},
		{"100", "1", 2, false},
		{"1e2", "1", 2, false},
		{"-12.50", "125", -1, true},
		{"0.0012", "12", -4, false},
		{"9007199254740991", "9007199254740991", 0, false},
	} {
		d := parseDecimal(c.lit)
		if d.digits != c.digits || d.exp != c.exp || d.neg != c.neg {
			t.Errorf("parseDecimal(%q) = %+v, want {%v %q %d}", c.lit, d, c.neg, c.digits, c.exp)
		}
	}
}

func TestDecUint53(t *testing.T) {
	for lit, want := range map[string]int64{
		"0": 0, "-0": 0, "5": 5, "5.0": 5, "5e0": 5, "50e-1": 5, "1e3": 1000, "9007199254740991": 9007199254740991,
		"9007199254740992": -1, "1e16": -1, "-1": -1, "1.5": -1, "5.000000000000000001": -1, "1e999999999999": -1,
		"0e999999999999": 0, "12345678901234567890": -1,
	} {
		n, err := decUint53(&jsonValue{kind: kindNumber, text: lit})
		switch {
		case want < 0 && err == nil:
			t.Errorf("decUint53(%s) = %d, want an error", lit, n)
		case want >= 0 && (err != nil || n != want):
			t.Errorf("decUint53(%s) = %d, %v; want %d", lit, n, err, want)
		}
	}
}

func TestIsReverseDomain(t *testing.T) {
	for s, want := range map[string]bool{
		"com.visa.tap": true, "a.b": true, "a1.b-2.c-": true, "dev.countersign.operator-keys": true,
		"": false, "com": false, "Com.visa": false, "com.Visa": false, "com..visa": false, "com.": false,
		".com": false, "co-m.visa": false, "com.vi_sa": false, "com.visa\n": false,
	} {
		if got := isReverseDomain(s); got != want {
			t.Errorf("isReverseDomain(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestParseDisclosureErrors(t *testing.T) {
	_, err := ParseDisclosure([]byte(strings.Replace(fullDocument, `"custody": "non_custodial"`, `"custody": "escrow"`, 1)))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "capital.custody: must be one of non_custodial, custodial") {
		t.Errorf("err = %v", err)
	}
	_, err = ParseDisclosure([]byte(strings.Replace(fullDocument, `"kind": "deny"`, `"kind": "nope"`, 1)))
	if err == nil || !strings.Contains(err.Error(), "constitution.hardConstraints[0].kind") {
		t.Errorf("err = %v", err)
	}
	_, err = ParseDisclosure([]byte(strings.Replace(fullDocument, `"nonce": "n1",`, ``, 1)))
	if err == nil || !strings.Contains(err.Error(), "nonce: required field is missing") {
		t.Errorf("err = %v", err)
	}
	if _, err := ParseDisclosure(bytes.Repeat([]byte(" "), MaxEnvelopeSize+1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("oversized: err = %v", err)
	}
	d, err := ParseDisclosure([]byte(fullDocument))
	if err != nil {
		t.Fatal(err)
	}
	if *d.Capital.AggregatePerPeriodCapMinor != 5000 || d.RedTeam.Result.Score != 87.5 || d.Constitution.Parameters["on"] != true ||
		string(d.Extensions["com.vendor.feature"]) != `{"a":[1,2,{"b":null}]}` || d.Operator.Attestation.Evidence != "e" {
		t.Errorf("decoded %+v", d)
	}
}

// TestDecodedDocumentRecanonicalizes: the typed Disclosure a parse yields
// canonicalizes back to exactly the canonical bytes of its input, so an
// emitter that re-signs a parsed document signs the same bytes.
func TestDecodedDocumentRecanonicalizes(t *testing.T) {
	inputs := []string{fullDocument,
		strings.Replace(fullDocument, `"parameters": {"minRationale": 10, "mode": "strict", "on": true}`, `"parameters": {}`, 1),
		strings.Replace(fullDocument, `"hardFails": ["x"]`, `"hardFails": []`, 1),
		strings.Replace(fullDocument, `"perTxCapMinor": 100`, `"perTxCapMinor": 1.0e2`, 1),
	}
	for i, in := range inputs {
		d, canon, err := decodeDocument(in)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		again, err := Canonicalize(d)
		if err != nil || !bytes.Equal(again, canon) {
			t.Errorf("%d: Canonicalize(decoded) =\n%s\nwant\n%s", i, again, canon)
		}
	}
	// The one documented exception: an optional string explicitly "" reads
	// as unset, so re-canonicalizing drops it; the result is a fixed point.
	d, canon, err := decodeDocument(strings.Replace(fullDocument, `"promptVersion": "v3"`, `"promptVersion": ""`, 1))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Canonicalize(d)
	if !bytes.Contains(canon, []byte(`"promptVersion":""`)) || bytes.Contains(again, []byte("promptVersion")) {
		t.Errorf("explicit empty promptVersion: canon %s, again %s", canon, again)
	}
	d2, canon2, err := decodeDocument(string(again))
	if err != nil || !bytes.Equal(canon2, again) || d2.SystemPrompt != d.SystemPrompt {
		t.Errorf("not a fixed point: %v", err)
	}
}
