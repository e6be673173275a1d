package pay

import (
	"context"
	"errors"
	"testing"

	"github.com/countersign/countersign/audit"
)

// TestVerifyReceipt checks a settled payment's receipt offline against its
// entry and inclusion proof, and that every kind of edit is refused.
func TestVerifyReceipt(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	res, err := h.pay(h.instruction("rcpt-1", 500, nil))
	if err != nil || res.Receipt == nil {
		t.Fatalf("pay: %+v, %v", res, err)
	}
	// A later payment grows the log: the proof is against a later tree.
	if _, err := h.pay(h.instruction("rcpt-2", 700, nil)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r := *res.Receipt
	e, err := h.log.Get(ctx, r.AuditSeq)
	if err != nil {
		t.Fatal(err)
	}
	p, err := h.log.Inclusion(ctx, r.AuditSeq, 0)
	if err != nil {
		t.Fatal(err)
	}
	vk := h.log.VerifierKey()
	if err := VerifyReceipt(vk, r, e, p); err != nil {
		t.Fatalf("VerifyReceipt of a genuine receipt: %v", err)
	}
	other, err := h.log.Get(ctx, r.AuditSeq-1)
	if err != nil {
		t.Fatal(err)
	}
	otherProof, err := h.log.Inclusion(ctx, other.Seq, 0)
	if err != nil {
		t.Fatal(err)
	}
	older, err := h.log.Inclusion(ctx, other.Seq, other.Seq) // a smaller tree's checkpoint
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  func(r *Receipt, e *audit.Entry, p *audit.InclusionProof)
		wantT bool // ErrTampered rather than ErrReceiptMismatch
	}{
		{"amount", func(r *Receipt, _ *audit.Entry, _ *audit.InclusionProof) { r.Amount.Minor++ }, false},
		{"payee", func(r *Receipt, _ *audit.Entry, _ *audit.InclusionProof) { r.Payee = "acct:thief" }, false},
		{"reference", func(r *Receipt, _ *audit.Entry, _ *audit.InclusionProof) { r.Reference += "x" }, false},
		{"audit seq", func(r *Receipt, _ *audit.Entry, _ *audit.InclusionProof) { r.AuditSeq-- }, false},
		{"another entry", func(_ *Receipt, e *audit.Entry, p *audit.InclusionProof) { *e, *p = other, otherProof }, false},
		{"entry edited", func(_ *Receipt, e *audit.Entry, _ *audit.InclusionProof) {
			e.Data = []byte(`{"amount":{"minor":1,"currency":"USD"}}`)
		}, true},
		{"proof of another tree", func(_ *Receipt, _ *audit.Entry, p *audit.InclusionProof) { p.Checkpoint = older.Checkpoint }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r2, e2, p2 := r, e, p
			p2.Hashes = append([]string(nil), p.Hashes...)
			tt.edit(&r2, &e2, &p2)
			err := VerifyReceipt(vk, r2, e2, p2)
			switch {
			case tt.wantT && !errors.Is(err, audit.ErrTampered):
				t.Errorf("VerifyReceipt = %v, want ErrTampered", err)
			case !tt.wantT && !errors.Is(err, ErrReceiptMismatch):
				t.Errorf("VerifyReceipt = %v, want ErrReceiptMismatch", err)
			}
		})
	}
}
