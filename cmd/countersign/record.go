package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/mod/sumdb/note"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/keyfile"
)

// Data directory layout. The store and the private record key live here;
// public material a person needs (record.pub) is written beside them.
const (
	storeDir       = "store"
	recordKeyFile  = "keys/record.jwk.json"
	recordPubFile  = "record.pub"
	sandboxDirName = "sandbox"
)

// newRecordKey generates an Ed25519 record key and writes it to path.
func newRecordKey(path string) (ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := keyfile.Write(path, priv, "record-"+keyTag(pub)); err != nil {
		return nil, err
	}
	return priv, nil
}

// keyTag is a short, stable name for a public key: the first 8 hex digits of
// its SHA-256.
func keyTag(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:4])
}

// defaultOrigin names a record when the operator did not: unique per record
// key, so checkpoints of two deployments are never confused, and stable
// across restarts and base-URL changes because it depends only on the key.
func defaultOrigin(pub ed25519.PublicKey) string {
	return "countersign.local/record/" + keyTag(pub)
}

// dataOrigin decides the record's origin: the explicit flag if given, else
// the origin already published in <dir>/record.pub for this same key (so a
// server started once with --origin keeps it), else the key's default.
func dataOrigin(dir, flagOrigin string, pub ed25519.PublicKey) string {
	if flagOrigin != "" {
		return flagOrigin
	}
	if _, have, err := readVerifierFile(filepath.Join(dir, recordPubFile)); err == nil && have.Equal(pub) {
		o, _, _ := readVerifierFile(filepath.Join(dir, recordPubFile))
		return o
	}
	return defaultOrigin(pub)
}

// recordVerifierKey returns the C2SP note verifier string for the record key.
func recordVerifierKey(origin string, key ed25519.PrivateKey) (string, error) {
	v, err := note.NewEd25519VerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return "", fmt.Errorf("record verifier key for origin %q: %w", origin, err)
	}
	return v, nil
}

// parseVerifierKey extracts the origin and Ed25519 public key from a C2SP
// note verifier string ("name+hash+base64(0x01 || key)").
func parseVerifierKey(vkey string) (origin string, pub ed25519.PublicKey, err error) {
	origin, pub, err = audit.ParseVerifierKey(vkey)
	if err != nil {
		return "", nil, fmt.Errorf("record verifier key: %w", err)
	}
	return origin, pub, nil
}

// loadRecordKey returns the record key for a data directory. In sandbox mode
// a missing key is generated; in production the key must be given and
// exist, because a silently generated key would start a second, unrelated
// chain of signatures.
func loadRecordKey(dataDir, keyPath string, production bool) (ed25519.PrivateKey, bool, error) {
	path := keyPath
	if path == "" {
		if production {
			return nil, false, errors.New("--production needs --record-key FILE (generate one with: countersign keygen record --out FILE)")
		}
		path = filepath.Join(dataDir, recordKeyFile)
	}
	priv, _, err := keyfile.ReadEd25519(path)
	if err == nil {
		return priv, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) || keyPath != "" {
		return nil, false, err
	}
	priv, err = newRecordKey(path)
	return priv, true, err
}

// readVerifierFile reads a record.pub file and returns its origin and key.
func readVerifierFile(path string) (string, ed25519.PublicKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	return parseVerifierKey(string(b))
}

// writePublicFile writes a public, non-secret file atomically.
func writePublicFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
