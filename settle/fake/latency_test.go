package fake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
)

// Latency runs on the default Sleep inside a synctest bubble, so the test
// takes no real time and is exact.
func TestLatencyAndCancellation(t *testing.T) {
	tests := []struct {
		name     string
		cancelAt time.Duration // 0: never
		want     string
		recorded bool
		took     time.Duration
	}{
		{"completes", 0, "ok", true, 100 * time.Millisecond},
		{"cancelled before the rail acts", 30 * time.Millisecond, "unknown", false, 30 * time.Millisecond},
		{"cancelled after the rail acts", 70 * time.Millisecond, "unknown", true, 70 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRail(t, "r", &fake.Options{MinLatency: 100 * time.Millisecond})
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancelAt > 0 {
					time.AfterFunc(tc.cancelAt, cancel)
				}
				start := time.Now()
				_, err := r.Settle(ctx, payReq("k", 1))
				if took := time.Since(start); took != tc.took {
					t.Errorf("Settle took %v, want %v", took, tc.took)
				}
				if class(err) != tc.want {
					t.Fatalf("Settle = %v, want %s", err, tc.want)
				}
				start = time.Now()
				s, err := r.Lookup(t.Context(), "k")
				if took := time.Since(start); took != 100*time.Millisecond {
					t.Errorf("Lookup took %v", took)
				}
				if tc.recorded != (err == nil && s.Status == settle.StatusSettled) {
					t.Errorf("Lookup = %+v, %v; want recorded=%v", s, err, tc.recorded)
				}
			})
		})
	}
}

func TestLookupCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRail(t, "r", &fake.Options{MinLatency: 100 * time.Millisecond})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		// An interrupted lookup is unanswered: never "unknown key".
		if _, err := r.Lookup(ctx, "k"); class(err) != "unavailable" {
			t.Errorf("Lookup = %v", err)
		}
	})
}

func TestLatencyRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRail(t, "r", &fake.Options{MinLatency: 10 * time.Millisecond, MaxLatency: 20 * time.Millisecond})
		seen := make(map[time.Duration]bool)
		for i := range 50 {
			start := time.Now()
			if _, err := r.Settle(t.Context(), payReq("k", 1)); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if took < 10*time.Millisecond || took > 20*time.Millisecond {
				t.Fatalf("call %d took %v", i, took)
			}
			seen[took] = true
		}
		if len(seen) < 10 {
			t.Errorf("only %d distinct latencies in 50 calls", len(seen))
		}
	})
}

func TestInjectedSleep(t *testing.T) {
	var slept []time.Duration
	r := newRail(t, "r", &fake.Options{
		MinLatency: 40 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error {
			slept = append(slept, d)
			return nil
		},
	})
	if _, err := r.Settle(t.Context(), payReq("k", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	// Half before the rail acts, half after; a lookup waits once.
	want := []time.Duration{20 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	if len(slept) != 3 || slept[0] != want[0] || slept[1] != want[1] || slept[2] != want[2] {
		t.Errorf("slept %v, want %v", slept, want)
	}
}

func TestSandboxLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rails, err := fake.NewSandbox(nil)
		if err != nil {
			t.Fatal(err)
		}
		bounds := map[string][2]time.Duration{
			fake.SandboxCard:  {20 * time.Millisecond, 80 * time.Millisecond},
			fake.SandboxBank:  {50 * time.Millisecond, 150 * time.Millisecond},
			fake.SandboxChain: {100 * time.Millisecond, 300 * time.Millisecond},
		}
		for _, r := range rails {
			b := bounds[r.Name()]
			for range 10 {
				start := time.Now()
				if _, err := r.Settle(t.Context(), payReq("k", 1)); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took < b[0] || took > b[1] {
					t.Errorf("%s took %v, want within %v", r.Name(), took, b)
				}
			}
		}
	})
}
