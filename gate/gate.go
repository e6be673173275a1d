// Package gate makes the deny-first decision on a payment instruction.
//
// [Decide] is a pure function: it reads only its [Input] and returns a
// [Decision]. It does no I/O, keeps no state and never looks at a clock, so
// every rule can be tested exactly and a decision can be replayed from the
// record. Whatever needs storage or time is gathered by the caller first:
// the verified mandate (as a [Mandate]), the counters of the current period
// and velocity windows ([Counters], keyed with [PeriodWindow] and
// [VelocityWindow]), the deployment's [Policy] and the state of the circuit
// breaker.
//
// # Order
//
// The caller has already refused malformed instructions (400
// intent.malformed), unauthenticated calls (401), bad envelopes (403
// intent.unauthorized) and, while the kill switch is engaged, everything
// (503 settlement.frozen); none of those is a gate outcome. Decide then
// applies, in this order:
//
//  1. Deny rules: the agent is the mandate's subject, currency, payee, rail
//     (named in the mandate and known to the deployment), terms (agree with
//     the rail's facts), per-transaction cap, period cap (settled + reserved
//     + this amount), velocity, deny list. If any fails the outcome is
//     [Deny], and every failing rule is reported, not only the first.
//  2. Confirm rules, only when nothing denied: amount at or above the
//     mandate's confirmation threshold, an irreversible payment at or above
//     the irreversible threshold, the circuit breaker open. If any holds the
//     outcome is [Confirm] (a person must approve), with every such reason.
//  3. Otherwise [Allow].
//
// An Input that is itself inconsistent (an amount of zero, a mandate without
// a period, a negative counter, ...) is a bug in the caller; Decide denies it
// with the single reason [CodeInputInvalid] rather than guess.
//
// # Reasons
//
// [Decision.Reasons] lists at most one [Reason] per code, in the order of
// the rules above, which is also the order of the Code constants. Codes are
// stable and part of the wire contract; messages are for people and may
// change.
//
// # Thresholds and caps
//
// Caps are inclusive limits: a payment of exactly PerTxCapMinor is allowed,
// one minor unit more is denied; the period cap denies when settled +
// reserved + amount > PerPeriodCapMinor. Confirmation thresholds are
// inclusive too, as DESIGN §4 states ("amount ≥ confirmAboveMinor"): a
// payment of exactly ConfirmAboveMinor needs a person. A threshold of 0
// therefore confirms every payment, which is also what a mandate that omits
// the claim gets: the safe default. All sums are checked for overflow; a
// sum that would overflow counts as over the cap.
//
// # Circuit breaker
//
// While [Input.BreakerOpen], every payment that would be allowed needs a
// person instead. Decide also says when a denial should open the breaker:
// [Decision.TripBreaker] is set on a denial, while the breaker is closed,
// that brings the mandate's consecutive denials ([Counters.ConsecutiveDenials]
// plus this one) to [Policy.BreakerAfter] or more. So if an operator closes
// the breaker without the caller resetting that count, the mandate's next
// denial opens it again. Settlement failures trip the breaker too, but they
// happen after the gate and are the caller's to count.
package gate

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// MaxMinor is the largest amount, cap or threshold in minor units: 2^53 − 1,
// so that every JSON client keeps the number exact.
const MaxMinor = 1<<53 - 1

// DefaultBreakerAfter is the number of consecutive denials of one mandate
// that trips the circuit breaker when [Policy.BreakerAfter] is zero.
const DefaultBreakerAfter = 5

// Outcome is what the gate decided.
type Outcome string

const (
	// Allow: the payment may settle now.
	Allow Outcome = "allow"
	// Confirm: the payment is held until a person approves it.
	Confirm Outcome = "confirm"
	// Deny: the payment is refused.
	Deny Outcome = "deny"
)

