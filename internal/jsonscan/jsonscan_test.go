package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestValueEnd(t *testing.T) {
	for _, tc := range []struct {
		in  string
		i   int
		end int
		ok  bool
	}{
		{`"a\"b",1`, 0, 6, true},
		{`{"a":[1,{"b":"}"}]} ,`, 0, 19, true},
		{`123,4`, 0, 3, true},
		{`true}`, 0, 4, true},
		{`null`, 0, 4, true},
		{`[1, 2] `, 0, 6, true},
		{`{"a":1`, 0, 6, false},
		{`"abc`, 0, 4, false},
		{`"ab\`, 0, 4, false},
		{`x{"a":1}`, 1, 8, true},
	} {
		end, ok := ValueEnd([]byte(tc.in), tc.i)
		if end != tc.end || ok != tc.ok {
			t.Errorf("ValueEnd(%q, %d) = %d, %v; want %d, %v", tc.in, tc.i, end, ok, tc.end, tc.ok)
		}
	}
}

// FuzzValueEnd checks ValueEnd against encoding/json on valid input (the
// end it finds is where json.Decoder says the value ends) and that it
// never reads outside any input.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"}"}]}`, `"x\\\""`, ` 12 `, `[]`, `{"a":"\u0041"}`, `{"a`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		start := len(b) - len(bytes.TrimLeft(b, " \t\r\n"))
		end, ok := ValueEnd(b, start)
		if end < start || end > len(b) {
			t.Fatalf("ValueEnd(%q, %d) = %d, outside the input", b, start, end)
		}
		if !json.Valid(b) {
			return
		}
		var raw json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if !ok || !bytes.Equal(b[start:end], raw) {
			t.Fatalf("ValueEnd(%q, %d) = %d, %v: value %q, json reads %q", b, start, end, ok, b[start:end], raw)
		}
	})
}
