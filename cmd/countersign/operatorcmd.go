package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
)

const operatorSynopsis = `operator <action> --key FILE [--url URL] [flags]

Signs an operator request with your operator key (Svc-Operator header) and
sends it. Every action that changes something needs --rationale (at least 10
characters); it is written into the record with your key id.

  approve         --intent ID --rationale R [--ack] [--mandate-id M] [--challenge C]
  decline         --intent ID --rationale R [--mandate-id M] [--challenge C]
                                                     refuse a held payment for good
  refund          --intent ID [--amount MINOR] --rationale R
  kill-switch     --engage | --release, --rationale R
  reset-breaker   --rationale R
  approvals       [--limit N] [--cursor C]           list held payments: one line each on stderr
                                                     (amount, payee history, velocity, budget left,
                                                     approvals, time left), then the page as JSON
  settling        [--limit N] [--cursor C]           list payments whose outcome is not known yet
  agents create   --name N --agent HEX[,HEX] [--jkt T] --rationale R
  agents list     [--limit N] [--cursor C]
  agents revoke   --id ak_... --rationale R
  webhooks list   [--limit N] [--cursor C]
  webhooks create --endpoint-url URL [--events A,B] [--active=false] --rationale R
                                                     prints the endpoint with its signing secret,
                                                     which the server shows this once: keep it
  webhooks update --id we_... [--endpoint-url URL] [--events A,B] [--active=true|false]
                  [--rotate-secret] --rationale R    a rotated secret is shown this once
  webhooks delete --id we_... --rationale R
  revoke-mandate  --mandate-id M --rationale R
  identity rotate --rationale R                      rotate the deployment's ADP identity key
  counterparty add  --id ID --counterparty-url URL --agent DID|HEX [--name N] [--kind K]
                  [--rails A,B] [--capabilities A,B] --rationale R
  counterparty list [--limit N] [--cursor C]
  revoke-identity --id AGENT|DISCLOSURE [--reason TEXT] --rationale R
  merchant add    --id ID --protocol acp|ucp (--merchant-url URL [--api-key-file F] [--psp-url URL]
                  | --profile-url URL [--signing-key FILE]... [--payment-credential HANDLER=FILE]...
                  [--ready-without-errors])
                  --rationale R
                                                     register a merchant agents may buy from
  mandate         issue a mandate offline (no server): see "operator mandate -h"

webhooks create subscribes to every event kind ("*") unless --events names
some. --endpoint-url is the destination (--url is the server, as for every
action).

approve and decline name the held payment by its id and its mandate; without
--mandate-id the mandate is read from the held list (operator approvals). The
challenge of the payment's 202 answer is optional: the server keeps only its
hash, and when sent it must match.

--base-url is the server's configured public base URL, which the signature
covers; it defaults to --url.`

