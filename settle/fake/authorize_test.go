package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// ttl is the hold period of the scripted rails: short enough to read in a
// script, and the scripts move the fake clock across it.
const ttl = time.Hour

// authRail builds a rail with authorizations on the clock clk, over st (a
// fresh store if nil).
func authRail(t testing.TB, clk *clock, st store.Store, o fake.Options) *fake.Rail {
	t.Helper()
	o.Authorizations = true
	o.AuthorizationTTL = ttl
	o.Now = clk.Now
	o.Store = st
	return newRail(t, "card", &o)
}

// showAuth renders the result of Authorize, Void or LookupAuthorization for
// a script, and checks what every result must satisfy whatever the script.
func showAuth(t *testing.T, a settle.Authorization, err error) string {
	t.Helper()
	var de *settle.DeclineError
	switch {
	case errors.As(err, &de):
		if a.Status != "" || !a.AuthorizedAt.IsZero() || !a.ExpiresAt.IsZero() || a.Reference == "" {
			t.Errorf("declined authorization %+v", a)
		}
		return "declined " + de.Code
	case err != nil:
		if a != (settle.Authorization{}) {
			t.Errorf("failed call returned %+v", a)
		}
		return class(err)
	}
	if err := a.Status.Validate(); err != nil {
		t.Error(err)
	}
	if !strings.HasPrefix(a.Reference, fake.DefaultReferencePrefix) || !a.ExpiresAt.Equal(a.AuthorizedAt.Add(ttl)) {
		t.Errorf("authorization %+v: bad reference or expiry", a)
	}
	if (a.Status == settle.AuthCaptured) != (a.CapturedMinor != 0) {
		t.Errorf("authorization %+v: CapturedMinor disagrees with Status", a)
	}
	if a.Status == settle.AuthCaptured {
		return fmt.Sprintf("captured %d/%d", a.CapturedMinor, a.Amount)
	}
	return fmt.Sprintf("%s %d", a.Status, a.Amount)
}

// showSettlement renders the result of Capture, Settle or Lookup.
func showSettlement(t *testing.T, s settle.Settlement, err error) string {
	t.Helper()
	var de *settle.DeclineError
	switch {
	case errors.As(err, &de):
		if s.Status != settle.StatusDeclined || s.DeclineCode != de.Code {
			t.Errorf("decline described as %+v", s)
		}
		return "declined " + de.Code
	case err != nil:
		if s != (settle.Settlement{}) {
			t.Errorf("failed call returned %+v", s)
		}
		return class(err)
	}
	out := fmt.Sprintf("%s %d", s.Status, s.Amount)
	if s.Refunded > 0 {
		out += fmt.Sprintf(" refunded %d", s.Refunded)
	}
	return out
}

