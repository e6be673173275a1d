package keyfile

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		kid  string
	}{
		{"ed25519", edKey, "op-alice"},
		{"p256", ecKey, "op-bob"},
		{"no-kid", edKey, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "key.jwk.json")
			if err := Write(path, tc.key, tc.kid); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("mode %v, want 0600", fi.Mode().Perm())
			}
			got, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if got.KeyID != tc.kid {
				t.Errorf("kid %q, want %q", got.KeyID, tc.kid)
			}
			type equaler interface{ Equal(crypto.PrivateKey) bool }
			if !got.Signer.(equaler).Equal(tc.key) {
				t.Error("key read back differs from key written")
			}
			if err := Write(path, tc.key, tc.kid); !errors.Is(err, ErrExists) {
				t.Errorf("second Write: %v, want ErrExists", err)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	pub, err := MarshalPublic(edKey, "x")
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"not json":   "{",
		"empty":      "",
		"public key": string(pub),
		"symmetric":  `{"kty":"oct","k":"AAAA"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(in)); err == nil {
				t.Fatal("Parse accepted it")
			}
		})
	}
}

func TestReadEd25519RefusesP256(t *testing.T) {
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	path := filepath.Join(t.TempDir(), "k.json")
	if err := Write(path, ecKey, "k"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadEd25519(path); err == nil {
		t.Fatal("ReadEd25519 accepted a P-256 key")
	}
}
