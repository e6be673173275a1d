package protocol

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/internal/seqlist/seqlisttest"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/memstore"
)

// ovsSecondKey is another agent key acting for the harness's agent: its
// intents are not the caller's.
func ovsSecondKey(h *harness) pay.Caller {
	c := h.caller
	c.KeyID = "ak_01JSECONDKEY00000000000000"
	return c
}

// ovsPayWithKey sends a /pay instruction of the harness's agent with another
// agent key.
func ovsPayWithKey(h *harness, c pay.Caller, minor int64) *pay.Result {
	h.t.Helper()
	in := h.spend("pay", railWire, minor, nil)
	if err := pay.SignInstruction(&in, h.agentKey); err != nil {
		h.t.Fatal(err)
	}
	res, err := h.pay.PayInstruction(h.t.Context(), c, &in, "", "req_second")
	if err != nil {
		h.t.Fatal(err)
	}
	return res
}

// TestOversightStatus follows the kill switch and the breaker, and counts
// only the caller's intents waiting for a person.
func TestOversightStatus(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	status := func() *OversightStatus {
		t.Helper()
		s, err := h.svc.OversightStatusGet(ctx, h.call(), &Empty{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if diff := cmp.Diff(&OversightStatus{}, status()); diff != "" {
		t.Errorf("fresh (-want +got):\n%s", diff)
	}

	mdtMustPay(h, railWire, 20_000, pay.OutcomeHeld, nil)
	mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil)
	if _, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 15_000, nil), TTLSeconds: 3600}); err != nil {
		t.Fatal(err)
	}
	if res := ovsPayWithKey(h, ovsSecondKey(h), 30_000); res.Outcome != pay.OutcomeHeld {
		t.Fatalf("second key: %s", res.Outcome)
	}
	if got := status().PendingApprovals; got != 2 {
		t.Errorf("pendingApprovals = %d, want 2 (the other key's does not count)", got)
	}
	s, err := h.svc.OversightStatusGet(ctx, AgentCall(ovsSecondKey(h), "req_second"), &Empty{})
	if err != nil || s.PendingApprovals != 1 {
		t.Errorf("second key's status = %+v, %v", s, err)
	}

	h.clock.Add(time.Minute)
	op := pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "incident under way"}
	if _, err := h.pay.SetKillSwitch(ctx, true, op); err != nil {
		t.Fatal(err)
	}
	engagedAt := h.clock.Now()
	if diff := cmp.Diff(&OversightStatus{KillSwitchEngaged: true, ChangedAt: engagedAt, PendingApprovals: 2}, status()); diff != "" {
		t.Errorf("engaged (-want +got):\n%s", diff)
	}
	h.clock.Add(time.Minute)
	if _, err := h.pay.SetKillSwitch(ctx, false, op); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&OversightStatus{ChangedAt: h.clock.Now(), PendingApprovals: 2}, status()); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}

	// Consecutive denials of one mandate trip the breaker.
	h.clock.Add(time.Minute)
	for range 5 {
		mdtMustPay(h, railWire, 60_000, pay.OutcomeDenied, nil)
	}
	want := &OversightStatus{CircuitBreakerOpen: true, BreakerReason: "consecutive_denials:mdt-1", ChangedAt: h.clock.Now(), PendingApprovals: 2}
	if diff := cmp.Diff(want, status()); diff != "" {
		t.Errorf("tripped (-want +got):\n%s", diff)
	}
	// With the breaker open every payment waits for a person.
	mdtMustPay(h, railWire, 1_000, pay.OutcomeHeld, nil)
	if got := status().PendingApprovals; got != 3 {
		t.Errorf("pendingApprovals with the breaker open = %d, want 3", got)
	}
}

