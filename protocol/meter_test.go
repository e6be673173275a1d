package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// mtrState is a meter's state as meter.get shows it.
func mtrState(t *testing.T, h *harness, id string) string {
	t.Helper()
	m, err := h.svc.MeterGet(t.Context(), h.call(), &MeterRef{MeterID: id})
	if err != nil {
		return "get: " + code(err)
	}
	return fmt.Sprintf("%s units=%d accrued=%d lines=%d", m.Status, m.Units, m.AccruedMinor, m.Lines)
}

// mtrOpenRequest is a meter.open request with a fresh spend of cap.
func mtrOpenRequest(h *harness, rail string, capMinor, price int64) *MeterOpenRequest {
	return &MeterOpenRequest{Spend: h.spend("meter.open", rail, capMinor, nil), UnitPriceMinor: price, TTLSeconds: 3600}
}

// mtrOpenTypes are the entries of a meter opened (or approved) without
// a person, by rail.
func mtrOpenTypes(rail string) []string {
	if rail == railCard {
		return []string{"gate.decision", "protocol.meter.open", "payment.authorized", "protocol.meter.authorize"}
	}
	return []string{"gate.decision", "payment.authorized", "protocol.meter.open"}
}

// mtrRail is the fake rail of the harness named rail.
func mtrRail(h *harness, rail string) *fake.Rail {
	if rail == railCard {
		return h.card
	}
	return h.wire
}

