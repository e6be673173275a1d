package protocol

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/store"
)

// Namespace negotiate: a thread of offers between this deployment and a
// counterparty, each signed by the side that makes it: ours with the
// deployment's ADP identity key (Options.Identity), the counterparty's
// verified against its agent id through package identity (and refused
// once the operator revoked it). Offers alternate. Accepting the latest
// offer needs the other side's signature over that offer's bytes (ours is
// made here; the counterparty's is presented) and yields accepted terms
// whose signingBytes are the offer's, so anyone can check both signatures
// offline. A rejection by the counterparty is signed too.

// Negotiation statuses.
const (
	NegotiationOpen           = "open"
	NegotiationStatusAccepted = "accepted"
	NegotiationRejected       = "rejected"
)

// Sides of a negotiation.
const (
	SideUs           = "us"
	SideCounterparty = "counterparty"
)

// Problem codes of negotiation.
const (
	CodeNegotiationNotFound = "negotiate.not_found"
	CodeNegotiationClosed   = "negotiate.closed"
	CodeNegotiationTurn     = "negotiate.out_of_turn"
	CodeNegotiationNoKey    = "negotiate.no_identity"
)

var (
	errNegotiationNotFound = errcode.New(CodeNegotiationNotFound, "protocol: no such negotiation")
	errNegotiationClosed   = errcode.New(CodeNegotiationClosed, "protocol: the negotiation was accepted or rejected")
	errNegotiationTurn     = errcode.New(CodeNegotiationTurn, "protocol: the latest offer is this side's own; the other side answers it")
	errNegotiationNoKey    = errcode.New(CodeNegotiationNoKey, "protocol: this deployment has no identity key to sign offers with")
)

// Offer is one signed offer of a negotiation.
type Offer struct {
	Seq    int    `json:"seq"`
	From   string `json:"from" doc:"us or counterparty."`
	Signer string `json:"signer" doc:"The agent id that signed: this deployment's, or the counterparty's."`
	// SignerKey is the key that signed, 64 hex: after a rotation of this
	// deployment's key its agent id stays, the key does not.
	SignerKey string `json:"signerKey"`
	TermsBody
	// SigningBytes are the offer's canonical bytes, base64url.
	SigningBytes string    `json:"signingBytes"`
	Signature    string    `json:"signature"`
	At           time.Time `json:"at"`
}

// Negotiation is a thread of offers.
type Negotiation struct {
	ID           string  `json:"id" doc:"neg_..."`
	Status       string  `json:"status" doc:"open, accepted or rejected."`
	Agent        string  `json:"agent"`
	AgentKeyID   string  `json:"agentKeyId"`
	Counterparty string  `json:"counterparty"`
	Offers       []Offer `json:"offers"`
	TermsID      string  `json:"termsId,omitempty" doc:"Set on acceptance: the terms it yielded."`
	RejectedBy   string  `json:"rejectedBy,omitempty"`
	Reason       string  `json:"reason,omitempty"`
	// RejectionSignature is the counterparty's signature of its rejection.
	RejectionSignature string    `json:"rejectionSignature,omitempty"`
	CreatedAt          time.Time `json:"createdAt"`
	UpdatedAt          time.Time `json:"updatedAt"`
	Entries            []uint64  `json:"entries"`
}

func negotiationKey(id string) []byte { return []byte("protocol/negotiation/" + id) }

// OfferSigningBytes are the bytes the side making offer seq of a
// negotiation signs.
func OfferSigningBytes(negotiationID string, seq int, agent, counterparty string, b TermsBody) ([]byte, error) {
	return statementBytes("countersign.offer.v1", negotiationID, seq, agent, counterparty, b)
}

// RejectionSigningBytes are the bytes a counterparty signs to reject
// offer seq.
func RejectionSigningBytes(negotiationID string, seq int, agent, counterparty string, b TermsBody) ([]byte, error) {
	return statementBytes("countersign.reject.v1", negotiationID, seq, agent, counterparty, b)
}

// NegotiateOfferRequest is the body of negotiate.offer: the parties and
// the first offer, as terms.propose takes them.
type NegotiateOfferRequest = TermsProposeRequest

