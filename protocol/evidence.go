package protocol

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/identity"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/jcsenc"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
)

// Namespace evidence: statements about what happened (a delivery, a
// completed task), each of a class that is checked, never trusted. The
// classes are ordered by how much they prove:
//
//	self < sign < {wit, rec} < att < proof < pote
//
// wit and rec are incomparable: a witness's signature and a merchant's
// receipt prove different things, so neither satisfies a floor of the
// other (att, proof and pote satisfy both). Each class is verified against
// the keys configured for it (Options.Evidence) before it is stored:
//
//   - self: the agent's own statement; its credential is the only check.
//   - sign: the counterparty's Ed25519 signature (its agent id, through
//     package identity; a counterparty the operator revoked is refused).
//   - wit: a configured witness's signature.
//   - rec: a receipt signature of a registered merchant or rail.
//   - att: a configured attester's signature.
//   - proof: the statement is a record of a transparency log whose key is
//     configured: a signed checkpoint and an RFC 6962 inclusion proof.
//   - pote: proof of timely execution: a proof whose checkpoint a
//     configured witness co-signed as well (logged and witnessed).
//
// A statement is a JSON object naming its subject (the obligation or
// payment it is about); signatures cover its RFC 8785 canonical form after
// a fixed context line, so they cannot be replayed for another subject or
// read as anything else.

// EvidenceClass is a class of evidence.
type EvidenceClass string

// The evidence classes, weakest first.
const (
	ClassSelf  EvidenceClass = "self"
	ClassSign  EvidenceClass = "sign"
	ClassWit   EvidenceClass = "wit"
	ClassRec   EvidenceClass = "rec"
	ClassAtt   EvidenceClass = "att"
	ClassProof EvidenceClass = "proof"
	ClassPote  EvidenceClass = "pote"
)

// EvidenceClasses returns the classes, weakest first (wit before rec,
// though neither is above the other).
func EvidenceClasses() []EvidenceClass {
	return []EvidenceClass{ClassSelf, ClassSign, ClassWit, ClassRec, ClassAtt, ClassProof, ClassPote}
}

var classRank = map[EvidenceClass]int{ClassSelf: 0, ClassSign: 1, ClassWit: 2, ClassRec: 2, ClassAtt: 3, ClassProof: 4, ClassPote: 5}

// Valid reports whether c is one of the seven classes.
func (c EvidenceClass) Valid() bool { _, ok := classRank[c]; return ok }

// Satisfies reports whether evidence of class c meets a floor: c is the
// floor or above it in the order. wit and rec do not satisfy each other;
// an unknown class satisfies nothing and no unknown floor is met.
func (c EvidenceClass) Satisfies(floor EvidenceClass) bool {
	rc, ok1 := classRank[c]
	rf, ok2 := classRank[floor]
	switch {
	case !ok1 || !ok2:
		return false
	case c == floor:
		return true
	case rc == rf: // wit and rec
		return false
	}
	return rc > rf
}

// maximal returns the classes of achieved that no other achieved class
// satisfies, weakest first: what the evidence amounts to.
func maximal(achieved []EvidenceClass) []EvidenceClass {
	out := []EvidenceClass{}
	for _, c := range EvidenceClasses() {
		if !slices.Contains(achieved, c) {
			continue
		}
		dominated := false
		for _, d := range achieved {
			if d != c && d.Satisfies(c) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, c)
		}
	}
	return out
}

// EvidenceKeys are the keys each class is checked against. Names are how
// a submission names its signer.
type EvidenceKeys struct {
	// Witnesses sign wit evidence and co-sign the checkpoints of pote.
	Witnesses map[string]ed25519.PublicKey
	// Receipts are registered merchants and rails whose receipt
	// signatures make rec evidence.
	Receipts map[string]ed25519.PublicKey
	// Attesters sign att evidence.
	Attesters map[string]ed25519.PublicKey
	// Logs are transparency logs, by origin, as note verifier keys
	// ("origin+hash+base64"); proof and pote evidence is a record of one.
	Logs map[string]string
}

