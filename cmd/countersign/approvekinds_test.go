package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle/fake"
)

// TestApproveEveryHeldKind holds one of every kind of thing the server
// can hold for a person — a payment, a purchase over each protocol, a
// hold, a meter, an obligation, a custody deposit and withdrawal, an
// insurance premium — and approves each over HTTP. Every approval must
// answer 200 with a body that the served contract declares for
// operator.approve (a Receipt, or a hold's authorization), and the held
// thing must have moved on (settled, or placed).
func TestApproveEveryHeldKind(t *testing.T) {
	ss := startSandbox(t)
	base, sandbox, agentKey, opKey, signer, bearer := ss.base, ss.dir, ss.agentKey, ss.opKey, ss.signer, ss.bearer
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))

	// A mandate of the test's own, from the sandbox operator: everything
	// above 1.00 waits for a person, so that even an insurance premium
	// (3 % of a limit) is held.
	now := time.Now().UTC().Truncate(time.Second)
	mandate, err := pay.SignMandate(pay.MandateClaims{
		ID: "mdt_approve_kinds", Agent: agent, IssuedAt: now.Add(-time.Minute), ExpiresAt: now.Add(time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
		Rails:             []string{fake.SandboxCard, "acp", "ucp"},
		ConfirmAboveMinor: 101, IrreversibleConfirmAboveMinor: 101,
	}, opKey.Signer, opKey.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	mandateFile := filepath.Join(t.TempDir(), "mandate.jws")
	if err := os.WriteFile(mandateFile, []byte(mandate+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// The contract's declared answer of operator.approve, 200.
	_, doc := get(t, base+"/openapi.json")
	approved := compileResponse(t, doc, base, "/operator/approve", "post", "200")

	seq := 0
	spend := func(method, payee string, minor int64) pay.Instruction {
		seq++
		in := pay.Instruction{IdempotencyKey: fmt.Sprintf("approve-kinds-%d", seq), Payee: payee,
			Amount: pay.Amount{Minor: minor, Currency: "USD"}, Purpose: "approval of every held kind",
			Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Agent: agent, Mandate: mandate}}
		var err error
		if method == "" {
			err = pay.SignInstruction(&in, agentKey)
		} else {
			err = protocol.SignSpend(method, &in, agentKey)
		}
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	post := func(path, opID string, body any, signed bool) (int, []byte) {
		t.Helper()
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
		if signed {
			if err := signer.Sign(req, opID, raw); err != nil {
				t.Fatal(err)
			}
		} else {
			req.Header.Set("Authorization", bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	// held is what every 202 carries, wherever the protocol nests it.
	type held struct {
		IntentID  string    `json:"intentId"`
		Challenge string    `json:"challenge"`
		MandateID string    `json:"mandateId"`
		Approval  *pay.Held `json:"approval"`
	}
	hold := func(t *testing.T, status int, body []byte) pay.Held {
		t.Helper()
		if status != http.StatusAccepted {
			t.Fatalf("want 202 held, got %d %s", status, body)
		}
		var h held
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatal(err)
		}
		if h.Approval != nil {
			return *h.Approval
		}
		return pay.Held{IntentID: h.IntentID, Challenge: h.Challenge, MandateID: h.MandateID}
	}
	buy := func(t *testing.T, merchant, rail string) (int, []byte) {
		r := cli(t, "buy", "--url", base, "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
			"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", mandateFile,
			"--merchant", merchant, "--rail", rail, "--line", "sku-mug")
		body, _ := json.Marshal(r.body)
		return r.status, body
	}
	// heldItem reads the held list as an operator does and returns the
	// item of intent id, checking the page against the contract.
	heldPage := compileResponse(t, doc, base, "/operator/approvals", "get", "200")
	heldItem := func(t *testing.T, id string) pay.HeldIntent {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+"/operator/approvals?limit=100", nil)
		if err := signer.Sign(req, "operator.approvals", nil); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("held list: %d %v %s", resp.StatusCode, err, b)
		}
		if err := heldPage.Validate(v); err != nil {
			t.Errorf("the held list is not what the contract declares: %v\n%s", err, b)
		}
		var page pay.HeldPage
		_ = json.Unmarshal(b, &page)
		for _, h := range page.Data {
			if h.IntentID == id {
				return h
			}
		}
		t.Fatalf("%s is not in the held list: %s", id, b)
		return pay.HeldIntent{}
	}
	var obligation string
	kinds := []struct {
		name string
		kind string // the held list's context.kind
		make func(t *testing.T) (int, []byte)
	}{
		{name: "payment", kind: "payment", make: func(t *testing.T) (int, []byte) {
			return post("/pay", "", spend("", "acct:seller.example", 2_000), false)
		}},
		{name: "purchase over ACP", kind: "purchase", make: func(t *testing.T) (int, []byte) { return buy(t, "sandbox-acp", "acp") }},
		{name: "purchase over UCP", kind: "purchase", make: func(t *testing.T) (int, []byte) { return buy(t, "sandbox-ucp", "ucp") }},
		{name: "hold", kind: "hold", make: func(t *testing.T) (int, []byte) {
			return post("/protocol/hold/place", "", protocol.HoldPlaceRequest{
				Spend: spend("hold.place", "acct:hotel.example", 3_000), TTLSeconds: 3600}, false)
		}},
		{name: "meter", kind: "meter", make: func(t *testing.T) (int, []byte) {
			return post("/protocol/meter/open", "", protocol.MeterOpenRequest{
				Spend: spend("meter.open", "acct:api.example", 1_500), UnitPriceMinor: 5, TTLSeconds: 3600}, false)
		}},
		{name: "obligation", kind: "obligation", make: func(t *testing.T) (int, []byte) {
			status, body := post("/protocol/obligation/create", "", protocol.ObligationCreateRequest{
				Spend: spend("obligation.create", "acct:seller.example", 5_000), EvidenceFloor: protocol.ClassSelf,
				Deadline: now.Add(time.Hour)}, false)
			var o struct{ ObligationID string }
			_ = json.Unmarshal(body, &o)
			obligation = o.ObligationID
			return status, body
		}},
		{name: "insurance premium", kind: "insurance", make: func(t *testing.T) (int, []byte) {
			// The approved obligation clears on the buyer's own word; then
			// its insurance premium (3 % of 5,000) is held.
			st, b := post("/protocol/evidence/submit", "", protocol.EvidenceSubmitRequest{Subject: obligation, Class: protocol.ClassSelf,
				Statement: json.RawMessage(`{"subject":"` + obligation + `","delivered":"all of it"}`)}, false)
			if st != http.StatusOK {
				t.Fatalf("evidence: %d %s", st, b)
			}
			return post("/protocol/insurance/bind", "", protocol.InsuranceBindRequest{Subject: obligation, LimitMinor: 5_000,
				Spend: spend("insurance.bind", protocol.DefaultInsurancePayee, 150)}, false)
		}},
		{name: "custody deposit", kind: "deposit", make: func(t *testing.T) (int, []byte) {
			return post("/protocol/custody/deposit", "", protocol.CustodySpendRequest{
				Spend: spend("custody.deposit", protocol.DefaultCustodyPayee, 4_000)}, false)
		}},
		{name: "custody withdrawal", kind: "withdrawal", make: func(t *testing.T) (int, []byte) {
			return post("/protocol/custody/withdraw", "", protocol.CustodySpendRequest{
				Spend: spend("custody.withdraw", "acct:dest.example", 1_000)}, false)
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			status, body := k.make(t)
			h := hold(t, status, body)
			if h.IntentID == "" || h.Challenge == "" || h.MandateID == "" {
				t.Fatalf("held without intent, challenge or mandate: %+v", h)
			}
			// The operator's list says what it is and, for a purchase,
			// what is in the cart.
			c := heldItem(t, h.IntentID).Context
			if c.Kind != k.kind || c.Budget == nil || c.PerPaymentCap == nil || c.SecondsLeft <= 0 {
				t.Errorf("held context: kind %q (want %q), budget %+v, cap %+v, %d s left", c.Kind, k.kind, c.Budget, c.PerPaymentCap, c.SecondsLeft)
			}
			if wantCart := k.kind == "purchase"; (c.Cart != nil) != wantCart ||
				(wantCart && (len(c.Cart.Lines) != 1 || c.Cart.Lines[0].SKU != "sku-mug" || c.Cart.Lines[0].Quantity != 1 || c.Cart.Total.Minor == 0)) {
				t.Errorf("held context cart: %+v", c.Cart)
			}
			status, body = post("/operator/approve", "operator.approve", pay.ApproveRequest{IntentID: h.IntentID,
				Challenge: h.Challenge, MandateID: h.MandateID, Acknowledged: true,
				Rationale: "approving every held kind, one by one"}, true)
			if status != http.StatusOK {
				t.Fatalf("approve: %d %s", status, body)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if err := approved.Validate(v); err != nil {
				t.Errorf("approve's answer is not what the contract declares: %v\n%s", err, body)
			}
			var answer map[string]any
			_ = json.Unmarshal(body, &answer)
			if answer["intentId"] != h.IntentID {
				t.Errorf("approve answered for %v, want %s", answer["intentId"], h.IntentID)
			}
			// The intent moved on: settled, or (a hold or meter) authorized.
			_, ib := get(t, base+"/intents/"+h.IntentID, "Authorization", bearer)
			var in struct{ Status string }
			_ = json.Unmarshal(ib, &in)
			if in.Status != string(pay.StatusSettled) && in.Status != string(pay.StatusAuthorized) {
				t.Errorf("after approval the intent is %q, want settled or authorized", in.Status)
			}
			// A second approval is refused as not pending, not a 500.
			status, body = post("/operator/approve", "operator.approve", pay.ApproveRequest{IntentID: h.IntentID,
				Challenge: h.Challenge, MandateID: h.MandateID, Acknowledged: true,
				Rationale: "approving every held kind, once more"}, true)
			if status >= 500 || status == http.StatusOK {
				t.Errorf("second approval: %d %s", status, body)
			}
		})
	}
}

// compileResponse compiles the schema the served OpenAPI document declares
// for one operation's response status (application/json).
func compileResponse(t *testing.T, doc []byte, base, path, method, status string) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	u := base + "/openapi.json"
	if err := c.AddResource(u, v); err != nil {
		t.Fatal(err)
	}
	esc := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }
	sch, err := c.Compile(u + "#/paths/" + esc(path) + "/" + method + "/responses/" + status + "/content/" + esc("application/json") + "/schema")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}
