package durability

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/webhook"
)

// dbDir is where the store lives inside each file system.
const dbDir = "countersign/store"

// confirmAbove is the mandate's confirm threshold: payments of this amount
// or more are held for an operator.
const confirmAbove = 10_000

// operatorID is the operator key id approvals and refunds are made as.
const operatorID = "op-durability"

var quiet = slog.New(slog.DiscardHandler)

// clock is a fake clock that moves one microsecond per reading, so that
// every entry has its own instant and time never goes backwards, with no
// real time involved.
type clock struct {
	base  time.Time
	ticks atomic.Int64
}

func newClock() *clock {
	return &clock{base: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	return c.base.Add(time.Duration(c.ticks.Add(1)) * time.Microsecond)
}

// identity is what outlives a process: the record key, the operator key,
// the agent and its mandate. A restarted world is opened with the same.
type identity struct {
	record   ed25519.PrivateKey
	operator ed25519.PrivateKey
	agent    ed25519.PrivateKey
	agentHex string
	mandate  string
	caller   pay.Caller
}

// newIdentity derives every key from rng, so a seed names the keys too.
func newIdentity(rng *rand.Rand, clk *clock) (*identity, error) {
	key := func() ed25519.PrivateKey {
		seed := make([]byte, ed25519.SeedSize)
		for i := range seed {
			seed[i] = byte(rng.Uint32())
		}
		return ed25519.NewKeyFromSeed(seed)
	}
	id := &identity{record: key(), operator: key(), agent: key()}
	id.agentHex = hex.EncodeToString(id.agent.Public().(ed25519.PublicKey))
	now := clk.base
	var err error
	id.mandate, err = pay.SignMandate(pay.MandateClaims{
		ID: "mdt-durability", Agent: id.agentHex,
		IssuedAt: now.Add(-time.Hour), ExpiresAt: now.Add(30 * 24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1 << 50,
		Period: gate.Day, Rails: []string{fake.SandboxCard},
		ConfirmAboveMinor: confirmAbove, IrreversibleConfirmAboveMinor: confirmAbove,
	}, id.operator, operatorID)
	if err != nil {
		return nil, err
	}
	id.caller = pay.Caller{KeyID: "ak_01JDURABILITY000000000000", Agents: []string{id.agentHex}, Credential: gate.CredentialAPIKey}
	return id, nil
}

// instruction returns the signed body of a payment of minor under key.
func (id *identity) instruction(key string, minor int64) ([]byte, error) {
	in := &pay.Instruction{
		IdempotencyKey: key, Payee: "acct:seller.example", Amount: pay.Amount{Minor: minor, Currency: "USD"},
		Purpose: "durability " + key,
		Terms: pay.Terms{Rail: fake.SandboxCard, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: id.agentHex, Mandate: id.mandate},
	}
	if err := pay.SignInstruction(in, id.agent); err != nil {
		return nil, err
	}
	return json.Marshal(in)
}

// worldOptions vary how a world is opened.
type worldOptions struct {
	// rail configures the card rail; its Store and Now are set by
	// openWorld, and its ledger shares the store's log (SharedLog) unless
	// ownLog is set. The reference server's sandbox shares it.
	rail   fake.Options
	ownLog bool
	// webhooks makes the endpoints and the dispatcher.
	webhooks bool
}

// world is one server process over a file system, wired as
// cmd/countersign serve wires the sandbox: the store, the record, the card
// rail with its ledger in the same store, the payment service, and the
// webhook endpoints and dispatcher (driven by Tick, never started).
type world struct {
	fs   vfs.FS
	st   *pebblestore.Store
	log  *audit.Log
	rail *fake.Rail
	svc  *pay.Service
	eps  *webhook.Endpoints
	disp *webhook.Dispatcher
}

// noReuseFS works around a deadlock in pebble v2.1.7's crashable MemFS:
// its ReuseForWrite holds the clone lock for reading and takes it again
// in Rename, so a CrashClone (which takes it for writing) that arrives
// between the two waits forever, and so does the store's WAL rotation
// (seen once: TestPowerCut hung for ten minutes). Removing the old log
// and creating the new one instead is what ReuseForWrite's contract
// allows; pebble then stats the new file for its size.
type noReuseFS struct{ vfs.FS }

func (fs noReuseFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := fs.Remove(oldname); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return fs.Create(newname, category)
}

// openWorld opens a world over fs. It does not reconcile.
func openWorld(ctx context.Context, fs vfs.FS, id *identity, clk *clock, o worldOptions) (w *world, err error) {
	w = &world{fs: fs}
	defer func() {
		if err != nil {
			w.close()
			w = nil
		}
	}()
	if w.st, err = pebblestore.Open(dbDir, &pebblestore.Options{FS: noReuseFS{fs}, Logger: quiet, CacheSize: 1 << 20}); err != nil {
		return w, err
	}
	if w.log, err = audit.Open(ctx, w.st, id.record, &audit.Options{Now: clk.Now, Logger: quiet}); err != nil {
		return w, fmt.Errorf("open record: %w", err)
	}
	ro := o.rail
	ro.Store, ro.Now, ro.SharedLog = w.st, clk.Now, !o.ownLog
	if w.rail, err = fake.New(fake.SandboxCard, &ro); err != nil {
		return w, err
	}
	rails := &settle.Registry{}
	if err = rails.Register(w.rail); err != nil {
		return w, err
	}
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: operatorID, Public: id.operator.Public()}},
		&pay.MandateVerifierOptions{Now: clk.Now})
	if err != nil {
		return w, err
	}
	w.svc, err = pay.New(pay.Options{Store: w.st, Log: w.log, Rails: rails, Mandates: mv, Now: clk.Now, Logger: quiet,
		BreakerAfter: 1 << 40})
	if err != nil {
		return w, err
	}
	if o.webhooks {
		if w.eps, err = webhook.NewEndpoints(w.st, w.log, &webhook.Options{SealKey: make([]byte, webhook.SealKeySize),
			AllowLoopbackHTTP: true, Now: clk.Now, Logger: quiet}); err != nil {
			return w, err
		}
		if w.disp, err = webhook.NewDispatcher(w.st, w.log, w.eps, &webhook.DispatcherOptions{AllowLoopback: true,
			Workers: 4, PerEndpoint: 4, Now: clk.Now, Rand: func() float64 { return 0.5 }, Logger: quiet}); err != nil {
			return w, err
		}
	}
	return w, nil
}

// close releases the world; the store's error is returned (a failed store
// may not close cleanly, and callers that expect that ignore it).
func (w *world) close() error {
	if w == nil {
		return nil
	}
	if w.disp != nil {
		_ = w.disp.Close(context.Background())
	}
	if w.log != nil {
		_ = w.log.Close()
	}
	if w.st != nil {
		return w.st.Close()
	}
	return nil
}
