package pay

import (
	"errors"
	"testing"
)

// TestAuthorizeSigned: a request the agent signed in another form (a
// purchase) goes through the same envelope checks, gate, idempotency and
// settlement, keyed by what the agent sent.
func TestAuthorizeSigned(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessConfig{})
	const typ = "svc-test-purchase+jws"
	signedBytes := []byte(`{"buy":"sku-1","idempotencyKey":"p-1"}`)
	build := func(sigTyp string, over []byte) *Instruction {
		in := h.instruction("p-1", 700, nil)
		sig, err := SignDetached(h.agentKey, sigTyp, over)
		if err != nil {
			t.Fatal(err)
		}
		in.Envelope.Signature = sig
		return in
	}
	sg := Signed{Type: typ, Bytes: signedBytes, Digest: "digest-of-the-purchase", Metadata: map[string]string{"cart": "cs_1"}}

	for _, tc := range []struct {
		name string
		in   *Instruction
	}{
		{"wrong type", build("svc-intent+jws", signedBytes)},
		{"other bytes", build(typ, []byte(`{"buy":"sku-2"}`))},
	} {
		if _, err := h.svc.authorizeSigned(ctx, RouteBuy, h.caller, tc.in, sg, "", "req"); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s: %v, want an unauthorized envelope", tc.name, err)
		}
	}
	res, err := h.svc.authorizeSigned(ctx, RouteBuy, h.caller, build(typ, signedBytes), sg, "", "req")
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatalf("%v %+v", err, res)
	}
	in, err := h.svc.Intent(ctx, h.caller, res.IntentID)
	if err != nil || in.Route != RouteBuy || in.Metadata["cart"] != "cs_1" {
		t.Fatalf("intent %+v %v", in, err)
	}
	// The same purchase again replays, even though the server built the
	// instruction anew; another body under the same key conflicts.
	again, err := h.svc.authorizeSigned(ctx, RouteBuy, h.caller, build(typ, signedBytes), sg, "", "req2")
	if err != nil || !again.Replayed || again.IntentID != res.IntentID {
		t.Fatalf("replay: %v %+v", err, again)
	}
	other := sg
	other.Digest = "another purchase"
	if _, err := h.svc.authorizeSigned(ctx, RouteBuy, h.caller, build(typ, signedBytes), other, "", "req3"); !errors.Is(err, ErrIdempotencyConflict) {
		t.Errorf("a different purchase under the same key: %v", err)
	}
	// The /pay namespace is separate: the same key pays anew there.
	if res, err := h.pay(h.instruction("p-1", 700, nil)); err != nil || res.Replayed {
		t.Errorf("the same key on /pay: %v %+v", err, res)
	}
}
