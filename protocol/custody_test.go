package protocol

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// cusDeclinedPayee is a destination the harness's card rail declines.
const cusDeclinedPayee = "acct:declines.example"

// cusDeclining makes the card rail decline every payment and hold to
// cusDeclinedPayee.
func cusDeclining(o *fake.Options) {
	o.Fault = func(op fake.Op, req any) error {
		if r, ok := req.(settle.SettleRequest); ok && (op == fake.OpSettle || op == fake.OpAuthorize) && r.Payee == cusDeclinedPayee {
			return &settle.DeclineError{Code: "do_not_honor", Message: "declined by the test"}
		}
		return nil
	}
}

// cusBalance returns the agent's USD custody as custody.balance shows it.
func cusBalance(t *testing.T, h *harness) CurrencyBalance {
	t.Helper()
	b, err := h.svc.CustodyBalance(t.Context(), h.call(), &CustodyBalanceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := CurrencyBalance{Currency: "USD"}
	for _, cb := range b.Balances {
		if cb.Currency == "USD" {
			out = cb
		}
	}
	return out
}

// cusState is the agent's USD custody in one line.
func cusState(t *testing.T, h *harness) string {
	t.Helper()
	b := cusBalance(t, h)
	return fmt.Sprintf("available=%d withdrawing=%d refunding=%d staked=%d", b.AvailableMinor, b.WithdrawingMinor, b.RefundingMinor, b.StakedMinor)
}

// cusBooks checks the books: the ledger is consistent, and every balance
// custody.balance shows is the sum of its account's lines as
// custody.ledger pages them (staked: as the ledger keeps them).
func cusBooks(t *testing.T, h *harness) {
	t.Helper()
	ctx := t.Context()
	var stakes []ledger.AccountBalance
	err := h.st.View(ctx, func(r store.Reader) error {
		if err := ledger.Check(r); err != nil {
			return err
		}
		all, err := ledger.Balances(r, "agent/"+h.agent+"/stake/")
		if err != nil {
			return err
		}
		for _, ab := range all {
			lines, more, err := ledger.Lines(r, ab.Account, ab.Currency, 0, ledger.MaxLinesLimit)
			if err != nil {
				return err
			}
			var sum int64
			for _, l := range lines {
				sum += l.Minor
			}
			if more || sum != ab.Minor {
				t.Errorf("%s: lines sum to %d (more: %v), balance %d", ab.Account, sum, more, ab.Minor)
			}
		}
		stakes = all
		return nil
	})
	if err != nil {
		t.Fatalf("ledger: %v", err)
	}
	b := cusBalance(t, h)
	var staked int64
	for _, ab := range stakes {
		if ab.Currency == "USD" {
			staked += ab.Minor
		}
	}
	if staked != b.StakedMinor {
		t.Errorf("staked %d, stake accounts hold %d", b.StakedMinor, staked)
	}
	for _, acct := range []struct {
		name string
		want int64
	}{{"available", b.AvailableMinor}, {"withdrawing", b.WithdrawingMinor}, {"refunding", b.RefundingMinor}} {
		var sum, last int64
		cursor := ""
		for {
			p, err := h.svc.CustodyLedger(ctx, h.call(), &CustodyLedgerRequest{Currency: "USD", Account: acct.name, Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range p.Data {
				sum += l.Minor
				last = l.BalanceAfter
				if l.BalanceAfter != sum {
					t.Errorf("%s line %d: balance after %d, running sum %d", acct.name, l.Seq, l.BalanceAfter, sum)
				}
			}
			if !p.HasMore {
				break
			}
			cursor = *p.NextCursor
		}
		if sum != acct.want || last != acct.want {
			t.Errorf("%s: lines sum to %d (last balance %d), custody.balance says %d", acct.name, sum, last, acct.want)
		}
	}
}

// cusSpend is a custody spend on the card rail; payee "" is the custody
// account.
func cusSpend(h *harness, method, payee string, minor int64) *CustodySpendRequest {
	if payee == "" {
		payee = DefaultCustodyPayee
	}
	return &CustodySpendRequest{Spend: h.spend(method, railCard, minor, func(in *pay.Instruction) { in.Payee = payee })}
}

// cusRefund refunds a settled intent as the operator; all of it when
// minor is 0.
func cusRefund(t *testing.T, h *harness, intentID string, minor int64) (*pay.RefundResult, error) {
	t.Helper()
	req := pay.RefundRequest{IntentID: intentID, Rationale: "refunded by the test"}
	if minor > 0 {
		req.AmountMinor = &minor
	}
	return h.pay.Refund(t.Context(), req, pay.OperatorCall{Operator: "op-test", RequestID: "req_op", Rationale: "refunded by the test"})
}

// TestCustodyTransitions walks an identity's custody through deposits
// (settled at once, and held for approval), withdrawals (settled, denied
// for want of funds, held then expired, declined by the rail) and
// operator refunds of deposits, checking the books after every step.
func TestCustodyTransitions(t *testing.T) {
	h := newHarness(t, harnessConfig{card: cusDeclining})
	ctx := t.Context()
	var deposit, heldDeposit, heldWithdrawal *CustodyMoved
	move := func(method, payee string, minor int64, keep **CustodyMoved) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			var m *CustodyMoved
			var err error
			if method == "custody.deposit" {
				m, err = h.svc.CustodyDeposit(ctx, h.call(), cusSpend(h, method, payee, minor))
			} else {
				m, err = h.svc.CustodyWithdraw(ctx, h.call(), cusSpend(h, method, payee, minor))
			}
			if err == nil && keep != nil {
				*keep = m
			}
			return cusState(t, h), err
		}
	}
	deposit1 := func(minor int64, keep **CustodyMoved) func(t *testing.T) (string, error) {
		return move("custody.deposit", "", minor, keep)
	}
	withdraw := func(minor int64, keep **CustodyMoved) func(t *testing.T) (string, error) {
		return move("custody.withdraw", "acct:dest.example", minor, keep)
	}
	refund := func(m **CustodyMoved, minor int64) func(t *testing.T) (string, error) {
		return func(t *testing.T) (string, error) {
			_, err := cusRefund(t, h, (*m).IntentID, minor)
			return cusState(t, h), err
		}
	}
	var (
		settledDeposit  = []string{"gate.decision", "protocol.custody.deposit", "payment.settled", "protocol.custody.deposit.settle"}
		settledWithdraw = []string{"gate.decision", "protocol.custody.withdraw", "payment.settled", "protocol.custody.withdraw.settle"}
		decidedWithdraw = []string{"gate.decision", "protocol.custody.withdraw"}
	)
	trnRun(t, h, []trnStep{
		{name: "deposit to another payee", do: move("custody.deposit", "acct:seller.example", 1_000, nil), code: CodeCustodyWrongPayee,
			state: "available=0 withdrawing=0 refunding=0 staked=0"},
		{name: "withdraw to the custody account", do: move("custody.withdraw", DefaultCustodyPayee, 1_000, nil), code: CodeCustodyWrongPayee,
			state: "available=0 withdrawing=0 refunding=0 staked=0"},
		{name: "withdraw from nothing", do: withdraw(1_000, nil), code: pay.CodeDenied, reason: CodeCustodyInsufficient,
			state: "available=0 withdrawing=0 refunding=0 staked=0", types: decidedWithdraw},
		{name: "deposit", do: deposit1(8_000, &deposit), state: "available=8000 withdrawing=0 refunding=0 staked=0", types: settledDeposit},
		{name: "deposit held for approval", do: deposit1(20_000, &heldDeposit), state: "available=8000 withdrawing=0 refunding=0 staked=0",
			types: []string{"gate.decision", "protocol.custody.deposit"}},
		{name: "approve the deposit", do: func(t *testing.T) (string, error) {
			_, err := trnApprove(t, h, heldDeposit.IntentID, heldDeposit.Approval)
			return cusState(t, h), err
		}, state: "available=28000 withdrawing=0 refunding=0 staked=0",
			types: []string{"approval.granted", "payment.settled", "protocol.custody.deposit.settle"}},
		{name: "withdraw", do: withdraw(3_000, nil), state: "available=25000 withdrawing=0 refunding=0 staked=0", types: settledWithdraw},
		{name: "withdraw more than available", do: withdraw(30_000, nil), code: pay.CodeDenied, reason: CodeCustodyInsufficient,
			state: "available=25000 withdrawing=0 refunding=0 staked=0", types: decidedWithdraw},
		{name: "withdrawal held for approval", do: withdraw(12_000, &heldWithdrawal),
			state: "available=13000 withdrawing=12000 refunding=0 staked=0", types: decidedWithdraw},
		{name: "withdraw what the held one reserved", do: withdraw(14_000, nil), code: pay.CodeDenied, reason: CodeCustodyInsufficient,
			state: "available=13000 withdrawing=12000 refunding=0 staked=0", types: decidedWithdraw},
		{name: "the approval window passes", do: func(t *testing.T) (string, error) {
			h.clock.Add(24*time.Hour + time.Second)
			n, err := h.pay.ExpireApprovals(ctx)
			if n != 1 {
				t.Errorf("%d approvals expired, want 1", n)
			}
			return cusState(t, h), err
		}, state: "available=25000 withdrawing=0 refunding=0 staked=0",
			types: []string{"approval.expired", "protocol.custody.withdraw.expire"}},
		{name: "approve the expired withdrawal", do: func(t *testing.T) (string, error) {
			_, err := trnApprove(t, h, heldWithdrawal.IntentID, heldWithdrawal.Approval)
			return cusState(t, h), err
		}, code: pay.CodeApprovalExpired, state: "available=25000 withdrawing=0 refunding=0 staked=0"},
		{name: "withdrawal declined by the rail", do: move("custody.withdraw", cusDeclinedPayee, 2_000, nil), code: pay.CodeDeclined,
			state: "available=25000 withdrawing=0 refunding=0 staked=0",
			types: []string{"gate.decision", "protocol.custody.withdraw", "payment.failed", "protocol.custody.withdraw.fail"}},
		{name: "refund part of a deposit", do: refund(&deposit, 3_000), state: "available=22000 withdrawing=0 refunding=0 staked=0",
			types: []string{"protocol.custody.deposit.refund_reserve", "payment.refunded", "protocol.custody.deposit.refund"}},
		{name: "refund the rest of it", do: refund(&deposit, 0), state: "available=17000 withdrawing=0 refunding=0 staked=0",
			types: []string{"protocol.custody.deposit.refund_reserve", "payment.refunded", "protocol.custody.deposit.refund"}},
		{name: "refund it again", do: refund(&deposit, 0), code: pay.CodeRefundRefused, state: "available=17000 withdrawing=0 refunding=0 staked=0"},
		{name: "withdraw most of it", do: withdraw(9_000, nil), state: "available=8000 withdrawing=0 refunding=0 staked=0", types: settledWithdraw},
		{name: "refund a deposit withdrawn in part", do: refund(&heldDeposit, 0), code: CodeCustodyInsufficient,
			state: "available=8000 withdrawing=0 refunding=0 staked=0"},
		{name: "refund what is still there", do: refund(&heldDeposit, 8_000), state: "available=0 withdrawing=0 refunding=0 staked=0",
			types: []string{"protocol.custody.deposit.refund_reserve", "payment.refunded", "protocol.custody.deposit.refund"}},
		{name: "refund one more", do: refund(&heldDeposit, 1), code: CodeCustodyInsufficient,
			state: "available=0 withdrawing=0 refunding=0 staked=0"},
	}, func(t *testing.T) { cusBooks(t, h) })
}

// TestCustodyWithdrawalApproved: a withdrawal approved by a person
// settles out of what it reserved.
func TestCustodyWithdrawalApproved(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	for range 2 {
		if _, err := h.svc.CustodyDeposit(ctx, h.call(), cusSpend(h, "custody.deposit", "", 9_000)); err != nil {
			t.Fatal(err)
		}
	}
	w, err := h.svc.CustodyWithdraw(ctx, h.call(), cusSpend(h, "custody.withdraw", "acct:dest.example", 15_000))
	if err != nil || !w.IsAccepted() {
		t.Fatalf("withdraw = %+v, %v; want held", w, err)
	}
	if got := cusState(t, h); got != "available=3000 withdrawing=15000 refunding=0 staked=0" {
		t.Errorf("held: %s", got)
	}
	n := h.size()
	if _, err := trnApprove(t, h, w.IntentID, w.Approval); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"approval.granted", "payment.settled", "protocol.custody.withdraw.settle"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries of approval (-want +got):\n%s", diff)
	}
	if got := cusState(t, h); got != "available=3000 withdrawing=0 refunding=0 staked=0" {
		t.Errorf("approved: %s", got)
	}
	cusBooks(t, h)
}