// Reason codes, in the order Decide reports them. Deny codes come first,
// then confirm codes.
const (
	// CodeInputInvalid: the Input itself breaks its documented rules; a bug
	// in the caller. Always the only reason when present.
	CodeInputInvalid = "input_invalid"
	// CodeAgentMismatch: the agent that signed is not the mandate's subject.
	// The envelope check refuses this first; the gate re-checks it so that
	// a caller that skipped the check cannot spend another agent's mandate.
	CodeAgentMismatch = "agent_mismatch"
	// CodeCurrencyNotAllowed: the currency is not the mandate's currency.
	CodeCurrencyNotAllowed = "currency_not_allowed"
	// CodePayeeNotAllowed: no payee entry of the mandate matches.
	CodePayeeNotAllowed = "payee_not_allowed"
	// CodeRailNotAllowed: the rail is not listed in the mandate.
	CodeRailNotAllowed = "rail_not_allowed"
	// CodeRailUnknown: the deployment has no rail of that name.
	CodeRailUnknown = "rail_unknown"
	// CodeTermsMismatch: the instruction's terms disagree with the rail's
	// facts, or with the credential the request actually carried.
	CodeTermsMismatch = "terms_mismatch"
	// CodePerTxCap: the amount is above the mandate's per-transaction cap.
	CodePerTxCap = "per_tx_cap"
	// CodePeriodCap: settled + reserved + amount is above the period cap.
	CodePeriodCap = "period_cap"
	// CodeVelocity: the mandate's velocity limit is already used up.
	CodeVelocity = "velocity"
	// CodeDenyListed: the payee or the agent is on the deployment's deny list.
	CodeDenyListed = "deny_listed"

	// CodeConfirmThreshold: amount ≥ the mandate's ConfirmAboveMinor.
	CodeConfirmThreshold = "confirm_threshold"
	// CodeIrreversibleThreshold: an irreversible payment with amount ≥ the
	// mandate's IrreversibleConfirmAboveMinor.
	CodeIrreversibleThreshold = "irreversible_threshold"
	// CodeBreakerOpen: the circuit breaker is open, so nothing is allowed
	// without a person.
	CodeBreakerOpen = "breaker_open"
)

// Reason is one rule that decided the outcome.
type Reason struct {
	// Code is one of the Code constants; stable.
	Code string `json:"code"`
	// Message explains the reason to people; it may change.
	Message string `json:"message"`
}

// Decision is the gate's answer. Its JSON form is the "decision" member of
// the held (202) response and of the gate.decision record entry.
type Decision struct {
	Outcome Outcome `json:"outcome"`
	// Reasons is empty (never nil) for Allow, and non-empty otherwise.
	Reasons []Reason `json:"reasons"`
	// MandateID is the id of the mandate the decision was made under.
	MandateID string `json:"mandateId"`
	// TripBreaker is true when this denial brings the mandate's consecutive
	// denials to Policy.BreakerAfter or more while the breaker is closed:
	// the caller opens the breaker (and records breaker.tripped) in the
	// same transaction as the decision. It is not part of the wire form.
	TripBreaker bool `json:"-"`
}

// Has reports whether the decision carries a reason with the given code.
func (d Decision) Has(code string) bool {
	return slices.ContainsFunc(d.Reasons, func(r Reason) bool { return r.Code == code })
}

// Input is everything the gate needs, gathered by the caller.
type Input struct {
	// Agent is the agent id that signed the instruction (envelope.agent):
	// 64 lower-case hex digits.
	Agent string
	// Payee is the instruction's payee reference (see [ValidPayee]).
	Payee string
	// Amount is the instruction's amount in minor units, 1..MaxMinor.
	Amount int64
	// Currency is the instruction's currency, compared exactly.
	Currency string
	// Terms are the instruction's terms.
	Terms Terms
	// Credential is the kind of agent credential the request actually
	// carried, as established by the authentication layer; when set, the
	// instruction's Terms.Credential must equal it. Leave it empty only
	// when there was no HTTP credential at all (an agent runtime that embeds
	// the library in-process); the terms are then not checked against it.
	Credential Credential
	// Mandate is the verified, unrevoked mandate the instruction claims.
	Mandate Mandate
	// Counters are the mandate's usage so far, this payment excluded.
	Counters Counters
	// Policy is the deployment's policy.
	Policy Policy
	// BreakerOpen is the circuit breaker's state.
	BreakerOpen bool
	// Session is the session the instruction spends under, when it names
	// one; nil otherwise.
	Session *Session
}

// Session is what the gate knows of the session an instruction names: a
// sub-budget and lifetime under the mandate.
type Session struct {
	ID string
	// Unknown: no session of this id belongs to the caller.
	Unknown bool
	// MandateID is the mandate the session was opened under; it must be
	// the instruction's.
	MandateID string
	// Ended: closed, or its lifetime has passed.
	Ended bool
	// BudgetMinor and UsedMinor (reserved or settled so far).
	BudgetMinor, UsedMinor int64
}

