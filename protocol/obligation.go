package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace obligation: a conditional payment. Its spend passes the gate
// like any other and its amount is reserved (and, on a rail that can,
// authorized) at creation; it is settled only when evidence of at least
// its floor class exists (namespace clearing), and refused after its
// deadline: the scheduler's hold expiry releases the reservation then.
// An obligation is a hold whose absolute end is the deadline, placed
// through the route protocol/obligation.create: its id is its intent's
// with the prefix obl_, and its floor, deadline and counterparty are kept
// on the intent (and in its gate.decision entry), so the obligation and
// the money can never disagree.

const routeObligation pay.Route = "protocol/obligation.create"

// Intent metadata of an obligation.
const (
	metaFloor        = "obligation.floor"
	metaDeadline     = "obligation.deadline"
	metaCounterparty = "obligation.counterparty"
	metaDescription  = "obligation.description"
)

// ObligationStatus is the state of an obligation: its hold's, named
// for an obligation (obligationOfHold).
type ObligationStatus string

// Obligation statuses.
const (
	ObligationPendingApproval ObligationStatus = "pending_approval"
	ObligationAuthorizing     ObligationStatus = "authorizing"
	ObligationAwaiting        ObligationStatus = "awaiting_evidence"
	ObligationClearing        ObligationStatus = "clearing"
	ObligationSettled         ObligationStatus = "settled"
	ObligationCancelled       ObligationStatus = "cancelled"
	ObligationExpired         ObligationStatus = "expired"
	ObligationDenied          ObligationStatus = "denied"
	ObligationFailed          ObligationStatus = "failed"
	ObligationDeclined        ObligationStatus = "declined" // an operator refused it while it waited for approval
)

// Problem codes of obligations and clearing.
const (
	CodeObligationNotFound  = "obligation.not_found"
	CodeObligationInvalid   = "obligation.invalid"
	CodeDeadlinePassed      = "obligation.deadline_passed"
	CodeObligationCancelled = "obligation.cancelled"
	CodeObligationNotReady  = "obligation.not_ready"
	CodeObligationClosed    = "obligation.closed"
	CodeObligationEvidence  = "obligation.has_evidence"
	CodeObligationCleared   = "obligation.already_cleared"
	CodeClearingPending     = "clearing.pending"
)

var (
	errObligationNotFound  = errcode.New(CodeObligationNotFound, "protocol: no such obligation")
	errObligationInvalid   = errcode.New(CodeObligationInvalid, "protocol: the obligation breaks a rule")
	errDeadlinePassed      = errcode.New(CodeDeadlinePassed, "protocol: the obligation's deadline passed; it can no longer clear")
	errObligationCancelled = errcode.New(CodeObligationCancelled, "protocol: the obligation was cancelled")
	errObligationNotReady  = errcode.New(CodeObligationNotReady, "protocol: the obligation waits for approval or for the rail's authorization")
	errObligationClosed    = errcode.New(CodeObligationClosed, "protocol: the obligation was denied, failed or declined by an operator")
	errObligationEvidence  = errcode.New(CodeObligationEvidence, "protocol: evidence was submitted for the obligation; it can only clear or reach its deadline")
	errObligationCleared   = errcode.New(CodeObligationCleared, "protocol: the obligation cleared")
)

// Obligation is a conditional payment.
type Obligation struct {
	ID            string           `json:"id" doc:"obl_ followed by the intent id's suffix."`
	Status        ObligationStatus `json:"status" doc:"pending_approval, authorizing, awaiting_evidence, clearing, settled, cancelled, expired (the deadline passed), denied, failed or declined (an operator refused it while it waited for approval)."`
	IntentID      string           `json:"intentId"`
	Payee         string           `json:"payee"`
	Amount        pay.Amount       `json:"amount"`
	Rail          string           `json:"rail"`
	EvidenceFloor EvidenceClass    `json:"evidenceFloor"`
	Deadline      time.Time        `json:"deadline"`
	Counterparty  string           `json:"counterparty,omitempty"`
	TermsID       string           `json:"termsId,omitempty"`
	Description   string           `json:"description,omitempty"`
	RefundedMinor int64            `json:"refundedMinor"`
	Decision      gate.Decision    `json:"decision"`
	Receipt       *pay.Receipt     `json:"receipt,omitempty"`
	CreatedAt     time.Time        `json:"createdAt"`
	UpdatedAt     time.Time        `json:"updatedAt"`
	Entries       []uint64         `json:"entries"`
}