// TestCustodyRefundOfWithdrawal: a refunded withdrawal comes back into
// custody.
func TestCustodyRefundOfWithdrawal(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	if _, err := h.svc.CustodyDeposit(ctx, h.call(), cusSpend(h, "custody.deposit", "", 9_000)); err != nil {
		t.Fatal(err)
	}
	w, err := h.svc.CustodyWithdraw(ctx, h.call(), cusSpend(h, "custody.withdraw", "acct:dest.example", 4_000))
	if err != nil {
		t.Fatal(err)
	}
	n := h.size()
	if _, err := cusRefund(t, h, w.IntentID, 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"payment.refunded", "protocol.custody.withdraw.refund"}, h.typesSince(n)); diff != "" {
		t.Errorf("entries of refund (-want +got):\n%s", diff)
	}
	if got := cusState(t, h); got != "available=9000 withdrawing=0 refunding=0 staked=0" {
		t.Errorf("refunded: %s", got)
	}
	cusBooks(t, h)
}

// TestCustodyIdempotency: deposit and withdraw answer a repeat with the
// same bytes, marked replayed, moving nothing twice; the key with another
// body is a conflict that changes nothing; each method has its own
// namespace.
func TestCustodyIdempotency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	for _, tc := range []struct {
		method string
		payee  string
		minor  int64
		run    func(*CustodySpendRequest) (*CustodyMoved, error)
		after  string // custody after the first call
	}{
		{"custody.deposit", "", 9_000, func(r *CustodySpendRequest) (*CustodyMoved, error) {
			return h.svc.CustodyDeposit(ctx, h.call(), r)
		}, "available=9000 withdrawing=0 refunding=0 staked=0"},
		{"custody.withdraw", "acct:dest.example", 4_000, func(r *CustodySpendRequest) (*CustodyMoved, error) {
			return h.svc.CustodyWithdraw(ctx, h.call(), r)
		}, "available=5000 withdrawing=0 refunding=0 staked=0"},
		{"custody.deposit", "", 15_000, func(r *CustodySpendRequest) (*CustodyMoved, error) {
			return h.svc.CustodyDeposit(ctx, h.call(), r)
		}, "available=5000 withdrawing=0 refunding=0 staked=0"},
	} {
		t.Run(fmt.Sprintf("%s %d", tc.method, tc.minor), func(t *testing.T) {
			req := cusSpend(h, tc.method, tc.payee, tc.minor)
			first, err := tc.run(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := cusState(t, h); got != tc.after {
				t.Errorf("after the first: %s, want %s", got, tc.after)
			}
			before := h.dump()
			again, err := tc.run(req)
			if err != nil {
				t.Fatal(err)
			}
			trnReplay(t, first, again)
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a replay changed the store:\n%s", diff)
			}
			other := cusSpend(h, tc.method, tc.payee, tc.minor+1)
			other.Spend = h.spend(tc.method, railCard, tc.minor+1, func(in *pay.Instruction) {
				in.Payee, in.IdempotencyKey = req.Spend.Payee, req.Spend.IdempotencyKey
			})
			if _, err := tc.run(other); code(err) != pay.CodeIdempotencyConflict {
				t.Errorf("same key, other amount: %v, want %s", err, pay.CodeIdempotencyConflict)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("a conflict changed the store:\n%s", diff)
			}
			if first.IsAccepted() {
				// A held one, approved, still replays its first answer.
				if _, err := trnApprove(t, h, first.IntentID, first.Approval); err != nil {
					t.Fatal(err)
				}
				again, err := tc.run(req)
				if err != nil {
					t.Fatal(err)
				}
				trnReplay(t, first, again)
				if got := cusState(t, h); got != "available=20000 withdrawing=0 refunding=0 staked=0" {
					t.Errorf("after approval and a replay: %s", got)
				}
			}
			cusBooks(t, h)
		})
	}
	t.Run("namespaces", func(t *testing.T) {
		// A deposit's key is free for a withdrawal: each method keys its own.
		d := cusSpend(h, "custody.deposit", "", 1_000)
		if _, err := h.svc.CustodyDeposit(ctx, h.call(), d); err != nil {
			t.Fatal(err)
		}
		w := &CustodySpendRequest{Spend: h.spend("custody.withdraw", railCard, 1_000, func(in *pay.Instruction) {
			in.Payee, in.IdempotencyKey = "acct:dest.example", d.Spend.IdempotencyKey
		})}
		m, err := h.svc.CustodyWithdraw(ctx, h.call(), w)
		if err != nil || m.WasReplayed() {
			t.Fatalf("withdraw under a deposit's key: %+v, %v", m, err)
		}
		cusBooks(t, h)
	})
}

