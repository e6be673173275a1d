// Command embed runs Countersign in-process: no HTTP, no server. An agent
// runtime embeds the library like this, with its own store and rails.
//
// It builds an in-memory store, the signed record, a fake card rail and an
// operator-signed mandate, pays 12.50 USD as the agent, and checks the
// receipt against the record.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	// Storage and the signed record.
	st := &memstore.Store{}
	_, recordKey, _ := ed25519.GenerateKey(rand.Reader)
	record, err := audit.Open(ctx, st, recordKey, nil)
	if err != nil {
		return err
	}

	// A fake rail that behaves like a card network (here: no latency).
	card, err := fake.New("sandbox-card", &fake.Options{Store: st})
	if err != nil {
		return err
	}
	rails := &settle.Registry{}
	if err := rails.Register(card); err != nil {
		return err
	}

	// The operator issues a mandate to the agent, offline.
	_, operatorKey, _ := ed25519.GenerateKey(rand.Reader)
	agentPub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	agentID := hex.EncodeToString(agentPub)
	now := time.Now().UTC().Truncate(time.Second)
	mandate, err := pay.SignMandate(pay.MandateClaims{
		ID: "mdt_example", Agent: agentID, IssuedAt: now, ExpiresAt: now.Add(time.Hour),
		Payees: []string{"*.example"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 100_000,
		Period: gate.Day, Rails: []string{"sandbox-card"}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
	}, operatorKey, "op-alice")
	if err != nil {
		return err
	}
	mandates, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-alice", Public: operatorKey.Public()}}, nil)
	if err != nil {
		return err
	}

	svc, err := pay.New(pay.Options{Store: st, Log: record, Rails: rails, Mandates: mandates})
	if err != nil {
		return err
	}

	// The agent signs an instruction and pays.
	in := &pay.Instruction{
		IdempotencyKey: "invoice-1182", Payee: "acct:seller.example",
		Amount: pay.Amount{Minor: 1250, Currency: "USD"}, Purpose: "invoice 1182",
		Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated, Credential: gate.CredentialAPIKey},
		Envelope: pay.Envelope{Agent: agentID, Mandate: mandate},
	}
	if err := pay.SignInstruction(in, agentKey); err != nil {
		return err
	}
	caller := pay.Caller{KeyID: "ak_embedded", Agents: []string{agentID}}
	res, err := svc.PayInstruction(ctx, caller, in, "", "")
	if err != nil {
		return err
	}
	r := res.Receipt
	fmt.Fprintf(os.Stdout, "%s: %d %s to %s on %s\n", res.Outcome, r.Amount.Minor, r.Amount.Currency, r.Payee, r.Rail)

	// The receipt is bound to an entry of the record, which the record's
	// signed checkpoint covers: anyone holding the verifier key checks it
	// offline with the entry and its inclusion proof.
	e, err := record.Get(ctx, r.AuditSeq)
	if err != nil {
		return err
	}
	proof, err := record.Inclusion(ctx, r.AuditSeq, 0)
	if err != nil {
		return err
	}
	verr := pay.VerifyReceipt(record.VerifierKey(), *r, e, proof)
	size, _ := record.Size(ctx)
	err = record.Verify(ctx, 1, size, audit.Full, nil)
	fmt.Printf("receipt of entry %s verifies: %v; record of %d entries verifies: %v\n", e.Type, verr == nil, size, err == nil)
	return nil
}
