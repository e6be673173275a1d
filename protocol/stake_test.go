package protocol

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// stkState is a stake's status as stake.get shows it ("none" before it
// exists) and the custody it was taken from.
func stkState(t *testing.T, h *harness, id string) string {
	t.Helper()
	status := "none"
	if id != "" {
		st, err := h.svc.StakeGet(t.Context(), h.call(), &StakeRef{StakeID: id})
		if err != nil {
			status = "get: " + code(err)
		} else {
			status = st.Status
		}
	}
	b := cusBalance(t, h)
	return fmt.Sprintf("%s available=%d staked=%d", status, b.AvailableMinor, b.StakedMinor)
}

// stkFund deposits minor into the agent's custody.
func stkFund(t *testing.T, h *harness, minor int64) {
	t.Helper()
	if _, err := h.svc.CustodyDeposit(t.Context(), h.call(), cusSpend(h, "custody.deposit", "", minor)); err != nil {
		t.Fatal(err)
	}
}

// stkRequest is a stake.post request of minor USD locked for d.
func stkRequest(h *harness, key string, minor int64, d time.Duration) *StakePostRequest {
	return &StakePostRequest{Amount: pay.Amount{Minor: minor, Currency: "USD"}, LockedUntil: h.clock.Now().Add(d),
		Purpose: "a bond for the test", IdempotencyKey: key}
}

