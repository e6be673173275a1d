package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
	vkey, proof, err := offlineArgs("proof verify", args, stderr)
	if err != nil {
		return err
	}
	v := protocol.VerifyProof(vkey, proof)
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintln(stdout, string(b))
	if !v.Valid {
		return errors.New("the proof does not verify")
	}
	return nil
}