// showLedger renders the ledger as kind:status:amount entries.
func showLedger(t *testing.T, r *fake.Rail) string {
	t.Helper()
	l, err := r.Ledger(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range l {
		status := string(e.Status)
		if e.Kind == fake.KindAuthorization && status == "" || e.Kind == fake.KindVoid {
			status = string(e.AuthStatus)
		}
		out = append(out, fmt.Sprintf("%s:%s:%d", e.Kind, status, e.Amount))
	}
	return strings.Join(out, " ")
}

// runScript runs one line of an authorization script against r, on the key
// "h", and returns what it printed: "verb [n]" where n is the amount to
// authorize, settle, capture or refund, or "wait d" to move the clock.
func runScript(t *testing.T, r *fake.Rail, clk *clock, line string, refunds *int) string {
	t.Helper()
	ctx := t.Context()
	verb, arg, _ := strings.Cut(line, " ")
	var n int64
	if verb != "wait" && arg != "" {
		var err error
		if n, err = strconv.ParseInt(arg, 10, 64); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	auth := func(a settle.Authorization, err error) string { return showAuth(t, a, err) }
	payment := func(s settle.Settlement, err error) string { return showSettlement(t, s, err) }
	switch verb {
	case "authorize":
		return auth(r.Authorize(ctx, payReq("h", n)))
	case "settle":
		return payment(r.Settle(ctx, payReq("h", n)))
	case "capture":
		return payment(r.Capture(ctx, "h", n))
	case "void":
		return auth(r.Void(ctx, "h"))
	case "lookupauth":
		return auth(r.LookupAuthorization(ctx, "h"))
	case "lookup":
		return payment(r.Lookup(ctx, "h"))
	case "refund":
		*refunds++
		res, err := r.Refund(ctx, settle.RefundRequest{RefundID: fmt.Sprint("rf", *refunds), Key: "h", Amount: n})
		if err != nil {
			return class(err)
		}
		return fmt.Sprintf("refunded %d", res.Refunded)
	case "wait":
		d, err := time.ParseDuration(arg)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		clk.Add(d)
		return ""
	case "ledger":
		return showLedger(t, r)
	}
	t.Fatalf("unknown verb in %q", line)
	return ""
}

// The authorization state machine of the package documentation, row by row,
// as scripts: each line is a call and what it must answer.
func TestAuthorizationStateMachine(t *testing.T) {
	tests := []struct {
		name   string
		opts   fake.Options
		script string
	}{
		{"capture in full", fake.Options{}, `
			authorize 1000 -> authorized 1000
			lookup         -> unknownkey
			capture 1000   -> settled 1000
			lookupauth     -> captured 1000/1000
			lookup         -> settled 1000
			refund 1000    -> refunded 1000
			refund 1       -> exceeds
			lookup         -> settled 1000 refunded 1000
			ledger         -> authorization:captured:1000 capture:settled:1000 refund::1000`},
		{"capture in part", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 600    -> settled 600
			lookupauth     -> captured 600/1000
			refund 601     -> exceeds
			refund 600     -> refunded 600
			ledger         -> authorization:captured:1000 capture:settled:600 refund::600`},
		{"capture of one", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 1      -> settled 1`},
		{"capture over the hold", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 1001   -> invalid
			lookupauth     -> authorized 1000
			lookup         -> unknownkey
			capture 1000   -> settled 1000`},
		{"capture twice, same amount", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 500    -> settled 500
			capture 500    -> settled 500
			wait 2h
			capture 500    -> settled 500
			ledger         -> authorization:captured:1000 capture:settled:500`},
		{"capture twice, other amount", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 500    -> settled 500
			capture 400    -> keyreuse
			capture 1000   -> keyreuse
			lookup         -> settled 500
			lookupauth     -> captured 500/1000`},
		{"void then capture", fake.Options{}, `
			authorize 1000 -> authorized 1000
			void           -> voided 1000
			capture 1000   -> closed
			void           -> voided 1000
			lookupauth     -> voided 1000
			lookup         -> unknownkey
			refund 1       -> unknownkey
			ledger         -> authorization:voided:1000 void:voided:1000`},
		{"capture then void", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 700    -> settled 700
			void           -> closed
			lookupauth     -> captured 700/1000
			ledger         -> authorization:captured:1000 capture:settled:700`},
		{"expiry then capture", fake.Options{}, `
			authorize 1000 -> authorized 1000
			wait 59m59s
			lookupauth     -> authorized 1000
			wait 1s
			capture 1000   -> closed
			lookupauth     -> expired 1000
			void           -> expired 1000
			lookup         -> unknownkey
			ledger         -> authorization:expired:1000`},
		{"expiry then void", fake.Options{}, `
			authorize 1000 -> authorized 1000
			wait 1h
			void           -> expired 1000
			void           -> expired 1000
			capture 1      -> closed`},
		{"expiry seen by an authorize replay", fake.Options{}, `
			authorize 1000 -> authorized 1000
			wait 3h
			authorize 1000 -> expired 1000`},
		{"expiry stays once seen", fake.Options{}, `
			authorize 1000 -> authorized 1000
			wait 1h
			lookupauth     -> expired 1000
			wait -2h
			lookupauth     -> expired 1000
			capture 1000   -> closed`},
		{"captured and voided holds do not expire", fake.Options{}, `
			authorize 1000 -> authorized 1000
			capture 10     -> settled 10
			wait 24h
			lookupauth     -> captured 10/1000
			void           -> closed`},
		{"authorize replays its current state", fake.Options{}, `
			authorize 1000 -> authorized 1000
			authorize 1000 -> authorized 1000
			authorize 999  -> keyreuse
			capture 300    -> settled 300
			authorize 1000 -> captured 300/1000`},
		{"settled key cannot be authorized", fake.Options{}, `
			settle 1000    -> settled 1000
			authorize 1000 -> keyreuse
			authorize 5    -> keyreuse
			capture 1000   -> unknownkey
			void           -> unknownkey
			lookupauth     -> unknownkey
			lookup         -> settled 1000
			ledger         -> payment:settled:1000`},
		{"authorized key cannot be settled", fake.Options{}, `
			authorize 1000 -> authorized 1000
			settle 1000    -> keyreuse
			capture 1000   -> settled 1000
			settle 1000    -> keyreuse
			lookup         -> settled 1000`},
		{"unknown key", fake.Options{}, `
			capture 1      -> unknownkey
			void           -> unknownkey
			lookupauth     -> unknownkey
			lookup         -> unknownkey
			ledger         -> `},
		{"declined above the limit", fake.Options{DeclineAbove: 500}, `
			authorize 501  -> declined amount_too_large
			authorize 501  -> declined amount_too_large
			authorize 500  -> keyreuse
			capture 501    -> declined amount_too_large
			void           -> declined amount_too_large
			lookupauth     -> declined amount_too_large
			lookup         -> unknownkey
			settle 501     -> keyreuse
			ledger         -> authorization:declined:501`},
		{"at the limit", fake.Options{DeclineAbove: 500}, `
			authorize 500  -> authorized 500
			capture 500    -> settled 500`},
		{"deferred capture is pending", fake.Options{Facts: settle.Facts{Finality: settle.Deferred}, FinalityDelay: 10 * time.Minute}, `
			authorize 1000 -> authorized 1000
			capture 800    -> pending 800
			refund 800     -> notsettled
			capture 800    -> pending 800
			wait 10m
			lookup         -> settled 800
			capture 800    -> settled 800
			refund 800     -> refunded 800`},
		{"deferred capture returned", fake.Options{Facts: settle.Facts{Finality: settle.Deferred}, PendingDeclineRate: 1}, `
			authorize 1000 -> authorized 1000
			capture 1000   -> pending 1000
			wait 1m
			lookup         -> declined returned
			capture 1000   -> declined returned
			lookupauth     -> captured 1000/1000`},
		{"irreversible capture", fake.Options{Facts: settle.Facts{Reversibility: settle.Irreversible}}, `
			authorize 1000 -> authorized 1000
			capture 1000   -> settled 1000
			refund 1       -> irreversible`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := authRail(t, clk, nil, tc.opts)
			var refunds int
			for line := range strings.Lines(strings.TrimSpace(tc.script)) {
				call, want, hasWant := strings.Cut(line, "->")
				call = strings.TrimSpace(call)
				got := runScript(t, r, clk, call, &refunds)
				if hasWant && got != strings.TrimSpace(want) {
					t.Errorf("%s -> %s, want %s", call, got, strings.TrimSpace(want))
				}
			}
			mustCheck(t, r)
		})
	}
}

func TestAuthorizationDefaults(t *testing.T) {
	clk := newClock()
	r := newRail(t, "card", &fake.Options{Authorizations: true, Now: clk.Now})
	a, err := r.Authorize(t.Context(), payReq("h", 100))
	if err != nil {
		t.Fatal(err)
	}
	want := settle.Authorization{
		Key: "h", Reference: a.Reference, Payee: "acct:seller.example", Amount: 100, Currency: "USD",
		Status: settle.AuthAuthorized, AuthorizedAt: t0, ExpiresAt: t0.Add(7 * 24 * time.Hour),
	}
	if a != want || len(a.Reference) != len(fake.DefaultReferencePrefix)+24 {
		t.Errorf("Authorize = %+v\nwant %+v", a, want)
	}
	if fake.DefaultAuthorizationTTL != 7*24*time.Hour {
		t.Errorf("DefaultAuthorizationTTL = %v", fake.DefaultAuthorizationTTL)
	}
	s, err := r.Capture(t.Context(), "h", 100)
	if err != nil || s.Reference == a.Reference || s.SettledAt != t0 || s.Payee != a.Payee || s.Currency != "USD" || s.Key != "h" {
		t.Errorf("Capture = %+v, %v", s, err)
	}
}

func TestAuthorizerOf(t *testing.T) {
	tests := []struct {
		name string
		opts *fake.Options
		want bool
	}{
		{"enabled", &fake.Options{Authorizations: true}, true},
		{"disabled", &fake.Options{}, false},
		{"default options", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := fake.New("card", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if r.AuthorizationsEnabled() != tc.want {
				t.Errorf("AuthorizationsEnabled() = %v", r.AuthorizationsEnabled())
			}
			a, ok := settle.AuthorizerOf(r)
			if ok != tc.want || (a != nil) != tc.want {
				t.Errorf("AuthorizerOf = %v, %v; want ok=%v", a, ok, tc.want)
			}
		})
	}
}

// A rail without the option holds nothing new, but still serves the holds
// an earlier configuration left in its store.
func TestAuthorizationsDisabled(t *testing.T) {
	st := &memstore.Store{}
	clk := newClock()
	enabled := authRail(t, clk, st, fake.Options{})
	if _, err := enabled.Authorize(t.Context(), payReq("old", 100)); err != nil {
		t.Fatal(err)
	}
	disabled := newRail(t, "card", &fake.Options{Store: st, Now: clk.Now, Fault: func(op fake.Op, _ any) error {
		if op == fake.OpAuthorize {
			t.Error("a refused Authorize reached the rail")
		}
		return nil
	}})
	a, err := disabled.Authorize(t.Context(), payReq("new", 100))
	if class(err) != "invalid" || a != (settle.Authorization{}) {
		t.Errorf("Authorize on a disabled rail = %+v, %v", a, err)
	}
	if _, err := disabled.LookupAuthorization(t.Context(), "new"); class(err) != "unknownkey" {
		t.Errorf("LookupAuthorization(new) = %v", err)
	}
	if a, err := disabled.LookupAuthorization(t.Context(), "old"); err != nil || a.Status != settle.AuthAuthorized {
		t.Errorf("LookupAuthorization(old) = %+v, %v", a, err)
	}
	if s, err := disabled.Capture(t.Context(), "old", 100); err != nil || s.Status != settle.StatusSettled {
		t.Errorf("Capture(old) = %+v, %v", s, err)
	}
	mustCheck(t, disabled)
}

func TestAuthorizationInvalidArguments(t *testing.T) {
	r := newRail(t, "card", &fake.Options{Authorizations: true, Fault: func(fake.Op, any) error {
		t.Error("an invalid call reached the rail")
		return nil
	}})
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
	}{
		{"authorize empty key", func() error { _, err := r.Authorize(ctx, payReq("", 1)); return err }},
		{"authorize zero", func() error { _, err := r.Authorize(ctx, payReq("h", 0)); return err }},
		{"capture empty key", func() error { _, err := r.Capture(ctx, "", 1); return err }},
		{"capture zero", func() error { _, err := r.Capture(ctx, "h", 0); return err }},
		{"capture negative", func() error { _, err := r.Capture(ctx, "h", -5); return err }},
		{"capture over max", func() error { _, err := r.Capture(ctx, "h", settle.MaxAmount+1); return err }},
		{"void bad key", func() error { _, err := r.Void(ctx, "a key"); return err }},
		{"lookup bad key", func() error { _, err := r.LookupAuthorization(ctx, strings.Repeat("k", 256)); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); class(err) != "invalid" || !strings.HasPrefix(err.Error(), "fake: card: ") {
				t.Errorf("%v, want ErrInvalidRequest with the rail's prefix", err)
			}
		})
	}
	if n := count(t, r); n != 0 {
		t.Errorf("ledger has %d entries", n)
	}
}

