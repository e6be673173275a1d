package httpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
)

// Operations are the operator actions on the money path; *pay.Service
// satisfies it.
type Operations interface {
	Approve(ctx context.Context, req pay.ApproveRequest, call pay.OperatorCall) (*pay.Result, error)
	Decline(ctx context.Context, req pay.DeclineRequest, call pay.OperatorCall) (*pay.Declined, error)
	Refund(ctx context.Context, req pay.RefundRequest, call pay.OperatorCall) (*pay.RefundResult, error)
	SetKillSwitch(ctx context.Context, engaged bool, call pay.OperatorCall) (pay.Control, error)
	ResetBreaker(ctx context.Context, call pay.OperatorCall) (pay.Control, error)
	Held(ctx context.Context, cursor string, limit int) (pay.HeldPage, error)
	Settling(ctx context.Context, cursor string, limit int) (pay.SettlingPage, error)
	RevokeMandate(ctx context.Context, mandateID string, call pay.OperatorCall) (pay.Revocation, error)
}

// AgentKeys manages agent credentials; *auth.Keys satisfies it.
type AgentKeys interface {
	Create(ctx context.Context, req auth.CreateRequest, actor audit.Actor, requestID string) (auth.Issued, error)
	List(ctx context.Context, cursor string, limit int) (auth.KeyPage, error)
	Revoke(ctx context.Context, id string, actor audit.Actor, requestID, rationale string) (auth.Key, error)
}

var errNoOperations = errors.New("httpserver: this server has no operator actions configured")

// operatorCall builds the record's view of an operator request after
// checking its rationale, before anything takes effect.
func operatorCall(ctx context.Context, rationale string) (pay.OperatorCall, error) {
	if err := operator.CheckRationale(rationale); err != nil {
		return pay.OperatorCall{}, err
	}
	o, ok := OperatorFrom(ctx)
	if !ok {
		return pay.OperatorCall{}, errNoOperatorKeys
	}
	return pay.OperatorCall{Operator: o.KeyID, RequestID: RequestID(ctx), Rationale: rationale}, nil
}

func (s *server) opApprove(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.operations == nil {
		return errNoOperations
	}
	var req pay.ApproveRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	res, err := s.operations.Approve(r.Context(), req, call)
	if err != nil {
		return err
	}
	return s.writePayResult(w, r, res)
}

func (s *server) opDecline(ctx context.Context, _ *noParams, req *pay.DeclineRequest) (pay.Declined, error) {
	if s.operations == nil {
		return pay.Declined{}, errNoOperations
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return pay.Declined{}, err
	}
	res, err := s.operations.Decline(ctx, *req, call)
	if err != nil {
		return pay.Declined{}, err
	}
	return *res, nil
}

func (s *server) opRefund(ctx context.Context, _ *noParams, req *pay.RefundRequest) (pay.RefundResult, error) {
	if s.operations == nil {
		return pay.RefundResult{}, errNoOperations
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return pay.RefundResult{}, err
	}
	res, err := s.operations.Refund(ctx, *req, call)
	if err != nil {
		return pay.RefundResult{}, err
	}
	return *res, nil
}

func (s *server) opKillSwitch(ctx context.Context, _ *noParams, req *pay.KillSwitchRequest) (pay.Control, error) {
	if s.operations == nil {
		return pay.Control{}, errNoOperations
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return pay.Control{}, err
	}
	return s.operations.SetKillSwitch(ctx, *req.Engaged, call)
}

func (s *server) opBreakerReset(ctx context.Context, _ *noParams, req *contract.RationaleRequest) (pay.Control, error) {
	if s.operations == nil {
		return pay.Control{}, errNoOperations
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return pay.Control{}, err
	}
	return s.operations.ResetBreaker(ctx, call)
}

func (s *server) opApprovals(ctx context.Context, p *contract.PageParams, _ *noBody) (pay.HeldPage, error) {
	if s.operations == nil {
		return pay.HeldPage{}, errNoOperations
	}
	return s.operations.Held(ctx, p.Cursor, p.Limit)
}

func (s *server) opAgentsCreate(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.agentKeys == nil {
		return errNoOperations
	}
	var req auth.AgentCreateRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	iss, err := s.agentKeys.Create(r.Context(), auth.CreateRequest{Name: req.Name, AgentIDs: req.AgentIDs, JKT: req.JKT},
		audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID)
	if err != nil {
		return err
	}
	// The credential is shown this once: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	return s.writeJSON(w, http.StatusCreated, iss)
}

func (s *server) opAgentsList(ctx context.Context, p *contract.PageParams, _ *noBody) (auth.KeyPage, error) {
	if s.agentKeys == nil {
		return auth.KeyPage{}, errNoOperations
	}
	return s.agentKeys.List(ctx, p.Cursor, p.Limit)
}

func (s *server) opAgentsRevoke(ctx context.Context, p *auth.AgentRevokeParams, _ *noBody) (auth.Key, error) {
	if s.agentKeys == nil {
		return auth.Key{}, errNoOperations
	}
	call, err := operatorCall(ctx, p.Rationale)
	if err != nil {
		return auth.Key{}, err
	}
	return s.agentKeys.Revoke(ctx, p.ID, audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID, call.Rationale)
}

// OperatorAuth adapts an operator.Verifier to the server's
// OperatorVerifier.
type OperatorAuth struct {
	Verifier *operator.Verifier
}

// VerifyOperator implements OperatorVerifier.
func (o OperatorAuth) VerifyOperator(r *http.Request, operationID string, body []byte) (Operator, error) {
	id, err := o.Verifier.Verify(r, operationID, body)
	if err != nil {
		return Operator{}, err
	}
	return Operator{KeyID: id.KeyID}, nil
}

// decodeBody decodes and validates the (re-armed) body of a raw endpoint
// exactly as the pipeline does for JSON endpoints.
func (s *server) decodeBody(r *http.Request, dst any) error {
	return s.model.DecodeJSON(r.Body, dst)
}

func (s *server) opSettling(ctx context.Context, p *contract.PageParams, _ *noBody) (pay.SettlingPage, error) {
	if s.operations == nil {
		return pay.SettlingPage{}, errNoOperations
	}
	return s.operations.Settling(ctx, p.Cursor, p.Limit)
}
