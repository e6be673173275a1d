package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/wirejson"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace proof: proof of enforcement of one intent. It carries the
// gate's decision, the policy hash in force when it was made, and every
// record entry about the intent (the decision, approvals, the settlement,
// refunds, protocol transitions) each with an inclusion proof against one
// signed checkpoint, plus the gate.policy entry that recorded the policy
// hash. Anyone holding the record's verifier key checks it offline
// ([VerifyProof], `countersign proof verify FILE`): no trust in the server
// is needed, only in the key.

// ProofType names the proof format.
const ProofType = "countersign.enforcement-proof/v1"

// CodeProofNotFound: no intent of that id for this credential.
const CodeProofNotFound = "proof.not_found"

var errProofNotFound = errcode.New(CodeProofNotFound, "protocol: no such intent for this credential")

// ProvenEntry is a record entry with its inclusion proof.
type ProvenEntry struct {
	Entry     audit.Entry          `json:"entry"`
	Inclusion audit.InclusionProof `json:"inclusion"`
}

// EnforcementProof is the proof of enforcement of an intent.
type EnforcementProof struct {
	Type     string        `json:"type"`
	IntentID string        `json:"intentId"`
	Status   pay.Status    `json:"status"`
	Decision gate.Decision `json:"decision"`
	// PolicyHash is the digest of the policy in force at the decision, as
	// the gate.policy entry PolicyEntry recorded it.
	PolicyHash  string       `json:"policyHash"`
	PolicyEntry *ProvenEntry `json:"policyEntry,omitempty"`
	// Entries are the intent's entries, oldest first; the first is the
	// gate.decision.
	Entries []ProvenEntry `json:"entries"`
	// Checkpoint is the signed tree head every inclusion proof is against.
	Checkpoint audit.Checkpoint `json:"checkpoint"`
}

// ProofGetRequest is the body of proof.get.
type ProofGetRequest struct {
	IntentID string `json:"intentId" validate:"required,max=64" doc:"An intent of the caller (a payment, a purchase, or the intent of a hold, meter or custody movement)."`
}