// TestMeterTransitions walks a meter through open, usage within its cap,
// the refusals of usage (cap, conflict, after close), close that settles
// units × price exactly once, and the refusals after it; on a rail that
// authorizes and on one that does not.
func TestMeterTransitions(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			var meterID string
			var closed *MeterClosed
			record := func(units int64, usage string, replay bool) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					r, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: meterID, Units: units, UsageID: usage})
					if err == nil && r.Replayed != replay {
						t.Errorf("recorded %+v, want replayed %v", r, replay)
					}
					return mtrState(t, h, meterID), err
				}
			}
			closeWith := func(key string) func(t *testing.T) (string, error) {
				return func(t *testing.T) (string, error) {
					c, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: meterID, IdempotencyKey: key})
					if err == nil && closed == nil {
						closed = c
					}
					return mtrState(t, h, meterID), err
				}
			}
			closeTypes := []string{"payment.capture_requested", "protocol.meter.close", "payment.settled", "protocol.meter.settle"}
			trnRun(t, h, []trnStep{
				{name: "open with a unit price above the cap", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, rail, 5_000, 5_001))
					return "", err
				}, code: "request.validation"},
				{name: "open", do: func(t *testing.T) (string, error) {
					m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, rail, 5_000, 100))
					if err != nil {
						return "", err
					}
					if m.Status != MeterOpen || m.CapMinor != 5_000 || m.UnitPriceMinor != 100 || m.ExpiresAt == nil || m.IsAccepted() {
						t.Errorf("opened %+v", m)
					}
					meterID = m.MeterID
					if p := trnPeriod(t, h); p != "reserved=5000 settled=0" {
						t.Errorf("period %s: the cap is reserved", p)
					}
					return mtrState(t, h, meterID), nil
				}, state: "open units=0 accrued=0 lines=0", types: mtrOpenTypes(rail)},
				{name: "record", do: record(20, "u1", false), state: "open units=20 accrued=2000 lines=1"},
				{name: "record more", do: record(20, "u2", false), state: "open units=40 accrued=4000 lines=2"},
				{name: "record past the cap", do: record(11, "u3", false), code: CodeMeterCapExceeded, state: "open units=40 accrued=4000 lines=2"},
				{name: "record a usage id again", do: record(20, "u1", true), state: "open units=40 accrued=4000 lines=2", same: true},
				{name: "record a usage id with other units", do: record(21, "u1", false), code: CodeMeterUsageReused, state: "open units=40 accrued=4000 lines=2"},
				{name: "record on an unknown meter", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: "mtr_unknown", Units: 1, UsageID: "u9"})
					return "", err
				}, code: CodeMeterNotFound},
				{name: "record on another key's meter", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterRecord(ctx, trnOtherKey(h), &MeterRecordRequest{MeterID: meterID, Units: 1, UsageID: "u9"})
					return "", err
				}, code: CodeMeterNotFound},
				{name: "capture the meter's hold as a hold", do: func(t *testing.T) (string, error) {
					holdID, _ := prefixID(meterID, "mtr_", "hold_")
					_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: holdID, AmountMinor: 1, IdempotencyKey: "h1"})
					return mtrState(t, h, meterID), err
				}, code: pay.CodeHoldNotFound, state: "open units=40 accrued=4000 lines=2"},
				{name: "close", do: closeWith("close-1"), state: "closed units=40 accrued=4000 lines=2", types: closeTypes},
				{name: "close again with its key", do: closeWith("close-1"), state: "closed units=40 accrued=4000 lines=2", same: true},
				{name: "close with another key", do: closeWith("close-2"), code: pay.CodeHoldCaptured, state: "closed units=40 accrued=4000 lines=2"},
				{name: "record after close", do: record(1, "u4", false), code: CodeMeterNotOpen, state: "closed units=40 accrued=4000 lines=2"},
			}, nil)
			if t.Failed() {
				return
			}
			want := MeterChainHead([]UsageLine{{20, "u1"}, {20, "u2"}})
			if closed.ChainHead != want || want != chainNext(chainNext("", 1, 20, "u1"), 2, 20, "u2") {
				t.Errorf("chain head %s, want %s", closed.ChainHead, want)
			}
			if closed.Receipt == nil || closed.Receipt.Amount.Minor != 4_000 || closed.AccruedMinor != 4_000 || closed.Units != 40 || closed.Lines != 2 {
				t.Errorf("closed %+v, want 40 units settled for 4000", closed)
			}
			if p := trnPeriod(t, h); p != "reserved=0 settled=4000" {
				t.Errorf("period %s: the rest of the cap goes back", p)
			}
			intentID, _ := prefixID(meterID, "mtr_", "int_")
			st, err := mtrRail(h, rail).Lookup(ctx, intentID)
			if err != nil || st.Status != settle.StatusSettled || st.Amount != 4_000 {
				t.Errorf("the rail has %+v, %v; want 4000 settled once", st, err)
			}
			m, err := h.svc.MeterGet(ctx, h.call(), &MeterRef{MeterID: meterID})
			if err != nil {
				t.Fatal(err)
			}
			if m.ChainHead != want || m.Receipt == nil || *m.Receipt != *closed.Receipt {
				t.Errorf("get %+v", m)
			}
			if got := mtrCloseEntry(t, h, intentID); got.ChainHead != want || got.Lines != 2 || got.Units != 40 || got.AccruedMinor != 4_000 {
				t.Errorf("the close entry commits to %+v, want head %s of 2 lines, 40 units, 4000", got, want)
			}
		})
	}
}

// mtrCloseEntry returns the meter's state as its protocol.meter.close
// entry records it.
func mtrCloseEntry(t *testing.T, h *harness, intentID string) Meter {
	t.Helper()
	var m Meter
	n := 0
	for e, err := range h.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == "protocol.meter.close" && e.IntentID == intentID {
			n++
			if err := json.Unmarshal(e.Data, &m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d protocol.meter.close entries for %s, want 1", n, intentID)
	}
	return m
}

// TestMeterRecordAppendsNoEntry: usage is stored and chained, never
// recorded line by line.
func TestMeterRecordAppendsNoEntry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, railWire, 9_000, 3))
	if err != nil {
		t.Fatal(err)
	}
	n := h.size()
	var lines []UsageLine
	for i := range 50 {
		units, usage := int64(i%7+1), fmt.Sprintf("usage-%02d", i)
		r, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: units, UsageID: usage})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, UsageLine{units, usage})
		if want := MeterChainHead(lines); r.ChainHead != want || r.Lines != int64(len(lines)) {
			t.Fatalf("line %d: head %s, lines %d; want %s, %d", i, r.ChainHead, r.Lines, want, len(lines))
		}
	}
	if got := h.size(); got != n {
		t.Errorf("meter.record appended %d entries, want none: %v", got-n, h.typesSince(n))
	}
}

