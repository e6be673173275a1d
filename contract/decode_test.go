package contract

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type Amount struct {
	Minor    int64  `json:"minor" validate:"gt=0,lt=9007199254740992"`
	Currency string `json:"currency" validate:"required,len=3"`
}

type Line struct {
	SKU      string `json:"sku" validate:"required,max=8"`
	Quantity uint32 `json:"quantity" validate:"min=1"`
}

type order struct {
	Amount  Amount            `json:"amount"`
	Lines   []Line            `json:"lines" validate:"min=1,dive"`
	Note    *string           `json:"note,omitempty"`
	Rail    string            `json:"rail" validate:"oneof=acp ucp"`
	At      time.Time         `json:"at,omitzero"`
	Meta    map[string]string `json:"meta,omitempty" validate:"omitempty,max=2,dive,max=4"`
	Data    json.RawMessage   `json:"data,omitempty"`
	Flag    bool              `json:"flag,omitempty"`
	Ratio   float32           `json:"ratio,omitempty"`
	Small   int8              `json:"small,omitempty"`
	Website string            `json:"website,omitempty" validate:"omitempty,url"`
}

// consistencyParams has a required pointer parameter.
type consistencyParams struct {
	From *uint64 `query:"from" validate:"required,min=1"`
	To   uint64  `query:"to"`
}

const validOrder = `{"amount":{"minor":1250,"currency":"USD"},"lines":[{"sku":"A1","quantity":2}],"rail":"acp"}`

func TestDecodeJSONValid(t *testing.T) {
	var o order
	body := `{"amount":{"minor":1250,"currency":"USD"},"lines":[{"sku":"A1","quantity":2}],"rail":"acp",` +
		`"note":null,"at":"2026-11-22T10:00:00Z","meta":{"k":"v"},"data":{"any":[1,"x"]},"flag":true,"ratio":0.5,"small":-3}` +
		"\n\t "
	if err := DecodeJSON(strings.NewReader(body), &o); err != nil {
		t.Fatal(err)
	}
	if o.Amount.Minor != 1250 || o.Lines[0].Quantity != 2 || !o.At.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) ||
		string(o.Data) != `{"any":[1,"x"]}` || o.Small != -3 {
		t.Errorf("decoded %+v", o)
	}
}

