package pay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/store"
)

// Errors of the operator controls. Check with errors.Is.
var (
	// ErrBreakerNotTripped: a reset was asked of a closed breaker.
	ErrBreakerNotTripped = errcode.New(CodeBreakerNotTripped, "pay: the circuit breaker is not tripped")
	// ErrMandateRevoked: the mandate was revoked by an operator.
	ErrMandateRevoked = errcode.New(CodeUnauthorized, "pay: mandate revoked")
)

// Control is the live state of the operator's controls.
type Control struct {
	KillSwitchEngaged  bool      `json:"killSwitchEngaged"`
	CircuitBreakerOpen bool      `json:"circuitBreakerOpen"`
	BreakerReason      string    `json:"breakerReason,omitempty"`
	ConsecutiveFails   int64     `json:"consecutiveFailures"`
	ChangedAt          time.Time `json:"changedAt"`
}

func getControl(r store.Reader) (Control, error) {
	var c Control
	b, err := r.Get([]byte(keyControl))
	if errors.Is(err, store.ErrNotFound) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("pay: control state: %w", err)
	}
	return c, nil
}

func putControl(txn store.Txn, c Control) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return txn.Set([]byte(keyControl), b)
}

// Control returns the live state of the kill switch and the breaker.
func (s *Service) Control(ctx context.Context) (Control, error) {
	var c Control
	err := s.st.View(ctx, func(r store.Reader) error {
		var err error
		c, err = getControl(r)
		return err
	})
	return c, err
}

// OperatorCall says who asks for an operator action and why; it is written
// into the record with the action.
type OperatorCall struct {
	Operator  string // operator key id
	RequestID string
	Rationale string
}

func (o OperatorCall) record(typ string, intentID string, data any) (audit.Record, error) {
	b, err := json.Marshal(data)
	if err != nil {
		return audit.Record{}, err
	}
	return audit.Record{
		Type: typ, IntentID: intentID, RequestID: o.RequestID, Rationale: o.Rationale,
		Actor: audit.Actor{Kind: "operator", ID: o.Operator}, Data: b,
	}, nil
}

// SetKillSwitch engages (freezes all settlement) or releases the kill
// switch and records operator.kill_switch. It returns the live state.
func (s *Service) SetKillSwitch(ctx context.Context, engaged bool, call OperatorCall) (Control, error) {
	var out Control
	err := s.log.Update(ctx, func(txn store.Txn) error {
		c, err := getControl(txn)
		if err != nil {
			return err
		}
		c.KillSwitchEngaged = engaged
		c.ChangedAt = s.now().UTC().Truncate(time.Microsecond)
		rec, err := call.record("operator.kill_switch", "", map[string]bool{"engaged": engaged})
		if err != nil {
			return err
		}
		if _, err := s.log.Append(txn, rec); err != nil {
			return err
		}
		out = c
		return putControl(txn, c)
	})
	if err != nil {
		return Control{}, fmt.Errorf("pay: kill switch: %w", err)
	}
	return out, nil
}

// ResetBreaker closes a tripped circuit breaker and records
// operator.breaker_reset; resetting a closed breaker is ErrBreakerNotTripped.
func (s *Service) ResetBreaker(ctx context.Context, call OperatorCall) (Control, error) {
	var out Control
	err := s.log.Update(ctx, func(txn store.Txn) error {
		c, err := getControl(txn)
		if err != nil {
			return err
		}
		if !c.CircuitBreakerOpen {
			return ErrBreakerNotTripped
		}
		rec, err := call.record("operator.breaker_reset", "", map[string]string{"reason": c.BreakerReason})
		if err != nil {
			return err
		}
		c.CircuitBreakerOpen, c.BreakerReason, c.ConsecutiveFails = false, "", 0
		c.ChangedAt = s.now().UTC().Truncate(time.Microsecond)
		if _, err := s.log.Append(txn, rec); err != nil {
			return err
		}
		// Denial streaks that tripped it start over too.
		if err := deleteUnder(txn, keyDenials); err != nil {
			return err
		}
		out = c
		return putControl(txn, c)
	})
	if err != nil {
		if errors.Is(err, ErrBreakerNotTripped) {
			return Control{}, err
		}
		return Control{}, fmt.Errorf("pay: breaker reset: %w", err)
	}
	return out, nil
}

