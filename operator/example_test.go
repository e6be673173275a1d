package operator_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/memstore"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// exampleKey is a fixed Ed25519 key, so the examples' signatures (Ed25519
// is deterministic) are stable. Real keys come from keyfile.Read.
func exampleKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
}

// fixedNonces gives every nonce as sixteen 0x01 bytes; real signers use
// the default, crypto/rand.
type fixedNonces struct{}

func (fixedNonces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 1
	}
	return len(p), nil
}

func exampleNow() time.Time { return time.Unix(1763800000, 0) }

// A person signs a request; the server verifies it, then refuses the same
// request sent again.
func Example() {
	key := exampleKey()

	// Server side: the trusted public keys, a store for nonces, the public
	// base URL.
	st := memstore.New(nil)
	keys := []operator.PublicKey{{KeyID: "op-alice", Public: key.Public()}}
	v, err := operator.NewVerifier(st, keys, "https://pay.example.com", &operator.VerifierOptions{Now: exampleNow})
	if err != nil {
		panic(err)
	}

	// Client side: the private key and its kid, the server's base URL.
	s, err := operator.NewSigner(key, "op-alice", "https://pay.example.com", &operator.SignerOptions{Now: exampleNow})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"engaged":true,"rationale":"rail reports duplicate charges"}`)
	req := httptest.NewRequest("POST", "/operator/kill-switch", bytes.NewReader(body))
	if err := s.Sign(req, "operator.killSwitch", body); err != nil {
		panic(err)
	}

	id, err := v.Verify(req, "operator.killSwitch", body)
	fmt.Println("accepted:", id.KeyID, err)

	_, err = v.Verify(req, "operator.killSwitch", body)
	var ue *operator.UnauthorizedError
	if errors.As(err, &ue) {
		fmt.Println("again:", ue.Reason, ue.Code())
	}
	// Output:
	// accepted: op-alice <nil>
	// again: replayed_nonce operator.unauthorized
}

// Sign sets the Svc-Operator header. With a fixed clock, fixed nonce bytes
// and an Ed25519 key, the header is a test vector for other
// implementations: key seed 32 × 0x01, base URL https://pay.example.com.
func ExampleSigner_Sign() {
	s, err := operator.NewSigner(exampleKey(), "op-alice", "https://pay.example.com",
		&operator.SignerOptions{Now: exampleNow, Rand: fixedNonces{}})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"intentId":"int_01","rationale":"customer confirmed by phone"}`)
	req, err := http.NewRequest("POST", "http://127.0.0.1:8080/operator/approve", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	if err := s.Sign(req, "operator.approve", body); err != nil {
		panic(err)
	}
	// The header, one member per line for reading.
	fmt.Println(strings.ReplaceAll(req.Header.Get(operator.HeaderName), ", ", ",\n"))
	// Output:
	// keyid="op-alice",
	// ts=1763800000,
	// nonce="AQEBAQEBAQEBAQEBAQEBAQ",
	// sig=:xrgu9pQhIeLbqGu94b4RJknFTEH2RLstI8+d84F06Hjqz3zCnMhEdI82pu3o5/8VqoGpCPVjyzp3EZjFcL8tAQ==:
}

// Verify refuses with a precise, stable reason.
func ExampleVerifier_Verify() {
	key := exampleKey()
	v, err := operator.NewVerifier(memstore.New(nil), []operator.PublicKey{{KeyID: "op-alice", Public: key.Public()}},
		"https://pay.example.com", &operator.VerifierOptions{
			Now: exampleNow,
			OnRefused: func(_ context.Context, r *http.Request, op string, reason operator.Reason, keyID string) {
				fmt.Printf("refused %s %s (%s): %s, keyid %q\n", r.Method, r.URL.Path, op, reason, keyID)
			},
		})
	if err != nil {
		panic(err)
	}
	s, err := operator.NewSigner(key, "op-alice", "https://pay.example.com", &operator.SignerOptions{Now: exampleNow})
	if err != nil {
		panic(err)
	}

	// Signed for one operation, presented for another.
	req := httptest.NewRequest("DELETE", "/webhooks/we_1", nil)
	if err := s.Sign(req, "webhooks.delete", nil); err != nil {
		panic(err)
	}
	_, err = v.Verify(req, "memory.forget", nil)
	fmt.Println(err)

	// No header at all.
	_, err = v.Verify(httptest.NewRequest("POST", "/operator/approve", nil), "operator.approve", nil)
	fmt.Println(err)
	// Output:
	// refused DELETE /webhooks/we_1 (memory.forget): bad_signature, keyid "op-alice"
	// operator: unauthorized: bad_signature: the signature by "op-alice" does not verify over operation memory.forget, DELETE https://pay.example.com/webhooks/we_1, ts, nonce and the body's digest
	// refused POST /operator/approve (operator.approve): missing_header, keyid ""
	// operator: unauthorized: missing_header: the request has no Svc-Operator header
}

