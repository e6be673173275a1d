package identity

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/gowebpki/jcs"
)

// Canonicalize returns the ADP canonical form (SPEC §4, RFC 8785 JCS) of v:
// v is marshalled with encoding/json and the result canonicalized with
// [CanonicalJSON]. Unset optional fields of the document types are omitted
// by their struct tags, which is ADP's "drop undefined" rule; an explicit
// JSON null is kept. NaN and ±Inf are refused (encoding/json cannot write
// them). Pass raw JSON to CanonicalJSON rather than as a []byte, which would
// be marshalled as a base64 string.
func Canonicalize(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("identity: canonicalize: %w", err)
	}
	return CanonicalJSON(raw)
}

// CanonicalJSON rewrites a JSON text in RFC 8785 canonical form using
// github.com/gowebpki/jcs: object keys sorted by UTF-16 code unit, numbers
// in ECMAScript Number::toString form, minimal string escaping, no
// whitespace. Duplicate object keys, lone surrogate escapes, invalid UTF-8
// and numbers outside the IEEE 754 double range are refused with an error
// matching [ErrMalformed].
func CanonicalJSON(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("identity: canonical JSON: %w: %w", ErrMalformed, err)
	}
	return out, nil
}

// The verifier does not use jcs.Transform on its hot path: it parses the
// untrusted input once into a jsonValue tree (strictly: duplicate keys,
// invalid UTF-8, lone surrogates and excess nesting refused), validates and
// decodes that tree, and writes the canonical bytes straight from it. The
// writer below must agree byte for byte with jcs.Transform; the tests and
// FuzzCanonicalJSON hold it to that.

type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// jsonValue is one parsed JSON value. text is a string's decoded value or a
// number's literal; keys and vals hold an object's members in document
// order (keys[i] names vals[i]); vals alone holds an array's elements.
type jsonValue struct {
	kind jsonKind
	text string
	keys []string
	vals []jsonValue
}

// member returns the value of the member named key, or nil.
func (v *jsonValue) member(key string) *jsonValue {
	for i, k := range v.keys {
		if k == key {
			return &v.vals[i]
		}
	}
	return nil
}

// parseStrictJSON parses one JSON text. Strings are substrings of src where
// no unescaping was needed, so converting the input to a string once avoids
// a copy per field.
func parseStrictJSON(src string, maxDepth int) (jsonValue, error) {
	p := jsonParser{src: src, maxDepth: maxDepth}
	// The stacks hold the open containers' members at once; 24 covers a
	// disclosure without regrowing.
	p.keyStack = make([]string, 0, 24)
	p.valStack = make([]jsonValue, 0, 24)
	v, err := p.value()
	if err != nil {
		return jsonValue{}, err
	}
	p.skipSpace()
	if p.pos != len(p.src) {
		return jsonValue{}, p.errorf("unexpected data after the JSON value")
	}
	return v, nil
}

type jsonParser struct {
	src      string
	pos      int
	depth    int
	maxDepth int

	// Members and elements are gathered on these stacks while a container
	// is parsed (nested containers push above it and pop before it goes
	// on), then copied into exactly sized slices cut from the arenas. A
	// disclosure has a few dozen containers; this makes their storage two
	// or three allocations instead of a growing slice per container.
	keyStack []string
	valStack []jsonValue
	keyArena []string
	valArena []jsonValue
}

// arenaChunk sizes an arena allocation: about one value per 24 bytes of
// input (a typical disclosure envelope is 1.5 KiB holding some 55 values),
// at least 16 and at most 1024 values at a time.
func (p *jsonParser) arenaChunk(n int) int {
	return max(n, min(16+len(p.src)/24, 1024))
}

func (p *jsonParser) takeKeys(n int) []string {
	if cap(p.keyArena)-len(p.keyArena) < n {
		p.keyArena = make([]string, 0, p.arenaChunk(n))
	}
	i := len(p.keyArena)
	p.keyArena = p.keyArena[:i+n]
	return p.keyArena[i : i+n : i+n]
}

