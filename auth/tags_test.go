package auth

import (
	"slices"
	"strings"
	"testing"
)

func TestParseTags(t *testing.T) {
	many := make([]string, 20)
	for i := range many {
		many[i] = "t" + string(rune('a'+i))
	}
	tests := []struct {
		header string
		want   []string
	}{
		{"", nil},
		{"   ", nil},
		{",,,", nil},
		{"team=growth, project=alpha", []string{"team=growth", "project=alpha"}},
		{"  team=growth  ,\tproject=alpha\t", []string{"team=growth", "project=alpha"}},
		{"a,b,a,B", []string{"a", "b", "B"}},
		{"ok, bad tag, also/bad, é, good", []string{"ok", "good"}},
		{"A-Z_a.z:0=9", []string{"A-Z_a.z:0=9"}},
		{strings.Repeat("x", 64), []string{strings.Repeat("x", 64)}},
		{strings.Repeat("x", 65) + ",y", []string{"y"}},
		{"a;b", nil},
		{"a\x00,b", []string{"b"}},
		{strings.Join(many, ","), many[:MaxTags]},
		// Duplicates and bad tokens do not count towards the 16.
		{"bad tag,a,a,a," + strings.Join(many, ","), append([]string{"a"}, many[:MaxTags-1]...)},
	}
	for _, tt := range tests {
		got := ParseTags(tt.header)
		if !slices.Equal(got, tt.want) {
			t.Errorf("ParseTags(%q) = %q, want %q", tt.header, got, tt.want)
		}
		if got == nil && tt.want != nil || got != nil && len(got) == 0 {
			t.Errorf("ParseTags(%q) = %#v: want nil exactly when empty", tt.header, got)
		}
	}
}

func TestValidTag(t *testing.T) {
	for s, want := range map[string]bool{
		"": false, "a": true, "team=growth": true, "a b": false, "a,b": false, "ü": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "x/y": false, "v1.2:3_4-5": true,
	} {
		if got := ValidTag(s); got != want {
			t.Errorf("ValidTag(%q) = %v", s, got)
		}
	}
}

// FuzzParseTags: ParseTags never panics, its output is always valid
// (valid tags, distinct, at most MaxTags), and it is idempotent.
func FuzzParseTags(f *testing.F) {
	f.Add("team=growth, project=alpha")
	f.Fuzz(func(t *testing.T, header string) {
		out := ParseTags(header)
		if len(out) > MaxTags {
			t.Fatalf("%d tags", len(out))
		}
		for i, tag := range out {
			if !ValidTag(tag) {
				t.Fatalf("invalid tag %q", tag)
			}
			if slices.Contains(out[:i], tag) {
				t.Fatalf("tag %q twice", tag)
			}
			if !strings.Contains(header, tag) {
				t.Fatalf("tag %q is not in the header", tag)
			}
		}
		if again := ParseTags(strings.Join(out, ",")); !slices.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q", header, out, again)
		}
	})
}
