package protocol

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
)

// Namespace oversight: what the humans in charge have set, as the agent
// may see it: the kill switch and the breaker, the policy in force and
// its hash (the digest /disclose publishes and gate.policy entries
// record), and the agent's own held intents.

// OversightStatus is the answer of oversight.status.
type OversightStatus struct {
	KillSwitchEngaged  bool      `json:"killSwitchEngaged"`
	CircuitBreakerOpen bool      `json:"circuitBreakerOpen"`
	BreakerReason      string    `json:"breakerReason,omitempty"`
	ChangedAt          time.Time `json:"changedAt,omitzero"`
	// PendingApprovals counts the caller's intents waiting for a person.
	PendingApprovals int `json:"pendingApprovals"`
}

// Empty is the body of a method that takes no arguments.
type Empty struct{}

// OversightStatusGet returns the controls' live state.
func (s *Service) OversightStatusGet(ctx context.Context, call Call, _ *Empty) (*OversightStatus, error) {
	ctl, err := s.pay.Control(ctx)
	if err != nil {
		return nil, err
	}
	out := &OversightStatus{KillSwitchEngaged: ctl.KillSwitchEngaged, CircuitBreakerOpen: ctl.CircuitBreakerOpen,
		BreakerReason: ctl.BreakerReason, ChangedAt: ctl.ChangedAt}
	err = s.pay.IntentsOf(ctx, call.Agent.KeyID, time.Time{}, time.Time{}, func(in *pay.Intent) bool {
		if in.Status == pay.StatusPendingApproval {
			out.PendingApprovals++
		}
		return true
	})
	return out, err
}

// OversightPolicy is the answer of oversight.policy.
type OversightPolicy struct {
	Policy pay.Policy `json:"policy"`
	// PolicyHash is the digest of the disclosed constitution the policy is
	// part of: the same value GET /disclose publishes.
	PolicyHash string `json:"policyHash"`
}

// OversightPolicyGet returns the gate policy in force and its hash.
func (s *Service) OversightPolicyGet(ctx context.Context, _ Call, _ *Empty) (*OversightPolicy, error) {
	out := &OversightPolicy{Policy: s.pay.Policy()}
	if s.policy != nil {
		h, err := s.policy(ctx)
		if err != nil {
			return nil, fmt.Errorf("protocol: policy digest: %w", err)
		}
		out.PolicyHash = h
	}
	return out, nil
}

// OversightQueueRequest is the body of oversight.queue.
type OversightQueueRequest struct {
	Cursor string `json:"cursor,omitempty" validate:"max=64" doc:"Opaque: the nextCursor of the previous page."`
	Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// QueuedIntent is one of the caller's intents waiting for approval.
type QueuedIntent struct {
	IntentID          string     `json:"intentId"`
	Route             pay.Route  `json:"route"`
	Payee             string     `json:"payee"`
	Amount            pay.Amount `json:"amount"`
	MandateID         string     `json:"mandateId"`
	ApprovalsRequired int        `json:"approvalsRequired"`
	ApprovalsReceived int        `json:"approvalsReceived"`
	ExpiresAt         time.Time  `json:"expiresAt"`
	CreatedAt         time.Time  `json:"createdAt"`
}

// OversightQueue is a page of the caller's held intents.
type OversightQueue struct {
	Data       []QueuedIntent `json:"data"`
	HasMore    bool           `json:"hasMore"`
	NextCursor *string        `json:"nextCursor"`
}

// OversightQueueGet pages the caller's intents waiting for approval, in
// the order they were held: pay's held list, in commit order, so that an
// intent held after a page was read is on a later page, whatever its id
// or creation time (several servers on one database mint them before
// they commit).
func (s *Service) OversightQueueGet(ctx context.Context, call Call, req *OversightQueueRequest) (*OversightQueue, error) {
	limit := req.Limit
	if limit == 0 {
		limit = defaultLimit
	}
	held, next, err := s.pay.HeldOf(ctx, call.Agent.KeyID, req.Cursor, limit)
	if errors.Is(err, audit.ErrBadCursor) {
		return nil, errBadCursor
	}
	if err != nil {
		return nil, err
	}
	out := &OversightQueue{Data: make([]QueuedIntent, 0, len(held)), HasMore: next != nil, NextCursor: next}
	for _, in := range held {
		out.Data = append(out.Data, QueuedIntent{IntentID: in.ID, Route: in.Route, Payee: in.Payee, Amount: in.Amount,
			MandateID: in.MandateID, ApprovalsRequired: in.Approval.Required, ApprovalsReceived: len(in.Approval.Received),
			ExpiresAt: in.Approval.ExpiresAt, CreatedAt: in.CreatedAt})
	}
	return out, nil
}
