package pay

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"sync"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// opStore records, in order, each Update ("sync") and UpdateDeferred
// ("deferred") that returned nil.
type opStore struct {
	store.Store
	mu  sync.Mutex
	ops []string
}

func (s *opStore) Update(ctx context.Context, fn func(store.Txn) error) error {
	err := s.Store.Update(ctx, fn)
	if err == nil {
		s.note("sync")
	}
	return err
}

func (s *opStore) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	err := store.UpdateDeferred(ctx, s.Store, fn)
	if err == nil {
		s.note("deferred")
	}
	return err
}

func (s *opStore) note(op string) {
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
}

func (s *opStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

// TestDecisionDeferredOnlyOnALogSharingRail checks how a payment's
// transactions commit. On a rail that keeps its books in the service's
// store log (settle.LogSharer), the deciding transaction is deferred, and
// whatever the outcome, the last commit before the answer is synchronous,
// so nothing is answered from a decision that is not durable. On any other
// rail every commit is synchronous.
func TestDecisionDeferredOnlyOnALogSharingRail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shared bool
		minor  int64
		replay bool
		want   []string
	}{
		// decision, rail ledger, outcome
		{"settled, shared log", true, 1250, false, []string{"deferred", "deferred", "sync"}},
		// decision, barrier
		{"held, shared log", true, 10_000, false, []string{"deferred", "sync"}},
		{"denied, shared log", true, 60_000, false, []string{"deferred", "sync"}},
		{"replayed, shared log", true, 1250, true, []string{"deferred", "sync"}},
		{"settled, own log", false, 1250, false, []string{"sync", "sync", "sync"}},
		{"held, own log", false, 10_000, false, []string{"sync"}},
		{"replayed, own log", false, 1250, true, []string{"sync"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{})
			ops := &opStore{Store: h.st}
			_, recKey, _ := ed25519.GenerateKey(rand.Reader)
			lg, err := audit.Open(t.Context(), ops, recKey, &audit.Options{Now: h.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			h.rail, err = fake.New("sandbox-card", &fake.Options{Store: ops, SharedLog: tc.shared, Now: h.clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			h.opts.Store, h.opts.Log = ops, lg
			h.svc = h.newService()
			in := h.instruction("k-1", tc.minor, nil)
			if tc.replay {
				if _, err := h.pay(in); err != nil {
					t.Fatal(err)
				}
			}
			ops.take()
			res, err := h.pay(in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Replayed != tc.replay {
				t.Errorf("Replayed = %v, want %v", res.Replayed, tc.replay)
			}
			if got := ops.take(); !slices.Equal(got, tc.want) {
				t.Errorf("commits = %q, want %q", got, tc.want)
			}
		})
	}
}