// obligationStatus names an obligation's state after its hold's: the two
// read the same intent.
func obligationStatus(in *pay.Intent) ObligationStatus { return obligationOfHold[holdStatus(in)] }

var obligationOfHold = map[HoldStatus]ObligationStatus{
	HoldPendingApproval: ObligationPendingApproval, HoldAuthorizing: ObligationAuthorizing, HoldHeld: ObligationAwaiting,
	HoldCapturing: ObligationClearing, HoldStatusCaptured: ObligationSettled, HoldReleased: ObligationCancelled,
	HoldExpired: ObligationExpired, HoldDenied: ObligationDenied, HoldFailed: ObligationFailed, HoldDeclined: ObligationDeclined,
}

func obligationOf(in *pay.Intent, entries []uint64) Obligation {
	id, _ := prefixID(in.ID, "int_", "obl_")
	deadline, _ := time.Parse(time.RFC3339Nano, in.Metadata[metaDeadline])
	o := Obligation{ID: id, Status: obligationStatus(in), IntentID: in.ID, Payee: in.Payee, Amount: in.Amount, Rail: in.Terms.Rail,
		EvidenceFloor: EvidenceClass(in.Metadata[metaFloor]), Deadline: deadline, Counterparty: in.Metadata[metaCounterparty],
		TermsID: in.TermsID, Description: in.Metadata[metaDescription], RefundedMinor: in.RefundedMinor,
		Decision: in.Decision, Receipt: in.Receipt, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, Entries: entries}
	if o.Entries == nil {
		o.Entries = []uint64{}
	}
	return o
}

// ObligationCreateRequest is the body of obligation.create.
type ObligationCreateRequest struct {
	Spend         pay.Instruction `json:"spend" doc:"The payment, signed for obligation.create. It may cite termsId; the gate then checks it against the terms."`
	EvidenceFloor EvidenceClass   `json:"evidenceFloor" validate:"required,oneof=self sign wit rec att proof pote" doc:"The weakest evidence class that clears the obligation."`
	Deadline      time.Time       `json:"deadline" doc:"RFC 3339, 60 s to 30 days ahead. Not cleared by then, the obligation is refused and the reservation released."`
	Counterparty  string          `json:"counterparty,omitempty" validate:"max=128" doc:"The counterparty's agent id (64 hex or an Ed25519 did:key): whose signature is sign evidence. Taken from the cited terms when omitted; required for the sign floor without terms."`
	Description   string          `json:"description,omitempty" validate:"max=500" doc:"What the payment is for, as the parties agreed it."`
}

// ObligationCreated is the answer of obligation.create.
type ObligationCreated struct {
	ObligationID  string           `json:"obligationId"`
	IntentID      string           `json:"intentId"`
	Status        ObligationStatus `json:"status" doc:"awaiting_evidence, or pending_approval (202)."`
	Amount        pay.Amount       `json:"amount"`
	EvidenceFloor EvidenceClass    `json:"evidenceFloor"`
	Deadline      time.Time        `json:"deadline"`
	AuditSeq      uint64           `json:"auditSeq,omitempty"`
	Approval      *pay.Held        `json:"approval,omitempty"`
	replayed      bool
}

// WasReplayed reports an idempotent repeat.
func (o *ObligationCreated) WasReplayed() bool { return o.replayed }

// IsAccepted reports an obligation waiting for approval (202).
func (o *ObligationCreated) IsAccepted() bool { return o.Status == ObligationPendingApproval }

// ObligationCreate reserves a conditional payment: the spend passes the
// gate now, and settles only on admissible evidence before the deadline.
func (s *Service) ObligationCreate(ctx context.Context, call Call, req *ObligationCreateRequest) (*ObligationCreated, error) {
	now := s.clock()
	deadline := req.Deadline.UTC().Truncate(time.Microsecond)
	if deadline.Before(now.Add(pay.MinHoldTTL)) || deadline.After(now.Add(pay.MaxHoldTTL)) {
		return nil, fmt.Errorf("%w: deadline must be 60 s to 30 days ahead", errObligationInvalid)
	}
	cp, err := s.obligationCounterparty(ctx, req)
	if err != nil {
		return nil, err
	}
	meta := map[string]string{metaFloor: string(req.EvidenceFloor), metaDeadline: deadline.Format(time.RFC3339Nano)}
	if cp != "" {
		meta[metaCounterparty] = cp
	}
	if req.Description != "" {
		meta[metaDescription] = req.Description
	}
	res, err := s.spend(ctx, call, routeObligation, "obligation.create", &req.Spend, req,
		&pay.HoldOptions{TTL: pay.MaxHoldTTL, Until: deadline}, meta)
	if err != nil {
		return nil, err
	}
	h := placedOf(res)
	id, _ := prefixID(res.IntentID, "int_", "obl_")
	out := &ObligationCreated{ObligationID: id, IntentID: res.IntentID, Amount: req.Spend.Amount, EvidenceFloor: req.EvidenceFloor,
		Deadline: deadline, AuditSeq: h.AuditSeq, Approval: h.Approval, replayed: res.Replayed}
	out.Status = ObligationAwaiting
	if h.Status == HoldPendingApproval {
		out.Status = ObligationPendingApproval
	}
	return out, nil
}

