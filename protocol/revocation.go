package protocol

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace revocation: a feed of revoked mandates and agent identities,
// a check of one, and revoke_identity (★), after which the gate refuses
// every mandate whose subject the identity is, at once (see pay's
// Revocations).

// RevocationListRequest is the body of revocation.list.
type RevocationListRequest struct {
	Cursor string `json:"cursor,omitempty" validate:"max=400" doc:"The nextCursor of the previous page; empty from the start."`
	Limit  int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// RevocationPage is a page of the feed, oldest first.
type RevocationPage struct {
	Data []pay.RevocationEvent `json:"data"`
	// NextCursor continues after the last event; poll with it to follow
	// the feed (it is set even when hasMore is false).
	NextCursor *string `json:"nextCursor"`
	HasMore    bool    `json:"hasMore"`
}

// RevocationList pages the revocation feed.
func (s *Service) RevocationList(ctx context.Context, _ Call, req *RevocationListRequest) (*RevocationPage, error) {
	limit := req.Limit
	if limit == 0 {
		limit = defaultLimit
	}
	evs, next, more, err := s.pay.Revocations(ctx, req.Cursor, limit)
	if err != nil {
		return nil, err
	}
	out := &RevocationPage{Data: evs, HasMore: more}
	if out.Data == nil {
		out.Data = []pay.RevocationEvent{}
	}
	if next == "" {
		next = req.Cursor
	}
	if next != "" {
		out.NextCursor = &next
	}
	return out, nil
}

// RevocationCheckRequest is the body of revocation.check: exactly one of
// mandateId and agent.
type RevocationCheckRequest struct {
	MandateID string `json:"mandateId,omitempty" validate:"omitempty,max=128"`
	Agent     string `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase"`
}

// RevocationCheck is the answer of revocation.check.
type RevocationCheck struct {
	Kind       string               `json:"kind"`
	ID         string               `json:"id"`
	Revoked    bool                 `json:"revoked"`
	Revocation *pay.RevocationEvent `json:"revocation,omitempty"`
}

// RevocationCheckGet says whether a mandate or an identity is revoked.
func (s *Service) RevocationCheckGet(ctx context.Context, _ Call, req *RevocationCheckRequest) (*RevocationCheck, error) {
	kind, id := "mandate", req.MandateID
	switch {
	case (req.MandateID == "") == (req.Agent == ""):
		return nil, fmt.Errorf("%w: give exactly one of mandateId and agent", errFieldInvalid)
	case req.Agent != "":
		kind, id = "identity", req.Agent
	}
	ev, err := s.pay.RevocationStatus(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return &RevocationCheck{Kind: kind, ID: id, Revoked: ev != nil, Revocation: ev}, nil
}

// RevokeIdentityRequest is the body of revocation.revoke_identity (★).
type RevokeIdentityRequest struct {
	Agent string `json:"agent" validate:"required,len=64,hexadecimal,lowercase" doc:"The agent identity: its Ed25519 public key in hex."`
	Override
}

// RevokeIdentity revokes an agent identity: every mandate whose subject it
// is stops at once. Revoking twice answers the first revocation.
func (s *Service) RevokeIdentity(ctx context.Context, call Call, req *RevokeIdentityRequest) (*pay.IdentityRevocation, error) {
	r, _, err := s.books.RevokeIdentity(ctx, req.Agent, *call.Operator, func(txn store.Txn, r pay.IdentityRevocation) error {
		_, err := s.record(txn, call, "protocol.revocation.revoke_identity", "", r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}
