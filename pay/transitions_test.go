package pay

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// constsOf lists the values of the package's constants of the named type,
// read from the source, so that the walks below cannot miss one added
// later.
func constsOf(t *testing.T, typ string) []string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, sp := range g.Specs {
				vs := sp.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out = append(out, lit.Value[1:len(lit.Value)-1])
					}
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func allStatuses(t *testing.T) []Status {
	out := []Status{statusNew}
	for _, s := range constsOf(t, "Status") {
		if Status(s) == statusNew {
			continue
		}
		out = append(out, Status(s))
	}
	if len(out) < 11 {
		t.Fatalf("found %d statuses in the source: %v", len(out), out)
	}
	return out
}

func allSteps(t *testing.T) []Step {
	var out []Step
	for _, s := range constsOf(t, "Step") {
		out = append(out, Step(s))
	}
	if len(out) < 11 {
		t.Fatalf("found %d steps in the source: %v", len(out), out)
	}
	return out
}

// watchEffect installs e on route from inside the package, as an
// extension's effect would be.
func watchEffect(s *Service, route Route, e Effect) {
	s.effects.mu.Lock()
	defer s.effects.mu.Unlock()
	if s.effects.m == nil {
		s.effects.m = map[Route]Effect{}
	}
	s.effects.m[route] = e
}

// TestTransitionTable walks every (from, step, to) there is: each row of
// the table moves the intent; every other change is refused, leaves the
// intent as it was, and carries the step's refusal code or, where the
// step has none, no code at all (a fault, never an answer).
func TestTransitionTable(t *testing.T) {
	statuses, steps := allStatuses(t), allSteps(t)
	type key struct {
		from Status
		step Step
		to   Status
	}
	rows := map[key]bool{}
	refusal := map[Step]string{}
	for _, r := range Transitions() {
		k := key{r.From, r.Step, r.To}
		if rows[k] {
			t.Errorf("row %+v listed twice", r)
		}
		rows[k] = true
		if c, ok := refusal[r.Step]; ok && c != r.Refusal {
			t.Errorf("step %s has two refusal codes: %q and %q", r.Step, c, r.Refusal)
		}
		refusal[r.Step] = r.Refusal
		if !slices.Contains(statuses, r.From) || !slices.Contains(statuses, r.To) || !slices.Contains(steps, r.Step) {
			t.Errorf("row %+v names an unknown status or step", r)
		}
		if r.To == statusNew {
			t.Errorf("row %+v leads back to undecided", r)
		}
	}
	for _, step := range steps {
		if _, ok := refusal[step]; !ok {
			t.Errorf("step %s has no row", step)
		}
	}
	refused := 0
	for _, from := range statuses {
		for _, step := range steps {
			for _, to := range statuses {
				in := &Intent{ID: "int_walk", Status: from}
				err := in.transition(step, to)
				if rows[key{from, step, to}] {
					if err != nil || in.Status != to {
						t.Errorf("%q -%s-> %q is listed but: %v (status %q)", from, step, to, err, in.Status)
					}
					continue
				}
				refused++
				var te *transitionError
				if !errors.As(err, &te) || in.Status != from {
					t.Errorf("%q -%s-> %q is not listed but: %v (status %q)", from, step, to, err, in.Status)
					continue
				}
				var coded interface{ Code() string }
				hasCode := errors.As(err, &coded)
				switch want := refusal[step]; {
				case want == "" && hasCode:
					t.Errorf("%q -%s-> %q: code %s, want none (an invariant)", from, step, to, coded.Code())
				case want != "" && (!hasCode || coded.Code() != want):
					t.Errorf("%q -%s-> %q: %v, want code %s", from, step, to, err, want)
				}
			}
		}
	}
	if want := len(statuses)*len(steps)*len(statuses) - len(rows); refused != want {
		t.Fatalf("%d refused, want %d", refused, want)
	}
	tbl := Transitions()
	tbl[0].To = StatusSettled
	if Transitions()[0].To == StatusSettled {
		t.Fatal("Transitions returns the table itself, not a copy")
	}
}

