package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store"
)

// Optional methods a coded domain error may have to shape its problem.
type (
	// problemExtender adds members to the problem (intentId, reasons, ...).
	problemExtender interface{ ProblemExtensions() map[string]any }
	// retryAfterer overrides the registry's Retry-After for this occurrence.
	retryAfterer interface{ RetryAfter() time.Duration }
	// actioner overrides the registry's action for this occurrence (for
	// example continue-at-link for a cart that is not ready).
	actioner interface{ ProblemAction() string }
)

// classified is an error sorted into a problem code.
type classified struct {
	code   string
	detail string
	fields []contract.FieldError
}

// classify is the one place that maps errors to problem codes. Order
// matters: the most specific matches come first, and anything unknown is
// an internal error whose text never reaches the client.
func (s *server) classify(ctx context.Context, err error) classified {
	var (
		mbe   *http.MaxBytesError
		verr  *contract.ValidationError
		derr  *contract.DecodeError
		coded interface{ Code() string }
	)
	if c, ok := payProblemDetail(err); ok {
		return c
	}
	switch {
	case errors.As(err, &mbe):
		return classified{code: contract.CodeRequestTooLarge,
			detail: "the request body exceeds " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
	case errors.As(err, &verr):
		n := len(verr.Errors)
		detail := "1 field is invalid; see errors"
		if n != 1 {
			detail = strconv.Itoa(n) + " fields are invalid; see errors"
		}
		return classified{code: contract.CodeRequestValidation, detail: detail, fields: verr.Errors}
	case errors.As(err, &derr):
		return classified{code: derr.Code, detail: derr.Detail}
	case errors.Is(err, operator.ErrRationaleTooShort):
		// Its own code, which every operator route declares, and the field
		// and rule named as a validation problem names them. The rule is
		// operator.CheckRationale's, not a validate tag's: one rule (after
		// trimming, in characters) for every operator route, body or query.
		return classified{code: operator.CodeRationaleTooShort, detail: clientDetail(err.Error()),
			fields: []contract.FieldError{{Field: "rationale", Rule: "min", Message: fmt.Sprintf(
				"must have at least %d characters besides leading and trailing spaces", operator.MinRationaleLen)}}}
	case errors.Is(err, audit.ErrBadCursor):
		return classified{code: audit.CodeBadCursor,
			detail: "the cursor is malformed or was not issued by this record"}
	case errors.Is(err, audit.ErrNotFound):
		return classified{code: audit.CodeNotFound, detail: "the record has no entry with this sequence number"}
	case errors.Is(err, audit.ErrOutOfRange):
		return classified{code: audit.CodeOutOfRange,
			detail: "the requested sizes or sequence number lie outside the record"}
	case errors.Is(err, audit.ErrBadLimit):
		// The contract's own limits are checked first; this is a backstop
		// should the two ever differ.
		return classified{code: contract.CodeRequestValidation, detail: "1 field is invalid; see errors",
			fields: []contract.FieldError{{Field: "limit", Rule: "range", Message: "is outside the range the record serves"}}}
	case errors.Is(err, audit.ErrClosed):
		return classified{code: contract.CodeUnavailable, detail: "the record is closed; the server is shutting down"}
	case errors.Is(err, audit.ErrTampered):
		return classified{code: contract.CodeInternal} // logged at Error by writeError
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return classified{code: contract.CodeUnavailable, detail: "the request did not finish in time"}
	case errors.Is(err, store.ErrUnavailable):
		return classified{code: contract.CodeUnavailable,
			detail: "the server's storage could not commit right now (it is unreachable, restarting or busy); nothing was written"}
	case errors.Is(err, store.ErrFailed):
		// Before the coded errors: a domain error that wraps a failed
		// store is about the disk, not about the request.
		return classified{code: contract.CodeStoreUnavailable,
			detail: "the server's storage refused a write, which was not committed; the server takes no writes until it is restarted on a healthy disk"}
	case errors.As(err, &coded):
		p, ok := s.model.Problem(coded.Code())
		if !ok {
			return classified{code: contract.CodeInternal}
		}
		c := classified{code: p.Code}
		if p.Status < 500 {
			// A refusal of the client's input: its message is for the client.
			c.detail = clientDetail(err.Error())
		}
		return c
	}
	return classified{code: contract.CodeInternal}
}

// newProblem fills a problem of a registered code for request r.
func (s *server) newProblem(r *http.Request, code, detail string) contract.Problem {
	pt, ok := s.model.Problem(code)
	if !ok {
		pt, _ = s.model.Problem(contract.CodeInternal)
		detail = ""
	}
	p := contract.Problem{
		Type:      s.baseURL + "/problems/" + pt.Code,
		Title:     pt.Title,
		Status:    pt.Status,
		Detail:    detail,
		Instance:  r.URL.EscapedPath(),
		Code:      pt.Code,
		Action:    pt.Action,
		RequestID: RequestID(r.Context()),
	}
	if p.Action == contract.ActionRetryAsIs {
		p.RetryAfter = pt.RetryAfter
	}
	return p
}

// writeError answers err as a problem and logs it: rejected input at
// Debug, refusals the server cannot help (5xx with a registered cause) at
// Warn, its own faults at Error.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	c := s.classify(ctx, err)
	p := s.newProblem(r, c.code, c.detail)
	p.Errors = c.fields
	if p.Code == contract.CodeInternal {
		p.Detail = ""
	}
	var ext problemExtender
	if errors.As(err, &ext) && p.Code != contract.CodeInternal {
		p.Extensions = ext.ProblemExtensions()
	}
	var act actioner
	if errors.As(err, &act) && p.Code != contract.CodeInternal {
		if a := contract.Action(act.ProblemAction()); a.Valid() {
			p.Action = a
		}
	}
	if p.Action == contract.ActionRetryAsIs {
		var ra retryAfterer
		if errors.As(err, &ra) {
			if secs := int((ra.RetryAfter() + time.Second - 1) / time.Second); secs >= 1 {
				p.RetryAfter = secs
			}
		}
		if p.RetryAfter < 1 {
			p.RetryAfter = 1
		}
	} else {
		p.RetryAfter = 0
	}

	attrs := []slog.Attr{
		slog.String("requestId", p.RequestID),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("code", p.Code),
		slog.Int("status", p.Status),
		slog.String("error", err.Error()),
	}
	switch {
	case p.Code == contract.CodeInternal:
		s.log.LogAttrs(ctx, slog.LevelError, "request failed", attrs...)
	case p.Status >= 500:
		s.log.LogAttrs(ctx, slog.LevelWarn, "request not served", attrs...)
	default:
		s.log.LogAttrs(ctx, slog.LevelDebug, "request rejected", attrs...)
	}
	if st := stateFrom(ctx); st != nil {
		st.code = p.Code
	}
	var chal interface{ WWWAuthenticate() string }
	if errors.As(err, &chal) {
		w.Header().Set("WWW-Authenticate", chal.WWWAuthenticate())
	}
	s.writeProblem(w, r, p, err)
}

