package verifyvectors

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/webhook"
)

var update = flag.Bool("update", false, "rewrite the vector files in testdata from the code")

// vectorFile is one file of testdata. A deterministic one is made from
// fixed inputs only and must equal what the code produces now, byte for
// byte; the others carry random ids and salts and are checked by
// verification alone.
type vectorFile struct {
	name          string
	v             any
	deterministic bool
}

func encodeVector(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeVector[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestVectors produces every artifact with the project's code, compares
// the deterministic ones with testdata byte for byte, and verifies both the
// stored vectors and the fresh artifacts twice: with the recipe of
// docs/VERIFYING.md implemented from the standard library alone
// (recipe_test.go), and with the project's own verifiers. It also checks
// that every Ed25519 signature the code made is exactly the signature of
// the bytes the document says are signed (Ed25519 is deterministic).
//
// After an intended change of a format: update docs/VERIFYING.md, run
// go test ./internal/verifyvectors -update, and review the diff.
func TestVectors(t *testing.T) {
	rb := buildRecord(t)
	w := newWorld(t)
	res, proof := w.payment(t)
	arts := w.memoryArtifacts(t)
	files := []vectorFile{
		{"record.json", makeRecordVector(t, rb), true},
		{"checkpoint.json", makeCheckpointVector(t, rb), true},
		{"proofs.json", makeProofsVector(t, rb), true},
		{"statement.json", makeStatementVector(t, rb), true},
		{"webhook.json", makeWebhookVector(t, rb), true},
		{"meter.json", makeMeterVector(t), true},
		{"adp.json", makeADPVector(t), true},
		{"receipt.json", makeReceiptVector(t, w, res), false},
		{"enforcement-proof.json", makeEnforcementVector(t, w, proof), false},
		{"memory.json", makeMemoryVector(t, w, arts), false},
	}
	stored := map[string][]byte{}
	fresh := map[string][]byte{}
	for _, f := range files {
		b := encodeVector(t, f.v)
		fresh[f.name] = b
		path := filepath.Join("testdata", f.name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		disk, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/verifyvectors -update to write the vectors)", err)
		}
		stored[f.name] = disk
		if f.deterministic && !bytes.Equal(disk, b) {
			t.Errorf("%s: the code no longer produces the stored vector. If the format change is intended, "+
				"update docs/VERIFYING.md, run go test ./internal/verifyvectors -update and review the diff", path)
		}
	}

	for _, src := range []struct {
		name  string
		files map[string][]byte
	}{{"stored", stored}, {"fresh", fresh}} {
		t.Run(src.name, func(t *testing.T) {
			f := src.files
			rec := decodeVector[recordVector](t, f["record.json"])
			cp := decodeVector[checkpointVector](t, f["checkpoint.json"])
			t.Run("record", func(t *testing.T) { checkRecord(t, rec) })
			t.Run("checkpoint", func(t *testing.T) { checkCheckpoint(t, cp, rec) })
			t.Run("proofs", func(t *testing.T) {
				checkProofs(t, decodeVector[proofsVector](t, f["proofs.json"]), rec, cp)
			})
			t.Run("statement", func(t *testing.T) { checkStatement(t, decodeVector[statementVector](t, f["statement.json"])) })
			t.Run("webhook", func(t *testing.T) { checkWebhook(t, decodeVector[webhookVector](t, f["webhook.json"])) })
			t.Run("meter", func(t *testing.T) { checkMeter(t, decodeVector[meterVector](t, f["meter.json"])) })
			t.Run("adp", func(t *testing.T) { checkADP(t, decodeVector[adpVector](t, f["adp.json"])) })
			t.Run("receipt", func(t *testing.T) { checkReceipt(t, decodeVector[receiptVector](t, f["receipt.json"])) })
			t.Run("enforcement", func(t *testing.T) {
				checkEnforcement(t, decodeVector[enforcementVector](t, f["enforcement-proof.json"]))
			})
			t.Run("memory", func(t *testing.T) { checkMemory(t, decodeVector[memoryVector](t, f["memory.json"])) })
		})
	}
}

// ---- helpers ----

func mustKey(t testing.TB, vkey string) recordKey {
	t.Helper()
	k, err := parseRecordKey(vkey)
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	return k
}

func mustParse(t testing.TB, raw []byte) jv {
	t.Helper()
	v, err := parseJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordPriv is the record key, from the seed the vectors publish.
func recordPriv(t testing.TB, k keyInfo) ed25519.PrivateKey {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(unhex(t, k.SeedHex))
	if hex.EncodeToString(priv.Public().(ed25519.PublicKey)) != k.PublicKeyHex {
		t.Fatalf("seed %s does not give public key %s", k.SeedHex, k.PublicKeyHex)
	}
	return priv
}

// tamper replaces the first occurrence of old in raw, which must be there.
func tamper(t testing.TB, raw []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(raw, []byte(old)) {
		t.Fatalf("tamper: %q not found", old)
	}
	return bytes.Replace(raw, []byte(old), []byte(new), 1)
}

// ---- per kind ----

func checkRecord(t *testing.T, v recordVector) {
	k := mustKey(t, v.RecordKey.VerifierKey)
	priv := recordPriv(t, v.RecordKey)
	if !bytes.Equal(k.pub, priv.Public().(ed25519.PublicKey)) {
		t.Fatal("the verifier key does not carry the record key")
	}
	cv := audit.NewChainVerifier(k.pub, true)
	prev := strings.Repeat("0", 64)
	for i, ev := range v.Entries {
		e := mustParse(t, ev.Entry)
		h, body, err := entryHash(e)
		if err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		if string(body) != ev.HashInput || hex.EncodeToString(body) != ev.HashInputHex {
			t.Errorf("entry %d: the document's hash input differs from the vector's", i+1)
		}
		if hex.EncodeToString(h[:]) != ev.Hash || e.s("hash") != ev.Hash {
			t.Errorf("entry %d: hash", i+1)
		}
		if seq, _ := e.u("seq"); seq != uint64(i+1) || e.s("prev") != prev {
			t.Errorf("entry %d: seq or prev does not chain", i+1)
		}
		prev = ev.Hash
		leaf := leafHash(h)
		if ev.LeafHashInputHex != "00"+ev.Hash || base64.StdEncoding.EncodeToString(leaf[:]) != ev.LeafHashBase64 {
			t.Errorf("entry %d: leaf hash", i+1)
		}
		if sig := e.s("sig"); sig != "" {
			if err := checkEntrySig(k, h, sig); err != nil {
				t.Errorf("entry %d: %v", i+1, err)
			}
			if ev.SigInputHex != ev.Hash || sig != base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, h[:])) {
				t.Errorf("entry %d: the code's signature is not the signature of the 32 hash bytes", i+1)
			}
		}
		// The code's verifier agrees.
		var ae audit.Entry
		if err := json.Unmarshal(ev.Entry, &ae); err != nil {
			t.Fatal(err)
		}
		if err := cv.Add(ae); err != nil {
			t.Errorf("entry %d: audit.ChainVerifier: %v", i+1, err)
		}
		if ae.Sig != "" {
			if err := audit.VerifyEntry(v.RecordKey.VerifierKey, ae); err != nil {
				t.Errorf("entry %d: audit.VerifyEntry: %v", i+1, err)
			}
		}
	}
	// A changed byte of data breaks the hash, in the recipe and in the code.
	bad := tamper(t, v.Entries[2].Entry, "1250", "1251")
	if _, _, err := entryHash(mustParse(t, bad)); err == nil {
		t.Error("recipe: a tampered entry still hashes to its hash")
	}
	code := audit.NewChainVerifier(nil, false)
	for i, raw := range [][]byte{v.Entries[0].Entry, v.Entries[1].Entry, bad} {
		var ae audit.Entry
		if err := json.Unmarshal(raw, &ae); err != nil {
			t.Fatal(err)
		}
		if err := code.Add(ae); (err != nil) != (i == 2) {
			t.Errorf("code: entry %d of the tampered chain: %v", i+1, err)
		}
	}
}