// TestCustodyRefusals: who may read custody, and a spend signed for one
// method is not accepted by another.
func TestCustodyRefusals(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"balance of an agent the key does not act for", func() error {
			_, err := h.svc.CustodyBalance(ctx, h.call(), &CustodyBalanceRequest{Agent: strings.Repeat("ab", 32)})
			return err
		}, CodeCustodyAgent},
		{"ledger of an agent the key does not act for", func() error {
			_, err := h.svc.CustodyLedger(ctx, h.call(), &CustodyLedgerRequest{Agent: strings.Repeat("ab", 32), Currency: "USD"})
			return err
		}, CodeCustodyAgent},
		{"ledger after a cursor no page returned", func() error {
			_, err := h.svc.CustodyLedger(ctx, h.call(), &CustodyLedgerRequest{Currency: "USD", Cursor: "not-a-seq"})
			return err
		}, CodeBadCursor},
		{"deposit signed for hold.place", func() error {
			req := &CustodySpendRequest{Spend: h.spend("hold.place", railCard, 1_000, func(in *pay.Instruction) { in.Payee = DefaultCustodyPayee })}
			_, err := h.svc.CustodyDeposit(ctx, h.call(), req)
			return err
		}, pay.CodeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.dump()
			if got := code(tc.run()); got != tc.want {
				t.Errorf("code %q, want %q", got, tc.want)
			}
			if tc.want != pay.CodeUnauthorized { // an envelope refusal is recorded (gate.decision)
				if diff := cmp.Diff(before, h.dump()); diff != "" {
					t.Errorf("the store changed:\n%s", diff)
				}
			}
		})
	}
}