// writeProblem sends p. cause is only used to log an encoding failure.
func (s *server) writeProblem(w http.ResponseWriter, r *http.Request, p contract.Problem, cause error) {
	body, err := json.Marshal(p)
	if err != nil {
		// Only extensions can fail to encode; drop them rather than the problem.
		s.log.LogAttrs(r.Context(), slog.LevelError, "problem extensions do not encode",
			slog.String("requestId", p.RequestID), slog.String("code", p.Code), slog.Any("error", err),
			slog.Any("cause", cause))
		p.Extensions = nil
		body, _ = json.Marshal(p)
	}
	h := w.Header()
	h.Del("Content-Length")
	h.Del("ETag")
	h.Set("Content-Type", contract.MediaProblem)
	h.Set("Cache-Control", "no-store")
	if p.Action == contract.ActionRetryAsIs {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	} else {
		h.Del("Retry-After")
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// writeJSON sends v as the JSON success response. It encodes before
// writing anything, so an encoding failure still becomes a problem.
func (s *server) writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("httpserver: encode response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", contract.MediaJSON)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	// A write error means the client went away; there is no one to tell.
	_, _ = w.Write(buf.Bytes())
	return nil
}

// clientDetail drops the leading "package: " of an error message, which
// names our code's layout rather than the client's problem.
func clientDetail(msg string) string {
	pkg, rest, ok := strings.Cut(msg, ": ")
	if !ok || pkg == "" {
		return msg
	}
	for _, c := range pkg {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return msg
		}
	}
	return rest
}
