package gate

import "strings"

// MaxPayeeLen is the longest payee reference or pattern, in bytes.
const MaxPayeeLen = 255

// MaxRailLen is the longest rail name, in bytes.
const MaxRailLen = 64

// ValidPayee reports whether s is a payee reference: 1 to 255 bytes of the
// form scheme ":" id, where
//
//	scheme = a lower-case ASCII letter, then up to 31 of [a-z0-9+.-]
//	id     = one or more of [A-Za-z0-9._~@:+%-]
//
// Examples: "acct:seller.example", "acct:alice@shop.example",
// "iban:DE89370400440532013000", "eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb".
// The characters '/', '?', '#', '*' and whitespace are excluded so that a
// payee is an opaque identifier whose suffix means something (no URL query
// can end in ".example.com"), and so that no reference looks like a pattern.
// Payees are compared byte for byte: the gate never normalises case.
func ValidPayee(s string) bool {
	if len(s) == 0 || len(s) > MaxPayeeLen {
		return false
	}
	scheme, id, ok := strings.Cut(s, ":")
	if !ok || !validScheme(scheme) || id == "" {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isIDChar(id[i]) {
			return false
		}
	}
	return true
}

// ValidPayeePattern reports whether s is an entry a mandate's payees (or a
// deny list) may hold: a payee reference ([ValidPayee]), the pattern "*",
// or a pattern "*." + suffix where suffix is one or more id characters
// ([A-Za-z0-9._~@:+%-]) not starting with '.'; at most 255 bytes.
func ValidPayeePattern(s string) bool {
	if s == "*" {
		return true
	}
	suffix, ok := strings.CutPrefix(s, "*.")
	if !ok {
		return ValidPayee(s)
	}
	if suffix == "" || len(s) > MaxPayeeLen || suffix[0] == '.' {
		return false
	}
	for i := 0; i < len(suffix); i++ {
		if !isIDChar(suffix[i]) {
			return false
		}
	}
	return true
}

// MatchPayee reports whether the mandate entry pattern admits payee.
//
//   - "*" matches every non-empty payee.
//   - "*.example.com" matches a payee that ends in ".example.com" preceded
//     by at least one label character [A-Za-z0-9_-]: "acct:a.example.com"
//     and "acct:alice@shop.a.example.com" match (any depth), while
//     "acct:example.com", "acct:badexample.com" and "acct:x@.example.com"
//     do not. The pattern is a suffix of the whole reference, so it matches
//     whatever the scheme.
//   - Anything else matches only the identical string (case-sensitive).
//
// The gate matches deny-list entries with both sides lower-cased, so that
// changing case cannot dodge a deny entry; mandate entries match exactly, so
// that changing case cannot widen a mandate.
func MatchPayee(pattern, payee string) bool {
	if payee == "" {
		return false
	}
	if pattern == "*" {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok && strings.HasPrefix(suffix, ".") && len(suffix) > 1 {
		n := len(payee) - len(suffix)
		return n >= 1 && strings.HasSuffix(payee, suffix) && isLabelChar(payee[n-1])
	}
	return pattern == payee
}

// ValidRail reports whether s is a rail name: 1 to 64 bytes of lower-case
// ASCII letters, digits, '-', '.' and '_', starting with a letter or digit
// (the grammar of settle.ValidateName).
func ValidRail(s string) bool {
	if len(s) == 0 || len(s) > MaxRailLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '.' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

func validScheme(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func isIDChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._~@:+%-", c) >= 0
}

func isLabelChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// lowerASCII lower-cases ASCII letters only; other bytes are kept, so a
// multi-byte character can never fold into an ASCII one.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
