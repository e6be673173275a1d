package protocol

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// The helpers prefixed obl are shared by the tests of obligations,
// clearing, deliveries, disputes and insurance.

// oblRequest is an obligation.create request of minor USD on rail with
// the evidence floor, due d from now; a sign floor names the fixture's
// counterparty. edit changes the spend before it is signed.
func oblRequest(h *harness, rail string, minor int64, floor EvidenceClass, d time.Duration, edit func(*pay.Instruction)) *ObligationCreateRequest {
	req := &ObligationCreateRequest{Spend: h.spend("obligation.create", rail, minor, edit), EvidenceFloor: floor,
		Deadline: h.clock.Now().Add(d)}
	if floor == ClassSign {
		req.Counterparty = h.ev.cp
	}
	return req
}

// oblCreate creates an obligation due in an hour; it must be admitted
// (awaiting evidence, or held for approval).
func oblCreate(t *testing.T, h *harness, rail string, minor int64, floor EvidenceClass) *ObligationCreated {
	t.Helper()
	o, err := h.svc.ObligationCreate(t.Context(), h.call(), oblRequest(h, rail, minor, floor, time.Hour, nil))
	if err != nil {
		t.Fatalf("create %d on %s: %v", minor, rail, err)
	}
	return o
}

// oblSubmit submits evidence of class about subject, signed (or proved)
// as the class needs, with a statement saying what.
func oblSubmit(t *testing.T, h *harness, subject string, class EvidenceClass, what string) (*EvidenceSubmitted, error) {
	t.Helper()
	stmt := `{"subject":"` + subject + `","what":"` + what + `"}`
	req := &EvidenceSubmitRequest{Subject: subject, Class: class, Statement: json.RawMessage(stmt)}
	switch class {
	case ClassSign:
		req.Signature = h.ev.sign(t, h.ev.cpKey, subject, stmt)
	case ClassWit:
		req.Signer, req.Signature = "witness-1", h.ev.sign(t, h.ev.witness, subject, stmt)
	case ClassRec:
		req.Signer, req.Signature = "merchant-1", h.ev.sign(t, h.ev.receipt, subject, stmt)
	case ClassAtt:
		req.Signer, req.Signature = "attester-1", h.ev.sign(t, h.ev.attester, subject, stmt)
	case ClassProof, ClassPote:
		req.Signer, req.Proof = h.ev.logOrigin, h.ev.logProof(t, subject, stmt, class == ClassPote)
	}
	return h.svc.EvidenceSubmit(t.Context(), h.call(), req)
}

// oblMustSubmit is oblSubmit for evidence that must be stored.
func oblMustSubmit(t *testing.T, h *harness, subject string, class EvidenceClass, what string) *EvidenceSubmitted {
	t.Helper()
	sub, err := oblSubmit(t, h, subject, class, what)
	if err != nil {
		t.Fatalf("submit %s evidence about %s: %v", class, subject, err)
	}
	return sub
}

// oblCleared creates an obligation of minor on rail and clears it on the
// agent's own word (floor self).
func oblCleared(t *testing.T, h *harness, rail string, minor int64) *ObligationCreated {
	t.Helper()
	o := oblCreate(t, h, rail, minor, ClassSelf)
	if sub := oblMustSubmit(t, h, o.ObligationID, ClassSelf, "delivered"); sub.Clearing == nil || sub.Clearing.Status != ClearingCleared {
		t.Fatalf("self evidence did not clear %s: %+v", o.ObligationID, sub.Clearing)
	}
	return o
}

// oblState is an obligation's status as obligation.get shows it and the
// mandate's period.
func oblState(t *testing.T, h *harness, id string) string {
	t.Helper()
	o, err := h.svc.ObligationGet(t.Context(), h.call(), &ObligationRef{ObligationID: id})
	if err != nil {
		return "get: " + code(err) + " " + trnPeriod(t, h)
	}
	return string(o.Status) + " " + trnPeriod(t, h)
}

// oblCount counts the record's entries of type typ about an intent.
func oblCount(t *testing.T, h *harness, typ, intentID string) int {
	t.Helper()
	n := 0
	for e, err := range h.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == typ && e.IntentID == intentID {
			n++
		}
	}
	return n
}

// oblRail returns the rail of the harness by name.
func oblRail(h *harness, rail string) *fake.Rail {
	if rail == railCard {
		return h.card
	}
	return h.wire
}