// TestTerminalStatuses: the statuses an intent ends in have no row out of
// them, whatever the step, and each is reached the way DESIGN §4 says (an
// operator's decline from pending_approval only, with the code a decline
// of anything else answers).
func TestTerminalStatuses(t *testing.T) {
	steps := allSteps(t)
	for _, tc := range []struct {
		status Status
		from   []Status // the statuses a row leads from into it
	}{
		{StatusDeclined, []Status{StatusPendingApproval}},
		{StatusDenied, []Status{statusNew}},
		{StatusExpired, []Status{StatusPendingApproval, StatusAuthorized}},
		{StatusFailed, []Status{StatusSettling}},
		{StatusVoided, []Status{StatusAuthorized}},
		{StatusRefunded, []Status{StatusSettled, StatusPartiallyRefunded}},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			var from []Status
			for _, r := range Transitions() {
				if r.From == tc.status {
					t.Errorf("row %+v leaves the terminal status", r)
				}
				if r.To == tc.status && !slices.Contains(from, r.From) {
					from = append(from, r.From)
				}
			}
			if !slices.Equal(from, tc.from) {
				t.Errorf("reached from %v, want %v", from, tc.from)
			}
			for _, step := range steps {
				in := &Intent{ID: "int_terminal", Status: tc.status}
				if err := in.transition(step, StatusSettling); err == nil || in.Status != tc.status {
					t.Errorf("%s -%s-> settling: %v (status %q)", tc.status, step, err, in.Status)
				}
			}
		})
	}
	// Declining what is not held answers approval.not_pending.
	for _, st := range []Status{StatusSettling, StatusSettled, StatusDeclined, StatusExpired, StatusAuthorized} {
		in := &Intent{ID: "int_decline", Status: st}
		if err := in.transition(StepDeclined, StatusDeclined); !errors.Is(err, ErrNotPending) {
			t.Errorf("decline of a %s intent: %v, want approval.not_pending", st, err)
		}
	}
}