func cmdOperator(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", operatorSynopsis)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	action, rest := args[0], args[1:]
	if action == "agents" || action == "identity" || action == "counterparty" || action == "merchant" || action == "webhooks" {
		if len(rest) == 0 {
			fmt.Fprintf(stderr, "Usage: countersign %s\n", operatorSynopsis)
			return errUsage
		}
		action, rest = action+" "+rest[0], rest[1:]
	}
	if action == "mandate" {
		return cmdOperatorMandate(rest, stdout, stderr)
	}
	fs := newFlagSet("operator "+action, operatorSynopsis, stderr)
	var c opClient
	c.register(fs)
	rationale := fs.String("rationale", "", "why, in at least 10 characters (written into the record)")
	intent := fs.String("intent", "", "intent id (int_...)")
	challenge := fs.String("challenge", "", "approval challenge from the payment's 202 answer (optional)")
	mandateID := fs.String("mandate-id", "", "mandate id (approve, decline: default the held payment's, from the held list)")
	ack := fs.Bool("ack", false, "acknowledge an irreversible or large payment")
	fs.BoolVar(ack, "acknowledge", false, "same as --ack")
	amount := fs.Int64("amount", 0, "refund amount in minor units (default: all that remains)")
	engage := fs.Bool("engage", false, "engage the kill switch (freeze settlement)")
	release := fs.Bool("release", false, "release the kill switch")
	limit := fs.Int("limit", 20, "page size")
	cursor := fs.String("cursor", "", "page cursor")
	name := fs.String("name", "", "agent key name")
	agents := fs.String("agent", "", "comma-separated agent ids")
	jkt := fs.String("jkt", "", "DPoP JWK thumbprint to bind the key to")
	id := fs.String("id", "", "agent key id (ak_...), counterparty id, webhook endpoint id (we_...), or the agent or disclosure id to revoke")
	endpointURL := fs.String("endpoint-url", "", "webhooks: the endpoint's destination URL (https; http to loopback in sandbox mode)")
	events := fs.String("events", "", "webhooks: comma-separated event kinds to deliver (create: default *, every kind)")
	var active optionalBool
	fs.Var(&active, "active", "webhooks: `true|false`, deliver to the endpoint or not (create: default true; update: unchanged unless given)")
	rotate := fs.Bool("rotate-secret", false, "webhooks update: issue a new signing secret (shown once; the old one signs too for 24 hours)")
	protocol := fs.String("protocol", "", "merchant protocol: acp or ucp")
	merchantURL := fs.String("merchant-url", "", "ACP: the merchant's base URL")
	apiKeyFile := fs.String("api-key-file", "", "ACP: a file holding the merchant's bearer key (sealed by the server, never shown again)")
	pspURL := fs.String("psp-url", "", "ACP: the PSP's base URL (default the merchant's)")
	profileURL := fs.String("profile-url", "", "UCP: the merchant's /.well-known/ucp")
	var signingKeys fileList
	fs.Var(&signingKeys, "signing-key", "UCP: a `file` holding the merchant's public response-signing key (a JWK, or a JSON array of JWKs) to pin; repeatable")
	var credentials fileList
	fs.Var(&credentials, "payment-credential", "UCP: `HANDLER=FILE`, a token credential (read from FILE, sealed by the server, never shown again) for a payment handler that takes one at complete, by its id or name; repeatable")
	readyWithoutErrors := fs.Bool("ready-without-errors", false, "UCP: treat a session the merchant reports incomplete without an error message as ready to complete (for merchants that never report ready_for_complete, such as the protocol's public sample)")
	reason := fs.String("reason", "", "why the identity is revoked, for people reading the record")
	kind := fs.String("kind", "", "counterparty kind: agent (default), merchant or service")
	rails := fs.String("rails", "", "comma-separated rails the counterparty can be paid on")
	caps := fs.String("capabilities", "", "comma-separated capabilities of the counterparty")
	cpURL := fs.String("counterparty-url", "", "the counterparty's base URL (its disclosure is fetched only from there)")
	if err := parseFlags(fs, rest, false); err != nil {
		return err
	}
	if err := c.open(); err != nil {
		return err
	}
	var (
		op, method, path string
		body             any
	)
	switch action {
	case "approve", "decline":
		if *intent == "" {
			return fmt.Errorf("operator %s: --intent is required", action)
		}
		if *mandateID == "" {
			h, err := c.heldIntent(ctx, *intent)
			if err != nil {
				return fmt.Errorf("operator %s: %w", action, err)
			}
			*mandateID = h.MandateID
			// The person sees what they are about to decide, from the
			// server's own list, before the answer.
			fmt.Fprintf(stderr, "%s: %d %s to %s (%s), held under mandate %s\n", h.IntentID, h.Amount.Minor, h.Amount.Currency,
				h.Payee, h.Purpose, h.MandateID)
		}
		if action == "decline" {
			op, method, path = "operator.decline", "POST", "/operator/decline"
			body = pay.DeclineRequest{IntentID: *intent, Challenge: *challenge, MandateID: *mandateID, Rationale: *rationale}
			break
		}
		op, method, path = "operator.approve", "POST", "/operator/approve"
		body = pay.ApproveRequest{IntentID: *intent, Challenge: *challenge, MandateID: *mandateID, Rationale: *rationale, Acknowledged: *ack}
	case "refund":
		op, method, path = "operator.refund", "POST", "/operator/refund"
		req := pay.RefundRequest{IntentID: *intent, Rationale: *rationale}
		if *amount > 0 {
			req.AmountMinor = amount
		}
		body = req
	case "kill-switch":
		if *engage == *release {
			return errors.New("operator kill-switch: give exactly one of --engage or --release")
		}
		op, method, path = "operator.kill_switch", "POST", "/operator/kill-switch"
		body = map[string]any{"engaged": *engage, "rationale": *rationale}
	case "reset-breaker":
		op, method, path = "operator.breaker_reset", "POST", "/operator/circuit-breaker/reset"
		body = map[string]any{"rationale": *rationale}
	case "approvals":
		return c.approvals(ctx, pageQuery(*limit, *cursor), stdout, stderr)
	case "settling":
		op, method, path = "operator.settling", "GET", "/operator/settling?"+pageQuery(*limit, *cursor)
	case "agents create":
		op, method, path = "operator.agents.create", "POST", "/operator/agents"
		body = map[string]any{"name": *name, "agentIds": splitList(*agents), "jkt": *jkt, "rationale": *rationale}
	case "agents list":
		op, method, path = "operator.agents.list", "GET", "/operator/agents?"+pageQuery(*limit, *cursor)
	case "agents revoke":
		op, method = "operator.agents.revoke", "DELETE"
		path = "/operator/agents/" + url.PathEscape(*id) + "?rationale=" + url.QueryEscape(*rationale)
	case "identity rotate":
		op, method, path = "identity.rotate", "POST", "/identity/rotate"
		body = map[string]any{"rationale": *rationale}
	case "counterparty add":
		op, method, path = "identity.counterparties.create", "POST", "/identity/counterparties"
		req := map[string]any{"id": *id, "baseUrl": *cpURL, "agentId": *agents,
			"rails": splitList(*rails), "capabilities": splitList(*caps), "rationale": *rationale}
		// Left out when not given: the server's defaults apply (an empty
		// kind is not one of its values).
		for k, v := range map[string]string{"name": *name, "kind": *kind} {
			if v != "" {
				req[k] = v
			}
		}
		body = req
	case "counterparty list":
		op, method, path = "identity.counterparties.list", "GET", "/identity/counterparties?"+pageQuery(*limit, *cursor)
	case "revoke-identity":
		op, method, path = "identity.revoke", "POST", "/identity/revocations"
		body = map[string]any{"id": *id, "reason": *reason, "rationale": *rationale}
	case "merchant add":
		op, method, path = "commerce.merchants.create", "POST", "/commerce/merchants"
		req := map[string]any{"id": *id, "protocol": *protocol, "baseUrl": *merchantURL, "pspUrl": *pspURL,
			"profileUrl": *profileURL, "rationale": *rationale}
		if *apiKeyFile != "" {
			k, err := os.ReadFile(*apiKeyFile)
			if err != nil {
				return err
			}
			req["apiKey"] = strings.TrimSpace(string(k))
		}
		if len(signingKeys) > 0 {
			keys, err := readSigningKeys(signingKeys)
			if err != nil {
				return err
			}
			req["signingKeys"] = keys
		}
		if len(credentials) > 0 {
			creds, err := readCredentials(credentials)
			if err != nil {
				return err
			}
			req["paymentCredentials"] = creds
		}
		if *readyWithoutErrors {
			req["readyWithoutErrors"] = true
		}
		body = req
	case "webhooks list":
		op, method, path = "webhooks.list", "GET", "/webhooks/endpoints?"+pageQuery(*limit, *cursor)
	case "webhooks create":
		if *endpointURL == "" {
			return errors.New("operator webhooks create: --endpoint-url is required")
		}
		evs := splitList(*events)
		if len(evs) == 0 {
			evs = []string{"*"}
		}
		req := map[string]any{"url": *endpointURL, "events": evs, "rationale": *rationale}
		if active.set {
			req["active"] = active.v
		}
		op, method, path, body = "webhooks.create", "POST", "/webhooks/endpoints", req
	case "webhooks update":
		if *id == "" {
			return errors.New("operator webhooks update: --id is required")
		}
		req := map[string]any{"rationale": *rationale}
		if *endpointURL != "" {
			req["url"] = *endpointURL
		}
		if *events != "" {
			req["events"] = splitList(*events)
		}
		if active.set {
			req["active"] = active.v
		}
		if *rotate {
			req["rotateSecret"] = true
		}
		if len(req) == 1 {
			return errors.New("operator webhooks update: give at least one of --endpoint-url, --events, --active, --rotate-secret")
		}
		op, method, body = "webhooks.update", "PATCH", req
		path = "/webhooks/endpoints/" + url.PathEscape(*id)
	case "webhooks delete":
		if *id == "" {
			return errors.New("operator webhooks delete: --id is required")
		}
		op, method = "webhooks.delete", "DELETE"
		path = "/webhooks/endpoints/" + url.PathEscape(*id) + "?rationale=" + url.QueryEscape(*rationale)
	case "revoke-mandate":
		op, method, path = "mandate.revoke", "POST", "/protocol/mandate/revoke"
		body = map[string]any{"mandateId": *mandateID, "rationale": *rationale}
	default:
		fmt.Fprintf(stderr, "countersign operator: unknown action %q\nUsage: countersign %s\n", action, operatorSynopsis)
		return errUsage
	}
	return c.do(ctx, op, method, path, body, stdout)
}

