package acp

import (
	"encoding/json"
	"testing"
)

// The fuzz targets run the decoders the client runs on a merchant's
// answers. Seeds: the curated examples, in testdata/fuzz (made from
// testdata/conformance/examples/2026-04-17). Beyond "does not panic", what
// is accepted must survive a round trip: re-encoded, it is accepted again
// and decodes to the same value.

func FuzzDecodeCheckoutSession(f *testing.F) {
	f.Add([]byte(`{"id":"cs_1","status":"ready_for_payment","currency":"usd","line_items":[],"totals":[],` +
		`"fulfillment_options":[],"messages":[],"links":[],"capabilities":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, ParseCheckoutSession)
		roundTrip(t, data, ParseCheckoutSessionWithOrder)
		roundTrip(t, data, ParseError)
	})
}

func FuzzDecodeDelegatePaymentResponse(f *testing.F) {
	f.Add([]byte(`{"id":"vt_1","created":"2026-05-01T12:00:00Z","metadata":{"a":"b"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, ParseDelegatePaymentResponse)
		roundTrip(t, data, ParseDelegatePaymentError)
	})
}

func roundTrip[T any](t *testing.T, data []byte, parse func([]byte) (*T, error)) {
	v, err := parse(data)
	if err != nil {
		if v != nil {
			t.Fatalf("refused but returned %+v", v)
		}
		return
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("accepted %q but cannot re-encode: %v", data, err)
	}
	w, err := parse(again)
	if err != nil {
		t.Fatalf("accepted %q, refused its re-encoding %q: %v", data, again, err)
	}
	third, err := json.Marshal(w)
	if err != nil || string(third) != string(again) {
		t.Fatalf("re-encoding is not stable:\n%s\n%s", again, third)
	}
}
