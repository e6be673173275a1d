package verifyvectors

// This file produces every artifact docs/VERIFYING.md describes with the
// project's own code, from fixed keys, a fixed clock and fixed inputs, and
// turns each into the vector file the document links to.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/memory"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/protocol"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// Fixed inputs. Every key is ed25519.NewKeyFromSeed of 32 copies of one byte.
const (
	recordSeedByte    = 0x5e
	operatorSeedByte  = 0x0b
	agentSeedByte     = 0xa9
	identitySeedByteA = 0xa1 // the identity's first key
	identitySeedByteB = 0xb2 // the key it rotated to

	// origin is the record's origin, the note key name of its checkpoints.
	origin = "vectors.countersign.example/record"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func seedKey(b byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
}

func keyOfSeed(b byte) keyInfo {
	k := seedKey(b)
	return keyInfo{SeedHex: hex.EncodeToString(k.Seed()), PublicKeyHex: hex.EncodeToString(k.Public().(ed25519.PublicKey))}
}

// clock is a fake clock: set moves it, and with a step every reading
// advances it (for the services, which read it an unpredictable number of
// times).
type clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mustJSON(t testing.TB, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openLog(t testing.TB, c *clock) (*audit.Log, *memstore.Store) {
	t.Helper()
	st := memstore.New(&memstore.Options{RetryRate: -1})
	l, err := audit.Open(t.Context(), st, seedKey(recordSeedByte), &audit.Options{Origin: origin, Now: c.Now, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return l, st
}

// ---- vector file shapes ----

type keyInfo struct {
	SeedHex      string `json:"seedHex"`
	PublicKeyHex string `json:"publicKeyHex"`
	VerifierKey  string `json:"verifierKey,omitempty"`
}

type entryVector struct {
	Entry            json.RawMessage `json:"entry"`
	HashInput        string          `json:"hashInput"`
	HashInputHex     string          `json:"hashInputHex"`
	Hash             string          `json:"hash"`
	LeafHashInputHex string          `json:"leafHashInputHex"`
	LeafHashBase64   string          `json:"leafHashBase64"`
	SigInputHex      string          `json:"sigInputHex,omitempty"`
}

type recordVector struct {
	Comment   string        `json:"comment"`
	RecordKey keyInfo       `json:"recordKey"`
	Entries   []entryVector `json:"entries"`
}

type checkpointVector struct {
	Comment         string          `json:"comment"`
	RecordKey       keyInfo         `json:"recordKey"`
	KeyHashInputHex string          `json:"keyHashInputHex"`
	KeyHashHex      string          `json:"keyHashHex"`
	Checkpoint      json.RawMessage `json:"checkpoint"`
	RootHashHex     string          `json:"rootHashHex"`
	SignedText      string          `json:"signedText"`
	SignedTextHex   string          `json:"signedTextHex"`
	SignatureHex    string          `json:"signatureHex"`
}

type consistencyVector struct {
	Old   json.RawMessage `json:"old"`
	Proof json.RawMessage `json:"proof"`
}

type proofsVector struct {
	Comment     string              `json:"comment"`
	VerifierKey string              `json:"verifierKey"`
	Inclusion   []json.RawMessage   `json:"inclusion"`
	Consistency []consistencyVector `json:"consistency"`
}

type statementVector struct {
	Comment      string `json:"comment"`
	VerifierKey  string `json:"verifierKey"`
	Purpose      string `json:"purpose"`
	DigestHex    string `json:"digestHex"`
	MessageHex   string `json:"messageHex"`
	Signature    string `json:"signature"`
	SignatureHex string `json:"signatureHex"`
}

type sealVector struct {
	RecordID       string `json:"recordId"`
	ContentInput   string `json:"contentInput"`
	ContentDigest  string `json:"contentDigest"`
	SealEntryHash  string `json:"sealEntryHash"`
	SealEntrySigIn string `json:"sealEntrySigInputHex"`
}

type artifactVector struct {
	Type                string          `json:"type"`
	Artifact            json.RawMessage `json:"artifact"`
	SignedInput         string          `json:"signedInput"`
	SignedInputHex      string          `json:"signedInputHex"`
	DigestHex           string          `json:"digestHex"`
	StatementMessageHex string          `json:"statementMessageHex"`
	Seals               []sealVector    `json:"seals"`
}

type memoryVector struct {
	Comment     string           `json:"comment"`
	VerifierKey string           `json:"verifierKey"`
	Artifacts   []artifactVector `json:"artifacts"`
}

type receiptVector struct {
	Comment       string          `json:"comment"`
	VerifierKey   string          `json:"verifierKey"`
	Receipt       json.RawMessage `json:"receipt"`
	Entry         json.RawMessage `json:"entry"`
	Inclusion     json.RawMessage `json:"inclusion"`
	ComparedInput string          `json:"comparedInput"`
}

type enforcementVector struct {
	Comment        string          `json:"comment"`
	VerifierKey    string          `json:"verifierKey"`
	Proof          json.RawMessage `json:"proof"`
	EntryTypes     []string        `json:"entryTypes"`
	ImpliedStatus  string          `json:"impliedStatus"`
	PolicyVerified bool            `json:"policyVerified"`
}

type adpCase struct {
	Name                  string   `json:"name"`
	AgentID               string   `json:"agentId"`
	SigningKeyHex         string   `json:"signingKeyHex"`
	Disclosure            string   `json:"disclosure"`
	DisclosureHex         string   `json:"disclosureHex"`
	V1                    string   `json:"v1"`
	V1SignatureHex        string   `json:"v1SignatureHex"`
	JWS                   string   `json:"jws"`
	JWSSigningInput       string   `json:"jwsSigningInput"`
	JWSSignatureHex       string   `json:"jwsSignatureHex"`
	RotationSignedBodies  []string `json:"rotationSignedBodies,omitempty"`
	RotationSignatureHexs []string `json:"rotationSignatureHex,omitempty"`
}

type adpVector struct {
	Comment string             `json:"comment"`
	Keys    map[string]keyInfo `json:"keys"`
	Now     string             `json:"now"`
	Cases   []adpCase          `json:"cases"`
}

type webhookVector struct {
	Comment   string   `json:"comment"`
	Secrets   []string `json:"secrets"`
	Timestamp int64    `json:"timestamp"`
	Body      string   `json:"body"`
	MACInput  string   `json:"macInputHex"`
	V1        []string `json:"v1"`
	Header    string   `json:"header"`
}

type meterStepVector struct {
	InputHex string `json:"inputHex"`
	Head     string `json:"head"`
}

type meterVector struct {
	Comment string            `json:"comment"`
	Lines   []usageLine       `json:"lines"`
	Steps   []meterStepVector `json:"steps"`
	Head    string            `json:"head"`
}

// ---- the deterministic record: entries, checkpoint, proofs, webhook ----

// recordInputs are the records of the small fixed log: every optional
// member, an entry signed on its own, and data that exercises RFC 8785
// (non-ASCII member names in UTF-16 order, number forms, escapes).
var recordInputs = []audit.Record{
	{Type: "system.started", Actor: audit.Actor{Kind: "system", ID: "server"},
		Data: json.RawMessage(`{"version":"vectors","mode":"sandbox","origin":"vectors.countersign.example/record"}`)},
	{Type: "gate.decision", IntentID: "int_01KAVECT0RS0000000000000001", Actor: audit.Actor{Kind: "agent", ID: "ak_01KAVECT0RS0000000000000001"},
		RequestID: "req_vectors_1",
		Data:      json.RawMessage(`{"outcome":"allow","reasons":[],"mandateId":"mdt_1","policyHash":"sha256:vectors"}`)},
	{Type: "payment.settled", IntentID: "int_01KAVECT0RS0000000000000001", Actor: audit.Actor{Kind: "system", ID: "settle"},
		RequestID: "req_vectors_1",
		Data:      json.RawMessage(`{"id":"rcpt_1","amount":{"minor":1250,"currency":"USD"},"purpose":"tea <& coffee> for \"Zoë\"\n"}`)},
	{Type: "operator.kill_switch", Actor: audit.Actor{Kind: "operator", ID: "op-alice"},
		Rationale: "pausing for the quarterly audit", Data: json.RawMessage(`{"engaged":true}`)},
	{Type: "memory.recorded", Actor: audit.Actor{Kind: "agent", ID: "ak_01KAVECT0RS0000000000000001"}, Signed: true,
		Data: json.RawMessage(`{"id":"mem_1","namespace":"assistant","contentDigest":"` + strings.Repeat("0f", 32) + `"}`)},
	{Type: "vectors.canonical", Actor: audit.Actor{Kind: "system", ID: "vectors"},
		Data: json.RawMessage(`{"z":0.5,"\ufb33":null,"😀":true,"a":1e3,"big":9007199254740991,"neg":-0.000001,"tiny":1e-7,"e":"\u00e9\u0007","nested":{"b":[3,1,2],"a":{}}}`)},
	{Type: "system.stopped", Actor: audit.Actor{Kind: "system", ID: "server"}},
}

type recordBuild struct {
	log     *audit.Log
	entries []audit.Entry
}

func buildRecord(t testing.TB) recordBuild {
	t.Helper()
	c := &clock{}
	l, _ := openLog(t, c)
	var out recordBuild
	out.log = l
	for i, r := range recordInputs {
		c.set(t0.Add(time.Duration(i)*time.Second + 123456*time.Microsecond))
		err := l.Update(t.Context(), func(txn store.Txn) error {
			_, err := l.Append(txn, r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for e, err := range l.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		out.entries = append(out.entries, e)
	}
	return out
}

func recordKeyInfo(l *audit.Log) keyInfo {
	k := keyOfSeed(recordSeedByte)
	k.VerifierKey = l.VerifierKey()
	return k
}

func makeRecordVector(t testing.TB, rb recordBuild) recordVector {
	v := recordVector{
		Comment:   "The fixed record of docs/VERIFYING.md §4: each entry as served, the exact bytes its hash covers (RFC 8785 of the entry without hash and sig), its Merkle leaf, and for an entry signed on its own the 32 bytes its sig covers.",
		RecordKey: recordKeyInfo(rb.log),
	}
	for _, e := range rb.entries {
		ev := entryVector{Entry: mustJSON(t, e), Hash: e.Hash}
		// The bytes the document says are hashed; the test checks that
		// their SHA-256 is the hash the code computed.
		ev0, err := parseJSON(ev.Entry)
		if err != nil {
			t.Fatal(err)
		}
		body, err := canon(ev0.without("hash", "sig"))
		if err != nil {
			t.Fatal(err)
		}
		ev.HashInput, ev.HashInputHex = string(body), hex.EncodeToString(body)
		raw, _ := hex.DecodeString(e.Hash)
		ev.LeafHashInputHex = "00" + e.Hash
		leaf := sha256.Sum256(append([]byte{0}, raw...))
		ev.LeafHashBase64 = base64.StdEncoding.EncodeToString(leaf[:])
		if e.Sig != "" {
			ev.SigInputHex = e.Hash
		}
		v.Entries = append(v.Entries, ev)
	}
	return v
}

func makeCheckpointVector(t testing.TB, rb recordBuild) checkpointVector {
	cp, err := rb.log.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pub := seedKey(recordSeedByte).Public().(ed25519.PublicKey)
	khIn := append(append([]byte(origin+"\n"), 0x01), pub...)
	kh := sha256.Sum256(khIn)
	i := strings.LastIndex(cp.Note, "\n\n")
	text := cp.Note[:i+1]
	line := strings.TrimSuffix(cp.Note[i+2:], "\n")
	_, b64, _ := strings.Cut(strings.TrimPrefix(line, "— "), " ")
	sig, _ := base64.StdEncoding.DecodeString(b64)
	root, _ := base64.StdEncoding.DecodeString(cp.RootHash)
	return checkpointVector{
		Comment:         "The signed checkpoint of the fixed record (docs/VERIFYING.md §3): the note key hash input (origin \\n 0x01 key), the signed text, and the 64-byte Ed25519 signature inside the note's signature line (after the 4-byte key hash).",
		RecordKey:       recordKeyInfo(rb.log),
		KeyHashInputHex: hex.EncodeToString(khIn),
		KeyHashHex:      hex.EncodeToString(kh[:4]),
		Checkpoint:      mustJSON(t, cp),
		RootHashHex:     hex.EncodeToString(root),
		SignedText:      text,
		SignedTextHex:   hex.EncodeToString([]byte(text)),
		SignatureHex:    hex.EncodeToString(sig[4:]),
	}
}

func makeProofsVector(t testing.TB, rb recordBuild) proofsVector {
	v := proofsVector{
		Comment:     "Inclusion proofs of every entry of the fixed record in its tree of 7, and consistency proofs 3→7 and 4→7 with the older checkpoint (docs/VERIFYING.md §5).",
		VerifierKey: rb.log.VerifierKey(),
	}
	ctx := t.Context()
	for seq := uint64(1); seq <= uint64(len(rb.entries)); seq++ {
		p, err := rb.log.Inclusion(ctx, seq, 0)
		if err != nil {
			t.Fatal(err)
		}
		v.Inclusion = append(v.Inclusion, mustJSON(t, p))
	}
	for _, from := range []uint64{3, 4} {
		old, err := rb.log.Inclusion(ctx, 1, from)
		if err != nil {
			t.Fatal(err)
		}
		p, err := rb.log.Consistency(ctx, from, 0)
		if err != nil {
			t.Fatal(err)
		}
		v.Consistency = append(v.Consistency, consistencyVector{Old: mustJSON(t, old.Checkpoint), Proof: mustJSON(t, p)})
	}
	return v
}

func makeStatementVector(t testing.TB, rb recordBuild) statementVector {
	digest := sha256.Sum256([]byte("countersign verifying vectors"))
	sig, err := rb.log.SignStatement("memory.record", digest)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(sig)
	return statementVector{
		Comment:      "A statement signature (docs/VERIFYING.md §6): the message is \"countersign statement v1\\n\" + purpose + \"\\n\" + the 32 raw digest bytes.",
		VerifierKey:  rb.log.VerifierKey(),
		Purpose:      "memory.record",
		DigestHex:    hex.EncodeToString(digest[:]),
		MessageHex:   hex.EncodeToString(statementMessage("memory.record", digest)),
		Signature:    sig,
		SignatureHex: hex.EncodeToString(raw),
	}
}

// webhookSecrets are a current and a previous endpoint secret (a rotation).
var webhookSecrets = []string{
	"whsec_" + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0x42}, 32)),
	"whsec_" + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0x24}, 32)),
}

// webhookTime is when the delivery is signed.
var webhookTime = t0.Add(time.Hour)

func makeWebhookVector(t testing.TB, rb recordBuild) webhookVector {
	ev := webhook.Derive(rb.entries[2])[0] // payment.settled
	body, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	header := webhook.Sign(body, webhookSecrets, webhookTime)
	v := webhookVector{
		Comment:   "A webhook delivery (docs/VERIFYING.md §11): the raw body, and Svc-Signature signed with a current and a previous secret. Each v1 is hex HMAC-SHA256 keyed with the whole secret string over \"<t>.<body>\".",
		Secrets:   webhookSecrets,
		Timestamp: webhookTime.Unix(),
		Body:      string(body),
		MACInput:  hex.EncodeToString([]byte(strings.TrimPrefix(strings.SplitN(header, ",", 2)[0], "t=") + "." + string(body))),
		Header:    header,
	}
	for part := range strings.SplitSeq(header, ",") {
		if s, ok := strings.CutPrefix(part, "v1="); ok {
			v.V1 = append(v.V1, s)
		}
	}
	return v
}

var meterLines = []usageLine{{Units: 3, UsageID: "u-1"}, {Units: 5, UsageID: "u-2"}, {Units: 1, UsageID: "u-3"}}

func makeMeterVector(t testing.TB) meterVector {
	v := meterVector{
		Comment: "A meter's usage chain (docs/VERIFYING.md §12): each step hashes the previous head's 32 bytes (nothing before the first line) || seq (8 bytes BE) || units (8 bytes BE) || usage id.",
		Lines:   meterLines,
	}
	var prev []byte
	var lines []protocol.UsageLine
	for i, l := range meterLines {
		lines = append(lines, protocol.UsageLine{Units: l.Units, UsageID: l.UsageID})
		in := meterStep(prev, int64(i+1), l)
		head := protocol.MeterChainHead(lines)
		v.Steps = append(v.Steps, meterStepVector{InputHex: hex.EncodeToString(in), Head: head})
		prev, _ = hex.DecodeString(head)
	}
	v.Head = protocol.MeterChainHead(lines)
	return v
}

// ---- ADP disclosures ----

var adpNow = time.Date(2026, 6, 24, 12, 30, 0, 0, time.UTC)

func adpDisclosure(agentID string) *identity.Disclosure {
	d := &identity.Disclosure{
		Version:      identity.DisclosureVersion,
		DisclosureID: "disc_vectors",
		AgentID:      agentID,
		IssuedAt:     identity.Timestamp(adpNow.Add(-time.Hour)),
		ValidUntil:   identity.Timestamp(adpNow.Add(23 * time.Hour)),
		Nonce:        "8f1d2c",
		AuditAnchor:  strings.Repeat("ab", 32),
		SystemPrompt: identity.SystemPrompt{Algorithm: "sha256", Digest: strings.Repeat("cd", 32), PromptVersion: "none"},
		Constitution: identity.Constitution{
			HardConstraints: []identity.HardConstraint{{ID: "per_tx_cap", Description: "never pay more than the mandate's per-transaction cap — “hard”", Kind: "cap"}},
			Enforced:        true,
		},
		Tools:    identity.ToolInventory{Tools: []identity.Tool{{Name: "pay.create", Access: "gated", MovesValue: true}}},
		Capital:  identity.Capital{Custody: "non_custodial"},
		Operator: identity.OperatorIdentity{OperatorID: "sandbox-operator", Attestation: identity.Attestation{Scheme: "none", Level: "signed"}, DeniabilityBoundary: "spend within mandates"},
		History:  identity.History{ChainAnchor: strings.Repeat("ef", 32), Summary: identity.HistorySummary{TotalDecisions: 12, SettledCount: 10, BlockedCount: 2}},
	}
	d.Constitution.Digest = identity.ConstitutionDigest(d.Constitution)
	return d
}

func makeADPCase(t testing.TB, name string, d *identity.Disclosure, key ed25519.PrivateKey, chain []identity.RotationStatement) adpCase {
	t.Helper()
	canonDoc, err := identity.Canonicalize(d)
	if err != nil {
		t.Fatal(err)
	}
	v1, jws, err := identity.SignCanonical(canonDoc, key, chain)
	if err != nil {
		t.Fatal(err)
	}
	c := adpCase{Name: name, AgentID: d.AgentID, SigningKeyHex: hex.EncodeToString(key.Public().(ed25519.PublicKey)),
		Disclosure: string(canonDoc), DisclosureHex: hex.EncodeToString(canonDoc), V1: string(v1), JWS: string(jws)}
	var env1 struct {
		Signature struct {
			Value string `json:"value"`
		} `json:"signature"`
	}
	var env2 struct{ Payload, Protected, Signature string }
	if err := json.Unmarshal(v1, &env1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jws, &env2); err != nil {
		t.Fatal(err)
	}
	c.V1SignatureHex = env1.Signature.Value
	c.JWSSigningInput = env2.Protected + "." + env2.Payload
	sig, _ := base64.RawURLEncoding.DecodeString(env2.Signature)
	c.JWSSignatureHex = hex.EncodeToString(sig)
	for _, s := range chain {
		body, err := identity.Canonicalize(map[string]string{"type": s.Type, "from": s.From, "to": s.To, "rotatedAt": s.RotatedAt})
		if err != nil {
			t.Fatal(err)
		}
		c.RotationSignedBodies = append(c.RotationSignedBodies, string(body))
		c.RotationSignatureHexs = append(c.RotationSignatureHexs, s.Signature)
	}
	return c
}

func makeADPVector(t testing.TB) adpVector {
	a, b := seedKey(identitySeedByteA), seedKey(identitySeedByteB)
	did := identity.DIDKey(a.Public().(ed25519.PublicKey))
	hop, err := identity.Rotate(a, b.Public().(ed25519.PublicKey), adpNow.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ka, kb := keyOfSeed(identitySeedByteA), keyOfSeed(identitySeedByteB)
	ka.VerifierKey, kb.VerifierKey = "", ""
	return adpVector{
		Comment: "ADP disclosures (docs/VERIFYING.md §10), as the deployment signs its own: agentId is the did:key of the first identity key; one case signed by that key, one by the key it rotated to, with the rotation chain. Both envelopes sign the same RFC 8785 bytes.",
		Keys:    map[string]keyInfo{"a": ka, "b": kb},
		Now:     identity.Timestamp(adpNow),
		Cases: []adpCase{
			makeADPCase(t, "direct", adpDisclosure(did), a, nil),
			makeADPCase(t, "rotated", adpDisclosure(did), b, []identity.RotationStatement{hop}),
		},
	}
}

// ---- a running deployment: receipts, proofs of enforcement, memory ----

// world is the money path, the protocol surface and the memory store over
// one in-memory store and one record, with fixed keys and a clock that
// ticks a millisecond at every reading. Ids and salts are random, so what
// it produces differs from run to run; the vectors made from it are
// checked by verification, not byte for byte.
type world struct {
	log      *audit.Log
	pay      *pay.Service
	proto    *protocol.Service
	mem      *memory.Service
	caller   pay.Caller
	mandate  string
	memMand  string
	agentKey ed25519.PrivateKey
}

var operatorCall = pay.OperatorCall{Operator: "op-alice", RequestID: "req_vectors_op", Rationale: "refund agreed with the seller"}

func newWorld(t testing.TB) *world {
	t.Helper()
	c := &clock{t: t0, step: time.Millisecond}
	l, st := openLog(t, c)
	card, err := fake.New("sandbox-card", &fake.Options{Store: st, Now: c.Now,
		Facts: settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}})
	if err != nil {
		t.Fatal(err)
	}
	rails := &settle.Registry{}
	if err := rails.Register(card); err != nil {
		t.Fatal(err)
	}
	op, agentKey := seedKey(operatorSeedByte), seedKey(agentSeedByte)
	agent := hex.EncodeToString(agentKey.Public().(ed25519.PublicKey))
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-alice", Public: op.Public()}}, &pay.MandateVerifierOptions{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{log: l, agentKey: agentKey,
		caller: pay.Caller{KeyID: "ak_01KAVECT0RS0000000000000001", Agents: []string{agent}, Credential: gate.CredentialAPIKey}}
	if w.mandate, err = pay.SignMandate(pay.MandateClaims{
		ID: "mdt_vectors", Agent: agent, IssuedAt: t0.Add(-time.Hour), ExpiresAt: t0.Add(24 * time.Hour), Payees: []string{"*"},
		Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: 1_000_000, Period: gate.Day,
		Rails: []string{"sandbox-card"}, ConfirmAboveMinor: 10_000, IrreversibleConfirmAboveMinor: 10_000,
	}, op, "op-alice"); err != nil {
		t.Fatal(err)
	}
	if w.pay, err = pay.New(pay.Options{Store: st, Log: l, Rails: rails, Mandates: mv, Now: c.Now, Logger: quiet(),
		Extensions:   []pay.Extension{protocol.Extension(protocol.Options{Store: st, Log: l, Mandates: mv, Now: c.Now, Logger: quiet()}, &w.proto)},
		PolicyDigest: func(pay.Policy) string { return "sha256:" + strings.Repeat("7e", 32) }}); err != nil {
		t.Fatal(err)
	}
	if w.mem, err = memory.New(memory.Options{Store: st, Log: l, Mandates: mv, Now: c.Now, Logger: quiet(),
		SealKey: bytes.Repeat([]byte{0x33}, 32)}); err != nil {
		t.Fatal(err)
	}
	if w.memMand, err = memory.SignMandate(memory.MandateClaims{ID: "mm_vectors", Agent: agent,
		IssuedAt: t0.Add(-time.Hour), ExpiresAt: t0.Add(24 * time.Hour), Namespace: "assistant",
		CanRead: true, CanWrite: true, CanErase: true}, op, "op-alice"); err != nil {
		t.Fatal(err)
	}
	return w
}

