package auth_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/store/memstore"
)

// A client signs a proof for each request; the server checks it against
// the request and the thumbprint the credential is bound to. The same
// proof a second time is a replay.
func ExampleDPoPVerifier_Verify() {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)) // the client's DPoP key
	credential := "svc_ak_01JDQ3V6Z0000000000000000_c2VjcmV0"

	// At issuance, the key is bound to the thumbprint (Key.JKT).
	jkt, err := auth.Thumbprint(key.Public())
	if err != nil {
		panic(err)
	}

	// Client: Authorization: DPoP <credential>, DPoP: <proof>.
	proof, err := auth.NewDPoPProof(key, "POST", "https://api.example.com/pay", credential, now)
	if err != nil {
		panic(err)
	}

	// Server.
	v := auth.NewDPoPVerifier(&memstore.Store{}, &auth.DPoPOptions{Now: func() time.Time { return now }})
	err = v.Verify(ctx, proof, "POST", "https://api.example.com/pay", credential, jkt)
	fmt.Println("first use:", err)

	err = v.Verify(ctx, proof, "POST", "https://api.example.com/pay", credential, jkt)
	var de *auth.DPoPError
	if errors.As(err, &de) {
		fmt.Println("second use:", de.Reason, errors.Is(err, auth.ErrInvalid))
		fmt.Println("WWW-Authenticate:", de.WWWAuthenticate())
	}
	// Output:
	// first use: <nil>
	// second use: jti_replayed true
	// WWW-Authenticate: DPoP algs="EdDSA ES256", error="invalid_dpop_proof", error_description="jti_replayed"
}

// Expired replay records are deleted by a periodic sweep.
func ExampleDPoPVerifier_SweepDPoP() {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	jkt, _ := auth.Thumbprint(key.Public())
	v := auth.NewDPoPVerifier(&memstore.Store{}, &auth.DPoPOptions{Now: clock})
	for range 3 {
		proof, _ := auth.NewDPoPProof(key, "GET", "https://api.example.com/usage", "cred", now)
		if err := v.Verify(ctx, proof, "GET", "https://api.example.com/usage", "cred", jkt); err != nil {
			panic(err)
		}
	}
	n, _ := v.SweepDPoP(ctx)
	fmt.Println("swept at once:", n)
	now = now.Add(2 * time.Minute) // past iat + window
	n, _ = v.SweepDPoP(ctx)
	fmt.Println("swept two minutes later:", n)
	// Output:
	// swept at once: 0
	// swept two minutes later: 3
}

// The thumbprint of the RFC 8037 example key.
func ExampleThumbprint() {
	x := []byte{0xd7, 0x5a, 0x98, 0x01, 0x82, 0xb1, 0x0a, 0xb7, 0xd5, 0x4b, 0xfe, 0xd3, 0xc9, 0x64, 0x07, 0x3a,
		0x0e, 0xe1, 0x72, 0xf3, 0xda, 0xa6, 0x23, 0x25, 0xaf, 0x02, 0x1a, 0x68, 0xf7, 0x07, 0x51, 0x1a}
	tp, err := auth.Thumbprint(ed25519.PublicKey(x))
	if err != nil {
		panic(err)
	}
	fmt.Println(tp)
	// Output:
	// kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k
}
