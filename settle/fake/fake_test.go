package fake_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		rail string
		opts *fake.Options
		ok   bool
	}{
		{"nil options", "r", nil, true},
		{"zero options", "r", &fake.Options{}, true},
		{"everything", "r", &fake.Options{
			Facts:      settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred},
			MinLatency: time.Millisecond, MaxLatency: 2 * time.Millisecond,
			DeclineAbove: 100, DeclineRate: 0.1, PendingDeclineRate: 0.1, UnavailableRate: 1,
			UnknownOutcomeRate: 0.5, UnknownOutcomeMode: fake.UnknownAfter, ReferencePrefix: "0x",
			Authorizations: true, AuthorizationTTL: time.Hour,
		}, true},
		{"bad name", "Bad", nil, false},
		{"bad reversibility", "r", &fake.Options{Facts: settle.Facts{Reversibility: "maybe"}}, false},
		{"bad finality", "r", &fake.Options{Facts: settle.Facts{Finality: "soon"}}, false},
		{"negative latency", "r", &fake.Options{MinLatency: -1}, false},
		{"max below min", "r", &fake.Options{MinLatency: 2, MaxLatency: 1}, false},
		{"negative DeclineAbove", "r", &fake.Options{DeclineAbove: -1}, false},
		{"rate above 1", "r", &fake.Options{DeclineRate: 1.5}, false},
		{"negative rate", "r", &fake.Options{UnavailableRate: -0.1}, false},
		{"NaN rate", "r", &fake.Options{UnknownOutcomeRate: math.NaN()}, false},
		{"pending declines on instant rail", "r", &fake.Options{PendingDeclineRate: 0.5}, false},
		{"negative finality delay", "r", &fake.Options{FinalityDelay: -1}, false},
		{"negative authorization TTL", "r", &fake.Options{Authorizations: true, AuthorizationTTL: -1}, false},
		{"bad mode", "r", &fake.Options{UnknownOutcomeMode: "sometimes"}, false},
		{"long prefix", "r", &fake.Options{ReferencePrefix: strings.Repeat("x", 17)}, false},
		{"prefix with space", "r", &fake.Options{ReferencePrefix: "a b"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := fake.New(tc.rail, tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("New = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "fake: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if err == nil {
				if err := r.Facts().Validate(); err != nil {
					t.Errorf("Facts() = %v", err)
				}
			}
		})
	}
}

