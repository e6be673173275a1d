package protocol

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/ledger"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace stake: a bond moved from an identity's available custody into
// a lock of its own (a ledger account per stake). It is released back
// after lockedUntil if no open dispute names it; only dispute resolution
// (part 2 of the surface) slashes it. The end of the lock is a scheduled
// transition (locked → releasable), recorded like any other change.

// Problem codes of stakes.
const (
	CodeStakeNotFound = "stake.not_found"
	CodeStakeLocked   = "stake.locked"
	CodeStakeDisputed = "stake.disputed"
	CodeStakeReleased = "stake.already_released"
	CodeStakeInvalid  = "stake.invalid"
)

var (
	errStakeNotFound = errcode.New(CodeStakeNotFound, "protocol: no such stake")
	errStakeLocked   = errcode.New(CodeStakeLocked, "protocol: the stake is locked until lockedUntil")
	errStakeDisputed = errcode.New(CodeStakeDisputed, "protocol: an open dispute names the stake")
	errStakeReleased = errcode.New(CodeStakeReleased, "protocol: the stake was already released or slashed")
	errStakeInvalid  = errcode.New(CodeStakeInvalid, "protocol: the stake request breaks a rule")
)

// Stake statuses.
const (
	StakeLocked     = "locked"
	StakeReleasable = "releasable"
	StakeReleased   = "released"
	StakeSlashed    = "slashed"
)

