package protocol

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/countersign/countersign/pay"
)

var allSteps = []step{stepRecord, stepAccept, stepDispute, stepOpen, stepRespond, stepResolve,
	stepDecided, stepApproved, stepAuthorized, stepCapture, stepSettled, stepFailed, stepVoided, stepExpired,
	stepDeclined, stepRefunding, stepRefunded, stepRefundRefused, stepEvidence, stepDeadline, stepRefuse, stepClear}

var (
	allHoldStatuses = []HoldStatus{HoldPendingApproval, HoldAuthorizing, HoldHeld, HoldCapturing, HoldStatusCaptured,
		HoldReleased, HoldExpired, HoldDenied, HoldFailed, HoldDeclined}
	allObligationStatuses = []ObligationStatus{ObligationPendingApproval, ObligationAuthorizing, ObligationAwaiting,
		ObligationClearing, ObligationSettled, ObligationCancelled, ObligationExpired, ObligationDenied, ObligationFailed,
		ObligationDeclined}
	allClearingStatuses = []ClearingStatus{ClearingPending, ClearingAwaiting, ClearingInProgress, ClearingCleared,
		ClearingPendingApproval, ClearingAuthorizing, ClearingCancelled, ClearingExpired, ClearingDenied, ClearingFailed,
		ClearingDeclined}
)

// walkMachine tries every (from, step, to) over statuses: each row of m
// moves; every other change is refused, leaves the status as it was, and
// carries the step's refusal (none where the step has none).
func walkMachine[S ~string](t *testing.T, m machine[S], statuses []S) {
	t.Helper()
	m.name = "walk " + m.name // its moves are no flow's: TestMain does not count them
	refusal := map[step]error{}
	listed := map[string]bool{}
	for _, r := range m.rows {
		refusal[r.step] = r.refusal
		listed[fmt.Sprint(r.from, "|", r.step, "|", r.to)] = true
	}
	for _, from := range append([]S{""}, statuses...) {
		for _, st := range allSteps {
			for _, to := range append([]S{""}, statuses...) {
				cur := from
				err := m.move(&cur, st, to)
				if listed[fmt.Sprint(from, "|", st, "|", to)] {
					if err != nil || cur != to {
						t.Errorf("%s: %q -%s-> %q is listed but: %v", m.name, from, st, to, err)
					}
					continue
				}
				var me *moveError
				if !errors.As(err, &me) || cur != from {
					t.Errorf("%s: %q -%s-> %q is not listed but: %v (now %q)", m.name, from, st, to, err, cur)
					continue
				}
				if want := refusal[st]; (want == nil) != (errors.Unwrap(err) == nil) || (want != nil && !errors.Is(err, want)) {
					t.Errorf("%s: %q -%s-> %q refused with %v, want %v", m.name, from, st, to, err, want)
				}
			}
		}
	}
}

func TestMachines(t *testing.T) {
	walkMachine(t, deliveryMachine, []DeliveryStatus{DeliveryRecorded, DeliveryAccepted, DeliveryDisputed})
	walkMachine(t, disputeMachine, []DisputeStatus{DisputeOpen, DisputeResponded, DisputeResolved})
	walkMachine(t, holdMachine, allHoldStatuses)
	walkMachine(t, obligationMachine, allObligationStatuses)
	walkMachine(t, clearingMachine, allClearingStatuses)
}

