// Command mcp-client drives "countersign mcp" as an agent framework would:
// with the MCP Go SDK's client, over stdio. It starts the MCP server with
// the whole service embedded on a fresh sandbox data directory (or connects
// to one already running with --endpoint), then lists the tools, reads the
// mandate, pays 12.50 USD (settled), asks for 250.00 (held for a person:
// the answer says where to approve), quotes and buys a mug at the sandbox
// merchant, remembers a fact and recalls it.
//
//	go run ./examples/mcp-client    # runs: go run ./cmd/countersign mcp --data <temp dir> --console-addr 127.0.0.1:0
//	go run ./examples/mcp-client --server "countersign mcp --url http://127.0.0.1:8080 --agent-key ... "
//	go run ./examples/mcp-client --endpoint http://127.0.0.1:8765/mcp   # countersign mcp --http 127.0.0.1:8765
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	server := flag.String("server", "", `command that runs the MCP server over stdio (default: "go run ./cmd/countersign mcp --data <a new temporary directory> --console-addr 127.0.0.1:0")`)
	endpoint := flag.String("endpoint", "", "streamable HTTP endpoint of a running \"countersign mcp --http\" instead")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var transport mcp.Transport
	switch {
	case *endpoint != "":
		transport = &mcp.StreamableClientTransport{Endpoint: *endpoint}
	default:
		args := strings.Fields(*server)
		if len(args) == 0 {
			dir, err := os.MkdirTemp("", "countersign-mcp-example-")
			if err != nil {
				log.Fatal(err)
			}
			defer os.RemoveAll(dir)
			args = []string{"go", "run", "./cmd/countersign", "mcp", "--data", dir, "--console-addr", "127.0.0.1:0"}
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	}
	if err := run(ctx, transport, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run connects to the MCP server over t and does what an agent does,
// printing each step to out.
func run(ctx context.Context, t mcp.Transport, out io.Writer) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "countersign-mcp-example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return err
	}
	defer cs.Close()

	n := 0
	for _, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(out, "tools: %d, generated from the contract\n", n)

	mandate, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "countersign://mandate"})
	if err != nil {
		return err
	}
	var m struct {
		Claims map[string]any `json:"claims"`
	}
	if err := json.Unmarshal([]byte(mandate.Contents[0].Text), &m); err != nil {
		return err
	}
	fmt.Fprintf(out, "mandate: %v per payment, approval from %v\n", m.Claims["perTxCapMinor"], m.Claims["confirmAboveMinor"])

	call := func(name string, args map[string]any) (map[string]any, bool, error) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, false, err
		}
		b, _ := json.Marshal(res.StructuredContent)
		var sc map[string]any
		_ = json.Unmarshal(b, &sc)
		return sc, res.IsError, nil
	}
	payment := func(minor int) map[string]any {
		return map[string]any{"payee": "acct:seller.example", "amount": map[string]any{"minor": minor, "currency": "USD"},
			"terms": map[string]any{"rail": "sandbox-card"}, "purpose": "invoice from the MCP example"}
	}

	paid, _, err := call("pay_create", payment(1250))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pay 12.50: %v\n", paid["outcome"])
	again, _, err := call("pay_create", payment(1250))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the same call again: replayed %v, same intent %v\n", again["replayed"], again["intentId"] == paid["intentId"])

	held, _, err := call("pay_create", payment(25000))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pay 250.00: %v (approve at %v)\n", held["outcome"], held["approveAt"] != nil)

	denied, isErr, err := call("pay_create", payment(90000))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "pay 900.00: error %v, %v, action %v\n", isErr, denied["code"], denied["action"])

	cart := map[string]any{"rail": "acp", "merchant": "sandbox-acp", "currency": "USD",
		"lines": []any{map[string]any{"id": "sku-mug", "quantity": 1}}}
	quoted, _, err := call("commerce_quote", cart)
	if err != nil {
		return err
	}
	order, _, err := call("commerce_buy", cart)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "quote: %v; buy: %v\n", quoted["status"], order["outcome"])

	if _, isErr, err := call("memory_remember", map[string]any{"namespace": "household", "subject": "user:ada", "kind": "preference",
		"body": map[string]any{"mugs": "blue"}, "validFrom": "2026-01-01T00:00:00Z",
		"source": map[string]any{"kind": "agent", "ref": "mcp-example"}}); err != nil || isErr {
		return fmt.Errorf("remember: %v %v", err, isErr)
	}
	recalled, _, err := call("memory_recall", map[string]any{"namespace": "household", "subject": "user:ada"})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(recalled["data"])
	fmt.Fprintf(out, "recall: blue mugs remembered %v\n", strings.Contains(string(b), "blue"))
	return nil
}
