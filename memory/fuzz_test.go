package memory

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/store/memstore"
)

var flagWriteSeeds = flag.Bool("memory.write-fuzz-seeds", false, "write the seed corpora of FuzzVerify and FuzzRememberRequest to testdata/fuzz")

// fuzzRecordKey is the record key of the fuzz fixtures: fixed, so that
// the artifacts in testdata/fuzz/FuzzVerify verify with it and the fuzzer
// starts from artifacts that hold.
func fuzzRecordKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("countersign memory fuzz record key"))
	return ed25519.NewKeyFromSeed(seed[:])
}

func newFuzzFixture(tb testing.TB) *fixture {
	return newFixtureKeyed(tb, memstore.New(&memstore.Options{RetryRate: 0.05}), nil, fuzzRecordKey())
}

// FuzzVerify: Verify never panics, always answers the same for the same
// bytes, and a Verification that holds names a type and no reason.
func FuzzVerify(f *testing.F) {
	fx := newFuzzFixture(f)
	key := fx.svc.VerifierKey()
	for _, a := range issueArtifacts(f, fx).all() {
		f.Add(a.b)
	}
	for _, s := range []string{``, `{}`, `null`, `{"type":"memory.page","signature":"AA"}`, `{"type":"memory.erasure","signature":"x","erased":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v := Verify(key, b)
		if v.Holds {
			switch {
			case v.Reason != "":
				t.Fatalf("holds with a reason: %+v", v)
			case v.Type != ArtifactRecord && v.Type != ArtifactPage && v.Type != ArtifactContext && v.Type != ArtifactErasure:
				t.Fatalf("holds for type %q", v.Type)
			}
		} else if v.Reason == "" {
			t.Fatalf("refused without a reason: %+v", v)
		}
		if w := Verify(key, b); w != v {
			t.Fatalf("two answers: %+v, %+v", v, w)
		}
	})
}

// fuzzPlaceholders are replaced in a fuzzed remember request, so the
// fuzzer reaches past the mandate and edge checks: "$mandate" (or no
// mandate) by a valid mandate over every namespace, "$rec0" and "$rec1"
// by the ids of records of namespace ns, "$gone" by an erased one's.
func fuzzPlaceholders(fx *fixture) map[string]string {
	r0 := fx.mustRemember("ns", fact{subject: "s", body: "first", from: t0.Add(-48 * time.Hour)})
	r1 := fx.mustRemember("ns", fact{subject: "t", body: "second", source: Source{Kind: "url", Ref: "https://example.com"}})
	if _, err := fx.svc.Taint(fx.t.Context(), TaintRequest{RecordID: r1.ID, Rationale: "tainted for the fuzzer"}, fx.op()); err != nil {
		fx.t.Fatal(err)
	}
	gone := fx.mustRemember("ns", fact{subject: "u", body: "third"})
	if _, err := fx.forget("ns", gone.ID); err != nil {
		fx.t.Fatal(err)
	}
	all := fx.mandate("ns", func(c *MandateClaims) {
		c.ID, c.Namespace = "mm-fuzz", "*"
		c.ExpiresAt = c.IssuedAt.Add(365 * 24 * time.Hour)
	})
	return map[string]string{"$mandate": all, "$rec0": r0.ID, "$rec1": r1.ID, "$gone": gone.ID}
}

// FuzzRememberRequest decodes a remember request from JSON and runs it:
// Remember never panics; when it accepts, the answer is a record that
// verifies and echoes the request, and the same request again is a
// replay of it.
func FuzzRememberRequest(f *testing.F) {
	fx := newFuzzFixture(f)
	ph := fuzzPlaceholders(fx)
	for _, s := range rememberSeeds {
		f.Add([]byte(s))
	}
	key := fx.svc.VerifierKey()
	f.Fuzz(func(t *testing.T, b []byte) {
		var q RememberRequest
		if json.Unmarshal(b, &q) != nil {
			return
		}
		if q.Mandate == "" || q.Mandate == "$mandate" {
			q.Mandate = ph["$mandate"]
		}
		for i := range q.Edges {
			if id, ok := ph[q.Edges[i].To]; ok {
				q.Edges[i].To = id
			}
		}
		if id, ok := ph[q.Source.Ref]; ok {
			q.Source.Ref = id
		}
		out, err := fx.svc.Remember(t.Context(), fx.caller, q, "req_fuzz")
		if err != nil {
			var me *Error
			if !errors.As(err, &me) {
				t.Fatalf("an error that is not a memory problem: %v", err)
			}
			if me.Code() == "" || sentinels[me.Code()] == nil {
				t.Fatalf("an error without a known code: %v", err)
			}
			return
		}
		r := out.Artifact.Record
		if v := Verify(key, marshalTB(t, out.Artifact)); !v.Holds {
			t.Fatalf("an accepted record does not verify: %+v", v)
		}
		if r.Namespace != q.Namespace || r.Subject != q.Subject || r.Kind != q.Kind || !r.ValidFrom.Equal(q.ValidFrom.Truncate(time.Microsecond)) {
			t.Fatalf("the record does not echo the request: %+v", r)
		}
		if !out.Replayed && !json.Valid(r.Body) {
			t.Fatalf("the body is not JSON: %q", r.Body)
		}
		again, err := fx.svc.Remember(t.Context(), fx.caller, q, "req_fuzz")
		if err != nil || !again.Replayed || again.Artifact.Record.ID != r.ID {
			t.Fatalf("the same request again: %+v %v", again, err)
		}
	})
}

var rememberSeeds = []string{
	`{"mandate":"$mandate","idempotencyKey":"k1","namespace":"ns","subject":"s","kind":"note","body":"lives in Paris","validFrom":"2026-11-24T10:00:00Z","source":{"kind":"agent","ref":"a1"}}`,
	`{"mandate":"$mandate","idempotencyKey":"k2","namespace":"ns","subject":"s","kind":"note","body":{"city":"Berlin","since":2019},"validFrom":"2026-11-25T10:00:00Z","validTo":"2026-11-25T11:00:00.5Z","source":{"kind":"tool","ref":"geo"},"edges":[{"type":"cites","to":"$rec0"}]}`,
	`{"mandate":"$mandate","idempotencyKey":"k3","namespace":"ns","subject":"t","kind":"note","body":[1,2,3],"validFrom":"2026-11-20T10:00:00+02:00","source":{"kind":"record","ref":"$rec1"},"edges":[{"type":"derived_from","to":"$rec0"},{"type":"supersedes","to":"$rec1"}]}`,
	`{"mandate":"$mandate","idempotencyKey":"k4","namespace":"ns","subject":"s","kind":"note","body":null,"validFrom":"2026-11-24T10:00:00Z","source":{"kind":"agent","ref":"a1"},"edges":[{"type":"cites","to":"$gone"}]}`,
	`{"mandate":"$mandate","idempotencyKey":"k5","namespace":"other","subject":"s","kind":"note","body":"x","validFrom":"2026-11-24T10:00:00Z","validTo":"2026-11-24T10:00:00Z","source":{"kind":"url","ref":"https://example.com"}}`,
	`{"mandate":"","idempotencyKey":"k6","namespace":"ns","subject":"s\u0000","kind":"note","body":"x","validFrom":"0001-01-01T00:00:00Z","source":{"kind":"agent","ref":"a1"}}`,
	`{"mandate":"not.a.token","idempotencyKey":"k7","namespace":"ns","subject":"s","kind":"note","body":"x","validFrom":"2026-11-24T10:00:00Z","source":{"kind":"agent","ref":"a1"}}`,
}

// TestWriteFuzzSeeds writes the seed corpora (go test -run
// TestWriteFuzzSeeds -memory.write-fuzz-seeds): valid artifacts under the
// fixed fuzz key and a few broken ones for FuzzVerify, the request seeds
// for FuzzRememberRequest. Without the flag it checks that the stored
// artifact seeds still verify.
func TestWriteFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	key := newFuzzFixture(t).svc.VerifierKey()
	if !*flagWriteSeeds {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Skipf("no seed corpus: %v", err)
		}
		held := 0
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			art, ok := parseCorpusBytes(b)
			if !ok {
				t.Fatalf("%s is not a go test fuzz v1 file of one []byte", e.Name())
			}
			if strings.HasPrefix(e.Name(), "artifact-") {
				if v := Verify(key, art); !v.Holds {
					t.Errorf("seed %s no longer verifies: %+v", e.Name(), v)
				}
				held++
			}
		}
		if held != 4 {
			t.Errorf("%d artifact seeds, want 4", held)
		}
		return
	}
	fx := newFuzzFixture(t)
	write := func(dir, name string, b []byte) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range issueArtifacts(t, fx).all() {
		write(dir, "artifact-"+strings.TrimPrefix(a.name, "memory."), a.b)
	}
	write(dir, "empty-object", []byte(`{}`))
	write(dir, "typed-unsigned", []byte(`{"type":"memory.record","record":{}}`))
	write(dir, "not-json", []byte("\x00\xff{"))
	rdir := filepath.Join("testdata", "fuzz", "FuzzRememberRequest")
	for i, s := range rememberSeeds {
		write(rdir, fmt.Sprintf("request-%d", i+1), []byte(s))
	}
}

// parseCorpusBytes reads a go test fuzz v1 file holding one []byte.
func parseCorpusBytes(b []byte) ([]byte, bool) {
	s, ok := strings.CutPrefix(string(b), "go test fuzz v1\n")
	if !ok {
		return nil, false
	}
	s = strings.TrimSpace(s)
	s, ok = strings.CutPrefix(s, "[]byte(")
	if !ok || !strings.HasSuffix(s, ")") {
		return nil, false
	}
	var out string
	if _, err := fmt.Sscanf(s[:len(s)-1], "%q", &out); err != nil {
		return nil, false
	}
	return []byte(out), true
}

// TestRememberRequestValidation: each rule of a remember request, table
// driven: refused as memory.invalid naming the field, nothing written.
func TestRememberRequestValidation(t *testing.T) {
	f := newFixture(t, nil)
	ok := func() RememberRequest {
		return RememberRequest{Mandate: f.mandate("ns", nil), IdempotencyKey: fmt.Sprintf("v%d", keyCounter.Add(1)), Namespace: "ns",
			Subject: "s", Kind: "note", Body: json.RawMessage(`"x"`), ValidFrom: t0, Source: Source{Kind: "agent", Ref: f.agent}}
	}
	for _, tc := range []struct {
		name  string
		mod   func(q *RememberRequest)
		field string
	}{
		{"no namespace", func(q *RememberRequest) { q.Namespace = "" }, "namespace"},
		{"namespace with NUL", func(q *RememberRequest) { q.Namespace = "n\x00s" }, "namespace"},
		{"namespace too long", func(q *RememberRequest) { q.Namespace = strings.Repeat("n", MaxNameLen+1) }, "namespace"},
		{"subject not UTF-8", func(q *RememberRequest) { q.Subject = "\xff" }, "subject"},
		{"kind with DEL", func(q *RememberRequest) { q.Kind = "a\x7f" }, "kind"},
		{"no idempotency key", func(q *RememberRequest) { q.IdempotencyKey = "" }, "idempotencyKey"},
		{"idempotency key too long", func(q *RememberRequest) { q.IdempotencyKey = strings.Repeat("k", MaxKeyLen+1) }, "idempotencyKey"},
		{"no body", func(q *RememberRequest) { q.Body = nil }, "body"},
		{"body not JSON", func(q *RememberRequest) { q.Body = json.RawMessage(`{"a":`) }, "body"},
		{"body too long", func(q *RememberRequest) { q.Body = json.RawMessage(`"` + strings.Repeat("b", MaxBodyLen) + `"`) }, "body"},
		{"body number out of range", func(q *RememberRequest) { q.Body = json.RawMessage(`{"n":1e400}`) }, "body"},
		{"body integer beyond 2^53", func(q *RememberRequest) { q.Body = json.RawMessage(`{"n":9223372036854775808}`) }, "body"},
		{"body lone surrogate", func(q *RememberRequest) { q.Body = json.RawMessage(`"\ud800"`) }, "body"},
		{"body duplicate member", func(q *RememberRequest) { q.Body = json.RawMessage(`{"a":1,"a":2}`) }, "body"},
		{"no validFrom", func(q *RememberRequest) { q.ValidFrom = time.Time{} }, "validFrom"},
		{"validTo at validFrom", func(q *RememberRequest) { q.ValidTo = ptr(t0) }, "validTo"},
		{"validTo before validFrom", func(q *RememberRequest) { q.ValidTo = ptr(t0.Add(-time.Hour)) }, "validTo"},
		{"validTo within the microsecond", func(q *RememberRequest) { q.ValidTo = ptr(t0.Add(500 * time.Nanosecond)) }, "validTo"},
		{"source kind", func(q *RememberRequest) { q.Source.Kind = "website" }, "source.kind"},
		{"no source ref", func(q *RememberRequest) { q.Source.Ref = "" }, "source.ref"},
		{"too many edges", func(q *RememberRequest) {
			for i := 0; i <= MaxEdges; i++ {
				q.Edges = append(q.Edges, Edge{Type: EdgeCites, To: fmt.Sprintf("mem_%d", i)})
			}
		}, "edges"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ok()
			tc.mod(&q)
			size := f.size()
			_, err := f.svc.Remember(t.Context(), f.caller, q, "req_v")
			var me *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &me) || me.ProblemExtensions()["field"] != tc.field {
				t.Fatalf("err = %v, want memory.invalid on %s", err, tc.field)
			}
			if f.size() != size {
				t.Fatal("a refused remember appended record entries")
			}
		})
	}
	// The valid request itself is accepted, and bodies in any JSON
	// spelling are stored compact.
	q := ok()
	q.Body = json.RawMessage("{ \"a\" : [ 1 , 2 ] ,\n \"b\":\"<&>\" }")
	out, err := f.svc.Remember(t.Context(), f.caller, q, "req_v")
	if err != nil || string(out.Artifact.Record.Body) != `{"a":[1,2],"b":"<&>"}` {
		t.Fatalf("%s %v", out.Artifact.Record.Body, err)
	}
}
