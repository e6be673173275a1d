package pay

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// Errors of the operator actions. Check with errors.Is.
var (
	// ErrApprovalExpired: the approval window passed; the intent is expired
	// and its reservation released.
	ErrApprovalExpired = errcode.New(CodeApprovalExpired, "pay: the approval window of this payment has passed")
	// ErrApprovalMismatch: the challenge or mandate id does not match the
	// held intent.
	ErrApprovalMismatch = errcode.New(CodeApprovalMismatch, "pay: the challenge or mandate id does not match this held payment")
	// ErrNotPending: the intent is not waiting for approval.
	ErrNotPending = errcode.New(CodeNotPending, "pay: this payment is not waiting for approval")
	// ErrRefundRefused: the intent cannot be refunded (not settled, an
	// irreversible rail, or a refund still in progress).
	ErrRefundRefused = errcode.New(CodeRefundRefused, "pay: this payment cannot be refunded")
	// ErrRefundInProgress matches ErrRefundRefused: another refund of the
	// intent is unresolved, so this one cannot start yet (it may later).
	ErrRefundInProgress = fmt.Errorf("%w: another refund of it is still in progress", ErrRefundRefused)
	// ErrRefundExceeds: the amount would take refunds past the settled
	// amount.
	ErrRefundExceeds = errcode.New(CodeRefundExceeds, "pay: refund amount exceeds what remains of the payment")
)

// ApproveRequest is the body of POST /operator/approve.
type ApproveRequest struct {
	IntentID string `json:"intentId" validate:"required,max=64"`
	// Challenge may be left out: the operator's signature over a request
	// that names the intent and its mandate is the authority, and the
	// challenge is stored only hashed, so an operator working from the
	// held list cannot know it (DESIGN §5). When sent, it must be the
	// intent's.
	Challenge    string `json:"challenge,omitempty" validate:"omitempty,max=128" doc:"The challenge of the payment's 202 answer. Optional: when sent it must be this payment's (else 409 approval.mismatch); intentId and mandateId name the payment either way."`
	MandateID    string `json:"mandateId" validate:"required,max=128" doc:"The mandate the payment was held under (the held list shows it); another is 409 approval.mismatch."`
	Rationale    string `json:"rationale" validate:"required,max=2000"`
	Acknowledged bool   `json:"acknowledged"`
}

// approvalProof is what an approval or a decline shows of the held intent
// besides the operator's signature: its mandate id, and the challenge of
// the agent's 202 answer if the operator has it. The mandate id pins the
// intent the operator means (with its id, which the signature covers); a
// challenge, when sent, must be the one the agent was given.
type approvalProof struct {
	mandateID string
	challenge []byte // SHA-256 of the challenge; nil when none was sent
}

