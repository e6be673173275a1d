package operator

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// This file holds the subset of RFC 8941 (Structured Field Values for HTTP)
// that the Svc-Operator header needs: a Dictionary whose member values are
// bare Items of type Integer, String, Token, Byte Sequence or Boolean.
//
// The parser follows the algorithms of RFC 8941 §4.2 step by step, and
// refuses rather than half-supports what the header never uses:
//
//   - Parameters (";a=1") and Inner Lists ("(1 2)") are refused. Nothing in
//     them would be covered by the signature, so accepting them would only
//     give an attacker room to smuggle meaning past it.
//   - Decimals are refused for the same reason: no member is a decimal.
//   - A key given twice is refused. RFC 8941 lets the last value win; in a
//     security header two values for one key mean a confused client, or two
//     field lines glued together by something in the path, and either way
//     we cannot know which value the signer meant.
//   - Byte Sequences must be canonical base64 with "=" padding and zero pad
//     bits. RFC 8941 §4.2.7 says parsers SHOULD NOT fail on missing padding;
//     we deviate because every serializer emits padding (§4.1.8) and a
//     signature header should have exactly one spelling.
//
// Everything else is as RFC 8941 says: input is ASCII only; leading and
// trailing spaces are ignored; members are separated by a comma with
// optional spaces or tabs around it; a trailing comma is an error; a key
// without "=" is Boolean true; Integers have at most 15 digits and may have
// leading zeros; Strings hold only printable ASCII and escape only '"' and
// '\'.

// itemKind is the type of a bare item.
type itemKind uint8

const (
	kindInteger itemKind = iota + 1
	kindString
	kindToken
	kindBytes
	kindBoolean
)

func (k itemKind) String() string {
	switch k {
	case kindInteger:
		return "an integer"
	case kindString:
		return "a string"
	case kindToken:
		return "a token"
	case kindBytes:
		return "a byte sequence"
	case kindBoolean:
		return "a boolean"
	}
	return "an unknown type"
}

// item is a bare item. Exactly one of the value fields is meaningful,
// according to kind; str holds both String and Token values.
type item struct {
	kind  itemKind
	num   int64
	str   string
	bytes []byte
	flag  bool
}

// member is one dictionary member, in the order it appeared.
type member struct {
	key string
	val item
}

// maxInteger is the largest magnitude of an RFC 8941 Integer (15 digits).
const maxInteger = 999_999_999_999_999

// errSyntax is wrapped by every parse error of this file.
var errSyntax = errors.New("not an RFC 8941 dictionary")

// syntaxError reports a parse failure at byte offset pos. Messages name the
// position and the rule broken, never the input's bytes, so they are safe
// to show a client and to log.
func syntaxError(pos int, format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", errSyntax, pos, fmt.Sprintf(format, args...))
}

// sfParser walks an input string. pos only moves forward.
type sfParser struct {
	s   string
	pos int
}

func (p *sfParser) eof() bool  { return p.pos >= len(p.s) }
func (p *sfParser) peek() byte { return p.s[p.pos] }

func (p *sfParser) skipSP() {
	for !p.eof() && p.peek() == ' ' {
		p.pos++
	}
}

func (p *sfParser) skipOWS() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.pos++
	}
}

// parseDictionary parses s as an RFC 8941 Dictionary (§4.2 with
// header_type "dictionary", and §4.2.2), within the subset described at the
// top of this file. An empty (or all-space) s is an empty dictionary.
func parseDictionary(s string) ([]member, error) {
	for i := 0; i < len(s); i++ {
		if s[i] > 0x7f {
			return nil, syntaxError(i, "a byte outside ASCII")
		}
	}
	p := &sfParser{s: s}
	p.skipSP()
	var out []member
	for !p.eof() {
		start := p.pos
		key, err := p.parseKey()
		if err != nil {
			return nil, err
		}
		var val item
		if !p.eof() && p.peek() == '=' {
			p.pos++
			if val, err = p.parseItem(); err != nil {
				return nil, err
			}
		} else {
			// A bare key is Boolean true; RFC 8941 would read parameters
			// next, which this subset refuses.
			val = item{kind: kindBoolean, flag: true}
			if err := p.refuseParameters(); err != nil {
				return nil, err
			}
		}
		for _, m := range out {
			if m.key == key {
				return nil, syntaxError(start, "member %.32q given twice", key)
			}
		}
		out = append(out, member{key: key, val: val})
		p.skipOWS()
		if p.eof() {
			break
		}
		if p.peek() != ',' {
			return nil, syntaxError(p.pos, "want a comma between members")
		}
		p.pos++
		p.skipOWS()
		if p.eof() {
			return nil, syntaxError(p.pos, "a trailing comma")
		}
	}
	// §4.2 step 4-5: trailing spaces are discarded, anything else is an
	// error. The member loop above has already consumed trailing OWS.
	p.skipSP()
	if !p.eof() {
		return nil, syntaxError(p.pos, "unexpected characters after the dictionary")
	}
	return out, nil
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }

