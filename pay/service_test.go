package pay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
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

// harness is a complete money path in memory: store, record, a fake rail,
// an operator key, one agent with a key and a mandate.
type harness struct {
	t        *testing.T
	st       store.Store
	log      *audit.Log
	rail     *fake.Rail
	svc      *Service
	clock    *clock
	opKey    ed25519.PrivateKey
	agentKey ed25519.PrivateKey
	agent    string
	caller   Caller
	mandate  string
	claims   MandateClaims
	opts     Options
	// wrapRail, if set, is the rail newService registers, around rail.
	wrapRail func(*fake.Rail) settle.Rail
}

type harnessConfig struct {
	rail    *fake.Options
	claims  func(*MandateClaims)
	options func(*Options)
	// wrap, if set, wraps the store that the record, the rail and the
	// service share.
	wrap func(store.Store) store.Store
}

func newHarness(t *testing.T, cfg harnessConfig) *harness {
	t.Helper()
	h := &harness{t: t, clock: &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)}}
	h.st = memstore.New(&memstore.Options{RetryRate: 0.05})
	if cfg.wrap != nil {
		h.st = cfg.wrap(h.st)
	}
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	var err error
	h.log, err = audit.Open(t.Context(), h.st, recKey, &audit.Options{Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// By default the rail keeps its ledger in the service's store log, as
	// the reference server's sandbox rails do (settle.TxnSettler: the
	// rail's entry commits with the outcome); a test that passes rail
	// options gets a ledger with commits of its own, in the same store,
	// unless it sets SharedLog.
	railOpts := &fake.Options{SharedLog: true}
	if cfg.rail != nil {
		railOpts = cfg.rail
	}
	if railOpts.Store == nil {
		railOpts.Store = h.st
	}
	railOpts.Now = h.clock.Now
	h.rail, err = fake.New("sandbox-card", railOpts)
	if err != nil {
		t.Fatal(err)
	}
	_, h.opKey, _ = ed25519.GenerateKey(rand.Reader)
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	h.agentKey, h.agent = agentKey, hex.EncodeToString(pub)
	h.caller = Caller{KeyID: "ak_01JABCDEFGHJKMNPQRSTVWXYZ0", Agents: []string{h.agent}, Credential: gate.CredentialAPIKey}
	h.claims = MandateClaims{
		ID: "mdt-1", Agent: h.agent,
		IssuedAt: h.clock.Now().Add(-time.Hour), ExpiresAt: h.clock.Now().Add(30 * 24 * time.Hour),
		Payees: []string{"*"}, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000,
		Period: gate.Day, Rails: []string{"sandbox-card"}, ConfirmAboveMinor: 10_000,
		IrreversibleConfirmAboveMinor: 10_000,
	}
	if cfg.claims != nil {
		cfg.claims(&h.claims)
	}
	h.mandate, err = SignMandate(h.claims, h.opKey, "op-test")
	if err != nil {
		t.Fatal(err)
	}
	h.opts = Options{Store: h.st, Log: h.log, Now: h.clock.Now, Logger: slog.New(slog.DiscardHandler)}
	if cfg.options != nil {
		cfg.options(&h.opts)
	}
	h.svc = h.newService()
	return h
}

// newService builds a Service over the harness's store, as a restarted
// process would.
func (h *harness) newService() *Service {
	h.t.Helper()
	reg := &settle.Registry{}
	var rail settle.Rail = h.rail
	if h.wrapRail != nil {
		rail = h.wrapRail(h.rail)
	}
	if err := reg.Register(rail); err != nil {
		h.t.Fatal(err)
	}
	mv, err := NewMandateVerifier([]OperatorKey{{KeyID: "op-test", Public: h.opKey.Public()}}, &MandateVerifierOptions{Now: h.clock.Now})
	if err != nil {
		h.t.Fatal(err)
	}
	o := h.opts
	o.Rails, o.Mandates = reg, mv
	svc, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

// instruction returns a signed instruction; edit runs before signing.
func (h *harness) instruction(key string, minor int64, edit func(*Instruction)) *Instruction {
	h.t.Helper()
	in := &Instruction{
		IdempotencyKey: key, Payee: "acct:seller.example", Amount: Amount{Minor: minor, Currency: "USD"},
		Purpose: "invoice 1182",
		Terms: Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: Envelope{Agent: h.agent, Mandate: h.mandate},
	}
	if edit != nil {
		edit(in)
	}
	if err := SignInstruction(in, h.agentKey); err != nil {
		h.t.Fatal(err)
	}
	return in
}

func (h *harness) body(in *Instruction) []byte {
	b, err := json.Marshal(in)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func (h *harness) pay(in *Instruction) (*Result, error) {
	return h.svc.Pay(context.Background(), h.caller, h.body(in), "", "req_test")
}

func (h *harness) entryTypes() []string {
	h.t.Helper()
	var types []string
	for e, err := range h.log.Entries(context.Background(), 1, 0) {
		if err != nil {
			h.t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	return types
}

func (h *harness) lastEntry() audit.Entry {
	h.t.Helper()
	n, err := h.log.Size(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := h.log.Get(context.Background(), n)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

func TestPayOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		minor       int64
		edit        func(*Instruction)
		wantOutcome Outcome
		wantStatus  Status
		wantReason  string
	}{
		{"settles below the confirm threshold", 1250, nil, OutcomeSettled, StatusSettled, ""},
		{"held at the confirm threshold", 10_000, nil, OutcomeHeld, StatusPendingApproval, gate.CodeConfirmThreshold},
		{"denied above the per-tx cap", 60_000, nil, OutcomeDenied, StatusDenied, gate.CodePerTxCap},
		{"denied for another currency", 100, func(in *Instruction) { in.Amount.Currency = "EUR" }, OutcomeDenied, StatusDenied, gate.CodeCurrencyNotAllowed},
		{"denied for terms that disagree with the rail", 100, func(in *Instruction) { in.Terms.Finality = gate.FinalityDeferred }, OutcomeDenied, StatusDenied, gate.CodeTermsMismatch},
		{"denied for an unknown rail", 100, func(in *Instruction) { in.Terms.Rail = "no-such-rail" }, OutcomeDenied, StatusDenied, gate.CodeRailNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			res, err := h.pay(h.instruction("k1", tc.minor, tc.edit))
			if err != nil {
				t.Fatalf("Pay: %v", err)
			}
			if res.Outcome != tc.wantOutcome {
				t.Fatalf("outcome %s, want %s (%+v)", res.Outcome, tc.wantOutcome, res)
			}
			in, err := h.svc.Intent(context.Background(), h.caller, res.IntentID)
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != tc.wantStatus {
				t.Errorf("intent status %s, want %s", in.Status, tc.wantStatus)
			}
			if tc.wantReason != "" && !in.Decision.Has(tc.wantReason) {
				t.Errorf("decision %+v lacks reason %s", in.Decision, tc.wantReason)
			}
			switch tc.wantOutcome {
			case OutcomeSettled:
				r := res.Receipt
				if r == nil || r.Reference == "" || r.AuditSeq == 0 || r.AuditHash == "" || r.Amount.Minor != tc.minor {
					t.Fatalf("receipt %+v", r)
				}
				e, err := h.log.Get(context.Background(), r.AuditSeq)
				if err != nil || e.Type != "payment.settled" || e.Hash != r.AuditHash {
					t.Fatalf("receipt not bound to its entry: %+v %v", e, err)
				}
				if n, _ := h.rail.Count(context.Background()); n != 1 {
					t.Fatalf("ledger has %d entries", n)
				}
			case OutcomeHeld:
				if res.Held.Challenge == "" || res.Held.ApprovalsRequired != 1 || !res.Held.ExpiresAt.Equal(h.clock.Now().Add(24*time.Hour)) {
					t.Fatalf("held %+v", res.Held)
				}
			case OutcomeDenied:
				if res.Denial.AuditSeq == 0 || len(res.Denial.Reasons) == 0 {
					t.Fatalf("denial %+v", res.Denial)
				}
			}
			if tc.wantOutcome != OutcomeSettled {
				if n, _ := h.rail.Count(context.Background()); n != 0 {
					t.Fatalf("money moved for a %s payment", tc.wantOutcome)
				}
			}
			if err := h.log.Verify(context.Background(), 1, 0, audit.Full, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestIdempotency(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	in := h.instruction("key-1", 1250, nil)
	first, err := h.pay(in)
	if err != nil {
		t.Fatal(err)
	}
	before := h.entryTypes()

	t.Run("replay returns the stored outcome and writes nothing", func(t *testing.T) {
		again, err := h.svc.Pay(ctx, h.caller, h.body(in), "key-1", "req_other")
		if err != nil {
			t.Fatal(err)
		}
		checkReplay(t, first, again)
		if got := h.entryTypes(); len(got) != len(before) {
			t.Errorf("replay appended entries: %v", got[len(before):])
		}
		if n, _ := h.rail.Count(ctx); n != 1 {
			t.Errorf("ledger has %d settlements", n)
		}
	})
	t.Run("same key, different instruction is a conflict", func(t *testing.T) {
		_, err := h.pay(h.instruction("key-1", 1251, nil))
		if !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("header must equal the body key", func(t *testing.T) {
		_, err := h.svc.Pay(ctx, h.caller, h.body(in), "key-2", "req_x")
		if !errors.Is(err, ErrKeyMismatch) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("keys are per agent key", func(t *testing.T) {
		other := h.caller
		other.KeyID = "ak_01JABCDEFGHJKMNPQRSTVWXYZ1"
		res, err := h.svc.Pay(ctx, other, h.body(in), "", "req_y")
		if err != nil || res.Replayed || res.IntentID == first.IntentID {
			t.Fatalf("another key's request replayed this key's outcome: %+v %v", res, err)
		}
	})
	t.Run("retention expiry forgets the key", func(t *testing.T) {
		h.clock.Add(7*24*time.Hour + time.Second)
		n, err := h.svc.SweepIdempotency(ctx)
		if err != nil || n == 0 {
			t.Fatalf("sweep: %d %v", n, err)
		}
		// A fresh mandate: the old one expired with the clock.
		res, err := h.pay(h.instruction("key-1", 1250, nil))
		if err != nil {
			t.Fatal(err)
		}
		if res.Replayed || res.IntentID == first.IntentID {
			t.Fatalf("key not forgotten after retention: %+v", res)
		}
	})
}

func TestInFlight(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	h := newHarness(t, harnessConfig{rail: &fake.Options{
		MinLatency: time.Millisecond, MaxLatency: time.Millisecond,
		Sleep: func(ctx context.Context, _ time.Duration) error {
			entered <- struct{}{}
			<-release
			return nil
		},
	}})
	in := h.instruction("slow", 1250, nil)
	done := make(chan error, 1)
	go func() { _, err := h.pay(in); done <- err }()
	<-entered
	if _, err := h.pay(in); !errors.Is(err, ErrInFlight) {
		t.Fatalf("concurrent same-key request: %v, want ErrInFlight", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	res, err := h.pay(in)
	if err != nil || !res.Replayed || res.Outcome != OutcomeSettled {
		t.Fatalf("after completion: %+v %v", res, err)
	}
}

func TestRefusalsAreRecordedAndPrecise(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	otherPub, otherKey, _ := ed25519.GenerateKey(rand.Reader)
	_, strangerOp, _ := ed25519.GenerateKey(rand.Reader)
	expired := h.claims
	expired.ID, expired.ExpiresAt = "mdt-expired", h.clock.Now().Add(-time.Minute)
	expiredTok, err := SignMandate(expired, h.opKey, "op-test")
	if err != nil {
		t.Fatal(err)
	}
	strangerTok, err := SignMandate(h.claims, strangerOp, "op-stranger")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		body   func() []byte
		caller *Caller
		want   error
		reason AuthReason
	}{
		{"malformed json", func() []byte { return []byte(`{"idempotencyKey":`) }, nil, ErrMalformed, ""},
		{"wrong type", func() []byte { return []byte(`{"idempotencyKey":5}`) }, nil, ErrMalformed, ""},
		{"unknown field", func() []byte {
			b := h.body(h.instruction("u", 100, nil))
			return append(b[:len(b)-1], []byte(`,"extra":1}`)...)
		}, nil, ErrMalformed, ""},
		{"missing envelope signature", func() []byte {
			in := h.instruction("m", 100, nil)
			in.Envelope.Signature = ""
			return h.body(in)
		}, nil, ErrMalformed, ""},
		{"tampered instruction", func() []byte {
			in := h.instruction("t", 100, nil)
			in.Amount.Minor = 101
			return h.body(in)
		}, nil, ErrUnauthorized, ReasonSignatureInvalid},
		{"signed by another agent key", func() []byte {
			in := h.instruction("w", 100, nil)
			alt := *in
			alt.Envelope.Agent = hex.EncodeToString(otherPub)
			if err := SignInstruction(&alt, otherKey); err != nil {
				t.Fatal(err)
			}
			in.Envelope.Signature = alt.Envelope.Signature
			return h.body(in)
		}, nil, ErrUnauthorized, ReasonSignatureInvalid},
		{"mandate by an unknown operator key", func() []byte {
			return h.body(h.instruction("s", 100, func(in *Instruction) { in.Envelope.Mandate = strangerTok }))
		}, nil, ErrUnauthorized, ReasonMandateUnknownKey},
		{"expired mandate", func() []byte {
			return h.body(h.instruction("e", 100, func(in *Instruction) { in.Envelope.Mandate = expiredTok }))
		}, nil, ErrUnauthorized, ReasonMandateExpired},
		{"mandate issued to another agent", func() []byte {
			in := h.instruction("sub", 100, nil)
			in.Envelope.Agent = hex.EncodeToString(otherPub)
			if err := SignInstruction(in, otherKey); err != nil {
				t.Fatal(err)
			}
			return h.body(in)
		}, &Caller{KeyID: h.caller.KeyID, Agents: []string{hex.EncodeToString(otherPub)}}, ErrUnauthorized, ReasonSubMismatch},
		{"credential may not act for the agent", func() []byte { return h.body(h.instruction("np", 100, nil)) },
			&Caller{KeyID: h.caller.KeyID, Agents: []string{hex.EncodeToString(otherPub)}}, ErrUnauthorized, ReasonAgentNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.caller
			if tc.caller != nil {
				c = *tc.caller
			}
			sizeBefore, _ := h.log.Size(context.Background())
			_, err := h.svc.Pay(context.Background(), c, tc.body(), "", "req_bad")
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var ue *UnauthorizedError
			if tc.reason != "" && (!errors.As(err, &ue) || ue.Reason != tc.reason) {
				t.Fatalf("reason: %v, want %s", err, tc.reason)
			}
			sizeAfter, _ := h.log.Size(context.Background())
			if sizeAfter != sizeBefore+1 {
				t.Fatalf("%d entries appended, want exactly the recorded refusal", sizeAfter-sizeBefore)
			}
			e := h.lastEntry()
			var r refusal
			if err := json.Unmarshal(e.Data, &r); err != nil || e.Type != "gate.decision" || r.Outcome != gate.Deny {
				t.Fatalf("refusal entry %s %s", e.Type, e.Data)
			}
			if tc.reason != "" && r.Reason != string(tc.reason) {
				t.Fatalf("recorded reason %q, want %q", r.Reason, tc.reason)
			}
		})
	}
	if n, _ := h.rail.Count(context.Background()); n != 0 {
		t.Fatalf("money moved: %d", n)
	}
}

func TestKillSwitchAndRevocation(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	op := OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "incident 42 under way"}
	if _, err := h.svc.SetKillSwitch(ctx, true, op); err != nil {
		t.Fatal(err)
	}
	in := h.instruction("frozen-key", 1250, nil)
	if _, err := h.pay(in); !errors.Is(err, ErrFrozen) {
		t.Fatalf("frozen: %v", err)
	}
	if e := h.lastEntry(); e.Type != "gate.decision" {
		t.Fatalf("refusal not recorded: %s", e.Type)
	}
	if _, err := h.svc.SetKillSwitch(ctx, false, op); err != nil {
		t.Fatal(err)
	}
	res, err := h.pay(in)
	if err != nil || res.Outcome != OutcomeSettled || res.Replayed {
		t.Fatalf("same key after release: %+v %v", res, err)
	}

	if _, err := h.svc.RevokeMandate(ctx, h.claims.ID, op); err != nil {
		t.Fatal(err)
	}
	_, err = h.pay(h.instruction("after-revoke", 1250, nil))
	var ue *UnauthorizedError
	if !errors.As(err, &ue) || ue.Reason != ReasonMandateRevoked {
		t.Fatalf("revoked mandate: %v", err)
	}
	if n, _ := h.rail.Count(ctx); n != 1 {
		t.Fatalf("ledger %d", n)
	}
}

// TestDeclineReleasesReservationAndTripsBreaker runs on a rail with commits
// of its own and on one that answers in the deciding transaction
// (settle.InstantSettler), where the decline is recorded in the same
// transaction as the reservation it releases.
func TestDeclineReleasesReservationAndTripsBreaker(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ctx := t.Context()
			h := newHarness(t, harnessConfig{rail: &fake.Options{DeclineAbove: 5_000, SharedLog: shared}})
			for i := range 5 {
				res, err := h.pay(h.instruction(fmt.Sprintf("d%d", i), 9_000, nil))
				if err != nil || res.Outcome != OutcomeFailed || res.Failure.DeclineCode == "" {
					t.Fatalf("decline %d: %+v %v", i, res, err)
				}
			}
			ctl, err := h.svc.Control(ctx)
			if err != nil || !ctl.CircuitBreakerOpen {
				t.Fatalf("breaker after 5 failures: %+v %v", ctl, err)
			}
			// Reservations of failed intents were released: the period counter is 0.
			var total int64
			_ = h.st.View(ctx, func(r store.Reader) error {
				start, _ := gate.PeriodWindow(gate.Day, h.clock.Now())
				total, err = getInt(r, []byte(fmt.Sprintf("%s%s/%d", keyPeriod, h.claims.ID, start.Unix())))
				return err
			})
			if total != 0 {
				t.Fatalf("period counter %d after only failures", total)
			}
			// While open, an allow becomes a confirm.
			res, err := h.pay(h.instruction("small", 100, nil))
			if err != nil || res.Outcome != OutcomeHeld || !res.Held.Decision.Has(gate.CodeBreakerOpen) {
				t.Fatalf("allow under open breaker: %+v %v", res, err)
			}
			op := OperatorCall{Operator: "op-test", Rationale: "rail fixed upstream"}
			if _, err := h.svc.ResetBreaker(ctx, op); err != nil {
				t.Fatal(err)
			}
			if _, err := h.svc.ResetBreaker(ctx, op); !errors.Is(err, ErrBreakerNotTripped) {
				t.Fatalf("second reset: %v", err)
			}
			res, err = h.pay(h.instruction("small-2", 100, nil))
			if err != nil || res.Outcome != OutcomeSettled {
				t.Fatalf("after reset: %+v %v", res, err)
			}
		})
	}
}

func TestDenialsTripBreaker(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	for i := range 5 {
		if res, err := h.pay(h.instruction(fmt.Sprintf("big%d", i), 60_000, nil)); err != nil || res.Outcome != OutcomeDenied {
			t.Fatalf("%+v %v", res, err)
		}
	}
	ctl, _ := h.svc.Control(context.Background())
	if !ctl.CircuitBreakerOpen {
		t.Fatal("breaker not tripped by 5 consecutive denials of one mandate")
	}
	found := false
	for _, typ := range h.entryTypes() {
		found = found || typ == "breaker.tripped"
	}
	if !found {
		t.Fatal("no breaker.tripped entry")
	}
}

func TestUnknownOutcomeNeverFailsAndResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  error
		reason string
	}{
		{"lost response after the money moved", fake.AfterMove(nil), UnknownReasonOutcome},
		{"lost request before the money moved", settle.ErrUnknownOutcome, UnknownReasonOutcome},
		{"rail unavailable", settle.ErrUnavailable, UnknownReasonUnavailable},
		{"our deadline passed", context.DeadlineExceeded, UnknownReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, harnessConfig{rail: &fake.Options{Fault: fake.FailNext(fake.OpSettle, 1, tc.fault)}})
			in := h.instruction("u1", 1250, nil)
			_, err := h.pay(in)
			if !errors.Is(err, ErrRailUnavailable) {
				t.Fatalf("first attempt: %v", err)
			}
			var in1 *Intent
			_ = h.st.View(ctx, func(r store.Reader) error { in1, err = getIntent(r, firstIntent(t, h)); return err })
			if in1.Status != StatusSettling {
				t.Fatalf("status %s after unknown outcome, want settling", in1.Status)
			}
			u := in1.UnknownOutcome
			if u == nil || u.Attempts != 1 || u.Reason != tc.reason || u.AuditSeq == 0 || u.Since.IsZero() {
				t.Fatalf("unknownOutcome = %+v, want one attempt, reason %s, recorded", u, tc.reason)
			}
			if n := countType(h.entryTypes(), "payment.outcome_unknown"); n != 1 {
				t.Fatalf("%d payment.outcome_unknown entries, want 1", n)
			}
			page, err := h.svc.Settling(ctx, "", 0)
			if err != nil || len(page.Data) != 1 || page.Data[0].UnknownOutcome == nil {
				t.Fatalf("operator's settling list: %+v %v", page, err)
			}
			res, err := h.pay(in)
			if err != nil || res.Outcome != OutcomeSettled {
				t.Fatalf("retry: %+v %v", res, err)
			}
			_ = h.st.View(ctx, func(r store.Reader) error { in1, err = getIntent(r, in1.ID); return err })
			if in1.Status != StatusSettled || in1.UnknownOutcome != nil {
				t.Fatalf("after settling: status %s, unknownOutcome %+v", in1.Status, in1.UnknownOutcome)
			}
			if n, _ := h.rail.Count(ctx); n != 1 {
				t.Fatalf("ledger %d, want exactly one settlement", n)
			}
			if err := h.rail.CheckLedger(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func countType(types []string, want string) int {
	n := 0
	for _, t := range types {
		if t == want {
			n++
		}
	}
	return n
}

// TestUnknownOutcomeIsRecordedOnce: a reconciler asking every minute
// counts its attempts on the intent without adding an entry per attempt.
func TestUnknownOutcomeIsRecordedOnce(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{rail: &fake.Options{Fault: func(op fake.Op, _ any) error {
		return settle.ErrUnavailable
	}}})
	if _, err := h.pay(h.instruction("u1", 1250, nil)); !errors.Is(err, ErrRailUnavailable) {
		t.Fatalf("pay: %v", err)
	}
	for range 3 {
		rep, err := h.svc.Reconcile(ctx)
		if err != nil || rep.StillSettling != 1 {
			t.Fatalf("reconcile: %+v %v", rep, err)
		}
	}
	page, err := h.svc.Settling(ctx, "", 0)
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("settling: %+v %v", page, err)
	}
	if u := page.Data[0].UnknownOutcome; u == nil || u.Attempts != 4 || u.Reason != UnknownReasonUnavailable {
		t.Fatalf("unknownOutcome = %+v, want 4 attempts", u)
	}
	if n := countType(h.entryTypes(), "payment.outcome_unknown"); n != 1 {
		t.Fatalf("%d payment.outcome_unknown entries, want 1", n)
	}
}

func firstIntent(t *testing.T, h *harness) string {
	t.Helper()
	var id string
	_ = h.st.View(context.Background(), func(r store.Reader) error {
		it := r.Iterate([]byte(keyIntent), store.PrefixEnd([]byte(keyIntent)), false)
		defer it.Close()
		if it.Next() {
			id = string(it.Key()[len(keyIntent):])
		}
		return nil
	})
	return id
}

func TestReconcileAfterCrash(t *testing.T) {
	ctx := context.Background()
	var moves atomic.Int64
	h := newHarness(t, harnessConfig{rail: &fake.Options{Fault: func(op fake.Op, _ any) error {
		if op == fake.OpSettle && moves.Add(1) <= 3 {
			if moves.Load()%2 == 1 {
				return fake.AfterMove(nil)
			}
			return settle.ErrUnknownOutcome
		}
		return nil
	}}})
	var intents []string
	for i := range 3 {
		_, err := h.pay(h.instruction(fmt.Sprintf("c%d", i), 1000, nil))
		if !errors.Is(err, ErrRailUnavailable) {
			t.Fatalf("%d: %v", i, err)
		}
	}
	_ = h.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keySettling), store.PrefixEnd([]byte(keySettling)), false)
		defer it.Close()
		for it.Next() {
			intents = append(intents, string(it.Key()))
		}
		return nil
	})
	if len(intents) != 3 {
		t.Fatalf("%d intents settling, want 3", len(intents))
	}
	// A new process over the same store finishes them.
	svc := h.newService()
	rep, err := svc.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Settled != 3 || rep.StillSettling != 0 {
		t.Fatalf("reconcile: %+v", rep)
	}
	if n, _ := h.rail.Count(ctx); n != 3 {
		t.Fatalf("ledger %d", n)
	}
	h.svc = svc
	for i := range 3 {
		res, err := h.pay(h.instruction(fmt.Sprintf("c%d", i), 1000, nil))
		if err != nil || res.Outcome != OutcomeSettled || !res.Replayed {
			t.Fatalf("retry %d after reconcile: %+v %v", i, res, err)
		}
	}
}

// TestPeriodCapUnderConcurrency: 200 concurrent payments against a period
// cap that admits exactly 50 of them.
func TestPeriodCapUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{claims: func(c *MandateClaims) {
		c.PerPeriodCapMinor = 50 * 1000
		c.ConfirmAboveMinor, c.IrreversibleConfirmAboveMinor = 100_000, 100_000
		c.PerTxCapMinor = 100_000
	}})
	var wg sync.WaitGroup
	var settled, denied atomic.Int64
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := h.pay(h.instruction(fmt.Sprintf("p%03d", i), 1000, nil))
			switch {
			case err != nil:
				errs <- err
			case res.Outcome == OutcomeSettled:
				settled.Add(1)
			case res.Outcome == OutcomeDenied && res.Denial.Reasons[0].Code == gate.CodePeriodCap:
				denied.Add(1)
			default:
				errs <- fmt.Errorf("unexpected %+v", res)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if settled.Load() != 50 || denied.Load() != 150 {
		t.Fatalf("settled %d denied %d, want 50 and 150", settled.Load(), denied.Load())
	}
	if n, _ := h.rail.Count(ctx); n != 50 {
		t.Fatalf("ledger %d, want 50", n)
	}
}

func TestIntentReads(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	res, err := h.pay(h.instruction("r1", 1250, nil))
	if err != nil {
		t.Fatal(err)
	}
	page, err := h.svc.IntentEvents(ctx, h.caller, res.IntentID, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Type != "gate.decision" || !page.HasMore {
		t.Fatalf("first page %+v", page)
	}
	page, err = h.svc.IntentEvents(ctx, h.caller, res.IntentID, *page.NextCursor, 10)
	if err != nil || len(page.Data) != 1 || page.Data[0].Type != "payment.settled" || page.HasMore {
		t.Fatalf("second page %+v %v", page, err)
	}
	other := h.caller
	other.KeyID = "ak_01JABCDEFGHJKMNPQRSTVWXYZ9"
	if _, err := h.svc.Intent(ctx, other, res.IntentID); !errors.Is(err, ErrIntentNotFound) {
		t.Fatalf("another key read the intent: %v", err)
	}
	if _, err := h.svc.IntentEvents(ctx, h.caller, res.IntentID, "bogus", 10); !errors.Is(err, audit.ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
	// An operator reads any key's intent and its entries; an unknown id
	// is still not found.
	for _, tc := range []struct {
		id      string
		entries int
		err     error
	}{
		{res.IntentID, 2, nil},
		{"int_01JABCDEFGHJKMNPQRSTVWXYZ0", 0, ErrIntentNotFound},
	} {
		in, err := h.svc.OperatorIntent(ctx, tc.id)
		if !errors.Is(err, tc.err) || (err == nil && (in.ID != tc.id || in.AgentKeyID != h.caller.KeyID || in.Links.Self == "")) {
			t.Errorf("OperatorIntent(%s): %+v %v, want error %v", tc.id, in, err, tc.err)
		}
		page, err := h.svc.OperatorIntentEvents(ctx, tc.id, "", 10)
		if !errors.Is(err, tc.err) || len(page.Data) != tc.entries {
			t.Errorf("OperatorIntentEvents(%s): %d entries, %v; want %d, error %v", tc.id, len(page.Data), err, tc.entries, tc.err)
		}
	}
}

// checkReplay checks that again is first answered again: marked as a
// replay, and otherwise the same.
func checkReplay(t *testing.T, first, again *Result) {
	t.Helper()
	if !again.Replayed {
		t.Error("replay not marked")
	}
	cp := *again
	cp.Replayed = false
	if diff := cmp.Diff(first, &cp); diff != "" {
		t.Errorf("replay differs (-first +replay):\n%s", diff)
	}
}

// TestRevokeUnseenMandate: a mandate id this deployment has never seen
// can be revoked, as a leaked token must be before anyone uses it. The
// revocation is recorded once (revoking again answers the first), and a
// payment under the mandate is refused from then on.
func TestRevokeUnseenMandate(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessConfig{})
	op := opCall("op-alice")
	size := func() uint64 {
		n, err := h.log.Size(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	first, err := h.svc.RevokeMandate(ctx, h.claims.ID, op)
	if err != nil || first.MandateID != h.claims.ID || first.Operator != "op-alice" {
		t.Fatalf("revoke an unseen mandate: %+v %v", first, err)
	}
	if got := size(); got != before+1 {
		t.Fatalf("record grew by %d, want one mandate.revoked entry", got-before)
	}
	h.clock.Add(time.Minute)
	again, err := h.svc.RevokeMandate(ctx, h.claims.ID, opCall("op-bob"))
	if err != nil || again != first {
		t.Fatalf("revoking twice = %+v %v, want the first revocation %+v", again, err, first)
	}
	if got := size(); got != before+1 {
		t.Fatalf("a second revocation wrote %d entries", got-before-1)
	}
	_, err = h.pay(h.instruction("under-revoked", 1250, nil))
	var ue *UnauthorizedError
	if !errors.As(err, &ue) || ue.Reason != ReasonMandateRevoked {
		t.Fatalf("payment under a mandate revoked before its first use: %v", err)
	}
}
