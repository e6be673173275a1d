package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/pay"
)

// ngtState is a negotiation as negotiate.get shows it: its status, and
// who made each offer.
func ngtState(t *testing.T, h *harness, id string) string {
	t.Helper()
	n, err := h.svc.NegotiateGet(t.Context(), h.call(), &NegotiationRef{NegotiationID: id})
	if err != nil {
		return "get: " + code(err)
	}
	var from []string
	for _, o := range n.Offers {
		from = append(from, o.From)
	}
	s := fmt.Sprintf("%s offers=%s entries=%d", n.Status, strings.Join(from, ","), len(n.Entries))
	if n.TermsID != "" {
		s += " terms"
	}
	if n.RejectedBy != "" {
		s += " rejectedBy=" + n.RejectedBy
	}
	return s
}

// ngtSign is key's signature (base64url) over the bytes of offer seq of
// the negotiation with body b.
func ngtSign(t testing.TB, h *harness, key ed25519.PrivateKey, negID string, seq int, b TermsBody) string {
	t.Helper()
	msg, err := OfferSigningBytes(negID, seq, h.agent, h.ev.cp, b)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// ngtSignRejection is key's signature over the rejection of offer seq.
func ngtSignRejection(t testing.TB, h *harness, key ed25519.PrivateKey, negID string, seq int, b TermsBody) string {
	t.Helper()
	msg, err := RejectionSigningBytes(negID, seq, h.agent, h.ev.cp, b)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
}

// ngtOpen opens a negotiation with our offer of trmBody, edited.
func ngtOpen(t *testing.T, h *harness, edit func(*TermsBody)) *Negotiation {
	t.Helper()
	b := trmBody(h)
	if edit != nil {
		edit(&b)
	}
	n, err := h.svc.NegotiateOffer(t.Context(), h.call(), &NegotiateOfferRequest{Counterparty: h.ev.cp, Terms: b})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ngtCheckOffer checks offer seq of n: its bytes are OfferSigningBytes of
// its body, and its signature is signer's over them.
func ngtCheckOffer(t *testing.T, h *harness, n *Negotiation, seq int, from string, pub ed25519.PublicKey) {
	t.Helper()
	if len(n.Offers) < seq {
		t.Fatalf("%d offers, want offer %d", len(n.Offers), seq)
	}
	o := n.Offers[seq-1]
	signer := h.ident.id
	if from == SideCounterparty {
		signer = h.ev.cp
	}
	if o.Seq != seq || o.From != from || o.Signer != signer || !o.At.Equal(h.clock.Now()) {
		t.Errorf("offer %d: %+v", seq, o)
	}
	want, err := OfferSigningBytes(n.ID, seq, h.agent, h.ev.cp, o.TermsBody)
	if err != nil {
		t.Fatal(err)
	}
	if o.SigningBytes != base64.RawURLEncoding.EncodeToString(want) {
		t.Errorf("offer %d: signingBytes are not OfferSigningBytes of the offer", seq)
	}
	if !trmVerify(t, pub, o.SigningBytes, o.Signature) {
		t.Errorf("offer %d: the signature does not verify with %s's key", seq, from)
	}
}

// TestNegotiateOffer checks the opening offer: signed here with the
// deployment's identity key, and refused for what terms refuse.
func TestNegotiateOffer(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	n0 := h.size()
	n := ngtOpen(t, h, nil)
	if diff := cmp.Diff([]string{"protocol.negotiate.offer"}, h.typesSince(n0)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(n.ID, "neg_") || n.Status != NegotiationOpen || n.Agent != h.agent || n.AgentKeyID != h.caller.KeyID ||
		n.Counterparty != h.ev.cp || n.TermsID != "" || len(n.Offers) != 1 || len(n.Entries) != 1 || n.Entries[0] != n0+1 {
		t.Errorf("opened %+v", n)
	}
	ngtCheckOffer(t, h, n, 1, SideUs, h.ident.key.Public().(ed25519.PublicKey))
	if diff := cmp.Diff(trmBody(h), n.Offers[0].TermsBody); diff != "" {
		t.Errorf("offer body (-sent +stored):\n%s", diff)
	}
	got, err := h.svc.NegotiateGet(ctx, h.call(), &NegotiationRef{NegotiationID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(n, got); diff != "" {
		t.Errorf("negotiate.get (-offered +got):\n%s", diff)
	}
	// The offer signature is over offer bytes: it is not a signature of
	// the same body as terms or as a rejection.
	for _, other := range []func(string, int, string, string, TermsBody) ([]byte, error){RejectionSigningBytes,
		func(id string, _ int, a, c string, b TermsBody) ([]byte, error) {
			return TermsSigningBytes(&TwoPartyTerms{ID: id, Agent: a, Counterparty: c, TermsBody: b})
		}} {
		msg, err := other(n.ID, 1, h.agent, h.ev.cp, n.Offers[0].TermsBody)
		if err != nil {
			t.Fatal(err)
		}
		if trmVerify(t, h.ident.key.Public().(ed25519.PublicKey), base64.RawURLEncoding.EncodeToString(msg), n.Offers[0].Signature) {
			t.Error("the offer's signature verifies over other statement bytes")
		}
	}

	stake := trmStake(t, h, h.seller(), 1_000, time.Hour, "stk-1")
	tests := []struct {
		name  string
		agent string
		cp    string
		edit  func(*TermsBody)
		code  string
	}{
		{name: "did:key counterparty", cp: identity.DIDKey(h.ev.cpKey.Public().(ed25519.PublicKey))},
		{name: "with the counterparty's stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = stake.ID }},
		{name: "zero amount", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Minor = 0 }, code: CodeTermsInvalid},
		{name: "bad payee", cp: h.ev.cp, edit: func(b *TermsBody) { b.Payee = "nobody" }, code: CodeTermsInvalid},
		{name: "bad rail", cp: h.ev.cp, edit: func(b *TermsBody) { b.Rail = "CARD" }, code: CodeTermsInvalid},
		{name: "bad currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.Amount.Currency = "dollars" }, code: CodeTermsInvalid},
		{name: "valid until the past", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = h.clock.Now().Add(-time.Second) }, code: CodeTermsInvalid},
		{name: "valid beyond a year", cp: h.ev.cp, edit: func(b *TermsBody) { b.ValidUntil = h.clock.Now().AddDate(1, 0, 1) }, code: CodeTermsInvalid},
		{name: "unknown stake", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID = "stk_nope" }, code: CodeTermsInvalid},
		{name: "a stake in another currency", cp: h.ev.cp, edit: func(b *TermsBody) { b.StakeID, b.Amount.Currency = stake.ID, "EUR" }, code: CodeTermsInvalid},
		{name: "bad counterparty", cp: "seller", code: CodeTermsInvalid},
		{name: "another identity's stake", cp: h.agent, edit: func(b *TermsBody) { b.StakeID = stake.ID }, code: CodeTermsInvalid},
		{name: "an agent the credential does not act for", agent: h.ev.cp, cp: h.ev.cp, code: CodeCustodyAgent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := trmBody(h)
			if tc.edit != nil {
				tc.edit(&b)
			}
			req := &NegotiateOfferRequest{Agent: tc.agent, Counterparty: tc.cp, Terms: b}
			if tc.code != "" {
				refusedUnchanged(t, h, tc.code, func() error { _, err := h.svc.NegotiateOffer(ctx, h.call(), req); return err })
				return
			}
			n, err := h.svc.NegotiateOffer(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			if n.Counterparty != tc.cp || n.Offers[0].StakeID != b.StakeID {
				t.Errorf("opened %+v", n)
			}
		})
	}
}

// TestNegotiateNoIdentity: without an identity key there is nothing to
// sign our offers with.
func TestNegotiateNoIdentity(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	svc, err := newService(Options{Store: h.st, Log: h.log, Mandates: mustVerifier(t, h), Now: h.clock.Now,
		Logger: slog.New(slog.DiscardHandler), Evidence: h.ev.keys()}, h.pay, h.svc.books)
	if err != nil {
		t.Fatal(err)
	}
	refusedUnchanged(t, h, CodeNegotiationNoKey, func() error {
		_, err := svc.NegotiateOffer(t.Context(), h.call(), &NegotiateOfferRequest{Counterparty: h.ev.cp, Terms: trmBody(h)})
		return err
	})
}

func mustVerifier(t *testing.T, h *harness) *pay.MandateVerifier {
	t.Helper()
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op-test", Public: h.opKey.Public()}}, &pay.MandateVerifierOptions{Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return mv
}

// TestNegotiateThread walks a negotiation through alternating offers and
// every refusal on the way to the counterparty's acceptance of our last
// offer: the accepted terms carry both signatures over the offer's bytes,
// each verifiable offline, and the closed thread refuses everything.
func TestNegotiateThread(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	ourPub := h.ident.key.Public().(ed25519.PublicKey)
	cpPub := h.ev.cpKey.Public().(ed25519.PublicKey)
	first := trmBody(h)
	n := ngtOpen(t, h, nil)
	counter := first
	counter.Amount.Minor = 2_500
	third := first
	third.Amount.Minor = 2_250
	var accepted *NegotiationAccepted

	doCounter := func(from string, b TermsBody, sig func() string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			got, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: from, Terms: b, Signature: sig()})
			if err == nil {
				pub := ourPub
				if from == SideCounterparty {
					pub = cpPub
				}
				ngtCheckOffer(t, h, got, len(got.Offers), from, pub)
				if diff := cmp.Diff(b, got.Offers[len(got.Offers)-1].TermsBody); diff != "" {
					t.Errorf("offer body (-sent +stored):\n%s", diff)
				}
			}
			return ngtState(t, h, n.ID), err
		}
	}
	doAccept := func(call func() Call, sig func() string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			a, err := h.svc.NegotiateAccept(ctx, call(), &NegotiateAcceptRequest{NegotiationID: n.ID, Signature: sig()})
			if err == nil {
				accepted = a
			}
			return ngtState(t, h, n.ID), err
		}
	}
	doReject := func(by string, sig string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateReject(ctx, h.call(), &NegotiateRejectRequest{NegotiationID: n.ID, By: by, Signature: sig})
			return ngtState(t, h, n.ID), err
		}
	}
	cpSig := func(seq int, b TermsBody) func() string {
		return func() string { return ngtSign(t, h, h.ev.cpKey, n.ID, seq, b) }
	}
	none := func() string { return "" }
	invalid := counter
	invalid.Amount.Minor = 0

	trnRun(t, h, []trnStep{
		{name: "counter by us on our own offer", do: doCounter(SideUs, counter, none), code: CodeNegotiationTurn, state: "open offers=us entries=1"},
		{name: "counter by the counterparty unsigned", do: doCounter(SideCounterparty, counter, none), code: CodeTermsSignature,
			state: "open offers=us entries=1"},
		{name: "counter by the counterparty signed by the payer", do: doCounter(SideCounterparty, counter, func() string {
			return ngtSign(t, h, h.agentKey, n.ID, 2, counter)
		}), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "counter by the counterparty signed by our identity", do: doCounter(SideCounterparty, counter, func() string {
			return ngtSign(t, h, h.ident.key, n.ID, 2, counter)
		}), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "counter signed for the wrong seq", do: doCounter(SideCounterparty, counter, cpSig(1, counter)), code: CodeTermsSignature,
			state: "open offers=us entries=1"},
		{name: "counter signed for another body", do: doCounter(SideCounterparty, counter, cpSig(2, first)), code: CodeTermsSignature,
			state: "open offers=us entries=1"},
		{name: "counter signed as a rejection", do: doCounter(SideCounterparty, counter, func() string {
			return ngtSignRejection(t, h, h.ev.cpKey, n.ID, 2, counter)
		}), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "counter with an invalid body, signed", do: doCounter(SideCounterparty, invalid, cpSig(2, invalid)), code: CodeTermsInvalid,
			state: "open offers=us entries=1"},
		{name: "counter for another identity", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateCounter(ctx, trmOtherIdentity(h), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideCounterparty,
				Terms: counter, Signature: cpSig(2, counter)()})
			return ngtState(t, h, n.ID), err
		}, code: CodeNegotiationNotFound, state: "open offers=us entries=1"},
		{name: "get for another identity", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateGet(ctx, trmOtherIdentity(h), &NegotiationRef{NegotiationID: n.ID})
			return ngtState(t, h, n.ID), err
		}, code: CodeNegotiationNotFound, state: "open offers=us entries=1"},
		{name: "counter on an unknown negotiation", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: "neg_unknown", From: SideUs, Terms: counter})
			return "", err
		}, code: CodeNegotiationNotFound},
		{name: "accept our offer without the counterparty's signature", do: doAccept(h.call, none), code: CodeTermsSignature,
			state: "open offers=us entries=1"},
		{name: "accept our offer with our own signature", do: doAccept(h.call, func() string { return n.Offers[0].Signature }),
			code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "counter by the counterparty", do: doCounter(SideCounterparty, counter, cpSig(2, counter)),
			state: "open offers=us,counterparty entries=2", types: []string{"protocol.negotiate.counter"}},
		{name: "counter by the counterparty again", do: doCounter(SideCounterparty, third, cpSig(3, third)), code: CodeNegotiationTurn,
			state: "open offers=us,counterparty entries=2"},
		{name: "accept their offer with a signature", do: doAccept(h.call, cpSig(2, counter)), code: CodeTermsInvalid,
			state: "open offers=us,counterparty entries=2"},
		{name: "counter by us with a signature", do: doCounter(SideUs, third, func() string { return ngtSign(t, h, h.ident.key, n.ID, 3, third) }),
			code: CodeTermsInvalid, state: "open offers=us,counterparty entries=2"},
		{name: "counter by us with an invalid body", do: doCounter(SideUs, invalid, none), code: CodeTermsInvalid,
			state: "open offers=us,counterparty entries=2"},
		{name: "counter by us", do: doCounter(SideUs, third, none), state: "open offers=us,counterparty,us entries=3",
			types: []string{"protocol.negotiate.counter"}},
		{name: "accept with the counterparty's signature of its own offer", do: doAccept(h.call, cpSig(2, counter)), code: CodeTermsSignature,
			state: "open offers=us,counterparty,us entries=3"},
		{name: "accept with the counterparty's signature of the first offer", do: doAccept(h.call, cpSig(1, first)), code: CodeTermsSignature,
			state: "open offers=us,counterparty,us entries=3"},
		{name: "accept with the counterparty's rejection signature", do: doAccept(h.call, func() string {
			return ngtSignRejection(t, h, h.ev.cpKey, n.ID, 3, third)
		}), code: CodeTermsSignature, state: "open offers=us,counterparty,us entries=3"},
		{name: "accept for another identity", do: doAccept(func() Call { return trmOtherIdentity(h) }, cpSig(3, third)), code: CodeNegotiationNotFound,
			state: "open offers=us,counterparty,us entries=3"},
		{name: "reject by the counterparty signing the offer", do: doReject(SideCounterparty, cpSig(3, third)()), code: CodeTermsSignature,
			state: "open offers=us,counterparty,us entries=3"},
		{name: "accept our offer with the counterparty's signature", do: doAccept(h.call, cpSig(3, third)),
			state: "accepted offers=us,counterparty,us entries=4 terms", types: []string{"protocol.terms.accept", "protocol.negotiate.accept"}},
		{name: "counter after acceptance", do: doCounter(SideCounterparty, counter, cpSig(4, counter)), code: CodeNegotiationClosed,
			state: "accepted offers=us,counterparty,us entries=4 terms"},
		{name: "accept again", do: doAccept(h.call, cpSig(3, third)), code: CodeNegotiationClosed,
			state: "accepted offers=us,counterparty,us entries=4 terms"},
		{name: "reject by us after acceptance", do: doReject(SideUs, ""), code: CodeNegotiationClosed,
			state: "accepted offers=us,counterparty,us entries=4 terms"},
		{name: "reject by the counterparty after acceptance", do: doReject(SideCounterparty, ngtSignRejection(t, h, h.ev.cpKey, n.ID, 3, third)),
			code: CodeNegotiationClosed, state: "accepted offers=us,counterparty,us entries=4 terms"},
	}, nil)
	if t.Failed() {
		return
	}

	tr, ng := accepted.Terms, accepted.Negotiation
	last := ng.Offers[2]
	if tr.Status != TermsStatusAccepted || tr.NegotiationID != n.ID || ng.TermsID != tr.ID || tr.Agent != h.agent || tr.Counterparty != h.ev.cp ||
		tr.SigningBytes != last.SigningBytes || tr.OurSignature != last.Signature || tr.CounterpartySignature != cpSig(3, third)() ||
		tr.AcceptedAt == nil || len(tr.Entries) != 1 || !strings.HasPrefix(tr.ID, "trm_") {
		t.Errorf("accepted terms %+v", tr)
	}
	if diff := cmp.Diff(third, tr.TermsBody); diff != "" {
		t.Errorf("the terms are not the accepted offer (-offer +terms):\n%s", diff)
	}
	if !trmVerify(t, cpPub, tr.SigningBytes, tr.CounterpartySignature) || !trmVerify(t, ourPub, tr.SigningBytes, tr.OurSignature) {
		t.Error("the terms' signatures do not both verify offline over signingBytes")
	}
	stored, err := h.svc.TermsGet(ctx, h.call(), &TermsRef{TermsID: tr.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&tr, stored); diff != "" {
		t.Errorf("terms.get (-accepted +got):\n%s", diff)
	}
	// The terms are in force: a matching hold passes the gate.
	if _, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: h.spend("hold.place", railCard, 2_250,
		func(in *pay.Instruction) { in.TermsID = tr.ID })}); err != nil {
		t.Errorf("a hold matching the negotiated terms: %v", err)
	}
}