// optionalBool is a boolean flag that knows whether it was given, for a
// member sent only when the person set it (--active=false is a change;
// no --active leaves the endpoint as it is).
type optionalBool struct{ v, set bool }

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return ""
	}
	return strconv.FormatBool(b.v)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.v, b.set = v, true
	return nil
}

// IsBoolFlag lets --active stand for --active=true.
func (b *optionalBool) IsBoolFlag() bool { return true }

// approvals lists a page of held payments: a line a person reads each by
// on stderr (see heldSummary), then the answer as every action prints it.
func (c *opClient) approvals(ctx context.Context, query string, stdout, stderr io.Writer) error {
	status, out, err := c.send(ctx, "operator.approvals", "GET", "/operator/approvals?"+query, nil)
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		var page pay.HeldPage
		if err := json.Unmarshal(out, &page); err == nil {
			if len(page.Data) == 0 {
				fmt.Fprintln(stderr, "no payment is waiting for approval on this page")
			}
			for _, h := range page.Data {
				fmt.Fprintln(stderr, heldSummary(h))
			}
		}
	}
	printStatus(stdout, status, out)
	return problemError(status, out)
}

// fileList is a repeatable flag of file names.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// readCredentials reads --payment-credential HANDLER=FILE values: the
// token is in a file, never on the command line, where it would stay in
// the shell's history and the process list.
func readCredentials(specs []string) ([]map[string]string, error) {
	var out []map[string]string
	for _, spec := range specs {
		handler, file, ok := strings.Cut(spec, "=")
		if !ok || handler == "" || file == "" {
			return nil, fmt.Errorf("--payment-credential %q: want HANDLER=FILE", spec)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--payment-credential: %w", err)
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("--payment-credential %s: the file is empty", file)
		}
		out = append(out, map[string]string{"handler": handler, "token": token})
	}
	return out, nil
}

