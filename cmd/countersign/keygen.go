package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/countersign/countersign/internal/keyfile"
)

const keygenSynopsis = `keygen record|operator|agent --out FILE [--kid NAME] [--alg EdDSA|ES256]

Generates a private key, writes it to FILE as a JWK (mode 0600, never
overwriting an existing file) and prints what others need to know:
  record    the record signing key; prints the note verifier string
            (what record.pub holds) that anyone uses to verify the record
  operator  a person's operator key; prints the public JWK to add to the
            server's --operator-keys JWK Set (EdDSA or ES256)
  agent     an agent's Ed25519 key; prints the agent id (hex public key)
`

func cmdKeygen(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("keygen", keygenSynopsis, stderr)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fs.Usage()
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	kind := args[0]
	out := fs.String("out", "", "`file` to write the private JWK to (required)")
	kid := fs.String("kid", "", "key id written into the JWK (operator keys: how the server names you)")
	alg := fs.String("alg", "EdDSA", "operator keys only: EdDSA (Ed25519) or ES256 (P-256)")
	origin := fs.String("origin", "", "record keys only: checkpoint origin (default derived from the key)")
	if err := parseFlags(fs, args[1:], false); err != nil {
		return err
	}
	if *out == "" {
		fmt.Fprintln(stderr, "keygen: --out is required")
		fs.Usage()
		return errUsage
	}
	switch kind {
	case "record":
		key, err := newRecordKey(*out)
		if err != nil {
			return err
		}
		o := *origin
		if o == "" {
			o = defaultOrigin(key.Public().(ed25519.PublicKey))
		}
		vkey, err := recordVerifierKey(o, key)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\nverifier key (record.pub):\n%s\n", *out, vkey)
	case "operator":
		if *kid == "" {
			return fmt.Errorf("keygen operator: --kid is required (it names you in the record)")
		}
		var signer crypto.Signer
		switch *alg {
		case "EdDSA", "Ed25519":
			_, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			signer = priv
		case "ES256", "P-256":
			priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				return err
			}
			signer = priv
		default:
			return fmt.Errorf("keygen operator: --alg must be EdDSA or ES256, not %q", *alg)
		}
		if err := keyfile.Write(*out, signer, *kid); err != nil {
			return err
		}
		pub, err := keyfile.MarshalPublic(signer, *kid)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\npublic key (add to the server's operator JWK Set):\n%s\n", *out, pub)
	case "agent":
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return err
		}
		id := hex.EncodeToString(pub)
		if err := keyfile.Write(*out, priv, firstNonEmpty(*kid, id)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\nagent id: %s\n", *out, id)
	default:
		fmt.Fprintf(stderr, "keygen: unknown key kind %q\n", kind)
		fs.Usage()
		return errUsage
	}
	return nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
