package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/store/pebblestore"
)

const agentsSynopsis = `agents create --data DIR --name NAME --agent HEX[,HEX...] [--jkt THUMBPRINT]

Issues an agent credential directly in a stopped server's data directory and
prints it once; only its hash is stored. The key may act for the listed agent
ids (64-hex Ed25519 public keys). The issuance is written to the record with
the local user as the operator.`

func cmdAgents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", agentsSynopsis)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errUsage
	}
	fs := newFlagSet("agents create", agentsSynopsis, stderr)
	dir := fs.String("data", "countersign-data", "data `directory` of a stopped server")
	name := fs.String("name", "", "a name for the key, for people reading the record (required)")
	agents := fs.String("agent", "", "comma-separated agent `ids` the key may act for (required)")
	jkt := fs.String("jkt", "", "bind the key to a DPoP key with this JWK `thumbprint` (optional)")
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	var ids []string
	for _, a := range strings.Split(*agents, ",") {
		if a = strings.TrimSpace(a); a != "" {
			ids = append(ids, a)
		}
	}
	keys, closeFn, err := openAgentKeys(ctx, *dir)
	if err != nil {
		return err
	}
	defer closeFn()
	iss, err := keys.Create(ctx, auth.CreateRequest{Name: *name, AgentIDs: ids, JKT: *jkt}, localOperator(), "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "agent key %s created for %d agent id(s).\ncredential (shown once, store it now):\n%s\n", iss.ID, len(iss.AgentIDs), iss.Credential)
	return nil
}

// localOperator names the person running a data-directory command in the
// record: whoever can write the data directory holds operator authority.
func localOperator() audit.Actor {
	id := "local-cli"
	if u, err := user.Current(); err == nil && u.Username != "" {
		id = "local-cli:" + u.Username
	}
	return audit.Actor{Kind: "operator", ID: id}
}

// openAgentKeys opens a data directory with its record key for writing.
func openAgentKeys(ctx context.Context, dir string) (*auth.Keys, func(), error) {
	key, _, err := loadRecordKey(dir, "", false)
	if err != nil {
		return nil, nil, err
	}
	st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w (is a server still running on it?)", dir, err)
	}
	lg, err := audit.Open(ctx, st, key, &audit.Options{Origin: dataOrigin(dir, "", key.Public().(ed25519.PublicKey))})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return auth.New(st, lg, nil), func() { st.Close() }, nil
}

// quietLogger is the logger of one-shot commands: storage engine chatter is
// noise to a person at a terminal, warnings are not.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
