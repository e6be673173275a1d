package auth_test

import (
	"fmt"
	"time"

	"github.com/countersign/countersign/auth"
)

// A key with a burst of 2 and one token a second: the third request in
// the same instant is refused, and the numbers are those of the
// X-RateLimit-* and Retry-After headers.
func ExampleLimiter_Take() {
	now := time.Unix(1_800_000_000, 0)
	l, err := auth.NewLimiter(&auth.LimiterOptions{Rate: 1, Burst: 2, Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	for range 3 {
		d := l.Take("ak_01JDQ3V6Z0000000000000000", nil)
		fmt.Printf("allowed=%v X-RateLimit-Limit=%d X-RateLimit-Remaining=%d X-RateLimit-Reset=+%d",
			d.Allowed, d.Limit, d.Remaining, d.Reset.Unix()-now.Unix())
		if !d.Allowed {
			fmt.Printf(" Retry-After=%d", d.RetryAfter/time.Second)
		}
		fmt.Println()
	}
	// Output:
	// allowed=true X-RateLimit-Limit=2 X-RateLimit-Remaining=1 X-RateLimit-Reset=+1
	// allowed=true X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=+2
	// allowed=false X-RateLimit-Limit=2 X-RateLimit-Remaining=0 X-RateLimit-Reset=+2 Retry-After=1
}

// A key issued with its own limit passes it as the override.
func ExampleLimiter_Take_override() {
	l, err := auth.NewLimiter(nil) // 50/s, burst 100
	if err != nil {
		panic(err)
	}
	d := l.Take("ak_default", nil)
	fmt.Println(d.Limit, d.Remaining)
	d = l.Take("ak_big", &auth.Limit{Rate: 500, Burst: 1000})
	fmt.Println(d.Limit, d.Remaining)
	// Output:
	// 100 99
	// 1000 999
}
