package mcpserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
)

// TestNoOperatorTool walks the contract: no operation an operator
// signature opens alone is a tool, every operation an agent credential
// opens is one unless it streams, and every exclusion says why.
func TestNoOperatorTool(t *testing.T) {
	m := product.Model()
	tools, excluded, err := GenerateTools(m)
	if err != nil {
		t.Fatal(err)
	}
	byOp := map[string]ToolSpec{}
	for _, tl := range tools {
		byOp[tl.Operation.ID] = tl
	}
	why := map[string]string{}
	for _, e := range excluded {
		why[e.Operation] = e.Reason
	}
	for _, op := range m.Operations() {
		_, isTool := byOp[op.ID]
		switch {
		case op.Credential == contract.CredentialOperator:
			if isTool {
				t.Errorf("operator operation %s is a tool", op.ID)
			}
		case !op.Credential.AcceptsAgent():
			if isTool {
				t.Errorf("credential-less operation %s is a tool", op.ID)
			}
		case streams(op):
			if isTool {
				t.Errorf("stream %s is a tool", op.ID)
			}
		default:
			if !isTool {
				t.Errorf("agent operation %s is no tool (%s)", op.ID, why[op.ID])
			}
		}
		if !isTool && why[op.ID] == "" {
			t.Errorf("operation %s is left out without a reason", op.ID)
		}
	}
	for _, want := range []string{"pay_create", "commerce_quote", "commerce_buy", "identity_resolve", "identity_verify",
		"identity_disclose", "memory_remember", "memory_recall", "memory_assemble", "intents_get", "intents_events",
		"audit_list", "audit_checkpoint", "usage_get", "hold_place", "session_open", "proof_get"} {
		if !slices.ContainsFunc(tools, func(tl ToolSpec) bool { return tl.Name == want }) {
			t.Errorf("no tool %s", want)
		}
	}
	for _, no := range []string{"operator.approve", "operator.refund", "memory.forget", "dispute.resolve", "audit.stream", "openapi.get"} {
		if _, ok := byOp[no]; ok {
			t.Errorf("%s is a tool", no)
		}
	}
}

// TestToolSchemas compiles every input schema as JSON Schema 2020-12 with
// an independent validator, and checks what the tools fill is optional.
func TestToolSchemas(t *testing.T) {
	tools, _, err := GenerateTools(product.Model())
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		b, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if tl.InputSchema["type"] != "object" {
			t.Errorf("%s: input schema is not an object", tl.Name)
		}
		if bytes.Contains(b, []byte("#/components/")) {
			t.Errorf("%s: a reference outside the schema", tl.Name)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource("tool.json", doc); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Compile("tool.json"); err != nil {
			t.Errorf("%s: %v", tl.Name, err)
		}
		if !strings.Contains(tl.Description, tl.Operation.ID) {
			t.Errorf("%s: description does not name its operation", tl.Name)
		}
	}
}

// TestToolInputs: what the agent must give and what the tool fills, per
// kind of tool.
func TestToolInputs(t *testing.T) {
	tools, _, err := GenerateTools(product.Model())
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) ToolSpec {
		i := slices.IndexFunc(tools, func(tl ToolSpec) bool { return tl.Name == name })
		if i < 0 {
			t.Fatalf("no tool %s", name)
		}
		return tools[i]
	}
	for _, tc := range []struct {
		tool        string
		required    []string
		absent      []string // members the agent never gives
		signing     signing
		idempotent  bool
		mandateKind mandateKind
	}{
		{"pay_create", []string{"amount", "payee"}, []string{"envelope"}, signPayment, true, mandateNone},
		{"commerce_buy", []string{"currency", "lines", "merchant", "rail"}, []string{"envelope"}, signPurchase, true, mandateNone},
		{"commerce_quote", []string{"currency", "lines", "merchant", "rail"}, nil, signNone, false, mandateNone},
		{"x402_fetch", []string{"maxAmount", "method", "url"}, []string{"envelope"}, signFetch, true, mandateNone},
		{"hold_place", []string{"spend", "ttlSeconds"}, nil, signSpend, true, mandateNone},
		{"memory_remember", []string{"body", "kind", "namespace", "subject", "validFrom"}, nil, signNone, true, mandateMemory},
		{"memory_recall", []string{"namespace"}, nil, signNone, false, mandateMemory},
		{"session_open", []string{"budgetMinor", "ttlSeconds"}, nil, signNone, false, mandatePayment},
		{"intents_get", []string{"id"}, nil, signNone, false, mandateNone},
		{"usage_get", []string{"since", "until"}, nil, signNone, false, mandateNone},
	} {
		tl := get(tc.tool)
		var req []string
		for _, r := range asSlice(tl.InputSchema["required"]) {
			req = append(req, r.(string))
		}
		slices.Sort(req)
		if !slices.Equal(req, tc.required) {
			t.Errorf("%s: required %v, want %v", tc.tool, req, tc.required)
		}
		props, _ := tl.InputSchema["properties"].(map[string]any)
		for _, a := range tc.absent {
			if _, ok := props[a]; ok {
				t.Errorf("%s: the agent may give %s", tc.tool, a)
			}
		}
		if tl.signing != tc.signing || tl.idempotent != tc.idempotent || tl.mandate != tc.mandateKind {
			t.Errorf("%s: signing %d idempotent %v mandate %d", tc.tool, tl.signing, tl.idempotent, tl.mandate)
		}
	}
	// A spend's instruction has no envelope in the tool's schema.
	defs, _ := get("hold_place").InputSchema["$defs"].(map[string]any)
	ins, _ := defs["Instruction"].(map[string]any)
	if p, _ := ins["properties"].(map[string]any); p["envelope"] != nil || slices.Contains(asSlice(ins["required"]), any("envelope")) {
		t.Errorf("hold_place: the spend asks for an envelope: %v", ins)
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

func TestIdempotencyKey(t *testing.T) {
	k := func(session, tool, args string) string {
		t.Helper()
		key, err := IdempotencyKey(session, tool, json.RawMessage(args))
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	base := k("s1", "pay_create", `{"payee":"acct:a","amount":{"minor":100,"currency":"USD"}}`)
	for _, tc := range []struct {
		name, session, tool, args string
		same                      bool
	}{
		{"member order and spacing do not matter", "s1", "pay_create", `{ "amount":{"currency":"USD","minor":100}, "payee":"acct:a" }`, true},
		{"another amount", "s1", "pay_create", `{"payee":"acct:a","amount":{"minor":101,"currency":"USD"}}`, false},
		{"another session", "s2", "pay_create", `{"payee":"acct:a","amount":{"minor":100,"currency":"USD"}}`, false},
		{"another tool", "s1", "hold_place", `{"payee":"acct:a","amount":{"minor":100,"currency":"USD"}}`, false},
	} {
		if got := k(tc.session, tc.tool, tc.args); (got == base) != tc.same {
			t.Errorf("%s: key %s vs %s", tc.name, got, base)
		}
	}
	if !strings.HasPrefix(base, "mcp-") || len(base) != 44 {
		t.Errorf("key %q", base)
	}
}
