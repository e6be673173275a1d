package contract

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/countersign/countersign/internal/fielderr"
	"github.com/countersign/countersign/internal/strictjson"
)

// ErrInvalid is matched by every [*ValidationError]; check with errors.Is.
var ErrInvalid = errors.New("contract: invalid request")

// ValidationError lists every field of a request that has the wrong type or
// breaks a validate rule. It becomes a request.validation problem whose
// errors member is Errors.
type ValidationError struct {
	Errors []FieldError
}

func (e *ValidationError) Error() string {
	return fielderr.Join("contract: invalid request: ", e.Errors)
}

// Code returns request.validation.
func (e *ValidationError) Code() string { return CodeRequestValidation }

// Unwrap makes every ValidationError match [ErrInvalid].
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Rule is a custom validate tag.
type Rule struct {
	// Tag is the name used in validate tags, e.g. "rationale".
	Tag string
	// Func reports whether a field passes; see validator.Func.
	Func validator.Func
	// Message says what a failing field must be, e.g. "must have at least
	// 10 characters besides spaces". It receives the tag's parameter.
	Message func(param string) string
	// Schema projects the rule onto the field's schema (for example by
	// setting minLength). Nil means the rule has no schema counterpart.
	Schema func(s Schema, param string)
}

// ruleValidator runs validate tags. A [Model] owns one; it is safe for
// concurrent use.
type ruleValidator struct {
	v     *validator.Validate
	rules map[string]Rule
}

func newValidator(rules []Rule) (*ruleValidator, error) {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(wireName)
	out := &ruleValidator{v: v, rules: make(map[string]Rule)}
	for _, r := range rules {
		if r.Tag == "" || r.Func == nil || r.Message == nil {
			return nil, fmt.Errorf("rule %q needs a tag, a Func and a Message", r.Tag)
		}
		if _, dup := out.rules[r.Tag]; dup {
			return nil, fmt.Errorf("rule %s declared twice", r.Tag)
		}
		if err := v.RegisterValidation(r.Tag, r.Func); err != nil {
			return nil, fmt.Errorf("rule %s: %w", r.Tag, err)
		}
		out.rules[r.Tag] = r
	}
	return out, nil
}

// wireName names a field as the client sees it: its JSON member name, or
// its parameter name for parameter structs.
func wireName(f reflect.StructField) string {
	if f.Anonymous && f.Tag.Get("json") == "" {
		// An embedded struct's members are the outer object's own on the
		// wire; its type name must not appear in a field path.
		return embeddedName
	}
	for _, key := range []string{"json", "query", "path", "header"} {
		if v, ok := f.Tag.Lookup(key); ok {
			name, _, _ := strings.Cut(v, ",")
			if name == "-" {
				return ""
			}
			if name != "" {
				return name
			}
		}
	}
	return f.Name
}

// Validate checks v, a struct or a pointer to one; see [Model.Validate].
func (v *ruleValidator) Validate(x any) error {
	err := v.v.Struct(x)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return fmt.Errorf("contract: validate %T: %w", x, err)
	}
	out := &ValidationError{Errors: make([]FieldError, 0, len(verrs))}
	for _, fe := range verrs {
		out.Errors = append(out.Errors, FieldError{
			Field:   fieldPath(fe.Namespace()),
			Rule:    fe.Tag(),
			Message: v.message(fe),
		})
	}
	return out
}

// embeddedName is what [wireName] calls an embedded struct, so that
// [fieldPath] can drop it: no JSON member name can contain "~".
const embeddedName = "~embedded~"

// fieldPath turns a validator namespace ("AuditListParams.lines[0].sku")
// into a JSON path ("lines[0].sku") by dropping the root type name.
//
// Map keys come from the validator as [key]; they are rewritten to the
// form DecodeJSON uses (meta.key, or meta["odd key"]), so one field has
// one path whichever check reports it. Slice indexes stay [i].
func fieldPath(ns string) string {
	_, rest, ok := strings.Cut(ns, ".")
	if !ok {
		return ""
	}
	rest = strings.ReplaceAll(rest, embeddedName+".", "")
	if !strings.Contains(rest, "[") {
		return rest
	}
	var b strings.Builder
	for rest != "" {
		i := strings.IndexByte(rest, '[')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		j := strings.IndexByte(rest[i:], ']')
		if j < 0 {
			b.WriteString(rest[i:])
			break
		}
		key := rest[i+1 : i+j]
		if isDigits(key) {
			b.WriteString(rest[i : i+j+1])
		} else {
			p := strictjson.Member("x", key) // "x.key" or `x["key"]`
			b.WriteString(p[1:])
		}
		rest = rest[i+j+1:]
	}
	return b.String()
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (v *ruleValidator) message(fe validator.FieldError) string {
	if r, ok := v.rules[fe.Tag()]; ok {
		return r.Message(fe.Param())
	}
	p := fe.Param()
	t := fe.Type()
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	class := classOther
	if t != nil {
		class = classOf(t)
	}
	unit := func(n string) string {
		noun := ""
		switch class {
		case classString:
			noun = " character"
		case classArray:
			noun = " item"
		case classObject:
			noun = " member"
		}
		if noun != "" && n != "1" {
			noun += "s"
		}
		return n + noun
	}
	switch fe.Tag() {
	case "required":
		return "is required"
	case "min", "gte":
		if class == classNumber {
			return "must be at least " + p
		}
		return "must have at least " + unit(p)
	case "max", "lte":
		if class == classNumber {
			return "must be at most " + p
		}
		return "must have at most " + unit(p)
	case "gt":
		if class == classNumber {
			return "must be greater than " + p
		}
		return "must have more than " + unit(p)
	case "lt":
		if class == classNumber {
			return "must be less than " + p
		}
		return "must have fewer than " + unit(p)
	case "len", "eq":
		if class == classNumber || class == classOther || (fe.Tag() == "eq" && class == classString) {
			return "must equal " + p
		}
		return "must have exactly " + unit(p)
	case "ne":
		return "must not equal " + p
	case "oneof":
		return "must be one of: " + strings.Join(splitOneof(p), ", ")
	case "url", "http_url", "uri":
		return "must be an absolute URL"
	case "email":
		return "must be an email address"
	case "uuid", "uuid3", "uuid4", "uuid5", "uuid_rfc4122", "uuid3_rfc4122", "uuid4_rfc4122", "uuid5_rfc4122":
		return "must be a UUID"
	case "unique":
		return "must not contain duplicates"
	case "startswith":
		return "must start with " + p
	case "endswith":
		return "must end with " + p
	case "contains":
		return "must contain " + p
	case "datetime":
		return "must be a date-time in the layout " + p
	case "iso4217":
		return "must be an ISO 4217 currency code"
	}
	return "does not satisfy the " + fe.Tag() + " rule"
}
