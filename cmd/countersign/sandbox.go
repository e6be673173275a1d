package main

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/x402/fetch"
)

// Sandbox files (DESIGN §11), in <data>/sandbox.
const (
	sandboxOperatorKey  = "operator.jwk.json"
	sandboxOperatorSet  = "operators.jwks.json"
	sandboxAgentKey     = "agent.jwk.json"
	sandboxCredential   = "agent-credential.txt"
	sandboxMandate      = "mandate.jws"
	sandboxMemMandate   = "memory-mandate.jws"
	sandboxOperatorKID  = "op-sandbox"
	sandboxMandateValid = 365 * 24 * time.Hour
)

// provisionSandbox writes, on first start, an operator key and the JWK Set
// the server trusts, an agent key with an issued credential, and a mandate
// from that operator to that agent, so a newcomer can pay within a minute.
// Existing files are kept: a restart changes nothing a person already uses.
// provisionSandboxOperator writes the sandbox operator's key and the key
// set the server trusts, keeping what exists: the node needs the set to
// open, and the agents are provisioned through the open node.
func provisionSandboxOperator(dataDir string) error {
	dir := filepath.Join(dataDir, sandboxDirName)
	op, err := readOrCreateKey(filepath.Join(dir, sandboxOperatorKey), sandboxOperatorKID)
	if err != nil {
		return err
	}
	setPath := filepath.Join(dir, sandboxOperatorSet)
	if _, err := os.Stat(setPath); errors.Is(err, os.ErrNotExist) {
		set, err := publicSet(op, sandboxOperatorKID)
		if err != nil {
			return err
		}
		if err := writePublicFile(setPath, set); err != nil {
			return err
		}
	}
	return nil
}

