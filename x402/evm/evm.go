// Package evm signs what the x402 "exact" scheme on EVM networks asks of
// a payer: an EIP-3009 TransferWithAuthorization, hashed as EIP-712 typed
// data and signed with a secp256k1 key, as the token contract's
// transferWithAuthorization verifies it (ecrecover).
//
// It needs nothing beyond what the module already has: secp256k1 from
// decred's dcrd (RFC 6979 deterministic, low-S signatures with a
// recovery code, which is what Ethereum's ecrecover takes) and Keccak-256
// from golang.org/x/crypto/sha3 (the legacy Keccak Ethereum uses, not
// SHA3-256). A full Ethereum library would bring an RPC client, ABI
// tooling and cgo options for four hash layouts and one signature.
//
// Only the two structures x402 needs are encoded, each by hand from its
// EIP-712 type string; this is not a general typed-data encoder.
package evm

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	"github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"golang.org/x/crypto/sha3"
)

// Keccak256 is Ethereum's hash: the original Keccak padding, not SHA3's.
func Keccak256(parts ...[]byte) [32]byte {
	h := sha3.NewLegacyKeccak256()
	for _, p := range parts {
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Address is a 20-byte EVM account address.
type Address [20]byte

// ParseAddress reads "0x" followed by 40 hex digits. All lower or all
// upper case is accepted as is; mixed case must be the EIP-55 checksum of
// the address, so a mistyped mixed-case address is refused rather than
// paid.
func ParseAddress(s string) (Address, error) {
	var a Address
	h, ok := strings.CutPrefix(s, "0x")
	if !ok || len(h) != 40 {
		return a, fmt.Errorf("evm: address %.60q is not 0x and 40 hex digits", s)
	}
	if _, err := hex.Decode(a[:], []byte(h)); err != nil {
		return a, fmt.Errorf("evm: address %.60q is not hex", s)
	}
	if h != strings.ToLower(h) && h != strings.ToUpper(h) && a.String() != s {
		return a, fmt.Errorf("evm: address %.60q fails its EIP-55 checksum", s)
	}
	return a, nil
}

// String returns the EIP-55 mixed-case checksum form.
func (a Address) String() string {
	h := hex.EncodeToString(a[:])
	sum := Keccak256([]byte(h))
	out := []byte(h)
	for i, c := range out {
		if c < 'a' {
			continue
		}
		nibble := sum[i/2] >> 4
		if i%2 == 1 {
			nibble = sum[i/2] & 0x0f
		}
		if nibble >= 8 {
			out[i] = c - 'a' + 'A'
		}
	}
	return "0x" + string(out)
}

// Domain is an EIP-712 domain with the four members token contracts use.
type Domain struct {
	Name              string
	Version           string
	ChainID           *big.Int
	VerifyingContract Address
}

// The EIP-712 type strings; their hashes are the typeHash members.
const (
	domainType   = "EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"
	transferType = "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)"
)

var (
	domainTypeHash   = Keccak256([]byte(domainType))
	transferTypeHash = Keccak256([]byte(transferType))
	maxUint256       = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
)

// word encodes a uint256 as 32 big-endian bytes.
func word(n *big.Int) ([]byte, error) {
	if n == nil || n.Sign() < 0 || n.Cmp(maxUint256) > 0 {
		return nil, fmt.Errorf("evm: %v is not a uint256", n)
	}
	return n.FillBytes(make([]byte, 32)), nil
}

func addressWord(a Address) []byte {
	w := make([]byte, 32)
	copy(w[12:], a[:])
	return w
}

// Separator is the domain's hashStruct, the domainSeparator of EIP-712.
func (d Domain) Separator() ([32]byte, error) {
	chain, err := word(d.ChainID)
	if err != nil {
		return [32]byte{}, fmt.Errorf("evm: domain chainId: %w", err)
	}
	name, version := Keccak256([]byte(d.Name)), Keccak256([]byte(d.Version))
	return Keccak256(domainTypeHash[:], name[:], version[:], chain, addressWord(d.VerifyingContract)), nil
}

// TransferWithAuthorization is EIP-3009's authorization: the token moves
// Value from From to To if submitted after ValidAfter and before
// ValidBefore (Unix seconds), once for each Nonce.
type TransferWithAuthorization struct {
	From        Address
	To          Address
	Value       *big.Int
	ValidAfter  *big.Int
	ValidBefore *big.Int
	Nonce       [32]byte
}

// Digest is the EIP-712 signing hash of t in domain d:
// keccak256(0x19 0x01 ‖ domainSeparator ‖ hashStruct(t)).
func (t TransferWithAuthorization) Digest(d Domain) ([32]byte, error) {
	sep, err := d.Separator()
	if err != nil {
		return [32]byte{}, err
	}
	var words [3][]byte
	for i, n := range []*big.Int{t.Value, t.ValidAfter, t.ValidBefore} {
		if words[i], err = word(n); err != nil {
			return [32]byte{}, fmt.Errorf("evm: authorization: %w", err)
		}
	}
	st := Keccak256(transferTypeHash[:], addressWord(t.From), addressWord(t.To), words[0], words[1], words[2], t.Nonce[:])
	return Keccak256([]byte{0x19, 0x01}, sep[:], st[:]), nil
}

// Key is a secp256k1 private key that signs digests as Ethereum accounts
// do.
type Key struct {
	k *secp256k1.PrivateKey
}

// ParseKey reads a private key as 32 bytes of hex, with or without 0x.
// The scalar must be in [1, n-1].
func ParseKey(s string) (*Key, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil || len(b) != 32 {
		return nil, errors.New("evm: a private key is 32 bytes of hex")
	}
	var sc secp256k1.ModNScalar
	if overflow := sc.SetByteSlice(b); overflow || sc.IsZero() {
		return nil, errors.New("evm: the private key is not a valid secp256k1 scalar")
	}
	return &Key{k: secp256k1.NewPrivateKey(&sc)}, nil
}

// GenerateKey returns a new random key.
func GenerateKey() (*Key, error) {
	k, err := secp256k1.GeneratePrivateKey()
	if err != nil {
		return nil, err
	}
	return &Key{k: k}, nil
}

// Hex returns the private key as 0x and 64 hex digits, for a key file.
func (k *Key) Hex() string {
	b := k.k.Key.Bytes()
	return "0x" + hex.EncodeToString(b[:])
}

// Address is the key's account: the last 20 bytes of the Keccak-256 of
// its uncompressed public key without the 0x04 prefix.
func (k *Key) Address() Address {
	return addressOf(k.k.PubKey())
}

func addressOf(pub *secp256k1.PublicKey) Address {
	h := Keccak256(pub.SerializeUncompressed()[1:])
	var a Address
	copy(a[:], h[12:])
	return a
}

// Sign signs a digest: r ‖ s ‖ v, 65 bytes, v = 27 + the recovery id, s
// in the lower half of the order (EIP-2), deterministic (RFC 6979).
func (k *Key) Sign(digest [32]byte) [65]byte {
	c := ecdsa.SignCompact(k.k, digest[:], false) // <27+recid> ‖ r ‖ s
	var sig [65]byte
	copy(sig[:64], c[1:])
	sig[64] = c[0]
	return sig
}

// Recover returns the account whose key made sig over digest. v may be
// 27/28 or 0/1; a high s is refused, as the token contracts refuse it.
func Recover(digest [32]byte, sig []byte) (Address, error) {
	if len(sig) != 65 {
		return Address{}, errors.New("evm: a signature is 65 bytes")
	}
	v := sig[64]
	if v < 27 {
		v += 27
	}
	if v != 27 && v != 28 {
		return Address{}, fmt.Errorf("evm: signature v %d is not 27 or 28", sig[64])
	}
	var s secp256k1.ModNScalar
	if overflow := s.SetByteSlice(sig[32:64]); overflow || s.IsOverHalfOrder() {
		return Address{}, errors.New("evm: signature s is not in the lower half of the order")
	}
	c := make([]byte, 65)
	c[0] = v
	copy(c[1:], sig[:64])
	pub, _, err := ecdsa.RecoverCompact(c, digest[:])
	if err != nil {
		return Address{}, fmt.Errorf("evm: recover: %w", err)
	}
	return addressOf(pub), nil
}