// treeHash is RFC 6962's Merkle tree hash of leaves.
func treeHash(leaves [][32]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return nodeHash(treeHash(leaves[:k]), treeHash(leaves[k:]))
}

func recordLeaves(t testing.TB, rec recordVector, n int) [][32]byte {
	var leaves [][32]byte
	for _, ev := range rec.Entries[:n] {
		var h [32]byte
		copy(h[:], unhex(t, ev.Hash))
		leaves = append(leaves, leafHash(h))
	}
	return leaves
}

func checkCheckpoint(t *testing.T, v checkpointVector, rec recordVector) {
	k := mustKey(t, v.RecordKey.VerifierKey)
	priv := recordPriv(t, v.RecordKey)
	khIn := append(append([]byte(k.name+"\n"), 0x01), k.pub...)
	kh := sha256.Sum256(khIn)
	if hex.EncodeToString(khIn) != v.KeyHashInputHex || hex.EncodeToString(kh[:4]) != v.KeyHashHex || strconv.FormatUint(uint64(k.hash), 16) != strings.TrimLeft(v.KeyHashHex, "0") {
		t.Error("key hash")
	}
	cp := mustParse(t, v.Checkpoint)
	th, err := openCheckpoint(k, cp)
	if err != nil {
		t.Fatal(err)
	}
	text, sig, err := openNote(k, cp.s("note"))
	if err != nil {
		t.Fatal(err)
	}
	if text != v.SignedText || hex.EncodeToString([]byte(text)) != v.SignedTextHex || hex.EncodeToString(sig) != v.SignatureHex {
		t.Error("signed text or signature differs from the vector")
	}
	if !bytes.Equal(sig, ed25519.Sign(priv, []byte(text))) {
		t.Error("the code's checkpoint signature is not the signature of the checkpoint text")
	}
	want := origin + "\n" + strconv.Itoa(len(rec.Entries)) + "\n" + base64.StdEncoding.EncodeToString(th.root[:]) + "\n"
	if text != want {
		t.Errorf("checkpoint text %q, the document says %q", text, want)
	}
	if root := treeHash(recordLeaves(t, rec, len(rec.Entries))); root != th.root || hex.EncodeToString(root[:]) != v.RootHashHex {
		t.Error("the root is not the RFC 6962 tree hash of the entries' leaves")
	}
	var acp audit.Checkpoint
	if err := json.Unmarshal(v.Checkpoint, &acp); err != nil {
		t.Fatal(err)
	}
	if err := audit.VerifyCheckpoint(v.RecordKey.VerifierKey, acp); err != nil {
		t.Errorf("audit.VerifyCheckpoint: %v", err)
	}
	// Another size under the same signature does not verify.
	bad := mustParse(t, tamper(t, v.Checkpoint, "\\n7\\n", "\\n6\\n"))
	if _, err := openCheckpoint(k, bad); err == nil {
		t.Error("recipe: a checkpoint with a changed size verifies")
	}
}

