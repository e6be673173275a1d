package protocol

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace terms: two-party terms between one of the caller's agent
// identities (who pays) and a counterparty (an ADP agent id: 64 hex or an
// Ed25519 did:key). Proposed terms are accepted when the counterparty's
// own Ed25519 signature over their canonical bytes is presented; from then
// on an instruction citing termsId is checked in the deciding transaction
// (payee, amount, currency, rail, validity) and denied unless it matches.
// Terms may name a stake of the counterparty (a bond it holds in custody
// here): by signing, the counterparty puts it at stake, and a dispute
// resolved against it may slash it.

// Terms statuses.
const (
	TermsStatusProposed = "proposed"
	TermsStatusAccepted = "accepted"
)

// Problem codes of terms and negotiation.
const (
	CodeTermsNotFound       = "terms.not_found"
	CodeTermsInvalid        = "terms.invalid"
	CodeTermsSignature      = "terms.bad_signature"
	CodeTermsAccepted       = "terms.already_accepted"
	CodeTermsExpired        = "terms.expired"
	CodeCounterpartyRevoked = "terms.counterparty_revoked"
)

// Gate reasons of an instruction citing terms.
const (
	ReasonTermsNotAccepted = "terms.not_accepted"
	ReasonTermsExpired     = "terms.expired"
	ReasonTermsMismatch    = "terms.mismatch"
)

var (
	errTermsNotFound       = errcode.New(CodeTermsNotFound, "protocol: no such terms")
	errTermsInvalid        = errcode.New(CodeTermsInvalid, "protocol: the terms break a rule")
	errTermsSignature      = errcode.New(CodeTermsSignature, "protocol: the signature is not the counterparty's over these terms")
	errTermsAccepted       = errcode.New(CodeTermsAccepted, "protocol: the terms were already accepted with another signature")
	errTermsExpired        = errcode.New(CodeTermsExpired, "protocol: the terms are past validUntil")
	errCounterpartyRevoked = errcode.New(CodeCounterpartyRevoked, "protocol: the operator revoked this counterparty")
)

// TermsBody is what two parties agree on.
type TermsBody struct {
	Payee         string        `json:"payee" validate:"required,max=255,printascii" doc:"Who is paid (scheme:id, as in /pay)."`
	Amount        pay.Amount    `json:"amount"`
	Rail          string        `json:"rail,omitempty" validate:"max=64" doc:"The rail the payment must use; any when omitted."`
	Description   string        `json:"description" validate:"required,max=500" doc:"What is exchanged for the money."`
	EvidenceFloor EvidenceClass `json:"evidenceFloor,omitempty" validate:"omitempty,oneof=self sign wit rec att proof pote" doc:"The evidence an obligation under these terms must clear on."`
	StakeID       string        `json:"stakeId,omitempty" validate:"max=64" doc:"A stake of the counterparty (held in custody here) backing the terms: a dispute resolved against the counterparty may slash it."`
	ValidUntil    time.Time     `json:"validUntil" doc:"RFC 3339; payments citing the terms are denied after it. At most a year ahead."`
}

// Terms are two-party terms.
type TwoPartyTerms struct {
	ID           string `json:"id" doc:"trm_..."`
	Status       string `json:"status" doc:"proposed or accepted (validUntil says until when)."`
	Agent        string `json:"agent" doc:"The caller's agent identity: who pays."`
	AgentKeyID   string `json:"agentKeyId"`
	Counterparty string `json:"counterparty"`
	TermsBody
	NegotiationID string `json:"negotiationId,omitempty"`
	// SigningBytes are the canonical bytes the counterparty signs (signed,
	// once accepted), base64url: JCS of the terms, or of the negotiation
	// offer they came from.
	SigningBytes          string     `json:"signingBytes"`
	CounterpartySignature string     `json:"counterpartySignature,omitempty"`
	OurSignature          string     `json:"ourSignature,omitempty" doc:"This deployment's identity signature over signingBytes, for terms from a negotiation."`
	CreatedAt             time.Time  `json:"createdAt"`
	UpdatedAt             time.Time  `json:"updatedAt"`
	AcceptedAt            *time.Time `json:"acceptedAt,omitempty"`
	Entries               []uint64   `json:"entries"`
}

