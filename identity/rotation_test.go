package identity

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// adpChain rotates key 0 → 1 → … → n and returns the keys and the chain.
func adpChain(t *testing.T, n int) ([]ed25519.PrivateKey, []RotationStatement) {
	t.Helper()
	keys := []ed25519.PrivateKey{adpKey(100)}
	var chain []RotationStatement
	for i := 1; i <= n; i++ {
		next := adpKey(byte(100 + i))
		s, err := Rotate(keys[i-1], next.Public().(ed25519.PublicKey), adpNow)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, next)
		chain = append(chain, s)
	}
	return keys, chain
}

func adpPub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func TestVerifyRotationChain(t *testing.T) {
	keys1, one := adpChain(t, 1)
	keys3, three := adpChain(t, 3)
	keys33, long := adpChain(t, 33)
	keys32, max := adpChain(t, 32)

	// A cycle: 0 → 1 → 0 → 1, each hop honestly signed.
	back, _ := Rotate(keys1[1], adpPub(keys1[0]), adpNow)
	cycle := []RotationStatement{one[0], back, one[0]}

	wrongSigner := three[1]
	wrongSigner.Signature = hex.EncodeToString(ed25519.Sign(keys3[0], rotationBody(wrongSigner.From, wrongSigner.To, wrongSigner.RotatedAt)))

	broken := []RotationStatement{three[0], three[2]} // skips hop 1
	tamperedTo := three[0]
	tamperedTo.To = hex.EncodeToString(adpPub(adpKey(7)))

	didKeyRoot := DIDKey(adpPub(keys3[0]))
	upperHop := three[0]
	upperHop.From = strings.ToUpper(upperHop.From) // the signed body covers From as written
	badType := one[0]
	badType.Type = "rotate"

	for _, c := range []struct {
		name    string
		agentID string
		chain   []RotationStatement
		signer  ed25519.PublicKey
		sig     bool // failure is a hop signature
		ok      bool
	}{
		{"one hop", adpHex(keys1[0]), one, adpPub(keys1[1]), false, true},
		{"three hops", adpHex(keys3[0]), three, adpPub(keys3[3]), false, true},
		{"32 hops", adpHex(keys32[0]), max, adpPub(keys32[32]), false, true},
		{"did:key agentId with hex hops", didKeyRoot, three, adpPub(keys3[3]), false, true},
		{"uppercase agentId", strings.ToUpper(adpHex(keys3[0])), three, adpPub(keys3[3]), false, true},
		{"empty", adpHex(keys1[0]), nil, adpPub(keys1[1]), false, false},
		{"33 hops", adpHex(keys33[0]), long, adpPub(keys33[33]), false, false},
		{"cycle", adpHex(keys1[0]), cycle, adpPub(keys1[1]), false, false},
		{"back to the root", adpHex(keys1[0]), []RotationStatement{one[0], back}, adpPub(keys1[0]), false, false},
		{"wrong signer", adpHex(keys3[0]), []RotationStatement{three[0], wrongSigner, three[2]}, adpPub(keys3[3]), true, false},
		{"broken link", adpHex(keys3[0]), broken, adpPub(keys3[3]), false, false},
		{"tampered to", adpHex(keys3[0]), []RotationStatement{tamperedTo}, adpPub(adpKey(7)), true, false},
		{"re-cased from breaks the signature", adpHex(keys3[0]), []RotationStatement{upperHop, three[1], three[2]}, adpPub(keys3[3]), true, false},
		{"ends elsewhere", adpHex(keys3[0]), three, adpPub(keys3[2]), false, false},
		{"starts elsewhere", adpHex(keys3[1]), three, adpPub(keys3[3]), false, false},
		{"agentId not a key", "agent-7", one, adpPub(keys1[1]), false, false},
		{"bad type", adpHex(keys1[0]), []RotationStatement{badType}, adpPub(keys1[1]), false, false},
		{"short signing key", adpHex(keys1[0]), one, adpPub(keys1[1])[:31], false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := VerifyRotationChain(c.agentID, c.chain, c.signer)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrRotationChain) {
					t.Errorf("%v does not match ErrRotationChain", err)
				}
				if errors.Is(err, ErrInvalidSignature) != c.sig {
					t.Errorf("%v: matches ErrInvalidSignature = %v, want %v", err, !c.sig, c.sig)
				}
			}
			// The binding check agrees whenever the direct forms fail.
			k, _ := PublicKeyOf(c.agentID)
			direct := k != nil && k.Equal(c.signer)
			berr := VerifyKeyBinding(c.agentID, c.signer, c.chain)
			if (berr == nil) != (c.ok || direct) {
				t.Errorf("VerifyKeyBinding = %v, want ok=%v", berr, c.ok)
			}
			if berr != nil && !errors.Is(berr, ErrKeyBinding) {
				t.Errorf("%v does not match ErrKeyBinding", berr)
			}
		})
	}
}

