package protocol

import "fmt"

// State machines of the protocol's stored statuses (DESIGN §9). A
// delivery's and a dispute's status changes only through its machine's
// move, which refuses a change its table does not list. A hold's, an
// obligation's and a clearing's status are not stored: they are read off
// the intent (holdStatus, obligationOfHold, clearingOfObligation), whose
// changes pay's table governs.

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
