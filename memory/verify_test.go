package memory

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store/memstore"
)

// issued is one artifact of each type the store issues, marshalled with
// encoding/json, with the records they hold.
type issued struct {
	record, page, context, erasure []byte
	pageRecords                    int
	contextRecords                 int
}

func (a issued) all() []struct {
	name    string
	b       []byte
	records int
} {
	return []struct {
		name    string
		b       []byte
		records int
	}{{ArtifactRecord, a.record, 1}, {ArtifactPage, a.page, a.pageRecords}, {ArtifactContext, a.context, a.contextRecords}, {ArtifactErasure, a.erasure, 0}}
}

// issueArtifacts fills a store with records of every shape (closed and
// open, superseded, a remainder, tainted, with edges) and returns one
// artifact of each type.
func issueArtifacts(t testing.TB, f *fixture) issued {
	t.Helper()
	var out issued
	a := f.mustRemember("ns", fact{subject: "user:1", kind: "address", body: "lives in Paris", from: t0.Add(-48 * time.Hour)})
	f.clock.Advance(time.Minute)
	b := f.mustRemember("ns", fact{subject: "user:1", kind: "address", body: "lives in Berlin", from: t0, to: ptr(t0.Add(time.Hour)),
		edges: []Edge{{Type: EdgeCites, To: a.ID}}})
	c := f.mustRemember("ns", fact{subject: "user:2", kind: "preference", body: "likes tea", source: Source{Kind: "url", Ref: "https://example.com/tea"}})
	if _, err := f.svc.Taint(t.Context(), TaintRequest{Source: &c.Source, Rationale: "the page was spoofed"}, f.op()); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"city": "Lyon", "since": 2019, "tags": []string{"home", "work"}})
	r, err := f.svc.Remember(t.Context(), f.caller, RememberRequest{Mandate: f.mandate("ns", nil), IdempotencyKey: "artifact", Namespace: "ns",
		Subject: "user:3", Kind: "address", Body: body, ValidFrom: t0.Add(-time.Hour), ValidTo: ptr(t0.Add(time.Hour)),
		Source: Source{Kind: "record", Ref: c.ID}, Edges: []Edge{{Type: EdgeDerivedFrom, To: b.ID}, {Type: EdgeCites, To: c.ID}}}, "req_art")
	if err != nil {
		t.Fatal(err)
	}
	if r.Artifact.Record.Taint == nil {
		t.Fatal("the record artifact was meant to carry a taint")
	}
	out.record = marshalTB(t, r.Artifact)

	// A page as known before Berlin (Paris, not yet superseded then but
	// superseded now) and everything valid at t0 - 1h now.
	p, err := f.recall("ns", RecallRequest{ValidAt: ptr(t0.Add(-time.Hour)), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := f.recall("ns", RecallRequest{ValidAt: ptr(t0), TxAt: ptr(a.RecordedAt), Limit: 100})
	if err != nil || len(p2.Data) != 1 || p2.Data[0].SupersededAt == nil {
		t.Fatalf("page as of Paris: %+v %v", p2.Data, err)
	}
	if len(p.Data) < 3 {
		t.Fatalf("page of %d records", len(p.Data))
	}
	out.page, out.pageRecords = marshalTB(t, p), len(p.Data)

	ctx, err := f.svc.Assemble(t.Context(), f.caller, AssembleRequest{Mandate: f.mandate("ns", nil), Namespace: "ns", Query: "lives tea",
		ValidAt: ptr(t0.Add(-time.Hour)), Budget: Budget{MaxTokens: 12}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ctx.Items) == 0 || len(ctx.Omitted) == 0 {
		t.Fatalf("context with %d items, %d omissions", len(ctx.Items), len(ctx.Omitted))
	}
	out.context, out.contextRecords = marshalTB(t, ctx), len(ctx.Items)

	proof, err := f.forget("ns", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(proof.Erased) < 2 {
		t.Fatalf("erasure of %d records", len(proof.Erased))
	}
	out.erasure = marshalTB(t, proof)
	return out
}

func TestVerifyHolds(t *testing.T) {
	f := newFixture(t, nil)
	art := issueArtifacts(t, f)
	for _, a := range art.all() {
		v := Verify(f.svc.VerifierKey(), a.b)
		if !v.Holds || v.Type != a.name || v.Records != a.records || v.Reason != "" {
			t.Errorf("%s: %+v", a.name, v)
		}
		// Exactly as the store would serve it (no HTML escaping): the
		// same artifact.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(a.b, &m); err != nil || enc.Encode(m) != nil {
			t.Fatal(err)
		}
		if v := Verify(f.svc.VerifierKey(), buf.Bytes()); !v.Holds {
			t.Errorf("%s re-encoded: %+v", a.name, v)
		}
	}
	// Another deployment's key refuses every one of them; so does a
	// malformed key.
	g := newFixture(t, nil)
	for _, a := range art.all() {
		for _, key := range []string{g.svc.VerifierKey(), "", "not a key", f.svc.VerifierKey() + "x"} {
			if v := Verify(key, a.b); v.Holds {
				t.Errorf("%s holds with key %q", a.name, key)
			}
		}
	}
}

// tamperByte returns a printable byte other than b: b^0x01 where that is
// printable, else a letter.
func tamperByte(b byte) byte {
	if c := b ^ 0x01; c >= 0x20 && c < 0x7f {
		return c
	}
	if b == 'x' {
		return 'y'
	}
	return 'x'
}

// TestVerifyRefusesEveryByte changes each byte of each artifact, one at a
// time, to another printable byte: every change is refused. (Under the
// race detector, which makes each check ten times slower, every seventh
// position and the last 200 bytes, the signature's.)
func TestVerifyRefusesEveryByte(t *testing.T) {
	f := newFixture(t, nil)
	art := issueArtifacts(t, f)
	key := f.svc.VerifierKey()
	for _, a := range art.all() {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			b := bytes.Clone(a.b)
			checked := 0
			for i := range b {
				if raceDetector && i%7 != 0 && i < len(b)-200 {
					continue
				}
				orig := b[i]
				b[i] = tamperByte(orig)
				if v := Verify(key, b); v.Holds {
					t.Errorf("byte %d changed from %q to %q still holds: ...%s...", i, orig, b[i], b[max(0, i-40):min(len(b), i+40)])
				}
				b[i] = orig
				checked++
			}
			if !bytes.Equal(b, a.b) || !Verify(key, b).Holds {
				t.Fatal("the test damaged the artifact")
			}
			t.Logf("%s: %d bytes, %d changes refused", a.name, len(b), checked)
		})
	}
}

