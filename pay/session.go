package pay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/store"
)

// Sessions
//
// A session is a sub-budget and a lifetime under one mandate: an agent
// opens one for a task, and every instruction carrying its id is checked by
// the gate against it as well as against the mandate (deny
// session.exhausted, session.expired). What an intent reserves or settles
// counts against the session in the same transaction as against the
// mandate's period, and a reservation released (declined, expired, voided,
// the uncaptured rest of a hold) is given back to both.

// Errors of sessions.
var (
	ErrSessionNotFound = errcode.New(CodeSessionNotFound, "pay: no such session")
	ErrSessionClosed   = errcode.New(CodeSessionClosed, "pay: the session is closed or expired")
	ErrSessionInvalid  = errcode.New(CodeSessionInvalid, "pay: the session request breaks a rule")
)

// Session statuses.
const (
	SessionOpen    = "open"
	SessionClosed  = "closed"
	SessionExpired = "expired"
)

// Session is a sub-budget and lifetime under a mandate.
type Session struct {
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	AgentKeyID  string    `json:"agentKeyId"`
	Agent       string    `json:"agent"`
	MandateID   string    `json:"mandateId"`
	Currency    string    `json:"currency"`
	BudgetMinor int64     `json:"budgetMinor"`
	UsedMinor   int64     `json:"usedMinor"`
	ExpiresAt   time.Time `json:"expiresAt"`
	CreatedAt   time.Time `json:"createdAt"`
	UpdatedAt   time.Time `json:"updatedAt"`
	Purpose     string    `json:"purpose,omitempty"`
}

// OpenSession is what [Service.openSession] needs.
type OpenSession struct {
	ID          string // minted by the caller ("ses_...")
	Mandate     string // the mandate token
	BudgetMinor int64
	TTL         time.Duration
	Purpose     string
}

// MaxSessionTTL bounds a session's lifetime.
const MaxSessionTTL = 30 * 24 * time.Hour

