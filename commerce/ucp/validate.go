package ucp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strconv"
	"time"
)

// This file is a small, strict JSON Schema subset written out by hand: each
// schema of the protocol we depend on is checked by a Go function in
// profile.go or checkout.go. It is deliberately stricter than the schemas in
// a few places (formats are asserted, integers must be written as integers
// that fit in int64); it must never be looser, and the tests check that with
// an independent validator over every document and under fuzzing.

var (
	versionRE       = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	reverseDomainRE = regexp.MustCompile(`^[a-z][a-z0-9]*(?:\.[a-z][a-z0-9_]*)+$`)
)

// parseJSON decodes one JSON document into a tree of map[string]any,
// []any, string, json.Number, bool and nil. Trailing data is refused.
func parseJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON document")
	}
	return v, nil
}

// checker records the first violation; every accessor is safe to call
// after a failure (it returns zero values), so validators read straight
// through without checking errors at each step.
type checker struct {
	err error
	// ignored are the violations of parts the client never uses (see
	// soft): reported, not fatal.
	ignored []string
}

// soft checks, with f, a part of the document the client never acts on
// (a payment handler's version, say): a violation there is recorded in
// ignored instead of failing the document. Be strict about what you act
// on and tolerant of what you ignore.
func (c *checker) soft(f func(sc *checker)) {
	sc := &checker{}
	f(sc)
	if sc.err != nil {
		c.ignored = append(c.ignored, sc.err.Error())
	}
	c.ignored = append(c.ignored, sc.ignored...)
}

func (c *checker) failf(path, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
}

func (c *checker) ok() bool { return c.err == nil }

// object asserts v is a JSON object.
func (c *checker) object(path string, v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.failf(path, "must be an object")
		return nil
	}
	return m
}

// field returns m[key]; required reports a missing key.
func (c *checker) field(path string, m map[string]any, key string, required bool) (any, bool) {
	if m == nil {
		return nil, false
	}
	v, ok := m[key]
	if !ok && required {
		c.failf(path, "%q is required", key)
	}
	return v, ok
}

func (c *checker) str(path string, m map[string]any, key string, required bool) (string, bool) {
	v, ok := c.field(path, m, key, required)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	if !isStr {
		c.failf(path+"."+key, "must be a string")
		return "", false
	}
	return s, true
}

// pattern checks an optional or required string against re.
func (c *checker) pattern(path string, m map[string]any, key string, required bool, re *regexp.Regexp) (string, bool) {
	s, ok := c.str(path, m, key, required)
	if ok && !re.MatchString(s) {
		c.failf(path+"."+key, "must match %s", re)
	}
	return s, ok
}

func (c *checker) enum(path string, m map[string]any, key string, required bool, allowed ...string) (string, bool) {
	s, ok := c.str(path, m, key, required)
	if !ok {
		return "", false
	}
	for _, a := range allowed {
		if s == a {
			return s, true
		}
	}
	c.failf(path+"."+key, "%q is not one of %q", s, allowed)
	return "", false
}

// uri checks format "uri": an absolute URI. Asserted even though JSON
// Schema 2020-12 treats formats as annotations by default.
func (c *checker) uri(path string, m map[string]any, key string, required bool) (string, bool) {
	s, ok := c.str(path, m, key, required)
	if ok && !isAbsURI(s) {
		c.failf(path+"."+key, "must be an absolute URI")
		return "", false
	}
	return s, ok
}

func isAbsURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && (u.Host != "" || u.Opaque != "" || u.Path != "")
}

func (c *checker) dateTime(path string, m map[string]any, key string, required bool) (time.Time, bool) {
	s, ok := c.str(path, m, key, required)
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.failf(path+"."+key, "must be an RFC 3339 date-time")
		return time.Time{}, false
	}
	return t, true
}

// integer checks an integer written without fraction or exponent that fits
// in an int64, at least min when hasMin.
func (c *checker) integer(path string, m map[string]any, key string, required bool, hasMin bool, min int64) (int64, bool) {
	v, ok := c.field(path, m, key, required)
	if !ok {
		return 0, false
	}
	return c.intValue(path+"."+key, v, hasMin, min)
}

func (c *checker) intValue(path string, v any, hasMin bool, min int64) (int64, bool) {
	n, isNum := v.(json.Number)
	if !isNum {
		c.failf(path, "must be an integer")
		return 0, false
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		c.failf(path, "must be an integer that fits in 64 bits")
		return 0, false
	}
	if hasMin && i < min {
		c.failf(path, "must be at least %d", min)
		return 0, false
	}
	return i, true
}

func (c *checker) boolean(path string, m map[string]any, key string) {
	if v, ok := c.field(path, m, key, false); ok {
		if _, isBool := v.(bool); !isBool {
			c.failf(path+"."+key, "must be a boolean")
		}
	}
}

func (c *checker) array(path string, m map[string]any, key string, required bool) ([]any, bool) {
	v, ok := c.field(path, m, key, required)
	if !ok {
		return nil, false
	}
	a, isArr := v.([]any)
	if !isArr {
		c.failf(path+"."+key, "must be an array")
		return nil, false
	}
	return a, true
}

// optObject checks an optional (or required) member is an object.
func (c *checker) optObject(path string, m map[string]any, key string, required bool) (map[string]any, bool) {
	v, ok := c.field(path, m, key, required)
	if !ok {
		return nil, false
	}
	o := c.object(path+"."+key, v)
	return o, o != nil
}

func idx(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