func (p *jsonParser) takeVals(n int) []jsonValue {
	if cap(p.valArena)-len(p.valArena) < n {
		p.valArena = make([]jsonValue, 0, p.arenaChunk(n))
	}
	i := len(p.valArena)
	p.valArena = p.valArena[:i+n]
	return p.valArena[i : i+n : i+n]
}

// popContainer moves the members pushed since keyBase/valBase into v
// (arrays push no keys, so the two stacks have their own bases).
func (p *jsonParser) popContainer(v *jsonValue, keyBase, valBase int, withKeys bool) {
	if withKeys {
		v.keys = p.takeKeys(len(p.keyStack) - keyBase)
		copy(v.keys, p.keyStack[keyBase:])
		clear(p.keyStack[keyBase:])
		p.keyStack = p.keyStack[:keyBase]
	}
	v.vals = p.takeVals(len(p.valStack) - valBase)
	copy(v.vals, p.valStack[valBase:])
	clear(p.valStack[valBase:]) // drop references so the stack does not pin them
	p.valStack = p.valStack[:valBase]
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return &schemaError{msg: fmt.Sprintf("invalid JSON at offset %d: ", p.pos) + fmt.Sprintf(format, args...)}
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.src) {
		switch p.src[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (jsonValue, error) {
	p.skipSpace()
	if p.pos >= len(p.src) {
		return jsonValue{}, p.errorf("unexpected end of input")
	}
	switch c := p.src[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.str()
		return jsonValue{kind: kindString, text: s}, err
	case c == 't':
		return p.literal("true", kindTrue)
	case c == 'f':
		return p.literal("false", kindFalse)
	case c == 'n':
		return p.literal("null", kindNull)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return jsonValue{}, p.errorf("unexpected character %q", p.src[p.pos])
}

func (p *jsonParser) literal(word string, k jsonKind) (jsonValue, error) {
	if len(p.src)-p.pos < len(word) || p.src[p.pos:p.pos+len(word)] != word {
		return jsonValue{}, p.errorf("invalid literal")
	}
	p.pos += len(word)
	return jsonValue{kind: k}, nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return p.errorf("nesting deeper than %d", p.maxDepth)
	}
	return nil
}

func (p *jsonParser) object() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	p.pos++ // '{'
	v := jsonValue{kind: kindObject}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		p.depth--
		return v, nil
	}
	keyBase, valBase := len(p.keyStack), len(p.valStack)
	for {
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != '"' {
			return jsonValue{}, p.errorf("expected an object key")
		}
		key, err := p.str()
		if err != nil {
			return jsonValue{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.src) || p.src[p.pos] != ':' {
			return jsonValue{}, p.errorf("expected ':'")
		}
		p.pos++
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		p.keyStack = append(p.keyStack, key)
		p.valStack = append(p.valStack, val)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return jsonValue{}, p.errorf("unterminated object")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] == '}' {
			p.pos++
			break
		}
		return jsonValue{}, p.errorf("expected ',' or '}'")
	}
	p.popContainer(&v, keyBase, valBase, true)
	if dup, ok := duplicateKey(v.keys); ok {
		return jsonValue{}, &schemaError{msg: fmt.Sprintf("duplicate object key %s", quoteForError(dup))}
	}
	p.depth--
	return v, nil
}

