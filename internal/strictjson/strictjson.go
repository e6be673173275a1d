// Package strictjson is what the strict JSON decoders of several packages
// share: finding a member name given twice in any object of a document,
// bounding how deep a document nests, and the JSON path that names the
// place a decoder refuses ("amount.minor", "lines[0].sku",
// `metadata["odd key"]`).
//
// encoding/json keeps the last of repeated member names and other readers
// keep the first, so a document that repeats a name can mean two things
// to two readers; the decoders refuse it. [Check] scans a document for
// that and for excess nesting without decoding it. [Path], [Member] and
// [Index] build the paths their errors name.
package strictjson

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error is what [Check] found: a member name given twice, or nesting
// deeper than the limit.
type Error struct {
	// Offset is the byte offset of the repeated name's opening quote, or
	// where the value nested too deep begins (before any white space).
	Offset int
	// TooDeep says the document nests deeper than the limit; Name and
	// Path are then empty.
	TooDeep bool
	// Name is the member name given twice.
	Name string
	// Path is the JSON path of the repeated member, its name included
	// ("amount.minor").
	Path string
}

func (e *Error) Error() string {
	if e.TooDeep {
		return "JSON nested too deeply at byte " + strconv.Itoa(e.Offset)
	}
	return "member " + e.Path + " appears twice"
}

// Check scans the JSON text data for an object that gives a member name
// twice (names are compared as encoding/json decodes them: escapes
// resolved, invalid UTF-8 replaced by U+FFFD) and for a value nested
// deeper than maxDepth (the top-level value is at depth 0, its members or
// elements at depth 1), and returns the first it meets in document order,
// or nil.
//
// Check does not validate: data should be JSON that json.Valid accepts,
// and on anything else the answer means nothing, though Check still ends
// in linear time, never reads outside data and recurses at most
// maxDepth+1 deep.
func Check(data []byte, maxDepth int) *Error {
	sc := scanner{data: data, maxDepth: maxDepth}
	return sc.value(0)
}

type scanner struct {
	data     []byte
	i        int
	maxDepth int
	path     Path
}

func (sc *scanner) ws() {
	for sc.i < len(sc.data) {
		switch sc.data[sc.i] {
		case ' ', '\t', '\n', '\r':
			sc.i++
		default:
			return
		}
	}
}

// str consumes the string at sc.i and returns its decoded value; false if
// data ends inside it.
func (sc *scanner) str() (string, bool) {
	start := sc.i
	sc.i++        // opening quote
	plain := true // no escape, and ASCII
	for sc.i < len(sc.data) && sc.data[sc.i] != '"' {
		switch c := sc.data[sc.i]; {
		case c == '\\':
			plain = false
			sc.i++
		case c >= utf8.RuneSelf:
			plain = false
		}
		sc.i++
	}
	if sc.i >= len(sc.data) {
		sc.i = len(sc.data)
		return "", false
	}
	sc.i++
	raw := sc.data[start:sc.i]
	if plain || bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	// As encoding/json reads it: escapes resolved, invalid UTF-8 replaced
	// by U+FFFD.
	var s string
	_ = json.Unmarshal(raw, &s) // well formed: cannot fail
	return s, true
}

func (sc *scanner) value(depth int) *Error {
	if depth > sc.maxDepth {
		return &Error{Offset: sc.i, TooDeep: true}
	}
	sc.ws()
	if sc.i >= len(sc.data) {
		return nil
	}
	switch sc.data[sc.i] {
	case '{':
		sc.i++
		var seen map[string]struct{}
		for {
			sc.ws()
			if sc.i < len(sc.data) && sc.data[sc.i] == '}' {
				sc.i++
				return nil
			}
			if sc.i < len(sc.data) && sc.data[sc.i] == ',' {
				sc.i++
				sc.ws()
			}
			if sc.i >= len(sc.data) || sc.data[sc.i] != '"' {
				return nil // not JSON
			}
			at := sc.i
			key, ok := sc.str()
			if !ok {
				return nil
			}
			if seen == nil {
				seen = make(map[string]struct{})
			}
			sc.path.PushKey(key)
			if _, dup := seen[key]; dup {
				return &Error{Offset: at, Name: key, Path: sc.path.String()}
			}
			seen[key] = struct{}{}
			sc.ws()
			sc.i++ // colon
			if err := sc.value(depth + 1); err != nil {
				return err
			}
			sc.path.Pop()
		}
	case '[':
		sc.i++
		for n := 0; ; n++ {
			sc.ws()
			if sc.i >= len(sc.data) {
				return nil
			}
			if sc.data[sc.i] == ']' {
				sc.i++
				return nil
			}
			if sc.data[sc.i] == ',' {
				sc.i++
			}
			sc.path.PushIndex(n)
			start := sc.i
			if err := sc.value(depth + 1); err != nil {
				return err
			}
			sc.path.Pop()
			if sc.i == start {
				return nil // not JSON: no value where one must be
			}
		}
	case '"':
		sc.str()
	default: // number, true, false, null
		for sc.i < len(sc.data) {
			switch sc.data[sc.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return nil
			}
			sc.i++
		}
	}
	return nil
}

// Path is a JSON path under construction, turned into a string only when
// an error needs it.
type Path []segment

type segment struct {
	key   string
	index int // -1 for a member
}

// PushKey appends member k.
func (p *Path) PushKey(k string) { *p = append(*p, segment{key: k, index: -1}) }

// PushIndex appends element i.
func (p *Path) PushIndex(i int) { *p = append(*p, segment{index: i}) }

// Pop removes the last member or element.
func (p *Path) Pop() { *p = (*p)[:len(*p)-1] }

// String returns the path as [Member] and [Index] would build it from
// the root: "lines[0].sku".
func (p Path) String() string {
	var b strings.Builder
	for _, s := range p {
		if s.index >= 0 {
			b.WriteString("[")
			b.WriteString(strconv.Itoa(s.index))
			b.WriteString("]")
			continue
		}
		b.WriteString(memberSuffix(b.Len() == 0, s.key))
	}
	return b.String()
}

// Member appends a member name to a JSON path: "key" at the root (path
// ""), "path.key" below it, or path["odd key"] for a name that is not an
// identifier (letters, digits, '_', '$' and '-', not starting with a
// digit or '-').
func Member(path, key string) string {
	return path + memberSuffix(path == "", key)
}

// Index appends an array index to a JSON path: "path[i]".
func Index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// memberSuffix is how a member name extends a path: "key" at the root,
// ".key" below it, or ["odd key"] for names that are not identifiers.
func memberSuffix(root bool, key string) string {
	if !simpleKey(key) {
		return "[" + strconv.Quote(key) + "]"
	}
	if root {
		return key
	}
	return "." + key
}

func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '$':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}
