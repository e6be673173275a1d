package protocol_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
)

// FuzzCanonicalStatement: untrusted statement bytes never panic; every
// refusal is evidence.invalid; what is accepted is valid JSON of at most
// MaxStatement bytes whose subject member is the subject, and a fixed
// point: canonical bytes canonicalize to themselves.
func FuzzCanonicalStatement(f *testing.F) {
	for _, s := range []string{
		`{"subject":"obl_1","delivered":"a report"}`,
		`{"subject":"obl_1","b":[1,2.50,{"z":true,"a":null}],"a":"\u00e9","n":-0,"e":1e2}`,
		" \n{\"subject\":\"obl_1\"}\t",
		`{"subject":"obl\u005f1"}`,
		`{"subject":"obl_1","subject":"obl_2"}`,
		`{"subject":"obl_1"} {}`,
		`{"subject":"obl_1"}]`,
		`{"subject":"obl_1","n":1e400}`,
		`{"subject":"obl_1","s":"\ud800"}`,
		"{\"subject\":\"obl_1\",\"s\":\"\xff\"}",
		`[{"subject":"obl_1"}]`,
		`null`,
		``,
		`{"subject":42}`,
		`{"subject":"obl_1","x":"` + strings.Repeat("x", protocol.MaxStatement) + `"}`,
	} {
		f.Add([]byte(s), "obl_1")
	}
	f.Add([]byte(`{"subject":"<&>\u2028"}`), "<&>\u2028")
	f.Add([]byte(`{"subject":""}`), "")
	f.Fuzz(func(t *testing.T, raw []byte, subject string) {
		c, err := protocol.CanonicalStatement(raw, subject)
		if err != nil {
			if code := errCode(err); code != protocol.CodeEvidenceInvalid {
				t.Fatalf("refused with %q (%v), want %s", code, err, protocol.CodeEvidenceInvalid)
			}
			return
		}
		if !json.Valid(c) || len(c) > protocol.MaxStatement {
			t.Fatalf("accepted %d bytes that are not valid JSON within MaxStatement: %q", len(c), c)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(c, &obj); err != nil {
			t.Fatalf("not an object: %v", err)
		}
		var got string
		if err := json.Unmarshal(obj["subject"], &got); err != nil || got != subject {
			t.Fatalf("canonical subject %s, want %q", obj["subject"], subject)
		}
		again, err := protocol.CanonicalStatement(c, subject)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", c, again, err)
		}
		// The signature input is the context line and the canonical form.
		if s := protocol.EvidenceSigningBytes(c); !bytes.HasSuffix(s, c) || !bytes.HasPrefix(s, []byte("countersign/evidence/v1\n")) {
			t.Fatalf("signing bytes %q", s)
		}
	})
}

func errCode(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}

// FuzzEvidenceSigningInputs: the signed statements about terms (terms,
// offer, rejection) never panic and are deterministic; for the same body,
// parties, ref and seq the three types never produce equal bytes; and
// the bytes are JSON that decodes back to what was signed.
func FuzzEvidenceSigningInputs(f *testing.F) {
	f.Add("neg_1", 1, "aa", "bb", "acct:seller.example", int64(2000), "USD", "sandbox-card", "a report", "sign", "stk_1", int64(1795860000), int64(0))
	f.Add("trm_1", 0, "", "", "", int64(0), "", "", "", "", "", int64(0), int64(0))
	f.Add("\"ref\"", -3, "\u2028", "\xff", "a\",\"type\":\"countersign.reject.v1", int64(-1), "usd", "r", "<\x00>", "pote", "", int64(-62135596800), int64(999999999))
	f.Add("n", 1<<40, "a", "b", "p", int64(1<<53), "EUR", "", "d", "x", "s", int64(253402300800), int64(1))
	f.Fuzz(func(t *testing.T, ref string, seq int, agent, cp, payee string, minor int64, currency, rail, desc, floor, stake string, sec, nsec int64) {
		b := protocol.TermsBody{Payee: payee, Amount: pay.Amount{Minor: minor, Currency: currency}, Rail: rail, Description: desc,
			EvidenceFloor: protocol.EvidenceClass(floor), StakeID: stake, ValidUntil: time.Unix(sec, nsec%1e9).UTC()}
		terms := &protocol.TwoPartyTerms{ID: ref, Agent: agent, Counterparty: cp, TermsBody: b}
		type made struct {
			typ string
			seq int
			out []byte
			err error
		}
		var all []made
		for _, m := range []struct {
			typ string
			seq int
			fn  func() ([]byte, error)
		}{
			{"countersign.terms.v1", 0, func() ([]byte, error) { return protocol.TermsSigningBytes(terms) }},
			{"countersign.offer.v1", seq, func() ([]byte, error) { return protocol.OfferSigningBytes(ref, seq, agent, cp, b) }},
			{"countersign.reject.v1", seq, func() ([]byte, error) { return protocol.RejectionSigningBytes(ref, seq, agent, cp, b) }},
		} {
			out, err := m.fn()
			again, err2 := m.fn()
			if !bytes.Equal(out, again) || (err == nil) != (err2 == nil) {
				t.Fatalf("%s is not deterministic: %q %v, then %q %v", m.typ, out, err, again, err2)
			}
			all = append(all, made{m.typ, m.seq, out, err})
		}
		for i, x := range all {
			if (x.err == nil) != (all[0].err == nil) {
				t.Fatalf("%s err %v, %s err %v: the same body", x.typ, x.err, all[0].typ, all[0].err)
			}
			if x.err != nil {
				continue
			}
			for _, y := range all[i+1:] {
				if bytes.Equal(x.out, y.out) {
					t.Fatalf("%s and %s are the same bytes: %q", x.typ, y.typ, x.out)
				}
			}
			var got struct {
				Type         string `json:"type"`
				Ref          string `json:"ref"`
				Seq          int    `json:"seq"`
				Agent        string `json:"agent"`
				Counterparty string `json:"counterparty"`
				protocol.TermsBody
			}
			if err := json.Unmarshal(x.out, &got); err != nil {
				t.Fatalf("%s: %q is not JSON: %v", x.typ, x.out, err)
			}
			if got.Type != x.typ || got.Seq != x.seq {
				t.Fatalf("%s decodes as type %q seq %d, want %d", x.typ, got.Type, got.Seq, x.seq)
			}
			if !validUTF8(ref, agent, cp, payee, currency, rail, desc, floor, stake) {
				continue // invalid UTF-8 is signed as U+FFFD
			}
			if got.Ref != ref || got.Agent != agent || got.Counterparty != cp || got.Payee != payee || got.Amount != b.Amount ||
				got.Rail != rail || got.Description != desc || got.EvidenceFloor != b.EvidenceFloor || got.StakeID != stake ||
				!got.ValidUntil.Equal(b.ValidUntil) {
				t.Fatalf("%s decodes to %+v, signed from %+v", x.typ, got, b)
			}
		}
	})
}