func TestNewKeepsNoPointer(t *testing.T) {
	opts := &fake.Options{DeclineAbove: 10}
	r := newRail(t, "r", opts)
	opts.DeclineAbove = 0
	if _, err := r.Settle(t.Context(), payReq("k", 11)); class(err) != "declined" {
		t.Errorf("changing Options after New changed the rail: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	r, err := fake.New("r", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Facts(), (settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}); got != want {
		t.Errorf("Facts() = %+v, want %+v", got, want)
	}
	if r.Name() != "r" {
		t.Errorf("Name() = %q", r.Name())
	}
	before := time.Now()
	s, err := r.Settle(t.Context(), payReq("k", 5))
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != settle.StatusSettled || !strings.HasPrefix(s.Reference, fake.DefaultReferencePrefix) {
		t.Errorf("Settle = %+v", s)
	}
	if s.SettledAt.Before(before.Add(-time.Second)) || s.SettledAt.Location() != time.UTC {
		t.Errorf("SettledAt = %v, want about now in UTC", s.SettledAt)
	}
}

func TestSettleIdempotent(t *testing.T) {
	tests := []struct {
		name   string
		facts  settle.Facts
		status settle.Status
	}{
		{"instant", settle.Facts{Finality: settle.Instant}, settle.StatusSettled},
		{"deferred", settle.Facts{Finality: settle.Deferred}, settle.StatusPending},
		{"irreversible", settle.Facts{Reversibility: settle.Irreversible}, settle.StatusSettled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRail(t, "r", &fake.Options{Facts: tc.facts})
			req := payReq("int_1", 1250)
			req.Metadata = map[string]string{"purpose": "invoice 1182"}
			first, err := r.Settle(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := settle.Settlement{
				Key: "int_1", Reference: first.Reference, Status: tc.status, Amount: 1250,
				Currency: "USD", Payee: "acct:seller.example",
			}
			if tc.status == settle.StatusSettled {
				want.SettledAt = t0
			}
			if first != want {
				t.Errorf("Settle = %+v\nwant %+v", first, want)
			}
			if len(first.Reference) != len(fake.DefaultReferencePrefix)+24 {
				t.Errorf("reference %q has the wrong shape", first.Reference)
			}
			for range 3 {
				// Metadata is not part of the request's identity.
				req.Metadata = map[string]string{"attempt": "again"}
				again, err := r.Settle(t.Context(), req)
				if err != nil || again != first {
					t.Fatalf("replay = %+v, %v; want %+v", again, err, first)
				}
			}
			looked, err := r.Lookup(t.Context(), "int_1")
			if err != nil || looked != first {
				t.Errorf("Lookup = %+v, %v; want %+v", looked, err, first)
			}
			if n := count(t, r); n != 1 {
				t.Errorf("ledger has %d entries, want 1", n)
			}
			mustCheck(t, r)
		})
	}
}

func TestDistinctKeysDistinctReferences(t *testing.T) {
	r := newRail(t, "r", nil)
	other := newRail(t, "other", nil)
	refs := make(map[string]bool)
	for i := range 100 {
		for _, rail := range []*fake.Rail{r, other} {
			s, err := rail.Settle(t.Context(), payReq(fmt.Sprint("k", i), 1))
			if err != nil {
				t.Fatal(err)
			}
			if refs[s.Reference] {
				t.Fatalf("reference %s minted twice", s.Reference)
			}
			refs[s.Reference] = true
		}
	}
}

func TestKeyReuse(t *testing.T) {
	tests := []struct {
		name string
		edit func(*settle.SettleRequest)
	}{
		{"other amount", func(r *settle.SettleRequest) { r.Amount++ }},
		{"other payee", func(r *settle.SettleRequest) { r.Payee = "acct:mallory.example" }},
		{"other currency", func(r *settle.SettleRequest) { r.Currency = "EUR" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRail(t, "r", nil)
			orig := payReq("int_1", 100)
			first, err := r.Settle(t.Context(), orig)
			if err != nil {
				t.Fatal(err)
			}
			changed := orig
			tc.edit(&changed)
			s, err := r.Settle(t.Context(), changed)
			if class(err) != "keyreuse" || s != (settle.Settlement{}) {
				t.Fatalf("Settle(changed) = %+v, %v; want zero, ErrKeyReuse", s, err)
			}
			if got, err := r.Lookup(t.Context(), "int_1"); err != nil || got != first {
				t.Errorf("Lookup after reuse = %+v, %v; want the original", got, err)
			}
			if n := count(t, r); n != 1 {
				t.Errorf("ledger has %d entries, want 1", n)
			}
		})
	}
}

func TestInvalidRequests(t *testing.T) {
	r := newRail(t, "r", &fake.Options{Fault: func(fake.Op, any) error {
		t.Error("an invalid request reached the rail")
		return nil
	}})
	ctx := t.Context()
	if _, err := r.Settle(ctx, payReq("", 1)); class(err) != "invalid" {
		t.Errorf("Settle: %v", err)
	}
	if _, err := r.Settle(ctx, payReq("k", 0)); class(err) != "invalid" {
		t.Errorf("Settle: %v", err)
	}
	if _, err := r.Refund(ctx, settle.RefundRequest{Key: "k", Amount: 1}); class(err) != "invalid" {
		t.Errorf("Refund: %v", err)
	}
	if _, err := r.Lookup(ctx, "a key"); class(err) != "invalid" {
		t.Errorf("Lookup: %v", err)
	}
}

func TestDeclineAbove(t *testing.T) {
	tests := []struct {
		amount int64
		want   string
	}{
		{1, "ok"},
		{5000, "ok"},
		{5001, "declined"},
		{settle.MaxAmount, "declined"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.amount), func(t *testing.T) {
			r := newRail(t, "r", &fake.Options{DeclineAbove: 5000})
			key := fmt.Sprint("int_", tc.amount)
			s, err := r.Settle(t.Context(), payReq(key, tc.amount))
			if class(err) != tc.want {
				t.Fatalf("Settle = %v, want %s", err, tc.want)
			}
			settled, _ := r.Settled(t.Context(), key)
			if tc.want == "ok" {
				if s.Status != settle.StatusSettled || !settled {
					t.Errorf("Settle = %+v, Settled = %v", s, settled)
				}
				return
			}
			var de *settle.DeclineError
			errors.As(err, &de)
			if de.Code != fake.CodeAmountTooLarge || s.Status != settle.StatusDeclined ||
				s.DeclineCode != fake.CodeAmountTooLarge || !s.SettledAt.IsZero() || s.Reference == "" || settled {
				t.Errorf("declined: %+v, %+v, Settled = %v", s, de, settled)
			}
			// A decline is final: the replay and Lookup say the same.
			s2, err2 := r.Settle(t.Context(), payReq(key, tc.amount))
			s3, err3 := r.Lookup(t.Context(), key)
			if s2 != s || s3 != s || err2.Error() != err.Error() || err3.Error() != strings.Replace(err.Error(), "settle", "lookup", 1) {
				t.Errorf("replay %+v %v, lookup %+v %v; want %+v %v", s2, err2, s3, err3, s, err)
			}
			if class(err2) != "declined" || class(err3) != "declined" {
				t.Errorf("replay %v, lookup %v: want declines", err2, err3)
			}
			l, _ := r.Ledger(t.Context())
			if len(l) != 1 || l[0].Status != settle.StatusDeclined {
				t.Errorf("ledger = %+v", l)
			}
		})
	}
}

func TestDeclineRateSeeded(t *testing.T) {
	run := func(seed uint64) []bool {
		r := newRail(t, "r", &fake.Options{DeclineRate: 0.3, Rand: fake.SeededRand(seed)})
		var declined []bool
		for i := range 1000 {
			_, err := r.Settle(t.Context(), payReq(fmt.Sprint("k", i), 10))
			switch class(err) {
			case "ok":
				declined = append(declined, false)
			case "declined":
				var de *settle.DeclineError
				errors.As(err, &de)
				if de.Code != fake.CodeInsufficientFunds {
					t.Fatalf("code %q", de.Code)
				}
				declined = append(declined, true)
			default:
				t.Fatal(err)
			}
		}
		mustCheck(t, r)
		return declined
	}
	a, b, c := run(1), run(1), run(2)
	n := 0
	for _, d := range a {
		if d {
			n++
		}
	}
	if n < 250 || n > 350 {
		t.Errorf("%d of 1000 declined at rate 0.3", n)
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Error("the same seed gave different declines")
	}
	if fmt.Sprint(a) == fmt.Sprint(c) {
		t.Error("different seeds gave the same declines")
	}
}