// Session reason codes (deny), in the session namespace of the protocol
// surface.
const (
	CodeSessionUnknown   = "session.unknown"
	CodeSessionMismatch  = "session.mandate_mismatch"
	CodeSessionExpired   = "session.expired"
	CodeSessionExhausted = "session.exhausted"
)

// Terms are the instruction's declared terms. Field for field they are the
// "terms" object of the payment instruction.
type Terms struct {
	// Rail names the rail that is to move the money.
	Rail string
	// Reversibility must equal the rail's.
	Reversibility Reversibility
	// Finality must equal the rail's.
	Finality Finality
	// Credential must equal the credential the request carried, when known.
	Credential Credential
	// CapitalSource must be one the rail accepts.
	CapitalSource CapitalSource
	// Presence must be one the rail accepts.
	Presence Presence
}

// Reversibility says whether money can come back after settlement. The
// values are the wire strings of terms.reversibility.
type Reversibility string

const (
	// Reversible: the rail accepts refunds (cards, bank transfers).
	Reversible Reversibility = "reversible"
	// Irreversible: once settled the money cannot be pulled back (on-chain
	// transfers); the mandate's irreversible threshold applies.
	Irreversible Reversibility = "irreversible"
)

// Valid reports whether r is one of the defined values.
func (r Reversibility) Valid() bool { return r == Reversible || r == Irreversible }

// Finality says when settlement becomes final. The values are the wire
// strings of terms.finality.
type Finality string

const (
	// FinalityInstant: the rail answers with a final outcome.
	FinalityInstant Finality = "instant"
	// FinalityDeferred: the outcome becomes final later (bank transfers).
	FinalityDeferred Finality = "deferred"
)

// Valid reports whether f is one of the defined values.
func (f Finality) Valid() bool { return f == FinalityInstant || f == FinalityDeferred }

// Credential is the kind of credential the agent authenticated with. The
// values are the wire strings of terms.credential.
type Credential string

const (
	// CredentialAPIKey: a bearer agent key (Authorization: Bearer svc_ak_...).
	CredentialAPIKey Credential = "api-key"
	// CredentialDPoP: an agent key bound to a proof-of-possession key
	// (Authorization: DPoP ..., RFC 9449).
	CredentialDPoP Credential = "dpop"
)

// Valid reports whether c is one of the defined values.
func (c Credential) Valid() bool { return c == CredentialAPIKey || c == CredentialDPoP }

// CapitalSource says whose money pays. The values are the wire strings of
// terms.capitalSource.
type CapitalSource string

const (
	// CapitalPayer: the principal's own funds (balance, debit, own wallet).
	CapitalPayer CapitalSource = "payer"
	// CapitalCredit: a credit line; the principal repays later.
	CapitalCredit CapitalSource = "credit"
	// CapitalEscrow: funds held by a third party and released on conditions.
	CapitalEscrow CapitalSource = "escrow"
)

// Valid reports whether c is one of the defined values.
func (c CapitalSource) Valid() bool {
	return c == CapitalPayer || c == CapitalCredit || c == CapitalEscrow
}

// Presence says whether the principal takes part in the payment. The values
// are the wire strings of terms.presence.
type Presence string

const (
	// PresenceDelegated: the agent acts alone under a standing mandate; no
	// person is in the session (the usual case).
	PresenceDelegated Presence = "delegated"
	// PresencePresent: a person is in the session and can authenticate a
	// step-up with the rail if it asks.
	PresencePresent Presence = "present"
)

// Valid reports whether p is one of the defined values.
func (p Presence) Valid() bool { return p == PresenceDelegated || p == PresencePresent }

// Period is a mandate's spending period: a UTC calendar window, see
// [PeriodWindow].
type Period string

const (
	// Day: 00:00 UTC to the next 00:00 UTC.
	Day Period = "day"
	// Week: Monday 00:00 UTC to the next Monday 00:00 UTC (ISO 8601 weeks).
	Week Period = "week"
	// Month: the 1st 00:00 UTC to the 1st of the next month 00:00 UTC.
	Month Period = "month"
)

// Valid reports whether p is one of the defined values.
func (p Period) Valid() bool { return p == Day || p == Week || p == Month }

// Velocity limits how many payments a mandate may make in a rolling window:
// at most Count payments in any Seconds seconds (see [VelocityWindow]).
// The zero value means no velocity limit.
type Velocity struct {
	Count   int64 `json:"count"`
	Seconds int64 `json:"seconds"`
}

