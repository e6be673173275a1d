package strictjson

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		max     int
		want    *Error // nil: accepted
		wantMsg string
	}{
		{name: "scalar", in: `1`, max: 0},
		{name: "empty object", in: ` {} `, max: 0},
		{name: "flat", in: `{"a":1,"b":"x","c":null}`, max: 1},
		{name: "same name in siblings", in: `[{"a":1},{"a":2}]`, max: 2},
		{name: "same name nested", in: `{"a":{"a":{"a":1}}}`, max: 3},
		{name: "duplicate", in: `{"rail":"acp","rail":"ucp"}`, max: 8,
			want: &Error{Offset: 14, Name: "rail", Path: "rail"}, wantMsg: "member rail appears twice"},
		{name: "nested duplicate", in: `{"amount":{"minor":1,"minor":2}}`, max: 8,
			want: &Error{Offset: 21, Name: "minor", Path: "amount.minor"}},
		{name: "duplicate in array", in: `{"lines":[{"id":"a"},{"id":"b","id":"c"}]}`, max: 8,
			want: &Error{Offset: 31, Name: "id", Path: "lines[1].id"}},
		{name: "escaped duplicate", in: `{"a":1,"\u0061":2}`, max: 8,
			want: &Error{Offset: 7, Name: "a", Path: "a"}},
		{name: "odd name", in: `{"x":{"odd key":1,"odd key":2}}`, max: 8,
			want: &Error{Offset: 18, Name: "odd key", Path: `x["odd key"]`}},
		{name: "white space", in: "{ \"a\" : 1 ,\n\t\"a\" : 2 }", max: 8,
			want: &Error{Offset: 13, Name: "a", Path: "a"}},
		{name: "first in document order", in: `{"b":{"c":1,"c":2},"b":3}`, max: 8,
			want: &Error{Offset: 12, Name: "c", Path: "b.c"}},
		{name: "at the limit", in: `[[1]]`, max: 2},
		{name: "empty containers at the limit", in: `[[],{}]`, max: 1},
		{name: "too deep", in: `[[1]]`, max: 1,
			want: &Error{Offset: 2, TooDeep: true}, wantMsg: "JSON nested too deeply at byte 2"},
		{name: "too deep in an object", in: `{"a": {"b": 1}}`, max: 1,
			want: &Error{Offset: 11, TooDeep: true}},
		{name: "too deep before a later duplicate", in: `[[[1]],{"a":1,"a":2}]`, max: 2,
			want: &Error{Offset: 3, TooDeep: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.in)) {
				t.Fatalf("test input %q is not JSON", tc.in)
			}
			got := Check([]byte(tc.in), tc.max)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("Check(%q, %d) = %+v, want nil", tc.in, tc.max, *got)
			case tc.want != nil && got == nil:
				t.Fatalf("Check(%q, %d) = nil, want %+v", tc.in, tc.max, *tc.want)
			case tc.want != nil && *got != *tc.want:
				t.Fatalf("Check(%q, %d) = %+v, want %+v", tc.in, tc.max, *got, *tc.want)
			}
			if tc.wantMsg != "" && got.Error() != tc.wantMsg {
				t.Errorf("Error() = %q, want %q", got.Error(), tc.wantMsg)
			}
		})
	}
}

