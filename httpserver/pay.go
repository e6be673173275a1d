package httpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// Payments is the money path the payment routes call; *pay.Service
// satisfies it.
type Payments interface {
	Pay(ctx context.Context, c pay.Caller, body []byte, headerKey, requestID string) (*pay.Result, error)
	Intent(ctx context.Context, c pay.Caller, id string) (*pay.Intent, error)
	IntentEvents(ctx context.Context, c pay.Caller, id, cursor string, limit int) (audit.Page, error)
	// OperatorIntent and OperatorIntentEvents read any intent: they serve
	// the requests an operator's signature opened.
	OperatorIntent(ctx context.Context, id string) (*pay.Intent, error)
	OperatorIntentEvents(ctx context.Context, id, cursor string, limit int) (audit.Page, error)
}

// HeaderReplayed marks a response answered from the stored outcome of an
// earlier request with the same idempotency key.
const HeaderReplayed = "Idempotent-Replayed"

var errNoPayments = errors.New("httpserver: this server has no payment service configured")

// caller turns the request's principal into the pay package's caller. In
// sandbox mode without an authenticator there is no principal, and no
// agent may pay: the reading routes may be open, money never is.
func caller(ctx context.Context) (pay.Caller, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return pay.Caller{}, auth.ErrMissing
	}
	cred := gate.CredentialAPIKey
	if p.DPoP {
		cred = gate.CredentialDPoP
	}
	c := pay.Caller{KeyID: p.KeyID, Agents: p.Agents, Credential: cred}
	if st := stateFrom(ctx); st != nil {
		c.Tags = st.tags
	}
	return c, nil
}

// payCreate is POST /pay. It hands the raw body to the service, which
// decodes it strictly itself, and renders the outcome.
func (s *server) payCreate(w http.ResponseWriter, r *http.Request, p *pay.PayParams) error {
	if s.payments == nil {
		return errNoPayments
	}
	c, err := caller(r.Context())
	if err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("httpserver: read body: %w", err)
	}
	res, err := s.payments.Pay(r.Context(), c, body, p.IdempotencyKey, RequestID(r.Context()))
	if err != nil {
		return err
	}
	return s.writePayResult(w, r, res)
}

// writePayResult renders an outcome. A replay renders the stored outcome
// with the first request's id, so its body is byte-identical to the first
// response's.
func (s *server) writePayResult(w http.ResponseWriter, r *http.Request, res *pay.Result) error {
	if res.Replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	switch res.Outcome {
	case pay.OutcomeSettled:
		return s.writeJSON(w, http.StatusOK, res.Receipt)
	case pay.OutcomeHeld:
		return s.writeJSON(w, http.StatusAccepted, res.Held)
	case pay.OutcomeAuthorized:
		// An approved hold: the reservation, not a Receipt (nothing moved).
		return s.writeJSON(w, http.StatusOK, res.Authorized)
	case pay.OutcomeDenied:
		d := res.Denial
		codes := make([]string, len(d.Reasons))
		for i, rs := range d.Reasons {
			codes[i] = rs.Code
		}
		p := s.newProblem(r, pay.CodeDenied, "the gate denied the payment: "+strings.Join(codes, ", "))
		p.RequestID = res.RequestID
		p.Extensions = map[string]any{"intentId": d.IntentID, "mandateId": d.MandateID, "reasons": d.Reasons, "auditSeq": d.AuditSeq}
		markOutcome(r, p.Code)
		s.writeProblem(w, r, p, nil)
		return nil
	case pay.OutcomeFailed:
		f := res.Failure
		p := s.newProblem(r, pay.CodeDeclined, "the rail declined the payment: "+f.Message)
		p.RequestID = res.RequestID
		p.Extensions = map[string]any{"intentId": f.IntentID, "rail": f.Rail, "declineCode": f.DeclineCode, "auditSeq": f.AuditSeq}
		markOutcome(r, p.Code)
		s.writeProblem(w, r, p, nil)
		return nil
	}
	return fmt.Errorf("httpserver: unknown payment outcome %q", res.Outcome)
}

// intentGet serves intents.get: an agent key reads its own intents, an
// operator (whose signature opened the request) any intent.
func (s *server) intentGet(ctx context.Context, p *pay.IntentParams, _ *noBody) (pay.Intent, error) {
	if s.payments == nil {
		return pay.Intent{}, errNoPayments
	}
	var (
		in  *pay.Intent
		err error
	)
	if _, ok := OperatorFrom(ctx); ok {
		in, err = s.payments.OperatorIntent(ctx, p.ID)
	} else {
		var c pay.Caller
		if c, err = caller(ctx); err != nil {
			return pay.Intent{}, err
		}
		in, err = s.payments.Intent(ctx, c, p.ID)
	}
	if err != nil {
		return pay.Intent{}, err
	}
	return *in, nil
}

// intentEvents serves intents.events, with intentGet's rule of who reads
// which intent.
func (s *server) intentEvents(ctx context.Context, p *pay.IntentEventsParams, _ *noBody) (audit.Page, error) {
	if s.payments == nil {
		return audit.Page{}, errNoPayments
	}
	var (
		page audit.Page
		err  error
	)
	if _, ok := OperatorFrom(ctx); ok {
		page, err = s.payments.OperatorIntentEvents(ctx, p.ID, p.Cursor, p.Limit)
	} else {
		var c pay.Caller
		if c, err = caller(ctx); err != nil {
			return audit.Page{}, err
		}
		page, err = s.payments.IntentEvents(ctx, c, p.ID, p.Cursor, p.Limit)
	}
	if page.Data == nil {
		page.Data = []audit.Entry{}
	}
	return page, err
}

// payProblemDetail keeps library internals out of the 403 detail of an
// envelope refusal: the stable reason is for the client, the cause is for
// the log.
func payProblemDetail(err error) (classified, bool) {
	// Only when the pay error is the first coded error of the chain: a
	// domain error that wraps one (memory's mandate refusal wraps the
	// mandate verifier's) answers with its own code.
	var coded interface{ Code() string }
	if !errors.As(err, &coded) {
		return classified{}, false
	}
	switch e := coded.(type) {
	case *pay.UnauthorizedError:
		return classified{code: pay.CodeUnauthorized,
			detail: "the envelope does not authorise this instruction: " + string(e.Reason)}, true
	case *pay.MalformedError:
		return classified{code: pay.CodeMalformed, detail: "the payment instruction is malformed; see errors",
			fields: e.Fields}, true
	}
	return classified{}, false
}

// bodyReader re-arms a request body the pipeline has already read, for raw
// endpoints that hand the exact bytes to the library.
func bodyReader(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// markOutcome notes the problem code an outcome was rendered as, for usage
// counting.
func markOutcome(r *http.Request, code string) {
	if st := stateFrom(r.Context()); st != nil {
		st.code = code
	}
}