// TestTransitionsReachable drives real payments, approvals, holds,
// captures, releases, expiries, declines (by the rail and by an operator)
// and refunds through a service,
// watches every change its effect is told about, and checks that each is
// a row of the table and that every row happens.
func TestTransitionsReachable(t *testing.T) {
	ctx := context.Background()
	type key struct {
		from Status
		step Step
		to   Status
	}
	var mu sync.Mutex
	seen := map[key]bool{}
	watch := func(h *harness) {
		type change struct {
			step Step
			to   Status
		}
		last := map[string]change{}
		watchEffect(h.svc, RoutePay, Effect{Changed: func(_ store.Txn, in *Intent, step Step, _ string) error {
			mu.Lock()
			defer mu.Unlock()
			prev, ok := last[in.ID]
			if ok && prev == (change{step, in.Status}) {
				return nil // the store ran the transaction once more
			}
			from := statusNew
			if ok {
				from = prev.to
			}
			last[in.ID] = change{step, in.Status}
			seen[key{from, step, in.Status}] = true
			return nil
		}})
	}
	must := func(t *testing.T, want Outcome) func(*Result, error) *Result {
		return func(res *Result, err error) *Result {
			t.Helper()
			if err != nil || res == nil || res.Outcome != want {
				t.Fatalf("want %s: %+v %v", want, res, err)
			}
			return res
		}
	}
	refund := func(t *testing.T, h *harness, id string, minor int64) (*RefundResult, error) {
		req := RefundRequest{IntentID: id, Rationale: "returned"}
		if minor > 0 {
			req.AmountMinor = &minor
		}
		return h.svc.Refund(ctx, req, opCall("op-alice"))
	}
	approve := func(t *testing.T, h *harness, held *Held) (*Result, error) {
		return h.svc.Approve(ctx, ApproveRequest{IntentID: held.IntentID, Challenge: held.Challenge,
			MandateID: held.MandateID, Acknowledged: true}, opCall("op-alice"))
	}
	hold := func(h *harness, key string, minor int64) (*Result, error) {
		return h.svc.authorizeSigned(ctx, RoutePay, h.caller, h.instruction(key, minor, nil),
			Signed{Hold: &HoldOptions{TTL: time.Hour}}, "", "req_"+key)
	}

	t.Run("payments, refunds, refusals of refunds", func(t *testing.T) {
		refuseRefund := false
		var fmu sync.Mutex
		h := newHarness(t, harnessConfig{rail: &fake.Options{Fault: func(op fake.Op, _ any) error {
			fmu.Lock()
			defer fmu.Unlock()
			if op == fake.OpRefund && refuseRefund {
				refuseRefund = false
				return settle.ErrRefundExceeds
			}
			return nil
		}}})
		watch(h)
		setRefuse := func() { fmu.Lock(); refuseRefund = true; fmu.Unlock() }
		// settled → partially refunded → partially refunded → refused → refunded
		res := must(t, OutcomeSettled)(h.pay(h.instruction("p1", 1000, nil)))
		for _, minor := range []int64{300, 300} {
			if _, err := refund(t, h, res.IntentID, minor); err != nil {
				t.Fatal(err)
			}
		}
		setRefuse()
		if _, err := refund(t, h, res.IntentID, 100); !errors.Is(err, ErrRefundRefused) {
			t.Fatalf("refused refund: %v", err)
		}
		if r, err := refund(t, h, res.IntentID, 0); err != nil || r.Status != StatusRefunded {
			t.Fatalf("rest: %+v %v", r, err)
		}
		// settled → refused → refunded in one go
		res = must(t, OutcomeSettled)(h.pay(h.instruction("p2", 1000, nil)))
		setRefuse()
		if _, err := refund(t, h, res.IntentID, 0); !errors.Is(err, ErrRefundRefused) {
			t.Fatalf("refused refund: %v", err)
		}
		if r, err := refund(t, h, res.IntentID, 0); err != nil || r.Status != StatusRefunded {
			t.Fatalf("whole: %+v %v", r, err)
		}
		// denied; held and approved; held and expired
		must(t, OutcomeDenied)(h.pay(h.instruction("p3", 60_000, nil)))
		held := must(t, OutcomeHeld)(h.pay(h.instruction("p4", 20_000, nil))).Held
		must(t, OutcomeSettled)(approve(t, h, held))
		must(t, OutcomeHeld)(h.pay(h.instruction("p5", 20_000, nil)))
		h.clock.Add(25 * time.Hour)
		if n, err := h.svc.ExpireApprovals(ctx); err != nil || n != 1 {
			t.Fatalf("expire approvals: %d %v", n, err)
		}
		// held and declined by an operator
		held = must(t, OutcomeHeld)(h.pay(h.instruction("p6", 20_000, nil))).Held
		if _, err := h.svc.Decline(ctx, DeclineRequest{IntentID: held.IntentID, MandateID: held.MandateID}, opCall("op-alice")); err != nil {
			t.Fatalf("decline: %v", err)
		}
	})
	t.Run("a decline", func(t *testing.T) {
		h := newHarness(t, harnessConfig{rail: &fake.Options{DeclineAbove: 500}})
		watch(h)
		must(t, OutcomeFailed)(h.pay(h.instruction("d1", 1000, nil)))
	})
	t.Run("holds on a rail that does not authorize", func(t *testing.T) {
		h := newHarness(t, harnessConfig{})
		watch(h)
		a := must(t, OutcomeAuthorized)(hold(h, "h1", 1000))
		must(t, OutcomeSettled)(h.svc.captureHold(ctx, h.caller, CaptureRequest{IntentID: a.IntentID, Minor: 600, IdempotencyKey: "c1"}, "req_c1", nil))
		a = must(t, OutcomeAuthorized)(hold(h, "h2", 1000))
		if _, err := h.svc.voidHold(ctx, h.caller, a.IntentID, "req_v", nil); err != nil {
			t.Fatal(err)
		}
		held := must(t, OutcomeHeld)(hold(h, "h3", 20_000)).Held
		must(t, OutcomeAuthorized)(approve(t, h, held))
		h.clock.Add(2 * time.Hour)
		if n, err := h.svc.ExpireHolds(ctx); err != nil || n != 1 {
			t.Fatalf("expire holds: %d %v", n, err)
		}
	})
	t.Run("holds on a rail that authorizes", func(t *testing.T) {
		h := newHarness(t, harnessConfig{rail: &fake.Options{Authorizations: true}})
		watch(h)
		must(t, OutcomeAuthorized)(hold(h, "r1", 1000))
		held := must(t, OutcomeHeld)(hold(h, "r2", 20_000)).Held
		must(t, OutcomeAuthorized)(approve(t, h, held))
	})

	rows := map[key]bool{}
	for _, r := range Transitions() {
		rows[key{r.From, r.Step, r.To}] = true
	}
	for k := range seen {
		if !rows[k] {
			t.Errorf("%q -%s-> %q happened and is not in the table", k.from, k.step, k.to)
		}
	}
	for _, r := range Transitions() {
		if !seen[key{r.From, r.Step, r.To}] {
			t.Errorf("row %q -%s-> %q never happened", r.From, r.Step, r.To)
		}
	}
}
