package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/commerce/fakemerchant"
)

// TestOperatorMerchantAddReadyWithoutErrors registers, from the CLI, a
// UCP merchant whose sessions never report ready_for_complete (shaped like
// the public sample: 2026-01-11, a credential handler), once strict and
// once with --ready-without-errors, and buys from both: the strict one is
// refused (intent.malformed, cartStatus incomplete), the other sells; a
// session with an error message is refused either way. The flag is
// refused for an ACP merchant.
func TestOperatorMerchantAddReadyWithoutErrors(t *testing.T) {
	ss := startSandbox(t)
	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String(),
		UCPPayment: fakemerchant.UCPPaymentCredential})
	srv.Config.Handler = fm.UCPHandler(fakemerchant.UCP20260111)
	srv.Start()
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "wallet.token")
	if err := os.WriteFile(tokenFile, []byte(fakemerchant.UCPWalletToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	add := func(id string, extra ...string) cliResult {
		return cli(t, append([]string{"operator", "merchant", "add", "--url", ss.base,
			"--key", filepath.Join(ss.dir, sandboxOperatorKey), "--rationale", "a merchant that never says ready",
			"--id", id}, extra...)...)
	}
	ucpArgs := []string{"--protocol", "ucp", "--profile-url", srv.URL + "/.well-known/ucp", "--payment-credential", fakemerchant.UCPWalletID + "=" + tokenFile}
	if r := add("strict-shop", ucpArgs...); r.status != 201 || r.body["readyWithoutErrors"] != nil {
		t.Fatalf("merchant add: %s", r.out)
	}
	if r := add("sample-shop", append(ucpArgs, "--ready-without-errors")...); r.status != 201 || r.body["readyWithoutErrors"] != true {
		t.Fatalf("merchant add --ready-without-errors: %s", r.out)
	}
	if r := add("acp-shop", "--protocol", "acp", "--merchant-url", "https://acp.example", "--ready-without-errors"); r.status != 400 ||
		r.str("code") != "commerce.invalid_merchant" || !strings.Contains(r.str("detail"), "readyWithoutErrors") {
		t.Fatalf("--ready-without-errors for an ACP merchant: %s", r.out)
	}

	for i, tc := range []struct {
		merchant, line string
		status         int // 200: an Order; 400: intent.malformed, cart incomplete
	}{
		{"strict-shop", "sku-never-ready:2", 400},
		{"sample-shop", "sku-never-ready:2", 200},
		{"sample-shop", "sku-needs-phone", 400},
		{"sample-shop", "sku-soldout", 400},
	} {
		t.Run(tc.merchant+" "+tc.line, func(t *testing.T) {
			r := cli(t, "buy", "--url", ss.base, "--agent-key", filepath.Join(ss.dir, sandboxAgentKey),
				"--credential", filepath.Join(ss.dir, sandboxCredential), "--mandate", filepath.Join(ss.dir, sandboxMandate),
				"--merchant", tc.merchant, "--rail", "ucp", "--line", tc.line, "--idempotency-key", "ready-"+string(rune('a'+i)))
			switch tc.status {
			case 200:
				receipt, _ := r.body["receipt"].(map[string]any)
				if r.status != 200 || r.str("id") == "" || r.str("status") != "completed" || receipt == nil {
					t.Fatalf("buy: %s", r.out)
				}
			default:
				if r.status != tc.status || r.str("code") != "intent.malformed" || r.str("cartStatus") != "incomplete" || r.str("merchantStatus") != "incomplete" {
					t.Fatalf("buy: %s", r.out)
				}
			}
		})
	}
	_, body := get(t, ss.base+"/commerce/merchants", "Authorization", ss.bearer)
	if strings.Count(string(body), `"readyWithoutErrors":true`) != 1 {
		t.Errorf("the listing does not show the one merchant with readyWithoutErrors: %s", body)
	}
}

// TestMerchantsFileReadyWithoutErrors: --merchants accepts
// readyWithoutErrors for a UCP merchant and hands it to the client, and
// refuses it for an ACP one.
func TestMerchantsFileReadyWithoutErrors(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: "http://" + srv.Listener.Addr().String()})
	srv.Config.Handler = fm.UCPHandler()
	srv.Start()
	defer srv.Close()
	for _, tc := range []struct {
		name, entries string
		ok, ready     bool
	}{
		{"ucp", `[{"id":"shop","protocol":"ucp","profileUrl":"` + srv.URL + `/.well-known/ucp","readyWithoutErrors":true}]`, true, true},
		{"ucp, default", `[{"id":"shop","protocol":"ucp","profileUrl":"` + srv.URL + `/.well-known/ucp"}]`, true, false},
		{"acp", `[{"id":"a","protocol":"acp","baseUrl":"https://acp.example","readyWithoutErrors":true}]`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "merchants.json")
			if err := os.WriteFile(p, []byte(tc.entries), 0o644); err != nil {
				t.Fatal(err)
			}
			ms, err := openMerchants(t.Context(), p, srv.Client(), sandboxURLs)
			if !tc.ok {
				if err == nil || !strings.Contains(err.Error(), "readyWithoutErrors") {
					t.Fatalf("openMerchants: %v, want a refusal naming readyWithoutErrors", err)
				}
				return
			}
			if err != nil || len(ms) != 1 {
				t.Fatalf("openMerchants: %v", err)
			}
			if r, ok := ms[0].Merchant.(interface{ ReadyWithoutErrors() bool }); !ok || r.ReadyWithoutErrors() != tc.ready {
				t.Fatalf("the client's ReadyWithoutErrors is not %v: %T", tc.ready, ms[0].Merchant)
			}
		})
	}
}

