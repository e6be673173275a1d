package protocol_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/store"
)

var rewriteProofSeeds = flag.Bool("rewrite-proof-seeds", false,
	"rewrite the committed seed corpus of FuzzVerifyProof (testdata/fuzz/FuzzVerifyProof)")

const proofSeedDir = "testdata/fuzz/FuzzVerifyProof"

// proofSeeds builds proofs in a world with fixed keys (so they verify with
// a fixed verifier key however often they are rebuilt) and named tampered
// copies: valid-* verify, invalid-* do not.
func proofSeeds() (verifierKey string, seeds map[string][]byte, err error) {
	ctx := context.Background()
	w, err := newExampleWorld()
	if err != nil {
		return "", nil, err
	}
	// A gate.policy entry, indexed as identity.Service indexes it, so the
	// proofs carry a policyEntry.
	err = w.log.Update(ctx, func(txn store.Txn) error {
		e, err := w.log.Append(txn, audit.Record{Type: "gate.policy", Actor: audit.Actor{Kind: "system", ID: "identity"},
			Data: json.RawMessage(`{"digest":"sha256:seed-policy","enforced":true}`)})
		if err != nil {
			return err
		}
		return txn.Set(binary.BigEndian.AppendUint64([]byte("identity/policy-seq/"), e.Seq), []byte("sha256:seed-policy"))
	})
	if err != nil {
		return "", nil, err
	}
	call := protocol.AgentCall(w.caller, "req_seed")
	settled, err := w.payNow(1_250)
	if err != nil {
		return "", nil, err
	}
	denied, err := w.payNow(6_000) // above the per-payment cap
	if err != nil {
		return "", nil, err
	}
	in := w.instruction("sandbox-card", 4_000)
	if err := protocol.SignSpend("hold.place", &in, w.agentKey); err != nil {
		return "", nil, err
	}
	placed, err := w.svc.HoldPlace(ctx, call, &protocol.HoldPlaceRequest{Spend: in, TTLSeconds: 3600})
	if err != nil {
		return "", nil, err
	}
	if _, err := w.svc.HoldCapture(ctx, call, &protocol.HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 3_000, IdempotencyKey: "c"}); err != nil {
		return "", nil, err
	}
	seeds = map[string][]byte{}
	for name, id := range map[string]string{"valid-settled": settled, "valid-denied": denied, "valid-hold-captured": placed.IntentID} {
		p, err := w.svc.ProofGet(ctx, call, &protocol.ProofGetRequest{IntentID: id})
		if err != nil {
			return "", nil, err
		}
		if seeds[name], err = json.Marshal(p); err != nil {
			return "", nil, err
		}
	}
	good := seeds["valid-hold-captured"]
	seeds["invalid-outcome"] = bytes.Replace(good, []byte(`"decision":{"outcome":"allow"`), []byte(`"decision":{"outcome":"deny"`), 1)
	seeds["invalid-policy-hash"] = bytes.Replace(good, []byte(`"policyHash":"sha256:seed-policy"`), []byte(`"policyHash":"sha256:forged"`), 1)
	seeds["invalid-truncated"] = good[:len(good)/3]
	seeds["invalid-empty-object"] = []byte(`{}`)
	seeds["invalid-no-entries"] = []byte(`{"type":"countersign.enforcement-proof/v1","entries":[]}`)
	return w.log.VerifierKey(), seeds, nil
}