func TestUnknownOutcome(t *testing.T) {
	tests := []struct {
		mode     fake.UnknownMode
		recorded bool
	}{
		{fake.UnknownBefore, false},
		{fake.UnknownAfter, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.mode), func(t *testing.T) {
			st := &memstore.Store{}
			r := newRail(t, "r", &fake.Options{Store: st, UnknownOutcomeRate: 1, UnknownOutcomeMode: tc.mode})
			s, err := r.Settle(t.Context(), payReq("int_1", 700))
			if class(err) != "unknown" || s != (settle.Settlement{}) {
				t.Fatalf("Settle = %+v, %v; want zero, ErrUnknownOutcome", s, err)
			}
			if errors.Is(err, settle.ErrDeclined) || errors.Is(err, settle.ErrUnavailable) {
				t.Fatalf("an unknown outcome also matches a definite one: %v", err)
			}
			// Lookup tells the truth.
			got, err := r.Lookup(t.Context(), "int_1")
			if tc.recorded {
				if err != nil || got.Status != settle.StatusSettled || got.Amount != 700 {
					t.Fatalf("Lookup = %+v, %v; want settled", got, err)
				}
			} else if class(err) != "unknownkey" {
				t.Fatalf("Lookup = %+v, %v; want ErrUnknownKey", got, err)
			}
			if settled, _ := r.Settled(t.Context(), "int_1"); settled != tc.recorded {
				t.Errorf("Settled = %v, want %v", settled, tc.recorded)
			}
			// The caller resolves by repeating the request on a healthy rail
			// over the same ledger: the money moves exactly once.
			healthy := newRail(t, "r", &fake.Options{Store: st})
			again, err := healthy.Settle(t.Context(), payReq("int_1", 700))
			if err != nil || again.Status != settle.StatusSettled {
				t.Fatalf("retry = %+v, %v", again, err)
			}
			if tc.recorded && again != got {
				t.Errorf("retry = %+v, want the recorded %+v", again, got)
			}
			if n := count(t, healthy); n != 1 {
				t.Errorf("ledger has %d entries, want 1", n)
			}
			mustCheck(t, healthy)
		})
	}
}

func TestUnknownOutcomeEither(t *testing.T) {
	r := newRail(t, "r", &fake.Options{UnknownOutcomeRate: 1, Rand: fake.SeededRand(7)})
	var before, after int
	for i := range 200 {
		key := fmt.Sprint("k", i)
		if _, err := r.Settle(t.Context(), payReq(key, 1)); class(err) != "unknown" {
			t.Fatalf("Settle = %v", err)
		}
		if ok, _ := r.Settled(t.Context(), key); ok {
			after++
		} else {
			before++
		}
	}
	if before < 70 || after < 70 {
		t.Errorf("before %d, after %d of 200: want both about half", before, after)
	}
}

func TestUnknownOutcomeDecline(t *testing.T) {
	// A response lost after a decline: the decline is recorded and final.
	r := newRail(t, "r", &fake.Options{DeclineAbove: 10, UnknownOutcomeRate: 1, UnknownOutcomeMode: fake.UnknownAfter})
	if _, err := r.Settle(t.Context(), payReq("k", 11)); class(err) != "unknown" {
		t.Fatalf("Settle = %v", err)
	}
	if _, err := r.Lookup(t.Context(), "k"); class(err) != "declined" {
		t.Errorf("Lookup = %v, want the recorded decline", err)
	}
}

func TestUnavailable(t *testing.T) {
	st := &memstore.Store{}
	r := newRail(t, "r", &fake.Options{Store: st, UnavailableRate: 1})
	healthy := newRail(t, "r", &fake.Options{Store: st})
	if _, err := healthy.Settle(t.Context(), payReq("old", 1)); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, err := r.Settle(ctx, payReq("k", 1))
	if class(err) != "unavailable" {
		t.Errorf("Settle = %v", err)
	}
	if _, err := r.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "old", Amount: 1}); class(err) != "unavailable" {
		t.Errorf("Refund = %v", err)
	}
	if _, err := r.Lookup(ctx, "old"); class(err) != "unavailable" {
		t.Errorf("Lookup = %v", err)
	}
	// Nothing was sent: the ledger holds only the earlier payment.
	if _, err := healthy.Lookup(ctx, "k"); class(err) != "unknownkey" {
		t.Errorf("Lookup(k) = %v", err)
	}
	if n := count(t, healthy); n != 1 {
		t.Errorf("ledger has %d entries, want 1", n)
	}
}

func TestCancelledContext(t *testing.T) {
	r := newRail(t, "r", nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := r.Settle(ctx, payReq("k", 1)); class(err) != "unavailable" || !errors.Is(err, context.Canceled) {
		t.Errorf("Settle = %v, want ErrUnavailable and context.Canceled", err)
	}
	if _, err := r.Lookup(ctx, "k"); class(err) != "unavailable" {
		t.Errorf("Lookup = %v", err)
	}
	if _, err := r.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 1}); class(err) != "unavailable" {
		t.Errorf("Refund = %v", err)
	}
	if n := count(t, r); n != 0 {
		t.Errorf("ledger has %d entries", n)
	}
}