// payment pays 5,000 minor units and refunds 2,000 of them.
func (w *world) payment(t testing.TB) (*pay.Result, *protocol.EnforcementProof) {
	t.Helper()
	ctx := t.Context()
	in := &pay.Instruction{
		IdempotencyKey: "vectors-order-1", Payee: "acct:seller.example", Amount: pay.Amount{Minor: 5000, Currency: "USD"},
		Purpose: "tea <& coffee> for Zoë", Envelope: pay.Envelope{Mandate: w.mandate},
		Terms: pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
	}
	if err := pay.SignInstruction(in, w.agentKey); err != nil {
		t.Fatal(err)
	}
	res, err := w.pay.PayInstruction(ctx, w.caller, in, "", "req_vectors_pay")
	if err != nil {
		t.Fatal(err)
	}
	if res.Receipt == nil {
		t.Fatalf("payment outcome %s, want a receipt", res.Outcome)
	}
	part := int64(2000)
	if _, err := w.pay.Refund(ctx, pay.RefundRequest{IntentID: res.IntentID, AmountMinor: &part}, operatorCall); err != nil {
		t.Fatal(err)
	}
	proof, err := w.proto.ProofGet(ctx, protocol.AgentCall(w.caller, "req_vectors_proof"), &protocol.ProofGetRequest{IntentID: res.IntentID})
	if err != nil {
		t.Fatal(err)
	}
	return res, proof
}