// TestCustodyRefundAtTheRail: while the rail has not answered a deposit's
// refund, its amount waits in refunding; the rail's refusal gives it back
// to available, and a refund finished by the reconciler takes it out.
func TestCustodyRefundAtTheRail(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault error  // the first refund call's failure
		code  string // what Refund answers
		state string // custody after Refund
		end   string // custody after Reconcile
	}{
		{"refused", &settle.DeclineError{Code: "refund_refused", Message: "refused by the test"}, pay.CodeRefundRefused,
			"available=9000 withdrawing=0 refunding=0 staked=0", "available=9000 withdrawing=0 refunding=0 staked=0"},
		{"unknown outcome", settle.ErrUnavailable, pay.CodeRailUnavailable,
			"available=5000 withdrawing=0 refunding=4000 staked=0", "available=5000 withdrawing=0 refunding=0 staked=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{card: func(o *fake.Options) { o.Fault = fake.FailNext(fake.OpRefund, 1, tc.fault) }})
			d, err := h.svc.CustodyDeposit(t.Context(), h.call(), cusSpend(h, "custody.deposit", "", 9_000))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cusRefund(t, h, d.IntentID, 4_000); code(err) != tc.code {
				t.Fatalf("refund: %v, want %s", err, tc.code)
			}
			if got := cusState(t, h); got != tc.state {
				t.Errorf("after the refund: %s, want %s", got, tc.state)
			}
			cusBooks(t, h)
			if _, err := h.pay.Reconcile(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := cusState(t, h); got != tc.end {
				t.Errorf("after reconciling: %s, want %s", got, tc.end)
			}
			cusBooks(t, h)
		})
	}
}

// TestCustodyWithdrawalsUnderConcurrency: withdrawals racing for the
// available balance never take it below zero.
func TestCustodyWithdrawalsUnderConcurrency(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	ctx := t.Context()
	if _, err := h.svc.CustodyDeposit(ctx, h.call(), cusSpend(h, "custody.deposit", "", 9_000)); err != nil {
		t.Fatal(err)
	}
	reqs := make([]*CustodySpendRequest, 10)
	for i := range reqs {
		reqs[i] = cusSpend(h, "custody.withdraw", "acct:dest.example", 2_000)
	}
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { _, errs[i] = h.svc.CustodyWithdraw(ctx, h.call(), req) })
	}
	wg.Wait()
	settled := 0
	for _, err := range errs {
		if err == nil {
			settled++
		} else {
			trnWantDenied(t, err, CodeCustodyInsufficient)
		}
	}
	if settled != 4 {
		t.Errorf("%d withdrawals settled, want 4", settled)
	}
	if got := cusState(t, h); got != "available=1000 withdrawing=0 refunding=0 staked=0" {
		t.Errorf("state %s", got)
	}
	cusBooks(t, h)
}
