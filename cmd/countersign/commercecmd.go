package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/commerce/acp"
	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
)

// merchantFile is one entry of --merchants: a commerce.MerchantSpec.
type merchantFile = commerce.MerchantSpec

// openMerchants builds the clients of the merchants in path, each over the
// SSRF-guarded client, after checking them as a registration is checked
// (urls). UCP merchants are discovered now: a deployment that cannot
// negotiate with a configured merchant refuses to start.
func openMerchants(ctx context.Context, path string, client *http.Client, urls netguard.Policy) ([]commerce.MerchantConfig, error) {
	if path == "" {
		return nil, nil
	}
	// Each entry is a commerce.MerchantSpec: a merchant this deployment may
	// buy from. The server calls nothing else.
	var files []merchantFile
	if err := readStrictJSON("--merchants", path, &files); err != nil {
		return nil, err
	}
	var out []commerce.MerchantConfig
	for _, f := range files {
		if err := f.Check(urls); err != nil {
			return nil, fmt.Errorf("--merchants %s: merchant %q: %w", path, f.ID, err)
		}
		m, err := merchantClient(ctx, f, client)
		if err != nil {
			return nil, fmt.Errorf("--merchants %s: merchant %q: %w", path, f.ID, err)
		}
		out = append(out, commerce.MerchantConfig{ID: f.ID, Merchant: m})
	}
	return out, nil
}

func merchantClient(ctx context.Context, f commerce.MerchantSpec, client *http.Client) (cart.Merchant, error) {
	switch f.Protocol {
	case "acp":
		if len(f.SigningKeys) > 0 {
			return nil, errors.New("signingKeys: ACP defines no response signatures; keys are pinned for ucp merchants only")
		}
		if len(f.PaymentCredentials) > 0 {
			return nil, errors.New("paymentCredentials: credentials are for ucp merchants only")
		}
		if f.ReadyWithoutErrors {
			return nil, errors.New("readyWithoutErrors: the accommodation is for ucp merchants only")
		}
		return acp.New(acp.Options{BaseURL: f.BaseURL, APIKey: f.APIKey, PSPURL: f.PSPURL, PSPKey: f.PSPKey,
			MerchantID: f.ID, HTTPClient: client})
	case "ucp":
		// Pinned keys: every checkout answer must be signed by one of them.
		// Credentials: handed over at complete to handlers that take one.
		// ReadyWithoutErrors: the operator's accommodation of a merchant
		// that never reports ready_for_complete.
		c, err := ucp.New(ctx, ucp.Options{ProfileURL: f.ProfileURL, MerchantID: f.ID, HTTPClient: client, SigningKeys: f.SigningKeys,
			PaymentCredentials: f.PaymentCredentials, ReadyWithoutErrors: f.ReadyWithoutErrors})
		if err != nil {
			return nil, err
		}
		if ig := c.Profile().Ignored; len(ig) > 0 {
			// Tolerated, not used: reported in the registry listing too.
			slog.Default().Warn("commerce: the merchant's profile has parts outside the schema that are never used",
				slog.String("merchant", f.ID), slog.Any("ignored", ig))
		}
		return c, nil
	}
	return nil, fmt.Errorf("protocol %q is not acp or ucp", f.Protocol)
}

// sandboxMerchants are the fake merchants a sandbox server starts on
// loopback, one per protocol, and registers as sandbox-acp and
// sandbox-ucp. They are real HTTP merchants: the server reaches them
// through the same guarded client as any other.
type sandboxMerchants struct {
	servers []*http.Server
	configs []commerce.MerchantConfig
	bases   map[string]string
}

func startSandboxMerchants(ctx context.Context, client *http.Client, logger *slog.Logger) (*sandboxMerchants, error) {
	sm := &sandboxMerchants{bases: map[string]string{}}
	for _, protocol := range []string{"acp", "ucp"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			sm.close()
			return nil, fmt.Errorf("sandbox merchant: %w", err)
		}
		base := "http://" + ln.Addr().String()
		fm := fakemerchant.New(&fakemerchant.Options{BaseURL: base})
		h := fm.ACPHandler()
		if protocol == "ucp" {
			h = fm.UCPHandler()
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		go func() { _ = srv.Serve(ln) }()
		sm.servers = append(sm.servers, srv)
		id := "sandbox-" + protocol
		f := commerce.MerchantSpec{ID: id, Protocol: protocol, BaseURL: base, ProfileURL: base + "/.well-known/ucp"}
		if protocol == "ucp" {
			// The sandbox knows its merchant's key: pin it, so every answer
			// is checked as an operator's pinned merchant's would be.
			f.SigningKeys = []ucp.SigningKey{ucp.SigningKey(fm.SigningJWK())}
		}
		m, err := merchantClient(ctx, f, client)
		if err != nil {
			sm.close()
			return nil, fmt.Errorf("sandbox merchant %s: %w", id, err)
		}
		sm.configs = append(sm.configs, commerce.MerchantConfig{ID: id, Merchant: m})
		sm.bases[id] = base
	}
	return sm, nil
}

func (sm *sandboxMerchants) close() {
	if sm == nil {
		return
	}
	for _, s := range sm.servers {
		_ = s.Close()
	}
}

