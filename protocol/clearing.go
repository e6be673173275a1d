package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace clearing: the PENDING band between an obligation's creation
// and its settlement. An obligation clears when evidence of its floor
// class (or one above it in the order) exists: the clearing captures the
// whole reserved amount through the two-phase settlement, exactly once
// (its capture key is fixed, so concurrent attempts — an agent's and the
// one a new piece of evidence triggers — are one capture). Below the floor
// the answer is 202 with the problem clearing.pending naming the awaited
// class and the classes achieved. After the deadline nothing clears: the
// scheduler's hold expiry refuses the obligation and releases its
// reservation (protocol.obligation.expire).

// clearingCaptureKey is the capture idempotency key of every clearing.
const clearingCaptureKey = "clearing"

// ClearingStatus is an obligation's status seen from clearing: pending
// or awaiting_evidence while it waits for (or has) admissible evidence,
// clearing while the capture is with the rail, cleared once settled, and
// otherwise the obligation's own status, which says why it cannot clear.
type ClearingStatus string

// Clearing statuses.
const (
	ClearingPending         ClearingStatus = "pending" // below the floor, or refused for now
	ClearingAwaiting        ClearingStatus = "awaiting_evidence"
	ClearingInProgress      ClearingStatus = "clearing" // the capture is with the rail
	ClearingCleared         ClearingStatus = "cleared"
	ClearingPendingApproval ClearingStatus = "pending_approval"
	ClearingAuthorizing     ClearingStatus = "authorizing"
	ClearingCancelled       ClearingStatus = "cancelled"
	ClearingExpired         ClearingStatus = "expired"
	ClearingDenied          ClearingStatus = "denied"
	ClearingFailed          ClearingStatus = "failed"
	ClearingDeclined        ClearingStatus = "declined"
)

// clearingOfObligation is the clearing status an obligation's status
// gives before its evidence and deadline are looked at: a held obligation
// is pending until admissible evidence moves it to awaiting_evidence, and
// its deadline to expired (clearingOf).
var clearingOfObligation = map[ObligationStatus]ClearingStatus{
	ObligationPendingApproval: ClearingPendingApproval, ObligationAuthorizing: ClearingAuthorizing,
	ObligationAwaiting: ClearingPending, ObligationClearing: ClearingInProgress, ObligationSettled: ClearingCleared,
	ObligationCancelled: ClearingCancelled, ObligationExpired: ClearingExpired, ObligationDenied: ClearingDenied,
	ObligationFailed: ClearingFailed, ObligationDeclined: ClearingDeclined,
}

// Clearing is an obligation's clearing state.
type Clearing struct {
	ObligationID string `json:"obligationId"`
	// Status is pending (below the floor; 202 from clearing.attempt),
	// cleared (settled: receipt), clearing (the capture is with the
	// rail), or the obligation's own status when it cannot clear
	// (pending_approval, authorizing, cancelled, expired, denied, failed,
	// declined).
	Status        ClearingStatus  `json:"status"`
	EvidenceFloor EvidenceClass   `json:"evidenceFloor"`
	Achieved      []EvidenceClass `json:"achieved" doc:"The strongest classes of the evidence so far (wit and rec may both appear: neither is above the other)."`
	Admissible    bool            `json:"admissible" doc:"Evidence meeting the floor exists."`
	EvidenceID    string          `json:"evidenceId,omitempty" doc:"The evidence the obligation cleared on."`
	Deadline      time.Time       `json:"deadline"`
	Receipt       *pay.Receipt    `json:"receipt,omitempty"`
	Problem       *PendingProblem `json:"problem,omitempty" doc:"Why it has not cleared, while pending."`
}

// IsAccepted reports an obligation still pending (202).
func (c *Clearing) IsAccepted() bool { return c.Status == ClearingPending }

