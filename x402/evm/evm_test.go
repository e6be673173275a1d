package evm_test

import (
	"bytes"
	"encoding/hex"
	"math/big"
	"testing"

	"github.com/countersign/countersign/x402/evm"
)

func mustAddr(t *testing.T, s string) evm.Address {
	t.Helper()
	a, err := evm.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestKnownAnswer is issue 31's known answer: the digest and signature
// other EIP-712 implementations produce for this authorization.
func TestKnownAnswer(t *testing.T) {
	k, err := evm.ParseKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Address().String(); got != "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266" {
		t.Errorf("address %s", got)
	}
	d := evm.Domain{Name: "USDC", Version: "2", ChainID: big.NewInt(84532),
		VerifyingContract: mustAddr(t, "0x036CbD53842c5426634e7929541eC2318f3dCF7e")}
	auth := evm.TransferWithAuthorization{
		From: k.Address(), To: mustAddr(t, "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"),
		Value: big.NewInt(1000), ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(1900000000),
	}
	for i := range auth.Nonce {
		auth.Nonce[i] = 0xab
	}
	digest, err := auth.Digest(d)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(digest[:]); got != "0586c699ca56f0929775d352dc7627ea6675752533497c0b95df337c56d10dbb" {
		t.Fatalf("digest %s", got)
	}
	sig := k.Sign(digest)
	want := "fb507390eddb454134a18f2474d327d77e79f5a027297a0ad663a2a3e3acf7606e66b96693e22ad188684912634eb45bd09e08001735d2bdfe7097b76d415f5e1c"
	if got := hex.EncodeToString(sig[:]); got != want {
		t.Fatalf("signature\n%s\nwant\n%s", got, want)
	}
	from, err := evm.Recover(digest, sig[:])
	if err != nil || from != k.Address() {
		t.Fatalf("recovered %s, %v", from, err)
	}
}

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0x70997970C51812dc3A010C7d01b50e0d17dc79C8", true},
		{"0x70997970c51812dc3a010c7d01b50e0d17dc79c8", true}, // no checksum to check
		{"0x70997970C51812DC3A010C7D01B50E0D17DC79C8", true},
		{"0x70997970C51812dc3A010C7d01b50e0d17dc79c8", false}, // one letter's case wrong
		{"70997970C51812dc3A010C7d01b50e0d17dc79C8", false},
		{"0x70997970C51812dc3A010C7d01b50e0d17dc79", false},
		{"0x70997970C51812dc3A010C7d01b50e0d17dc79Cg", false},
		{"", false},
	}
	for _, tt := range tests {
		_, err := evm.ParseAddress(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseAddress(%q): %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}

func TestRecoverRefuses(t *testing.T) {
	k, err := evm.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	digest := evm.Keccak256([]byte("x"))
	sig := k.Sign(digest)
	n, _ := new(big.Int).SetString("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", 16)
	high := append([]byte(nil), sig[:]...)
	s := new(big.Int).SetBytes(high[32:64])
	new(big.Int).Sub(n, s).FillBytes(high[32:64]) // the same signature with high s
	high[64] ^= 1                                 // and the other recovery id
	tests := []struct {
		name string
		sig  []byte
		ok   bool
	}{
		{"as signed", sig[:], true},
		{"v as 0/1", append(append([]byte(nil), sig[:64]...), sig[64]-27), true},
		{"short", sig[:64], false},
		{"v 29", append(append([]byte(nil), sig[:64]...), 29), false},
		{"high s", high, false},
	}
	for _, tt := range tests {
		a, err := evm.Recover(digest, tt.sig)
		if (err == nil) != tt.ok || (tt.ok && a != k.Address()) {
			t.Errorf("%s: %s, %v", tt.name, a, err)
		}
	}
	// Another digest recovers another account, never an error that
	// could be mistaken for a refusal by the caller.
	other := evm.Keccak256([]byte("y"))
	if a, err := evm.Recover(other, sig[:]); err == nil && a == k.Address() {
		t.Error("a signature recovered the signer over another digest")
	}
}

func TestKeyRoundTrip(t *testing.T) {
	k, err := evm.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := evm.ParseKey(k.Hex())
	if err != nil || k2.Address() != k.Address() {
		t.Fatalf("%v", err)
	}
	for _, bad := range []string{"", "0x00", "0x" + string(bytes.Repeat([]byte("0"), 64)), "0x" + string(bytes.Repeat([]byte("f"), 64))} {
		if _, err := evm.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}

// FuzzParseAddress: any input either fails or round-trips through the
// checksum form to the same address.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0x70997970C51812dc3A010C7d01b50e0d17dc79C8", "0x70997970c51812dc3a010c7d01b50e0d17dc79c8", "0x", "0xZZ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := evm.ParseAddress(s)
		if err != nil {
			return
		}
		b, err := evm.ParseAddress(a.String())
		if err != nil || a != b {
			t.Fatalf("%q: %s does not parse back (%v)", s, a, err)
		}
	})
}
