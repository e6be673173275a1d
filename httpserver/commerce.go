package httpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/pay"
)

// Commerce quotes and buys from merchants; *commerce.Service satisfies it.
type Commerce interface {
	Quote(ctx context.Context, c pay.Caller, q commerce.QuoteRequest, requestID string) (commerce.Quoted, error)
	Buy(ctx context.Context, c pay.Caller, p commerce.PurchaseRequest, headerKey, requestID string) (*commerce.BuyResult, error)
	RegisterMerchant(ctx context.Context, sp commerce.MerchantSpec, call pay.OperatorCall) (commerce.MerchantView, error)
	MerchantList(ctx context.Context) (commerce.MerchantPage, error)
}

var errNoCommerce = errors.New("httpserver: this server has no commerce configured")

func (s *server) quote(ctx context.Context, _ *noParams, q *commerce.QuoteRequest) (commerce.Quoted, error) {
	if s.commerce == nil {
		return commerce.Quoted{}, errNoCommerce
	}
	c, err := caller(ctx)
	if err != nil {
		return commerce.Quoted{}, err
	}
	return s.commerce.Quote(ctx, c, *q, RequestID(ctx))
}

// buy is POST /buy: a settled purchase answers its Order (with the
// Receipt); every other outcome is rendered exactly as /pay renders it.
func (s *server) buy(w http.ResponseWriter, r *http.Request, p *pay.PayParams) error {
	if s.commerce == nil {
		return errNoCommerce
	}
	c, err := caller(r.Context())
	if err != nil {
		return err
	}
	var req commerce.PurchaseRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	res, err := s.commerce.Buy(r.Context(), c, req, p.IdempotencyKey, RequestID(r.Context()))
	if err != nil {
		return err
	}
	if res.Outcome == pay.OutcomeSettled && res.Order != nil {
		if res.Replayed {
			w.Header().Set(HeaderReplayed, "true")
		}
		return s.writeJSON(w, http.StatusOK, res.Order)
	}
	return s.writePayResult(w, r, res.Result)
}

func (s *server) merchantCreate(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.commerce == nil {
		return errNoCommerce
	}
	var req commerce.MerchantRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	v, err := s.commerce.RegisterMerchant(r.Context(), req.MerchantSpec, call)
	if err != nil {
		return err
	}
	return s.writeJSON(w, http.StatusCreated, v)
}

func (s *server) merchantList(ctx context.Context, _ *noParams, _ *noBody) (commerce.MerchantPage, error) {
	if s.commerce == nil {
		return commerce.MerchantPage{}, errNoCommerce
	}
	return s.commerce.MerchantList(ctx)
}
