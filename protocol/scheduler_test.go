package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// schObjects are the objects with a due time the scheduler tests make.
type schObjects struct {
	cardHold, wireHold *HoldPlaced  // expire at +60s
	meter              *MeterOpened // on the card rail, expires at +60s
	stakeID            string       // lock ends at +90s
	sessionID          string       // ends at +120s
}

// schSetup funds custody and makes one object of each kind with a due
// time, all at the harness's start time.
func schSetup(t *testing.T, h *harness) schObjects {
	t.Helper()
	ctx := t.Context()
	stkFund(t, h, 9_000)
	var o schObjects
	var err error
	if o.cardHold, err = h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 2_000, nil), TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	if o.wireHold, err = h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 3_000, nil), TTLSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	mreq := mtrOpenRequest(h, railCard, 4_000, 100)
	mreq.TTLSeconds = 60
	if o.meter, err = h.svc.MeterOpen(ctx, h.call(), mreq); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: o.meter.MeterID, Units: 5, UsageID: "u1"}); err != nil {
		t.Fatal(err)
	}
	p, err := h.svc.StakePost(ctx, h.call(), stkRequest(h, "stake-1", 1_000, 90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	o.stakeID = p.ID
	ses, err := h.svc.SessionOpen(ctx, h.call(), &SessionOpenRequest{Mandate: h.mandate, BudgetMinor: 5_000, TTLSeconds: 120})
	if err != nil {
		t.Fatal(err)
	}
	o.sessionID = ses.ID
	for _, hp := range []*HoldPlaced{o.cardHold, o.wireHold} {
		if hp.Status != HoldHeld || hp.ExpiresAt == nil || !hp.ExpiresAt.Equal(h.clock.Now().Add(time.Minute)) {
			t.Fatalf("placed %+v, want held until +60s", hp)
		}
	}
	return o
}

// schStates reads every object's status through the surface.
func schStates(t *testing.T, h *harness, o schObjects) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	for name, id := range map[string]string{"card hold": o.cardHold.HoldID, "wire hold": o.wireHold.HoldID} {
		hd, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: id})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(hd.Status)
	}
	m, err := h.svc.MeterGet(ctx, h.call(), &MeterRef{MeterID: o.meter.MeterID})
	if err != nil {
		t.Fatal(err)
	}
	out["meter"] = m.Status
	st, err := h.svc.StakeGet(ctx, h.call(), &StakeRef{StakeID: o.stakeID})
	if err != nil {
		t.Fatal(err)
	}
	out["stake"] = st.Status
	ses, err := h.svc.SessionGet(ctx, h.call(), &SessionRef{SessionID: o.sessionID})
	if err != nil {
		t.Fatal(err)
	}
	out["session"] = ses.Status
	out["period"] = trnPeriod(t, h)
	for name, id := range map[string]string{"card hold at the rail": o.cardHold.IntentID, "meter at the rail": o.meter.IntentID} {
		a, err := h.card.LookupAuthorization(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(a.Status)
	}
	return out
}

// schNewStatus is the status each protocol entry of a sweep records for
// its object.
var schNewStatus = map[string]string{
	"protocol.hold.expire": string(HoldExpired), "protocol.meter.expire": MeterExpired,
	"protocol.stake.unlock": StakeReleasable, "protocol.session.expire": pay.SessionExpired,
}

// schEntriesOfSweep checks the entries appended after size n by a sweep:
// the system acted, and each protocol entry carries its object's new
// status. It returns how many it checked.
func schEntriesOfSweep(t *testing.T, h *harness, n uint64) int {
	t.Helper()
	seen := 0
	for e, err := range h.log.Entries(t.Context(), n+1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		seen++
		if e.Actor.Kind != "system" {
			t.Errorf("entry %d (%s) acted by %+v, want the system", e.Seq, e.Type, e.Actor)
		}
		want, ok := schNewStatus[e.Type]
		if !strings.HasPrefix(e.Type, "protocol.") {
			continue
		}
		var obj struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(e.Data, &obj); err != nil || !ok || obj.Status != want {
			t.Errorf("entry %d (%s) records status %q (%v), want %q", e.Seq, e.Type, obj.Status, err, want)
		}
	}
	return seen
}

