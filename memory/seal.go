package memory

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"
)

// marshal encodes v as compact JSON without HTML escaping: artifacts are
// signed over their canonical form, and "<" spelled as "\u003c" would give
// one value two spellings (a one-byte change of case in the escape would
// not change what is signed).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalDigest is SHA-256 of the RFC 8785 form of v's JSON.
func canonicalDigest(v any) ([32]byte, error) {
	b, err := marshal(v)
	if err != nil {
		return [32]byte{}, err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(c), nil
}

// contentDigest is a record's Seal.ContentDigest.
func contentDigest(r *Record) (string, error) {
	canon, err := jcs.Transform(r.Body)
	if err != nil {
		return "", fmt.Errorf("memory: content digest: body: %w", err)
	}
	d := sha256.Sum256(appendContentJCS(nil, r, canon))
	return hex.EncodeToString(d[:]), nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// encryptBody encrypts body under a fresh 256-bit key with AES-GCM, the
// record id as additional data (a ciphertext moved to another id does not
// open). It returns the key and nonce || ciphertext.
func encryptBody(id string, body []byte) (key, sealed []byte, err error) {
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, nil, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, err
	}
	return key, aead.Seal(nonce, nonce, body, []byte(id)), nil
}

func decryptBody(id string, key, sealed []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < aead.NonceSize() {
		return nil, errors.New("memory: stored body is truncated")
	}
	n := aead.NonceSize()
	body, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(id))
	if err != nil {
		return nil, fmt.Errorf("memory: body of %s does not open: %w", id, err)
	}
	return body, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
