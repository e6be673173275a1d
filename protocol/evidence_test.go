package protocol

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// The helpers prefixed evx build obligations and evidence of every class
// from the harness's keys.

// evxStatement is a statement about subject saying what was delivered.
func evxStatement(subject, what string) string {
	return `{"subject":"` + subject + `","delivered":"` + what + `"}`
}

// evxObligation creates an obligation of 100 USD on the card rail with
// the floor, the counterparty cp ("" for none), due in an hour.
func evxObligation(t *testing.T, h *harness, floor EvidenceClass, cp string) *ObligationCreated {
	t.Helper()
	o, err := h.svc.ObligationCreate(t.Context(), h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 100, nil),
		EvidenceFloor: floor, Deadline: h.clock.Now().Add(time.Hour), Counterparty: cp})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != ObligationAwaiting {
		t.Fatalf("obligation %+v", o)
	}
	return o
}

// evxSubmission is a genuine submission of class c of stmt about subject,
// and the signer it is stored with.
func evxSubmission(t *testing.T, h *harness, subject string, c EvidenceClass, stmt string) (*EvidenceSubmitRequest, string) {
	t.Helper()
	req := &EvidenceSubmitRequest{Subject: subject, Class: c, Statement: json.RawMessage(stmt)}
	switch c {
	case ClassSelf:
	case ClassSign:
		req.Signature = h.ev.sign(t, h.ev.cpKey, subject, stmt)
		return req, h.ev.cp
	case ClassWit:
		req.Signer, req.Signature = "witness-1", h.ev.sign(t, h.ev.witness, subject, stmt)
	case ClassRec:
		req.Signer, req.Signature = "merchant-1", h.ev.sign(t, h.ev.receipt, subject, stmt)
	case ClassAtt:
		req.Signer, req.Signature = "attester-1", h.ev.sign(t, h.ev.attester, subject, stmt)
	case ClassProof, ClassPote:
		req.Signer, req.Proof = h.ev.logOrigin, h.ev.logProof(t, subject, stmt, c == ClassPote)
	default:
		t.Fatalf("class %q", c)
	}
	return req, req.Signer
}

// TestEvidenceLattice is the order of the classes, pair by pair: a floor
// is met by itself and the classes above it; wit and rec are incomparable
// (att, proof and pote meet both); self meets only self.
func TestEvidenceLattice(t *testing.T) {
	meets := map[EvidenceClass][]EvidenceClass{
		ClassSelf:  {ClassSelf, ClassSign, ClassWit, ClassRec, ClassAtt, ClassProof, ClassPote},
		ClassSign:  {ClassSign, ClassWit, ClassRec, ClassAtt, ClassProof, ClassPote},
		ClassWit:   {ClassWit, ClassAtt, ClassProof, ClassPote},
		ClassRec:   {ClassRec, ClassAtt, ClassProof, ClassPote},
		ClassAtt:   {ClassAtt, ClassProof, ClassPote},
		ClassProof: {ClassProof, ClassPote},
		ClassPote:  {ClassPote},
	}
	classes := EvidenceClasses()
	if diff := cmp.Diff([]EvidenceClass{"self", "sign", "wit", "rec", "att", "proof", "pote"}, classes); diff != "" {
		t.Fatalf("EvidenceClasses (-want +got):\n%s", diff)
	}
	pairs := 0
	for _, floor := range classes {
		for _, c := range classes {
			want := false
			for _, m := range meets[floor] {
				want = want || m == c
			}
			t.Run(fmt.Sprintf("%s_meets_%s", c, floor), func(t *testing.T) {
				if got := c.Satisfies(floor); got != want {
					t.Errorf("%s.Satisfies(%s) = %v, want %v", c, floor, got, want)
				}
			})
			pairs++
		}
	}
	if pairs != 49 {
		t.Errorf("%d pairs, want 49", pairs)
	}
	t.Run("unknown classes", func(t *testing.T) {
		for _, bad := range []EvidenceClass{"", "SELF", "Self", "witness", "pote ", "proof\x00"} {
			if bad.Valid() {
				t.Errorf("%q is valid", bad)
			}
			for _, c := range append(classes, bad) {
				if bad.Satisfies(c) || c.Satisfies(bad) {
					t.Errorf("%q and %q satisfy one another", bad, c)
				}
			}
		}
		for _, c := range classes {
			if !c.Valid() {
				t.Errorf("%q is not valid", c)
			}
		}
	})
	t.Run("what evidence amounts to", func(t *testing.T) {
		for _, tc := range []struct{ achieved, want []EvidenceClass }{
			{nil, []EvidenceClass{}},
			{[]EvidenceClass{ClassSelf}, []EvidenceClass{ClassSelf}},
			{[]EvidenceClass{ClassSign, ClassSelf}, []EvidenceClass{ClassSign}},
			{[]EvidenceClass{ClassRec, ClassWit}, []EvidenceClass{ClassWit, ClassRec}},
			{[]EvidenceClass{ClassRec, ClassWit, ClassSign, ClassSelf}, []EvidenceClass{ClassWit, ClassRec}},
			{[]EvidenceClass{ClassWit, ClassAtt}, []EvidenceClass{ClassAtt}},
			{[]EvidenceClass{ClassPote, ClassRec, ClassProof}, []EvidenceClass{ClassPote}},
			{classes, []EvidenceClass{ClassPote}},
		} {
			if diff := cmp.Diff(tc.want, maximal(tc.achieved)); diff != "" {
				t.Errorf("maximal(%v) (-want +got):\n%s", tc.achieved, diff)
			}
		}
	})
}

