package durability

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/webhook"
)

// report is what a check found, by kind, so that a test can assert on one
// kind (the broken-sync test wants lost payments) and print the rest.
type report struct {
	lost       []string // an acknowledged payment, approval or refund that is gone or went back
	double     []string // money moved twice, or the books and the rail disagree
	breaks     []string // the record does not verify
	unresolved []string // an intent the reconciler could not finish
	webhooks   []string // a delivery lost
	other      []string // the server could not be opened, or does not work after
	// intents and entries say how much state the check looked at.
	intents, entries int
}

func (r *report) add(list *[]string, format string, args ...any) {
	if len(*list) < 20 { // the first ones tell the story
		*list = append(*list, fmt.Sprintf(format, args...))
	}
}

func (r *report) ok() bool {
	return len(r.lost)+len(r.double)+len(r.breaks)+len(r.unresolved)+len(r.webhooks)+len(r.other) == 0
}

func (r *report) String() string {
	var b strings.Builder
	for _, k := range []struct {
		name string
		list []string
	}{
		{"LOST (acknowledged, then gone)", r.lost},
		{"SETTLED TWICE / BOOKS DISAGREE", r.double},
		{"RECORD BREAK", r.breaks},
		{"UNRESOLVED INTENT", r.unresolved},
		{"WEBHOOK DELIVERY LOST", r.webhooks},
		{"OTHER", r.other},
	} {
		for _, s := range k.list {
			fmt.Fprintf(&b, "\n  %s: %s", k.name, s)
		}
	}
	return b.String()
}

// settledFamily are the statuses of an intent whose money moved.
func settledFamily(s pay.Status) bool {
	return s == pay.StatusSettled || s == pay.StatusPartiallyRefunded || s == pay.StatusRefunded
}

// expectation is what a check holds a recovered server to.
type expectation struct {
	acks ackSnap
	// replay says which acknowledged payments (by index in acks.pays) are
	// replayed through the idempotency layer; nil replays every one. Every
	// one is checked against the stored intent either way.
	replay map[int]bool
	// delivered are the event ids a read of the store showed delivered
	// before the cut; endpoint is the webhook endpoint ("" for none) and
	// after the seq of its creation entry.
	delivered map[string]bool
	endpoint  string
	after     uint64
	// seen is the newest record entry a read showed before the cut
	// (zero Seq for none): reads show only durable data, so it survives.
	seen audit.Entry
}

// recoverAndCheck opens a server over fs as a restart would (store,
// record, rail, payment service, reconciler, webhook dispatcher) and checks
// it against what was acknowledged before fs was cut. It leaves fs's world
// closed.
func recoverAndCheck(ctx context.Context, fs vfs.FS, id *identity, clk *clock, exp expectation, o worldOptions) *report {
	r := &report{}
	o.rail = fake.Options{} // no faults: the recovered rail answers
	w, err := openWorld(ctx, fs, id, clk, o)
	if err != nil {
		r.add(&r.other, "reopen: %v", err)
		return r
	}
	defer w.close()

	// The record, at full depth, from entry 1 to the head.
	size, err := w.log.Size(ctx)
	if err != nil {
		r.add(&r.other, "record size: %v", err)
		return r
	}
	r.entries = int(size)
	if size > 0 {
		if err := w.log.Verify(ctx, 1, size, audit.Full, nil); err != nil {
			r.add(&r.breaks, "verify 1..%d: %v", size, err)
		}
	}
	if exp.seen.Seq > 0 {
		if e, err := w.log.Get(ctx, exp.seen.Seq); err != nil || e.Hash != exp.seen.Hash {
			r.add(&r.lost, "a read showed entry %d (%s %s) before the cut; the recovered record has %d entries and at %d %s, %v",
				exp.seen.Seq, exp.seen.Type, exp.seen.Hash, size, exp.seen.Seq, e.Hash, err)
		}
	}

	// The reconciler finishes what was left settling or refunding.
	rep, err := w.svc.Reconcile(ctx)
	if err != nil {
		r.add(&r.unresolved, "reconcile: %v", err)
	} else if rep.StillSettling > 0 || rep.RefundsPending > 0 {
		r.add(&r.unresolved, "reconcile left %d settling and %d refunds pending: %+v", rep.StillSettling, rep.RefundsPending, rep)
	}

	intents, err := allIntents(ctx, w.st)
	if err != nil {
		r.add(&r.other, "read intents: %v", err)
		return r
	}
	r.intents = len(intents)
	checkBooks(ctx, r, w, intents)
	checkAcks(ctx, r, w, id, intents, exp)
	if o.webhooks {
		checkWebhooks(ctx, r, w, exp)
	}

	// The recovered server takes a new payment.
	body, err := id.instruction(fmt.Sprintf("after-recovery-%d", clk.ticks.Load()), 123)
	if err != nil {
		r.add(&r.other, "sign: %v", err)
		return r
	}
	res, err := w.svc.Pay(ctx, id.caller, body, "", "req_after")
	if err != nil || res.Outcome != pay.OutcomeSettled {
		r.add(&r.other, "a new payment after recovery: %+v, %v", res, err)
	}
	return r
}