func TestVerifyKeyBinding(t *testing.T) {
	k := adpKey(9)
	for _, c := range []struct {
		name    string
		agentID string
		ok      bool
	}{
		{"hex", adpHex(k), true},
		{"upper hex", strings.ToUpper(adpHex(k)), true},
		{"did:key", DIDKey(adpPub(k)), true},
		{"other key", adpHex(adpKey(10)), false},
		{"other did:key", DIDKey(adpPub(adpKey(10))), false},
		{"not a key", "agent", false},
		{"did:key with fragment", DIDKey(adpPub(k)) + "#x", false},
		{"empty", "", false},
	} {
		err := VerifyKeyBinding(c.agentID, adpPub(k), nil)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrKeyBinding)) {
			t.Errorf("%s: err = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestRotateStatement(t *testing.T) {
	s, err := Rotate(adpKey(1), adpPub(adpKey(2)), adpNow)
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != "rotation" || s.From != adpHex(adpKey(1)) || s.To != adpHex(adpKey(2)) || s.RotatedAt != "2026-06-24T12:30:00.000Z" {
		t.Errorf("statement %+v", s)
	}
	// The signed body is the canonical {type, from, to, rotatedAt}.
	body, err := Canonicalize(map[string]string{"type": "rotation", "from": s.From, "to": s.To, "rotatedAt": s.RotatedAt})
	if err != nil {
		t.Fatal(err)
	}
	if string(body) != string(rotationBody(s.From, s.To, s.RotatedAt)) {
		t.Errorf("body %s, want %s", rotationBody(s.From, s.To, s.RotatedAt), body)
	}
	if _, err := Rotate(adpKey(1)[:5], adpPub(adpKey(2)), adpNow); err == nil {
		t.Error("short private key accepted")
	}
	if _, err := Rotate(adpKey(1), adpPub(adpKey(2))[:5], adpNow); err == nil {
		t.Error("short public key accepted")
	}
}

// TestRotatedDisclosure signs with the third key of a chain under the
// first key's identity; both envelopes carry the chain and verify.
func TestRotatedDisclosure(t *testing.T) {
	keys, chain := adpChain(t, 3)
	for _, agentID := range []string{adpHex(keys[0]), DIDKey(adpPub(keys[0]))} {
		d := adpSample(agentID)
		canon, err := Canonicalize(d)
		if err != nil {
			t.Fatal(err)
		}
		v1, jws, err := SignCanonical(canon, keys[3], chain)
		if err != nil {
			t.Fatal(err)
		}
		for _, env := range [][]byte{v1, jws} {
			dec := Verify(env, Policy{Now: adpNow})
			if dec.Outcome != OutcomeTransact {
				t.Errorf("%s: %+v", agentID, dec.Checks)
			}
			// The decision hands the chain on, for the live handshake.
			if len(dec.RotationChain) != 3 || dec.RotationChain[2] != chain[2] {
				t.Errorf("decision chain %+v", dec.RotationChain)
			}
		}
		// Without its chain the same signature no longer binds.
		if _, _, err := SignCanonical(canon, keys[3], nil); err == nil {
			t.Errorf("signing without the chain: err = %v", err)
		}
	}
}