// TestMeterCloseWithoutUsage: a meter closed with nothing accrued
// releases its hold and settles nothing.
func TestMeterCloseWithoutUsage(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, rail, 5_000, 100))
			if err != nil {
				t.Fatal(err)
			}
			n := h.size()
			c, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: m.MeterID, IdempotencyKey: "close-1"})
			if err != nil {
				t.Fatal(err)
			}
			if c.Receipt != nil || c.AccruedMinor != 0 || c.Units != 0 {
				t.Errorf("closed %+v, want nothing settled", c)
			}
			if diff := cmp.Diff([]string{"payment.voided", "protocol.meter.close"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries of close (-want +got):\n%s", diff)
			}
			if got := mtrState(t, h, m.MeterID); got != "closed units=0 accrued=0 lines=0" {
				t.Errorf("state %q", got)
			}
			if p := trnPeriod(t, h); p != "reserved=0 settled=0" {
				t.Errorf("period %s: the cap goes back", p)
			}
			intentID := m.IntentID
			if rail == railCard {
				a, err := h.card.LookupAuthorization(ctx, intentID)
				if err != nil || a.Status != settle.AuthVoided {
					t.Errorf("the rail's hold is %+v, %v; want voided", a, err)
				}
			}
			if st, err := mtrRail(h, rail).Lookup(ctx, intentID); !errors.Is(err, settle.ErrUnknownKey) {
				t.Errorf("the rail has %+v, %v; want no payment for a meter closed without usage", st, err)
			}
			before := h.dump()
			again, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: m.MeterID, IdempotencyKey: "close-1"})
			if err != nil {
				t.Fatal(err)
			}
			trnReplay(t, c, again)
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a repeated close changed the store:\n%s", diff)
			}
			if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 1, UsageID: "late"}); code(err) != CodeMeterNotOpen {
				t.Errorf("record after close: %v, want %s", err, CodeMeterNotOpen)
			}
		})
	}
}

// TestMeterApproval: a cap at or above the confirmation threshold waits
// for a person; usage and close are refused until it is approved.
func TestMeterApproval(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			var opened *MeterOpened
			approvedTypes := []string{"approval.granted", "payment.authorized", "protocol.meter.approve"}
			if rail == railCard {
				approvedTypes = []string{"approval.granted", "protocol.meter.approve", "payment.authorized", "protocol.meter.authorize"}
			}
			trnRun(t, h, []trnStep{
				{name: "open", do: func(t *testing.T) (string, error) {
					m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, rail, 20_000, 100))
					if err != nil {
						return "", err
					}
					if !m.IsAccepted() || m.Approval == nil || m.Approval.Challenge == "" {
						t.Errorf("opened %+v, want 202 with a challenge", m)
					}
					opened = m
					return mtrState(t, h, m.MeterID), nil
				}, state: "pending_approval units=0 accrued=0 lines=0", types: []string{"gate.decision", "protocol.meter.open"}},
				{name: "record before approval", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: opened.MeterID, Units: 1, UsageID: "u1"})
					return mtrState(t, h, opened.MeterID), err
				}, code: CodeMeterNotOpen, state: "pending_approval units=0 accrued=0 lines=0"},
				{name: "close before approval", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: opened.MeterID, IdempotencyKey: "c1"})
					return mtrState(t, h, opened.MeterID), err
				}, code: CodeMeterNotOpen, state: "pending_approval units=0 accrued=0 lines=0"},
				{name: "approve", do: func(t *testing.T) (string, error) {
					_, err := trnApprove(t, h, opened.IntentID, opened.Approval)
					return mtrState(t, h, opened.MeterID), err
				}, state: "open units=0 accrued=0 lines=0", types: approvedTypes},
				{name: "record", do: func(t *testing.T) (string, error) {
					_, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: opened.MeterID, Units: 7, UsageID: "u1"})
					return mtrState(t, h, opened.MeterID), err
				}, state: "open units=7 accrued=700 lines=1"},
			}, nil)
		})
	}
}

