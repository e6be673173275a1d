package httpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402/fetch"
)

// X402 fetches resources that ask for x402 payment; *fetch.Service
// satisfies it.
type X402 interface {
	Fetch(ctx context.Context, c pay.Caller, r fetch.Request, headerKey, requestID string) (*fetch.Result, error)
}

var errNoX402 = errors.New("httpserver: this server has no x402 fetch configured")

// x402Fetch is POST /x402/fetch: the resource's answer (paid or relayed)
// is the Fetched document; every other outcome is rendered exactly as
// /pay renders it.
func (s *server) x402Fetch(w http.ResponseWriter, r *http.Request, p *pay.PayParams) error {
	if s.x402 == nil {
		return errNoX402
	}
	c, err := caller(r.Context())
	if err != nil {
		return err
	}
	var req fetch.Request
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	res, err := s.x402.Fetch(r.Context(), c, req, p.IdempotencyKey, RequestID(r.Context()))
	if err != nil {
		return err
	}
	if res.Fetched != nil {
		if res.Result != nil && res.Replayed {
			w.Header().Set(HeaderReplayed, "true")
		}
		return s.writeJSON(w, http.StatusOK, res.Fetched)
	}
	return s.writePayResult(w, r, res.Result)
}
