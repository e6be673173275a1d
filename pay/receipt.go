package pay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/audit"
)

// ErrReceiptMismatch is returned by [VerifyReceipt] when the receipt does
// not say what the record's entry says. Check with errors.Is.
var ErrReceiptMismatch = errors.New("pay: the receipt does not match its record entry")

// VerifyReceipt checks a receipt offline, with nothing but the record's
// verifier key ([audit.Log.VerifierKey], served at /.well-known), the
// payment.settled entry it names (GET /audit/{auditSeq}) and that entry's
// inclusion proof (GET /audit/{auditSeq}/proof): the entry is genuine and
// in the log the key signs ([audit.VerifyInclusion]), it is the receipt's
// entry (seq and hash), and it records exactly the receipt's fields.
//
// The record signs one checkpoint per commit rather than each entry, so
// this is how a receipt is verified: its entry's inclusion in a signed
// checkpoint, as a transparency log's clients verify an entry.
func VerifyReceipt(verifierKey string, r Receipt, e audit.Entry, p audit.InclusionProof) error {
	if err := audit.VerifyInclusion(verifierKey, e, p); err != nil {
		return fmt.Errorf("pay: verify receipt %s: %w", r.ID, err)
	}
	if e.Seq != r.AuditSeq || e.Hash != r.AuditHash || e.Type != "payment.settled" || e.IntentID != r.IntentID {
		return fmt.Errorf("%w: the entry is seq %d (%s, %s), the receipt names seq %d", ErrReceiptMismatch, e.Seq, e.Type, e.IntentID, r.AuditSeq)
	}
	// The entry's data is the receipt without the fields that point at
	// the entry itself; compare RFC 8785 forms, not Go values, so that
	// nothing the entry says is ignored.
	r.AuditSeq, r.AuditHash = 0, ""
	want, err := json.Marshal(settledData{Receipt: r})
	if err != nil {
		return err
	}
	a, err := jcs.Transform(want)
	if err != nil {
		return err
	}
	if b, err := jcs.Transform(e.Data); err != nil || !bytes.Equal(a, b) {
		return fmt.Errorf("%w: the entry records other receipt fields", ErrReceiptMismatch)
	}
	return nil
}
