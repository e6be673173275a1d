package mcpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/mcpserver"
	"github.com/countersign/countersign/product"
)

// GenerateTools walks the contract model: every operation an agent may
// call is a tool; operator actions, documents and streams are not.
func ExampleGenerateTools() {
	tools, excluded, err := mcpserver.GenerateTools(product.Model())
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		if t.Name == "pay_create" {
			fmt.Println(t.Name, "←", t.Operation.ID, t.InputSchema["required"])
		}
	}
	for _, e := range excluded {
		if e.Operation == "operator.approve" || e.Operation == "audit.stream" {
			fmt.Println("no tool:", e.Operation, "—", e.Reason)
		}
	}
	// Output:
	// pay_create ← pay.create [payee amount]
	// no tool: audit.stream — a stream: served as the subscribable resource countersign://intents
	// no tool: operator.approve — operator action: a person's, never an agent's
}

func ExampleToolName() {
	fmt.Println(mcpserver.ToolName("revocation.revoke_identity"), mcpserver.ToolName("commerce.buy"))
	// Output: revocation_revoke_identity commerce_buy
}

// The same call in the same session derives the same key; the order of
// members does not matter.
func ExampleIdempotencyKey() {
	a, _ := mcpserver.IdempotencyKey("session-1", "pay_create", json.RawMessage(`{"payee":"acct:a","amount":{"minor":100}}`))
	b, _ := mcpserver.IdempotencyKey("session-1", "pay_create", json.RawMessage(`{"amount":{"minor":100},"payee":"acct:a"}`))
	c, _ := mcpserver.IdempotencyKey("session-2", "pay_create", json.RawMessage(`{"payee":"acct:a","amount":{"minor":100}}`))
	fmt.Println(a == b, a == c, len(a))
	// Output: true false 44
}

// New serves one agent's tools; here over the SDK's in-memory transport,
// against a stand-in for the Countersign server that refuses every
// payment, to show a refusal as the model sees it.
func ExampleNew() {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"status":503,"code":"settlement.frozen","action":"await-operator","detail":"the kill switch is engaged"}`)
	})
	seed := make([]byte, ed25519.SeedSize)
	srv, err := mcpserver.New(mcpserver.Config{Agent: &agentclient.Agent{
		BaseURL: "http://countersign.local", Credential: "svc_ak_x_y", Key: ed25519.NewKeyFromSeed(seed), Mandate: "a.b.c",
		HTTPClient: &http.Client{Transport: agentclient.HandlerTransport(refuse)},
	}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	fmt.Println(len(srv.Tools()) > 50)

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	if err != nil {
		panic(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay_create", Arguments: map[string]any{
		"payee": "acct:seller.example", "amount": map[string]any{"minor": 1250}, "terms": map[string]any{"rail": "sandbox-card"}}})
	if err != nil {
		panic(err)
	}
	p := res.StructuredContent.(map[string]any)
	fmt.Println(res.IsError, p["code"], p["action"])
	// Output:
	// true
	// true settlement.frozen await-operator
}

// Config.Tools keeps a few namespaces for a framework that wants few
// tools; Tools lists what is served (wait_for_decision is always there).
func ExampleServer_Tools() {
	srv, err := mcpserver.New(mcpserver.Config{Agent: &agentclient.Agent{BaseURL: "http://countersign.local"},
		Tools: []string{"pay.", "commerce.", "intents."}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	var names []string
	for _, t := range srv.Tools() {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	fmt.Println(strings.Join(names, "\n"))
	// Output:
	// commerce_buy
	// commerce_merchants_list
	// commerce_quote
	// intents_events
	// intents_get
	// pay_create
}