// SweepNonces deletes nonce records once their requests are too old to be
// accepted anyway; run it periodically.
func ExampleVerifier_SweepNonces() {
	key := exampleKey()
	now := exampleNow()
	clock := func() time.Time { return now }
	v, err := operator.NewVerifier(memstore.New(nil), []operator.PublicKey{{KeyID: "op-alice", Public: key.Public()}},
		"https://pay.example.com", &operator.VerifierOptions{Now: clock})
	if err != nil {
		panic(err)
	}
	s, err := operator.NewSigner(key, "op-alice", "https://pay.example.com", &operator.SignerOptions{Now: clock})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest("POST", "/operator/breaker-reset", nil)
	if err := s.Sign(req, "operator.resetBreaker", nil); err != nil {
		panic(err)
	}
	if _, err := v.Verify(req, "operator.resetBreaker", nil); err != nil {
		panic(err)
	}

	n, err := v.SweepNonces(context.Background())
	fmt.Println("swept at once:", n, err)
	now = now.Add(2*operator.DefaultWindow + time.Second)
	n, err = v.SweepNonces(context.Background())
	fmt.Println("swept after twice the window:", n, err)
	// Output:
	// swept at once: 0 <nil>
	// swept after twice the window: 1 <nil>
}

func ExampleParseHeader() {
	h, err := operator.ParseHeader(`ts=1763800000, keyid="op-alice", sig=:AAEC:, nonce="AQEBAQEBAQEBAQEBAQEBAQ"`)
	fmt.Println(h.KeyID, h.Timestamp, h.Nonce, h.Signature, err)

	_, err = operator.ParseHeader(`keyid="op-alice", keyid="op-bob"`)
	fmt.Println(err)
	// Output:
	// op-alice 1763800000 AQEBAQEBAQEBAQEBAQEBAQ [0 1 2] <nil>
	// operator: malformed Svc-Operator header: not an RFC 8941 dictionary: at byte 18: member "keyid" given twice
}

func ExampleHeader_MarshalText() {
	h := operator.Header{KeyID: "op-alice", Timestamp: 1763800000, Nonce: "AQEBAQEBAQEBAQEBAQEBAQ", Signature: []byte{0, 1, 2}}
	b, err := h.MarshalText()
	fmt.Println(string(b), err)
	// Output:
	// keyid="op-alice", ts=1763800000, nonce="AQEBAQEBAQEBAQEBAQEBAQ", sig=:AAEC: <nil>
}

func ExampleLoadKeySet() {
	keys, err := operator.LoadKeySet([]byte(`{"keys":[
		{"kty":"OKP","crv":"Ed25519","x":"iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w","kid":"op-alice","use":"sig"}
	]}`))
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Printf("%s %T\n", k.KeyID, k.Public)
	}

	// A private key in the set means it has leaked.
	_, err = operator.LoadKeySet([]byte(`{"keys":[
		{"kty":"OKP","crv":"Ed25519","x":"iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w",
		 "d":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE","kid":"op-alice"}
	]}`))
	fmt.Println(err != nil)
	// Output:
	// op-alice ed25519.PublicKey
	// true
}

// The server reads its key set from the file given as --operator-keys;
// the person holds the private key file written by keygen.
func ExampleReadKeySet() {
	dir, err := os.MkdirTemp("", "operator-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	pub, err := keyfile.MarshalPublic(exampleKey(), "op-alice")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "operators.jwks.json")
	if err := os.WriteFile(path, []byte(`{"keys":[`+string(pub)+`]}`), 0o644); err != nil {
		panic(err)
	}
	keys, err := operator.ReadKeySet(path)
	fmt.Println(len(keys), keys[0].KeyID, err)
	// Output:
	// 1 op-alice <nil>
}

func ExampleCheckRationale() {
	fmt.Println(operator.CheckRationale("  because "))
	fmt.Println(operator.CheckRationale("duplicate charge reported by the customer"))
	// Output:
	// operator: the rationale must have at least 10 characters besides leading and trailing spaces (it has 7)
	// <nil>
}

// A person's key file (written by `countersign keygen operator`) is a
// private JWK; keyfile reads it and NewSigner takes the key and its kid.
func ExampleNewSigner() {
	priv, err := keyfile.Marshal(exampleKey(), "op-alice") // stands in for the file's bytes
	if err != nil {
		panic(err)
	}
	k, err := keyfile.Parse(priv)
	if err != nil {
		panic(err)
	}
	s, err := operator.NewSigner(k.Signer, k.KeyID, "https://pay.example.com/", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.KeyID())

	// The server's side: the trusted set, a nonce store, the same base URL.
	keys := []operator.PublicKey{{KeyID: "op-alice", Public: k.Signer.Public()}}
	_, err = operator.NewVerifier(memstore.New(nil), keys, "https://pay.example.com", nil)
	fmt.Println(err)
	// Output:
	// op-alice
	// <nil>
}

func ExampleKeysFromSet() {
	set, err := jwk.Parse([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"op-alice",` +
		`"x":"iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	keys, err := operator.KeysFromSet(set)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %T\n", keys[0].KeyID, keys[0].Public)
	// Output: op-alice ed25519.PublicKey
}
