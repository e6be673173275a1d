package main

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
)

// sandboxSession is a running sandbox server and what its sandbox files
// hold: the agent's key and bearer credential, the operator's signer.
type sandboxSession struct {
	base, dir string // base URL; sandbox directory
	agentKey  ed25519.PrivateKey
	bearer    string // "Bearer <credential>"
	opKey     keyfile.Key
	signer    *operator.Signer
}

// startSandbox starts a sandbox server (no simulated latency) in a
// temporary directory, stopped when the test ends, and reads its files.
func startSandbox(t *testing.T) *sandboxSession {
	t.Helper()
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	t.Cleanup(func() { stop() })
	s := &sandboxSession{base: base, dir: filepath.Join(dir, "sandbox")}
	var err error
	if s.agentKey, _, err = keyfile.ReadEd25519(filepath.Join(s.dir, sandboxAgentKey)); err != nil {
		t.Fatal(err)
	}
	if s.opKey, err = keyfile.Read(filepath.Join(s.dir, sandboxOperatorKey)); err != nil {
		t.Fatal(err)
	}
	if s.signer, err = operator.NewSigner(s.opKey.Signer, s.opKey.KeyID, base, nil); err != nil {
		t.Fatal(err)
	}
	cred, err := os.ReadFile(filepath.Join(s.dir, sandboxCredential))
	if err != nil {
		t.Fatal(err)
	}
	s.bearer = "Bearer " + strings.TrimSpace(string(cred))
	return s
}
