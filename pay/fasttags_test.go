package pay

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestFastTagsMatchValidator checks the byte-loop tags against the regular
// expressions go-playground/validator uses for the same tags.
func TestFastTagsMatchValidator(t *testing.T) {
	res := map[string]*regexp.Regexp{
		"printascii":  regexp.MustCompile(`^[\x20-\x7E]*$`),
		"hexadecimal": regexp.MustCompile(`^(0[xX])?[0-9a-fA-F]+$`),
		"jwt":         regexp.MustCompile(`^[A-Za-z0-9-_]+\.[A-Za-z0-9-_]+\.[A-Za-z0-9-_]*$`),
	}
	alphabet := []byte("aZ09-_.xX0\x1f\x7f \xff~")
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []string{"", "0x", "0X1", "x", "a.b.", "a..c", ".b.c", "a.b.c.d", "a.b", "ab.cd.ef", "0xg"}
	for range 200000 {
		b := make([]byte, rng.IntN(9))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for tag, re := range res {
		for _, s := range cases {
			if got, want := fastTags[tag](s), re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the validator's expression says %v", tag, s, got, want)
			}
		}
	}
}
