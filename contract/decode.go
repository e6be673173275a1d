package contract

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/strictjson"
)

// Sentinels matched by [*DecodeError]; check with errors.Is.
var (
	// ErrMalformedJSON: the body is not exactly one well-formed JSON value.
	ErrMalformedJSON = errors.New("contract: malformed JSON")
	// ErrUnknownField: the body or query names a member the type lacks.
	ErrUnknownField = errors.New("contract: unknown field")
)

// DecodeError is a request that could not be decoded: malformed JSON
// (Code request.malformed_json) or an unknown member or query parameter
// (Code request.unknown_field). A value of the wrong type is a
// [*ValidationError] instead, so that it is reported with the field's path
// next to the other invalid fields.
type DecodeError struct {
	// Code is request.malformed_json or request.unknown_field.
	Code string
	// Detail says what is wrong, for people.
	Detail string
	// Offset is the byte offset in the body where parsing stopped, for
	// malformed JSON; -1 when unknown.
	Offset int64
	// Fields are the JSON paths of unknown members, or the names of
	// unknown query parameters.
	Fields []string
}

func (e *DecodeError) Error() string { return "contract: " + e.Detail }

// Unwrap returns [ErrMalformedJSON] or [ErrUnknownField].
func (e *DecodeError) Unwrap() error {
	if e.Code == CodeRequestUnknownField {
		return ErrUnknownField
	}
	return ErrMalformedJSON
}

// ErrorCode returns the problem code; it is not named Code because Code is
// a field.
func (e *DecodeError) ErrorCode() string { return e.Code }

func malformed(offset int64, format string, args ...any) *DecodeError {
	return &DecodeError{Code: CodeRequestMalformedJSON, Offset: offset, Detail: fmt.Sprintf(format, args...)}
}

// DecodeJSON reads all of r and decodes it into dst, a non-nil pointer.
//
// The body must be exactly one JSON value in valid UTF-8, with no member
// name repeated in any object and nothing but white space after it;
// anything else is a [*DecodeError] with code request.malformed_json.
// Member names must match the `json` names of dst's type exactly (not
// case-insensitively, as encoding/json would); others are a [*DecodeError]
// with code request.unknown_field listing every unknown path. Values of the
// wrong JSON type, or numbers that do not fit their field, are a
// [*ValidationError] with rule "type" and the member's path, e.g.
// "lines[0].quantity". A read error from r (such as
// *http.MaxBytesError) is returned wrapped.
//
// DecodeJSON does not run validate tags; call [Model.Validate] for that.
func DecodeJSON(r io.Reader, dst any) error {
	_, err := decodeJSON(r, dst)
	return err
}

// decodeJSON is DecodeJSON that also returns the members sent as zero
// values of omitempty fields with validate rules.
func decodeJSON(r io.Reader, dst any) ([]presentZero, error) {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, fmt.Errorf("contract: DecodeJSON needs a non-nil pointer, got %T", dst)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("contract: read body: %w", err)
	}
	tree, derr := parseStrict(data)
	if derr != nil {
		return nil, derr
	}
	c := checker{}
	c.check(tree, rv.Type().Elem())
	if len(c.unknown) > 0 {
		return nil, &DecodeError{Code: CodeRequestUnknownField, Offset: -1, Fields: c.unknown,
			Detail: "unknown field " + quoteList(c.unknown)}
	}
	if len(c.errs) > 0 {
		return nil, &ValidationError{Errors: c.errs}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		// The checks above mirror encoding/json, so this is a gap in them,
		// not the client's fault alone; report it without internals.
		return nil, &ValidationError{Errors: []FieldError{{Rule: "type", Message: "does not match the expected shape"}}}
	}
	return c.zeros, nil
}

// parseStrict parses data into a tree of map[string]any, []any,
// json.Number, string, bool and nil, refusing what DecodeJSON refuses.
func parseStrict(data []byte) (any, *DecodeError) {
	if !utf8.Valid(data) {
		return nil, malformed(-1, "request body is not valid UTF-8")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, malformed(0, "request body is empty; send a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, syntaxError(dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed(dec.InputOffset(), "unexpected data after the JSON value at byte %d", dec.InputOffset())
	}
	// encoding/json keeps the last of repeated member names. A signed
	// payload must mean one thing to every reader, so repeats are refused;
	// the scan runs on bytes the decoder has already found well formed.
	if e := strictjson.Check(data, maxDepth); e != nil {
		if e.TooDeep {
			return nil, malformed(int64(e.Offset), "JSON nested deeper than %d levels", maxDepth)
		}
		return nil, malformed(int64(e.Offset), "member %s appears twice", e.Path)
	}
	return v, nil
}

const maxDepth = 512

func syntaxError(dec *json.Decoder, err error) *DecodeError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return malformed(se.Offset, "invalid JSON at byte %d: %s", se.Offset,
			strings.TrimPrefix(se.Error(), "json: "))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed(dec.InputOffset(), "JSON ends unexpectedly at byte %d", dec.InputOffset())
	}
	return malformed(dec.InputOffset(), "invalid JSON at byte %d", dec.InputOffset())
}

// checker walks a parsed tree against a Go type the way encoding/json
// would decode it, collecting unknown members and type mismatches.
type checker struct {
	path    strictjson.Path
	fields  map[reflect.Type]map[string]jsonField // members by name, per struct type
	unknown []string
	errs    []FieldError
	// zeros lists the members sent with their type's zero value (0, "",
	// false) whose field is omitted from JSON when zero and carries
	// validate rules: for such a field an explicit zero is a value the
	// rules must judge, never "absent" (see [Model.DecodeJSON]).
	zeros []presentZero
}