// Problem codes of evidence.
const (
	CodeEvidenceNotFound = "evidence.not_found"
	CodeEvidenceInvalid  = "evidence.invalid"
	CodeEvidenceSigner   = "evidence.unknown_signer"
	CodeEvidenceSubject  = "evidence.subject_unknown"
)

var (
	errEvidenceNotFound = errcode.New(CodeEvidenceNotFound, "protocol: no such evidence")
	errEvidenceInvalid  = errcode.New(CodeEvidenceInvalid, "protocol: the evidence does not verify")
	errEvidenceSigner   = errcode.New(CodeEvidenceSigner, "protocol: no key is configured for this signer and class")
	errEvidenceSubject  = errcode.New(CodeEvidenceSubject, "protocol: no obligation or payment of the caller has this id")
)

// MaxStatement bounds a statement's canonical size.
const MaxStatement = 16 << 10

// evidenceContext starts the bytes every evidence signature covers.
const evidenceContext = "countersign/evidence/v1\n"

// CanonicalStatement checks that raw is one JSON object whose "subject"
// member is subject, at most MaxStatement bytes canonical, and returns its
// RFC 8785 form: the bytes a proof's log records and the rest of a
// signature's input.
func CanonicalStatement(raw []byte, subject string) ([]byte, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%w: the statement must be a JSON object", errEvidenceInvalid)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the statement", errEvidenceInvalid)
	}
	var got string
	if err := json.Unmarshal(obj["subject"], &got); err != nil || got != subject {
		return nil, fmt.Errorf("%w: the statement's subject member must be %q", errEvidenceInvalid, subject)
	}
	// Exactly: RFC 8785 would round an integer beyond 2^53 to the
	// nearest double, and the signature would then cover a number its
	// author never wrote.
	c, err := jcsenc.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the statement has no exact canonical form: %v", errEvidenceInvalid, err)
	}
	if len(c) > MaxStatement {
		return nil, fmt.Errorf("%w: the statement is over %d bytes", errEvidenceInvalid, MaxStatement)
	}
	return c, nil
}

// EvidenceSigningBytes are the bytes an evidence signature covers: a
// context line, then the statement's canonical form.
func EvidenceSigningBytes(canonical []byte) []byte {
	return append([]byte(evidenceContext), canonical...)
}

// SignEvidence signs a statement about subject with key: the signature of
// sign, wit, rec and att evidence (base64url, no padding).
func SignEvidence(statement []byte, subject string, key ed25519.PrivateKey) (string, error) {
	c, err := CanonicalStatement(statement, subject)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, EvidenceSigningBytes(c))), nil
}

// LogProof is the proof of proof and pote evidence: the statement's
// canonical bytes are a record of a log.
type LogProof struct {
	Checkpoint string   `json:"checkpoint" validate:"required,max=8192" doc:"The C2SP signed checkpoint note (for pote, co-signed by a configured witness)."`
	Index      uint64   `json:"index" doc:"The record's index in the tree."`
	Hashes     []string `json:"hashes" validate:"max=64,dive,max=64" doc:"The RFC 6962 inclusion proof, standard base64 hashes."`
}

// EvidenceSubmitRequest is the body of evidence.submit.
type EvidenceSubmitRequest struct {
	Subject   string          `json:"subject" validate:"required,max=64" doc:"The obligation (obl_...) or payment (int_...) the evidence is about."`
	Class     EvidenceClass   `json:"class" validate:"required,oneof=self sign wit rec att proof pote"`
	Statement json.RawMessage `json:"statement" doc:"A JSON object whose subject member is the subject; what it says is up to the parties (what was delivered, a digest, a time)."`
	Signer    string          `json:"signer,omitempty" validate:"max=128" doc:"sign: the counterparty's agent id (defaults to the obligation's); wit, rec, att: the configured name of the key; proof, pote: the log's origin."`
	Signature string          `json:"signature,omitempty" validate:"max=256" doc:"sign, wit, rec, att: Ed25519 over the context line countersign/evidence/v1 and the statement's RFC 8785 form, base64url."`
	Proof     *LogProof       `json:"proof,omitempty" doc:"proof, pote: the inclusion proof of the statement's canonical bytes."`
}

