package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/metrics"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/store/pgstore"
	"github.com/countersign/countersign/webhook"
	"github.com/countersign/countersign/x402"
)

const serveSynopsis = `serve [flags]

Runs the reference server. Sandbox mode is the default: keys it needs are
generated on first start into the data directory, and reading routes are
open without credentials until agent credentials are configured. Use
--production to refuse every sandbox convenience.`

type serveConfig struct {
	addr       string
	data       string
	store      string
	hexAgentID bool
	baseURL    string
	recordKey  string
	origin     string
	production bool
	logLevel   string
	shutdown   time.Duration
	// metricsAddr and pprofAddr are the operator's own listeners; once
	// bound, cmdServe replaces them with the bound addresses.
	metricsAddr string
	pprofAddr   string

	operatorKeys       string
	denyPayees         string
	denyAgents         string
	breakerAfter       int64
	approvalWindow     time.Duration
	railTimeout        time.Duration
	idemRetention      time.Duration
	sandboxLatency     string
	sandboxUnknownRate float64
	agentRate          float64
	agentBurst         int
	addrRate           float64
	addrBurst          int
	webhookSealKey     string
	webhookSchedule    string

	merchants           string
	memoryUntrusted     string
	identityKey         string
	protocolConfig      string
	x402Wallet          string
	x402Assets          string
	x402MaxTimeout      time.Duration
	x402ClockSkew       time.Duration
	x402FakeChain       string
	operatorID          string
	deniabilityBoundary string
	systemPrompt        string
	verifyPolicy        string
	disclosureTTL       time.Duration
}

