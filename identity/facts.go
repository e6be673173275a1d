package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
)

// Sources are the running components a deployment's disclosure is read
// from. Nothing in a disclosure is written by hand: the constitution is the
// gate's policy in force, the tools are the contract model's operations,
// the capital is the mandates the money path has honoured.
type Sources struct {
	// Policy returns the gate policy in force (pay.Service.Policy).
	Policy func() pay.Policy
	// Mandates returns the live mandates (pay.Service.Mandates).
	Mandates func(ctx context.Context) ([]pay.KnownMandate, error)
	// Operations are the contract model's operations.
	Operations []contract.Operation
	// Operator is the deploying party.
	Operator OperatorFacts
	// SystemPrompt is the prompt the agents of this deployment run under,
	// if the operator configured one; nil discloses the SHA-256 of the
	// empty prompt with promptVersion "none" (this deployment is a gate,
	// and no model prompt is part of it).
	SystemPrompt []byte
	// PromptVersion labels SystemPrompt.
	PromptVersion string
	// RecordOrigin names the signed record, cited as evidence.
	RecordOrigin string
}

// OperatorFacts describe the deploying party.
type OperatorFacts struct {
	// ID is the operator's stable, possibly pseudonymous, identifier.
	ID string
	// Keys are the operator public keys the deployment trusts; their
	// RFC 7638 thumbprints are the attestation's evidence.
	Keys []operator.PublicKey
	// DeniabilityBoundary states what the operator is and is not
	// accountable for.
	DeniabilityBoundary string
}

// DefaultDeniabilityBoundary is disclosed when the operator configured
// none: what this software makes true whoever runs it.
const DefaultDeniabilityBoundary = "The operator is accountable for every mandate it signs (caps, period budgets, payees, " +
	"rails, expiry), for every approval, refund, kill-switch and breaker action taken with its keys, and for the " +
	"configuration of the gate disclosed here. It is not accountable for a counterparty's goods, services or " +
	"statements, for payments refused by the gate, or for outcomes outside the mandates it signed."

// AttestationScheme is the reverse-domain attestation scheme of a
// deployment whose operator is attested by its signing keys.
const AttestationScheme = "dev.countersign.operator-keys"

// Facts gathers the facts of a disclosure from src; it is the
// Options.Facts of a server's identity service.
func (src Sources) Facts(ctx context.Context) (Facts, error) {
	if src.Policy == nil || src.Mandates == nil {
		return Facts{}, fmt.Errorf("identity: Sources.Policy and Mandates are required")
	}
	mandates, err := src.Mandates(ctx)
	if err != nil {
		return Facts{}, err
	}
	f := Facts{
		SystemPrompt: promptOf(src.SystemPrompt, src.PromptVersion),
		Constitution: GateConstitution(src.Policy(), src.RecordOrigin),
		Tools:        ToolsOf(src.Operations),
		Capital:      CapitalOf(mandates),
		Operator:     src.Operator.identity(),
		Provenance: map[string]FieldProvenance{
			"constitution": {DerivedFrom: "countersign-gate", AttestedBy: src.RecordOrigin},
			"tools":        {DerivedFrom: "countersign-contract-model"},
			"capital":      {DerivedFrom: "countersign-mandates"},
			"operator":     {DerivedFrom: "configuration"},
			"systemPrompt": {DerivedFrom: "configuration"},
		},
	}
	return f, nil
}

func promptOf(prompt []byte, version string) SystemPrompt {
	sum := sha256.Sum256(prompt)
	p := SystemPrompt{Algorithm: "sha256", Digest: hex.EncodeToString(sum[:]), PromptVersion: version}
	if prompt == nil && version == "" {
		p.PromptVersion = "none"
	}
	return p
}

