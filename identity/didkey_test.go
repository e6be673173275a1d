package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// W3C CCG did:key test vectors for Ed25519 (w3c-ccg/did-method-key,
// test-vectors/ed25519-x25519.json): seed, did:key, publicKeyBase58.
var didKeyVectors = []struct{ seed, did, base58 string }{
	{"0000000000000000000000000000000000000000000000000000000000000000", "did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp", "4zvwRjXUKGfvwnParsHAS3HuSVzV5cA4McphgmoCtajS"},
	{"0000000000000000000000000000000000000000000000000000000000000001", "did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG", "6ASf5EcmmEHTgDJ4X4ZT5vT6iHVJBXPg5AN5YoTCpGWt"},
	{"0000000000000000000000000000000000000000000000000000000000000002", "did:key:z6MknGc3ocHs3zdPiJbnaaqDi58NGb4pk1Sp9WxWufuXSdxf", "8pM1DN3RiT8vbom5u1sNryaNT1nyL8CTTW3b5PwWXRBH"},
	{"0000000000000000000000000000000000000000000000000000000000000003", "did:key:z6MkvqoYXQfDDJRv8L4wKzxYeuKyVZBfi9Qo6Ro8MiLH3kDQ", "HPYVwAQmskwT1qEEeRzhoomyfyupJGASQQtCXSNG8XS2"},
	{"0000000000000000000000000000000000000000000000000000000000000004", "did:key:z6MkwW6aqMnjgrhJXFUko3NnZPGzVpkNzhYK7yEhnsibmLwL", "J3qYF7YJMKCqQke47UQwiHizgFUXapHxRxKmxbkar89x"},
}

func TestDIDKeyVectors(t *testing.T) {
	for _, v := range didKeyVectors {
		seed, _ := hex.DecodeString(v.seed)
		pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
		raw, err := base58Decode(v.base58)
		if err != nil || !bytes.Equal(raw, pub) {
			t.Fatalf("publicKeyBase58 %s decodes to %x, %v; want %x", v.base58, raw, err, pub)
		}
		if got := base58Encode(pub); got != v.base58 {
			t.Errorf("base58Encode = %s, want %s", got, v.base58)
		}
		if got := DIDKey(pub); got != v.did {
			t.Errorf("DIDKey(%x) = %s, want %s", pub, got, v.did)
		}
		for _, id := range []string{v.did, hex.EncodeToString(pub), strings.ToUpper(hex.EncodeToString(pub))} {
			k, err := PublicKeyOf(id)
			if err != nil || !bytes.Equal(k, pub) {
				t.Errorf("PublicKeyOf(%s) = %x, %v; want %x", id, k, err, pub)
			}
		}
	}
}

func TestPublicKeyOfRefuses(t *testing.T) {
	good := didKeyVectors[0].did
	for _, id := range []string{
		"", "agent", strings.Repeat("0", 63), strings.Repeat("0", 65), strings.Repeat("g", 64),
		"did:key:" + good[len("did:key:"):][1:], // no multibase 'z'
		"did:key:z", "did:key:z0OIl",
		"did:key:z1" + good[len("did:key:z"):], // a leading zero byte
		good[:len(good)-1],                     // truncated: 33-byte payload
		good + "1",                             // one byte longer
		"did:key:zDnaerDaTF5BXEavCrfRZEk316dpbLsfPDZ3WJ5hRTPFU2169", // P-256
		"did:key:z" + strings.Repeat("2", 70),
		"did:web:example.com",
		"DID:KEY:" + good[len("did:key:"):],
	} {
		if k, err := PublicKeyOf(id); err == nil || !errors.Is(err, ErrAgentID) {
			t.Errorf("PublicKeyOf(%q) = %x, %v; want ErrAgentID", id, k, err)
		}
	}
	if DIDKey(make([]byte, 31)) != "" {
		t.Error("DIDKey of a 31-byte key is not empty")
	}
}

func TestBase58(t *testing.T) {
	for _, c := range []struct{ raw, enc string }{
		{"", ""}, {"00", "1"}, {"0000", "11"}, {"61", "2g"}, {"626262", "a3gV"},
		{"00000000000000000000", "1111111111"}, {"516b6fcd0f", "ABnLTmg"},
		{"ecac89cad93923c02321", "EJDM8drfXA6uyA"},
	} {
		raw, _ := hex.DecodeString(c.raw)
		if got := base58Encode(raw); got != c.enc {
			t.Errorf("encode %s = %q, want %q", c.raw, got, c.enc)
		}
		got, err := base58Decode(c.enc)
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("decode %q = %x, %v; want %s", c.enc, got, err, c.raw)
		}
	}
	if _, err := base58Decode("0"); err == nil {
		t.Error("'0' accepted")
	}
}

func TestDIDDocument(t *testing.T) {
	v := didKeyVectors[0]
	msid := v.did[len("did:key:"):]
	seed, _ := hex.DecodeString(v.seed)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	for _, id := range []string{v.did, hex.EncodeToString(pub)} {
		doc, err := DIDDocument(id, "https://agent.example/.well-known/agent-disclosure")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := json.Marshal(doc)
		want := `{"@context":["https://www.w3.org/ns/did/v1","https://w3id.org/security/suites/ed25519-2020/v1"],` +
			`"id":"` + v.did + `","verificationMethod":[{"id":"` + v.did + `#` + msid + `","type":"Ed25519VerificationKey2020",` +
			`"controller":"` + v.did + `","publicKeyMultibase":"` + msid + `"}],"authentication":["` + v.did + `#` + msid + `"],` +
			`"assertionMethod":["` + v.did + `#` + msid + `"],"service":[{"id":"` + v.did + `#agent-disclosure","type":"AgentDisclosure",` +
			`"serviceEndpoint":"https://agent.example/.well-known/agent-disclosure"}]}`
		if string(got) != want {
			t.Errorf("DIDDocument(%s) =\n%s\nwant\n%s", id, got, want)
		}
	}
	doc, err := DIDDocument(v.did, "")
	if err != nil || doc.Service != nil {
		t.Errorf("no endpoint: %+v, %v", doc, err)
	}
	if _, err := DIDDocument("nope", ""); !errors.Is(err, ErrAgentID) {
		t.Errorf("bad agentId: %v", err)
	}
}
