package httpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/webhook"
)

// failingPayments answers every payment with one error.
type failingPayments struct {
	fakePayments
	err error
}

func (f failingPayments) Pay(context.Context, pay.Caller, []byte, string, string) (*pay.Result, error) {
	return nil, f.err
}

// TestDomainErrorsBecomeTheirProblems: every error the money path,
// operator actions, credentials and webhooks return is answered with its
// registered status, code and action — and Retry-After exactly when the
// action is retry-as-is — even when wrapped with context, and without
// library internals in the detail.
func TestDomainErrorsBecomeTheirProblems(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("layer: %w", err) }
	// Every error goes through pay.create, most of them ones it never
	// meets: the model under test lets it answer with every code, so the
	// contract check still holds each answer to its code's status, headers
	// and members.
	def := product.Definition()
	def.Operations = append(def.Operations, testOperations()...)
	var all []string
	for _, p := range product.Model().Problems() {
		all = append(all, p.Code)
	}
	for i := range def.Parts {
		for j, op := range def.Parts[i].Operations {
			if op.ID == "pay.create" {
				def.Parts[i].Operations[j].Problems = all
			}
		}
	}
	m, err := contract.Build(def)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err    error
		status int
		code   string
	}{
		{&pay.MalformedError{Fields: []pay.FieldError{{Field: "amount.minor", Rule: "integer", Message: "must be an integer"}}}, 400, "intent.malformed"},
		{&pay.UnauthorizedError{Reason: pay.ReasonSignatureInvalid, Err: fmt.Errorf("jws: internal detail")}, 403, "intent.unauthorized"},
		{pay.ErrFrozen, 503, "settlement.frozen"},
		{fmt.Errorf("pgstore: update: gave up: %w (%w)", store.ErrUnavailable, fmt.Errorf("40001")), 503, "unavailable"},
		{fmt.Errorf("pebblestore: %w", store.ErrFailed), 503, "store.unavailable"},
		{wrap(pay.ErrRailUnavailable), 503, "rail.unavailable"},
		{pay.ErrIdempotencyConflict, 422, "idempotency.conflict"},
		{pay.ErrInFlight, 409, "idempotency.in_flight"},
		{pay.ErrKeyMismatch, 400, "idempotency.key_mismatch"},
		{pay.ErrIntentNotFound, 404, "intent.not_found"},
		{pay.ErrApprovalExpired, 409, "approval.expired"},
		{pay.ErrApprovalMismatch, 409, "approval.mismatch"},
		{wrap(pay.ErrNotPending), 409, "approval.not_pending"},
		{wrap(pay.ErrRefundRefused), 409, "refund.refused"},
		{wrap(pay.ErrRefundExceeds), 422, "refund.exceeds"},
		{pay.ErrBreakerNotTripped, 409, "breaker.not_tripped"},
		{auth.ErrMissing, 401, "auth.missing"},
		{wrap(auth.ErrInvalid), 401, "auth.invalid"},
		{wrap(auth.ErrBadRequest), 400, "auth.bad_request"},
		{auth.ErrNotFound, 404, "auth.key_not_found"},
		{auth.ErrBadWindow, 400, "usage.bad_window"},
		{&auth.DPoPError{Reason: auth.DPoPJTIReplayed}, 401, "auth.invalid"},
		{&operator.UnauthorizedError{Reason: operator.Reason("stale_timestamp")}, 401, "operator.unauthorized"},
		{operator.CheckRationale("short"), 400, "operator.rationale_too_short"},
		{wrap(webhook.ErrInvalidURL), 400, "webhook.invalid_url"},
		{wrap(webhook.ErrInvalidEvents), 400, "webhook.invalid_events"},
		{webhook.ErrNotFound, 404, "webhook.not_found"},
		{audit.ErrBadCursor, 400, "audit.bad_cursor"},
		{errRateLimited{retryAfter: 2500000000}, 429, "rate_limited"},
		{fmt.Errorf("an unexpected fault with a secret inside"), 500, "internal"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			ts := newTestServer(t, Config{Model: m, Authenticator: allowAll{}, Payments: failingPayments{err: tc.err}})
			w := ts.do(t, "POST", "/pay", strings.NewReader(`{}`), "Content-Type", "application/json")
			var p contract.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("not a problem: %s", w.Body)
			}
			if w.Code != tc.status || p.Code != tc.code || p.Status != tc.status {
				t.Fatalf("%v: %d %s, want %d %s (%s)", tc.err, w.Code, p.Code, tc.status, tc.code, w.Body)
			}
			pt, ok := product.Model().Problem(tc.code)
			if !ok || p.Action != pt.Action {
				t.Fatalf("action %s, registry says %v", p.Action, pt.Action)
			}
			if (p.Action == contract.ActionRetryAsIs) != (w.Header().Get("Retry-After") != "") {
				t.Fatalf("action %s with Retry-After %q", p.Action, w.Header().Get("Retry-After"))
			}
			if strings.Contains(p.Detail, "internal detail") || strings.Contains(p.Detail, "secret") {
				t.Fatalf("detail leaks internals: %q", p.Detail)
			}
			if tc.code == "operator.rationale_too_short" && (len(p.Errors) != 1 || p.Errors[0].Field != "rationale" || p.Errors[0].Rule != "min") {
				t.Fatalf("the problem does not name the field and the rule: %+v", p.Errors)
			}
		})
	}
}