// isTChar reports whether c is an RFC 9110 tchar.
func isTChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isKeyChar(c byte) bool {
	return isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*'
}

// parseKey implements §4.2.3.3.
func (p *sfParser) parseKey() (string, error) {
	if p.eof() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return "", syntaxError(p.pos, "a key must start with a lower-case letter or '*'")
	}
	start := p.pos
	for !p.eof() && isKeyChar(p.peek()) {
		p.pos++
	}
	return p.s[start:p.pos], nil
}

// parseItem implements §4.2.3.1 for a member value, refusing inner lists
// and parameters.
func (p *sfParser) parseItem() (item, error) {
	if !p.eof() && p.peek() == '(' {
		return item{}, syntaxError(p.pos, "inner lists are not supported")
	}
	it, err := p.parseBareItem()
	if err != nil {
		return item{}, err
	}
	return it, p.refuseParameters()
}

func (p *sfParser) refuseParameters() error {
	if !p.eof() && p.peek() == ';' {
		return syntaxError(p.pos, "parameters are not supported")
	}
	return nil
}

// parseBareItem implements §4.2.3.1 for the supported types.
func (p *sfParser) parseBareItem() (item, error) {
	if p.eof() {
		return item{}, syntaxError(p.pos, "a value is missing")
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.parseInteger()
	case c == '"':
		return p.parseString()
	case isAlpha(c) || c == '*':
		return p.parseToken(), nil
	case c == ':':
		return p.parseBytes()
	case c == '?':
		return p.parseBoolean()
	default:
		return item{}, syntaxError(p.pos, "not the start of an integer, string, token, byte sequence or boolean")
	}
}

// parseInteger implements §4.2.4 for Integers; a Decimal is refused.
func (p *sfParser) parseInteger() (item, error) {
	start := p.pos
	neg := false
	if p.peek() == '-' {
		neg = true
		p.pos++
	}
	if p.eof() || !isDigit(p.peek()) {
		return item{}, syntaxError(p.pos, "a digit must follow '-'")
	}
	digits := p.pos
	for !p.eof() && isDigit(p.peek()) {
		p.pos++
		if p.pos-digits > 15 {
			return item{}, syntaxError(start, "an integer has more than 15 digits")
		}
	}
	if !p.eof() && p.peek() == '.' {
		return item{}, syntaxError(p.pos, "decimals are not supported")
	}
	n, err := strconv.ParseInt(p.s[digits:p.pos], 10, 64)
	if err != nil { // unreachable: at most 15 ASCII digits
		return item{}, syntaxError(start, "bad integer")
	}
	if neg {
		n = -n
	}
	return item{kind: kindInteger, num: n}, nil
}

// parseString implements §4.2.5.
func (p *sfParser) parseString() (item, error) {
	start := p.pos
	p.pos++ // the opening quote
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		p.pos++
		switch {
		case c == '\\':
			if p.eof() {
				return item{}, syntaxError(p.pos, "a string ends in a backslash")
			}
			next := p.peek()
			if next != '"' && next != '\\' {
				return item{}, syntaxError(p.pos, "only '\"' and '\\' may be escaped in a string")
			}
			p.pos++
			b.WriteByte(next)
		case c == '"':
			return item{kind: kindString, str: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return item{}, syntaxError(p.pos-1, "a control character in a string")
		default:
			b.WriteByte(c)
		}
	}
	return item{}, syntaxError(start, "a string without its closing quote")
}

