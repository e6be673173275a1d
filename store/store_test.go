package store_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/countersign/countersign/store"
)

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix []byte
		want   []byte // nil means unbounded
	}{
		{"empty prefix is unbounded", []byte{}, nil},
		{"nil prefix is unbounded", nil, nil},
		{"simple", []byte("abc"), []byte("abd")},
		{"single byte", []byte{0x00}, []byte{0x01}},
		{"trailing 0xff carries", []byte{'a', 0xff}, []byte{'b'}},
		{"several trailing 0xff", []byte{'a', 0xff, 0xff}, []byte{'b'}},
		{"0xfe before 0xff", []byte{0x01, 0xfe, 0xff}, []byte{0x01, 0xff}},
		{"0xff inside", []byte{0xff, 'a'}, []byte{0xff, 'b'}},
		{"all 0xff is unbounded", []byte{0xff}, nil},
		{"long all 0xff is unbounded", []byte{0xff, 0xff, 0xff}, nil},
		{"slash separator", []byte("audit/"), []byte("audit0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := bytes.Clone(tc.prefix)
			got := store.PrefixEnd(in)
			if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("PrefixEnd(%x) = %x, want %x", tc.prefix, got, tc.want)
			}
			if !bytes.Equal(in, tc.prefix) {
				t.Errorf("PrefixEnd modified its argument: %x, was %x", in, tc.prefix)
			}
			if got != nil && len(in) > 0 {
				got[0] ^= 0xff
				if !bytes.Equal(in, tc.prefix) {
					t.Errorf("PrefixEnd's result aliases its argument")
				}
			}
		})
	}
}

// TestPrefixEndBounds checks the defining property on every 2-byte prefix:
// every key with the prefix is below the end, and the end is not.
func TestPrefixEndBounds(t *testing.T) {
	for a := range 256 {
		for _, b := range []byte{0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff} {
			p := []byte{byte(a), b}
			end := store.PrefixEnd(p)
			if end == nil {
				if a != 0xff || b != 0xff {
					t.Fatalf("PrefixEnd(%x) = nil", p)
				}
				continue
			}
			for _, k := range [][]byte{p, append(bytes.Clone(p), 0xff, 0xff, 0xff)} {
				if bytes.Compare(k, end) >= 0 {
					t.Fatalf("PrefixEnd(%x) = %x, not above %x", p, end, k)
				}
			}
			if bytes.HasPrefix(end, p) {
				t.Fatalf("PrefixEnd(%x) = %x has the prefix", p, end)
			}
		}
	}
}

func ExamplePrefixEnd() {
	fmt.Printf("%q\n", store.PrefixEnd([]byte("audit/")))
	fmt.Printf("%x\n", store.PrefixEnd([]byte{0x01, 0xff}))
	fmt.Println(store.PrefixEnd([]byte{0xff, 0xff}) == nil)
	// Output:
	// "audit0"
	// 02
	// true
}