// holdsOfIntent is what holdStatus reads off an intent of status st, in
// any of a hold's phases ("" is an intent not yet decided).
func holdsOfIntent(st pay.Status) []HoldStatus {
	if st == "" {
		return []HoldStatus{""}
	}
	seen := map[HoldStatus]bool{}
	var out []HoldStatus
	for _, ph := range []string{pay.HoldPhaseAuthorize, pay.HoldPhaseAuthorized, pay.HoldPhaseCapture, pay.HoldPhaseDone} {
		h := holdStatus(&pay.Intent{Status: st, Hold: &pay.HoldState{Phase: ph}})
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

func obligationsOfIntent(st pay.Status) []ObligationStatus {
	var out []ObligationStatus
	for _, h := range holdsOfIntent(st) {
		if h == "" {
			out = append(out, "")
		} else {
			out = append(out, obligationOfHold[h])
		}
	}
	return out
}

// clearingsOfIntent adds what evidence and the deadline make of a held
// obligation's clearing.
func clearingsOfIntent(st pay.Status) []ClearingStatus {
	var out []ClearingStatus
	for _, o := range obligationsOfIntent(st) {
		if o == "" {
			out = append(out, "")
			continue
		}
		c := clearingOfObligation[o]
		out = append(out, c)
		if c == ClearingPending {
			out = append(out, ClearingAwaiting, ClearingExpired)
		}
	}
	return out
}

// agreeWithPay checks a protocol machine against pay's intent table
// through the mapping of: each pay transition is, for some reading of
// its statuses, a row of the machine at the same step; and each row of
// the machine at a pay step is a reading of some pay transition.
func agreeWithPay[S ~string](t *testing.T, m machine[S], of func(pay.Status) []S) {
	t.Helper()
	listed := map[string]bool{}
	for _, r := range m.rows {
		listed[fmt.Sprint(r.from, "|", r.step, "|", r.to)] = true
	}
	readings := map[string]bool{}
	paySteps := map[step]bool{}
	for _, tr := range pay.Transitions() {
		st := step(tr.Step)
		paySteps[st] = true
		found := false
		for _, from := range of(tr.From) {
			for _, to := range of(tr.To) {
				k := fmt.Sprint(from, "|", st, "|", to)
				readings[k] = true
				found = found || listed[k]
			}
		}
		if !found {
			t.Errorf("%s: pay's %q -%s-> %q has no row: %v -> %v", m.name, tr.From, tr.Step, tr.To, of(tr.From), of(tr.To))
		}
	}
	for _, r := range m.rows {
		if paySteps[r.step] && !readings[fmt.Sprint(r.from, "|", r.step, "|", r.to)] {
			t.Errorf("%s: %q -%s-> %q is no pay transition", m.name, r.from, r.step, r.to)
		}
	}
}

func TestMachinesAgreeWithPay(t *testing.T) {
	agreeWithPay(t, holdMachine, holdsOfIntent)
	agreeWithPay(t, obligationMachine, obligationsOfIntent)
	agreeWithPay(t, clearingMachine, clearingsOfIntent)
	for _, h := range allHoldStatuses {
		if _, ok := obligationOfHold[h]; !ok {
			t.Errorf("hold status %q names no obligation status", h)
		}
	}
	for _, o := range allObligationStatuses {
		if _, ok := clearingOfObligation[o]; !ok {
			t.Errorf("obligation status %q names no clearing status", o)
		}
	}
}

// An effect told of a change its object's table does not list refuses
// it: the error abandons pay's transaction, so the intent stays as it was.
func TestEffectRefusesUnlistedChange(t *testing.T) {
	held := &pay.Intent{Status: pay.StatusAuthorized, Hold: &pay.HoldState{Phase: pay.HoldPhaseAuthorized}}
	for _, st := range []pay.Step{pay.StepSettled, pay.StepCapture, pay.StepVoided, pay.StepFailed, pay.StepRefunded} {
		var me *moveError
		if err := moveHold(held, st); !errors.As(err, &me) || errors.Unwrap(err) != nil {
			t.Errorf("hold: held at %s: %v", st, err)
		}
		if err := moveObligation(held, st); !errors.As(err, &me) {
			t.Errorf("obligation: held at %s: %v", st, err)
		}
		if err := moveClearing(held, st, true); !errors.As(err, &me) {
			t.Errorf("clearing: held at %s: %v", st, err)
		}
	}
}

// moves counts the moves the package's tests make, so that TestMain can
// check that every row of every machine is reached by a real flow.
var moves = struct {
	sync.Mutex
	seen map[string]bool
}{seen: map[string]bool{}}

func TestMain(m *testing.M) {
	observeMove = func(machine, from string, st step, to string) {
		moves.Lock()
		moves.seen[fmt.Sprint(machine, "|", from, "|", st, "|", to)] = true
		moves.Unlock()
	}
	code := m.Run()
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" && !testing.Short() {
		// The whole suite ran: each row must have happened in some flow.
		var missing []string
		check := func(name string, rows []string) {
			for _, r := range rows {
				if !moves.seen[name+"|"+r] && !notYetDriven[name+"|"+r] {
					missing = append(missing, name+" "+r)
				}
			}
		}
		check(deliveryMachine.name, rowKeys(deliveryMachine))
		check(disputeMachine.name, rowKeys(disputeMachine))
		check(holdMachine.name, rowKeys(holdMachine))
		check(obligationMachine.name, rowKeys(obligationMachine))
		check(clearingMachine.name, rowKeys(clearingMachine))
		if len(missing) > 0 {
			fmt.Fprintf(os.Stderr, "FAIL: transitions no test reaches: %v\n", missing)
			code = 1
		}
	}
	os.Exit(code)
}

// notYetDriven are rows of real flows that no test of the package drives
// yet; TestMain lets them go unreached. Every row is driven now.
var notYetDriven = map[string]bool{}

func rowKeys[S ~string](m machine[S]) []string {
	var out []string
	for _, r := range m.rows {
		out = append(out, fmt.Sprint(r.from, "|", r.step, "|", r.to))
	}
	return out
}