func checkProofs(t *testing.T, v proofsVector, rec recordVector, cpv checkpointVector) {
	k := mustKey(t, v.VerifierKey)
	wantRoot := unhex(t, cpv.RootHashHex)
	for i, raw := range v.Inclusion {
		e := rec.Entries[i].Entry
		_, th, err := verifyEntryInclusion(k, mustParse(t, e), mustParse(t, raw))
		if err != nil {
			t.Errorf("inclusion of seq %d: %v", i+1, err)
		} else if !bytes.Equal(th.root[:], wantRoot) {
			t.Errorf("inclusion of seq %d is against another root", i+1)
		}
		var ae audit.Entry
		var ap audit.InclusionProof
		if err := json.Unmarshal(e, &ae); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &ap); err != nil {
			t.Fatal(err)
		}
		if err := audit.VerifyInclusion(v.VerifierKey, ae, ap); err != nil {
			t.Errorf("audit.VerifyInclusion of seq %d: %v", i+1, err)
		}
		if len(ap.Hashes) > 1 {
			// The path in another order does not verify.
			ap.Hashes[0], ap.Hashes[1] = ap.Hashes[1], ap.Hashes[0]
			if _, _, err := verifyEntryInclusion(k, mustParse(t, e), mustParse(t, mustJSON(t, ap))); err == nil {
				t.Errorf("recipe: a reordered inclusion path of seq %d verifies", i+1)
			}
		}
	}
	for _, c := range v.Consistency {
		if err := verifyConsistencyProof(k, mustParse(t, c.Proof), mustParse(t, c.Old)); err != nil {
			t.Errorf("consistency: %v", err)
		}
		var ap audit.ConsistencyProof
		var old audit.Checkpoint
		if err := json.Unmarshal(c.Proof, &ap); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(c.Old, &old); err != nil {
			t.Fatal(err)
		}
		if err := audit.VerifyConsistency(v.VerifierKey, ap, old); err != nil {
			t.Errorf("audit.VerifyConsistency %d→%d: %v", ap.From, ap.To, err)
		}
		// The old root recomputed from the record's first entries.
		th, _ := openCheckpoint(k, mustParse(t, c.Old))
		if root := treeHash(recordLeaves(t, rec, int(th.size))); root != th.root {
			t.Errorf("old checkpoint %d does not state the tree of the first entries", th.size)
		}
		ap.Hashes[0] = base64.StdEncoding.EncodeToString(make([]byte, 32))
		if err := verifyConsistencyProof(k, mustParse(t, mustJSON(t, ap)), mustParse(t, c.Old)); err == nil {
			t.Error("recipe: a damaged consistency proof verifies")
		}
	}
}

