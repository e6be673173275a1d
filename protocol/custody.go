package protocol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace custody: money an agent identity holds with the deployment,
// kept in a double-entry ledger (package ledger) per identity and
// currency. A deposit is a real payment to the deployment's custody
// account (the same gate, reservation and settlement); it credits the
// identity when, and only when, it settles, in the settlement's own
// transaction. A withdrawal is a payment to a destination through the
// gate: its amount moves from available to withdrawing when the gate
// admits it, to the world when it settles, and back when it fails or
// expires. Refunding a deposit takes the money back out of custody first.
// Every balance is derived from the ledger's lines.

const (
	routeDeposit  pay.Route = "protocol/custody.deposit"
	routeWithdraw pay.Route = "protocol/custody.withdraw"
)

// Problem codes of custody.
const (
	CodeCustodyWrongPayee   = "custody.wrong_payee"
	CodeCustodyInsufficient = "custody.insufficient_funds"
	CodeCustodyAgent        = "custody.agent_required"
)

var (
	errWrongPayee      = errcode.New(CodeCustodyWrongPayee, "protocol: a deposit must pay the deployment's custody account")
	errInsufficient    = errcode.New(CodeCustodyInsufficient, "protocol: not enough available in custody")
	errAgentAmbiguous  = errcode.New(CodeCustodyAgent, "protocol: name the agent: this credential acts for several, or not for this one")
	errFieldInvalid    = errcode.New(contract.CodeRequestValidation, "protocol: a field breaks a rule")
	custodyReasonShort = gate.Reason{Code: CodeCustodyInsufficient, Message: "the agent's available custody balance is less than the amount"}
)

// Account names of an identity.
func availableAccount(agent string) string   { return "agent/" + agent + "/available" }
func withdrawingAccount(agent string) string { return "agent/" + agent + "/withdrawing" }
func refundingAccount(agent string) string   { return "agent/" + agent + "/refunding" }
func stakeAccount(agent, id string) string   { return "agent/" + agent + "/stake/" + id }
func worldAccount(rail string) string        { return ledger.WorldPrefix + "rail/" + rail }

// CustodySpendRequest is the body of custody.deposit and custody.withdraw.
type CustodySpendRequest struct {
	Spend pay.Instruction `json:"spend" doc:"The payment instruction, signed for the method. A deposit's payee is the deployment's custody account; a withdrawal's is its destination."`
}

// CustodyMoved is the answer of a deposit or a withdrawal.
type CustodyMoved struct {
	IntentID string `json:"intentId"`
	// Status is settled, or pending_approval (202).
	Status   string       `json:"status"`
	Agent    string       `json:"agent"`
	Amount   pay.Amount   `json:"amount"`
	Receipt  *pay.Receipt `json:"receipt,omitempty"`
	Approval *pay.Held    `json:"approval,omitempty"`
	replayed bool
}

// WasReplayed reports an idempotent repeat.
func (m *CustodyMoved) WasReplayed() bool { return m.replayed }

// IsAccepted reports a movement waiting for approval (202).
func (m *CustodyMoved) IsAccepted() bool { return m.Status == string(pay.StatusPendingApproval) }

func movedOf(in *pay.Instruction, res *pay.Result) *CustodyMoved {
	out := &CustodyMoved{IntentID: res.IntentID, Agent: in.Envelope.Agent, Amount: in.Amount, replayed: res.Replayed}
	if res.Receipt != nil {
		out.Status, out.Receipt = string(pay.StatusSettled), res.Receipt
	} else {
		out.Status, out.Approval = string(pay.StatusPendingApproval), res.Held
	}
	return out
}

// CustodyDeposit pays the deployment's custody account; the agent's
// available balance is credited when the payment settles.
func (s *Service) CustodyDeposit(ctx context.Context, call Call, req *CustodySpendRequest) (*CustodyMoved, error) {
	if req.Spend.Payee != s.custody && req.Spend.Payee != s.insure.Payee {
		return nil, fmt.Errorf("%w: pay %s (or %s to fund the insurance pool)", errWrongPayee, s.custody, s.insure.Payee)
	}
	res, err := s.spend(ctx, call, routeDeposit, "custody.deposit", &req.Spend, req, nil, nil)
	if err != nil {
		return nil, err
	}
	return movedOf(&req.Spend, res), nil
}

// CustodyWithdraw pays a destination out of the agent's custody balance,
// through the gate.
func (s *Service) CustodyWithdraw(ctx context.Context, call Call, req *CustodySpendRequest) (*CustodyMoved, error) {
	if req.Spend.Payee == s.custody || req.Spend.Payee == s.insure.Payee {
		return nil, fmt.Errorf("%w: a withdrawal cannot pay the deployment's own accounts", errWrongPayee)
	}
	res, err := s.spend(ctx, call, routeWithdraw, "custody.withdraw", &req.Spend, req, nil, nil)
	if err != nil {
		return nil, err
	}
	return movedOf(&req.Spend, res), nil
}

