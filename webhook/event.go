package webhook

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
)

// Event kinds (DESIGN §7). Every kind is derived from record entries by
// [Derive]; none is emitted on its own.
const (
	EventGateDecision    = "gate.decision"
	EventIntentDenied    = "intent.denied"
	EventApprovalPending = "approval.pending"
	EventPaymentSettled  = "payment.settled"
	// Protocol surface events a person acts on (every protocol entry also
	// yields audit.appended).
	EventDisputeOpened      = "protocol.dispute.open"
	EventDisputeResolved    = "protocol.dispute.resolve"
	EventObligationExpired  = "protocol.obligation.expire"
	EventAuditAppended      = "audit.appended"
	EventMemoryRecorded     = "memory.recorded"
	EventMemoryConsolidated = "memory.consolidated"
	EventMemoryErased       = "memory.erased"
	EventMemoryTainted      = "memory.tainted"
)

// AllEvents, as the only member of an endpoint's Events, subscribes it to
// every kind, including kinds added by later releases.
const AllEvents = "*"

// Event is the body of every webhook delivery. It is derived from one
// record entry, which it carries whole, so a receiver can verify it with
// the deployment's record key instead of trusting the delivery.
//
// The struct tags are those of the contract model (validate and doc feed
// the generated JSON Schemas); every kind of [Kinds] has it as payload.
type Event struct {
	ID        string          `json:"id" validate:"required" doc:"evt_<sequence>_<type>: the same for every delivery of this event; deduplicate on it."`
	Type      string          `json:"type" validate:"required" doc:"The event kind."`
	CreatedAt time.Time       `json:"createdAt" doc:"When the entry was recorded (its at member)."`
	Sequence  uint64          `json:"sequence" validate:"min=1" doc:"Sequence number of the entry; the record, not arrival order, is the sequence."`
	Data      json.RawMessage `json:"data" doc:"Kind-specific data, taken from the entry ({} when the entry has none)."`
	Entry     audit.Entry     `json:"entry" doc:"The whole signed record entry."`
}

// Kinds returns the event kinds of this release, in a stable order: the
// name, when it is sent, and the Go type of the delivered body (always
// [Event]). One list serves derivation, delivery and the documents: the
// contract model projects it, through [Contract], into /asyncapi.json and
// the OpenAPI webhooks object.
func Kinds() []contract.EventKind {
	k := func(name, desc string) contract.EventKind {
		return contract.EventKind{Name: name, Description: desc, Payload: reflect.TypeFor[Event]()}
	}
	return []contract.EventKind{
		k(EventGateDecision, "A decision was made on a payment, whatever its outcome."),
		k(EventIntentDenied, "A payment was refused."),
		k(EventApprovalPending, "A payment is waiting for a person to approve it."),
		k(EventPaymentSettled, "Value moved: a payment settled."),
		k(EventAuditAppended, "The record grew by one entry; sent for every entry."),
		k(EventMemoryRecorded, "A memory record was written (deployments running a memory store)."),
		k(EventMemoryConsolidated, "Memory records were consolidated (deployments running a memory store)."),
		k(EventMemoryErased, "Memory was erased by an operator, with a signed erasure proof."),
		k(EventMemoryTainted, "A memory record was marked tainted."),
		k(EventDisputeOpened, "A dispute was opened on a payment or an obligation: it waits for an operator's resolution (protocol dispute.resolve)."),
		k(EventDisputeResolved, "An operator resolved a dispute; its refund, slash and claims were executed."),
		k(EventObligationExpired, "An obligation reached its deadline without admissible evidence: refused, its reservation released."),
	}
}

// knownKind reports whether name is one of the kinds of [Kinds].
func knownKind(name string) bool {
	switch name {
	case EventGateDecision, EventIntentDenied, EventApprovalPending, EventPaymentSettled,
		EventAuditAppended, EventMemoryRecorded, EventMemoryConsolidated, EventMemoryErased,
		EventMemoryTainted, EventDisputeOpened, EventDisputeResolved, EventObligationExpired:
		return true
	}
	return false
}

// kindNames lists the kinds, for error messages.
func kindNames() string {
	ks := Kinds()
	names := make([]string, 0, len(ks)+1)
	for _, k := range ks {
		names = append(names, k.Name)
	}
	names = append(names, AllEvents)
	return strings.Join(names, ", ")
}

// Derive returns the events a record entry yields, per DESIGN §7:
//
//   - the entry's own kind when it is one: gate.decision, payment.settled
//     and the four memory.* kinds;
//   - for a gate.decision, intent.denied when its data's outcome is "deny"
//     and approval.pending when it is "confirm";
//   - audit.appended, for every entry, last.
//
// Derive is pure: the same entry always yields the same events, with the
// same ids ("evt_<seq>_<kind>"), so a receiver can deduplicate across
// retries and restarts. CreatedAt is the entry's At, Sequence its Seq,
// Data its Data ({} when it has none), and Entry the whole signed entry.
func Derive(e audit.Entry) []Event {
	kinds := deriveKinds(e)
	// At is written by the record as RFC 3339 with six fractional digits;
	// a value that does not parse (which the record never serves) leaves
	// the zero time rather than dropping the event.
	at, _ := time.Parse(time.RFC3339Nano, e.At)
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	out := make([]Event, len(kinds))
	for i, k := range kinds {
		out[i] = Event{
			ID:        EventID(e.Seq, k),
			Type:      k,
			CreatedAt: at.UTC(),
			Sequence:  e.Seq,
			Data:      data,
			Entry:     e,
		}
	}
	return out
}

// deriveKinds returns the kinds of the events e yields, in Derive's order.
func deriveKinds(e audit.Entry) []string {
	kinds := make([]string, 0, 3)
	switch e.Type {
	case EventGateDecision:
		kinds = append(kinds, EventGateDecision)
		switch decisionOutcome(e.Data) {
		case "deny":
			kinds = append(kinds, EventIntentDenied)
		case "confirm":
			kinds = append(kinds, EventApprovalPending)
		}
	case EventPaymentSettled, EventMemoryRecorded, EventMemoryConsolidated, EventMemoryErased, EventMemoryTainted,
		EventDisputeOpened, EventDisputeResolved, EventObligationExpired:
		kinds = append(kinds, e.Type)
	}
	return append(kinds, EventAuditAppended)
}

// decisionOutcome returns the "outcome" member of a gate.decision's data, or "".
func decisionOutcome(data json.RawMessage) string {
	var d struct {
		Outcome string `json:"outcome"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	return d.Outcome
}

// EventID returns the id of the event of the given kind derived from entry
// seq: "evt_<seq>_<kind>".
func EventID(seq uint64, kind string) string {
	return "evt_" + strconv.FormatUint(seq, 10) + "_" + kind
}

// ParseEventID splits an event id into its entry seq and kind. It accepts
// exactly what [EventID] produces for a known kind and seq ≥ 1: no sign,
// no leading zeros.
func ParseEventID(id string) (seq uint64, kind string, ok bool) {
	rest, found := strings.CutPrefix(id, "evt_")
	if !found {
		return 0, "", false
	}
	num, kind, found := strings.Cut(rest, "_")
	if !found || !knownKind(kind) || num == "" || len(num) > 20 || num[0] == '0' {
		return 0, "", false
	}
	for i := 0; i < len(num); i++ {
		if num[i] < '0' || num[i] > '9' {
			return 0, "", false
		}
	}
	seq, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return seq, kind, true
}
