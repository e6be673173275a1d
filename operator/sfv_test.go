package operator

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDictionary(t *testing.T) {
	i := func(n int64) item { return item{kind: kindInteger, num: n} }
	str := func(s string) item { return item{kind: kindString, str: s} }
	tok := func(s string) item { return item{kind: kindToken, str: s} }
	bs := func(s string) item { return item{kind: kindBytes, bytes: []byte(s)} }
	boolean := func(b bool) item { return item{kind: kindBoolean, flag: b} }
	tests := []struct {
		name string
		in   string
		want []member
	}{
		{"empty", "", nil},
		{"only spaces", "   ", nil},
		{"one integer", "a=1", []member{{"a", i(1)}}},
		{"no whitespace", "a=1,b=2", []member{{"a", i(1)}, {"b", i(2)}}},
		{"extra whitespace", "a=1 ,  b=2", []member{{"a", i(1)}, {"b", i(2)}}},
		{"tabs around comma", "a=1\t,\tb=2", []member{{"a", i(1)}, {"b", i(2)}}},
		{"leading and trailing spaces", "  a=1  ", []member{{"a", i(1)}}},
		{"trailing tab", "a=1\t", []member{{"a", i(1)}}},
		{"order kept", "b=1, a=2", []member{{"b", i(1)}, {"a", i(2)}}},
		{"negative", "a=-42", []member{{"a", i(-42)}}},
		{"minus zero", "a=-0", []member{{"a", i(0)}}},
		{"leading zeros", "a=007", []member{{"a", i(7)}}},
		{"15 digits", "a=999999999999999", []member{{"a", i(999999999999999)}}},
		{"-15 digits", "a=-999999999999999", []member{{"a", i(-999999999999999)}}},
		{"string", `a="hello world"`, []member{{"a", str("hello world")}}},
		{"empty string", `a=""`, []member{{"a", str("")}}},
		{"escaped quote and backslash", `a="x\"y\\z"`, []member{{"a", str(`x"y\z`)}}},
		{"string with comma", `a="x, b=2"`, []member{{"a", str("x, b=2")}}},
		{"token", "a=foo123/456", []member{{"a", tok("foo123/456")}}},
		{"star token", "a=*foo:bar", []member{{"a", tok("*foo:bar")}}},
		{"bytes", "a=:aGVsbG8=:", []member{{"a", bs("hello")}}},
		{"empty bytes", "a=::", []member{{"a", bs("")}}},
		{"boolean true", "a=?1", []member{{"a", boolean(true)}}},
		{"boolean false", "a=?0", []member{{"a", boolean(false)}}},
		{"bare key", "a", []member{{"a", boolean(true)}}},
		{"bare keys", "a, b=2, c", []member{{"a", boolean(true)}, {"b", i(2)}, {"c", boolean(true)}}},
		{"key characters", "*a_b-c.d*9=1", []member{{"*a_b-c.d*9", i(1)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDictionary(tt.in)
			if err != nil {
				t.Fatalf("parseDictionary(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(member{}, item{})); diff != "" {
				t.Errorf("parseDictionary(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseDictionaryRefuses(t *testing.T) {
	tests := []struct {
		name, in, msg string
	}{
		{"leading tab", "\ta=1", "key must start"},
		{"trailing comma", "a=1,", "trailing comma"},
		{"trailing comma and space", "a=1, ", "trailing comma"},
		{"leading comma", ",a=1", "key must start"},
		{"double comma", "a=1,,b=2", "key must start"},
		{"no comma", "a=1 b=2", "want a comma"},
		{"semicolon separator", "a=1;b=2", "parameters"},
		{"upper-case key", "A=1", "key must start"},
		{"digit-first key", "1a=1", "key must start"},
		{"space before =", "a =1", "want a comma"},
		{"space after =", "a= 1", "not the start"},
		{"missing value", "a=", "value is missing"},
		{"duplicate key", "a=1, a=2", "given twice"},
		{"duplicate bare key", "a, a", "given twice"},
		{"16 digits", "a=1234567890123456", "more than 15 digits"},
		{"-16 digits", "a=-1234567890123456", "more than 15 digits"},
		{"lone minus", "a=-", "digit must follow"},
		{"minus letter", "a=-x", "digit must follow"},
		{"decimal", "a=1.5", "decimals"},
		{"unterminated string", `a="abc`, "closing quote"},
		{"bad escape", `a="a\n"`, "may be escaped"},
		{"escape at end", `a="a\`, "ends in a backslash"},
		{"control char in string", "a=\"a\x01\"", "control character"},
		{"tab in string", "a=\"a\tb\"", "control character"},
		{"DEL in string", "a=\"a\x7f\"", "control character"},
		{"non-ASCII", "a=\"é\"", "outside ASCII"},
		{"unterminated bytes", "a=:aGVsbG8=", "closing ':'"},
		{"bytes with space", "a=:aGVs bG8=:", "outside base64"},
		{"base64url in bytes", "a=:a-_A:", "outside base64"},
		{"bytes without padding", "a=:aGVsbG8:", "canonical"},
		{"bytes with non-zero pad bits", "a=:aGVsbG9=:", "canonical"},
		{"bytes with bad length", "a=:aGVsbG8==:", "canonical"},
		{"bad boolean", "a=?2", "?0 or ?1"},
		{"question mark alone", "a=?", "?0 or ?1"},
		{"parameters", "a=1;q=2", "parameters"},
		{"bare key parameters", "a;q", "parameters"},
		{"inner list", "a=(1 2)", "inner lists"},
		{"date (RFC 9651)", "a=@1659578233", "not the start"},
		{"display string (RFC 9651)", `a=%"x"`, "not the start"},
		{"garbage after", "a=1 )", "want a comma"},
		{"token then quote", `a=abc"`, "want a comma"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDictionary(tt.in)
			if err == nil {
				t.Fatalf("parseDictionary(%q) = %+v, want an error", tt.in, got)
			}
			if !errors.Is(err, errSyntax) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("parseDictionary(%q) = %v, want errSyntax with %q", tt.in, err, tt.msg)
			}
		})
	}
}

func TestSerializeDictionary(t *testing.T) {
	got, err := serializeDictionary([]member{
		{"a", item{kind: kindInteger, num: -5}},
		{"b", item{kind: kindString, str: `q"\`}},
		{"c", item{kind: kindToken, str: "*t/1"}},
		{"d", item{kind: kindBytes, bytes: []byte("hello")}},
		{"e", item{kind: kindBoolean, flag: true}},
		{"f", item{kind: kindBoolean, flag: false}},
	})
	if err != nil {
		t.Fatal(err)
	}
	const want = `a=-5, b="q\"\\", c=*t/1, d=:aGVsbG8=:, e, f=?0`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for name, m := range map[string]member{
		"bad key":           {"A", item{kind: kindInteger}},
		"integer too large": {"a", item{kind: kindInteger, num: maxInteger + 1}},
		"integer too small": {"a", item{kind: kindInteger, num: -maxInteger - 1}},
		"string with tab":   {"a", item{kind: kindString, str: "\t"}},
		"string non-ASCII":  {"a", item{kind: kindString, str: "é"}},
		"empty token":       {"a", item{kind: kindToken}},
		"token with space":  {"a", item{kind: kindToken, str: "a b"}},
		"digit token":       {"a", item{kind: kindToken, str: "1a"}},
		"no kind":           {"a", item{}},
	} {
		if s, err := serializeDictionary([]member{m}); err == nil {
			t.Errorf("%s: serialized to %q", name, s)
		}
	}
}

// FuzzParseDictionary checks the generic layer: parsing never panics, and
// whatever parses serializes, and parses back to the same members.
func FuzzParseDictionary(f *testing.F) {
	for _, s := range []string{
		"", "a=1", `a="x\"y", b=:aGVsbG8=:, c=?0, d, e=*tok/1:2`, "a=1;b", "a=(1)",
		"a=-999999999999999", "a=1.5", " a=1 ,\tb=2\t",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := parseDictionary(s)
		if err != nil {
			return
		}
		out, err := serializeDictionary(ms)
		if err != nil {
			t.Fatalf("parsed %q to %+v but cannot serialize it: %v", s, ms, err)
		}
		again, err := parseDictionary(out)
		if err != nil {
			t.Fatalf("serialized %q to %q, which does not parse: %v", s, out, err)
		}
		if diff := cmp.Diff(ms, again, cmp.AllowUnexported(member{}, item{})); diff != "" {
			t.Fatalf("%q → %q changed the value (-first +second):\n%s", s, out, diff)
		}
	})
}
