package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/countersign/countersign/internal/jcsenc"
)

// The canonicalization used for entries reproduces every RFC 8785 vector of
// the ADP conformance suite (copied into testdata/adp, see its README).
func TestJCSVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/adp/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors struct {
		Canonicalization []struct {
			Input     json.RawMessage `json:"input"`
			Canonical string          `json:"canonical"`
		} `json:"canonicalization"`
		SHA256 []struct {
			Input  string `json:"input"`
			SHA256 string `json:"sha256"`
		} `json:"sha256"`
	}
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors.Canonicalization) != 10 {
		t.Fatalf("%d canonicalization vectors, want 10", len(vectors.Canonicalization))
	}
	for i, v := range vectors.Canonicalization {
		got, err := jcs.Transform(v.Input)
		if err != nil {
			t.Errorf("vector %d: %v", i, err)
			continue
		}
		if string(got) != v.Canonical {
			t.Errorf("vector %d: got %s, want %s", i, got, v.Canonical)
		}
		// Objects go through the same path as Record.Data.
		if firstNonSpace(v.Input) == '{' {
			c, err := canonicalData(v.Input)
			if err != nil || string(c) != v.Canonical {
				t.Errorf("vector %d as data: got %s, %v", i, c, err)
			}
		}
		// Strings go through the hand-written string encoder too.
		var s string
		if firstNonSpace(v.Input) == '"' && json.Unmarshal(v.Input, &s) == nil {
			if got := jcsenc.AppendString(nil, s); string(got) != v.Canonical {
				t.Errorf("vector %d as string: got %s", i, got)
			}
		}
	}
	for i, v := range vectors.SHA256 {
		sum := sha256.Sum256([]byte(v.Input))
		if hex.EncodeToString(sum[:]) != v.SHA256 {
			t.Errorf("sha256 vector %d mismatch", i)
		}
	}
}