// Evidence is a verified piece of evidence.
type Evidence struct {
	ID         string          `json:"id" doc:"evd_..."`
	Subject    string          `json:"subject"`
	Class      EvidenceClass   `json:"class" doc:"The class as verified."`
	Signer     string          `json:"signer,omitempty"`
	Statement  json.RawMessage `json:"statement" doc:"The statement in its RFC 8785 form."`
	Digest     string          `json:"digest" doc:"SHA-256 of the canonical statement, hex."`
	AgentKeyID string          `json:"agentKeyId"`
	CreatedAt  time.Time       `json:"createdAt"`
	Entries    []uint64        `json:"entries"`
}

// EvidenceSubmitted is the answer of evidence.submit: the evidence and,
// for an obligation, the clearing it triggered.
type EvidenceSubmitted struct {
	Evidence Evidence  `json:"evidence"`
	Clearing *Clearing `json:"clearing,omitempty" doc:"For an obligation: the clearing attempted with this evidence (cleared, or pending with the awaited class)."`
	replayed bool
}

// WasReplayed reports evidence submitted before (same subject, class and
// statement): nothing new was stored.
func (e *EvidenceSubmitted) WasReplayed() bool { return e.replayed }

// IsAccepted reports an obligation still below its floor (202).
func (e *EvidenceSubmitted) IsAccepted() bool { return e.Clearing != nil && e.Clearing.IsAccepted() }

func evidenceKey(id string) []byte { return []byte("protocol/evidence/" + id) }

// evidenceBySubject is the classes of the evidence about subject, by
// evidence id (+ id → class): what the clearing reads.
func evidenceBySubject(subject string) []byte {
	return []byte("protocol/evidence-by-subject/" + subject + "/")
}

// evidenceOrder is the order rows of the evidence about subject, which
// evidence.list pages.
func evidenceOrder(subject string) string { return keyEvidenceOrder + subject + "/" }

func evidenceDigestKey(subject string, class EvidenceClass, digest string) []byte {
	return []byte("protocol/evidence-digest/" + subject + "/" + string(class) + "/" + digest)
}