// oblRailEntries counts the rail's ledger entries of kind under key (the
// intent id), and sums their amounts.
func oblRailEntries(t *testing.T, h *harness, rail string, kind fake.EntryKind, key string) (int, int64) {
	t.Helper()
	entries, err := oblRail(h, rail).Ledger(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n, sum := 0, int64(0)
	for _, e := range entries {
		if e.Kind == kind && e.Key == key {
			n++
			sum += e.Amount
		}
	}
	return n, sum
}

// oblMoneyKind is the rail's ledger entry of the money a settled
// obligation moved: a capture of the card's authorization, a plain
// payment on the wire.
func oblMoneyKind(rail string) fake.EntryKind {
	if rail == railCard {
		return fake.KindCapture
	}
	return fake.KindPayment
}

// oblRailAuth is the rail's authorization status of an intent ("none" on
// a rail that does not authorize).
func oblRailAuth(t *testing.T, h *harness, rail, intentID string) string {
	t.Helper()
	if rail != railCard {
		return "none"
	}
	a, err := h.card.LookupAuthorization(t.Context(), intentID)
	if err != nil {
		return "lookup: " + err.Error()
	}
	return string(a.Status)
}

// oblCreateTypes are the entries of an admitted obligation.create.
func oblCreateTypes(rail string) []string {
	if rail == railCard {
		return []string{"gate.decision", "protocol.obligation.create", "payment.authorized", "protocol.obligation.authorize"}
	}
	return []string{"gate.decision", "payment.authorized", "protocol.obligation.create"}
}

// oblClearTypes are the entries of a clearing that settles (after the
// evidence's own entry, when evidence triggered it).
var oblClearTypes = []string{"payment.capture_requested", "protocol.obligation.clear", "protocol.clearing.attempt", "payment.settled", "protocol.obligation.settle"}

// oblTerms proposes terms between the agent and the fixture's
// counterparty and accepts them with the counterparty's signature.
func oblTerms(t *testing.T, h *harness, body TermsBody) string {
	t.Helper()
	ctx := t.Context()
	tr, err := h.svc.TermsPropose(ctx, h.call(), &TermsProposeRequest{Counterparty: h.ev.cp, Terms: body})
	if err != nil {
		t.Fatal(err)
	}
	b, err := TermsSigningBytes(tr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.TermsAccept(ctx, h.call(), &TermsAcceptRequest{TermsID: tr.ID,
		Signature: base64.RawURLEncoding.EncodeToString(ed25519.Sign(h.ev.cpKey, b))}); err != nil {
		t.Fatal(err)
	}
	return tr.ID
}

// oblStranger is an agent id nobody here knows.
func oblStranger() string {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	return hex.EncodeToString(pub)
}

// TestObligationCreate: an obligation is admitted on both rails (awaiting
// evidence, its amount reserved and, on the card rail, authorized), is
// read back as created, and everything that breaks a rule of
// obligation.create is refused with its problem code and nothing changed.
// A spend the gate denies is recorded and answers *Refused.
func TestObligationCreate(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			termsID := oblTerms(t, h, TermsBody{Payee: "acct:seller.example", Amount: pay.Amount{Minor: 2_500, Currency: "USD"}, Rail: rail,
				Description: "a report", EvidenceFloor: ClassSign, ValidUntil: h.clock.Now().Add(24 * time.Hour)})
			for _, tc := range []struct {
				name string
				req  func() *ObligationCreateRequest
			}{
				{"deadline 59 s ahead", func() *ObligationCreateRequest {
					return oblRequest(h, rail, 2_000, ClassSelf, 59*time.Second, nil)
				}},
				{"deadline in the past", func() *ObligationCreateRequest {
					return oblRequest(h, rail, 2_000, ClassSelf, -time.Minute, nil)
				}},
				{"deadline more than 30 days ahead", func() *ObligationCreateRequest {
					return oblRequest(h, rail, 2_000, ClassSelf, 30*24*time.Hour+time.Second, nil)
				}},
				{"sign floor without a counterparty", func() *ObligationCreateRequest {
					r := oblRequest(h, rail, 2_000, ClassSign, time.Hour, nil)
					r.Counterparty = ""
					return r
				}},
				{"counterparty that is no agent id", func() *ObligationCreateRequest {
					r := oblRequest(h, rail, 2_000, ClassSelf, time.Hour, nil)
					r.Counterparty = "bob"
					return r
				}},
				{"counterparty other than the terms'", func() *ObligationCreateRequest {
					r := oblRequest(h, rail, 2_500, ClassSign, time.Hour, func(in *pay.Instruction) { in.TermsID = termsID })
					r.Counterparty = oblStranger()
					return r
				}},
				{"floor other than the terms'", func() *ObligationCreateRequest {
					return oblRequest(h, rail, 2_500, ClassSelf, time.Hour, func(in *pay.Instruction) { in.TermsID = termsID })
				}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					req := tc.req()
					refusedUnchanged(t, h, CodeObligationInvalid, func() error {
						_, err := h.svc.ObligationCreate(ctx, h.call(), req)
						return err
					})
				})
			}

			for _, tc := range []struct {
				name string
				d    time.Duration
			}{{"deadline exactly 60 s ahead", 60 * time.Second}, {"deadline exactly 30 days ahead", 30 * 24 * time.Hour}} {
				t.Run(tc.name, func(t *testing.T) {
					req := oblRequest(h, rail, 1_000, ClassSelf, tc.d, nil)
					o, err := h.svc.ObligationCreate(ctx, h.call(), req)
					if err != nil || o.Status != ObligationAwaiting || !o.Deadline.Equal(req.Deadline) {
						t.Fatalf("created %+v, %v", o, err)
					}
				})
			}

			t.Run("created and read back", func(t *testing.T) {
				n, period := h.size(), trnPeriod(t, h)
				req := oblRequest(h, rail, 2_000, ClassSign, time.Hour, nil)
				req.Description = "a translated report"
				req.Deadline = req.Deadline.Add(1234 * time.Nanosecond) // kept to the microsecond
				o, err := h.svc.ObligationCreate(ctx, h.call(), req)
				if err != nil {
					t.Fatal(err)
				}
				deadline := req.Deadline.Truncate(time.Microsecond)
				if o.Status != ObligationAwaiting || o.IsAccepted() || o.WasReplayed() || o.Approval != nil ||
					"obl_"+strings.TrimPrefix(o.IntentID, "int_") != o.ObligationID || !strings.HasPrefix(o.IntentID, "int_") ||
					o.Amount != req.Spend.Amount || o.EvidenceFloor != ClassSign || !o.Deadline.Equal(deadline) || o.AuditSeq == 0 {
					t.Errorf("created %+v", o)
				}
				if diff := cmp.Diff(oblCreateTypes(rail), h.typesSince(n)); diff != "" {
					t.Errorf("entries of create (-want +got):\n%s", diff)
				}
				var reserved, settled int64
				if _, err := fmt.Sscanf(period, "reserved=%d settled=%d", &reserved, &settled); err != nil {
					t.Fatal(err)
				}
				if got, want := trnPeriod(t, h), fmt.Sprintf("reserved=%d settled=%d", reserved+2_000, settled); got != want {
					t.Errorf("period %s, want %s", got, want)
				}
				if got, want := oblRailAuth(t, h, rail, o.IntentID), map[string]string{railCard: string(settle.AuthAuthorized), railWire: "none"}[rail]; got != want {
					t.Errorf("rail authorization %s, want %s", got, want)
				}
				got, err := h.svc.ObligationGet(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
				if err != nil {
					t.Fatal(err)
				}
				want := Obligation{ID: o.ObligationID, Status: ObligationAwaiting, IntentID: o.IntentID, Payee: "acct:seller.example",
					Amount: req.Spend.Amount, Rail: rail, EvidenceFloor: ClassSign, Deadline: deadline, Counterparty: h.ev.cp,
					Description: "a translated report", Decision: got.Decision, CreatedAt: h.clock.Now(), UpdatedAt: h.clock.Now(), Entries: got.Entries}
				if diff := cmp.Diff(&want, got); diff != "" {
					t.Errorf("obligation.get (-want +got):\n%s", diff)
				}
				if got.Decision.Outcome != gate.Allow || len(got.Entries) != len(oblCreateTypes(rail)) {
					t.Errorf("decision %+v, entries %v", got.Decision, got.Entries)
				}
			})

			t.Run("denied by the gate", func(t *testing.T) {
				n, period := h.size(), trnPeriod(t, h)
				_, err := h.svc.ObligationCreate(ctx, h.call(), oblRequest(h, rail, 60_000, ClassSelf, time.Hour, nil))
				if code(err) != pay.CodeDenied {
					t.Fatalf("over the per-payment cap: %v, want %s", err, pay.CodeDenied)
				}
				trnWantDenied(t, err, gate.CodePerTxCap)
				if diff := cmp.Diff([]string{"gate.decision", "protocol.obligation.create"}, h.typesSince(n)); diff != "" {
					t.Errorf("entries of a denial (-want +got):\n%s", diff)
				}
				if got := trnPeriod(t, h); got != period {
					t.Errorf("period %s after a denial, want %s", got, period)
				}
			})
		})
	}
}

