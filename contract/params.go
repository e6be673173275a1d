package contract

import (
	"encoding"
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParamSource is where [DecodeParams] reads parameters from.
type ParamSource struct {
	// Path returns the value of a path wildcard (http.Request.PathValue).
	// Nil when the operation has no path parameters.
	Path func(name string) string
	// Query holds the parsed query string.
	Query url.Values
	// Header holds the request headers (an http.Header converts to it).
	// Keys are canonical MIME header keys.
	Header map[string][]string
}

// paramField is one field of a parameter struct.
type paramField struct {
	in, name string
	field    reflect.StructField
	def      string
	hasDef   bool
}

func paramFields(t reflect.Type) ([]paramField, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("parameter type %s is not a struct", t)
	}
	var out []paramField
	seen := make(map[string]bool)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		var ins []string
		var name string
		for _, in := range []string{"path", "query", "header"} {
			if v, ok := f.Tag.Lookup(in); ok {
				ins = append(ins, in)
				name = v
			}
		}
		if len(ins) != 1 || name == "" {
			return nil, fmt.Errorf("field %s.%s needs exactly one non-empty path, query or header tag", t, f.Name)
		}
		in := ins[0]
		if in == "header" {
			name = textproto.CanonicalMIMEHeaderKey(name)
		}
		if seen[in+" "+name] {
			return nil, fmt.Errorf("%s parameter %s declared twice in %s", in, name, t)
		}
		seen[in+" "+name] = true
		def, hasDef := f.Tag.Lookup("default")
		out = append(out, paramField{in: in, name: name, field: f, def: def, hasDef: hasDef})
	}
	return out, nil
}

// paramDoc is the OpenAPI description of one parameter.
type paramDoc struct {
	in, name, description string
	required              bool
	schema                Schema
}

func (g *schemaGen) params(t reflect.Type) ([]paramDoc, error) {
	fields, err := paramFields(t)
	if err != nil {
		return nil, err
	}
	var out []paramDoc
	for _, f := range fields {
		ft := f.field.Type
		base := ft
		for base.Kind() == reflect.Pointer {
			base = base.Elem()
		}
		if err := checkParamType(base); err != nil {
			return nil, fmt.Errorf("field %s: %w", f.field.Name, err)
		}
		if (base.Kind() == reflect.Slice && base != rawMessageType) && f.in != "query" {
			return nil, fmt.Errorf("field %s: only query parameters repeat", f.field.Name)
		}
		tags := parseValidateTag(f.field.Tag.Get("validate"))
		s, err := g.fieldSchema(ft, tags, true)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.field.Name, err)
		}
		if f.hasDef {
			v, err := parseDefault(ft, f.def)
			if err != nil {
				return nil, fmt.Errorf("field %s: %w", f.field.Name, err)
			}
			s["default"] = v
		}
		out = append(out, paramDoc{
			in: f.in, name: f.name,
			description: f.field.Tag.Get("doc"),
			required:    f.in == "path" || (tags.has("required") && !f.hasDef),
			schema:      s,
		})
	}
	return out, nil
}

var textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()

func checkParamType(t reflect.Type) error {
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t == timeType || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return nil
	}
	switch k := t.Kind(); {
	case k == reflect.String, k == reflect.Bool, isInt(k), isUint(k), k == reflect.Float32, k == reflect.Float64:
		return nil
	}
	return fmt.Errorf("parameter type %s is not a scalar or a slice of scalars", t)
}