func (c *serveConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "`host:port` to listen on")
	fs.BoolVar(&c.hexAgentID, "identity-hex-agent-id", false, "rewrite, once and irreversibly, an ADP agent id stored as a did:key (an identity created before hex became the default) to the same key in hex, the form every ADP verifier accepts")
	fs.StringVar(&c.data, "data", "countersign-data", "data `directory` (created if missing)")
	fs.StringVar(&c.store, "store", "", "where the state lives: a postgres:// `URL` (PostgreSQL, schema from ?schema=, default countersign; keys and files stay in --data), or empty for Pebble in <data>/store")
	fs.StringVar(&c.baseURL, "base-url", "", "public base `URL` of this server, used in problem types and signed operator requests (default http://<addr>)")
	fs.StringVar(&c.recordKey, "record-key", "", "record signing key `file` (JWK); sandbox default <data>/keys/record.jwk.json, generated if missing")
	fs.StringVar(&c.origin, "origin", "", "checkpoint origin `name` of the record (default derived from the record key)")
	fs.BoolVar(&c.production, "production", false, "production mode: no generated keys, no unauthenticated reads")
	fs.StringVar(&c.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.DurationVar(&c.shutdown, "shutdown-timeout", 15*time.Second, "how long to drain requests on SIGTERM")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "`host:port` of a separate listener serving GET /metrics (Prometheus) to the operator's monitoring; it asks for no credential, so bind it where only that monitoring reaches (default off; the API never serves /metrics)")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "loopback `host:port` of a separate listener serving net/http/pprof under /debug/pprof/ (default off; a host other than a loopback IP or localhost is refused)")
	fs.StringVar(&c.operatorKeys, "operator-keys", "", "JWK Set `file` of the operator public keys that may sign mandates and operator requests (sandbox default <data>/sandbox/operators.jwks.json; required with --production)")
	fs.StringVar(&c.denyPayees, "deny-payees", "", "comma-separated payees refused whatever a mandate says")
	fs.StringVar(&c.denyAgents, "deny-agents", "", "comma-separated agent ids refused whatever a mandate says")
	fs.Int64Var(&c.breakerAfter, "breaker-after", 5, "trip the circuit breaker after this many consecutive settlement failures or denials of one mandate")
	fs.DurationVar(&c.approvalWindow, "approval-window", 24*time.Hour, "how long a held payment waits for an operator")
	fs.DurationVar(&c.railTimeout, "rail-timeout", 30*time.Second, "how long one call to a rail may take; with --store shared by several servers, a payment whose attempt never answered is resumed twice this long after it began settling")
	fs.DurationVar(&c.idemRetention, "idempotency-retention", 7*24*time.Hour, "how long a payment's outcome is kept for idempotent replay")
	fs.Float64Var(&c.agentRate, "agent-rate", auth.DefaultRate, "requests per second an agent key may make (token bucket; a key's own limit overrides)")
	fs.IntVar(&c.agentBurst, "agent-burst", auth.DefaultBurst, "burst size of an agent key's bucket")
	fs.Float64Var(&c.addrRate, "addr-rate", 20, "requests per second one client address may make to the routes that need no credential")
	fs.IntVar(&c.addrBurst, "addr-burst", 40, "burst size of a client address's bucket")
	fs.StringVar(&c.webhookSealKey, "webhook-seal-key", "", "`file` holding the 32-byte key (base64url) that seals webhook signing secrets at rest; sandbox default <data>/keys/webhook-seal.key, generated if missing; required with --production")
	fs.StringVar(&c.webhookSchedule, "webhook-schedule", "", "comma-separated retry `delays` of webhook deliveries (default 1m doubling to 12h, 15 attempts, under 3 days)")
	fs.StringVar(&c.sandboxLatency, "sandbox-latency", "", "sandbox rails' latency as `MIN-MAX` (e.g. 1ms-5ms) or \"off\"; default each rail's realistic latency")
	fs.Float64Var(&c.sandboxUnknownRate, "sandbox-unknown-rate", 0, "fraction of sandbox rail calls that end with an unknown outcome (fault testing)")
	fs.StringVar(&c.merchants, "merchants", "", "JSON `file` listing the merchants agents may buy from: [{id, protocol (acp|ucp), baseUrl, apiKey, pspUrl, pspKey, profileUrl, signingKeys, paymentCredentials, readyWithoutErrors}] (the fields of POST /commerce/merchants); sandbox mode also starts and registers sandbox-acp and sandbox-ucp")
	fs.StringVar(&c.memoryUntrusted, "memory-untrusted-sources", "", "comma-separated source `kinds` (agent, tool, url, operator, record) whose memory records are tainted when written (default: none; an operator can mark single sources with POST /memory/taint)")
	fs.StringVar(&c.protocolConfig, "protocol-config", "", "JSON `file` of the protocol surface's evidence keys (witnesses, receipts, attesters: name → 64-hex Ed25519 public key; logs: origin → note verifier key) and insurance schedule (payee, rateBps, minPremiumMinor, maxLimitMinor); default: no evidence keys, 3 % premiums")
	fs.StringVar(&c.x402Wallet, "x402-wallet-key", "", "`file` holding the secp256k1 private key (hex, mode 0600) that signs x402 payments (EIP-3009 authorizations); sandbox default <data>/keys/x402-wallet.key, generated if missing; without it in production, no x402 resource is paid")
	fs.StringVar(&c.x402Assets, "x402-assets", "", "JSON `file` of the tokens x402 payments may use: [{network (CAIP-2), address, name and version (the token's EIP-712 domain), decimals, currency (ISO 4217 a whole token is worth one of), minorDigits}]; sandbox default USDC on Base Sepolia, as the sandbox's fake x402 server offers it")
	fs.StringVar(&c.x402FakeChain, "x402-fake-chain", "", "base `URL` of a fake x402 server (countersign fake-x402) whose chain state says whether an expired x402 authorization was used (tests and demos; default in sandbox mode: the sandbox's own fake x402 server; no chain reader otherwise, and such a payment waits on the operator's settling list)")
	fs.DurationVar(&c.x402MaxTimeout, "x402-max-timeout", 5*time.Minute, "the longest an x402 offer's maxTimeoutSeconds may be, and so how long a signed authorization stays valid after a kill switch")
	fs.DurationVar(&c.x402ClockSkew, "x402-clock-skew", x402.DefaultClockSkew, "how far this machine's clock may run ahead of the chain's: an unused x402 authorization is declined (and the payment may be tried again) only this long after its validBefore plus finality; must be positive")
	fs.StringVar(&c.identityKey, "identity-key", "", "the deployment's ADP identity key `file` (Ed25519 JWK); default <data>/keys/identity.jwk.json, generated on first start")
	fs.StringVar(&c.operatorID, "operator-id", "", "the deploying party's stable id, disclosed as operator.operatorId (default sandbox-operator in sandbox mode; required with --production)")
	fs.StringVar(&c.deniabilityBoundary, "deniability-boundary", "", "what the operator is and is not accountable for, disclosed as operator.deniabilityBoundary (default: the boundary this software enforces)")
	fs.StringVar(&c.systemPrompt, "system-prompt", "", "`file` holding the system prompt of the agents this deployment serves; its SHA-256 is disclosed (default: none)")
	fs.StringVar(&c.verifyPolicy, "verify-policy", "", "`file` holding the ADP verification policy (JSON, SPEC §8 names) every /verify runs under; callers may only tighten it (default: signature and freshness)")
	fs.DurationVar(&c.disclosureTTL, "disclosure-ttl", 10*time.Minute, "freshness window of the served disclosure (validUntil - issuedAt)")
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := newFlagSet("serve", serveSynopsis, stderr)
	cfg.register(fs)
	if err := parseFlags(fs, args, true); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := checkPprofAddr(cfg.pprofAddr); err != nil {
		return err
	}
	if os.Getenv("GOGC") == "" {
		// The server's live heap is small (Pebble's block cache and
		// memtables live outside it) and a payment allocates about
		// 70 KB that dies young, so at Go's default of 100 the
		// collector's own work was 6–7 % of a loaded server's CPU
		// (docs/PERFORMANCE.md). Twice the headroom costs a few tens of
		// MB. GOGC in the environment still decides when set.
		debug.SetGCPercent(200)
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	var metricsLn, pprofLn net.Listener
	if cfg.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.metricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: listen: %w", err)
		}
		defer metricsLn.Close()
		cfg.metricsAddr = metricsLn.Addr().String()
	}
	if cfg.pprofAddr != "" {
		if pprofLn, err = listenLoopback("pprof-addr", cfg.pprofAddr); err != nil {
			return err
		}
		defer pprofLn.Close()
		cfg.pprofAddr = pprofLn.Addr().String()
	}
	srv, err := newServer(ctx, cfg, ln.Addr().String(), logger, stdout)
	if err != nil {
		return err
	}
	defer srv.close()
	if metricsLn != nil {
		srv.addAux("--metrics-addr", metricsLn, metricsMux(srv.metrics), true)
	}
	if pprofLn != nil {
		srv.addAux("--pprof-addr", pprofLn, pprofMux(), false)
	}
	return srv.serve(ctx, ln, cfg.shutdown)
}