// TestObligationIdempotency: obligation.create repeated with the same key
// and body answers its first answer, byte for byte, marked replayed, and
// reserves nothing twice, even once the obligation has cleared; the key
// with another body is idempotency.conflict.
func TestObligationIdempotency(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			req := oblRequest(h, rail, 2_000, ClassSelf, time.Hour, nil)
			req.Description = "first"
			first, err := h.svc.ObligationCreate(ctx, h.call(), req)
			if err != nil {
				t.Fatal(err)
			}
			replay := func(t *testing.T) {
				t.Helper()
				before := h.dump()
				again, err := h.svc.ObligationCreate(ctx, h.call(), req)
				if err != nil {
					t.Fatalf("replay: %v", err)
				}
				trnReplay(t, first, again)
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("a replay changed the store:\n%s", diff)
				}
			}
			replay(t)
			for _, tc := range []struct {
				name string
				edit func(*ObligationCreateRequest)
			}{
				{"another description", func(r *ObligationCreateRequest) { r.Description = "second" }},
				{"another floor", func(r *ObligationCreateRequest) { r.EvidenceFloor = ClassAtt }},
				{"another deadline", func(r *ObligationCreateRequest) { r.Deadline = r.Deadline.Add(time.Minute) }},
			} {
				t.Run(tc.name, func(t *testing.T) {
					other := *req
					tc.edit(&other)
					refusedUnchanged(t, h, pay.CodeIdempotencyConflict, func() error {
						_, err := h.svc.ObligationCreate(ctx, h.call(), &other)
						return err
					})
				})
			}
			t.Run("after it cleared", func(t *testing.T) {
				oblMustSubmit(t, h, first.ObligationID, ClassSelf, "done")
				if got := oblState(t, h, first.ObligationID); !strings.HasPrefix(got, string(ObligationSettled)) {
					t.Fatalf("state %s", got)
				}
				replay(t)
			})
		})
	}
}