// parseToken implements §4.2.6; the caller has checked the first byte.
func (p *sfParser) parseToken() item {
	start := p.pos
	p.pos++
	for !p.eof() && (isTChar(p.peek()) || p.peek() == ':' || p.peek() == '/') {
		p.pos++
	}
	return item{kind: kindToken, str: p.s[start:p.pos]}
}

// strictStd is standard base64 that insists on padding and zero pad bits,
// so every byte string has exactly one accepted spelling.
var strictStd = base64.StdEncoding.Strict()

// parseBytes implements §4.2.7, more strictly (see the top of this file).
func (p *sfParser) parseBytes() (item, error) {
	start := p.pos
	p.pos++ // the opening colon
	end := strings.IndexByte(p.s[p.pos:], ':')
	if end < 0 {
		return item{}, syntaxError(start, "a byte sequence without its closing ':'")
	}
	enc := p.s[p.pos : p.pos+end]
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return item{}, syntaxError(p.pos+i, "a byte sequence holds a character outside base64")
		}
	}
	b, err := strictStd.DecodeString(enc)
	if err != nil {
		// The decoder's error is dropped: its offset counts from the
		// colon, and the position reported here is the one that helps.
		return item{}, syntaxError(start, "a byte sequence is not canonical padded base64")
	}
	p.pos += end + 1
	return item{kind: kindBytes, bytes: b}, nil
}

// parseBoolean implements §4.2.8.
func (p *sfParser) parseBoolean() (item, error) {
	p.pos++ // '?'
	if !p.eof() {
		switch p.peek() {
		case '0':
			p.pos++
			return item{kind: kindBoolean, flag: false}, nil
		case '1':
			p.pos++
			return item{kind: kindBoolean, flag: true}, nil
		}
	}
	return item{}, syntaxError(p.pos, "a boolean must be ?0 or ?1")
}

// serializeDictionary implements RFC 8941 §4.1.2 for the subset. It returns
// an error for a value RFC 8941 cannot represent (a bad key, an integer out
// of range, a string with non-printable bytes, a bad token), so a caller
// never puts a header on the wire that a conforming parser would refuse.
func serializeDictionary(ms []member) (string, error) {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(", ")
		}
		if !validKey(m.key) {
			return "", fmt.Errorf("%w: key %.32q", errSyntax, m.key)
		}
		b.WriteString(m.key)
		if m.val.kind == kindBoolean && m.val.flag {
			continue // §4.1.2: a true boolean is written as the bare key
		}
		b.WriteByte('=')
		if err := serializeItem(&b, m.val); err != nil {
			return "", fmt.Errorf("%w: member %q: %w", errSyntax, m.key, err)
		}
	}
	return b.String(), nil
}

func validKey(k string) bool {
	if k == "" || !(isLCAlpha(k[0]) || k[0] == '*') {
		return false
	}
	for i := 1; i < len(k); i++ {
		if !isKeyChar(k[i]) {
			return false
		}
	}
	return true
}

func serializeItem(b *strings.Builder, it item) error {
	switch it.kind {
	case kindInteger:
		if it.num > maxInteger || it.num < -maxInteger {
			return errors.New("integer out of range")
		}
		b.WriteString(strconv.FormatInt(it.num, 10))
	case kindString:
		b.WriteByte('"')
		for i := 0; i < len(it.str); i++ {
			c := it.str[i]
			if c < 0x20 || c > 0x7e {
				return errors.New("string with a non-printable byte")
			}
			if c == '"' || c == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(c)
		}
		b.WriteByte('"')
	case kindToken:
		if it.str == "" || !(isAlpha(it.str[0]) || it.str[0] == '*') {
			return errors.New("bad token")
		}
		for i := 1; i < len(it.str); i++ {
			if c := it.str[i]; !isTChar(c) && c != ':' && c != '/' {
				return errors.New("bad token")
			}
		}
		b.WriteString(it.str)
	case kindBytes:
		b.WriteByte(':')
		b.WriteString(base64.StdEncoding.EncodeToString(it.bytes))
		b.WriteByte(':')
	case kindBoolean:
		if it.flag {
			b.WriteString("?1")
		} else {
			b.WriteString("?0")
		}
	default:
		return errors.New("unknown item type")
	}
	return nil
}
