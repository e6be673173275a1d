package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/mcpserver"
)

const mcpSynopsis = `mcp [--url URL | --data DIR] [--agent-key FILE --credential FILE --mandate FILE] [--http ADDR] [flags]

Serves Countersign to an LLM agent over the Model Context Protocol: every
operation an agent credential opens is a tool (pay_create, commerce_quote,
commerce_buy, memory_remember, hold_place, ...; generated from the contract),
plus wait_for_decision, and the mandate, the record's checkpoint, the
disclosure and the agent's intents are resources. The server acts as one
agent: it signs what the agent sends with --agent-key, under --mandate, and
derives idempotency keys so that a retried call never pays twice. It never
exposes an operator action.

Over stdio by default (for desktop and CLI agents: stdout carries MCP, logs
go to stderr); with --http ADDR over the streamable HTTP transport at
http://ADDR/mcp (loopback only unless --http-any-host).

It talks to a Countersign server at --url, or with --data DIR opens the whole
service in-process on that data directory (countersign.Open, the node serve
runs; the directory must not be served at the same time) and calls it without
a socket. In that mode the key, credential and mandates default to the
sandbox's files in DIR/sandbox, and --console-addr also serves the node's HTTP
surface (the operator console included) so a person can approve.

Every flag can be set as COUNTERSIGN_<FLAG> in the environment (for example
COUNTERSIGN_AGENT_KEY=/path/agent.jwk.json, COUNTERSIGN_CREDENTIAL=/path/cred);
COUNTERSIGN_CREDENTIAL_SECRET may hold the credential itself instead of a file.`

type mcpConfig struct {
	url, data                                             string
	agentKey, credential, mandate, memoryMandate, dpopKey string
	httpAddr                                              string
	httpAnyHost                                           bool
	consoleURL, consoleAddr                               string
	tools, tags                                           string
	poll                                                  time.Duration
	logLevel                                              string
}

func (c *mcpConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "base `URL` of the Countersign server (its --base-url)")
	fs.StringVar(&c.data, "data", "", "embed the service: open this data `directory` in-process instead of calling --url")
	fs.StringVar(&c.agentKey, "agent-key", "", "agent private key `file` (Ed25519 JWK); with --data default <data>/sandbox/agent.jwk.json")
	fs.StringVar(&c.credential, "credential", "", "agent credential `file`; with --data default <data>/sandbox/agent-credential.txt")
	fs.StringVar(&c.mandate, "mandate", "", "payment mandate `file` (compact JWS); with --data default <data>/sandbox/mandate.jws")
	fs.StringVar(&c.memoryMandate, "memory-mandate", "", "memory mandate `file` (compact JWS); with --data default <data>/sandbox/memory-mandate.jws")
	fs.StringVar(&c.dpopKey, "dpop-key", "", "DPoP key `file` (Ed25519 or P-256 JWK) the credential is bound to; every request then carries a DPoP proof")
	fs.StringVar(&c.httpAddr, "http", "", "serve MCP over streamable HTTP at `host:port` (path /mcp) instead of stdio")
	fs.BoolVar(&c.httpAnyHost, "http-any-host", false, "let --http listen on a non-loopback address (put TLS and authentication in front of it)")
	fs.StringVar(&c.consoleURL, "console-url", "", "where a person approves held payments, named in approval_pending answers (default <url>/console/)")
	fs.StringVar(&c.consoleAddr, "console-addr", "", "with --data: also serve the node's HTTP surface (operator console included) at loopback `host:port`")
	fs.StringVar(&c.tools, "tools", "", "comma-separated operation id `prefixes` to keep (e.g. pay.,commerce.,memory.,intents.); default every agent tool")
	fs.StringVar(&c.tags, "tags", "", "X-Svc-Tags sent with every request (usage attribution), e.g. team=growth")
	fs.DurationVar(&c.poll, "poll", 2*time.Second, "how often wait_for_decision reads a held intent")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log `level` on stderr: debug, info, warn or error")
}

func cmdMCP(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var cfg mcpConfig
	fs := newFlagSet("mcp", mcpSynopsis, stderr)
	cfg.register(fs)
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	// --url and --data choose the mode. One given on the command line
	// beats the other from the environment (a shell that exported
	// COUNTERSIGN_DATA for serve must not turn "mcp --url" into an
	// embedded node on a locked directory); both on the command line is
	// a mistake.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	switch {
	case given["url"] && given["data"]:
		fmt.Fprintln(stderr, "mcp: give --url (a running server) or --data (the service in-process), not both")
		return errUsage
	case given["url"]:
		cfg.data = ""
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	agent := &agentclient.Agent{BaseURL: strings.TrimRight(cfg.url, "/"), Tags: cfg.tags, UserAgent: "countersign-mcp/" + version}
	consoleURL := cfg.consoleURL
	if cfg.data != "" {
		stop, base, err := embedNode(ctx, &cfg, agent, logger, stderr)
		if err != nil {
			return err
		}
		defer stop()
		if consoleURL == "" && cfg.consoleAddr != "" {
			consoleURL = base + "/console/"
		}
	} else if consoleURL == "" {
		consoleURL = agent.BaseURL + "/console/"
	}
	if err := loadAgent(&cfg, agent); err != nil {
		return err
	}
	prefixes := splitList(cfg.tools)
	srv, err := mcpserver.New(mcpserver.Config{Agent: agent, ConsoleURL: consoleURL, Tools: prefixes,
		PollInterval: cfg.poll, Logger: logger, Version: version})
	if err != nil {
		return err
	}
	defer srv.Close()
	if cfg.httpAddr == "" {
		err := srv.MCP().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			return nil // the client went away, or we were told to stop
		}
		return err
	}
	return serveMCPHTTP(ctx, cfg, srv, stderr)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// serveMCPHTTP serves the streamable HTTP transport at cfg.httpAddr/mcp