func TestAuthorizationCancelledContext(t *testing.T) {
	r := newRail(t, "card", &fake.Options{Authorizations: true})
	if _, err := r.Authorize(t.Context(), payReq("h", 10)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{"authorize", func() error { _, err := r.Authorize(ctx, payReq("h2", 1)); return err }},
		{"capture", func() error { _, err := r.Capture(ctx, "h", 1); return err }},
		{"void", func() error { _, err := r.Void(ctx, "h"); return err }},
		{"lookup", func() error { _, err := r.LookupAuthorization(ctx, "h"); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); class(err) != "unavailable" || !errors.Is(err, context.Canceled) {
				t.Errorf("%v, want ErrUnavailable and context.Canceled", err)
			}
		})
	}
	if a, err := r.LookupAuthorization(t.Context(), "h"); err != nil || a.Status != settle.AuthAuthorized {
		t.Errorf("after cancelled calls: %+v, %v", a, err)
	}
	if n := count(t, r); n != 1 {
		t.Errorf("ledger has %d entries, want 1", n)
	}
}

// A scripted fault on each operation, before or after the rail acts; then a
// healthy rail over the same store answers what happened, and repeating the
// call resolves it with the money moved at most once.
func TestAuthorizationFaults(t *testing.T) {
	tests := []struct {
		name  string
		op    fake.Op
		fault error
		want  string // the faulty call's class
		// What the healthy rail reads next, as script lines.
		after string
	}{
		{"authorize unavailable", fake.OpAuthorize, settle.ErrUnavailable, "unavailable", `
			lookupauth     -> unknownkey
			authorize 1000 -> authorized 1000
			ledger         -> authorization:authorized:1000`},
		{"authorize lost request", fake.OpAuthorize, settle.ErrUnknownOutcome, "unknown", `
			lookupauth     -> unknownkey
			authorize 1000 -> authorized 1000
			ledger         -> authorization:authorized:1000`},
		{"authorize lost response", fake.OpAuthorize, fake.AfterMove(nil), "unknown", `
			lookupauth     -> authorized 1000
			authorize 1000 -> authorized 1000
			ledger         -> authorization:authorized:1000`},
		{"authorize scripted decline", fake.OpAuthorize, &settle.DeclineError{Code: "do_not_honor"}, "declined", `
			lookupauth     -> declined do_not_honor
			authorize 1000 -> declined do_not_honor
			ledger         -> authorization:declined:1000`},
		{"capture unavailable", fake.OpCapture, settle.ErrUnavailable, "unavailable", `
			lookup         -> unknownkey
			lookupauth     -> authorized 1000
			capture 600    -> settled 600
			ledger         -> authorization:captured:1000 capture:settled:600`},
		{"capture lost request", fake.OpCapture, settle.ErrUnknownOutcome, "unknown", `
			lookup         -> unknownkey
			lookupauth     -> authorized 1000
			capture 600    -> settled 600
			ledger         -> authorization:captured:1000 capture:settled:600`},
		{"capture lost response", fake.OpCapture, fake.AfterMove(settle.ErrUnknownOutcome), "unknown", `
			lookup         -> settled 600
			lookupauth     -> captured 600/1000
			capture 600    -> settled 600
			ledger         -> authorization:captured:1000 capture:settled:600`},
		{"capture scripted decline", fake.OpCapture, &settle.DeclineError{Code: "do_not_honor"}, "declined", `
			lookup         -> declined do_not_honor
			lookupauth     -> voided 1000
			capture 600    -> declined do_not_honor
			capture 500    -> keyreuse
			void           -> voided 1000
			refund 1       -> notsettled
			ledger         -> authorization:voided:1000 capture:declined:600`},
		{"void unavailable", fake.OpVoid, settle.ErrUnavailable, "unavailable", `
			lookupauth     -> authorized 1000
			void           -> voided 1000
			ledger         -> authorization:voided:1000 void:voided:1000`},
		{"void lost request", fake.OpVoid, settle.ErrUnknownOutcome, "unknown", `
			lookupauth     -> authorized 1000
			void           -> voided 1000
			ledger         -> authorization:voided:1000 void:voided:1000`},
		{"void lost response", fake.OpVoid, fake.AfterMove(nil), "unknown", `
			lookupauth     -> voided 1000
			capture 600    -> closed
			void           -> voided 1000
			ledger         -> authorization:voided:1000 void:voided:1000`},
		{"void scripted decline", fake.OpVoid, &settle.DeclineError{Code: "x"}, "declined", `
			lookupauth     -> authorized 1000
			ledger         -> authorization:authorized:1000`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &memstore.Store{}
			clk := newClock()
			healthy := authRail(t, clk, st, fake.Options{})
			flaky := authRail(t, clk, st, fake.Options{Fault: fake.FailNext(tc.op, 1, tc.fault)})
			if tc.op != fake.OpAuthorize {
				if _, err := healthy.Authorize(t.Context(), payReq("h", 1000)); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			switch tc.op {
			case fake.OpAuthorize:
				_, err = flaky.Authorize(t.Context(), payReq("h", 1000))
			case fake.OpCapture:
				_, err = flaky.Capture(t.Context(), "h", 600)
			case fake.OpVoid:
				_, err = flaky.Void(t.Context(), "h")
			}
			if class(err) != tc.want {
				t.Fatalf("%s = %v, want %s", tc.op, err, tc.want)
			}
			if tc.want == "unknown" && (errors.Is(err, settle.ErrUnavailable) || errors.Is(err, settle.ErrDeclined)) {
				t.Errorf("an unknown outcome also matches a definite one: %v", err)
			}
			var refunds int
			for line := range strings.Lines(strings.TrimSpace(tc.after)) {
				call, want, _ := strings.Cut(line, "->")
				call = strings.TrimSpace(call)
				if got := runScript(t, healthy, clk, call, &refunds); got != strings.TrimSpace(want) {
					t.Errorf("%s -> %s, want %s", call, got, strings.TrimSpace(want))
				}
			}
			mustCheck(t, healthy)
		})
	}
}