// EvidenceSubmit verifies a piece of evidence for its class and stores it
// (protocol.evidence.submit). Evidence about an obligation then attempts
// its clearing at once.
func (s *Service) EvidenceSubmit(ctx context.Context, call Call, req *EvidenceSubmitRequest) (*EvidenceSubmitted, error) {
	subj, err := s.subjectOf(ctx, call, req.Subject)
	if err != nil {
		return nil, err
	}
	if subj.obligation {
		// Evidence for an obligation that can never clear is refused:
		// it could only mislead.
		switch err := obligationOpen(subj.intent, s.clock()); {
		case errors.Is(err, errDeadlinePassed), errors.Is(err, errObligationCancelled), errors.Is(err, errObligationClosed):
			return nil, err
		}
	}
	canon, err := CanonicalStatement(req.Statement, req.Subject)
	if err != nil {
		return nil, err
	}
	signer, err := s.verifyEvidence(ctx, req, subj, canon)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	digest := hex.EncodeToString(sum[:])
	var out *EvidenceSubmitted
	err = s.log.Update(ctx, func(txn store.Txn) error {
		out = nil
		id := ids.New("evd_")
		if subj.obligation {
			if cancelling, err := hasAny(txn, cancellingKey(req.Subject)); err != nil {
				return err
			} else if cancelling {
				return errObligationCancelled
			}
		}
		dk := evidenceDigestKey(req.Subject, req.Class, digest)
		if prior, err := txn.Get(dk); err == nil {
			var ev Evidence
			if err := getJSON(txn, evidenceKey(string(prior)), &ev); err != nil {
				return err
			}
			out = &EvidenceSubmitted{Evidence: ev, replayed: true}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		ev := Evidence{ID: id, Subject: req.Subject, Class: req.Class, Signer: signer, Statement: canon, Digest: digest,
			AgentKeyID: call.Agent.KeyID, CreatedAt: s.clock()}
		e, err := s.record(txn, call, "protocol.evidence.submit", subj.intentID, ev)
		if err != nil {
			return err
		}
		ev.Entries = []uint64{e.Seq}
		if err := putJSON(txn, evidenceKey(id), ev); err != nil {
			return err
		}
		if err := txn.Set(dk, []byte(id)); err != nil {
			return err
		}
		if err := txn.Set(append(evidenceBySubject(req.Subject), id...), []byte(req.Class)); err != nil {
			return err
		}
		if err := txn.Set(seqlist.Key(evidenceOrder(req.Subject), e.Seq, id), nil); err != nil {
			return err
		}
		out = &EvidenceSubmitted{Evidence: ev}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if subj.obligation {
		c, err := s.clear(ctx, call, req.Subject, true)
		if err != nil {
			return nil, err
		}
		out.Clearing = c
	}
	return out, nil
}

// verifyEvidence checks a submission against its class's keys and returns
// the signer as stored.
func (s *Service) verifyEvidence(ctx context.Context, req *EvidenceSubmitRequest, subj subject, canon []byte) (string, error) {
	keys := s.evidence
	signed := func(set map[string]ed25519.PublicKey) (string, error) {
		pub, ok := set[req.Signer]
		if !ok {
			return "", fmt.Errorf("%w: %s has no %s key named %q", errEvidenceSigner, req.Class, req.Class, req.Signer)
		}
		return req.Signer, checkEvidenceSig(pub, req.Signature, canon)
	}
	switch req.Class {
	case ClassSelf:
		if req.Signer != "" || req.Signature != "" || req.Proof != nil {
			return "", fmt.Errorf("%w: self evidence carries no signer, signature or proof", errEvidenceInvalid)
		}
		return "", nil
	case ClassSign:
		cp := subj.counterparty
		if req.Signer != "" && req.Signer != cp {
			return "", fmt.Errorf("%w: sign evidence is the counterparty's (%q), not %q", errEvidenceSigner, cp, req.Signer)
		}
		if cp == "" {
			return "", fmt.Errorf("%w: the subject names no counterparty, so nothing can be sign evidence", errEvidenceSigner)
		}
		pub, err := identity.PublicKeyOf(cp)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errEvidenceSigner, err)
		}
		if err := s.counterpartyLive(ctx, cp); err != nil {
			return "", err
		}
		return cp, checkEvidenceSig(pub, req.Signature, canon)
	case ClassWit:
		return signed(keys.Witnesses)
	case ClassRec:
		return signed(keys.Receipts)
	case ClassAtt:
		return signed(keys.Attesters)
	case ClassProof, ClassPote:
		if req.Proof == nil || req.Signature != "" {
			return "", fmt.Errorf("%w: %s evidence carries a proof and no signature", errEvidenceInvalid, req.Class)
		}
		logKey, ok := keys.Logs[req.Signer]
		if !ok {
			return "", fmt.Errorf("%w: no log with origin %q is configured", errEvidenceSigner, req.Signer)
		}
		var witnesses []string
		if req.Class == ClassPote {
			for _, name := range sortedKeys(keys.Witnesses) {
				vk, err := witnessNoteKey(name, keys.Witnesses[name])
				if err != nil {
					return "", err
				}
				witnesses = append(witnesses, vk)
			}
		}
		cosigned, err := audit.VerifyLogInclusion(req.Proof.Checkpoint, logKey, witnesses, canon, req.Proof.Index, req.Proof.Hashes)
		if err != nil {
			return "", fmt.Errorf("%w: %v", errEvidenceInvalid, err)
		}
		if req.Class == ClassPote && len(cosigned) == 0 {
			return "", fmt.Errorf("%w: pote needs the checkpoint co-signed by a configured witness", errEvidenceInvalid)
		}
		return req.Signer, nil
	}
	return "", fmt.Errorf("%w: unknown class %q", errEvidenceInvalid, req.Class)
}

func checkEvidenceSig(pub ed25519.PublicKey, sig string, canon []byte) error {
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: signature is not 64 bytes of base64url", errEvidenceInvalid)
	}
	if !ed25519.Verify(pub, EvidenceSigningBytes(canon), raw) {
		return fmt.Errorf("%w: the signature does not verify with the signer's key", errEvidenceInvalid)
	}
	return nil
}

