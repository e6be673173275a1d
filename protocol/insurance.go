package protocol

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespaces insurance and claim. A policy covers one of the caller's
// payments or obligations up to a limit, for a premium the configured
// schedule sets. Binding it is a spend of the premium to the insurance
// pool's payee through the gate (route protocol/insurance.bind); the pool
// is a ledger account held in custody, credited when the premium settles
// (and by deposits to its payee). A claim names a policy and a dispute
// about the covered subject; it becomes payable when the dispute is
// resolved for the claimant, and is paid from the pool into the
// claimant's available custody, never beyond the policy's limit across
// its claims. A payable claim the pool cannot cover yet waits, and the
// scheduler pays it once the pool can.

const routeInsuranceBind pay.Route = "protocol/insurance.bind"

// Pool accounts.
const (
	poolAccount          = "pool/insurance"
	poolRefundingAccount = "pool/insurance-refunding"
)

// InsuranceSchedule is the premium schedule and the pool's payee.
type InsuranceSchedule struct {
	// Payee is the insurance pool's payee: premiums pay it, and a custody
	// deposit to it funds the pool. Default DefaultInsurancePayee.
	Payee string
	// RateBps is the premium per unit of limit, in basis points.
	// Default 300 (3 %).
	RateBps int64
	// MinPremiumMinor is the smallest premium. Default 100.
	MinPremiumMinor int64
	// MaxLimitMinor is the largest limit one policy may have. Default
	// 10,000,000.
	MaxLimitMinor int64
}

// DefaultInsurancePayee is the pool's payee when the schedule names none.
const DefaultInsurancePayee = "acct:insurance.countersign.local"

func (i InsuranceSchedule) withDefaults() (InsuranceSchedule, error) {
	if i.Payee == "" {
		i.Payee = DefaultInsurancePayee
	}
	if i.RateBps == 0 {
		i.RateBps = 300
	}
	if i.MinPremiumMinor == 0 {
		i.MinPremiumMinor = 100
	}
	if i.MaxLimitMinor == 0 {
		i.MaxLimitMinor = 10_000_000
	}
	if !gate.ValidPayee(i.Payee) || i.RateBps < 0 || i.RateBps > 10_000 || i.MinPremiumMinor < 0 || i.MaxLimitMinor < 0 {
		return i, errors.New("protocol: Options.Insurance: payee must be scheme:id, RateBps 0..10000, amounts positive")
	}
	return i, nil
}

// Premium is the schedule's premium for a limit: the rate, rounded up,
// and at least the minimum.
func (i InsuranceSchedule) Premium(limitMinor int64) int64 {
	p := (limitMinor*i.RateBps + 9_999) / 10_000
	return max(p, i.MinPremiumMinor)
}

// Intent metadata of a policy.
const (
	metaPolicySubject = "policy.subject"
	metaPolicyLimit   = "policy.limitMinor"
)

// Problem codes of insurance and claims.
const (
	CodeInsuranceInvalid  = "insurance.invalid"
	CodeInsurancePremium  = "insurance.premium_mismatch"
	CodePolicyNotFound    = "insurance.not_found"
	CodeClaimNotFound     = "claim.not_found"
	CodeClaimInvalid      = "claim.invalid"
	CodeClaimExceedsLimit = "claim.exceeds_limit"
	CodeClaimExists       = "claim.exists"
	CodeClaimPolicy       = "claim.policy_inactive"
	CodeClaimDisputeLost  = "claim.dispute_lost"
	ReasonAlreadyCovered  = "insurance.already_covered"
	ReasonNothingToCover  = "insurance.nothing_to_cover"
)

var (
	errInsuranceInvalid  = errcode.New(CodeInsuranceInvalid, "protocol: the insurance request breaks a rule")
	errInsurancePremium  = errcode.New(CodeInsurancePremium, "protocol: the spend is not the premium the schedule sets")
	errPolicyNotFound    = errcode.New(CodePolicyNotFound, "protocol: no such policy")
	errClaimNotFound     = errcode.New(CodeClaimNotFound, "protocol: no such claim")
	errClaimInvalid      = errcode.New(CodeClaimInvalid, "protocol: the claim breaks a rule")
	errClaimExceedsLimit = errcode.New(CodeClaimExceedsLimit, "protocol: the claim is more than the policy's limit has left")
	errClaimExists       = errcode.New(CodeClaimExists, "protocol: a claim on this dispute exists already")
	errClaimPolicy       = errcode.New(CodeClaimPolicy, "protocol: the policy is not in force (its premium has not settled, or it was refunded)")
	errClaimDisputeLost  = errcode.New(CodeClaimDisputeLost, "protocol: the dispute was resolved for the respondent")
)