// openSession verifies the mandate and opens a session under it for the
// caller's agent key. The budget may not exceed the mandate's period cap,
// and the session ends at the latest when the mandate expires. within runs
// in the same transaction (the protocol surface records the opening).
func (s *Service) openSession(ctx context.Context, c Caller, req OpenSession, within func(store.Txn, *Session) error) (*Session, error) {
	m, err := s.mandates.Verify(req.Mandate)
	if err != nil {
		return nil, err
	}
	if !c.mayActFor(m.Claims.Agent) {
		return nil, &UnauthorizedError{Reason: ReasonAgentNotPermitted}
	}
	if req.BudgetMinor <= 0 || req.BudgetMinor > m.Claims.PerPeriodCapMinor {
		return nil, fmt.Errorf("%w: budgetMinor must be 1..%d (the mandate's period cap)", ErrSessionInvalid, m.Claims.PerPeriodCapMinor)
	}
	if req.TTL < time.Minute || req.TTL > MaxSessionTTL {
		return nil, fmt.Errorf("%w: ttlSeconds must be 60..%d", ErrSessionInvalid, int64(MaxSessionTTL/time.Second))
	}
	var out *Session
	err = s.log.Update(ctx, func(txn store.Txn) error {
		out = nil
		if revoked, err := isRevoked(txn, m.ID); err != nil {
			return err
		} else if revoked {
			return &UnauthorizedError{Reason: ReasonMandateRevoked}
		}
		if revoked, err := identityRevoked(txn, m.Claims.Agent); err != nil {
			return err
		} else if revoked {
			return &UnauthorizedError{Reason: ReasonIdentityRevoked}
		}
		now := s.now().UTC().Truncate(time.Microsecond)
		if err := s.rememberMandate(txn, m, now); err != nil {
			return err
		}
		exp := now.Add(req.TTL)
		if me := m.Claims.ExpiresAt.UTC(); me.Before(exp) {
			exp = me
		}
		ses := &Session{ID: req.ID, Status: SessionOpen, AgentKeyID: c.KeyID, Agent: m.Claims.Agent, MandateID: m.ID,
			Currency: m.Claims.Currency, BudgetMinor: req.BudgetMinor, ExpiresAt: exp, CreatedAt: now, UpdatedAt: now, Purpose: req.Purpose}
		if err := putSession(txn, ses); err != nil {
			return err
		}
		if err := txn.Set(sessionExpiryKey(exp, ses.ID), nil); err != nil {
			return err
		}
		if within != nil {
			if err := within(txn, ses); err != nil {
				return err
			}
		}
		out = ses
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetSession returns a session of the caller's agent key.
func (s *Service) GetSession(ctx context.Context, c Caller, id string) (*Session, error) {
	var out *Session
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		out, err = getSession(r, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.AgentKeyID != c.KeyID {
		return nil, ErrSessionNotFound
	}
	return out, nil
}

// closeSession closes an open session of the caller's agent key: later
// instructions naming it are denied; intents already under it finish as
// they would have. within runs in the same transaction.
func (s *Service) closeSession(ctx context.Context, c Caller, id string, within func(store.Txn, *Session) error) (*Session, error) {
	var out *Session
	err := s.log.Update(ctx, func(txn store.Txn) error {
		out = nil
		ses, err := getSession(txn, id)
		if err != nil {
			return err
		}
		if ses.AgentKeyID != c.KeyID {
			return ErrSessionNotFound
		}
		if ses.Status != SessionOpen {
			return fmt.Errorf("%w (status %s)", ErrSessionClosed, ses.Status)
		}
		if err := s.endSession(txn, ses, SessionClosed); err != nil {
			return err
		}
		if within != nil {
			if err := within(txn, ses); err != nil {
				return err
			}
		}
		out = ses
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) endSession(txn store.Txn, ses *Session, status string) error {
	if err := txn.Delete(sessionExpiryKey(ses.ExpiresAt, ses.ID)); err != nil {
		return err
	}
	ses.Status, ses.UpdatedAt = status, s.now().UTC().Truncate(time.Microsecond)
	return putSession(txn, ses)
}

// expireSessions moves every open session whose lifetime has passed to
// expired, calling within for each in the same transaction, and returns
// how many. The protocol scheduler runs it.
func (s *Service) expireSessions(ctx context.Context, within func(store.Txn, *Session) error) (int, error) {
	n := 0
	err := s.log.Update(ctx, func(txn store.Txn) error {
		n = 0
		upper := append([]byte(keySessionExpiry), be8(uint64(s.now().UnixNano())+1)...)
		it := txn.Iterate([]byte(keySessionExpiry), upper, false)
		var due []string
		for it.Next() && len(due) < 1000 {
			due = append(due, string(it.Key()[len(keySessionExpiry)+8:]))
		}
		if err := it.Close(); err != nil {
			return err
		}
		for _, id := range due {
			ses, err := getSession(txn, id)
			if err != nil {
				return err
			}
			if err := s.endSession(txn, ses, SessionExpired); err != nil {
				return err
			}
			if within != nil {
				if err := within(txn, ses); err != nil {
					return err
				}
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("pay: expire sessions: %w", err)
	}
	return n, nil
}

// sessionGate reads the session an instruction names, for the gate. A
// session of another agent key is reported unknown, as if it did not
// exist.
func (s *Service) sessionGate(r store.Reader, c Caller, id string, now time.Time) (*gate.Session, *Session, error) {
	ses, err := getSession(r, id)
	if errors.Is(err, ErrSessionNotFound) || (err == nil && ses.AgentKeyID != c.KeyID) {
		return &gate.Session{ID: id, Unknown: true}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return &gate.Session{
		ID: id, MandateID: ses.MandateID, BudgetMinor: ses.BudgetMinor, UsedMinor: ses.UsedMinor,
		Ended: ses.Status != SessionOpen || !now.Before(ses.ExpiresAt),
	}, ses, nil
}

// chargeSession counts minor against a session inside txn.
func chargeSession(txn store.Txn, ses *Session, minor int64, now time.Time) error {
	ses.UsedMinor += minor
	ses.UpdatedAt = now
	return putSession(txn, ses)
}

// releaseSession gives minor back to a session's budget.
func releaseSession(txn store.Txn, id string, minor int64) error {
	ses, err := getSession(txn, id)
	if errors.Is(err, ErrSessionNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ses.UsedMinor = max(0, ses.UsedMinor-minor)
	return putSession(txn, ses)
}

func sessionExpiryKey(at time.Time, id string) []byte {
	return append(append([]byte(keySessionExpiry), be8(uint64(at.UnixNano()))...), id...)
}

func putSession(txn store.Txn, ses *Session) error {
	b, err := json.Marshal(ses)
	if err != nil {
		return err
	}
	return txn.Set([]byte(keySession+ses.ID), b)
}

func getSession(r store.Reader, id string) (*Session, error) {
	b, err := r.Get([]byte(keySession + id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrSessionNotFound
	}
	if err != nil {
		return nil, err
	}
	var ses Session
	if err := json.Unmarshal(b, &ses); err != nil {
		return nil, fmt.Errorf("pay: session %s: %w", id, err)
	}
	return &ses, nil
}
