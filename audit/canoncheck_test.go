package audit

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// canonSeeds are inputs for isCanonical: canonical data of the shapes the
// record holds, and near misses of each rule.
var canonSeeds = []string{
	`{}`,
	`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
	`{"amount":{"currency":"USD","minor":1250},"outcome":"allow","reasons":[]}`,
	`{"a":"line\nbreak \"quoted\" back\\slash \u001f"}`,
	`{"a":"caf\u00e9","b":"☃"}`,
	`{"a":-12,"b":0,"c":123456789012345}`,
	`{"a":1.5}`, `{"a":1e3}`, `{"a":-0}`, `{"a":01}`, `{"a":1234567890123456}`,
	`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{ "a":1}`, `{"a" :1}`, `{"a":1 }`,
	`{"a":"\u0041"}`, `{"a":"\u000a"}`, `{"a":"\u001F"}`, `{"a":"\/"}`, `{"a":"\ud83d\ude00"}`,
	`{"é":1}`, `{"a\"b":1}`, `[1,2]`, `"x"`, `{"a":[{"z":1,"y":2}]}`, `{"a":tru}`, `{"a":1,}`,
	"{\"a\":\"\x7f\"}", "{\"a\":\"\xff\"}", "{\"a\":\"\u2028\"}",
}

func FuzzIsCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonical(b) {
			return
		}
		c, err := jcs.Transform(b)
		if err != nil || !bytes.Equal(c, b) {
			t.Fatalf("isCanonical(%q) = true, but jcs.Transform gives %q, %v", b, c, err)
		}
	})
}

// TestIsCanonicalFastPath checks that the fast path is taken for what the
// record holds: the canonical form of typical entry data passes, and each
// near miss is refused.
func TestIsCanonicalFastPath(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"stage":"policy","outcome":"allow","reasons":[],"amount":{"minor":1250,"currency":"USD"},"tags":["a","b"],"ok":true,"n":null}`, true},
		{`{"receipt":{"id":"rcpt_01","settledAt":"2026-11-25T10:00:00.123456Z","terms":{"rail":"sandbox-card"}}}`, true},
		{`{"purpose":"invoice \"1182\"\nsecond line","payee":"acct:seller.example"}`, true},
		{`{"note":"crème brûlée ☃"}`, true},
		{`{"a":1.5}`, false},
		{`{"a":1e3}`, true}, // JCS writes 1000
		{`{"a":1234567890123456}`, false},
		{`{"é":1}`, false},
	} {
		c, err := jcs.Transform([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := isCanonical(c); got != tc.want {
			t.Errorf("isCanonical(%s) = %v, want %v", c, got, tc.want)
		}
	}
	for _, s := range []string{`{"b":1,"a":2}`, `{ "a":1}`, `{"a":01}`, `{"a":-0}`, `{"a":"\u0041"}`, `{"a":"\/"}`, `{"a":1,"a":1}`} {
		if isCanonical([]byte(s)) {
			t.Errorf("isCanonical(%s) = true, want false", s)
		}
	}
}

func FuzzFastCanonical(f *testing.F) {
	for _, s := range canonSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{
		`{"z":1,"a":{"y":[{"b":2,"a":1}],"x":"<&>"}}`,
		`{"s":"\u003cb\u003e \u0026 \u2028\u2029 \u00e9 \u0007 \u001f \/","n":-5}`,
		` { "b" : [ 1 , 2 ] , "a" : null } `,
		`{"a":{"a":{"a":{"a":{"a":{}}}}}}`,
		`{"a":1,"b":2,"a":3}`, `{"a":"\ud800"}`, `{"a":[1,2,}`, `{"a":"x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := fastCanonical(b)
		if !ok {
			return
		}
		want, err := jcs.Transform(b)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("fastCanonical(%q) = %q, but jcs.Transform gives %q, %v", b, got, want, err)
		}
	})
}

// TestFastCanonicalTakesRecordData checks that the fast path answers for
// what encoding/json makes of record data, escapes included.
func TestFastCanonicalTakesRecordData(t *testing.T) {
	type amount struct {
		Minor    int64  `json:"minor"`
		Currency string `json:"currency"`
	}
	data, err := json.Marshal(struct {
		Stage   string            `json:"stage"`
		Outcome string            `json:"outcome"`
		Reasons []string          `json:"reasons"`
		Amount  amount            `json:"amount"`
		Meta    map[string]string `json:"meta"`
		Purpose string            `json:"purpose"`
		Trip    bool              `json:"tripBreaker"`
	}{"policy", "allow", []string{}, amount{1250, "USD"}, map[string]string{"b": "2", "a": "1"}, "<invoice> & \"co\"\n", false})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := fastCanonical(data)
	if !ok {
		t.Fatalf("fastCanonical refused %s", data)
	}
	want, err := jcs.Transform(data)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("fastCanonical(%s) = %s, want %s", data, got, want)
	}
}

// BenchmarkCanonicalize compares the fast path with jcs.Transform on data
// shaped like a gate.decision entry's.
func BenchmarkCanonicalize(b *testing.B) {
	data := []byte(`{"outcome":"allow","reasons":[],"mandateId":"mdt-bench","stage":"policy","route":"pay","agentKeyId":"ak_01JABCDEFGHJKMNPQRSTVWXYZ0","agent":"3f9a0c21d4e5b6a73f9a0c21d4e5b6a73f9a0c21d4e5b6a73f9a0c21d4e5b6a7","idempotencyKey":"load-3f9a0c21-12345","payee":"acct:seller.example","amount":{"minor":1,"currency":"USD"},"rail":"sandbox-card","tags":["a","b"],"policyHash":"sha256:3f9a0c21d4e5b6a73f9a0c21d4e5b6a73f9a0c21d4e5b6a73f9a0c21d4e5b6a7"}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, ok := fastCanonical(data); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("jcs", func(b *testing.B) {
		for b.Loop() {
			if _, err := jcs.Transform(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
