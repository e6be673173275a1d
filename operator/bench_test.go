package operator_test

import (
	"crypto"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"
)

func benchKeys(b *testing.B) map[string]crypto.Signer {
	return map[string]crypto.Signer{"EdDSA": edKey(1), "ES256": ecKey(b)}
}

func BenchmarkSign(b *testing.B) {
	for name, key := range benchKeys(b) {
		b.Run(name, func(b *testing.B) {
			s, err := operator.NewSigner(key, "op-alice", testBase, nil)
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest("POST", "/operator/approve", nil)
			body := []byte(body)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Sign(r, "operator.approve", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerify measures a successful verification including the nonce
// write (memstore, spurious retries off). Requests are signed before the
// timer starts, one per iteration, since each nonce is accepted once.
func BenchmarkVerify(b *testing.B) {
	for name, key := range benchKeys(b) {
		b.Run(name, func(b *testing.B) {
			st := memstore.New(&memstore.Options{RetryRate: -1})
			v, err := operator.NewVerifier(st, []operator.PublicKey{{KeyID: "op-alice", Public: key.Public()}}, testBase, nil)
			if err != nil {
				b.Fatal(err)
			}
			s, err := operator.NewSigner(key, "op-alice", testBase, nil)
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(body)
			reqs := make([]*http.Request, b.N)
			for i := range reqs {
				reqs[i] = httptest.NewRequest("POST", "/operator/approve", nil)
				if err := s.Sign(reqs[i], "operator.approve", body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := v.Verify(reqs[i], "operator.approve", body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkParseHeader(b *testing.B) {
	const h = `keyid="op-alice", ts=1763800000, nonce="AQEBAQEBAQEBAQEBAQEBAQ", ` +
		`sig=:xrgu9pQhIeLbqGu94b4RJknFTEH2RLstI8+d84F06Hjqz3zCnMhEdI82pu3o5/8VqoGpCPVjyzp3EZjFcL8tAQ==:`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := operator.ParseHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}