// PendingProblem is the problem document of a pending clearing, carried
// in the 202 answer: RFC 9457 members plus the awaited class and the
// classes achieved. (A problem is an error response by the registry's
// rule; a pending clearing is not an error, so it rides in the body.)
type PendingProblem struct {
	Type     string          `json:"type"`
	Title    string          `json:"title"`
	Status   int             `json:"status"`
	Code     string          `json:"code"`
	Detail   string          `json:"detail"`
	Action   contract.Action `json:"action"`
	Awaited  EvidenceClass   `json:"awaited"`
	Achieved []EvidenceClass `json:"achieved"`
}

// ClearingState is clearing.status's answer: a Clearing, always 200 (a
// read is never "accepted"), the pending problem in the body.
type ClearingState Clearing

// ClearingStatus reports an obligation's clearing state, changing nothing.
func (s *Service) ClearingStatus(ctx context.Context, call Call, req *ObligationRef) (*ClearingState, error) {
	in, err := s.obligationIntent(ctx, call, req.ObligationID)
	if err != nil {
		return nil, err
	}
	var c *Clearing
	err = s.st.View(ctx, func(r store.Reader) error {
		c, err = s.clearingOf(r, req.ObligationID, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return (*ClearingState)(c), nil
}

// ClearingAttempt clears an obligation whose evidence meets its floor:
// 200 cleared with the receipt, 202 clearing.pending below the floor,
// 409 after the deadline or once cancelled.
func (s *Service) ClearingAttempt(ctx context.Context, call Call, req *ObligationRef) (*Clearing, error) {
	return s.clear(ctx, call, req.ObligationID, false)
}

func (s *Service) clearingOf(r store.Reader, oblID string, in *pay.Intent) (*Clearing, error) {
	o := obligationOf(in, nil)
	got, err := achievedClasses(r, oblID)
	if err != nil {
		return nil, err
	}
	c := &Clearing{ObligationID: oblID, Status: clearingOfObligation[o.Status], EvidenceFloor: o.EvidenceFloor, Achieved: maximal(got),
		Deadline: o.Deadline, Receipt: in.Receipt}
	if id, err := admissible(r, oblID, o.EvidenceFloor); err != nil {
		return nil, err
	} else if id != "" {
		c.Admissible = true
	}
	if b, err := r.Get(clearedKey(oblID)); err == nil {
		c.EvidenceID = string(b)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if c.Status == ClearingPending {
		if c.Admissible {
			if err := clearingMachine.move(&c.Status, stepEvidence, ClearingAwaiting); err != nil {
				return nil, err
			}
		}
		if errors.Is(obligationOpen(in, s.clock()), errDeadlinePassed) {
			// Not swept yet, but it can never clear.
			if err := clearingMachine.move(&c.Status, stepDeadline, ClearingExpired); err != nil {
				return nil, err
			}
		} else if c.Status == ClearingPending {
			c.Problem = s.pendingProblem(c.EvidenceFloor, c.Achieved)
		}
	}
	return c, nil
}

func (s *Service) pendingProblem(floor EvidenceClass, achieved []EvidenceClass) *PendingProblem {
	detail := fmt.Sprintf("awaiting evidence of class %s or above; none submitted yet", floor)
	if len(achieved) > 0 {
		detail = fmt.Sprintf("awaiting evidence of class %s or above; achieved %v", floor, achieved)
	}
	return &PendingProblem{Type: s.baseURL + "/problems/" + CodeClearingPending, Title: "Clearing pending", Status: 202,
		Code: CodeClearingPending, Detail: detail, Action: contract.ActionStop, Awaited: floor, Achieved: achieved}
}

func clearedKey(oblID string) []byte { return []byte("protocol/obligation-cleared/" + oblID) }

// clear attempts an obligation's clearing. auto is the attempt a new
// piece of evidence triggers: its refusals are reported in the Clearing,
// not as errors, since the evidence itself was stored.
func (s *Service) clear(ctx context.Context, call Call, oblID string, auto bool) (*Clearing, error) {
	in, err := s.obligationIntent(ctx, call, oblID)
	if err != nil {
		return nil, err
	}
	var c *Clearing
	if err := s.st.View(ctx, func(r store.Reader) error {
		c, err = s.clearingOf(r, oblID, in)
		return err
	}); err != nil {
		return nil, err
	}
	switch {
	case c.Status == ClearingCleared:
		return c, nil
	case c.Status == ClearingExpired:
		return s.clearRefused(c, errDeadlinePassed, auto)
	case c.Status == ClearingPending:
		return c, nil
	case c.Status == ClearingInProgress && c.Admissible:
		// A capture of unknown outcome: the same key resumes it.
	case c.Status == ClearingAwaiting:
		if err := obligationOpen(in, s.clock()); err != nil {
			return s.clearRefused(c, err, auto)
		}
	default:
		return s.clearRefused(c, obligationOpen(in, s.clock()), auto)
	}
	agent := pay.Caller{KeyID: in.AgentKeyID}
	res, err := s.books.Capture(ctx, agent, pay.CaptureRequest{IntentID: in.ID, Minor: in.Amount.Minor, IdempotencyKey: clearingCaptureKey}, call.RequestID,
		func(txn store.Txn, cur *pay.Intent) error {
			o := obligationOf(cur, nil)
			id, err := admissible(txn, oblID, o.EvidenceFloor)
			if err != nil {
				return err
			}
			if id == "" {
				return fmt.Errorf("protocol: clearing %s: the admissible evidence vanished", oblID)
			}
			if err := txn.Set(clearedKey(oblID), []byte(id)); err != nil {
				return err
			}
			got, err := achievedClasses(txn, oblID)
			if err != nil {
				return err
			}
			_, err = s.record(txn, call, "protocol.clearing.attempt", cur.ID, map[string]any{
				"obligationId": oblID, "evidenceId": id, "evidenceFloor": o.EvidenceFloor, "achieved": maximal(got),
				"status": ClearingCleared, "amount": cur.Amount,
			})
			return err
		})
	if err != nil {
		return s.clearRefused(c, obligationErr(err), auto)
	}
	if res.Outcome != pay.OutcomeSettled {
		if auto {
			if err := clearingMachine.move(&c.Status, stepClear, ClearingFailed); err != nil {
				return nil, err
			}
			return c, nil
		}
		return nil, &Refused{Result: res}
	}
	in, err = s.pay.Intent(ctx, agent, in.ID)
	if err != nil {
		return nil, err
	}
	before := c.Status
	err = s.st.View(ctx, func(r store.Reader) error {
		c, err = s.clearingOf(r, oblID, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := clearingMachine.move(&before, stepClear, c.Status); err != nil {
		return nil, err
	}
	return c, nil
}

// clearRefused reports a clearing that cannot happen: as an error for an
// explicit attempt, in the answer for an automatic one.
func (s *Service) clearRefused(c *Clearing, err error, auto bool) (*Clearing, error) {
	if !auto {
		return nil, err
	}
	if errors.Is(err, errDeadlinePassed) {
		if c.Status != ClearingExpired {
			if merr := clearingMachine.move(&c.Status, stepDeadline, ClearingExpired); merr != nil {
				return nil, merr
			}
		}
		c.Problem = nil
		return c, nil
	}
	if code, ok := errCode(err); ok && c.Status == ClearingAwaiting {
		// Admissible but refused now (the kill switch, a revocation):
		// still pending; a later clearing.attempt retries.
		if merr := clearingMachine.move(&c.Status, stepRefuse, ClearingPending); merr != nil {
			return nil, merr
		}
		c.Problem = &PendingProblem{Type: s.baseURL + "/problems/" + code, Title: "Clearing refused for now", Status: 202, Code: code,
			Detail: err.Error(), Action: contract.ActionStop, Awaited: c.EvidenceFloor, Achieved: c.Achieved}
	}
	return c, nil
}

func errCode(err error) (string, bool) {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code(), true
	}
	return "", false
}
