package operator

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/asn1"
	"errors"
	"io"
	"math/big"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestSignedMessage(t *testing.T) {
	got, err := signedMessage("operator.approve", "post", "https://pay.example.com/operator/approve?x=1", 1763800000,
		"AQEBAQEBAQEBAQEBAQEBAQ", nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = "svc-operator-v1\n" +
		"operator.approve\n" +
		"POST\n" +
		"https://pay.example.com/operator/approve?x=1\n" +
		"1763800000\n" +
		"AQEBAQEBAQEBAQEBAQEBAQ\n" +
		"47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU" // SHA-256 of the empty string
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	empty, _ := signedMessage("o", "GET", "t", 1, "n", []byte{})
	none, _ := signedMessage("o", "GET", "t", 1, "n", nil)
	if !bytes.Equal(empty, none) {
		t.Error("an empty body and no body sign differently")
	}
	for _, bad := range [][4]string{
		{"op\n", "GET", "t", "n"}, {"op", "GE\rT", "t", "n"}, {"op", "GET", "/a\nb", "n"},
		{"", "GET", "t", "n"}, {"op", "", "t", "n"}, {"op", "GET", "", "n"}, {"op", "GET", "t", ""},
	} {
		if _, err := signedMessage(bad[0], bad[1], bad[2], 1, bad[3], nil); !errors.Is(err, errBadLine) {
			t.Errorf("signedMessage(%q) = %v", bad, err)
		}
	}
}

func TestRequestTarget(t *testing.T) {
	tests := []struct {
		base, strip, url, want string
	}{
		{"https://x", "", "/a/b", "https://x/a/b"},
		{"https://x", "", "/a%2Fb?q=1&r=%20", "https://x/a%2Fb?q=1&r=%20"},
		{"https://x", "", "/a?", "https://x/a"}, // an empty query is no query
		{"https://x", "", "", "https://x/"},
		{"https://x/p", "/p", "/p/a", "https://x/p/a"},
		{"https://x/p", "/p", "/a", "https://x/p/a"},
		{"https://x/p", "/p", "/pa", "https://x/p/pa"}, // not a prefix at a segment boundary
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestTarget(tt.base, tt.strip, u); got != tt.want {
			t.Errorf("requestTarget(%q, %q, %q) = %q, want %q", tt.base, tt.strip, tt.url, got, tt.want)
		}
	}
}

func TestNormalizeBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://pay.example.com":       "https://pay.example.com",
		"https://pay.example.com/":      "https://pay.example.com",
		"https://pay.example.com/api//": "https://pay.example.com/api",
		"http://127.0.0.1:8080":         "http://127.0.0.1:8080",
		"https://Pay.Example.com":       "https://Pay.Example.com", // kept as published
	} {
		if got, err := normalizeBaseURL(in); err != nil || got != want {
			t.Errorf("normalizeBaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/", "pay.example.com", "https://", "https://x?", "https://x/\n", "mailto:a@b"} {
		if got, err := normalizeBaseURL(in); err == nil {
			t.Errorf("normalizeBaseURL(%q) = %q", in, got)
		}
	}
}

func TestDERToFixed(t *testing.T) {
	der := func(r, s *big.Int) []byte {
		b, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got, err := derToFixed(der(big.NewInt(1), big.NewInt(2)))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 64)
	want[31], want[63] = 1, 2
	if !bytes.Equal(got, want) {
		t.Errorf("got %x", got)
	}
	big257 := new(big.Int).Lsh(big.NewInt(1), 256)
	for name, b := range map[string][]byte{
		"garbage":       []byte("nope"),
		"trailing data": append(der(big.NewInt(1), big.NewInt(2)), 0),
		"zero r":        der(big.NewInt(0), big.NewInt(2)),
		"negative s":    der(big.NewInt(1), big.NewInt(-2)),
		"r too large":   der(big257, big.NewInt(2)),
	} {
		if _, err := derToFixed(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// badSigner is an Ed25519 crypto.Signer that misbehaves.
type badSigner struct {
	ed25519.PrivateKey
	sig []byte
	err error
}

func (b badSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) { return b.sig, b.err }

func TestSignerFaults(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, 32))
	for name, k := range map[string]badSigner{
		"error":     {key, nil, errors.New("token unplugged")},
		"short sig": {key, make([]byte, 10), nil},
		"long sig":  {key, make([]byte, 65), nil},
	} {
		s, err := NewSigner(k, "k", "https://x", nil)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Sign(httptest.NewRequest("POST", "/a", nil), "op", nil)
		if err == nil || !strings.HasPrefix(err.Error(), "operator: sign: ") {
			t.Errorf("%s: Sign = %v", name, err)
		}
	}
}