// TestOperatorApproveDecline approves and declines held payments from the
// CLI the way a person working from the held list does: by intent id
// alone, the CLI reading the mandate from the held list, and with the
// challenge of the 202 answer when the person has it.
func TestOperatorApproveDecline(t *testing.T) {
	ss := startSandbox(t)
	hold := func() cliResult {
		t.Helper()
		r := cli(t, "pay", "--url", ss.base, "--agent-key", filepath.Join(ss.dir, sandboxAgentKey),
			"--credential", filepath.Join(ss.dir, sandboxCredential), "--mandate", filepath.Join(ss.dir, sandboxMandate),
			"--payee", "acct:seller.example", "--amount", "25000", "--rail", "sandbox-card")
		if r.status != 202 || r.str("intentId") == "" {
			t.Fatalf("pay: %s", r.out)
		}
		return r
	}
	op := func(args ...string) cliResult {
		return cli(t, append([]string{"operator", args[0], "--url", ss.base, "--key", filepath.Join(ss.dir, sandboxOperatorKey)}, args[1:]...)...)
	}
	const why = "the payee is not one of our vendors"

	declined := hold()
	id := declined.str("intentId")
	// The held list, as a person reads it: a line per payment, then the
	// page.
	if r := op("approvals"); r.code != 0 || r.status != 200 ||
		!strings.Contains(r.out, id+"  25000 USD to acct:seller.example  first-time payee  velocity 1h ") ||
		!strings.Contains(r.out, "approvals 0/1  ") {
		t.Fatalf("operator approvals: %s", r.out)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int    // 0: refused before any request
		want   string // in the output
	}{
		{"no intent", []string{"decline", "--rationale", why}, 0, "--intent is required"},
		{"short rationale", []string{"decline", "--intent", id, "--rationale", "no"}, 400, "operator.rationale_too_short"},
		{"another mandate", []string{"decline", "--intent", id, "--mandate-id", "mdt_other", "--rationale", why}, 409, "approval.mismatch"},
		{"another payment's challenge", []string{"decline", "--intent", id, "--challenge", hold().str("challenge"), "--rationale", why}, 409, "approval.mismatch"},
		{"not held", []string{"decline", "--intent", "int_01JABCDEFGHJKMNPQRSTVWXYZ0", "--rationale", why}, 0, "not in the held list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := op(tc.args...)
			if r.code == 0 || r.status != tc.status || !strings.Contains(r.out, tc.want) {
				t.Fatalf("exit %d, HTTP %d, want a failure with HTTP %d naming %q:\n%s", r.code, r.status, tc.status, tc.want, r.out)
			}
		})
	}

	first := op("decline", "--intent", id, "--rationale", why)
	if first.code != 0 || first.status != 200 || first.str("status") != "declined" || first.str("mandateId") != declined.str("mandateId") ||
		!strings.Contains(first.out, "held under mandate "+declined.str("mandateId")) {
		t.Fatalf("decline by intent id alone: %s", first.out)
	}
	// Repeated with the mandate given (no lookup: it is no longer held),
	// it answers the first decline.
	again := op("decline", "--intent", id, "--mandate-id", declined.str("mandateId"), "--rationale", why)
	if again.status != 200 || again.str("declinedAt") != first.str("declinedAt") || again.str("declinedBy") != first.str("declinedBy") {
		t.Fatalf("second decline: %s", again.out)
	}
	if r := op("approve", "--intent", id, "--mandate-id", declined.str("mandateId"), "--rationale", why, "--acknowledge"); r.status != 409 ||
		r.str("code") != "approval.not_pending" {
		t.Fatalf("approval of a declined payment: %s", r.out)
	}

	approved := hold()
	if r := op("approve", "--intent", approved.str("intentId"), "--rationale", "invoice checked with finance"); r.status != 202 {
		t.Fatalf("approval without --acknowledge: %s", r.out)
	}
	if r := op("approve", "--intent", approved.str("intentId"), "--rationale", "invoice checked with finance", "--acknowledge"); r.status != 200 ||
		r.str("intentId") != approved.str("intentId") || r.str("reference") == "" {
		t.Fatalf("approval by intent id alone: %s", r.out)
	}
	// With the challenge of the 202 answer, as before.
	withChallenge := hold()
	if r := op("approve", "--intent", withChallenge.str("intentId"), "--challenge", withChallenge.str("challenge"),
		"--mandate-id", withChallenge.str("mandateId"), "--rationale", "invoice checked with finance", "--ack"); r.status != 200 {
		t.Fatalf("approval with the challenge: %s", r.out)
	}
}

// TestOperatorCounterpartyAdd: the README's registration, without --kind
// or --name, is accepted (the server's defaults apply), and --kind is
// sent when given.
func TestOperatorCounterpartyAdd(t *testing.T) {
	ss := startSandbox(t)
	add := func(id, agent string, extra ...string) cliResult {
		return cli(t, append([]string{"operator", "counterparty", "add", "--url", ss.base,
			"--key", filepath.Join(ss.dir, sandboxOperatorKey), "--rationale", "second deployment for the demo",
			"--id", id, "--counterparty-url", "http://127.0.0.1:8081", "--agent", strings.Repeat(agent, 32)}, extra...)...)
	}
	for _, tc := range []struct {
		id, agent string
		args      []string
		kind      string
	}{{"other", "ab", nil, "agent"}, {"shop", "cd", []string{"--kind", "merchant", "--name", "A shop"}, "merchant"}} {
		if r := add(tc.id, tc.agent, tc.args...); r.status != 201 || r.str("kind") != tc.kind {
			t.Errorf("counterparty add %s: %s", tc.id, r.out)
		}
	}
	if r := add("bad", "ef", "--kind", "robot"); r.status != 400 || r.str("code") != "request.validation" {
		t.Errorf("counterparty add --kind robot: %s", r.out)
	}
}
