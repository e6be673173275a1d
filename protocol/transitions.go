package protocol

import (
	"fmt"

	"github.com/countersign/countersign/pay"
)

// State machines of the protocol's statuses (DESIGN §9). A delivery's and
// a dispute's status changes only through its machine's move, which
// refuses a change its table does not list. A hold's, an obligation's and
// a clearing's status are not stored: they are read off the intent
// (holdStatus, obligationOfHold, clearingOfObligation), whose changes
// pay's table governs; each change pay's effects report is checked
// against the object's own table too (moveHold, moveObligation,
// moveClearing), and so is every change the clearing code makes to a
// status it read.

// step names a change of a protocol object's status.
type step string

// Steps of deliveries and disputes.
const (
	stepRecord  step = "record"
	stepAccept  step = "accept"
	stepDispute step = "dispute" // a dispute opened on the delivery's subject
	stepOpen    step = "open"
	stepRespond step = "respond"
	stepResolve step = "resolve"
)

// row is one row of a machine: from may become to at step. refusal is
// what the step answers from a status that does not admit it (the
// operation's own check answers first); nil where no caller can ask, so
// that reaching the table with one is a fault.
type row[S ~string] struct {
	from, to S
	step     step
	refusal  error
}

// machine is a transition table; "" is an object not yet created.
type machine[S ~string] struct {
	name string
	rows []row[S]
}

var deliveryMachine = machine[DeliveryStatus]{name: "delivery", rows: []row[DeliveryStatus]{
	{"", DeliveryRecorded, stepRecord, errDeliveryExists},
	{DeliveryRecorded, DeliveryAccepted, stepAccept, errDeliveryState},
	{DeliveryRecorded, DeliveryDisputed, stepDispute, errDisputeExists},
	{DeliveryAccepted, DeliveryDisputed, stepDispute, errDisputeExists}, // an operator disputes it even once accepted
}}

var disputeMachine = machine[DisputeStatus]{name: "dispute", rows: []row[DisputeStatus]{
	{"", DisputeOpen, stepOpen, errDisputeExists},
	{DisputeOpen, DisputeResponded, stepRespond, errDisputeInvalid},
	{DisputeOpen, DisputeResolved, stepResolve, errDisputeResolved},
	{DisputeResponded, DisputeResolved, stepResolve, errDisputeResolved},
}}

// moveError is a change the table refuses; it wraps the step's refusal.
type moveError struct {
	machine, from, to string
	step              step
	refusal           error
}

func (e *moveError) Error() string {
	from := e.from
	if from == "" {
		from = "new"
	}
	msg := fmt.Sprintf("protocol: a %s may not go from %s to %s at %s", e.machine, from, e.to, e.step)
	if e.refusal != nil {
		return e.refusal.Error() + ": " + msg
	}
	return msg
}

func (e *moveError) Unwrap() error { return e.refusal }

// move sets *cur to to at step if the table lists the change, and
// refuses it otherwise, leaving *cur as it was.
func (m machine[S]) move(cur *S, st step, to S) error {
	var refusal error
	for _, r := range m.rows {
		if r.step != st {
			continue
		}
		if r.from == *cur && r.to == to {
			observeMove(m.name, string(*cur), st, string(to))
			*cur = to
			return nil
		}
		refusal = r.refusal
	}
	return &moveError{machine: m.name, from: string(*cur), to: string(to), step: st, refusal: refusal}
}

// observeMove is told of every move a machine allows; tests count them.
var observeMove = func(machine, from string, st step, to string) {}

