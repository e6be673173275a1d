package protocol

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespaces delivery and dispute. A delivery records what was delivered
// for one of the caller's payments or obligations, with evidence; the
// agent accepts it, or a dispute is opened (by the agent, or by an
// operator on the delivery). A dispute names its subject, the refund it
// seeks and, when the subject's terms named a stake of the counterparty,
// that stake, which cannot be released while the dispute is open. The
// counterparty, when it is an agent identity here, may respond. An
// operator resolves it, and the resolution executes itself, all in the
// record:
//
//   - for the claimant: the refund through the operator refund path
//     (pay.RefundWithin, marked started in the refund's own transaction,
//     so it runs exactly once; a refund the kill switch or a fault
//     delays is retried by the scheduler), the named stake slashed into
//     the claimant's custody, and the dispute's insurance claims made
//     payable and paid from the pool;
//   - for the respondent: nothing moves, and its claims are rejected.

// DeliveryStatus is the state of a delivery report.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryRecorded DeliveryStatus = "recorded"
	DeliveryAccepted DeliveryStatus = "accepted"
	DeliveryDisputed DeliveryStatus = "disputed"
)

// DisputeStatus is the state of a dispute.
type DisputeStatus string

// Dispute statuses.
const (
	DisputeOpen      DisputeStatus = "open"
	DisputeResponded DisputeStatus = "responded"
	DisputeResolved  DisputeStatus = "resolved"
)

// Dispute outcomes.
const (
	ForClaimant   = "claimant"
	ForRespondent = "respondent"
)

// Refund statuses of a resolution.
const (
	RefundNone     = "none"
	RefundPending  = "pending"  // decided, not yet started on the rail
	RefundStarted  = "started"  // the refund exists; its outcome is the intent's
	RefundDone     = "refunded" // the rail returned the money
	RefundRefused  = "refused"  // the refund path or the rail refused it
	RefundProgress = "in_progress"
)

// Problem codes of deliveries and disputes.
const (
	CodeDeliveryNotFound = "delivery.not_found"
	CodeDeliveryExists   = "delivery.exists"
	CodeDeliveryState    = "delivery.not_recorded"
	CodeDeliveryInvalid  = "delivery.invalid"
	CodeDisputeNotFound  = "dispute.not_found"
	CodeDisputeExists    = "dispute.exists"
	CodeDisputeResolved  = "dispute.already_resolved"
	CodeDisputeInvalid   = "dispute.invalid"
	CodeDisputeNotParty  = "dispute.not_respondent"
	CodeDisputeUnsettled = "dispute.not_settled"
)

var (
	errDeliveryNotFound = errcode.New(CodeDeliveryNotFound, "protocol: no such delivery")
	errDeliveryExists   = errcode.New(CodeDeliveryExists, "protocol: a delivery of this subject is recorded already")
	errDeliveryState    = errcode.New(CodeDeliveryState, "protocol: the delivery was already accepted or disputed")
	errDeliveryInvalid  = errcode.New(CodeDeliveryInvalid, "protocol: the delivery breaks a rule")
	errDisputeNotFound  = errcode.New(CodeDisputeNotFound, "protocol: no such dispute")
	errDisputeExists    = errcode.New(CodeDisputeExists, "protocol: a dispute of this subject exists already")
	errDisputeResolved  = errcode.New(CodeDisputeResolved, "protocol: the dispute is resolved")
	errDisputeInvalid   = errcode.New(CodeDisputeInvalid, "protocol: the dispute request breaks a rule")
	errDisputeNotParty  = errcode.New(CodeDisputeNotParty, "protocol: only the respondent responds to a dispute")
	errDisputeUnsettled = errcode.New(CodeDisputeUnsettled, "protocol: only a settled payment or a cleared obligation can be disputed")
)

