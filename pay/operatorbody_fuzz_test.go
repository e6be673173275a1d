package pay_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/product"
)

// FuzzOperatorBodies feeds untrusted bytes to the decoders of the operator's
// approve and refund requests exactly as the server runs them (strict
// decode, then validation): they never panic, and whatever they accept
// re-encodes to a value that decodes back to itself.
func FuzzOperatorBodies(f *testing.F) {
	for _, seed := range []string{
		`{"intentId":"int_01JABCDEFGHJKMNPQRSTVWXYZ0","challenge":"K9IA3fL5gu_O3DNPg2ZUXdYxPPT0l6SCmZGThq4Jmcs","mandateId":"mdt_1","rationale":"checked the invoice","acknowledged":true}`,
		`{"intentId":"int_1","amountMinor":2000,"rationale":"one item returned"}`,
		`{"intentId":"int_1","rationale":"everything returned"}`,
		`{"intentId":"int_1","amountMinor":1.5,"rationale":"fraction"}`,
		`{"intentId":"int_1","amountMinor":-1,"rationale":"negative"}`,
		`{"intentId":"int_1","intentId":"int_2","rationale":"duplicate member"}`,
		`{"acknowledged":"yes"}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	m := product.Model()
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(dst, again any) {
			if contract.DecodeJSON(bytes.NewReader(b), dst) != nil || m.Validate(dst) != nil {
				return
			}
			out, err := json.Marshal(dst)
			if err != nil {
				t.Fatalf("accepted value does not encode: %v", err)
			}
			if err := contract.DecodeJSON(bytes.NewReader(out), again); err != nil {
				t.Fatalf("re-encoded %s does not decode: %v", out, err)
			}
			if out2, _ := json.Marshal(again); !bytes.Equal(out, out2) {
				t.Fatalf("round trip changed the value: %s then %s", out, out2)
			}
		}
		check(&pay.ApproveRequest{}, &pay.ApproveRequest{})
		check(&pay.RefundRequest{}, &pay.RefundRequest{})
	})
}
