package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/memory"
)

const memorySynopsis = `memory <command> [flags]

Agent commands (an agent credential and a memory mandate):
  remember   --namespace NS --subject S --body JSON [--kind K] [--valid-from T] [--valid-to T]
             [--source KIND:REF] [--derived-from ID,..] [--cites ID,..] [--supersedes ID,..]
  recall     --namespace NS [--subject S] [--kind K] [--valid-at T] [--tx-at T] [--limit N]
             [--cursor C] [--exclude-tainted]
  assemble   --namespace NS --max-tokens N [--query Q] [--subject S] [--valid-at T] [--tx-at T]
             [--include-tainted]
  (each takes --url URL --credential FILE --mandate FILE [--out FILE])

Anyone, offline, with only the deployment's record verifier key:
  verify     [--key FILE | --data DIR] FILE     check a record, page, context or erasure proof

Operator (signed with your operator key; see "countersign operator -h"):
  mandate    --key FILE --agent HEX --namespace NS [--read] [--write] [--erase]
             [--as-of-floor T] [--expires D] [--id ID] [--out FILE]   issue a memory mandate offline
  forget     --key FILE --mandate FILE --root mem_... --rationale R   erase a record and what derives from it
  taint      --key FILE (--source KIND:REF | --record mem_...) --rationale R

Times T are RFC 3339 (2026-11-25T10:00:00Z).`

func cmdMemory(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", memorySynopsis)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "remember", "recall", "assemble":
		return cmdMemoryAgent(ctx, args[0], args[1:], stdout, stderr)
	case "verify":
		return cmdMemoryVerify(args[1:], stdout, stderr)
	case "mandate":
		return cmdMemoryMandate(args[1:], stdout, stderr)
	case "forget", "taint":
		return cmdMemoryOperator(ctx, args[0], args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "countersign memory: unknown command %q\nUsage: countersign %s\n", args[0], memorySynopsis)
	return errUsage
}

func parseTimeFlag(name, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: want RFC 3339, e.g. 2026-11-25T10:00:00Z", name, v)
	}
	return &t, nil
}

func parseSource(v string) (memory.Source, error) {
	kind, ref, ok := strings.Cut(v, ":")
	if !ok || kind == "" || ref == "" {
		return memory.Source{}, fmt.Errorf("--source %q: want KIND:REF, e.g. tool:weather or url:https://example.com", v)
	}
	return memory.Source{Kind: kind, Ref: ref}, nil
}