// duplicateKey reports a key that occurs twice. Duplicate keys are refused
// outright: parsers disagree on which occurrence wins, which would let one
// document mean two things to two verifiers.
func duplicateKey(keys []string) (string, bool) {
	if len(keys) <= 12 {
		for i := 1; i < len(keys); i++ {
			for j := 0; j < i; j++ {
				if keys[i] == keys[j] {
					return keys[i], true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, ok := seen[k]; ok {
			return k, true
		}
		seen[k] = struct{}{}
	}
	return "", false
}

func (p *jsonParser) array() (jsonValue, error) {
	if err := p.enter(); err != nil {
		return jsonValue{}, err
	}
	p.pos++ // '['
	v := jsonValue{kind: kindArray}
	p.skipSpace()
	if p.pos < len(p.src) && p.src[p.pos] == ']' {
		p.pos++
		p.depth--
		return v, nil
	}
	base := len(p.valStack)
	for {
		val, err := p.value()
		if err != nil {
			return jsonValue{}, err
		}
		p.valStack = append(p.valStack, val)
		p.skipSpace()
		if p.pos >= len(p.src) {
			return jsonValue{}, p.errorf("unterminated array")
		}
		if p.src[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		return jsonValue{}, p.errorf("expected ',' or ']'")
	}
	p.popContainer(&v, 0, base, false)
	p.depth--
	return v, nil
}

// number scans an RFC 8259 number and keeps its literal.
func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	s := p.src
	if s[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(s) && s[p.pos] == '0':
		p.pos++
	case p.pos < len(s) && s[p.pos] >= '1' && s[p.pos] <= '9':
		for p.pos < len(s) && isDigit(s[p.pos]) {
			p.pos++
		}
	default:
		return jsonValue{}, p.errorf("invalid number")
	}
	if p.pos < len(s) && s[p.pos] == '.' {
		p.pos++
		if p.pos >= len(s) || !isDigit(s[p.pos]) {
			return jsonValue{}, p.errorf("invalid number")
		}
		for p.pos < len(s) && isDigit(s[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(s) && (s[p.pos] == 'e' || s[p.pos] == 'E') {
		p.pos++
		if p.pos < len(s) && (s[p.pos] == '+' || s[p.pos] == '-') {
			p.pos++
		}
		if p.pos >= len(s) || !isDigit(s[p.pos]) {
			return jsonValue{}, p.errorf("invalid number")
		}
		for p.pos < len(s) && isDigit(s[p.pos]) {
			p.pos++
		}
	}
	return jsonValue{kind: kindNumber, text: s[start:p.pos]}, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// str scans a string starting at the opening quote and returns its value.
func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	s := p.src
	for p.pos < len(s) {
		c := s[p.pos]
		switch {
		case c == '"':
			out := s[start:p.pos]
			p.pos++
			return out, nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRuneInString(s[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 in string")
			}
			p.pos += size
		}
	}
	return "", p.errorf("unterminated string")
}

// strSlow finishes a string that contains escapes; p.pos is at the first
// backslash and start is the first byte of the string's content.
func (p *jsonParser) strSlow(start int) (string, error) {
	s := p.src
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, s[start:p.pos]...)
	for p.pos < len(s) {
		c := s[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c == '\\':
			if p.pos+1 >= len(s) {
				return "", p.errorf("unterminated escape")
			}
			e := s[p.pos+1]
			p.pos += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				switch {
				case r >= 0xD800 && r <= 0xDBFF:
					// A high surrogate must be followed by an escaped low
					// surrogate; a lone surrogate has no UTF-8 form and is
					// refused (RFC 8785 §3.2.2.2), as jcs.Transform does.
					if p.pos+1 >= len(s) || s[p.pos] != '\\' || s[p.pos+1] != 'u' {
						return "", p.errorf("lone surrogate escape")
					}
					p.pos += 2
					lo, err := p.hex4()
					if err != nil {
						return "", err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return "", p.errorf("invalid surrogate pair")
					}
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				case r >= 0xDC00 && r <= 0xDFFF:
					return "", p.errorf("lone surrogate escape")
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return "", p.errorf("invalid escape")
			}
		case c < 0x20:
			return "", p.errorf("control character in string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			p.pos++
		default:
			r, size := utf8.DecodeRuneInString(s[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errorf("invalid UTF-8 in string")
			}
			buf = append(buf, s[p.pos:p.pos+size]...)
			p.pos += size
		}
	}
	return "", p.errorf("unterminated string")
}

func (p *jsonParser) hex4() (rune, error) {
	if len(p.src)-p.pos < 4 {
		return 0, p.errorf("short unicode escape")
	}
	var r rune
	for i := range 4 {
		c := p.src[p.pos+i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorf("invalid unicode escape")
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, nil
}

// appendCanonical appends the RFC 8785 form of v. It fails only for a number
// outside the IEEE 754 double range, which has no canonical form.
func appendCanonical(b []byte, v *jsonValue) ([]byte, error) {
	var err error
	switch v.kind {
	case kindNull:
		return append(b, "null"...), nil
	case kindTrue:
		return append(b, "true"...), nil
	case kindFalse:
		return append(b, "false"...), nil
	case kindNumber:
		return appendCanonicalNumber(b, v.text)
	case kindString:
		return jcsenc.AppendString(b, v.text), nil
	case kindArray:
		b = append(b, '[')
		for i := range v.vals {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendCanonical(b, &v.vals[i]); err != nil {
				return b, err
			}
		}
		return append(b, ']'), nil
	}
	// Object: members in UTF-16 code-unit order of their keys. Small
	// objects (every object of a disclosure) sort on the stack.
	var small [16]int
	var order []int
	if len(v.keys) <= len(small) {
		order = small[:len(v.keys)]
	} else {
		order = make([]int, len(v.keys))
	}
	for i := range order {
		order[i] = i
	}
	if len(order) <= len(small) {
		for i := 1; i < len(order); i++ {
			for j := i; j > 0 && compareUTF16(v.keys[order[j]], v.keys[order[j-1]]) < 0; j-- {
				order[j], order[j-1] = order[j-1], order[j]
			}
		}
	} else {
		slices.SortFunc(order, func(x, y int) int { return compareUTF16(v.keys[x], v.keys[y]) })
	}
	b = append(b, '{')
	for n, i := range order {
		if n > 0 {
			b = append(b, ',')
		}
		b = jcsenc.AppendString(b, v.keys[i])
		b = append(b, ':')
		if b, err = appendCanonical(b, &v.vals[i]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendCanonicalNumber writes a number literal in ECMAScript form. An
// integer literal of at most 15 digits is exact as a double and already in
// that form, so it is copied; anything else goes through the double.
func appendCanonicalNumber(b []byte, lit string) ([]byte, error) {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 0 && len(digits) <= 15 && allDigits(digits) {
		if digits == "0" {
			return append(b, '0'), nil // "-0" is written 0
		}
		return append(b, lit...), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return b, &schemaError{msg: fmt.Sprintf("number %s is outside the IEEE 754 double range", quoteForError(lit))}
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return b, &schemaError{msg: "number has no JSON form"}
	}
	return append(b, s...), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// compareUTF16 orders strings by UTF-16 code units, the RFC 8785 key order
// (and JavaScript's default sort). It differs from Go's byte order only when
// a supplementary-plane character meets a BMP character at or above U+E000:
// the supplementary character's lead surrogate (U+D800–U+DBFF) sorts first.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Back up to the first byte of the characters that differ.
	for i > 0 && (!utf8.RuneStart(a[i]) || !utf8.RuneStart(b[i])) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	a1, a2 := utf16Units(ra)
	b1, b2 := utf16Units(rb)
	switch {
	case a1 != b1:
		return int(a1) - int(b1)
	case a2 != b2:
		return int(a2) - int(b2)
	}
	// Equal code units only when both decode to U+FFFD from invalid bytes;
	// fall back to bytes so the order stays total.
	switch {
	case a[i:] < b[i:]:
		return -1
	case a[i:] > b[i:]:
		return 1
	}
	return 0
}

func utf16Units(r rune) (uint16, uint16) {
	if r < 0x10000 {
		return uint16(r), 0
	}
	r -= 0x10000
	return uint16(0xD800 + r>>10), uint16(0xDC00 + r&0x3FF)
}

// quoteForError quotes untrusted text for an error message, bounded so an
// attacker cannot make us log megabytes.
func quoteForError(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
