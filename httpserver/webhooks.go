package httpserver

import (
	"context"
	"net/http"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/webhook"
)

// Webhooks manages webhook endpoints; *webhook.Endpoints satisfies it.
type Webhooks interface {
	Create(ctx context.Context, req webhook.CreateRequest, actor audit.Actor, requestID, rationale string) (webhook.Created, error)
	Get(ctx context.Context, id string) (webhook.Endpoint, error)
	List(ctx context.Context, cursor string, limit int) (webhook.EndpointPage, error)
	Update(ctx context.Context, id string, req webhook.UpdateRequest, actor audit.Actor, requestID, rationale string) (webhook.Updated, error)
	Delete(ctx context.Context, id string, actor audit.Actor, requestID, rationale string) error
}

// WebhookDeliveries lists and retries deliveries; *webhook.Dispatcher
// satisfies it.
type WebhookDeliveries interface {
	Deliveries(ctx context.Context, endpointID, cursor string, limit int) (webhook.DeliveryPage, error)
	Retry(ctx context.Context, endpointID, eventID string, actor audit.Actor, requestID, rationale string) (webhook.Delivery, error)
}

func (s *server) whCreate(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.webhooks == nil {
		return errNoOperations
	}
	var req webhook.WebhookCreateRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	c, err := s.webhooks.Create(r.Context(), req.CreateRequest, audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID, call.Rationale)
	if err != nil {
		return err
	}
	// The secret is shown this once: no cache may keep it.
	w.Header().Set("Cache-Control", "no-store")
	return s.writeJSON(w, http.StatusCreated, c)
}

func (s *server) whList(ctx context.Context, p *contract.PageParams, _ *noBody) (webhook.EndpointPage, error) {
	if s.webhooks == nil {
		return webhook.EndpointPage{}, errNoOperations
	}
	return s.webhooks.List(ctx, p.Cursor, p.Limit)
}

func (s *server) whGet(ctx context.Context, p *webhook.EndpointParams, _ *noBody) (webhook.Endpoint, error) {
	if s.webhooks == nil {
		return webhook.Endpoint{}, errNoOperations
	}
	return s.webhooks.Get(ctx, p.ID)
}

func (s *server) whUpdate(w http.ResponseWriter, r *http.Request, p *webhook.EndpointParams) error {
	if s.webhooks == nil {
		return errNoOperations
	}
	var req webhook.WebhookUpdateRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	u, err := s.webhooks.Update(r.Context(), p.ID, req.UpdateRequest, audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID, call.Rationale)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return s.writeJSON(w, http.StatusOK, u)
}

func (s *server) whDelete(w http.ResponseWriter, r *http.Request, p *webhook.EndpointDeleteParams) error {
	if s.webhooks == nil {
		return errNoOperations
	}
	call, err := operatorCall(r.Context(), p.Rationale)
	if err != nil {
		return err
	}
	if err := s.webhooks.Delete(r.Context(), p.ID, audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID, call.Rationale); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) whDeliveries(ctx context.Context, p *webhook.DeliveriesParams, _ *noBody) (webhook.DeliveryPage, error) {
	if s.deliveries == nil {
		return webhook.DeliveryPage{}, errNoOperations
	}
	return s.deliveries.Deliveries(ctx, p.ID, p.Cursor, p.Limit)
}

func (s *server) whRetry(ctx context.Context, p *webhook.DeliveryParams, req *contract.RationaleRequest) (webhook.Delivery, error) {
	if s.deliveries == nil {
		return webhook.Delivery{}, errNoOperations
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return webhook.Delivery{}, err
	}
	return s.deliveries.Retry(ctx, p.ID, p.EventID, audit.Actor{Kind: "operator", ID: call.Operator}, call.RequestID, call.Rationale)
}