// presentZero is one member sent as its zero value.
type presentZero struct {
	path string
	t    reflect.Type
	tag  string // the validate tag without its leading omitempty
}

// noteZero records v, the member at the current path, when it is the
// zero value of an omitempty field with validate rules.
func (c *checker) noteZero(v any, f jsonField) {
	tag, ok := strings.CutPrefix(f.field.Tag.Get("validate"), "omitempty,")
	if !ok || !f.omitEmpty {
		return
	}
	zero := false
	switch x := v.(type) {
	case json.Number:
		n, err := strconv.ParseFloat(string(x), 64)
		zero = err == nil && n == 0
	case string:
		zero = x == ""
	case bool:
		zero = !x
	}
	if zero {
		c.zeros = append(c.zeros, presentZero{path: c.path.String(), t: f.field.Type, tag: tag})
	}
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func (c *checker) bad(msg string) {
	c.errs = append(c.errs, FieldError{Field: c.path.String(), Rule: "type", Message: msg})
}

func (c *checker) check(v any, t reflect.Type) {
	if v == nil {
		return // null leaves any Go value unchanged (or nil), as in encoding/json
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType {
		var tm time.Time
		if s, ok := v.(string); !ok || tm.UnmarshalText([]byte(s)) != nil {
			c.bad("must be an RFC 3339 date-time string")
		}
		return
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		c.delegate(v, t, "is not a valid "+typeNoun(t))
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) && t.Kind() != reflect.Slice {
		s, ok := v.(string)
		if !ok {
			c.bad("must be a string")
			return
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			c.bad("is not a valid " + typeNoun(t))
		}
		return
	}
	switch k := t.Kind(); {
	case k == reflect.Interface:
		return
	case k == reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.bad("must be true or false")
		}
	case k == reflect.String:
		if _, ok := v.(string); !ok {
			c.bad("must be a string")
		}
	case isInt(k) || isUint(k):
		n, ok := v.(json.Number)
		if !ok {
			c.bad("must be an integer")
			return
		}
		var err error
		if isInt(k) {
			_, err = strconv.ParseInt(string(n), 10, t.Bits())
		} else {
			_, err = strconv.ParseUint(string(n), 10, t.Bits())
			if err != nil && strings.HasPrefix(string(n), "-") {
				c.bad("must be a non-negative integer")
				return
			}
		}
		if err != nil {
			c.bad(intMessage(err, isUint(k), t.Bits()))
		}
	case k == reflect.Float32 || k == reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			c.bad("must be a number")
			return
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			c.bad("is out of range for a number")
		}
	case k == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		c.delegate(v, t, "must be a base64 string")
	case k == reflect.Slice || k == reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			c.bad("must be an array")
			return
		}
		if k == reflect.Array && len(arr) > t.Len() {
			c.bad(fmt.Sprintf("must have at most %d items", t.Len()))
			return
		}
		for i, item := range arr {
			c.path.PushIndex(i)
			c.check(item, t.Elem())
			c.path.Pop()
		}
	case k == reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			c.bad("must be an object")
			return
		}
		for _, key := range sortedKeys(obj) {
			c.path.PushKey(key)
			if c.mapKey(t.Key(), key) {
				c.check(obj[key], t.Elem())
			}
			c.path.Pop()
		}
	case k == reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			c.bad("must be an object")
			return
		}
		byName, err := c.members(t)
		if err != nil {
			c.bad("cannot be decoded")
			return
		}
		for _, key := range sortedKeys(obj) {
			c.path.PushKey(key)
			if f, ok := byName[key]; ok {
				c.check(obj[key], f.field.Type)
				c.noteZero(obj[key], f)
			} else {
				c.unknown = append(c.unknown, c.path.String())
			}
			c.path.Pop()
		}
	default:
		c.bad("cannot be decoded into " + t.String())
	}
}

// mapKey checks a member name against a map's key type.
func (c *checker) mapKey(kt reflect.Type, key string) bool {
	switch {
	case reflect.PointerTo(kt).Implements(textUnmarshalerType):
		if err := reflect.New(kt).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(key)); err != nil {
			c.bad("has an invalid member name")
			return false
		}
	case isInt(kt.Kind()):
		if _, err := strconv.ParseInt(key, 10, kt.Bits()); err != nil {
			c.bad("member name must be an integer")
			return false
		}
	case isUint(kt.Kind()):
		if _, err := strconv.ParseUint(key, 10, kt.Bits()); err != nil {
			c.bad("member name must be a non-negative integer")
			return false
		}
	}
	return true
}

// members returns the JSON members of struct t, cached for the call.
func (c *checker) members(t reflect.Type) (map[string]jsonField, error) {
	if m, ok := c.fields[t]; ok {
		return m, nil
	}
	fields, err := jsonFields(t)
	if err != nil {
		return nil, err
	}
	m := make(map[string]jsonField, len(fields))
	for _, f := range fields {
		m[f.name] = f
	}
	if c.fields == nil {
		c.fields = make(map[reflect.Type]map[string]jsonField)
	}
	c.fields[t] = m
	return m, nil
}

// delegate lets encoding/json judge a value whose type decodes itself.
func (c *checker) delegate(v any, t reflect.Type, msg string) {
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, reflect.New(t).Interface())
	}
	if err != nil {
		c.bad(msg)
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted so that error lists are deterministic.
	sort.Strings(keys)
	return keys
}