// IsZero reports whether v sets no limit.
func (v Velocity) IsZero() bool { return v == Velocity{} }

// Mandate is the part of a verified mandate the gate reads. The pay package
// converts its verified mandates to this type.
type Mandate struct {
	// ID is the mandate id (its jti claim).
	ID string
	// Agent is the agent id the mandate was issued to (its sub claim).
	Agent string
	// Payees lists who may be paid: exact payee references, "*.suffix"
	// patterns and "*"; see [MatchPayee].
	Payees []string
	// Currency is the only currency the mandate spends, compared exactly.
	Currency string
	// PerTxCapMinor is the largest single payment, 1..MaxMinor.
	PerTxCapMinor int64
	// PerPeriodCapMinor caps settled + reserved per Period, 1..MaxMinor.
	PerPeriodCapMinor int64
	// Period is the window of PerPeriodCapMinor.
	Period Period
	// Rails lists the rail names the mandate may use.
	Rails []string
	// ConfirmAboveMinor: payments of at least this amount need a person
	// (0..MaxMinor; 0 confirms everything).
	ConfirmAboveMinor int64
	// IrreversibleConfirmAboveMinor: irreversible payments of at least this
	// amount need a person (0..MaxMinor; 0 confirms every irreversible one).
	IrreversibleConfirmAboveMinor int64
	// Velocity is the rolling-window limit; zero means none.
	Velocity Velocity
}

// Counters are the mandate's usage so far, gathered by the caller from
// storage. None of them includes the payment being decided.
type Counters struct {
	// PeriodMinor is the sum of the mandate's settled and reserved amounts
	// (reserved: settling or held for approval) in the period window that
	// contains the decision time, [PeriodWindow](Mandate.Period, now).
	// Refunds do not reduce it: a cap limits what was spent.
	PeriodMinor int64
	// VelocityCount is the number of the mandate's payments that were
	// allowed or held (not denied) in [VelocityWindow](Mandate.Velocity, now).
	VelocityCount int64
	// ConsecutiveDenials is the number of denials of this mandate since its
	// last decision that was not a denial. The caller resets it on allow or
	// confirm.
	ConsecutiveDenials int64
}

// Policy is the deployment's own policy, which no mandate can widen.
type Policy struct {
	// Rails are the rails the deployment knows, by name, with their facts.
	// A rail not in this map is denied with [CodeRailUnknown].
	Rails map[string]RailFacts
	// DenyPayees are payee references and patterns (same grammar as a
	// mandate's payees) that are always denied. They match ignoring ASCII
	// case, so that a deny entry cannot be dodged by changing case.
	DenyPayees []string
	// DenyAgents are agent ids that are always denied, compared ignoring
	// ASCII case.
	DenyAgents []string
	// BreakerAfter is how many consecutive denials of one mandate trip the
	// circuit breaker. Zero means DefaultBreakerAfter; negative never trips.
	BreakerAfter int64
}

// RailFacts are a rail's static properties, against which the
// instruction's terms are checked.
type RailFacts struct {
	Reversibility Reversibility
	Finality      Finality
	// CapitalSources the rail accepts; empty accepts every source.
	CapitalSources []CapitalSource
	// Presences the rail accepts; empty accepts every presence.
	Presences []Presence
}