// TestOversightPolicy answers the policy in force and the digest the
// deployment publishes.
func TestOversightPolicy(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	got, err := h.svc.OversightPolicyGet(ctx, h.call(), &Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&OversightPolicy{Policy: h.pay.Policy(), PolicyHash: "sha256:test-policy"}, got); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
	if len(got.Policy.Rails) != 2 {
		t.Errorf("policy rails = %+v", got.Policy.Rails)
	}

	boom := errors.New("disclosure unavailable")
	for _, tc := range []struct {
		name   string
		digest func(context.Context) (string, error)
		want   string
		err    error
	}{
		{"digest", func(context.Context) (string, error) { return "sha256:other", nil }, "sha256:other", nil},
		{"no digest configured", nil, "", nil},
		{"digest fails", func(context.Context) (string, error) { return "", boom }, "", boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, err := newService(Options{Store: h.st, Log: h.log, Mandates: ovsVerifier(h), Now: h.clock.Now,
				Logger: slog.New(slog.DiscardHandler), PolicyDigest: tc.digest}, h.pay, h.svc.books)
			if err != nil {
				t.Fatal(err)
			}
			got, err := svc.OversightPolicyGet(ctx, h.call(), &Empty{})
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err == nil && got.PolicyHash != tc.want {
				t.Errorf("policyHash %q, want %q", got.PolicyHash, tc.want)
			}
		})
	}
}

func ovsVerifier(h *harness) *pay.MandateVerifier {
	h.t.Helper()
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-test", Public: h.opKey.Public()}}, &pay.MandateVerifierOptions{Now: h.clock.Now})
	if err != nil {
		h.t.Fatal(err)
	}
	return mv
}

// ovsQueue pages through the oversight queue of call from cursor, limit
// items at a time, and returns the intent ids; each page but the last has
// an opaque nextCursor (not an intent id) and hasMore.
func ovsQueue(t *testing.T, h *harness, call Call, cursor string, limit int) []string {
	t.Helper()
	got := []string{}
	for range 20 {
		page, err := h.svc.OversightQueueGet(t.Context(), call, &OversightQueueRequest{Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range page.Data {
			got = append(got, q.IntentID)
		}
		if !page.HasMore {
			if page.NextCursor != nil {
				t.Errorf("last page with nextCursor %q", *page.NextCursor)
			}
			return got
		}
		if page.NextCursor == nil || *page.NextCursor == "" || strings.HasPrefix(*page.NextCursor, "int_") {
			t.Fatalf("hasMore with nextCursor %v", page.NextCursor)
		}
		cursor = *page.NextCursor
	}
	t.Fatalf("more than 20 pages: %v", got)
	return nil
}

// TestOversightQueue pages the caller's held intents, oldest first: a
// settled payment, a denial, another key's held payment and an approved
// one never show.
func TestOversightQueue(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	var want, others []string
	var first *pay.Result
	for i, minor := range []int64{10_000, 20_000, 30_000, 40_000, 45_000} {
		h.clock.Add(time.Second)
		res := mdtMustPay(h, railWire, minor, pay.OutcomeHeld, nil)
		if first == nil {
			first = res
		}
		want = append(want, res.IntentID)
		if i == 1 {
			mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil)
			mdtMustPay(h, railWire, 60_000, pay.OutcomeDenied, nil)
			others = append(others, ovsPayWithKey(h, ovsSecondKey(h), 25_000).IntentID)
		}
	}
	h.clock.Add(time.Second)
	hold, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 12_000, nil), TTLSeconds: 3600})
	if err != nil || hold.Status != HoldPendingApproval {
		t.Fatalf("hold = %+v, %v", hold, err)
	}
	want = append(want, hold.IntentID)
	// Approve one: it leaves the queue.
	h.clock.Add(time.Second)
	approved := mdtMustPay(h, railWire, 11_000, pay.OutcomeHeld, nil)
	if _, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: approved.IntentID, Challenge: approved.Held.Challenge, MandateID: "mdt-1",
		Rationale: "looks fine to me", Acknowledged: true}, pay.OperatorCall{Operator: "op-test", Rationale: "looks fine to me"}); err != nil {
		t.Fatal(err)
	}
	// Another key's held intents after the caller's last one.
	others = append(others, ovsPayWithKey(h, ovsSecondKey(h), 26_000).IntentID, ovsPayWithKey(h, ovsSecondKey(h), 27_000).IntentID)

	for _, limit := range []int{0, 1, 2, 4, 6, 100} {
		t.Run(itoa(limit), func(t *testing.T) {
			if diff := cmp.Diff(want, ovsQueue(t, h, h.call(), "", limit)); diff != "" {
				t.Errorf("queue (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(others, ovsQueue(t, h, AgentCall(ovsSecondKey(h), "req_second"), "", 1)); diff != "" {
		t.Errorf("the other key's queue (-want +got):\n%s", diff)
	}

	page, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	q := page.Data[0]
	wantQ := QueuedIntent{IntentID: want[0], Route: pay.RoutePay, Payee: "acct:seller.example", Amount: pay.Amount{Minor: 10_000, Currency: "USD"},
		MandateID: "mdt-1", ApprovalsRequired: 1, ApprovalsReceived: 0, ExpiresAt: q.CreatedAt.Add(24 * time.Hour), CreatedAt: q.CreatedAt}
	if diff := cmp.Diff(wantQ, q); diff != "" {
		t.Errorf("queued intent (-want +got):\n%s", diff)
	}
	five, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Limit: 5})
	if err != nil || !five.HasMore || five.NextCursor == nil {
		t.Fatalf("five: %+v, %v", five, err)
	}
	last, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Cursor: *five.NextCursor, Limit: 5})
	if err != nil || len(last.Data) != 1 || last.Data[0].Route != routeHoldPlace || last.HasMore {
		t.Errorf("the hold in the queue: %+v, %v", last, err)
	}

	// A cursor no page returned is refused: an intent id (what cursors
	// were before), garbage, a position naming something not an intent.
	for _, c := range []string{want[0], "int_nope", "garbage", "!!", seqlist.Pos{Seq: 3, ID: "ak_01JABCDEFGHJKMNPQRSTVWXYZ0"}.Cursor()} {
		if _, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Cursor: c}); code(err) != CodeBadCursor {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
	// A cursor whose intent left the queue since still continues after it.
	if page.NextCursor == nil {
		t.Fatal("no nextCursor after the first intent")
	}
	if _, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: first.IntentID, Challenge: first.Held.Challenge, MandateID: "mdt-1",
		Rationale: "looks fine to me", Acknowledged: true}, pay.OperatorCall{Operator: "op-test", Rationale: "looks fine to me"}); err != nil {
		t.Fatal(err)
	}
	next, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Cursor: *page.NextCursor, Limit: 1})
	if err != nil || len(next.Data) != 1 || next.Data[0].IntentID != want[1] || !next.HasMore {
		t.Errorf("after the cursor's intent left the queue: %+v, %v", next, err)
	}
	if diff := cmp.Diff(want[1:], ovsQueue(t, h, h.call(), *page.NextCursor, 2)); diff != "" {
		t.Errorf("the rest after the cursor's intent left (-want +got):\n%s", diff)
	}
}