// Delivery is what was delivered for a payment or an obligation.
type DeliveryReport struct {
	ID          string         `json:"id" doc:"dlv_..."`
	Status      DeliveryStatus `json:"status" doc:"recorded, accepted or disputed."`
	Subject     string         `json:"subject" doc:"The obligation (obl_) or payment (int_) delivered for."`
	IntentID    string         `json:"intentId"`
	Agent       string         `json:"agent"`
	AgentKeyID  string         `json:"agentKeyId"`
	Description string         `json:"description"`
	EvidenceIDs []string       `json:"evidenceIds"`
	DisputeID   string         `json:"disputeId,omitempty"`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
	AcceptedAt  *time.Time     `json:"acceptedAt,omitempty"`
	Entries     []uint64       `json:"entries"`
}

func deliveryKey(id string) []byte { return []byte("protocol/delivery/" + id) }
func deliveryBySubject(subject string) []byte {
	return []byte("protocol/delivery-by-subject/" + subject)
}

// DeliveryRecordRequest is the body of delivery.record.
type DeliveryRecordRequest struct {
	Subject     string   `json:"subject" validate:"required,max=64"`
	Description string   `json:"description" validate:"required,max=2000" doc:"What was delivered."`
	EvidenceIDs []string `json:"evidenceIds,omitempty" validate:"max=20,dive,max=64" doc:"Evidence about the same subject (evidence.submit)."`
}