// checkPprofAddr refuses a --pprof-addr whose host is not a loopback IP or
// "localhost": profiles show the process's memory, goroutines and command
// line, and the listener asks for no credential.
func checkPprofAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-addr %q: want HOST:PORT on loopback, such as 127.0.0.1:6060: %v", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("--pprof-addr %q refused: the profiler listens on loopback only (127.0.0.1, [::1] or localhost), not on %s; reach it remotely through an SSH tunnel", addr, host)
}

// listenLoopback binds addr, given as --flag, and makes sure the address
// bound is loopback ("localhost" is resolved by the system).
func listenLoopback(flag, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s: listen: %w", flag, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("--%s %q refused: it bound %s, which is not loopback", flag, addr, ln.Addr())
	}
	return ln, nil
}

// serveUntil serves srv on ln until ctx is done, then shuts it down
// within five seconds; a listener that fails first ends it with its error.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// metricsMux serves the operator's metrics at GET /metrics and nothing
// else.
func metricsMux(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return mux
}

// pprofMux serves net/http/pprof on a mux of its own. (Importing
// net/http/pprof also registers these on http.DefaultServeMux, which this
// binary never serves.)
func pprofMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, allocs, ...
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// auxServer is a listener of the operator's beside the API: metrics or
// pprof.
type auxServer struct {
	flag string // that configured it, for errors
	ln   net.Listener
	http *http.Server
}

// addAux adds a listener that serve runs and shuts down with the API's.
// bounded sets a write timeout (not for pprof, whose profiles and traces
// run as long as asked).
func (s *server) addAux(flag string, ln net.Listener, h http.Handler, bounded bool) {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	if bounded {
		hs.WriteTimeout = time.Minute
	}
	s.aux = append(s.aux, &auxServer{flag: flag, ln: ln, http: hs})
	s.logger.Info("operator listener", slog.String("flag", flag), slog.String("addr", ln.Addr().String()))
}

// server is a running reference server: the store, the node over it,
// the sandbox's fake merchants, and the listeners.
type server struct {
	logger  *slog.Logger
	store   store.Store
	node    *countersign.Node
	shops   *sandboxMerchants
	fake402 *http.Server // the sandbox's fake x402 server; nil in production
	http    *http.Server
	metrics *metrics.Metrics // nil without --metrics-addr
	aux     []*auxServer     // the operator's listeners: metrics, pprof
}

