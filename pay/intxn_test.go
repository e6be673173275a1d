package pay

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
)

// failingStepRail is a fake rail whose in-transaction settlement fails
// after the rail's write, the first fails times: as the outcome's
// transaction would fail for a reason of the store's.
type failingStepRail struct {
	*fake.Rail
	fails int
}

func (r *failingStepRail) SettleInTxn(ctx context.Context, req settle.SettleRequest) (func(store.Txn) (settle.Settlement, error), settle.Settlement, error) {
	step, st, err := r.Rail.SettleInTxn(ctx, req)
	if step == nil || r.fails == 0 {
		return step, st, err
	}
	r.fails--
	return func(tx store.Txn) (settle.Settlement, error) {
		if _, err := step(tx); err != nil {
			return settle.Settlement{}, err
		}
		return settle.Settlement{}, fmt.Errorf("the outcome's transaction: %w", store.ErrUnavailable)
	}, settle.Settlement{}, nil
}

// TestSettleInTxnAllOrNothing: on a rail that settles in the outcome's
// transaction, the rail's entry and the outcome commit together or not at
// all. When that transaction fails, the rail has no record of the
// payment, the intent stays settling with its outcome marked unknown, and
// the reconciler sends it again under the same key and settles it once.
func TestSettleInTxnAllOrNothing(t *testing.T) {
	ctx := t.Context()
	h := newHarness(t, harnessConfig{})
	h.wrapRail = func(r *fake.Rail) settle.Rail { return &failingStepRail{Rail: r, fails: 1} }
	h.svc = h.newService()
	_, err := h.pay(h.instruction("k-1", 1250, nil))
	if !errors.Is(err, ErrRailUnavailable) {
		t.Fatalf("Pay = %v, want ErrRailUnavailable", err)
	}
	var id string
	if err := h.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate([]byte(keyIntent), store.PrefixEnd([]byte(keyIntent)), false)
		defer it.Close()
		for it.Next() {
			id = string(it.Key()[len(keyIntent):])
		}
		return it.Err()
	}); err != nil {
		t.Fatal(err)
	}
	in, err := h.svc.Intent(ctx, h.caller, id)
	if err != nil || in.Status != StatusSettling || in.UnknownOutcome == nil {
		t.Fatalf("intent after the failed outcome: %+v, %v; want settling, outcome unknown", in, err)
	}
	if _, err := h.rail.Lookup(ctx, id); !errors.Is(err, settle.ErrUnknownKey) {
		t.Fatalf("the rail's record after the failed outcome: %v, want none", err)
	}
	rep, err := h.svc.Reconcile(ctx)
	if err != nil || rep.Settled != 1 {
		t.Fatalf("Reconcile = %+v, %v; want one settled", rep, err)
	}
	in, err = h.svc.Intent(ctx, h.caller, id)
	if err != nil || in.Status != StatusSettled {
		t.Fatalf("intent after reconcile: %+v, %v", in, err)
	}
	if n, err := h.rail.Count(ctx); err != nil || n != 1 {
		t.Fatalf("the rail holds %d payments (%v), want 1", n, err)
	}
	if err := h.rail.CheckLedger(ctx); err != nil {
		t.Fatal(err)
	}
}