// obligationCounterparty settles whose signature is sign evidence: the
// cited terms' counterparty, or the one named, never two different ones.
func (s *Service) obligationCounterparty(ctx context.Context, req *ObligationCreateRequest) (string, error) {
	cp := req.Counterparty
	if id := req.Spend.TermsID; id != "" {
		var t TwoPartyTerms
		err := s.st.View(ctx, func(r store.Reader) error { return getJSON(r, termsKey(id), &t) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		if err == nil && t.Agent == req.Spend.Envelope.Agent { // unknown (or another identity's) terms: the gate denies the spend
			if cp != "" && cp != t.Counterparty {
				return "", fmt.Errorf("%w: counterparty is not the terms' counterparty", errObligationInvalid)
			}
			if t.EvidenceFloor != "" && t.EvidenceFloor != req.EvidenceFloor {
				return "", fmt.Errorf("%w: the terms require the evidence floor %s", errObligationInvalid, t.EvidenceFloor)
			}
			cp = t.Counterparty
		}
	}
	if cp != "" {
		if _, err := identity.PublicKeyOf(cp); err != nil {
			return "", fmt.Errorf("%w: counterparty: %v", errObligationInvalid, err)
		}
	}
	if cp == "" && req.EvidenceFloor == ClassSign {
		return "", fmt.Errorf("%w: the sign floor needs a counterparty (or terms) whose signature it is", errObligationInvalid)
	}
	return cp, nil
}

// obligationChanged indexes a new obligation and appends
// protocol.obligation.{step} with its new state, in the transaction that
// changed its intent.
func (s *Service) obligationChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	if err := moveObligation(in, step); err != nil {
		return err
	}
	// The clearing moves with it; whether it is pending or awaiting
	// evidence matters only where the obligation is (or was) held.
	admissibleNow := false
	if holdBefore(in, step) == HoldHeld || holdStatus(in) == HoldHeld {
		id, _ := prefixID(in.ID, "int_", "obl_")
		ev, err := admissible(txn, id, EvidenceClass(in.Metadata[metaFloor]))
		if err != nil {
			return err
		}
		admissibleNow = ev != ""
	}
	if err := moveClearing(in, step, admissibleNow); err != nil {
		return err
	}
	if step == pay.StepAuthorized || (step == pay.StepApproved && in.Status == pay.StatusAuthorized) {
		// Evidence that arrived while the obligation waited for approval
		// or the rail: the scheduler clears it now.
		id, _ := prefixID(in.ID, "int_", "obl_")
		if ev, err := admissible(txn, id, EvidenceClass(in.Metadata[metaFloor])); err != nil {
			return err
		} else if ev != "" {
			if err := txn.Set(clearReadyKey(id), []byte(in.AgentKeyID)); err != nil {
				return err
			}
		}
	}
	name := stepNames[step]
	switch step {
	case pay.StepDecided:
		name = "create"
	case pay.StepCapture:
		name = "clear"
	case pay.StepVoided:
		name = "cancel"
	}
	e, err := s.recordIntent(txn, "protocol.obligation."+name, in, step, requestID, obligationOf(in, nil))
	if err != nil || step != pay.StepDecided {
		return err
	}
	// A new obligation is listed at the entry just appended.
	id, _ := prefixID(in.ID, "int_", "obl_")
	return txn.Set(seqlist.Key(obligationsOf(in.AgentKeyID), e.Seq, id), nil)
}

// obligationsOf is the order rows of the obligations of an agent key.
func obligationsOf(keyID string) string { return keyObligationsOf + keyID + "/" }

// cancellingKey marks an obligation whose cancellation is voiding it on
// the rail: evidence is refused meanwhile.
func cancellingKey(oblID string) []byte { return []byte("protocol/obl-cancelling/" + oblID) }

func clearReadyKey(oblID string) []byte { return []byte("protocol/clear-ready/" + oblID) }

// clearReady is the scheduler's part: obligations that became reserved
// with admissible evidence already in are cleared.
func (s *Service) clearReady(ctx context.Context) (int, error) {
	type due struct{ obl, key string }
	var list []due
	prefix := []byte("protocol/clear-ready/")
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
		for it.Next() && len(list) < 1000 {
			list = append(list, due{string(it.Key()[len(prefix):]), string(it.Value())})
		}
		return it.Close()
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range list {
		call := systemCall("")
		call.Agent = &pay.Caller{KeyID: d.key}
		c, err := s.clear(ctx, call, d.obl, true)
		if err != nil {
			s.logger.WarnContext(ctx, "clearing deferred", "obligation", d.obl, "error", err)
			continue
		}
		switch c.Status {
		case ClearingCleared:
			n++
		case ClearingPending, ClearingInProgress:
			continue // refused for now (the kill switch) or with the rail: the next sweep tries again
		}
		// Cleared, or it can never clear (expired, cancelled, failed).
		if err := s.st.Update(ctx, func(txn store.Txn) error { return txn.Delete(clearReadyKey(d.obl)) }); err != nil {
			return n, err
		}
	}
	return n, nil
}

// ObligationRef names an obligation.
type ObligationRef struct {
	ObligationID string `json:"obligationId" validate:"required,max=64" doc:"obl_..."`
}

// obligationIntent reads the caller's obligation's intent.
func (s *Service) obligationIntent(ctx context.Context, call Call, id string) (*pay.Intent, error) {
	return s.routedIntent(ctx, call, id, "obl_", routeObligation, errObligationNotFound)
}

// routedIntent reads the caller's intent behind the id of an object a
// route places (obl_X and pol_X are int_X); another key's intent, another
// route's or no intent at all is notFound.
func (s *Service) routedIntent(ctx context.Context, call Call, id, prefix string, route pay.Route, notFound error) (*pay.Intent, error) {
	intentID, ok := prefixID(id, prefix, "int_")
	if !ok {
		return nil, notFound
	}
	in, err := s.pay.Intent(ctx, *call.Agent, intentID)
	if errors.Is(err, pay.ErrIntentNotFound) || (err == nil && in.Route != route) {
		return nil, notFound
	}
	return in, err
}

// ObligationGet returns an obligation of the caller.
func (s *Service) ObligationGet(ctx context.Context, call Call, req *ObligationRef) (*Obligation, error) {
	in, err := s.obligationIntent(ctx, call, req.ObligationID)
	if err != nil {
		return nil, err
	}
	return s.obligationView(ctx, in)
}

func (s *Service) obligationView(ctx context.Context, in *pay.Intent) (*Obligation, error) {
	seqs, err := s.entrySeqs(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	o := obligationOf(in, seqs)
	return &o, nil
}

// ObligationListRequest is the body of obligation.list.
type ObligationListRequest struct {
	Status ObligationStatus `json:"status,omitempty" validate:"omitempty,oneof=pending_approval authorizing awaiting_evidence clearing settled cancelled expired denied failed declined"`
	Cursor string           `json:"cursor,omitempty" validate:"max=64" doc:"Opaque: the nextCursor of the previous page."`
	Limit  int              `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// ObligationList is a page of obligations, oldest first.
type ObligationList struct {
	Obligations []Obligation `json:"obligations"`
	NextCursor  string       `json:"nextCursor,omitempty"`
}

// ObligationList pages the caller's obligations, optionally of one status.
func (s *Service) ObligationList(ctx context.Context, call Call, req *ObligationListRequest) (*ObligationList, error) {
	items, next, err := listPage(ctx, s, obligationsOf(call.Agent.KeyID), "obl_", req.Cursor, req.Limit,
		func(r store.Reader, id string) (Obligation, bool, error) {
			intentID, _ := prefixID(id, "obl_", "int_")
			in, err := s.books.Intent(r, intentID)
			if err != nil {
				return Obligation{}, false, err
			}
			o := obligationOf(in, []uint64{})
			if req.Status != "" && o.Status != req.Status {
				return o, false, nil
			}
			o.Entries, err = s.books.IntentEntrySeqs(r, in.ID)
			return o, true, err
		})
	if err != nil {
		return nil, err
	}
	return &ObligationList{Obligations: items, NextCursor: next}, nil
}

// ObligationCancel cancels an obligation that has no evidence yet: the
// reservation goes back, the rail's authorization is voided, nothing is
// paid. Once evidence was submitted the counterparty is performing, and
// the obligation can only clear or reach its deadline.
func (s *Service) ObligationCancel(ctx context.Context, call Call, req *ObligationRef) (*Obligation, error) {
	in, err := s.obligationIntent(ctx, call, req.ObligationID)
	if err != nil {
		return nil, err
	}
	if err := obligationOpen(in, s.clock()); err != nil {
		return nil, err
	}
	// Mark it cancelling, in a transaction that finds no evidence, before
	// the rail's authorization is voided: from then on evidence is refused,
	// so the rail is never voided under an obligation that can still clear.
	mark := cancellingKey(req.ObligationID)
	err = s.st.Update(ctx, func(txn store.Txn) error {
		if any, err := hasAny(txn, evidenceBySubject(req.ObligationID)); err != nil {
			return err
		} else if any {
			return errObligationEvidence
		}
		return txn.Set(mark, nil)
	})
	if err != nil {
		return nil, err
	}
	out, err := s.books.Void(ctx, *call.Agent, in.ID, call.RequestID, func(txn store.Txn, _ *pay.Intent) error {
		return txn.Delete(mark)
	})
	if err != nil {
		// Not voided: the obligation takes evidence again.
		if uerr := s.st.Update(ctx, func(txn store.Txn) error { return txn.Delete(mark) }); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, obligationErr(err)
	}
	return s.obligationView(ctx, out)
}

// obligationOpen refuses an obligation that is not awaiting evidence, with
// the reason.
func obligationOpen(in *pay.Intent, now time.Time) error {
	switch obligationStatus(in) {
	case ObligationAwaiting:
		if in.Hold != nil && !in.Hold.ExpiresAt.IsZero() && !now.Before(in.Hold.ExpiresAt) {
			return errDeadlinePassed
		}
		return nil
	case ObligationPendingApproval, ObligationAuthorizing:
		return errObligationNotReady
	case ObligationClearing, ObligationSettled:
		return errObligationCleared
	case ObligationCancelled:
		return errObligationCancelled
	case ObligationExpired:
		return errDeadlinePassed
	}
	return errObligationClosed
}

// obligationErr names pay's hold refusals in the obligation's terms.
func obligationErr(err error) error {
	switch {
	case errors.Is(err, pay.ErrIntentNotFound), errors.Is(err, pay.ErrNotHold):
		return errObligationNotFound
	case errors.Is(err, pay.ErrHoldNotAuthorized):
		return errObligationNotReady
	case errors.Is(err, pay.ErrHoldCaptured):
		return errObligationCleared
	case errors.Is(err, pay.ErrHoldReleased):
		return fmt.Errorf("%w: %v", errObligationClosed, err)
	}
	return err
}

// subject is what evidence, deliveries and disputes are about: an
// obligation or a payment of the caller.
type subject struct {
	id           string
	intent       *pay.Intent
	intentID     string
	obligation   bool
	counterparty string
}

// subjectRoutes are the routes whose intents are subjects by their int_
// id: payments, purchases and holds.
var subjectRoutes = map[pay.Route]bool{pay.RoutePay: true, pay.RouteBuy: true, routeHoldPlace: true}

// subjectOf resolves an obligation (obl_) or intent (int_) id of the
// caller. Its counterparty is the obligation's, or the cited terms'.
func (s *Service) subjectOf(ctx context.Context, call Call, id string) (subject, error) {
	var in *pay.Intent
	var err error
	obligation := false
	if _, ok := prefixID(id, "obl_", ""); ok {
		in, err = s.obligationIntent(ctx, call, id)
		obligation = true
	} else {
		in, err = s.pay.Intent(ctx, *call.Agent, id)
	}
	if errors.Is(err, errObligationNotFound) || errors.Is(err, pay.ErrIntentNotFound) {
		return subject{}, errEvidenceSubject
	}
	if err != nil {
		return subject{}, err
	}
	if !obligation && !subjectRoutes[in.Route] {
		// One thing, one name: an obligation is its obl_ id (never its
		// intent's, or it could be disputed and insured twice), and
		// deposits, premiums and meters are not purchases.
		return subject{}, fmt.Errorf("%w: %s is not a payment or a hold (an obligation is named by its obl_ id)", errEvidenceSubject, id)
	}
	sub := subject{id: id, intent: in, intentID: in.ID, obligation: obligation, counterparty: in.Metadata[metaCounterparty]}
	if sub.counterparty == "" && in.TermsID != "" {
		var t TwoPartyTerms
		err := s.st.View(ctx, func(r store.Reader) error { return getJSON(r, termsKey(in.TermsID), &t) })
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return subject{}, err
		}
		sub.counterparty = t.Counterparty
	}
	return sub, nil
}