func checkStatement(t *testing.T, v statementVector) {
	k := mustKey(t, v.VerifierKey)
	var d [32]byte
	copy(d[:], unhex(t, v.DigestHex))
	msg := statementMessage(v.Purpose, d)
	if hex.EncodeToString(msg) != v.MessageHex {
		t.Error("message differs from the vector")
	}
	if err := verifyStatement(k, v.Purpose, d, v.Signature); err != nil {
		t.Error(err)
	}
	if sig := unhex(t, v.SignatureHex); base64.RawURLEncoding.EncodeToString(sig) != v.Signature {
		t.Error("signatureHex is not the signature")
	}
	if err := audit.VerifyStatement(v.VerifierKey, v.Purpose, d, v.Signature); err != nil {
		t.Errorf("audit.VerifyStatement: %v", err)
	}
	// The digest is signed as its 32 raw bytes, not as hex text, and the
	// purpose is part of what is signed.
	hexMsg := append([]byte("countersign statement v1\n"+v.Purpose+"\n"), v.DigestHex...)
	if ed25519.Verify(k.pub, hexMsg, unhex(t, v.SignatureHex)) {
		t.Error("the statement verifies over the hex digest")
	}
	if verifyStatement(k, "memory.page", d, v.Signature) == nil {
		t.Error("the statement verifies for another purpose")
	}
}