// TestObligationHeldForApproval: an obligation at or above the mandate's
// confirm threshold waits for a person (202); cancel and clearing are
// refused until then with nothing changed; the approval reserves it (on
// the card rail through the rail's authorization), and it clears as any
// other; a replay of the creating request keeps its first answer.
func TestObligationHeldForApproval(t *testing.T) {
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ctx := t.Context()
			n := h.size()
			req := oblRequest(h, rail, 20_000, ClassSelf, time.Hour, nil)
			o, err := h.svc.ObligationCreate(ctx, h.call(), req)
			if err != nil || o.Status != ObligationPendingApproval || !o.IsAccepted() || o.Approval == nil || o.Amount.Minor != 20_000 {
				t.Fatalf("created %+v, %v", o, err)
			}
			if diff := cmp.Diff([]string{"gate.decision", "protocol.obligation.create"}, h.typesSince(n)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if got := oblState(t, h, o.ObligationID); got != "pending_approval reserved=20000 settled=0" {
				t.Errorf("state %s", got)
			}
			for _, tc := range []struct {
				name string
				run  func() error
			}{
				{"cancel", func() error {
					_, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
					return err
				}},
				{"clearing.attempt", func() error {
					_, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
					return err
				}},
			} {
				t.Run(tc.name+" before approval", func(t *testing.T) { refusedUnchanged(t, h, CodeObligationNotReady, tc.run) })
			}
			st, err := h.svc.ClearingStatus(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
			if err != nil || st.Status != ClearingPendingApproval || st.Problem != nil {
				t.Errorf("clearing.status before approval: %+v, %v", st, err)
			}
			n = h.size()
			res, err := trnApprove(t, h, o.IntentID, o.Approval)
			if err != nil || res.Outcome != pay.OutcomeAuthorized {
				t.Fatalf("approve = %+v, %v", res, err)
			}
			want := []string{"approval.granted", "payment.authorized", "protocol.obligation.approve"}
			if rail == railCard {
				want = []string{"approval.granted", "protocol.obligation.approve", "payment.authorized", "protocol.obligation.authorize"}
			}
			if diff := cmp.Diff(want, h.typesSince(n)); diff != "" {
				t.Errorf("entries of the approval (-want +got):\n%s", diff)
			}
			if got := oblState(t, h, o.ObligationID); got != "awaiting_evidence reserved=20000 settled=0" {
				t.Errorf("state after approval %s", got)
			}
			again, err := h.svc.ObligationCreate(ctx, h.call(), req)
			if err != nil || !again.WasReplayed() || again.Status != ObligationPendingApproval {
				t.Errorf("replay = %+v, %v", again, err)
			}
			n = h.size()
			sub := oblMustSubmit(t, h, o.ObligationID, ClassSelf, "done")
			if sub.Clearing.Status != ClearingCleared || sub.Clearing.Receipt == nil || sub.Clearing.Receipt.Amount.Minor != 20_000 {
				t.Errorf("clearing %+v", sub.Clearing)
			}
			if diff := cmp.Diff(append([]string{"protocol.evidence.submit"}, oblClearTypes...), h.typesSince(n)); diff != "" {
				t.Errorf("entries of the clearing (-want +got):\n%s", diff)
			}
			if got := oblState(t, h, o.ObligationID); got != "settled reserved=0 settled=20000" {
				t.Errorf("state after clearing %s", got)
			}
		})
	}
}