// TestSchedulerSweep drives every time-driven transition with the fake
// clock: holds (on both rails) and a meter expire at their TTL, their
// reservation released; a stake's lock ends; a session expires. Nothing
// happens a moment before a due time, and a second sweep at the same
// time changes nothing. The same holds when the process restarts before
// each sweep: the scheduler reads its work from the store.
func TestSchedulerSweep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
	}{{"one process", false}, {"restarted before each sweep", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			start := h.clock.Now()
			o := schSetup(t, h)
			states := map[string]string{
				"card hold": string(HoldHeld), "wire hold": string(HoldHeld), "meter": MeterOpen, "stake": StakeLocked, "session": pay.SessionOpen,
				"period": "reserved=9000 settled=9000", "card hold at the rail": string(settle.AuthAuthorized),
				"meter at the rail": string(settle.AuthAuthorized),
			}
			if diff := cmp.Diff(states, schStates(t, h, o)); diff != "" {
				t.Fatalf("before any sweep (-want +got):\n%s", diff)
			}
			for _, p := range []struct {
				name   string
				at     time.Duration
				report SweepReport
				types  []string          // in any order
				change map[string]string // states that change
			}{
				{name: "just before the holds' expiry", at: time.Minute - time.Microsecond},
				{name: "the holds' expiry", at: time.Minute, report: SweepReport{HoldsExpired: 3},
					types: []string{"payment.hold_expired", "payment.hold_expired", "payment.hold_expired",
						"protocol.hold.expire", "protocol.hold.expire", "protocol.meter.expire"},
					change: map[string]string{"card hold": string(HoldExpired), "wire hold": string(HoldExpired), "meter": MeterExpired,
						"period": "reserved=0 settled=9000", "card hold at the rail": string(settle.AuthVoided),
						"meter at the rail": string(settle.AuthVoided)}},
				{name: "just before the stake's lock ends", at: 90*time.Second - time.Microsecond},
				{name: "the stake's lock ends", at: 90 * time.Second, report: SweepReport{StakesUnlocked: 1},
					types: []string{"protocol.stake.unlock"}, change: map[string]string{"stake": StakeReleasable}},
				{name: "just before the session ends", at: 2*time.Minute - time.Microsecond},
				{name: "the session ends", at: 2 * time.Minute, report: SweepReport{SessionsExpired: 1},
					types: []string{"protocol.session.expire"}, change: map[string]string{"session": pay.SessionExpired}},
			} {
				t.Run(p.name, func(t *testing.T) {
					h.clock.Add(start.Add(p.at).Sub(h.clock.Now()))
					if tc.restart {
						h.restart()
					}
					before, n := h.dump(), h.size()
					rep, err := h.svc.Sweep(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					if rep != p.report {
						t.Errorf("sweep %+v, want %+v", rep, p.report)
					}
					got := h.typesSince(n)
					slices.Sort(got)
					want := slices.Clone(p.types)
					slices.Sort(want)
					if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
						t.Errorf("entries (-want +got):\n%s", diff)
					}
					if seen := schEntriesOfSweep(t, h, n); seen != len(p.types) {
						t.Errorf("checked %d entries of the sweep, want %d", seen, len(p.types))
					}
					if p.report == (SweepReport{}) {
						if diff := cmp.Diff(before, h.dump()); diff != "" {
							t.Errorf("a sweep with nothing due changed the store:\n%s", diff)
						}
					}
					for k, v := range p.change {
						states[k] = v
					}
					if diff := cmp.Diff(states, schStates(t, h, o)); diff != "" {
						t.Errorf("states (-want +got):\n%s", diff)
					}
					before = h.dump()
					if rep, err := h.svc.Sweep(t.Context()); err != nil || rep != (SweepReport{}) {
						t.Errorf("second sweep = %+v, %v; want nothing", rep, err)
					}
					if diff := cmp.Diff(before, h.dump()); diff != "" {
						t.Errorf("a second sweep changed the store:\n%s", diff)
					}
				})
			}
			cusBooks(t, h)
		})
	}
}

// TestSchedulerAfterExpiry: what the sweep ended is refused like any
// other ended object, and changes nothing.
func TestSchedulerAfterExpiry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := schSetup(t, h)
	h.clock.Add(2 * time.Minute)
	h.restart()
	if _, err := h.svc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"capture an expired hold", func() error {
			_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: o.cardHold.HoldID, AmountMinor: 1, IdempotencyKey: "c1"})
			return err
		}, pay.CodeHoldReleased},
		{"release an expired hold", func() error {
			_, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: o.wireHold.HoldID})
			return err
		}, pay.CodeHoldReleased},
		{"record on an expired meter", func() error {
			_, err := h.svc.MeterRecord(ctx, h.call(), &MeterRecordRequest{MeterID: o.meter.MeterID, Units: 1, UsageID: "u2"})
			return err
		}, CodeMeterNotOpen},
		{"close an expired meter", func() error {
			_, err := h.svc.MeterClose(ctx, h.call(), &MeterCloseRequest{MeterID: o.meter.MeterID, IdempotencyKey: "c1"})
			return err
		}, CodeMeterNotOpen},
		{"close an expired session", func() error {
			_, err := h.svc.SessionClose(ctx, h.call(), &SessionRef{SessionID: o.sessionID})
			return err
		}, pay.CodeSessionClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.dump()
			if got := code(tc.run()); got != tc.want {
				t.Errorf("code %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("the store changed:\n%s", diff)
			}
		})
	}
}

// TestSchedulerRetriesTheRail: a hold whose rail does not answer the
// void stays held, and the next sweep expires it.
func TestSchedulerRetriesTheRail(t *testing.T) {
	h := newHarness(t, harnessConfig{card: func(o *fake.Options) { o.Fault = fake.FailNext(fake.OpVoid, 1, settle.ErrUnavailable) }})
	ctx := t.Context()
	p, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 2_000, nil), TTLSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Minute)
	before := h.dump()
	if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
		t.Errorf("sweep with the rail down = %+v, %v; want nothing done", rep, err)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a sweep that could not void changed the store:\n%s", diff)
	}
	h.restart()
	if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{HoldsExpired: 1}) {
		t.Errorf("sweep = %+v, %v; want the hold expired", rep, err)
	}
	hd, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: p.HoldID})
	if err != nil || hd.Status != HoldExpired {
		t.Errorf("hold = %+v, %v; want expired", hd, err)
	}
	if got := trnPeriod(t, h); got != "reserved=0 settled=0" {
		t.Errorf("period %s", got)
	}
}