func checkWebhook(t *testing.T, v webhookVector) {
	body := []byte(v.Body)
	ts := strconv.FormatInt(v.Timestamp, 10)
	if hex.EncodeToString([]byte(ts+"."+v.Body)) != v.MACInput {
		t.Error("MAC input differs from the vector")
	}
	for i, s := range v.Secrets {
		if got, err := verifyWebhook(body, v.Header, s); err != nil || got != v.Timestamp {
			t.Errorf("secret %d: %v", i, err)
		}
		if webhookMAC(s, ts, body) != v.V1[i] {
			t.Errorf("secret %d: v1 is not HMAC-SHA256(secret, t.body)", i)
		}
	}
	if v.Header != "t="+ts+",v1="+strings.Join(v.V1, ",v1=") {
		t.Error("header layout")
	}
	if err := webhook.Verify(body, v.Header, v.Secrets[:1], 0, time.Unix(v.Timestamp, 0)); err != nil {
		t.Errorf("webhook.Verify: %v", err)
	}
	// The entry the event carries verifies on its own terms.
	ev := mustParse(t, body)
	e, _ := ev.get("entry")
	if _, _, err := entryHash(e); err != nil {
		t.Errorf("the event's entry: %v", err)
	}
	if _, err := verifyWebhook(tamper(t, body, "1250", "1251"), v.Header, v.Secrets[0]); err == nil {
		t.Error("recipe: a changed body verifies")
	}
}

func checkMeter(t *testing.T, v meterVector) {
	var prev []byte
	var lines []protocol.UsageLine
	for i, l := range v.Lines {
		in := meterStep(prev, int64(i+1), l)
		if hex.EncodeToString(in) != v.Steps[i].InputHex {
			t.Errorf("step %d input", i+1)
		}
		h := sha256.Sum256(in)
		if hex.EncodeToString(h[:]) != v.Steps[i].Head {
			t.Errorf("step %d head", i+1)
		}
		prev = h[:]
		lines = append(lines, protocol.UsageLine{Units: l.Units, UsageID: l.UsageID})
	}
	if meterHead(v.Lines) != v.Head || protocol.MeterChainHead(lines) != v.Head {
		t.Error("chain head")
	}
}

func checkADP(t *testing.T, v adpVector) {
	keys := map[string]ed25519.PrivateKey{}
	for _, k := range v.Keys {
		keys[hex.EncodeToString(unhex(t, k.PublicKeyHex))] = recordPriv(t, k)
	}
	now, err := time.Parse(time.RFC3339, v.Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			priv := keys[c.SigningKeyHex]
			if priv == nil {
				t.Fatalf("no key %s", c.SigningKeyHex)
			}
			if hex.EncodeToString([]byte(c.Disclosure)) != c.DisclosureHex {
				t.Error("disclosureHex")
			}
			for _, env := range []struct{ name, raw string }{{"v1", c.V1}, {"jws", c.JWS}} {
				doc, err := verifyADP([]byte(env.raw))
				if err != nil {
					t.Errorf("%s: %v", env.name, err)
				} else if string(doc) != c.Disclosure {
					t.Errorf("%s: the signed disclosure differs from the vector's", env.name)
				}
				if d := identity.Verify([]byte(env.raw), identity.Policy{Now: now}); d.Outcome != identity.OutcomeTransact {
					t.Errorf("%s: identity.Verify: %s %v", env.name, d.Outcome, d.Failed)
				}
			}
			if hex.EncodeToString(ed25519.Sign(priv, []byte(c.Disclosure))) != c.V1SignatureHex {
				t.Error("v1: the code's signature is not the signature of the canonical disclosure")
			}
			wantInput := "eyJhbGciOiJFZERTQSIsInR5cCI6ImFwcGxpY2F0aW9uL2FkcCtqc29uIn0." + base64.RawURLEncoding.EncodeToString([]byte(c.Disclosure))
			if c.JWSSigningInput != wantInput {
				t.Error("jws: signing input is not protected.payload")
			}
			if hex.EncodeToString(ed25519.Sign(priv, []byte(c.JWSSigningInput))) != c.JWSSignatureHex {
				t.Error("jws: the code's signature is not the signature of the signing input")
			}
			env := mustParse(t, []byte(c.V1))
			chain, _ := env.get("rotationChain")
			for i, hop := range chain.vals {
				body, err := rotationBody(hop)
				if err != nil || string(body) != c.RotationSignedBodies[i] {
					t.Errorf("rotation hop %d: signed body", i)
				}
				from := keys[strings.ToLower(hop.s("from"))]
				if from == nil || hex.EncodeToString(ed25519.Sign(from, body)) != c.RotationSignatureHexs[i] {
					t.Errorf("rotation hop %d: the code's signature is not the signature of the body", i)
				}
			}
			if _, err := verifyADP(tamper(t, []byte(c.V1), `"nonce":"8f1d2c"`, `"nonce":"8f1d2d"`)); err == nil {
				t.Error("recipe: a changed disclosure verifies")
			}
		})
	}
}