// readSigningKeys reads the public JWKs of files: each holds one JWK
// object or a JSON array of them. The server checks each key; a private
// key is refused here, before it leaves this machine.
func readSigningKeys(files []string) ([]json.RawMessage, error) {
	var keys []json.RawMessage
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--signing-key: %w", err)
		}
		b = bytes.TrimSpace(b)
		var batch []json.RawMessage
		if len(b) > 0 && b[0] == '[' {
			err = json.Unmarshal(b, &batch)
		} else {
			batch = []json.RawMessage{b}
		}
		if err != nil {
			return nil, fmt.Errorf("--signing-key %s: %w", name, err)
		}
		for _, k := range batch {
			var m map[string]any
			if err := json.Unmarshal(k, &m); err != nil {
				return nil, fmt.Errorf("--signing-key %s: not a JWK object: %w", name, err)
			}
			if _, private := m["d"]; private {
				return nil, fmt.Errorf("--signing-key %s: holds a private key; give the merchant's public key", name)
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func pageQuery(limit int, cursor string) string {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q.Encode()
}

// opClient sends operator-signed requests.
type opClient struct {
	url, baseURL, keyPath string
	signer                *operator.Signer
}

func (c *opClient) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "server `URL` to send to")
	fs.StringVar(&c.baseURL, "base-url", "", "the server's public base `URL` the signature covers (default --url)")
	fs.StringVar(&c.keyPath, "key", "", "your operator private key `file` (JWK), from: countersign keygen operator")
}

