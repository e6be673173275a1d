package sealbox

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, KeySize)
	box, err := New(k1, nil, "purpose A")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := box.Seal("owner-1", "s3cret", rand.Reader)
	if err != nil || !strings.HasPrefix(sealed, "s1.") || strings.Contains(sealed, "s3cret") {
		t.Fatalf("%q %v", sealed, err)
	}
	if got, err := box.Open("owner-1", sealed); err != nil || got != "s3cret" {
		t.Fatalf("open: %q %v", got, err)
	}
	otherPurpose, _ := New(k1, nil, "purpose B")
	rotated, _ := New(k2, [][]byte{k1}, "purpose A")
	newOnly, _ := New(k2, nil, "purpose A")
	for name, tc := range map[string]struct {
		box   *Box
		id    string
		value string
		ok    bool
	}{
		"another owner":               {box, "owner-2", sealed, false},
		"another purpose":             {otherPurpose, "owner-1", sealed, false},
		"rotated, old key configured": {rotated, "owner-1", sealed, true},
		"rotated, old key dropped":    {newOnly, "owner-1", sealed, false},
		"altered":                     {box, "owner-1", sealed[:len(sealed)-2] + "AA", false},
		"unknown format":              {box, "owner-1", "x1.abc", false},
		"clear":                       {box, "owner-1", "c1.plain", true},
	} {
		_, err := tc.box.Open(tc.id, tc.value)
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrUnseal) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !rotated.Stale(sealed) || box.Stale(sealed) || !box.Stale("c1.plain") {
		t.Error("Stale: a value under an old key, or in the clear, must be rewritten")
	}
	clear, _ := New(nil, nil, "purpose A")
	if v, _ := clear.Seal("o", "x", rand.Reader); v != "c1.x" || clear.Sealed() {
		t.Errorf("no key: %q", v)
	}
	if _, err := New([]byte("short"), nil, "p"); err == nil {
		t.Error("a short key was accepted")
	}
}