func checkReceipt(t *testing.T, v receiptVector) {
	k := mustKey(t, v.VerifierKey)
	r := mustParse(t, v.Receipt)
	if err := verifyReceipt(k, r, mustParse(t, v.Entry), mustParse(t, v.Inclusion)); err != nil {
		t.Error(err)
	}
	if c, _ := canon(r.without("auditSeq", "auditHash")); string(c) != v.ComparedInput {
		t.Error("comparedInput")
	}
	var rc pay.Receipt
	var e audit.Entry
	var p audit.InclusionProof
	for _, x := range []struct {
		raw []byte
		v   any
	}{{v.Receipt, &rc}, {v.Entry, &e}, {v.Inclusion, &p}} {
		if err := json.Unmarshal(x.raw, x.v); err != nil {
			t.Fatal(err)
		}
	}
	if err := pay.VerifyReceipt(v.VerifierKey, rc, e, p); err != nil {
		t.Errorf("pay.VerifyReceipt: %v", err)
	}
	bad := mustParse(t, tamper(t, v.Receipt, `"minor": 5000`, `"minor": 5001`))
	if verifyReceipt(k, bad, mustParse(t, v.Entry), mustParse(t, v.Inclusion)) == nil {
		t.Error("recipe: a receipt with another amount verifies")
	}
}

func checkEnforcement(t *testing.T, v enforcementVector) {
	k := mustKey(t, v.VerifierKey)
	pv, err := verifyEnforcement(k, v.Proof)
	if err != nil {
		t.Fatal(err)
	}
	if pv != v.PolicyVerified {
		t.Errorf("policyVerified %v, vector says %v", pv, v.PolicyVerified)
	}
	p := mustParse(t, v.Proof)
	list, _ := p.get("entries")
	var entries []jv
	var types []string
	for _, pe := range list.vals {
		e, _ := pe.get("entry")
		entries = append(entries, e)
		types = append(types, e.s("type"))
	}
	if st, _ := impliedStatus(entries); st != v.ImpliedStatus || p.s("status") != st {
		t.Errorf("implied status %s, proof says %s, vector %s", st, p.s("status"), v.ImpliedStatus)
	}
	if strings.Join(types, ",") != strings.Join(v.EntryTypes, ",") {
		t.Errorf("entry types %v, vector %v", types, v.EntryTypes)
	}
	if r := protocol.VerifyProof(v.VerifierKey, v.Proof); !r.Valid || r.PolicyVerified != v.PolicyVerified {
		t.Errorf("protocol.VerifyProof: %+v", r)
	}
	bad := tamper(t, v.Proof, `"status": "`+v.ImpliedStatus+`"`, `"status": "refunded"`)
	if _, err := verifyEnforcement(k, bad); err == nil {
		t.Error("recipe: a proof claiming another status verifies")
	}
	if protocol.VerifyProof(v.VerifierKey, bad).Valid {
		t.Error("code: a proof claiming another status verifies")
	}
}