// until ctx is done.
func serveMCPHTTP(ctx context.Context, cfg mcpConfig, srv *mcpserver.Server, stderr io.Writer) error {
	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	defer ln.Close()
	if tcp, ok := ln.Addr().(*net.TCPAddr); !cfg.httpAnyHost && (!ok || !tcp.IP.IsLoopback()) {
		return fmt.Errorf("--http %q refused: it bound %s, which is not loopback (--http-any-host to allow it)", cfg.httpAddr, ln.Addr())
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, nil))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "countersign mcp: serving MCP over streamable HTTP at http://%s/mcp\n", ln.Addr())
	if err := serveUntil(ctx, hs, ln); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// embedNode opens the service on cfg.data with serve's own configuration
// (the sandbox's provisioning, rails and fake merchants), points agent at
// its Handler through an in-process transport, and fills the sandbox's
// files as the defaults of the agent's. It returns how to stop it and the
// node's base URL.
func embedNode(ctx context.Context, cfg *mcpConfig, agent *agentclient.Agent, logger *slog.Logger, stderr io.Writer) (func(), string, error) {
	var sc serveConfig
	sc.register(flag.NewFlagSet("serve", flag.ContinueOnError)) // serve's defaults
	sc.data = cfg.data
	addr := sc.addr
	var ln net.Listener
	if cfg.consoleAddr != "" {
		var err error
		if ln, err = listenLoopback("console-addr", cfg.consoleAddr); err != nil {
			return nil, "", err
		}
		addr = ln.Addr().String()
	}
	// stdout is the MCP channel: serve's banner goes to stderr.
	srv, err := newServer(ctx, sc, addr, logger, stderr)
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, "", err
	}
	base := "http://" + addr
	agent.BaseURL = base
	agent.HTTPClient = &http.Client{Transport: agentclient.HandlerTransport(srv.http.Handler)}
	sandbox := filepath.Join(cfg.data, sandboxDirName)
	def := func(p *string, name string) {
		if *p == "" {
			*p = filepath.Join(sandbox, name)
		}
	}
	def(&cfg.agentKey, "agent.jwk.json")
	def(&cfg.credential, "agent-credential.txt")
	def(&cfg.mandate, "mandate.jws")
	if cfg.memoryMandate == "" {
		if _, err := os.Stat(filepath.Join(sandbox, "memory-mandate.jws")); err == nil {
			cfg.memoryMandate = filepath.Join(sandbox, "memory-mandate.jws")
		}
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan struct{})
	if ln != nil {
		go func() {
			defer close(served)
			if err := srv.serve(sctx, ln, 5*time.Second); err != nil {
				logger.Error("console listener", slog.Any("error", err))
			}
		}()
	} else {
		close(served)
	}
	return func() {
		cancel()
		<-served
		srv.close()
	}, base, nil
}

// loadAgent reads the agent's key, credential and mandates.
func loadAgent(cfg *mcpConfig, a *agentclient.Agent) error {
	if cfg.agentKey == "" {
		return errors.New("mcp: --agent-key FILE is required (or --data DIR for the sandbox's agent)")
	}
	priv, _, err := keyfile.ReadEd25519(cfg.agentKey)
	if err != nil {
		return err
	}
	a.Key = priv
	if secret := strings.TrimSpace(os.Getenv("COUNTERSIGN_CREDENTIAL_SECRET")); secret != "" && cfg.credential == "" {
		a.Credential = secret
	} else if a.Credential, err = readTrimmed("credential", cfg.credential); err != nil {
		return err
	}
	if a.Mandate, err = readTrimmed("mandate", cfg.mandate); err != nil {
		return err
	}
	if cfg.memoryMandate != "" {
		if a.MemoryMandate, err = readTrimmed("memory-mandate", cfg.memoryMandate); err != nil {
			return err
		}
	}
	if cfg.dpopKey != "" {
		k, err := keyfile.Read(cfg.dpopKey)
		if err != nil {
			return err
		}
		a.DPoPKey = k.Signer
	}
	return nil
}
