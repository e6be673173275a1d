package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// cliResult is what one CLI command printed: exit code, the HTTP status on
// its first line and the JSON answer after it.
type cliResult struct {
	code   int
	status int
	body   map[string]any
	out    string
}

func cli(t *testing.T, args ...string) cliResult {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	r := cliResult{code: code, out: out.String() + errOut.String()}
	first, rest, _ := strings.Cut(out.String(), "\n")
	if f := strings.Fields(first); len(f) > 0 {
		r.status, _ = strconv.Atoi(f[0])
	}
	_ = json.Unmarshal([]byte(rest), &r.body)
	return r
}

func (r cliResult) str(key string) string { s, _ := r.body[key].(string); return s }

// TestOperatorEndToEnd drives the operator's authority over HTTP with the
// CLI as the client, as a person would: approvals (one and two operators),
// the kill switch, the circuit breaker, refunds and mandate revocation.
func TestOperatorEndToEnd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	sandbox := filepath.Join(dir, "sandbox")

	// First start provisions the sandbox; then a second operator (P-256)
	// joins the trusted key set.
	_, stop := startServe(t, dir)
	stop()
	bobKey := filepath.Join(t.TempDir(), "bob.jwk.json")
	kg := cli(t, "keygen", "operator", "--kid", "op-bob", "--alg", "ES256", "--out", bobKey)
	if kg.code != 0 {
		t.Fatal(kg.out)
	}
	bobPub := kg.out[strings.Index(kg.out, "{"):]
	setBytes, err := os.ReadFile(filepath.Join(sandbox, sandboxOperatorSet))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(setBytes, &set); err != nil {
		t.Fatal(err)
	}
	set.Keys = append(set.Keys, json.RawMessage(strings.TrimSpace(bobPub)))
	both, _ := json.Marshal(set)
	keysFile := filepath.Join(t.TempDir(), "operators.jwks.json")
	if err := os.WriteFile(keysFile, both, 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, dir, "--operator-keys", keysFile, "--breaker-after", "3", "--sandbox-latency", "off")
	defer stop()

	alice := filepath.Join(sandbox, sandboxOperatorKey)
	payArgs := func(mandate, payee, amount, rail string) []string {
		return []string{"pay", "--url", base, "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
			"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", mandate,
			"--payee", payee, "--amount", amount, "--rail", rail}
	}
	mandate := filepath.Join(sandbox, sandboxMandate)
	op := func(key string, args ...string) cliResult {
		return cli(t, append([]string{"operator", args[0], "--url", base, "--key", key}, args[1:]...)...)
	}
	approve := func(key string, held cliResult, ack bool) cliResult {
		args := []string{"approve", "--intent", held.str("intentId"), "--challenge", held.str("challenge"),
			"--mandate-id", held.str("mandateId"), "--rationale", "checked the invoice with the vendor"}
		if ack {
			args = append(args, "--ack")
		}
		return op(key, args...)
	}
	want := func(r cliResult, status int, what string) {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: HTTP %d, want %d\n%s", what, r.status, status, r.out)
		}
	}

	// Above the confirm threshold: held, then approved by one operator.
	held := cli(t, payArgs(mandate, "acct:seller.example", "25000", "sandbox-card")...)
	want(held, 202, "large payment")
	want(approve(alice, held, false), 202, "approval without acknowledgement")
	rcpt := approve(alice, held, true)
	want(rcpt, 200, "acknowledged approval")
	if rcpt.str("intentId") != held.str("intentId") || rcpt.str("reference") == "" {
		t.Fatalf("approval did not return the receipt: %s", rcpt.out)
	}

	// A two-approval mandate needs two distinct operators.
	agentID := readAgentID(t, sandbox)
	m2 := filepath.Join(t.TempDir(), "m2.jws")
	if r := cli(t, "operator", "mandate", "--key", alice, "--agent", agentID, "--approvals", "2", "--id", "mdt_two", "--out", m2); r.code != 0 {
		t.Fatal(r.out)
	}
	held2 := cli(t, payArgs(m2, "acct:seller.example", "20000", "sandbox-card")...)
	want(held2, 202, "two-approval payment")
	for i := range 2 {
		r := approve(alice, held2, true)
		want(r, 202, "alice's approval")
		if n, _ := r.body["approvalsReceived"].(float64); n != 1 {
			t.Fatalf("alice approval %d counted %v times", i, r.body["approvalsReceived"])
		}
	}
	want(approve(bobKey, held2, true), 200, "bob's approval completes it")

	// The kill switch blocks settlement and approvals; release restores.
	want(op(alice, "kill-switch", "--engage", "--rationale", "incident 42: rail compromised"), 200, "engage")
	frozen := cli(t, payArgs(mandate, "acct:seller.example", "100", "sandbox-card")...)
	want(frozen, 503, "payment while frozen")
	if frozen.str("code") != "settlement.frozen" {
		t.Fatalf("frozen payment: %s", frozen.out)
	}
	held3 := cli(t, payArgs(mandate, "acct:seller.example", "30000", "sandbox-card")...)
	want(held3, 503, "held payment while frozen")
	want(op(alice, "kill-switch", "--release", "--rationale", "incident 42 resolved"), 200, "release")
	want(cli(t, payArgs(mandate, "acct:seller.example", "100", "sandbox-card")...), 200, "payment after release")
	held3 = cli(t, payArgs(mandate, "acct:seller.example", "30000", "sandbox-card")...)
	want(held3, 202, "held payment after release")
	want(op(alice, "kill-switch", "--engage", "--rationale", "second freeze for approvals"), 200, "engage again")
	want(approve(alice, held3, true), 503, "approval while frozen")
	want(op(alice, "kill-switch", "--release", "--rationale", "second freeze lifted"), 200, "release again")
	want(approve(alice, held3, true), 200, "approval after release")

	// The breaker trips after 3 failures, holds what would settle, reset
	// restores.
	for i := range 3 {
		want(cli(t, payArgs(mandate, "acct:decline.sandbox", "100", "sandbox-card")...), 402, "declined payment "+strconv.Itoa(i))
	}
	tripped := cli(t, payArgs(mandate, "acct:seller.example", "100", "sandbox-card")...)
	want(tripped, 202, "small payment under an open breaker")
	want(op(alice, "reset-breaker", "--rationale", "decline storm explained"), 200, "reset")
	want(op(alice, "reset-breaker", "--rationale", "decline storm explained"), 409, "second reset")
	want(cli(t, payArgs(mandate, "acct:seller.example", "100", "sandbox-card")...), 200, "payment after reset")

	// Partial, then full refund; an irreversible payment cannot be refunded.
	paid := cli(t, payArgs(mandate, "acct:seller.example", "5000", "sandbox-card")...)
	want(paid, 200, "payment to refund")
	r1 := op(alice, "refund", "--intent", paid.str("intentId"), "--amount", "2000", "--rationale", "customer returned one item")
	want(r1, 200, "partial refund")
	if r1.str("status") != "partially_refunded" {
		t.Fatalf("partial refund: %s", r1.out)
	}
	r2 := op(alice, "refund", "--intent", paid.str("intentId"), "--rationale", "customer returned everything")
	want(r2, 200, "full refund")
	if r2.str("status") != "refunded" {
		t.Fatalf("full refund: %s", r2.out)
	}
	want(op(alice, "refund", "--intent", paid.str("intentId"), "--rationale", "one more time, please"), 409, "refund of a refunded payment")
	chain := cli(t, payArgs(mandate, "acct:seller.example", "5000", "sandbox-chain")...)
	want(chain, 200, "irreversible payment")
	want(op(alice, "refund", "--intent", chain.str("intentId"), "--rationale", "try to pull back chain funds"), 409, "irreversible refund")

	// A revoked mandate is refused.
	want(op(alice, "revoke-mandate", "--mandate-id", "mdt_two", "--rationale", "agent compromised, rotating"), 200, "revoke")
	revoked := cli(t, payArgs(m2, "acct:seller.example", "100", "sandbox-card")...)
	want(revoked, 403, "payment under a revoked mandate")
	if revoked.str("code") != "intent.unauthorized" || revoked.str("reason") != "mandate_revoked" {
		t.Fatalf("revoked mandate: %s", revoked.out)
	}

	// Rationale too short, and an agent credential never opens these routes.
	want(op(alice, "kill-switch", "--engage", "--rationale", "short"), 400, "short rationale")
	if r := op(filepath.Join(sandbox, sandboxAgentKey), "approvals"); r.status != 401 {
		t.Fatalf("an agent's key as an operator key: %s", r.out)
	}
	if r := cli(t, "audit", "verify", "--url", base, "--key", filepath.Join(sandbox, recordPubFile),
		"--credential", filepath.Join(sandbox, sandboxCredential), "--signatures"); r.code != 0 {
		t.Fatalf("record does not verify: %s", r.out)
	}
}

func readAgentID(t *testing.T, sandbox string) string {
	t.Helper()
	c, err := loadSandboxClient(sandbox)
	if err != nil {
		t.Fatal(err)
	}
	return c.agent
}
