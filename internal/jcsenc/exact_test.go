package jcsenc

import (
	"errors"
	"testing"
)

func TestTransformRefusesInexactNumbers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" for refused
	}{
		{`{"n":1}`, `{"n":1}`},
		{`{"n":9007199254740991}`, `{"n":9007199254740991}`},
		{`{"n":9007199254740992}`, `{"n":9007199254740992}`}, // 2^53 is a double
		{`{"n":9007199254740993}`, ""},
		{`{"n":9223372036854775808}`, ""},
		{`{"n":0.1}`, `{"n":0.1}`},
		{`{"n":1e21}`, `{"n":1e+21}`},
		{`{"n":0.30000000000000000001}`, ""},
		{`{"n":-0}`, `{"n":0}`},
		{`{"n":0.000e5}`, `{"n":0}`},
		{`{"n":1e-400}`, ""},
		{`{"n":1e400}`, ""},
		{`{"a":[1,{"b":123456789012345678901234567890}]}`, ""},
		{`{"s":"123456789012345678901234567890"}`, `{"s":"123456789012345678901234567890"}`},
	} {
		got, err := Transform([]byte(tc.in))
		if tc.want == "" {
			if !errors.Is(err, ErrInexactNumber) {
				t.Errorf("Transform(%s) = %s, %v; want ErrInexactNumber", tc.in, got, err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("Transform(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func FuzzTransform(f *testing.F) {
	for _, s := range []string{`{"n":1}`, `{"n":9223372036854775808}`, `[0.1,1e400,-0]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := Transform(b)
		if err != nil {
			return
		}
		// What it accepts canonicalises again to itself, with no loss.
		again, err := Transform(out)
		if err != nil || string(again) != string(out) {
			t.Fatalf("Transform(%q) = %q, then %q, %v", b, out, again, err)
		}
	})
}
