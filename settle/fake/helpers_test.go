package fake_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newRail builds a rail from o over a fresh memstore (with its default
// spurious retries, which the rail must survive) and a clock fixed at t0,
// unless o sets its own.
func newRail(t testing.TB, name string, o *fake.Options) *fake.Rail {
	t.Helper()
	var opts fake.Options
	if o != nil {
		opts = *o
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return t0 }
	}
	if opts.Store == nil {
		opts.Store = &memstore.Store{}
	}
	r, err := fake.New(name, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func payReq(key string, amount int64) settle.SettleRequest {
	return settle.SettleRequest{Key: key, Payee: "acct:seller.example", Amount: amount, Currency: "USD"}
}

// class names the contract class of an error, for table tests.
func class(err error) string {
	var de *settle.DeclineError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &de):
		if !errors.Is(err, settle.ErrDeclined) {
			return "BROKEN: DeclineError not matching ErrDeclined"
		}
		return "declined"
	case errors.Is(err, settle.ErrDeclined):
		return "BROKEN: ErrDeclined without DeclineError"
	}
	for _, c := range []struct {
		err  error
		name string
	}{
		{settle.ErrUnknownOutcome, "unknown"},
		{settle.ErrUnavailable, "unavailable"},
		{settle.ErrInvalidRequest, "invalid"},
		{settle.ErrKeyReuse, "keyreuse"},
		{settle.ErrUnknownKey, "unknownkey"},
		{settle.ErrIrreversible, "irreversible"},
		{settle.ErrRefundExceeds, "exceeds"},
		{settle.ErrNotSettled, "notsettled"},
		{settle.ErrAuthorizationClosed, "closed"},
	} {
		if errors.Is(err, c.err) {
			return c.name
		}
	}
	return "other: " + err.Error()
}

func mustCheck(t *testing.T, r *fake.Rail) {
	t.Helper()
	if err := r.CheckLedger(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, r *fake.Rail) int {
	t.Helper()
	n, err := r.Count(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
