package audit

import (
	"bytes"
	"slices"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/jsonscan"
)

// fastCanonical returns the RFC 8785 form of b for the JSON that record
// data usually is (encoding/json output of the callers' structs: objects
// with ASCII member names in declaration order, strings, small integers,
// literals), or false when b holds anything it does not handle with
// certainty: a fraction, an exponent, an integer of more than 15 digits,
// a member name with an escape or outside ASCII, an escaped surrogate, a
// duplicate name, invalid UTF-8. The caller then uses jcs.Transform, which
// remains the reference: FuzzFastCanonical checks that whenever this
// answers, jcs.Transform gives the same bytes.
//
// It exists because Append canonicalizes every record's data inside the
// caller's transaction, where jcs.Transform (a full parse into a generic
// tree, then serialization) was about 6 % of a loaded server's CPU.
func fastCanonical(b []byte) ([]byte, bool) {
	c := canonWriter{in: b, out: make([]byte, 0, len(b))}
	c.space()
	if !c.value(0) {
		return nil, false
	}
	c.space()
	if c.i != len(b) {
		return nil, false
	}
	return c.out, true
}

type canonWriter struct {
	in  []byte
	i   int
	out []byte
}

// member is one object member: its name (raw, plain ASCII) and where its
// value starts in the input.
type member struct {
	name       []byte
	value, end int // where the value starts, and where what follows it does
}

func (c *canonWriter) space() {
	for c.i < len(c.in) {
		switch c.in[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonWriter) value(depth int) bool {
	if depth > maxCanonDepth || c.i >= len(c.in) {
		return false
	}
	switch ch := c.in[c.i]; {
	case ch == '{':
		return c.object(depth)
	case ch == '[':
		return c.array(depth)
	case ch == '"':
		return c.str()
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	case ch == '-' || ch >= '0' && ch <= '9':
		start := c.i
		s := canonScanner{b: c.in, i: c.i}
		if !s.integer() {
			return false
		}
		c.i = s.i
		c.out = append(c.out, c.in[start:c.i]...)
		return true
	}
	return false
}

// object reads the members' names and skips their values, sorts the
// members by name, then writes each value in that order, reading it again
// from where it starts.
func (c *canonWriter) object(depth int) bool {
	c.i++ // '{'
	var buf [16]member
	members := buf[:0]
	c.space()
	if c.i < len(c.in) && c.in[c.i] == '}' {
		c.i++
		c.out = append(c.out, '{', '}')
		return true
	}
	for {
		if c.i >= len(c.in) || c.in[c.i] != '"' {
			return false
		}
		s := canonScanner{b: c.in, i: c.i}
		name, ok := s.str()
		if !ok || !plainASCII(name) {
			return false
		}
		c.i = s.i
		c.space()
		if c.i >= len(c.in) || c.in[c.i] != ':' {
			return false
		}
		c.i++
		c.space()
		members = append(members, member{name: name, value: c.i})
		// Skip the value for now, in one linear pass (writing it later
		// checks it), so that no input costs more than twice its length.
		end, ok := jsonscan.ValueEnd(c.in, c.i)
		if !ok {
			return false
		}
		c.i = end
		c.space()
		members[len(members)-1].end = c.i
		if c.i >= len(c.in) {
			return false
		}
		if c.in[c.i] == '}' {
			c.i++
			break
		}
		if c.in[c.i] != ',' {
			return false
		}
		c.i++
		c.space()
	}
	slices.SortFunc(members, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	end := c.i
	c.out = append(c.out, '{')
	for k, m := range members {
		if k > 0 {
			if bytes.Equal(members[k-1].name, m.name) {
				return false // a duplicate: let the reference decide
			}
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, '"')
		c.out = append(c.out, m.name...)
		c.out = append(c.out, '"', ':')
		c.i = m.value
		if !c.value(depth + 1) {
			return false
		}
		if c.space(); c.i != m.end {
			return false // the value ended before what skip took for its end
		}
	}
	c.out = append(c.out, '}')
	c.i = end
	return true
}

func (c *canonWriter) array(depth int) bool {
	c.i++ // '['
	c.out = append(c.out, '[')
	c.space()
	if c.i < len(c.in) && c.in[c.i] == ']' {
		c.i++
		c.out = append(c.out, ']')
		return true
	}
	for {
		if !c.value(depth + 1) {
			return false
		}
		c.space()
		if c.i >= len(c.in) {
			return false
		}
		switch c.in[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
			c.space()
		case ']':
			c.i++
			c.out = append(c.out, ']')
			return true
		default:
			return false
		}
	}
}

// str writes a string as JCS does: raw characters but '"', '\' and the
// controls, those escaped as \" \\ \b \f \n \r \t or \u00xx. It reads the
// escapes encoding/json writes (\u003c, \u003e, \u0026, \u2028, \u2029)
// and any other \u escape of a character outside the surrogate range.
func (c *canonWriter) str() bool {
	c.i++ // '"'
	c.out = append(c.out, '"')
	for c.i < len(c.in) {
		ch := c.in[c.i]
		switch {
		case ch == '"':
			c.i++
			c.out = append(c.out, '"')
			return true
		case ch < 0x20:
			return false
		case ch == '\\':
			if c.i+1 >= len(c.in) {
				return false
			}
			switch e := c.in[c.i+1]; e {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.out = append(c.out, '\\', e)
				c.i += 2
			case '/':
				c.out = append(c.out, '/')
				c.i += 2
			case 'u':
				if c.i+6 > len(c.in) {
					return false
				}
				r, ok := hex4(c.in[c.i+2 : c.i+6])
				if !ok || r >= 0xd800 && r <= 0xdfff {
					return false
				}
				c.i += 6
				c.rune(r)
			default:
				return false
			}
		case ch < utf8.RuneSelf:
			c.out = append(c.out, ch)
			c.i++
		default:
			r, n := utf8.DecodeRune(c.in[c.i:])
			if r == utf8.RuneError {
				return false
			}
			c.out = append(c.out, c.in[c.i:c.i+n]...)
			c.i += n
		}
	}
	return false
}

// rune writes r, from a \u escape, as JCS does.
func (c *canonWriter) rune(r rune) {
	const hexDigits = "0123456789abcdef"
	switch r {
	case '"', '\\':
		c.out = append(c.out, '\\', byte(r))
	case '\b':
		c.out = append(c.out, '\\', 'b')
	case '\f':
		c.out = append(c.out, '\\', 'f')
	case '\n':
		c.out = append(c.out, '\\', 'n')
	case '\r':
		c.out = append(c.out, '\\', 'r')
	case '\t':
		c.out = append(c.out, '\\', 't')
	default:
		if r < 0x20 {
			c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
			return
		}
		c.out = utf8.AppendRune(c.out, r)
	}
}

func hex4(h []byte) (rune, bool) {
	var r rune
	for _, d := range h {
		r <<= 4
		switch {
		case d >= '0' && d <= '9':
			r |= rune(d - '0')
		case d >= 'a' && d <= 'f':
			r |= rune(d-'a') + 10
		case d >= 'A' && d <= 'F':
			r |= rune(d-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

func (c *canonWriter) literal(lit string) bool {
	if !bytes.HasPrefix(c.in[c.i:], []byte(lit)) {
		return false
	}
	c.i += len(lit)
	c.out = append(c.out, lit...)
	return true
}