func (o OperatorFacts) identity() OperatorIdentity {
	id := OperatorIdentity{
		OperatorID:          o.ID,
		Attestation:         Attestation{Scheme: "none", Level: "none"},
		DeniabilityBoundary: o.DeniabilityBoundary,
	}
	if id.OperatorID == "" {
		id.OperatorID = "unnamed-operator"
	}
	if id.DeniabilityBoundary == "" {
		id.DeniabilityBoundary = DefaultDeniabilityBoundary
	}
	var prints []string
	for _, k := range o.Keys {
		if tp, err := auth.Thumbprint(k.Public); err == nil {
			prints = append(prints, k.KeyID+"="+tp)
		}
	}
	if len(prints) > 0 {
		id.Attestation = Attestation{Scheme: AttestationScheme, Level: "signed",
			Evidence: "operator key set, RFC 7638 SHA-256 thumbprints: " + strings.Join(prints, ", ") +
				". Every mandate and every operator action is signed by one of these keys."}
	}
	return id
}

// GateConstitution projects the gate policy in force onto ADP's
// constitution: one hard constraint per rule of the gate (gate.Decide's
// order), the policy's values as parameters, enforced, and its digest. The
// digest is the deployment's policy hash: the record shows it (a
// gate.policy entry at every start whose policy changed) and so does the
// protocol surface's oversight.policy.
func GateConstitution(p pay.Policy, origin string) Constitution {
	rails := make([]string, len(p.Rails))
	for i, r := range p.Rails {
		rails[i] = fmt.Sprintf("%s (%s, %s)", r.Name, r.Reversibility, r.Finality)
	}
	railList := strings.Join(rails, "; ")
	if railList == "" {
		railList = "none"
	}
	breaker := fmt.Sprintf("After %d consecutive settlement failures, or consecutive denials of one mandate, the circuit breaker opens: every payment that would be allowed then waits for a person until an operator resets it.", p.BreakerAfter)
	if p.BreakerAfter < 0 {
		breaker = "The circuit breaker never opens on its own; an operator may still hold every payment with the kill switch."
	}
	hc := []HardConstraint{
		{ID: "signed-instruction", Kind: "scope", Description: "A payment is considered only when the agent's Ed25519 signature over its canonical form verifies, under a mandate signed by a trusted operator key that is unexpired and unrevoked."},
		{ID: "agent-is-mandate-subject", Kind: "scope", Description: "The agent that signed must be the mandate's subject."},
		{ID: "mandate-currency", Kind: "scope", Description: "The currency must be the mandate's currency."},
		{ID: "mandate-payees", Kind: "scope", Description: "The payee must match one of the mandate's payees."},
		{ID: "mandate-rails", Kind: "scope", Description: "The rail must be one the mandate names."},
		{ID: "known-rails", Kind: "deny", Description: "Only rails this deployment knows are used: " + railList + "."},
		{ID: "terms-match-rail", Kind: "deny", Description: "The instruction's terms (reversibility, finality, credential) must agree with the rail's facts and the credential presented."},
		{ID: "per-transaction-cap", Kind: "cap", Description: "No single payment exceeds the mandate's per-transaction cap."},
		{ID: "period-cap", Kind: "cap", Description: "Settled plus reserved spend in the mandate's day, week or month never exceeds its period cap."},
		{ID: "velocity", Kind: "velocity", Description: "No more payments in a rolling window than the mandate's velocity limit allows."},
		{ID: "deny-list", Kind: "deny", Description: fmt.Sprintf("Payees (%d entries) and agents (%d entries) on the deployment's deny list are always refused.", len(p.DenyPayees), len(p.DenyAgents))},
		{ID: "confirm-threshold", Kind: "other", Description: "A payment at or above the mandate's confirmation threshold, or an irreversible one at or above its irreversible threshold, waits for a person's signed approval."},
		{ID: "circuit-breaker", Kind: "other", Description: breaker},
		{ID: "kill-switch", Kind: "other", Description: "An operator-signed kill switch freezes every settlement, approval and refund until released."},
		{ID: "operator-rationale", Kind: "rationale", Description: fmt.Sprintf("Every operator action carries a rationale of at least %d characters, written into the signed record.", operator.MinRationaleLen)},
	}
	params := map[string]any{
		"gateOrder":                   "deny-first: deny rules, then confirm rules, then allow",
		"minRationaleLength":          int64(operator.MinRationaleLen),
		"breakerAfter":                p.BreakerAfter,
		"approvalWindowSeconds":       p.ApprovalWindowSeconds,
		"idempotencyRetentionSeconds": p.IdempotencyRetentionSeconds,
		"rails":                       strings.Join(railNames(p), ","),
		"denyPayees":                  strings.Join(p.DenyPayees, ","),
		"denyAgents":                  strings.Join(p.DenyAgents, ","),
		"maxMinor":                    int64(gate.MaxMinor),
		"killSwitch":                  "operator-signed",
	}
	evidence := "Enforced by gate.Decide inside pay.Service on the only value-moving path; every decision is a signed gate.decision entry of the record"
	if origin != "" {
		evidence += " (origin " + origin + ")"
	}
	evidence += ", and this digest is recorded in a gate.policy entry."
	c := Constitution{HardConstraints: hc, Parameters: params, Enforced: true, EnforcementEvidence: evidence}
	c.Digest = ConstitutionDigest(c)
	return c
}

