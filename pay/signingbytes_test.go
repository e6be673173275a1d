package pay

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/countersign/countersign/gate"
)

// TestSigningBytesMatchesJCS holds the direct encoder to the general RFC
// 8785 canonicaliser on instructions full of characters that JSON encoders
// treat differently: HTML-sensitive <>&, U+2028/2029, controls, quotes,
// backslashes, astral code points, and the integer range edges.
func TestSigningBytesMatchesJCS(t *testing.T) {
	pieces := []string{"a", "Z", "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", `"`, `\`, "é", "😀", "דּ", "\t", "\n", " ", "/"}
	rng := rand.New(rand.NewPCG(3, 4))
	str := func() string {
		var b bytes.Buffer
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	minors := []int64{1, 0, -1, 42, MaxMinor - 1, -(MaxMinor - 1), 1 << 40}
	for i := range 20000 {
		in := &Instruction{
			IdempotencyKey: str(), Payee: str(), Purpose: str(),
			Amount: Amount{Minor: minors[i%len(minors)], Currency: str()},
			Terms: Terms{Rail: str(), Reversibility: gate.Reversibility(str()), Finality: gate.Finality(str()),
				Credential: gate.Credential(str()), CapitalSource: gate.CapitalSource(str()), Presence: gate.Presence(str())},
			Envelope: Envelope{Agent: str(), Mandate: str(), Signature: str()},
		}
		if i%3 == 0 {
			in.SessionID = str() // optional: absent (empty) or any string
		}
		fast, err1 := SigningBytes(in)
		slow, err2 := signingBytesSlow(in)
		if err1 != nil || err2 != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("instruction %+v:\nfast %q %v\njcs  %q %v", in, fast, err1, slow, err2)
		}
	}
}