func provisionSandbox(ctx context.Context, dataDir string, keys *auth.Keys) error {
	dir := filepath.Join(dataDir, sandboxDirName)
	if err := provisionSandboxOperator(dataDir); err != nil {
		return err
	}
	op, err := readOrCreateKey(filepath.Join(dir, sandboxOperatorKey), sandboxOperatorKID)
	if err != nil {
		return err
	}
	agentID, err := provisionAgent(ctx, dir, keys, op, "", "sandbox agent")
	if err != nil {
		return err
	}
	// A second agent, the seller of the protocol walkthrough: a
	// counterparty that is an agent here too, with custody and a stake.
	if _, err := provisionAgent(ctx, dir, keys, op, "seller", "sandbox seller"); err != nil {
		return err
	}
	memPath := filepath.Join(dir, sandboxMemMandate)
	if _, err := os.Stat(memPath); errors.Is(err, os.ErrNotExist) {
		now := time.Now().UTC().Truncate(time.Second)
		tok, err := memory.SignMandate(memory.MandateClaims{
			ID: "mm_sandbox_" + agentID[:12], Agent: agentID, IssuedAt: now, ExpiresAt: now.Add(sandboxMandateValid),
			Namespace: "*", CanRead: true, CanWrite: true, CanErase: true,
		}, op, sandboxOperatorKID)
		if err != nil {
			return err
		}
		if err := os.WriteFile(memPath, []byte(tok+"\n"), 0o644); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

// provisionAgent writes an agent key, a credential issued to it and a
// mandate for it (files agent.jwk.json, agent-credential.txt, mandate.jws,
// or seller.jwk.json, seller-credential.txt, seller-mandate.jws and
// seller-id.txt for the prefix "seller"), keeping what exists.
func provisionAgent(ctx context.Context, dir string, keys *auth.Keys, op crypto.Signer, prefix, name string) (string, error) {
	keyFile, credFile, mandateFile := sandboxAgentKey, sandboxCredential, sandboxMandate
	if prefix != "" {
		keyFile, credFile, mandateFile = prefix+".jwk.json", prefix+"-credential.txt", prefix+"-mandate.jws"
	}
	agent, err := readOrCreateKey(filepath.Join(dir, keyFile), "")
	if err != nil {
		return "", err
	}
	agentID := hex.EncodeToString(agent.Public().(ed25519.PublicKey))
	if prefix != "" {
		if err := os.WriteFile(filepath.Join(dir, prefix+"-id.txt"), []byte(agentID+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
	}
	credPath := filepath.Join(dir, credFile)
	if _, err := os.Stat(credPath); errors.Is(err, os.ErrNotExist) {
		iss, err := keys.Create(ctx, auth.CreateRequest{Name: name, AgentIDs: []string{agentID}},
			audit.Actor{Kind: "system", ID: "sandbox-provisioning"}, "")
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(credPath, []byte(iss.Credential+"\n"), 0o600); err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
	}
	mandatePath := filepath.Join(dir, mandateFile)
	if _, err := os.Stat(mandatePath); errors.Is(err, os.ErrNotExist) {
		now := time.Now().UTC().Truncate(time.Second)
		tok, err := pay.SignMandate(pay.MandateClaims{
			ID: "mdt_sandbox_" + agentID[:12], Agent: agentID,
			IssuedAt: now, ExpiresAt: now.Add(sandboxMandateValid),
			Payees: []string{"*"}, Currency: "USD",
			PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
			// acp and ucp are the sandbox merchants' rails (POST /buy),
			// x402 its fake x402 server's (POST /x402/fetch).
			Rails: []string{fake.SandboxCard, fake.SandboxBank, fake.SandboxChain, "acp", "ucp", fetch.RailName},
			// "Confirm above 10,000": thresholds are inclusive, so 10,001.
			ConfirmAboveMinor: 10_001, IrreversibleConfirmAboveMinor: 10_001,
		}, op, sandboxOperatorKID)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(mandatePath, []byte(tok+"\n"), 0o644); err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
	}
	return agentID, nil
}

func readOrCreateKey(path, kid string) (crypto.Signer, error) {
	k, err := keyfile.Read(path)
	if err == nil {
		return k.Signer, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if kid == "" {
		kid = hex.EncodeToString(priv.Public().(ed25519.PublicKey))
	}
	if err := keyfile.Write(path, priv, kid); err != nil {
		return nil, err
	}
	return priv, nil
}

// publicSet returns a JWK Set holding the public half of key.
func publicSet(key crypto.Signer, kid string) ([]byte, error) {
	b, err := keyfile.MarshalPublic(key, kid)
	if err != nil {
		return nil, err
	}
	pk, err := jwk.ParseKey(b)
	if err != nil {
		return nil, err
	}
	set := jwk.NewSet()
	if err := set.AddKey(pk); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// loadOperatorKeys reads the JWK Set of trusted operator public keys.
func loadOperatorKeys(path string) ([]operator.PublicKey, error) {
	return operator.ReadKeySet(path)
}

// writeSandboxFiles writes the files that describe the running server into
// <data>/sandbox: the record's verifier key and a README with a
// ready-to-run example. They are rewritten on every sandbox start so they
// always describe the running server.
func writeSandboxFiles(dataDir, baseURL, vkey string) error {
	dir := filepath.Join(dataDir, sandboxDirName)
	if err := writePublicFile(filepath.Join(dir, recordPubFile), []byte(vkey+"\n")); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if err := writePublicFile(filepath.Join(dir, "README.txt"), []byte(sandboxReadme(dir, baseURL))); err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	return nil
}

func sandboxReadme(dir, baseURL string) string {
	return fmt.Sprintf(`Countersign sandbox
===================

Written by "countersign serve" in sandbox mode. These are sandbox
conveniences: never use them for real money (--production refuses them).

operator.jwk.json     a sample operator's PRIVATE key (Ed25519 JWK, kid %[3]s)
operators.jwks.json   the public operator keys the server trusts (JWK Set)
agent.jwk.json        a sample agent's PRIVATE key; its agent id is the hex public key
agent-credential.txt  the bearer credential issued to that agent
mandate.jws           a mandate from that operator to that agent: USD, any payee,
                      every sandbox rail, the acp and ucp merchant rails and x402,
                      per-payment cap 50,000, 1,000,000 a day, payments above
                      10,000 wait for an operator's approval
memory-mandate.jws    a memory mandate from that operator to that agent: every
                      namespace, read, write and erase (erasing also needs the
                      operator's own signature)
seller.jwk.json, seller-credential.txt, seller-mandate.jws, seller-id.txt
                      a second agent with the same mandate terms: the seller
                      (counterparty) of the protocol walkthrough in README.md
record.pub            the record's verifier key (C2SP note verifier string)

Pay 12.50 USD (settles at once, 200 with a Receipt):

  go run ./cmd/countersign pay --url %[2]s \
      --agent-key %[1]s/agent.jwk.json --credential %[1]s/agent-credential.txt \
      --mandate %[1]s/mandate.jws --payee acct:seller.example \
      --amount 1250 --currency USD --rail sandbox-card

Pay 250.00 USD (above 10,000 minor units: held for approval, 202):

  go run ./cmd/countersign pay --url %[2]s \
      --agent-key %[1]s/agent.jwk.json --credential %[1]s/agent-credential.txt \
      --mandate %[1]s/mandate.jws --payee acct:seller.example \
      --amount 25000 --currency USD --rail sandbox-card

Buy from the sandbox's fake merchants (sandbox-acp speaks ACP, sandbox-ucp UCP):

  go run ./cmd/countersign buy --url %[2]s \
      --agent-key %[1]s/agent.jwk.json --credential %[1]s/agent-credential.txt \
      --mandate %[1]s/mandate.jws --merchant sandbox-acp --rail acp --line sku-mug:2

Pay the sandbox's fake x402 server for a resource (1 cent in USDC, signed with
the wallet key in keys/x402-wallet.key; nothing touches a real chain):

  go run ./cmd/countersign x402 fetch --url %[2]s \
      --agent-key %[1]s/agent.jwk.json --credential %[1]s/agent-credential.txt \
      --mandate %[1]s/mandate.jws --resource $(cat %[1]s/x402-url.txt)/paid --max-amount 5

Remember a fact, recall it, check what you got, erase it:

  M="--url %[2]s --credential %[1]s/agent-credential.txt --mandate %[1]s/memory-mandate.jws"
  go run ./cmd/countersign memory remember $M --namespace demo --subject user:ada --body '"Paris"' --out fact.json
  go run ./cmd/countersign memory recall $M --namespace demo --subject user:ada --out page.json
  go run ./cmd/countersign memory verify --key %[1]s/record.pub page.json
  go run ./cmd/countersign memory forget --url %[2]s --key %[1]s/operator.jwk.json \
      --mandate %[1]s/memory-mandate.jws --root $(grep -o 'mem_[0-9A-Z]*' fact.json | head -1) \
      --rationale "Ada asked to be forgotten"

This deployment's signed disclosure (Agent Disclosure Protocol), no credential:

  curl -s %[2]s/.well-known/agent-disclosure

Read the record and verify it with only the public key:

  curl -s -H "Authorization: Bearer $(cat %[1]s/agent-credential.txt)" '%[2]s/audit?limit=5'
  go run ./cmd/countersign audit verify --url %[2]s --key %[1]s/record.pub \
      --credential %[1]s/agent-credential.txt --signatures
`, dir, baseURL, sandboxOperatorKID)
}