func railNames(p pay.Policy) []string {
	out := make([]string, len(p.Rails))
	for i, r := range p.Rails {
		out[i] = r.Name
	}
	return out
}

// ToolsOf projects the contract model's operations onto ADP's tool
// inventory: operator-signed operations are operator_only, operations that
// move value are gated (they pass the gate), the rest read_only.
func ToolsOf(ops []contract.Operation) ToolInventory {
	inv := ToolInventory{Tools: make([]Tool, 0, len(ops)),
		ValuePath: "pay.Service.Authorize: signed instruction → gate.Decide → signed record → two-phase settlement"}
	for _, op := range ops {
		t := Tool{Name: op.ID, Description: op.Method + " " + op.Path + ": " + op.Summary, MovesValue: op.MovesValue}
		switch {
		case op.Credential == contract.CredentialOperator:
			t.Access = "operator_only"
		case op.MovesValue:
			t.Access = "gated"
		default:
			t.Access = "read_only"
		}
		inv.Tools = append(inv.Tools, t)
	}
	return inv
}

// CapitalOf projects the live mandates onto ADP's capital envelope. The
// deployment holds no funds of its own: custody is non_custodial.
func CapitalOf(ms []pay.KnownMandate) Capital {
	c := Capital{Mandates: make([]MandateDisclosure, 0, len(ms)), Custody: "non_custodial"}
	for _, m := range ms {
		scope := "agent " + m.Agent + " may pay " + strings.Join(m.Payees, ", ")
		if m.Velocity.Count > 0 {
			scope += "; at most " + strconv.FormatInt(m.Velocity.Count, 10) + " payments per " +
				strconv.FormatInt(m.Velocity.Seconds, 10) + " s"
		}
		scope += fmt.Sprintf("; payments of %d or more wait for %d approval(s)", m.ConfirmAboveMinor, max(1, m.Approvals))
		c.Mandates = append(c.Mandates, MandateDisclosure{
			Label: m.ID, Scope: scope, Currency: m.Currency,
			PerTxCapMinor: m.PerTxCapMinor, PerPeriodCapMinor: m.PerPeriodCapMinor,
			Period: string(m.Period), AllowedRails: slices.Clone(m.Rails),
			ExpiresAt: Timestamp(m.ExpiresAt),
		})
	}
	if agg, ok := aggregate(ms); ok {
		c.AggregatePerPeriodCapMinor = &agg
	}
	return c
}

// aggregate sums the period caps when every mandate shares one currency and
// one period; otherwise no single aggregate is true.
func aggregate(ms []pay.KnownMandate) (int64, bool) {
	if len(ms) == 0 {
		return 0, false
	}
	var sum int64
	for _, m := range ms {
		if m.Currency != ms[0].Currency || m.Period != ms[0].Period {
			return 0, false
		}
		sum += m.PerPeriodCapMinor
		if sum > gate.MaxMinor {
			return 0, false
		}
	}
	return sum, true
}
