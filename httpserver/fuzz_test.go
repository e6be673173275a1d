package httpserver

import (
	"slices"
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	offers := []string{"application/json", "text/plain"}
	for accept, want := range map[string]string{
		"":                                     "application/json",
		"garbage":                              "application/json",
		"*/*":                                  "application/json",
		"text/plain":                           "text/plain",
		"TEXT/PLAIN":                           "text/plain",
		"text/*;q=0.9, application/json;q=0.8": "text/plain",
		"text/plain;q=0, */*":                  "application/json",
		"application/json;q=0, text/plain;q=0": "application/json",
		"*/*;q=0.1, text/plain;q=0.2":          "text/plain",
		"text/plain;q=abc, application/json":   "application/json",
		"*/plain":                              "application/json",
	} {
		if got := negotiate(accept, offers...); got != want {
			t.Errorf("negotiate(%q) = %q, want %q", accept, got, want)
		}
	}
}

// FuzzNegotiate checks that any Accept header yields one of the offers.
func FuzzNegotiate(f *testing.F) {
	f.Add("text/plain;q=0.5, application/json")
	f.Add("*/*;q=0.1, text/*;q=1.0")
	f.Add(",,;;q=,/,*/")
	f.Fuzz(func(t *testing.T, accept string) {
		offers := []string{"application/json", "text/plain"}
		if got := negotiate(accept, offers...); !slices.Contains(offers, got) {
			t.Fatalf("negotiate(%q) = %q", accept, got)
		}
	})
}

// FuzzRequestID checks that a caller's X-Request-Id is echoed exactly
// when it is 1–128 visible ASCII characters, and replaced by a minted id
// otherwise.
func FuzzRequestID(f *testing.F) {
	f.Add("req_01J")
	f.Add("with space")
	f.Add("\x7f")
	ts := newTestServer(f, Config{})
	f.Fuzz(func(t *testing.T, id string) {
		if id == "" {
			return // an empty header is no header
		}
		w := ts.do(t, "GET", "/healthz", nil, "X-Request-Id", id)
		got := w.Header().Get("X-Request-Id")
		visible := len(id) <= 128
		for i := range len(id) {
			visible = visible && id[i] >= 0x21 && id[i] <= 0x7e
		}
		switch {
		case visible && got != id:
			t.Fatalf("valid id %q replaced by %q", id, got)
		case !visible && (got == id || !strings.HasPrefix(got, "req_") || len(got) != 30):
			t.Fatalf("invalid id %q answered with %q", id, got)
		}
	})
}