func readTrimmed(flagName, path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("--%s FILE is required", flagName)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", flagName, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func cmdMemoryAgent(ctx context.Context, command string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("memory "+command, memorySynopsis, stderr)
	base := fs.String("url", "http://127.0.0.1:8080", "server base `URL`")
	credFile := fs.String("credential", "", "agent credential `file`")
	mandateFile := fs.String("mandate", "", "memory mandate `file` (compact JWS)")
	out := fs.String("out", "", "also write the signed answer to this `file` (for memory verify)")
	ns := fs.String("namespace", "", "namespace")
	subject := fs.String("subject", "", "subject")
	kind := fs.String("kind", "", "kind (remember: default note)")
	body := fs.String("body", "", "remember: the fact, as JSON (a bare word is taken as a JSON string)")
	validFrom := fs.String("valid-from", "", "remember: when the fact became true (default now)")
	validTo := fs.String("valid-to", "", "remember: when it stopped being true (default open-ended)")
	src := fs.String("source", "", "remember: who said it, KIND:REF (default agent:<the mandate's agent>)")
	derived := fs.String("derived-from", "", "remember: comma-separated record ids it derives from")
	cites := fs.String("cites", "", "remember: comma-separated record ids it cites")
	supersedes := fs.String("supersedes", "", "remember: comma-separated record ids it replaces")
	idem := fs.String("idempotency-key", "", "remember: idempotency key (default: a new random one)")
	validAt := fs.String("valid-at", "", "recall/assemble: valid time to look at (default now)")
	txAt := fs.String("tx-at", "", "recall/assemble: what the store knew at this time (default now)")
	limit := fs.Int("limit", 0, "recall: page size 1-100 (default 20)")
	cursor := fs.String("cursor", "", "recall: nextCursor of the previous page")
	exclude := fs.Bool("exclude-tainted", false, "recall: leave tainted records out")
	include := fs.Bool("include-tainted", false, "assemble: let tainted records in (left out by default)")
	maxTokens := fs.Int("max-tokens", 0, "assemble: the token budget")
	query := fs.String("query", "", "assemble: what the context is for")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	cred, err := readTrimmed("credential", *credFile)
	if err != nil {
		return err
	}
	mandate, err := readTrimmed("mandate", *mandateFile)
	if err != nil {
		return err
	}
	va, err := parseTimeFlag("valid-at", *validAt)
	if err != nil {
		return err
	}
	ta, err := parseTimeFlag("tx-at", *txAt)
	if err != nil {
		return err
	}
	var req any
	switch command {
	case "remember":
		if *kind == "" {
			*kind = "note"
		}
		from, err := parseTimeFlag("valid-from", *validFrom)
		if err != nil {
			return err
		}
		if from == nil {
			now := time.Now().UTC()
			from = &now
		}
		to, err := parseTimeFlag("valid-to", *validTo)
		if err != nil {
			return err
		}
		raw := json.RawMessage(*body)
		if !json.Valid(raw) {
			b, _ := json.Marshal(*body)
			raw = b
		}
		source := memory.Source{Kind: "agent", Ref: mandateSubject(mandate)}
		if *src != "" {
			if source, err = parseSource(*src); err != nil {
				return err
			}
		}
		var edges []memory.Edge
		for typ, list := range map[string]string{memory.EdgeDerivedFrom: *derived, memory.EdgeCites: *cites, memory.EdgeSupersedes: *supersedes} {
			for _, id := range splitList(list) {
				edges = append(edges, memory.Edge{Type: typ, To: id})
			}
		}
		if *idem == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			*idem = hex.EncodeToString(b)
		}
		req = memory.RememberRequest{Mandate: mandate, IdempotencyKey: *idem, Namespace: *ns, Subject: *subject, Kind: *kind,
			Body: raw, ValidFrom: *from, ValidTo: to, Source: source, Edges: edges}
	case "recall":
		req = memory.RecallRequest{Mandate: mandate, Namespace: *ns, ValidAt: va, TxAt: ta, Subject: *subject, Kind: *kind,
			Limit: *limit, Cursor: *cursor, ExcludeTainted: *exclude}
	case "assemble":
		ex := !*include
		req = memory.AssembleRequest{Mandate: mandate, Namespace: *ns, Budget: memory.Budget{MaxTokens: *maxTokens},
			Query: *query, Subject: *subject, ValidAt: va, TxAt: ta, ExcludeTainted: &ex}
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	status, answer, err := postJSON(ctx, strings.TrimRight(*base, "/")+"/memory/"+command, "Bearer "+cred, "", b)
	if err != nil {
		return err
	}
	return printAnswer(stdout, status, answer, *out)
}

// mandateSubject reads the agent id a mandate names (its sub), for the
// default source of a remembered fact; the server checks the mandate.
func mandateSubject(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var c struct{ Sub string }
			if json.Unmarshal(b, &c) == nil && c.Sub != "" {
				return c.Sub
			}
		}
	}
	return "cli"
}

// printAnswer prints a JSON answer indented; a 2xx answer is also written
// to out when given, exactly as received (its signature covers it).
func printAnswer(stdout io.Writer, status int, answer []byte, out string) error {
	printStatus(stdout, status, answer)
	if status/100 != 2 {
		return fmt.Errorf("refused (HTTP %d)", status)
	}
	if out != "" {
		if err := os.WriteFile(out, answer, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", out)
	}
	return nil
}

func cmdMemoryVerify(args []string, stdout, stderr io.Writer) error {
	vkey, artifact, err := offlineArgs("memory verify", args, stderr)
	if err != nil {
		return err
	}
	v := memory.Verify(vkey, artifact)
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if !v.Holds {
		return errors.New("the artifact does not hold")
	}
	return nil
}

// offlineArgs reads the arguments of an offline check, "NAME [--key FILE
// | --data DIR] FILE" (the file first or last): the record's verifier key
// (--key, or record.pub in the data directory) and the file's bytes.
func offlineArgs(name string, args []string, stderr io.Writer) (vkey string, file []byte, err error) {
	fs := newFlagSet(name, name+" [--key FILE | --data DIR] FILE", stderr)
	keyPath := fs.String("key", "", "record verifier key `file` (default <data>/record.pub)")
	data := fs.String("data", "countersign-data", "data `directory` whose record.pub to use")
	var path string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		path, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", nil, err
		}
		return "", nil, errUsage
	}
	if path == "" && fs.NArg() == 1 {
		path = fs.Arg(0)
	} else if fs.NArg() != 0 || path == "" {
		fs.Usage()
		return "", nil, errUsage
	}
	kp := *keyPath
	if kp == "" {
		kp = filepath.Join(*data, recordPubFile)
	}
	if vkey, err = readTrimmed("key", kp); err != nil {
		return "", nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, err
	}
	return vkey, bytes.TrimSpace(b), nil
}

