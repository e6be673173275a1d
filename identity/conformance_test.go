package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// adpDir is where the conformance data lives: the project's shared copy when
// the whole project is checked out, else the copy in testdata/adp.
func adpDir(t testing.TB) string {
	t.Helper()
	shared := filepath.Join("..", "..", "shared", "conformance", "adp")
	if _, err := os.Stat(filepath.Join(shared, "interop.json")); err == nil {
		return shared
	}
	return filepath.Join("testdata", "adp")
}

func adpRead(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(adpDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func adpDecode(t testing.TB, name string, v any) {
	t.Helper()
	if err := json.Unmarshal(adpRead(t, name), v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

type interopFile struct {
	Key struct {
		PrivateKeyHex string `json:"privateKeyHex"`
		PublicKeyHex  string `json:"publicKeyHex"`
	} `json:"key"`
	Disclosures    []interopDisclosure `json:"disclosures"`
	JWSDisclosures []interopDisclosure `json:"jwsDisclosures"`
	Handshakes     []struct {
		Name            string            `json:"name"`
		Challenge       Challenge         `json:"challenge"`
		Response        ChallengeResponse `json:"response"`
		ExpectedAgentID string            `json:"expectedAgentId"`
		Now             string            `json:"now"`
		Expect          bool              `json:"expect"`
	} `json:"handshakes"`
	Redactions []struct {
		Name   string          `json:"name"`
		View   json.RawMessage `json:"view"`
		Expect struct {
			OK             bool     `json:"ok"`
			RevealedFields []string `json:"revealedFields"`
		} `json:"expect"`
	} `json:"redactions"`
	Revocations []struct {
		Name   string           `json:"name"`
		Record SignedRevocation `json:"record"`
		Expect bool             `json:"expect"`
	} `json:"revocations"`
	Transparency []struct {
		Name   string            `json:"name"`
		Entry  TransparencyEntry `json:"entry"`
		Expect bool              `json:"expect"`
	} `json:"transparency"`
}

type interopDisclosure struct {
	Name   string          `json:"name"`
	Signed json.RawMessage `json:"signed"`
	Policy json.RawMessage `json:"policy"`
	Expect struct {
		Decision string   `json:"decision"`
		Failed   []string `json:"failed"`
	} `json:"expect"`
}

// TestConformanceCopyUpToDate keeps testdata/adp, the standalone fallback,
// identical to the project's shared conformance data when both exist.
func TestConformanceCopyUpToDate(t *testing.T) {
	shared := filepath.Join("..", "..", "shared", "conformance", "adp")
	if _, err := os.Stat(shared); err != nil {
		t.Skip("no shared conformance data beside the repository")
	}
	for _, name := range []string{"vectors.json", "negative.json", "interop.json", "fuzz.json", "LICENSE",
		"schema/disclosure.schema.json", "schema/signed-disclosure.schema.json",
		"schema/jws-signed-disclosure.schema.json", "schema/constraints.json"} {
		want, err := os.ReadFile(filepath.Join(shared, name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("testdata", "adp", name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/adp/%s differs from %s (%v)", name, shared, err)
		}
	}
}

func loadInterop(t testing.TB) interopFile {
	t.Helper()
	var f interopFile
	adpDecode(t, "interop.json", &f)
	return f
}

// interopKey is the fixed key the reference signed the fixtures with,
// stored as PKCS#8 DER hex.
func interopKey(t testing.TB, f interopFile) ed25519.PrivateKey {
	t.Helper()
	der, err := hex.DecodeString(f.Key.PrivateKeyHex)
	if err != nil {
		t.Fatal(err)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		t.Fatal(err)
	}
	key := k.(ed25519.PrivateKey)
	if got := hex.EncodeToString(key.Public().(ed25519.PublicKey)); got != f.Key.PublicKeyHex {
		t.Fatalf("interop key public half %s, want %s", got, f.Key.PublicKeyHex)
	}
	return key
}

// interopPolicy turns a fixture policy into a Policy: the reference's
// policy carries the verifier's clock as "now", which ParsePolicy refuses
// (a caller never picks the clock), so it is lifted into Policy.Now.
func interopPolicy(t testing.TB, raw json.RawMessage) Policy {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var now string
	if err := json.Unmarshal(m["now"], &now); err != nil {
		t.Fatal(err)
	}
	delete(m, "now")
	rest, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy(rest)
	if err != nil {
		t.Fatal(err)
	}
	p.Now = mustTime(t, now)
	return p
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	if c == nil {
		c = []string{}
	}
	return c
}

func TestConformanceCanonicalVectors(t *testing.T) {
	var f struct {
		Canonicalization []struct {
			Input     json.RawMessage `json:"input"`
			Canonical string          `json:"canonical"`
		} `json:"canonicalization"`
		SHA256 []struct {
			Input  string `json:"input"`
			SHA256 string `json:"sha256"`
		} `json:"sha256"`
	}
	adpDecode(t, "vectors.json", &f)
	if len(f.Canonicalization) < 10 || len(f.SHA256) < 2 {
		t.Fatalf("vectors.json: %d canonicalization and %d sha256 vectors", len(f.Canonicalization), len(f.SHA256))
	}
	for i, c := range f.Canonicalization {
		checkCanonical(t, i, c.Input, c.Canonical)
	}
	for _, c := range f.SHA256 {
		sum := sha256.Sum256([]byte(c.Input))
		if got := hex.EncodeToString(sum[:]); got != c.SHA256 {
			t.Errorf("sha256(%q) = %s, want %s", c.Input, got, c.SHA256)
		}
	}
}

// checkCanonical holds all three canonicalization paths to one expected
// output: CanonicalJSON (gowebpki/jcs), the verifier's tree writer, and
// Canonicalize of the value decoded into Go.
func checkCanonical(t *testing.T, i int, input json.RawMessage, want string) {
	t.Helper()
	got, err := CanonicalJSON(input)
	if err != nil || string(got) != want {
		t.Errorf("case %d: CanonicalJSON(%s) = %s, %v; want %s", i, input, got, err, want)
	}
	v, err := parseStrictJSON(string(input), maxJSONDepth)
	if err != nil {
		t.Errorf("case %d: parse: %v", i, err)
		return
	}
	tree, err := appendCanonical(nil, &v)
	if err != nil || string(tree) != want {
		t.Errorf("case %d: tree canonical of %s = %s, %v; want %s", i, input, tree, err, want)
	}
	var val any
	if err := json.Unmarshal(input, &val); err != nil {
		t.Fatal(err)
	}
	viaGo, err := Canonicalize(val)
	if err != nil || string(viaGo) != want {
		t.Errorf("case %d: Canonicalize(%s) = %s, %v; want %s", i, input, viaGo, err, want)
	}
}

func TestConformanceFuzzCorpus(t *testing.T) {
	var cases []struct {
		Input     json.RawMessage `json:"input"`
		Canonical string          `json:"canonical"`
	}
	adpDecode(t, "fuzz.json", &cases)
	if len(cases) < 200 {
		t.Fatalf("fuzz.json has %d cases, want at least 200", len(cases))
	}
	for i, c := range cases {
		checkCanonical(t, i, c.Input, c.Canonical)
	}
}

func TestConformanceNegative(t *testing.T) {
	var f struct {
		Cases []struct {
			Name        string          `json:"name"`
			Raw         json.RawMessage `json:"raw"`
			IsRawString bool            `json:"isRawString"`
		} `json:"cases"`
	}
	adpDecode(t, "negative.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("negative.json has no cases")
	}
	now := mustTime(t, "2026-06-24T12:00:00.000Z")
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			input := []byte(c.Raw)
			if c.IsRawString {
				var s string
				if err := json.Unmarshal(c.Raw, &s); err != nil {
					t.Fatal(err)
				}
				input = []byte(s)
			}
			for _, p := range []Policy{{Now: now}, {Now: now, RequireFresh: new(false)}} {
				d := Verify(input, p)
				if d.Outcome != OutcomeRefuse || len(d.Failed) == 0 {
					t.Fatalf("Verify = %s (failed %v), want refuse", d.Outcome, d.Failed)
				}
				if !slices.Contains(d.Failed, CheckSchema) && !slices.Contains(d.Failed, CheckSignature) {
					t.Errorf("failed %v: want a schema or signature failure", d.Failed)
				}
			}
		})
	}
}

func TestConformanceInteropDisclosures(t *testing.T) {
	f := loadInterop(t)
	if len(f.Disclosures) == 0 || len(f.JWSDisclosures) == 0 {
		t.Fatal("interop.json has no disclosure cases")
	}
	run := func(t *testing.T, cases []interopDisclosure, envelope string) {
		for _, c := range cases {
			t.Run(c.Name, func(t *testing.T) {
				d := Verify(c.Signed, interopPolicy(t, c.Policy))
				if d.Outcome != c.Expect.Decision {
					t.Errorf("outcome %s, want %s (checks %+v)", d.Outcome, c.Expect.Decision, d.Checks)
				}
				if got, want := sortedCopy(d.Failed), sortedCopy(c.Expect.Failed); !slices.Equal(got, want) {
					t.Errorf("failed %v, want %v (checks %+v)", got, want, d.Checks)
				}
				if d.Envelope != envelope {
					t.Errorf("envelope %q, want %q", d.Envelope, envelope)
				}
				if d.Disclosure == nil || d.Digest == "" || d.AgentID != d.Disclosure.AgentID {
					t.Errorf("decision lacks the parsed disclosure: %+v", d)
				}
			})
		}
	}
	t.Run("v1", func(t *testing.T) { run(t, f.Disclosures, EnvelopeV1) })
	t.Run("jws", func(t *testing.T) { run(t, f.JWSDisclosures, EnvelopeJWS) })
}

func TestConformanceInteropHandshakes(t *testing.T) {
	f := loadInterop(t)
	if len(f.Handshakes) == 0 {
		t.Fatal("interop.json has no handshakes")
	}
	for _, c := range f.Handshakes {
		t.Run(c.Name, func(t *testing.T) {
			r := VerifyResponse(c.Response, c.Challenge, HandshakePolicy{
				ExpectedAgentID: c.ExpectedAgentID,
				Now:             mustTime(t, c.Now),
			})
			if r.OK != c.Expect {
				t.Errorf("ok = %v, want %v (checks %+v)", r.OK, c.Expect, r.Checks)
			}
		})
	}
}

func TestConformanceInteropRedactions(t *testing.T) {
	f := loadInterop(t)
	if len(f.Redactions) == 0 {
		t.Fatal("interop.json has no redactions")
	}
	for _, c := range f.Redactions {
		t.Run(c.Name, func(t *testing.T) {
			r := VerifyRedacted(c.View)
			if r.OK != c.Expect.OK {
				t.Fatalf("ok = %v (%s), want %v", r.OK, r.Reason, c.Expect.OK)
			}
			if got, want := sortedCopy(r.RevealedFields), sortedCopy(c.Expect.RevealedFields); !slices.Equal(got, want) {
				t.Errorf("revealed %v, want %v", got, want)
			}
		})
	}
}

func TestConformanceInteropRevocations(t *testing.T) {
	f := loadInterop(t)
	if len(f.Revocations) == 0 {
		t.Fatal("interop.json has no revocations")
	}
	for _, c := range f.Revocations {
		t.Run(c.Name, func(t *testing.T) {
			if err := VerifyRevocation(c.Record); (err == nil) != c.Expect {
				t.Errorf("VerifyRevocation = %v, want ok=%v", err, c.Expect)
			}
		})
	}
}

func TestConformanceInteropTransparency(t *testing.T) {
	f := loadInterop(t)
	if len(f.Transparency) == 0 {
		t.Fatal("interop.json has no transparency entries")
	}
	for _, c := range f.Transparency {
		t.Run(c.Name, func(t *testing.T) {
			if err := VerifyInclusionProof(c.Entry); (err == nil) != c.Expect {
				t.Errorf("VerifyInclusionProof = %v, want ok=%v", err, c.Expect)
			}
		})
	}
	// The valid entry is entry 0 of a log holding the interop disclosure:
	// appending that disclosure to a fresh log reproduces it exactly.
	var valid TransparencyEntry
	for _, c := range f.Transparency {
		if c.Expect {
			valid = c.Entry
		}
	}
	var signed struct {
		Disclosure json.RawMessage `json:"disclosure"`
	}
	if err := json.Unmarshal(f.Disclosures[0].Signed, &signed); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDisclosure(signed.Disclosure)
	if err != nil {
		t.Fatal(err)
	}
	var log TransparencyLog
	e, err := log.Append(d)
	if err != nil {
		t.Fatal(err)
	}
	if e != valid {
		t.Errorf("appended entry %+v, want the fixture's %+v", e, valid)
	}
}

// TestConformanceReSign re-signs the interop disclosure with the interop
// key: Ed25519 is deterministic, so both envelopes must reproduce the
// reference's bytes.
func TestConformanceReSign(t *testing.T) {
	f := loadInterop(t)
	key := interopKey(t, f)
	var v1 struct {
		Disclosure json.RawMessage `json:"disclosure"`
		Signature  Signature       `json:"signature"`
	}
	if err := json.Unmarshal(f.Disclosures[0].Signed, &v1); err != nil {
		t.Fatal(err)
	}
	var jws JWSDisclosure
	if err := json.Unmarshal(f.JWSDisclosures[0].Signed, &jws); err != nil {
		t.Fatal(err)
	}
	d, err := ParseDisclosure(v1.Disclosure)
	if err != nil {
		t.Fatal(err)
	}
	gotV1, err := SignV1(d, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sv1 SignedDisclosure
	if err := json.Unmarshal(gotV1, &sv1); err != nil {
		t.Fatal(err)
	}
	if sv1.Signature != v1.Signature {
		t.Errorf("v1 signature %+v, want the fixture's %+v", sv1.Signature, v1.Signature)
	}
	gotJWS, err := SignJWS(d, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sj JWSDisclosure
	if err := json.Unmarshal(gotJWS, &sj); err != nil {
		t.Fatal(err)
	}
	if sj.Signature != jws.Signature || sj.Payload != jws.Payload || sj.Protected != jws.Protected || sj.Header != jws.Header {
		t.Errorf("JWS %+v\nwant the fixture's %+v", sj, jws)
	}
	// SignCanonical gives the same two envelopes from one canonicalization.
	canon, err := Canonicalize(d)
	if err != nil {
		t.Fatal(err)
	}
	a, b, err := SignCanonical(canon, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, gotV1) || !bytes.Equal(b, gotJWS) {
		t.Error("SignCanonical differs from SignV1/SignJWS")
	}
}
