package identity

import (
	"testing"
)

// benchInputs returns the interop valid-transact envelopes (v1 and JWS) and
// the fixture policy they transact under.
func benchInputs(b *testing.B) (v1, jws []byte, p Policy) {
	b.Helper()
	f := loadInterop(b)
	p = interopPolicy(b, f.Disclosures[0].Policy)
	v1, jws = f.Disclosures[0].Signed, f.JWSDisclosures[0].Signed
	for _, env := range [][]byte{v1, jws} {
		if d := Verify(env, p); d.Outcome != OutcomeTransact {
			b.Fatalf("benchmark input does not transact: %+v", d.Checks)
		}
	}
	return v1, jws, p
}

// BenchmarkVerify measures whole verifications of a typical signed
// disclosure on every core (RunParallel), reporting verifications/s.
func BenchmarkVerify(b *testing.B) {
	v1, jws, p := benchInputs(b)
	for _, c := range []struct {
		name string
		env  []byte
	}{{"v1", v1}, {"jws", jws}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.env)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if d := Verify(c.env, p); d.Outcome != OutcomeTransact {
						b.Fatal(d.Failed)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "verifications/s")
		})
	}
}

// BenchmarkVerifyWithoutSignature isolates the non-signature work: parse,
// structural validation, canonicalization, digest, freshness and predicates.
func BenchmarkVerifyWithoutSignature(b *testing.B) {
	v1, _, p := benchInputs(b)
	p.RequireValidSignature = new(false)
	b.ReportAllocs()
	for b.Loop() {
		if d := Verify(v1, p); d.Outcome != OutcomeTransact {
			b.Fatal(d.Failed)
		}
	}
}

func BenchmarkSignCanonical(b *testing.B) {
	key := adpKey(1)
	canon, err := Canonicalize(adpSample(adpHex(key)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := SignCanonical(canon, key, nil); err != nil {
			b.Fatal(err)
		}
	}
}
