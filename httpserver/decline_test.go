package httpserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
)

// TestDeclineRoute declines a held payment over HTTP on the stack the
// reference server wires, signed as an operator: requests that are
// refused leave it held; a decline works while the kill switch is
// engaged, answers the same bytes when repeated, and the payment then
// reads declined, is off the held list and can no longer be approved.
func TestDeclineRoute(t *testing.T) {
	fx := newMatrixFixture(t)
	kid := fx.keys.ops[0].kid
	signer := mustSigner(t)(fx.keys.ops[0].signer(matrixClock, matrixBase))
	asOperator := func(opID, path string, body any) response {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		w := wire{method: http.MethodPost, path: path, body: b, header: http.Header{"Content-Type": {contract.MediaJSON}}}
		return fx.send(t, w.with(operator.HeaderName, sign(t, signer, opID, w)))
	}
	decline := func(body any) response { return asOperator("operator.decline", "/operator/decline", body) }
	intent := func(id string) pay.Intent {
		t.Helper()
		res := fx.send(t, wire{method: http.MethodGet, path: "/intents/" + id, header: http.Header{"Authorization": {"Bearer " + fx.cred}}})
		var in pay.Intent
		if res.status != http.StatusOK || json.Unmarshal(res.body, &in) != nil {
			t.Fatalf("GET /intents/%s: %d\n%s", id, res.status, res.body)
		}
		return in
	}
	id := fx.declineHeld
	valid := pay.DeclineRequest{IntentID: id, MandateID: fx.mandateID, Rationale: "the payee is not one of our vendors"}

	for _, tc := range []struct {
		name   string
		body   any
		status int
		code   string
		field  string // the field a validation problem names
	}{
		{"short rationale", pay.DeclineRequest{IntentID: id, MandateID: fx.mandateID, Rationale: "no"}, 400, contract.CodeOperatorRationaleTooShort, "rationale"},
		{"rationale of spaces", pay.DeclineRequest{IntentID: id, MandateID: fx.mandateID, Rationale: "   no   thx   "}, 400, contract.CodeOperatorRationaleTooShort, "rationale"},
		{"no mandate id", map[string]string{"intentId": id, "rationale": valid.Rationale}, 400, contract.CodeRequestValidation, "mandateId"},
		{"not a challenge", pay.DeclineRequest{IntentID: id, MandateID: fx.mandateID, Challenge: "AAAA", Rationale: valid.Rationale}, 400, contract.CodeRequestValidation, "challenge"},
		{"another mandate", pay.DeclineRequest{IntentID: id, MandateID: "mdt-other", Rationale: valid.Rationale}, 409, pay.CodeApprovalMismatch, ""},
		{"another payment's challenge", pay.DeclineRequest{IntentID: id, MandateID: fx.mandateID, Challenge: fx.challenge, Rationale: valid.Rationale}, 409, pay.CodeApprovalMismatch, ""},
		{"a settled payment", pay.DeclineRequest{IntentID: fx.settled, MandateID: fx.mandateID, Rationale: valid.Rationale}, 409, pay.CodeNotPending, ""},
		{"unknown intent", pay.DeclineRequest{IntentID: "int_01JABCDEFGHJKMNPQRSTVWXYZ0", MandateID: fx.mandateID, Rationale: valid.Rationale}, 404, pay.CodeIntentNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := decline(tc.body)
			var p contract.Problem
			if res.status != tc.status || json.Unmarshal(res.body, &p) != nil || p.Code != tc.code {
				t.Fatalf("%d %s, want %d %s\n%s", res.status, res.Code, tc.status, tc.code, res.body)
			}
			if tc.field != "" && !slices.ContainsFunc(p.Errors, func(e contract.FieldError) bool { return e.Field == tc.field && e.Rule != "" }) {
				t.Errorf("the problem does not name %s: %+v", tc.field, p.Errors)
			}
			if st := intent(id).Status; st != pay.StatusPendingApproval {
				t.Errorf("after a refused decline the payment is %s", st)
			}
		})
	}

	on := true
	if res := asOperator("operator.kill_switch", "/operator/kill-switch", pay.KillSwitchRequest{Engaged: &on, Rationale: matrixRationale}); res.status != http.StatusOK {
		t.Fatalf("engaging the kill switch: %d\n%s", res.status, res.body)
	}
	first := decline(valid)
	var d pay.Declined
	if first.status != http.StatusOK || json.Unmarshal(first.body, &d) != nil || d.IntentID != id || d.Status != pay.StatusDeclined ||
		d.MandateID != fx.mandateID || d.DeclinedBy != kid || d.AuditSeq == 0 {
		t.Fatalf("decline while the kill switch is engaged: %d\n%s", first.status, first.body)
	}
	if again := decline(valid); again.status != http.StatusOK || !bytes.Equal(again.body, first.body) {
		t.Errorf("a second decline answered %d\n%s\nnot the first answer\n%s", again.status, again.body, first.body)
	}
	in := intent(id)
	if in.Status != pay.StatusDeclined || in.ReservedMinor != 0 || in.Approval == nil || in.Approval.Declined == nil ||
		in.Approval.Declined.Operator != kid || in.Approval.Declined.Rationale != valid.Rationale {
		t.Errorf("the declined payment reads %s, reserved %d, approval %+v", in.Status, in.ReservedMinor, in.Approval)
	}
	list := fx.send(t, func() wire {
		w := wire{method: http.MethodGet, path: "/operator/approvals", header: http.Header{}}
		return w.with(operator.HeaderName, sign(t, signer, "operator.approvals", w))
	}())
	var held pay.HeldPage
	if list.status != http.StatusOK || json.Unmarshal(list.body, &held) != nil {
		t.Fatalf("held list: %d\n%s", list.status, list.body)
	}
	if slices.ContainsFunc(held.Data, func(h pay.HeldIntent) bool { return h.IntentID == id }) ||
		!slices.ContainsFunc(held.Data, func(h pay.HeldIntent) bool { return h.IntentID == fx.held }) {
		t.Errorf("the held list after the decline: %s", list.body)
	}
	approve := asOperator("operator.approve", "/operator/approve", pay.ApproveRequest{IntentID: id, MandateID: fx.mandateID,
		Rationale: matrixRationale, Acknowledged: true})
	if approve.status != http.StatusConflict || approve.Code != pay.CodeNotPending {
		t.Errorf("approving the declined payment: %d %s, want 409 %s", approve.status, approve.Code, pay.CodeNotPending)
	}
	off := false
	if res := asOperator("operator.kill_switch", "/operator/kill-switch", pay.KillSwitchRequest{Engaged: &off, Rationale: matrixRationale}); res.status != http.StatusOK {
		t.Fatalf("releasing the kill switch: %d\n%s", res.status, res.body)
	}
}