// NegotiateOffer opens a negotiation with our first offer, signed with the
// deployment's identity key (protocol.negotiate.offer).
func (s *Service) NegotiateOffer(ctx context.Context, call Call, req *NegotiateOfferRequest) (*Negotiation, error) {
	agent, err := s.parties(ctx, call, req)
	if err != nil {
		return nil, err
	}
	if s.identity == nil {
		return nil, errNegotiationNoKey
	}
	var n Negotiation
	err = s.log.Update(ctx, func(txn store.Txn) error {
		now := s.clock()
		n = Negotiation{ID: ids.New("neg_"), Status: NegotiationOpen, Agent: agent, AgentKeyID: call.Agent.KeyID,
			Counterparty: req.Counterparty, CreatedAt: now, UpdatedAt: now}
		if err := s.addOffer(txn, &n, SideUs, req.Terms, ""); err != nil {
			return err
		}
		return s.putNegotiation(txn, call, "protocol.negotiate.offer", &n)
	})
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// addOffer checks and signs (ours) or verifies (theirs) the next offer.
func (s *Service) addOffer(txn store.Txn, n *Negotiation, from string, body TermsBody, sig string) error {
	now := s.clock()
	if err := s.checkBody(txn, &body, n.Counterparty, now); err != nil {
		return err
	}
	seq := len(n.Offers) + 1
	msg, err := OfferSigningBytes(n.ID, seq, n.Agent, n.Counterparty, body)
	if err != nil {
		return err
	}
	o := Offer{Seq: seq, From: from, TermsBody: body, SigningBytes: base64.RawURLEncoding.EncodeToString(msg), At: now}
	switch from {
	case SideUs:
		if s.identity == nil {
			return errNegotiationNoKey
		}
		id, pub, raw := s.identity.SignStatement(msg)
		o.Signer, o.SignerKey, o.Signature = id, hex.EncodeToString(pub), base64.RawURLEncoding.EncodeToString(raw)
	case SideCounterparty:
		pub, err := counterpartyKey(n.Counterparty)
		if err != nil {
			return err
		}
		if !verifySig(pub, sig, msg) {
			return fmt.Errorf("%w: the counter-offer's signature", errTermsSignature)
		}
		o.Signer, o.SignerKey, o.Signature = n.Counterparty, hex.EncodeToString(pub), sig
	default:
		return fmt.Errorf("%w: from must be us or counterparty", errTermsInvalid)
	}
	n.Offers = append(n.Offers, o)
	n.UpdatedAt = now
	return nil
}

func (s *Service) putNegotiation(txn store.Txn, call Call, typ string, n *Negotiation) error {
	return putObject(s, txn, call, typ, "", negotiationKey(n.ID), n)
}

// NegotiateCounterRequest is the body of negotiate.counter.
type NegotiateCounterRequest struct {
	NegotiationID string    `json:"negotiationId" validate:"required,max=64"`
	From          string    `json:"from" validate:"required,oneof=us counterparty" doc:"us: this deployment counters (signed here); counterparty: the counterparty's counter-offer, with its signature."`
	Terms         TermsBody `json:"terms"`
	Signature     string    `json:"signature,omitempty" validate:"max=128" doc:"From counterparty: its Ed25519 signature over the offer's bytes (protocol.OfferSigningBytes with the next seq), base64url."`
}

// NegotiateCounter adds a counter-offer; offers alternate sides
// (protocol.negotiate.counter).
func (s *Service) NegotiateCounter(ctx context.Context, call Call, req *NegotiateCounterRequest) (*Negotiation, error) {
	return s.updateNegotiation(ctx, call, req.NegotiationID, "protocol.negotiate.counter", func(txn store.Txn, n *Negotiation) error {
		if n.Offers[len(n.Offers)-1].From == req.From {
			return errNegotiationTurn
		}
		if req.From == SideUs && req.Signature != "" {
			return fmt.Errorf("%w: our offers are signed here; send no signature", errTermsInvalid)
		}
		return s.addOffer(txn, n, req.From, req.Terms, req.Signature)
	})
}

// updateNegotiation changes an open negotiation of the caller. A
// counterparty the operator revoked ends every further step.
func (s *Service) updateNegotiation(ctx context.Context, call Call, id, typ string, change func(store.Txn, *Negotiation) error) (*Negotiation, error) {
	var n Negotiation
	if err := s.st.View(ctx, func(r store.Reader) error { return s.ownNegotiation(r, call, id, &n) }); err != nil {
		return nil, err
	}
	if err := s.counterpartyLive(ctx, n.Counterparty); err != nil {
		return nil, err
	}
	err := s.log.Update(ctx, func(txn store.Txn) error {
		n = Negotiation{}
		if err := s.ownNegotiation(txn, call, id, &n); err != nil {
			return err
		}
		if n.Status != NegotiationOpen {
			return errNegotiationClosed
		}
		if err := change(txn, &n); err != nil {
			return err
		}
		return s.putNegotiation(txn, call, typ, &n)
	})
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func (s *Service) ownNegotiation(r store.Reader, call Call, id string, n *Negotiation) error {
	err := getJSON(r, negotiationKey(id), n)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !isParty(call, n.Agent, n.Counterparty)) {
		return errNegotiationNotFound
	}
	return err
}

// NegotiateAcceptRequest is the body of negotiate.accept.
type NegotiateAcceptRequest struct {
	NegotiationID string `json:"negotiationId" validate:"required,max=64"`
	Signature     string `json:"signature,omitempty" validate:"max=128" doc:"When the latest offer is ours: the counterparty's signature over its bytes, which is its acceptance. When it is the counterparty's: omitted; this deployment signs its acceptance."`
}

// NegotiationAccepted is the answer of negotiate.accept.
type NegotiationAccepted struct {
	Negotiation Negotiation   `json:"negotiation"`
	Terms       TwoPartyTerms `json:"terms" doc:"The accepted terms; cite terms.id as termsId."`
}

// NegotiateAccept accepts the latest offer: the terms it yields are
// accepted by both sides' signatures over the offer's bytes
// (protocol.negotiate.accept and protocol.terms.accept).
func (s *Service) NegotiateAccept(ctx context.Context, call Call, req *NegotiateAcceptRequest) (*NegotiationAccepted, error) {
	var t TwoPartyTerms
	n, err := s.updateNegotiation(ctx, call, req.NegotiationID, "protocol.negotiate.accept", func(txn store.Txn, n *Negotiation) error {
		last := n.Offers[len(n.Offers)-1]
		now := s.clock()
		if !now.Before(last.ValidUntil) {
			return errTermsExpired
		}
		msg, err := base64.RawURLEncoding.DecodeString(last.SigningBytes)
		if err != nil {
			return err
		}
		t = TwoPartyTerms{ID: ids.New("trm_"), Status: TermsStatusAccepted, Agent: n.Agent, AgentKeyID: call.Agent.KeyID, Counterparty: n.Counterparty,
			TermsBody: last.TermsBody, NegotiationID: n.ID, SigningBytes: last.SigningBytes, CreatedAt: now, UpdatedAt: now, AcceptedAt: &now}
		switch last.From {
		case SideUs:
			pub, err := counterpartyKey(n.Counterparty)
			if err != nil {
				return err
			}
			if !verifySig(pub, req.Signature, msg) {
				return errTermsSignature
			}
			t.CounterpartySignature, t.OurSignature = req.Signature, last.Signature
		default:
			if req.Signature != "" {
				return fmt.Errorf("%w: accepting the counterparty's offer is signed here; send no signature", errTermsInvalid)
			}
			if s.identity == nil {
				return errNegotiationNoKey
			}
			_, _, raw := s.identity.SignStatement(msg)
			t.CounterpartySignature, t.OurSignature = last.Signature, base64.RawURLEncoding.EncodeToString(raw)
		}
		n.Status, n.TermsID, n.UpdatedAt = NegotiationStatusAccepted, t.ID, now
		return s.putTerms(txn, call, "protocol.terms.accept", &t)
	})
	if err != nil {
		return nil, err
	}
	return &NegotiationAccepted{Negotiation: *n, Terms: t}, nil
}

// NegotiateRejectRequest is the body of negotiate.reject.
type NegotiateRejectRequest struct {
	NegotiationID string `json:"negotiationId" validate:"required,max=64"`
	By            string `json:"by" validate:"required,oneof=us counterparty" doc:"us: this deployment walks away; counterparty: the counterparty rejects the latest offer, with its signature."`
	Reason        string `json:"reason,omitempty" validate:"max=500"`
	Signature     string `json:"signature,omitempty" validate:"max=128" doc:"By counterparty: its signature over protocol.RejectionSigningBytes of the latest offer, base64url."`
}

// NegotiateReject ends a negotiation without terms
// (protocol.negotiate.reject).
func (s *Service) NegotiateReject(ctx context.Context, call Call, req *NegotiateRejectRequest) (*Negotiation, error) {
	return s.updateNegotiation(ctx, call, req.NegotiationID, "protocol.negotiate.reject", func(_ store.Txn, n *Negotiation) error {
		if req.By != SideUs && req.By != SideCounterparty {
			return fmt.Errorf("%w: by must be us or counterparty", errTermsInvalid)
		}
		if req.By == SideCounterparty {
			last := n.Offers[len(n.Offers)-1]
			msg, err := RejectionSigningBytes(n.ID, last.Seq, n.Agent, n.Counterparty, last.TermsBody)
			if err != nil {
				return err
			}
			pub, err := counterpartyKey(n.Counterparty)
			if err != nil {
				return err
			}
			if !verifySig(pub, req.Signature, msg) {
				return fmt.Errorf("%w: the rejection's signature", errTermsSignature)
			}
			n.RejectionSignature = req.Signature
		} else if req.Signature != "" {
			return fmt.Errorf("%w: our rejection carries no signature", errTermsInvalid)
		}
		n.Status, n.RejectedBy, n.Reason, n.UpdatedAt = NegotiationRejected, req.By, req.Reason, s.clock()
		return nil
	})
}

// NegotiationRef names a negotiation.
type NegotiationRef struct {
	NegotiationID string `json:"negotiationId" validate:"required,max=64"`
}

// NegotiateGet returns a negotiation of one of the caller's identities.
func (s *Service) NegotiateGet(ctx context.Context, call Call, req *NegotiationRef) (*Negotiation, error) {
	var n Negotiation
	if err := s.st.View(ctx, func(r store.Reader) error { return s.ownNegotiation(r, call, req.NegotiationID, &n) }); err != nil {
		return nil, err
	}
	return &n, nil
}

func (n *Negotiation) entryList() *[]uint64 { return &n.Entries }