func validUTF8(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}

// fixedSigner is a note signer with a fixed Ed25519 key, so that the
// checkpoints of the seed corpus verify however often they are rebuilt.
type fixedSigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
}

func (s fixedSigner) Name() string                    { return s.name }
func (s fixedSigner) KeyHash() uint32                 { return s.hash }
func (s fixedSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

// newFixedSigner derives a signer and its verifier key from name.
func newFixedSigner(t testing.TB, name string) (fixedSigner, string) {
	t.Helper()
	seed := sha256.Sum256([]byte("countersign fuzz key " + name))
	key := ed25519.NewKeyFromSeed(seed[:])
	vkey, err := note.NewEd25519VerifierKey(name, key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return fixedSigner{name: name, hash: v.KeyHash(), key: key}, vkey
}

// inclusionWorld is a log of four records with fixed keys, the record
// the proofs are about (index 2), and a witness.
type inclusionWorld struct {
	logKey, witnessKey string
	log, witness       fixedSigner
	data               []byte
	index              uint64
	hashes             []string
	text               string // the checkpoint's signed text
	signed, cosigned   string // the checkpoint signed by the log; and by the witness too
}

func newInclusionWorld(t testing.TB) *inclusionWorld {
	t.Helper()
	w := &inclusionWorld{data: []byte(`{"delivered":"a report","subject":"obl_1"}`), index: 2}
	w.log, w.logKey = newFixedSigner(t, "log.example/fuzz")
	w.witness, w.witnessKey = newFixedSigner(t, "witness.example/w1")
	records := [][]byte{[]byte("first"), []byte("second"), w.data, []byte("last")}
	var stored []tlog.Hash
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, k := range idx {
			out[i] = stored[k]
		}
		return out, nil
	})
	for i, r := range records {
		h, err := tlog.StoredHashes(int64(i), r, hr)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, h...)
	}
	n := int64(len(records))
	root, err := tlog.TreeHash(n, hr)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := tlog.ProveRecord(n, int64(w.index), hr)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range proof {
		w.hashes = append(w.hashes, base64.StdEncoding.EncodeToString(h[:]))
	}
	w.text = w.log.name + "\n" + strconv.FormatInt(n, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	for _, c := range []struct {
		out     *string
		signers []note.Signer
	}{{&w.signed, []note.Signer{w.log}}, {&w.cosigned, []note.Signer{w.log, w.witness}}} {
		msg, err := note.Sign(&note.Note{Text: w.text}, c.signers...)
		if err != nil {
			t.Fatal(err)
		}
		*c.out = string(msg)
	}
	return w
}