// Steps of holds, obligations and clearings. A hold's and an obligation's
// status follow the intent: they move at pay's steps, as pay's effects
// deliver them (holdChanged, meterChanged, obligationChanged). A clearing
// moves at those too, and at its own: admissible evidence, the deadline,
// a refusal for now, and the clearing's capture.
const (
	stepDecided       = step(pay.StepDecided)
	stepApproved      = step(pay.StepApproved)
	stepAuthorized    = step(pay.StepAuthorized)
	stepCapture       = step(pay.StepCapture)
	stepSettled       = step(pay.StepSettled)
	stepFailed        = step(pay.StepFailed)
	stepVoided        = step(pay.StepVoided)
	stepExpired       = step(pay.StepExpired)
	stepDeclined      = step(pay.StepDeclined)
	stepRefunding     = step(pay.StepRefunding)
	stepRefunded      = step(pay.StepRefunded)
	stepRefundRefused = step(pay.StepRefundRefused)

	stepEvidence = "evidence" // admissible evidence exists
	stepDeadline = "deadline" // the deadline passed before the sweep expired the hold
	stepRefuse   = "refuse"   // admissible, but the capture is refused for now (the kill switch, a revocation)
	stepClear    = "clear"    // the clearing's capture answered
)

// The hold, obligation and clearing machines refuse with no code: pay's
// table answers a caller's step first, with its own code, so a change
// these refuse is a mapping that disagrees with pay's table (a fault).

var holdMachine = machine[HoldStatus]{name: "hold", rows: []row[HoldStatus]{
	{"", HoldDenied, stepDecided, nil},
	{"", HoldPendingApproval, stepDecided, nil},
	{"", HoldAuthorizing, stepDecided, nil}, // a rail that authorizes
	{"", HoldHeld, stepDecided, nil},        // a reservation only
	{HoldPendingApproval, HoldAuthorizing, stepApproved, nil},
	{HoldPendingApproval, HoldHeld, stepApproved, nil},
	{HoldPendingApproval, HoldExpired, stepExpired, nil},
	{HoldPendingApproval, HoldDeclined, stepDeclined, nil},
	{HoldAuthorizing, HoldHeld, stepAuthorized, nil},
	{HoldAuthorizing, HoldFailed, stepFailed, nil},
	{HoldHeld, HoldCapturing, stepCapture, nil},
	{HoldHeld, HoldReleased, stepVoided, nil},
	{HoldHeld, HoldExpired, stepExpired, nil},
	{HoldCapturing, HoldStatusCaptured, stepSettled, nil},
	{HoldCapturing, HoldFailed, stepFailed, nil},
	{HoldStatusCaptured, HoldStatusCaptured, stepRefunding, nil},
	{HoldStatusCaptured, HoldStatusCaptured, stepRefundRefused, nil},
	{HoldStatusCaptured, HoldStatusCaptured, stepRefunded, nil},
}}

var obligationMachine = machine[ObligationStatus]{name: "obligation", rows: []row[ObligationStatus]{
	{"", ObligationDenied, stepDecided, nil},
	{"", ObligationPendingApproval, stepDecided, nil},
	{"", ObligationAuthorizing, stepDecided, nil},
	{"", ObligationAwaiting, stepDecided, nil},
	{ObligationPendingApproval, ObligationAuthorizing, stepApproved, nil},
	{ObligationPendingApproval, ObligationAwaiting, stepApproved, nil},
	{ObligationPendingApproval, ObligationExpired, stepExpired, nil},
	{ObligationPendingApproval, ObligationDeclined, stepDeclined, nil},
	{ObligationAuthorizing, ObligationAwaiting, stepAuthorized, nil},
	{ObligationAuthorizing, ObligationFailed, stepFailed, nil},
	{ObligationAwaiting, ObligationClearing, stepCapture, nil}, // clear
	{ObligationAwaiting, ObligationCancelled, stepVoided, nil}, // cancel
	{ObligationAwaiting, ObligationExpired, stepExpired, nil},  // the deadline's sweep
	{ObligationClearing, ObligationSettled, stepSettled, nil},
	{ObligationClearing, ObligationFailed, stepFailed, nil},
	{ObligationSettled, ObligationSettled, stepRefunding, nil}, // a dispute's refund
	{ObligationSettled, ObligationSettled, stepRefundRefused, nil},
	{ObligationSettled, ObligationSettled, stepRefunded, nil},
}}

