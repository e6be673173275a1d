package fake

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
)

// The names of the sandbox rails.
const (
	SandboxCard  = "sandbox-card"  // reversible, instant, authorizations
	SandboxBank  = "sandbox-bank"  // reversible, deferred
	SandboxChain = "sandbox-chain" // irreversible, instant
)

// SandboxDeclinePayee is the sandbox's magic payee: every sandbox rail
// declines each payment (and sandbox-card each authorization) to it (code
// "do_not_honor", no money moves or is held), so a newcomer can see a
// decline, and trip the circuit breaker, on purpose.
const SandboxDeclinePayee = "acct:decline.sandbox"

// SandboxOptions configures [NewSandbox]. The zero value gives rails with
// small, realistic latency and in-memory ledgers that never fail.
type SandboxOptions struct {
	// Store holds the three rails' ledgers (each under its own prefix).
	// Pass the server's store so they survive restarts. Default: one new
	// in-memory store per rail.
	Store store.Store

	// SharedLog is passed to every rail; see [Options.SharedLog]. Set it
	// when Store is also the money path's store, as the reference server
	// does.
	SharedLog bool

	// Now, Sleep and Rand are passed to every rail; see [Options]. Rand is
	// shared by the three rails.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	Rand  func() float64

	// NoLatency turns the default latency off, for tests.
	NoLatency bool

	// FinalityDelay is how long sandbox-bank payments stay pending.
	// Default DefaultFinalityDelay.
	FinalityDelay time.Duration

	// MinLatency and MaxLatency, when MaxLatency > 0, replace every rail's
	// default latency (crash and load tests of the reference server).
	MinLatency, MaxLatency time.Duration

	// UnknownOutcomeRate makes that fraction of calls end with an unknown
	// outcome (half before, half after the money moved; see
	// [UnknownEither]). Default 0: the sandbox never fails on its own.
	UnknownOutcomeRate float64
}

// NewSandbox returns the sandbox rails of the reference server, in the
// order sandbox-card, sandbox-bank, sandbox-chain:
//
//	name           facts                    latency      references     authorizations
//	sandbox-card   reversible, instant      20-80 ms     "ch_" + 24 hex yes, 7-day holds
//	sandbox-bank   reversible, deferred     50-150 ms    "tr_" + 24 hex no
//	sandbox-chain  irreversible, instant    100-300 ms   "tx_" + 24 hex no
//
// Only sandbox-card has authorizations ([settle.AuthorizerOf] finds them
// there), because holding funds before capturing them is what cards do:
// bank transfers and on-chain transfers have no hold to place. Its holds
// last [DefaultAuthorizationTTL] by the sandbox's clock.
//
// They never decline or fail on their own unless UnknownOutcomeRate is set,
// except that every payment to [SandboxDeclinePayee] is declined;
// tests that want other faults build rails with [New].
func NewSandbox(opts *SandboxOptions) ([]*Rail, error) {
	var o SandboxOptions
	if opts != nil {
		o = *opts
	}
	specs := []struct {
		name     string
		facts    settle.Facts
		min, max time.Duration
		prefix   string
		auths    bool
	}{
		{SandboxCard, settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}, 20 * time.Millisecond, 80 * time.Millisecond, "ch_", true},
		{SandboxBank, settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}, 50 * time.Millisecond, 150 * time.Millisecond, "tr_", false},
		{SandboxChain, settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}, 100 * time.Millisecond, 300 * time.Millisecond, "tx_", false},
	}
	rails := make([]*Rail, 0, len(specs))
	for _, s := range specs {
		ro := &Options{
			Facts:           s.facts,
			MinLatency:      s.min,
			MaxLatency:      s.max,
			Sleep:           o.Sleep,
			Rand:            o.Rand,
			Now:             o.Now,
			Store:           o.Store,
			SharedLog:       o.SharedLog,
			FinalityDelay:   o.FinalityDelay,
			ReferencePrefix: s.prefix,
			DeclinePayees:   []string{SandboxDeclinePayee},
			Authorizations:  s.auths,
		}
		if o.MaxLatency > 0 {
			ro.MinLatency, ro.MaxLatency = o.MinLatency, o.MaxLatency
		}
		if o.NoLatency {
			ro.MinLatency, ro.MaxLatency = 0, 0
		}
		ro.UnknownOutcomeRate = o.UnknownOutcomeRate
		r, err := New(s.name, ro)
		if err != nil {
			return nil, fmt.Errorf("fake: sandbox: %w", err)
		}
		rails = append(rails, r)
	}
	return rails, nil
}
