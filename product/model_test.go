package product_test

import (
	"slices"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
)

func TestModelIsValid(t *testing.T) {
	m := product.Model()
	if len(m.Operations()) == 0 {
		t.Fatal("no operations")
	}
	for _, op := range m.Operations() {
		if !op.Credential.Valid() {
			t.Errorf("%s: credential %s", op.ID, op.Credential)
		}
		for _, c := range m.ProblemCodes(op) {
			if _, ok := m.Problem(c); !ok {
				t.Errorf("%s: code %s not in registry", op.ID, c)
			}
		}
	}
	var kinds []string
	for _, ev := range m.Events() {
		kinds = append(kinds, ev.Name)
	}
	want := []string{"gate.decision", "intent.denied", "approval.pending", "payment.settled", "audit.appended",
		"memory.recorded", "memory.consolidated", "memory.erased", "memory.tainted",
		"protocol.dispute.open", "protocol.dispute.resolve", "protocol.obligation.expire"}
	if !slices.Equal(kinds, want) {
		t.Errorf("event kinds = %v, want %v", kinds, want)
	}
}

// TestPartsNamed checks that every part says who declares it, so Build's
// errors about a declaration made twice name both packages.
func TestPartsNamed(t *testing.T) {
	seen := make(map[string]bool)
	for _, p := range product.Definition().Parts {
		if p.Name == "" || seen[p.Name] {
			t.Errorf("part %q: empty or repeated name", p.Name)
		}
		seen[p.Name] = true
	}
}

// TestProblemRegistry pins the statuses and actions DESIGN gives the codes
// clients branch on most.
func TestProblemRegistry(t *testing.T) {
	m := product.Model()
	tests := []struct {
		code   string
		status int
		action contract.Action
	}{
		{contract.CodeRequestMalformedJSON, 400, contract.ActionFixRequest},
		{contract.CodeRequestValidation, 400, contract.ActionFixRequest},
		{contract.CodeRequestUnknownField, 400, contract.ActionFixRequest},
		{contract.CodeRequestTooLarge, 413, contract.ActionFixRequest},
		{contract.CodeRequestUnsupportedMediaType, 415, contract.ActionFixRequest},
		{contract.CodeRouteNotFound, 404, contract.ActionFixRequest},
		{contract.CodeMethodNotAllowed, 405, contract.ActionFixRequest},
		{audit.CodeBadCursor, 400, contract.ActionFixRequest},
		{audit.CodeNotFound, 404, contract.ActionFixRequest},
		{audit.CodeOutOfRange, 400, contract.ActionFixRequest},
		{contract.CodeAuthMissing, 401, contract.ActionReauthenticate},
		{contract.CodeAuthInvalid, 401, contract.ActionReauthenticate},
		{contract.CodeRateLimited, 429, contract.ActionRetryAsIs},
		{contract.CodeInternal, 500, contract.ActionStop},
		{contract.CodeUnavailable, 503, contract.ActionRetryAsIs},
		{pay.CodeMalformed, 400, contract.ActionFixRequest},
		{pay.CodeUnauthorized, 403, contract.ActionStop},
		{pay.CodeDenied, 403, contract.ActionStop},
		{pay.CodeFrozen, 503, contract.ActionAwaitOperator},
		{pay.CodeRailUnavailable, 503, contract.ActionRetryAsIs},
		{pay.CodeIdempotencyConflict, 422, contract.ActionFixRequest},
		{pay.CodeInFlight, 409, contract.ActionRetryAsIs},
		{contract.CodeOperatorUnauthorized, 401, contract.ActionReauthenticate},
		{contract.CodeOperatorRationaleTooShort, 400, contract.ActionFixRequest},
	}
	for _, tt := range tests {
		p, ok := m.Problem(tt.code)
		if !ok {
			t.Errorf("%s missing", tt.code)
			continue
		}
		if p.Status != tt.status || p.Action != tt.action {
			t.Errorf("%s = %d %s, want %d %s", tt.code, p.Status, p.Action, tt.status, tt.action)
		}
	}
	for _, p := range m.Problems() {
		if (p.Action == contract.ActionRetryAsIs) != (p.RetryAfter > 0) {
			t.Errorf("%s: RetryAfter %d with action %s", p.Code, p.RetryAfter, p.Action)
		}
	}
	if p, _ := m.Problem(pay.CodeInFlight); p.RetryAfter != 1 {
		t.Errorf("idempotency.in_flight RetryAfter = %d, DESIGN says 1", p.RetryAfter)
	}
}

func BenchmarkOpenAPI(b *testing.B) {
	m := product.Model()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.OpenAPI("https://pay.example"); err != nil {
			b.Fatal(err)
		}
	}
}