// Stake is a bond locked out of custody.
type Stake struct {
	ID          string     `json:"id" doc:"stk_..."`
	Status      string     `json:"status" doc:"locked, releasable (the lock ended), released or slashed."`
	Agent       string     `json:"agent"`
	AgentKeyID  string     `json:"agentKeyId"`
	Amount      pay.Amount `json:"amount"`
	LockedUntil time.Time  `json:"lockedUntil"`
	Purpose     string     `json:"purpose"`
	// SlashedMinor is what dispute resolutions took from it.
	SlashedMinor int64     `json:"slashedMinor,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	Entries      []uint64  `json:"entries"`
}

func stakeKey(id string) []byte { return []byte("protocol/stake/" + id) }

func stakeUnlockKey(at time.Time, id string) []byte {
	return append(append([]byte("protocol/stake-unlock/"), be8(uint64(at.UnixNano()))...), id...)
}

// stakeDisputePrefix is where an open dispute naming a stake is indexed
// (written by the dispute namespace).
func stakeDisputePrefix(id string) []byte { return []byte("protocol/dispute-by-stake/" + id + "/") }

// StakePostRequest is the body of stake.post.
type StakePostRequest struct {
	Agent          string     `json:"agent,omitempty" validate:"omitempty,len=64,hexadecimal,lowercase"`
	Amount         pay.Amount `json:"amount"`
	LockedUntil    time.Time  `json:"lockedUntil" doc:"RFC 3339; after it the stake may be released. At most one year ahead."`
	Purpose        string     `json:"purpose" validate:"required,max=500"`
	IdempotencyKey string     `json:"idempotencyKey" validate:"required,max=255,printascii" doc:"A repeat with the same key and body answers the same stake; another body is 422 idempotency.conflict."`
}

// StakePosted is the answer of stake.post.
type StakePosted struct {
	Stake
	replayed bool
}

// WasReplayed reports an idempotent repeat.
func (p *StakePosted) WasReplayed() bool { return p.replayed }

// stakeIdem keeps the first answer of a stake.post key.
type stakeIdem struct {
	Digest  string `json:"digest"`
	StakeID string `json:"stakeId"`
	Answer  Stake  `json:"answer"`
}

// StakePost locks an amount of the identity's available custody. A
// repeat of the same key and body answers the first answer, byte for
// byte, whatever happened to the stake since.
func (s *Service) StakePost(ctx context.Context, call Call, req *StakePostRequest) (*StakePosted, error) {
	agent, err := s.agentOf(call, req.Agent)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(req)
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	idemKey := []byte("protocol/idem/stake.post/" + call.Agent.KeyID + "/" + req.IdempotencyKey)
	var out *StakePosted
	id := ids.New("stk_")
	err = s.log.Update(ctx, func(txn store.Txn) error {
		out = nil
		var prior stakeIdem
		if err := getJSON(txn, idemKey, &prior); err == nil {
			if prior.Digest != digest {
				return pay.ErrIdempotencyConflict
			}
			out = &StakePosted{Stake: prior.Answer, replayed: true}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := s.clock()
		if !pay.ValidCurrency(req.Amount.Currency) || req.Amount.Minor <= 0 {
			return fmt.Errorf("%w: amount must be positive in a valid currency", errStakeInvalid)
		}
		if !req.LockedUntil.After(now) || req.LockedUntil.After(now.AddDate(1, 0, 0)) {
			return fmt.Errorf("%w: lockedUntil must be in the future and within a year", errStakeInvalid)
		}
		st := Stake{ID: id, Status: StakeLocked, Agent: agent, AgentKeyID: call.Agent.KeyID, Amount: req.Amount,
			LockedUntil: req.LockedUntil.UTC().Truncate(time.Microsecond), Purpose: req.Purpose, CreatedAt: now, UpdatedAt: now}
		err := s.post(txn, "stake.lock", id, req.Amount.Currency, move(availableAccount(agent), stakeAccount(agent, id), req.Amount.Minor)...)
		if errors.Is(err, ledger.ErrInsufficientFunds) {
			return fmt.Errorf("%w: the stake is more than the available custody", errInsufficient)
		}
		if err != nil {
			return err
		}
		if err := s.putStake(txn, call, "protocol.stake.post", &st); err != nil {
			return err
		}
		if err := txn.Set(stakeUnlockKey(st.LockedUntil, id), nil); err != nil {
			return err
		}
		out = &StakePosted{Stake: st}
		return putJSON(txn, idemKey, stakeIdem{Digest: digest, StakeID: id, Answer: st})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putStake records the stake's new state and stores it with the entry.
func (s *Service) putStake(txn store.Txn, call Call, typ string, st *Stake) error {
	return putObject(s, txn, call, typ, "", stakeKey(st.ID), st)
}

// StakeRef names a stake.
type StakeRef struct {
	StakeID string `json:"stakeId" validate:"required,max=64"`
}

// StakeGet returns a stake of the caller.
func (s *Service) StakeGet(ctx context.Context, call Call, req *StakeRef) (*Stake, error) {
	var st Stake
	err := s.st.View(ctx, func(r store.Reader) error { return s.ownStake(r, call, req.StakeID, &st) })
	if err != nil {
		return nil, err
	}
	return &st, nil
}

func (s *Service) ownStake(r store.Reader, call Call, id string, st *Stake) error {
	err := getJSON(r, stakeKey(id), st)
	if errors.Is(err, store.ErrNotFound) || (err == nil && st.AgentKeyID != call.Agent.KeyID) {
		return errStakeNotFound
	}
	return err
}

// StakeRelease moves a stake back to available custody, after its lock
// and only if no open dispute names it.
func (s *Service) StakeRelease(ctx context.Context, call Call, req *StakeRef) (*Stake, error) {
	var st Stake
	err := s.log.Update(ctx, func(txn store.Txn) error {
		st = Stake{}
		if err := s.ownStake(txn, call, req.StakeID, &st); err != nil {
			return err
		}
		switch {
		case st.Status == StakeReleased || st.Status == StakeSlashed:
			return errStakeReleased
		case s.clock().Before(st.LockedUntil):
			return fmt.Errorf("%w (%s)", errStakeLocked, st.LockedUntil.Format(time.RFC3339))
		}
		if open, err := hasAny(txn, stakeDisputePrefix(st.ID)); err != nil {
			return err
		} else if open {
			return errStakeDisputed
		}
		bal, err := ledger.Balance(txn, stakeAccount(st.Agent, st.ID), st.Amount.Currency)
		if err != nil {
			return err
		}
		if bal > 0 {
			if err := s.post(txn, "stake.release", st.ID, st.Amount.Currency, move(stakeAccount(st.Agent, st.ID), availableAccount(st.Agent), bal)...); err != nil {
				return err
			}
		}
		if err := txn.Delete(stakeUnlockKey(st.LockedUntil, st.ID)); err != nil {
			return err
		}
		st.Status, st.UpdatedAt = StakeReleased, s.clock()
		return s.putStake(txn, call, "protocol.stake.release", &st)
	})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// unlockStakes is the scheduled end of stake locks: locked → releasable.
func (s *Service) unlockStakes(ctx context.Context) (int, error) {
	n := 0
	err := s.log.Update(ctx, func(txn store.Txn) error {
		n = 0
		prefix := []byte("protocol/stake-unlock/")
		upper := append(append([]byte(nil), prefix...), be8(uint64(s.now().UnixNano())+1)...)
		it := txn.Iterate(prefix, upper, false)
		var due [][]byte
		for it.Next() && len(due) < 1000 {
			due = append(due, append([]byte(nil), it.Key()...))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, k := range due {
			var st Stake
			if err := getJSON(txn, stakeKey(string(k[len(prefix)+8:])), &st); err != nil {
				return err
			}
			if err := txn.Delete(k); err != nil {
				return err
			}
			if st.Status != StakeLocked {
				continue
			}
			st.Status, st.UpdatedAt = StakeReleasable, s.clock()
			if err := s.putStake(txn, systemCall(""), "protocol.stake.unlock", &st); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	return n, err
}

func hasAny(r store.Reader, prefix []byte) (bool, error) {
	it := r.Iterate(prefix, store.PrefixEnd(prefix), false)
	ok := it.Next()
	return ok, it.Close()
}

func (st *Stake) entryList() *[]uint64 { return &st.Entries }