func (s *Service) post(txn store.Txn, kind, ref, currency string, postings ...ledger.Posting) error {
	return ledger.Post(txn, ledger.Transfer{ID: ref + "/" + kind, Currency: currency, Postings: postings, Kind: kind, Ref: ref, At: s.clock()})
}

func move(from, to string, minor int64) []ledger.Posting {
	return []ledger.Posting{{Account: from, Minor: -minor}, {Account: to, Minor: minor}}
}

// depositChanged credits a settled deposit, and takes a refunded one back
// out of custody. A deposit to the insurance pool's payee funds the pool.
func (s *Service) depositChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	avail, refunding := availableAccount(in.Agent), refundingAccount(in.Agent)
	if in.Payee == s.insure.Payee {
		avail, refunding = poolAccount, poolRefundingAccount
	}
	if err := s.creditChanged(txn, in, step, "deposit", avail, refunding); err != nil {
		return err
	}
	return s.recordCustody(txn, "deposit", in, step, requestID)
}

// creditChanged keeps the books of a payment into an account of the
// deployment (a custody deposit, an insurance premium): credited from the
// world when it settles; a refund takes the money back out of the account
// first (refused when it is no longer there), then to the world when the
// rail refunds, back if the rail refuses.
func (s *Service) creditChanged(txn store.Txn, in *pay.Intent, step pay.Step, kind, avail, refunding string) error {
	cur := in.Amount.Currency
	switch step {
	case pay.StepSettled:
		return s.post(txn, kind, in.ID, cur, move(worldAccount(in.Terms.Rail), avail, in.SettledMinor())...)
	case pay.StepRefunding:
		p := in.PendingRefund
		err := s.post(txn, "refund.reserve."+p.ID, in.ID, cur, move(avail, refunding, p.Minor)...)
		if errors.Is(err, ledger.ErrInsufficientFunds) {
			return fmt.Errorf("%w: the money is no longer in %s", errInsufficient, avail)
		}
		return err
	case pay.StepRefunded:
		p := in.Refunds[len(in.Refunds)-1]
		return s.post(txn, "refund."+p.ID, in.ID, cur, move(refunding, worldAccount(in.Terms.Rail), p.Minor)...)
	case pay.StepRefundRefused:
		p := in.PendingRefund
		return s.post(txn, "refund.unreserve."+p.ID, in.ID, cur, move(refunding, avail, p.Minor)...)
	}
	return nil
}

// withdrawAdmit reserves a withdrawal's amount out of the available
// balance when the gate admits it, or denies it for want of funds.
func (s *Service) withdrawAdmit(txn store.Txn, in *pay.Intent) (*gate.Reason, error) {
	err := s.post(txn, "withdraw.reserve", in.ID, in.Amount.Currency, move(availableAccount(in.Agent), withdrawingAccount(in.Agent), in.Amount.Minor)...)
	if errors.Is(err, ledger.ErrInsufficientFunds) {
		r := custodyReasonShort
		return &r, nil
	}
	return nil, err
}

func (s *Service) withdrawChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	cur, agent := in.Amount.Currency, in.Agent
	switch step {
	case pay.StepSettled:
		if err := s.post(txn, "withdraw", in.ID, cur, move(withdrawingAccount(agent), worldAccount(in.Terms.Rail), in.SettledMinor())...); err != nil {
			return err
		}
	case pay.StepFailed, pay.StepExpired, pay.StepDeclined:
		if in.Decision.Outcome != gate.Deny {
			if err := s.post(txn, "withdraw.release", in.ID, cur, move(withdrawingAccount(agent), availableAccount(agent), in.Amount.Minor)...); err != nil {
				return err
			}
		}
	case pay.StepRefunded:
		// A refunded withdrawal comes back into custody.
		p := in.Refunds[len(in.Refunds)-1]
		if err := s.post(txn, "refund."+p.ID, in.ID, cur, move(worldAccount(in.Terms.Rail), availableAccount(agent), p.Minor)...); err != nil {
			return err
		}
	}
	return s.recordCustody(txn, "withdraw", in, step, requestID)
}

func (s *Service) recordCustody(txn store.Txn, method string, in *pay.Intent, step pay.Step, requestID string) error {
	switch step {
	case pay.StepDecided, pay.StepSettled, pay.StepFailed, pay.StepExpired, pay.StepDeclined, pay.StepRefunded:
	case pay.StepRefunding, pay.StepRefundRefused:
		if method != "deposit" {
			return nil // only a deposit's refund moves custody money before the rail answers
		}
	default:
		return nil
	}
	typ := "protocol.custody." + method
	switch step {
	case pay.StepDecided:
	case pay.StepRefunding:
		typ += ".refund_reserve"
	case pay.StepRefundRefused:
		typ += ".refund_refused"
	default:
		typ += "." + stepNames[step]
	}
	_, err := s.recordIntent(txn, typ, in, step, requestID, map[string]any{
		"intentId": in.ID, "agent": in.Agent, "status": in.Status, "amount": in.Amount, "settledMinor": in.SettledMinor(),
		"refundedMinor": in.RefundedMinor,
	})
	return err
}