// allIntents reads every intent (the layout is DESIGN §4's pay/intent/<id>).
func allIntents(ctx context.Context, st store.Store) (map[string]*pay.Intent, error) {
	out := map[string]*pay.Intent{}
	err := st.View(ctx, func(rd store.Reader) error {
		prefix := []byte("pay/intent/")
		var ids []string
		it := rd.Iterate(prefix, store.PrefixEnd(prefix), false)
		for it.Next() {
			ids = append(ids, string(it.Key()[len(prefix):]))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, id := range ids {
			in, err := pay.GetIntent(rd, id)
			if err != nil {
				return fmt.Errorf("intent %s: %w", id, err)
			}
			out[id] = in
		}
		return nil
	})
	return out, err
}

// checkBooks holds every intent against the rail and the rail against
// every intent: nothing settled twice, nothing settled that the books do
// not know, nothing left half-done.
func checkBooks(ctx context.Context, r *report, w *world, intents map[string]*pay.Intent) {
	entries, err := w.rail.Ledger(ctx)
	if err != nil {
		r.add(&r.other, "rail ledger: %v", err)
		return
	}
	if err := w.rail.CheckLedger(ctx); err != nil {
		r.add(&r.double, "rail ledger invariants: %v", err)
	}
	if err := w.st.View(ctx, ledger.Check); err != nil {
		r.add(&r.double, "custody books: %v", err)
	}
	payments := map[string]fake.LedgerEntry{}
	refunds := map[string]map[string]int64{} // payment key → refund id → amount
	for _, e := range entries {
		switch e.Kind {
		case fake.KindPayment:
			if _, dup := payments[e.Key]; dup {
				r.add(&r.double, "rail paid key %s twice", e.Key)
			}
			payments[e.Key] = e
		case fake.KindRefund:
			if refunds[e.Key] == nil {
				refunds[e.Key] = map[string]int64{}
			}
			if _, dup := refunds[e.Key][e.RefundID]; dup {
				r.add(&r.double, "rail refunded %s twice under %s", e.Key, e.RefundID)
			}
			refunds[e.Key][e.RefundID] = e.Amount
		}
	}
	byKey := map[string]string{}
	for id, in := range intents {
		k := string(in.Route) + "/" + in.AgentKeyID + "/" + in.IdempotencyKey
		if other, dup := byKey[k]; dup {
			r.add(&r.double, "idempotency key %q has two intents, %s and %s", in.IdempotencyKey, other, id)
		}
		byKey[k] = id
		p, moved := payments[id]
		moved = moved && p.Status == settle.StatusSettled
		switch {
		case in.Status == pay.StatusSettling:
			r.add(&r.unresolved, "intent %s (%s) still settling after the reconciler: %+v", id, in.IdempotencyKey, in.UnknownOutcome)
		case in.PendingRefund != nil:
			r.add(&r.unresolved, "intent %s still has refund %s pending after the reconciler", id, in.PendingRefund.ID)
		case settledFamily(in.Status):
			if !moved {
				r.add(&r.double, "intent %s is %s but the rail shows %+v", id, in.Status, p)
				continue
			}
			if p.Amount != in.Amount.Minor || p.Currency != in.Amount.Currency {
				r.add(&r.double, "intent %s settled %d %s, the rail %d %s", id, in.Amount.Minor, in.Amount.Currency, p.Amount, p.Currency)
			}
			if in.Receipt == nil || in.Receipt.Reference != p.Reference {
				r.add(&r.double, "intent %s receipt %+v does not name the rail's reference %s", id, in.Receipt, p.Reference)
			}
			var sum int64
			for _, rf := range in.Refunds {
				got, ok := refunds[id][rf.ID]
				if !ok || got != rf.Minor {
					r.add(&r.double, "intent %s refund %s of %d: the rail shows %d (present %v)", id, rf.ID, rf.Minor, got, ok)
				}
				sum += rf.Minor
			}
			if sum != in.RefundedMinor || len(in.Refunds) != len(refunds[id]) {
				r.add(&r.double, "intent %s: refunded %d in %d refunds, listed %d; the rail has %d refunds",
					id, in.RefundedMinor, len(in.Refunds), sum, len(refunds[id]))
			}
		default: // pending_approval, denied, failed, expired: no money moved
			if moved {
				r.add(&r.double, "intent %s is %s but the rail settled it: %+v", id, in.Status, p)
			}
		}
	}
	for key, p := range payments {
		if _, ok := intents[key]; !ok {
			r.add(&r.double, "the rail has a %s payment under %s that no intent knows: %+v", p.Status, key, p)
		}
	}
}

// checkAcks holds the recovered server to every acknowledged outcome.
func checkAcks(ctx context.Context, r *report, w *world, id *identity, intents map[string]*pay.Intent, exp expectation) {
	acks := exp.acks
	for i, a := range acks.pays {
		in := intents[a.res.IntentID]
		if in == nil {
			r.add(&r.lost, "payment %s (%s, %s) is gone", a.key, a.res.IntentID, a.res.Outcome)
			continue
		}
		switch a.res.Outcome {
		case pay.OutcomeSettled:
			rc := a.res.Receipt
			if !settledFamily(in.Status) {
				r.add(&r.lost, "payment %s (%s) was settled, is %s", a.key, in.ID, in.Status)
				continue
			}
			if in.Receipt == nil || in.Receipt.ID != rc.ID || in.Receipt.AuditSeq != rc.AuditSeq || in.Receipt.AuditHash != rc.AuditHash {
				r.add(&r.lost, "payment %s (%s): receipt %+v, acknowledged %+v", a.key, in.ID, in.Receipt, rc)
			}
			e, err := w.log.Get(ctx, rc.AuditSeq)
			if err != nil || e.Hash != rc.AuditHash || e.Type != "payment.settled" || e.IntentID != in.ID {
				r.add(&r.lost, "payment %s (%s): the receipt's entry %d is %s %s %s, %v", a.key, in.ID, rc.AuditSeq, e.Type, e.IntentID, e.Hash, err)
			}
		case pay.OutcomeHeld:
			if in.Status != pay.StatusPendingApproval && !settledFamily(in.Status) && in.Status != pay.StatusFailed {
				r.add(&r.lost, "held payment %s (%s) is %s", a.key, in.ID, in.Status)
			}
		}
		if exp.replay != nil && !exp.replay[i] {
			continue
		}
		res, err := w.svc.Pay(ctx, id.caller, a.body, "", "req_replay")
		switch {
		case err != nil:
			r.add(&r.lost, "replay of %s: %v", a.key, err)
		case !res.Replayed || res.Outcome != a.res.Outcome || res.IntentID != a.res.IntentID:
			r.add(&r.lost, "replay of %s: %s %s (replayed %v), acknowledged %s %s", a.key, res.Outcome, res.IntentID, res.Replayed, a.res.Outcome, a.res.IntentID)
		case a.res.Outcome == pay.OutcomeSettled && (res.Receipt == nil || res.Receipt.ID != a.res.Receipt.ID || res.Receipt.AuditSeq != a.res.Receipt.AuditSeq):
			r.add(&r.lost, "replay of %s: receipt %+v, acknowledged %+v", a.key, res.Receipt, a.res.Receipt)
		}
	}
	for _, a := range acks.approvals {
		in := intents[a.intentID]
		switch {
		case in == nil:
			r.add(&r.lost, "approved payment %s is gone", a.intentID)
		case !settledFamily(in.Status):
			r.add(&r.lost, "approved payment %s was settled, is %s", a.intentID, in.Status)
		case in.Receipt == nil || in.Receipt.ID != a.receipt.ID:
			r.add(&r.lost, "approved payment %s: receipt %+v, acknowledged %+v", a.intentID, in.Receipt, a.receipt)
		case in.Approval == nil || len(in.Approval.Received) == 0:
			r.add(&r.lost, "approved payment %s carries no approval: %+v", a.intentID, in.Approval)
		}
	}
	for _, a := range acks.refunds {
		in := intents[a.intentID]
		if in == nil {
			r.add(&r.lost, "refunded payment %s is gone", a.intentID)
			continue
		}
		found := false
		for _, rf := range in.Refunds {
			if rf.ID == a.res.RefundID {
				found = rf.Minor == a.minor
			}
		}
		if !found || in.RefundedMinor < a.res.RefundedMinor {
			r.add(&r.lost, "refund %s of %d on %s: the intent has %+v, refunded %d (acknowledged %d)",
				a.res.RefundID, a.minor, a.intentID, in.Refunds, in.RefundedMinor, a.res.RefundedMinor)
		}
	}
}

// checkWebhooks catches the recovered dispatcher up and holds it to what
// was delivered before the cut, and to delivering every payment.settled
// entry of the record.
func checkWebhooks(ctx context.Context, r *report, w *world, exp expectation) {
	if exp.endpoint == "" {
		return
	}
	if _, err := w.eps.Get(ctx, exp.endpoint); err != nil {
		r.add(&r.webhooks, "endpoint %s: %v", exp.endpoint, err)
		return
	}
	for range 20 {
		n, err := w.disp.Tick(ctx)
		if err != nil {
			r.add(&r.webhooks, "tick: %v", err)
			return
		}
		if n == 0 {
			break
		}
	}
	got, err := deliveries(ctx, w, exp.endpoint)
	if err != nil {
		r.add(&r.webhooks, "deliveries: %v", err)
		return
	}
	for ev := range exp.delivered {
		if got[ev] != "delivered" {
			r.add(&r.webhooks, "%s was delivered before the cut, is %q", ev, got[ev])
		}
	}
	for e, err := range w.log.Entries(ctx, exp.after+1, 0) {
		if err != nil {
			if !errors.Is(err, audit.ErrOutOfRange) {
				r.add(&r.webhooks, "entries: %v", err)
			}
			break
		}
		if e.Type != "payment.settled" {
			continue
		}
		if ev := webhook.EventID(e.Seq, "payment.settled"); got[ev] != "delivered" {
			r.add(&r.webhooks, "%s (intent %s) is %q after the dispatcher caught up", ev, e.IntentID, got[ev])
		}
	}
}

// deliveries lists an endpoint's deliveries: event id → state.
func deliveries(ctx context.Context, w *world, ep string) (map[string]string, error) {
	out := map[string]string{}
	cursor := ""
	for {
		p, err := w.disp.Deliveries(ctx, ep, cursor, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range p.Data {
			out[d.EventID] = d.State
		}
		if !p.HasMore || p.NextCursor == nil {
			return out, nil
		}
		cursor = *p.NextCursor
	}
}
