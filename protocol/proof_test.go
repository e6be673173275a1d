package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// prfRecordPolicy appends a gate.policy entry recording digest and indexes
// it the way identity.Service does (identity/policy-seq/ + seq BE8 →
// digest), so that identity.PolicyAt finds it: the harness has no
// identity service.
func prfRecordPolicy(h *harness, digest string) audit.Entry {
	h.t.Helper()
	var e audit.Entry
	err := h.log.Update(h.t.Context(), func(txn store.Txn) error {
		data, err := json.Marshal(map[string]any{"digest": digest, "enforced": true})
		if err != nil {
			return err
		}
		if e, err = h.log.Append(txn, audit.Record{Type: identity.EntryPolicy, Actor: audit.Actor{Kind: "system", ID: "identity"}, Data: data}); err != nil {
			return err
		}
		return txn.Set(append([]byte("identity/policy-seq/"), be8(e.Seq)...), []byte(digest))
	})
	if err != nil {
		h.t.Fatal(err)
	}
	// The deployment's policy is now this one, as after a restart.
	h.policy = digest
	h.restart()
	return e
}

// prfJSON returns the proof of an intent of the caller, as served.
func prfJSON(h *harness, intentID string) []byte {
	h.t.Helper()
	p, err := h.svc.ProofGet(h.t.Context(), h.call(), &ProofGetRequest{IntentID: intentID})
	if err != nil {
		h.t.Fatalf("proof of %s: %v", intentID, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

func prfDecode(t *testing.T, b []byte) *EnforcementProof {
	t.Helper()
	var p EnforcementProof
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func prfEntryTypes(p *EnforcementProof) []string {
	var out []string
	for _, pe := range p.Entries {
		out = append(out, pe.Entry.Type)
	}
	return out
}

// TestProofGet builds the proof of each kind of intent and verifies it
// offline with the record's verifier key alone.
func TestProofGet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		run     func(h *harness) string // returns the intent id
		status  pay.Status
		outcome gate.Outcome
		types   []string
	}{
		{"settled payment", func(h *harness) string {
			return mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil).IntentID
		}, pay.StatusSettled, gate.Allow, []string{"gate.decision", "payment.settled"}},
		{"refunded payment", func(h *harness) string {
			id := mdtMustPay(h, railCard, 1_000, pay.OutcomeSettled, nil).IntentID
			ecoRefund(h, id, 400)
			ecoRefund(h, id, 600)
			return id
		}, pay.StatusRefunded, gate.Allow, []string{"gate.decision", "payment.settled", "payment.refunded", "payment.refunded"}},
		{"denied payment", func(h *harness) string {
			return mdtMustPay(h, railWire, 60_000, pay.OutcomeDenied, nil).IntentID
		}, pay.StatusDenied, gate.Deny, []string{"gate.decision"}},
		{"approved payment", func(h *harness) string {
			r := mdtMustPay(h, railWire, 20_000, pay.OutcomeHeld, nil)
			if _, err := h.pay.Approve(h.t.Context(), pay.ApproveRequest{IntentID: r.IntentID, Challenge: r.Held.Challenge, MandateID: "mdt-1",
				Rationale: "checked with the team", Acknowledged: true}, pay.OperatorCall{Operator: "op-test", Rationale: "checked with the team"}); err != nil {
				h.t.Fatal(err)
			}
			return r.IntentID
		}, pay.StatusSettled, gate.Confirm, []string{"gate.decision", "approval.granted", "payment.settled"}},
		{"captured hold on a rail that authorizes", func(h *harness) string {
			placed, err := h.svc.HoldPlace(h.t.Context(), h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 5_000, nil), TTLSeconds: 3600})
			if err != nil {
				h.t.Fatal(err)
			}
			if _, err := h.svc.HoldCapture(h.t.Context(), h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 4_000, IdempotencyKey: "c"}); err != nil {
				h.t.Fatal(err)
			}
			return placed.IntentID
		}, pay.StatusSettled, gate.Allow, []string{"gate.decision", "protocol.hold.place", "payment.authorized", "protocol.hold.authorize",
			"payment.capture_requested", "protocol.hold.capture", "payment.settled", "protocol.hold.settle"}},
		{"captured hold on a rail that does not", func(h *harness) string {
			placed, err := h.svc.HoldPlace(h.t.Context(), h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 5_000, nil), TTLSeconds: 3600})
			if err != nil {
				h.t.Fatal(err)
			}
			if _, err := h.svc.HoldCapture(h.t.Context(), h.call(), &HoldCaptureRequest{HoldID: placed.HoldID, AmountMinor: 5_000, IdempotencyKey: "c"}); err != nil {
				h.t.Fatal(err)
			}
			return placed.IntentID
		}, pay.StatusSettled, gate.Allow, []string{"gate.decision", "payment.authorized", "protocol.hold.place",
			"payment.capture_requested", "protocol.hold.capture", "payment.settled", "protocol.hold.settle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			id := tc.run(h)
			b := prfJSON(h, id)
			v := VerifyProof(h.log.VerifierKey(), b)
			if diff := cmp.Diff(&ProofVerification{Valid: true, PolicyVerified: true, IntentID: id, Outcome: string(tc.outcome)}, v); diff != "" {
				t.Fatalf("verification (-want +got):\n%s\nproof: %s", diff, b)
			}
			p := prfDecode(t, b)
			if p.Type != ProofType || p.IntentID != id || p.Status != tc.status || p.Decision.Outcome != tc.outcome ||
				p.Checkpoint.TreeSize != h.size() {
				t.Errorf("proof = type %s intent %s status %s outcome %s tree %d (record %d)",
					p.Type, p.IntentID, p.Status, p.Decision.Outcome, p.Checkpoint.TreeSize, h.size())
			}
			if diff := cmp.Diff(tc.types, prfEntryTypes(p)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			// No identity service here: the hash in force now, not tied to
			// the decision by a gate.policy entry.
			if p.PolicyHash != "sha256:test-policy" || p.PolicyEntry != nil {
				t.Errorf("policy = %q, %+v", p.PolicyHash, p.PolicyEntry)
			}
			// proof.verify answers the same with the deployment's key.
			got, err := h.svc.ProofVerify(t.Context(), h.call(), &ProofVerifyRequest{Proof: b})
			if err != nil || !cmp.Equal(got, v) {
				t.Errorf("proof.verify = %+v, %v", got, err)
			}
		})
	}
}