func TestFault(t *testing.T) {
	errBoom := errors.New("connection reset")
	tests := []struct {
		name     string
		fault    error
		want     string
		recorded bool
	}{
		{"unavailable", settle.ErrUnavailable, "unavailable", false},
		{"unknown before", settle.ErrUnknownOutcome, "unknown", false},
		{"unknown after", fake.AfterMove(settle.ErrUnknownOutcome), "unknown", true},
		{"after move nil", fake.AfterMove(nil), "unknown", true},
		{"other error", errBoom, "other: fake: r: settle k: connection reset", false},
		{"decline", &settle.DeclineError{Code: "do_not_honor", Message: "try another card"}, "declined", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &memstore.Store{}
			var seen []any
			var mu sync.Mutex
			r := newRail(t, "r", &fake.Options{Store: st, Fault: func(op fake.Op, req any) error {
				mu.Lock()
				defer mu.Unlock()
				seen = append(seen, req)
				if op == fake.OpSettle {
					return tc.fault
				}
				return nil
			}})
			req := payReq("k", 1)
			if _, err := r.Settle(t.Context(), req); class(err) != tc.want {
				t.Fatalf("Settle = %v, want %s", err, tc.want)
			}
			_, err := r.Lookup(t.Context(), "k")
			switch {
			case !tc.recorded && class(err) != "unknownkey":
				t.Errorf("Lookup = %v, want ErrUnknownKey", err)
			case tc.recorded && tc.want == "declined" && class(err) != "declined":
				t.Errorf("Lookup = %v, want the scripted decline", err)
			case tc.recorded && tc.want != "declined" && err != nil:
				t.Errorf("Lookup = %v, want settled", err)
			}
			if len(seen) != 2 || fmt.Sprint(seen[0]) != fmt.Sprint(req) || seen[1] != "k" {
				t.Errorf("Fault saw %v", seen)
			}
		})
	}
}

func TestFailNext(t *testing.T) {
	r := newRail(t, "r", &fake.Options{Fault: fake.FailNext(fake.OpSettle, 2, settle.ErrUnavailable)})
	var got []string
	for range 4 {
		_, err := r.Settle(t.Context(), payReq("k", 1))
		got = append(got, class(err))
		// Other operations are not counted.
		_, _ = r.Lookup(t.Context(), "k")
	}
	if want := "[unavailable unavailable ok ok]"; fmt.Sprint(got) != want {
		t.Errorf("outcomes %v, want %s", got, want)
	}

	// With no op, every operation counts; exactly n fail under concurrency.
	hook := fake.FailNext("", 10, settle.ErrUnavailable)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for i := range 50 {
		wg.Go(func() {
			op := []fake.Op{fake.OpSettle, fake.OpRefund, fake.OpLookup}[i%3]
			if hook(op, nil) != nil {
				mu.Lock()
				failed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != 10 {
		t.Errorf("%d calls failed, want 10", failed)
	}
}

func TestDeferredFinality(t *testing.T) {
	tests := []struct {
		name       string
		returns    float64
		useAdvance bool
		status     settle.Status
	}{
		{"clock settles", 0, false, settle.StatusSettled},
		{"advance settles", 0, true, settle.StatusSettled},
		{"clock returns", 1, false, settle.StatusDeclined},
		{"advance returns", 1, true, settle.StatusDeclined},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := newRail(t, "bank", &fake.Options{
				Facts:              settle.Facts{Finality: settle.Deferred},
				FinalityDelay:      time.Hour,
				PendingDeclineRate: tc.returns,
				Now:                clk.Now,
			})
			ctx := t.Context()
			s, err := r.Settle(ctx, payReq("int_1", 900))
			if err != nil || s.Status != settle.StatusPending || !s.SettledAt.IsZero() {
				t.Fatalf("Settle = %+v, %v; want pending", s, err)
			}
			clk.Add(59 * time.Minute)
			if got, err := r.Lookup(ctx, "int_1"); err != nil || got.Status != settle.StatusPending {
				t.Fatalf("Lookup before finality = %+v, %v", got, err)
			}
			if ok, _ := r.Settled(ctx, "int_1"); ok {
				t.Error("Settled while pending")
			}
			if _, err := r.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "int_1", Amount: 1}); class(err) != "notsettled" {
				t.Errorf("Refund while pending = %v", err)
			}
			if n, err := r.Advance(ctx, clk.Now()); err != nil || n != 0 {
				t.Errorf("Advance before due = %d, %v", n, err)
			}

			if tc.useAdvance {
				n, err := r.Advance(ctx, t0.Add(2*time.Hour))
				if err != nil || n != 1 {
					t.Fatalf("Advance = %d, %v", n, err)
				}
			} else {
				clk.Add(time.Minute)
			}
			got, err := r.Lookup(ctx, "int_1")
			if got.Status != tc.status {
				t.Fatalf("Lookup after finality = %+v, %v; want %s", got, err, tc.status)
			}
			switch tc.status {
			case settle.StatusSettled:
				if err != nil || !got.SettledAt.Equal(t0.Add(time.Hour)) {
					t.Errorf("settled %+v, %v; want SettledAt = accepted + delay", got, err)
				}
				if ok, _ := r.Settled(ctx, "int_1"); !ok {
					t.Error("Settled = false")
				}
				if _, err := r.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "int_1", Amount: 900}); err != nil {
					t.Errorf("Refund after settling = %v", err)
				}
			case settle.StatusDeclined:
				var de *settle.DeclineError
				if !errors.As(err, &de) || de.Code != fake.CodeReturned || got.DeclineCode != fake.CodeReturned {
					t.Errorf("returned: %+v, %v", got, err)
				}
				if _, err := r.Settle(ctx, payReq("int_1", 900)); class(err) != "declined" {
					t.Errorf("replay after return = %v", err)
				}
				if _, err := r.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "int_1", Amount: 1}); class(err) != "notsettled" {
					t.Errorf("Refund of returned payment = %v", err)
				}
			}
			// Once final, always final: a clock set back changes nothing.
			clk.Add(-24 * time.Hour)
			if again, _ := r.Lookup(ctx, "int_1"); again.Status != tc.status {
				t.Errorf("after the clock went back: %s", again.Status)
			}
			mustCheck(t, r)
		})
	}
}

