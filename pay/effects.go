package pay

import (
	"errors"
	"fmt"
	"sync"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/store"
)

// Step names a change of an intent that an [Effect] is told about.
type Step string

// Steps, in the order an intent may meet them.
const (
	StepDecided    Step = "decided"    // the gate's outcome, in transaction 1 (any status)
	StepApproved   Step = "approved"   // the last approval: settling or authorized next
	StepAuthorized Step = "authorized" // a hold is authorized
	StepCapture    Step = "capture"    // a hold's capture is sent
	StepSettled    Step = "settled"    // money moved (transaction 2)
	StepFailed     Step = "failed"     // the rail declined; the reservation is released
	StepVoided     Step = "voided"     // a hold was released
	StepExpired    Step = "expired"    // an approval window or a hold expiry passed
	StepDeclined   Step = "declined"   // an operator refused a held intent; the reservation is released
	StepRefunding  Step = "refunding"  // a refund is about to be sent; an error refuses it
	StepRefunded   Step = "refunded"   // a refund was recorded
	// StepRefundRefused: the rail refused the refund StepRefunding
	// announced; nothing was returned.
	StepRefundRefused Step = "refund_refused"
)

// Effect keeps another package's books in step with the intents of one
// route, inside the transactions that change them, so that its state and
// the intent's can never disagree, whoever finishes the intent (the
// request, an approval, the reconciler after a crash, a sweep). The
// protocol surface's custody ledger is one.
type Effect struct {
	// Admit, when set, runs in the deciding transaction after the gate
	// allowed or held the intent. A non-nil reason turns the decision into
	// a denial with that reason alone; an error abandons the transaction.
	Admit func(txn store.Txn, in *Intent) (*gate.Reason, error)
	// Changed, when set, runs inside every transaction that changes an
	// intent of the route, after pay's own writes. An error abandons the
	// transaction: at StepRefunding that refuses the refund; at any other
	// step it is a fault (the change is retried by whoever retries it).
	Changed func(txn store.Txn, in *Intent, step Step, requestID string) error
	// Kind names what a held intent of the route is, for the operator's
	// held list (HeldContext.Kind): "hold", "meter", ... Empty: "hold"
	// for an intent asked for as a hold, "payment" otherwise.
	Kind string
	// Cart, when set, returns the cart of a held intent of the route, read
	// in r, for the operator's held list (HeldContext.Cart); nil when it
	// has none. It runs inside the view that reads the page.
	Cart func(r store.Reader, in *Intent) (*HeldCart, error)
}

type effects struct {
	mu    sync.RWMutex
	m     map[Route]Effect
	terms TermsGate
}

// TermsGate checks an intent whose instruction cites terms (termsId) in
// the deciding transaction of every route, after the gate allowed or held
// it: a non-nil reason denies it with that reason alone. The protocol
// surface's terms namespace brings one (see [Attachment]); without one, an instruction
// citing terms is denied terms.unknown (fail closed: nothing is paid
// against terms nobody can check).
type TermsGate func(r store.Reader, in *Intent) (*gate.Reason, error)

// ReasonTermsUnknown is the gate reason of terms nobody can find.
const ReasonTermsUnknown = "terms.unknown"

func (s *Service) checkTerms(r store.Reader, in *Intent) (*gate.Reason, error) {
	s.effects.mu.RLock()
	g := s.effects.terms
	s.effects.mu.RUnlock()
	if g == nil {
		return &gate.Reason{Code: ReasonTermsUnknown, Message: "the instruction cites terms, and no terms are known here"}, nil
	}
	return g(r, in)
}

// install adds an extension's rails, effects and terms check; see
// [Extension]. It runs only inside New.
func (s *Service) install(a Attachment) error {
	for _, r := range a.Rails {
		if err := s.rails.Register(r); err != nil {
			return err
		}
	}
	s.effects.mu.Lock()
	defer s.effects.mu.Unlock()
	for route, e := range a.Effects {
		if s.effects.m == nil {
			s.effects.m = map[Route]Effect{}
		}
		if _, dup := s.effects.m[route]; dup {
			return fmt.Errorf("route %q has an effect already", route)
		}
		s.effects.m[route] = e
	}
	if a.Terms != nil {
		if s.effects.terms != nil {
			return errors.New("a terms check is installed already")
		}
		s.effects.terms = a.Terms
	}
	return nil
}

func (s *Service) effect(route Route) Effect {
	s.effects.mu.RLock()
	defer s.effects.mu.RUnlock()
	return s.effects.m[route]
}

func (s *Service) changed(txn store.Txn, in *Intent, step Step, requestID string) error {
	if e := s.effect(in.Route); e.Changed != nil {
		return e.Changed(txn, in, step, requestID)
	}
	return nil
}

// appendIntentEntry appends an entry about an intent inside txn and
// indexes it under the intent, so GET /intents/{id}/events pages it with
// pay's own: another package's entries about an intent (the protocol
// surface's) go through it.
func (s *Service) appendIntentEntry(txn store.Txn, r audit.Record) (audit.Entry, error) {
	return s.append(txn, r)
}

// intentEntrySeqs returns the sequence numbers of the entries about an
// intent, oldest first.
func intentEntrySeqs(r store.Reader, id string) ([]uint64, error) {
	prefix := []byte(keyIntentEvents + id + "/")
	it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
	var out []uint64
	for it.Next() {
		k := it.Key()
		out = append(out, beUint64(k[len(k)-8:]))
	}
	return out, it.Close()
}

// GetIntent reads an intent inside a transaction or view, whoever it
// belongs to; callers check ownership.
func GetIntent(r store.Reader, id string) (*Intent, error) { return getIntent(r, id) }