// DeliveryRecord records a delivery (protocol.delivery.record); one per
// subject.
func (s *Service) DeliveryRecord(ctx context.Context, call Call, req *DeliveryRecordRequest) (*DeliveryReport, error) {
	subj, err := s.subjectOf(ctx, call, req.Subject)
	if err != nil {
		return nil, err
	}
	switch subj.intent.Status {
	case pay.StatusDenied, pay.StatusFailed, pay.StatusDeclined:
		return nil, fmt.Errorf("%w: the payment was %s; nothing was bought", errDeliveryInvalid, subj.intent.Status)
	}
	var d DeliveryReport
	err = s.log.Update(ctx, func(txn store.Txn) error {
		if _, err := txn.Get(deliveryBySubject(req.Subject)); err == nil {
			return errDeliveryExists
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for _, id := range req.EvidenceIDs {
			var ev Evidence
			if err := getJSON(txn, evidenceKey(id), &ev); err != nil || ev.Subject != req.Subject {
				return fmt.Errorf("%w: evidence %s is not about %s", errDeliveryInvalid, id, req.Subject)
			}
		}
		now := s.clock()
		d = DeliveryReport{ID: ids.New("dlv_"), Subject: req.Subject, IntentID: subj.intentID,
			Agent: subj.intent.Agent, AgentKeyID: call.Agent.KeyID, Description: req.Description, EvidenceIDs: req.EvidenceIDs,
			CreatedAt: now, UpdatedAt: now}
		if d.EvidenceIDs == nil {
			d.EvidenceIDs = []string{}
		}
		if err := deliveryMachine.move(&d.Status, stepRecord, DeliveryRecorded); err != nil {
			return err
		}
		if err := txn.Set(deliveryBySubject(req.Subject), []byte(d.ID)); err != nil {
			return err
		}
		return s.putDelivery(txn, call, "protocol.delivery.record", &d)
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (s *Service) putDelivery(txn store.Txn, call Call, typ string, d *DeliveryReport) error {
	return putObject(s, txn, call, typ, d.IntentID, deliveryKey(d.ID), d)
}

// DeliveryRef names a delivery.
type DeliveryRef struct {
	DeliveryID string `json:"deliveryId" validate:"required,max=64"`
}

// readDelivery reads a delivery; an agent sees only its own.
func readDelivery(r store.Reader, call Call, id string, d *DeliveryReport) error {
	err := getJSON(r, deliveryKey(id), d)
	if errors.Is(err, store.ErrNotFound) || (err == nil && call.Agent != nil && d.AgentKeyID != call.Agent.KeyID) {
		return errDeliveryNotFound
	}
	return err
}

// DeliveryAccept accepts a recorded delivery (protocol.delivery.accept).
func (s *Service) DeliveryAccept(ctx context.Context, call Call, req *DeliveryRef) (*DeliveryReport, error) {
	var d DeliveryReport
	err := s.log.Update(ctx, func(txn store.Txn) error {
		d = DeliveryReport{}
		if err := readDelivery(txn, call, req.DeliveryID, &d); err != nil {
			return err
		}
		if d.Status != DeliveryRecorded {
			return fmt.Errorf("%w (it is %s)", errDeliveryState, d.Status)
		}
		if err := deliveryMachine.move(&d.Status, stepAccept, DeliveryAccepted); err != nil {
			return err
		}
		now := s.clock()
		d.UpdatedAt, d.AcceptedAt = now, &now
		return s.putDelivery(txn, call, "protocol.delivery.accept", &d)
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// DeliveryGet returns a delivery of the caller.
func (s *Service) DeliveryGet(ctx context.Context, call Call, req *DeliveryRef) (*DeliveryReport, error) {
	var d DeliveryReport
	if err := s.st.View(ctx, func(r store.Reader) error { return readDelivery(r, call, req.DeliveryID, &d) }); err != nil {
		return nil, err
	}
	return &d, nil
}

// DeliveryDisputeRequest is the body of delivery.dispute (★).
type DeliveryDisputeRequest struct {
	DeliveryID string `json:"deliveryId" validate:"required,max=64"`
	Reason     string `json:"reason" validate:"required,max=2000"`
	ClaimMinor int64  `json:"claimMinor,omitempty" validate:"omitempty,gt=0,lt=9007199254740992" doc:"The refund sought; all that remains refundable when omitted."`
	Override
}

// DeliveryDispute opens a dispute on a delivery for its agent, by an
// operator, even once accepted (protocol.delivery.dispute and
// protocol.dispute.open).
func (s *Service) DeliveryDispute(ctx context.Context, call Call, req *DeliveryDisputeRequest) (*Dispute, error) {
	var d DeliveryReport
	if err := s.st.View(ctx, func(r store.Reader) error { return readDelivery(r, call, req.DeliveryID, &d) }); err != nil {
		return nil, err
	}
	if d.Status == DeliveryDisputed {
		return nil, fmt.Errorf("%w: %w", errDisputeExists, errDeliveryState)
	}
	in, err := s.readIntent(ctx, d.IntentID)
	if err != nil {
		return nil, err
	}
	return s.openDispute(ctx, call, d.Subject, in, d.Agent, req.Reason, req.ClaimMinor)
}

// Dispute is a disagreement about a payment or an obligation.
type Dispute struct {
	ID            string        `json:"id" doc:"dsp_..."`
	Status        DisputeStatus `json:"status" doc:"open, responded or resolved."`
	Subject       string        `json:"subject"`
	IntentID      string        `json:"intentId"`
	DeliveryID    string        `json:"deliveryId,omitempty"`
	Claimant      string        `json:"claimant" doc:"The paying agent identity."`
	ClaimantKeyID string        `json:"claimantKeyId"`
	Respondent    string        `json:"respondent,omitempty" doc:"The counterparty's agent id (64 hex), when known from terms or the obligation."`
	OpenedBy      string        `json:"openedBy" doc:"agent or operator."`
	Reason        string        `json:"reason"`
	// Claim is the refund sought.
	Claim      pay.Amount         `json:"claim"`
	StakeID    string             `json:"stakeId,omitempty" doc:"The counterparty's stake the subject's terms put at stake: held until resolution."`
	Response   *DisputeResponse   `json:"response,omitempty"`
	Resolution *DisputeResolution `json:"resolution,omitempty"`
	CreatedAt  time.Time          `json:"createdAt"`
	UpdatedAt  time.Time          `json:"updatedAt"`
	Entries    []uint64           `json:"entries"`
}

// DisputeResponse is the respondent's answer.
type DisputeResponse struct {
	Text        string    `json:"text"`
	EvidenceIDs []string  `json:"evidenceIds"`
	AgentKeyID  string    `json:"agentKeyId"`
	At          time.Time `json:"at"`
}

// DisputeResolution is what an operator decided, and what it executed.
type DisputeResolution struct {
	Outcome      string `json:"outcome" doc:"claimant or respondent."`
	RefundMinor  int64  `json:"refundMinor"`
	RefundID     string `json:"refundId,omitempty"`
	RefundStatus string `json:"refundStatus" doc:"none, pending (decided, not yet on the rail; retried), started, in_progress, refunded or refused."`
	RefundError  string `json:"refundError,omitempty"`
	SlashedMinor int64  `json:"slashedMinor"`
	// Claims are the insurance claims the resolution made payable or
	// rejected.
	Claims    []string  `json:"claims"`
	Operator  string    `json:"operator"`
	Rationale string    `json:"rationale"`
	At        time.Time `json:"at"`
}

func disputeKey(id string) []byte { return []byte("protocol/dispute/" + id) }
func disputeBySubject(subject string) []byte {
	return []byte("protocol/dispute-by-subject/" + subject)
}

// disputesOf is the order rows of the disputes agent is a party to.
func disputesOf(agent string) string    { return keyDisputesOf + agent + "/" }
func disputeRefundKey(id string) []byte { return []byte("protocol/dispute-refund/" + id) }

// DisputeOpenRequest is the body of dispute.open.
type DisputeOpenRequest struct {
	Subject    string `json:"subject" validate:"required,max=64" doc:"A settled payment (int_) or cleared obligation (obl_) of the caller."`
	Reason     string `json:"reason" validate:"required,max=2000"`
	ClaimMinor int64  `json:"claimMinor,omitempty" validate:"omitempty,gt=0,lt=9007199254740992" doc:"The refund sought; all that remains refundable when omitted."`
}

// DisputeOpen opens a dispute on one of the caller's settled payments or
// cleared obligations (protocol.dispute.open).
func (s *Service) DisputeOpen(ctx context.Context, call Call, req *DisputeOpenRequest) (*Dispute, error) {
	subj, err := s.subjectOf(ctx, call, req.Subject)
	if err != nil {
		return nil, err
	}
	return s.openDispute(ctx, call, req.Subject, subj.intent, subj.intent.Agent, req.Reason, req.ClaimMinor)
}

func (s *Service) readIntent(ctx context.Context, id string) (*pay.Intent, error) {
	var in *pay.Intent
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		in, err = s.books.Intent(r, id)
		return err
	})
	return in, err
}

// respondentOf is the counterparty of a subject as a 64-hex agent id, and
// the stake its terms put up.
func (s *Service) respondentOf(r store.Reader, in *pay.Intent) (string, string, error) {
	cp, stake := in.Metadata[metaCounterparty], ""
	if in.TermsID != "" {
		var t TwoPartyTerms
		if err := getJSON(r, termsKey(in.TermsID), &t); err != nil && !errors.Is(err, store.ErrNotFound) {
			return "", "", err
		}
		if cp == "" {
			cp = t.Counterparty
		}
		if t.Counterparty == cp {
			stake = t.StakeID
		}
	}
	if cp == "" {
		return "", "", nil
	}
	k, err := identity.PublicKeyOf(cp)
	if err != nil {
		return "", "", nil
	}
	return hex.EncodeToString(k), stake, nil
}

func (s *Service) openDispute(ctx context.Context, call Call, subject string, in *pay.Intent, claimant, reason string, claim int64) (*Dispute, error) {
	if in.Status != pay.StatusSettled && in.Status != pay.StatusPartiallyRefunded {
		return nil, fmt.Errorf("%w (it is %s)", errDisputeUnsettled, in.Status)
	}
	remaining := in.SettledMinor() - in.RefundedMinor
	if claim == 0 {
		claim = remaining
	}
	if claim > remaining {
		return nil, fmt.Errorf("%w: claimMinor %d is more than the %d still refundable", errDisputeInvalid, claim, remaining)
	}
	var dsp Dispute
	err := s.log.Update(ctx, func(txn store.Txn) error {
		if _, err := txn.Get(disputeBySubject(subject)); err == nil {
			return errDisputeExists
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		respondent, stake, err := s.respondentOf(txn, in)
		if err != nil {
			return err
		}
		now := s.clock()
		dsp = Dispute{ID: ids.New("dsp_"), Subject: subject, IntentID: in.ID, Claimant: claimant,
			ClaimantKeyID: in.AgentKeyID, Respondent: respondent, OpenedBy: "agent", Reason: reason,
			Claim: pay.Amount{Minor: claim, Currency: in.Amount.Currency}, StakeID: stake, CreatedAt: now, UpdatedAt: now}
		if err := disputeMachine.move(&dsp.Status, stepOpen, DisputeOpen); err != nil {
			return err
		}
		if call.Operator != nil {
			dsp.OpenedBy = "operator"
		}
		if b, err := txn.Get(deliveryBySubject(subject)); err == nil {
			var d DeliveryReport
			if err := getJSON(txn, deliveryKey(string(b)), &d); err != nil {
				return err
			}
			dsp.DeliveryID = d.ID
			if err := deliveryMachine.move(&d.Status, stepDispute, DeliveryDisputed); err != nil {
				return err
			}
			d.DisputeID, d.UpdatedAt = dsp.ID, now
			typ := "protocol.delivery.dispute"
			if err := s.putDelivery(txn, call, typ, &d); err != nil {
				return err
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := txn.Set(disputeBySubject(subject), []byte(dsp.ID)); err != nil {
			return err
		}
		if stake != "" {
			if err := txn.Set(append(stakeDisputePrefix(stake), dsp.ID...), nil); err != nil {
				return err
			}
		}
		if err := s.putDispute(txn, call, "protocol.dispute.open", &dsp); err != nil {
			return err
		}
		// Listed for each party at the entry just appended.
		parties := []string{claimant}
		if respondent != "" && respondent != claimant {
			parties = append(parties, respondent)
		}
		for _, a := range parties {
			if err := txn.Set(seqlist.Key(disputesOf(a), dsp.Entries[0], dsp.ID), []byte(dsp.ID)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &dsp, nil
}

func (s *Service) putDispute(txn store.Txn, call Call, typ string, d *Dispute) error {
	return putObject(s, txn, call, typ, d.IntentID, disputeKey(d.ID), d)
}

// DisputeRef names a dispute.
type DisputeRef struct {
	DisputeID string `json:"disputeId" validate:"required,max=64"`
}

// readDispute reads a dispute; an agent sees it when it acts for the
// claimant or the respondent.
func readDispute(r store.Reader, call Call, id string, d *Dispute) error {
	err := getJSON(r, disputeKey(id), d)
	if errors.Is(err, store.ErrNotFound) || (err == nil && call.Agent != nil && !actsFor(call, d.Claimant) && !actsFor(call, d.Respondent)) {
		return errDisputeNotFound
	}
	return err
}

// DisputeGet returns a dispute the caller is a party to.
func (s *Service) DisputeGet(ctx context.Context, call Call, req *DisputeRef) (*Dispute, error) {
	var d Dispute
	err := s.st.View(ctx, func(r store.Reader) error {
		if err := readDispute(r, call, req.DisputeID, &d); err != nil {
			return err
		}
		return s.refundView(r, &d)
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// refundView reads a started refund's outcome from its intent.
func (s *Service) refundView(r store.Reader, d *Dispute) error {
	res := d.Resolution
	if res == nil || res.RefundStatus != RefundStarted {
		return nil
	}
	in, err := s.books.Intent(r, d.IntentID)
	if err != nil {
		return err
	}
	switch {
	case in.PendingRefund != nil && in.PendingRefund.ID == res.RefundID:
		res.RefundStatus = RefundProgress
	default:
		res.RefundStatus = RefundRefused
		for _, rf := range in.Refunds {
			if rf.ID == res.RefundID {
				res.RefundStatus = RefundDone
			}
		}
	}
	return nil
}

// DisputeListRequest is the body of dispute.list.
type DisputeListRequest struct {
	Agent  string        `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase"`
	Status DisputeStatus `json:"status,omitempty" validate:"omitempty,oneof=open responded resolved"`
	Cursor string        `json:"cursor,omitempty" validate:"max=64" doc:"Opaque: the nextCursor of the previous page."`
	Limit  int           `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// DisputeList is a page of disputes, oldest first.
type DisputeList struct {
	Disputes   []Dispute `json:"disputes"`
	NextCursor string    `json:"nextCursor,omitempty"`
}

// DisputeList pages the disputes an identity of the caller is a party to.
func (s *Service) DisputeList(ctx context.Context, call Call, req *DisputeListRequest) (*DisputeList, error) {
	agent, err := s.agentOf(call, req.Agent)
	if err != nil {
		return nil, err
	}
	items, next, err := listPage(ctx, s, disputesOf(agent), "dsp_", req.Cursor, req.Limit,
		func(r store.Reader, id string) (Dispute, bool, error) {
			var d Dispute
			if err := getJSON(r, disputeKey(id), &d); err != nil {
				return d, false, err
			}
			if req.Status != "" && d.Status != req.Status {
				return d, false, nil
			}
			return d, true, s.refundView(r, &d)
		})
	if err != nil {
		return nil, err
	}
	return &DisputeList{Disputes: items, NextCursor: next}, nil
}

// DisputeRespondRequest is the body of dispute.respond.
type DisputeRespondRequest struct {
	DisputeID   string   `json:"disputeId" validate:"required,max=64"`
	Text        string   `json:"text" validate:"required,max=2000"`
	EvidenceIDs []string `json:"evidenceIds,omitempty" validate:"max=20,dive,max=64"`
}

// DisputeRespond records the respondent's answer
// (protocol.dispute.respond). Only a credential acting for the respondent
// identity may respond, once.
func (s *Service) DisputeRespond(ctx context.Context, call Call, req *DisputeRespondRequest) (*Dispute, error) {
	return s.updateDispute(ctx, call, req.DisputeID, "protocol.dispute.respond", func(txn store.Txn, d *Dispute) error {
		if d.Respondent == "" || !actsFor(call, d.Respondent) {
			return errDisputeNotParty
		}
		if d.Status != DisputeOpen {
			return fmt.Errorf("%w: responded already", errDisputeInvalid)
		}
		for _, id := range req.EvidenceIDs {
			var ev Evidence
			if err := getJSON(txn, evidenceKey(id), &ev); err != nil || ev.Subject != d.Subject {
				return fmt.Errorf("%w: evidence %s is not about %s", errDisputeInvalid, id, d.Subject)
			}
		}
		ev := req.EvidenceIDs
		if ev == nil {
			ev = []string{}
		}
		if err := disputeMachine.move(&d.Status, stepRespond, DisputeResponded); err != nil {
			return err
		}
		d.Response = &DisputeResponse{Text: req.Text, EvidenceIDs: ev, AgentKeyID: call.Agent.KeyID, At: s.clock()}
		return nil
	})
}

func (s *Service) updateDispute(ctx context.Context, call Call, id, typ string, change func(store.Txn, *Dispute) error) (*Dispute, error) {
	var d Dispute
	err := s.log.Update(ctx, func(txn store.Txn) error {
		d = Dispute{}
		if err := readDispute(txn, call, id, &d); err != nil {
			return err
		}
		if d.Status == DisputeResolved {
			return errDisputeResolved
		}
		if err := change(txn, &d); err != nil {
			return err
		}
		d.UpdatedAt = s.clock()
		return s.putDispute(txn, call, typ, &d)
	})
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// DisputeResolveRequest is the body of dispute.resolve (★).
type DisputeResolveRequest struct {
	DisputeID   string `json:"disputeId" validate:"required,max=64"`
	Outcome     string `json:"outcome" validate:"required,oneof=claimant respondent" doc:"For whom the dispute is resolved."`
	RefundMinor *int64 `json:"refundMinor,omitempty" validate:"omitempty,min=0,lt=9007199254740992" doc:"For the claimant: the refund to execute, 0 to none; the claim when omitted. Must be absent or 0 for the respondent."`
	SlashMinor  int64  `json:"slashMinor,omitempty" validate:"min=0,lt=9007199254740992" doc:"For the claimant: how much of the named stake moves to the claimant's custody."`
	Override
}

// DisputeResolve resolves a dispute and executes the outcome
// (protocol.dispute.resolve, then the refund's own entries).
func (s *Service) DisputeResolve(ctx context.Context, call Call, req *DisputeResolveRequest) (*Dispute, error) {
	if call.Operator == nil {
		return nil, errOperatorOnly
	}
	d, err := s.updateDispute(ctx, call, req.DisputeID, "protocol.dispute.resolve", func(txn store.Txn, d *Dispute) error {
		refund := int64(0)
		if req.Outcome == ForClaimant {
			refund = d.Claim.Minor
			if req.RefundMinor != nil {
				refund = *req.RefundMinor
			}
		} else if (req.RefundMinor != nil && *req.RefundMinor != 0) || req.SlashMinor != 0 {
			return fmt.Errorf("%w: a resolution for the respondent refunds and slashes nothing", errDisputeInvalid)
		}
		if req.SlashMinor > 0 && d.StakeID == "" {
			return fmt.Errorf("%w: no stake is named by the subject's terms", errDisputeInvalid)
		}
		if refund > 0 {
			in, err := s.books.Intent(txn, d.IntentID)
			if err != nil {
				return err
			}
			if left := in.SettledMinor() - in.RefundedMinor; refund > left {
				return fmt.Errorf("%w: refundMinor %d is more than the %d still refundable", errDisputeInvalid, refund, left)
			}
		}
		now := s.clock()
		res := &DisputeResolution{Outcome: req.Outcome, RefundMinor: refund, RefundStatus: RefundNone, Claims: []string{},
			Operator: call.Operator.Operator, Rationale: call.Operator.Rationale, At: now}
		if refund > 0 {
			res.RefundStatus = RefundPending
			if err := txn.Set(disputeRefundKey(d.ID), nil); err != nil {
				return err
			}
		}
		if d.StakeID != "" {
			if err := txn.Delete(append(stakeDisputePrefix(d.StakeID), d.ID...)); err != nil {
				return err
			}
			if req.SlashMinor > 0 {
				if err := s.slash(txn, call, d, req.SlashMinor); err != nil {
					return err
				}
				res.SlashedMinor = req.SlashMinor
			}
		}
		claims, err := s.settleClaims(txn, call, d.ID, req.Outcome == ForClaimant)
		if err != nil {
			return err
		}
		res.Claims = claims
		if err := disputeMachine.move(&d.Status, stepResolve, DisputeResolved); err != nil {
			return err
		}
		d.Resolution = res
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.Resolution.RefundStatus == RefundPending {
		if err := s.executeRefund(ctx, d.ID); err != nil {
			s.logger.WarnContext(ctx, "dispute refund deferred", slog.String("dispute", d.ID), slog.Any("error", err))
		}
		return s.DisputeGet(ctx, call, &DisputeRef{DisputeID: d.ID})
	}
	return d, nil
}

// slash moves part of a stake to the claimant's custody.
func (s *Service) slash(txn store.Txn, call Call, d *Dispute, minor int64) error {
	var st Stake
	if err := getJSON(txn, stakeKey(d.StakeID), &st); err != nil {
		return err
	}
	if st.Status == StakeReleased || st.Status == StakeSlashed {
		return fmt.Errorf("%w: stake %s is %s", errDisputeInvalid, st.ID, st.Status)
	}
	err := s.post(txn, "stake.slash."+d.ID, st.ID, st.Amount.Currency, move(stakeAccount(st.Agent, st.ID), availableAccount(d.Claimant), minor)...)
	if errors.Is(err, ledger.ErrInsufficientFunds) {
		return fmt.Errorf("%w: slashMinor is more than the stake holds", errDisputeInvalid)
	}
	if err != nil {
		return err
	}
	left, err := ledger.Balance(txn, stakeAccount(st.Agent, st.ID), st.Amount.Currency)
	if err != nil {
		return err
	}
	st.SlashedMinor += minor
	st.UpdatedAt = s.clock()
	if left == 0 {
		st.Status = StakeSlashed
		if err := txn.Delete(stakeUnlockKey(st.LockedUntil, st.ID)); err != nil {
			return err
		}
	}
	return s.putStake(txn, call, "protocol.stake.slash", &st)
}

// executeRefund starts a resolved dispute's refund through the operator
// refund path, exactly once: the refund's own transaction marks it
// started. A refusal the refund path gives for good (an irreversible
// rail, nothing left to refund) is recorded; a temporary one (the kill
// switch, a fault) leaves it pending for the scheduler.
func (s *Service) executeRefund(ctx context.Context, id string) error {
	var d Dispute
	if err := s.st.View(ctx, func(r store.Reader) error { return getJSON(r, disputeKey(id), &d) }); err != nil {
		return err
	}
	res := d.Resolution
	if res == nil || res.RefundStatus != RefundPending {
		return nil
	}
	oc := pay.OperatorCall{Operator: res.Operator, RequestID: ids.New(ids.Request), Rationale: "dispute " + d.ID + " resolved for the claimant: " + res.Rationale}
	call := OperatorCall(oc)
	amount := res.RefundMinor
	_, err := s.books.Refund(ctx, pay.RefundRequest{IntentID: d.IntentID, AmountMinor: &amount, Rationale: oc.Rationale}, oc,
		func(txn store.Txn, _ *pay.Intent, p pay.Refund) error {
			var cur Dispute
			if err := getJSON(txn, disputeKey(id), &cur); err != nil {
				return err
			}
			if cur.Resolution.RefundStatus != RefundPending {
				return errRefundTaken
			}
			cur.Resolution.RefundStatus, cur.Resolution.RefundID, cur.UpdatedAt = RefundStarted, p.ID, s.clock()
			if err := txn.Delete(disputeRefundKey(id)); err != nil {
				return err
			}
			return s.putDispute(txn, call, "protocol.dispute.refund", &cur)
		})
	switch {
	case err == nil, errors.Is(err, errRefundTaken):
		return nil
	case errors.Is(err, pay.ErrRefundInProgress):
		return err // another refund first; the scheduler tries again
	case errors.Is(err, pay.ErrRefundRefused), errors.Is(err, pay.ErrRefundExceeds), errors.Is(err, errInsufficient):
		return s.log.Update(ctx, func(txn store.Txn) error {
			var cur Dispute
			if err := getJSON(txn, disputeKey(id), &cur); err != nil {
				return err
			}
			if cur.Resolution.RefundStatus != RefundPending {
				return nil
			}
			cur.Resolution.RefundStatus, cur.Resolution.RefundError, cur.UpdatedAt = RefundRefused, err.Error(), s.clock()
			if err := txn.Delete(disputeRefundKey(id)); err != nil {
				return err
			}
			return s.putDispute(txn, call, "protocol.dispute.refund", &cur)
		})
	}
	return err
}

var errRefundTaken = errors.New("protocol: the dispute's refund was started already")

// retryDisputeRefunds is the scheduler's part: every resolved dispute
// whose refund is still pending is tried again.
func (s *Service) retryDisputeRefunds(ctx context.Context) (int, error) {
	var due []string
	err := s.st.View(ctx, func(r store.Reader) error {
		prefix := []byte("protocol/dispute-refund/")
		it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
		for it.Next() && len(due) < 1000 {
			due = append(due, string(it.Key()[len(prefix):]))
		}
		return it.Close()
	})
	if err != nil || len(due) == 0 {
		return 0, err
	}
	if ctl, err := s.pay.Control(ctx); err != nil {
		return 0, err
	} else if ctl.KillSwitchEngaged {
		return 0, nil // every refund would be refused (and recorded so): wait for the release
	}
	n := 0
	for _, id := range due {
		if err := s.executeRefund(ctx, id); err != nil {
			s.logger.WarnContext(ctx, "dispute refund deferred", slog.String("dispute", id), slog.Any("error", err))
			continue
		}
		n++
	}
	return n, nil
}

func (d *DeliveryReport) entryList() *[]uint64 { return &d.Entries }

func (d *Dispute) entryList() *[]uint64 { return &d.Entries }
