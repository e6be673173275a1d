package pay

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/gate"
)

func TestMandatesLiveOnly(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessConfig{})
	if ms, err := h.svc.Mandates(ctx); err != nil || len(ms) != 0 {
		t.Fatalf("before any payment: %v %v", ms, err)
	}
	// A denial is still a decision under the mandate: it is remembered.
	for i, minor := range []int64{100, 999_999_999, 200} {
		if _, err := h.pay(h.instruction("k"+string(rune('a'+i)), minor, nil)); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := h.svc.Mandates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []KnownMandate{{
		ID: "mdt-1", KeyID: "op-test", Agent: h.agent, Payees: []string{"*"}, Currency: "USD",
		PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day, Rails: []string{"sandbox-card"},
		ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000, Approvals: 1,
		IssuedAt: h.claims.IssuedAt.Truncate(time.Second), ExpiresAt: h.claims.ExpiresAt.Truncate(time.Second),
		FirstSeenAt: h.clock.Now(), Seq: 1,
	}}
	if d := cmp.Diff(want, ms); d != "" {
		t.Errorf("Mandates (-want +got):\n%s", d)
	}
	// A new process reads the same from the store.
	if again, err := h.newService().Mandates(ctx); err != nil || !cmp.Equal(again, ms) {
		t.Errorf("after a restart: %v %v", again, err)
	}
	// Revoked and expired mandates are not live.
	if _, err := h.svc.RevokeMandate(ctx, "mdt-1", opCall("op-alice")); err != nil {
		t.Fatal(err)
	}
	if ms, err := h.svc.Mandates(ctx); err != nil || len(ms) != 0 {
		t.Errorf("a revoked mandate is still listed: %v %v", ms, err)
	}
}

func TestMandatesExpire(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessConfig{})
	if _, err := h.pay(h.instruction("k", 100, nil)); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(31 * 24 * time.Hour)
	if ms, err := h.svc.Mandates(ctx); err != nil || len(ms) != 0 {
		t.Errorf("an expired mandate is still listed: %v %v", ms, err)
	}
}

func TestPolicyIsTheGatePolicy(t *testing.T) {
	h := newHarness(t, harnessConfig{options: func(o *Options) {
		o.DenyPayees = []string{"acct:z.example", "acct:a.example"}
		o.BreakerAfter = 3
		o.ApprovalWindow = time.Hour
	}})
	got := h.svc.Policy()
	want := Policy{
		Rails:      []RailPolicy{{Name: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant}},
		DenyPayees: []string{"acct:a.example", "acct:z.example"}, DenyAgents: []string{},
		BreakerAfter: 3, ApprovalWindowSeconds: 3600, IdempotencyRetentionSeconds: 7 * 24 * 3600,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Policy (-want +got):\n%s", d)
	}
}
