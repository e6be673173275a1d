package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
)

const paySynopsis = `pay --agent-key FILE --credential FILE --mandate FILE --payee REF --amount MINOR --currency CODE --rail NAME [flags]

Signs a payment instruction with the agent's key and sends it to POST /pay.
Prints the HTTP status and the answer: a Receipt (200), a held payment with
its approval challenge (202), or a problem. Exits 0 for 200 and 202, 1 for
any problem. Re-running with the same --idempotency-key replays the first
answer instead of paying twice.`

func cmdPay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pay", paySynopsis, stderr)
	af := addAgentFlags(fs)
	payee := fs.String("payee", "", "payee reference, e.g. acct:seller.example")
	amount := fs.Int64("amount", 0, "amount in minor units (1250 is 12.50 USD)")
	currency := fs.String("currency", "USD", "ISO 4217 code or CAIP-19 asset id")
	railName := fs.String("rail", "sandbox-card", "settlement rail")
	purpose := fs.String("purpose", "payment from the countersign CLI", "why, for the person who may approve it")
	key := fs.String("idempotency-key", "", "idempotency key (default: a new random one)")
	reversibility := fs.String("reversibility", "", "reversible or irreversible (default: the sandbox rail's fact)")
	finality := fs.String("finality", "", "instant or deferred (default: the sandbox rail's fact)")
	capital := fs.String("capital-source", "payer", "payer, credit or escrow")
	presence := fs.String("presence", "delegated", "delegated or present")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if !af.signing() || *payee == "" || *amount <= 0 {
		fmt.Fprintln(stderr, "pay: --agent-key, --credential, --mandate, --payee and a positive --amount are required")
		fs.Usage()
		return errUsage
	}
	agent, cred, err := af.load()
	if err != nil {
		return err
	}
	if *key == "" {
		*key = agentclient.NewIdempotencyKey()
	}
	// Terms left empty are the rail's facts (agentclient.FillTerms), as
	// every client of this repository fills them.
	in := &pay.Instruction{
		IdempotencyKey: *key, Payee: *payee,
		Amount:  pay.Amount{Minor: *amount, Currency: *currency},
		Purpose: *purpose,
		Terms: pay.Terms{Rail: *railName, Reversibility: gate.Reversibility(*reversibility), Finality: gate.Finality(*finality),
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalSource(*capital), Presence: gate.Presence(*presence)},
	}
	if err := agent.SignPayment(in, ""); err != nil {
		return err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	status, out, err := postJSON(ctx, af.url("/pay"), cred, *key, body)
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, out, "", "  ") != nil {
		pretty.Write(out)
	}
	fmt.Fprintf(stdout, "%d %s (idempotency key %s)\n%s\n", status, http.StatusText(status), *key, strings.TrimSpace(pretty.String()))
	if status != http.StatusOK && status != http.StatusAccepted {
		return fmt.Errorf("payment not accepted (HTTP %d)", status)
	}
	return nil
}

func postJSON(ctx context.Context, u, authz, idemKey string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authz)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

// agentFlags are the flags of a command that signs as an agent and sends
// the request with the agent's credential: pay, buy, x402 fetch.
type agentFlags struct {
	base, agentKey, credFile, mandateFile *string
}

func addAgentFlags(fs *flag.FlagSet) agentFlags {
	return agentFlags{
		base:        fs.String("url", "http://127.0.0.1:8080", "server base `URL`"),
		agentKey:    fs.String("agent-key", "", "agent private key `file` (JWK)"),
		credFile:    fs.String("credential", "", "agent credential `file`"),
		mandateFile: fs.String("mandate", "", "mandate `file` (compact JWS)"),
	}
}

// signing reports whether every flag a signed request needs is set.
func (f agentFlags) signing() bool {
	return *f.agentKey != "" && *f.credFile != "" && *f.mandateFile != ""
}

func (f agentFlags) url(path string) string { return strings.TrimRight(*f.base, "/") + path }

// authorization reads the credential as an Authorization header value.
func (f agentFlags) authorization() (string, error) {
	cred, err := os.ReadFile(*f.credFile)
	if err != nil {
		return "", err
	}
	return "Bearer " + strings.TrimSpace(string(cred)), nil
}

// load reads the agent's key, its mandate and its credential (as an
// Authorization header value).
func (f agentFlags) load() (*agentclient.Agent, string, error) {
	priv, _, err := keyfile.ReadEd25519(*f.agentKey)
	if err != nil {
		return nil, "", err
	}
	mandate, err := os.ReadFile(*f.mandateFile)
	if err != nil {
		return nil, "", err
	}
	authz, err := f.authorization()
	if err != nil {
		return nil, "", err
	}
	return &agentclient.Agent{Key: priv, Mandate: strings.TrimSpace(string(mandate))}, authz, nil
}
