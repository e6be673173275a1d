package operator_test

import (
	"bytes"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

// TestVectors verifies headers made by an independent implementation
// (Python's cryptography package, from the wire contract alone), so the
// signed message and the r||s form are checked against something other
// than this package's own Signer.
func TestVectors(t *testing.T) {
	const set = `{"keys":[
		{"kty":"OKP","crv":"Ed25519","x":"iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w","kid":"op-alice"},
		{"kty":"EC","crv":"P-256","x":"N0qF97opTmYSfZruT1wL6hE-vQOfldPbdvE8EMt0pPE","y":"M_TBOSUcmMPe3gE8b3GES65K5R-fLVL6XGAPNlIyT20","kid":"op-bob"}
	]}`
	const body = `{"intentId":"int_01","rationale":"customer confirmed by phone"}`
	tests := []struct {
		name, method, target, op, header string
	}{
		{"EdDSA", "POST", "/operator/approve", "operator.approve",
			`keyid="op-alice", ts=1763800000, nonce="AQEBAQEBAQEBAQEBAQEBAQ", ` +
				`sig=:xrgu9pQhIeLbqGu94b4RJknFTEH2RLstI8+d84F06Hjqz3zCnMhEdI82pu3o5/8VqoGpCPVjyzp3EZjFcL8tAQ==:`},
		{"ES256 with a query", "POST", "/operator/intents/int_01/refund?dry=1", "operator.refund",
			`keyid="op-bob", ts=1763800000, nonce="AAECAwQFBgcICQoLDA0ODw", ` +
				`sig=:H/K94Et5IfTjR3oB4T9e2+riyU/6KjUBqdogqJDGunQ+a5uJCf9GJk5+DAwbwDCiFRlNQzRawEmaJQu5wL6y6A==:`},
	}
	keys, err := operator.LoadKeySet([]byte(set))
	if err != nil {
		t.Fatal(err)
	}
	v, err := operator.NewVerifier(memstore.New(nil), keys, "https://pay.example.com/", &operator.VerifierOptions{Now: exampleNow})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, bytes.NewReader([]byte(body)))
			r.Header.Set(operator.HeaderName, tt.header)
			if _, err := v.Verify(r, tt.op, []byte(body)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