// Decide applies the gate's rules to in; see the package documentation for
// the order and the semantics of each rule.
func Decide(in Input) Decision {
	d := Decision{MandateID: in.Mandate.ID, Reasons: []Reason{}}
	if problems := in.problems(); len(problems) > 0 {
		d.Outcome = Deny
		d.Reasons = append(d.Reasons, Reason{CodeInputInvalid, "gate input invalid: " + strings.Join(problems, "; ")})
		d.TripBreaker = in.trips()
		return d
	}
	m := &in.Mandate

	// Deny rules, each reported once, in the order of the codes.
	var deny []Reason
	add := func(code, format string, args ...any) {
		deny = append(deny, Reason{code, fmt.Sprintf(format, args...)})
	}
	if in.Agent != m.Agent {
		add(CodeAgentMismatch, "the mandate was issued to another agent")
	}
	if in.Currency != m.Currency {
		add(CodeCurrencyNotAllowed, "currency %s is not the mandate's currency %s", in.Currency, m.Currency)
	}
	if !slices.ContainsFunc(m.Payees, func(p string) bool { return MatchPayee(p, in.Payee) }) {
		add(CodePayeeNotAllowed, "payee %s is not allowed by the mandate", in.Payee)
	}
	rail := in.Terms.Rail
	if !slices.Contains(m.Rails, rail) {
		add(CodeRailNotAllowed, "rail %s is not allowed by the mandate", rail)
	}
	facts, known := in.Policy.Rails[rail]
	if !known {
		add(CodeRailUnknown, "rail %s is not known to this deployment", rail)
	}
	if mismatches := in.termsMismatches(facts, known); len(mismatches) > 0 {
		add(CodeTermsMismatch, "terms disagree: %s", strings.Join(mismatches, "; "))
	}
	if in.Amount > m.PerTxCapMinor {
		add(CodePerTxCap, "amount %d is above the per-transaction cap %d", in.Amount, m.PerTxCapMinor)
	}
	if total, ok := addInt64(in.Counters.PeriodMinor, in.Amount); !ok || total > m.PerPeriodCapMinor {
		add(CodePeriodCap, "%d already spent or reserved this %s; %d more would pass the cap %d",
			in.Counters.PeriodMinor, m.Period, in.Amount, m.PerPeriodCapMinor)
	}
	if !m.Velocity.IsZero() && in.Counters.VelocityCount >= m.Velocity.Count {
		add(CodeVelocity, "%d payments in the last %d seconds; the mandate allows %d",
			in.Counters.VelocityCount, m.Velocity.Seconds, m.Velocity.Count)
	}
	var listed []string
	if slices.ContainsFunc(in.Policy.DenyPayees, func(p string) bool {
		return MatchPayee(lowerASCII(p), lowerASCII(in.Payee))
	}) {
		listed = append(listed, "the payee")
	}
	if slices.ContainsFunc(in.Policy.DenyAgents, func(a string) bool { return lowerASCII(a) == lowerASCII(in.Agent) }) {
		listed = append(listed, "the agent")
	}
	if len(listed) > 0 {
		add(CodeDenyListed, "%s is on the deployment's deny list", strings.Join(listed, " and "))
	}
	if ses := in.Session; ses != nil {
		switch {
		case ses.Unknown:
			add(CodeSessionUnknown, "session %s does not exist for this credential", ses.ID)
		case ses.MandateID != m.ID:
			add(CodeSessionMismatch, "session %s was opened under another mandate", ses.ID)
		case ses.Ended:
			add(CodeSessionExpired, "session %s is closed or expired", ses.ID)
		default:
			if total, ok := addInt64(ses.UsedMinor, in.Amount); !ok || total > ses.BudgetMinor {
				add(CodeSessionExhausted, "session %s has %d of %d left; %d asked",
					ses.ID, max(0, ses.BudgetMinor-ses.UsedMinor), ses.BudgetMinor, in.Amount)
			}
		}
	}
	if len(deny) > 0 {
		d.Outcome = Deny
		d.Reasons = deny
		d.TripBreaker = in.trips()
		return d
	}

	// Confirm rules.
	if in.Amount >= m.ConfirmAboveMinor {
		d.Reasons = append(d.Reasons, Reason{CodeConfirmThreshold,
			fmt.Sprintf("amount %d is at or above the mandate's confirmation threshold %d", in.Amount, m.ConfirmAboveMinor)})
	}
	if in.Terms.Reversibility == Irreversible && in.Amount >= m.IrreversibleConfirmAboveMinor {
		d.Reasons = append(d.Reasons, Reason{CodeIrreversibleThreshold,
			fmt.Sprintf("irreversible amount %d is at or above the mandate's threshold %d", in.Amount, m.IrreversibleConfirmAboveMinor)})
	}
	if in.BreakerOpen {
		d.Reasons = append(d.Reasons, Reason{CodeBreakerOpen, "the circuit breaker is open; a person must approve every payment"})
	}
	if len(d.Reasons) > 0 {
		d.Outcome = Confirm
		return d
	}
	d.Outcome = Allow
	return d
}

// trips reports whether a denial now trips the breaker.
func (in *Input) trips() bool {
	if in.BreakerOpen {
		return false // already open: nothing to trip
	}
	n := in.Policy.BreakerAfter
	if n == 0 {
		n = DefaultBreakerAfter
	}
	if n < 0 {
		return false
	}
	return in.Counters.ConsecutiveDenials >= n-1
}

