package contract

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/google/go-cmp/cmp"
)

// propSchema returns the JSON of the schema of field F of a one-field
// struct with the given Go type and tags, as generated for a body.
func propSchema(t *testing.T, typ reflect.Type, tag reflect.StructTag) (string, error) {
	t.Helper()
	if !strings.Contains(string(tag), "json:") {
		tag = `json:"f" ` + tag
	}
	st := reflect.StructOf([]reflect.StructField{{Name: "F", Type: typ, Tag: tag}})
	g := newSchemaGen(nil)
	s, err := g.objectSchema(st)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(s["properties"].(Schema)["f"])
	if err != nil {
		t.Fatal(err)
	}
	return string(b), nil
}

type Item struct {
	SKU string `json:"sku"`
}

func TestSchemaProjection(t *testing.T) {
	str := reflect.TypeFor[string]()
	i64 := reflect.TypeFor[int64]()
	u := reflect.TypeFor[uint64]()
	f64 := reflect.TypeFor[float64]()
	strs := reflect.TypeFor[[]string]()
	tests := []struct {
		name string
		typ  reflect.Type
		tag  reflect.StructTag
		want string
	}{
		// Types.
		{"string", str, ``, `{"type":"string"}`},
		{"bool", reflect.TypeFor[bool](), ``, `{"type":"boolean"}`},
		{"int", reflect.TypeFor[int](), ``, `{"format":"int64","type":"integer"}`},
		{"int32", reflect.TypeFor[int32](), ``, `{"format":"int32","type":"integer"}`},
		{"uint64", u, ``, `{"minimum":0,"type":"integer"}`},
		{"float", f64, ``, `{"type":"number"}`},
		{"time", reflect.TypeFor[time.Time](), ``, `{"format":"date-time","type":"string"}`},
		{"raw message", reflect.TypeFor[json.RawMessage](), ``, `{}`},
		{"any", reflect.TypeFor[any](), ``, `{}`},
		{"bytes", reflect.TypeFor[[]byte](), ``, `{"contentEncoding":"base64","type":"string"}`},
		{"slice", strs, ``, `{"items":{"type":"string"},"type":"array"}`},
		{"array", reflect.TypeFor[[2]int8](), ``, `{"items":{"type":"integer"},"maxItems":2,"minItems":2,"type":"array"}`},
		{"map", reflect.TypeFor[map[string]int](), ``, `{"additionalProperties":{"format":"int64","type":"integer"},"type":"object"}`},
		{"int-keyed map", reflect.TypeFor[map[int]bool](), ``, `{"additionalProperties":{"type":"boolean"},"propertyNames":{"pattern":"^-?[0-9]+$"},"type":"object"}`},
		{"pointer", reflect.TypeFor[*string](), ``, `{"type":["string","null"]}`},
		{"pointer to struct", reflect.TypeFor[*Item](), ``, `{"anyOf":[{"$ref":"#/components/schemas/Item"},{"type":"null"}]}`},
		{"named struct", reflect.TypeFor[Item](), ``, `{"$ref":"#/components/schemas/Item"}`},
		{"anonymous struct", reflect.TypeFor[struct {
			A int `json:"a,omitempty"`
		}](), ``, `{"properties":{"a":{"format":"int64","type":"integer"}},"type":"object"}`},
		{"enum type", reflect.TypeFor[Action](), ``, `{"enum":["retry-as-is","fix-request","reauthenticate","await-operator","continue-at-link","stop"],"type":"string"}`},
		// Strings.
		{"string min max", str, `validate:"min=1,max=64"`, `{"maxLength":64,"minLength":1,"type":"string"}`},
		{"string len", str, `validate:"len=3"`, `{"maxLength":3,"minLength":3,"type":"string"}`},
		{"string gt lt", str, `validate:"gt=1,lt=10"`, `{"maxLength":9,"minLength":2,"type":"string"}`},
		{"string gte lte", str, `validate:"gte=1,lte=10"`, `{"maxLength":10,"minLength":1,"type":"string"}`},
		{"string eq", str, `validate:"eq=ok"`, `{"const":"ok","type":"string"}`},
		{"string ne", str, `validate:"ne=no"`, `{"not":{"const":"no"},"type":"string"}`},
		{"oneof", str, `validate:"oneof=acp ucp"`, `{"enum":["acp","ucp"],"type":"string"}`},
		{"oneof quoted", str, `validate:"oneof='a b' c"`, `{"enum":["a b","c"],"type":"string"}`},
		{"url", str, `validate:"url"`, `{"format":"uri","type":"string"}`},
		{"http_url", str, `validate:"http_url"`, `{"format":"uri","type":"string"}`},
		{"email", str, `validate:"email"`, `{"format":"email","type":"string"}`},
		{"uuid", str, `validate:"uuid4"`, `{"format":"uuid","type":"string"}`},
		{"hostname", str, `validate:"hostname"`, `{"format":"hostname","type":"string"}`},
		{"ipv4", str, `validate:"ipv4"`, `{"format":"ipv4","type":"string"}`},
		{"ip", str, `validate:"ip"`, `{"anyOf":[{"format":"ipv4"},{"format":"ipv6"}],"type":"string"}`},
		{"alphanum", str, `validate:"alphanum"`, `{"pattern":"^[a-zA-Z0-9]+$","type":"string"}`},
		{"hexadecimal", str, `validate:"hexadecimal"`, `{"pattern":"^(0[xX])?[0-9a-fA-F]+$","type":"string"}`},
		{"printascii", str, `validate:"printascii"`, `{"pattern":"^[\\x20-\\x7E]*$","type":"string"}`},
		{"iso4217", str, `validate:"iso4217"`, `{"pattern":"^[A-Z]{3}$","type":"string"}`},
		{"startswith", str, `validate:"startswith=int_"`, `{"pattern":"^int_","type":"string"}`},
		{"endswith", str, `validate:"endswith=.x"`, `{"pattern":"\\.x$","type":"string"}`},
		{"datetime", str, `validate:"datetime=2006-01-02T15:04:05Z07:00"`, `{"format":"date-time","type":"string"}`},
		{"alternatives", str, `validate:"url|email"`, `{"anyOf":[{"format":"uri"},{"format":"email"}],"type":"string"}`},
		{"pointer string with enum", reflect.TypeFor[*string](), `validate:"omitempty,oneof=a b"`, `{"enum":["a","b",null],"type":["string","null"]}`},
		// Numbers.
		{"int min max", i64, `validate:"min=1,max=100"`, `{"format":"int64","maximum":100,"minimum":1,"type":"integer"}`},
		{"int gt lt", i64, `validate:"gt=0,lt=9007199254740992"`, `{"exclusiveMaximum":9007199254740992,"exclusiveMinimum":0,"format":"int64","type":"integer"}`},
		{"uint gte lte", u, `validate:"gte=1,lte=5"`, `{"maximum":5,"minimum":1,"type":"integer"}`},
		{"float min", f64, `validate:"min=0.5"`, `{"minimum":0.5,"type":"number"}`},
		{"int oneof", i64, `validate:"oneof=1 2 3"`, `{"enum":[1,2,3],"format":"int64","type":"integer"}`},
		{"int eq", i64, `validate:"eq=7"`, `{"const":7,"format":"int64","type":"integer"}`},
		// Arrays and maps.
		{"slice min max", strs, `validate:"min=1,max=16"`, `{"items":{"type":"string"},"maxItems":16,"minItems":1,"type":"array"}`},
		{"slice gt", strs, `validate:"gt=0"`, `{"items":{"type":"string"},"minItems":1,"type":"array"}`},
		{"slice unique", strs, `validate:"unique"`, `{"items":{"type":"string"},"type":"array","uniqueItems":true}`},
		{"dive", strs, `validate:"min=1,dive,min=1,max=64"`, `{"items":{"maxLength":64,"minLength":1,"type":"string"},"minItems":1,"type":"array"}`},
		{"dive struct", reflect.TypeFor[[]Item](), `validate:"required,dive"`, `{"items":{"$ref":"#/components/schemas/Item"},"type":"array"}`},
		{"nested dive", reflect.TypeFor[[][]string](), `validate:"dive,max=2,dive,url"`, `{"items":{"items":{"format":"uri","type":"string"},"maxItems":2,"type":"array"},"type":"array"}`},
		{"map dive keys", reflect.TypeFor[map[string]int](), `validate:"max=3,dive,keys,min=1,endkeys,min=0"`, `{"additionalProperties":{"format":"int64","minimum":0,"type":"integer"},"maxProperties":3,"propertyNames":{"minLength":1},"type":"object"}`},
		// Tags that only steer validation.
		{"required", str, `validate:"required"`, `{"type":"string"}`},
		{"cross-field", i64, `validate:"gtefield=Other"`, `{"format":"int64","type":"integer"}`},
		{"doc", str, `doc:"What it is."`, `{"description":"What it is.","type":"string"}`},
		{"default", i64, `default:"20"`, `{"default":20,"format":"int64","type":"integer"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := propSchema(t, tt.typ, tt.tag)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("schema of %s `%s`\n got %s\nwant %s", tt.typ, tt.tag, got, tt.want)
			}
		})
	}
}

func TestSchemaProjectionErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  reflect.Type
		tag  reflect.StructTag
		want string
	}{
		{"unknown tag", reflect.TypeFor[string](), `validate:"frobnicate"`, "no schema projection"},
		{"format on int", reflect.TypeFor[int](), `validate:"url"`, "no schema projection"},
		{"min on bool", reflect.TypeFor[bool](), `validate:"min=1"`, "does not apply"},
		{"dive on string", reflect.TypeFor[string](), `validate:"dive,min=1"`, "dive on string"},
		{"bad number", reflect.TypeFor[int](), `validate:"min=x"`, "min=x"},
		{"bad datetime layout", reflect.TypeFor[string](), `validate:"datetime=Jan 2"`, "no JSON Schema format"},
		{"string option", reflect.TypeFor[int](), `json:"f,string"`, ",string option"},
		{"channel", reflect.TypeFor[chan int](), ``, "has no JSON Schema"},
		{"struct-keyed map", reflect.TypeFor[map[Item]int](), ``, "cannot be a JSON member name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := propSchema(t, tt.typ, tt.tag)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

type requiredness struct {
	Plain          string  `json:"plain"`
	Omit           string  `json:"omit,omitempty"`
	OmitZero       string  `json:"omitZero,omitzero"`
	OmitRequired   string  `json:"omitRequired,omitempty" validate:"required"`
	ValidateOmit   string  `json:"validateOmit" validate:"omitempty,min=2"`
	Pointer        *string `json:"pointer"`
	Skipped        string  `json:"-"`
	unexported     string
	Embedded       // flattened
	Untagged       bool
	*EmbeddedNamed `json:"named,omitempty"`
}

type Embedded struct {
	Inner int `json:"inner"`
}

type EmbeddedNamed struct {
	X int `json:"x"`
}

func TestObjectRequiredAndFields(t *testing.T) {
	_ = requiredness{}.unexported
	g := newSchemaGen(nil)
	s, err := g.schemaFor(reflect.TypeFor[requiredness]())
	if err != nil {
		t.Fatal(err)
	}
	if s["$ref"] != "#/components/schemas/requiredness" {
		t.Fatalf("ref = %v", s)
	}
	c := g.components["requiredness"]
	var props []string
	for k := range c["properties"].(Schema) {
		props = append(props, k)
	}
	wantProps := []string{"Untagged", "inner", "named", "omit", "omitRequired", "omitZero", "plain", "pointer", "validateOmit"}
	if diff := cmp.Diff(wantProps, sorted(props)); diff != "" {
		t.Errorf("properties (-want +got):\n%s", diff)
	}
	wantReq := []any{"plain", "omitRequired", "pointer", "inner", "Untagged"}
	if diff := cmp.Diff(wantReq, c["required"]); diff != "" {
		t.Errorf("required (-want +got):\n%s", diff)
	}
}

func sorted(ss []string) []string {
	out := append([]string(nil), ss...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

type Node struct {
	Name     string  `json:"name"`
	Children []*Node `json:"children,omitempty"`
}

func TestRecursiveType(t *testing.T) {
	g := newSchemaGen(nil)
	if _, err := g.schemaFor(reflect.TypeFor[Node]()); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(g.components["Node"])
	want := `{"properties":{"children":{"items":{"anyOf":[{"$ref":"#/components/schemas/Node"},{"type":"null"}]},"type":"array"},"name":{"type":"string"}},"required":["name"],"type":"object"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestComponentNameCollision(t *testing.T) {
	type Item struct { // same name as the package-level Item
		X int `json:"x"`
	}
	g := newSchemaGen(nil)
	// The same type twice is fine.
	if _, err := g.schemaFor(reflect.TypeFor[struct {
		A Item  `json:"a"`
		B *Item `json:"b"`
	}]()); err != nil {
		t.Fatal(err)
	}
	// A different type with the same name is refused.
	_, err := g.schemaFor(reflect.TypeFor[struct {
		P Item        `json:"p"`
		Q packageItem `json:"q"`
	}]())
	if err == nil || !strings.Contains(err.Error(), "would both be component Item") {
		t.Errorf("err = %v, want a collision", err)
	}
}

type packageItem = Item

func TestCustomRuleProjection(t *testing.T) {
	m, err := Build(Definition{Title: "t", Version: "1", Parts: []Part{Core()}, Rules: []Rule{{
		Tag:     "rationale",
		Func:    func(fl validator.FieldLevel) bool { return len(strings.TrimSpace(fl.Field().String())) >= 10 },
		Message: func(string) string { return "must have at least 10 characters besides surrounding spaces" },
		Schema:  func(s Schema, _ string) { s["minLength"] = 10 },
	}}})
	if err != nil {
		t.Fatal(err)
	}
	type Req struct {
		Rationale string `json:"rationale" validate:"rationale"`
	}
	if _, err := m.Schema(reflect.TypeFor[Req]()); err != nil {
		t.Fatal(err)
	}
	err = m.Validate(Req{Rationale: "   short      "})
	want := &ValidationError{Errors: []FieldError{{Field: "rationale", Rule: "rationale",
		Message: "must have at least 10 characters besides surrounding spaces"}}}
	if diff := cmp.Diff(want, err); diff != "" {
		t.Errorf("Validate (-want +got):\n%s", diff)
	}
}