func (c *opClient) open() error {
	if c.keyPath == "" {
		return errors.New("--key FILE is required (your operator private key)")
	}
	k, err := keyfile.Read(c.keyPath)
	if err != nil {
		return err
	}
	if k.KeyID == "" {
		return fmt.Errorf("%s has no kid; the server names operators by kid", c.keyPath)
	}
	c.url = strings.TrimRight(c.url, "/")
	base := strings.TrimRight(firstNonEmpty(c.baseURL, c.url), "/")
	c.signer, err = operator.NewSigner(k.Signer, k.KeyID, base, nil)
	return err
}

// printStatus prints an HTTP answer's status line and its body, indented
// when it is JSON.
func printStatus(w io.Writer, status int, body []byte) {
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") != nil {
		pretty.Write(body)
	}
	fmt.Fprintf(w, "%d %s\n%s\n", status, http.StatusText(status), strings.TrimSpace(pretty.String()))
}

// do signs and sends one request and prints the answer; a problem answer
// is returned as an error carrying its detail, so the exit code is 1.
func (c *opClient) do(ctx context.Context, op, method, path string, body any, stdout io.Writer) error {
	status, out, err := c.send(ctx, op, method, path, body)
	if err != nil {
		return err
	}
	printStatus(stdout, status, out)
	return problemError(status, out)
}

// send signs and sends one request and returns the status and the body.
func (c *opClient) send(ctx context.Context, op, method, path string, body any) (int, []byte, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.signer.Sign(req, op, raw); err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, out, err
}

// problemError is the error of a problem answer (nil below 400): its code
// and detail.
func problemError(status int, body []byte) error {
	if status < 400 {
		return nil
	}
	var p struct{ Code, Detail string }
	_ = json.Unmarshal(body, &p)
	return fmt.Errorf("%s: %s", firstNonEmpty(p.Code, strconv.Itoa(status)+" "+http.StatusText(status)), p.Detail)
}

// heldIntent finds an intent in the held list (GET /operator/approvals),
// paging through it. An approval or a decline names the held payment by
// its id and its mandate id; the challenge of the agent's 202 answer is
// stored only hashed, so no list can give it back, and the server does not
// need it from an operator (DESIGN §5).
func (c *opClient) heldIntent(ctx context.Context, intentID string) (pay.HeldIntent, error) {
	cursor := ""
	for {
		status, out, err := c.send(ctx, "operator.approvals", "GET", "/operator/approvals?"+pageQuery(100, cursor), nil)
		if err != nil {
			return pay.HeldIntent{}, err
		}
		if err := problemError(status, out); err != nil {
			return pay.HeldIntent{}, fmt.Errorf("reading the held list: %w", err)
		}
		var page pay.HeldPage
		if err := json.Unmarshal(out, &page); err != nil {
			return pay.HeldIntent{}, fmt.Errorf("reading the held list: %w", err)
		}
		for _, h := range page.Data {
			if h.IntentID == intentID {
				return h, nil
			}
		}
		if !page.HasMore || page.NextCursor == nil {
			return pay.HeldIntent{}, fmt.Errorf("%s is not waiting for approval (it is not in the held list); give --mandate-id to ask the server anyway", intentID)
		}
		cursor = *page.NextCursor
	}
}

