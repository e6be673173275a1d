package operator_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
)

// jwkJSON returns the JWK of key (public or private) with kid and extra
// members.
func jwkJSON(t *testing.T, key any, kid string, extra map[string]any) string {
	t.Helper()
	var b []byte
	var err error
	if s, ok := key.(crypto.Signer); ok {
		b, err = keyfile.Marshal(s, kid)
	} else {
		b, err = keyfile.MarshalPublic(pubSigner{key}, kid)
	}
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// pubSigner lets keyfile.MarshalPublic take a bare public key.
type pubSigner struct{ pub any }

func (p pubSigner) Public() crypto.PublicKey { return p.pub }
func (p pubSigner) Sign(_ io.Reader, _ []byte, _ crypto.SignerOpts) ([]byte, error) {
	panic("not a signer")
}

func set(keys ...string) []byte { return []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`) }

func TestLoadKeySet(t *testing.T) {
	ed := edKey(1)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)

	keys, err := operator.LoadKeySet(set(
		jwkJSON(t, ed.Public(), "op-alice", map[string]any{"use": "sig", "alg": "EdDSA"}),
		jwkJSON(t, &ec.PublicKey, "op-bob", nil),
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].KeyID != "op-alice" || keys[1].KeyID != "op-bob" {
		t.Fatalf("keys = %+v", keys)
	}
	if pub, ok := keys[0].Public.(ed25519.PublicKey); !ok || !pub.Equal(ed.Public()) {
		t.Errorf("key 0 = %T", keys[0].Public)
	}
	if pub, ok := keys[1].Public.(*ecdsa.PublicKey); !ok || !pub.Equal(&ec.PublicKey) {
		t.Errorf("key 1 = %T", keys[1].Public)
	}
	// One set serves both verifiers.
	if _, err := pay.NewMandateVerifier(keys, nil); err != nil {
		t.Errorf("NewMandateVerifier: %v", err)
	}

	tests := []struct {
		name, error string
		in          []byte
	}{
		{"not JSON", "key set", []byte("keys")},
		{"a lone key", "not a JWK Set", []byte(jwkJSON(t, ed.Public(), "a", nil))},
		{"keys not an array", "not a JWK Set", []byte(`{"keys":{}}`)},
		{"empty set", "empty", set()},
		{"no kid", "no kid", set(jwkJSON(t, ed.Public(), "", nil))},
		{"private Ed25519", "private key", set(jwkJSON(t, ed, "a", nil))},
		{"private P-256", "private key", set(jwkJSON(t, ec, "a", nil))},
		{"duplicate kid", "given twice", set(jwkJSON(t, ed.Public(), "a", nil), jwkJSON(t, &ec.PublicKey, "a", nil))},
		{"one key, two kids", "same key", set(jwkJSON(t, ed.Public(), "a", nil), jwkJSON(t, ed.Public(), "b", nil))},
		{"kid with space", "kid must be", set(jwkJSON(t, ed.Public(), "a b", nil))},
		{"RSA", "Ed25519 or P-256", set(jwkJSON(t, &rsaKey.PublicKey, "a", nil))},
		{"P-384", "Ed25519 or P-256", set(jwkJSON(t, &p384.PublicKey, "a", nil))},
		{"use enc", "use", set(jwkJSON(t, ed.Public(), "a", map[string]any{"use": "enc"}))},
		{"alg mismatch", "alg", set(jwkJSON(t, &ec.PublicKey, "a", map[string]any{"alg": "EdDSA"}))},
		{"symmetric", "", set(`{"kty":"oct","k":"c2VjcmV0","kid":"a"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := operator.LoadKeySet(tt.in)
			if err == nil || !strings.HasPrefix(err.Error(), "operator: key set") || !strings.Contains(err.Error(), tt.error) {
				t.Errorf("LoadKeySet = %+v, %v; want an error with %q", keys, err, tt.error)
			}
		})
	}
}

func TestReadKeySet(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "operators.jwks.json")
	if err := os.WriteFile(path, set(jwkJSON(t, edKey(1).Public(), "op-alice", nil)), 0o644); err != nil {
		t.Fatal(err)
	}
	keys, err := operator.ReadKeySet(path)
	if err != nil || len(keys) != 1 {
		t.Fatalf("ReadKeySet = %+v, %v", keys, err)
	}
	if _, err := operator.ReadKeySet(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file was read")
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"keys":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := operator.ReadKeySet(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("ReadKeySet(bad) = %v; want the path in the error", err)
	}
}

// TestKeyfileSigner: a private key file written by keyfile signs requests
// the verifier accepts (what `countersign keygen operator` produces).
func TestKeyfileSigner(t *testing.T) {
	dir := t.TempDir()
	for _, key := range []crypto.Signer{edKey(3), ecKey(t)} {
		path := filepath.Join(dir, "op.jwk.json")
		os.Remove(path)
		if err := keyfile.Write(path, key, "op-carol"); err != nil {
			t.Fatal(err)
		}
		k, err := keyfile.Read(path)
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, nil)
		f.keys = []operator.PublicKey{{KeyID: "op-carol", Public: key.Public()}}
		v := f.verifier(t, testBase)
		s := f.signer(t, k.Signer, k.KeyID, testBase)
		r := signed(t, s, "POST", "/operator/approve", "operator.approve", nil)
		if id, err := v.Verify(r, "operator.approve", nil); err != nil || id.KeyID != "op-carol" {
			t.Errorf("%T: %+v, %v", key, id, err)
		}
	}
}

func TestCheckRationale(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"", false},
		{"too short", false},                   // 9
		{"exactly 10", true},                   // 10
		{"   exactly 10   ", true},             // trimmed
		{"\t\n  123456789 \n", false},          // 9 after trimming
		{"         ", false},                   // only spaces
		{"Überweisun", true},                   // 10 runes, 11 bytes
		{"Überweisu", false},                   // 9 runes, 10 bytes: bytes would pass
		{"返金は顧客の要望によ", true},                   // 10 runes
		{"返金は顧客の要望", false},                    // 8 runes, 24 bytes
		{"\u00a0\u00a0rationale\u00a0", false}, // NBSP is white space: 9
	}
	for _, tt := range tests {
		err := operator.CheckRationale(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("CheckRationale(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err == nil {
			continue
		}
		var coded interface{ Code() string }
		if !errors.Is(err, operator.ErrRationaleTooShort) || !errors.As(err, &coded) || coded.Code() != "operator.rationale_too_short" {
			t.Errorf("CheckRationale(%q) = %v: want ErrRationaleTooShort with its code", tt.in, err)
		}
	}
}
