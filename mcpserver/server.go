// Package mcpserver serves Countersign to LLM agents over the Model
// Context Protocol (MCP), with the official Go SDK
// (github.com/modelcontextprotocol/go-sdk): an agent framework connects to
// it and pays, quotes, buys, remembers and reads the record through tools,
// as one agent, with that agent's key, credential and mandates.
//
// # Tools
//
// The tools are generated from the contract model ([GenerateTools]), not
// written one by one: every operation an agent credential opens becomes a
// tool whose input schema is the operation's JSON Schema and whose
// description is the operation's, with the rules of exclusion documented
// there (operator actions, credential-less documents, streams). The server
// signs what the agent sends (instructions, purchases, spends: the agent
// never handles a JWS), fills the configured mandates, and derives
// idempotency keys from the call (see [IdempotencyKey]). One more tool,
// wait_for_decision, waits for a person's decision on a held payment.
//
// # Results
//
// A success returns the answer as structured content. A payment held for
// a person (HTTP 202) returns outcome approval_pending with the intent,
// the challenge's expiry and where to approve (the console URL when
// configured). A problem (RFC 9457) returns a tool error whose structured
// content is the problem, code, action and detail included, and whose
// text says what the action means for the model.
//
// # Resources
//
// countersign://mandate (the payment mandate in force: its limits and
// remaining budget), countersign://record/checkpoint (the record's latest
// signed checkpoint), countersign://disclosure (the deployment's signed
// disclosure), countersign://intents (the changes of this agent's own
// intents, subscribable: the server tails /audit/stream while a client is
// subscribed and sends notifications/resources/updated) and
// countersign://intents/{id} (one intent).
package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/product"
)

// Config configures a [Server].
type Config struct {
	// Agent is the agent the server acts as, and the Countersign server it
	// talks to (remote, or in-process through agentclient.HandlerTransport).
	// Required.
	Agent *agentclient.Agent
	// Model is the contract model the tools are generated from; nil is
	// product.Model(), the model the reference server serves.
	Model *contract.Model
	// ConsoleURL is where a person approves held payments (the operator
	// console, <base URL>/console/); "" when none is known. It is named in
	// approval_pending answers.
	ConsoleURL string
	// Tools, when not empty, keeps only the tools whose operation id starts
	// with one of these prefixes (e.g. "pay.", "commerce.", "memory."), for
	// a framework that wants few tools. wait_for_decision is always there.
	Tools []string
	// PollInterval is how often wait_for_decision reads a held intent;
	// zero is 2 s.
	PollInterval time.Duration
	// Logger receives the server's own log (never stdout, which stdio
	// uses); nil discards it.
	Logger *slog.Logger
	// Version is the server's version in the MCP handshake; "" is "dev".
	Version string
}

// Server is an MCP server acting as one Countersign agent. Its MCP method
// returns the SDK server, to run over any transport: stdio
// (mcp.StdioTransport) or streamable HTTP (mcp.NewStreamableHTTPHandler).
type Server struct {
	cfg   Config
	mcp   *mcp.Server
	tools []ToolSpec
	// instance scopes derived idempotency keys of sessions that have no
	// id (stdio: one session per process).
	instance string
	log      *slog.Logger

	tail tailer
}

// New builds the server: the tools from the model, the resources, and the
// subscription to the agent's intents.
func New(cfg Config) (*Server, error) {
	if cfg.Agent == nil {
		return nil, errors.New("mcpserver: Config.Agent is required")
	}
	if cfg.Model == nil {
		cfg.Model = product.Model()
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 2 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tools, _, err := GenerateTools(cfg.Model)
	if err != nil {
		return nil, err
	}
	if len(cfg.Tools) > 0 {
		tools = slicesFilter(tools, func(t ToolSpec) bool {
			for _, p := range cfg.Tools {
				if strings.HasPrefix(t.Operation.ID, p) {
					return true
				}
			}
			return false
		})
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s := &Server{cfg: cfg, tools: tools, instance: hex.EncodeToString(b), log: log}
	s.tail.s = s
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "countersign", Title: "Countersign", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       log,
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return s.subscribe(req.Params.URI)
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		Capabilities:       &mcp.ServerCapabilities{},
	})
	for i := range s.tools {
		t := &s.tools[i]
		s.mcp.AddTool(&mcp.Tool{
			Name:        t.Name,
			Title:       t.Operation.Summary,
			Description: t.Description,
			InputSchema: t.InputSchema,
			Annotations: annotations(t.Operation, t.idempotent),
		}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return s.call(ctx, t, req), nil
		})
	}
	s.addWaitTool()
	s.addResources()
	return s, nil
}

const instructions = "Countersign: pay and buy under human oversight. Every payment passes a deny-first gate: " +
	"it settles, waits for a person's approval (outcome approval_pending: tell the user and call wait_for_decision), " +
	"or is refused (a tool error with a problem code and an action to follow). The tools sign for you; " +
	"never invent signatures or mandates. Retrying the same call is safe: it replays the first answer."

// MCP returns the SDK server, to run on a transport.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Tools returns the generated tools the server serves.
func (s *Server) Tools() []ToolSpec { return s.tools }

// Close stops the record tail a subscription started. The MCP sessions
// end with their transports.
func (s *Server) Close() { s.tail.stop() }

// annotations are hints for clients: a read is read-only and idempotent;
// a request with an idempotency key is idempotent within a session (the
// derived key); a money-moving operation is destructive and reaches the
// world (rails, merchants).
func annotations(op contract.Operation, keyed bool) *mcp.ToolAnnotations {
	read := op.Method == "GET" || strings.HasSuffix(op.ID, ".get") || strings.HasSuffix(op.ID, ".list") ||
		strings.HasSuffix(op.ID, ".status") || strings.HasSuffix(op.ID, ".balance")
	no := false
	a := &mcp.ToolAnnotations{ReadOnlyHint: read, IdempotentHint: read || keyed, OpenWorldHint: &no}
	if op.MovesValue {
		yes := true
		a.DestructiveHint = &yes
		a.OpenWorldHint = &yes
	}
	return a
}

func slicesFilter[T any](s []T, keep func(T) bool) []T {
	var out []T
	for _, v := range s {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