func TestDecodeJSONRefuses(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		code   string // DecodeError code, or "" for a ValidationError
		fields []FieldError
		detail string
	}{
		{name: "empty", body: "", code: CodeRequestMalformedJSON, detail: "empty"},
		{name: "whitespace", body: "  \n", code: CodeRequestMalformedJSON, detail: "empty"},
		{name: "truncated", body: `{"amount":{"minor":1`, code: CodeRequestMalformedJSON, detail: "ends unexpectedly"},
		{name: "syntax", body: `{"amount":}`, code: CodeRequestMalformedJSON, detail: "invalid JSON at byte"},
		{name: "trailing value", body: validOrder + `{}`, code: CodeRequestMalformedJSON, detail: "after the JSON value"},
		{name: "trailing garbage", body: validOrder + `x`, code: CodeRequestMalformedJSON, detail: "after the JSON value"},
		{name: "invalid utf-8", body: "{\"rail\":\"\xff\"}", code: CodeRequestMalformedJSON, detail: "UTF-8"},
		{name: "duplicate member", body: `{"rail":"acp","rail":"ucp"}`, code: CodeRequestMalformedJSON, detail: "member rail appears twice"},
		{name: "nested duplicate", body: `{"amount":{"minor":1,"minor":2}}`, code: CodeRequestMalformedJSON, detail: "amount.minor appears twice"},
		{name: "unknown top", body: `{"rail":"acp","extra":1}`, code: CodeRequestUnknownField, detail: `"extra"`},
		{name: "unknown nested", body: `{"lines":[{"sku":"a","colour":"red"}]}`, code: CodeRequestUnknownField, detail: `"lines[0].colour"`},
		{name: "case mismatch", body: `{"Rail":"acp"}`, code: CodeRequestUnknownField, detail: `"Rail"`},
		{name: "odd key", body: `{"a b":1}`, code: CodeRequestUnknownField, detail: `"[\"a b\"]"`},
		{name: "string for int", body: `{"amount":{"minor":"12"}}`, fields: []FieldError{{Field: "amount.minor", Rule: "type", Message: "must be an integer"}}},
		{name: "fraction for int", body: `{"amount":{"minor":1.5}}`, fields: []FieldError{{Field: "amount.minor", Rule: "type", Message: "must be an integer"}}},
		{name: "negative uint", body: `{"lines":[{"quantity":-1}]}`, fields: []FieldError{{Field: "lines[0].quantity", Rule: "type", Message: "must be a non-negative integer"}}},
		{name: "uint overflow", body: `{"lines":[{},{"quantity":4294967296}]}`, fields: []FieldError{{Field: "lines[1].quantity", Rule: "type", Message: "must be an integer between 0 and 4294967295"}}},
		{name: "int8 overflow", body: `{"small":200}`, fields: []FieldError{{Field: "small", Rule: "type", Message: "must be an integer between -128 and 127"}}},
		{name: "object for array", body: `{"lines":{}}`, fields: []FieldError{{Field: "lines", Rule: "type", Message: "must be an array"}}},
		{name: "array for object", body: `[]`, fields: []FieldError{{Field: "", Rule: "type", Message: "must be an object"}}},
		{name: "number for string", body: `{"rail":1}`, fields: []FieldError{{Field: "rail", Rule: "type", Message: "must be a string"}}},
		{name: "string for bool", body: `{"flag":"true"}`, fields: []FieldError{{Field: "flag", Rule: "type", Message: "must be true or false"}}},
		{name: "bad time", body: `{"at":"yesterday"}`, fields: []FieldError{{Field: "at", Rule: "type", Message: "must be an RFC 3339 date-time string"}}},
		{name: "number for time", body: `{"at":1}`, fields: []FieldError{{Field: "at", Rule: "type", Message: "must be an RFC 3339 date-time string"}}},
		{name: "map value type", body: `{"meta":{"k":1}}`, fields: []FieldError{{Field: "meta.k", Rule: "type", Message: "must be a string"}}},
		{name: "float overflow", body: `{"ratio":1e300}`, fields: []FieldError{{Field: "ratio", Rule: "type", Message: "is out of range for a number"}}},
		{name: "several", body: `{"rail":1,"flag":2}`, fields: []FieldError{{Field: "flag", Rule: "type", Message: "must be true or false"}, {Field: "rail", Rule: "type", Message: "must be a string"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o order
			err := DecodeJSON(strings.NewReader(tt.body), &o)
			if err == nil {
				t.Fatal("decoded; want an error")
			}
			if tt.code != "" {
				var de *DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("err = %T %v, want *DecodeError", err, err)
				}
				if de.Code != tt.code || !strings.Contains(de.Detail, tt.detail) {
					t.Errorf("got %s %q, want %s containing %q", de.Code, de.Detail, tt.code, tt.detail)
				}
				wantSentinel := ErrMalformedJSON
				if tt.code == CodeRequestUnknownField {
					wantSentinel = ErrUnknownField
				}
				if !errors.Is(err, wantSentinel) {
					t.Errorf("errors.Is(%v, %v) = false", err, wantSentinel)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %T %v, want *ValidationError", err, err)
			}
			if diff := cmp.Diff(tt.fields, ve.Errors); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Error("ValidationError does not match ErrInvalid")
			}
		})
	}
}

func TestDecodeJSONReadError(t *testing.T) {
	boom := errors.New("boom")
	var o order
	err := DecodeJSON(iotestErrReader{boom}, &o)
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap the read error", err)
	}
	if err := DecodeJSON(strings.NewReader("{}"), o); err == nil {
		t.Error("non-pointer destination accepted")
	}
}

type iotestErrReader struct{ err error }

func (r iotestErrReader) Read([]byte) (int, error) { return 0, r.err }

func TestDecodeJSONDepthLimit(t *testing.T) {
	var v any
	body := strings.Repeat("[", maxDepth+2) + strings.Repeat("]", maxDepth+2)
	err := DecodeJSON(strings.NewReader(body), &v)
	if !errors.Is(err, ErrMalformedJSON) || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("err = %v", err)
	}
}