// DecodeParams fills dst, a pointer to a struct whose fields carry `path`,
// `query` or `header` tags, from src. A field absent from the request (or
// given empty) keeps its `default` tag's value, or its zero value; an
// optional parameter that must be told apart from its zero value is a
// pointer. A query parameter the struct does not declare is refused, so a
// misspelt parameter never goes unnoticed.
//
// It returns nil, a [*DecodeError] (request.unknown_field) for an undeclared
// query parameter, or a [*ValidationError] whose entries have rule "type"
// for values that do not parse as the field's type or are repeated where
// one is expected. It does not run the validate tags; call
// [Model.Validate] for that.
func DecodeParams(dst any, src ParamSource) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("contract: DecodeParams needs a non-nil pointer to a struct, got %T", dst)
	}
	sv := rv.Elem()
	fields, err := paramFields(sv.Type())
	if err != nil {
		return fmt.Errorf("contract: %w", err)
	}
	known := make(map[string]bool)
	var verrs []FieldError
	for _, f := range fields {
		var vals []string
		switch f.in {
		case "path":
			if src.Path != nil {
				if v := src.Path(f.name); v != "" {
					vals = []string{v}
				}
			}
		case "query":
			known[f.name] = true
			vals = nonEmpty(src.Query[f.name])
		case "header":
			vals = nonEmpty(src.Header[f.name])
		}
		if len(vals) == 0 {
			if !f.hasDef {
				continue
			}
			vals = []string{f.def}
		}
		if fe := setParam(sv.FieldByIndex(f.field.Index), f.name, vals); fe != nil {
			verrs = append(verrs, *fe)
		}
	}
	var unknown []string
	for k := range src.Query {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &DecodeError{Code: CodeRequestUnknownField, Fields: unknown,
			Detail: "unknown query parameter " + quoteList(unknown)}
	}
	if len(verrs) > 0 {
		return &ValidationError{Errors: verrs}
	}
	return nil
}

func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

func setParam(v reflect.Value, name string, vals []string) *FieldError {
	t := v.Type()
	if t.Kind() == reflect.Pointer && t != timeType {
		p := reflect.New(t.Elem())
		if fe := setParam(p.Elem(), name, vals); fe != nil {
			return fe
		}
		v.Set(p)
		return nil
	}
	if t.Kind() == reflect.Slice {
		s := reflect.MakeSlice(t, len(vals), len(vals))
		for i, one := range vals {
			if fe := setScalar(s.Index(i), name, one); fe != nil {
				return fe
			}
		}
		v.Set(s)
		return nil
	}
	if len(vals) > 1 {
		return &FieldError{Field: name, Rule: "type", Message: "must be given once"}
	}
	return setScalar(v, name, vals[0])
}

func setScalar(v reflect.Value, name, s string) *FieldError {
	t := v.Type()
	bad := func(msg string) *FieldError { return &FieldError{Field: name, Rule: "type", Message: msg} }
	if t == timeType {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bad("must be an RFC 3339 date-time, e.g. 2026-01-02T15:04:05Z")
		}
		v.Set(reflect.ValueOf(tm))
		return nil
	}
	if tu, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		if err := tu.UnmarshalText([]byte(s)); err != nil {
			return bad("is not a valid " + typeNoun(t))
		}
		return nil
	}
	switch k := t.Kind(); {
	case k == reflect.String:
		v.SetString(s)
	case k == reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil || (s != "true" && s != "false") {
			return bad("must be true or false")
		}
		v.SetBool(b)
	case isInt(k):
		n, err := strconv.ParseInt(s, 10, t.Bits())
		if err != nil {
			return bad(intMessage(err, false, t.Bits()))
		}
		v.SetInt(n)
	case isUint(k):
		n, err := strconv.ParseUint(s, 10, t.Bits())
		if err != nil {
			if strings.HasPrefix(s, "-") {
				return bad("must be a non-negative integer")
			}
			return bad(intMessage(err, true, t.Bits()))
		}
		v.SetUint(n)
	case k == reflect.Float32 || k == reflect.Float64:
		f, err := strconv.ParseFloat(s, t.Bits())
		if err != nil {
			return bad("must be a number")
		}
		v.SetFloat(f)
	default:
		return bad("has an unsupported type")
	}
	return nil
}

func intMessage(err error, unsigned bool, bits int) string {
	if errors.Is(err, strconv.ErrRange) {
		if unsigned {
			return fmt.Sprintf("must be an integer between 0 and %d", uint64(1)<<bits-1)
		}
		return fmt.Sprintf("must be an integer between %d and %d", -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
	}
	if unsigned {
		return "must be a non-negative integer"
	}
	return "must be an integer"
}

func typeNoun(t reflect.Type) string {
	if t.Name() != "" {
		return t.Name()
	}
	return t.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