// newApprovalProof parses what an approval or a decline shows. A
// challenge that cannot be one (not base64url, not 32 bytes) is a
// malformed request, 400; a well-formed one that is not this intent's is
// a mismatch, 409, which matches finds.
func newApprovalProof(challenge, mandateID string) (approvalProof, error) {
	p := approvalProof{mandateID: mandateID}
	if challenge == "" {
		return p, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(challenge)
	if err != nil || len(raw) != challengeLen {
		return approvalProof{}, &contract.ValidationError{Errors: []contract.FieldError{{Field: "challenge", Rule: "challenge",
			Message: "must be the challenge of the 202 answer: 32 bytes in base64url without padding (43 characters)"}}}
	}
	sum := sha256.Sum256(raw)
	p.challenge = sum[:]
	return p, nil
}

// matches reports whether p is the proof of the held intent in. Both
// parts are compared in constant time; an empty mandate id never matches.
func (p approvalProof) matches(in *Intent) bool {
	ok := p.mandateID != "" && subtle.ConstantTimeCompare([]byte(p.mandateID), []byte(in.MandateID)) == 1
	if p.challenge != nil {
		want, _ := hex.DecodeString(in.Approval.ChallengeHash)
		ok = subtle.ConstantTimeCompare(p.challenge, want) == 1 && ok
	}
	return ok
}

// checkHeld checks, in the order Approve and Decline answer them, that in
// waits for an operator and that p is its proof: ErrApprovalExpired for an
// expired intent, ErrNotPending for any other status, ErrApprovalMismatch.
// lapsed reports an approval window (or a hold's absolute end, an
// obligation's deadline) that has passed although the sweep has not
// expired the intent yet: the caller expires it and answers
// ErrApprovalExpired, as it would have after the sweep.
func checkHeld(in *Intent, p approvalProof, now time.Time) (lapsed bool, err error) {
	if in.Status == StatusExpired {
		return false, ErrApprovalExpired
	}
	if in.Status != StatusPendingApproval || in.Approval == nil {
		return false, fmt.Errorf("%w (status %s)", ErrNotPending, in.Status)
	}
	if !p.matches(in) {
		return false, ErrApprovalMismatch
	}
	return !now.Before(in.Approval.ExpiresAt) || (in.Hold != nil && !in.Hold.Until.IsZero() && !now.Before(in.Hold.Until)), nil
}

// Approve records one operator's approval of a held payment. When the
// mandate's number of distinct operators have approved (the same key twice
// counts once), the payment settles through the same two-phase path as an
// allowed one and the Result carries the Receipt. Otherwise the Result is
// held (202) and says how many approvals it has. An intent whose terms need
// an acknowledgement (irreversible or above a threshold) is held again, and
// nothing recorded, until the request says acknowledged: true.
//
// The request names the intent and its mandate, and may carry the
// challenge of the agent's 202 answer; a challenge sent must be the
// intent's (see [ApproveRequest]). Before settling the gate's
// preconditions are checked again: the mandate neither expired nor
// revoked, the kill switch released.
func (s *Service) Approve(ctx context.Context, req ApproveRequest, call OperatorCall) (*Result, error) {
	proof, err := newApprovalProof(req.Challenge, req.MandateID)
	if err != nil {
		return nil, err
	}
	// Claimed before the approval commits, so that nobody who sees the
	// intent settling (the reconciler, a retry) sends it meanwhile and
	// leaves this call to answer from the held request's stored outcome.
	if !s.claim(req.IntentID) {
		return nil, intentBusyError{req.IntentID}
	}
	defer s.release(req.IntentID)
	var (
		res         *Result
		deferred    error
		toSettle    *Intent
		toAuthorize bool
	)
	err = s.log.Update(ctx, func(txn store.Txn) error {
		res, deferred, toSettle, toAuthorize = nil, nil, nil, false
		in, err := getIntent(txn, req.IntentID)
		if err != nil {
			return err
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if lapsed, err := checkHeld(in, proof, now); err != nil {
			return err
		} else if lapsed {
			// Nothing may be authorized now.
			deferred = ErrApprovalExpired
			return s.expire(txn, in, call.RequestID)
		}
		ctl, err := getControl(txn)
		if err != nil {
			return err
		}
		if ctl.KillSwitchEngaged {
			deferred = ErrFrozen
			rec, err := call.record("operator.refused", in.ID, map[string]string{"action": "approve", "reason": "kill_switch_engaged"})
			if err != nil {
				return err
			}
			_, err = s.append(txn, rec)
			return err
		}
		if revoked, err := isRevoked(txn, in.MandateID); err != nil {
			return err
		} else if revoked {
			return &UnauthorizedError{Reason: ReasonMandateRevoked}
		}
		if revoked, err := identityRevoked(txn, in.Agent); err != nil {
			return err
		} else if revoked {
			return &UnauthorizedError{Reason: ReasonIdentityRevoked}
		}
		if !in.MandateExpiresAt.IsZero() && !now.Before(in.MandateExpiresAt) {
			return &UnauthorizedError{Reason: ReasonMandateExpired}
		}
		if in.TermsID != "" {
			// The terms must still admit the payment when a person
			// decides it: expired terms no longer do.
			reason, err := s.checkTerms(txn, in)
			if err != nil {
				return err
			}
			if reason != nil {
				return &UnauthorizedError{Reason: AuthReason(reason.Code), Err: errors.New(reason.Message)}
			}
		}
		held := func() *Result {
			return &Result{Outcome: OutcomeHeld, IntentID: in.ID, RequestID: call.RequestID, Held: &Held{
				IntentID: in.ID, Status: in.Status, Decision: in.Decision, MandateID: in.MandateID,
				ApprovalsRequired: in.Approval.Required, ApprovalsReceived: len(in.Approval.Received),
				ExpiresAt: in.Approval.ExpiresAt, Links: s.links(in.ID),
			}}
		}
		if in.Approval.Acknowledge && !req.Acknowledged {
			res = held()
			return nil
		}
		if slices.ContainsFunc(in.Approval.Received, func(g ApprovalGrant) bool { return g.Operator == call.Operator }) {
			res = held() // the same operator twice counts once
			return nil
		}
		in.Approval.Received = append(in.Approval.Received, ApprovalGrant{Operator: call.Operator, At: now})
		in.UpdatedAt = now
		rec, err := call.record("approval.granted", in.ID, map[string]any{
			"approvalsRequired": in.Approval.Required, "approvalsReceived": len(in.Approval.Received),
			"acknowledged": req.Acknowledged, "mandateId": in.MandateID,
		})
		if err != nil {
			return err
		}
		entry, err := s.append(txn, rec)
		if err != nil {
			return err
		}
		if len(in.Approval.Received) < in.Approval.Required {
			res = held()
			return putIntent(txn, in)
		}
		if err := heldList.Remove(txn, in.ID); err != nil {
			return err
		}
		toSettle = in
		if in.Hold != nil {
			// A held hold, approved, is placed: authorized, or asked of
			// the rail.
			if toAuthorize, res, err = s.startHold(txn, in, StepApproved, entry.Seq, call.RequestID); err != nil {
				return err
			}
		} else {
			if err := in.transition(StepApproved, StatusSettling); err != nil {
				return err
			}
			if err := settlingList.Put(txn, entry.Seq, in.ID); err != nil {
				return err
			}
		}
		if err := s.changed(txn, in, StepApproved, call.RequestID); err != nil {
			return err
		}
		return putIntent(txn, in)
	})
	switch {
	case err != nil:
		var ue *UnauthorizedError
		if errors.Is(err, ErrIntentNotFound) || errors.Is(err, ErrApprovalExpired) || errors.Is(err, ErrNotPending) ||
			errors.Is(err, ErrApprovalMismatch) || errors.As(err, &ue) {
			return nil, err
		}
		return nil, fmt.Errorf("pay: approve: %w", err)
	case deferred != nil:
		return nil, deferred
	case res != nil:
		return res, nil
	case toAuthorize:
		return s.authorizeClaimed(ctx, toSettle, call.RequestID, false)
	}
	return s.settleClaimed(ctx, toSettle, nil, call.RequestID)
}

// DeclineRequest is the body of POST /operator/decline: the same proof of
// which held intent is meant as an approval's ([ApproveRequest]), and why.
type DeclineRequest struct {
	IntentID  string `json:"intentId" validate:"required,max=64"`
	Challenge string `json:"challenge,omitempty" validate:"omitempty,max=128" doc:"The challenge of the payment's 202 answer. Optional: when sent it must be this payment's (else 409 approval.mismatch); intentId and mandateId name the payment either way."`
	MandateID string `json:"mandateId" validate:"required,max=128" doc:"The mandate the payment was held under (the held list shows it); another is 409 approval.mismatch."`
	Rationale string `json:"rationale" validate:"required,max=2000"`
}

// Declined is the answer of a decline. A repeated decline answers the
// first one's.
type Declined struct {
	IntentID   string    `json:"intentId"`
	Status     Status    `json:"status" doc:"declined."`
	MandateID  string    `json:"mandateId"`
	DeclinedBy string    `json:"declinedBy" doc:"The key id of the operator who declined it."`
	DeclinedAt time.Time `json:"declinedAt"`
	AuditSeq   uint64    `json:"auditSeq" doc:"Sequence number of the approval.declined entry."`
}

// Decline refuses a held intent (a payment, a purchase, a protocol hold,
// meter or obligation: whatever [Service.Approve] takes) for good. It
// becomes declined, its reservation (and a session's share) is released
// and a hold's part ends, exactly as when its approval window passes, and
// approval.declined records it with the operator and the rationale.
//
// One operator's decline ends it, whatever the mandate's number of
// approvals and whoever approved before: refusing is the direction that
// fails closed. Nothing is asked of a rail (a held intent has nothing
// there yet: even a hold is authorized only once approved), so neither the
// kill switch nor a revoked or expired mandate stops it.
//
// The request shows the intent as an approval does, and is answered as one
// would be: ErrNotPending for an intent that is not held, ErrApprovalExpired
// for one whose window passed (expiring it if the sweep has not yet), and
// ErrApprovalMismatch for a mandate id or challenge that is not its own.
// Declining an intent already declined answers the first decline again
// and records nothing.
func (s *Service) Decline(ctx context.Context, req DeclineRequest, call OperatorCall) (*Declined, error) {
	proof, err := newApprovalProof(req.Challenge, req.MandateID)
	if err != nil {
		return nil, err
	}
	var (
		out      *Declined
		deferred error
	)
	err = s.log.Update(ctx, func(txn store.Txn) error {
		out, deferred = nil, nil
		in, err := getIntent(txn, req.IntentID)
		if err != nil {
			return err
		}
		if in.Status == StatusDeclined && in.Approval != nil && in.Approval.Declined != nil {
			if !proof.matches(in) {
				return ErrApprovalMismatch
			}
			out = declinedOf(in)
			return nil
		}
		if lapsed, err := checkHeld(in, proof, s.now()); err != nil {
			return err
		} else if lapsed {
			deferred = ErrApprovalExpired
			return s.expire(txn, in, call.RequestID)
		}
		rec, err := call.record("approval.declined", in.ID, map[string]any{
			"approvalsRequired": in.Approval.Required, "approvalsReceived": len(in.Approval.Received), "mandateId": in.MandateID,
		})
		if err != nil {
			return err
		}
		return s.endHeld(txn, in, StepDeclined, StatusDeclined, rec, "operator_decline", func(e audit.Entry) {
			in.Approval.Declined = &ApprovalDecline{Operator: call.Operator, At: in.UpdatedAt, Rationale: call.Rationale, AuditSeq: e.Seq}
			out = declinedOf(in)
		})
	})
	switch {
	case err != nil:
		if errors.Is(err, ErrIntentNotFound) || errors.Is(err, ErrApprovalExpired) || errors.Is(err, ErrNotPending) ||
			errors.Is(err, ErrApprovalMismatch) {
			return nil, err
		}
		return nil, fmt.Errorf("pay: decline: %w", err)
	case deferred != nil:
		return nil, deferred
	}
	return out, nil
}

func declinedOf(in *Intent) *Declined {
	d := in.Approval.Declined
	return &Declined{IntentID: in.ID, Status: in.Status, MandateID: in.MandateID, DeclinedBy: d.Operator,
		DeclinedAt: d.At, AuditSeq: d.AuditSeq}
}

// expire moves a held intent to expired inside txn and records
// approval.expired.
func (s *Service) expire(txn store.Txn, in *Intent, requestID string) error {
	data, err := json.Marshal(map[string]any{"expiresAt": in.Approval.ExpiresAt, "approvalsReceived": len(in.Approval.Received)})
	if err != nil {
		return err
	}
	return s.endHeld(txn, in, StepExpired, StatusExpired, audit.Record{Type: "approval.expired", IntentID: in.ID,
		RequestID: requestID, Actor: audit.Actor{Kind: "system", ID: "approval-sweep"}, Data: data}, "expiry", nil)
}

// endHeld ends a held intent that will not be approved, inside txn: its
// reservation (and a session's share) released, the change to status to
// at step, rec appended, the intent off the held list, a hold's part ended
// by endedBy, the route's effect told, the intent stored. Expiry and an
// operator's decline are the two ways, and share it so that both give
// back exactly the same. noted, when set, is given the entry before the
// intent is stored.
func (s *Service) endHeld(txn store.Txn, in *Intent, step Step, to Status, rec audit.Record, endedBy string, noted func(audit.Entry)) error {
	if err := s.releaseReservation(txn, in); err != nil {
		return err
	}
	if err := in.transition(step, to); err != nil {
		return err
	}
	in.UpdatedAt = s.now().UTC().Truncate(time.Microsecond)
	e, err := s.append(txn, rec)
	if err != nil {
		return err
	}
	if noted != nil {
		noted(e)
	}
	if err := heldList.Remove(txn, in.ID); err != nil {
		return err
	}
	if in.Hold != nil {
		in.Hold.Phase, in.Hold.EndedBy = HoldPhaseDone, endedBy
	}
	if err := s.changed(txn, in, step, rec.RequestID); err != nil {
		return err
	}
	return putIntent(txn, in)
}

// ExpireApprovals expires every held intent whose approval window has
// passed and returns how many. The reference server runs it every minute.
func (s *Service) ExpireApprovals(ctx context.Context) (int, error) {
	n := 0
	err := s.log.Update(ctx, func(txn store.Txn) error {
		n = 0
		now := s.now()
		var due []*Intent
		it := txn.Iterate([]byte(keyHeld), store.PrefixEnd([]byte(keyHeld)), false)
		for it.Next() {
			in, err := getIntent(txn, string(it.Key()[len(keyHeld):]))
			if err != nil {
				it.Close()
				return err
			}
			if in.Approval != nil && !now.Before(in.Approval.ExpiresAt) {
				due = append(due, in)
			}
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, in := range due {
			if err := s.expire(txn, in, ""); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pay: expire approvals: %w", err)
	}
	return n, nil
}

// HeldIntent is one payment waiting for approval, as the operator sees it.
type HeldIntent struct {
	IntentID          string          `json:"intentId"`
	AgentKeyID        string          `json:"agentKeyId"`
	Payee             string          `json:"payee"`
	Amount            Amount          `json:"amount"`
	Purpose           string          `json:"purpose"`
	Rail              string          `json:"rail"`
	MandateID         string          `json:"mandateId"`
	Reasons           []ReasonView    `json:"reasons"`
	ApprovalsRequired int             `json:"approvalsRequired"`
	ApprovalsReceived int             `json:"approvalsReceived"`
	Acknowledge       bool            `json:"acknowledgeRequired"`
	CreatedAt         time.Time       `json:"createdAt"`
	ExpiresAt         time.Time       `json:"expiresAt"`
	AgeSeconds        int64           `json:"ageSeconds"`
	Approvals         []ApprovalGrant `json:"approvals"`
	// Context is what the operator needs to judge the intent without
	// other tools (see [HeldContext]).
	Context HeldContext `json:"context"`
}

// ReasonView is a gate reason as listed to the operator.
type ReasonView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// HeldPage is a page of held intents, oldest first.
type HeldPage struct {
	Data       []HeldIntent `json:"data"`
	HasMore    bool         `json:"hasMore"`
	NextCursor *string      `json:"nextCursor"`
}

// Held lists the payments waiting for approval, oldest first: in the
// order they were held, so that a payment held after a page was read is on
// a later page, whatever its id. The cursor is the nextCursor of the
// previous page ("" for the first). Each carries its [HeldContext],
// computed in the view that reads the page: per agent key on the page at
// most [HeldHistoryLimit]+2 intents are read for it.
func (s *Service) Held(ctx context.Context, cursor string, limit int) (HeldPage, error) {
	page := HeldPage{Data: []HeldIntent{}}
	now := s.now()
	var hc *heldContexts
	next, err := s.pageList(ctx, heldList, cursor, limit, func(r store.Reader, in *Intent) (bool, error) {
		h := HeldIntent{
			IntentID: in.ID, AgentKeyID: in.AgentKeyID, Payee: in.Payee, Amount: in.Amount, Purpose: in.Purpose,
			Rail: in.Terms.Rail, MandateID: in.MandateID, Reasons: []ReasonView{},
			CreatedAt: in.CreatedAt, AgeSeconds: int64(now.Sub(in.CreatedAt) / time.Second), Approvals: []ApprovalGrant{},
		}
		for _, r := range in.Decision.Reasons {
			h.Reasons = append(h.Reasons, ReasonView{Code: r.Code, Message: r.Message})
		}
		if a := in.Approval; a != nil {
			h.ApprovalsRequired, h.ApprovalsReceived, h.Acknowledge = a.Required, len(a.Received), a.Acknowledge
			h.ExpiresAt, h.Approvals = a.ExpiresAt, append(h.Approvals, a.Received...)
		}
		var err error
		if h.Context, err = hc.of(in); err != nil {
			return false, err
		}
		page.Data = append(page.Data, h)
		return true, nil
	}, func(r store.Reader) { page.Data, hc = page.Data[:0], s.newHeldContexts(r, now) })
	if err != nil {
		return HeldPage{}, err
	}
	page.HasMore, page.NextCursor = next != nil, next
	return page, nil
}

// HeldOf lists the payments of one agent key waiting for approval, in the
// order they were held. It pages the held list, which follows commit order
// (package seqlist), rather than the key's intents by creation time: with
// several servers on one database, ids and creation times are not commit
// order, and a page read in their order misses an intent held after it
// was read whose id or creation time sorts before the cursor. The cursor
// is the next of the previous page ("" for the first); next is nil on the
// last page, and may lead to an empty page when only other keys' held
// intents follow. limit is 1..100 (0 means 20); a bad one is
// audit.ErrBadLimit, a cursor no page returned audit.ErrBadCursor.
func (s *Service) HeldOf(ctx context.Context, agentKeyID, cursor string, limit int) (intents []*Intent, next *string, err error) {
	next, err = s.pageList(ctx, heldList, cursor, limit, func(_ store.Reader, in *Intent) (bool, error) {
		if in.AgentKeyID != agentKeyID || in.Status != StatusPendingApproval || in.Approval == nil {
			return false, nil
		}
		intents = append(intents, in)
		return true, nil
	}, func(store.Reader) { intents = intents[:0] })
	if err != nil {
		return nil, nil, err
	}
	return intents, next, nil
}

// RefundRequest is the body of POST /operator/refund.
type RefundRequest struct {
	IntentID string `json:"intentId" validate:"required,max=64"`
	// AmountMinor is the amount to refund; omitted means everything that
	// remains.
	AmountMinor *int64 `json:"amountMinor,omitempty" validate:"omitempty,gt=0,lt=9007199254740992"`
	Rationale   string `json:"rationale" validate:"required,max=2000"`
}

// RefundResult is the answer of a refund.
type RefundResult struct {
	IntentID       string `json:"intentId"`
	RefundID       string `json:"refundId"`
	RefundedMinor  int64  `json:"refundedMinor"`
	RemainingMinor int64  `json:"remainingMinor"`
	Status         Status `json:"status"`
	AuditSeq       uint64 `json:"auditSeq"`
}

// refundData is the data of a payment.refunded entry.
type refundData struct {
	RefundID       string `json:"refundId"`
	AmountMinor    int64  `json:"amountMinor"`
	RefundedMinor  int64  `json:"refundedMinor"`
	RemainingMinor int64  `json:"remainingMinor"`
	Reference      string `json:"reference"`
	Rail           string `json:"rail"`
}

// Refund returns money of a settled payment: all that remains, or
// AmountMinor of it. Cumulative refunds never exceed the settled amount
// (ErrRefundExceeds); an irreversible rail refuses (ErrRefundRefused).
// The refund id is minted and stored before the rail is called, and the
// rail is idempotent on it, so a refund whose rail answer is unknown is
// finished by retrying the same refund (Reconcile does) and never paid
// twice; while one is unresolved, no other refund of the intent starts.
func (s *Service) Refund(ctx context.Context, req RefundRequest, call OperatorCall) (*RefundResult, error) {
	return s.refundWithin(ctx, req, call, nil)
}

// refundWithin is Refund with within run inside the transaction that
// starts the refund, after the refund is minted and before it is stored:
// another package's books move with it (a dispute's resolution marks its
// refund started), and an error from within refuses the refund with
// nothing written.
func (s *Service) refundWithin(ctx context.Context, req RefundRequest, call OperatorCall, within func(store.Txn, *Intent, Refund) error) (*RefundResult, error) {
	var (
		in       *Intent
		pending  Refund
		deferred error
	)
	err := s.log.Update(ctx, func(txn store.Txn) error {
		deferred = nil
		var err error
		if in, err = getIntent(txn, req.IntentID); err != nil {
			return err
		}
		if in.Status != StatusSettled && in.Status != StatusPartiallyRefunded {
			return fmt.Errorf("%w: the payment is %s, not settled", ErrRefundRefused, in.Status)
		}
		if in.PendingRefund != nil {
			return fmt.Errorf("%w (%s)", ErrRefundInProgress, in.PendingRefund.ID)
		}
		if rail, err := s.rails.Get(in.Terms.Rail); err == nil && rail.Facts().Reversibility == settle.Irreversible {
			return fmt.Errorf("%w: rail %s is irreversible", ErrRefundRefused, in.Terms.Rail)
		}
		remaining := in.SettledMinor() - in.RefundedMinor
		amount := remaining
		if req.AmountMinor != nil {
			amount = *req.AmountMinor
		}
		if amount <= 0 || amount > remaining {
			return fmt.Errorf("%w: asked %d, %d remains", ErrRefundExceeds, amount, remaining)
		}
		ctl, err := getControl(txn)
		if err != nil {
			return err
		}
		if ctl.KillSwitchEngaged {
			deferred = ErrFrozen
			rec, err := call.record("operator.refused", in.ID, map[string]string{"action": "refund", "reason": "kill_switch_engaged"})
			if err != nil {
				return err
			}
			_, err = s.append(txn, rec)
			return err
		}
		pending = Refund{ID: ids.New(ids.Refund), Minor: amount, Operator: call.Operator,
			At: s.now().UTC().Truncate(time.Microsecond), Rationale: call.Rationale, RequestID: call.RequestID}
		if err := in.transition(StepRefunding, in.Status); err != nil {
			return err
		}
		in.PendingRefund = &pending
		if err := txn.Set([]byte(keyRefunding+in.ID), nil); err != nil {
			return err
		}
		if err := s.changed(txn, in, StepRefunding, call.RequestID); err != nil {
			return err
		}
		if within != nil {
			if err := within(txn, in, pending); err != nil {
				return err
			}
		}
		return putIntent(txn, in)
	})
	if err != nil {
		return nil, err
	}
	if deferred != nil {
		return nil, deferred
	}
	return s.refundOnRail(ctx, in, pending)
}

// refundOnRail calls the rail for a pending refund and records the outcome.
func (s *Service) refundOnRail(ctx context.Context, in *Intent, p Refund) (*RefundResult, error) {
	rail, err := s.rails.Get(in.Terms.Rail)
	if err != nil {
		return nil, fmt.Errorf("%w: rail %q is not registered", ErrRailUnavailable, in.Terms.Rail)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.railTO)
	res, callErr := rail.Refund(rctx, settle.RefundRequest{RefundID: p.ID, Key: in.ID, Amount: p.Minor,
		Metadata: map[string]string{"operator": p.Operator}})
	cancel()
	definiteRefusal := errors.Is(callErr, settle.ErrIrreversible) || errors.Is(callErr, settle.ErrRefundExceeds) ||
		errors.Is(callErr, settle.ErrNotSettled) || errors.Is(callErr, settle.ErrDeclined) || errors.Is(callErr, settle.ErrInvalidRequest)
	if callErr != nil && !definiteRefusal {
		return nil, fmt.Errorf("%w (refund %s of intent %s)", ErrRailUnavailable, p.ID, in.ID)
	}
	var out *RefundResult
	err = s.log.Update(context.WithoutCancel(ctx), func(txn store.Txn) error {
		out = nil
		cur, err := getIntent(txn, in.ID)
		if err != nil {
			return err
		}
		if cur.PendingRefund == nil || cur.PendingRefund.ID != p.ID {
			return nil // finished by someone else
		}
		if err := txn.Delete([]byte(keyRefunding + cur.ID)); err != nil {
			return err
		}
		if definiteRefusal {
			if err := cur.transition(StepRefundRefused, cur.Status); err != nil {
				return err
			}
			// The effect still sees which refund was refused.
			if err := s.changed(txn, cur, StepRefundRefused, p.RequestID); err != nil {
				return err
			}
			cur.PendingRefund = nil
			return putIntent(txn, cur)
		}
		cur.PendingRefund = nil
		p.Reference = res.Reference
		cur.Refunds = append(cur.Refunds, p)
		cur.RefundedMinor += p.Minor
		to := StatusPartiallyRefunded
		if cur.RefundedMinor >= cur.SettledMinor() {
			to = StatusRefunded
		}
		if err := cur.transition(StepRefunded, to); err != nil {
			return err
		}
		cur.UpdatedAt = s.now().UTC().Truncate(time.Microsecond)
		data, err := json.Marshal(refundData{RefundID: p.ID, AmountMinor: p.Minor, RefundedMinor: cur.RefundedMinor,
			RemainingMinor: cur.SettledMinor() - cur.RefundedMinor, Reference: res.Reference, Rail: cur.Terms.Rail})
		if err != nil {
			return err
		}
		e, err := s.append(txn, audit.Record{Type: "payment.refunded", IntentID: cur.ID, RequestID: p.RequestID,
			Rationale: p.Rationale, Actor: audit.Actor{Kind: "operator", ID: p.Operator}, Data: data})
		if err != nil {
			return err
		}
		out = &RefundResult{IntentID: cur.ID, RefundID: p.ID, RefundedMinor: cur.RefundedMinor,
			RemainingMinor: cur.SettledMinor() - cur.RefundedMinor, Status: cur.Status, AuditSeq: e.Seq}
		if err := s.changed(txn, cur, StepRefunded, p.RequestID); err != nil {
			return err
		}
		return putIntent(txn, cur)
	})
	if err != nil {
		return nil, fmt.Errorf("pay: recording refund %s: %w", p.ID, err)
	}
	if definiteRefusal {
		return nil, fmt.Errorf("%w: the rail refused: %v", ErrRefundRefused, callErr)
	}
	if out == nil {
		return nil, fmt.Errorf("%w: refund %s was finished by another request", ErrRefundRefused, p.ID)
	}
	return out, nil
}

// reconcileRefunds retries every refund left pending by a crash or an
// unknown rail answer; the rail is idempotent on the refund id.
func (s *Service) reconcileRefunds(ctx context.Context) (done, pending int, err error) {
	var idsPending []string
	err = s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyRefunding), store.PrefixEnd([]byte(keyRefunding)), false)
		for it.Next() {
			idsPending = append(idsPending, string(it.Key()[len(keyRefunding):]))
		}
		return it.Close()
	})
	if err != nil {
		return 0, 0, err
	}
	for _, id := range idsPending {
		var in *Intent
		if err := s.st.View(ctx, func(r store.Reader) error { var e error; in, e = getIntent(r, id); return e }); err != nil {
			return done, pending, err
		}
		if in.PendingRefund == nil {
			continue
		}
		if _, err := s.refundOnRail(ctx, in, *in.PendingRefund); err != nil && errors.Is(err, ErrRailUnavailable) {
			pending++
			continue
		}
		done++
	}
	return done, pending, nil
}

// intentBusyError is ErrInFlight (409 idempotency.in_flight, retry as is)
// for a request that names an intent rather than an idempotency key: it
// says what is busy instead of speaking of a key the caller never sent.
type intentBusyError struct{ id string }

func (e intentBusyError) Error() string {
	return "pay: intent " + e.id + " is being settled by another request; send the same request again in a moment"
}

func (e intentBusyError) Unwrap() error { return ErrInFlight }