func TestValidateMessagesAndPaths(t *testing.T) {
	m := testModel(t)
	long := "abcdefghij"
	tests := []struct {
		name string
		v    any
		want []FieldError
	}{
		{"ok", mustOrder(t, validOrder), nil},
		{"nested and indexed", order{Amount: Amount{Minor: 0, Currency: "US"}, Lines: []Line{{SKU: "ok", Quantity: 1}, {SKU: long, Quantity: 0}}, Rail: "x"},
			[]FieldError{
				{Field: "amount.minor", Rule: "gt", Message: "must be greater than 0"},
				{Field: "amount.currency", Rule: "len", Message: "must have exactly 3 characters"},
				{Field: "lines[1].sku", Rule: "max", Message: "must have at most 8 characters"},
				{Field: "lines[1].quantity", Rule: "min", Message: "must be at least 1"},
				{Field: "rail", Rule: "oneof", Message: "must be one of: acp, ucp"},
			}},
		{"empty slice and required", order{Amount: Amount{Minor: 1, Currency: "USD"}, Lines: []Line{}, Rail: "acp"},
			[]FieldError{{Field: "lines", Rule: "min", Message: "must have at least 1 item"}}},
		{"map dive and url", order{Amount: Amount{Minor: 1, Currency: "USD"}, Lines: []Line{{SKU: "a", Quantity: 1}}, Rail: "ucp",
			Meta: map[string]string{"k": "toolong"}, Website: "not a url"},
			[]FieldError{{Field: "meta.k", Rule: "max", Message: "must have at most 4 characters"}, {Field: "website", Rule: "url", Message: "must be an absolute URL"}}},
		{"params use parameter names", PageParams{Limit: 101},
			[]FieldError{{Field: "limit", Rule: "max", Message: "must be at most 100"}}},
		{"required pointer", consistencyParams{}, []FieldError{{Field: "from", Rule: "required", Message: "is required"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Validate(tt.v)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if err := m.Validate(42); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Validate(42) = %v, want a non-validation error", err)
	}
}

func mustOrder(t *testing.T, body string) order {
	t.Helper()
	var o order
	if err := DecodeJSON(strings.NewReader(body), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

type paramsAll struct {
	ID     string     `path:"id"`
	Limit  int        `query:"limit" default:"20"`
	After  *time.Time `query:"after"`
	Tags   []string   `query:"tags"`
	Ok     bool       `query:"ok"`
	Seq    uint64     `query:"seq"`
	Ratio  float64    `query:"ratio"`
	Opt    *uint64    `query:"opt"`
	Header string     `header:"x-svc-tags"`
}

func TestDecodeParams(t *testing.T) {
	after := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	one := uint64(1)
	tests := []struct {
		name    string
		query   string
		want    paramsAll
		fields  []FieldError
		unknown []string
	}{
		{name: "defaults", query: "", want: paramsAll{ID: "p1", Limit: 20, Header: "team=a"}},
		{name: "empty value means absent", query: "limit=&tags=", want: paramsAll{ID: "p1", Limit: 20, Header: "team=a"}},
		{name: "all", query: "limit=5&after=2026-01-02T15:04:05Z&tags=a&tags=b&ok=true&seq=9&ratio=0.5&opt=1",
			want: paramsAll{ID: "p1", Limit: 5, After: &after, Tags: []string{"a", "b"}, Ok: true, Seq: 9, Ratio: 0.5, Opt: &one, Header: "team=a"}},
		{name: "limit=abc", query: "limit=abc", fields: []FieldError{{Field: "limit", Rule: "type", Message: "must be an integer"}}},
		{name: "repeated", query: "limit=1&limit=2", fields: []FieldError{{Field: "limit", Rule: "type", Message: "must be given once"}}},
		{name: "negative uint", query: "seq=-1", fields: []FieldError{{Field: "seq", Rule: "type", Message: "must be a non-negative integer"}}},
		{name: "bad bool", query: "ok=yes", fields: []FieldError{{Field: "ok", Rule: "type", Message: "must be true or false"}}},
		{name: "bad time", query: "after=today", fields: []FieldError{{Field: "after", Rule: "type", Message: "must be an RFC 3339 date-time, e.g. 2026-01-02T15:04:05Z"}}},
		{name: "overflow", query: "limit=99999999999999999999", fields: []FieldError{{Field: "limit", Rule: "type", Message: "must be an integer between -9223372036854775808 and 9223372036854775807"}}},
		{name: "unknown", query: "limt=5&zz=1", unknown: []string{"limt", "zz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			var got paramsAll
			err = DecodeParams(&got, ParamSource{
				Path:   func(n string) string { return map[string]string{"id": "p1"}[n] },
				Query:  q,
				Header: map[string][]string{"X-Svc-Tags": {"team=a"}},
			})
			switch {
			case tt.unknown != nil:
				var de *DecodeError
				if !errors.As(err, &de) || de.Code != CodeRequestUnknownField || !reflect.DeepEqual(de.Fields, tt.unknown) {
					t.Fatalf("err = %v, want unknown %v", err, tt.unknown)
				}
			case tt.fields != nil:
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("err = %v, want *ValidationError", err)
				}
				if diff := cmp.Diff(tt.fields, ve.Errors); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
	if err := DecodeParams(paramsAll{}, ParamSource{}); err == nil {
		t.Error("non-pointer accepted")
	}
}