// TestNegotiateAcceptTheirs: accepting the counterparty's offer is signed
// here; its own signature over the offer is the terms' counterparty
// signature.
func TestNegotiateAcceptTheirs(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	n := ngtOpen(t, h, nil)
	counter := trmBody(h)
	counter.Description = "a longer report"
	counter.Rail = ""
	sig := ngtSign(t, h, h.ev.cpKey, n.ID, 2, counter)
	if _, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideCounterparty, Terms: counter, Signature: sig}); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Minute)
	n0 := h.size()
	a, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"protocol.terms.accept", "protocol.negotiate.accept"}, h.typesSince(n0)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	tr := a.Terms
	if a.Negotiation.Status != NegotiationStatusAccepted || a.Negotiation.TermsID != tr.ID || tr.CounterpartySignature != sig ||
		tr.SigningBytes != a.Negotiation.Offers[1].SigningBytes || !tr.AcceptedAt.Equal(h.clock.Now()) || tr.Rail != "" {
		t.Errorf("accepted %+v", a)
	}
	if !trmVerify(t, h.ev.cpKey.Public().(ed25519.PublicKey), tr.SigningBytes, tr.CounterpartySignature) ||
		!trmVerify(t, h.ident.key.Public().(ed25519.PublicKey), tr.SigningBytes, tr.OurSignature) {
		t.Error("the terms' signatures do not both verify offline over signingBytes")
	}
	if _, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{TTLSeconds: 3600, Spend: h.spend("hold.place", railWire, 2_000,
		func(in *pay.Instruction) { in.TermsID = tr.ID })}); err != nil {
		t.Errorf("a hold matching the negotiated terms: %v", err)
	}
}

