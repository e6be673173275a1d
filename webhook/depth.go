package webhook

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/store"
)

// OutboxDepth returns the number of deliveries waiting in the outbox:
// pending ones, due now or scheduled for a retry, of every endpoint
// (a deleted endpoint's until the sweep purges them). It counts the
// outbox keys in one read of the store, so its cost grows with the
// backlog: it is meant for a metrics scrape, not for a hot path.
func (d *Dispatcher) OutboxDepth(ctx context.Context) (int, error) {
	n := 0
	err := d.st.View(ctx, func(r store.Reader) error {
		n = 0
		it := r.Iterate(outboxPrefix, store.PrefixEnd(outboxPrefix), false)
		for it.Next() {
			n++
		}
		return it.Close()
	})
	if err != nil {
		return 0, fmt.Errorf("webhook: outbox depth: %w", err)
	}
	return n, nil
}