// CustodyBalanceRequest is the body of custody.balance.
type CustodyBalanceRequest struct {
	Agent string `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase" doc:"The agent identity; may be omitted when the credential acts for exactly one."`
}

// CustodyBalance is an identity's custody, per currency.
type CustodyBalance struct {
	Agent    string            `json:"agent"`
	Balances []CurrencyBalance `json:"balances"`
}

// CurrencyBalance is one currency of an identity's custody.
type CurrencyBalance struct {
	Currency         string `json:"currency"`
	AvailableMinor   int64  `json:"availableMinor"`
	StakedMinor      int64  `json:"stakedMinor"`
	WithdrawingMinor int64  `json:"withdrawingMinor"`
	RefundingMinor   int64  `json:"refundingMinor"`
}

func (s *Service) agentOf(call Call, agent string) (string, error) {
	switch {
	case agent != "" && slices.Contains(call.Agent.Agents, agent):
		return agent, nil
	case agent == "" && len(call.Agent.Agents) == 1:
		return call.Agent.Agents[0], nil
	}
	return "", errAgentAmbiguous
}

// CustodyBalance returns the identity's balances, derived from the ledger.
func (s *Service) CustodyBalance(ctx context.Context, call Call, req *CustodyBalanceRequest) (*CustodyBalance, error) {
	agent, err := s.agentOf(call, req.Agent)
	if err != nil {
		return nil, err
	}
	out := &CustodyBalance{Agent: agent, Balances: []CurrencyBalance{}}
	err = s.st.View(ctx, func(r store.Reader) error {
		list, err := ledger.Balances(r, "agent/"+agent+"/")
		if err != nil {
			return err
		}
		idx := map[string]int{}
		for _, b := range list {
			i, ok := idx[b.Currency]
			if !ok {
				i = len(out.Balances)
				idx[b.Currency] = i
				out.Balances = append(out.Balances, CurrencyBalance{Currency: b.Currency})
			}
			cb := &out.Balances[i]
			switch rest := strings.TrimPrefix(b.Account, "agent/"+agent+"/"); {
			case rest == "available":
				cb.AvailableMinor += b.Minor
			case rest == "withdrawing":
				cb.WithdrawingMinor += b.Minor
			case rest == "refunding":
				cb.RefundingMinor += b.Minor
			case strings.HasPrefix(rest, "stake/"):
				cb.StakedMinor += b.Minor
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CustodyLedgerRequest is the body of custody.ledger.
type CustodyLedgerRequest struct {
	Agent    string `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase"`
	Currency string `json:"currency" validate:"required,min=3,max=258"`
	Account  string `json:"account,omitempty" validate:"omitempty,oneof=available withdrawing refunding" doc:"Which account of the identity: available (default), withdrawing or refunding."`
	Cursor   string `json:"cursor,omitempty" validate:"max=32"`
	Limit    int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// CustodyLedgerPage is a page of an account's ledger lines.
type CustodyLedgerPage struct {
	Account    string       `json:"account"`
	Currency   string       `json:"currency"`
	Data       []LedgerLine `json:"data"`
	HasMore    bool         `json:"hasMore"`
	NextCursor *string      `json:"nextCursor"`
}

// LedgerLine is one line of a custody account: a posting with the
// account's running balance after it.
type LedgerLine ledger.Line

// CustodyLedger pages an identity's ledger lines, oldest first, each with
// the running balance after it.
func (s *Service) CustodyLedger(ctx context.Context, call Call, req *CustodyLedgerRequest) (*CustodyLedgerPage, error) {
	if !ledger.ValidCurrency(req.Currency) {
		return nil, &contract.ValidationError{Errors: []contract.FieldError{{Field: "currency", Rule: "visible",
			Message: "must be 3 to 258 visible ASCII characters"}}}
	}
	agent, err := s.agentOf(call, req.Agent)
	if err != nil {
		return nil, err
	}
	acct := availableAccount(agent)
	switch req.Account {
	case "withdrawing":
		acct = withdrawingAccount(agent)
	case "refunding":
		acct = refundingAccount(agent)
	}
	after, limit, err := pageArgs(req.Cursor, req.Limit)
	if err != nil {
		return nil, err
	}
	out := &CustodyLedgerPage{Account: acct, Currency: req.Currency}
	var lines []ledger.Line
	err = s.st.View(ctx, func(r store.Reader) error {
		lines, out.HasMore, err = ledger.Lines(r, acct, req.Currency, after, limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	out.Data = make([]LedgerLine, len(lines))
	for i, l := range lines {
		out.Data[i] = LedgerLine(l)
	}
	if out.HasMore {
		c := fmt.Sprint(out.Data[len(out.Data)-1].Seq)
		out.NextCursor = &c
	}
	return out, nil
}