// TestObligationCancel: an obligation awaiting evidence is cancelled
// (nothing paid, the reservation back, the rail's authorization voided);
// every other state refuses with its own code and changes nothing — not
// even at the rail.
func TestObligationCancel(t *testing.T) {
	cancel := func(h *harness, call Call, id string) error {
		_, err := h.svc.ObligationCancel(h.t.Context(), call, &ObligationRef{ObligationID: id})
		return err
	}
	for _, rail := range []string{railCard, railWire} {
		t.Run(rail, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				setup func(t *testing.T, h *harness) (string, Call)
				want  string
			}{
				{"with evidence below the floor", func(t *testing.T, h *harness) (string, Call) {
					o := oblCreate(t, h, rail, 2_000, ClassSign)
					oblMustSubmit(t, h, o.ObligationID, ClassSelf, "started")
					return o.ObligationID, h.call()
				}, CodeObligationEvidence},
				{"cleared", func(t *testing.T, h *harness) (string, Call) {
					return oblCleared(t, h, rail, 2_000).ObligationID, h.call()
				}, CodeObligationCleared},
				{"held for approval", func(t *testing.T, h *harness) (string, Call) {
					return oblCreate(t, h, rail, 20_000, ClassSelf).ObligationID, h.call()
				}, CodeObligationNotReady},
				{"past its deadline, not yet swept", func(t *testing.T, h *harness) (string, Call) {
					o := oblCreate(t, h, rail, 2_000, ClassSelf)
					h.clock.Add(time.Hour)
					return o.ObligationID, h.call()
				}, CodeDeadlinePassed},
				{"expired by the sweep", func(t *testing.T, h *harness) (string, Call) {
					o := oblCreate(t, h, rail, 2_000, ClassSelf)
					h.clock.Add(time.Hour)
					if rep, err := h.svc.Sweep(t.Context()); err != nil || rep.HoldsExpired != 1 {
						t.Fatalf("sweep %+v, %v", rep, err)
					}
					return o.ObligationID, h.call()
				}, CodeDeadlinePassed},
				{"denied", func(t *testing.T, h *harness) (string, Call) {
					_, err := h.svc.ObligationCreate(t.Context(), h.call(), oblRequest(h, rail, 60_000, ClassSelf, time.Hour, nil))
					var r *Refused
					if !errors.As(err, &r) {
						t.Fatalf("want a denial: %v", err)
					}
					id, _ := prefixID(r.Result.IntentID, "int_", "obl_")
					return id, h.call()
				}, CodeObligationClosed},
				{"another agent key's", func(t *testing.T, h *harness) (string, Call) {
					return oblCreate(t, h, rail, 2_000, ClassSelf).ObligationID, trnOtherKey(h)
				}, CodeObligationNotFound},
				{"unknown", func(t *testing.T, h *harness) (string, Call) {
					return "obl_01JZZZZZZZZZZZZZZZZZZZZZZZ", h.call()
				}, CodeObligationNotFound},
				{"a hold, not an obligation", func(t *testing.T, h *harness) (string, Call) {
					p, err := h.svc.HoldPlace(t.Context(), h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", rail, 1_000, nil), TTLSeconds: 3600})
					if err != nil {
						t.Fatal(err)
					}
					id, _ := prefixID(p.IntentID, "int_", "obl_")
					return id, h.call()
				}, CodeObligationNotFound},
			} {
				t.Run(tc.name, func(t *testing.T) {
					h := newHarness(t, harnessConfig{})
					id, call := tc.setup(t, h)
					refusedUnchanged(t, h, tc.want, func() error { return cancel(h, call, id) })
				})
			}

			t.Run("refused with evidence, then cleared", func(t *testing.T) {
				// The refusal must not touch the rail's authorization: the
				// counterparty is performing and is paid when it clears.
				h := newHarness(t, harnessConfig{})
				o := oblCreate(t, h, rail, 2_000, ClassSign)
				oblMustSubmit(t, h, o.ObligationID, ClassSelf, "started")
				if err := cancel(h, h.call(), o.ObligationID); code(err) != CodeObligationEvidence {
					t.Fatalf("cancel: %v", err)
				}
				if got, want := oblRailAuth(t, h, rail, o.IntentID), map[string]string{railCard: string(settle.AuthAuthorized), railWire: "none"}[rail]; got != want {
					t.Errorf("rail authorization after a refused cancel: %s, want %s", got, want)
				}
				sub := oblMustSubmit(t, h, o.ObligationID, ClassSign, "delivered")
				if sub.Clearing.Status != ClearingCleared {
					t.Errorf("clearing after a refused cancel: status %s, want cleared", sub.Clearing.Status)
				}
				if got := oblState(t, h, o.ObligationID); got != "settled reserved=0 settled=2000" {
					t.Errorf("state %s", got)
				}
			})

			t.Run("cancelled", func(t *testing.T) {
				h := newHarness(t, harnessConfig{})
				ctx := t.Context()
				o := oblCreate(t, h, rail, 2_000, ClassSelf)
				trnRun(t, h, []trnStep{
					{name: "cancel", do: func(t *testing.T) (string, error) {
						got, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
						if err == nil && (got.Status != ObligationCancelled || got.Receipt != nil || len(got.Entries) != len(oblCreateTypes(rail))+2) {
							t.Errorf("cancelled %+v", got)
						}
						return oblState(t, h, o.ObligationID) + " rail=" + oblRailAuth(t, h, rail, o.IntentID), err
					}, state: "cancelled reserved=0 settled=0 rail=" + map[string]string{railCard: string(settle.AuthVoided), railWire: "none"}[rail],
						types: []string{"payment.voided", "protocol.obligation.cancel"}},
					{name: "cancel twice", do: func(t *testing.T) (string, error) {
						_, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
						return oblState(t, h, o.ObligationID), err
					}, code: CodeObligationCancelled, state: "cancelled reserved=0 settled=0"},
					{name: "clearing.attempt", do: func(t *testing.T) (string, error) {
						_, err := h.svc.ClearingAttempt(ctx, h.call(), &ObligationRef{ObligationID: o.ObligationID})
						return oblState(t, h, o.ObligationID), err
					}, code: CodeObligationCancelled, state: "cancelled reserved=0 settled=0"},
					{name: "the reservation is usable again", do: func(t *testing.T) (string, error) {
						// The whole period cap less what is left: a spend of
						// exactly what remains is admitted.
						v, err := h.svc.MandateGet(ctx, h.call(), &MandateRef{MandateID: h.claims.ID})
						if err != nil {
							t.Fatal(err)
						}
						if v.Period.RemainingMinor != h.claims.PerPeriodCapMinor {
							t.Errorf("remaining %d, want the whole cap %d", v.Period.RemainingMinor, h.claims.PerPeriodCapMinor)
						}
						return oblState(t, h, o.ObligationID), nil
					}, state: "cancelled reserved=0 settled=0", same: true},
				}, nil)
			})
		})
	}
}

