package pay

import (
	"context"
	"errors"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/store"
)

// Evaluation is a dry run of a mandate against a spend.
type Evaluation struct {
	// MandateID is the verified mandate's id ("" when it did not verify).
	MandateID string `json:"mandateId,omitempty"`
	// Refusal, when set, is why the mandate cannot be used at all (the
	// envelope stage: malformed, expired, revoked, another agent's, the
	// identity revoked) or why nothing would move now (kill_switch_engaged);
	// Decision is then absent.
	Refusal string `json:"refusal,omitempty"`
	// Decision is what the gate would decide now.
	Decision *gate.Decision `json:"decision,omitempty"`
}

// Evaluate runs the gate on a spend under a mandate token without
// recording, reserving or counting anything: would it be allowed now, and
// if not, why. payee, amount, terms, sessionID and termsID are as in an
// instruction; the agent is the mandate's subject.
func (s *Service) Evaluate(ctx context.Context, c Caller, token, payee string, amount Amount, terms Terms, sessionID, termsID string) (*Evaluation, error) {
	m, err := s.mandates.Verify(token)
	if err != nil {
		var ue *UnauthorizedError
		if errors.As(err, &ue) {
			return &Evaluation{Refusal: string(ue.Reason)}, nil
		}
		return &Evaluation{Refusal: "mandate_invalid"}, nil
	}
	out := &Evaluation{MandateID: m.ID}
	if !c.mayActFor(m.Claims.Agent) {
		out.Refusal = string(ReasonAgentNotPermitted)
		return out, nil
	}
	in := &Instruction{Payee: payee, Amount: amount, Terms: terms, SessionID: sessionID, TermsID: termsID, Envelope: Envelope{Agent: m.Claims.Agent}}
	err = s.st.View(ctx, func(r store.Reader) error {
		now := s.now().UTC()
		ctl, err := getControl(r)
		if err != nil {
			return err
		}
		if ctl.KillSwitchEngaged {
			out.Refusal = "kill_switch_engaged"
			return nil
		}
		if revoked, err := isRevoked(r, m.ID); err != nil || revoked {
			if revoked {
				out.Refusal = string(ReasonMandateRevoked)
			}
			return err
		}
		if revoked, err := identityRevoked(r, m.Claims.Agent); err != nil || revoked {
			if revoked {
				out.Refusal = string(ReasonIdentityRevoked)
			}
			return err
		}
		input, _, _, err := s.gateInput(r, c, in, m, ctl, now)
		if err != nil {
			return err
		}
		d := gate.Decide(input)
		if d.Outcome != gate.Deny && termsID != "" {
			reason, err := s.checkTerms(r, &Intent{Payee: payee, Amount: amount, Terms: terms, TermsID: termsID,
				Agent: m.Claims.Agent, AgentKeyID: c.KeyID, MandateID: m.ID})
			if err != nil {
				return err
			}
			if reason != nil {
				d = gate.Decision{Outcome: gate.Deny, Reasons: []gate.Reason{*reason}, MandateID: m.ID}
			}
		}
		d.TripBreaker = false
		out.Decision = &d
		return nil
	})
	return out, err
}

// VerifyMandate verifies a mandate token (signature, claims, expiry)
// without using it.
func (s *Service) VerifyMandate(token string) (*Mandate, error) { return s.mandates.Verify(token) }
