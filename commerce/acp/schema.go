package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SchemaError reports where a document departs from the protocol's schema.
// Path is an RFC 9535 JSONPath ("$.line_items[0].quantity"), as ACP's own
// error objects use in their param field.
type SchemaError struct {
	Path   string
	Reason string
}

func (e *SchemaError) Error() string { return "acp: " + e.Path + ": " + e.Reason }

// This file is a small, strict JSON Schema subset written in Go: the
// protocol's schemas (rules.go) are declared with it, and every document
// is checked against them before any of it is decoded into the wire types.
//
// Documents are first parsed into a tree of null (nil), bool, json.Number,
// string, []any and *jsonObject, which rejects duplicate member names: with
// duplicates, encoding/json merges the two values into a struct, so what
// would be used could differ from what was checked.

// jsonObject is a parsed JSON object; keys keeps document order.
type jsonObject struct {
	keys []string
	vals map[string]any
}

// maxDepth bounds nesting. The schemas nest about a dozen levels; only
// free-form members (metadata, handler config) can go deeper.
const maxDepth = 64

// parseJSON parses exactly one JSON value from data.
func parseJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, &SchemaError{Path: "$", Reason: "not UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, "$", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &SchemaError{Path: "$", Reason: "data after the JSON value"}
	}
	return v, nil
}

func parseValue(dec *json.Decoder, at string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, &SchemaError{Path: at, Reason: "nested too deeply"}
	}
	tok, err := dec.Token()
	if err != nil {
		// %v: the decoder's message names offsets, not secrets.
		return nil, &SchemaError{Path: at, Reason: fmt.Sprintf("malformed JSON: %v", err)}
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jsonObject{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, &SchemaError{Path: at, Reason: fmt.Sprintf("malformed JSON: %v", err)}
				}
				k := kt.(string) // the decoder guarantees object keys are strings
				if _, dup := o.vals[k]; dup {
					return nil, &SchemaError{Path: at, Reason: fmt.Sprintf("duplicate member %q", k)}
				}
				v, err := parseValue(dec, member(at, k), depth+1)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, &SchemaError{Path: at, Reason: fmt.Sprintf("malformed JSON: %v", err)}
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, fmt.Sprintf("%s[%d]", at, len(a)), depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, &SchemaError{Path: at, Reason: fmt.Sprintf("malformed JSON: %v", err)}
			}
			return a, nil
		}
		return nil, &SchemaError{Path: at, Reason: "malformed JSON"}
	default:
		return tok, nil // nil, bool, json.Number, string
	}
}

// member is the JSONPath of member k of the object at at.
func member(at, k string) string {
	if simpleName.MatchString(k) {
		return at + "." + k
	}
	return at + "[" + strconv.Quote(k) + "]"
}

var simpleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// rule checks a parsed value found at path at.
type rule func(v any, at string) error

func fail(at, format string, args ...any) error {
	return &SchemaError{Path: at, Reason: fmt.Sprintf(format, args...)}
}

// typeName names a parsed value's JSON type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case *jsonObject:
		return "object"
	}
	return "unknown"
}

// strCheck is one constraint on a string.
type strCheck func(s string) string // "" when satisfied, else the reason

// str is a string with constraints.
func str(checks ...strCheck) rule {
	return func(v any, at string) error {
		s, ok := v.(string)
		if !ok {
			return fail(at, "want string, got %s", typeName(v))
		}
		for _, c := range checks {
			if why := c(s); why != "" {
				return fail(at, "%s", why)
			}
		}
		return nil
	}
}

func enum(values ...string) strCheck {
	return func(s string) string {
		if slices.Contains(values, s) {
			return ""
		}
		return fmt.Sprintf("%q is not one of %s", clip(s), strings.Join(values, ", "))
	}
}

func constant(value string) strCheck {
	return func(s string) string {
		if s == value {
			return ""
		}
		return fmt.Sprintf("want %q, got %q", value, clip(s))
	}
}

func pattern(expr string) strCheck {
	re := regexp.MustCompile(expr)
	return func(s string) string {
		if re.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("%q does not match %s", clip(s), expr)
	}
}

// minLen and maxLen count characters (code points), as JSON Schema does.
func minLen(n int) strCheck {
	return func(s string) string {
		if utf8.RuneCountInString(s) >= n {
			return ""
		}
		return fmt.Sprintf("shorter than %d characters", n)
	}
}

