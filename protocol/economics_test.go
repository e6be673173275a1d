package protocol

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle/fake"
)

// ecoDeclineCard makes the card rail decline anything above 9,000: an
// allowed payment of more fails at the rail.
func ecoDeclineCard(o *fake.Options) { o.DeclineAbove = 9_000 }

func ecoRefund(h *harness, intentID string, minor int64) {
	h.t.Helper()
	_, err := h.pay.Refund(h.t.Context(), pay.RefundRequest{IntentID: intentID, AmountMinor: &minor, Rationale: "customer returned it"},
		pay.OperatorCall{Operator: "op-test", RequestID: "req_refund", Rationale: "customer returned it"})
	if err != nil {
		h.t.Fatalf("refund %d of %s: %v", minor, intentID, err)
	}
}

// TestEconomicsSummaryGroups checks each grouping on a small known mix.
func TestEconomicsSummaryGroups(t *testing.T) {
	h := newHarness(t, harnessConfig{card: ecoDeclineCard})
	ctx := t.Context()
	second := mdtExtra(h, "mdt-2", nil)
	mdtMustPay(h, railWire, 700, pay.OutcomeSettled, nil) // before since: not counted
	h.clock.Add(time.Minute)
	since := h.clock.Now()
	other := func(in *pay.Instruction) { in.Payee = "acct:other.example" }

	h.caller.Tags = []string{"team-a"}
	mdtMustPay(h, railWire, 3_000, pay.OutcomeSettled, nil)
	h.caller.Tags = []string{"team-a", "team-b"}
	card := mdtMustPay(h, railCard, 2_000, pay.OutcomeSettled, other)
	ecoRefund(h, card.IntentID, 500)
	h.caller.Tags = nil
	mdtMustPay(h, railWire, 60_000, pay.OutcomeDenied, nil)
	mdtMustPay(h, railCard, 9_500, pay.OutcomeFailed, nil)
	h.caller.Tags = []string{"team-b"}
	mdtMustPay(h, railWire, 20_000, pay.OutcomeHeld, nil)
	h.caller.Tags = []string{"team-a"}
	hold, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railWire, 5_000, func(in *pay.Instruction) {
		in.Payee, in.Envelope.Mandate = "acct:other.example", second
	}), TTLSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: hold.HoldID, AmountMinor: 3_000, IdempotencyKey: "cap"}); err != nil {
		t.Fatal(err)
	}
	ovsPayWithKey(h, ovsSecondKey(h), 4_000) // another agent key's: not counted
	until := h.clock.Now().Add(time.Second)

	usd := func(g EconomicsGroup) EconomicsGroup { g.Currency = "USD"; return g }
	for _, tc := range []struct {
		groupBy string
		want    []EconomicsGroup
	}{
		{"payee", []EconomicsGroup{
			usd(EconomicsGroup{Key: "acct:other.example", Intents: 2, SettledMinor: 5_000, RefundedMinor: 500}),
			usd(EconomicsGroup{Key: "acct:seller.example", Intents: 4, SettledMinor: 3_000, HeldMinor: 20_000, Denied: 1, DeniedMinor: 60_000, Failed: 1}),
		}},
		{"rail", []EconomicsGroup{
			usd(EconomicsGroup{Key: railCard, Intents: 2, SettledMinor: 2_000, RefundedMinor: 500, Failed: 1}),
			usd(EconomicsGroup{Key: railWire, Intents: 4, SettledMinor: 6_000, HeldMinor: 20_000, Denied: 1, DeniedMinor: 60_000}),
		}},
		{"mandate", []EconomicsGroup{
			usd(EconomicsGroup{Key: "mdt-1", Intents: 5, SettledMinor: 5_000, RefundedMinor: 500, HeldMinor: 20_000, Denied: 1, DeniedMinor: 60_000, Failed: 1}),
			usd(EconomicsGroup{Key: "mdt-2", Intents: 1, SettledMinor: 3_000}),
		}},
		{"tag", []EconomicsGroup{
			usd(EconomicsGroup{Key: "", Intents: 2, Denied: 1, DeniedMinor: 60_000, Failed: 1}),
			usd(EconomicsGroup{Key: "team-a", Intents: 3, SettledMinor: 8_000, RefundedMinor: 500}),
			usd(EconomicsGroup{Key: "team-b", Intents: 2, SettledMinor: 2_000, RefundedMinor: 500, HeldMinor: 20_000}),
		}},
	} {
		t.Run(tc.groupBy, func(t *testing.T) {
			got, err := h.svc.EconomicsSummaryGet(ctx, h.call(), &EconomicsSummaryRequest{Since: since, Until: until, GroupBy: tc.groupBy})
			if err != nil {
				t.Fatal(err)
			}
			want := &EconomicsSummary{Since: since, Until: until, GroupBy: tc.groupBy, Groups: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}

	empty, err := h.svc.EconomicsSummaryGet(ctx, h.call(), &EconomicsSummaryRequest{Since: until, Until: until.Add(time.Hour), GroupBy: "payee"})
	if err != nil || empty.Groups == nil || len(empty.Groups) != 0 {
		t.Errorf("an empty window = %+v, %v", empty, err)
	}
	for _, tc := range []struct {
		name         string
		since, until time.Time
	}{
		{"until before since", until, since},
		{"empty window", since, since},
		{"longer than 366 days", since, since.Add(367 * 24 * time.Hour)},
	} {
		if _, err := h.svc.EconomicsSummaryGet(ctx, h.call(), &EconomicsSummaryRequest{Since: tc.since, Until: tc.until, GroupBy: "payee"}); code(err) != "request.validation" {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestEconomicsBudget reports burn rate and when the cap would be
// reached at that rate, if within the period.
func TestEconomicsBudget(t *testing.T) {
	h := newHarness(t, harnessConfig{claims: func(c *pay.MandateClaims) { c.PerPeriodCapMinor = 100_000 }})
	ctx := t.Context()
	second := mdtExtra(h, "mdt-2", func(c *pay.MandateClaims) { c.PerPeriodCapMinor = 1_000_000 })
	idle := mdtExtra(h, "mdt-3", nil)
	mdtRemember(h, idle)
	mdtMustPay(h, railWire, 40_000, pay.OutcomeHeld, nil)
	mdtMustPay(h, railWire, 5_000, pay.OutcomeSettled, nil)
	mdtMustPay(h, railCard, 5_000, pay.OutcomeSettled, nil)
	mdtMustPay(h, railWire, 60_000, pay.OutcomeDenied, nil)
	mdtMustPay(h, railWire, 9_999, pay.OutcomeSettled, func(in *pay.Instruction) { in.Envelope.Mandate = second })
	mdtMustPay(h, railWire, 1, pay.OutcomeSettled, func(in *pay.Instruction) { in.Envelope.Mandate = second })

	// 10:00, ten hours into the day.
	start := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	end := start.Add(24 * time.Hour)
	at := time.Date(2026, 11, 23, 20, 0, 0, 0, time.UTC)
	want := map[string]MandateBudget{
		// 50,000 in 10 h: 5,000/h; the 50,000 left last 10 h more.
		"mdt-1": {MandateID: "mdt-1", Currency: "USD", PeriodStart: start, PeriodEnd: end, CapMinor: 100_000, CountedMinor: 50_000,
			RemainingMinor: 50_000, BurnPerHourMinor: 5_000, ProjectedExhaustion: &at},
		// 10,000 in 10 h: the cap is 990 h away, past the period.
		"mdt-2": {MandateID: "mdt-2", Currency: "USD", PeriodStart: start, PeriodEnd: end, CapMinor: 1_000_000, CountedMinor: 10_000,
			RemainingMinor: 990_000, BurnPerHourMinor: 1_000},
		"mdt-3": {MandateID: "mdt-3", Currency: "USD", PeriodStart: start, PeriodEnd: end, CapMinor: 100_000, RemainingMinor: 100_000},
	}
	for _, tc := range []struct {
		mandate string
		want    []string
		code    string
	}{
		{"", []string{"mdt-1", "mdt-2", "mdt-3"}, ""},
		{"mdt-1", []string{"mdt-1"}, ""},
		{"mdt-2", []string{"mdt-2"}, ""},
		{"mdt-nope", nil, CodeMandateNotFound},
	} {
		t.Run(tc.mandate, func(t *testing.T) {
			got, err := h.svc.EconomicsBudgetGet(ctx, h.call(), &EconomicsBudgetRequest{MandateID: tc.mandate})
			if code(err) != tc.code {
				t.Fatalf("code %q, want %q", code(err), tc.code)
			}
			if err != nil {
				return
			}
			w := &EconomicsBudget{Mandates: []MandateBudget{}}
			for _, id := range tc.want {
				w.Mandates = append(w.Mandates, want[id])
			}
			if diff := cmp.Diff(w, got); diff != "" {
				t.Errorf("budget (-want +got):\n%s", diff)
			}
		})
	}
	// At the very start of a period nothing is burnt yet.
	h.clock.Add(14 * time.Hour)
	got, err := h.svc.EconomicsBudgetGet(ctx, h.call(), &EconomicsBudgetRequest{MandateID: "mdt-1"})
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Mandates[0]; b.BurnPerHourMinor != 0 || b.ProjectedExhaustion != nil || !b.PeriodStart.Equal(end) {
		t.Errorf("new period: %+v", b)
	}
}

// TestEconomicsSummaryMatchesRecord is the economics invariant: after a
// random mix of settled, denied, held, failed, refunded, expired and
// captured payments, the summary equals what the signed record alone
// says, folded entry by entry, for every grouping and several windows.
func TestEconomicsSummaryMatchesRecord(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			h := newHarness(t, harnessConfig{card: ecoDeclineCard})
			ctx := t.Context()
			tags, marks := economicsMix(h, rand.New(rand.NewPCG(seed, 0x5eed)))
			// The mix must have produced every kind of amount to compare.
			var total EconomicsGroup
			for _, g := range recomputeFromRecord(t, h, h.caller.KeyID, marks[0], marks[3], "rail", tags) {
				total.Intents += g.Intents
				total.SettledMinor += g.SettledMinor
				total.RefundedMinor += g.RefundedMinor
				total.HeldMinor += g.HeldMinor
				total.Denied += g.Denied
				total.DeniedMinor += g.DeniedMinor
				total.Failed += g.Failed
			}
			if total.Intents < 40 || total.SettledMinor == 0 || total.RefundedMinor == 0 || total.HeldMinor < 14_690 || total.DeniedMinor == 0 || total.Failed == 0 {
				t.Fatalf("the mix is too thin: %+v", total)
			}
			t.Logf("mix: %+v", total)
			for _, w := range [][2]time.Time{{marks[0], marks[3]}, {marks[1], marks[3]}, {marks[0], marks[2]}, {marks[1], marks[2]}} {
				for _, groupBy := range []string{"payee", "rail", "mandate", "tag"} {
					got, err := h.svc.EconomicsSummaryGet(ctx, h.call(), &EconomicsSummaryRequest{Since: w[0], Until: w[1], GroupBy: groupBy})
					if err != nil {
						t.Fatal(err)
					}
					want := recomputeFromRecord(t, h, h.caller.KeyID, w[0], w[1], groupBy, tags)
					if diff := cmp.Diff(want, got.Groups); diff != "" {
						t.Errorf("%s in [%s, %s): summary differs from the record (-record +summary):\n%s",
							groupBy, w[0].Format(time.TimeOnly), w[1].Format(time.TimeOnly), diff)
					}
				}
			}
		})
	}
}

// economicsMix runs a seeded random mix of payments and holds under two
// mandates, payees, rails and tags, with refunds, captures, releases,
// approvals and, halfway, a day's jump with the approval and hold sweeps.
// It returns the tags of each intent (the record does not carry them)
// and four instants: the start, the creation of an intent in the middle,
// of another near the end, and the end.
func economicsMix(h *harness, rng *rand.Rand) (map[string][]string, [4]time.Time) {
	h.t.Helper()
	ctx := h.t.Context()
	second := mdtExtra(h, "mdt-2", nil)
	payees := []string{"acct:seller.example", "acct:books.example", "acct:cloud.example"}
	tagSets := [][]string{nil, {"research"}, {"ops"}, {"ops", "research"}}
	tags := map[string][]string{}
	type settledRef struct {
		id   string
		left int64
	}
	var (
		marks    [4]time.Time
		settled  []settledRef
		holds    []string // held holds
		pending  []*pay.Result
		fails    int
		denials  = map[string]int{}
		kindsRun = map[string]int{}
	)
	pick := func(n int) int { return rng.IntN(n) }
	marks[0] = h.clock.Now()
	const ops = 80
	for i := range ops {
		h.clock.Add(time.Duration(1+pick(300)) * time.Second)
		switch i {
		case ops / 2:
			// A day later: held payments expire unapproved, holds expire.
			h.clock.Add(25 * time.Hour)
			if _, err := h.pay.ExpireApprovals(ctx); err != nil {
				h.t.Fatal(err)
			}
			if _, err := h.pay.ExpireHolds(ctx); err != nil {
				h.t.Fatal(err)
			}
			pending, holds = nil, nil
			marks[1] = h.clock.Now()
		case ops - 10:
			marks[2] = h.clock.Now()
		}
		h.caller.Tags = slices.Clone(tagSets[pick(len(tagSets))])
		tok, mid := h.mandate, "mdt-1"
		if pick(3) == 0 {
			tok, mid = second, "mdt-2"
		}
		payee := payees[pick(len(payees))]
		edit := func(in *pay.Instruction) { in.Payee, in.Envelope.Mandate = payee, tok }
		rail := []string{railWire, railCard}[pick(2)]
		kinds := []string{"settle", "deny", "held", "fail", "refund", "hold", "capture", "release", "approve", "other-key"}
		kind := kinds[pick(len(kinds))]
		// Keep the breaker closed: never five failures, or five denials of
		// a mandate, in a row.
		switch {
		case kind == "deny" && denials[mid] >= 3, kind == "fail" && fails >= 3,
			kind == "refund" && len(settled) == 0, kind == "capture" && len(holds) == 0,
			kind == "release" && len(holds) == 0, kind == "approve" && len(pending) == 0:
			kind = "settle"
		}
		kindsRun[kind]++
		var res *pay.Result
		switch kind {
		case "settle":
			res = mdtMustPay(h, rail, 100+rng.Int64N(8_900), pay.OutcomeSettled, edit)
			settled = append(settled, settledRef{res.IntentID, res.Receipt.Amount.Minor})
			fails, denials[mid] = 0, 0
		case "deny":
			res = mdtMustPay(h, rail, 50_001+rng.Int64N(10_000), pay.OutcomeDenied, edit)
			denials[mid]++
		case "held":
			res = mdtMustPay(h, rail, 10_000+rng.Int64N(20_000), pay.OutcomeHeld, edit)
			pending = append(pending, res)
			denials[mid] = 0
		case "fail":
			res = mdtMustPay(h, railCard, 9_001+rng.Int64N(999), pay.OutcomeFailed, edit)
			fails++
			denials[mid] = 0
		case "refund":
			j := pick(len(settled))
			s := &settled[j]
			minor := s.left
			if pick(2) == 0 && s.left > 1 {
				minor = 1 + rng.Int64N(s.left-1)
			}
			ecoRefund(h, s.id, minor)
			if s.left -= minor; s.left == 0 {
				settled = slices.Delete(settled, j, j+1)
			}
		case "hold":
			placed, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", rail, 100+rng.Int64N(8_900), edit), TTLSeconds: 3600})
			if err != nil || placed.Status != HoldHeld {
				h.t.Fatalf("hold: %+v, %v", placed, err)
			}
			tags[placed.IntentID] = h.caller.Tags
			holds = append(holds, placed.HoldID)
			fails, denials[mid] = 0, 0
		case "capture":
			j := pick(len(holds))
			got, err := h.svc.HoldGet(ctx, h.call(), &HoldRef{HoldID: holds[j]})
			if err != nil {
				h.t.Fatal(err)
			}
			c, err := h.svc.HoldCapture(ctx, h.call(), &HoldCaptureRequest{HoldID: holds[j], AmountMinor: 1 + rng.Int64N(got.Amount.Minor), IdempotencyKey: "cap-" + itoa(i)})
			if err != nil {
				h.t.Fatal(err)
			}
			settled = append(settled, settledRef{c.IntentID, c.CapturedMinor})
			holds = slices.Delete(holds, j, j+1)
			fails = 0
		case "release":
			j := pick(len(holds))
			if _, err := h.svc.HoldRelease(ctx, h.call(), &HoldRef{HoldID: holds[j]}); err != nil {
				h.t.Fatal(err)
			}
			holds = slices.Delete(holds, j, j+1)
		case "approve":
			j := pick(len(pending))
			p := pending[j]
			r, err := h.pay.Approve(ctx, pay.ApproveRequest{IntentID: p.IntentID, Challenge: p.Held.Challenge, MandateID: p.Held.MandateID,
				Rationale: "checked with the team", Acknowledged: true}, pay.OperatorCall{Operator: "op-test", Rationale: "checked with the team"})
			if err != nil {
				h.t.Fatal(err)
			}
			switch r.Outcome {
			case pay.OutcomeSettled:
				settled = append(settled, settledRef{r.IntentID, r.Receipt.Amount.Minor})
				fails = 0
			case pay.OutcomeFailed: // a card payment above what the card rail takes
				fails++
			default:
				h.t.Fatalf("approve: %s", r.Outcome)
			}
			pending = slices.Delete(pending, j, j+1)
		case "other-key":
			ovsPayWithKey(h, ovsSecondKey(h), 100+rng.Int64N(30_000))
		}
		if res != nil {
			tags[res.IntentID] = h.caller.Tags
		}
	}
	// End with something still reserved: a payment waiting for a person
	// and a held hold.
	h.clock.Add(time.Second)
	tags[mdtMustPay(h, railWire, 12_345, pay.OutcomeHeld, nil).IntentID] = h.caller.Tags
	placed, err := h.svc.HoldPlace(ctx, h.call(), &HoldPlaceRequest{Spend: h.spend("hold.place", railCard, 2_345, nil), TTLSeconds: 3600})
	if err != nil {
		h.t.Fatal(err)
	}
	tags[placed.IntentID] = h.caller.Tags
	marks[3] = h.clock.Now().Add(time.Second)
	h.caller.Tags = nil
	if len(kindsRun) < 8 {
		h.t.Fatalf("the mix ran only %v", kindsRun)
	}
	return tags, marks
}

// recomputeFromRecord derives the summary from the signed record alone
// (except tags, which the record does not carry: tags maps intent ids to
// the tags of the request that created them). It folds every entry about
// an intent into that intent's state, in record order, then aggregates.
// It is written apart from Summarize on purpose.
func recomputeFromRecord(t *testing.T, h *harness, agentKeyID string, since, until time.Time, groupBy string, tags map[string][]string) []EconomicsGroup {
	t.Helper()
	type state struct {
		created                          time.Time
		agentKeyID, payee, rail, mandate string
		currency                         string
		amount                           int64
		outcome                          gate.Outcome
		status                           string
		settled, refunded, reserved      int64
	}
	intents := map[string]*state{}
	var order []string
	for e, err := range h.log.Entries(t.Context(), 1, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if e.IntentID == "" {
			continue
		}
		st := intents[e.IntentID]
		if st == nil && e.Type != "gate.decision" {
			t.Fatalf("entry %d (%s) about intent %s before its decision", e.Seq, e.Type, e.IntentID)
		}
		decode := func(v any) {
			if err := json.Unmarshal(e.Data, v); err != nil {
				t.Fatalf("entry %d (%s): %v", e.Seq, e.Type, err)
			}
		}
		switch e.Type {
		case "gate.decision":
			var d struct {
				Outcome    gate.Outcome `json:"outcome"`
				MandateID  string       `json:"mandateId"`
				AgentKeyID string       `json:"agentKeyId"`
				Payee      string       `json:"payee"`
				Amount     pay.Amount   `json:"amount"`
				Rail       string       `json:"rail"`
			}
			decode(&d)
			at, err := time.Parse(time.RFC3339Nano, e.At)
			if err != nil {
				t.Fatal(err)
			}
			st = &state{created: at, agentKeyID: d.AgentKeyID, payee: d.Payee, rail: d.Rail, mandate: d.MandateID,
				currency: d.Amount.Currency, amount: d.Amount.Minor, outcome: d.Outcome}
			switch d.Outcome {
			case gate.Deny:
				st.status = "denied"
			case gate.Confirm:
				st.status, st.reserved = "pending", d.Amount.Minor
			case gate.Allow:
				st.status, st.reserved = "settling", d.Amount.Minor
			default:
				t.Fatalf("entry %d: outcome %q", e.Seq, d.Outcome)
			}
			intents[e.IntentID] = st
			order = append(order, e.IntentID)
		case "payment.authorized":
			st.status = "authorized"
		case "payment.capture_requested":
			var c struct {
				CaptureMinor  int64 `json:"captureMinor"`
				ReleasedMinor int64 `json:"releasedMinor"`
			}
			decode(&c)
			st.reserved -= c.ReleasedMinor
			st.status = "capturing"
		case "payment.settled":
			var r pay.Receipt
			decode(&r)
			st.settled, st.reserved, st.status = r.Amount.Minor, 0, "settled"
		case "payment.failed":
			st.reserved, st.status = 0, "failed"
		case "payment.refunded":
			var r struct {
				RefundedMinor int64 `json:"refundedMinor"`
			}
			decode(&r)
			st.refunded = r.RefundedMinor
		case "approval.expired":
			st.reserved, st.status = 0, "expired"
		case "payment.voided", "payment.hold_expired":
			st.reserved, st.status = 0, "ended"
		}
	}
	groups := map[[2]string]*EconomicsGroup{}
	for _, id := range order {
		st := intents[id]
		if st.agentKeyID != agentKeyID || st.created.Before(since) || !st.created.Before(until) {
			continue
		}
		var keys []string
		switch groupBy {
		case "payee":
			keys = []string{st.payee}
		case "rail":
			keys = []string{st.rail}
		case "mandate":
			keys = []string{st.mandate}
		case "tag":
			keys = tags[id]
			if len(keys) == 0 {
				keys = []string{""}
			}
		}
		for _, k := range keys {
			g := groups[[2]string{k, st.currency}]
			if g == nil {
				g = &EconomicsGroup{Key: k, Currency: st.currency}
				groups[[2]string{k, st.currency}] = g
			}
			g.Intents++
			g.SettledMinor += st.settled
			g.RefundedMinor += st.refunded
			g.HeldMinor += st.reserved
			switch st.status {
			case "denied":
				g.Denied++
				g.DeniedMinor += st.amount
			case "failed":
				g.Failed++
			}
		}
	}
	out := []EconomicsGroup{}
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key+"\x00"+out[i].Currency < out[j].Key+"\x00"+out[j].Currency })
	return out
}
