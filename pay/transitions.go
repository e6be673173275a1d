package pay

import (
	"fmt"
	"slices"
)

// Transition is one row of the intent's state machine: an intent of
// status From may meet Step and become To (From and To are the same for
// a step that changes no status, such as a refund being sent). Every
// write of an intent's status goes through the table ([Transitions]); a
// change it does not list is refused.
//
// Refusal is the code a step gets when the intent's status does not admit
// it: the code the operation already answers before it reaches the table
// (approval.not_pending, hold.not_authorized, refund.refused), or empty
// where no caller can ask for the step from another status, so that
// reaching the table with one is a broken invariant of this package (an
// error without a code: a fault, never an answer).
type Transition struct {
	From    Status
	Step    Step
	To      Status
	Refusal string
}

// statusNew is the status of an intent not yet decided: the deciding
// transaction gives it its first.
const statusNew Status = ""

// transitions is the table. Rows of one step share their Refusal.
var transitions = []Transition{
	{statusNew, StepDecided, StatusDenied, ""},
	{statusNew, StepDecided, StatusPendingApproval, ""},
	{statusNew, StepDecided, StatusSettling, ""},   // a payment, or a hold its rail authorizes
	{statusNew, StepDecided, StatusAuthorized, ""}, // a hold on a rail that does not
	{StatusPendingApproval, StepApproved, StatusSettling, CodeNotPending},
	{StatusPendingApproval, StepApproved, StatusAuthorized, CodeNotPending},
	{StatusPendingApproval, StepExpired, StatusExpired, ""},               // the approval window, or a hold's end, passed
	{StatusPendingApproval, StepDeclined, StatusDeclined, CodeNotPending}, // an operator refused it
	{StatusSettling, StepAuthorized, StatusAuthorized, ""},                // the rail authorized a hold
	{StatusAuthorized, StepCapture, StatusSettling, CodeHoldNotAuthorized},
	{StatusAuthorized, StepVoided, StatusVoided, CodeHoldNotAuthorized},
	{StatusAuthorized, StepExpired, StatusExpired, ""}, // the hold's expiry passed
	{StatusSettling, StepSettled, StatusSettled, ""},
	{StatusSettling, StepFailed, StatusFailed, ""},
	{StatusSettled, StepRefunding, StatusSettled, CodeRefundRefused},
	{StatusPartiallyRefunded, StepRefunding, StatusPartiallyRefunded, CodeRefundRefused},
	{StatusSettled, StepRefundRefused, StatusSettled, ""},
	{StatusPartiallyRefunded, StepRefundRefused, StatusPartiallyRefunded, ""},
	{StatusSettled, StepRefunded, StatusPartiallyRefunded, ""},
	{StatusSettled, StepRefunded, StatusRefunded, ""},
	{StatusPartiallyRefunded, StepRefunded, StatusPartiallyRefunded, ""},
	{StatusPartiallyRefunded, StepRefunded, StatusRefunded, ""},
}

// Transitions returns a copy of the intent's transition table, in the
// order DESIGN §4 shows it. A From of "" is an intent not yet decided.
func Transitions() []Transition { return slices.Clone(transitions) }

// refusals maps a step to the sentinel its Refusal code names.
var refusals = map[string]error{
	CodeNotPending:        ErrNotPending,
	CodeHoldNotAuthorized: ErrHoldNotAuthorized,
	CodeRefundRefused:     ErrRefundRefused,
}

// transitionError is a change the table refuses. It wraps the sentinel of
// the step's refusal code, if any: errors.Is and the code reach it.
type transitionError struct {
	id       string
	from, to Status
	step     Step
	refusal  error
}

func (e *transitionError) Error() string {
	from := string(e.from)
	if e.from == statusNew {
		from = "undecided"
	}
	msg := fmt.Sprintf("pay: intent %s may not go from %s to %s at step %s", e.id, from, e.to, e.step)
	if e.refusal != nil {
		return e.refusal.Error() + ": " + msg
	}
	return msg
}

func (e *transitionError) Unwrap() error { return e.refusal }

// allowed finds the row of (from, step, to), or reports the step's refusal.
func allowed(from Status, step Step, to Status) (ok bool, refusal error) {
	var code string
	for _, t := range transitions {
		if t.Step != step {
			continue
		}
		if t.From == from && t.To == to {
			return true, nil
		}
		code = t.Refusal
	}
	return false, refusals[code]
}

// transition moves in to status to at step, if the table lists the change;
// otherwise it leaves in as it is and returns the refusal. Every write of
// an intent's status calls it.
func (in *Intent) transition(step Step, to Status) error {
	if ok, refusal := allowed(in.Status, step, to); !ok {
		return &transitionError{id: in.ID, from: in.Status, to: to, step: step, refusal: refusal}
	}
	in.Status = to
	return nil
}