// TestMeterIdempotency: meter.open and meter.close answer a repeat with
// the same bytes, marked replayed, and refuse the key with another body.
func TestMeterIdempotency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	req := mtrOpenRequest(h, railCard, 5_000, 100)
	first, err := h.svc.MeterOpen(ctx, h.call(), req)
	if err != nil {
		t.Fatal(err)
	}
	before := h.dump()
	again, err := h.svc.MeterOpen(ctx, h.call(), req)
	if err != nil {
		t.Fatal(err)
	}
	trnReplay(t, first, again)
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a replayed open changed the store:\n%s", diff)
	}
	other := *req
	other.UnitPriceMinor = 50
	if _, err := h.svc.MeterOpen(ctx, h.call(), &other); code(err) != pay.CodeIdempotencyConflict {
		t.Errorf("open, same key, other unit price: %v, want %s", err, pay.CodeIdempotencyConflict)
	}
	other = *req
	other.Spend = h.spend("meter.open", railCard, 6_000, func(in *pay.Instruction) { in.IdempotencyKey = req.Spend.IdempotencyKey })
	if _, err := h.svc.MeterOpen(ctx, h.call(), &other); code(err) != pay.CodeIdempotencyConflict {
		t.Errorf("open, same key, other cap: %v, want %s", err, pay.CodeIdempotencyConflict)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a conflicting open changed the store:\n%s", diff)
	}

	if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: first.MeterID, Units: 3, UsageID: "u1"}); err != nil {
		t.Fatal(err)
	}
	closeReq := &MeterCloseRequest{MeterID: first.MeterID, IdempotencyKey: "close-1"}
	closed, err := h.svc.MeterClose(ctx, h.call(), closeReq)
	if err != nil {
		t.Fatal(err)
	}
	before = h.dump()
	closedAgain, err := h.svc.MeterClose(ctx, h.call(), closeReq)
	if err != nil {
		t.Fatal(err)
	}
	trnReplay(t, closed, closedAgain)
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a replayed close changed the store:\n%s", diff)
	}
	st, err := h.card.Lookup(ctx, first.IntentID)
	if err != nil || st.Amount != 300 {
		t.Errorf("the rail has %+v, %v; want 300 settled once", st, err)
	}
}

// TestMeterCloseKeyReuse: meter.close is idempotent on its key within
// the agent key's namespace, like every key of the surface: the key of
// one meter's close, sent to close another meter, is another body under
// the same key.
func TestMeterCloseKeyReuse(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	var meters []string
	for range 2 {
		m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, railWire, 5_000, 100))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 2, UsageID: "u1"}); err != nil {
			t.Fatal(err)
		}
		meters = append(meters, m.MeterID)
	}
	if _, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: meters[0], IdempotencyKey: "close-1"}); err != nil {
		t.Fatal(err)
	}
	before := h.dump()
	_, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: meters[1], IdempotencyKey: "close-1"})
	if code(err) != pay.CodeIdempotencyConflict {
		t.Errorf("close another meter with a used key: %v, want %s", err, pay.CodeIdempotencyConflict)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the store changed:\n%s", diff)
	}
}

// TestMeterCloseRefused: a close refused before anything settles (the
// kill switch engaged, the mandate revoked) changes nothing, so the
// meter stays open: usage may still be recorded, and the close succeeds
// once the refusal is lifted.
func TestMeterCloseRefused(t *testing.T) {
	op := pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "the test freezes settlement"}
	for _, tc := range []struct {
		name          string
		refuse, allow func(t *testing.T, h *harness)
		want          string
	}{
		{"kill switch", func(t *testing.T, h *harness) {
			if _, err := h.pay.SetKillSwitch(t.Context(), true, op); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, h *harness) {
			if _, err := h.pay.SetKillSwitch(t.Context(), false, op); err != nil {
				t.Fatal(err)
			}
		}, pay.CodeFrozen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, railCard, 5_000, 100))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 2, UsageID: "u1"}); err != nil {
				t.Fatal(err)
			}
			tc.refuse(t, h)
			before := h.dump()
			_, err = h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: m.MeterID, IdempotencyKey: "close-1"})
			if code(err) != tc.want {
				t.Fatalf("close: %v, want %s", err, tc.want)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a refused close changed the store:\n%s", diff)
			}
			if got := mtrState(t, h, m.MeterID); got != "open units=2 accrued=200 lines=1" {
				t.Errorf("after a refused close: %s", got)
			}
			tc.allow(t, h)
			if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 3, UsageID: "u2"}); err != nil {
				t.Errorf("record after a refused close: %v (%s), want it accrued", err, code(err))
			}
			c, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: m.MeterID, IdempotencyKey: "close-1"})
			if err != nil {
				t.Fatal(err)
			}
			if c.Receipt == nil || c.Receipt.Amount.Minor != c.AccruedMinor {
				t.Errorf("closed %+v", c)
			}
		})
	}
}