// tripBreaker opens the breaker inside txn and records breaker.tripped.
func (s *Service) tripBreaker(txn store.Txn, c *Control, reason string, requestID string) error {
	if c.CircuitBreakerOpen {
		return nil
	}
	c.CircuitBreakerOpen, c.BreakerReason, c.ChangedAt = true, reason, s.now().UTC().Truncate(time.Microsecond)
	data, _ := json.Marshal(map[string]string{"reason": reason})
	if _, err := s.log.Append(txn, audit.Record{
		Type: "breaker.tripped", RequestID: requestID,
		Actor: audit.Actor{Kind: "system", ID: "circuit-breaker"}, Data: data,
	}); err != nil {
		return err
	}
	return putControl(txn, *c)
}

// Revocation is a stored mandate revocation.
type Revocation struct {
	MandateID string    `json:"mandateId"`
	RevokedAt time.Time `json:"revokedAt"`
	Operator  string    `json:"operator"`
	Rationale string    `json:"rationale"`
}

// RevokeMandate revokes a mandate for good: every later payment under it is
// refused (intent.unauthorized, mandate_revoked) and held intents under it
// can no longer be approved. It records mandate.revoked. Revoking twice
// returns the first revocation and records nothing new.
func (s *Service) RevokeMandate(ctx context.Context, mandateID string, call OperatorCall) (Revocation, error) {
	if !isMandateID(mandateID) {
		return Revocation{}, malformed(FieldError{Field: "mandateId", Rule: "id", Message: "must be 1 to 128 bytes of [A-Za-z0-9._~:-]"})
	}
	var out Revocation
	err := s.log.Update(ctx, func(txn store.Txn) error {
		b, err := txn.Get([]byte(keyRevoked + mandateID))
		if err == nil {
			return json.Unmarshal(b, &out)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		out = Revocation{MandateID: mandateID, RevokedAt: s.now().UTC().Truncate(time.Microsecond), Operator: call.Operator, Rationale: call.Rationale}
		v, err := json.Marshal(out)
		if err != nil {
			return err
		}
		if err := txn.Set([]byte(keyRevoked+mandateID), v); err != nil {
			return err
		}
		if err := appendRevocation(txn, "mandate", mandateID); err != nil {
			return err
		}
		rec, err := call.record("mandate.revoked", "", map[string]string{"mandateId": mandateID})
		if err != nil {
			return err
		}
		_, err = s.log.Append(txn, rec)
		return err
	})
	if err != nil {
		return Revocation{}, fmt.Errorf("pay: revoke mandate: %w", err)
	}
	return out, nil
}

// MandateRevoked reports whether an operator revoked the mandate id (see
// [Service.RevokeMandate]). Every kind of operator-issued mandate shares
// this one revocation list: package memory checks its mandates here too.
func MandateRevoked(r store.Reader, mandateID string) (bool, error) { return isRevoked(r, mandateID) }

func isRevoked(r store.Reader, mandateID string) (bool, error) {
	_, err := r.Get([]byte(keyRevoked + mandateID))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// getInt reads a decimal counter; a missing key is 0.
func getInt(r store.Reader, key []byte) (int64, error) {
	b, err := r.Get(key)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(string(b), 10, 64)
}

func putInt(txn store.Txn, key []byte, v int64) error {
	if v == 0 {
		return txn.Delete(key)
	}
	return txn.Set(key, strconv.AppendInt(nil, v, 10))
}

// deleteUnder deletes every key under prefix in txn.
func deleteUnder(txn store.Txn, prefix string) error {
	var keys [][]byte
	it := txn.Iterate([]byte(prefix), store.PrefixEnd([]byte(prefix)), false)
	for it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
