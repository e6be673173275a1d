package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/store/memstore"
)

// The HTTP layer counts every call; GET /usage reports them. Counts are
// visible at once, before the background flush has written them.
func ExampleUsage() {
	ctx := context.Background()
	u := auth.NewUsage(&memstore.Store{}, nil)
	defer u.Close(ctx)

	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tags := auth.ParseTags("team=growth, project=alpha")
	u.Count("ak_01JDQ3V6Z0000000000000000", "pay.create", "ok", tags, t0.Add(5*time.Second))
	u.Count("ak_01JDQ3V6Z0000000000000000", "pay.create", "intent.denied", tags[:1], t0.Add(70*time.Second))
	u.Count("ak_01JDQ3V6Z0000000000000000", "usage.get", "ok", nil, t0.Add(90*time.Second))

	rep, err := u.Report(ctx, "ak_01JDQ3V6Z0000000000000000", t0, t0.Add(time.Hour), []string{"team=growth"})
	if err != nil {
		panic(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		panic(err)
	}
	// Output:
	// {
	//   "keyId": "ak_01JDQ3V6Z0000000000000000",
	//   "since": "2026-11-22T10:00:00Z",
	//   "until": "2026-11-22T11:00:00Z",
	//   "total": 2,
	//   "byOperation": {
	//     "pay.create": 2
	//   },
	//   "byOutcome": {
	//     "intent.denied": 1,
	//     "ok": 1
	//   },
	//   "byTag": {
	//     "project=alpha": 1,
	//     "team=growth": 2
	//   }
	// }
}

// Close flushes what is pending; a new Usage over the same store sees it.
func ExampleUsage_Close() {
	ctx := context.Background()
	st := &memstore.Store{}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

	u := auth.NewUsage(st, nil)
	u.Count("ak_A", "pay.create", "ok", nil, t0)
	if err := u.Close(ctx); err != nil {
		panic(err)
	}

	u = auth.NewUsage(st, nil)
	defer u.Close(ctx)
	rep, _ := u.Report(ctx, "ak_A", t0, t0.Add(time.Minute), nil)
	fmt.Println(rep.Total)
	// Output:
	// 1
}

// Buckets older than the retention period are deleted by a periodic
// sweep.
func ExampleUsage_SweepUsage() {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := t0
	u := auth.NewUsage(&memstore.Store{}, &auth.UsageOptions{Now: func() time.Time { return now }, Retention: 24 * time.Hour})
	defer u.Close(ctx)
	for m := range 3 {
		u.Count("ak_A", "pay.create", "ok", nil, t0.Add(time.Duration(m)*time.Minute))
	}
	if err := u.Flush(ctx); err != nil {
		panic(err)
	}
	now = t0.Add(25 * time.Hour)
	n, err := u.SweepUsage(ctx)
	fmt.Println(n, err)
	// Output:
	// 3 <nil>
}

// A window longer than 31 days is refused with a stable code.
func ExampleErrBadWindow() {
	u := auth.NewUsage(&memstore.Store{}, nil)
	defer u.Close(context.Background())
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	_, err := u.Report(context.Background(), "ak_A", t0, t0.Add(40*24*time.Hour), nil)
	fmt.Println(err)
	// Output:
	// auth: bad usage window: the window is longer than 31 days
}
