package pay

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// updateSeeds rewrites the seed corpora in testdata/fuzz from the seeds
// below: go test -run TestFuzzSeeds -update-seeds ./pay/
var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed corpora in testdata/fuzz")

// decodeSeeds are bodies for FuzzDecodeInstruction, good and bad.
func decodeSeeds(t testing.TB) [][]byte {
	f := newFixture(t)
	signed, err := json.Marshal(f.signed(t))
	if err != nil {
		t.Fatal(err)
	}
	body := validBody(testAgent)
	seeds := []string{
		string(signed),
		body,
		" \n" + body + "\n",
		strings.Replace(body, `1250`, `1.0`, 1),
		strings.Replace(body, `1250`, `1e3`, 1),
		strings.Replace(body, `1250`, `-0`, 1),
		strings.Replace(body, `1250`, `9007199254740991`, 1),
		strings.Replace(body, `1250`, `9007199254740992`, 1),
		strings.Replace(body, `1250`, `"1250"`, 1),
		strings.Replace(body, `"payee":"acct:seller.example"`, `"payee":"a:b","p\u0061yee":"acct:seller.example"`, 1),
		strings.Replace(body, `"invoice 1182"`, `"\ud83d\ude00 \u00e9 <&>"`, 1),
		strings.Replace(body, `"invoice 1182"`, `"\ud800"`, 1),
		strings.Replace(body, `"rail":`, `"x":{"y":[1,{"z":null}]},"rail":`, 1),
		strings.Replace(body, `"USD"`, `"eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"`, 1),
		body + "{}",
		body[:len(body)/2],
		`{}`, `[]`, `null`, ``, `{"amount":null}`, `{"amount":{"minor":[]}}`,
	}
	out := make([][]byte, len(seeds))
	for i, s := range seeds {
		out[i] = []byte(s)
	}
	return out
}

func FuzzDecodeInstruction(f *testing.F) {
	for _, s := range decodeSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeInstruction(b)
		if json.Valid(b) {
			// The scan of a valid body answers what the Decoder does.
			slow, serr := decodeInstruction(b, false)
			if !reflect.DeepEqual(in, slow) || !reflect.DeepEqual(err, serr) {
				t.Fatalf("fast path: %+v, %v\nDecoder: %+v, %v", in, err, slow, serr)
			}
		}
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || len(me.Fields) == 0 || in != nil {
				t.Fatalf("error %v (%T), instruction %v", err, err, in)
			}
			if len(me.Fields) > maxFieldErrors {
				t.Fatalf("%d field errors", len(me.Fields))
			}
			return
		}
		// Whatever is accepted is valid, re-encodes, and decodes to the
		// same value; and it can be canonicalised for signing.
		if err := in.Check(); err != nil {
			t.Fatalf("accepted but Check fails: %v", err)
		}
		out, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeInstruction(out)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", out, err)
		}
		if !reflect.DeepEqual(in, back) {
			t.Fatalf("round trip changed the value:\n%+v\n%+v", in, back)
		}
		s1, err1 := SigningBytes(in)
		s2, err2 := SigningBytes(back)
		if err1 != nil || err2 != nil || string(s1) != string(s2) {
			t.Fatalf("signing bytes differ or fail: %v %v", err1, err2)
		}
	})
}

// TestFuzzSeeds checks that the seed corpora in testdata/fuzz are the ones
// the seed functions produce, and rewrites them with -update-seeds.
func TestFuzzSeeds(t *testing.T) {
	corpora := map[string][][]any{}
	for _, s := range decodeSeeds(t) {
		corpora["FuzzDecodeInstruction"] = append(corpora["FuzzDecodeInstruction"], []any{s})
	}
	for _, pair := range envelopeSeeds(t) {
		corpora["FuzzVerifyEnvelope"] = append(corpora["FuzzVerifyEnvelope"], []any{pair[0], pair[1]})
	}
	for name, seeds := range corpora {
		dir := filepath.Join("testdata", "fuzz", name)
		for i, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				switch v := a.(type) {
				case []byte:
					fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
				case string:
					fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
				}
			}
			path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
			if *updateSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update-seeds)", err)
			}
			if string(got) != b.String() {
				t.Errorf("%s is stale (run with -update-seeds)", path)
			}
		}
	}
}
