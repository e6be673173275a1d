package contract

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Schema is a JSON Schema (draft 2020-12) as a JSON object. Maps marshal
// with sorted keys, so documents built from Schemas are deterministic.
type Schema map[string]any

// SchemaProvider is implemented by types that describe their own JSON
// Schema instead of having it derived by reflection: types with a custom
// MarshalJSON, or named strings that are enums. The method is called on the
// zero value and must not depend on it.
type SchemaProvider interface {
	JSONSchema() Schema
}

var (
	schemaProviderType   = reflect.TypeFor[SchemaProvider]()
	timeType             = reflect.TypeFor[time.Time]()
	rawMessageType       = reflect.TypeFor[json.RawMessage]()
	textMarshalerType    = reflect.TypeFor[encoding.TextMarshaler]()
	componentNamePattern = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// schemaGen generates schemas and collects named structs as components.
type schemaGen struct {
	components map[string]Schema
	names      map[reflect.Type]string
	byName     map[string]reflect.Type
	rules      map[string]Rule
	errs       []error
}

func newSchemaGen(rules map[string]Rule) *schemaGen {
	return &schemaGen{
		components: make(map[string]Schema),
		names:      make(map[reflect.Type]string),
		byName:     make(map[string]reflect.Type),
		rules:      rules,
	}
}

func (g *schemaGen) clone() *schemaGen {
	return &schemaGen{
		components: maps.Clone(g.components),
		names:      maps.Clone(g.names),
		byName:     maps.Clone(g.byName),
		rules:      g.rules,
	}
}

func (g *schemaGen) err() error { return errors.Join(g.errs...) }

// schemaFor returns the schema of t as used in a document: a $ref for a
// named struct (registering the component), an inline schema otherwise.
func (g *schemaGen) schemaFor(t reflect.Type) (Schema, error) {
	if t == nil {
		return nil, errors.New("nil type")
	}
	return g.typeSchema(t)
}

// contentSchema is the schema of a response representation.
func (g *schemaGen) contentSchema(c Content) (Schema, error) {
	if len(c.OneOf) > 0 {
		if c.Type != nil || !isJSONMedia(c.MediaType) {
			return nil, errors.New("OneOf is for JSON bodies, without Type")
		}
		alts := make([]any, len(c.OneOf))
		for i, t := range c.OneOf {
			s, err := g.schemaFor(t)
			if err != nil {
				return nil, err
			}
			alts[i] = s
		}
		return Schema{"oneOf": alts}, nil
	}
	if c.Type != nil {
		return g.schemaFor(c.Type)
	}
	if isJSONMedia(c.MediaType) {
		return Schema{"type": "object"}, nil
	}
	return Schema{"type": "string"}, nil
}

func isJSONMedia(mt string) bool {
	return mt == MediaJSON || strings.HasSuffix(mt, "+json")
}

func implements(t, iface reflect.Type) bool {
	return t.Implements(iface) || reflect.PointerTo(t).Implements(iface)
}

func provided(t reflect.Type) (Schema, bool) {
	switch {
	case t.Implements(schemaProviderType):
		return reflect.Zero(t).Interface().(SchemaProvider).JSONSchema(), true
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(schemaProviderType):
		return reflect.New(t).Interface().(SchemaProvider).JSONSchema(), true
	}
	return nil, false
}

func (g *schemaGen) typeSchema(t reflect.Type) (Schema, error) {
	if s, ok := provided(t); ok {
		return maps.Clone(s), nil
	}
	switch t {
	case timeType:
		return Schema{"type": "string", "format": "date-time"}, nil
	case rawMessageType:
		return Schema{}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		inner, err := g.typeSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		return nullable(inner), nil
	case reflect.Bool:
		return Schema{"type": "boolean"}, nil
	case reflect.Int, reflect.Int64:
		return Schema{"type": "integer", "format": "int64"}, nil
	case reflect.Int32:
		return Schema{"type": "integer", "format": "int32"}, nil
	case reflect.Int8, reflect.Int16:
		return Schema{"type": "integer"}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return Schema{"type": "integer", "minimum": 0}, nil
	case reflect.Float32, reflect.Float64:
		return Schema{"type": "number"}, nil
	case reflect.String:
		return Schema{"type": "string"}, nil
	case reflect.Interface:
		return Schema{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return Schema{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := g.typeSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		s := Schema{"type": "array", "items": items}
		if t.Kind() == reflect.Array {
			s["minItems"], s["maxItems"] = t.Len(), t.Len()
		}
		return s, nil
	case reflect.Map:
		k := t.Key()
		s := Schema{"type": "object"}
		switch {
		case k.Kind() == reflect.String:
		case implements(k, textMarshalerType):
		case isInt(k.Kind()) || isUint(k.Kind()):
			s["propertyNames"] = Schema{"pattern": `^-?[0-9]+$`}
		default:
			return nil, fmt.Errorf("map key type %s cannot be a JSON member name", k)
		}
		vals, err := g.typeSchema(t.Elem())
		if err != nil {
			return nil, err
		}
		s["additionalProperties"] = vals
		return s, nil
	case reflect.Struct:
		if t.Name() == "" {
			return g.objectSchema(t)
		}
		return g.component(t)
	}
	if implements(t, textMarshalerType) {
		return Schema{"type": "string"}, nil
	}
	return nil, fmt.Errorf("type %s has no JSON Schema", t)
}

// component registers the named struct t and returns a reference to it.
func (g *schemaGen) component(t reflect.Type) (Schema, error) {
	name, ok := g.names[t]
	if !ok {
		name = t.Name()
		if !componentNamePattern.MatchString(name) {
			return nil, fmt.Errorf("type %s: component name %q has characters other than A-Z a-z 0-9 . _ -", t, name)
		}
		if other, taken := g.byName[name]; taken {
			return nil, fmt.Errorf("types %s and %s would both be component %s; rename one", other, t, name)
		}
		g.names[t] = name
		g.byName[name] = t
		g.components[name] = nil // placeholder: recursive types find the name
		s, err := g.objectSchema(t)
		if err != nil {
			delete(g.names, t)
			delete(g.byName, name)
			delete(g.components, name)
			return nil, err
		}
		g.components[name] = s
	}
	return Schema{"$ref": "#/components/schemas/" + name}, nil
}

// jsonField is one member of a struct as encoding/json sees it.
type jsonField struct {
	name      string
	field     reflect.StructField
	omitEmpty bool // omitempty or omitzero
	index     []int
}

// jsonFields lists the members of struct t the way encoding/json does for
// the cases we support: exported fields, json tag names, "-" skipped,
// untagged embedded structs flattened. A ",string" option is refused: its
// schema would lie.
func jsonFields(t reflect.Type) ([]jsonField, error) {
	var out []jsonField
	seen := make(map[string]int)
	var walk func(t reflect.Type, index []int, depth int) error
	walk = func(t reflect.Type, index []int, depth int) error {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			idx := append(slices.Clone(index), i)
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					if depth > 8 {
						return fmt.Errorf("embedding too deep at %s", f.Name)
					}
					if err := walk(ft, idx, depth+1); err != nil {
						return err
					}
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			omit := false
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "omitempty", "omitzero":
					omit = true
				case "string":
					return fmt.Errorf("field %s: the ,string option is not supported", f.Name)
				}
			}
			if j, dup := seen[name]; dup {
				// encoding/json: the shallower field wins; equal depth hides both.
				if len(out[j].index) > len(idx) {
					out[j] = jsonField{name: name, field: f, omitEmpty: omit, index: idx}
				}
				continue
			}
			seen[name] = len(out)
			out = append(out, jsonField{name: name, field: f, omitEmpty: omit, index: idx})
		}
		return nil
	}
	if err := walk(t, nil, 0); err != nil {
		return nil, err
	}
	return out, nil
}