// TestProofNotFound: only the caller's own intents have proofs.
func TestProofNotFound(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	theirs := ovsPayWithKey(h, ovsSecondKey(h), 1_000)
	mine := mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil)
	for _, tc := range []struct {
		name   string
		call   Call
		intent string
	}{
		{"another key's intent", h.call(), theirs.IntentID},
		{"my intent, asked by another key", AgentCall(ovsSecondKey(h), "req_second"), mine.IntentID},
		{"no such intent", h.call(), "int_01JNOSUCHINTENT0000000000"},
		{"not an intent id", h.call(), "hold_x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.ProofGet(t.Context(), tc.call, &ProofGetRequest{IntentID: tc.intent})
			if code(err) != CodeProofNotFound {
				t.Errorf("code %q, want %q", code(err), CodeProofNotFound)
			}
		})
	}
}

// TestProofPolicyEntry: with a gate.policy entry in the record, a proof
// carries the policy in force at its decision, proven like the rest.
func TestProofPolicyEntry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	first := prfRecordPolicy(h, "sha256:policy-one")
	pay1 := mdtMustPay(h, railWire, 1_000, pay.OutcomeSettled, nil)
	second := prfRecordPolicy(h, "sha256:policy-two")
	pay2 := mdtMustPay(h, railWire, 2_000, pay.OutcomeSettled, nil)
	for _, tc := range []struct {
		intent string
		entry  audit.Entry
		digest string
	}{
		{pay1.IntentID, first, "sha256:policy-one"},
		{pay2.IntentID, second, "sha256:policy-two"},
	} {
		b := prfJSON(h, tc.intent)
		if v := VerifyProof(h.log.VerifierKey(), b); !v.Valid {
			t.Fatalf("proof of %s: %s", tc.intent, v.Failure)
		}
		p := prfDecode(t, b)
		if p.PolicyHash != tc.digest || p.PolicyEntry == nil || p.PolicyEntry.Entry.Seq != tc.entry.Seq || p.PolicyEntry.Entry.Hash != tc.entry.Hash {
			t.Errorf("proof of %s: policy %q entry %+v, want %q at seq %d", tc.intent, p.PolicyHash, p.PolicyEntry, tc.digest, tc.entry.Seq)
		}
		p.PolicyHash = "sha256:policy-forged"
		v := VerifyProof(h.log.VerifierKey(), prfMarshal(t, p))
		if v.Valid || !strings.Contains(v.Failure, "policy hash") {
			t.Errorf("a changed digest: %+v", v)
		}
	}
}

func prfMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestProofTampering changes a genuine proof one way at a time; each
// change is caught, by the check the failure names.
func TestProofTampering(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	prfRecordPolicy(h, "sha256:policy-one")
	early := mdtMustPay(h, railWire, 500, pay.OutcomeSettled, nil)
	olderCheckpoint := prfDecode(t, prfJSON(h, early.IntentID)).Checkpoint
	target := mdtMustPay(h, railCard, 3_000, pay.OutcomeSettled, nil)
	ecoRefund(h, target.IntentID, 1_000)
	prfRecordPolicy(h, "sha256:policy-two")
	later := mdtMustPay(h, railWire, 700, pay.OutcomeSettled, nil)

	good := prfJSON(h, target.IntentID)
	vkey := h.log.VerifierKey()
	if v := VerifyProof(vkey, good); !v.Valid {
		t.Fatalf("the genuine proof: %s", v.Failure)
	}
	laterJSON := prfJSON(h, later.IntentID)
	other := prfDecode(t, laterJSON)                  // same checkpoint: nothing appended since
	older := prfDecode(t, prfJSON(h, early.IntentID)) // the same checkpoint, under the first policy
	if want := prfDecode(t, good).Checkpoint; other.Checkpoint != want {
		t.Fatalf("the two proofs are against different checkpoints")
	}
	otherLog, err := audit.Open(ctx, memstore.New(nil), prfKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(prfEntryTypes(prfDecode(t, good)), []string{"gate.decision", "payment.settled", "payment.refunded"}) {
		t.Fatalf("entries: %v", prfEntryTypes(prfDecode(t, good)))
	}

	for _, tc := range []struct {
		name string
		// edit changes the decoded proof; raw, when set, replaces the bytes.
		edit   func(p *EnforcementProof)
		raw    func(b []byte) []byte
		key    string
		target string // "later": tamper with the proof of the later payment
		want   string // what the failure names
		gap    string // a known gap: the change is not caught yet
	}{
		{name: "decision outcome", edit: func(p *EnforcementProof) { p.Decision.Outcome = gate.Deny },
			want: "the decision differs from the one the record holds"},
		{name: "decision mandate", edit: func(p *EnforcementProof) { p.Decision.MandateID = "mdt-2" },
			want: "the decision differs from the one the record holds"},
		{name: "decision reasons", edit: func(p *EnforcementProof) {
			p.Decision.Reasons = append(p.Decision.Reasons, gate.Reason{Code: gate.CodeConfirmThreshold})
		}, want: "the decision differs from the one the record holds"},
		{name: "decision entry's outcome", edit: func(p *EnforcementProof) {
			p.Entries[0].Entry.Data = bytes.Replace(p.Entries[0].Entry.Data, []byte(`"allow"`), []byte(`"deny"`), 1)
			p.Decision.Outcome = gate.Deny
		}, want: "entry 0 (seq"},
		{name: "drop the decision entry", edit: func(p *EnforcementProof) { p.Entries = p.Entries[1:] },
			want: "the first entry is payment.settled, not the gate.decision"},
		{name: "drop every entry", edit: func(p *EnforcementProof) { p.Entries = nil }, want: "no entries"},
		{name: "drop the refund entry", edit: func(p *EnforcementProof) {
			p.Entries = p.Entries[:2]
		}, want: "is not what the entries show"},
		{name: "change the status", edit: func(p *EnforcementProof) {
			p.Status = pay.StatusRefunded
		}, want: "is not what the entries show"},
		{name: "reorder entries", edit: func(p *EnforcementProof) { p.Entries[1], p.Entries[2] = p.Entries[2], p.Entries[1] },
			want: "entries are not in record order"},
		{name: "repeat an entry", edit: func(p *EnforcementProof) { p.Entries = append(p.Entries, p.Entries[2]) },
			want: "entries are not in record order"},
		{name: "another intent's entry", edit: func(p *EnforcementProof) { p.Entries = append(p.Entries, other.Entries[1]) },
			want: "is about"},
		{name: "another intent's id", edit: func(p *EnforcementProof) { p.IntentID = other.IntentID }, want: "is about"},
		{name: "settled amount", edit: func(p *EnforcementProof) {
			p.Entries[1].Entry.Data = bytes.Replace(p.Entries[1].Entry.Data, []byte(`"minor":3000`), []byte(`"minor":30`), 1)
		}, want: "entry 1 (seq"},
		{name: "entry seq", edit: func(p *EnforcementProof) { p.Entries[2].Entry.Seq++ }, want: "entry 2 (seq"},
		// Entries carry no signature of their own (the checkpoint covers
		// them); one that claims a forged one is refused.
		{name: "entry signature", edit: func(p *EnforcementProof) {
			p.Entries[1].Entry.Sig = base64.RawURLEncoding.EncodeToString(make([]byte, 64))
		}, want: "entry 1 (seq"},
		{name: "inclusion path", edit: func(p *EnforcementProof) {
			hs := p.Entries[0].Inclusion.Hashes
			hs[0], hs[len(hs)-1] = hs[len(hs)-1], hs[0]
			p.Entries[0].Inclusion.Hashes = append(hs, hs[0])
		}, want: "entry 0 (seq"},
		{name: "older checkpoint", edit: func(p *EnforcementProof) { p.Checkpoint = olderCheckpoint },
			want: "its inclusion proof is not against the proof's checkpoint"},
		{name: "checkpoint size", edit: func(p *EnforcementProof) { p.Checkpoint.TreeSize-- }, want: "checkpoint:"},
		{name: "checkpoint root", edit: func(p *EnforcementProof) { p.Checkpoint.RootHash = olderCheckpoint.RootHash }, want: "checkpoint:"},
		{name: "policy hash", edit: func(p *EnforcementProof) { p.PolicyHash = "sha256:policy-forged" },
			want: "the policy hash is not the one the decision entry recorded"},
		{name: "a later policy", edit: func(p *EnforcementProof) {
			p.PolicyEntry, p.PolicyHash = other.PolicyEntry, "sha256:policy-two"
		}, want: "the policy hash is not the one the decision entry recorded"},
		{name: "a later policy entry, hash kept", edit: func(p *EnforcementProof) { p.PolicyEntry = other.PolicyEntry },
			want: "the policy entry is not a gate.policy entry before the decision"},
		{name: "policy entry of another type", edit: func(p *EnforcementProof) { p.PolicyEntry = &p.Entries[0] },
			want: "the policy entry is not a gate.policy entry before the decision"},
		{name: "policy entry data", edit: func(p *EnforcementProof) {
			p.PolicyEntry.Entry.Data = bytes.ReplaceAll(p.PolicyEntry.Entry.Data, []byte("policy-one"), []byte("policy-xxx"))
		}, want: "policy entry:"},
		{name: "an older policy", edit: func(p *EnforcementProof) {
			p.PolicyEntry, p.PolicyHash = older.PolicyEntry, older.PolicyHash
		}, target: "later", want: "policy"},
		{name: "strip the policy entry and change the hash", edit: func(p *EnforcementProof) {
			p.PolicyEntry, p.PolicyHash = nil, "sha256:policy-forged"
		}, want: "policy"},
		{name: "proof type", edit: func(p *EnforcementProof) { p.Type = "countersign.enforcement-proof/v0" }, want: "type"},
		{name: "wrong verifier key", key: otherLog.VerifierKey(), want: "checkpoint:"},
		{name: "not a verifier key", key: "garbage", want: "checkpoint:"},
		{name: "not JSON", raw: func(b []byte) []byte { return b[:len(b)/2] }, want: "malformed:"},
		{name: "unknown member", raw: func(b []byte) []byte { return append([]byte(`{"extra":1,`), b[1:]...) }, want: "malformed:"},
		{name: "trailing data", raw: func(b []byte) []byte { return append(slices.Clone(b), []byte(`{}`)...) }, want: "malformed:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(good)
			if tc.target == "later" {
				b = slices.Clone(laterJSON)
			}
			if tc.edit != nil {
				p := prfDecode(t, b)
				tc.edit(p)
				b = prfMarshal(t, p)
			}
			if tc.raw != nil {
				b = tc.raw(b)
			}
			key := vkey
			if tc.key != "" {
				key = tc.key
			}
			v := VerifyProof(key, b)
			if tc.gap != "" && (v.Valid || !strings.Contains(v.Failure, tc.want)) {
				skipKnownBug(t, "%s (answer %+v)", tc.gap, v)
			}
			if v.Valid {
				t.Fatalf("a tampered proof verified: %+v", v)
			}
			if !strings.Contains(v.Failure, tc.want) {
				t.Errorf("failure %q does not name %q", v.Failure, tc.want)
			}
		})
	}
}

func prfKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