// TestMeterCloseWhileRecording: usage racing a close is either in the
// settled total or refused, never lost and never settled twice.
func TestMeterCloseWhileRecording(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	m, err := h.svc.MeterOpen(ctx, h.call(), mtrOpenRequest(h, railCard, 9_000, 10))
	if err != nil {
		t.Fatal(err)
	}
	// One unit lands before the race, so the close always captures (a
	// meter closed with nothing accrued is voided instead: its own test).
	if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 1, UsageID: "u-first"}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	recorded := make([]error, n)
	closes := make([]*MeterClosed, 2)
	closeErrs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, recorded[i] = h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: m.MeterID, Units: 1, UsageID: fmt.Sprintf("u%02d", i)})
		})
		if i == n/2 {
			for j := range closes {
				wg.Go(func() {
					closes[j], closeErrs[j] = h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: m.MeterID, IdempotencyKey: "close-1"})
				})
			}
		}
	}
	wg.Wait()
	units := int64(1) // u-first
	for _, err := range recorded {
		switch code(err) {
		case "":
			units++
		case CodeMeterNotOpen:
		default:
			t.Errorf("record: %v", err)
		}
	}
	var receipt *pay.Receipt
	for j, c := range closes {
		switch {
		case closeErrs[j] == nil:
			if receipt != nil && *receipt != *c.Receipt {
				t.Errorf("two closes with one key answered two receipts: %+v, %+v", receipt, c.Receipt)
			}
			receipt = c.Receipt
		case code(closeErrs[j]) != pay.CodeInFlight:
			t.Errorf("close: %v", closeErrs[j])
		}
	}
	if receipt == nil || receipt.Amount.Minor != units*10 {
		t.Fatalf("settled %+v for %d units recorded at 10", receipt, units)
	}
	if got, want := mtrState(t, h, m.MeterID), fmt.Sprintf("closed units=%d accrued=%d lines=%d", units, units*10, units); got != want {
		t.Errorf("state %s, want %s", got, want)
	}
	st, err := h.card.Lookup(ctx, m.IntentID)
	if err != nil || st.Amount != units*10 {
		t.Errorf("the rail has %+v, %v; want %d settled once", st, err, units*10)
	}
}

// TestMeterOpenDeclined: a cap the rail will not authorize opens no
// meter, and reserves nothing.
func TestMeterOpenDeclined(t *testing.T) {
	h := newHarness(t, harnessConfig{card: cusDeclining})
	ctx := t.Context()
	n := h.size()
	req := &MeterOpenRequest{Spend: h.spend("meter.open", railCard, 5_000, func(in *pay.Instruction) { in.Payee = cusDeclinedPayee }),
		UnitPriceMinor: 100, TTLSeconds: 3600}
	_, err := h.svc.MeterOpen(ctx, h.call(), req)
	if code(err) != pay.CodeDeclined {
		t.Fatalf("open: %v, want %s", err, pay.CodeDeclined)
	}
	if diff := cmp.Diff([]string{"gate.decision", "protocol.meter.open", "payment.failed", "protocol.meter.fail"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	var r *Refused
	if !errors.As(err, &r) {
		t.Fatalf("err %T, want *Refused", err)
	}
	id, _ := prefixID(r.Result.IntentID, "int_", "mtr_")
	if got := mtrState(t, h, id); got != "failed units=0 accrued=0 lines=0" {
		t.Errorf("state %s", got)
	}
	if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: id, Units: 1, UsageID: "u1"}); code(err) != CodeMeterNotOpen {
		t.Errorf("record on a declined meter: %v", err)
	}
	if got := trnPeriod(t, h); got != "reserved=0 settled=0" {
		t.Errorf("period %s", got)
	}
}
