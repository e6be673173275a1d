package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/identity"
)

// Identity is this deployment's ADP identity: disclosure, handshake,
// verification, resolution and the operator's registry; *identity.Service
// satisfies it.
type Identity interface {
	Disclose(ctx context.Context, envelope string) ([]byte, error)
	Respond(ctx context.Context, ch identity.Challenge) (identity.ChallengeResponse, error)
	Challenge(ctx context.Context, verifierID string) (identity.Challenge, error)
	Verify(ctx context.Context, req identity.VerifyRequest, actor audit.Actor, requestID string) (identity.Verified, error)
	Resolve(ctx context.Context, ref string, opts identity.ResolveOptions, actor audit.Actor, requestID string) (identity.Counterparty, error)
	Register(ctx context.Context, reg identity.Registration, call identity.OperatorCall) (identity.Registration, error)
	Counterparties(ctx context.Context, cursor string, limit int) (identity.RegistrationPage, error)
	Revoke(ctx context.Context, req identity.RevokeRequest, call identity.OperatorCall) (identity.RevocationRecord, error)
	Rotate(ctx context.Context, call identity.OperatorCall) (identity.Rotation, error)
}

var errNoIdentity = errors.New("httpserver: this server has no identity configured")

// agentActor names the calling agent key in the record; in sandbox mode
// without credentials, the anonymous caller.
func agentActor(ctx context.Context) audit.Actor {
	if p, ok := PrincipalFrom(ctx); ok {
		return audit.Actor{Kind: "agent", ID: p.KeyID}
	}
	return audit.Actor{Kind: "agent", ID: "anonymous"}
}

// disclose serves POST /disclose and GET /.well-known/agent-disclosure: the
// cached signed disclosure, in the envelope the query or Accept asks for.
func (s *server) disclose(w http.ResponseWriter, r *http.Request, p *identity.DiscloseParams) error {
	if s.identity == nil {
		return errNoIdentity
	}
	form := identity.EnvelopeV1
	switch {
	case p.Envelope == "jws":
		form = identity.EnvelopeJWS
	case p.Envelope == "" && negotiate(r.Header.Get("Accept"), contract.MediaJSON, identity.MediaJWS) == identity.MediaJWS:
		form = identity.EnvelopeJWS
	}
	body, err := s.identity.Disclose(r.Context(), form)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Add("Vary", "Accept")
	h.Set("Cache-Control", "no-store") // each disclosure carries its own freshness window
	if form == identity.EnvelopeJWS {
		h.Set("Content-Type", identity.MediaJWS)
	} else {
		h.Set("Content-Type", contract.MediaJSON)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
	return nil
}

func (s *server) respond(ctx context.Context, _ *noParams, ch *identity.Challenge) (identity.ChallengeResponse, error) {
	if s.identity == nil {
		return identity.ChallengeResponse{}, errNoIdentity
	}
	return s.identity.Respond(ctx, *ch)
}

func (s *server) challenge(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.identity == nil {
		return errNoIdentity
	}
	var req identity.ChallengeRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	ch, err := s.identity.Challenge(r.Context(), req.VerifierID)
	if err != nil {
		return err
	}
	return s.writeJSON(w, http.StatusCreated, ch)
}

// verifyRoute is POST /verify. The body is read raw: the verifier must see
// the disclosure's bytes as sent, and a malformed one is a refusal (200
// with outcome refuse, recorded), never a request error.
func (s *server) verifyRoute(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.identity == nil {
		return errNoIdentity
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("httpserver: read body: %w", err)
	}
	req, err := identity.ParseVerifyRequest(body)
	if err != nil {
		return err
	}
	ctx := r.Context()
	v, err := s.identity.Verify(ctx, req, agentActor(ctx), RequestID(ctx))
	if err != nil {
		return err
	}
	return s.writeJSON(w, http.StatusOK, v)
}

func (s *server) resolve(ctx context.Context, _ *noParams, req *identity.ResolveRequest) (identity.Counterparty, error) {
	if s.identity == nil {
		return identity.Counterparty{}, errNoIdentity
	}
	return s.identity.Resolve(ctx, req.Ref, identity.ResolveOptions{Verify: req.Verify}, agentActor(ctx), RequestID(ctx))
}

func (s *server) counterpartyCreate(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.identity == nil {
		return errNoIdentity
	}
	var req identity.CounterpartyRequest
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	reg, err := s.identity.Register(r.Context(), req.Registration(), call)
	if err != nil {
		return err
	}
	return s.writeJSON(w, http.StatusCreated, reg)
}

func (s *server) counterpartyList(ctx context.Context, p *identity.CounterpartyListParams, _ *noBody) (identity.RegistrationPage, error) {
	if s.identity == nil {
		return identity.RegistrationPage{}, errNoIdentity
	}
	return s.identity.Counterparties(ctx, p.Cursor, p.Limit)
}

func (s *server) identityRevoke(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	if s.identity == nil {
		return errNoIdentity
	}
	var req identity.RevokeBody
	if err := s.decodeBody(r, &req); err != nil {
		return err
	}
	call, err := operatorCall(r.Context(), req.Rationale)
	if err != nil {
		return err
	}
	rv, err := s.identity.Revoke(r.Context(), req.RevokeRequest, call)
	if err != nil {
		return err
	}
	return s.writeJSON(w, http.StatusCreated, rv)
}

func (s *server) identityRotate(ctx context.Context, _ *noParams, req *identity.RotateRequest) (identity.Rotation, error) {
	if s.identity == nil {
		return identity.Rotation{}, errNoIdentity
	}
	call, err := operatorCall(ctx, req.Rationale)
	if err != nil {
		return identity.Rotation{}, err
	}
	return s.identity.Rotate(ctx, call)
}
