package protocol

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/pay"
)

// Namespace mandate: what an agent may spend, read back: status, the
// current period window with settled / reserved / remaining, the velocity
// count; and verify, a dry run of a token against a spend. revoke (★) is
// the operator's revocation, the same one /operator routes make.

// CodeMandateNotFound: no mandate of that id was honoured for this agent.
const CodeMandateNotFound = "mandate.not_found"

var errMandateNotFound = errcode.New(CodeMandateNotFound, "protocol: no such mandate for this credential")

// MandateView is a mandate with its live usage.
type MandateView struct {
	Mandate pay.KnownMandate `json:"mandate"`
	// Status is active, expired or revoked.
	Status    string     `json:"status"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	Period    struct {
		pay.PeriodUsage
		CapMinor       int64 `json:"capMinor"`
		RemainingMinor int64 `json:"remainingMinor"`
	} `json:"period"`
	Velocity *struct {
		Count         int64 `json:"count"`
		Limit         int64 `json:"limit"`
		WindowSeconds int64 `json:"windowSeconds"`
	} `json:"velocity,omitempty"`
}

// MandateRef names a mandate.
type MandateRef struct {
	MandateID string `json:"mandateId" validate:"required,max=128"`
}

// MandateGet returns a mandate the deployment has honoured for one of the
// caller's agents, with its live usage.
func (s *Service) MandateGet(ctx context.Context, call Call, req *MandateRef) (*MandateView, error) {
	km, err := s.pay.Mandate(ctx, req.MandateID)
	if err != nil {
		return nil, err
	}
	if km == nil || !slices.Contains(call.Agent.Agents, km.Agent) {
		return nil, errMandateNotFound
	}
	return s.mandateView(ctx, km)
}

func (s *Service) mandateView(ctx context.Context, km *pay.KnownMandate) (*MandateView, error) {
	u, err := s.pay.MandateUsage(ctx, *km)
	if err != nil {
		return nil, err
	}
	v := &MandateView{Mandate: *km, Status: "active"}
	rev, err := s.pay.RevocationStatus(ctx, "mandate", km.ID)
	if err != nil {
		return nil, err
	}
	switch {
	case rev != nil:
		t := rev.RevokedAt
		v.Status, v.RevokedAt = "revoked", &t
	case !s.now().Before(km.ExpiresAt):
		v.Status = "expired"
	}
	v.Period.PeriodUsage, v.Period.CapMinor = u, km.PerPeriodCapMinor
	v.Period.RemainingMinor = max(0, km.PerPeriodCapMinor-u.CountedMinor)
	if !km.Velocity.IsZero() {
		v.Velocity = &struct {
			Count         int64 `json:"count"`
			Limit         int64 `json:"limit"`
			WindowSeconds int64 `json:"windowSeconds"`
		}{u.VelocityCount, km.Velocity.Count, km.Velocity.Seconds}
	}
	return v, nil
}

// MandateListRequest is the body of mandate.list.
type MandateListRequest struct {
	Cursor string `json:"cursor,omitempty" validate:"max=128" doc:"Opaque: the nextCursor of the previous page."`
	Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// MandatePage is a page of mandates.
type MandatePage struct {
	Data       []MandateView `json:"data"`
	HasMore    bool          `json:"hasMore"`
	NextCursor *string       `json:"nextCursor"`
}

// MandateList lists the live mandates honoured for the caller's agents,
// in the order they were first honoured (see pay.KnownMandate.Seq), paged
// by seqlist's opaque cursor.
func (s *Service) MandateList(ctx context.Context, call Call, req *MandateListRequest) (*MandatePage, error) {
	after, err := seqlist.ParseCursor(req.Cursor)
	if err != nil {
		return nil, errBadCursor
	}
	all, err := s.pay.Mandates(ctx)
	if err != nil {
		return nil, err
	}
	// In the order the transactions that first honoured them committed
	// (pay.KnownMandate.Seq; those remembered before it, at 0, by id).
	pos := func(k *pay.KnownMandate) seqlist.Pos { return seqlist.Pos{Seq: k.Seq, ID: k.ID} }
	sort.Slice(all, func(i, j int) bool { return pos(&all[i]).Before(pos(&all[j])) })
	limit := req.Limit
	if limit == 0 {
		limit = defaultLimit
	}
	out := &MandatePage{Data: []MandateView{}}
	var last *pay.KnownMandate
	for i := range all {
		km := &all[i]
		if !after.Before(pos(km)) || !slices.Contains(call.Agent.Agents, km.Agent) {
			continue
		}
		if len(out.Data) == limit {
			out.HasMore = true
			c := pos(last).Cursor()
			out.NextCursor = &c
			break
		}
		last = km
		v, err := s.mandateView(ctx, km)
		if err != nil {
			return nil, err
		}
		out.Data = append(out.Data, *v)
	}
	return out, nil
}

// MandateVerifyRequest is the body of mandate.verify.
type MandateVerifyRequest struct {
	Mandate   string     `json:"mandate" validate:"required,max=16384,jwt"`
	Payee     string     `json:"payee" validate:"required,max=255,printascii"`
	Amount    pay.Amount `json:"amount"`
	Terms     pay.Terms  `json:"terms"`
	SessionID string     `json:"sessionId,omitempty" validate:"omitempty,max=64"`
	TermsID   string     `json:"termsId,omitempty" validate:"omitempty,max=64" doc:"Terms the spend would cite: checked as the gate checks them."`
}

// MandateVerification is the dry run's answer.
type MandateVerification struct {
	pay.Evaluation
	// Allowed is true when the gate would allow the spend now without a
	// person; false when it would deny, hold it for approval, or the
	// mandate cannot be used (refusal).
	Allowed bool `json:"allowed"`
}

// MandateVerify is a dry run: would this mandate allow this spend now, and
// why not. It records and reserves nothing.
func (s *Service) MandateVerify(ctx context.Context, call Call, req *MandateVerifyRequest) (*MandateVerification, error) {
	ev, err := s.pay.Evaluate(ctx, *call.Agent, req.Mandate, req.Payee, req.Amount, req.Terms, req.SessionID, req.TermsID)
	if err != nil {
		return nil, err
	}
	return &MandateVerification{Evaluation: *ev, Allowed: ev.Decision != nil && ev.Decision.Outcome == gate.Allow}, nil
}

// MandateRevokeRequest is the body of mandate.revoke (★).
type MandateRevokeRequest = pay.MandateRevokeRequest

// MandateRevoke revokes a mandate for good (records mandate.revoked).
func (s *Service) MandateRevoke(ctx context.Context, call Call, req *MandateRevokeRequest) (*pay.Revocation, error) {
	r, err := s.pay.RevokeMandate(ctx, req.MandateID, *call.Operator)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
