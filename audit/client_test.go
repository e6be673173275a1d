package audit

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// fixedVerifierKey is the verifier key of testKey(1) under origin.
func fixedVerifierKey(t testing.TB, origin string) string {
	t.Helper()
	vkey, err := note.NewEd25519VerifierKey(origin, testKey(1).Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

// signNote signs text as a C2SP note under name with key, as a log does.
func signNote(t testing.TB, key ed25519.PrivateKey, name, text string) string {
	t.Helper()
	vkey, err := note.NewEd25519VerifierKey(name, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := note.Sign(&note.Note{Text: text}, &noteSigner{name: name, hash: v.KeyHash(), key: key})
	if err != nil {
		t.Fatal(err)
	}
	return string(msg)
}

func TestParseVerifierKey(t *testing.T) {
	const origin = "pay.example.com/audit"
	pub := testKey(1).Public().(ed25519.PublicKey)
	vkey := fixedVerifierKey(t, origin)
	parts := strings.SplitN(vkey, "+", 3)
	raw, _ := base64.StdEncoding.DecodeString(parts[2])
	otherAlg := append([]byte{2}, raw[1:]...)
	for _, c := range []struct {
		name, key string
		ok        bool
	}{
		{"record.pub line", vkey + "\n", true},
		{"bare", vkey, true},
		{"surrounding blanks", " \t" + vkey + " \r\n", true},
		{"empty", "", false},
		{"garbage", "not a key", false},
		{"two parts", origin + "+" + parts[1], false},
		{"wrong key hash", origin + "+00000000+" + parts[2], false},
		{"another origin, same hash", "other.example/audit+" + parts[1] + "+" + parts[2], false},
		{"short key", origin + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(raw[:20]), false},
		{"not Ed25519", origin + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(otherAlg), false},
		{"not base64", origin + "+" + parts[1] + "+" + strings.Repeat("!", 44), false},
		{"private key", "PRIVATE+KEY+" + vkey, false},
		{"space in origin", "pay example+" + parts[1] + "+" + parts[2], false},
		{"inner newline", origin + "\n+" + parts[1] + "+" + parts[2], false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o, p, err := ParseVerifierKey(c.key)
			if !c.ok {
				if !errors.Is(err, ErrBadVerifierKey) {
					t.Fatalf("ParseVerifierKey(%q) = %q, %x, %v; want ErrBadVerifierKey", c.key, o, p, err)
				}
				return
			}
			if err != nil || o != origin || !p.Equal(pub) {
				t.Fatalf("ParseVerifierKey(%q) = %q, %x, %v", c.key, o, p, err)
			}
		})
	}

	// Every function that takes a verifier key classifies a bad one alike.
	if err := VerifyCheckpoint("garbage", Checkpoint{}); !errors.Is(err, ErrBadVerifierKey) || errors.Is(err, ErrTampered) {
		t.Errorf("VerifyCheckpoint with a bad key: %v", err)
	}
	if _, err := ParseCheckpoint("garbage", ""); !errors.Is(err, ErrBadVerifierKey) {
		t.Errorf("ParseCheckpoint with a bad key: %v", err)
	}
}

func TestParseCheckpoint(t *testing.T) {
	ctx := context.Background()
	l := newTestLog(t, newMem(t))
	appendN(t, l, 7, 3)
	cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey := l.VerifierKey()
	other := newTestLogKey(t, testKey(2))
	otherCP, err := other.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	body, _, _ := strings.Cut(cp.Note, "\n\n")
	body += "\n"
	for _, c := range []struct {
		name, key, note string
		want            Checkpoint // zero: must fail with ErrTampered
	}{
		{"served note", vkey, cp.Note, cp},
		{"key with newline", vkey + "\n", cp.Note, cp},
		{"extension line", vkey, signNote(t, testKey(1), l.Origin(), body+"ext\n"),
			Checkpoint{Origin: cp.Origin, TreeSize: cp.TreeSize, RootHash: cp.RootHash}},
		{"co-signed", vkey, cp.Note + "— witness.example AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
			Checkpoint{Origin: cp.Origin, TreeSize: cp.TreeSize, RootHash: cp.RootHash}},
		{"wrong key", vkey, otherCP.Note, Checkpoint{}},
		{"other log's key", other.VerifierKey(), cp.Note, Checkpoint{}},
		{"tampered size", vkey, strings.Replace(cp.Note, "\n7\n", "\n8\n", 1), Checkpoint{}},
		{"tampered root", vkey, strings.Replace(cp.Note, cp.RootHash, otherCP.RootHash, 1), Checkpoint{}},
		{"unsigned body", vkey, body, Checkpoint{}},
		{"empty", vkey, "", Checkpoint{}},
		{"signed, not a checkpoint", vkey, signNote(t, testKey(1), l.Origin(), "hello\n"), Checkpoint{}},
		{"signed, size with leading zero", vkey, signNote(t, testKey(1), l.Origin(), strings.Replace(body, "\n7\n", "\n07\n", 1)), Checkpoint{}},
		{"signed, origin is not the key name", vkey, signNote(t, testKey(1), l.Origin(), "other.example/audit"+body[len(l.Origin()):]), Checkpoint{}},
		{"signed, blank extension", vkey, signNote(t, testKey(1), l.Origin(), body+"\n"), Checkpoint{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseCheckpoint(c.key, c.note)
			if c.want.Origin == "" {
				if !errors.Is(err, ErrTampered) {
					t.Fatalf("ParseCheckpoint = %+v, %v; want ErrTampered", got, err)
				}
				return
			}
			if c.want.Note == "" {
				c.want.Note = c.note
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseCheckpoint = %+v, %v; want %+v", got, err, c.want)
			}
			if err := VerifyCheckpoint(vkey, got); err != nil {
				t.Fatalf("the parsed checkpoint does not verify: %v", err)
			}
		})
	}
}

// FuzzParseVerifierKey: a key that parses round-trips through the note
// format, and nothing panics.
func FuzzParseVerifierKey(f *testing.F) {
	f.Add(fixedVerifierKey(f, "pay.example.com/audit") + "\n")
	f.Add("countersign.local/record/65b60673+1b2e3f4a+AQ==")
	f.Add("a+00000000+")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		origin, pub, err := ParseVerifierKey(s)
		if err != nil {
			if !errors.Is(err, ErrBadVerifierKey) {
				t.Fatalf("error %v is not ErrBadVerifierKey", err)
			}
			return
		}
		if len(pub) != ed25519.PublicKeySize || origin == "" {
			t.Fatalf("parsed %q to %q, %x", s, origin, pub)
		}
		again, err := note.NewEd25519VerifierKey(origin, pub)
		if err != nil {
			t.Fatalf("parsed %q to origin %q the note format refuses: %v", s, origin, err)
		}
		o2, p2, err := ParseVerifierKey(again)
		if err != nil || o2 != origin || !p2.Equal(pub) {
			t.Fatalf("%q re-formats to %q, which parses to %q, %x, %v", s, again, o2, p2, err)
		}
	})
}

