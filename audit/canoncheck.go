package audit

import (
	"bytes"
	"unicode/utf8"
)

// isCanonical reports whether b is certainly in RFC 8785 form already, so
// that jcs.Transform(b) would return b unchanged. It is a fast, allocation
// free scan for the shapes the record holds (objects with ASCII member
// names, strings, small integers, literals) and answers false for anything
// it is not sure of, such as a fraction, an exponent or an integer too
// large to survive as a float64, a member name with an escape or outside
// ASCII (whose order would need UTF-16 code units), or any escape JCS
// would not write. False is not a verdict: the caller then canonicalizes
// with the jcs package and compares, as it did before. Full verification
// of the record reads every entry's data, already canonical, and this
// spares it one full parse and re-serialization per entry.
//
// FuzzIsCanonical holds it to its promise against jcs.Transform.
func isCanonical(b []byte) bool {
	c := canonScanner{b: b}
	return c.value(0) && c.i == len(b)
}

// maxCanonDepth bounds nesting, so a hostile input cannot exhaust the stack.
const maxCanonDepth = 64

type canonScanner struct {
	b []byte
	i int
}

func (c *canonScanner) value(depth int) bool {
	if depth > maxCanonDepth || c.i >= len(c.b) {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return c.object(depth)
	case ch == '[':
		return c.array(depth)
	case ch == '"':
		_, ok := c.str()
		return ok
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.integer()
	}
	return false
}

func (c *canonScanner) object(depth int) bool {
	c.i++ // '{'
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		name, ok := c.str()
		// Plain ASCII names only: then the bytes are the name, and byte
		// order is JCS's UTF-16 order. Strictly increasing also refuses
		// duplicates.
		if !ok || !plainASCII(name) || (!first && bytes.Compare(prev, name) >= 0) {
			return false
		}
		prev = name
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		if !c.value(depth + 1) {
			return false
		}
		if more, ok := c.sep('}'); !more {
			return ok
		}
	}
}

func (c *canonScanner) array(depth int) bool {
	c.i++ // '['
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth + 1) {
			return false
		}
		if more, ok := c.sep(']'); !more {
			return ok
		}
	}
}

// sep consumes what follows a member or an element: a ',' (more is true)
// or the closing byte (more is false, ok is true). Anything else, or the
// end of the input, is not canonical (both false).
func (c *canonScanner) sep(closing byte) (more, ok bool) {
	if c.i >= len(c.b) {
		return false, false
	}
	switch c.b[c.i] {
	case ',':
		c.i++
		return true, true
	case closing:
		c.i++
		return false, true
	}
	return false, false
}

// str scans a string at c.i and returns its raw content (between the
// quotes). It accepts only what JCS writes: raw characters except '"',
// '\' and controls, which must be escaped as \" \\ \b \f \n \r \t or, for
// the other controls, \u00xx in lowercase hex; valid UTF-8 throughout.
func (c *canonScanner) str() ([]byte, bool) {
	c.i++ // '"'
	start := c.i
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			s := c.b[start:c.i]
			c.i++
			return s, true
		case ch < 0x20:
			return nil, false
		case ch == '\\':
			if c.i+1 >= len(c.b) {
				return nil, false
			}
			switch c.b[c.i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				if c.i+6 > len(c.b) || !controlEscape(c.b[c.i+2:c.i+6]) {
					return nil, false
				}
				c.i += 6
			default:
				return nil, false
			}
		case ch < utf8.RuneSelf:
			c.i++
		default:
			r, n := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError {
				return nil, false
			}
			c.i += n
		}
	}
	return nil, false
}

// controlEscape reports whether h (the four hex digits of a \u escape) is
// how JCS writes a control character that has no short escape: lowercase
// hex, below 0x20, not \b \f \n \r \t.
func controlEscape(h []byte) bool {
	r, ok := hex4(h)
	if !ok || r >= 0x20 || bytes.ContainsAny(h, "ABCDEF") {
		return false
	}
	switch r {
	case '\b', '\f', '\n', '\r', '\t':
		return false // JCS writes these short
	}
	return true
}

// integer scans -?(0|[1-9][0-9]*) of at most 15 digits: a number JCS
// writes exactly as given (a float64 holds every such integer exactly,
// and ECMAScript prints it without exponent). "-0" is written "0" by JCS.
func (c *canonScanner) integer() bool {
	start := c.i
	if c.b[c.i] == '-' {
		c.i++
	}
	digits := c.i
	for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
		c.i++
	}
	n := c.i - digits
	switch {
	case n == 0 || n > 15:
		return false
	case c.b[digits] == '0' && (n > 1 || digits > start):
		return false // leading zero, or -0
	}
	if c.i < len(c.b) {
		switch c.b[c.i] {
		case '.', 'e', 'E':
			return false
		}
	}
	return true
}

func (c *canonScanner) literal(lit string) bool {
	if !bytes.HasPrefix(c.b[c.i:], []byte(lit)) {
		return false
	}
	c.i += len(lit)
	return true
}

// plainASCII reports whether name holds only printable ASCII without '\'.
func plainASCII(name []byte) bool {
	for _, ch := range name {
		if ch < 0x20 || ch >= 0x7f || ch == '\\' {
			return false
		}
	}
	return true
}