// TestNegotiateReject: we walk away unsigned; the counterparty rejects
// with its signature over the rejection's bytes, nothing else.
func TestNegotiateReject(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	_, wrongKey, _ := ed25519.GenerateKey(rand.Reader)
	ours := ngtOpen(t, h, nil)
	theirs := ngtOpen(t, h, nil)
	counter := trmBody(h)
	counter.Amount.Minor = 3_000
	if _, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: theirs.ID, From: SideCounterparty, Terms: counter,
		Signature: ngtSign(t, h, h.ev.cpKey, theirs.ID, 2, counter)}); err != nil {
		t.Fatal(err)
	}
	first := trmBody(h)
	reject := func(n *Negotiation, by, sig, reason string) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			got, err := h.svc.NegotiateReject(ctx, h.call(), &NegotiateRejectRequest{NegotiationID: n.ID, By: by, Signature: sig, Reason: reason})
			if err == nil && (got.Reason != reason || got.RejectionSignature != sig || !got.UpdatedAt.Equal(h.clock.Now()) || got.TermsID != "") {
				t.Errorf("rejected %+v", got)
			}
			return ngtState(t, h, n.ID), err
		}
	}
	trnRun(t, h, []trnStep{
		{name: "reject by us with a signature", do: reject(ours, SideUs, ngtSignRejection(t, h, h.ident.key, ours.ID, 1, first), ""),
			code: CodeTermsInvalid, state: "open offers=us entries=1"},
		{name: "reject by the counterparty unsigned", do: reject(ours, SideCounterparty, "", ""), code: CodeTermsSignature,
			state: "open offers=us entries=1"},
		{name: "reject by the counterparty signed by another key", do: reject(ours, SideCounterparty,
			ngtSignRejection(t, h, wrongKey, ours.ID, 1, first), ""), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "reject by the counterparty signed for another negotiation", do: reject(ours, SideCounterparty,
			ngtSignRejection(t, h, h.ev.cpKey, theirs.ID, 1, first), ""), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "reject by the counterparty signed for another seq", do: reject(ours, SideCounterparty,
			ngtSignRejection(t, h, h.ev.cpKey, ours.ID, 2, first), ""), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "reject by the counterparty with its offer signature", do: reject(ours, SideCounterparty,
			ngtSign(t, h, h.ev.cpKey, ours.ID, 1, first), ""), code: CodeTermsSignature, state: "open offers=us entries=1"},
		{name: "reject for another identity", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateReject(ctx, trmOtherIdentity(h), &NegotiateRejectRequest{NegotiationID: ours.ID, By: SideUs})
			return ngtState(t, h, ours.ID), err
		}, code: CodeNegotiationNotFound, state: "open offers=us entries=1"},
		{name: "reject by the counterparty", do: reject(ours, SideCounterparty, ngtSignRejection(t, h, h.ev.cpKey, ours.ID, 1, first), "too dear"),
			state: "rejected offers=us entries=2 rejectedBy=counterparty", types: []string{"protocol.negotiate.reject"}},
		{name: "reject it again", do: reject(ours, SideUs, "", ""), code: CodeNegotiationClosed, state: "rejected offers=us entries=2 rejectedBy=counterparty"},
		{name: "counter after the rejection", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: ours.ID, From: SideCounterparty, Terms: counter,
				Signature: ngtSign(t, h, h.ev.cpKey, ours.ID, 2, counter)})
			return ngtState(t, h, ours.ID), err
		}, code: CodeNegotiationClosed, state: "rejected offers=us entries=2 rejectedBy=counterparty"},
		{name: "accept after the rejection", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: ours.ID, Signature: ngtSign(t, h, h.ev.cpKey, ours.ID, 1, first)})
			return ngtState(t, h, ours.ID), err
		}, code: CodeNegotiationClosed, state: "rejected offers=us entries=2 rejectedBy=counterparty"},
		{name: "reject their offer by us", do: reject(theirs, SideUs, "", "not now"),
			state: "rejected offers=us,counterparty entries=3 rejectedBy=us", types: []string{"protocol.negotiate.reject"}},
		{name: "accept their rejected offer", do: func(t *testing.T) (string, error) {
			_, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: theirs.ID})
			return ngtState(t, h, theirs.ID), err
		}, code: CodeNegotiationClosed, state: "rejected offers=us,counterparty entries=3 rejectedBy=us"},
	}, nil)
}