// resign signs a changed artifact with the record key, as the store
// would: what then refuses it is the check of the seals inside.
func resign(t *testing.T, f *fixture, b []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var typ string
	_ = json.Unmarshal(m["type"], &typ)
	delete(m, "signature")
	d, err := canonicalDigest(m)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := f.log.SignStatement(typ, d)
	if err != nil {
		t.Fatal(err)
	}
	m["signature"], _ = json.Marshal(sig)
	return mustJSON(t, m)
}

// edit decodes an artifact into a generic value, lets change alter it and
// encodes it again.
func edit(t *testing.T, b []byte, change func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	change(m)
	return mustJSON(t, m)
}

func obj(v any, path ...any) map[string]any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v.(map[string]any)
}

func TestVerifyRefusesFieldTampers(t *testing.T) {
	f := newFixture(t, nil)
	art := issueArtifacts(t, f)
	key := f.svc.VerifierKey()
	// Sanity: edit with no change keeps every artifact whole.
	for _, a := range art.all() {
		if v := Verify(key, edit(t, a.b, func(map[string]any) {})); !v.Holds {
			t.Fatalf("%s: re-encoding alone breaks it: %+v", a.name, v)
		}
		if v := Verify(key, resign(t, f, a.b)); !v.Holds {
			t.Fatalf("%s: re-signing alone breaks it: %+v", a.name, v)
		}
	}
	// The memory.recorded entry of another record of the page.
	var page map[string]any
	if err := json.Unmarshal(art.page, &page); err != nil {
		t.Fatal(err)
	}
	otherEntry := obj(page, "data", 1, "seal", "entry")

	type tamper struct {
		name     string
		artifact []byte
		change   func(m map[string]any)
		// resigned: also refused when signed again with the record key,
		// with this reason (the check of the seals inside); "" when the
		// change is one only the signature over the whole catches.
		resigned string
	}
	tampers := []tamper{
		{"record body", art.record, func(m map[string]any) { obj(m, "record")["body"] = map[string]any{"city": "Nice"} }, "the content does not match its digest"},
		{"record subject", art.record, func(m map[string]any) { obj(m, "record")["subject"] = "user:4" }, "the content does not match its digest"},
		{"record validFrom", art.record, func(m map[string]any) { obj(m, "record")["validFrom"] = formatTime(t0.Add(-2 * time.Hour)) }, "the content does not match its digest"},
		{"record validTo opened", art.record, func(m map[string]any) { obj(m, "record")["validTo"] = nil }, "the content does not match its digest"},
		{"record recordedAt", art.record, func(m map[string]any) { obj(m, "record")["recordedAt"] = formatTime(t0) }, "the content does not match its digest"},
		{"record edge dropped", art.record, func(m map[string]any) { r := obj(m, "record"); r["edges"] = r["edges"].([]any)[1:] }, "the content does not match its digest"},
		{"record source", art.record, func(m map[string]any) { obj(m, "record", "source")["kind"] = "agent" }, "the content does not match its digest"},
		{"record salt", art.record, func(m map[string]any) { obj(m, "record", "seal")["salt"] = strings.Repeat("0", 32) }, "the content does not match its digest"},
		{"record digest and data together", art.record, func(m map[string]any) {
			r := obj(m, "record")
			r["body"] = "forged"
			rec := Record{}
			b, _ := json.Marshal(r)
			_ = json.Unmarshal(b, &rec)
			d, _ := contentDigest(&rec)
			obj(m, "record", "seal")["contentDigest"] = d
		}, "the seal's record entry commits another record"},
		{"record taint removed", art.record, func(m map[string]any) { obj(m, "record")["taint"] = nil }, ""},
		{"record taint reason", art.record, func(m map[string]any) { obj(m, "record", "taint")["reason"] = TaintUntrustedSource + "x" }, ""},
		{"record supersededAt", art.record, func(m map[string]any) { obj(m, "record")["supersededAt"] = formatTime(t0) }, ""},
		{"record seal entry of another record", art.record, func(m map[string]any) { obj(m, "record", "seal")["entry"] = otherEntry }, "the seal's record entry commits another record"},
		{"record seal entry data", art.record, func(m map[string]any) {
			obj(m, "record", "seal", "entry")["data"] = map[string]any{"id": "mem_x", "namespace": "ns", "contentDigest": "00"}
		}, "the seal's record entry does not verify"},
		{"record issuedAt", art.record, func(m map[string]any) { m["issuedAt"] = formatTime(t0) }, ""},
		{"record type", art.record, func(m map[string]any) { m["type"] = ArtifactPage }, "malformed"},
		{"record signature dropped", art.record, func(m map[string]any) { delete(m, "signature") }, ""},
		{"record member added", art.record, func(m map[string]any) { m["note"] = "hello" }, "malformed"},

		{"page record body", art.page, func(m map[string]any) { obj(m, "data", 0)["body"] = "forged" }, "the content does not match its digest"},
		{"page supersededAt", art.page, func(m map[string]any) { obj(m, "data", 0)["supersededAt"] = formatTime(t0) }, ""},
		{"page taint", art.page, func(m map[string]any) {
			for _, r := range m["data"].([]any) {
				r.(map[string]any)["taint"] = nil
			}
		}, ""},
		{"page seals swapped", art.page, func(m map[string]any) {
			a, b := obj(m, "data", 0), obj(m, "data", 1)
			a["seal"], b["seal"] = b["seal"], a["seal"]
		}, "the content does not match its digest"},
		{"page seal entries swapped", art.page, func(m map[string]any) {
			a, b := obj(m, "data", 0, "seal"), obj(m, "data", 1, "seal")
			a["entry"], b["entry"] = b["entry"], a["entry"]
		}, "the seal's record entry commits another record"},
		{"page record dropped", art.page, func(m map[string]any) { m["data"] = m["data"].([]any)[1:] }, ""},
		{"page record duplicated", art.page, func(m map[string]any) { m["data"] = append(m["data"].([]any), m["data"].([]any)[0]) }, ""},
		{"page records reordered", art.page, func(m map[string]any) { d := m["data"].([]any); d[0], d[1] = d[1], d[0] }, ""},
		{"page txAt", art.page, func(m map[string]any) { m["txAt"] = formatTime(t0) }, ""},
		{"page validAt", art.page, func(m map[string]any) { m["validAt"] = formatTime(t0) }, ""},
		{"page hasMore", art.page, func(m map[string]any) { m["hasMore"] = true }, ""},
		{"page as a context", art.page, func(m map[string]any) { m["type"] = ArtifactContext }, "malformed"},

		{"context item body", art.context, func(m map[string]any) { obj(m, "items", 0, "record")["body"] = "forged" }, "the content does not match its digest"},
		{"context tokensUsed", art.context, func(m map[string]any) { m["tokensUsed"] = 1 }, ""},
		{"context omission reason", art.context, func(m map[string]any) { obj(m, "omitted", 0)["reason"] = "irrelevant" }, ""},
		{"context omission dropped", art.context, func(m map[string]any) { m["omitted"] = []any{} }, ""},
		{"context abstained", art.context, func(m map[string]any) { m["abstained"] = true }, ""},
		{"context tokenizer", art.context, func(m map[string]any) { m["tokenizer"] = "exact-bpe" }, ""},
		{"context budget", art.context, func(m map[string]any) { obj(m, "budget")["maxTokens"] = 1000 }, ""},

		{"erasure id", art.erasure, func(m map[string]any) { obj(m, "erased", 1)["id"] = newID() }, "the erasure entry lists other records than the proof"},
		{"erasure digest", art.erasure, func(m map[string]any) { obj(m, "erased", 0)["contentDigest"] = strings.Repeat("ab", 32) }, "the erasure entry lists other records than the proof"},
		{"erasure record dropped", art.erasure, func(m map[string]any) { m["erased"] = m["erased"].([]any)[:1] }, "the erasure entry lists other records than the proof"},
		{"erasure root", art.erasure, func(m map[string]any) { m["rootId"] = obj(m, "erased", 1)["id"] }, "the erasure entry lists other records than the proof"},
		{"erasure namespace", art.erasure, func(m map[string]any) { m["namespace"] = "other" }, "the erasure entry lists other records than the proof"},
		{"erasure entry data", art.erasure, func(m map[string]any) { obj(m, "entry")["data"] = map[string]any{"rootId": "x"} }, "the erasure entry's inclusion proof does not verify"},
		{"erasure entry of a record", art.erasure, func(m map[string]any) { m["entry"] = otherEntry }, "the erasure entry's inclusion proof does not verify"},
		{"erasure inclusion hash", art.erasure, func(m map[string]any) {
			h := obj(m, "inclusion")["hashes"].([]any)
			h[0] = strings.Repeat("A", 43) + "="
		}, "the erasure entry's inclusion proof does not verify"},
		{"erasure tree size", art.erasure, func(m map[string]any) { obj(m, "inclusion")["treeSize"] = 1 }, "the erasure entry's inclusion proof does not verify"},
		{"erasure checkpoint", art.erasure, func(m map[string]any) {
			c := obj(m, "inclusion", "checkpoint")
			for k, v := range c {
				if s, ok := v.(string); ok && strings.Contains(s, "\n") {
					c[k] = strings.Replace(s, "\n", "\n\n", 1)
				}
			}
		}, "the erasure entry's inclusion proof does not verify"},
	}
	for _, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			b := edit(t, tc.artifact, tc.change)
			if bytes.Equal(b, edit(t, tc.artifact, func(map[string]any) {})) {
				t.Fatal("the tamper changed nothing")
			}
			if v := Verify(key, b); v.Holds {
				t.Fatalf("holds: %+v", v)
			}
			if tc.resigned == "" {
				return
			}
			v := Verify(key, resign(t, f, b))
			if v.Holds || !strings.Contains(v.Reason, tc.resigned) {
				t.Fatalf("re-signed: %+v, want a refusal for %q", v, tc.resigned)
			}
		})
	}
}