// A fault on LookupAuthorization leaves the hold as it was.
func TestLookupAuthorizationFaults(t *testing.T) {
	tests := []struct {
		name  string
		fault error
		want  string
	}{
		{"unavailable", settle.ErrUnavailable, "unavailable"},
		{"after the read", fake.AfterMove(settle.ErrUnavailable), "unavailable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			r := authRail(t, clk, nil, fake.Options{Fault: fake.FailNext(fake.OpLookup, 1, tc.fault)})
			if _, err := r.Authorize(t.Context(), payReq("h", 10)); err != nil {
				t.Fatal(err)
			}
			a, err := r.LookupAuthorization(t.Context(), "h")
			if class(err) != tc.want || a != (settle.Authorization{}) {
				t.Errorf("LookupAuthorization = %+v, %v; want %s", a, err, tc.want)
			}
			if a, err := r.LookupAuthorization(t.Context(), "h"); err != nil || a.Status != settle.AuthAuthorized {
				t.Errorf("then = %+v, %v", a, err)
			}
		})
	}
}

// Random unknown outcomes in both modes: the truth is in the ledger, and a
// retry on a healthy rail moves the money once.
func TestAuthorizationUnknownOutcomeRate(t *testing.T) {
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
			clk := newClock()
			flaky := authRail(t, clk, st, fake.Options{UnknownOutcomeRate: 1, UnknownOutcomeMode: tc.mode})
			healthy := authRail(t, clk, st, fake.Options{})
			ctx := t.Context()
			if _, err := flaky.Authorize(ctx, payReq("h", 500)); class(err) != "unknown" {
				t.Fatalf("Authorize = %v", err)
			}
			if _, err := healthy.LookupAuthorization(ctx, "h"); (err == nil) != tc.recorded {
				t.Fatalf("LookupAuthorization = %v, want recorded=%v", err, tc.recorded)
			}
			if _, err := healthy.Authorize(ctx, payReq("h", 500)); err != nil {
				t.Fatal(err)
			}
			if _, err := flaky.Capture(ctx, "h", 500); class(err) != "unknown" {
				t.Fatalf("Capture = %v", err)
			}
			if _, err := healthy.Lookup(ctx, "h"); (err == nil) != tc.recorded {
				t.Fatalf("Lookup = %v, want recorded=%v", err, tc.recorded)
			}
			for range 2 {
				if s, err := healthy.Capture(ctx, "h", 500); err != nil || s.Status != settle.StatusSettled {
					t.Fatalf("retried Capture = %+v, %v", s, err)
				}
			}
			if got, want := showLedger(t, healthy), "authorization:captured:500 capture:settled:500"; got != want {
				t.Errorf("ledger %s, want %s", got, want)
			}
			mustCheck(t, healthy)
		})
	}
}

