// Package wirejson says what is wrong with a client's JSON in the client's
// terms. encoding/json's errors name Go types ("cannot unmarshal string
// into Go value of type map[string]json.RawMessage"); a client knows only
// the wire: members, objects, arrays, strings and numbers. Every message
// that reaches a client about JSON it sent goes through [Describe].
package wirejson

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Describe returns what is wrong with JSON that encoding/json refused,
// without Go's vocabulary: where (the member path, when known) and what
// the wire value should have been. It is a predicate for the thing that
// was decoded ("the artifact " + Describe(err)): "is a JSON string where
// an object is expected", "has a JSON string at in.n where an integer is
// expected", "is not valid JSON (at byte 7)". An error that is not from
// decoding JSON gives "is not valid JSON".
func Describe(err error) string {
	var (
		te *json.UnmarshalTypeError
		se *json.SyntaxError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &te):
		got := te.Value
		if got == "" {
			got = "value"
		}
		if te.Field != "" {
			return fmt.Sprintf("has a JSON %s at %s where %s is expected", got, te.Field, Noun(te.Type))
		}
		return fmt.Sprintf("is a JSON %s where %s is expected", got, Noun(te.Type))
	case errors.As(err, &se):
		return fmt.Sprintf("is not valid JSON (at byte %d)", se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "is empty or ends too soon"
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "has an unknown member " + name
	}
	return "is not valid JSON"
}

// Noun names the JSON a Go type decodes from: "an object", "an array",
// "a string", "an integer", "a number", "true or false".
func Noun(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if t.PkgPath() == "time" && t.Name() == "Time" {
			return "an RFC 3339 date-time string"
		}
		return "an object"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another value"
}