func cmdMemoryMandate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("memory mandate", memorySynopsis, stderr)
	keyPath := fs.String("key", "", "your operator private key `file` (JWK)")
	agent := fs.String("agent", "", "the agent id (64 hex Ed25519 public key)")
	ns := fs.String("namespace", "", "the namespace, or * for every namespace")
	read := fs.Bool("read", false, "grant canRead (recall, assemble)")
	write := fs.Bool("write", false, "grant canWrite (remember)")
	erase := fs.Bool("erase", false, "grant canErase (forget, with the operator credential)")
	floor := fs.String("as-of-floor", "", "the earliest transaction time the agent may recall (RFC 3339; default none)")
	expires := fs.Duration("expires", 30*24*time.Hour, "how long the mandate is valid")
	id := fs.String("id", "", "mandate id (default: a new random one)")
	out := fs.String("out", "", "write the mandate to this `file` instead of stdout")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if *keyPath == "" || *agent == "" || *ns == "" {
		fs.Usage()
		return errUsage
	}
	k, err := keyfile.Read(*keyPath)
	if err != nil {
		return err
	}
	if *id == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		*id = "mm_" + hex.EncodeToString(b)
	}
	now := time.Now().UTC().Truncate(time.Second)
	c := memory.MandateClaims{ID: *id, Agent: *agent, IssuedAt: now, ExpiresAt: now.Add(*expires), Namespace: *ns,
		CanRead: *read, CanWrite: *write, CanErase: *erase}
	if f, err := parseTimeFlag("as-of-floor", *floor); err != nil {
		return err
	} else if f != nil {
		c.AsOfFloor = f.UTC()
	}
	tok, err := memory.SignMandate(c, k.Signer, k.KeyID)
	if err != nil {
		return err
	}
	return emitMandate(stdout, "memory mandate", *id, tok, *out, c.ExpiresAt)
}

func cmdMemoryOperator(ctx context.Context, command string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("memory "+command, memorySynopsis, stderr)
	var c opClient
	c.register(fs)
	rationale := fs.String("rationale", "", "why, in at least 10 characters (written into the record)")
	mandateFile := fs.String("mandate", "", "forget: memory mandate `file` granting canErase")
	root := fs.String("root", "", "forget: the record to erase (mem_...)")
	src := fs.String("source", "", "taint: the source to mark untrusted, KIND:REF")
	record := fs.String("record", "", "taint: one record to taint (mem_...)")
	out := fs.String("out", "", "forget: also write the erasure proof to this `file`")
	if err := parseFlags(fs, args, false); err != nil {
		return err
	}
	if err := c.open(); err != nil {
		return err
	}
	var body any
	op := "memory." + command
	switch command {
	case "forget":
		mandate, err := readTrimmed("mandate", *mandateFile)
		if err != nil {
			return err
		}
		body = memory.ForgetRequest{Mandate: mandate, RootID: *root, Rationale: *rationale}
	case "taint":
		q := memory.TaintRequest{RecordID: *record, Rationale: *rationale}
		if *src != "" {
			s, err := parseSource(*src)
			if err != nil {
				return err
			}
			q.Source = &s
		}
		body = q
	}
	if *out == "" {
		return c.do(ctx, op, "POST", "/memory/"+command, body, stdout)
	}
	var buf bytes.Buffer
	if err := c.do(ctx, op, "POST", "/memory/"+command, body, &buf); err != nil {
		stdout.Write(buf.Bytes())
		return err
	}
	stdout.Write(buf.Bytes())
	return writeJSONFromOutput(buf.Bytes(), *out, stdout)
}

// writeJSONFromOutput writes the JSON object that opClient.do printed to
// out. do prints the answer indented, which is the same JSON value; the
// signature covers the canonical form, so the indentation does not matter.
func writeJSONFromOutput(printed []byte, out string, stdout io.Writer) error {
	i := bytes.IndexByte(printed, '{')
	if i < 0 {
		return errors.New("no JSON answer to write")
	}
	if err := os.WriteFile(out, printed[i:], 0o600); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", out)
	return nil
}