// stkDispute opens (or closes) a dispute naming the stake, as the dispute
// namespace indexes it.
func stkDispute(t *testing.T, h *harness, stakeID string, open bool) {
	t.Helper()
	key := append(stakeDisputePrefix(stakeID), "dsp_test"...)
	err := h.st.Update(t.Context(), func(txn store.Txn) error {
		if open {
			return txn.Set(key, nil)
		}
		return txn.Delete(key)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStakeTransitions walks a stake through post (and its refusals),
// its lock, the scheduled unlock, a dispute naming it, release, and what
// is refused after, checking the books after every step.
func TestStakeTransitions(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	stkFund(t, h, 9_000)
	var stakeID string
	var lockedUntil time.Time
	post := func(req func() *StakePostRequest) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			r := req()
			p, err := h.svc.StakePost(ctx, h.call(), r)
			if err == nil && stakeID == "" {
				stakeID, lockedUntil = p.ID, p.LockedUntil
				if !strings.HasPrefix(p.ID, "stk_") || p.Agent != h.agent || p.Amount != r.Amount || !p.LockedUntil.Equal(r.LockedUntil) || len(p.Entries) != 1 {
					t.Errorf("posted %+v", p.Stake)
				}
			}
			return stkState(t, h, stakeID), err
		}
	}
	release := func(c func() Call) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := h.svc.StakeRelease(ctx, c(), &StakeRef{StakeID: stakeID})
			return stkState(t, h, stakeID), err
		}
	}
	sweep := func(want SweepReport) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			rep, err := h.svc.Sweep(ctx)
			if rep != want {
				t.Errorf("sweep %+v, want %+v", rep, want)
			}
			return stkState(t, h, stakeID), err
		}
	}
	first := stkRequest(h, "stake-1", 4_000, time.Hour)
	trnRun(t, h, []trnStep{
		{name: "post more than available", do: post(func() *StakePostRequest { return stkRequest(h, "stake-0", 9_001, time.Hour) }),
			code: CodeCustodyInsufficient, state: "none available=9000 staked=0"},
		{name: "post locked until now", do: post(func() *StakePostRequest { return stkRequest(h, "stake-0", 1_000, 0) }),
			code: CodeStakeInvalid, state: "none available=9000 staked=0"},
		{name: "post locked for more than a year", do: post(func() *StakePostRequest { return stkRequest(h, "stake-0", 1_000, 367*24*time.Hour) }),
			code: CodeStakeInvalid, state: "none available=9000 staked=0"},
		{name: "post nothing", do: post(func() *StakePostRequest { return stkRequest(h, "stake-0", 0, time.Hour) }),
			code: CodeStakeInvalid, state: "none available=9000 staked=0"},
		{name: "post in a malformed currency", do: post(func() *StakePostRequest {
			r := stkRequest(h, "stake-0", 1_000, time.Hour)
			r.Amount.Currency = "usd"
			return r
		}), code: CodeStakeInvalid, state: "none available=9000 staked=0"},
		{name: "post for another agent", do: post(func() *StakePostRequest {
			r := stkRequest(h, "stake-0", 1_000, time.Hour)
			r.Agent = strings.Repeat("ab", 32)
			return r
		}), code: CodeCustodyAgent, state: "none available=9000 staked=0"},
		{name: "post", do: post(func() *StakePostRequest { return first }), state: "locked available=5000 staked=4000",
			types: []string{"protocol.stake.post"}},
		{name: "post again", do: post(func() *StakePostRequest { return first }), state: "locked available=5000 staked=4000", same: true},
		{name: "post again with another amount", do: post(func() *StakePostRequest {
			r := *first
			r.Amount.Minor = 3_000
			return &r
		}), code: pay.CodeIdempotencyConflict, state: "locked available=5000 staked=4000"},
		{name: "get as another key", do: func(t *testing.T) (string, error) {
			_, err := h.svc.StakeGet(ctx, trnOtherKey(h), &StakeRef{StakeID: stakeID})
			return "", err
		}, code: CodeStakeNotFound},
		{name: "release as another key", do: release(func() Call { return trnOtherKey(h) }), code: CodeStakeNotFound,
			state: "locked available=5000 staked=4000"},
		{name: "release unknown", do: func(t *testing.T) (string, error) {
			_, err := h.svc.StakeRelease(ctx, h.call(), &StakeRef{StakeID: "stk_unknown"})
			return "", err
		}, code: CodeStakeNotFound},
		{name: "release while locked", do: release(h.call), code: CodeStakeLocked, state: "locked available=5000 staked=4000"},
		{name: "sweep just before the lock ends", do: func(t *testing.T) (string, error) {
			h.clock.Add(lockedUntil.Sub(h.clock.Now()) - time.Microsecond)
			return sweep(SweepReport{})(t)
		}, state: "locked available=5000 staked=4000", same: true},
		{name: "release just before the lock ends", do: release(h.call), code: CodeStakeLocked, state: "locked available=5000 staked=4000"},
		{name: "sweep when the lock ends", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Microsecond)
			return sweep(SweepReport{StakesUnlocked: 1})(t)
		}, state: "releasable available=5000 staked=4000", types: []string{"protocol.stake.unlock"}},
		{name: "sweep again", do: sweep(SweepReport{}), state: "releasable available=5000 staked=4000", same: true},
		{name: "a dispute names it", do: func(t *testing.T) (string, error) {
			stkDispute(t, h, stakeID, true)
			return stkState(t, h, stakeID), nil
		}, state: "releasable available=5000 staked=4000"},
		{name: "release while disputed", do: release(h.call), code: CodeStakeDisputed, state: "releasable available=5000 staked=4000"},
		{name: "the dispute closes", do: func(t *testing.T) (string, error) {
			stkDispute(t, h, stakeID, false)
			return stkState(t, h, stakeID), nil
		}, state: "releasable available=5000 staked=4000"},
		{name: "release", do: release(h.call), state: "released available=9000 staked=0", types: []string{"protocol.stake.release"}},
		{name: "release twice", do: release(h.call), code: CodeStakeReleased, state: "released available=9000 staked=0"},
	}, func(t *testing.T) { cusBooks(t, h) })
}

