package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

func TestHeldSummary(t *testing.T) {
	settledAt := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	base := func(edit func(*pay.HeldIntent)) pay.HeldIntent {
		h := pay.HeldIntent{IntentID: "int_1", Payee: "acct:seller.example", Amount: pay.Amount{Minor: 25_000, Currency: "USD"},
			ApprovalsRequired: 2, ApprovalsReceived: 1, Context: pay.HeldContext{
				Kind: pay.KindPayment, SecondsLeft: 23*3600 + 59*60 + 30,
				Payee: pay.HeldPayee{FirstTime: true},
				Velocity: pay.HeldVelocity{
					LastHour: pay.HeldWindow{Count: 1, Amount: pay.Money{Minor: 500, Currency: "USD"}},
					LastDay:  pay.HeldWindow{Count: 3, Amount: pay.Money{Minor: 4_500, Currency: "USD"}}},
				Budget: &pay.HeldBudget{Period: gate.Day, Limit: pay.Amount{Minor: 1_000_000, Currency: "USD"},
					Used: pay.Money{Minor: 29_500, Currency: "USD"}, IncludesThis: true, Remaining: pay.Money{Minor: 970_500, Currency: "USD"}},
				History: pay.HeldHistory{Scanned: 4}}}
		if edit != nil {
			edit(&h)
		}
		return h
	}
	for _, tc := range []struct {
		name string
		h    pay.HeldIntent
		want string
	}{
		{"a first-time payee", base(nil),
			"int_1  25000 USD to acct:seller.example  first-time payee  velocity 1h 1/500 USD, 24h 3/4500 USD  budget 970500 USD of 1000000 USD/day left  approvals 1/2  23h59m left"},
		{"a known payee, a purchase, a truncated history", base(func(h *pay.HeldIntent) {
			h.Context.Kind = pay.KindPurchase
			h.Context.Payee = pay.HeldPayee{SettledCount: 7, TypicalAmount: &pay.Amount{Minor: 1_200, Currency: "USD"}, LastSettledAt: &settledAt}
			h.Context.History = pay.HeldHistory{Scanned: 500, Truncated: true}
		}), "int_1  25000 USD to acct:seller.example (purchase)  typical 1200 USD (7 paid)  velocity 1h 1/500 USD, 24h 3/4500 USD (newest 500 intents read)  budget 970500 USD of 1000000 USD/day left  approvals 1/2  23h59m left"},
		{"paid before, in another currency only", base(func(h *pay.HeldIntent) {
			h.Context.Payee = pay.HeldPayee{SettledCount: 2}
		}), "2 paid, none in USD"},
		{"no known mandate", base(func(h *pay.HeldIntent) { h.Context.Budget = nil }), "  budget unknown  "},
		{"under a minute", base(func(h *pay.HeldIntent) { h.Context.SecondsLeft = 42 }), "approvals 1/2  42s left"},
		{"a whole hour", base(func(h *pay.HeldIntent) { h.Context.SecondsLeft = 3600 }), "approvals 1/2  1h0m left"},
		{"the window passed, not yet swept", base(func(h *pay.HeldIntent) { h.Context.SecondsLeft = 0 }), "approvals 1/2  window passed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := heldSummary(tc.h); !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("got  %q\nwant %q in it, on one line", got, tc.want)
			}
		})
	}
}

// TestOperatorApprovalsSummary: operator approvals prints one line per
// held payment on stderr and the page, as before, on stdout.
func TestOperatorApprovalsSummary(t *testing.T) {
	one := pay.HeldIntent{IntentID: "int_1", Payee: "acct:a.example", Amount: pay.Amount{Minor: 20_000, Currency: "USD"},
		ApprovalsRequired: 1, Reasons: []pay.ReasonView{}, Approvals: []pay.ApprovalGrant{},
		Context: pay.HeldContext{Kind: "meter", SecondsLeft: 90, Payee: pay.HeldPayee{FirstTime: true}}}
	two := one
	two.IntentID, two.Payee, two.Context.Kind = "int_2", "acct:b.example", pay.KindPayment
	full, _ := json.Marshal(pay.HeldPage{Data: []pay.HeldIntent{one, two}})
	srv := newFakeOperatorServer(t, map[string]struct {
		status int
		body   string
	}{"operator.approvals": {200, string(full)}})
	code, out, errOut := runCLI("operator", "approvals", "--url", srv.url, "--key", srv.key, "--limit", "2")
	if code != 0 {
		t.Fatalf("exit %d:\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "int_1  20000 USD to acct:a.example (meter)  first-time payee") ||
		!strings.HasSuffix(lines[0], "velocity 1h 0/0, 24h 0/0  budget unknown  approvals 0/1  1m left") || !strings.HasPrefix(lines[1], "int_2  20000 USD to acct:b.example  first-time payee") {
		t.Errorf("stderr:\n%s", errOut)
	}
	status, body, _ := strings.Cut(out, "\n")
	var page pay.HeldPage
	if status != "200 OK" || json.Unmarshal([]byte(body), &page) != nil || len(page.Data) != 2 {
		t.Errorf("stdout is not the status line and the page:\n%s", out)
	}
	if seen := srv.take(); len(seen) != 1 || seen[0].query != "limit=2" {
		t.Errorf("requests %+v", seen)
	}
}
