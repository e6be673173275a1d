// Command countersign runs the Countersign reference server and carries the
// client-side tools a person needs around it: key generation and
// verification of the signed record.
//
// Run "countersign help" for the list of commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `countersign — payments and purchases by automated agents, under human oversight.

Usage:
  countersign <command> [flags]

Commands:
  serve              run the reference server (sandbox mode by default)
  keygen             generate a key file (record, operator or agent key)
  keys               print this deployment's public keys: its ADP identity and record verifier
  agents create      issue an agent credential in a data directory
  pay                sign a payment instruction with an agent key and send it
  operator           operator actions, signed with your operator key (approve, refund,
                     kill-switch, reset-breaker, approvals, agents, revoke-mandate, mandate,
                     identity rotate, counterparty add|list, revoke-identity)
  audit verify       verify the signed record, from a data directory or a server URL
  audit checkpoint   print the record's latest signed checkpoint
  audit bench        append synthetic entries to a record, Pebble or PostgreSQL (load and crash testing)
  doctor             check a data directory or a running server and print what to fix
  buy                quote or buy from a merchant (ACP or UCP) with an agent key
  fake-merchant      run a fake ACP or UCP merchant (tests and demos)
  x402 fetch         fetch an HTTP resource through the gate, paying its x402 price with an agent key
  fake-x402          run a fake x402 resource server and facilitator (tests and demos)
  memory             remember, recall, assemble, verify offline; operator: mandate, forget, taint
  protocol           call a method of the protocol surface (hold.place, session.open, proof.get, ...)
  mcp                serve an agent's tools over the Model Context Protocol (stdio or streamable HTTP)
  proof verify       verify a proof of enforcement offline with the record's verifier key
  loadtest           measure POST /pay (load generator and a minimal baseline server)
  version            print the version

Run "countersign <command> -h" for the flags of a command.
Every flag of serve can also be set as COUNTERSIGN_<FLAG> in the environment
(for example COUNTERSIGN_ADDR=127.0.0.1:9090); a flag on the command line wins.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line; it returns the process exit code so tests
// can drive the binary's logic without a subprocess.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = cmdServe(ctx, args[1:], stdout, stderr)
	case "keygen":
		err = cmdKeygen(args[1:], stdout, stderr)
	case "keys":
		err = cmdKeys(args[1:], stdout, stderr)
	case "operator":
		err = cmdOperator(ctx, args[1:], stdout, stderr)
	case "pay":
		err = cmdPay(ctx, args[1:], stdout, stderr)
	case "buy":
		err = cmdBuy(ctx, args[1:], stdout, stderr)
	case "memory":
		err = cmdMemory(ctx, args[1:], stdout, stderr)
	case "protocol":
		err = cmdProtocol(ctx, args[1:], stdout, stderr)
	case "mcp":
		err = cmdMCP(ctx, args[1:], os.Stdin, stdout, stderr)
	case "proof":
		err = cmdProof(args[1:], stdout, stderr)
	case "fake-merchant":
		err = cmdFakeMerchant(ctx, args[1:], stdout, stderr)
	case "x402":
		err = cmdX402(ctx, args[1:], stdout, stderr)
	case "fake-x402":
		err = cmdFakeX402(ctx, args[1:], stdout, stderr)
	case "loadtest":
		err = cmdLoadtest(ctx, args[1:], stdout, stderr)
	case "agents":
		err = cmdAgents(ctx, args[1:], stdout, stderr)
	case "audit":
		err = cmdAudit(ctx, args[1:], stdout, stderr)
	case "doctor":
		err = cmdDoctor(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "countersign", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "countersign: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintln(stderr, "countersign:", err)
		return 1
	}
}

// errUsage marks a command line that was wrong; the flag set has already
// printed what was wrong and the usage.
var errUsage = errors.New("usage")

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints its usage text to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: countersign %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args, applying COUNTERSIGN_* environment defaults first
// when env is true. It turns flag errors into errUsage.
func parseFlags(fs *flag.FlagSet, args []string, env bool) error {
	if env {
		var envErr error
		fs.VisitAll(func(f *flag.Flag) {
			name := "COUNTERSIGN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if v, ok := os.LookupEnv(name); ok && envErr == nil {
				if err := f.Value.Set(v); err != nil {
					envErr = fmt.Errorf("%s=%q: %w", name, v, err)
				}
			}
		})
		if envErr != nil {
			return envErr
		}
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}