// TestNegotiateExpiry: the latest offer cannot be accepted once past its
// validUntil.
func TestNegotiateExpiry(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	n := ngtOpen(t, h, func(b *TermsBody) { b.ValidUntil = h.clock.Now().Add(time.Hour) })
	sig := ngtSign(t, h, h.ev.cpKey, n.ID, 1, n.Offers[0].TermsBody)
	h.clock.Add(time.Hour)
	refusedUnchanged(t, h, CodeTermsExpired, func() error {
		_, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: n.ID, Signature: sig})
		return err
	})
	// A fresh counter-offer is still possible, and can be accepted.
	counter := trmBody(h)
	if _, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideCounterparty, Terms: counter,
		Signature: ngtSign(t, h, h.ev.cpKey, n.ID, 2, counter)}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: n.ID}); err != nil {
		t.Fatal(err)
	}
}

// TestNegotiateCounterpartyRevoked: once the operator revoked the
// counterparty, no negotiation with it can open or go on.
func TestNegotiateCounterpartyRevoked(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	n := ngtOpen(t, h, nil)
	counter := trmBody(h)
	counter.Amount.Minor = 1_000
	h.ident.revoke(h.ev.cp)
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{name: "offer", do: func() error {
			_, err := h.svc.NegotiateOffer(ctx, h.call(), &NegotiateOfferRequest{Counterparty: h.ev.cp, Terms: trmBody(h)})
			return err
		}},
		{name: "counter by the counterparty", do: func() error {
			_, err := h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideCounterparty, Terms: counter,
				Signature: ngtSign(t, h, h.ev.cpKey, n.ID, 2, counter)})
			return err
		}},
		{name: "accept with its signature", do: func() error {
			_, err := h.svc.NegotiateAccept(ctx, h.call(), &NegotiateAcceptRequest{NegotiationID: n.ID,
				Signature: ngtSign(t, h, h.ev.cpKey, n.ID, 1, n.Offers[0].TermsBody)})
			return err
		}},
		{name: "reject by it", do: func() error {
			_, err := h.svc.NegotiateReject(ctx, h.call(), &NegotiateRejectRequest{NegotiationID: n.ID, By: SideCounterparty,
				Signature: ngtSignRejection(t, h, h.ev.cpKey, n.ID, 1, n.Offers[0].TermsBody)})
			return err
		}},
		{name: "reject by us", do: func() error {
			_, err := h.svc.NegotiateReject(ctx, h.call(), &NegotiateRejectRequest{NegotiationID: n.ID, By: SideUs})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { refusedUnchanged(t, h, CodeCounterpartyRevoked, tc.do) })
	}
	if _, err := h.svc.NegotiateGet(ctx, h.call(), &NegotiationRef{NegotiationID: n.ID}); err != nil {
		t.Errorf("get: %v (reading is not refused)", err)
	}
}