// TestCheckNotJSON: on input that is not JSON the answer means nothing,
// but Check must return.
func TestCheckNotJSON(t *testing.T) {
	for _, in := range []string{``, `{`, `[`, `{"a`, `{"a":`, `{"a":1,`, `[}`, `[,,,]`, `{1:2}`, `"\`, `{"a\`, `[[[[`, `{"a":1 "a":2}`} {
		Check([]byte(in), 3)
	}
}

func TestPath(t *testing.T) {
	var p Path
	if p.String() != "" {
		t.Fatalf("empty path = %q", p.String())
	}
	p.PushKey("lines")
	p.PushIndex(0)
	p.PushKey("sku")
	if got := p.String(); got != "lines[0].sku" {
		t.Errorf("path = %q, want lines[0].sku", got)
	}
	p.Pop()
	p.PushKey("odd key")
	if got := p.String(); got != `lines[0]["odd key"]` {
		t.Errorf(`path = %q, want lines[0]["odd key"]`, got)
	}
	p.Pop()
	p.Pop()
	p.Pop()
	p.PushIndex(3)
	if got := p.String(); got != "[3]" {
		t.Errorf("path = %q, want [3]", got)
	}
}

func TestMember(t *testing.T) {
	for _, tc := range []struct{ path, key, want string }{
		{"", "amount", "amount"},
		{"amount", "minor", "amount.minor"},
		{"a", "$ref", "a.$ref"},
		{"a", "x-y_1", "a.x-y_1"},
		{"a", "-x", `a["-x"]`},
		{"a", "1x", `a["1x"]`},
		{"a", "", `a[""]`},
		{"", "odd key", `["odd key"]`},
		{"a", "ü", `a["ü"]`},
		{"a", `q"`, `a["q\""]`},
	} {
		if got := Member(tc.path, tc.key); got != tc.want {
			t.Errorf("Member(%q, %q) = %q, want %q", tc.path, tc.key, got, tc.want)
		}
	}
	if got := Index("$.lines", 12); got != "$.lines[12]" {
		t.Errorf("Index = %q", got)
	}
	if got := Index("", 0); got != "[0]" {
		t.Errorf("Index = %q", got)
	}
}

// reference finds what Check finds with encoding/json's tokenizer instead
// of a scan: the first member name given twice, or the first value deeper
// than max, in document order.
func reference(data []byte, max int) (name, path string, tooDeep bool, err error) {
	type frame struct {
		object  bool
		wantKey bool
		names   map[string]bool
		index   int
		path    string // of the container
	}
	var stack []frame
	var member string // path of the member whose value comes next
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return "", "", false, nil
		}
		if err != nil {
			return "", "", false, err
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			top := &stack[n-1]
			if k, ok := tok.(string); ok {
				member = Member(top.path, k)
				if top.names[k] {
					return k, member, false, nil
				}
				top.names[k] = true
				top.wantKey = false
				continue
			}
		}
		if tok == json.Delim('}') || tok == json.Delim(']') {
			stack = stack[:len(stack)-1]
		} else {
			if len(stack) > max {
				return "", "", true, nil
			}
			at := ""
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					at = member
				} else {
					at = Index(stack[n-1].path, stack[n-1].index)
				}
			}
			switch tok {
			case json.Delim('{'):
				stack = append(stack, frame{object: true, wantKey: true, names: map[string]bool{}, path: at})
				continue
			case json.Delim('['):
				stack = append(stack, frame{path: at})
				continue
			}
		}
		// A value ended.
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].wantKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
}

// FuzzCheck holds Check to the tokenizer-based reference on every valid
// document, and checks that it returns on anything.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"b":[1,{"c":1,"c":2}]}}`, `[[[[1]]]]`, `{"\u0061":1,"a":2}`,
		`{"odd key":[],"odd key":{}}`, ` [ {"x" : "}" , "y":"]"} ] `, `{"a`, `[}`,
	} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		max = min(max&0xff, 64) // keep the recursion small
		got := Check(data, max)
		if !json.Valid(data) {
			return
		}
		name, path, tooDeep, err := reference(data, max)
		if err != nil {
			t.Fatalf("reference(%q): %v", data, err)
		}
		if got == nil {
			if tooDeep || path != "" {
				t.Fatalf("Check(%q, %d) = nil; reference: name %q path %q tooDeep %v", data, max, name, path, tooDeep)
			}
			return
		}
		if got.TooDeep != tooDeep || got.Name != name || got.Path != path {
			t.Fatalf("Check(%q, %d) = %+v; reference: name %q path %q tooDeep %v", data, max, *got, name, path, tooDeep)
		}
		if !got.TooDeep {
			// The offset is the repeated name's opening quote.
			var k string
			dec := json.NewDecoder(bytes.NewReader(data[got.Offset:]))
			if tok, err := dec.Token(); err != nil || !strings.HasPrefix(string(data[got.Offset:]), `"`) {
				t.Fatalf("Check(%q): offset %d is not a name (%v)", data, got.Offset, err)
			} else if k, _ = tok.(string); k != name {
				t.Fatalf("Check(%q): offset %d holds %q, not %q", data, got.Offset, k, name)
			}
		}
	})
}