func TestAuthorizationDeclineRateSeeded(t *testing.T) {
	run := func(seed uint64) string {
		r := newRail(t, "card", &fake.Options{Authorizations: true, DeclineRate: 0.3, Rand: fake.SeededRand(seed)})
		var out strings.Builder
		for i := range 400 {
			key := fmt.Sprint("h", i)
			_, err := r.Authorize(t.Context(), payReq(key, 10))
			switch class(err) {
			case "ok":
				// A capture of a hold is never declined at random.
				if _, err := r.Capture(t.Context(), key, 10); err != nil {
					t.Fatalf("Capture = %v", err)
				}
				out.WriteByte('a')
			case "declined":
				out.WriteByte('d')
			default:
				t.Fatal(err)
			}
		}
		mustCheck(t, r)
		return out.String()
	}
	a, b, c := run(1), run(1), run(2)
	if n := strings.Count(a, "d"); n < 80 || n > 160 {
		t.Errorf("%d of 400 declined at rate 0.3", n)
	}
	if a != b {
		t.Error("the same seed gave different declines")
	}
	if a == c {
		t.Error("different seeds gave the same declines")
	}
}

func TestAuthorizationRestart(t *testing.T) {
	st := &memstore.Store{}
	clk := newClock()
	ctx := t.Context()
	old := authRail(t, clk, st, fake.Options{DeclineAbove: 5000})
	dying := authRail(t, clk, st, fake.Options{Fault: fake.FailNext(fake.OpCapture, 1, fake.AfterMove(nil))})
	for _, k := range []string{"held", "captured", "voided", "crashed", "expiring"} {
		if _, err := old.Authorize(ctx, payReq(k, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Authorize(ctx, payReq("declined", 6000)); class(err) != "declined" {
		t.Fatal(err)
	}
	if _, err := old.Capture(ctx, "captured", 400); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Refund(ctx, settle.RefundRequest{RefundID: "rf", Key: "captured", Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Void(ctx, "voided"); err != nil {
		t.Fatal(err)
	}
	// The process dies right after the rail captured: its caller saw only
	// an unknown outcome.
	if _, err := dying.Capture(ctx, "crashed", 1000); class(err) != "unknown" {
		t.Fatal(err)
	}
	clk.Add(ttl)
	if a, err := old.LookupAuthorization(ctx, "expiring"); err != nil || a.Status != settle.AuthExpired {
		t.Fatalf("LookupAuthorization(expiring) = %+v, %v", a, err)
	}
	// The new process's clock is behind: a hold seen expired stays so, the
	// others are good again.
	clk.Add(-ttl)
	before := showLedger(t, old)
	restarted := authRail(t, clk, st, fake.Options{DeclineAbove: 5000})
	if after := showLedger(t, restarted); after != before {
		t.Errorf("ledger after restart:\n%s\nwant\n%s", after, before)
	}
	tests := []struct {
		key  string
		want string
	}{
		{"held", "authorized 1000"},
		{"captured", "captured 400/1000"},
		{"voided", "voided 1000"},
		{"crashed", "captured 1000/1000"},
		{"expiring", "expired 1000"},
		{"declined", "declined amount_too_large"},
		{"never", "unknownkey"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			a, err := restarted.LookupAuthorization(ctx, tc.key)
			if got := showAuthKey(t, a, err); got != tc.want {
				t.Errorf("LookupAuthorization = %s, want %s", got, tc.want)
			}
		})
	}
	if s, err := restarted.Lookup(ctx, "captured"); err != nil || s.Amount != 400 || s.Refunded != 100 {
		t.Errorf("Lookup(captured) = %+v, %v", s, err)
	}
	// Still one use per key and one capture per hold, with one sequence.
	if s, err := restarted.Capture(ctx, "crashed", 1000); err != nil || s.Status != settle.StatusSettled {
		t.Errorf("Capture(crashed) again = %+v, %v", s, err)
	}
	if _, err := restarted.Capture(ctx, "held", 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Settle(ctx, payReq("voided", 1000)); class(err) != "keyreuse" {
		t.Errorf("Settle(voided) = %v", err)
	}
	l, _ := restarted.Ledger(ctx)
	if last := l[len(l)-1]; last.Kind != fake.KindCapture || last.Key != "held" || last.Seq != uint64(len(l)) {
		t.Errorf("last entry %+v of %d", last, len(l))
	}
	mustCheck(t, restarted)
}

// showAuthKey is showAuth without its checks of a hold's expiry, for rails
// whose clock was moved between calls.
func showAuthKey(t *testing.T, a settle.Authorization, err error) string {
	t.Helper()
	var de *settle.DeclineError
	switch {
	case errors.As(err, &de):
		return "declined " + de.Code
	case err != nil:
		return class(err)
	case a.Status == settle.AuthCaptured:
		return fmt.Sprintf("captured %d/%d", a.CapturedMinor, a.Amount)
	}
	return fmt.Sprintf("%s %d", a.Status, a.Amount)
}

func TestAuthorizationStoreLayout(t *testing.T) {
	st := &memstore.Store{}
	r := authRail(t, newClock(), st, fake.Options{})
	if _, err := r.Authorize(t.Context(), payReq("h", 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Capture(t.Context(), "h", 5); err != nil {
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
	if got, want := fmt.Sprint(keys), "[settle/fake/card/a/h settle/fake/card/layout settle/fake/card/p/h settle/fake/card/seq settle/fake/card/u/h]"; got != want {
		t.Errorf("store keys %s, want %s", got, want)
	}
}

func TestAuthorizationStoreFailure(t *testing.T) {
	st := &memstore.Store{}
	r := authRail(t, newClock(), st, fake.Options{})
	if _, err := r.Authorize(t.Context(), payReq("h", 5)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// The rail cannot tell whether its own write happened: fail closed.
	if _, err := r.Authorize(ctx, payReq("h2", 5)); class(err) != "unknown" {
		t.Errorf("Authorize = %v", err)
	}
	if _, err := r.Capture(ctx, "h", 5); class(err) != "unknown" {
		t.Errorf("Capture = %v", err)
	}
	if _, err := r.Void(ctx, "h"); class(err) != "unknown" {
		t.Errorf("Void = %v", err)
	}
	// A lookup that cannot read is unanswered, never "unknown key".
	if _, err := r.LookupAuthorization(ctx, "h"); class(err) != "unavailable" {
		t.Errorf("LookupAuthorization = %v", err)
	}
}

// Latency runs on the default Sleep inside a synctest bubble: a capture
// cancelled before the rail acts moved nothing, one cancelled after moved
// the money, and the caller cannot tell which.
func TestCaptureCancellation(t *testing.T) {
	tests := []struct {
		name     string
		cancelAt time.Duration
		recorded bool
	}{
		{"before the rail acts", 30 * time.Millisecond, false},
		{"after the rail acts", 70 * time.Millisecond, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &memstore.Store{}
				clk := newClock()
				r := authRail(t, clk, st, fake.Options{MinLatency: 100 * time.Millisecond})
				if _, err := r.Authorize(t.Context(), payReq("h", 10)); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				time.AfterFunc(tc.cancelAt, cancel)
				if _, err := r.Capture(ctx, "h", 10); class(err) != "unknown" {
					t.Fatalf("Capture = %v", err)
				}
				_, err := r.Lookup(t.Context(), "h")
				if (err == nil) != tc.recorded {
					t.Errorf("Lookup = %v, want recorded=%v", err, tc.recorded)
				}
				if !tc.recorded && class(err) != "unknownkey" {
					t.Errorf("Lookup = %v, want ErrUnknownKey", err)
				}
			})
		})
	}
}

// Captures and voids of one hold race: exactly one kind wins, every
// capture that succeeds reports the same payment, and the money moves at
// most once.
func TestConcurrentCaptureAndVoid(t *testing.T) {
	for round := range 20 {
		r := authRail(t, newClock(), nil, fake.Options{})
		ctx := t.Context()
		if _, err := r.Authorize(ctx, payReq("h", 1000)); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		results := make(map[string]int)
		var captured []settle.Settlement
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				var res string
				if i%2 == 0 {
					s, err := r.Capture(ctx, "h", 700)
					res = "capture " + class(err)
					if err == nil {
						mu.Lock()
						captured = append(captured, s)
						mu.Unlock()
					}
				} else {
					_, err := r.Void(ctx, "h")
					res = "void " + class(err)
				}
				mu.Lock()
				results[res]++
				mu.Unlock()
			})
		}
		wg.Wait()
		a, err := r.LookupAuthorization(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]int
		switch a.Status {
		case settle.AuthCaptured:
			want = map[string]int{"capture ok": 8, "void closed": 8}
		case settle.AuthVoided:
			want = map[string]int{"capture closed": 8, "void ok": 8}
		default:
			t.Fatalf("round %d: status %s", round, a.Status)
		}
		if fmt.Sprint(results) != fmt.Sprint(want) {
			t.Errorf("round %d: %v, want %v", round, results, want)
		}
		for _, s := range captured {
			if s != captured[0] {
				t.Errorf("round %d: captures %+v and %+v", round, s, captured[0])
			}
		}
		mustCheck(t, r)
	}
}

func TestAuthorizationChaos(t *testing.T) {
	// Every fault at once, from many goroutines; then a healthy rail
	// resolves every hold. The ledger invariants hold throughout, and no
	// hold is captured for more than it held.
	st := &memstore.Store{}
	clk := newClock()
	chaos := authRail(t, clk, st, fake.Options{
		Rand:        fake.SeededRand(5),
		DeclineRate: 0.1, UnavailableRate: 0.1, UnknownOutcomeRate: 0.3,
	})
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 120 {
		wg.Go(func() {
			key := fmt.Sprint("h", i%40)
			_, _ = chaos.Authorize(ctx, payReq(key, 100))
			if i%3 == 0 {
				_, _ = chaos.Void(ctx, key)
			} else {
				_, _ = chaos.Capture(ctx, key, 60)
			}
			_, _ = chaos.LookupAuthorization(ctx, key)
		})
	}
	wg.Wait()
	mustCheck(t, chaos)
	healthy := authRail(t, clk, st, fake.Options{})
	for i := range 40 {
		key := fmt.Sprint("h", i)
		a, err := healthy.Authorize(ctx, payReq(key, 100))
		if c := class(err); c == "declined" {
			continue
		} else if c != "ok" {
			t.Fatalf("%s: %v", key, err)
		}
		s, err := healthy.Capture(ctx, key, 60)
		switch a.Status {
		case settle.AuthAuthorized, settle.AuthCaptured:
			if err != nil || s.Amount != 60 {
				t.Errorf("%s: capture %+v, %v", key, s, err)
			}
		case settle.AuthVoided:
			if class(err) != "closed" {
				t.Errorf("%s: capture of a voided hold = %v", key, err)
			}
		default:
			t.Errorf("%s: status %s", key, a.Status)
		}
	}
	mustCheck(t, healthy)
}

func TestCheckLedgerDetectsAuthorizationDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx store.Txn) error
	}{
		{"capture beyond the hold", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/p/h"), []byte(`{"seq":2,"key":"h","payee":"acct:seller.example","amount":2000,"currency":"USD","status":"settled","capture":true}`))
		}},
		{"captured without a capture", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/a/h"), []byte(`{"seq":1,"key":"h","payee":"acct:seller.example","amount":1000,"currency":"USD","status":"captured","capturedMinor":5}`))
		}},
		{"capture without a hold", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/p/x"), []byte(`{"seq":2,"key":"x","amount":1,"status":"settled","capture":true}`))
		}},
		{"key settled and authorized", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/p/h"), []byte(`{"seq":2,"key":"h","payee":"acct:seller.example","amount":1,"currency":"USD","status":"settled"}`))
		}},
		{"voided without a void", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/a/h"), []byte(`{"seq":1,"key":"h","payee":"acct:seller.example","amount":1000,"currency":"USD","status":"voided"}`))
		}},
		{"invalid status", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/a/h"), []byte(`{"seq":1,"key":"h","amount":1000,"status":"held"}`))
		}},
		{"duplicate seq", func(tx store.Txn) error {
			return tx.Set([]byte("settle/fake/card/a/h2"), []byte(`{"seq":1,"key":"h2","amount":1,"status":"authorized"}`))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &memstore.Store{}
			r := authRail(t, newClock(), st, fake.Options{})
			if _, err := r.Authorize(t.Context(), payReq("h", 1000)); err != nil {
				t.Fatal(err)
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

func TestSandboxAuthorizations(t *testing.T) {
	rails, err := fake.NewSandbox(&fake.SandboxOptions{NoLatency: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rails {
		t.Run(r.Name(), func(t *testing.T) {
			a, ok := settle.AuthorizerOf(r)
			if ok != (r.Name() == fake.SandboxCard) {
				t.Fatalf("AuthorizerOf = %v", ok)
			}
			if !ok {
				return
			}
			ctx := t.Context()
			h, err := a.Authorize(ctx, payReq("int_1", 100))
			if err != nil || h.Status != settle.AuthAuthorized || !strings.HasPrefix(h.Reference, "ch_") {
				t.Errorf("Authorize = %+v, %v", h, err)
			}
			if h.ExpiresAt.Sub(h.AuthorizedAt) != fake.DefaultAuthorizationTTL {
				t.Errorf("hold of %v", h.ExpiresAt.Sub(h.AuthorizedAt))
			}
			if s, err := a.Capture(ctx, "int_1", 100); err != nil || s.Status != settle.StatusSettled {
				t.Errorf("Capture = %+v, %v", s, err)
			}
			req := payReq("int_2", 100)
			req.Payee = fake.SandboxDeclinePayee
			var de *settle.DeclineError
			if _, err := a.Authorize(ctx, req); !errors.As(err, &de) || de.Code != "do_not_honor" {
				t.Errorf("Authorize to the decline payee = %v", err)
			}
		})
	}
}

// Settle and Authorize race for one key: exactly one of them gets it, and
// the other is refused with ErrKeyReuse, so a key never both pays and holds.
func TestConcurrentSettleAndAuthorize(t *testing.T) {
	for round := range 20 {
		r := authRail(t, newClock(), nil, fake.Options{})
		ctx := t.Context()
		var mu sync.Mutex
		results := make(map[string]int)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				var res string
				if i%2 == 0 {
					_, err := r.Settle(ctx, payReq("k", 100))
					res = "settle " + class(err)
				} else {
					_, err := r.Authorize(ctx, payReq("k", 100))
					res = "authorize " + class(err)
				}
				mu.Lock()
				results[res]++
				mu.Unlock()
			})
		}
		wg.Wait()
		got := fmt.Sprint(results)
		if got != "map[authorize keyreuse:4 settle ok:4]" && got != "map[authorize ok:4 settle keyreuse:4]" {
			t.Errorf("round %d: %s", round, got)
		}
		mustCheck(t, r)
	}
}
