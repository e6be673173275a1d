package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
	"github.com/countersign/countersign/x402/fetch"
)

// Files of x402 in the data directory.
const (
	x402WalletFile = "x402-wallet.key" // under keys/: the sandbox's generated wallet
	x402URLFile    = "x402-url.txt"    // under sandbox/: the sandbox's fake x402 server
)

// loadWallet reads the x402 wallet key: a file holding the secp256k1
// private key as 64 hex digits (0x optional), readable by its owner only,
// like the record key. In sandbox mode without a file, one is generated
// in <data>/keys. Nothing configured in production: no wallet, and a
// resource that asks for payment is refused x402.not_configured.
func loadWallet(dataDir, path string, production bool) (*evm.Key, error) {
	if path == "" {
		if production {
			return nil, nil
		}
		path = filepath.Join(dataDir, "keys", x402WalletFile)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			k, err := evm.GenerateKey()
			if err != nil {
				return nil, err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(k.Hex()+"\n"), 0o600); err != nil {
				return nil, err
			}
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("x402 wallet key: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("x402 wallet key %s is readable by others (mode %o): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("x402 wallet key: %w", err)
	}
	k, err := evm.ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		// The error of a key parser may quote its input: say only where.
		return nil, fmt.Errorf("x402 wallet key %s: not a secp256k1 private key in hex", path)
	}
	return k, nil
}

// assetFile is one entry of --x402-assets.
type assetFile struct {
	Network     string `json:"network"`
	Address     string `json:"address"`
	Name        string `json:"name"`
	Version     string `json:"version"`
	Decimals    int    `json:"decimals"`
	Currency    string `json:"currency"`
	MinorDigits int    `json:"minorDigits"`
}

// sandboxAsset is what the sandbox pays its fake x402 server with: USDC
// on Base Sepolia, as the fake offers it.
func sandboxAsset() x402.Asset {
	a, _ := evm.ParseAddress(fakex402.DefaultAsset)
	return x402.Asset{Network: fakex402.DefaultNetwork, Address: a, Name: fakex402.DefaultTokenName,
		Version: fakex402.DefaultTokenVersion, Decimals: 6, Currency: "USD", MinorDigits: 2}
}

// readAssets reads --x402-assets: a JSON array of assets, each pinned to
// its network, contract, EIP-712 domain and worth.
func readAssets(path string) ([]x402.Asset, error) {
	if path == "" {
		return nil, nil
	}
	var in []assetFile
	if err := readStrictJSON("--x402-assets", path, &in); err != nil {
		return nil, fmt.Errorf("%w (want [{network, address, name, version, decimals, currency, minorDigits}])", err)
	}
	out := make([]x402.Asset, 0, len(in))
	for i, a := range in {
		addr, err := evm.ParseAddress(a.Address)
		if err != nil {
			return nil, fmt.Errorf("--x402-assets %s: asset %d: address: %w", path, i, err)
		}
		out = append(out, x402.Asset{Network: a.Network, Address: addr, Name: a.Name, Version: a.Version,
			Decimals: a.Decimals, Currency: a.Currency, MinorDigits: a.MinorDigits})
	}
	if err := (x402.Policy{Assets: out, MaxTimeout: time.Minute}).Check(); err != nil {
		return nil, fmt.Errorf("--x402-assets %s: %w", path, err)
	}
	return out, nil
}