func TestDeferredReplaySettles(t *testing.T) {
	clk := newClock()
	r := newRail(t, "bank", &fake.Options{Facts: settle.Facts{Finality: settle.Deferred}, Now: clk.Now})
	if s, _ := r.Settle(t.Context(), payReq("k", 1)); s.Status != settle.StatusPending {
		t.Fatalf("status %s", s.Status)
	}
	clk.Add(fake.DefaultFinalityDelay)
	s, err := r.Settle(t.Context(), payReq("k", 1))
	if err != nil || s.Status != settle.StatusSettled || !s.SettledAt.Equal(t0.Add(fake.DefaultFinalityDelay)) {
		t.Errorf("replay after the default delay = %+v, %v", s, err)
	}
}

func TestRefunds(t *testing.T) {
	type step struct {
		id     string
		key    string
		amount int64
		want   string
		total  int64 // RefundResult.Refunded when want is "ok"
	}
	tests := []struct {
		name  string
		facts settle.Facts
		steps []step
		final int64 // Settlement.Refunded at the end
	}{
		{"full", settle.Facts{}, []step{
			{"rf1", "p", 1000, "ok", 1000},
			{"rf2", "p", 1, "exceeds", 0},
		}, 1000},
		{"partial twice", settle.Facts{}, []step{
			{"rf1", "p", 300, "ok", 300},
			{"rf2", "p", 700, "ok", 1000},
		}, 1000},
		{"over", settle.Facts{}, []step{
			{"rf1", "p", 1001, "exceeds", 0},
			{"rf2", "p", 600, "ok", 600},
			{"rf3", "p", 401, "exceeds", 0},
			{"rf4", "p", 400, "ok", 1000},
		}, 1000},
		{"idempotent", settle.Facts{}, []step{
			{"rf1", "p", 600, "ok", 600},
			{"rf1", "p", 600, "ok", 600},
			{"rf1", "p", 600, "ok", 600},
			{"rf2", "p", 400, "ok", 1000},
			{"rf1", "p", 600, "ok", 600}, // the first result, as it was
		}, 1000},
		{"refund id reuse", settle.Facts{}, []step{
			{"rf1", "p", 100, "ok", 100},
			{"rf1", "p", 200, "keyreuse", 0},
			{"rf1", "declined", 100, "keyreuse", 0},
		}, 100},
		{"unknown key", settle.Facts{}, []step{{"rf1", "nope", 1, "unknownkey", 0}}, 0},
		{"declined payment", settle.Facts{}, []step{{"rf1", "declined", 1, "notsettled", 0}}, 0},
		{"irreversible", settle.Facts{Reversibility: settle.Irreversible}, []step{
			{"rf1", "p", 1, "irreversible", 0},
			{"rf2", "nope", 1, "irreversible", 0},
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRail(t, "r", &fake.Options{Facts: tc.facts, DeclineAbove: 5000})
			ctx := t.Context()
			if _, err := r.Settle(ctx, payReq("p", 1000)); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Settle(ctx, payReq("declined", 9000)); class(err) != "declined" {
				t.Fatal(err)
			}
			for i, s := range tc.steps {
				res, err := r.Refund(ctx, settle.RefundRequest{RefundID: s.id, Key: s.key, Amount: s.amount})
				if class(err) != s.want {
					t.Fatalf("step %d: Refund(%s, %s, %d) = %v, want %s", i, s.id, s.key, s.amount, err, s.want)
				}
				if err != nil {
					if res != (settle.RefundResult{}) {
						t.Errorf("step %d: failed refund returned %+v", i, res)
					}
					continue
				}
				want := settle.RefundResult{
					RefundID: s.id, Key: s.key, Reference: res.Reference, Amount: s.amount,
					Currency: "USD", Refunded: s.total, RefundedAt: t0,
				}
				if res != want || !strings.HasPrefix(res.Reference, "re_") {
					t.Errorf("step %d: %+v\nwant %+v", i, res, want)
				}
			}
			got, err := r.Lookup(ctx, "p")
			if err != nil || got.Refunded != tc.final || got.Status != settle.StatusSettled {
				t.Errorf("Lookup = %+v, %v; want Refunded %d", got, err, tc.final)
			}
			mustCheck(t, r)
		})
	}
}

func TestRefundUnknownOutcome(t *testing.T) {
	for _, mode := range []fake.UnknownMode{fake.UnknownBefore, fake.UnknownAfter} {
		t.Run(string(mode), func(t *testing.T) {
			st := &memstore.Store{}
			healthy := newRail(t, "r", &fake.Options{Store: st})
			if _, err := healthy.Settle(t.Context(), payReq("p", 1000)); err != nil {
				t.Fatal(err)
			}
			flaky := newRail(t, "r", &fake.Options{Store: st, UnknownOutcomeRate: 1, UnknownOutcomeMode: mode})
			req := settle.RefundRequest{RefundID: "rf", Key: "p", Amount: 1000}
			if _, err := flaky.Refund(t.Context(), req); class(err) != "unknown" {
				t.Fatalf("Refund = %v", err)
			}
			// Repeating the same refund resolves it and refunds once.
			for range 2 {
				res, err := healthy.Refund(t.Context(), req)
				if err != nil || res.Refunded != 1000 {
					t.Fatalf("retry = %+v, %v", res, err)
				}
			}
			mustCheck(t, healthy)
		})
	}
}