func (g *schemaGen) objectSchema(t reflect.Type) (Schema, error) {
	fields, err := jsonFields(t)
	if err != nil {
		return nil, fmt.Errorf("type %s: %w", t, err)
	}
	props := Schema{}
	required := []any{}
	for _, f := range fields {
		tags := parseValidateTag(f.field.Tag.Get("validate"))
		s, err := g.fieldSchema(f.field.Type, tags, false)
		if err != nil {
			return nil, fmt.Errorf("type %s field %s: %w", t, f.field.Name, err)
		}
		if doc := f.field.Tag.Get("doc"); doc != "" {
			s["description"] = doc
		}
		if def, ok := f.field.Tag.Lookup("default"); ok {
			v, err := parseDefault(f.field.Type, def)
			if err != nil {
				return nil, fmt.Errorf("type %s field %s: %w", t, f.field.Name, err)
			}
			s["default"] = v
		}
		props[f.name] = s
		if tags.has("required") || (!f.omitEmpty && !tags.has("omitempty") && !tags.has("omitnil")) {
			required = append(required, f.name)
		}
	}
	s := Schema{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, nil
}

// fieldSchema is the schema of a field of type t with validate tags
// applied. For parameters (param) pointers are optional, not nullable.
func (g *schemaGen) fieldSchema(t reflect.Type, tags validateTags, param bool) (Schema, error) {
	nullableField := false
	for t.Kind() == reflect.Pointer && !t.Implements(schemaProviderType) && t != timeType {
		t = t.Elem()
		nullableField = !param
	}
	base, err := g.typeSchema(t)
	if err != nil {
		return nil, err
	}
	s := maps.Clone(base)
	if err := g.applyTags(s, t, tags); err != nil {
		return nil, err
	}
	if nullableField {
		s = nullable(s)
	}
	return s, nil
}

// nullable lets s also accept null.
func nullable(s Schema) Schema {
	if len(s) == 0 {
		return s // already accepts everything
	}
	if _, ref := s["$ref"]; ref {
		return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
	}
	if _, comb := s["anyOf"]; comb {
		return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
	}
	out := maps.Clone(s)
	switch typ := s["type"].(type) {
	case string:
		out["type"] = []any{typ, "null"}
	case []any:
		if !slices.Contains(typ, any("null")) {
			out["type"] = append(slices.Clone(typ), "null")
		}
	default:
		return Schema{"anyOf": []any{s, Schema{"type": "null"}}}
	}
	if enum, ok := s["enum"].([]any); ok && !slices.Contains(enum, nil) {
		out["enum"] = append(slices.Clone(enum), nil)
	}
	return out
}

// validateTags is a parsed validate tag: the rules before the first dive
// (for the field itself) and the parsed tags after it (for its items).
type validateTags struct {
	rules []validateRule
	keys  []validateRule // map keys: between keys and endkeys
	dive  *validateTags
}

// validateRule is one rule; alternatives joined with | are in or.
type validateRule struct {
	tag, param string
	or         []validateRule
}

func (v validateTags) has(tag string) bool {
	for _, r := range v.rules {
		if r.tag == tag {
			return true
		}
	}
	return false
}

// parseValidateTag parses the validator/v10 tag syntax: rules separated by
// commas, params after =, alternatives joined by |, 0x2C and 0x7C standing
// for a literal comma and pipe in a param.
func parseValidateTag(tag string) validateTags {
	var root validateTags
	cur := &root
	if tag == "" {
		return root
	}
	inKeys := false
	for part := range strings.SplitSeq(tag, ",") {
		switch part {
		case "dive":
			cur.dive = &validateTags{}
			cur = cur.dive
			continue
		case "keys":
			inKeys = true
			continue
		case "endkeys":
			inKeys = false
			continue
		}
		var alts []validateRule
		for alt := range strings.SplitSeq(part, "|") {
			name, param, _ := strings.Cut(alt, "=")
			param = strings.NewReplacer("0x2C", ",", "0x7C", "|").Replace(param)
			alts = append(alts, validateRule{tag: name, param: param})
		}
		r := alts[0]
		if len(alts) > 1 {
			r = validateRule{tag: "|", or: alts}
		}
		if inKeys {
			cur.keys = append(cur.keys, r)
		} else {
			cur.rules = append(cur.rules, r)
		}
	}
	return root
}

// kindClass groups kinds by the schema keywords that apply to them.
type kindClass int

const (
	classOther kindClass = iota
	classString
	classNumber
	classArray
	classObject
)

func classOf(t reflect.Type) kindClass {
	if t == timeType {
		return classOther
	}
	switch k := t.Kind(); {
	case k == reflect.String:
		return classString
	case isInt(k) || isUint(k) || k == reflect.Float32 || k == reflect.Float64:
		return classNumber
	case k == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return classString
	case k == reflect.Slice || k == reflect.Array:
		return classArray
	case k == reflect.Map:
		return classObject
	}
	return classOther
}

func isInt(k reflect.Kind) bool {
	return k == reflect.Int || k == reflect.Int8 || k == reflect.Int16 || k == reflect.Int32 || k == reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k == reflect.Uint || k == reflect.Uint8 || k == reflect.Uint16 || k == reflect.Uint32 ||
		k == reflect.Uint64 || k == reflect.Uintptr
}

// unprojected reports tags with no schema counterpart: presence is handled
// by "required", cross-field and conditional rules cannot be said in a
// single property's schema, and isdefault/omit* only steer validation.
func unprojected(tag string) bool {
	switch tag {
	case "required", "omitempty", "omitnil", "omitzero", "isdefault", "structonly", "nostructlevel",
		"required_if", "required_unless", "required_with", "required_with_all", "required_without",
		"required_without_all", "excluded_if", "excluded_unless", "excluded_with", "excluded_with_all",
		"excluded_without", "excluded_without_all",
		"eqfield", "nefield", "gtfield", "gtefield", "ltfield", "ltefield",
		"eqcsfield", "necsfield", "gtcsfield", "gtecsfield", "ltcsfield", "ltecsfield":
		return true
	}
	return false
}

// stringPattern returns the pattern of a string rule, written to mean the
// same in ECMA-262 and Go regexp. iso4217, lowercase and uppercase are
// approximations that are never stricter than the validator.
func stringPattern(tag string) (string, bool) {
	switch tag {
	case "alpha":
		return `^[a-zA-Z]+$`, true
	case "alphanum":
		return `^[a-zA-Z0-9]+$`, true
	case "numeric":
		return `^[-+]?[0-9]+(?:\.[0-9]+)?$`, true
	case "number":
		return `^[0-9]+$`, true
	case "hexadecimal":
		return `^(0[xX])?[0-9a-fA-F]+$`, true
	case "ascii":
		return `^[\x00-\x7F]*$`, true
	case "printascii":
		return `^[\x20-\x7E]*$`, true
	case "base64":
		return `^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$`, true
	case "base64url":
		return `^(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=|[A-Za-z0-9_-]{4})$`, true
	case "base64rawurl":
		return `^[A-Za-z0-9_-]*$`, true
	case "e164":
		return `^\+[1-9]?[0-9]{7,14}$`, true
	case "jwt":
		return `^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`, true
	case "iso4217":
		return `^[A-Z]{3}$`, true
	case "lowercase":
		return `^[^A-Z]*$`, true
	case "uppercase":
		return `^[^a-z]*$`, true
	}
	return "", false
}

// stringFormat returns the JSON Schema format of a string rule.
func stringFormat(tag string) (string, bool) {
	switch tag {
	case "url", "http_url", "uri":
		return "uri", true
	case "email":
		return "email", true
	case "uuid", "uuid3", "uuid4", "uuid5", "uuid_rfc4122", "uuid3_rfc4122", "uuid4_rfc4122", "uuid5_rfc4122":
		return "uuid", true
	case "hostname", "hostname_rfc1123", "fqdn":
		return "hostname", true
	case "ipv4":
		return "ipv4", true
	case "ipv6":
		return "ipv6", true
	}
	return "", false
}

// applyTags projects the validate rules of a field of type t onto s.
func (g *schemaGen) applyTags(s Schema, t reflect.Type, tags validateTags) error {
	class := classOf(t)
	for _, r := range tags.rules {
		if err := g.applyRule(s, t, class, r); err != nil {
			return err
		}
	}
	if len(tags.keys) > 0 {
		return errors.New("keys/endkeys must follow dive")
	}
	if tags.dive != nil {
		var sub string
		switch t.Kind() {
		case reflect.Slice, reflect.Array:
			sub = "items"
		case reflect.Map:
			sub = "additionalProperties"
		default:
			return fmt.Errorf("dive on %s, which is not a slice, array or map", t)
		}
		items := *tags.dive
		if len(items.keys) > 0 {
			if t.Kind() != reflect.Map {
				return errors.New("keys/endkeys on a non-map field")
			}
			names := Schema{}
			for _, r := range items.keys {
				if err := g.applyRule(names, t.Key(), classOf(t.Key()), r); err != nil {
					return err
				}
			}
			s["propertyNames"] = names
			items.keys = nil
		}
		item, err := g.fieldSchema(t.Elem(), items, false)
		if err != nil {
			return err
		}
		s[sub] = item
	}
	return nil
}

func (g *schemaGen) applyRule(s Schema, t reflect.Type, class kindClass, r validateRule) error {
	if r.tag == "|" {
		var alts []any
		for _, a := range r.or {
			frag := Schema{}
			if err := g.applyRule(frag, t, class, a); err != nil {
				return err
			}
			alts = append(alts, frag)
		}
		s["anyOf"] = alts
		return nil
	}
	if unprojected(r.tag) {
		return nil
	}
	if rule, ok := g.rules[r.tag]; ok {
		if rule.Schema != nil {
			rule.Schema(s, r.param)
		}
		return nil
	}
	if f, ok := stringFormat(r.tag); ok && class == classString {
		s["format"] = f
		return nil
	}
	if p, ok := stringPattern(r.tag); ok && class == classString {
		s["pattern"] = p
		return nil
	}
	switch r.tag {
	case "min", "max", "len", "gt", "gte", "lt", "lte", "eq", "ne":
		return applyBound(s, t, class, r)
	case "oneof":
		vals, err := oneofValues(t, r.param)
		if err != nil {
			return err
		}
		s["enum"] = vals
		return nil
	case "unique":
		if class == classArray {
			s["uniqueItems"] = true
			return nil
		}
	case "ip", "ip_addr":
		if class == classString {
			s["anyOf"] = []any{Schema{"format": "ipv4"}, Schema{"format": "ipv6"}}
			return nil
		}
	case "startswith", "endswith", "contains":
		if class == classString {
			q := regexp.QuoteMeta(r.param)
			switch r.tag {
			case "startswith":
				q = "^" + q
			case "endswith":
				q += "$"
			}
			s["pattern"] = q
			return nil
		}
	case "datetime":
		if class == classString {
			if r.param == time.RFC3339 || r.param == time.RFC3339Nano {
				s["format"] = "date-time"
			} else if r.param == time.DateOnly {
				s["format"] = "date"
			} else {
				return fmt.Errorf("datetime=%s has no JSON Schema format", r.param)
			}
			return nil
		}
	}
	return fmt.Errorf("validate rule %q has no schema projection for %s", r.tag, t)
}

// applyBound projects the comparison rules. For strings they bound the
// length in characters (validator counts runes, JSON Schema code points),
// for arrays the item count, for maps the member count, for numbers the
// value.
func applyBound(s Schema, t reflect.Type, class kindClass, r validateRule) error {
	if class == classOther && t == timeType && r.param == "" {
		return nil // gt/lt without a param on time.Time compare with "now": not a static schema
	}
	if class == classOther {
		return fmt.Errorf("validate rule %s does not apply to %s", r.tag, t)
	}
	if class == classNumber {
		n, err := parseNumber(t, r.param)
		if err != nil {
			return fmt.Errorf("%s=%s: %w", r.tag, r.param, err)
		}
		switch r.tag {
		case "min", "gte":
			s["minimum"] = n
		case "max", "lte":
			s["maximum"] = n
		case "gt":
			s["exclusiveMinimum"] = n
		case "lt":
			s["exclusiveMaximum"] = n
		case "len", "eq":
			s["const"] = n
		case "ne":
			s["not"] = Schema{"const": n}
		}
		return nil
	}
	if class == classString && (r.tag == "eq" || r.tag == "ne") {
		if r.tag == "eq" {
			s["const"] = r.param
		} else {
			s["not"] = Schema{"const": r.param}
		}
		return nil
	}
	n, err := strconv.Atoi(r.param)
	if err != nil || n < 0 {
		return fmt.Errorf("%s=%s: want a non-negative integer", r.tag, r.param)
	}
	lo, hi := "minLength", "maxLength"
	switch class {
	case classArray:
		lo, hi = "minItems", "maxItems"
	case classObject:
		lo, hi = "minProperties", "maxProperties"
	}
	switch r.tag {
	case "min", "gte":
		s[lo] = n
	case "max", "lte":
		s[hi] = n
	case "gt":
		s[lo] = n + 1
	case "lt":
		if n == 0 {
			return fmt.Errorf("lt=0 on a length can never hold")
		}
		s[hi] = n - 1
	case "len", "eq":
		s[lo], s[hi] = n, n
	case "ne":
		return fmt.Errorf("ne on a length has no schema projection")
	}
	return nil
}

// parseNumber parses a rule parameter as a JSON number of t's kind.
func parseNumber(t reflect.Type, p string) (any, error) {
	switch k := t.Kind(); {
	case isInt(k):
		return strconv.ParseInt(p, 10, 64)
	case isUint(k):
		return strconv.ParseUint(p, 10, 64)
	default:
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
}

// oneofValues returns the enum of a oneof rule, typed like the field:
// values are separated by spaces and may be 'single quoted'.
func oneofValues(t reflect.Type, p string) ([]any, error) {
	var out []any
	for _, v := range splitOneof(p) {
		switch classOf(t) {
		case classString:
			out = append(out, v)
		case classNumber:
			n, err := parseNumber(t, v)
			if err != nil {
				return nil, fmt.Errorf("oneof value %q: %w", v, err)
			}
			out = append(out, n)
		default:
			return nil, fmt.Errorf("oneof on %s", t)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("oneof without values")
	}
	return out, nil
}

// splitOneof splits like validator's oneof: 'quoted values' or runs of
// non-space characters.
func splitOneof(p string) []string {
	var out []string
	for i := 0; i < len(p); {
		switch {
		case p[i] == ' ':
			i++
		case p[i] == '\'':
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				out = append(out, p[i+1:])
				return out
			}
			out = append(out, p[i+1:i+1+j])
			i += j + 2
		default:
			j := strings.IndexByte(p[i:], ' ')
			if j < 0 {
				j = len(p) - i
			}
			out = append(out, strings.ReplaceAll(p[i:i+j], "'", ""))
			i += j
		}
	}
	return out
}

// parseDefault parses a default tag as a JSON value of t's type.
func parseDefault(t reflect.Type, def string) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch classOf(t) {
	case classNumber:
		return parseNumber(t, def)
	case classString:
		return def, nil
	}
	if t.Kind() == reflect.Bool {
		return strconv.ParseBool(def)
	}
	return nil, fmt.Errorf("default on %s is not supported", t)
}