// FuzzVerifyLogInclusion: with fixed keys, fuzzed checkpoints, indexes,
// proof hashes (one per line) and records never panic, every failure is
// audit.ErrTampered, and nothing verifies but the genuine proof of the
// genuine record: the log's signed text, its index, its hashes. A witness
// is reported as co-signer only when its signature is in the checkpoint.
func FuzzVerifyLogInclusion(f *testing.F) {
	w := newInclusionWorld(f)
	genuine := strings.Join(w.hashes, "\n")
	f.Add(w.cosigned, w.index, genuine, w.data)
	f.Add(w.signed, w.index, genuine, w.data)
	f.Add(w.cosigned, w.index+1, genuine, w.data)
	f.Add(w.cosigned, uint64(1<<63), genuine, w.data)
	f.Add(w.signed, w.index, w.hashes[0], w.data)
	f.Add(w.signed, w.index, genuine+"\n"+w.hashes[0], w.data)
	f.Add(w.signed, w.index, genuine, []byte("first"))
	f.Add(strings.Replace(w.cosigned, "\n4\n", "\n5\n", 1), w.index, genuine, w.data)
	f.Add(w.text, w.index, genuine, w.data)
	f.Add("", uint64(0), "", []byte(nil))
	f.Fuzz(func(t *testing.T, checkpoint string, index uint64, hashLines string, data []byte) {
		var hashes []string
		if hashLines != "" {
			hashes = strings.Split(hashLines, "\n")
		}
		cosigners, err := audit.VerifyLogInclusion(checkpoint, w.logKey, []string{w.witnessKey}, data, index, hashes)
		isGenuine := (checkpoint == w.signed || checkpoint == w.cosigned) && index == w.index && hashLines == genuine && bytes.Equal(data, w.data)
		if err != nil {
			if isGenuine {
				t.Fatalf("the genuine proof is refused: %v", err)
			}
			if !errors.Is(err, audit.ErrTampered) {
				t.Fatalf("a failure that is not audit.ErrTampered: %v", err)
			}
			return
		}
		// Accepted: it must be the genuine proof, however the note
		// around its text is spelled.
		logV, err := note.NewVerifier(w.logKey)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open([]byte(checkpoint), note.VerifierList(logV))
		if err != nil {
			t.Fatalf("accepted a checkpoint the log did not sign: %v", err)
		}
		if n.Text != w.text || index != w.index || !bytes.Equal(data, w.data) || len(hashes) != len(w.hashes) {
			t.Fatalf("accepted text %q index %d data %q hashes %q", n.Text, index, data, hashes)
		}
		for i, h := range hashes {
			a, errA := base64.StdEncoding.DecodeString(h)
			b, _ := base64.StdEncoding.DecodeString(w.hashes[i])
			if errA != nil || !bytes.Equal(a, b) {
				t.Fatalf("accepted hash %d %q, genuine %q", i, h, w.hashes[i])
			}
		}
		witV, err := note.NewVerifier(w.witnessKey)
		if err != nil {
			t.Fatal(err)
		}
		_, werr := note.Open([]byte(checkpoint), note.VerifierList(witV))
		switch {
		case werr == nil && !slices.Equal(cosigners, []string{w.witness.name}):
			t.Fatalf("co-signed by the witness, reported %q", cosigners)
		case werr != nil && len(cosigners) != 0:
			t.Fatalf("not co-signed by the witness, reported %q", cosigners)
		}
		if checkpoint == w.cosigned && !slices.Equal(cosigners, []string{w.witness.name}) {
			t.Fatalf("the genuine co-signed checkpoint reports %q", cosigners)
		}
	})
}

// TestVerifyLogInclusionSeeds keeps the committed corpus of
// FuzzVerifyLogInclusion honest: its genuine seeds verify with the fixed
// keys (the keys are derived, not random), the tampered ones do not.
func TestVerifyLogInclusionSeeds(t *testing.T) {
	w := newInclusionWorld(t)
	dir := filepath.Join("testdata", "fuzz", "FuzzVerifyLogInclusion")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		args := readSeed(t, filepath.Join(dir, e.Name()))
		if len(args) != 4 {
			t.Fatalf("%s: %d values, want 4", e.Name(), len(args))
		}
		idx, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(args[1], "uint64("), ")"), 10, 64)
		if err != nil {
			t.Fatalf("%s: index %s", e.Name(), args[1])
		}
		cp, hashes, data := unquoteSeed(t, args[0], "string("), unquoteSeed(t, args[2], "string("), unquoteSeed(t, args[3], "[]byte(")
		var hs []string
		if hashes != "" {
			hs = strings.Split(hashes, "\n")
		}
		_, err = audit.VerifyLogInclusion(cp, w.logKey, []string{w.witnessKey}, []byte(data), idx, hs)
		if want := strings.HasPrefix(e.Name(), "valid-"); (err == nil) != want {
			t.Errorf("%s: err %v, want valid %v", e.Name(), err, want)
		}
		seen++
	}
	if seen < 3 {
		t.Errorf("%d seeds, want a few", seen)
	}
}

// readSeed returns the values of a "go test fuzz v1" file, one a line.
func readSeed(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: header %q", path, lines[0])
	}
	return lines[1:]
}

func unquoteSeed(t *testing.T, v, prefix string) string {
	t.Helper()
	q, ok := strings.CutPrefix(v, prefix)
	if !ok || !strings.HasSuffix(q, ")") {
		t.Fatalf("seed value %q, want %s...)", v, prefix)
	}
	s, err := strconv.Unquote(q[:len(q)-1])
	if err != nil {
		t.Fatalf("seed value %q: %v", v, err)
	}
	return s
}