// TestEvidenceLatticeClears runs the lattice end to end: for every pair
// (floor, class) an obligation with the floor gets one genuine piece of
// evidence of the class, and clears exactly when the class meets the
// floor.
func TestEvidenceLatticeClears(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	for _, floor := range EvidenceClasses() {
		for _, c := range EvidenceClasses() {
			t.Run(fmt.Sprintf("%s_on_%s", c, floor), func(t *testing.T) {
				o := evxObligation(t, h, floor, h.ev.cp)
				req, _ := evxSubmission(t, h, o.ObligationID, c, evxStatement(o.ObligationID, "a report"))
				n := h.size()
				got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
				if err != nil {
					t.Fatal(err)
				}
				cl := got.Clearing
				if cl == nil {
					t.Fatal("no clearing for an obligation")
				}
				if diff := cmp.Diff([]EvidenceClass{c}, cl.Achieved); diff != "" {
					t.Errorf("achieved (-want +got):\n%s", diff)
				}
				if c.Satisfies(floor) {
					if cl.Status != ClearingCleared || !cl.Admissible || cl.EvidenceID != got.Evidence.ID || cl.Receipt == nil || got.IsAccepted() {
						t.Errorf("clearing %+v, want cleared on %s", cl, got.Evidence.ID)
					}
					if ts := h.typesSince(n); len(ts) < 2 || ts[0] != "protocol.evidence.submit" || !strings.Contains(strings.Join(ts, " "), "protocol.clearing.attempt") {
						t.Errorf("entries %v", ts)
					}
					return
				}
				if cl.Status != ClearingPending || cl.Admissible || cl.Problem == nil || cl.Problem.Code != CodeClearingPending ||
					cl.Problem.Awaited != floor || !got.IsAccepted() {
					t.Errorf("clearing %+v, want pending for %s", cl, floor)
				}
				if diff := cmp.Diff([]string{"protocol.evidence.submit"}, h.typesSince(n)); diff != "" {
					t.Errorf("entries (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestEvidenceClasses verifies each class end to end on one obligation
// whose floor (pote) nothing below clears: genuine evidence is stored with
// its signer, and every forgery is refused with its code, changing
// nothing.
func TestEvidenceClasses(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	o := evxObligation(t, h, ClassPote, h.ev.cp)
	subj := o.ObligationID
	other := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	seq := 0
	stmt := func() string { seq++; return evxStatement(subj, fmt.Sprintf("part %d", seq)) }
	genuine := func(c EvidenceClass, edit func(r *EvidenceSubmitRequest, stmt string)) func(t *testing.T) *EvidenceSubmitRequest {
		return func(t *testing.T) *EvidenceSubmitRequest {
			s := stmt()
			r, _ := evxSubmission(t, h, subj, c, s)
			if edit != nil {
				edit(r, s)
			}
			return r
		}
	}
	sig := func(key ed25519.PrivateKey) func(r *EvidenceSubmitRequest, stmt string) {
		return func(r *EvidenceSubmitRequest, stmt string) { r.Signature = h.ev.sign(t, key, subj, stmt) }
	}
	proofEdit := func(edit func(p *LogProof)) func(r *EvidenceSubmitRequest, stmt string) {
		return func(r *EvidenceSubmitRequest, _ string) { edit(r.Proof) }
	}
	// A checkpoint for the statement's proof signed by signers instead.
	resign := func(cosign bool, signers ...note.Signer) func(r *EvidenceSubmitRequest, stmt string) {
		return func(r *EvidenceSubmitRequest, stmt string) {
			p := h.ev.logProof(t, subj, stmt, cosign)
			text, _, _ := strings.Cut(p.Checkpoint, "\n\n")
			msg, err := note.Sign(&note.Note{Text: text + "\n"}, signers...)
			if err != nil {
				t.Fatal(err)
			}
			p.Checkpoint = string(msg)
			r.Proof = p
		}
	}
	forgedLog := evxNoteSigner(t, h.ev.logOrigin)
	unknownWitness := evxNoteSigner(t, "witness-2")
	impostorWitness := evxNoteSigner(t, "witness-1")

	tests := []struct {
		name   string
		req    func(t *testing.T) *EvidenceSubmitRequest
		signer string // the signer stored
		code   string
		// cleared: the evidence meets the floor (pote), and clears the
		// obligation.
		cleared bool
	}{
		{name: "self", req: genuine(ClassSelf, nil)},
		{name: "self with a signer", req: genuine(ClassSelf, func(r *EvidenceSubmitRequest, _ string) { r.Signer = h.ev.cp }), code: CodeEvidenceInvalid},
		{name: "self with a signature", req: genuine(ClassSelf, sig(h.agentKey)), code: CodeEvidenceInvalid},
		{name: "self with a proof", req: genuine(ClassSelf, func(r *EvidenceSubmitRequest, s string) { r.Proof = h.ev.logProof(t, subj, s, false) }),
			code: CodeEvidenceInvalid},

		{name: "sign", req: genuine(ClassSign, nil), signer: h.ev.cp},
		{name: "sign naming the counterparty", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) { r.Signer = h.ev.cp }), signer: h.ev.cp},
		{name: "sign by the payer", req: genuine(ClassSign, sig(h.agentKey)), code: CodeEvidenceInvalid},
		{name: "sign by a witness", req: genuine(ClassSign, sig(h.ev.witness)), code: CodeEvidenceInvalid},
		{name: "sign naming someone else", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) {
			r.Signer = hex.EncodeToString(stranger.Public().(ed25519.PublicKey))
			r.Signature = h.ev.sign(t, stranger, subj, string(r.Statement))
		}), code: CodeEvidenceSigner},
		{name: "sign naming a witness", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "witness-1" }), code: CodeEvidenceSigner},
		{name: "sign without a signature", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) { r.Signature = "" }), code: CodeEvidenceInvalid},
		{name: "sign with a signature that is not base64url", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) {
			r.Signature = "*" + r.Signature[1:]
		}), code: CodeEvidenceInvalid},
		{name: "sign with a short signature", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) { r.Signature = r.Signature[:40] }),
			code: CodeEvidenceInvalid},
		{name: "sign over another subject", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, s string) {
			r.Signature = h.ev.sign(t, h.ev.cpKey, other, strings.ReplaceAll(s, subj, other))
		}), code: CodeEvidenceInvalid},
		{name: "sign over another statement", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, _ string) {
			r.Signature = h.ev.sign(t, h.ev.cpKey, subj, evxStatement(subj, "something else"))
		}), code: CodeEvidenceInvalid},
		{name: "sign over the statement without the context line", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, s string) {
			c, err := CanonicalStatement([]byte(s), subj)
			if err != nil {
				t.Fatal(err)
			}
			r.Signature = base64.RawURLEncoding.EncodeToString(ed25519.Sign(h.ev.cpKey, c))
		}), code: CodeEvidenceInvalid},
		{name: "self with an integer beyond 2^53", req: genuine(ClassSelf, func(r *EvidenceSubmitRequest, _ string) {
			// RFC 8785 would round it to 9223372036854776000: refused,
			// never stored as a number its author did not write.
			r.Statement = json.RawMessage(fmt.Sprintf(`{"subject":%q,"units":9223372036854775808}`, subj))
		}), code: CodeEvidenceInvalid},
		{name: "sign over another spelling of the statement", req: genuine(ClassSign, func(r *EvidenceSubmitRequest, s string) {
			// The signature covers the canonical form: whitespace and
			// member order are not part of it.
			r.Statement = json.RawMessage(fmt.Sprintf(" {\n \"delivered\" : \"part %d\",\t\"subject\": \"%s\" } ", seq, subj))
		}), signer: h.ev.cp},

		{name: "wit", req: genuine(ClassWit, nil), signer: "witness-1"},
		{name: "wit by an unknown name", req: genuine(ClassWit, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "witness-2" }), code: CodeEvidenceSigner},
		{name: "wit without a name", req: genuine(ClassWit, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "" }), code: CodeEvidenceSigner},
		{name: "wit by the attester's key", req: genuine(ClassWit, sig(h.ev.attester)), code: CodeEvidenceInvalid},
		{name: "wit by the counterparty's key", req: genuine(ClassWit, sig(h.ev.cpKey)), code: CodeEvidenceInvalid},
		{name: "wit naming the merchant", req: genuine(ClassWit, func(r *EvidenceSubmitRequest, s string) {
			r.Signer, r.Signature = "merchant-1", h.ev.sign(t, h.ev.receipt, subj, s)
		}), code: CodeEvidenceSigner},

		{name: "rec", req: genuine(ClassRec, nil), signer: "merchant-1"},
		{name: "rec by the witness under its name", req: genuine(ClassRec, func(r *EvidenceSubmitRequest, s string) {
			r.Signer, r.Signature = "witness-1", h.ev.sign(t, h.ev.witness, subj, s)
		}), code: CodeEvidenceSigner},
		{name: "rec by the witness's key under the merchant's name", req: genuine(ClassRec, sig(h.ev.witness)), code: CodeEvidenceInvalid},
		{name: "rec by an unknown merchant", req: genuine(ClassRec, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "merchant-2" }), code: CodeEvidenceSigner},

		{name: "att", req: genuine(ClassAtt, nil), signer: "attester-1"},
		{name: "att by the merchant's key", req: genuine(ClassAtt, sig(h.ev.receipt)), code: CodeEvidenceInvalid},
		{name: "att naming the witness", req: genuine(ClassAtt, func(r *EvidenceSubmitRequest, s string) {
			r.Signer, r.Signature = "witness-1", h.ev.sign(t, h.ev.witness, subj, s)
		}), code: CodeEvidenceSigner},
		{name: "att with a proof instead of a signature", req: genuine(ClassAtt, func(r *EvidenceSubmitRequest, s string) {
			r.Signature, r.Proof = "", h.ev.logProof(t, subj, s, true)
		}), code: CodeEvidenceInvalid},

		{name: "proof", req: genuine(ClassProof, nil), signer: h.ev.logOrigin},
		{name: "proof of a co-signed checkpoint", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, s string) {
			r.Proof = h.ev.logProof(t, subj, s, true)
		}), signer: h.ev.logOrigin},
		{name: "proof without a proof", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, _ string) { r.Proof = nil }), code: CodeEvidenceInvalid},
		{name: "proof with a signature", req: genuine(ClassProof, sig(h.ev.attester)), code: CodeEvidenceInvalid},
		{name: "proof of an unknown log", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "log.example/other" }),
			code: CodeEvidenceSigner},
		{name: "proof naming no log", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "" }), code: CodeEvidenceSigner},
		{name: "proof with a tampered hash", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Hashes[0] = evxFlip(t, p.Hashes[0]) })),
			code: CodeEvidenceInvalid},
		{name: "proof with the last hash tampered", req: genuine(ClassProof, proofEdit(func(p *LogProof) {
			p.Hashes[len(p.Hashes)-1] = evxFlip(t, p.Hashes[len(p.Hashes)-1])
		})), code: CodeEvidenceInvalid},
		{name: "proof with a hash missing", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Hashes = p.Hashes[1:] })), code: CodeEvidenceInvalid},
		{name: "proof with a hash too many", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Hashes = append(p.Hashes, p.Hashes[0]) })),
			code: CodeEvidenceInvalid},
		{name: "proof with no hashes", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Hashes = nil })), code: CodeEvidenceInvalid},
		{name: "proof with a hash that is not base64", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Hashes[0] = "not base64!" })),
			code: CodeEvidenceInvalid},
		{name: "proof with a base64url hash", req: genuine(ClassProof, proofEdit(func(p *LogProof) {
			p.Hashes[0] = base64.RawURLEncoding.EncodeToString(evxHash(t, p.Hashes[0]))
		})), code: CodeEvidenceInvalid},
		{name: "proof with the wrong index", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Index = 1 })), code: CodeEvidenceInvalid},
		{name: "proof with an index past the tree", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Index = 4 })), code: CodeEvidenceInvalid},
		{name: "proof with a huge index", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Index = 1<<64 - 1 })), code: CodeEvidenceInvalid},
		{name: "proof with a checkpoint of another size", req: genuine(ClassProof, proofEdit(func(p *LogProof) {
			p.Checkpoint = strings.Replace(p.Checkpoint, "\n4\n", "\n5\n", 1)
		})), code: CodeEvidenceInvalid},
		{name: "proof with a checkpoint signed by another key", req: genuine(ClassProof, resign(false, forgedLog)), code: CodeEvidenceInvalid},
		{name: "proof with a checkpoint signed by the witness only", req: genuine(ClassProof, resign(false, h.ev.witnessSigner)),
			code: CodeEvidenceInvalid},
		{name: "proof with a checkpoint of another origin", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, s string) {
			p := h.ev.logProof(t, subj, s, false)
			text, _, _ := strings.Cut(p.Checkpoint, "\n\n")
			text = strings.Replace(text, h.ev.logOrigin, "log.example/other", 1)
			msg, err := note.Sign(&note.Note{Text: text + "\n"}, h.ev.logSigner)
			if err != nil {
				t.Fatal(err)
			}
			p.Checkpoint = string(msg)
			r.Proof = p
		}), code: CodeEvidenceInvalid},
		{name: "proof of another statement", req: genuine(ClassProof, func(r *EvidenceSubmitRequest, _ string) {
			r.Proof = h.ev.logProof(t, subj, evxStatement(subj, "something else"), false)
		}), code: CodeEvidenceInvalid},
		{name: "proof with no checkpoint", req: genuine(ClassProof, proofEdit(func(p *LogProof) { p.Checkpoint = "" })), code: CodeEvidenceInvalid},

		{name: "pote", req: genuine(ClassPote, nil), signer: h.ev.logOrigin, cleared: true},
		{name: "pote without the witness's co-signature", req: genuine(ClassPote, func(r *EvidenceSubmitRequest, s string) {
			r.Proof = h.ev.logProof(t, subj, s, false)
		}), code: CodeEvidenceInvalid},
		{name: "pote co-signed by an unknown witness", req: genuine(ClassPote, resign(false, h.ev.logSigner, unknownWitness)), code: CodeEvidenceInvalid},
		{name: "pote co-signed by another key under the witness's name", req: genuine(ClassPote, resign(false, h.ev.logSigner, impostorWitness)),
			code: CodeEvidenceInvalid},
		{name: "pote co-signed by the witness but not the log", req: genuine(ClassPote, resign(false, forgedLog, h.ev.witnessSigner)),
			code: CodeEvidenceInvalid},
		{name: "pote with a tampered hash", req: genuine(ClassPote, proofEdit(func(p *LogProof) { p.Hashes[1] = evxFlip(t, p.Hashes[1]) })),
			code: CodeEvidenceInvalid},
		{name: "pote with a signature", req: genuine(ClassPote, sig(h.ev.witness)), code: CodeEvidenceInvalid},
		{name: "pote of an unknown log", req: genuine(ClassPote, func(r *EvidenceSubmitRequest, _ string) { r.Signer = "witness-1" }),
			code: CodeEvidenceSigner},

		{name: "an unknown class", req: genuine(ClassSelf, func(r *EvidenceSubmitRequest, _ string) { r.Class = "notarized" }), code: CodeEvidenceInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req(t)
			if tc.code != "" {
				refusedUnchanged(t, h, tc.code, func() error { _, err := h.svc.EvidenceSubmit(ctx, h.call(), req); return err })
				return
			}
			n := h.size()
			got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			wantTypes := []string{"protocol.evidence.submit"}
			if tc.cleared {
				wantTypes = append(wantTypes, "payment.capture_requested", "protocol.obligation.clear", "protocol.clearing.attempt",
					"payment.settled", "protocol.obligation.settle")
			}
			if diff := cmp.Diff(wantTypes, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			canon, err := CanonicalStatement(req.Statement, subj)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(canon)
			ev := got.Evidence
			if !strings.HasPrefix(ev.ID, "evd_") || ev.Subject != subj || ev.Class != req.Class || ev.Signer != tc.signer ||
				string(ev.Statement) != string(canon) || ev.Digest != hex.EncodeToString(sum[:]) || ev.AgentKeyID != h.caller.KeyID ||
				!ev.CreatedAt.Equal(h.clock.Now()) || len(ev.Entries) != 1 || ev.Entries[0] != n+1 || got.WasReplayed() {
				t.Errorf("evidence %+v", ev)
			}
			switch cl := got.Clearing; {
			case tc.cleared:
				if cl == nil || cl.Status != ClearingCleared || cl.EvidenceID != got.Evidence.ID || got.IsAccepted() {
					t.Errorf("clearing %+v, want cleared on %s", cl, got.Evidence.ID)
				}
			case cl == nil || cl.Status != ClearingPending || cl.Problem == nil || cl.Problem.Awaited != ClassPote || !got.IsAccepted():
				t.Errorf("clearing %+v, want pending on pote", cl)
			}
			stored, err := h.svc.EvidenceGet(ctx, h.call(), &EvidenceRef{EvidenceID: ev.ID})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&ev, stored); diff != "" {
				t.Errorf("evidence.get (-submitted +got):\n%s", diff)
			}
			for e, err := range h.log.Entries(ctx, n+1, n+1) {
				if err != nil {
					t.Fatal(err)
				}
				if e.IntentID != o.IntentID {
					t.Errorf("entry about %q, want the obligation's intent %s", e.IntentID, o.IntentID)
				}
			}
		})
	}
	t.Run("the clearing sees every class", func(t *testing.T) {
		cs, err := h.svc.ClearingStatus(ctx, h.call(), &ObligationRef{ObligationID: subj})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]EvidenceClass{ClassPote}, cs.Achieved); diff != "" {
			t.Errorf("achieved (-want +got):\n%s", diff)
		}
	})
}