// TestStakeReleaseWithoutSweep: once lockedUntil has passed a stake may
// be released whether or not the scheduler has marked it releasable, and
// the sweep then leaves it alone.
func TestStakeReleaseWithoutSweep(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	stkFund(t, h, 9_000)
	p, err := h.svc.StakePost(ctx, h.call(), stkRequest(h, "stake-1", 2_000, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Minute)
	r, err := h.svc.StakeRelease(ctx, h.call(), &StakeRef{StakeID: p.ID})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StakeReleased || len(r.Entries) != 2 {
		t.Errorf("released %+v", r)
	}
	before := h.dump()
	if rep, err := h.svc.Sweep(ctx); err != nil || rep != (SweepReport{}) {
		t.Errorf("sweep = %+v, %v; want nothing to do", rep, err)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the sweep changed the store:\n%s", diff)
	}
	if got := stkState(t, h, p.ID); got != "released available=9000 staked=0" {
		t.Errorf("state %s", got)
	}
	cusBooks(t, h)
}

// TestStakeIdempotency: stake.post answers a repeat with the bytes of
// its first answer, marked replayed, and locks nothing twice; the key
// with another body is a conflict. A repeat is answered from what was
// stored whatever became of the stake since (the Replayer contract: the
// body byte-identical to the first), even once its lock has ended.
func TestStakeIdempotency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	stkFund(t, h, 9_000)
	req := stkRequest(h, "stake-1", 4_000, time.Minute)
	first, err := h.svc.StakePost(ctx, h.call(), req)
	if err != nil {
		t.Fatal(err)
	}
	before := h.dump()
	again, err := h.svc.StakePost(ctx, h.call(), req)
	if err != nil {
		t.Fatal(err)
	}
	trnReplay(t, first, again)
	other := *req
	other.LockedUntil = other.LockedUntil.Add(time.Second)
	if _, err := h.svc.StakePost(ctx, h.call(), &other); code(err) != pay.CodeIdempotencyConflict {
		t.Errorf("same key, other lockedUntil: %v, want %s", err, pay.CodeIdempotencyConflict)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a replay or a conflict changed the store:\n%s", diff)
	}
	for _, step := range []struct {
		name    string
		advance func(t *testing.T)
		state   string
	}{
		{"after the lock ended", func(t *testing.T) {
			h.clock.Add(time.Minute)
			if _, err := h.svc.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
		}, "releasable available=5000 staked=4000"},
		{"after release", func(t *testing.T) {
			if _, err := h.svc.StakeRelease(ctx, h.call(), &StakeRef{StakeID: first.ID}); err != nil {
				t.Fatal(err)
			}
		}, "released available=9000 staked=0"},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.advance(t)
			before := h.dump()
			late, err := h.svc.StakePost(ctx, h.call(), req)
			if err != nil {
				t.Errorf("a repeat of a stake posted earlier: %v (%s), want its replay", err, code(err))
			} else {
				trnReplay(t, first, late)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a repeat changed the store:\n%s", diff)
			}
			if got := stkState(t, h, first.ID); got != step.state {
				t.Errorf("state %s, want %s", got, step.state)
			}
			cusBooks(t, h)
		})
	}
}

// TestStakePostsUnderConcurrency: stakes racing for the available
// balance never lock more than there is.
func TestStakePostsUnderConcurrency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	stkFund(t, h, 9_000)
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range errs {
		req := stkRequest(h, fmt.Sprintf("stake-%d", i), 2_000, time.Hour)
		wg.Go(func() { _, errs[i] = h.svc.StakePost(t.Context(), h.call(), req) })
	}
	wg.Wait()
	posted := 0
	for _, err := range errs {
		switch code(err) {
		case "":
			posted++
		case CodeCustodyInsufficient:
		default:
			t.Errorf("post: %v", err)
		}
	}
	if posted != 4 {
		t.Errorf("%d stakes posted, want 4", posted)
	}
	if got := stkState(t, h, ""); got != "none available=1000 staked=8000" {
		t.Errorf("state %s", got)
	}
	cusBooks(t, h)
}
