package protocol

import (
	"context"
	"log/slog"
	"time"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

// The scheduler runs every time-driven transition of the surface: hold
// and meter expiry (an obligation's deadline is its hold's end), session
// expiry, the end of stake locks, resolved disputes' pending refunds and
// payable insurance claims. Each sweep
// reads what is due from an index in the store ordered by due time, and
// records each transition in the transaction that makes it, so a restart
// loses nothing: the first sweep after it catches up. Tests drive it with
// the injected clock and [Service.Sweep].

// SweepReport counts what one sweep did.
type SweepReport struct {
	HoldsExpired    int `json:"holdsExpired"`
	SessionsExpired int `json:"sessionsExpired"`
	StakesUnlocked  int `json:"stakesUnlocked"`
	// DisputeRefunds counts resolved disputes whose pending refund was
	// tried again; ClaimsPaid payable claims the pool could now pay.
	DisputeRefunds int `json:"disputeRefunds"`
	// ObligationsCleared counts obligations cleared on evidence that
	// arrived while they waited for approval or the rail.
	ObligationsCleared int `json:"obligationsCleared"`
	ClaimsPaid         int `json:"claimsPaid"`
}

// Sweep runs every due transition once, at the service's clock.
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	var err error
	if rep.HoldsExpired, err = s.pay.ExpireHolds(ctx); err != nil {
		return rep, err
	}
	if rep.SessionsExpired, err = s.books.ExpireSessions(ctx, func(txn store.Txn, ses *pay.Session) error {
		return s.recordSession(txn, systemCall(""), "protocol.session.expire", ses, nil)
	}); err != nil {
		return rep, err
	}
	if rep.StakesUnlocked, err = s.unlockStakes(ctx); err != nil {
		return rep, err
	}
	if rep.ObligationsCleared, err = s.clearReady(ctx); err != nil {
		return rep, err
	}
	if rep.DisputeRefunds, err = s.retryDisputeRefunds(ctx); err != nil {
		return rep, err
	}
	if rep.ClaimsPaid, err = s.payClaims(ctx); err != nil {
		return rep, err
	}
	return rep, nil
}

// Run sweeps every interval until ctx is done, logging faults (the next
// sweep retries). The reference server runs it.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.logger.ErrorContext(ctx, "protocol sweep", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
