package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// OperatorCall is the operator behind an operator-only request.
type OperatorCall = pay.OperatorCall

// ForgetRequest is the body of POST /memory/forget. The server checks
// Rationale and records it as the operator call's; in-process callers of
// [Service.Forget] give the rationale in the OperatorCall, which is what
// the record keeps.
type ForgetRequest struct {
	Mandate   string `json:"mandate" validate:"required,max=8192" doc:"A memory mandate granting canErase over the root's namespace."`
	RootID    string `json:"rootId" validate:"required,max=64" doc:"The record to erase, with every record derived from it, transitively."`
	Rationale string `json:"rationale" validate:"required,max=1024" doc:"Why, in at least 10 characters; recorded."`
}

type erasedData struct {
	RootID    string   `json:"rootId"`
	Namespace string   `json:"namespace"`
	Erased    []Erased `json:"erased"`
}

// MaxCascade bounds the records one erasure may take.
const MaxCascade = 100_000

// Forget erases a record and everything derived from it, transitively
// (POST /memory/forget; operator only, with a memory mandate granting
// canErase). In one transaction each record's body key, ciphertext,
// stored fields and index entries are deleted, a tombstone keeps its id
// and content digest, and memory.erased lists them. A store that can
// purge deleted data physically is then asked to, in the background
// ([Service.WaitPurge] waits for it). The answer is the
// erasure proof: the erased ids and digests, the memory.erased entry, its
// inclusion proof and a signed checkpoint.
func (s *Service) Forget(ctx context.Context, q ForgetRequest, call OperatorCall) (ErasureProof, error) {
	if !ids.Valid(ids.Memory, q.RootID) {
		return ErasureProof{}, invalid("rootId", "is not a memory record id")
	}
	var root *stored
	if err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		if root, err = getStored(r, q.RootID); err != nil {
			return err
		}
		if root == nil {
			return s.missing(r, q.RootID)
		}
		return nil
	}); err != nil {
		return ErasureProof{}, err
	}
	m, err := s.authorize(q.Mandate, nil, root.Namespace, rightErase)
	if err != nil {
		return ErasureProof{}, err
	}
	var proof ErasureProof
	var entry audit.Entry
	err = s.log.Update(ctx, func(txn store.Txn) error {
		if err := checkRevoked(txn, m); err != nil {
			return err
		}
		root, err := getStored(txn, q.RootID)
		if err != nil {
			return err
		}
		if root == nil {
			return s.missing(txn, q.RootID)
		}
		// The cascade: breadth first along derived_from, root first.
		order := []*stored{root}
		seen := map[string]bool{root.ID: true}
		for i := 0; i < len(order); i++ {
			deps, err := dependents(txn, order[i].ID, EdgeDerivedFrom)
			if err != nil {
				return err
			}
			for _, id := range deps {
				if seen[id] {
					continue
				}
				seen[id] = true
				d, err := getStored(txn, id)
				if err != nil {
					return err
				}
				if d == nil {
					continue
				}
				if len(order) == MaxCascade {
					return fail(CodeInvalid, "the cascade from %s exceeds %d records; erase its branches first", q.RootID, MaxCascade)
				}
				order = append(order, d)
			}
		}
		erased := make([]Erased, len(order))
		for i, st := range order {
			erased[i] = Erased{ID: st.ID, ContentDigest: st.Digest}
		}
		b, err := marshal(erasedData{RootID: root.ID, Namespace: root.Namespace, Erased: erased})
		if err != nil {
			return err
		}
		entry, err = s.log.Append(txn, audit.Record{Type: EntryErased, Actor: audit.Actor{Kind: "operator", ID: call.Operator},
			RequestID: call.RequestID, Rationale: call.Rationale, Data: b})
		if err != nil {
			return err
		}
		now := s.stamp()
		for _, st := range order {
			if err := unindex(txn, st); err != nil {
				return err
			}
			if err := putJSON(txn, []byte(keyErased+st.ID), tombstone{ErasedAt: now, Digest: st.Digest, Seq: entry.Seq}); err != nil {
				return err
			}
		}
		proof = ErasureProof{RootID: root.ID, Namespace: root.Namespace, Erased: erased}
		return nil
	})
	if err != nil {
		return ErasureProof{}, err
	}
	// The erasure is committed: nothing reads the records any more. The
	// physical purge rewrites tables and can take seconds in a large store,
	// so it runs after the answer; WaitPurge waits for it.
	s.purges.Add(1)
	go func(erased []Erased) {
		defer s.purges.Done()
		s.shred(context.WithoutCancel(ctx), erased)
	}(proof.Erased)
	proof.Entry = entry
	if proof.Inclusion, err = s.log.Inclusion(ctx, entry.Seq, 0); err != nil {
		return ErasureProof{}, fmt.Errorf("memory: forget: the erasure is recorded (entry %d) but its proof failed: %w", entry.Seq, err)
	}
	if err := s.signErasure(&proof); err != nil {
		return ErasureProof{}, err
	}
	return proof, nil
}

// WaitPurge waits until the physical purges of every erasure answered so
// far have finished (tests; a server waits before it closes its store).
func (s *Service) WaitPurge() { s.purges.Wait() }

// shred asks a store that can purge deleted data physically to do so for
// the erased records' keys and ciphertexts. It is best effort: the data
// is already unreachable; a failure is logged.
func (s *Service) shred(ctx context.Context, erased []Erased) {
	sh, ok := s.st.(store.Shredder)
	if !ok || len(erased) == 0 {
		return
	}
	idList := make([]string, len(erased))
	for i, e := range erased {
		idList[i] = e.ID
	}
	slices.Sort(idList)
	lo, hi := idList[0], idList[len(idList)-1]
	spans := [][2][]byte{
		{[]byte(keyKey + lo), store.PrefixEnd([]byte(keyKey + hi))},
		{[]byte(keyBody + lo), store.PrefixEnd([]byte(keyBody + hi))},
		{[]byte(keyRecord + lo), store.PrefixEnd([]byte(keyRecord + hi))},
	}
	if err := sh.Shred(ctx, spans); err != nil && !errors.Is(err, context.Canceled) {
		s.logger.WarnContext(ctx, "memory: erased data is unreachable but not yet purged from disk", "error", err)
	}
}
