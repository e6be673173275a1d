package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
)

const protocolSynopsis = `protocol list
protocol METHOD [BODY] [flags]
protocol sign --key FILE (--bytes B64URL | --evidence STATEMENT)

Calls one method of the protocol surface, POST /protocol/{namespace}/{method}:
METHOD is its id (hold.place, session.open, proof.get, ...; "protocol list"
prints them all, from the same declarations the server serves). BODY is the
JSON request, or @FILE to read it from a file (default {}).

Agent methods need --credential; --mandate also fills the "mandate" of
session.open and mandate.verify. A body with a "spend" object is a payment
instruction: the CLI fills what is missing (envelope from --agent-key and
--mandate, terms from the sandbox rail's facts, a random idempotencyKey, a
purpose, USD) and signs it for METHOD with the agent's key. Overrides
(mandate.revoke, revocation.revoke_identity) are signed with --key, your
operator key, and need a "rationale" of at least 10 characters in BODY.

Prints the HTTP status and the answer; --out also writes a 2xx answer to a
file as received (proof.get's answer verifies offline with
"countersign proof verify FILE"). Exits 1 on any problem.

"protocol sign" is the counterparty's side, for tests and walkthroughs: with
its Ed25519 key (JWK) it signs the signingBytes of terms or an offer
(--bytes, base64url as the answer carries them), or a piece of evidence
(--evidence, the statement JSON, which names its subject), and prints the
base64url signature. With neither it prints the key's agent id.`

func cmdProtocol(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(stderr, "usage: countersign "+strings.ReplaceAll(protocolSynopsis, "\nprotocol", "\n       countersign protocol"))
		return errUsage
	}
	if args[0] == "sign" {
		return cmdProtocolSign(args[1:], stdout, stderr)
	}
	if args[0] == "list" {
		for _, m := range protocol.Methods() {
			cred := "agent"
			if m.Credential == contract.CredentialOperator {
				cred = "operator"
			}
			fmt.Fprintf(stdout, "%-32s %-8s %s\n", m.ID(), cred, m.Summary)
		}
		return nil
	}
	m, ok := protocol.Lookup(args[0])
	if !ok {
		return fmt.Errorf("protocol: no method %q (countersign protocol list)", args[0])
	}
	args = args[1:]
	body := "{}"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		body, args = args[0], args[1:]
	}
	fs := newFlagSet("protocol "+m.ID(), protocolSynopsis, stderr)
	var oc opClient
	oc.register(fs)
	credFile := fs.String("credential", "", "agent credential `file` (agent methods)")
	agentKey := fs.String("agent-key", "", "agent private key `file` (JWK), to sign a spend")
	mandateFile := fs.String("mandate", "", "mandate `file` (compact JWS), the spend's envelope")
	out := fs.String("out", "", "also write a 2xx answer to this `file`")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if rest, ok := strings.CutPrefix(body, "@"); ok {
		b, err := os.ReadFile(rest)
		if err != nil {
			return err
		}
		body = string(b)
	}
	var req map[string]any
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("protocol: BODY is not a JSON object: %w", err)
	}
	if _, ok := req["mandate"]; !ok && *mandateFile != "" && m.Request.Kind() == reflect.Struct {
		// session.open and mandate.verify take the mandate token itself.
		if _, has := m.Request.FieldByName("Mandate"); has {
			tok, err := readTrimmed("mandate", *mandateFile)
			if err != nil {
				return err
			}
			req["mandate"] = tok
		}
	}
	if spend, ok := req["spend"].(map[string]any); ok {
		signed, err := signSpendFor(m.ID(), spend, *agentKey, *mandateFile)
		if err != nil {
			return err
		}
		req["spend"] = signed
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if m.Credential == contract.CredentialOperator {
		if err := oc.open(); err != nil {
			return err
		}
		var buf bytes.Buffer
		return writeOut(oc.do(ctx, m.ID(), "POST", m.Path(), json.RawMessage(raw), io.MultiWriter(stdout, &buf)), &buf, *out)
	}
	cred, err := readTrimmed("credential", *credFile)
	if err != nil {
		return err
	}
	status, answer, err := postJSON(ctx, strings.TrimRight(oc.url, "/")+m.Path(), "Bearer "+cred, "", raw)
	if err != nil {
		return err
	}
	return printAnswer(stdout, status, answer, *out)
}

// writeOut writes the JSON part of an operator answer to out.
func writeOut(err error, printed *bytes.Buffer, out string) error {
	if err != nil || out == "" {
		return err
	}
	_, answer, _ := strings.Cut(printed.String(), "\n")
	return os.WriteFile(out, []byte(answer), 0o600)
}

// signSpendFor completes a spend object and signs it for method.
func signSpendFor(method string, spend map[string]any, agentKeyPath, mandatePath string) (*pay.Instruction, error) {
	if agentKeyPath == "" || mandatePath == "" {
		return nil, errors.New("protocol: a spend needs --agent-key and --mandate to be signed")
	}
	priv, _, err := keyfile.ReadEd25519(agentKeyPath)
	if err != nil {
		return nil, err
	}
	mandate, err := readTrimmed("mandate", mandatePath)
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(spend)
	var in pay.Instruction
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("protocol: spend: %w", err)
	}
	// What is missing is filled as every client of this repository fills
	// it (agentclient): key, terms from the rail's facts, USD, envelope.
	in.Envelope = pay.Envelope{}
	if in.Purpose == "" {
		in.Purpose = method + " from the countersign CLI"
	}
	agent := &agentclient.Agent{Key: priv, Mandate: mandate}
	if err := agent.SignSpend(method, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// cmdProtocolSign signs as a counterparty would: terms, offers, evidence.
func cmdProtocolSign(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("protocol sign", protocolSynopsis, stderr)
	keyPath := fs.String("key", "", "the signer's Ed25519 private key `file` (JWK)")
	msg := fs.String("bytes", "", "signingBytes to sign, `base64url` (terms, offers)")
	statement := fs.String("evidence", "", "an evidence `statement` (JSON object with a subject member) to sign")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	priv, _, err := keyfile.ReadEd25519(*keyPath)
	if err != nil {
		return err
	}
	switch {
	case *msg != "" && *statement != "":
		return errors.New("protocol sign: --bytes or --evidence, not both")
	case *msg != "":
		b, err := base64.RawURLEncoding.DecodeString(*msg)
		if err != nil {
			return fmt.Errorf("protocol sign: --bytes: %w", err)
		}
		fmt.Fprintln(stdout, base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, b)))
	case *statement != "":
		var head struct {
			Subject string `json:"subject"`
		}
		if err := json.Unmarshal([]byte(*statement), &head); err != nil || head.Subject == "" {
			return errors.New("protocol sign: --evidence must be a JSON object with a subject member")
		}
		sig, err := protocol.SignEvidence([]byte(*statement), head.Subject, priv)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, sig)
	default:
		fmt.Fprintln(stdout, hex.EncodeToString(priv.Public().(ed25519.PublicKey)))
	}
	return nil
}