func TestRestart(t *testing.T) {
	st := &memstore.Store{}
	clk := newClock()
	ctx := t.Context()
	opts := func() *fake.Options {
		return &fake.Options{Store: st, Now: clk.Now, DeclineAbove: 5000, Facts: settle.Facts{Finality: settle.Deferred}}
	}
	old := newRail(t, "bank", opts())
	oldOpts := opts()
	oldOpts.Fault = fake.FailNext(fake.OpSettle, 1, fake.AfterMove(settle.ErrUnknownOutcome))
	dying := newRail(t, "bank", oldOpts)
	// The process dies right after the rail acted: its caller saw only an
	// unknown outcome.
	if _, err := dying.Settle(ctx, payReq("int_crash", 100)); class(err) != "unknown" {
		t.Fatal(err)
	}
	if _, err := old.Settle(ctx, payReq("int_declined", 6000)); class(err) != "declined" {
		t.Fatal(err)
	}
	if _, err := old.Settle(ctx, payReq("int_ok", 200)); err != nil {
		t.Fatal(err)
	}
	clk.Add(fake.DefaultFinalityDelay)
	if _, err := old.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "int_ok", Amount: 50}); err != nil {
		t.Fatal(err)
	}
	before, err := old.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}

	restarted := newRail(t, "bank", opts())
	after, err := restarted.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(before) != fmt.Sprint(after) || len(after) != 4 {
		t.Errorf("ledger after restart:\n%v\nwant\n%v", after, before)
	}
	if s, err := restarted.Lookup(ctx, "int_crash"); err != nil || s.Status != settle.StatusSettled {
		t.Errorf("Lookup(int_crash) after restart = %+v, %v", s, err)
	}
	if _, err := restarted.Lookup(ctx, "int_declined"); class(err) != "declined" {
		t.Errorf("Lookup(int_declined) after restart = %v", err)
	}
	if s, err := restarted.Lookup(ctx, "int_ok"); err != nil || s.Refunded != 50 {
		t.Errorf("Lookup(int_ok) after restart = %+v, %v", s, err)
	}
	if _, err := restarted.Lookup(ctx, "int_never"); class(err) != "unknownkey" {
		t.Errorf("Lookup(int_never) = %v", err)
	}
	// Still idempotent across the restart, with one sequence.
	if _, err := restarted.Settle(ctx, payReq("int_crash", 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Settle(ctx, payReq("int_new", 1)); err != nil {
		t.Fatal(err)
	}
	l, _ := restarted.Ledger(ctx)
	if len(l) != 5 || l[4].Seq != 5 || l[4].Key != "int_new" {
		t.Errorf("ledger after restart and one payment: %v", l)
	}
	mustCheck(t, restarted)

	// Another rail over the same store sees none of it.
	other := newRail(t, "card", &fake.Options{Store: st})
	if _, err := other.Lookup(ctx, "int_ok"); class(err) != "unknownkey" {
		t.Errorf("other rail's Lookup = %v", err)
	}
}

func TestStoreLayout(t *testing.T) {
	st := &memstore.Store{}
	r := newRail(t, "card", &fake.Options{Store: st})
	if _, err := r.Settle(t.Context(), payReq("k", 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Refund(t.Context(), settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 5}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	err := st.View(t.Context(), func(tx store.Reader) error {
		it := tx.Iterate(nil, nil, false)
		for it.Next() {
			keys = append(keys, string(it.Key()))
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[settle/fake/card/layout settle/fake/card/p/k settle/fake/card/r/rf settle/fake/card/seq settle/fake/card/u/k]"
	if fmt.Sprint(keys) != want {
		t.Errorf("store keys %v, want %s", keys, want)
	}
}

// TestLayoutMarksOldLedger: a ledger written before the used-key markers
// existed gets them before a rail's first write, so one key still serves
// one use: a payment replays and a hold's key is refused for a payment,
// and the other way round.
func TestLayoutMarksOldLedger(t *testing.T) {
	for _, inTxn := range []bool{false, true} {
		t.Run(fmt.Sprintf("inTxn=%v", inTxn), func(t *testing.T) { testLayoutMarksOldLedger(t, inTxn) })
	}
}

// testLayoutMarksOldLedger: a new process over an old ledger replays and
// refuses keys as the old one did, settling by Settle or, inTxn, by
// SettleInTxn's step in a caller's transaction that fails once and is
// then committed.
func testLayoutMarksOldLedger(t *testing.T, inTxn bool) {
	ctx := t.Context()
	st := &memstore.Store{}
	old := newRail(t, "card", &fake.Options{Store: st, Authorizations: true})
	paid, err := old.Settle(ctx, payReq("paid", 5))
	if err != nil {
		t.Fatal(err)
	}
	held, err := old.Authorize(ctx, payReq("held", 7))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Capture(ctx, "held", 7); err != nil {
		t.Fatal(err)
	}
	// Take the ledger back to the old layout: no markers, no layout key.
	err = st.Update(ctx, func(tx store.Txn) error {
		lo := []byte("settle/fake/card/u/")
		it := tx.Iterate(lo, store.PrefixEnd(lo), false)
		var ks [][]byte
		for it.Next() {
			ks = append(ks, slices.Clone(it.Key()))
		}
		if err := it.Close(); err != nil {
			return err
		}
		if len(ks) != 2 {
			return fmt.Errorf("%d markers, want 2", len(ks))
		}
		for _, k := range append(ks, []byte("settle/fake/card/layout")) {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	seq := func() string {
		var v []byte
		err := st.View(ctx, func(tx store.Reader) error {
			var err error
			v, err = tx.Get([]byte("settle/fake/card/seq"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", v)
	}
	before := seq()
	r := newRail(t, "card", &fake.Options{Store: st, Authorizations: true, SharedLog: inTxn}) // a new process
	settleOnce := r.Settle
	if inTxn {
		settleOnce = func(ctx context.Context, req settle.SettleRequest) (settle.Settlement, error) {
			return settleInCallerTxn(t, st, r, req)
		}
	}
	if s, err := settleOnce(ctx, payReq("paid", 5)); err != nil || s.Reference != paid.Reference {
		t.Errorf("replayed payment: %+v, %v; want reference %s", s, err, paid.Reference)
	}
	if after := seq(); after != before {
		t.Errorf("the replay recorded a new payment: ledger sequence %s -> %s", before, after)
	}
	if _, err := settleOnce(ctx, payReq("held", 7)); !errors.Is(err, settle.ErrKeyReuse) {
		t.Errorf("payment under a hold's key: %v, want ErrKeyReuse", err)
	}
	if _, err := r.Authorize(ctx, payReq("paid", 5)); !errors.Is(err, settle.ErrKeyReuse) {
		t.Errorf("hold under a payment's key: %v, want ErrKeyReuse", err)
	}
	if a, err := r.Authorize(ctx, payReq("held", 7)); err != nil || a.Reference != held.Reference {
		t.Errorf("replayed hold: %+v, %v; want reference %s", a, err, held.Reference)
	}
	err = st.View(ctx, func(tx store.Reader) error {
		for k, want := range map[string]string{"u/paid": "p/", "u/held": "a/", "layout": "2"} {
			if v, err := tx.Get([]byte("settle/fake/card/" + k)); err != nil || string(v) != want {
				t.Errorf("%s = %q, %v; want %q", k, v, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCheckLedgerDetectsDamage(t *testing.T) {
	tests := []struct {
		name   string
		facts  settle.Facts
		damage func(tx store.Txn) error
	}{
		{"refund exceeds", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/r/x"), []byte(`{"seq":3,"refundId":"x","key":"k","amount":2000,"currency":"USD"}`))
		}},
		{"refund of unknown payment", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/r/x"), []byte(`{"seq":3,"refundId":"x","key":"nope","amount":1,"currency":"USD"}`))
		}},
		{"duplicate seq", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/p/k2"), []byte(`{"seq":1,"key":"k2","amount":1,"status":"settled"}`))
		}},
		{"record under the wrong key", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/p/k2"), []byte(`{"seq":3,"key":"k","amount":1,"status":"settled"}`))
		}},
		{"refund on irreversible rail", settle.Facts{Reversibility: settle.Irreversible}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/r/x"), []byte(`{"seq":3,"refundId":"x","key":"k","amount":1,"currency":"USD"}`))
		}},
		{"pending on instant rail", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/p/k2"), []byte(`{"seq":3,"key":"k2","amount":1,"status":"pending","finalAt":"2999-01-01T00:00:00Z"}`))
		}},
		{"garbage", settle.Facts{}, func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/r/p/k"), []byte(`{`))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &memstore.Store{}
			r := newRail(t, "r", &fake.Options{Store: st, Facts: tc.facts})
			for _, k := range []string{"k", "filler"} {
				if _, err := r.Settle(t.Context(), payReq(k, 1000)); err != nil {
					t.Fatal(err)
				}
			}
			mustCheck(t, r)
			if err := st.Update(t.Context(), tc.damage); err != nil {
				t.Fatal(err)
			}
			if err := r.CheckLedger(t.Context()); err == nil {
				t.Error("CheckLedger found nothing")
			}
		})
	}
}

func TestLedgerStoreFailure(t *testing.T) {
	st := &memstore.Store{}
	r := newRail(t, "r", &fake.Options{Store: st})
	if _, err := r.Settle(t.Context(), payReq("k", 1)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// The rail cannot tell whether its own write happened: fail closed.
	if _, err := r.Settle(t.Context(), payReq("k2", 1)); class(err) != "unknown" {
		t.Errorf("Settle on a closed store = %v", err)
	}
	if _, err := r.Refund(t.Context(), settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 1}); class(err) != "unknown" {
		t.Errorf("Refund on a closed store = %v", err)
	}
	// A lookup that cannot read is unanswered, never "unknown key".
	if _, err := r.Lookup(t.Context(), "k"); class(err) != "unavailable" {
		t.Errorf("Lookup on a closed store = %v", err)
	}
	if _, err := r.Ledger(t.Context()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ledger = %v", err)
	}
}

// 100 goroutines settle 50 keys twice each: the money moves 50 times, and
// both calls for a key see the same outcome.
func TestConcurrentSettle(t *testing.T) {
	r := newRail(t, "r", &fake.Options{Facts: settle.Facts{Finality: settle.Instant}})
	ctx := t.Context()
	results := make([]settle.Settlement, 100)
	errs := make([]error, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			results[i], errs[i] = r.Settle(ctx, payReq(fmt.Sprint("int_", i%50), int64(i%50+1)))
		})
	}
	wg.Wait()
	for i := range 50 {
		if errs[i] != nil || errs[i+50] != nil {
			t.Fatalf("key %d: %v, %v", i, errs[i], errs[i+50])
		}
		if results[i] != results[i+50] {
			t.Errorf("key %d: %+v vs %+v", i, results[i], results[i+50])
		}
	}
	l, err := r.Ledger(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 50 {
		t.Errorf("ledger has %d entries, want 50", len(l))
	}
	for i, e := range l {
		if e.Seq != uint64(i+1) {
			t.Errorf("entry %d has seq %d", i, e.Seq)
		}
	}
	mustCheck(t, r)
}

// Concurrent partial refunds never exceed the payment.
func TestConcurrentRefunds(t *testing.T) {
	r := newRail(t, "r", nil)
	ctx := t.Context()
	if _, err := r.Settle(ctx, payReq("p", 1000)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, exceeds int
	for i := range 40 {
		wg.Go(func() {
			// 20 distinct refunds of 100, each sent twice.
			_, err := r.Refund(ctx, settle.RefundRequest{RefundID: fmt.Sprint("rf", i%20), Key: "p", Amount: 100})
			mu.Lock()
			defer mu.Unlock()
			switch class(err) {
			case "ok":
				ok++
			case "exceeds":
				exceeds++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	s, _ := r.Lookup(ctx, "p")
	if s.Refunded != 1000 || count(t, r) != 11 {
		t.Errorf("refunded %d in %d entries (%d ok, %d exceeds)", s.Refunded, count(t, r), ok, exceeds)
	}
	mustCheck(t, r)
}

func TestChaos(t *testing.T) {
	// Every fault at once, from many goroutines, then a healthy rail
	// resolves every key. The ledger invariants hold throughout.
	st := &memstore.Store{}
	clk := newClock()
	chaos := newRail(t, "r", &fake.Options{
		Store: st, Now: clk.Now, Rand: fake.SeededRand(3),
		Facts:       settle.Facts{Finality: settle.Deferred},
		DeclineRate: 0.1, PendingDeclineRate: 0.1, UnavailableRate: 0.1, UnknownOutcomeRate: 0.2,
	})
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			key := fmt.Sprint("int_", i%60)
			_, _ = chaos.Settle(ctx, payReq(key, 100))
			_, _ = chaos.Refund(ctx, settle.RefundRequest{RefundID: fmt.Sprint("rf_", i), Key: key, Amount: 30})
			_, _ = chaos.Lookup(ctx, key)
		})
	}
	wg.Wait()
	mustCheck(t, chaos)
	clk.Add(time.Hour)
	healthy := newRail(t, "r", &fake.Options{Store: st, Now: clk.Now, Facts: settle.Facts{Finality: settle.Deferred}})
	for i := range 60 {
		key := fmt.Sprint("int_", i)
		_, err := healthy.Settle(ctx, payReq(key, 100))
		if c := class(err); c != "ok" && c != "declined" {
			t.Errorf("%s: %v", key, err)
		}
	}
	// Keys whose every chaotic call was lost were only just accepted.
	clk.Add(time.Hour)
	for i := range 60 {
		key := fmt.Sprint("int_", i)
		s, err := healthy.Lookup(ctx, key)
		if c := class(err); (c != "ok" || s.Status != settle.StatusSettled) && c != "declined" {
			t.Errorf("%s: %+v, %v", key, s, err)
		}
	}
	if n, _ := healthy.Advance(ctx, clk.Now()); n != 0 {
		t.Errorf("Advance finalized %d after every key was looked up", n)
	}
	mustCheck(t, healthy)
}

func TestSandbox(t *testing.T) {
	rails, err := fake.NewSandbox(&fake.SandboxOptions{NoLatency: true})
	if err != nil {
		t.Fatal(err)
	}
	var reg settle.Registry
	for _, r := range rails {
		if err := reg.Register(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := fmt.Sprint(reg.Names()); got != "[sandbox-bank sandbox-card sandbox-chain]" {
		t.Errorf("Names() = %s", got)
	}
	tests := []struct {
		name   string
		facts  settle.Facts
		prefix string
		status settle.Status
		refund string
	}{
		{fake.SandboxCard, settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}, "ch_", settle.StatusSettled, "ok"},
		{fake.SandboxBank, settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}, "tr_", settle.StatusPending, "notsettled"},
		{fake.SandboxChain, settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}, "tx_", settle.StatusSettled, "irreversible"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := reg.Get(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if r.Facts() != tc.facts {
				t.Errorf("Facts() = %+v", r.Facts())
			}
			s, err := r.Settle(t.Context(), payReq("int_1", 100))
			if err != nil || s.Status != tc.status || !strings.HasPrefix(s.Reference, tc.prefix) {
				t.Errorf("Settle = %+v, %v", s, err)
			}
			_, err = r.Refund(t.Context(), settle.RefundRequest{RefundID: "rf", Key: "int_1", Amount: 100})
			if class(err) != tc.refund {
				t.Errorf("Refund = %v, want %s", err, tc.refund)
			}
		})
	}
}

func TestSandboxSharedStore(t *testing.T) {
	st := &memstore.Store{}
	rails, err := fake.NewSandbox(&fake.SandboxOptions{Store: st, NoLatency: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rails {
		if _, err := r.Settle(t.Context(), payReq("int_same", 1)); err != nil {
			t.Fatal(err)
		}
	}
	again, err := fake.NewSandbox(&fake.SandboxOptions{Store: st, NoLatency: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if n := count(t, r); n != 1 {
			t.Errorf("%s: %d entries, want 1", r.Name(), n)
		}
	}
}

func TestSandboxBadOptions(t *testing.T) {
	if _, err := fake.NewSandbox(&fake.SandboxOptions{FinalityDelay: -1}); err == nil {
		t.Error("negative FinalityDelay accepted")
	}
}