// evxNoteSigner is a fresh note signer under name.
func evxNoteSigner(t *testing.T, name string) note.Signer {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// evxHash decodes a proof hash.
func evxHash(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// evxFlip flips one bit of a proof hash.
func evxFlip(t *testing.T, s string) string {
	t.Helper()
	b := evxHash(t, s)
	b[7] ^= 0x10
	return base64.StdEncoding.EncodeToString(b)
}

// TestEvidenceStatement checks the statement rules: one JSON object whose
// subject member is the subject, at most MaxStatement bytes canonical,
// nothing after it.
func TestEvidenceStatement(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	other := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	// pad makes a statement whose canonical form is n bytes.
	pad := func(n int) string {
		head, tail := `{"pad":"`, `","subject":"`+subj+`"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	tests := []struct {
		name      string
		statement string
		canonical string // "" when refused
	}{
		{name: "an object", statement: `{"subject":"` + subj + `","b":[1,2.50,{"z":true,"a":null}],"a":"\u00e9"}`,
			canonical: `{"a":"é","b":[1,2.5,{"a":null,"z":true}],"subject":"` + subj + `"}`},
		{name: "surrounded by whitespace", statement: " \n{\"subject\":\"" + subj + "\"}\n\t", canonical: `{"subject":"` + subj + `"}`},
		{name: "an escaped subject", statement: `{"subject":"obl\u005f` + subj[4:] + `"}`, canonical: `{"subject":"` + subj + `"}`},
		{name: "exactly MaxStatement bytes", statement: pad(MaxStatement), canonical: pad(MaxStatement)},

		{name: "one byte over MaxStatement", statement: pad(MaxStatement + 1)},
		{name: "far over MaxStatement", statement: pad(4 * MaxStatement)},
		{name: "empty", statement: ``},
		{name: "null", statement: `null`},
		{name: "an array", statement: `[{"subject":"` + subj + `"}]`},
		{name: "a string", statement: `"` + subj + `"`},
		{name: "a number", statement: `42`},
		{name: "not JSON", statement: `subject=` + subj},
		{name: "an unterminated object", statement: `{"subject":"` + subj + `"`},
		{name: "no subject member", statement: `{"delivered":"a report"}`},
		{name: "an empty object", statement: `{}`},
		{name: "another subject", statement: evxStatement(other, "a report")},
		{name: "a subject in other case", statement: `{"subject":"` + strings.ToLower(subj) + `"}`},
		{name: "a capitalised member", statement: `{"Subject":"` + subj + `"}`},
		{name: "a numeric subject", statement: `{"subject":42}`},
		{name: "a null subject", statement: `{"subject":null}`},
		{name: "a subject in an array", statement: `{"subject":["` + subj + `"]}`},
		{name: "the subject twice, ours first", statement: `{"subject":"` + subj + `","subject":"` + other + `"}`},
		{name: "the subject twice, ours last", statement: `{"subject":"` + other + `","subject":"` + subj + `"}`},
		{name: "another object after it", statement: evxStatement(subj, "x") + ` {}`},
		{name: "the same object twice", statement: evxStatement(subj, "x") + evxStatement(subj, "x")},
		{name: "a word after it", statement: evxStatement(subj, "x") + ` trailing`},
		{name: "a stray brace after it", statement: evxStatement(subj, "x") + `}`},
		{name: "a stray bracket after it", statement: evxStatement(subj, "x") + `]`},
		{name: "a number out of range", statement: `{"subject":"` + subj + `","n":1e400}`},
		{name: "a lone surrogate", statement: `{"subject":"` + subj + `","s":"\ud800"}`},
		{name: "invalid UTF-8", statement: "{\"subject\":\"" + subj + "\",\"s\":\"\xff\"}"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := &EvidenceSubmitRequest{Subject: subj, Class: ClassSelf, Statement: json.RawMessage(tc.statement)}
			if tc.canonical == "" {
				refusedUnchanged(t, h, CodeEvidenceInvalid, func() error { _, err := h.svc.EvidenceSubmit(ctx, h.call(), req); return err })
				return
			}
			got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			if string(got.Evidence.Statement) != tc.canonical {
				t.Errorf("stored %s, want %s", got.Evidence.Statement, tc.canonical)
			}
		})
	}
}

// TestEvidenceSubjects: evidence is about an obligation or a payment of
// the caller's key; anyone else's, or nothing, is evidence.subject_unknown.
func TestEvidenceSubjects(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	obl := evxObligation(t, h, ClassPote, h.ev.cp)
	hold, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: h.spend("hold.place", railWire, 500, nil)})
	if err != nil {
		t.Fatal(err)
	}
	seller := h.seller()
	theirs, err := h.svc.ObligationCreate(ctx, seller.call(), &ObligationCreateRequest{Spend: h.spendAs(seller, "obligation.create", railCard, 100, nil),
		EvidenceFloor: ClassSelf, Deadline: h.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		call    Call
		subject string
	}{
		{name: "an unknown obligation", call: h.call(), subject: "obl_01JUNKNOWN0000000000000000"},
		{name: "an unknown payment", call: h.call(), subject: "int_01JUNKNOWN0000000000000000"},
		{name: "the bare prefix", call: h.call(), subject: "obl_"},
		{name: "not an id", call: h.call(), subject: "order-17"},
		{name: "nothing", call: h.call(), subject: ""},
		{name: "another identity's obligation", call: h.call(), subject: theirs.ObligationID},
		{name: "our obligation, by another identity", call: trmOtherIdentity(h), subject: obl.ObligationID},
		{name: "our obligation, by another key", call: trnOtherKey(h), subject: obl.ObligationID},
		{name: "our payment, by another identity", call: trmOtherIdentity(h), subject: hold.IntentID},
		{name: "a hold's id", call: h.call(), subject: hold.HoldID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedUnchanged(t, h, CodeEvidenceSubject, func() error {
				_, err := h.svc.EvidenceSubmit(ctx, tc.call, &EvidenceSubmitRequest{Subject: tc.subject, Class: ClassSelf,
					Statement: json.RawMessage(evxStatement(tc.subject, "x"))})
				return err
			})
			refusedUnchanged(t, h, CodeEvidenceSubject, func() error {
				_, err := h.svc.EvidenceList(ctx, tc.call, &EvidenceListRequest{Subject: tc.subject})
				return err
			})
		})
	}
	t.Run("a payment", func(t *testing.T) {
		n := h.size()
		req, _ := evxSubmission(t, h, hold.IntentID, ClassWit, evxStatement(hold.IntentID, "x"))
		got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got.Clearing != nil || got.IsAccepted() || got.Evidence.Subject != hold.IntentID || got.Evidence.Signer != "witness-1" {
			t.Errorf("evidence about a payment %+v", got)
		}
		if diff := cmp.Diff([]string{"protocol.evidence.submit"}, h.typesSince(n)); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
	})
	t.Run("sign about a payment without terms", func(t *testing.T) {
		refusedUnchanged(t, h, CodeEvidenceSigner, func() error {
			req, _ := evxSubmission(t, h, hold.IntentID, ClassSign, evxStatement(hold.IntentID, "y"))
			_, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
			return err
		})
	})
}

// TestEvidenceSignCounterparty: whose signature sign evidence is: the
// obligation's counterparty in either form, or the cited terms'; with
// none, nothing is sign evidence; once revoked, its signatures are
// refused.
func TestEvidenceSignCounterparty(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	did := identity.DIDKey(pub)
	sign := func(t *testing.T, subject string, key ed25519.PrivateKey, signer string) (*EvidenceSubmitted, error) {
		stmt := evxStatement(subject, "x")
		return h.svc.EvidenceSubmit(ctx, h.call(), &EvidenceSubmitRequest{Subject: subject, Class: ClassSign, Statement: json.RawMessage(stmt),
			Signer: signer, Signature: h.ev.sign(t, key, subject, stmt)})
	}
	t.Run("no counterparty", func(t *testing.T) {
		subj := evxObligation(t, h, ClassSelf, "").ObligationID
		refusedUnchanged(t, h, CodeEvidenceSigner, func() error { _, err := sign(t, subj, h.ev.cpKey, ""); return err })
		refusedUnchanged(t, h, CodeEvidenceSigner, func() error { _, err := sign(t, subj, h.ev.cpKey, h.ev.cp); return err })
	})
	t.Run("a did:key counterparty", func(t *testing.T) {
		subj := evxObligation(t, h, ClassSign, did).ObligationID
		refusedUnchanged(t, h, CodeEvidenceInvalid, func() error { _, err := sign(t, subj, h.ev.cpKey, ""); return err })
		got, err := sign(t, subj, key, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Evidence.Signer != did || got.Clearing.Status != ClearingCleared {
			t.Errorf("evidence %+v, clearing %+v", got.Evidence, got.Clearing)
		}
	})
	t.Run("the terms' counterparty", func(t *testing.T) {
		tr := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, func(b *TermsBody) { b.Amount.Minor = 100 })
		o, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 100,
			func(in *pay.Instruction) { in.TermsID = tr.ID }), EvidenceFloor: ClassSign, Deadline: h.clock.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		refusedUnchanged(t, h, CodeEvidenceInvalid, func() error { _, err := sign(t, o.ObligationID, key, ""); return err })
		got, err := sign(t, o.ObligationID, h.ev.cpKey, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Evidence.Signer != h.ev.cp || got.Clearing.Status != ClearingCleared {
			t.Errorf("evidence %+v, clearing %+v", got.Evidence, got.Clearing)
		}
	})
	t.Run("a revoked counterparty", func(t *testing.T) {
		subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
		h.ident.revoke(h.ev.cp)
		refusedUnchanged(t, h, CodeCounterpartyRevoked, func() error { _, err := sign(t, subj, h.ev.cpKey, ""); return err })
		// Other classes do not depend on it.
		req, _ := evxSubmission(t, h, subj, ClassWit, evxStatement(subj, "x"))
		if _, err := h.svc.EvidenceSubmit(ctx, h.call(), req); err != nil {
			t.Errorf("wit evidence: %v", err)
		}
	})
}

// TestEvidenceReplay: the same statement of the same class about the
// same subject is stored once; a repeat (in any spelling) answers it,
// appending nothing. Another class of it is new evidence.
func TestEvidenceReplay(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	stmt := evxStatement(subj, "a report")
	var first *EvidenceSubmitted
	submit := func(req func(t *testing.T) *EvidenceSubmitRequest, replay bool) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			got, err := h.svc.EvidenceSubmit(ctx, h.call(), req(t))
			if err != nil {
				return "", err
			}
			if first == nil {
				first = got
			} else if replay {
				trnReplay(t, first, got)
			} else if got.WasReplayed() || got.Evidence.ID == first.Evidence.ID {
				t.Errorf("new evidence answered as a replay: %+v", got.Evidence)
			}
			l, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: subj})
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("pieces=%d", len(l.Evidence)), nil
		}
	}
	of := func(c EvidenceClass, s string) func(t *testing.T) *EvidenceSubmitRequest {
		return func(t *testing.T) *EvidenceSubmitRequest { r, _ := evxSubmission(t, h, subj, c, s); return r }
	}
	trnRun(t, h, []trnStep{
		{name: "submit", do: submit(of(ClassWit, stmt), false), state: "pieces=1", types: []string{"protocol.evidence.submit"}},
		{name: "submit again", do: submit(of(ClassWit, stmt), true), state: "pieces=1", same: true},
		{name: "submit it respelled", do: submit(of(ClassWit, `{ "delivered": "a report", "subject": "`+subj+`" }`), true), state: "pieces=1", same: true},
		{name: "submit it forged", do: func(t *testing.T) (string, error) {
			r, _ := evxSubmission(t, h, subj, ClassWit, stmt)
			r.Signature = h.ev.sign(t, h.ev.attester, subj, stmt)
			_, err := h.svc.EvidenceSubmit(ctx, h.call(), r)
			return "", err
		}, code: CodeEvidenceInvalid},
		{name: "submit it as att", do: submit(of(ClassAtt, stmt), false), state: "pieces=2", types: []string{"protocol.evidence.submit"}},
		{name: "submit it as self", do: submit(of(ClassSelf, stmt), false), state: "pieces=3", types: []string{"protocol.evidence.submit"}},
		{name: "submit another statement", do: submit(of(ClassWit, evxStatement(subj, "another report")), false), state: "pieces=4",
			types: []string{"protocol.evidence.submit"}},
	}, nil)
}

// TestEvidenceGetList pages a subject's evidence oldest first, and shows
// none of it to anyone else.
func TestEvidenceGetList(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	empty := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	var ids, after []string // after[i] is the cursor a page ending with ids[i] returns
	for i, c := range []EvidenceClass{ClassSelf, ClassSign, ClassWit, ClassRec, ClassAtt} {
		req, _ := evxSubmission(t, h, subj, c, evxStatement(subj, fmt.Sprint("part ", i)))
		got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got.Evidence.ID)
		after = append(after, seqlist.Pos{Seq: got.Evidence.Entries[0], ID: got.Evidence.ID}.Cursor())
		h.clock.Add(time.Second)
	}
	page := func(l *EvidenceList) []string {
		out := []string{}
		for _, e := range l.Evidence {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		subject string
		cursor  string
		limit   int
		want    []string
		next    string
	}{
		{name: "all", subject: subj, want: ids},
		{name: "first page of 2", subject: subj, limit: 2, want: ids[:2], next: after[1]},
		{name: "second page of 2", subject: subj, cursor: after[1], limit: 2, want: ids[2:4], next: after[3]},
		{name: "last page of 2", subject: subj, cursor: after[3], limit: 2, want: ids[4:]},
		{name: "a page of exactly what is left", subject: subj, cursor: after[2], limit: 2, want: ids[3:]},
		{name: "after the last", subject: subj, cursor: after[4], want: []string{}},
		{name: "pages of 1", subject: subj, cursor: after[0], limit: 1, want: ids[1:2], next: after[1]},
		{name: "pages of 100", subject: subj, limit: 100, want: ids},
		{name: "no evidence", subject: empty, want: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.dump()
			l, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: tc.subject, Cursor: tc.cursor, Limit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, page(l)); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
			if l.NextCursor != tc.next {
				t.Errorf("next cursor %q, want %q", l.NextCursor, tc.next)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a read changed the store:\n%s", diff)
			}
		})
	}
	t.Run("following the cursor", func(t *testing.T) {
		var got []string
		cursor := ""
		for range 10 {
			l, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: subj, Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page(l)...)
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if diff := cmp.Diff(ids, got); diff != "" {
			t.Errorf("pages (-want +got):\n%s", diff)
		}
	})
	t.Run("get", func(t *testing.T) {
		for i, id := range ids {
			ev, err := h.svc.EvidenceGet(ctx, h.call(), &EvidenceRef{EvidenceID: id})
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID != id || ev.Subject != subj || ev.Class != EvidenceClasses()[i] {
				t.Errorf("evidence %d: %+v", i, ev)
			}
		}
	})
	for _, tc := range []struct {
		name string
		call Call
		id   string
	}{
		{name: "get unknown evidence", call: h.call(), id: "evd_01JUNKNOWN0000000000000000"},
		{name: "get as another identity", call: trmOtherIdentity(h), id: ids[0]},
		{name: "get as another key", call: trnOtherKey(h), id: ids[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedUnchanged(t, h, CodeEvidenceNotFound, func() error {
				_, err := h.svc.EvidenceGet(ctx, tc.call, &EvidenceRef{EvidenceID: tc.id})
				return err
			})
		})
	}
	t.Run("list as another identity", func(t *testing.T) {
		refusedUnchanged(t, h, CodeEvidenceSubject, func() error {
			_, err := h.svc.EvidenceList(ctx, trmOtherIdentity(h), &EvidenceListRequest{Subject: subj})
			return err
		})
	})
}

// TestEvidenceSubmitConcurrent: the same statement submitted at once by
// racers is stored once; every racer gets that evidence.
func TestEvidenceSubmitConcurrent(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	req, _ := evxSubmission(t, h, subj, ClassWit, evxStatement(subj, "a report"))
	n := h.size()
	const racers = 8
	results := make([]*EvidenceSubmitted, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { results[i], errs[i] = h.svc.EvidenceSubmit(t.Context(), h.call(), req) })
	}
	wg.Wait()
	fresh := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
		if !results[i].WasReplayed() {
			fresh++
		}
		if results[i].Evidence.ID != results[0].Evidence.ID {
			t.Errorf("racer %d got %s, racer 0 %s", i, results[i].Evidence.ID, results[0].Evidence.ID)
		}
	}
	if fresh != 1 {
		t.Errorf("%d submissions were not replays, want 1", fresh)
	}
	if diff := cmp.Diff([]string{"protocol.evidence.submit"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// evxPausingStore is a store whose next Update, once armed, waits until
// released: it lets a test order two submissions' transactions.
type evxPausingStore struct {
	store.Store
	mu      sync.Mutex
	armed   bool
	paused  chan struct{} // closed when the armed Update waits
	release chan struct{} // closed to let it run
}

func (s *evxPausingStore) arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.paused, s.release = true, make(chan struct{}), make(chan struct{})
}

func (s *evxPausingStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	s.mu.Lock()
	armed := s.armed
	s.armed = false
	s.mu.Unlock()
	if armed {
		close(s.paused)
		<-s.release
	}
	return s.Store.Update(ctx, fn)
}

// TestEvidenceListFollowsCommits: a client following evidence.list with
// its cursor sees every piece of evidence, whatever order concurrent
// submissions commit in. Here the first submission's transaction is held
// while a second one commits and is read; the first one then commits and
// must still appear after the cursor.
func TestEvidenceListFollowsCommits(t *testing.T) {
	st := &evxPausingStore{Store: memstore.New(nil)}
	h := newHarness(t, harnessConfig{store: st})
	ctx := t.Context()
	subj := evxObligation(t, h, ClassPote, h.ev.cp).ObligationID
	slow, _ := evxSubmission(t, h, subj, ClassWit, evxStatement(subj, "slow"))
	fast, _ := evxSubmission(t, h, subj, ClassAtt, evxStatement(subj, "fast"))

	st.arm()
	done := make(chan error, 1)
	var slowID string
	go func() {
		got, err := h.svc.EvidenceSubmit(ctx, h.call(), slow)
		if err == nil {
			slowID = got.Evidence.ID
		}
		done <- err
	}()
	<-st.paused
	if _, err := h.svc.EvidenceSubmit(ctx, h.call(), fast); err != nil {
		t.Fatal(err)
	}
	first, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: subj})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Evidence) != 1 {
		t.Fatalf("%d pieces before the slow one commits, want 1", len(first.Evidence))
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The cursor that continues after it, as a page of 1 with more to
	// come would have returned.
	cursor := seqlist.Pos{Seq: first.Evidence[0].Entries[0], ID: first.Evidence[0].ID}.Cursor()
	next, err := h.svc.EvidenceList(ctx, h.call(), &EvidenceListRequest{Subject: subj, Cursor: cursor})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Evidence) != 1 || next.Evidence[0].ID != slowID {
		var got []string
		for _, e := range next.Evidence {
			got = append(got, e.ID)
		}
		t.Errorf("after the cursor %s: %v, want the evidence committed since (%s)", first.Evidence[0].ID, got, slowID)
	}
}

// TestEvidenceObligationState: evidence about an obligation that can no
// longer clear (past its deadline, expired, cancelled, denied) is refused
// with the obligation's own problem, changing nothing; one waiting for
// approval takes it.
func TestEvidenceObligationState(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	submit := func(subj string) func() error {
		return func() error {
			req, _ := evxSubmission(t, h, subj, ClassWit, evxStatement(subj, "late"))
			_, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
			return err
		}
	}
	cancelled := evxObligation(t, h, ClassWit, h.ev.cp)
	if _, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: cancelled.ObligationID}); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 100,
		func(in *pay.Instruction) { in.TermsID = "trm_unknown" }), EvidenceFloor: ClassWit, Deadline: h.clock.Now().Add(2 * time.Hour)})
	var refused *Refused
	if !errors.As(err, &refused) {
		t.Fatalf("create citing unknown terms: %v, want a denial", err)
	}
	denied, _ := prefixID(refused.Result.IntentID, "int_", "obl_")
	held, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 20_000, nil),
		EvidenceFloor: ClassWit, Deadline: h.clock.Now().Add(2 * time.Hour), Counterparty: h.ev.cp})
	if err != nil || !held.IsAccepted() {
		t.Fatalf("held obligation %+v, %v", held, err)
	}
	due := evxObligation(t, h, ClassWit, h.ev.cp)

	t.Run("cancelled", func(t *testing.T) { refusedUnchanged(t, h, CodeObligationCancelled, submit(cancelled.ObligationID)) })
	t.Run("denied", func(t *testing.T) { refusedUnchanged(t, h, CodeObligationClosed, submit(denied)) })
	t.Run("waiting for approval", func(t *testing.T) {
		if err := submit(held.ObligationID)(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a microsecond before the deadline", func(t *testing.T) {
		h.clock.Add(time.Hour - time.Microsecond)
		// Stored; self is below the wit floor, so it waits.
		req, _ := evxSubmission(t, h, due.ObligationID, ClassSelf, evxStatement(due.ObligationID, "early"))
		got, err := h.svc.EvidenceSubmit(ctx, h.call(), req)
		if err != nil || got.Clearing.Status != ClearingPending {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("at the deadline", func(t *testing.T) {
		h.clock.Add(time.Microsecond)
		refusedUnchanged(t, h, CodeDeadlinePassed, submit(due.ObligationID))
	})
	t.Run("expired by the sweep", func(t *testing.T) {
		if _, err := h.svc.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		o, err := h.svc.ObligationGet(ctx, h.call(), &ObligationRef{ObligationID: due.ObligationID})
		if err != nil || o.Status != ObligationExpired {
			t.Fatalf("after the sweep %+v, %v", o, err)
		}
		refusedUnchanged(t, h, CodeDeadlinePassed, submit(due.ObligationID))
	})
}