// InsuranceQuoteRequest is the body of insurance.quote.
type InsuranceQuoteRequest struct {
	Subject    string `json:"subject" validate:"required,max=64" doc:"The payment (int_) or obligation (obl_) of the caller to cover."`
	LimitMinor int64  `json:"limitMinor" validate:"gt=0,lt=9007199254740992" doc:"The most the policy pays out, in the subject's currency."`
}

// InsuranceQuote is the schedule's answer: bind with exactly this premium.
type InsuranceQuote struct {
	Subject string     `json:"subject"`
	Limit   pay.Amount `json:"limit"`
	Premium pay.Amount `json:"premium"`
	Payee   string     `json:"payee" doc:"The pool's payee: the premium spend pays it."`
	RateBps int64      `json:"rateBps"`
}

// InsuranceQuote prices a policy from the schedule. It changes nothing.
func (s *Service) InsuranceQuote(ctx context.Context, call Call, req *InsuranceQuoteRequest) (*InsuranceQuote, error) {
	subj, err := s.subjectOf(ctx, call, req.Subject)
	if err != nil {
		return nil, err
	}
	if req.LimitMinor > s.insure.MaxLimitMinor {
		return nil, fmt.Errorf("%w: the limit is above the schedule's %d", errInsuranceInvalid, s.insure.MaxLimitMinor)
	}
	cur := subj.intent.Amount.Currency
	return &InsuranceQuote{Subject: req.Subject, Limit: pay.Amount{Minor: req.LimitMinor, Currency: cur},
		Premium: pay.Amount{Minor: s.insure.Premium(req.LimitMinor), Currency: cur}, Payee: s.insure.Payee, RateBps: s.insure.RateBps}, nil
}

// InsuranceBindRequest is the body of insurance.bind.
type InsuranceBindRequest struct {
	Spend      pay.Instruction `json:"spend" doc:"The premium: pays the pool's payee exactly the quoted premium, signed for insurance.bind."`
	Subject    string          `json:"subject" validate:"required,max=64"`
	LimitMinor int64           `json:"limitMinor" validate:"gt=0,lt=9007199254740992"`
}