func termsKey(id string) []byte { return []byte("protocol/terms/" + id) }

// statementBytes are the canonical bytes of a signed statement about
// terms: the terms themselves, an offer or a rejection. typ separates
// them (a signature over one is never another), ref and seq name where it
// belongs.
func statementBytes(typ, ref string, seq int, agent, counterparty string, b TermsBody) ([]byte, error) {
	raw, err := json.Marshal(struct {
		Type         string `json:"type"`
		Ref          string `json:"ref"`
		Seq          int    `json:"seq,omitempty"`
		Agent        string `json:"agent"`
		Counterparty string `json:"counterparty"`
		TermsBody
	}{typ, ref, seq, agent, counterparty, b})
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// TermsSigningBytes are the bytes a counterparty signs to accept proposed
// terms.
func TermsSigningBytes(t *TwoPartyTerms) ([]byte, error) {
	return statementBytes("countersign.terms.v1", t.ID, 0, t.Agent, t.Counterparty, t.TermsBody)
}

// checkBody checks the terms of an offer or proposal.
func (s *Service) checkBody(r store.Reader, b *TermsBody, counterparty string, now time.Time) error {
	b.ValidUntil = b.ValidUntil.UTC().Truncate(time.Microsecond)
	switch {
	case !gate.ValidPayee(b.Payee):
		return fmt.Errorf("%w: payee is not a scheme:id reference", errTermsInvalid)
	case b.Amount.Minor <= 0 || b.Amount.Minor > pay.MaxMinor || !pay.ValidCurrency(b.Amount.Currency):
		return fmt.Errorf("%w: amount must be positive in a valid currency", errTermsInvalid)
	case b.Rail != "" && !gate.ValidRail(b.Rail):
		return fmt.Errorf("%w: rail is not a rail name", errTermsInvalid)
	case !b.ValidUntil.After(now) || b.ValidUntil.After(now.AddDate(1, 0, 0)):
		return fmt.Errorf("%w: validUntil must be in the future and within a year", errTermsInvalid)
	}
	if b.StakeID == "" {
		return nil
	}
	var st Stake
	if err := getJSON(r, stakeKey(b.StakeID), &st); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no stake %s", errTermsInvalid, b.StakeID)
	} else if err != nil {
		return err
	}
	owner, _ := identity.PublicKeyOf(st.Agent)
	cp, _ := identity.PublicKeyOf(counterparty)
	switch {
	case !bytes.Equal(owner, cp):
		return fmt.Errorf("%w: stake %s is not the counterparty's", errTermsInvalid, b.StakeID)
	case st.Status == StakeReleased || st.Status == StakeSlashed:
		return fmt.Errorf("%w: stake %s is %s", errTermsInvalid, b.StakeID, st.Status)
	case st.Amount.Currency != b.Amount.Currency:
		return fmt.Errorf("%w: stake %s is in %s, the terms in %s", errTermsInvalid, b.StakeID, st.Amount.Currency, b.Amount.Currency)
	}
	return nil
}

// counterpartyKey parses a counterparty's agent id.
func counterpartyKey(id string) (ed25519.PublicKey, error) {
	k, err := identity.PublicKeyOf(id)
	if err != nil {
		return nil, fmt.Errorf("%w: counterparty: %v", errTermsInvalid, err)
	}
	return k, nil
}

// counterpartyLive refuses a counterparty the operator revoked.
func (s *Service) counterpartyLive(ctx context.Context, id string) error {
	if s.identity == nil {
		return nil
	}
	revoked, err := s.identity.Revoked(ctx, id)
	if err != nil {
		return err
	}
	if revoked {
		return errCounterpartyRevoked
	}
	return nil
}

