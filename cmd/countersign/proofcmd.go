package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/protocol"
)

const proofSynopsis = `proof <command> [flags]

Anyone, offline, with only the deployment's record verifier key:
  verify     [--key FILE | --data DIR] FILE     check a proof of enforcement

A proof of enforcement is the answer of proof.get (for example written by
"countersign protocol proof.get '{"intentId":"int_..."}' --out FILE"): the
gate's decision on one intent, the policy hash in force, and every record
entry about the intent with its inclusion proof against one signed
checkpoint. verify prints the verification and exits 1 when the proof does
not verify, naming the first check that failed.`

func cmdProof(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: countersign %s\n", proofSynopsis)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	switch args[0] {
	case "verify":
		return cmdProofVerify(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "countersign proof: unknown command %q\nUsage: countersign %s\n", args[0], proofSynopsis)
	return errUsage
}

// cmdProofVerify finds the verifier key as memory verify does: --key, or
// record.pub in the data directory.
func cmdProofVerify(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("proof verify", "proof verify [--key FILE | --data DIR] FILE", stderr)
	keyPath := fs.String("key", "", "record verifier key `file` (default <data>/record.pub)")
	data := fs.String("data", "countersign-data", "data `directory` whose record.pub to use")
	// The file may come first or last.
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() != 0 {
		fs.Usage()
		return errUsage
	}
	if file == "" {
		fs.Usage()
		return errUsage
	}
	path := *keyPath
	if path == "" {
		path = filepath.Join(*data, recordPubFile)
	}
	vkey, err := readTrimmed("key", path)
	if err != nil {
		return err
	}
	proof, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	v := protocol.VerifyProof(vkey, bytes.TrimSpace(proof))
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if !v.Valid {
		return errors.New("the proof does not verify")
	}
	return nil
}
