package gate

import (
	"strings"
	"testing"
)

func TestMatchPayee(t *testing.T) {
	tests := []struct {
		pattern, payee string
		want           bool
	}{
		{"*", "acct:anyone.example", true},
		{"*", "", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "acct:a.example.com", true},
		{"*.example.com", "acct:a.b.example.com", true},
		{"*.example.com", "acct:alice@shop.example.com", true},
		{"*.example.com", "acct:x-1.example.com", true},
		{"*.example.com", "acct:x_1.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "acct:example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "acct:badexample.com", false},
		{"*.example.com", ".example.com", false},
		{"*.example.com", "acct:.example.com", false},
		{"*.example.com", "acct:x@.example.com", false},
		{"*.example.com", "acct:a.example.com.evil", false},
		{"*.example.com", "acct:a.example.comx", false},
		{"*.example.com", "acct:a.EXAMPLE.com", false}, // case-sensitive
		{"acct:seller.example", "acct:seller.example", true},
		{"acct:seller.example", "acct:seller.example2", false},
		{"acct:seller.example", "acct:Seller.example", false},
		{"acct:seller.example", "x.acct:seller.example", false},
		{"*.", "acct:a.", false},
		{"*", "*", true},
		{"a*", "a*", true}, // not a pattern: only equal strings match
		{"*a", "ba", false},
		{"**.example.com", "acct:*.example.com", false},
	}
	for _, tt := range tests {
		if got := MatchPayee(tt.pattern, tt.payee); got != tt.want {
			t.Errorf("MatchPayee(%q, %q) = %v, want %v", tt.pattern, tt.payee, got, tt.want)
		}
	}
}

func TestValidPayee(t *testing.T) {
	for s, want := range map[string]bool{
		"acct:seller.example":                                 true,
		"acct:alice@shop.example":                             true,
		"iban:DE89370400440532013000":                         true,
		"eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb": true,
		"acct:juliet%40capulet.example@shop.example":          true,
		"did:web:example.com":                                 true,
		"x+y.z-1:a_b~c":                                       true,
		"a:b":                                                 true,
		"acct:" + strings.Repeat("x", 250):                    true,
		"acct:" + strings.Repeat("x", 251):                    false,
		"":                                                    false,
		"seller.example":                                      false,
		":seller":                                             false,
		"acct:":                                               false,
		"Acct:seller":                                         false,
		"1acct:seller":                                        false,
		"acct:seller example":                                 false,
		"acct:seller/path":                                    false,
		"acct:seller?q=1":                                     false,
		"acct:seller#f":                                       false,
		"acct:*.example":                                      false,
		"acct:sellér":                                         false,
		"acct:seller\n":                                       false,
		strings.Repeat("s", 33) + ":x":                        false,
	} {
		if got := ValidPayee(s); got != want {
			t.Errorf("ValidPayee(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidPayeePattern(t *testing.T) {
	for s, want := range map[string]bool{
		"*":                             true,
		"*.example.com":                 true,
		"*.x":                           true,
		"*.acct:shop":                   true,
		"acct:seller.example":           true,
		"*.":                            false,
		"*..example":                    false,
		"*example.com":                  false,
		"**.example":                    false,
		"*.exa*mple":                    false,
		"*.a/b":                         false,
		"":                              false,
		"*." + strings.Repeat("x", 253): true,
		"*." + strings.Repeat("x", 254): false,
	} {
		if got := ValidPayeePattern(s); got != want {
			t.Errorf("ValidPayeePattern(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestValidRail(t *testing.T) {
	for s, want := range map[string]bool{
		"sandbox-card": true, "acp": true, "ucp": true, "a": true, "0x": true, "a.b_c-d": true,
		strings.Repeat("r", 64): true,
		strings.Repeat("r", 65): false,
		"":                      false, "Card": false, "-card": false, ".card": false, "card rail": false, "card/x": false,
	} {
		if got := ValidRail(s); got != want {
			t.Errorf("ValidRail(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestLowerASCII(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "abc": "abc", "ABC": "abc", "aBc:D@E.com": "abc:d@e.com", "ÀB": "Àb", "\u212a": "\u212a",
	} {
		if got := lowerASCII(in); got != want {
			t.Errorf("lowerASCII(%q) = %q, want %q", in, got, want)
		}
	}
}
