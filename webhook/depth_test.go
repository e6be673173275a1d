package webhook

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestMetricsOnDeliveryAndOutboxDepth: the hooks metrics hang on report
// each stored attempt by the delivery's state after it, and the outbox
// depth counts what waits.
func TestMetricsOnDeliveryAndOutboxDepth(t *testing.T) {
	var mu sync.Mutex
	var states []string
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Schedule: []time.Duration{time.Minute}, Jitter: -1,
		OnDelivery: func(s string) { mu.Lock(); states = append(states, s); mu.Unlock() }}})
	ok := newReceiver(t, e.clock, func(Event, int) int { return http.StatusOK })
	down := newReceiver(t, e.clock, func(Event, int) int { return http.StatusServiceUnavailable })
	ok.setSecrets(e.create(ok.url("/"), EventPaymentSettled).Secret)
	down.setSecrets(e.create(down.url("/"), EventPaymentSettled).Secret)
	depth := func() int {
		t.Helper()
		n, err := e.d.OutboxDepth(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		s := slices.Clone(states)
		slices.Sort(s)
		return s
	}

	e.append("payment.settled", `{}`)
	e.append("payment.settled", `{}`)
	if _, err := e.d.tail(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := depth(); n != 4 {
		t.Fatalf("outbox depth %d after tailing, want 2 entries × 2 endpoints", n)
	}
	e.tick()
	if got, want := seen(), []string{StateDelivered, StateDelivered, StatePending, StatePending}; !slices.Equal(got, want) {
		t.Fatalf("after the first attempts: %v, want %v", got, want)
	}
	if n := depth(); n != 2 {
		t.Fatalf("outbox depth %d, want the 2 retries", n)
	}
	e.clock.Advance(time.Minute)
	e.tick()
	if got, want := seen(), []string{StateDelivered, StateDelivered, StateFailed, StateFailed, StatePending, StatePending}; !slices.Equal(got, want) {
		t.Fatalf("after the schedule ran out: %v, want %v", got, want)
	}
	if n := depth(); n != 0 {
		t.Fatalf("outbox depth %d, want 0", n)
	}
}
