package pay

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/store"
)

// keyMandate + mandate id → KnownMandate: every mandate the service has
// honoured at least once, so that the deployment can say what spend
// authority it runs under (its ADP disclosure, the protocol's mandate.list).
const keyMandate = "pay/mandate/"

// KnownMandate is what the service keeps of a mandate it has seen: the
// verified claims that bound spending, never the token.
type KnownMandate struct {
	ID                            string        `json:"id"`
	KeyID                         string        `json:"keyId"`
	Agent                         string        `json:"agent"`
	Payees                        []string      `json:"payees"`
	Currency                      string        `json:"currency"`
	PerTxCapMinor                 int64         `json:"perTxCapMinor"`
	PerPeriodCapMinor             int64         `json:"perPeriodCapMinor"`
	Period                        gate.Period   `json:"period"`
	Rails                         []string      `json:"rails"`
	ConfirmAboveMinor             int64         `json:"confirmAboveMinor"`
	IrreversibleConfirmAboveMinor int64         `json:"irreversibleConfirmAboveMinor"`
	Velocity                      gate.Velocity `json:"velocity"`
	Approvals                     int           `json:"approvals"`
	IssuedAt                      time.Time     `json:"issuedAt"`
	ExpiresAt                     time.Time     `json:"expiresAt"`
	FirstSeenAt                   time.Time     `json:"firstSeenAt"`
	// Seq orders the mandates as the transactions that first honoured
	// them committed (a counter the store serializes): lists follow it,
	// so a mandate first used on another server after a reader paged
	// past its id is still listed. 0 for mandates remembered before.
	Seq uint64 `json:"seq,omitempty" doc:"The order in which this deployment first honoured its mandates, which lists follow; absent for mandates first honoured before the order was kept."`
}

func knownOf(m *Mandate, now time.Time) KnownMandate {
	c := &m.Claims
	return KnownMandate{
		ID: m.ID, KeyID: m.KeyID, Agent: c.Agent, Payees: slices.Clone(c.Payees), Currency: c.Currency,
		PerTxCapMinor: c.PerTxCapMinor, PerPeriodCapMinor: c.PerPeriodCapMinor, Period: c.Period,
		Rails: slices.Clone(c.Rails), ConfirmAboveMinor: c.ConfirmAboveMinor,
		IrreversibleConfirmAboveMinor: c.IrreversibleConfirmAboveMinor, Velocity: c.Velocity,
		Approvals: c.Approvals, IssuedAt: c.IssuedAt.UTC(), ExpiresAt: c.ExpiresAt.UTC(), FirstSeenAt: now,
	}
}

// rememberMandate stores m the first time the service decides under it,
// in the decision's transaction. Once a read finds it stored (so durably
// committed), the id goes into an in-memory set and later payments skip
// the read: the hot path pays for it once per mandate and process.
func (s *Service) rememberMandate(txn store.Txn, m *Mandate, now time.Time) error {
	if _, ok := s.known.Load(m.ID); ok {
		return nil
	}
	_, err := txn.Get([]byte(keyMandate + m.ID))
	switch {
	case err == nil:
		s.known.Store(m.ID, struct{}{})
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	k := knownOf(m, now)
	// The counter is read and written in this transaction: two servers
	// remembering mandates at once conflict on it, and one runs again.
	next := uint64(1)
	switch c, err := txn.Get([]byte(keyMandateSeq)); {
	case err == nil && len(c) == 8:
		next = binary.BigEndian.Uint64(c) + 1
	case err == nil:
		return fmt.Errorf("pay: stored mandate counter has %d bytes", len(c))
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	k.Seq = next
	if err := txn.Set([]byte(keyMandateSeq), binary.BigEndian.AppendUint64(nil, next)); err != nil {
		return err
	}
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return txn.Set([]byte(keyMandate+m.ID), b)
}

// keyMandateSeq counts the mandates remembered (see KnownMandate.Seq).
// It sorts outside keyMandate's prefix.
const keyMandateSeq = "pay/mandate-seq"

// Mandates returns the live mandates the service has honoured: not expired
// at the service's clock and not revoked, ordered by id.
func (s *Service) Mandates(ctx context.Context) ([]KnownMandate, error) {
	now := s.now()
	var out []KnownMandate
	err := s.st.View(ctx, func(r store.Reader) error {
		out = out[:0]
		it := r.Iterate([]byte(keyMandate), store.PrefixEnd([]byte(keyMandate)), false)
		for it.Next() {
			var k KnownMandate
			if err := json.Unmarshal(it.Value(), &k); err != nil {
				it.Close()
				return fmt.Errorf("pay: stored mandate: %w", err)
			}
			if !now.Before(k.ExpiresAt) {
				continue
			}
			revoked, err := isRevoked(r, k.ID)
			if err != nil {
				it.Close()
				return err
			}
			if !revoked {
				out = append(out, k)
			}
		}
		return it.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("pay: mandates: %w", err)
	}
	return out, nil
}

// Policy is the deployment's own gate policy as it is in force: what no
// mandate can widen. Its canonical JSON is what the deployment's policy
// digest commits to.
type Policy struct {
	// Rails are the rails the gate knows, by name, with their facts.
	Rails []RailPolicy `json:"rails"`
	// DenyPayees and DenyAgents are refused whatever a mandate says.
	DenyPayees []string `json:"denyPayees"`
	DenyAgents []string `json:"denyAgents"`
	// BreakerAfter is how many consecutive settlement failures, or denials
	// of one mandate, trip the circuit breaker (negative: never).
	BreakerAfter int64 `json:"breakerAfter"`
	// ApprovalWindowSeconds is how long a held payment waits for a person.
	ApprovalWindowSeconds int64 `json:"approvalWindowSeconds"`
	// IdempotencyRetentionSeconds is how long an outcome is replayable.
	IdempotencyRetentionSeconds int64 `json:"idempotencyRetentionSeconds"`
}

// RailPolicy is one rail the gate knows.
type RailPolicy struct {
	Name          string             `json:"name"`
	Reversibility gate.Reversibility `json:"reversibility"`
	Finality      gate.Finality      `json:"finality"`
}

// Policy returns the gate policy in force, in a stable order.
func (s *Service) Policy() Policy {
	p := Policy{
		Rails:                       []RailPolicy{},
		DenyPayees:                  append([]string{}, s.policy.DenyPayees...),
		DenyAgents:                  append([]string{}, s.policy.DenyAgents...),
		BreakerAfter:                s.policy.BreakerAfter,
		ApprovalWindowSeconds:       int64(s.window / time.Second),
		IdempotencyRetentionSeconds: int64(s.retain / time.Second),
	}
	for name, f := range s.policy.Rails {
		p.Rails = append(p.Rails, RailPolicy{Name: name, Reversibility: f.Reversibility, Finality: f.Finality})
	}
	sort.Slice(p.Rails, func(i, j int) bool { return p.Rails[i].Name < p.Rails[j].Name })
	sort.Strings(p.DenyPayees)
	sort.Strings(p.DenyAgents)
	return p
}