// termsMismatches lists how the terms disagree with the rail's facts (when
// the rail is known) and with the credential the request carried.
func (in *Input) termsMismatches(f RailFacts, known bool) []string {
	var out []string
	t := &in.Terms
	if known {
		if t.Reversibility != f.Reversibility {
			out = append(out, fmt.Sprintf("reversibility is %s but rail %s is %s", t.Reversibility, t.Rail, f.Reversibility))
		}
		if t.Finality != f.Finality {
			out = append(out, fmt.Sprintf("finality is %s but rail %s is %s", t.Finality, t.Rail, f.Finality))
		}
		if len(f.CapitalSources) > 0 && !slices.Contains(f.CapitalSources, t.CapitalSource) {
			out = append(out, fmt.Sprintf("rail %s does not accept capital source %s", t.Rail, t.CapitalSource))
		}
		if len(f.Presences) > 0 && !slices.Contains(f.Presences, t.Presence) {
			out = append(out, fmt.Sprintf("rail %s does not accept presence %s", t.Rail, t.Presence))
		}
	}
	if in.Credential != "" && t.Credential != in.Credential {
		out = append(out, fmt.Sprintf("credential is %s but the request carried %s", t.Credential, in.Credential))
	}
	return out
}

// problems lists how in breaks its documented rules.
func (in *Input) problems() []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if in.Agent == "" {
		bad("agent is empty")
	}
	if in.Amount <= 0 || in.Amount > MaxMinor {
		bad("amount %d is outside 1..%d", in.Amount, MaxMinor)
	}
	if in.Currency == "" {
		bad("currency is empty")
	}
	if !ValidPayee(in.Payee) {
		bad("payee is not a valid payee reference")
	}
	t := &in.Terms
	if t.Rail == "" {
		bad("terms.rail is empty")
	}
	if !t.Reversibility.Valid() {
		bad("terms.reversibility %q is not defined", t.Reversibility)
	}
	if !t.Finality.Valid() {
		bad("terms.finality %q is not defined", t.Finality)
	}
	if !t.Credential.Valid() {
		bad("terms.credential %q is not defined", t.Credential)
	}
	if !t.CapitalSource.Valid() {
		bad("terms.capitalSource %q is not defined", t.CapitalSource)
	}
	if !t.Presence.Valid() {
		bad("terms.presence %q is not defined", t.Presence)
	}
	if in.Credential != "" && !in.Credential.Valid() {
		bad("credential %q is not defined", in.Credential)
	}
	m := &in.Mandate
	if m.ID == "" {
		bad("mandate id is empty")
	}
	if m.Agent == "" {
		bad("mandate agent is empty")
	}
	if len(m.Payees) == 0 {
		bad("mandate has no payees")
	}
	if m.Currency == "" {
		bad("mandate currency is empty")
	}
	if m.PerTxCapMinor <= 0 || m.PerTxCapMinor > MaxMinor {
		bad("mandate per-transaction cap %d is outside 1..%d", m.PerTxCapMinor, MaxMinor)
	}
	if m.PerPeriodCapMinor <= 0 || m.PerPeriodCapMinor > MaxMinor {
		bad("mandate period cap %d is outside 1..%d", m.PerPeriodCapMinor, MaxMinor)
	}
	if !m.Period.Valid() {
		bad("mandate period %q is not defined", m.Period)
	}
	if len(m.Rails) == 0 {
		bad("mandate has no rails")
	}
	if m.ConfirmAboveMinor < 0 || m.ConfirmAboveMinor > MaxMinor {
		bad("mandate confirmation threshold %d is outside 0..%d", m.ConfirmAboveMinor, MaxMinor)
	}
	if m.IrreversibleConfirmAboveMinor < 0 || m.IrreversibleConfirmAboveMinor > MaxMinor {
		bad("mandate irreversible threshold %d is outside 0..%d", m.IrreversibleConfirmAboveMinor, MaxMinor)
	}
	if v := m.Velocity; !v.IsZero() && (v.Count <= 0 || v.Seconds <= 0 || v.Seconds > MaxVelocitySeconds) {
		bad("mandate velocity needs a positive count and 1..%d seconds", MaxVelocitySeconds)
	}
	c := &in.Counters
	if c.PeriodMinor < 0 || c.VelocityCount < 0 || c.ConsecutiveDenials < 0 {
		bad("counters must not be negative")
	}
	return p
}

// addInt64 returns a+b and whether it did not overflow (both non-negative).
func addInt64(a, b int64) (int64, bool) {
	if b > 0 && a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}