// TestOversightQueueFollowsCommitOrder: an intent whose id (and creation
// time) was minted first but whose transaction committed after the agent
// read a page, as with two servers on one database, is on the agent's
// next page, though its id sorts before the cursor's intent; the queue
// lists the intents in the order they were held, not by id.
func TestOversightQueueFollowsCommitOrder(t *testing.T) {
	gate := &seqlisttest.Gate{Store: memstore.New(&memstore.Options{RetryRate: 0.05})}
	h := newHarness(t, harnessConfig{store: gate})
	ctx := t.Context()
	mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil) // the mandate is known before the gate holds an Update
	var mintedFirst, page1, cursor string
	var late []string
	gate.Later(t, func() error {
		res, err := mdtPay(h, railWire, 20_000, nil)
		if err == nil {
			mintedFirst = res.IntentID
		}
		return err
	}, func() {
		for _, minor := range []int64{30_000, 40_000} {
			late = append(late, mdtMustPay(h, railWire, minor, pay.OutcomeHeld, nil).IntentID)
		}
		p, err := h.svc.OversightQueueGet(ctx, h.call(), &OversightQueueRequest{Limit: 1})
		if err != nil || len(p.Data) != 1 || p.NextCursor == nil {
			t.Fatalf("page 1: %+v %v", p, err)
		}
		page1, cursor = p.Data[0].IntentID, *p.NextCursor
	})
	if page1 != late[0] || !(mintedFirst < page1) {
		t.Fatalf("ids %s (minted first) and %s (page 1; held %v): want the first minted to sort first", mintedFirst, page1, late)
	}
	if diff := cmp.Diff([]string{late[1], mintedFirst}, ovsQueue(t, h, h.call(), cursor, 1)); diff != "" {
		t.Errorf("after the cursor (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{late[0], late[1], mintedFirst}, ovsQueue(t, h, h.call(), "", 2)); diff != "" {
		t.Errorf("from the start, in the order they were held (-want +got):\n%s", diff)
	}
}