var clearingMachine = machine[ClearingStatus]{name: "clearing", rows: []row[ClearingStatus]{
	{"", ClearingDenied, stepDecided, nil},
	{"", ClearingPendingApproval, stepDecided, nil},
	{"", ClearingAuthorizing, stepDecided, nil},
	{"", ClearingPending, stepDecided, nil},
	{ClearingPendingApproval, ClearingAuthorizing, stepApproved, nil},
	{ClearingPendingApproval, ClearingPending, stepApproved, nil},
	{ClearingPendingApproval, ClearingAwaiting, stepApproved, nil}, // evidence came first
	{ClearingPendingApproval, ClearingExpired, stepExpired, nil},
	{ClearingPendingApproval, ClearingDeclined, stepDeclined, nil},
	{ClearingAuthorizing, ClearingPending, stepAuthorized, nil},
	{ClearingAuthorizing, ClearingAwaiting, stepAuthorized, nil}, // evidence came first
	{ClearingAuthorizing, ClearingFailed, stepFailed, nil},
	{ClearingPending, ClearingAwaiting, stepEvidence, nil},
	{ClearingPending, ClearingExpired, stepDeadline, nil},
	{ClearingAwaiting, ClearingExpired, stepDeadline, nil},
	{ClearingAwaiting, ClearingPending, stepRefuse, nil},
	{ClearingAwaiting, ClearingInProgress, stepCapture, nil},
	{ClearingPending, ClearingCancelled, stepVoided, nil},
	{ClearingPending, ClearingExpired, stepExpired, nil},
	{ClearingAwaiting, ClearingExpired, stepExpired, nil},
	{ClearingInProgress, ClearingCleared, stepSettled, nil},
	{ClearingInProgress, ClearingFailed, stepFailed, nil},
	{ClearingAwaiting, ClearingCleared, stepClear, nil},
	{ClearingInProgress, ClearingCleared, stepClear, nil}, // a capture of unknown outcome, resumed
	{ClearingAwaiting, ClearingFailed, stepClear, nil},
	{ClearingInProgress, ClearingFailed, stepClear, nil},
	{ClearingCleared, ClearingCleared, stepRefunding, nil},
	{ClearingCleared, ClearingCleared, stepRefundRefused, nil},
	{ClearingCleared, ClearingCleared, stepRefunded, nil},
}}

// holdBefore is the hold's status before the change step made to in: the
// one pay's table admits step from, told apart by what the intent keeps
// (a capture was asked for; the hold was ever authorized).
func holdBefore(in *pay.Intent, st pay.Step) HoldStatus {
	switch st {
	case pay.StepDecided:
		return ""
	case pay.StepApproved, pay.StepDeclined:
		return HoldPendingApproval
	case pay.StepAuthorized:
		return HoldAuthorizing
	case pay.StepCapture, pay.StepVoided:
		return HoldHeld
	case pay.StepSettled:
		return HoldCapturing
	case pay.StepFailed:
		if in.Hold != nil && in.Hold.CaptureMinor > 0 {
			return HoldCapturing
		}
		return HoldAuthorizing
	case pay.StepExpired:
		if in.Hold != nil && !in.Hold.AuthorizedAt.IsZero() {
			return HoldHeld
		}
		return HoldPendingApproval
	}
	return HoldStatusCaptured // refunding, refund_refused, refunded
}

// moveHold checks the hold's change at step through its machine.
func moveHold(in *pay.Intent, st pay.Step) error {
	cur := holdBefore(in, st)
	return holdMachine.move(&cur, step(st), holdStatus(in))
}

// moveObligation checks the obligation's change at step through its
// machine.
func moveObligation(in *pay.Intent, st pay.Step) error {
	cur := obligationOfHold[holdBefore(in, st)]
	return obligationMachine.move(&cur, step(st), obligationStatus(in))
}

// moveClearing checks the clearing's change at an intent's step through
// its machine. admissible is whether evidence meeting the floor exists
// (the same before and after: the step adds none); the deadline is the
// sweep's, or the next read's, to say.
func moveClearing(in *pay.Intent, st pay.Step, admissible bool) error {
	of := func(o ObligationStatus) ClearingStatus {
		c := clearingOfObligation[o]
		if c == ClearingPending && admissible {
			c = ClearingAwaiting
		}
		return c
	}
	cur := of(obligationOfHold[holdBefore(in, st)])
	return clearingMachine.move(&cur, step(st), of(obligationStatus(in)))
}