func readFuzzSeed(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	header, rest, _ := strings.Cut(string(b), "\n")
	lit, ok := strings.CutPrefix(strings.TrimSpace(rest), "[]byte(")
	if header != "go test fuzz v1" || !ok || !strings.HasSuffix(lit, ")") {
		return nil, fmt.Errorf("%s: not a go test fuzz v1 []byte corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
	return []byte(s), err
}

// TestVerifyProofSeeds holds the committed corpus to what its names say
// (go test -run TestVerifyProofSeeds -rewrite-proof-seeds rebuilds it).
func TestVerifyProofSeeds(t *testing.T) {
	key, seeds, err := proofSeeds()
	if err != nil {
		t.Fatal(err)
	}
	if *rewriteProofSeeds {
		if err := os.MkdirAll(proofSeedDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range seeds {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			if err := os.WriteFile(filepath.Join(proofSeedDir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(proofSeedDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(seeds) {
		t.Fatalf("%d seed files in %s, want at least %d (rebuild with -rewrite-proof-seeds)", len(files), proofSeedDir, len(seeds))
	}
	for _, f := range files {
		b, err := readFuzzSeed(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		v := protocol.VerifyProof(key, b)
		switch {
		case strings.HasPrefix(name, "valid-") && !v.Valid:
			t.Errorf("%s does not verify: %s", name, v.Failure)
		case strings.HasPrefix(name, "invalid-") && v.Valid:
			t.Errorf("%s verifies", name)
		}
	}
}

// FuzzVerifyProof feeds untrusted bytes to VerifyProof: it never panics,
// an invalid answer always names a failure, and what verifies still
// verifies, with the same answer, once decoded and encoded again.
func FuzzVerifyProof(f *testing.F) {
	key, seeds, err := proofSeeds()
	if err != nil {
		f.Fatal(err)
	}
	for _, b := range seeds {
		f.Add(b)
	}
	f.Add([]byte(nil))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"entries":[{"entry":{"seq":0},"inclusion":{"hashes":null}}],"type":"countersign.enforcement-proof/v1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := protocol.VerifyProof(key, b)
		if !v.Valid {
			if v.Failure == "" || v.Outcome != "" {
				t.Fatalf("invalid without a failure, or with an outcome: %+v", v)
			}
			return
		}
		if v.Failure != "" || v.IntentID == "" || v.Outcome == "" {
			t.Fatalf("valid answer %+v", v)
		}
		var p protocol.EnforcementProof
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("verified but does not decode: %v", err)
		}
		again, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		if v2 := protocol.VerifyProof(key, again); !cmp.Equal(v, v2) {
			t.Fatalf("re-encoded: %+v, first %+v", v2, v)
		}
	})
}

// FuzzSpendSigningBytes: for any instruction and method, the signing
// bytes are the JSON object {"method", "payment"} whose payment member is
// exactly pay.SigningBytes, they never equal what /pay signs, and a spend
// signed over them verifies for that method only.
func FuzzSpendSigningBytes(f *testing.F) {
	f.Add("hold.place", "order-1", "acct:seller.example", "one GPU hour", "USD", int64(1250), "", "sandbox-card")
	f.Add("custody.deposit", "k", "acct:custody.countersign.local", "top up", "USD", int64(1), "ses_1", "sandbox-wire")
	f.Add("meter.open", "\u2028\"\\", "eip155:1:0xab", "é\x00", "eip155:1/erc20:0xa0b8", int64(9007199254740991), "s", "r")
	f.Add("x\xff", "a", "b", "c", "USD", int64(-5), "", "")
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	f.Fuzz(func(t *testing.T, method, idem, payee, purpose, currency string, minor int64, session, rail string) {
		in := pay.Instruction{IdempotencyKey: idem, Payee: payee, Purpose: purpose, SessionID: session,
			Amount: pay.Amount{Minor: minor, Currency: currency},
			Terms: pay.Terms{Rail: rail, Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
				Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
			Envelope: pay.Envelope{Mandate: "m"}}
		b, err := protocol.SpendSigningBytes(method, &in)
		payment, perr := pay.SigningBytes(&in)
		if (err == nil) != (perr == nil) {
			t.Fatalf("spend bytes err %v, payment bytes err %v", err, perr)
		}
		if err != nil {
			return
		}
		again, _ := protocol.SpendSigningBytes(method, &in)
		if !bytes.Equal(b, again) {
			t.Fatal("not deterministic")
		}
		if bytes.Equal(b, payment) {
			t.Fatal("a spend signs what /pay signs")
		}
		if !utf8.ValidString(method) {
			return // method ids are the surface's own ASCII names
		}
		var got struct {
			Method  string          `json:"method"`
			Payment json.RawMessage `json:"payment"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Method != method || !bytes.Equal(got.Payment, payment) {
			t.Fatalf("decoded method %q payment %s, want %q %s", got.Method, got.Payment, method, payment)
		}
		if err := protocol.SignSpend(method, &in, key); err != nil {
			t.Fatal(err)
		}
		// Signing set envelope.agent, which the bytes cover.
		signed, err := protocol.SpendSigningBytes(method, &in)
		if err != nil {
			t.Fatal(err)
		}
		if err := verifySpend(in.Envelope.Signature, signed, key.Public().(ed25519.PublicKey)); err != nil {
			t.Fatal(err)
		}
		other, _ := protocol.SpendSigningBytes(method+".other", &in)
		if verifySpend(in.Envelope.Signature, other, key.Public().(ed25519.PublicKey)) == nil {
			t.Fatal("the signature verifies for another method")
		}
	})
}

// verifySpend checks a detached compact JWS over payload.
func verifySpend(jws string, payload []byte, pub ed25519.PublicKey) error {
	parts := strings.Split(jws, ".")
	if len(parts) != 3 || parts[1] != "" {
		return fmt.Errorf("not a detached compact JWS: %q", jws)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, []byte(parts[0]+"."+base64.RawURLEncoding.EncodeToString(payload)), sig) {
		return fmt.Errorf("signature does not verify")
	}
	return nil
}
