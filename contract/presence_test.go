package contract

import (
	"errors"
	"strings"
	"testing"
)

// zeroed has optional members whose rules refuse their zero value, and
// ones whose rules accept it.
type zeroed struct {
	Limit   int     `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
	Claim   int64   `json:"claim,omitempty" validate:"omitempty,gt=0"`
	Mode    string  `json:"mode,omitempty" validate:"omitempty,oneof=fast slow"`
	Note    string  `json:"note,omitempty" validate:"omitempty,max=10"`
	Ratio   float64 `json:"ratio,omitempty" validate:"omitempty,gt=0"`
	Always  int     `json:"always" validate:"omitempty,min=1"` // sent even when zero: zero is absent
	Nested  *zeroed `json:"nested,omitempty"`
	Untaged int     `json:"untagged,omitempty"`
}

func TestModelDecodeJSONZeroIsAValue(t *testing.T) {
	m := testModel(t)
	for _, tc := range []struct {
		body  string
		field string // "" for accepted
	}{
		{`{}`, ""},
		{`{"limit":5,"claim":1,"mode":"fast","note":"","ratio":0.5,"untagged":0}`, ""},
		{`{"always":0}`, ""},
		{`{"limit":0}`, "limit"},
		{`{"limit":0.0}`, "limit"},
		{`{"limit":-0}`, "limit"},
		{`{"claim":0}`, "claim"},
		{`{"mode":""}`, "mode"},
		{`{"ratio":0e10}`, "ratio"},
		{`{"nested":{"limit":0}}`, "nested.limit"},
	} {
		var v zeroed
		err := m.DecodeJSON(strings.NewReader(tc.body), &v)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != tc.field {
			t.Errorf("%s: err = %v, want one validation error at %s", tc.body, err, tc.field)
		}
	}
}

// TestFieldPathSkipsEmbedded: an embedded struct's members are the outer
// object's own, so its Go type name never appears in a field path.
func TestFieldPathSkipsEmbedded(t *testing.T) {
	type line struct {
		ID string `json:"id" validate:"required"`
	}
	type quote struct {
		Lines []line `json:"lines" validate:"required,dive"`
	}
	type purchase struct {
		quote
		Key string `json:"key" validate:"required"`
	}
	m := testModel(t)
	var p purchase
	err := m.DecodeJSON(strings.NewReader(`{"lines":[{"id":""}],"key":"k"}`), &p)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "lines[0].id" {
		t.Fatalf("err = %v, want one error at lines[0].id", err)
	}
}