func newServer(ctx context.Context, cfg serveConfig, addr string, logger *slog.Logger, stdout io.Writer) (s *server, err error) {
	baseURL := strings.TrimRight(cfg.baseURL, "/")
	if baseURL == "" {
		baseURL = "http://" + addr
	}
	key, generated, err := loadRecordKey(cfg.data, cfg.recordKey, cfg.production)
	if err != nil {
		return nil, err
	}
	origin := dataOrigin(cfg.data, cfg.origin, key.Public().(ed25519.PublicKey))
	vkey, err := recordVerifierKey(origin, key)
	if err != nil {
		return nil, err
	}
	if err := writePublicFile(filepath.Join(cfg.data, recordPubFile), []byte(vkey+"\n")); err != nil {
		return nil, fmt.Errorf("write record.pub: %w", err)
	}
	opts := &countersign.Options{
		RecordKey: key, Origin: origin, BaseURL: baseURL, Sandbox: !cfg.production, Logger: logger,
		StartData: map[string]any{"version": version},
		Pay: countersign.PayOptions{DenyPayees: splitList(cfg.denyPayees), DenyAgents: splitList(cfg.denyAgents),
			BreakerAfter: cfg.breakerAfter, ApprovalWindow: cfg.approvalWindow, IdempotencyRetention: cfg.idemRetention,
			RailTimeout: cfg.railTimeout},
		Memory: countersign.MemoryOptions{UntrustedSourceKinds: splitList(cfg.memoryUntrusted)},
		RateLimit: countersign.RateLimitOptions{AgentRate: cfg.agentRate, AgentBurst: cfg.agentBurst,
			AddrRate: cfg.addrRate, AddrBurst: cfg.addrBurst},
	}

	// Metrics only when someone can read them: otherwise requests and
	// commits pay nothing for them.
	var m *metrics.Metrics
	storeOpts := &pebblestore.Options{Logger: logger}
	pgOpts := &pgstore.Options{Logger: logger}
	if cfg.metricsAddr != "" {
		m = metrics.New(&metrics.Options{Logger: logger})
		storeOpts.OnCommit = func(ci pebblestore.CommitInfo) { m.ObserveStoreCommit(ci.Txns, ci.Sync, ci.Err) }
		pgOpts.OnCommit = func(ci pgstore.CommitInfo) {
			m.ObserveStoreCommit(ci.Txns, ci.Commit, ci.Err)
			m.ObserveStoreGroup(ci.Run, ci.Lock)
		}
		opts.Metrics = m
		opts.Webhook.OnDelivery = m.ObserveWebhookDelivery
	}
	st, err := openStore(ctx, cfg, storeOpts, pgOpts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()

	// Files and keys on disk become Options.
	opKeysPath := cfg.operatorKeys
	if !cfg.production {
		if err := provisionSandboxOperator(cfg.data); err != nil {
			return nil, fmt.Errorf("sandbox: %w", err)
		}
		// The sandbox's agents, their credentials and mandates.
		opts.Provision = func(ctx context.Context, keys *auth.Keys) error {
			if err := provisionSandbox(ctx, cfg.data, keys); err != nil {
				return fmt.Errorf("sandbox: %w", err)
			}
			return nil
		}
		if opKeysPath == "" {
			opKeysPath = filepath.Join(cfg.data, sandboxDirName, sandboxOperatorSet)
		}
	}
	if opKeysPath == "" {
		return nil, errors.New("--production needs --operator-keys FILE (a JWK Set of the operators' public keys)")
	}
	if opts.OperatorKeys, err = loadOperatorKeys(opKeysPath); err != nil {
		return nil, err
	}
	if !cfg.production {
		so := &fake.SandboxOptions{Store: st, SharedLog: true, UnknownOutcomeRate: cfg.sandboxUnknownRate}
		if err := parseLatency(cfg.sandboxLatency, so); err != nil {
			return nil, err
		}
		sandboxRails, err := fake.NewSandbox(so)
		if err != nil {
			return nil, err
		}
		for _, r := range sandboxRails {
			opts.Rails = append(opts.Rails, r)
		}
	}
	// One URL guard (package netguard) for merchants and counterparties:
	// checked when a URL is accepted and at every connection. Sandbox mode
	// admits loopback and http.
	urls := netguard.Policy{AllowLoopback: !cfg.production, AllowHTTP: !cfg.production}
	outbound := urls.Client(10 * time.Second)
	opts.URLs, opts.HTTPClient = &urls, outbound
	opts.Connect = func(ctx context.Context, sp commerce.MerchantSpec) (cart.Merchant, error) {
		return merchantClient(ctx, sp, outbound)
	}
	if opts.Merchants, err = openMerchants(ctx, cfg.merchants, outbound, urls); err != nil {
		return nil, err
	}
	var sandboxShops *sandboxMerchants
	if !cfg.production {
		if sandboxShops, err = startSandboxMerchants(ctx, outbound, logger); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				sandboxShops.close()
			}
		}()
		opts.Merchants = append(opts.Merchants, sandboxShops.configs...)
	}
	// One seal key protects every secret the server keeps to use again:
	// webhook signing secrets and merchant credentials (each under its own
	// derived key).
	if opts.SealKey, err = loadSealKey(cfg.data, cfg.webhookSealKey, cfg.production); err != nil {
		return nil, err
	}
	if opts.Webhook.Schedule, err = parseSchedule(cfg.webhookSchedule); err != nil {
		return nil, err
	}
	if opts.Protocol.Evidence, opts.Protocol.Insurance, err = readProtocolConfig(cfg.protocolConfig); err != nil {
		return nil, err
	}
	if opts.Identity, err = identityOptions(cfg); err != nil {
		return nil, err
	}
	var fake402 *http.Server
	if opts.X402, fake402, err = x402Options(ctx, cfg, logger); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && fake402 != nil {
			_ = fake402.Close()
		}
	}()

	node, err := countersign.Open(ctx, st, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = node.Close(context.WithoutCancel(ctx))
		}
	}()
	if err := writeIdentityFile(cfg.data, node.Identity()); err != nil {
		return nil, fmt.Errorf("write %s: %w", identityPubFile, err)
	}
	if !cfg.production {
		if err := writeSandboxFiles(cfg.data, baseURL, vkey); err != nil {
			return nil, err
		}
	}
	size, err := node.Record().Size(ctx)
	if err != nil {
		return nil, err
	}
	logger.InfoContext(ctx, "countersign starting",
		slog.String("addr", addr), slog.String("baseURL", baseURL), slog.String("data", cfg.data),
		slog.Bool("sandbox", !cfg.production), slog.String("origin", origin),
		slog.Uint64("recordSize", size), slog.Bool("recordKeyGenerated", generated))
	printBanner(stdout, cfg, baseURL, addr)

	srv := &server{
		logger:  logger,
		store:   st,
		node:    node,
		shops:   sandboxShops,
		fake402: fake402,
		metrics: m,
		http: &http.Server{
			Handler:           node.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
	}
	// Record streams never go idle: end them when Shutdown starts, or it
	// waits for them until its deadline.
	srv.http.RegisterOnShutdown(func() { node.Stream().Close() })
	return srv, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// parseLatency reads --sandbox-latency: "", "off" or "MIN-MAX".
func parseLatency(v string, o *fake.SandboxOptions) error {
	switch v {
	case "":
		return nil
	case "off", "0":
		o.NoLatency = true
		return nil
	}
	lo, hi, ok := strings.Cut(v, "-")
	minD, err1 := time.ParseDuration(lo)
	maxD, err2 := time.ParseDuration(hi)
	if !ok || err1 != nil || err2 != nil || minD < 0 || maxD < minD || maxD == 0 {
		return fmt.Errorf("--sandbox-latency %q: want MIN-MAX such as 1ms-5ms, or off", v)
	}
	o.MinLatency, o.MaxLatency = minD, maxD
	return nil
}

// serve answers requests, on the API listener and the operator's (metrics,
// pprof), until ctx is done, then drains them. A listener that fails ends
// them all.
func (s *server) serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(ln) }()
	type auxEnd struct {
		a   *auxServer
		err error
	}
	auxc := make(chan auxEnd, len(s.aux))
	for _, a := range s.aux {
		go func() { auxc <- auxEnd{a, a.http.Serve(a.ln)} }()
	}
	pending := len(s.aux) // aux servers whose Serve has not returned
	var failed error
	select {
	case err := <-errc:
		for _, a := range s.aux {
			_ = a.http.Close()
		}
		for range pending {
			<-auxc
		}
		return fmt.Errorf("serve: %w", err)
	case e := <-auxc:
		pending--
		failed = fmt.Errorf("serve %s: %w", e.a.flag, e.err)
		s.logger.ErrorContext(ctx, "an operator listener failed; shutting down", slog.Any("error", failed))
	case <-ctx.Done():
	}
	s.logger.InfoContext(ctx, "shutting down: draining requests")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.logger.ErrorContext(ctx, "shutdown did not drain in time", slog.Any("error", err))
	}
	// The operator's listeners close last, so the drain can be watched.
	for _, a := range s.aux {
		if err := a.http.Shutdown(sctx); err != nil {
			s.logger.WarnContext(ctx, "an operator listener did not drain in time; closing it",
				slog.String("flag", a.flag), slog.Any("error", err))
			_ = a.http.Close()
		}
	}
	for range pending {
		if e := <-auxc; failed == nil && !errors.Is(e.err, http.ErrServerClosed) {
			failed = fmt.Errorf("serve %s: %w", e.a.flag, e.err)
		}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return failed
}