// ProofGet builds the proof of enforcement of one of the caller's intents.
func (s *Service) ProofGet(ctx context.Context, call Call, req *ProofGetRequest) (*EnforcementProof, error) {
	in, err := s.pay.Intent(ctx, *call.Agent, req.IntentID)
	if errors.Is(err, pay.ErrIntentNotFound) {
		return nil, errProofNotFound
	}
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	var polSeq uint64
	var polHash string
	var polOK bool
	err = s.st.View(ctx, func(r store.Reader) error {
		if seqs, err = s.books.IntentEntrySeqs(r, in.ID); err != nil {
			return err
		}
		if len(seqs) == 0 {
			return fmt.Errorf("protocol: intent %s has no record entries", in.ID)
		}
		polSeq, polHash, polOK, err = identity.PolicyAt(r, seqs[0])
		return err
	})
	if err != nil {
		return nil, err
	}
	cp, err := s.log.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	prove := func(seq uint64) (ProvenEntry, error) {
		e, err := s.log.Get(ctx, seq)
		if err != nil {
			return ProvenEntry{}, err
		}
		p, err := s.log.Inclusion(ctx, seq, cp.TreeSize)
		if err != nil {
			return ProvenEntry{}, err
		}
		if p.Hashes == nil {
			p.Hashes = []string{}
		}
		return ProvenEntry{Entry: e, Inclusion: p}, nil
	}
	out := &EnforcementProof{Type: ProofType, IntentID: in.ID, Status: in.Status, Decision: in.Decision,
		Checkpoint: cp, Entries: make([]ProvenEntry, 0, len(seqs))}
	for _, seq := range seqs {
		if seq > cp.TreeSize {
			continue // appended after the checkpoint was read
		}
		pe, err := prove(seq)
		if err != nil {
			return nil, err
		}
		out.Entries = append(out.Entries, pe)
	}
	if polOK {
		pe, err := prove(polSeq)
		if err != nil {
			return nil, err
		}
		out.PolicyHash, out.PolicyEntry = polHash, &pe
	}
	var d struct {
		PolicyHash string `json:"policyHash"`
	}
	if len(out.Entries) > 0 && json.Unmarshal(out.Entries[0].Entry.Data, &d) == nil && d.PolicyHash != "" {
		// The decision recorded the hash it was made under: that one.
		out.PolicyHash = d.PolicyHash
	} else if !polOK && s.policy != nil {
		// A record older than both: the hash in force now, which the
		// proof cannot tie to the decision (policyVerified is false).
		if out.PolicyHash, err = s.policy(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ProofVerifyRequest is the body of proof.verify.
type ProofVerifyRequest struct {
	Proof json.RawMessage `json:"proof" validate:"required" doc:"A proof proof.get returned, as received."`
}

// ProofVerification is the answer of proof.verify.
type ProofVerification struct {
	Valid bool `json:"valid"`
	// PolicyVerified is true when the policy hash is the one the decision
	// entry itself recorded. A decision recorded before decisions carried
	// it is tied to its policy by the gate.policy entry before it, if any,
	// and PolicyVerified is false: the hash is then the server's word.
	PolicyVerified bool `json:"policyVerified"`
	// Failure is the first check that failed.
	Failure  string `json:"failure,omitempty"`
	IntentID string `json:"intentId,omitempty"`
	Outcome  string `json:"outcome,omitempty" doc:"The decision's outcome, when valid."`
}

// ProofVerify checks a proof with this deployment's verifier key, as
// [VerifyProof] does offline.
func (s *Service) ProofVerify(_ context.Context, _ Call, req *ProofVerifyRequest) (*ProofVerification, error) {
	return VerifyProof(s.log.VerifierKey(), req.Proof), nil
}

// VerifyProof checks a proof of enforcement with nothing but the record's
// verifier key: every entry's hash and signature, its inclusion in the
// signed checkpoint, that the entries are all about the intent and begin
// with its gate.decision, that the decision in the proof is the one the
// record holds, and that the policy hash is the one its gate.policy entry
// recorded before the decision.
func VerifyProof(verifierKey string, raw []byte) *ProofVerification {
	var p EnforcementProof
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return &ProofVerification{Failure: "malformed: the proof " + wirejson.Describe(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &ProofVerification{Failure: "malformed: bytes after the proof"}
	}
	fail := func(format string, args ...any) *ProofVerification {
		return &ProofVerification{IntentID: p.IntentID, Failure: fmt.Sprintf(format, args...)}
	}
	if p.Type != ProofType {
		return fail("type %q is not %s", p.Type, ProofType)
	}
	if err := audit.VerifyCheckpoint(verifierKey, p.Checkpoint); err != nil {
		return fail("checkpoint: %v", err)
	}
	if len(p.Entries) == 0 {
		return fail("no entries")
	}
	check := func(pe ProvenEntry) error {
		if pe.Inclusion.TreeSize != p.Checkpoint.TreeSize || pe.Inclusion.Checkpoint.Note != p.Checkpoint.Note {
			return errors.New("its inclusion proof is not against the proof's checkpoint")
		}
		return audit.VerifyInclusion(verifierKey, pe.Entry, pe.Inclusion)
	}
	for i, pe := range p.Entries {
		if err := check(pe); err != nil {
			return fail("entry %d (seq %d): %v", i, pe.Entry.Seq, err)
		}
		if pe.Entry.IntentID != p.IntentID {
			return fail("entry %d (seq %d) is about %q, not the intent", i, pe.Entry.Seq, pe.Entry.IntentID)
		}
		if i > 0 && pe.Entry.Seq <= p.Entries[i-1].Entry.Seq {
			return fail("entries are not in record order")
		}
	}
	first := p.Entries[0].Entry
	if first.Type != "gate.decision" {
		return fail("the first entry is %s, not the gate.decision", first.Type)
	}
	var recorded struct {
		gate.Decision
		PolicyHash string `json:"policyHash"`
	}
	if err := json.Unmarshal(first.Data, &recorded); err != nil {
		return fail("the decision entry's data %s", wirejson.Describe(err))
	}
	if recorded.Outcome != p.Decision.Outcome || recorded.MandateID != p.Decision.MandateID || len(recorded.Reasons) != len(p.Decision.Reasons) {
		return fail("the decision differs from the one the record holds")
	}
	for i := range recorded.Reasons {
		if recorded.Reasons[i].Code != p.Decision.Reasons[i].Code {
			return fail("the decision's reasons differ from the record's")
		}
	}
	if recorded.PolicyHash != "" && recorded.PolicyHash != p.PolicyHash {
		return fail("the policy hash is not the one the decision entry recorded")
	}
	if status, err := statusOf(p.Entries); err != nil {
		return fail("%v", err)
	} else if status != p.Status {
		return fail("status %s is not what the entries show (%s)", p.Status, status)
	}
	if pe := p.PolicyEntry; pe != nil {
		if err := check(*pe); err != nil {
			return fail("policy entry: %v", err)
		}
		if pe.Entry.Type != identity.EntryPolicy || pe.Entry.Seq >= first.Seq {
			return fail("the policy entry is not a gate.policy entry before the decision")
		}
		var pol struct {
			Digest string `json:"digest"`
		}
		if err := json.Unmarshal(pe.Entry.Data, &pol); err != nil || pol.Digest != p.PolicyHash {
			return fail("the policy hash is not the one the policy entry recorded")
		}
	}
	return &ProofVerification{Valid: true, PolicyVerified: recorded.PolicyHash != "", IntentID: p.IntentID, Outcome: string(recorded.Outcome)}
}

// statusOf replays an intent's entries into the status they leave it in.
func statusOf(entries []ProvenEntry) (pay.Status, error) {
	var st pay.Status
	for _, pe := range entries {
		e := pe.Entry
		switch e.Type {
		case "gate.decision":
			var d gate.Decision
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return "", fmt.Errorf("entry %d: %v", e.Seq, err)
			}
			st = map[gate.Outcome]pay.Status{gate.Deny: pay.StatusDenied, gate.Confirm: pay.StatusPendingApproval, gate.Allow: pay.StatusSettling}[d.Outcome]
		case "approval.granted":
			var a struct{ ApprovalsRequired, ApprovalsReceived int }
			if err := json.Unmarshal(e.Data, &a); err != nil {
				return "", fmt.Errorf("entry %d: %v", e.Seq, err)
			}
			if a.ApprovalsReceived >= a.ApprovalsRequired {
				st = pay.StatusSettling
			}
		case "payment.authorized":
			st = pay.StatusAuthorized
		case "payment.capture_requested", "payment.outcome_unknown":
			st = pay.StatusSettling
		case "payment.settled":
			st = pay.StatusSettled
		case "payment.failed":
			st = pay.StatusFailed
		case "approval.expired", "payment.hold_expired":
			st = pay.StatusExpired
		case "approval.declined":
			st = pay.StatusDeclined
		case "payment.voided":
			st = pay.StatusVoided
		case "payment.refunded":
			var r struct{ RemainingMinor int64 }
			if err := json.Unmarshal(e.Data, &r); err != nil {
				return "", fmt.Errorf("entry %d: %v", e.Seq, err)
			}
			st = pay.StatusPartiallyRefunded
			if r.RemainingMinor == 0 {
				st = pay.StatusRefunded
			}
		}
	}
	return st, nil
}
