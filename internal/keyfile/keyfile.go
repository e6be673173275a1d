// Package keyfile reads and writes private keys as JSON Web Keys (RFC 7517)
// on disk.
//
// Every key a person or the server holds — the record key, an operator key,
// an agent key — is a JWK file, so the same tooling (and any JOSE library a
// user already has) can read it. Private key files are written with mode 0600
// and never overwritten: losing a record key silently would break the chain
// of signatures, so an existing file is an error the caller must resolve.
package keyfile

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// ErrExists is returned by Write when the file already exists.
// Check for it with errors.Is.
var ErrExists = errors.New("keyfile: file exists")

// Marshal encodes a private key (ed25519.PrivateKey or *ecdsa.PrivateKey) as
// a JWK with the given key id.
func Marshal(key crypto.Signer, kid string) ([]byte, error) {
	k, err := jwk.Import(key)
	if err != nil {
		return nil, fmt.Errorf("keyfile: %w", err)
	}
	if kid != "" {
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			return nil, fmt.Errorf("keyfile: %w", err)
		}
	}
	b, err := json.MarshalIndent(k, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("keyfile: %w", err)
	}
	return append(b, '\n'), nil
}

// MarshalPublic encodes the public half of key as a JWK with the given key id.
func MarshalPublic(key crypto.Signer, kid string) ([]byte, error) {
	k, err := jwk.PublicKeyOf(key.Public())
	if err != nil {
		return nil, fmt.Errorf("keyfile: %w", err)
	}
	if kid != "" {
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			return nil, fmt.Errorf("keyfile: %w", err)
		}
	}
	b, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("keyfile: %w", err)
	}
	return b, nil
}

// Write stores key as a JWK at path with mode 0600, creating parent
// directories (mode 0700). It refuses to overwrite an existing file.
func Write(path string, key crypto.Signer, kid string) error {
	b, err := Marshal(key, kid)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keyfile: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, path)
	}
	if err != nil {
		return fmt.Errorf("keyfile: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("keyfile: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("keyfile: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keyfile: %w", err)
	}
	return nil
}

// Key is a private key read from a file.
type Key struct {
	Signer crypto.Signer // ed25519.PrivateKey or *ecdsa.PrivateKey
	KeyID  string
}

// Parse decodes a private JWK (OKP Ed25519 or EC P-256).
func Parse(b []byte) (Key, error) {
	k, err := jwk.ParseKey(b)
	if err != nil {
		return Key{}, fmt.Errorf("keyfile: %w", err)
	}
	var raw any
	if err := jwk.Export(k, &raw); err != nil {
		return Key{}, fmt.Errorf("keyfile: %w", err)
	}
	kid, _ := k.KeyID()
	switch s := raw.(type) {
	case ed25519.PrivateKey:
		return Key{Signer: s, KeyID: kid}, nil
	case *ecdsa.PrivateKey:
		return Key{Signer: s, KeyID: kid}, nil
	default:
		return Key{}, fmt.Errorf("keyfile: not a private Ed25519 or P-256 key (%T)", raw)
	}
}

// Read reads a private JWK file.
func Read(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("keyfile: %w", err)
	}
	k, err := Parse(b)
	if err != nil {
		return Key{}, fmt.Errorf("%w (file %s)", err, path)
	}
	return k, nil
}

// ReadEd25519 reads a private JWK file that must hold an Ed25519 key.
func ReadEd25519(path string) (ed25519.PrivateKey, string, error) {
	k, err := Read(path)
	if err != nil {
		return nil, "", err
	}
	priv, ok := k.Signer.(ed25519.PrivateKey)
	if !ok {
		return nil, "", fmt.Errorf("keyfile: %s: want an Ed25519 (OKP) key", path)
	}
	return priv, k.KeyID, nil
}
