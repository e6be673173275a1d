package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign/pay"
)

// heldSummary is one line a person reads a held payment by, from the held
// list's own context (GET /operator/approvals): id, amount, payee, what
// the agent key has paid that payee before, its spending in the last hour
// and day, what the mandate's budget has left, approvals so far and the
// time left (at the server's clock). Amounts are minor units, as
// everywhere in the CLI.
func heldSummary(h pay.HeldIntent) string {
	c := h.Context
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s to %s", h.IntentID, amount(h.Amount.Minor, h.Amount.Currency), h.Payee)
	if c.Kind != "" && c.Kind != pay.KindPayment {
		fmt.Fprintf(&b, " (%s)", c.Kind)
	}
	switch p := c.Payee; {
	case p.FirstTime:
		b.WriteString("  first-time payee")
	case p.TypicalAmount != nil:
		fmt.Fprintf(&b, "  typical %s (%d paid)", amount(p.TypicalAmount.Minor, p.TypicalAmount.Currency), p.SettledCount)
	default:
		fmt.Fprintf(&b, "  %d paid, none in %s", p.SettledCount, h.Amount.Currency)
	}
	v := c.Velocity
	fmt.Fprintf(&b, "  velocity 1h %d/%s, 24h %d/%s", v.LastHour.Count, amount(v.LastHour.Amount.Minor, v.LastHour.Amount.Currency),
		v.LastDay.Count, amount(v.LastDay.Amount.Minor, v.LastDay.Amount.Currency))
	if c.History.Truncated {
		fmt.Fprintf(&b, " (newest %d intents read)", c.History.Scanned)
	}
	if bu := c.Budget; bu != nil {
		fmt.Fprintf(&b, "  budget %s of %s/%s left", amount(bu.Remaining.Minor, bu.Remaining.Currency),
			amount(bu.Limit.Minor, bu.Limit.Currency), bu.Period)
	} else {
		b.WriteString("  budget unknown")
	}
	fmt.Fprintf(&b, "  approvals %d/%d  %s", h.ApprovalsReceived, h.ApprovalsRequired, timeLeft(c.SecondsLeft))
	return b.String()
}

func amount(minor int64, currency string) string {
	return strings.TrimSpace(fmt.Sprintf("%d %s", minor, currency))
}

// timeLeft says how long a held payment still waits, to the minute.
func timeLeft(seconds int64) string {
	if seconds <= 0 {
		return "window passed"
	}
	d := time.Duration(seconds) * time.Second
	if d < time.Minute {
		return fmt.Sprintf("%ds left", seconds)
	}
	return strings.TrimSuffix(d.Truncate(time.Minute).String(), "0s") + " left"
}
