package httpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/countersign/countersign/memory"
)

// Memory is the bi-temporal memory store; *memory.Service satisfies it.
type Memory interface {
	Remember(ctx context.Context, c memory.Caller, q memory.RememberRequest, requestID string) (memory.Remembered, error)
	Recall(ctx context.Context, c memory.Caller, q memory.RecallRequest) (memory.RecallPage, error)
	Assemble(ctx context.Context, c memory.Caller, q memory.AssembleRequest) (memory.AssembledContext, error)
	Forget(ctx context.Context, q memory.ForgetRequest, call memory.OperatorCall) (memory.ErasureProof, error)
	Taint(ctx context.Context, q memory.TaintRequest, call memory.OperatorCall) (memory.Tainted, error)
	VerifierKey() string
}

var errNoMemory = errors.New("httpserver: this server has no memory store configured")

func memoryCaller(ctx context.Context) (memory.Caller, error) {
	c, err := caller(ctx)
	if err != nil {
		return memory.Caller{}, err
	}
	agents := c.Agents
	if agents == nil {
		agents = []string{} // an authenticated key that may act for no agent acts for none
	}
	return memory.Caller{KeyID: c.KeyID, Agents: agents}, nil
}

func (s *server) memRemember(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.memory == nil {
		return errNoMemory
	}
	c, err := memoryCaller(r.Context())
	if err != nil {
		return err
	}
	var req memory.RememberRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	res, err := s.memory.Remember(r.Context(), c, req, RequestID(r.Context()))
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Replayed {
		w.Header().Set(HeaderReplayed, "true")
		status = http.StatusOK
	}
	return s.writeJSON(w, status, res.Artifact)
}

func (s *server) memRecall(ctx context.Context, _ *noParams, q *memory.RecallRequest) (memory.RecallPage, error) {
	if s.memory == nil {
		return memory.RecallPage{}, errNoMemory
	}
	c, err := memoryCaller(ctx)
	if err != nil {
		return memory.RecallPage{}, err
	}
	return s.memory.Recall(ctx, c, *q)
}

func (s *server) memAssemble(ctx context.Context, _ *noParams, q *memory.AssembleRequest) (memory.AssembledContext, error) {
	if s.memory == nil {
		return memory.AssembledContext{}, errNoMemory
	}
	c, err := memoryCaller(ctx)
	if err != nil {
		return memory.AssembledContext{}, err
	}
	return s.memory.Assemble(ctx, c, *q)
}

// memVerify is POST /memory/verify: no credential; the artifact's bytes
// are checked as received.
func (s *server) memVerify(_ context.Context, _ *noParams, q *memory.VerifyRequest) (memory.Verification, error) {
	if s.memory == nil {
		return memory.Verification{}, errNoMemory
	}
	return memory.Verify(s.memory.VerifierKey(), q.Artifact), nil
}

func (s *server) memForget(ctx context.Context, _ *noParams, q *memory.ForgetRequest) (memory.ErasureProof, error) {
	if s.memory == nil {
		return memory.ErasureProof{}, errNoMemory
	}
	call, err := operatorCall(ctx, q.Rationale)
	if err != nil {
		return memory.ErasureProof{}, err
	}
	return s.memory.Forget(ctx, *q, call)
}

func (s *server) memTaint(ctx context.Context, _ *noParams, q *memory.TaintRequest) (memory.Tainted, error) {
	if s.memory == nil {
		return memory.Tainted{}, errNoMemory
	}
	call, err := operatorCall(ctx, q.Rationale)
	if err != nil {
		return memory.Tainted{}, err
	}
	return s.memory.Taint(ctx, *q, call)
}