// close drains the node, stops the sandbox's merchants and closes the
// store; it is safe to call after serve returned.
func (s *server) close() {
	// Deliveries in flight finish or stay in the outbox for the next start;
	// counts still in memory are written.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	if err := s.node.Close(ctx); err != nil {
		s.logger.Error("closing the node", slog.Any("error", err))
	}
	cancel()
	s.shops.close()
	if s.fake402 != nil {
		_ = s.fake402.Close()
	}
	if err := s.store.Close(); err != nil {
		s.logger.Error("closing store", slog.Any("error", err))
	}
}

// openStore opens the state: PostgreSQL when --store names a database,
// else Pebble in the data directory.
func openStore(ctx context.Context, cfg serveConfig, pebbleOpts *pebblestore.Options, pgOpts *pgstore.Options) (store.Store, error) {
	if u := cfg.store; u != "" {
		if !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
			return nil, fmt.Errorf("--store %q: want a postgres:// URL, or nothing for Pebble in the data directory", u)
		}
		// The schema may ride in the URL (?schema=name), so that one
		// string names the whole store; PostgreSQL itself never sees it.
		schema := ""
		if pu, err := url.Parse(u); err == nil {
			q := pu.Query()
			schema = q.Get("schema")
			q.Del("schema")
			pu.RawQuery = q.Encode()
			u = pu.String()
		}
		o := *pgOpts
		o.Schema = schema
		st, err := pgstore.Open(ctx, u, &o)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		return st, nil
	}
	st, err := pebblestore.Open(filepath.Join(cfg.data, storeDir), pebbleOpts)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return st, nil
}