// jcsBody is the slow, obviously-correct canonical body: json.Marshal then
// RFC 8785.
func jcsBody(t testing.TB, e *Entry) []byte {
	t.Helper()
	b, err := json.Marshal(struct {
		Seq       uint64          `json:"seq"`
		At        string          `json:"at"`
		Type      string          `json:"type"`
		IntentID  string          `json:"intentId,omitempty"`
		Actor     Actor           `json:"actor"`
		RequestID string          `json:"requestId,omitempty"`
		Rationale string          `json:"rationale,omitempty"`
		Data      json.RawMessage `json:"data,omitempty"`
		Prev      string          `json:"prev"`
	}{e.Seq, e.At, e.Type, e.IntentID, e.Actor, e.RequestID, e.Rationale, e.Data, e.Prev})
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBodyMatchesJCS(t *testing.T) {
	tricky := []string{
		"", "plain", "quote\"back\\slash", "ctl\x00\x01\x07\x08\t\n\x0b\x0c\r\x1f\x7f",
		"<html>&amp;", "line\u2028sep\u2029", "é😀דּ", "\ufeffbom", "/slash/",
	}
	for i, s := range tricky {
		for j := range 4 {
			r := testRecord(i*4 + j)
			e := Entry{
				Seq: uint64(i*4+j) + 1, At: "2026-11-22T10:00:00.123456Z", Type: r.Type + s,
				IntentID: r.IntentID, Actor: Actor{Kind: r.Actor.Kind, ID: r.Actor.ID + s},
				RequestID: r.RequestID, Rationale: s, Prev: strings.Repeat("ab", 32),
			}
			if r.Data != nil {
				d, err := canonicalData(r.Data)
				if err != nil {
					t.Fatal(err)
				}
				e.Data = d
			}
			got, err := appendBody(nil, &e)
			if err != nil {
				t.Fatal(err)
			}
			if want := jcsBody(t, &e); !bytes.Equal(got, want) {
				t.Errorf("string %q record %d:\n got %s\nwant %s", s, j, got, want)
			}
		}
	}
}

func TestScanBody(t *testing.T) {
	l := newTestLog(t, newMem(t))
	appendN(t, l, 12, 12)
	for e, err := range l.Entries(t.Context(), 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		body := jcsBody(t, &e)
		seq, prev, err := scanBody(body)
		if err != nil || seq != e.Seq || string(prev) != e.Prev {
			t.Errorf("scanBody(%s) = %d, %s, %v", body, seq, prev, err)
		}
	}
	bad := []string{
		``, `{}`, `[]`, `{"seq":1}`, `{"prev":"` + strings.Repeat("0", 64) + `"}`,
		`{"seq":01,"prev":"` + strings.Repeat("0", 64) + `"}`,
		`{"seq":1,"seq":2,"prev":"` + strings.Repeat("0", 64) + `"}`,
		`{"seq":1,"prev":"` + strings.Repeat("0", 63) + `"}`,
		`{"a":{"b":"}"},"seq":1,"prev":"` + strings.Repeat("0", 64) + `"`,
		`{"a":"unterminated,"seq":1}`,
		`{"seq":99999999999999999999,"prev":"` + strings.Repeat("0", 64) + `"}`,
	}
	for _, b := range bad {
		if _, _, err := scanBody([]byte(b)); err == nil {
			t.Errorf("scanBody(%s) succeeded", b)
		}
	}
	// A member inside data named like ours is not mistaken for ours.
	b := `{"data":{"prev":"x","seq":7},"prev":"` + strings.Repeat("1", 64) + `","seq":3}`
	if seq, prev, err := scanBody([]byte(b)); err != nil || seq != 3 || prev[0] != '1' {
		t.Errorf("scanBody with decoy members = %d, %s, %v", seq, prev, err)
	}
}

func TestChainVerifier(t *testing.T) {
	ctx := t.Context()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 50, 10)
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Entries as a client sees them: through JSON.
	var served []Entry
	for e, err := range l.Entries(ctx, 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(e)
		var got Entry
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		served = append(served, got)
	}
	for _, sigs := range []bool{false, true} {
		c := NewChainVerifier(l.PublicKey(), sigs)
		for _, e := range served {
			if err := c.Add(e); err != nil {
				t.Fatalf("Add(%d): %v", e.Seq, err)
			}
		}
		if c.Size() != 50 {
			t.Fatalf("Size = %d", c.Size())
		}
		if err := c.VerifyCheckpoint(l.VerifierKey(), cp); err != nil {
			t.Fatal(err)
		}
	}

	edit := func(seq int, f func(*Entry)) []Entry {
		out := append([]Entry(nil), served...)
		f(&out[seq-1])
		return out
	}
	forged := base64.RawURLEncoding.EncodeToString(make([]byte, 64))
	tests := []struct {
		name    string
		entries []Entry
		sigs    bool
		seq     uint64 // 0: all verify
	}{
		{"type edited", edit(17, func(e *Entry) { e.Type = "payment.refunded" }), false, 17},
		{"data edited", edit(9, func(e *Entry) { e.Data = json.RawMessage(`{"z":8}`) }), false, 9},
		{"data reformatted", edit(9, func(e *Entry) {
			e.Data = json.RawMessage("{ \"ok\" : true ,\"z\":8, \"amount\":{\"value\":\"8.00\",\"currency\":\"EUR\"}}")
		}), true, 0},
		{"at edited", edit(3, func(e *Entry) { e.At = "2026-11-22T10:00:00.000000Z" }), false, 3},
		{"hash edited", edit(30, func(e *Entry) { e.Hash = strings.Repeat("0", 64) }), false, 30},
		{"hash uppercased", edit(30, func(e *Entry) { e.Hash = strings.ToUpper(e.Hash) }), false, 30},
		{"prev edited", edit(2, func(e *Entry) { e.Prev = served[2].Hash }), false, 2},
		{"gap", append(append([]Entry(nil), served[:5]...), served[6:]...), false, 6},
		{"sig forged, not checked", edit(40, func(e *Entry) { e.Sig = forged }), false, 0},
		{"sig forged", edit(40, func(e *Entry) { e.Sig = forged }), true, 40},
		// Entries carry no signature of their own: the checkpoint covers them.
		{"no sig", served, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewChainVerifier(l.PublicKey(), tt.sigs)
			var err error
			for _, e := range tt.entries {
				if err = c.Add(e); err != nil {
					break
				}
			}
			if tt.seq == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkTamperSeq(t, err, tt.seq)
			if c.Size() != tt.seq-1 {
				t.Errorf("Size after failure = %d, want %d", c.Size(), tt.seq-1)
			}
		})
	}

	// A checkpoint for a different tree does not match.
	c := NewChainVerifier(nil, false)
	for _, e := range served[:49] {
		if err := c.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.VerifyCheckpoint(l.VerifierKey(), cp); err == nil {
		t.Error("checkpoint for 50 entries matched 49")
	}
	if c.Root() == (tlog.Hash{}) {
		t.Error("zero root")
	}
}