const mandateSynopsis = `operator mandate --key FILE --agent HEX [flags] [--out FILE]

Issues a mandate offline: a compact JWS signed by your operator key that
lets one agent pay within the limits given here. Prints it (or writes
--out). Amounts are minor units; thresholds are inclusive (a payment at
or above --confirm-above waits for approval).`

func cmdOperatorMandate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("operator mandate", mandateSynopsis, stderr)
	keyPath := fs.String("key", "", "your operator private key `file` (JWK)")
	agent := fs.String("agent", "", "the agent id (64 hex Ed25519 public key)")
	id := fs.String("id", "", "mandate id (default: a new random one)")
	payees := fs.String("payees", "*", "comma-separated payees: exact ids, *.suffix patterns, or *")
	currency := fs.String("currency", "USD", "currency the mandate spends")
	perTx := fs.Int64("per-tx-cap", 50_000, "largest single payment")
	perPeriod := fs.Int64("period-cap", 1_000_000, "most spent per period (settled + reserved)")
	period := fs.String("period", "day", "day, week (ISO, from Monday) or month, in UTC")
	rails := fs.String("rails", "sandbox-card,sandbox-bank,sandbox-chain", "comma-separated rails")
	confirm := fs.Int64("confirm-above", 10_001, "payments at or above this wait for an operator")
	irrev := fs.Int64("irreversible-confirm-above", 10_001, "irreversible payments at or above this wait for an operator")
	approvals := fs.Int("approvals", 1, "distinct operators needed to release a held payment")
	velocity := fs.String("velocity", "", "at most COUNT payments per SECONDS, as COUNT/SECONDS (default: no limit)")
	expires := fs.Duration("expires", 30*24*time.Hour, "how long the mandate is valid")
	out := fs.String("out", "", "write the mandate to this `file` instead of stdout")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *keyPath == "" || *agent == "" {
		fs.Usage()
		return errUsage
	}
	k, err := keyfile.Read(*keyPath)
	if err != nil {
		return err
	}
	if *id == "" {
		*id = "mdt_" + strings.ToLower(strconv.FormatInt(time.Now().UnixNano(), 36))
	}
	now := time.Now().UTC().Truncate(time.Second)
	claims := pay.MandateClaims{
		ID: *id, Agent: *agent, IssuedAt: now, ExpiresAt: now.Add(*expires),
		Payees: splitList(*payees), Currency: *currency, PerTxCapMinor: *perTx, PerPeriodCapMinor: *perPeriod,
		Period: gate.Period(*period), Rails: splitList(*rails), ConfirmAboveMinor: *confirm,
		IrreversibleConfirmAboveMinor: *irrev, Approvals: *approvals,
	}
	if *velocity != "" {
		n, s, ok := strings.Cut(*velocity, "/")
		count, err1 := strconv.ParseInt(n, 10, 64)
		secs, err2 := strconv.ParseInt(s, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("--velocity %q: want COUNT/SECONDS, e.g. 10/60", *velocity)
		}
		claims.Velocity = gate.Velocity{Count: count, Seconds: secs}
	}
	tok, err := pay.SignMandate(claims, k.Signer, k.KeyID)
	if err != nil {
		return err
	}
	return emitMandate(stdout, "mandate", *id, tok, *out, claims.ExpiresAt)
}

// emitMandate prints a mandate token, or writes it to out and says so.
func emitMandate(stdout io.Writer, what, id, tok, out string, expires time.Time) error {
	if out == "" {
		fmt.Fprintln(stdout, tok)
		return nil
	}
	if err := os.WriteFile(out, []byte(tok+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s %s to %s (expires %s)\n", what, id, out, expires.Format(time.RFC3339))
	return nil
}