// x402Options builds the node's x402 options from the flags; in sandbox
// mode it starts the fake x402 server, whose chain state is the chain
// reader, and pays it with its asset.
func x402Options(ctx context.Context, cfg serveConfig, logger *slog.Logger) (countersign.X402Options, *http.Server, error) {
	var o countersign.X402Options
	var err error
	if o.Wallet, err = loadWallet(cfg.data, cfg.x402Wallet, cfg.production); err != nil {
		return o, nil, err
	}
	if o.Assets, err = readAssets(cfg.x402Assets); err != nil {
		return o, nil, err
	}
	o.MaxTimeout = cfg.x402MaxTimeout
	if cfg.x402ClockSkew <= 0 {
		// Declining on the local clock alone could pay twice: the
		// chain may still execute an authorization it has not seen
		// expire (x402.Resolver).
		return o, nil, fmt.Errorf("--x402-clock-skew %s: must be positive (the margin for a clock ahead of the chain's cannot be switched off)", cfg.x402ClockSkew)
	}
	o.ClockSkew = cfg.x402ClockSkew
	if cfg.x402FakeChain != "" {
		// A fake's chain is its own: it knows only the payments made to
		// that fake, so it answers for them alone.
		o.Chain = &fakex402.ChainClient{BaseURL: strings.TrimRight(cfg.x402FakeChain, "/")}
	}
	if cfg.production {
		return o, nil, nil
	}
	if cfg.x402Assets == "" {
		o.Assets = []x402.Asset{sandboxAsset()}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return o, nil, fmt.Errorf("sandbox x402 server: %w", err)
	}
	// One path per scenario at one cent, and /premium at 150 USDC: above
	// the sandbox mandate's confirmation threshold, so it waits for an
	// operator.
	fake := fakex402.New(&fakex402.Options{Resources: append(fakex402.DefaultResources(),
		fakex402.Resource{Path: "/premium", Amount: "150000000", Description: "a premium report"})})
	srv := &http.Server{Handler: fake.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	if o.Chain == nil {
		o.Chain = fake
	}
	base := "http://" + ln.Addr().String()
	if err := writePublicFile(filepath.Join(cfg.data, sandboxDirName, x402URLFile), []byte(base+"\n")); err != nil {
		_ = srv.Close()
		return o, nil, fmt.Errorf("sandbox: %w", err)
	}
	logger.InfoContext(ctx, "sandbox x402 server", slog.String("url", base), slog.String("payer", o.Wallet.Address().String()))
	return o, srv, nil
}

const x402FetchSynopsis = `x402 fetch --resource URL --max-amount MINOR [flags]

Fetches an HTTP resource through Countersign, paying its x402 price (HTTP
402, version 2) if it asks for one: the agent signs what it wants (method,
URL, body digest, the most it will pay), never a price; the server's gate
allows, holds for an operator, or denies. Prints the answer (the resource's
status, headers and base64 body, the payment and the Receipt); --body-out
writes the resource's body to a file. A held fetch answers 202: after the
operator approves, run the same command with the same --idempotency-key to
get the resource.`

// headerFlags collects --header "Name: value".
type headerFlags map[string]string

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("%q: want \"Name: value\"", v)
	}
	h[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}

func cmdX402(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "fetch" {
		fmt.Fprintln(stderr, "usage: countersign x402 fetch [flags] (run \"countersign x402 fetch -h\")")
		return errUsage
	}
	fs := newFlagSet("x402 fetch", x402FetchSynopsis, stderr)
	af := addAgentFlags(fs)
	resource := fs.String("resource", "", "the resource's `URL`")
	method := fs.String("method", "GET", "HTTP `method` of the request")
	data := fs.String("data", "", "request body; @`file` reads it from a file")
	maxAmount := fs.Int64("max-amount", 0, "the most to pay, in `minor` units of --currency")
	currency := fs.String("currency", "USD", "ISO 4217 code of --max-amount")
	purpose := fs.String("purpose", "x402 fetch from the countersign CLI", "why, for the person who may approve it")
	key := fs.String("idempotency-key", "", "idempotency key (default: a new random one; reuse it to learn what came of a held fetch)")
	bodyOut := fs.String("body-out", "", "write the resource's body to this `file`")
	headers := headerFlags{}
	fs.Var(headers, "header", "a request header `\"Name: value\"` (repeatable)")
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if !af.signing() || *resource == "" || *maxAmount <= 0 {
		fmt.Fprintln(stderr, "x402 fetch: --credential, --agent-key, --mandate, --resource and --max-amount are required")
		fs.Usage()
		return errUsage
	}
	var body []byte
	if name, ok := strings.CutPrefix(*data, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		body = b
	} else if *data != "" {
		body = []byte(*data)
	}
	agent, authz, err := af.load()
	if err != nil {
		return err
	}
	if *key == "" {
		*key = agentclient.NewIdempotencyKey()
	}
	r := fetch.Request{Method: strings.ToUpper(*method), URL: *resource, MaxAmount: pay.Amount{Minor: *maxAmount, Currency: *currency},
		IdempotencyKey: *key, Purpose: *purpose, Terms: pay.Terms{Rail: fetch.RailName}}
	if len(headers) > 0 {
		r.Headers = headers
	}
	r.SetBody(body)
	if err := agent.SignFetch(&r, ""); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	status, out, err := postJSON(ctx, af.url("/x402/fetch"), authz, *key, raw)
	if err != nil {
		return err
	}
	printStatus(stdout, status, out)
	if status != http.StatusOK && status != http.StatusAccepted {
		return fmt.Errorf("x402 fetch not accepted (HTTP %d)", status)
	}
	if *bodyOut != "" && status == http.StatusOK {
		var f fetch.Fetched
		if err := json.Unmarshal(out, &f); err != nil {
			return err
		}
		b, err := base64.StdEncoding.DecodeString(f.Body)
		if err != nil {
			return fmt.Errorf("the answer's body is not base64: %w", err)
		}
		if err := os.WriteFile(*bodyOut, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