// TestObligationGetList: obligation.list pages the caller's obligations
// oldest first, by status, with the same view obligation.get gives; a
// caller with another agent key sees none of them.
func TestObligationGetList(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	a := oblCreate(t, h, railCard, 1_000, ClassSelf)
	b := oblCleared(t, h, railWire, 2_000)
	c := oblCreate(t, h, railCard, 3_000, ClassSelf)
	if _, err := h.svc.ObligationCancel(ctx, h.call(), &ObligationRef{ObligationID: c.ObligationID}); err != nil {
		t.Fatal(err)
	}
	d := oblCreate(t, h, railWire, 4_000, ClassSelf)
	e := oblCreate(t, h, railCard, 20_000, ClassSelf)
	all := []string{a.ObligationID, b.ObligationID, c.ObligationID, d.ObligationID, e.ObligationID}
	status := map[string]ObligationStatus{a.ObligationID: ObligationAwaiting, b.ObligationID: ObligationSettled, c.ObligationID: ObligationCancelled,
		d.ObligationID: ObligationAwaiting, e.ObligationID: ObligationPendingApproval}

	// list walks every page of a listing, checking each against get.
	list := func(t *testing.T, call Call, st ObligationStatus, limit int) ([]string, int) {
		t.Helper()
		var got []string
		pages, cursor := 0, ""
		for {
			p, err := h.svc.ObligationList(ctx, call, &ObligationListRequest{Status: st, Cursor: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(p.Obligations) > limit {
				t.Errorf("page of %d, limit %d", len(p.Obligations), limit)
			}
			for _, o := range p.Obligations {
				got = append(got, o.ID)
				one, err := h.svc.ObligationGet(ctx, call, &ObligationRef{ObligationID: o.ID})
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(one, &o); diff != "" {
					t.Errorf("list and get disagree on %s (-get +list):\n%s", o.ID, diff)
				}
				if o.Status != status[o.ID] || len(o.Entries) == 0 {
					t.Errorf("%s: status %s, entries %v; want %s", o.ID, o.Status, o.Entries, status[o.ID])
				}
			}
			if p.NextCursor == "" {
				return got, pages
			}
			cursor = p.NextCursor
		}
	}
	for _, tc := range []struct {
		status ObligationStatus
		limit  int
		want   []string
	}{
		{"", 2, all},
		{"", 5, all},
		{"", 100, all},
		{ObligationAwaiting, 1, []string{a.ObligationID, d.ObligationID}},
		{ObligationSettled, 20, []string{b.ObligationID}},
		{ObligationCancelled, 20, []string{c.ObligationID}},
		{ObligationPendingApproval, 20, []string{e.ObligationID}},
		{ObligationExpired, 20, nil},
	} {
		t.Run(fmt.Sprintf("status %q limit %d", tc.status, tc.limit), func(t *testing.T) {
			got, pages := list(t, h.call(), tc.status, tc.limit)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("listed (-want +got):\n%s", diff)
			}
			if tc.status == "" && pages != (len(all)+tc.limit-1)/tc.limit {
				t.Errorf("%d pages of %d, want %d", pages, tc.limit, (len(all)+tc.limit-1)/tc.limit)
			}
		})
	}
	t.Run("another agent key", func(t *testing.T) {
		if got, _ := list(t, trnOtherKey(h), "", 20); len(got) != 0 {
			t.Errorf("another key lists %v", got)
		}
		for _, id := range all {
			refusedUnchanged(t, h, CodeObligationNotFound, func() error {
				_, err := h.svc.ObligationGet(ctx, trnOtherKey(h), &ObligationRef{ObligationID: id})
				return err
			})
		}
	})
	t.Run("ids that name no obligation", func(t *testing.T) {
		for _, id := range []string{"", "obl_", "int_" + strings.TrimPrefix(a.ObligationID, "obl_"), "hold_" + strings.TrimPrefix(a.ObligationID, "obl_"), "obl_nope"} {
			refusedUnchanged(t, h, CodeObligationNotFound, func() error {
				_, err := h.svc.ObligationGet(ctx, h.call(), &ObligationRef{ObligationID: id})
				return err
			})
		}
	})
	t.Run("a settled obligation's receipt", func(t *testing.T) {
		o, err := h.svc.ObligationGet(ctx, h.call(), &ObligationRef{ObligationID: b.ObligationID})
		if err != nil || o.Receipt == nil || o.Receipt.Amount.Minor != 2_000 {
			t.Errorf("get %+v, %v", o, err)
		}
	})
}
