package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// Namespace session: a sub-budget and lifetime under a mandate (package
// pay keeps it, since the gate checks it in the deciding transaction). An
// instruction carrying sessionId is denied session.exhausted,
// session.expired, session.unknown or session.mandate_mismatch.

// Session is a session as the surface shows it.
type Session struct {
	pay.Session
	RemainingMinor int64    `json:"remainingMinor"`
	Entries        []uint64 `json:"entries"`
}

func sessionOf(ses *pay.Session) Session {
	return Session{Session: *ses, RemainingMinor: max(0, ses.BudgetMinor-ses.UsedMinor)}
}

func sessionEntriesKey(id string) []byte { return []byte("protocol/session-entries/" + id) }

// SessionOpenRequest is the body of session.open.
type SessionOpenRequest struct {
	Mandate     string `json:"mandate" validate:"required,max=16384,jwt" doc:"The mandate token the session spends under."`
	BudgetMinor int64  `json:"budgetMinor" validate:"gt=0,lt=9007199254740992" doc:"The session's budget in the mandate's currency, at most its period cap."`
	TTLSeconds  int64  `json:"ttlSeconds" validate:"min=60,max=2592000" doc:"Lifetime; the session ends at the latest when the mandate expires."`
	Purpose     string `json:"purpose,omitempty" validate:"max=500"`
}

// SessionRef names a session.
type SessionRef struct {
	SessionID string `json:"sessionId" validate:"required,max=64"`
}

// SessionOpen opens a session under a mandate.
func (s *Service) SessionOpen(ctx context.Context, call Call, req *SessionOpenRequest) (*Session, error) {
	var out Session
	ses, err := s.books.OpenSession(ctx, *call.Agent, pay.OpenSession{ID: ids.New("ses_"), Mandate: req.Mandate,
		BudgetMinor: req.BudgetMinor, TTL: time.Duration(req.TTLSeconds) * time.Second, Purpose: req.Purpose},
		func(txn store.Txn, ses *pay.Session) error {
			return s.recordSession(txn, call, "protocol.session.open", ses, &out)
		})
	if err != nil {
		return nil, err
	}
	out.Session = *ses
	return &out, nil
}

func (s *Service) recordSession(txn store.Txn, call Call, typ string, ses *pay.Session, out *Session) error {
	e, err := s.record(txn, call, typ, "", sessionOf(ses))
	if err != nil {
		return err
	}
	var seqs []uint64
	if err := getJSON(txn, sessionEntriesKey(ses.ID), &seqs); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	seqs = append(seqs, e.Seq)
	if out != nil {
		*out = sessionOf(ses)
		out.Entries = seqs
	}
	return putJSON(txn, sessionEntriesKey(ses.ID), seqs)
}

// SessionGet returns a session of the caller.
func (s *Service) SessionGet(ctx context.Context, call Call, req *SessionRef) (*Session, error) {
	ses, err := s.pay.GetSession(ctx, *call.Agent, req.SessionID)
	if err != nil {
		return nil, err
	}
	out := sessionOf(ses)
	if out.Status == pay.SessionOpen && !s.now().Before(out.ExpiresAt) {
		// Past its end the gate already denies it; the sweep records it.
		out.Status = pay.SessionExpired
	}
	out.Entries = []uint64{}
	err = s.st.View(ctx, func(r store.Reader) error {
		if err := getJSON(r, sessionEntriesKey(ses.ID), &out.Entries); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	return &out, err
}

// SessionClose closes an open session of the caller.
func (s *Service) SessionClose(ctx context.Context, call Call, req *SessionRef) (*Session, error) {
	var out Session
	_, err := s.books.CloseSession(ctx, *call.Agent, req.SessionID,
		func(txn store.Txn, ses *pay.Session) error {
			return s.recordSession(txn, call, "protocol.session.close", ses, &out)
		})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
