package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

// proofFixture pays once in an in-memory deployment and returns the proof
// of enforcement of the payment as proof.get answers it, and the record's
// verifier key as record.pub holds it.
func proofFixture(t *testing.T) (proof []byte, verifierKey string) {
	t.Helper()
	ctx := t.Context()
	now := func() time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }
	st := memstore.New(nil)
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	log, err := audit.Open(ctx, st, recKey, &audit.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	wire, err := fake.New("sandbox-wire", &fake.Options{Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	rails := &settle.Registry{}
	if err := rails.Register(wire); err != nil {
		t.Fatal(err)
	}
	_, opKey, _ := ed25519.GenerateKey(rand.Reader)
	mandates, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-1", Public: opKey.Public()}}, &pay.MandateVerifierOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	var svc *protocol.Service
	p, err := pay.New(pay.Options{Store: st, Log: log, Rails: rails, Mandates: mandates, Now: now, Logger: quiet,
		Extensions: []pay.Extension{protocol.Extension(protocol.Options{Store: st, Log: log, Mandates: mandates, Now: now, Logger: quiet}, &svc)}})
	if err != nil {
		t.Fatal(err)
	}
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agent := hex.EncodeToString(pub)
	mandate, err := pay.SignMandate(pay.MandateClaims{ID: "mdt-cli", Agent: agent, IssuedAt: now().Add(-time.Hour), ExpiresAt: now().Add(24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 5_000, PerPeriodCapMinor: 100_000, Period: gate.Day,
		Rails: []string{"sandbox-wire"}, ConfirmAboveMinor: 5_000, IrreversibleConfirmAboveMinor: 5_000}, opKey, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	in := pay.Instruction{IdempotencyKey: "order-1", Payee: "acct:seller.example", Amount: pay.Amount{Minor: 1_250, Currency: "USD"},
		Purpose: "one GPU hour", Terms: pay.Terms{Rail: "sandbox-wire", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: mandate}}
	if err := pay.SignInstruction(&in, agentKey); err != nil {
		t.Fatal(err)
	}
	caller := pay.Caller{KeyID: "ak_01JCLIAGENTKEY0000000000000", Agents: []string{agent}, Credential: gate.CredentialAPIKey}
	res, err := p.PayInstruction(ctx, caller, &in, "", "req_cli")
	if err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatalf("pay: %+v, %v", res, err)
	}
	got, err := svc.ProofGet(ctx, protocol.AgentCall(caller, "req_cli"), &protocol.ProofGetRequest{IntentID: res.IntentID})
	if err != nil {
		t.Fatal(err)
	}
	if proof, err = json.Marshal(got); err != nil {
		t.Fatal(err)
	}
	return proof, log.VerifierKey()
}

// TestProofVerifyCommand checks proofs offline with record.pub from a data
// directory or a key file, as memory verify does.
func TestProofVerifyCommand(t *testing.T) {
	proof, vkey := proofFixture(t)
	_, otherKey := proofFixture(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := writePublicFile(filepath.Join(data, recordPubFile), []byte(vkey+"\n")); err != nil {
		t.Fatal(err)
	}
	otherPub := filepath.Join(dir, "other.pub")
	if err := writePublicFile(otherPub, []byte(otherKey+"\n")); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("proof.json", append(proof, '\n'))
	tampered := write("tampered.json", bytes.Replace(proof, []byte(`"decision":{"outcome":"allow"`), []byte(`"decision":{"outcome":"deny"`), 1))
	forged := write("forged.json", bytes.Replace(proof, []byte(`"minor":1250`), []byte(`"minor":12500`), 1))
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  []string // what the output must contain
	}{
		{"valid, record.pub of --data", []string{"verify", "--data", data, good}, 0, []string{`"valid": true`, `"outcome": "allow"`}},
		{"valid, file first", []string{"verify", good, "--data", data}, 0, []string{`"valid": true`}},
		{"valid, --key", []string{"verify", "--key", filepath.Join(data, recordPubFile), good}, 0, []string{`"valid": true`}},
		{"tampered decision", []string{"verify", "--data", data, tampered}, 1,
			[]string{`"valid": false`, "the decision differs from the one the record holds", "countersign: the proof does not verify"}},
		{"forged entry", []string{"verify", "--data", data, forged}, 1, []string{`"valid": false`, `"failure": "entry 0 (seq 1)`}},
		{"another record's key", []string{"verify", "--key", otherPub, good}, 1, []string{`"valid": false`, `"failure": "checkpoint:`}},
		{"no record.pub", []string{"verify", "--data", filepath.Join(dir, "nowhere"), good}, 1, []string{"countersign: --key:"}},
		{"no such proof file", []string{"verify", "--data", data, filepath.Join(dir, "missing.json")}, 1, []string{"countersign:"}},
		{"no file", []string{"verify", "--data", data}, 2, []string{"Usage: countersign proof verify"}},
		{"two files", []string{"verify", "--data", data, good, good}, 2, []string{"Usage: countersign proof verify"}},
		{"unknown command", []string{"check", good}, 2, []string{`unknown command "check"`}},
		{"no command", nil, 2, []string{"Usage: countersign proof"}},
		{"help", []string{"-h"}, 0, []string{"verify     [--key FILE | --data DIR] FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"proof"}, tc.args...), &out, &errOut)
			all := out.String() + errOut.String()
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, all)
			}
			for _, want := range tc.out {
				if !strings.Contains(all, want) {
					t.Errorf("output does not contain %q:\n%s", want, all)
				}
			}
		})
	}
	// The usage text lists the command.
	var out bytes.Buffer
	run(context.Background(), []string{"help"}, &out, &out)
	if !strings.Contains(out.String(), "proof verify") {
		t.Errorf("usage does not list proof verify:\n%s", out.String())
	}
}

// TestProofVerifySandbox is the story end to end over HTTP: place and
// capture a hold with the CLI against a sandbox server, fetch its proof
// with proof.get --out, and verify the file offline with the data
// directory's record.pub alone.
func TestProofVerifySandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	base, stop := startServe(t, dir, "--sandbox-latency", "off")
	defer stop()
	sandbox := filepath.Join(dir, "sandbox")
	work := t.TempDir()
	cli := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	agent := []string{"--url", base, "--credential", filepath.Join(sandbox, "agent-credential.txt"),
		"--agent-key", filepath.Join(sandbox, "agent.jwk.json"), "--mandate", filepath.Join(sandbox, "mandate.jws")}
	placed := filepath.Join(work, "placed.json")
	if code, out := cli(append([]string{"protocol", "hold.place", `{"spend":{"payee":"acct:seller.example","amount":{"minor":1250}},"ttlSeconds":3600}`,
		"--out", placed}, agent...)...); code != 0 {
		t.Fatalf("hold.place: exit %d\n%s", code, out)
	}
	var hold struct{ HoldID, IntentID string }
	if err := json.Unmarshal([]byte(readFile(t, placed)), &hold); err != nil || hold.HoldID == "" {
		t.Fatalf("placed: %v %s", err, readFile(t, placed))
	}
	if code, out := cli(append([]string{"protocol", "hold.capture", `{"holdId":"` + hold.HoldID + `","amountMinor":1000,"idempotencyKey":"c1"}`}, agent...)...); code != 0 {
		t.Fatalf("hold.capture: exit %d\n%s", code, out)
	}
	proof := filepath.Join(work, "proof.json")
	if code, out := cli(append([]string{"protocol", "proof.get", `{"intentId":"` + hold.IntentID + `"}`, "--out", proof}, agent...)...); code != 0 {
		t.Fatalf("proof.get: exit %d\n%s", code, out)
	}
	if code, out := cli("proof", "verify", "--data", dir, proof); code != 0 || !strings.Contains(out, `"valid": true`) {
		t.Fatalf("proof verify: exit %d\n%s", code, out)
	}
	// The sandbox's identity service records the policy: the proof ties
	// the decision to the policy hash /disclose publishes.
	var p protocol.EnforcementProof
	if err := json.Unmarshal([]byte(readFile(t, proof)), &p); err != nil {
		t.Fatal(err)
	}
	if p.PolicyEntry == nil || p.PolicyHash == "" || p.Status != pay.StatusSettled {
		t.Errorf("proof: status %s, policy %q entry %v", p.Status, p.PolicyHash, p.PolicyEntry != nil)
	}
	b, _ := os.ReadFile(proof)
	tampered := filepath.Join(work, "tampered.json")
	if err := os.WriteFile(tampered, bytes.Replace(b, []byte(p.PolicyHash), []byte("sha256:forged"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("proof", "verify", "--data", dir, tampered); code == 0 || !strings.Contains(out, "the policy hash is not the one the decision entry recorded") {
		t.Fatalf("a tampered proof verified: exit %d\n%s", code, out)
	}
}