func checkMemory(t *testing.T, v memoryVector) {
	k := mustKey(t, v.VerifierKey)
	priv := recordPriv(t, keyOfSeed(recordSeedByte))
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), k.pub) {
		t.Fatal("memory vectors are signed with another key than the fixed record key")
	}
	types := map[string]bool{}
	for _, av := range v.Artifacts {
		t.Run(av.Type, func(t *testing.T) {
			types[av.Type] = true
			n, err := verifyMemoryArtifact(k, av.Artifact)
			if err != nil {
				t.Fatal(err)
			}
			a := mustParse(t, av.Artifact)
			signed, _ := canon(a.without("signature"))
			d := sha256.Sum256(signed)
			msg := statementMessage(av.Type, d)
			if string(signed) != av.SignedInput || hex.EncodeToString(signed) != av.SignedInputHex ||
				hex.EncodeToString(d[:]) != av.DigestHex || hex.EncodeToString(msg) != av.StatementMessageHex {
				t.Error("signed input, digest or message differs from the vector")
			}
			if base64.RawURLEncoding.EncodeToString(ed25519.Sign(priv, msg)) != a.s("signature") {
				t.Error("the code's signature is not the statement signature of the artifact's digest")
			}
			recs := artifactRecords(a)
			if len(av.Seals) != len(recs) || (av.Type != "memory.erasure" && n != len(recs)) {
				t.Fatalf("%d seals for %d records", len(av.Seals), len(recs))
			}
			for i, r := range recs {
				in, _ := contentInput(r)
				sum := sha256.Sum256(in)
				if string(in) != av.Seals[i].ContentInput || hex.EncodeToString(sum[:]) != av.Seals[i].ContentDigest {
					t.Errorf("seal %d: content input or digest", i)
				}
			}
			if got := memory.Verify(v.VerifierKey, av.Artifact); !got.Holds || got.Records != n {
				t.Errorf("memory.Verify: %+v (recipe checked %d seals)", got, n)
			}
			bad := tamper(t, av.Artifact, `"issuedAt": "`, `"issuedAt": "1`)
			if _, err := verifyMemoryArtifact(k, bad); err == nil {
				t.Error("recipe: a changed artifact verifies")
			}
			if memory.Verify(v.VerifierKey, bad).Holds {
				t.Error("code: a changed artifact verifies")
			}
		})
	}
	for _, typ := range []string{"memory.record", "memory.page", "memory.context", "memory.erasure"} {
		if !types[typ] {
			t.Errorf("no %s vector", typ)
		}
	}
}

// TestRecipeIsStdlibOnly holds the independent verifier to the standard
// library: it must not share code with what it checks.
func TestRecipeIsStdlibOnly(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "recipe_test.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
			t.Errorf("recipe_test.go imports %s: the recipe must use the standard library only", path)
		}
	}
}

// TestRecipeCanonicalization runs the recipe's RFC 8785 writer over the
// ADP conformance vectors, the language-neutral canonicalization cases.
func TestRecipeCanonicalization(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "identity", "testdata", "adp", "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Canonicalization []struct {
			Input     json.RawMessage `json:"input"`
			Canonical string          `json:"canonical"`
		} `json:"canonicalization"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Canonicalization) == 0 {
		t.Fatal("no canonicalization vectors")
	}
	for i, c := range f.Canonicalization {
		got, err := canonRaw(c.Input)
		if err != nil || string(got) != c.Canonical {
			t.Errorf("vector %d: got %s (%v), want %s", i, got, err, c.Canonical)
		}
	}
	for in, want := range map[string]string{
		`1e21`: `1e+21`, `1e20`: `100000000000000000000`, `1e-7`: `1e-7`, `0.000001`: `0.000001`,
		`-0`: `0`, `123.456e2`: `12345.6`, `5e-324`: `5e-324`, `"\u2028<>&"`: "\"\u2028<>&\"", `"\u001f"`: `"\u001f"`,
	} {
		if got, err := canonRaw([]byte(in)); err != nil || string(got) != want {
			t.Errorf("%s: got %s (%v), want %s", in, got, err, want)
		}
	}
}