func FuzzCanonicalBody(f *testing.F) {
	f.Add(uint64(1), "gate.decision", "agent", "ak_1", "", "", "", []byte(nil))
	f.Add(uint64(42), "payment.settled", "system", "settle", "int_1", "req_\"x\"", "why\n\u2028", []byte(`{"b":[1,2.50,{"y":null}],"a":"é"}`))
	f.Add(uint64(1<<53), "t", "operator", "\x00\x1f", "<>", "&", "😀", []byte(`{"😀":1,"דּ":2,"n":1e21}`))
	f.Fuzz(func(t *testing.T, seq uint64, typ, kind, id, intent, req, rationale string, data []byte) {
		e := Entry{
			Seq: seq, At: "2026-11-22T10:00:00.123456Z", Type: typ, IntentID: intent,
			Actor: Actor{Kind: kind, ID: id}, RequestID: req, Rationale: rationale,
			Prev: strings.Repeat("0", 64),
		}
		if seq > 1 {
			e.Prev = strings.Repeat("0f", 32)
		}
		if len(data) > 0 {
			d, err := canonicalData(data)
			if err != nil {
				return
			}
			e.Data = d
		}
		if checkEntryFields(&e) != nil {
			return
		}
		if !utf8.ValidString(typ + kind + id + intent + req + rationale) {
			t.Fatal("checkEntryFields accepted invalid UTF-8")
		}
		body, err := appendBody(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if want := jcsBody(t, &e); !bytes.Equal(body, want) {
			t.Fatalf("appendBody differs from RFC 8785:\n got %s\nwant %s", body, want)
		}
		got, err := decodeBody(seq, body)
		if err != nil {
			t.Fatalf("decodeBody(%s): %v", body, err)
		}
		if !entriesEqual(got, e) {
			t.Fatalf("decodeBody round trip: got %+v, want %+v", got, e)
		}
		s, prev, err := scanBody(body)
		if err != nil || s != seq || string(prev) != e.Prev {
			t.Fatalf("scanBody(%s) = %d, %s, %v", body, s, prev, err)
		}
	})
}

func entriesEqual(a, b Entry) bool {
	return a.Seq == b.Seq && a.At == b.At && a.Type == b.Type && a.IntentID == b.IntentID &&
		a.Actor == b.Actor && a.RequestID == b.RequestID && a.Rationale == b.Rationale &&
		bytes.Equal(a.Data, b.Data) && a.Prev == b.Prev && a.Hash == b.Hash && a.Sig == b.Sig
}

// FuzzDecodeEntry feeds arbitrary bytes to everything that parses stored or
// served entries. Nothing may panic; a stored value that decodes must
// re-encode to itself, and the Hashes-depth scanner must read it the same
// way as the full decoder. Unless raw is set, the harness frames body with
// its correct hash, so that the fuzzer reaches the body parsers instead of
// stopping at the hash check.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(uint64(1), []byte(`{"actor":{"id":"ak_1","kind":"agent"},"at":"2026-11-22T10:00:00.123456Z","prev":"`+strings.Repeat("0", 64)+`","seq":1,"type":"t"}`), false)
	f.Add(uint64(3), []byte(`{"seq":3}`), false)
	f.Add(uint64(3), []byte{storedSigned}, true)
	f.Add(uint64(3), []byte{storedCovered}, true)
	f.Add(uint64(2), []byte(`{"actor":{"id":"ak_1","kind":"agent"},"at":"2026-11-22T10:00:00.123456Z","prev":"`+strings.Repeat("0", 64)+`","seq":2,"type":"t"}`), false)
	pub := testKey(1).Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, seq uint64, body []byte, raw bool) {
		v := body
		if !raw {
			// Odd seqs framed as entries signed on their own, even ones as
			// entries the checkpoint covers: both stored formats.
			var sig []byte
			if seq%2 == 1 {
				sig = make([]byte, 64)
			}
			v = encodeStored(body, sha256.Sum256(body), sig)
		}
		if _, _, b, err := storedParts(seq, v); err == nil {
			// The one-pass reader reads what json.Unmarshal reads.
			if fast, ok := parseCanonicalBody(b); ok {
				var slow bodyFields
				if err := json.Unmarshal(b, &slow); err != nil || !reflect.DeepEqual(fast, slow) {
					t.Fatalf("parseCanonicalBody(%s) = %+v; json.Unmarshal: %+v, %v", b, fast, slow, err)
				}
			}
		}
		if e, err := decodeStored(seq, v); err == nil {
			hash, sig, body, _ := storedParts(seq, v)
			re, err := appendBody(nil, &e)
			if err != nil || !bytes.Equal(re, body) {
				t.Fatalf("decoded entry re-encodes to %s, stored %s (%v)", re, body, err)
			}
			if e.Hash != hex.EncodeToString(hash) || e.Sig != encodeSig(sig) {
				t.Fatal("hash or sig not carried over")
			}
			s, prev, err := scanBody(body)
			if err != nil || s != e.Seq || string(prev) != e.Prev {
				t.Fatalf("scanBody(%s) = %d, %s, %v; decodeBody saw %d, %s", body, s, prev, err, e.Seq, e.Prev)
			}
			// Served as JSON and re-verified by a client, the entry hashes
			// the same (its data is canonical in the store only if Full
			// verification would pass, hence the condition).
			if c, err := canonicalData(e.Data); len(e.Data) == 0 || (err == nil && bytes.Equal(c, e.Data)) {
				b, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				var served Entry
				if err := json.Unmarshal(b, &served); err != nil {
					t.Fatal(err)
				}
				if h, err := checkServedEntry(pub, served, false); err != nil || !bytes.Equal(h[:], hash) {
					t.Fatalf("served entry %s does not re-verify: %v", b, err)
				}
			}
			err = checkFull(pub, fullJob{seq: seq, value: v})
			if !raw && seq%2 == 1 && err == nil {
				t.Fatal("checkFull accepted a zero signature")
			}
		}
		// The same bytes as a served entry.
		var e Entry
		if json.Unmarshal(body, &e) == nil {
			_, _ = checkServedEntry(pub, e, true)
			_ = NewChainVerifier(nil, false).Add(e)
		}
		_, _, _ = scanBody(body)
	})
}