const fakeMerchantSynopsis = `fake-merchant --protocol acp|ucp [--addr 127.0.0.1:8090]

Runs a fake merchant for tests and demos: a real HTTP merchant speaking ACP
(2026-04-17, with its PSP's delegate_payment) or UCP (2026-01-11 and
2026-04-08, discovered at /.well-known/ucp), with a catalogue whose SKUs
choose a scenario (sku-mug and sku-book are ready; sku-soldout,
sku-age, sku-3ds, sku-declined, sku-slow, sku-5xx, sku-timeout,
sku-expiring, sku-surge, sku-badsig, sku-badsig-complete and
sku-needs-phone each fail or change as their names say; sku-never-ready
never reports ready and completes all the same). UCP 2026-04-08 answers are signed with a key
generated at start; its public JWK is printed, for
"operator merchant add --signing-key".`

func cmdFakeMerchant(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("fake-merchant", fakeMerchantSynopsis, stderr)
	protocol := fs.String("protocol", "acp", "acp or ucp")
	addr := fs.String("addr", "127.0.0.1:8090", "`host:port` to listen on")
	apiKey := fs.String("api-key", "", "ACP: the bearer key requests must carry (default none)")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *protocol != "acp" && *protocol != "ucp" {
		return fmt.Errorf("--protocol %q: want acp or ucp", *protocol)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	fm := fakemerchant.New(&fakemerchant.Options{BaseURL: base, APIKey: *apiKey})
	h := fm.ACPHandler()
	if *protocol == "ucp" {
		h = fm.UCPHandler()
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "fake %s merchant at %s\n", strings.ToUpper(*protocol), base)
	if *protocol == "ucp" {
		fmt.Fprintf(stdout, "  profile: %s/.well-known/ucp\n", base)
		jwk, _ := json.Marshal(fm.SigningJWK())
		fmt.Fprintf(stdout, "  signing key (public JWK): %s\n", jwk)
	}
	for _, it := range fakemerchant.Catalogue {
		fmt.Fprintf(stdout, "  %-14s %-40s %8d  %s\n", it.SKU, it.Title, it.PriceMinor, it.Scenario)
	}
	return serveUntil(ctx, srv, ln)
}

const buySynopsis = `buy --agent-key FILE --credential FILE --mandate FILE --merchant ID --rail acp|ucp --line SKU[:QTY] [flags]

Signs a purchase with the agent's key and sends it to POST /buy (or, with
--quote, asks POST /quote for the priced cart without buying). The purchase
names what to buy, not the amount: the server re-reads the merchant's cart
and the gate authorises its total. Prints the HTTP status and the answer:
an Order with its Receipt (200), a held purchase with its approval
challenge (202), or a problem (a cart that is not ready carries its status
and continue link). Exits 0 for 200 and 202, 1 otherwise.`

func cmdBuy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("buy", buySynopsis, stderr)
	af := addAgentFlags(fs)
	merchant := fs.String("merchant", "sandbox-acp", "merchant registry id")
	railName := fs.String("rail", "acp", "acp or ucp: the merchant's protocol")
	currency := fs.String("currency", "USD", "ISO 4217 code")
	lines := fs.String("line", "", "comma-separated `SKU[:QTY]` lines, e.g. sku-mug:2,sku-book")
	cartID := fs.String("cart", "", "buy this cart (the id /quote returned) instead of opening a new checkout session")
	purpose := fs.String("purpose", "purchase from the countersign CLI", "why, for the person who may approve it")
	key := fs.String("idempotency-key", "", "idempotency key (default: a new random one)")
	quoteOnly := fs.Bool("quote", false, "only ask for the priced cart (POST /quote); buy nothing")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *af.credFile == "" || *lines == "" || (!*quoteOnly && !af.signing()) {
		fmt.Fprintln(stderr, "buy: --credential and --line are required, and to buy --agent-key and --mandate")
		fs.Usage()
		return errUsage
	}
	var ls []cart.LineRequest
	for _, l := range strings.Split(*lines, ",") {
		sku, qty, _ := strings.Cut(strings.TrimSpace(l), ":")
		n := int64(1)
		if qty != "" {
			if _, err := fmt.Sscan(qty, &n); err != nil || n < 1 {
				return fmt.Errorf("--line %q: quantity must be a positive integer", l)
			}
		}
		ls = append(ls, cart.LineRequest{ID: sku, Quantity: n})
	}
	authz, err := af.authorization()
	if err != nil {
		return err
	}
	q := commerce.QuoteRequest{Rail: *railName, Merchant: *merchant, Currency: *currency, Lines: ls}
	path, idem, body := "/quote", "", any(q)
	if !*quoteOnly {
		agent, _, err := af.load()
		if err != nil {
			return err
		}
		if *key == "" {
			*key = agentclient.NewIdempotencyKey()
		}
		// The terms of a merchant rail (irreversible, instant) and the
		// envelope are filled as every client of this repository fills them.
		p := commerce.PurchaseRequest{QuoteRequest: q, CartID: *cartID, IdempotencyKey: *key, Purpose: *purpose,
			Terms: pay.Terms{Rail: *railName, Credential: gate.CredentialAPIKey}}
		if err := agent.SignPurchase(&p, ""); err != nil {
			return err
		}
		path, idem, body = "/buy", *key, p
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	status, out, err := postJSON(ctx, af.url(path), authz, idem, raw)
	if err != nil {
		return err
	}
	printStatus(stdout, status, out)
	if status != http.StatusOK && status != http.StatusAccepted {
		return fmt.Errorf("%s not accepted (HTTP %d)", strings.TrimPrefix(path, "/"), status)
	}
	return nil
}

// readStrictJSON decodes the JSON file path named by flag into v, refusing
// members v does not have: a typo in a configuration file is an error,
// never a setting silently left out.
func readStrictJSON(flag, path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
}
