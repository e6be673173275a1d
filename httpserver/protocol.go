package httpserver

import (
	"context"
	"errors"
	"net/http"
	"reflect"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/protocol"
)

// Protocol is the generated method surface; *protocol.Service satisfies
// it.
type Protocol interface {
	Call(ctx context.Context, id string, call protocol.Call, req any) (any, error)
}

var errNoProtocol = errors.New("httpserver: this server has no protocol surface configured")

// protocolEndpoints binds every declared protocol method with one generic
// handler: decode the declared request type, build the call from the
// credential the contract names, invoke, answer. No method has HTTP code
// of its own.
func (s *server) protocolEndpoints(eps map[string]endpoint) {
	for _, m := range protocol.Methods() {
		eps[m.ID()] = endpoint{body: m.Request, raw: func(w http.ResponseWriter, r *http.Request, _ any) error {
			return s.protocolCall(w, r, m)
		}}
	}
}

func (s *server) protocolCall(w http.ResponseWriter, r *http.Request, m protocol.Method) error {
	if s.protocol == nil {
		return errNoProtocol
	}
	req := reflect.New(m.Request).Interface()
	if err := s.decodeBody(r, req); err != nil {
		return err
	}
	ctx := r.Context()
	var call protocol.Call
	if m.Credential == contract.CredentialOperator {
		ov, ok := req.(protocol.Overridden)
		if !ok {
			return errors.New("httpserver: override request without a rationale")
		}
		oc, err := operatorCall(ctx, ov.OverrideRationale())
		if err != nil {
			return err
		}
		call = protocol.OperatorCall(oc)
	} else {
		c, err := caller(ctx)
		if err != nil {
			return err
		}
		call = protocol.AgentCall(c, RequestID(ctx))
	}
	res, err := s.protocol.Call(ctx, m.ID(), call, req)
	var refused *protocol.Refused
	if errors.As(err, &refused) {
		return s.writePayResult(w, r, refused.Result)
	}
	if err != nil {
		return err
	}
	status := http.StatusOK
	if a, ok := res.(protocol.Acceptor); ok && a.IsAccepted() {
		status = http.StatusAccepted
	}
	if rp, ok := res.(protocol.Replayer); ok && rp.WasReplayed() {
		w.Header().Set(HeaderReplayed, "true")
	}
	return s.writeJSON(w, status, res)
}