func TestVerifyRefusesMalformed(t *testing.T) {
	f := newFixture(t, nil)
	key := f.svc.VerifierKey()
	art := issueArtifacts(t, f)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"null", []byte("null")},
		{"array", []byte("[]")},
		{"string", []byte(`"memory.page"`)},
		{"no type", []byte(`{"signature":"abc"}`)},
		{"type not a string", []byte(`{"type":1,"signature":"abc"}`)},
		{"unknown type", resign(t, f, edit(t, art.record, func(m map[string]any) { m["type"] = "memory.other" }))},
		{"no signature", edit(t, art.record, func(m map[string]any) { delete(m, "signature") })},
		{"empty signature", edit(t, art.record, func(m map[string]any) { m["signature"] = "" })},
		{"signature of another artifact", edit(t, art.record, func(m map[string]any) {
			var p map[string]any
			_ = json.Unmarshal(art.page, &p)
			m["signature"] = p["signature"]
		})},
		{"trailing data", append(bytes.Clone(art.record), []byte(` {}`)...)},
		{"two artifacts", append(bytes.Clone(art.record), art.record...)},
		{"truncated", art.record[:len(art.record)-1]},
		{"too long", append(bytes.Clone(art.record), bytes.Repeat([]byte(" "), MaxArtifactLen)...)},
		{"duplicate member", bytes.Replace(art.record, []byte(`{"type":"memory.record",`), []byte(`{"type":"memory.page","type":"memory.record",`), 1)},
		{"duplicate data, the signed one last", dupFirst(t, art.page, "data", `[]`)},
		{"duplicate record, the signed one last", dupFirst(t, art.record, "record", `{"id":"mem_forged"}`)},
		{"duplicate nested member", bytes.Replace(art.record, []byte(`"subject":`), []byte(`"subject":"user:666","subject":`), 1)},
	} {
		if v := Verify(key, tc.b); v.Holds || v.Reason == "" {
			t.Errorf("%s: %+v", tc.name, v)
		}
	}
}

// dupFirst puts a forged member before the signed one of the same name.
func dupFirst(t *testing.T, b []byte, name, forged string) []byte {
	t.Helper()
	if b[0] != '{' {
		t.Fatal("not an object")
	}
	out := append([]byte(`{"`+name+`":`+forged+`,`), b[1:]...)
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVerifyAcrossStores: an artifact checks with the verifier key alone,
// not the store that issued it (a fresh reader of the same key).
func TestVerifyAcrossStores(t *testing.T) {
	_, recKey, _ := ed25519.GenerateKey(nil)
	f := newFixtureKeyed(t, memstore.New(nil), nil, recKey)
	art := issueArtifacts(t, f)
	reader, err := audit.OpenReader(t.Context(), memstore.New(nil), recKey.Public().(ed25519.PublicKey), &audit.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range art.all() {
		if v := Verify(reader.VerifierKey(), a.b); !v.Holds {
			t.Errorf("%s with the key of a fresh reader: %+v", a.name, v)
		}
	}
}