// Policy is an insurance policy.
type InsurancePolicy struct {
	ID       string     `json:"id" doc:"pol_ followed by the premium intent id's suffix."`
	Status   string     `json:"status" doc:"pending_approval, binding (the premium is settling), active, void (premium refunded), denied, failed, expired or declined (an operator refused the premium while it waited for approval)."`
	IntentID string     `json:"intentId" doc:"The premium's intent."`
	Subject  string     `json:"subject"`
	Limit    pay.Amount `json:"limit"`
	Premium  pay.Amount `json:"premium"`
	// ClaimedMinor is what its claims that are not rejected ask; PaidMinor
	// what the pool paid.
	ClaimedMinor int64     `json:"claimedMinor"`
	PaidMinor    int64     `json:"paidMinor"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	Entries      []uint64  `json:"entries"`
}

// PolicyBound is the answer of insurance.bind.
type PolicyBound struct {
	InsurancePolicy
	Approval *pay.Held `json:"approval,omitempty"`
	replayed bool
}

// WasReplayed reports an idempotent repeat.
func (p *PolicyBound) WasReplayed() bool { return p.replayed }

// IsAccepted reports a premium held for approval (202).
func (p *PolicyBound) IsAccepted() bool { return p.Status == string(pay.StatusPendingApproval) }

func policyStatus(in *pay.Intent) string {
	switch in.Status {
	case pay.StatusSettled, pay.StatusPartiallyRefunded:
		return "active"
	case pay.StatusRefunded:
		return "void"
	case pay.StatusSettling:
		return "binding"
	}
	return string(in.Status)
}

func (s *Service) policyOf(r store.Reader, in *pay.Intent, entries []uint64) (InsurancePolicy, error) {
	id, _ := prefixID(in.ID, "int_", "pol_")
	limit, _ := strconv.ParseInt(in.Metadata[metaPolicyLimit], 10, 64)
	p := InsurancePolicy{ID: id, Status: policyStatus(in), IntentID: in.ID, Subject: in.Metadata[metaPolicySubject],
		Limit: pay.Amount{Minor: limit, Currency: in.Amount.Currency}, Premium: in.Amount,
		CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt, Entries: entries}
	if p.Entries == nil {
		p.Entries = []uint64{}
	}
	var err error
	p.ClaimedMinor, p.PaidMinor, err = policyClaims(r, id)
	return p, err
}

// InsuranceBind binds a policy: the premium passes the gate and settles
// into the pool; the policy is active once it has.
func (s *Service) InsuranceBind(ctx context.Context, call Call, req *InsuranceBindRequest) (*PolicyBound, error) {
	subj, err := s.subjectOf(ctx, call, req.Subject)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Spend.Payee != s.insure.Payee:
		return nil, fmt.Errorf("%w: the premium pays %s", errWrongPayee, s.insure.Payee)
	case req.LimitMinor > s.insure.MaxLimitMinor:
		return nil, fmt.Errorf("%w: the limit is above the schedule's %d", errInsuranceInvalid, s.insure.MaxLimitMinor)
	case req.Spend.Amount.Currency != subj.intent.Amount.Currency || req.Spend.Amount.Minor != s.insure.Premium(req.LimitMinor):
		return nil, fmt.Errorf("%w: the premium for a limit of %d is %d %s", errInsurancePremium, req.LimitMinor,
			s.insure.Premium(req.LimitMinor), subj.intent.Amount.Currency)
	}
	if req.LimitMinor > subj.intent.Amount.Minor {
		return nil, fmt.Errorf("%w: the limit is above the subject's amount (%d)", errInsuranceInvalid, subj.intent.Amount.Minor)
	}
	meta := map[string]string{metaPolicySubject: req.Subject, metaPolicyLimit: strconv.FormatInt(req.LimitMinor, 10)}
	res, err := s.spend(ctx, call, routeInsuranceBind, "insurance.bind", &req.Spend, req, nil, meta)
	if err != nil {
		return nil, err
	}
	// The first answer is kept, so a replay is the same bytes whatever
	// happened to the policy since (an approval, claims).
	var out PolicyBound
	answer := []byte("protocol/policy-answer/" + res.IntentID)
	err = s.st.Update(ctx, func(txn store.Txn) error {
		out = PolicyBound{}
		if err := getJSON(txn, answer, &out); err == nil {
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		in, err := s.books.Intent(txn, res.IntentID)
		if err != nil {
			return err
		}
		seqs, err := s.books.IntentEntrySeqs(txn, in.ID)
		if err != nil {
			return err
		}
		if out.InsurancePolicy, err = s.policyOf(txn, in, seqs); err != nil {
			return err
		}
		out.Approval = res.Held
		return putJSON(txn, answer, &out)
	})
	if err != nil {
		return nil, err
	}
	out.replayed = res.Replayed
	return &out, nil
}

func policyBySubject(subject string) []byte { return []byte("protocol/policy-by-subject/" + subject) }

// bindAdmit lets one live policy cover a subject that can still suffer a
// loss: a second bind while one is pending or active is denied
// insurance.already_covered; a subject refunded, never paid or already
// disputed insurance.nothing_to_cover.
func (s *Service) bindAdmit(txn store.Txn, in *pay.Intent) (*gate.Reason, error) {
	subject := in.Metadata[metaPolicySubject]
	// What the subject is now, decided with the premium (so a replay of
	// an admitted bind answers its first outcome, whatever came since).
	subjIntent := subject
	if id, ok := prefixID(subject, "obl_", "int_"); ok {
		subjIntent = id
	}
	sub, err := s.books.Intent(txn, subjIntent)
	if err != nil {
		return nil, err
	}
	switch sub.Status {
	case pay.StatusDenied, pay.StatusFailed, pay.StatusExpired, pay.StatusVoided, pay.StatusRefunded, pay.StatusDeclined:
		return &gate.Reason{Code: ReasonNothingToCover, Message: "the subject is " + string(sub.Status) + "; there is nothing to cover"}, nil
	}
	if disputed, err := hasAny(txn, disputeBySubject(subject)); err != nil {
		return nil, err
	} else if disputed {
		return &gate.Reason{Code: ReasonNothingToCover, Message: "the subject is disputed already: cover is bought before a loss, not after"}, nil
	}
	k := policyBySubject(subject)
	if b, err := txn.Get(k); err == nil {
		prior, err := s.books.Intent(txn, string(b))
		if err != nil {
			return nil, err
		}
		switch prior.Status {
		case pay.StatusDenied, pay.StatusFailed, pay.StatusExpired, pay.StatusRefunded, pay.StatusDeclined:
		default:
			return &gate.Reason{Code: ReasonAlreadyCovered, Message: "a policy covers this subject already"}, nil
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return nil, txn.Set(k, []byte(in.ID))
}

// bindChanged credits the pool with a settled premium (and takes a
// refunded one back out), and records protocol.insurance.{step}.
func (s *Service) bindChanged(txn store.Txn, in *pay.Intent, step pay.Step, requestID string) error {
	if err := s.creditChanged(txn, in, step, "premium", poolAccount, poolRefundingAccount); err != nil {
		return err
	}
	name := stepNames[step]
	if step == pay.StepDecided {
		name = "bind"
	}
	p, err := s.policyOf(txn, in, nil)
	if err != nil {
		return err
	}
	_, err = s.recordIntent(txn, "protocol.insurance."+name, in, step, requestID, p)
	return err
}

// PolicyRef names a policy.
type PolicyRef struct {
	PolicyID string `json:"policyId" validate:"required,max=64"`
}

func (s *Service) policyIntent(ctx context.Context, call Call, id string) (*pay.Intent, error) {
	return s.routedIntent(ctx, call, id, "pol_", routeInsuranceBind, errPolicyNotFound)
}

// InsuranceGet returns a policy of the caller.
func (s *Service) InsuranceGet(ctx context.Context, call Call, req *PolicyRef) (*InsurancePolicy, error) {
	in, err := s.policyIntent(ctx, call, req.PolicyID)
	if err != nil {
		return nil, err
	}
	var p InsurancePolicy
	err = s.st.View(ctx, func(r store.Reader) error {
		seqs, err := s.books.IntentEntrySeqs(r, in.ID)
		if err != nil {
			return err
		}
		p, err = s.policyOf(r, in, seqs)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// Claim statuses.
const (
	ClaimFiled    = "filed"
	ClaimPayable  = "payable"
	ClaimPaid     = "paid"
	ClaimRejected = "rejected"
)

// Claim is a claim on a policy.
type Claim struct {
	ID         string     `json:"id" doc:"clm_..."`
	Status     string     `json:"status" doc:"filed, payable (the dispute was resolved for the claimant; paid as soon as the pool can), paid or rejected."`
	PolicyID   string     `json:"policyId"`
	DisputeID  string     `json:"disputeId"`
	Agent      string     `json:"agent" doc:"The claimant identity: the pool pays its available custody."`
	AgentKeyID string     `json:"agentKeyId"`
	Amount     pay.Amount `json:"amount"`
	PaidMinor  int64      `json:"paidMinor"`
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	Entries    []uint64   `json:"entries"`
}

func claimKey(id string) []byte              { return []byte("protocol/claim/" + id) }
func claimsByDispute(dsp string) []byte      { return []byte("protocol/claims-by-dispute/" + dsp + "/") }
func claimsByPolicy(pol string) []byte       { return []byte("protocol/claims-by-policy/" + pol + "/") }
func claimsOf(key string) string             { return keyClaimsOf + key + "/" }
func claimPayableKey(id string) []byte       { return []byte("protocol/claim-payable/" + id) }
func claimOfDispute(dsp string) []byte       { return []byte("protocol/claim-of-dispute/" + dsp) }
func policyClaimKey(pol, clm string) []byte  { return append(claimsByPolicy(pol), clm...) }
func disputeClaimKey(dsp, clm string) []byte { return append(claimsByDispute(dsp), clm...) }

// policyClaims sums a policy's claims: what the claims not rejected ask,
// and what the pool paid.
func policyClaims(r store.Reader, pol string) (claimed, paid int64, err error) {
	prefix := claimsByPolicy(pol)
	it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
	for it.Next() {
		var c Claim
		if err := getJSON(r, claimKey(string(it.Key()[len(prefix):])), &c); err != nil {
			it.Close()
			return 0, 0, err
		}
		if c.Status != ClaimRejected {
			claimed += c.Amount.Minor
		}
		paid += c.PaidMinor
	}
	return claimed, paid, it.Close()
}

// ClaimFileRequest is the body of claim.file.
type ClaimFileRequest struct {
	PolicyID    string `json:"policyId" validate:"required,max=64"`
	DisputeID   string `json:"disputeId" validate:"required,max=64" doc:"The caller's dispute about the policy's subject."`
	AmountMinor int64  `json:"amountMinor" validate:"gt=0,lt=9007199254740992" doc:"What to claim, at most what the limit has left."`
}

// ClaimFile files a claim (protocol.claim.file). Filed on a dispute already
// resolved for the claimant, it is payable and paid at once.
func (s *Service) ClaimFile(ctx context.Context, call Call, req *ClaimFileRequest) (*Claim, error) {
	in, err := s.policyIntent(ctx, call, req.PolicyID)
	if err != nil {
		return nil, err
	}
	var c Claim
	err = s.log.Update(ctx, func(txn store.Txn) error {
		cur, err := s.books.Intent(txn, in.ID)
		if err != nil {
			return err
		}
		pol, err := s.policyOf(txn, cur, nil)
		if err != nil {
			return err
		}
		if pol.Status != "active" {
			return errClaimPolicy
		}
		var d Dispute
		if err := readDispute(txn, call, req.DisputeID, &d); err != nil {
			return err
		}
		switch {
		case !actsFor(call, d.Claimant):
			return fmt.Errorf("%w: only the claimant of the dispute claims on it", errClaimInvalid)
		case d.Subject != pol.Subject:
			return fmt.Errorf("%w: the dispute is about %s, the policy covers %s", errClaimInvalid, d.Subject, pol.Subject)
		case d.Resolution != nil && d.Resolution.Outcome == ForRespondent:
			return errClaimDisputeLost
		case req.AmountMinor > d.Claim.Minor:
			return fmt.Errorf("%w: the claim is more than the dispute's %d", errClaimExceedsLimit, d.Claim.Minor)
		case pol.ClaimedMinor+req.AmountMinor > pol.Limit.Minor:
			return fmt.Errorf("%w: %d of %d left", errClaimExceedsLimit, pol.Limit.Minor-pol.ClaimedMinor, pol.Limit.Minor)
		}
		if _, err := txn.Get(claimOfDispute(d.ID)); err == nil {
			return errClaimExists
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := s.clock()
		c = Claim{ID: ids.New("clm_"), Status: ClaimFiled, PolicyID: pol.ID, DisputeID: d.ID, Agent: d.Claimant,
			AgentKeyID: call.Agent.KeyID, Amount: pay.Amount{Minor: req.AmountMinor, Currency: pol.Limit.Currency}, CreatedAt: now, UpdatedAt: now}
		for _, k := range [][]byte{claimOfDispute(d.ID), policyClaimKey(pol.ID, c.ID), disputeClaimKey(d.ID, c.ID)} {
			if err := txn.Set(k, []byte(c.ID)); err != nil {
				return err
			}
		}
		if err := s.putClaim(txn, call, "protocol.claim.file", &c); err != nil {
			return err
		}
		if err := txn.Set(seqlist.Key(claimsOf(c.AgentKeyID), c.Entries[0], c.ID), []byte(c.ID)); err != nil {
			return err
		}
		if d.Resolution != nil {
			return s.makePayable(txn, call, &c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func (s *Service) putClaim(txn store.Txn, call Call, typ string, c *Claim) error {
	return putObject(s, txn, call, typ, "", claimKey(c.ID), c)
}

// settleClaims makes a resolved dispute's claims payable (and pays them
// when the pool can) or rejects them, inside the resolution's transaction.
func (s *Service) settleClaims(txn store.Txn, call Call, dsp string, forClaimant bool) ([]string, error) {
	prefix := claimsByDispute(dsp)
	it := txn.Iterate(prefix, store.PrefixEnd(prefix), false)
	var list []string
	for it.Next() {
		list = append(list, string(it.Key()[len(prefix):]))
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	for _, id := range list {
		var c Claim
		if err := getJSON(txn, claimKey(id), &c); err != nil {
			return nil, err
		}
		if c.Status != ClaimFiled {
			continue
		}
		if !forClaimant {
			c.Status, c.UpdatedAt = ClaimRejected, s.clock()
			if err := s.putClaim(txn, call, "protocol.claim.reject", &c); err != nil {
				return nil, err
			}
			continue
		}
		if err := s.makePayable(txn, call, &c); err != nil {
			return nil, err
		}
	}
	if list == nil {
		list = []string{}
	}
	return list, nil
}

// makePayable pays a claim from the pool, or queues it payable when the
// pool is short.
func (s *Service) makePayable(txn store.Txn, call Call, c *Claim) error {
	polIntent, _ := prefixID(c.PolicyID, "pol_", "int_")
	in, err := s.books.Intent(txn, polIntent)
	if err != nil {
		return err
	}
	if policyStatus(in) != "active" {
		// The premium was refunded since the claim was filed: no cover.
		c.Status, c.UpdatedAt = ClaimRejected, s.clock()
		if err := txn.Delete(claimPayableKey(c.ID)); err != nil {
			return err
		}
		return s.putClaim(txn, call, "protocol.claim.reject", c)
	}
	err = s.post(txn, "claim.pay", c.ID, c.Amount.Currency, move(poolAccount, availableAccount(c.Agent), c.Amount.Minor)...)
	c.UpdatedAt = s.clock()
	switch {
	case errors.Is(err, ledger.ErrInsufficientFunds):
		c.Status = ClaimPayable
		if err := txn.Set(claimPayableKey(c.ID), nil); err != nil {
			return err
		}
		return s.putClaim(txn, call, "protocol.claim.payable", c)
	case err != nil:
		return err
	}
	c.Status, c.PaidMinor = ClaimPaid, c.Amount.Minor
	if err := txn.Delete(claimPayableKey(c.ID)); err != nil {
		return err
	}
	return s.putClaim(txn, call, "protocol.claim.pay", c)
}

// payClaims is the scheduler's part: payable claims are paid once the
// pool can cover them, oldest first.
func (s *Service) payClaims(ctx context.Context) (int, error) {
	n := 0
	err := s.log.Update(ctx, func(txn store.Txn) error {
		n = 0
		prefix := []byte("protocol/claim-payable/")
		it := txn.Iterate(prefix, store.PrefixEnd(prefix), false)
		var due []string
		for it.Next() && len(due) < 1000 {
			due = append(due, string(it.Key()[len(prefix):]))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, id := range due {
			var c Claim
			if err := getJSON(txn, claimKey(id), &c); err != nil {
				return err
			}
			bal, err := ledger.Balance(txn, poolAccount, c.Amount.Currency)
			if err != nil {
				return err
			}
			if bal < c.Amount.Minor {
				continue
			}
			if err := s.makePayable(txn, systemCall(""), &c); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

// ClaimRef names a claim.
type ClaimRef struct {
	ClaimID string `json:"claimId" validate:"required,max=64"`
}

// ClaimGet returns a claim of the caller.
func (s *Service) ClaimGet(ctx context.Context, call Call, req *ClaimRef) (*Claim, error) {
	var c Claim
	err := s.st.View(ctx, func(r store.Reader) error {
		err := getJSON(r, claimKey(req.ClaimID), &c)
		if errors.Is(err, store.ErrNotFound) || (err == nil && c.AgentKeyID != call.Agent.KeyID) {
			return errClaimNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// ClaimListRequest is the body of claim.list.
type ClaimListRequest struct {
	Status string `json:"status,omitempty" validate:"omitempty,oneof=filed payable paid rejected"`
	Cursor string `json:"cursor,omitempty" validate:"max=64" doc:"Opaque: the nextCursor of the previous page."`
	Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// ClaimList is a page of claims, oldest first.
type ClaimList struct {
	Claims     []Claim `json:"claims"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// ClaimList pages the caller's claims.
func (s *Service) ClaimList(ctx context.Context, call Call, req *ClaimListRequest) (*ClaimList, error) {
	items, next, err := listPage(ctx, s, claimsOf(call.Agent.KeyID), "clm_", req.Cursor, req.Limit,
		func(r store.Reader, id string) (Claim, bool, error) {
			var c Claim
			if err := getJSON(r, claimKey(id), &c); err != nil {
				return c, false, err
			}
			return c, req.Status == "" || c.Status == req.Status, nil
		})
	if err != nil {
		return nil, err
	}
	return &ClaimList{Claims: items, NextCursor: next}, nil
}

func (c *Claim) entryList() *[]uint64 { return &c.Entries }