func printBanner(w io.Writer, cfg serveConfig, baseURL, addr string) {
	mode := "sandbox"
	if cfg.production {
		mode = "production"
	}
	fmt.Fprintf(w, `Countersign is listening on %s at %s (%s mode)
  data directory:   %s
  record verifier:  %s
  contract:         %s/openapi.json
  operator console: %s/console/ (import your operator key there; it never leaves the browser)
`, baseURL, addr, mode, cfg.data, filepath.Join(cfg.data, recordPubFile), baseURL, baseURL)
	if cfg.metricsAddr != "" {
		fmt.Fprintf(w, "  metrics:          http://%s/metrics (for the operator's monitoring: no credential, not on the API)\n", cfg.metricsAddr)
	}
	if cfg.pprofAddr != "" {
		fmt.Fprintf(w, "  pprof:            http://%s/debug/pprof/ (loopback only)\n", cfg.pprofAddr)
	}
	if !cfg.production {
		fmt.Fprintf(w, "  sandbox:          keys, a credential, a mandate and a ready-to-run example are in %s\n",
			filepath.Join(cfg.data, sandboxDirName, "README.txt"))
	}
}

// loadSealKey returns the key that seals webhook signing secrets at rest:
// the --webhook-seal-key file, or in sandbox mode <data>/keys/webhook-seal.key,
// generated on first start. Production refuses a generated key.
func loadSealKey(dataDir, path string, production bool) ([]byte, error) {
	if path == "" {
		if production {
			return nil, errors.New("--production needs --webhook-seal-key FILE (32 random bytes, base64url; e.g. head -c32 /dev/urandom | basenc --base64url)")
		}
		path = filepath.Join(dataDir, "keys", "webhook-seal.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			key := make([]byte, webhook.SealKeySize)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(base64.RawURLEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
				return nil, err
			}
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webhook seal key: %w", err)
	}
	key, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(string(b)), "="))
	if err != nil || len(key) != webhook.SealKeySize {
		return nil, fmt.Errorf("webhook seal key %s: want %d bytes in base64url", path, webhook.SealKeySize)
	}
	return key, nil
}

// parseSchedule reads --webhook-schedule: "" for the default, else
// comma-separated durations.
func parseSchedule(v string) ([]time.Duration, error) {
	if v == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, part := range splitList(v) {
		d, err := time.ParseDuration(part)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("--webhook-schedule: %q is not a positive duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}