// witnessNoteKey is the note verifier key of a witness: the key pote
// checkpoints are co-signed with (a signed-note Ed25519 signature line
// under the witness's name).
func witnessNoteKey(name string, pub ed25519.PublicKey) (string, error) {
	if strings.ContainsAny(name, "+ \n") || name == "" {
		return "", fmt.Errorf("protocol: witness name %q cannot name a note key", name)
	}
	return note.NewEd25519VerifierKey(name, pub)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// EvidenceRef names a piece of evidence.
type EvidenceRef struct {
	EvidenceID string `json:"evidenceId" validate:"required,max=64"`
}

// EvidenceGet returns a piece of evidence about one of the caller's
// subjects.
func (s *Service) EvidenceGet(ctx context.Context, call Call, req *EvidenceRef) (*Evidence, error) {
	var ev Evidence
	err := s.st.View(ctx, func(r store.Reader) error {
		err := getJSON(r, evidenceKey(req.EvidenceID), &ev)
		if errors.Is(err, store.ErrNotFound) {
			return errEvidenceNotFound
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, err := s.subjectOf(ctx, call, ev.Subject); err != nil {
		return nil, errEvidenceNotFound
	}
	return &ev, nil
}

// EvidenceListRequest is the body of evidence.list.
type EvidenceListRequest struct {
	Subject string `json:"subject" validate:"required,max=64"`
	Cursor  string `json:"cursor,omitempty" validate:"max=64" doc:"Opaque: the nextCursor of the previous page."`
	Limit   int    `json:"limit,omitempty" validate:"omitempty,min=1,max=100"`
}

// EvidenceList is a page of evidence, oldest first.
type EvidenceList struct {
	Evidence   []Evidence `json:"evidence"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// EvidenceList pages the evidence about one of the caller's subjects.
func (s *Service) EvidenceList(ctx context.Context, call Call, req *EvidenceListRequest) (*EvidenceList, error) {
	if _, err := s.subjectOf(ctx, call, req.Subject); err != nil {
		return nil, err
	}
	items, next, err := listPage(ctx, s, evidenceOrder(req.Subject), "evd_", req.Cursor, req.Limit,
		func(r store.Reader, id string) (Evidence, bool, error) {
			var ev Evidence
			return ev, true, getJSON(r, evidenceKey(id), &ev)
		})
	if err != nil {
		return nil, err
	}
	return &EvidenceList{Evidence: items, NextCursor: next}, nil
}

// achievedClasses reads the classes of the evidence about a subject.
func achievedClasses(r store.Reader, subject string) ([]EvidenceClass, error) {
	prefix := evidenceBySubject(subject)
	it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
	var out []EvidenceClass
	for it.Next() {
		c := EvidenceClass(it.Value())
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, it.Close()
}

// admissible returns the first evidence about subject whose class meets
// the floor, if any.
func admissible(r store.Reader, subject string, floor EvidenceClass) (string, error) {
	prefix := evidenceBySubject(subject)
	it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
	for it.Next() {
		if EvidenceClass(it.Value()).Satisfies(floor) {
			id := string(it.Key()[len(prefix):])
			return id, it.Close()
		}
	}
	return "", it.Close()
}