// verifySig checks a base64url Ed25519 signature.
func verifySig(pub ed25519.PublicKey, sig string, msg []byte) bool {
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	return err == nil && len(raw) == ed25519.SignatureSize && ed25519.Verify(pub, msg, raw)
}

// TermsProposeRequest is the body of terms.propose.
type TermsProposeRequest struct {
	Agent        string    `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase" doc:"The paying identity; may be omitted when the credential acts for exactly one."`
	Counterparty string    `json:"counterparty" validate:"required,max=128" doc:"The counterparty's agent id: 64 hex or an Ed25519 did:key."`
	Terms        TermsBody `json:"terms"`
}

// TermsPropose stores proposed terms and returns the bytes the
// counterparty signs to accept them (protocol.terms.propose).
func (s *Service) TermsPropose(ctx context.Context, call Call, req *TermsProposeRequest) (*TwoPartyTerms, error) {
	agent, err := s.parties(ctx, call, req)
	if err != nil {
		return nil, err
	}
	var t TwoPartyTerms
	err = s.log.Update(ctx, func(txn store.Txn) error {
		now := s.clock()
		body := req.Terms
		if err := s.checkBody(txn, &body, req.Counterparty, now); err != nil {
			return err
		}
		t = TwoPartyTerms{ID: ids.New("trm_"), Status: TermsStatusProposed, Agent: agent, AgentKeyID: call.Agent.KeyID,
			Counterparty: req.Counterparty, TermsBody: body, CreatedAt: now, UpdatedAt: now}
		b, err := TermsSigningBytes(&t)
		if err != nil {
			return err
		}
		t.SigningBytes = base64.RawURLEncoding.EncodeToString(b)
		return s.putTerms(txn, call, "protocol.terms.propose", &t)
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// parties checks the two parties of terms or an offer: the paying
// identity the caller acts for (returned) and a live counterparty.
func (s *Service) parties(ctx context.Context, call Call, req *TermsProposeRequest) (string, error) {
	agent, err := s.agentOf(call, req.Agent)
	if err != nil {
		return "", err
	}
	if _, err := counterpartyKey(req.Counterparty); err != nil {
		return "", err
	}
	return agent, s.counterpartyLive(ctx, req.Counterparty)
}

func (s *Service) putTerms(txn store.Txn, call Call, typ string, t *TwoPartyTerms) error {
	return putObject(s, txn, call, typ, "", termsKey(t.ID), t)
}

// TermsAcceptRequest is the body of terms.accept.
type TermsAcceptRequest struct {
	TermsID   string `json:"termsId" validate:"required,max=64"`
	Signature string `json:"signature" validate:"required,max=128" doc:"The counterparty's Ed25519 signature over signingBytes (decoded), base64url."`
}

// TermsAccepted is the answer of terms.accept.
type TermsAccepted struct {
	TwoPartyTerms
	replayed bool
}

// WasReplayed reports terms accepted before with the same signature.
func (t *TermsAccepted) WasReplayed() bool { return t.replayed }

// TermsAccept accepts proposed terms with the counterparty's signature
// (protocol.terms.accept). The same signature again answers the accepted
// terms; another is terms.already_accepted.
func (s *Service) TermsAccept(ctx context.Context, call Call, req *TermsAcceptRequest) (*TermsAccepted, error) {
	var cur TwoPartyTerms
	if err := s.st.View(ctx, func(r store.Reader) error { return s.ownTerms(r, call, req.TermsID, &cur) }); err != nil {
		return nil, err
	}
	if err := s.counterpartyLive(ctx, cur.Counterparty); err != nil {
		return nil, err
	}
	var out *TermsAccepted
	err := s.log.Update(ctx, func(txn store.Txn) error {
		out = nil
		var t TwoPartyTerms
		if err := s.ownTerms(txn, call, req.TermsID, &t); err != nil {
			return err
		}
		if t.Status == TermsStatusAccepted {
			if t.CounterpartySignature != req.Signature {
				return errTermsAccepted
			}
			out = &TermsAccepted{TwoPartyTerms: t, replayed: true}
			return nil
		}
		now := s.clock()
		if !now.Before(t.ValidUntil) {
			return errTermsExpired
		}
		pub, err := counterpartyKey(t.Counterparty)
		if err != nil {
			return err
		}
		msg, err := base64.RawURLEncoding.DecodeString(t.SigningBytes)
		if err != nil {
			return err
		}
		if !verifySig(pub, req.Signature, msg) {
			return errTermsSignature
		}
		t.Status, t.CounterpartySignature, t.UpdatedAt, t.AcceptedAt = TermsStatusAccepted, req.Signature, now, &now
		if err := s.putTerms(txn, call, "protocol.terms.accept", &t); err != nil {
			return err
		}
		out = &TermsAccepted{TwoPartyTerms: t}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TermsRef names terms.
type TermsRef struct {
	TermsID string `json:"termsId" validate:"required,max=64"`
}

// TermsGet returns terms of one of the caller's identities.
func (s *Service) TermsGet(ctx context.Context, call Call, req *TermsRef) (*TwoPartyTerms, error) {
	var t TwoPartyTerms
	if err := s.st.View(ctx, func(r store.Reader) error { return s.ownTerms(r, call, req.TermsID, &t) }); err != nil {
		return nil, err
	}
	return &t, nil
}

func (s *Service) ownTerms(r store.Reader, call Call, id string, t *TwoPartyTerms) error {
	err := getJSON(r, termsKey(id), t)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !isParty(call, t.Agent, t.Counterparty)) {
		return errTermsNotFound
	}
	return err
}

// isParty reports whether the caller acts for the paying identity or for
// the counterparty (when it is an agent here too).
func isParty(call Call, agent, counterparty string) bool {
	if actsFor(call, agent) {
		return true
	}
	k, err := identity.PublicKeyOf(counterparty)
	return err == nil && actsFor(call, hex.EncodeToString(k))
}

func actsFor(call Call, agent string) bool {
	if call.Agent == nil {
		return false
	}
	for _, a := range call.Agent.Agents {
		if a == agent {
			return true
		}
	}
	return false
}

// termsGate checks an instruction citing terms, in its deciding
// transaction: the terms exist for the paying identity, are accepted and
// in force, and the instruction matches them.
func (s *Service) termsGate(r store.Reader, in *pay.Intent) (*gate.Reason, error) {
	var t TwoPartyTerms
	err := getJSON(r, termsKey(in.TermsID), &t)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Agent != in.Agent) {
		return &gate.Reason{Code: pay.ReasonTermsUnknown, Message: "no terms of this id were agreed for the paying agent"}, nil
	}
	if err != nil {
		return nil, err
	}
	if t.Status != TermsStatusAccepted {
		return &gate.Reason{Code: ReasonTermsNotAccepted, Message: "the counterparty has not accepted the terms"}, nil
	}
	if !s.now().Before(t.ValidUntil) {
		return &gate.Reason{Code: ReasonTermsExpired, Message: "the terms are past validUntil"}, nil
	}
	var off []string
	if in.Payee != t.Payee {
		off = append(off, "payee")
	}
	if in.Amount != t.Amount {
		off = append(off, "amount")
	}
	if t.Rail != "" && in.Terms.Rail != t.Rail {
		off = append(off, "rail")
	}
	if len(off) > 0 {
		return &gate.Reason{Code: ReasonTermsMismatch, Message: "the instruction differs from the terms in " + strings.Join(off, ", ")}, nil
	}
	return nil, nil
}

func (t *TwoPartyTerms) entryList() *[]uint64 { return &t.Entries }
