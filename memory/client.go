package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Client is an agent's side of the memory store in-process: it holds the
// agent's memory mandate and namespace and calls the same [Service] the
// reference server runs, so an agent runtime embedding Countersign
// remembers and recalls exactly as a remote agent does. It is safe for
// concurrent use.
type Client struct {
	svc     *Service
	mandate string
	ns      string
	caller  Caller
}

// NewClient returns a client for namespace ns under mandate. The caller
// is trusted in-process (the mandate still decides every right).
func NewClient(svc *Service, mandate, ns string) (*Client, error) {
	if svc == nil || mandate == "" {
		return nil, errors.New("memory: NewClient needs a service and a mandate")
	}
	if err := validName(ns); err != nil {
		return nil, fmt.Errorf("memory: NewClient: namespace %w", err)
	}
	return &Client{svc: svc, mandate: mandate, ns: ns}, nil
}

// Fact is what [Client.Remember] stores. Body is any value encoding/json
// can marshal. ValidFrom defaults to now; Source to the mandate's agent.
type Fact struct {
	Subject, Kind  string
	Body           any
	ValidFrom      time.Time
	ValidTo        *time.Time
	Source         Source
	Edges          []Edge
	IdempotencyKey string // default: a new random key (no retry protection)
}

// Remember stores a fact and returns the sealed record.
func (c *Client) Remember(ctx context.Context, f Fact) (Record, error) {
	body, err := json.Marshal(f.Body)
	if err != nil {
		return Record{}, fmt.Errorf("memory: remember: body: %w", err)
	}
	if f.ValidFrom.IsZero() {
		f.ValidFrom = c.svc.now()
	}
	if f.IdempotencyKey == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return Record{}, err
		}
		f.IdempotencyKey = hex.EncodeToString(b)
	}
	if f.Source.Kind == "" {
		f.Source = Source{Kind: "agent", Ref: "in-process"}
	}
	if f.Kind == "" {
		f.Kind = "note"
	}
	r, err := c.svc.Remember(ctx, c.caller, RememberRequest{Mandate: c.mandate, IdempotencyKey: f.IdempotencyKey,
		Namespace: c.ns, Subject: f.Subject, Kind: f.Kind, Body: body, ValidFrom: f.ValidFrom, ValidTo: f.ValidTo,
		Source: f.Source, Edges: f.Edges}, "")
	return r.Artifact.Record, err
}

// Recall answers what the store knew at q.TxAt about q.ValidAt (both
// default to now); the mandate and namespace are the client's.
func (c *Client) Recall(ctx context.Context, q RecallRequest) (RecallPage, error) {
	q.Mandate, q.Namespace = c.mandate, c.ns
	return c.svc.Recall(ctx, c.caller, q)
}

// Assemble builds a context within q.Budget; the mandate and namespace
// are the client's.
func (c *Client) Assemble(ctx context.Context, q AssembleRequest) (AssembledContext, error) {
	q.Mandate, q.Namespace = c.mandate, c.ns
	return c.svc.Assemble(ctx, c.caller, q)
}
