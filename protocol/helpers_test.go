package protocol

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// clock is a fake clock safe for concurrent use.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Rails of the harness: card authorizes (holds are held by the rail),
// wire does not (holds are budget reservations only).
const (
	railCard = "sandbox-card"
	railWire = "sandbox-wire"
)

// harness is the protocol surface over a complete money path in memory:
// store, record, two fake rails, an operator key, one agent with a key
// and a mandate.
type harness struct {
	t        testing.TB
	st       store.Store
	log      *audit.Log
	card     *fake.Rail
	wire     *fake.Rail
	pay      *pay.Service
	svc      *Service
	clock    *clock
	opKey    ed25519.PrivateKey
	agentKey ed25519.PrivateKey
	agent    string
	caller   pay.Caller
	mandate  string
	claims   pay.MandateClaims
	cardOpts fake.Options
	seq      int
	// ident is the deployment's identity (signs our offers); ev holds the
	// counterparty's key and every evidence class's keys.
	ident     *testIdentity
	ev        *evidenceFixture
	insurance InsuranceSchedule
	// policy is the digest the money path records on decisions; ""
	// means "sha256:test-policy". It is fixed when the money path is
	// built: set it, then restart.
	policy string
}

type harnessConfig struct {
	claims func(*pay.MandateClaims)
	card   func(*fake.Options)
	store  store.Store
	// insurance overrides the default schedule.
	insurance InsuranceSchedule
}

func newHarness(t testing.TB, cfg harnessConfig) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}}
	h.st = cfg.store
	if h.st == nil {
		h.st = memstore.New(&memstore.Options{RetryRate: 0.05})
	}
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	var err error
	h.log, err = audit.Open(t.Context(), h.st, recKey, &audit.Options{Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.cardOpts = fake.Options{Store: h.st, Now: h.clock.Now, Authorizations: true,
		Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}}
	if cfg.card != nil {
		cfg.card(&h.cardOpts)
	}
	_, h.opKey, _ = ed25519.GenerateKey(rand.Reader)
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	h.agentKey, h.agent = agentKey, hex.EncodeToString(pub)
	h.caller = pay.Caller{KeyID: "ak_01JABCDEFGHJKMNPQRSTVWXYZ0", Agents: []string{h.agent}, Credential: gate.CredentialAPIKey}
	h.claims = pay.MandateClaims{
		ID: "mdt-1", Agent: h.agent,
		IssuedAt: h.clock.Now().Add(-time.Hour), ExpiresAt: h.clock.Now().Add(30 * 24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000,
		Period: gate.Day, Rails: []string{railCard, railWire}, ConfirmAboveMinor: 10_000,
		IrreversibleConfirmAboveMinor: 10_000,
	}
	if cfg.claims != nil {
		cfg.claims(&h.claims)
	}
	h.mandate = h.signMandate(h.claims)
	h.ident = newTestIdentity()
	h.ev = newEvidenceFixture(t)
	h.insurance = cfg.insurance
	h.restart()
	return h
}

func (h *harness) signMandate(c pay.MandateClaims) string {
	h.t.Helper()
	tok, err := pay.SignMandate(c, h.opKey, "op-test")
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// restart builds the rails, the money path and the surface again over
// the same store, as a restarted process would, and reconciles.
func (h *harness) restart() {
	h.t.Helper()
	var err error
	if h.card, err = fake.New(railCard, &h.cardOpts); err != nil {
		h.t.Fatal(err)
	}
	if h.wire, err = fake.New(railWire, &fake.Options{Store: h.st, Now: h.clock.Now,
		Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}}); err != nil {
		h.t.Fatal(err)
	}
	reg := &settle.Registry{}
	for _, r := range []settle.Rail{h.card, h.wire} {
		if err := reg.Register(r); err != nil {
			h.t.Fatal(err)
		}
	}
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-test", Public: h.opKey.Public()}}, &pay.MandateVerifierOptions{Now: h.clock.Now})
	if err != nil {
		h.t.Fatal(err)
	}
	surface := Extension(Options{Store: h.st, Log: h.log, Mandates: mv, Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler),
		PolicyDigest: func(context.Context) (string, error) { return "sha256:test-policy", nil },
		Identity:     h.ident, Evidence: h.ev.keys(), Insurance: h.insurance, BaseURL: "https://cs.test"}, &h.svc)
	h.pay, err = pay.New(pay.Options{Store: h.st, Log: h.log, Rails: reg, Mandates: mv, Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler),
		Extensions: []pay.Extension{surface}, PolicyDigest: func(pay.Policy) string {
			if h.policy != "" {
				return h.policy
			}
			return "sha256:test-policy"
		}})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.pay.Reconcile(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) call() Call { return AgentCall(h.caller, "req_test") }

func (h *harness) opCall(rationale string) Call {
	return OperatorCall(pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: rationale})
}

// spend returns an instruction signed for method; edit runs before
// signing. Each call gets a fresh idempotency key unless edit sets one.
func (h *harness) spend(method, rail string, minor int64, edit func(*pay.Instruction)) pay.Instruction {
	h.t.Helper()
	h.seq++
	in := pay.Instruction{
		IdempotencyKey: "key-" + method + "-" + itoa(h.seq), Payee: "acct:seller.example", Amount: pay.Amount{Minor: minor, Currency: "USD"},
		Purpose: "protocol test",
		Terms: pay.Terms{Rail: rail, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Agent: h.agent, Mandate: h.mandate},
	}
	if edit != nil {
		edit(&in)
	}
	key := h.agentKey
	if in.Envelope.Agent == h.ev.cp {
		key = h.ev.cpKey
	}
	if err := SignSpend(method, &in, key); err != nil {
		h.t.Fatal(err)
	}
	return in
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// entryTypes lists the record's entry types in order.
func (h *harness) entryTypes() []string {
	h.t.Helper()
	var out []string
	for e, err := range h.log.Entries(h.t.Context(), 1, 0) {
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, e.Type)
	}
	return out
}

// size is the record's size.
func (h *harness) size() uint64 {
	h.t.Helper()
	n, err := h.log.Size(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// typesSince lists the entry types appended after size n.
func (h *harness) typesSince(n uint64) []string {
	return h.entryTypes()[n:]
}

// code returns the stable problem code an error carries ("" for nil).
func code(err error) string {
	if err == nil {
		return ""
	}
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return "uncoded: " + err.Error()
}

// dump returns every key and value of the store, to prove a refusal
// changed nothing.
func (h *harness) dump() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	err := h.st.View(h.t.Context(), func(r store.Reader) error {
		it := r.Iterate(nil, nil, false)
		for it.Next() {
			out[string(it.Key())] = string(it.Value())
		}
		return it.Close()
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// refusedUnchanged runs a call that must be refused with want, and checks
// that the refusal changed nothing: no record entry, the store as it was.
func refusedUnchanged(t *testing.T, h *harness, want string, run func() error) {
	t.Helper()
	before, n := h.dump(), h.size()
	err := run()
	if got := code(err); got != want {
		t.Errorf("code %q (%v), want %q", got, err, want)
	}
	if got := h.typesSince(n); len(got) != 0 {
		t.Errorf("a refusal appended %v", got)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a refusal changed the store (-before +after):\n%s", diff)
	}
}
