package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// The helpers prefixed trm are shared by the tests of terms, negotiate
// and evidence.

// trmBody is valid terms: 2 000 USD to the seller on the card rail for a
// day.
func trmBody(h *harness) TermsBody {
	return TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2_000, Currency: "USD"}, Rail: railCard,
		Description: "a report", ValidUntil: h.clock.Now().Add(24 * time.Hour)}
}

// trmPropose proposes trmBody, edited, between the caller and cp.
func trmPropose(t *testing.T, h *harness, call Call, cp string, edit func(*TermsBody)) *TwoPartyTerms {
	t.Helper()
	b := trmBody(h)
	if edit != nil {
		edit(&b)
	}
	out, err := h.svc.TermsPropose(t.Context(), call, &TermsProposeRequest{Counterparty: cp, Terms: b})
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	return out
}

// trmSign signs the decoded signingBytes (base64url) with key.
func trmSign(t testing.TB, key ed25519.PrivateKey, signingBytes string) string {
	t.Helper()
	msg, err := base64.RawURLEncoding.DecodeString(signingBytes)
	if err != nil {
		t.Fatalf("signingBytes: %v", err)
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// trmVerify reports whether sig (base64url) is pub's signature over the
// decoded signingBytes: the check anyone can make offline.
func trmVerify(t testing.TB, pub ed25519.PublicKey, signingBytes, sig string) bool {
	t.Helper()
	msg, err := base64.RawURLEncoding.DecodeString(signingBytes)
	if err != nil {
		t.Fatalf("signingBytes: %v", err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && ed25519.Verify(pub, msg, raw)
}

// trmAccepted proposes terms and accepts them with key's signature.
func trmAccepted(t *testing.T, h *harness, call Call, cp string, key ed25519.PrivateKey, edit func(*TermsBody)) *TwoPartyTerms {
	t.Helper()
	p := trmPropose(t, h, call, cp, edit)
	a, err := h.svc.TermsAccept(t.Context(), call, &TermsAcceptRequest{TermsID: p.ID, Signature: trmSign(t, key, p.SigningBytes)})
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	return &a.TwoPartyTerms
}

// trmState is terms as terms.get shows them.
func trmState(t *testing.T, h *harness, id string) string {
	t.Helper()
	tr, err := h.svc.TermsGet(t.Context(), h.call(), &TermsRef{TermsID: id})
	if err != nil {
		return "get: " + code(err)
	}
	return fmt.Sprintf("%s signed=%v entries=%d", tr.Status, tr.CounterpartySignature != "", len(tr.Entries))
}

// trmStake funds p's custody and posts a USD stake locked for d.
func trmStake(t *testing.T, h *harness, p *party, minor int64, d time.Duration, key string) *Stake {
	t.Helper()
	ctx := t.Context()
	if _, err := h.svc.CustodyDeposit(ctx, p.call(), &CustodySpendRequest{Spend: h.spendAs(p, "custody.deposit", railCard, minor,
		func(in *pay.Instruction) { in.Payee = DefaultCustodyPayee })}); err != nil {
		t.Fatal(err)
	}
	st, err := h.svc.StakePost(ctx, p.call(), &StakePostRequest{Amount: pay.Amount{Minor: minor, Currency: "USD"},
		LockedUntil: h.clock.Now().Add(d), Purpose: "a bond", IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return &st.Stake
}

// trmOtherIdentity is a call acting for a third agent identity, neither
// the buyer nor the counterparty, which sees none of their objects (the
// counterparty, when it is an agent here, is a party to terms and
// negotiations and sees those).
func trmOtherIdentity(h *harness) Call {
	return AgentCall(pay.Caller{KeyID: "ak_01JTHIRDPARTY000000000000",
		Agents: []string{"3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"}}, "req_third")
}

// TestTermsPropose checks what terms.propose stores and every rule of the
// body it refuses (terms.invalid), the counterparty's form, and the agent.
func TestTermsPropose(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	seller := h.seller()
	stake := trmStake(t, h, seller, 3_000, 48*time.Hour, "stk-live")
	released := trmStake(t, h, seller, 1_000, time.Minute, "stk-released")
	slashed := trmStake(t, h, seller, 500, 48*time.Hour, "stk-slashed")
	// The buyer's own stake: not the counterparty's to put at stake.
	own := trmStake(t, h, &party{caller: h.caller, key: h.agentKey, agent: h.agent, mandate: h.mandate}, 700, 48*time.Hour, "stk-own")
	h.clock.Add(time.Minute)
	if _, err := h.svc.StakeRelease(ctx, seller.call(), &StakeRef{StakeID: released.ID}); err != nil {
		t.Fatal(err)
	}
	trmRewriteStake(t, h, slashed.ID, func(s *Stake) { s.Status = StakeSlashed })
	didCP := identity.DIDKey(h.ev.cpKey.Public().(ed25519.PublicKey))
	now := h.clock.Now()

	tests := []struct {
		name  string
		agent string
		cp    string
		edit  func(*TermsBody)
		code  string
	}{
		{name: "valid", cp: h.ev.cp},
		{name: "naming the paying agent", agent: h.agent, cp: h.ev.cp},
		{name: "any rail", cp: h.ev.cp, edit: func(b *TermsBody) { b.Rail = "" }},
		{name: "valid until a year ahead", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = now.AddDate(1, 0, 0) }},
		{name: "valid for a microsecond", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = now.Add(time.Microsecond) }},
		{name: "with the counterparty's stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = stake.ID }},
		{name: "did:key counterparty", cp: didCP},
		{name: "did:key counterparty with its stake", cp: didCP, edit: func(b *TermsBody) { b.StakeID = stake.ID }},
		{name: "with an evidence floor", cp: h.ev.cp, edit: func(b *TermsBody) { b.EvidenceFloor = ClassAtt }},

		{name: "no payee", cp: h.ev.cp, edit: func(b *TermsBody) { b.Payee = "" }, code: CodeTermsInvalid},
		{name: "payee without a scheme", cp: h.ev.cp, edit: func(b *TermsBody) { b.Payee = "seller.example" }, code: CodeTermsInvalid},
		{name: "payee with a space", cp: h.ev.cp, edit: func(b *TermsBody) { b.Payee = "acct:seller example" }, code: CodeTermsInvalid},
		{name: "zero amount", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Minor = 0 }, code: CodeTermsInvalid},
		{name: "negative amount", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Minor = -1 }, code: CodeTermsInvalid},
		{name: "amount above 2^53-1", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Minor = pay.MaxMinor + 1 }, code: CodeTermsInvalid},
		{name: "lowercase currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Currency = "usd" }, code: CodeTermsInvalid},
		{name: "no currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Currency = "" }, code: CodeTermsInvalid},
		{name: "two-letter currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Currency = "US" }, code: CodeTermsInvalid},
		{name: "rail with capitals", cp: h.ev.cp, edit: func(b *TermsBody) { b.Rail = "Sandbox-Card" }, code: CodeTermsInvalid},
		{name: "rail starting with a dash", cp: h.ev.cp, edit: func(b *TermsBody) { b.Rail = "-card" }, code: CodeTermsInvalid},
		{name: "valid until now", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = now }, code: CodeTermsInvalid},
		{name: "valid until the past", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = now.Add(-time.Hour) }, code: CodeTermsInvalid},
		{name: "no validUntil", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = time.Time{} }, code: CodeTermsInvalid},
		{name: "valid beyond a year", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = now.AddDate(1, 0, 0).Add(time.Microsecond) },
			code: CodeTermsInvalid},
		{name: "unknown stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = "stk_unknown" }, code: CodeTermsInvalid},
		{name: "the payer's own stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = own.ID }, code: CodeTermsInvalid},
		{name: "a released stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = released.ID }, code: CodeTermsInvalid},
		{name: "a slashed stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = slashed.ID }, code: CodeTermsInvalid},
		{name: "a stake in another currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID, b.Amount.Currency = stake.ID, "EUR" },
			code: CodeTermsInvalid},
		{name: "no counterparty", cp: "", code: CodeTermsInvalid},
		{name: "counterparty of 63 hex", cp: h.ev.cp[:63], code: CodeTermsInvalid},
		{name: "counterparty not hex", cp: strings.Repeat("zz", 32), code: CodeTermsInvalid},
		{name: "counterparty a did:web", cp: "did:web:seller.example", code: CodeTermsInvalid},
		{name: "counterparty a malformed did:key", cp: "did:key:z6Mk0OIl", code: CodeTermsInvalid},
		{name: "counterparty a did:key of another key type", cp: "did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme", code: CodeTermsInvalid},
		{name: "an agent the credential does not act for", agent: h.ev.cp, cp: h.ev.cp, code: CodeCustodyAgent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := trmBody(h)
			if tc.edit != nil {
				tc.edit(&b)
			}
			req := &TermsProposeRequest{Agent: tc.agent, Counterparty: tc.cp, Terms: b}
			if tc.code != "" {
				refusedUnchanged(t, h, tc.code, func() error { _, err := h.svc.TermsPropose(ctx, h.call(), req); return err })
				return
			}
			n := h.size()
			got, err := h.svc.TermsPropose(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"protocol.terms.propose"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got.ID, "trm_") || got.Status != TermsStatusProposed || got.Agent != h.agent || got.AgentKeyID != h.caller.KeyID ||
				got.Counterparty != tc.cp || got.CounterpartySignature != "" || got.OurSignature != "" || got.AcceptedAt != nil ||
				got.NegotiationID != "" || len(got.Entries) != 1 || got.Entries[0] != n+1 || !got.CreatedAt.Equal(h.clock.Now()) {
				t.Errorf("proposed %+v", got)
			}
			if diff := cmp.Diff(b, got.TermsBody); diff != "" {
				t.Errorf("body (-sent +stored):\n%s", diff)
			}
			want, err := TermsSigningBytes(got)
			if err != nil {
				t.Fatal(err)
			}
			if got.SigningBytes != base64.RawURLEncoding.EncodeToString(want) {
				t.Errorf("signingBytes are not TermsSigningBytes of the terms")
			}
			stored, err := h.svc.TermsGet(ctx, h.call(), &TermsRef{TermsID: got.ID})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, stored); diff != "" {
				t.Errorf("terms.get (-proposed +got):\n%s", diff)
			}
		})
	}
}

// trmPeriod is trnPeriod, also before the mandate's first use.
func trmPeriod(t *testing.T, h *harness) string {
	t.Helper()
	if _, err := h.svc.MandateGet(t.Context(), h.call(), &MandateRef{MandateID: h.claims.ID}); code(err) == CodeMandateNotFound {
		return "reserved=0 settled=0"
	}
	return trnPeriod(t, h)
}

// trmRewriteStake changes a stake as another namespace would (dispute
// resolution slashes it).
func trmRewriteStake(t *testing.T, h *harness, id string, edit func(*Stake)) {
	t.Helper()
	err := h.st.Update(t.Context(), func(txn store.Txn) error {
		var s Stake
		if err := getJSON(txn, stakeKey(id), &s); err != nil {
			return err
		}
		edit(&s)
		return putJSON(txn, stakeKey(id), &s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTermsSigningBytesGolden pins the canonical bytes a counterparty
// signs: RFC 8785, the type first among the members that separate terms
// from offers and rejections, seq omitted.
func TestTermsSigningBytesGolden(t *testing.T) {
	tr := &TwoPartyTerms{ID: "trm_01", Agent: "aa", Counterparty: "bb", TermsBody: TermsBody{Payee: "acct:s.example",
		Amount: pay.Amount{Minor: 2_000, Currency: "USD"}, Rail: railCard, Description: "a \"report\" <x>", EvidenceFloor: ClassSign,
		StakeID: "stk_1", ValidUntil: time.Date(2026, 11, 24, 10, 0, 0, 500, time.UTC)}}
	got, err := TermsSigningBytes(tr)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent":"aa","amount":{"currency":"USD","minor":2000},"counterparty":"bb","description":"a \"report\" <x>",` +
		`"evidenceFloor":"sign","payee":"acct:s.example","rail":"sandbox-card","ref":"trm_01","stakeId":"stk_1",` +
		`"type":"countersign.terms.v1","validUntil":"2026-11-24T10:00:00.0000005Z"}`
	if string(got) != want {
		t.Errorf("TermsSigningBytes:\n got %s\nwant %s", got, want)
	}
	offer, err := OfferSigningBytes("neg_01", 3, "aa", "bb", tr.TermsBody)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Replace(strings.Replace(want, `"ref":"trm_01"`, `"ref":"neg_01","seq":3`, 1), "terms.v1", "offer.v1", 1); string(offer) != w {
		t.Errorf("OfferSigningBytes:\n got %s\nwant %s", offer, w)
	}
	rej, err := RejectionSigningBytes("neg_01", 3, "aa", "bb", tr.TermsBody)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Replace(strings.Replace(want, `"ref":"trm_01"`, `"ref":"neg_01","seq":3`, 1), "terms.v1", "reject.v1", 1); string(rej) != w {
		t.Errorf("RejectionSigningBytes:\n got %s\nwant %s", rej, w)
	}
}

// TestTermsAccept walks proposed terms through accept and its refusals:
// the counterparty's signature and no other, once, and only for the
// identity that proposed them.
func TestTermsAccept(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	tr := trmPropose(t, h, h.call(), h.ev.cp, nil)
	other := trmPropose(t, h, h.call(), h.ev.cp, func(b *TermsBody) { b.Amount.Minor = 2_001 })
	good := trmSign(t, h.ev.cpKey, tr.SigningBytes)
	var first *TermsAccepted
	accept := func(call func() Call, id *string, sig string, keep **TermsAccepted) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			a, err := h.svc.TermsAccept(ctx, call(), &TermsAcceptRequest{TermsID: *id, Signature: sig})
			if err == nil && keep != nil {
				*keep = a
			}
			return trmState(t, h, *id), err
		}
	}
	unknown := "trm_unknown"
	_, wrongKey, _ := ed25519.GenerateKey(rand.Reader)
	trnRun(t, h, []trnStep{
		{name: "accept unknown terms", do: accept(h.call, &unknown, good, nil), code: CodeTermsNotFound, state: "get: " + CodeTermsNotFound},
		{name: "accept as another identity", do: accept(func() Call { return trmOtherIdentity(h) }, &tr.ID, good, nil),
			code: CodeTermsNotFound, state: "proposed signed=false entries=1"},
		{name: "get as another identity", do: func(t *testing.T) (string, error) {
			_, err := h.svc.TermsGet(ctx, trmOtherIdentity(h), &TermsRef{TermsID: tr.ID})
			return trmState(t, h, tr.ID), err
		}, code: CodeTermsNotFound, state: "proposed signed=false entries=1"},
		{name: "accept with no signature", do: accept(h.call, &tr.ID, "", nil), code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with a signature that is not base64url", do: accept(h.call, &tr.ID, "!!"+good[2:], nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with a truncated signature", do: accept(h.call, &tr.ID, good[:len(good)-4], nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with the payer's signature", do: accept(h.call, &tr.ID, trmSign(t, h.agentKey, tr.SigningBytes), nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with another key's signature", do: accept(h.call, &tr.ID, trmSign(t, wrongKey, tr.SigningBytes), nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with the counterparty's signature of other terms", do: accept(h.call, &tr.ID, trmSign(t, h.ev.cpKey, other.SigningBytes), nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept with a standard-base64 signature", do: accept(h.call, &tr.ID, base64.StdEncoding.EncodeToString(mustB64(t, good)), nil),
			code: CodeTermsSignature, state: "proposed signed=false entries=1"},
		{name: "accept", do: accept(h.call, &tr.ID, good, &first), state: "accepted signed=true entries=2", types: []string{"protocol.terms.accept"}},
		{name: "accept again with the same signature", do: func(t *testing.T) (string, error) {
			again, err := h.svc.TermsAccept(ctx, h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: good})
			if err == nil {
				trnReplay(t, first, again)
			}
			return trmState(t, h, tr.ID), err
		}, state: "accepted signed=true entries=2", same: true},
		{name: "accept again with another signature", do: accept(h.call, &tr.ID, trmSign(t, wrongKey, tr.SigningBytes), nil),
			code: CodeTermsAccepted, state: "accepted signed=true entries=2"},
		{name: "accept again with the counterparty's signature of other terms", do: accept(h.call, &tr.ID, trmSign(t, h.ev.cpKey, other.SigningBytes), nil),
			code: CodeTermsAccepted, state: "accepted signed=true entries=2"},
		{name: "get as another key of the same identity", do: func(t *testing.T) (string, error) {
			got, err := h.svc.TermsGet(ctx, trnOtherKey(h), &TermsRef{TermsID: tr.ID})
			if err == nil && got.Status != TermsStatusAccepted {
				t.Errorf("status %s", got.Status)
			}
			return trmState(t, h, tr.ID), err
		}, state: "accepted signed=true entries=2", same: true},
	}, nil)

	if t.Failed() {
		return
	}
	a := first.TwoPartyTerms
	if a.Status != TermsStatusAccepted || a.CounterpartySignature != good || a.AcceptedAt == nil || !a.AcceptedAt.Equal(h.clock.Now()) ||
		!a.UpdatedAt.Equal(h.clock.Now()) || a.SigningBytes != tr.SigningBytes || a.OurSignature != "" || len(a.Entries) != 2 {
		t.Errorf("accepted %+v", a)
	}
	if diff := cmp.Diff(tr.TermsBody, a.TermsBody); diff != "" {
		t.Errorf("accepting changed the body (-proposed +accepted):\n%s", diff)
	}
	if !trmVerify(t, h.ev.cpKey.Public().(ed25519.PublicKey), a.SigningBytes, a.CounterpartySignature) {
		t.Error("the stored signature does not verify offline over signingBytes")
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTermsAcceptExpiry: terms are accepted until validUntil, not at it.
func TestTermsAcceptExpiry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	early := trmPropose(t, h, h.call(), h.ev.cp, func(b *TermsBody) { b.ValidUntil = h.clock.Now().Add(time.Hour) })
	late := trmPropose(t, h, h.call(), h.ev.cp, func(b *TermsBody) { b.ValidUntil = h.clock.Now().Add(time.Hour) })
	accept := func(tr *TwoPartyTerms) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := h.svc.TermsAccept(ctx, h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: trmSign(t, h.ev.cpKey, tr.SigningBytes)})
			return trmState(t, h, tr.ID), err
		}
	}
	trnRun(t, h, []trnStep{
		{name: "a microsecond before validUntil", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Hour - time.Microsecond)
			return accept(early)(t)
		}, state: "accepted signed=true entries=2", types: []string{"protocol.terms.accept"}},
		{name: "at validUntil", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Microsecond)
			return accept(late)(t)
		}, code: CodeTermsExpired, state: "proposed signed=false entries=1"},
		{name: "after validUntil", do: func(t *testing.T) (string, error) {
			h.clock.Add(time.Hour)
			return accept(late)(t)
		}, code: CodeTermsExpired, state: "proposed signed=false entries=1"},
		{name: "replaying an acceptance after validUntil", do: accept(early), state: "accepted signed=true entries=2", same: true},
	}, nil)
}

// TestTermsDIDKeyCounterparty: a counterparty named by its Ed25519
// did:key signs with the same key; the form is kept as given.
func TestTermsDIDKeyCounterparty(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	did := identity.DIDKey(pub)
	tr := trmPropose(t, h, h.call(), did, nil)
	refusedUnchanged(t, h, CodeTermsSignature, func() error {
		_, err := h.svc.TermsAccept(t.Context(), h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: trmSign(t, h.ev.cpKey, tr.SigningBytes)})
		return err
	})
	a, err := h.svc.TermsAccept(t.Context(), h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: trmSign(t, key, tr.SigningBytes)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Counterparty != did || a.Status != TermsStatusAccepted || !trmVerify(t, pub, a.SigningBytes, a.CounterpartySignature) {
		t.Errorf("accepted %+v", a.TwoPartyTerms)
	}
	// The same key in hex is another spelling of the counterparty: the
	// signature binds the id as written in the terms.
	msg := mustB64(t, a.SigningBytes)
	if !strings.Contains(string(msg), `"counterparty":"`+did+`"`) || strings.Contains(string(msg), hex.EncodeToString(pub)) {
		t.Errorf("signingBytes %s do not name the counterparty as given", msg)
	}
}

// TestTermsCounterpartyRevoked: once the operator revoked the
// counterparty, terms with it can be neither proposed nor accepted.
func TestTermsCounterpartyRevoked(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	tr := trmPropose(t, h, h.call(), h.ev.cp, nil)
	accepted := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, nil)
	h.ident.revoke(h.ev.cp)
	t.Run("propose", func(t *testing.T) {
		refusedUnchanged(t, h, CodeCounterpartyRevoked, func() error {
			_, err := h.svc.TermsPropose(ctx, h.call(), &TermsProposeRequest{Counterparty: h.ev.cp, Terms: trmBody(h)})
			return err
		})
	})
	t.Run("accept", func(t *testing.T) {
		refusedUnchanged(t, h, CodeCounterpartyRevoked, func() error {
			_, err := h.svc.TermsAccept(ctx, h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: trmSign(t, h.ev.cpKey, tr.SigningBytes)})
			return err
		})
	})
	t.Run("accept again", func(t *testing.T) {
		refusedUnchanged(t, h, CodeCounterpartyRevoked, func() error {
			_, err := h.svc.TermsAccept(ctx, h.call(), &TermsAcceptRequest{TermsID: accepted.ID, Signature: accepted.CounterpartySignature})
			return err
		})
	})
	t.Run("another counterparty is not affected", func(t *testing.T) {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		trmPropose(t, h, h.call(), hex.EncodeToString(pub), nil)
	})
}

// trmGateCase is an instruction citing terms, and the gate's answer.
type trmGateCase struct {
	name    string
	termsID *string
	rail    string
	minor   int64
	edit    func(*pay.Instruction)
	reason  string // "" when the terms let it through
	message string // a part of the reason's message
}

// TestTermsGate checks an instruction citing termsId in its deciding
// transaction: unknown terms (none, another identity's), terms not
// accepted, past validUntil, or not matched by payee, amount, currency or
// rail are denied with the reason; matching ones pass. mandate.verify
// answers each the same way as a dry run, changing nothing.
func TestTermsGate(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	seller := h.seller()
	accepted := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, nil).ID
	anyRail := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, func(b *TermsBody) { b.Rail, b.Amount.Minor = "", 1_500 }).ID
	euro := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, func(b *TermsBody) { b.Amount.Currency = "EUR" }).ID
	proposed := trmPropose(t, h, h.call(), h.ev.cp, nil).ID
	// The seller's terms with the buyer as counterparty: another
	// identity's, whoever signed them.
	theirs := trmAccepted(t, h, seller.call(), h.agent, h.agentKey, nil).ID
	unknown := "trm_01JUNKNOWNTERMS00000000000"

	var holds []string
	gateCases := func(t *testing.T, cases []trmGateCase) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				in := h.spend("hold.place", tc.rail, tc.minor, func(in *pay.Instruction) {
					in.TermsID = *tc.termsID
					if tc.edit != nil {
						tc.edit(in)
					}
				})
				t.Run("mandate.verify", func(t *testing.T) {
					before, n := h.dump(), h.size()
					v, err := h.svc.MandateVerify(ctx, h.call(), &MandateVerifyRequest{Mandate: h.mandate, Payee: in.Payee, Amount: in.Amount,
						Terms: in.Terms, TermsID: in.TermsID})
					if err != nil {
						t.Fatal(err)
					}
					if v.Refusal != "" || v.Decision == nil {
						t.Fatalf("verification %+v", v)
					}
					if tc.reason == "" {
						if !v.Allowed || v.Decision.Outcome != gate.Allow {
							t.Errorf("verification %+v, want allowed", v.Decision)
						}
					} else {
						if v.Allowed || v.Decision.Outcome != gate.Deny || len(v.Decision.Reasons) != 1 || v.Decision.Reasons[0].Code != tc.reason ||
							!strings.Contains(v.Decision.Reasons[0].Message, tc.message) {
							t.Errorf("verification %+v, want denied %s (%q)", v.Decision, tc.reason, tc.message)
						}
					}
					if got := h.typesSince(n); len(got) != 0 {
						t.Errorf("a dry run appended %v", got)
					}
					if diff := cmp.Diff(before, h.dump()); diff != "" {
						t.Errorf("a dry run changed the store (-before +after):\n%s", diff)
					}
				})
				t.Run("hold.place", func(t *testing.T) {
					period, n := trmPeriod(t, h), h.size()
					p, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: in})
					if tc.reason == "" {
						if err != nil {
							t.Fatal(err)
						}
						if p.Status != HoldHeld {
							t.Errorf("placed %+v", p)
						}
						holds = append(holds, p.HoldID)
						return
					}
					if code(err) != pay.CodeDenied {
						t.Fatalf("code %q (%v), want %s", code(err), err, pay.CodeDenied)
					}
					var r *Refused
					if !errors.As(err, &r) || r.Result.Denial == nil || len(r.Result.Denial.Reasons) != 1 {
						t.Fatalf("err %v, want a *Refused with one reason", err)
					}
					if g := r.Result.Denial.Reasons[0]; g.Code != tc.reason || !strings.Contains(g.Message, tc.message) {
						t.Errorf("reason %+v, want %s (%q)", g, tc.reason, tc.message)
					}
					if diff := cmp.Diff([]string{"gate.decision", "protocol.hold.place"}, h.typesSince(n)); diff != "" {
						t.Errorf("a denial's entries (-want +got):\n%s", diff)
					}
					if p := trmPeriod(t, h); p != period {
						t.Errorf("a denial reserved: %s, was %s", p, period)
					}
				})
			})
		}
	}
	gateCases(t, []trmGateCase{
		{name: "no such terms", termsID: &unknown, rail: railCard, minor: 2_000, reason: pay.ReasonTermsUnknown},
		{name: "another identity's terms", termsID: &theirs, rail: railCard, minor: 2_000, reason: pay.ReasonTermsUnknown},
		{name: "proposed terms", termsID: &proposed, rail: railCard, minor: 2_000, reason: ReasonTermsNotAccepted},
		{name: "another payee", termsID: &accepted, rail: railCard, minor: 2_000, edit: func(in *pay.Instruction) { in.Payee = "acct:other.example" },
			reason: ReasonTermsMismatch, message: "in payee"},
		{name: "a smaller amount", termsID: &accepted, rail: railCard, minor: 1_999, reason: ReasonTermsMismatch, message: "in amount"},
		{name: "a larger amount", termsID: &accepted, rail: railCard, minor: 2_001, reason: ReasonTermsMismatch, message: "in amount"},
		{name: "another currency", termsID: &euro, rail: railCard, minor: 2_000, reason: ReasonTermsMismatch, message: "in amount"},
		{name: "another rail", termsID: &accepted, rail: railWire, minor: 2_000, reason: ReasonTermsMismatch, message: "in rail"},
		{name: "payee and amount", termsID: &accepted, rail: railCard, minor: 5, edit: func(in *pay.Instruction) { in.Payee = "acct:other.example" },
			reason: ReasonTermsMismatch, message: "in payee, amount"},
		{name: "matching", termsID: &accepted, rail: railCard, minor: 2_000},
		{name: "matching twice", termsID: &accepted, rail: railCard, minor: 2_000},
		{name: "terms without a rail on the card", termsID: &anyRail, rail: railCard, minor: 1_500},
		{name: "terms without a rail on the wire", termsID: &anyRail, rail: railWire, minor: 1_500},
	})
	if t.Failed() {
		return
	}
	t.Run("a microsecond before validUntil", func(t *testing.T) {
		h.clock.Add(24*time.Hour - time.Microsecond)
		gateCases(t, []trmGateCase{{name: "matching", termsID: &accepted, rail: railCard, minor: 2_000}})
	})
	t.Run("at validUntil", func(t *testing.T) {
		h.clock.Add(time.Microsecond)
		gateCases(t, []trmGateCase{
			{name: "matching", termsID: &accepted, rail: railCard, minor: 2_000, reason: ReasonTermsExpired},
			{name: "without a rail", termsID: &anyRail, rail: railWire, minor: 1_500, reason: ReasonTermsExpired},
			{name: "proposed", termsID: &proposed, rail: railCard, minor: 2_000, reason: ReasonTermsNotAccepted},
		})
	})
	if len(holds) != 5 {
		t.Errorf("%d holds placed, want 5", len(holds))
	}
}

// TestTermsGateObligation: obligation.create cites terms the same way:
// matching terms pass, proposed ones are denied with nothing reserved.
func TestTermsGateObligation(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	accepted := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, nil)
	proposed := trmPropose(t, h, h.call(), h.ev.cp, nil)
	create := func(termsID string, minor int64) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			// The self floor: unknown terms name no counterparty, and
			// the sign floor would need one before the gate runs.
			o, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, minor,
				func(in *pay.Instruction) { in.TermsID = termsID }), EvidenceFloor: ClassSelf, Deadline: h.clock.Now().Add(time.Hour)})
			if err != nil {
				return trmPeriod(t, h), err
			}
			got, err := h.svc.ObligationGet(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
			if err != nil {
				t.Fatal(err)
			}
			if got.TermsID != termsID || got.Counterparty != h.ev.cp || got.Status != ObligationAwaiting {
				t.Errorf("obligation %+v: the terms' counterparty is the obligation's", got)
			}
			return trmPeriod(t, h), nil
		}
	}
	denied := []string{"gate.decision", "protocol.obligation.create"}
	trnRun(t, h, []trnStep{
		{name: "proposed terms", do: create(proposed.ID, 2_000), code: pay.CodeDenied, reason: ReasonTermsNotAccepted,
			state: "reserved=0 settled=0", types: denied},
		{name: "unknown terms", do: create("trm_unknown", 2_000), code: pay.CodeDenied, reason: pay.ReasonTermsUnknown,
			state: "reserved=0 settled=0", types: denied},
		{name: "a mismatching amount", do: create(accepted.ID, 2_500), code: pay.CodeDenied, reason: ReasonTermsMismatch,
			state: "reserved=0 settled=0", types: denied},
		{name: "matching", do: create(accepted.ID, 2_000), state: "reserved=2000 settled=0",
			types: []string{"gate.decision", "protocol.obligation.create", "payment.authorized", "protocol.obligation.authorize"}},
	}, nil)
}

// TestTermsGateObligationOtherIdentity: another identity's terms are
// unknown to this one whatever they say, on obligation.create as on any
// spend: the gate denies terms.unknown, and the refusal tells nothing of
// their evidence floor or counterparty.
func TestTermsGateObligationOtherIdentity(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	// The seller's terms, paying the buyer, with the att floor.
	theirs := trmAccepted(t, h, h.seller().call(), h.agent, h.agentKey, func(b *TermsBody) { b.EvidenceFloor = ClassAtt })
	for _, tc := range []struct {
		name  string
		floor EvidenceClass
		cp    string
	}{
		{name: "their floor", floor: ClassAtt},
		{name: "their counterparty", floor: ClassSelf, cp: h.agent},
		{name: "another floor", floor: ClassSelf},
		{name: "another counterparty", floor: ClassAtt, cp: h.ev.cp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := h.size()
			_, err := h.svc.ObligationCreate(ctx, h.call(), &ObligationCreateRequest{Spend: h.spend("obligation.create", railCard, 2_000,
				func(in *pay.Instruction) { in.TermsID = theirs.ID }), EvidenceFloor: tc.floor, Deadline: h.clock.Now().Add(time.Hour),
				Counterparty: tc.cp})
			if code(err) != pay.CodeDenied {
				t.Fatalf("code %q (%v), want %s with %s", code(err), err, pay.CodeDenied, pay.ReasonTermsUnknown)
			}
			trnWantDenied(t, err, pay.ReasonTermsUnknown)
			if diff := cmp.Diff([]string{"gate.decision", "protocol.obligation.create"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTermsRecordEntries: the entries terms append carry the terms'
// state, without the entry list.
func TestTermsRecordEntries(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	n := h.size()
	a := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, nil)
	if diff := cmp.Diff([]string{"protocol.terms.propose", "protocol.terms.accept"}, h.typesSince(n)); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
	var seen []string
	for e, err := range h.log.Entries(t.Context(), n+1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		var got TwoPartyTerms
		if err := json.Unmarshal(e.Data, &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != a.ID || got.Entries != nil || e.Actor.ID != h.caller.KeyID || e.RequestID != "req_test" {
			t.Errorf("entry %s: %+v by %+v", e.Type, got, e.Actor)
		}
		seen = append(seen, got.Status)
	}
	if diff := cmp.Diff([]string{TermsStatusProposed, TermsStatusAccepted}, seen, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("statuses recorded (-want +got):\n%s", diff)
	}
	if !slices.Equal(a.Entries, []uint64{n + 1, n + 2}) {
		t.Errorf("terms entries %v, want [%d %d]", a.Entries, n+1, n+2)
	}
}

// TestTermsAcceptConcurrent: acceptances racing with the counterparty's
// signature accept the terms once; the others answer it as replays.
func TestTermsAcceptConcurrent(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	tr := trmPropose(t, h, h.call(), h.ev.cp, nil)
	sig := trmSign(t, h.ev.cpKey, tr.SigningBytes)
	n := h.size()
	const racers = 8
	results := make([]*TermsAccepted, racers)
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			results[i], errs[i] = h.svc.TermsAccept(t.Context(), h.call(), &TermsAcceptRequest{TermsID: tr.ID, Signature: sig})
		})
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
		if results[i].Status != TermsStatusAccepted || results[i].CounterpartySignature != sig {
			t.Errorf("racer %d: %+v", i, results[i].TwoPartyTerms)
		}
	}
	if fresh != 1 {
		t.Errorf("%d acceptances were not replays, want 1", fresh)
	}
	if diff := cmp.Diff([]string{"protocol.terms.accept"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}

// TestTermsSurfaceProblemsDeclared: every problem code the tests of
// terms, negotiate and evidence see a method answer is among the codes
// the method declares, so the OpenAPI document lists it.
func TestTermsSurfaceProblemsDeclared(t *testing.T) {
	answers := map[string][]string{
		"terms.propose":     {CodeTermsInvalid, CodeCounterpartyRevoked, CodeCustodyAgent},
		"terms.accept":      {CodeTermsNotFound, CodeTermsSignature, CodeTermsAccepted, CodeTermsExpired, CodeCounterpartyRevoked},
		"terms.get":         {CodeTermsNotFound},
		"negotiate.offer":   {CodeTermsInvalid, CodeCounterpartyRevoked, CodeNegotiationNoKey, CodeCustodyAgent},
		"negotiate.counter": {CodeNegotiationNotFound, CodeNegotiationClosed, CodeNegotiationTurn, CodeTermsInvalid, CodeTermsSignature, CodeCounterpartyRevoked},
		// terms.invalid: a signature sent to accept the counterparty's
		// offer, which is signed here.
		"negotiate.accept": {CodeNegotiationNotFound, CodeNegotiationClosed, CodeTermsSignature, CodeTermsExpired, CodeCounterpartyRevoked, CodeTermsInvalid},
		// terms.invalid: a signature sent with our own rejection.
		"negotiate.reject": {CodeNegotiationNotFound, CodeNegotiationClosed, CodeTermsSignature, CodeCounterpartyRevoked, CodeTermsInvalid},
		"negotiate.get":    {CodeNegotiationNotFound},
		"evidence.submit": {CodeEvidenceSubject, CodeEvidenceInvalid, CodeEvidenceSigner, CodeCounterpartyRevoked,
			CodeDeadlinePassed, CodeObligationCancelled, CodeObligationClosed},
		"evidence.get":      {CodeEvidenceNotFound},
		"evidence.list":     {CodeEvidenceSubject},
		"obligation.create": {pay.CodeDenied},
		"hold.place":        {pay.CodeDenied},
	}
	for id, codes := range answers {
		m, ok := Lookup(id)
		if !ok {
			t.Errorf("%s is not declared", id)
			continue
		}
		for _, c := range codes {
			if !slices.Contains(m.Problems, c) {
				t.Errorf("%s answers %s, which it does not declare (declared: %v)", id, c, m.Problems)
			}
		}
	}
	for _, id := range []string{"terms.propose", "terms.accept", "negotiate.offer", "negotiate.counter", "negotiate.accept", "negotiate.reject", "evidence.submit"} {
		m, _ := Lookup(id)
		if want := "protocol." + id; m.Entry != want {
			t.Errorf("%s records %q, want %q", id, m.Entry, want)
		}
	}
}

// TestTermsGateApprovalAfterExpiry: a payment citing terms that waits for
// an operator is checked against the terms when the person decides too:
// approved after validUntil, it must not move money under terms no
// longer in force (as an approval after the mandate's expiry does not).
func TestTermsGateApprovalAfterExpiry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	tr := trmAccepted(t, h, h.call(), h.ev.cp, h.ev.cpKey, func(b *TermsBody) {
		b.Amount.Minor, b.ValidUntil = 20_000, h.clock.Now().Add(time.Hour) // above the mandate's confirm threshold
	})
	p, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: h.spend("hold.place", railCard, 20_000,
		func(in *pay.Instruction) { in.TermsID = tr.ID })})
	if err != nil || p.Status != HoldPendingApproval {
		t.Fatalf("placed %+v, %v; want pending approval", p, err)
	}
	h.clock.Add(time.Hour)
	res, err := trnApprove(t, h, p.IntentID, p.Approval)
	if err == nil && res.Outcome != pay.OutcomeDenied {
		hold, _ := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: p.HoldID})
		t.Errorf("approved after the terms' validUntil: outcome %s, hold %+v; want refused", res.Outcome, hold)
	}
}
