package wirejson

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestDescribe(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type outer struct {
		In   inner             `json:"in"`
		At   time.Time         `json:"at"`
		Tags []string          `json:"tags"`
		Raw  map[string]string `json:"raw"`
	}
	goWords := regexp.MustCompile(`Go |json\.|map\[|\bstruct\b|wirejson\.`)
	for _, tc := range []struct {
		in   string
		dst  any
		want string
	}{
		{`"x"`, new(map[string]json.RawMessage), "is a JSON string where an object is expected"},
		{`{"in":{"n":"7"}}`, new(outer), "has a JSON string at in.n where an integer is expected"},
		{`{"tags":{}}`, new(outer), "has a JSON object at tags where an array is expected"},
		{`{"raw":[1]}`, new(outer), "has a JSON array at raw where an object is expected"},
		{`{"in":`, new(outer), "is not valid JSON (at byte 6)"},
		{`{"in" 1}`, new(outer), "is not valid JSON (at byte 7)"},
	} {
		err := json.Unmarshal([]byte(tc.in), tc.dst)
		got := Describe(err)
		if got != tc.want {
			t.Errorf("Describe(%s) = %q, want %q", tc.in, got, tc.want)
		}
		if goWords.MatchString(got) {
			t.Errorf("Describe(%s) = %q speaks Go", tc.in, got)
		}
	}
	dec := json.NewDecoder(strings.NewReader(`{"zz":1}`))
	dec.DisallowUnknownFields()
	if got := Describe(dec.Decode(new(outer))); got != `has an unknown member "zz"` {
		t.Errorf("unknown member: %q", got)
	}
	if got := Describe(errors.New("json: something else")); got != "is not valid JSON" {
		t.Errorf("other: %q", got)
	}
}