func maxLen(n int) strCheck {
	return func(s string) string {
		if utf8.RuneCountInString(s) <= n {
			return ""
		}
		return fmt.Sprintf("longer than %d characters", n)
	}
}

// dateTime is JSON Schema's "date-time" format: an RFC 3339 date-time.
// Leap seconds (":60") are refused: time.Parse cannot represent them and
// the mapping parses these values.
func dateTime(s string) string {
	if !rfc3339.MatchString(s) {
		return fmt.Sprintf("%q is not an RFC 3339 date-time", clip(s))
	}
	if _, err := parseTime(s); err != nil {
		return fmt.Sprintf("%q is not an RFC 3339 date-time", clip(s))
	}
	return ""
}

var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$`)

// parseTime parses a value dateTime accepted (RFC 3339 allows a lower-case
// t and z; time.Parse does not).
func parseTime(s string) (time.Time, error) {
	return time.Parse(time.RFC3339Nano, strings.ToUpper(s))
}

// uri is JSON Schema's "uri" format: an absolute URI.
func uri(s string) string {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || strings.ContainsAny(s, " \t\r\n\\") {
		return fmt.Sprintf("%q is not an absolute URI", clip(s))
	}
	return ""
}

// email is JSON Schema's "email" format (RFC 5321 addr-spec, simplified:
// a local part and a domain of dot-separated labels).
func email(s string) string {
	bad := fmt.Sprintf("%q is not an e-mail address", clip(s))
	at := strings.LastIndexByte(s, '@')
	if at < 1 || len(s) > 254 || at > 64 {
		return bad
	}
	local, domain := s[:at], s[at+1:]
	if strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return bad
	}
	for _, r := range local {
		if r <= ' ' || r > '~' || strings.ContainsRune(`()<>[]:;@\,"`, r) {
			return bad
		}
	}
	if len(domain) == 0 || len(domain) > 253 {
		return bad
	}
	for _, label := range strings.Split(domain, ".") {
		if !hostLabel.MatchString(label) {
			return bad
		}
	}
	return ""
}

var hostLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// clip shortens a value quoted in an error: the document is untrusted and
// could be large.
func clip(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// integer is a JSON integer that fits int64, at least min when given.
// JSON Schema also counts 1.0 and 1e2 as integers; we refuse them, as
// encoding/json cannot decode them into an int64.
func integer(min ...int64) rule {
	return func(v any, at string) error {
		n, ok := v.(json.Number)
		if !ok {
			return fail(at, "want integer, got %s", typeName(v))
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return fail(at, "want an integer that fits 64 bits, got %s", clip(string(n)))
		}
		if len(min) > 0 && i < min[0] {
			return fail(at, "%d is less than %d", i, min[0])
		}
		return nil
	}
}

// number is a finite JSON number within [lo, hi].
func number(lo, hi float64) rule {
	return func(v any, at string) error {
		n, ok := v.(json.Number)
		if !ok {
			return fail(at, "want number, got %s", typeName(v))
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fail(at, "want a finite number, got %s", clip(string(n)))
		}
		if f < lo || f > hi {
			return fail(at, "%s is out of range", clip(string(n)))
		}
		return nil
	}
}

// anyNumber is a finite JSON number.
var anyNumber = number(math.Inf(-1), math.Inf(1))

func boolean(v any, at string) error {
	if _, ok := v.(bool); !ok {
		return fail(at, "want boolean, got %s", typeName(v))
	}
	return nil
}

// anything accepts any JSON value.
func anything(any, string) error { return nil }

// arrOpt constrains an array.
type arrOpt struct {
	min    int
	unique bool
}

func array(item rule, opts ...arrOpt) rule {
	var o arrOpt
	if len(opts) > 0 {
		o = opts[0]
	}
	return func(v any, at string) error {
		a, ok := v.([]any)
		if !ok {
			return fail(at, "want array, got %s", typeName(v))
		}
		if len(a) < o.min {
			return fail(at, "want at least %d items, got %d", o.min, len(a))
		}
		for i, e := range a {
			if err := item(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		if o.unique {
			for i := range a {
				for j := i + 1; j < len(a); j++ {
					if equalJSON(a[i], a[j]) {
						return fail(at, "items %d and %d are equal; items must be unique", i, j)
					}
				}
			}
		}
		return nil
	}
}

// equalJSON is JSON Schema's equality: numbers by value, objects
// regardless of member order.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, e1 := strconv.ParseFloat(string(x), 64)
		fy, e2 := strconv.ParseFloat(string(y), 64)
		return e1 == nil && e2 == nil && fx == fy
	case *jsonObject:
		y, ok := b.(*jsonObject)
		if !ok || len(x.vals) != len(y.vals) {
			return false
		}
		for k, v := range x.vals {
			w, ok := y.vals[k]
			if !ok || !equalJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// props are an object's declared members.
type props map[string]rule

// objSpec describes an object schema.
type objSpec struct {
	props    props
	required []string
	// extra checks members not in props: nil refuses them
	// (additionalProperties: false); anything allows any.
	extra rule
	// anyOfRequired: at least one of these member sets is all present.
	anyOfRequired [][]string
	// also runs after the members were checked (if/then and the like).
	also func(o *jsonObject, at string) error
}

func object(s objSpec) rule {
	return func(v any, at string) error {
		o, ok := v.(*jsonObject)
		if !ok {
			return fail(at, "want object, got %s", typeName(v))
		}
		for _, k := range s.required {
			if _, ok := o.vals[k]; !ok {
				return fail(member(at, k), "required member is missing")
			}
		}
		for _, k := range o.keys {
			r, declared := s.props[k]
			switch {
			case declared:
			case s.extra != nil:
				r = s.extra
			default:
				return fail(member(at, k), "member is not allowed here")
			}
			if err := r(o.vals[k], member(at, k)); err != nil {
				return err
			}
		}
		if len(s.anyOfRequired) > 0 && !slices.ContainsFunc(s.anyOfRequired, func(set []string) bool {
			return !slices.ContainsFunc(set, func(k string) bool { _, ok := o.vals[k]; return !ok })
		}) {
			var alts []string
			for _, set := range s.anyOfRequired {
				alts = append(alts, strings.Join(set, "+"))
			}
			return fail(at, "needs one of: %s", strings.Join(alts, ", "))
		}
		if s.also != nil {
			return s.also(o, at)
		}
		return nil
	}
}

// oneOf accepts a value matching exactly one of rules.
func oneOf(rules ...rule) rule {
	return func(v any, at string) error {
		matched := 0
		var first error
		for _, r := range rules {
			if err := r(v, at); err == nil {
				matched++
			} else if first == nil || deeper(err, first) {
				first = err
			}
		}
		switch matched {
		case 1:
			return nil
		case 0:
			return first
		}
		return fail(at, "matches %d alternatives; want exactly one", matched)
	}
}

// deeper reports whether err points deeper into the document than other:
// of the alternatives of a oneOf, the one that got furthest explains best.
func deeper(err, other error) bool {
	var a, b *SchemaError
	return errors.As(err, &a) && errors.As(other, &b) && len(a.Path) > len(b.Path)
}

// discriminated picks the rule by a string member's value (the type
// discriminator of ACP's fulfillment options and messages), which is what
// their oneOf amounts to: each alternative fixes type with const.
func discriminated(key string, rules map[string]rule) rule {
	var names []string
	for k := range rules {
		names = append(names, k)
	}
	slices.Sort(names)
	return func(v any, at string) error {
		o, ok := v.(*jsonObject)
		if !ok {
			return fail(at, "want object, got %s", typeName(v))
		}
		t, ok := o.vals[key].(string)
		if !ok {
			return fail(member(at, key), "required string member is missing")
		}
		r, ok := rules[t]
		if !ok {
			return fail(member(at, key), "%q is not one of %s", clip(t), strings.Join(names, ", "))
		}
		return r(v, at)
	}
}

// validate parses data and checks it against r.
func validate(data []byte, r rule) error {
	v, err := parseJSON(data)
	if err != nil {
		return err
	}
	return r(v, "$")
}

// decodeChecked checks data against r, then decodes it into out. Only a
// document that satisfies r is decoded, so out is never half-filled from a
// refused document.
func decodeChecked(data []byte, r rule, out any) error {
	if err := validate(data, r); err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		// The rules accept only what the wire types can hold; reaching
		// this is a bug in rules.go, reported rather than hidden.
		return &SchemaError{Path: "$", Reason: fmt.Sprintf("does not decode: %v", err)}
	}
	return nil
}