func FuzzCursor(f *testing.F) {
	l, err := newLog(newMem(f), testKey(1).Public().(ed25519.PublicKey), &Options{Origin: "fuzz.example/audit"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("", uint64(0))
	f.Add(l.CursorAfter(1), uint64(1))
	f.Add(l.CursorAfter(1<<63), uint64(42))
	f.Add("AAAAAAAAAAAAAAAA", uint64(7))
	f.Fuzz(func(t *testing.T, s string, seq uint64) {
		if got, err := l.decodeCursor(s); err == nil {
			if l.CursorAfter(got) != s {
				t.Fatalf("cursor %q decodes to %d, which encodes to %q", s, got, l.CursorAfter(got))
			}
		}
		c := l.CursorAfter(seq)
		if got, err := l.decodeCursor(c); err != nil || got != seq {
			t.Fatalf("CursorAfter(%d) = %q decodes to %d, %v", seq, c, got, err)
		}
	})
}

func FuzzCheckpoint(f *testing.F) {
	f.Add("example.com/log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n")
	f.Add("countersign/0011223344556677\n123\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\next\n")
	f.Add("o\n01\nAAAA\n")
	f.Add("o\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— o AAAAAA==\n")
	vkey, err := note.NewEd25519VerifierKey("fuzz.example/audit", testKey(1).Public().(ed25519.PublicKey))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		origin, size, root, err := parseCheckpoint(text)
		if err == nil {
			formatted := formatCheckpoint(origin, size, root)
			if !strings.HasPrefix(text, formatted) {
				t.Fatalf("checkpoint %q re-formats to %q", text, formatted)
			}
		}
		// As a whole signed note, against a real verifier: never accepted.
		err = VerifyCheckpoint(vkey, Checkpoint{Origin: origin, TreeSize: size, Note: text})
		if !errors.Is(err, ErrTampered) {
			t.Fatal("unsigned checkpoint verified")
		}
	})
}
