package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/httpserver"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/pebblestore"
)

const serveSynopsis = `serve [flags]

Runs the reference server. Sandbox mode is the default: keys it needs are
generated on first start into the data directory, and reading routes are
open without credentials until agent credentials are configured. Use
--production to refuse every sandbox convenience.`

type serveConfig struct {
	addr       string
	data       string
	baseURL    string
	recordKey  string
	origin     string
	production bool
	logLevel   string
	shutdown   time.Duration
}

func (c *serveConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "`host:port` to listen on")
	fs.StringVar(&c.data, "data", "countersign-data", "data `directory` (created if missing)")
	fs.StringVar(&c.baseURL, "base-url", "", "public base `URL` of this server, used in problem types and signed operator requests (default http://<addr>)")
	fs.StringVar(&c.recordKey, "record-key", "", "record signing key `file` (JWK); sandbox default <data>/keys/record.jwk.json, generated if missing")
	fs.StringVar(&c.origin, "origin", "", "checkpoint origin `name` of the record (default derived from the record key)")
	fs.BoolVar(&c.production, "production", false, "production mode: no generated keys, no unauthenticated reads")
	fs.StringVar(&c.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.DurationVar(&c.shutdown, "shutdown-timeout", 15*time.Second, "how long to drain requests on SIGTERM")
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

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	srv, err := newServer(ctx, cfg, ln.Addr().String(), logger, stdout)
	if err != nil {
		return err
	}
	defer srv.close()
	return srv.serve(ctx, ln, cfg.shutdown)
}

// server is a running reference server: the store, the record and the
// HTTP handler over them.
type server struct {
	logger *slog.Logger
	store  *pebblestore.Store
	log    *audit.Log
	http   *http.Server
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

	st, err := pebblestore.Open(filepath.Join(cfg.data, storeDir), &pebblestore.Options{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	lg, err := audit.Open(ctx, st, key, &audit.Options{Origin: origin, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open record: %w", err)
	}
	if err := recordStart(ctx, lg, cfg, baseURL, origin); err != nil {
		return nil, fmt.Errorf("record start: %w", err)
	}
	model := contract.New()
	h, err := httpserver.New(httpserver.Config{
		BaseURL: baseURL,
		Sandbox: !cfg.production,
		Logger:  logger,
		Model:   model,
		Audit:   lg,
	})
	if err != nil {
		return nil, err
	}
	if !cfg.production {
		if err := writeSandboxFiles(cfg.data, baseURL, vkey); err != nil {
			return nil, err
		}
	}
	size, err := lg.Size(ctx)
	if err != nil {
		return nil, err
	}
	logger.InfoContext(ctx, "countersign starting",
		slog.String("addr", addr), slog.String("baseURL", baseURL), slog.String("data", cfg.data),
		slog.Bool("sandbox", !cfg.production), slog.String("origin", origin),
		slog.Uint64("recordSize", size), slog.Bool("recordKeyGenerated", generated))
	printBanner(stdout, cfg, baseURL)

	return &server{
		logger: logger,
		store:  st,
		log:    lg,
		http: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			IdleTimeout:       120 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
	}, nil
}

// serve answers requests until ctx is done, then drains them.
func (s *server) serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.logger.InfoContext(ctx, "shutting down: draining requests")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.logger.ErrorContext(ctx, "shutdown did not drain in time", slog.Any("error", err))
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// close flushes and closes the record and the store; it is safe to call
// after serve returned.
func (s *server) close() {
	if err := s.store.Close(); err != nil {
		s.logger.Error("closing store", slog.Any("error", err))
	}
}

func printBanner(w io.Writer, cfg serveConfig, baseURL string) {
	mode := "sandbox"
	if cfg.production {
		mode = "production"
	}
	fmt.Fprintf(w, `Countersign is listening on %s (%s mode)
  data directory:   %s
  record verifier:  %s
  try:              curl -s %s/audit/checkpoint
                    curl -s %s/openapi.json | head
`, baseURL, mode, cfg.data, filepath.Join(cfg.data, recordPubFile), baseURL, baseURL)
}

// recordStart appends a system.started entry: a restart can change how the
// gate decides (configuration, keys), so it belongs in the record like any
// other state change.
func recordStart(ctx context.Context, lg *audit.Log, cfg serveConfig, baseURL, origin string) error {
	data, err := json.Marshal(map[string]any{
		"version": version,
		"sandbox": !cfg.production,
		"baseUrl": baseURL,
		"origin":  origin,
	})
	if err != nil {
		return err
	}
	return lg.Update(ctx, func(txn store.Txn) error {
		_, err := lg.Append(txn, audit.Record{
			Type:  "system.started",
			Actor: audit.Actor{Kind: "system", ID: "countersign-serve"},
			Data:  data,
		})
		return err
	})
}