// TestNegotiateCounterConcurrent: both sides countering at once never
// break the alternation: whatever wins, the offers alternate and each
// carries its side's signature over its own bytes.
func TestNegotiateCounterConcurrent(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	n := ngtOpen(t, h, nil)
	const racers = 4
	var wg sync.WaitGroup
	errs := make([]error, 2*racers)
	for i := range racers {
		ours, theirs := trmBody(h), trmBody(h)
		ours.Amount.Minor, theirs.Amount.Minor = int64(1_000+i), int64(3_000+i)
		sig := ngtSign(t, h, h.ev.cpKey, n.ID, 2, theirs)
		wg.Go(func() {
			_, errs[i] = h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideUs, Terms: ours})
		})
		wg.Go(func() {
			_, errs[racers+i] = h.svc.NegotiateCounter(ctx, h.call(), &NegotiateCounterRequest{NegotiationID: n.ID, From: SideCounterparty,
				Terms: theirs, Signature: sig})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if c := code(err); c != "" && c != CodeNegotiationTurn && c != CodeTermsSignature {
			t.Errorf("racer %d: %v", i, err)
		}
	}
	got, err := h.svc.NegotiateGet(ctx, h.call(), &NegotiationRef{NegotiationID: n.ID})
	if err != nil {
		t.Fatal(err)
	}
	ourPub, cpPub := h.ident.key.Public().(ed25519.PublicKey), h.ev.cpKey.Public().(ed25519.PublicKey)
	for i, o := range got.Offers {
		want, pub := SideUs, ourPub
		if i%2 == 1 {
			want, pub = SideCounterparty, cpPub
		}
		if o.From != want || o.Seq != i+1 {
			t.Errorf("offer %d from %s seq %d, want %s", i+1, o.From, o.Seq, want)
		}
		ngtCheckOffer(t, h, got, i+1, want, pub)
	}
	if len(got.Offers) < 2 || len(got.Offers) != len(got.Entries) {
		t.Errorf("%d offers, %d entries", len(got.Offers), len(got.Entries))
	}
}
