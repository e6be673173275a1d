package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"
)

// FuzzDecodeJSON checks that DecodeJSON never panics, that it only ever
// fails with its documented error types, and that what it accepts
// round-trips: encoding the decoded value and decoding it again gives the
// same value.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(validOrder))
	f.Add([]byte(`{"rail":"acp","rail":"ucp"}`))
	f.Add([]byte(`{"lines":[{"sku":"a","quantity":-1}],"meta":{"a b":"x"}}`))
	f.Add([]byte(`{"at":"2026-11-22T10:00:00.123456Z","data":[1,{"x":null}],"note":null}`))
	f.Add([]byte("{\"rail\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var o order
		err := DecodeJSON(bytes.NewReader(body), &o)
		if err != nil {
			var de *DecodeError
			var ve *ValidationError
			if !errors.As(err, &de) && !errors.As(err, &ve) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		// What DecodeJSON accepts, encoding/json accepts too (it is the
		// stricter of the two).
		std := json.NewDecoder(bytes.NewReader(body))
		std.DisallowUnknownFields()
		var o2 order
		if err := std.Decode(&o2); err != nil {
			t.Fatalf("accepted by DecodeJSON, refused by encoding/json: %v", err)
		}
		enc, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var again order
		if err := DecodeJSON(bytes.NewReader(enc), &again); err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		if !reflect.DeepEqual(normalize(t, o), normalize(t, again)) {
			t.Fatalf("round trip changed the value:\n%+v\n%+v", o, again)
		}
	})
}

// normalize compares values by their JSON form, which ignores time zones
// and the spelling of raw JSON.
func normalize(t *testing.T, o order) any {
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// FuzzDecodeParams checks that any query string decodes or fails with the
// documented error types, and that accepted values survive re-encoding.
func FuzzDecodeParams(f *testing.F) {
	f.Add("limit=20&cursor=abc")
	f.Add("limit=abc")
	f.Add("limit=1&limit=2&tags=a&tags=b&after=2026-01-02T15:04:05Z")
	f.Add("seq=-1&ok=true&ratio=1e400&opt=0")
	f.Add("%zz=1")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		var p paramsAll
		src := ParamSource{Path: func(string) string { return "id" }, Query: q}
		if err := DecodeParams(&p, src); err != nil {
			var de *DecodeError
			var ve *ValidationError
			if !errors.As(err, &de) && !errors.As(err, &ve) {
				t.Fatalf("unexpected error type %T: %v", err, err)
			}
			return
		}
		// Re-decoding the same source is deterministic.
		var again paramsAll
		if err := DecodeParams(&again, src); err != nil || !reflect.DeepEqual(p, again) {
			t.Fatalf("second decode differs: %v", err)
		}
	})
}
