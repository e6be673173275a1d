// Package jcsenc writes RFC 8785 (JCS) canonical JSON directly, for the
// fixed shapes the record and the payment instruction hash and sign.
//
// A general canonicaliser (github.com/gowebpki/jcs) parses JSON and writes
// it back; for a Go value whose shape is known, appending the canonical
// bytes directly is several times cheaper and is on the hot path of every
// payment. Callers keep the general canonicaliser in their tests as the
// oracle: whatever this package writes must equal jcs.Transform of the
// same value.
package jcsenc

// AppendString appends s as an RFC 8785 string (ECMAScript
// JSON.stringify): '"' and '\' escaped, \b \t \n \f \r in short form, other
// controls as \u00xx, everything else literal. s must be valid UTF-8.
func AppendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
