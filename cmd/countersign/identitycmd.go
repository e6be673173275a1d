package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/keyfile"
)

// The deployment's ADP identity keys live beside the record key:
// keys/identity.jwk.json is the first (its key, in hex, is the agent id
// for good), keys/identity-<tag>.jwk.json each key a rotation moved to.
// identity.json, public, says which key signs now and the rotation chain.
const (
	identityKeyFile = "keys/identity.jwk.json"
	identityPubFile = "identity.json"
)

// loadIdentityKeys returns every identity private key of the data
// directory, the original first, generating the original on first start.
func loadIdentityKeys(dataDir, path string) ([]ed25519.PrivateKey, error) {
	if path == "" {
		path = filepath.Join(dataDir, identityKeyFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return nil, err
			}
			if err := keyfile.Write(path, priv, "identity-"+keyTag(priv.Public().(ed25519.PublicKey))); err != nil {
				return nil, fmt.Errorf("identity key: %w", err)
			}
		}
	}
	first, _, err := keyfile.ReadEd25519(path)
	if err != nil {
		return nil, fmt.Errorf("identity key: %w", err)
	}
	keys := []ed25519.PrivateKey{first}
	rotated, err := filepath.Glob(filepath.Join(filepath.Dir(path), "identity-*.jwk.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(rotated)
	for _, p := range rotated {
		k, _, err := keyfile.ReadEd25519(p)
		if err != nil {
			return nil, fmt.Errorf("identity key: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// newIdentityKeyFunc makes and durably writes the next identity key for a
// rotation, before the rotation is committed: a crash between the two
// leaves an unused key file, never a chain pointing at a lost key.
func newIdentityKeyFunc(dataDir, path string) func(ctx context.Context) (ed25519.PrivateKey, error) {
	dir := filepath.Join(dataDir, "keys")
	if path != "" {
		dir = filepath.Dir(path)
	}
	return func(context.Context) (ed25519.PrivateKey, error) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		tag := keyTag(pub)
		if err := keyfile.Write(filepath.Join(dir, "identity-"+tag+".jwk.json"), priv, "identity-"+tag); err != nil {
			return nil, err
		}
		return priv, nil
	}
}

// identityPublic is the content of identity.json.
type identityPublic struct {
	AgentID       string                       `json:"agentId"`
	PublicKey     string                       `json:"publicKey"`
	RotationChain []identity.RotationStatement `json:"rotationChain"`
}

// writeIdentityFile publishes the identity's public half in the data
// directory, for `countersign keys` and people.
func writeIdentityFile(dataDir string, id *identity.Service) error {
	chain := id.RotationChain()
	if chain == nil {
		chain = []identity.RotationStatement{}
	}
	b, err := json.MarshalIndent(identityPublic{AgentID: id.AgentID(), PublicKey: hex.EncodeToString(id.PublicKey()),
		RotationChain: chain}, "", "  ")
	if err != nil {
		return err
	}
	return writePublicFile(filepath.Join(dataDir, identityPubFile), append(b, '\n'))
}

const keysSynopsis = `keys [--data DIR]

Prints this deployment's public keys: its ADP identity (the agent id, the
first key in hex, which survives key rotation, and the key that signs
disclosures now)
and the record's verifier key. Reads only public files of the data
directory, so it works while the server runs.`

func cmdKeys(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keys", keysSynopsis, stderr)
	data := fs.String("data", "countersign-data", "data `directory` of the server")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(*data, identityPubFile))
	if err != nil {
		return fmt.Errorf("%w (has the server started once with --data %s?)", err, *data)
	}
	var pub identityPublic
	if err := json.Unmarshal(b, &pub); err != nil {
		return fmt.Errorf("%s: %w", identityPubFile, err)
	}
	key, err := identity.PublicKeyOf(pub.PublicKey)
	if err != nil {
		return fmt.Errorf("%s: %w", identityPubFile, err)
	}
	fmt.Fprintf(stdout, "identity (ADP)\n  agent id:        %s\n  signing key:     %s\n  signing did:key: %s\n  rotations:       %d\n",
		pub.AgentID, pub.PublicKey, identity.DIDKey(key), len(pub.RotationChain))
	if vkey, err := os.ReadFile(filepath.Join(*data, recordPubFile)); err == nil {
		fmt.Fprintf(stdout, "record\n  verifier key:    %s\n", strings.TrimSpace(string(vkey)))
	}
	return nil
}

// identityOptions turns the identity flags and files into the node's
// identity options: the keys on disk (generated in sandbox mode), how a
// rotation keeps its new key, the disclosed operator and prompt, the
// verification policy, and the public file a rotation republishes.
func identityOptions(cfg serveConfig) (countersign.IdentityOptions, error) {
	var o countersign.IdentityOptions
	keys, err := loadIdentityKeys(cfg.data, cfg.identityKey)
	if err != nil {
		return o, err
	}
	o.Keys, o.NewKey = keys, newIdentityKeyFunc(cfg.data, cfg.identityKey)
	o.OperatorID = cfg.operatorID
	if o.OperatorID == "" {
		if cfg.production {
			return o, errors.New("--production needs --operator-id NAME (the deploying party's stable id, disclosed to counterparties)")
		}
		o.OperatorID = "sandbox-operator"
	}
	o.DeniabilityBoundary, o.TTL, o.HexAgentID = cfg.deniabilityBoundary, cfg.disclosureTTL, cfg.hexAgentID
	if cfg.systemPrompt != "" {
		if o.SystemPrompt, err = os.ReadFile(cfg.systemPrompt); err != nil {
			return o, fmt.Errorf("--system-prompt: %w", err)
		}
		o.PromptVersion = filepath.Base(cfg.systemPrompt)
	}
	if cfg.verifyPolicy != "" {
		b, err := os.ReadFile(cfg.verifyPolicy)
		if err != nil {
			return o, fmt.Errorf("--verify-policy: %w", err)
		}
		if o.Policy, err = identity.ParsePolicy(b); err != nil {
			return o, fmt.Errorf("--verify-policy %s: %w", cfg.verifyPolicy, err)
		}
	}
	// A rotation also republishes identity.json. The rotation is
	// committed; a failure to write the public file is repaired at the
	// next start, which writes it again.
	o.Rotated = func(svc *identity.Service) { _ = writeIdentityFile(cfg.data, svc) }
	return o, nil
}
