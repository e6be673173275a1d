package protocol

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// testIdentity is the deployment identity of the harness: it signs our
// negotiation offers, and the test may revoke counterparties.
type testIdentity struct {
	key ed25519.PrivateKey
	id  string

	mu      sync.Mutex
	revoked map[string]bool
}

func newTestIdentity() *testIdentity {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	return &testIdentity{key: key, id: hex.EncodeToString(pub), revoked: map[string]bool{}}
}

func (i *testIdentity) SignStatement(msg []byte) (string, ed25519.PublicKey, []byte) {
	return i.id, i.key.Public().(ed25519.PublicKey), ed25519.Sign(i.key, msg)
}

func (i *testIdentity) Revoked(_ context.Context, id string) (bool, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.revoked[id], nil
}

func (i *testIdentity) revoke(id string) { i.mu.Lock(); i.revoked[id] = true; i.mu.Unlock() }

// evidenceFixture holds a counterparty's key and the keys of every
// evidence class: a witness, a receipt issuer, an attester and a log.
type evidenceFixture struct {
	cpKey ed25519.PrivateKey
	cp    string // the counterparty's agent id, 64 hex

	witness, receipt, attester ed25519.PrivateKey
	witnessSigner              note.Signer // the witness as a note co-signer

	logOrigin string
	logSigner note.Signer
	logVkey   string
}

func newEvidenceFixture(t testing.TB) *evidenceFixture {
	t.Helper()
	f := &evidenceFixture{logOrigin: "log.example/evidence"}
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	f.cpKey, f.cp = key, hex.EncodeToString(pub)
	_, f.receipt, _ = ed25519.GenerateKey(rand.Reader)
	_, f.attester, _ = ed25519.GenerateKey(rand.Reader)
	wsk, _, err := note.GenerateKey(rand.Reader, "witness-1")
	if err != nil {
		t.Fatal(err)
	}
	if f.witnessSigner, err = note.NewSigner(wsk); err != nil {
		t.Fatal(err)
	}
	f.witness = seedOfSignerKey(t, "witness-1", wsk)
	lsk, lvk, err := note.GenerateKey(rand.Reader, f.logOrigin)
	if err != nil {
		t.Fatal(err)
	}
	if f.logSigner, err = note.NewSigner(lsk); err != nil {
		t.Fatal(err)
	}
	f.logVkey = lvk
	return f
}

// seedOfSignerKey extracts the Ed25519 key of a note signer key
// ("PRIVATE+KEY+name+hash+base64(0x01 || seed)").
func seedOfSignerKey(t testing.TB, name, skey string) ed25519.PrivateKey {
	t.Helper()
	// base64 may hold '+': cut the fixed fields off the front instead.
	rest := strings.TrimPrefix(skey, "PRIVATE+KEY+"+name+"+")
	raw, err := base64.StdEncoding.DecodeString(rest[9:])
	if err != nil || len(raw) != 1+ed25519.SeedSize {
		t.Fatalf("signer key: %v", err)
	}
	return ed25519.NewKeyFromSeed(raw[1:])
}

func (f *evidenceFixture) keys() EvidenceKeys {
	return EvidenceKeys{
		Witnesses: map[string]ed25519.PublicKey{"witness-1": f.witness.Public().(ed25519.PublicKey)},
		Receipts:  map[string]ed25519.PublicKey{"merchant-1": f.receipt.Public().(ed25519.PublicKey)},
		Attesters: map[string]ed25519.PublicKey{"attester-1": f.attester.Public().(ed25519.PublicKey)},
		Logs:      map[string]string{f.logOrigin: f.logVkey},
	}
}

// sign signs a statement about subject with key (base64url).
func (f *evidenceFixture) sign(t testing.TB, key ed25519.PrivateKey, subject, statement string) string {
	t.Helper()
	sig, err := SignEvidence([]byte(statement), subject, key)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// logProof logs the canonical form of statement (about subject) among
// others in a tree of the fixture's log and returns its inclusion proof;
// cosign adds the witness's co-signature to the checkpoint (pote).
func (f *evidenceFixture) logProof(t testing.TB, subject, statement string, cosign bool) *LogProof {
	t.Helper()
	canon, err := CanonicalStatement([]byte(statement), subject)
	if err != nil {
		t.Fatal(err)
	}
	records := [][]byte{[]byte("first record"), []byte("second record"), canon, []byte("last record")}
	const index = 2
	var hashes []tlog.Hash
	for i, r := range records {
		h, err := tlog.StoredHashes(int64(i), r, tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for j, k := range idx {
				out[j] = hashes[k]
			}
			return out, nil
		}))
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h...)
	}
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for j, k := range idx {
			out[j] = hashes[k]
		}
		return out, nil
	})
	n := int64(len(records))
	root, err := tlog.TreeHash(n, hr)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := tlog.ProveRecord(n, index, hr)
	if err != nil {
		t.Fatal(err)
	}
	text := f.logOrigin + "\n" + strconv.FormatInt(n, 10) + "\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	signers := []note.Signer{f.logSigner}
	if cosign {
		signers = append(signers, f.witnessSigner)
	}
	msg, err := note.Sign(&note.Note{Text: text}, signers...)
	if err != nil {
		t.Fatal(err)
	}
	lp := &LogProof{Checkpoint: string(msg), Index: index}
	for _, h := range proof {
		lp.Hashes = append(lp.Hashes, base64.StdEncoding.EncodeToString(h[:]))
	}
	return lp
}

// party is another agent identity of the deployment, with its own key
// and mandate: the counterparty, when it is an agent here too (a seller
// with a stake in custody).
type party struct {
	caller  pay.Caller
	key     ed25519.PrivateKey
	agent   string
	mandate string
}

func (p *party) call() Call { return AgentCall(p.caller, "req_party") }

// seller is the fixture's counterparty as an agent of the deployment.
func (h *harness) seller() *party {
	h.t.Helper()
	c := h.claims
	c.ID, c.Agent = "mdt-seller", h.ev.cp
	return &party{caller: pay.Caller{KeyID: "ak_01JSELLERKEY0000000000000", Agents: []string{h.ev.cp}, Credential: gate.CredentialAPIKey},
		key: h.ev.cpKey, agent: h.ev.cp, mandate: h.signMandate(c)}
}

// spendAs is h.spend for another party.
func (h *harness) spendAs(p *party, method, rail string, minor int64, edit func(*pay.Instruction)) pay.Instruction {
	h.t.Helper()
	return h.spend(method, rail, minor, func(in *pay.Instruction) {
		in.Envelope = pay.Envelope{Agent: p.agent, Mandate: p.mandate}
		if edit != nil {
			edit(in)
		}
	})
}