// FuzzParseCheckpoint: whatever the bytes, a checkpoint is accepted only
// when it verifies, and its fields are those of the signed text.
func FuzzParseCheckpoint(f *testing.F) {
	const origin = "fuzz.example/audit"
	vkey := fixedVerifierKey(f, origin)
	root := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	f.Add(signNote(f, testKey(1), origin, origin+"\n0\n"+root+"\n"))
	f.Add(signNote(f, testKey(1), origin, origin+"\n12\n"+root+"\next\n"))
	f.Add(origin + "\n0\n" + root + "\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, msg string) {
		cp, err := ParseCheckpoint(vkey, msg)
		if err != nil {
			if !errors.Is(err, ErrTampered) {
				t.Fatalf("error %v is not ErrTampered", err)
			}
			return
		}
		if cp.Origin != origin || cp.Note != msg {
			t.Fatalf("parsed %q to %+v", msg, cp)
		}
		if err := VerifyCheckpoint(vkey, cp); err != nil {
			t.Fatalf("parsed %q to %+v, which does not verify: %v", msg, cp, err)
		}
		text := cp.Origin + "\n" + uitoa(cp.TreeSize) + "\n" + cp.RootHash + "\n"
		if !strings.HasPrefix(msg, text) {
			t.Fatalf("parsed %q to %+v, which is not its text", msg, cp)
		}
	})
}
