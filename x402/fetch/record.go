package fetch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/x402"
)

// record is what the store keeps of a fetch that reached the gate, under
// keyFetch + intent id: written in the deciding transaction (the request
// to make again and the offer chosen, as received), then by the rail, in
// transactions of its own, the attempt before its header leaves and the
// outcome once known. It holds the signed header, which is a bearer
// authorization to pay exactly this offer's payTo (never the wallet key),
// so it is kept in the store, never in the record.
type record struct {
	IntentID  string      `json:"intentId"`
	DecidedAt time.Time   `json:"decidedAt"`
	Held      bool        `json:"held"` // decided pending approval: the offer is asked for again before paying
	Method    string      `json:"method"`
	URL       string      `json:"url"`
	Header    http.Header `json:"header,omitempty"`
	Body      []byte      `json:"body,omitempty"`
	MaxMinor  int64       `json:"maxMinor"`
	Currency  string      `json:"currency"`

	Resource     x402.ResourceInfo          `json:"resource"`
	Extensions   map[string]json.RawMessage `json:"extensions,omitempty"`
	Requirements x402.PaymentRequirements   `json:"requirements"`
	Minor        int64                      `json:"minor"`
	PayTo        string                     `json:"payTo"` // CAIP-10

	Attempt *attempt `json:"attempt,omitempty"`
	Outcome *outcome `json:"outcome,omitempty"`
}

// attempt is the paid request as signed, stored before it is first sent
// and sent again unchanged.
type attempt struct {
	Requirements x402.PaymentRequirements `json:"requirements"`
	Resource     x402.ResourceInfo        `json:"resource"`
	Refetched    bool                     `json:"refetched"`
	Payment      string                   `json:"payment"` // the PAYMENT-SIGNATURE header
	From         string                   `json:"from"`
	Nonce        string                   `json:"nonce"`
	ValidAfter   time.Time                `json:"validAfter"`
	ValidBefore  time.Time                `json:"validBefore"`
	SignedAt     time.Time                `json:"signedAt"`
}

// outcome is a paid attempt's end: the resource's answer when it came
// (Delivered), and the server's PAYMENT-RESPONSE.
type outcome struct {
	Settlement x402.SettlementResponse `json:"settlement"`
	Delivered  bool                    `json:"delivered"`
	ResolvedBy string                  `json:"resolvedBy"` // answer, resend or chain
	Status     int                     `json:"status,omitempty"`
	Header     http.Header             `json:"header,omitempty"`
	Body       []byte                  `json:"body,omitempty"`
	Truncated  bool                    `json:"truncated,omitempty"`
	At         time.Time               `json:"at"`
}

// keep returns the OnDecided hook that stores rec under the intent.
func (rec *record) keep(now func() time.Time) func(txn store.Txn, in *pay.Intent) error {
	return func(txn store.Txn, in *pay.Intent) error {
		if in.Status == pay.StatusDenied {
			return nil // nothing will be paid: the decision entry says why
		}
		r := *rec
		r.IntentID, r.DecidedAt, r.Held = in.ID, now().UTC(), in.Status == pay.StatusPendingApproval
		return putRecord(txn, &r)
	}
}

func putRecord(txn store.Txn, r *record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("x402 fetch: record of %s: %w", r.IntentID, err)
	}
	return txn.Set([]byte(keyFetch+r.IntentID), b)
}

func getRecord(r store.Reader, id string) (*record, error) {
	b, err := r.Get([]byte(keyFetch + id))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("x402 fetch: stored record of %s: %w", id, err)
	}
	return &rec, nil
}

func (s *Service) load(ctx context.Context, id string) (*record, error) {
	var rec *record
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		rec, err = getRecord(r, id)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("x402 fetch: the fetch of %s: %w", id, err)
	}
	return rec, nil
}

// fetched is the answer of a settled fetch, from its record.
func (rec *record) fetched() *Fetched {
	f := &Fetched{IntentID: rec.IntentID, Paid: rec.Outcome != nil}
	if a := rec.Attempt; a != nil {
		f.Payment = &Payment{Network: a.Requirements.Network, Asset: a.Requirements.Asset, Amount: a.Requirements.Amount,
			PayTo: rec.PayTo, Payer: a.From, Nonce: a.Nonce, ValidBefore: a.ValidBefore}
	}
	if o := rec.Outcome; o != nil {
		if f.Payment != nil {
			f.Payment.Transaction = o.Settlement.Transaction
		}
		if o.Delivered {
			f.Delivered, f.Status, f.Headers, f.Truncated = true, o.Status, o.Header, o.Truncated
			f.Body = base64.StdEncoding.EncodeToString(o.Body)
		}
	}
	return f
}
