package main

import (
	"fmt"
	"path/filepath"
)

// writeSandboxFiles writes the files a newcomer needs to try the server into
// <data>/sandbox. They are rewritten on every sandbox start so they always
// describe the running server; they hold public material only.
func writeSandboxFiles(dataDir, baseURL, vkey string) error {
	dir := filepath.Join(dataDir, sandboxDirName)
	if err := writePublicFile(filepath.Join(dir, recordPubFile), []byte(vkey+"\n")); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	readme := fmt.Sprintf(`Countersign sandbox
===================

This directory was written by "countersign serve" in sandbox mode. Nothing
here is secret; the record's private key lives in ../keys/ (mode 0600).

record.pub   the record's verifier key (a C2SP signed-note verifier string).
             Anyone holding it can check that the record is intact and only grew.

Try it:

  curl -s %[1]s/healthz
  curl -s %[1]s/audit/checkpoint
  curl -s '%[1]s/audit?limit=5'
  go run ./cmd/countersign audit verify --url %[1]s --key %[2]s --signatures
`, baseURL, filepath.Join(dir, recordPubFile))
	if err := writePublicFile(filepath.Join(dir, "README.txt"), []byte(readme)); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}