func makeReceiptVector(t testing.TB, w *world, res *pay.Result) receiptVector {
	ctx := t.Context()
	e, err := w.log.Get(ctx, res.Receipt.AuditSeq)
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.log.Inclusion(ctx, e.Seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	rcpt := mustJSON(t, res.Receipt)
	rv, err := parseJSON(rcpt)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := canon(rv.without("auditSeq", "auditHash"))
	if err != nil {
		t.Fatal(err)
	}
	return receiptVector{
		Comment:       "A receipt with its payment.settled entry and that entry's inclusion proof (docs/VERIFYING.md §8). comparedInput is the RFC 8785 form of the receipt without auditSeq and auditHash, which must equal that of the entry's data. Ids are random: regenerated files differ.",
		VerifierKey:   w.log.VerifierKey(),
		Receipt:       rcpt,
		Entry:         mustJSON(t, e),
		Inclusion:     mustJSON(t, p),
		ComparedInput: string(cmp),
	}
}

func makeEnforcementVector(t testing.TB, w *world, proof *protocol.EnforcementProof) enforcementVector {
	raw := mustJSON(t, proof)
	v := enforcementVector{
		Comment:        "A proof of enforcement of a payment settled and then partly refunded (docs/VERIFYING.md §9): its entries, each with an inclusion proof against the one checkpoint, and the status they imply. Ids are random: regenerated files differ.",
		VerifierKey:    w.log.VerifierKey(),
		Proof:          raw,
		ImpliedStatus:  string(proof.Status),
		PolicyVerified: true,
	}
	for _, pe := range proof.Entries {
		v.EntryTypes = append(v.EntryTypes, pe.Entry.Type)
	}
	return v
}

// memoryArtifacts remembers two records (the second derived from the
// first), recalls them, assembles a context and erases the first (which
// cascades to the second). It returns the four artifacts as served.
func (w *world) memoryArtifacts(t testing.TB) [][]byte {
	t.Helper()
	ctx := t.Context()
	var c memory.Caller
	remember := func(key, subject string, body string, edges []memory.Edge) memory.RecordArtifact {
		r, err := w.mem.Remember(ctx, c, memory.RememberRequest{Mandate: w.memMand, IdempotencyKey: key, Namespace: "assistant",
			Subject: subject, Kind: "preference", Body: json.RawMessage(body), ValidFrom: t0.Add(-48 * time.Hour),
			Source: memory.Source{Kind: "agent", Ref: "vectors"}, Edges: edges}, "req_vectors_mem")
		if err != nil {
			t.Fatal(err)
		}
		return r.Artifact
	}
	a := remember("mem-1", "user:zoë", `{"drinks": ["tea", "coffee"], "note": "<no sugar>", "cups": 2.50}`, nil)
	remember("mem-2", "user:zoë:summary", `"likes tea"`, []memory.Edge{{Type: memory.EdgeDerivedFrom, To: a.Record.ID}})
	page, err := w.mem.Recall(ctx, c, memory.RecallRequest{Mandate: w.memMand, Namespace: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	cx, err := w.mem.Assemble(ctx, c, memory.AssembleRequest{Mandate: w.memMand, Namespace: "assistant", Budget: memory.Budget{MaxTokens: 200}, Query: "what does zoë drink"})
	if err != nil {
		t.Fatal(err)
	}
	er, err := w.mem.Forget(ctx, memory.ForgetRequest{Mandate: w.memMand, RootID: a.Record.ID, Rationale: "Zoë asked to be forgotten"},
		memory.OperatorCall{Operator: "op-alice", RequestID: "req_vectors_forget", Rationale: "Zoë asked to be forgotten"})
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{mustJSON(t, a), mustJSON(t, page), mustJSON(t, cx), mustJSON(t, er)}
}

func makeMemoryVector(t testing.TB, w *world, artifacts [][]byte) memoryVector {
	v := memoryVector{
		Comment:     "The four memory artifacts (docs/VERIFYING.md §7): signedInput is the RFC 8785 form of the artifact without signature, digestHex its SHA-256, statementMessageHex what the statement signature covers; each seal's contentInput is what its contentDigest hashes. Ids and salts are random: regenerated files differ.",
		VerifierKey: w.log.VerifierKey(),
	}
	for _, raw := range artifacts {
		a, err := parseJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		signed, err := canon(a.without("signature"))
		if err != nil {
			t.Fatal(err)
		}
		d := sha256.Sum256(signed)
		av := artifactVector{Type: a.s("type"), Artifact: raw, SignedInput: string(signed), SignedInputHex: hex.EncodeToString(signed),
			DigestHex: hex.EncodeToString(d[:]), StatementMessageHex: hex.EncodeToString(statementMessage(a.s("type"), d))}
		for _, r := range artifactRecords(a) {
			seal, _ := r.get("seal")
			e, _ := seal.get("entry")
			in, err := contentInput(r)
			if err != nil {
				t.Fatal(err)
			}
			av.Seals = append(av.Seals, sealVector{RecordID: r.s("id"), ContentInput: string(in), ContentDigest: seal.s("contentDigest"),
				SealEntryHash: e.s("hash"), SealEntrySigIn: e.s("hash")})
		}
		v.Artifacts = append(v.Artifacts, av)
	}
	return v
}

// artifactRecords lists the records an artifact carries.
func artifactRecords(a jv) []jv {
	switch a.s("type") {
	case "memory.record":
		r, _ := a.get("record")
		return []jv{r}
	case "memory.page":
		d, _ := a.get("data")
		return d.vals
	case "memory.context":
		var out []jv
		items, _ := a.get("items")
		for _, it := range items.vals {
			r, _ := it.get("record")
			out = append(out, r)
		}
		return out
	}
	return nil
}

// contentInput is the canonical content a seal's digest covers, built as
// contentDigest does.
func contentInput(r jv) ([]byte, error) {
	seal, _ := r.get("seal")
	content := jv{kind: 'o'}
	for _, name := range []string{"id", "namespace", "subject", "kind", "body", "validFrom", "validTo", "recordedAt", "source", "edges"} {
		m, _ := r.get(name)
		content.keys, content.vals = append(content.keys, name), append(content.vals, m)
	}
	salt, _ := seal.get("salt")
	content.keys, content.vals = append(content.keys, "salt"), append(content.vals, salt)
	return canon(content)
}
