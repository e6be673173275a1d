package pay

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/settle/fake"
)

// TestSettlementInFlightElsewhere: with other processes on the store
// (Options.SharedStore), a payment found settling whose first attempt
// has not answered is not resumed while that attempt may still be
// running in its process: a replay answers ErrInFlight and Reconcile
// leaves it settling. Once the attempt cannot be running any more
// (twice the rail timeout since it began settling), it is resumed, and
// the money moves once.
func TestSettlementInFlightElsewhere(t *testing.T) {
	const railTO = 10 * time.Second
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := newHarness(t, harnessConfig{
		options: func(o *Options) { o.SharedStore, o.RailTimeout = true, railTO },
		rail: &fake.Options{Fault: func(op fake.Op, _ any) error {
			if op == fake.OpSettle {
				first := false
				once.Do(func() { first = true })
				if first {
					close(started) // the first attempt is on its way to the rail
					<-release
				}
			}
			return nil
		}},
	})
	ctx := context.Background()
	in := h.instruction("elsewhere", 1000, nil)
	firstDone := make(chan error, 1)
	go func() {
		_, err := h.pay(in)
		firstDone <- err
	}()
	<-started

	// Another process over the same store.
	other := h.newService()
	if _, err := other.Pay(ctx, h.caller, h.body(in), "", "req_replay"); !errors.Is(err, ErrInFlight) {
		t.Fatalf("a replay while the first attempt may be running: %v, want ErrInFlight", err)
	}
	if rep, err := other.Reconcile(ctx); err != nil || rep.StillSettling != 1 || rep.Settled+rep.Failed != 0 {
		t.Fatalf("reconcile while the first attempt may be running: %+v, %v; want it left settling", rep, err)
	}

	// The first attempt's process is taken to be gone once its attempt
	// cannot be running any more.
	h.clock.Add(2*railTO + time.Second)
	res, err := other.Pay(ctx, h.caller, h.body(in), "", "req_replay")
	if err != nil || res.Outcome != OutcomeSettled {
		t.Fatalf("a replay after the attempt's time: %+v, %v; want settled", res, err)
	}
	close(release)
	if err := <-firstDone; err != nil {
		t.Fatalf("the first attempt, answering late: %v", err)
	}
	if n, _ := h.rail.Count(ctx); n != 1 {
		t.Errorf("%d settlements on the rail, want 1", n)
	}
}
