package settle_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/settle"
)

func TestFactsValidate(t *testing.T) {
	tests := []struct {
		name  string
		facts settle.Facts
		ok    bool
	}{
		{"reversible instant", settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}, true},
		{"reversible deferred", settle.Facts{Reversibility: settle.Reversible, Finality: settle.Deferred}, true},
		{"irreversible instant", settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Instant}, true},
		{"irreversible deferred", settle.Facts{Reversibility: settle.Irreversible, Finality: settle.Deferred}, true},
		{"zero", settle.Facts{}, false},
		{"no finality", settle.Facts{Reversibility: settle.Reversible}, false},
		{"no reversibility", settle.Facts{Finality: settle.Instant}, false},
		{"wrong case", settle.Facts{Reversibility: "Reversible", Finality: settle.Instant}, false},
		{"unknown finality", settle.Facts{Reversibility: settle.Reversible, Finality: "eventual"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.facts.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestStatusValidate(t *testing.T) {
	for _, s := range []settle.Status{settle.StatusSettled, settle.StatusPending, settle.StatusDeclined} {
		if err := s.Validate(); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []settle.Status{"", "failed", "SETTLED"} {
		if err := s.Validate(); err == nil {
			t.Errorf("%q: no error", s)
		}
	}
	// The zero Settlement a failed call returns never reads as settled.
	if err := (settle.Settlement{}).Status.Validate(); err == nil {
		t.Error("zero Settlement has a valid status")
	}
}

func validRequest() settle.SettleRequest {
	return settle.SettleRequest{
		Key:      "int_01JD5Z8Q7K6W2V3N4M5P6R7S8T",
		Payee:    "acct:seller.example",
		Amount:   1250,
		Currency: "USD",
		Metadata: map[string]string{"purpose": "invoice 1182"},
	}
}

func TestSettleRequestValidate(t *testing.T) {
	many := make(map[string]string)
	for i := range 51 {
		many[fmt.Sprint("k", i)] = "v"
	}
	tests := []struct {
		name string
		edit func(*settle.SettleRequest)
		ok   bool
	}{
		{"valid", func(*settle.SettleRequest) {}, true},
		{"no metadata", func(r *settle.SettleRequest) { r.Metadata = nil }, true},
		{"caip19 currency", func(r *settle.SettleRequest) {
			r.Currency = "eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
		}, true},
		{"unicode payee", func(r *settle.SettleRequest) { r.Payee = "acct:café.example" }, true},
		{"max amount", func(r *settle.SettleRequest) { r.Amount = settle.MaxAmount }, true},
		{"key of 255", func(r *settle.SettleRequest) { r.Key = strings.Repeat("k", 255) }, true},
		{"empty key", func(r *settle.SettleRequest) { r.Key = "" }, false},
		{"key of 256", func(r *settle.SettleRequest) { r.Key = strings.Repeat("k", 256) }, false},
		{"key with space", func(r *settle.SettleRequest) { r.Key = "int 1" }, false},
		{"key with non-ASCII", func(r *settle.SettleRequest) { r.Key = "int_é" }, false},
		{"empty payee", func(r *settle.SettleRequest) { r.Payee = "" }, false},
		{"payee with newline", func(r *settle.SettleRequest) { r.Payee = "acct:a\nb" }, false},
		{"payee invalid UTF-8", func(r *settle.SettleRequest) { r.Payee = "acct:\xff" }, false},
		{"payee too long", func(r *settle.SettleRequest) { r.Payee = strings.Repeat("p", 513) }, false},
		{"zero amount", func(r *settle.SettleRequest) { r.Amount = 0 }, false},
		{"negative amount", func(r *settle.SettleRequest) { r.Amount = -1 }, false},
		{"amount over max", func(r *settle.SettleRequest) { r.Amount = settle.MaxAmount + 1 }, false},
		{"empty currency", func(r *settle.SettleRequest) { r.Currency = "" }, false},
		{"currency with space", func(r *settle.SettleRequest) { r.Currency = "US D" }, false},
		{"51 metadata entries", func(r *settle.SettleRequest) { r.Metadata = many }, false},
		{"empty metadata key", func(r *settle.SettleRequest) { r.Metadata = map[string]string{"": "v"} }, false},
		{"long metadata key", func(r *settle.SettleRequest) { r.Metadata = map[string]string{strings.Repeat("k", 41): "v"} }, false},
		{"long metadata value", func(r *settle.SettleRequest) { r.Metadata = map[string]string{"k": strings.Repeat("v", 501)} }, false},
		{"invalid metadata value", func(r *settle.SettleRequest) { r.Metadata = map[string]string{"k": "\xff"} }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := validRequest()
			tc.edit(&r)
			err := r.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, settle.ErrInvalidRequest) {
				t.Errorf("error %v does not match ErrInvalidRequest", err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "settle: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestRefundRequestValidate(t *testing.T) {
	valid := settle.RefundRequest{RefundID: "rf_1", Key: "int_1", Amount: 100}
	tests := []struct {
		name string
		edit func(*settle.RefundRequest)
		ok   bool
	}{
		{"valid", func(*settle.RefundRequest) {}, true},
		{"with metadata", func(r *settle.RefundRequest) { r.Metadata = map[string]string{"reason": "returned goods"} }, true},
		{"empty refund id", func(r *settle.RefundRequest) { r.RefundID = "" }, false},
		{"refund id with tab", func(r *settle.RefundRequest) { r.RefundID = "rf\t1" }, false},
		{"empty key", func(r *settle.RefundRequest) { r.Key = "" }, false},
		{"zero amount", func(r *settle.RefundRequest) { r.Amount = 0 }, false},
		{"amount over max", func(r *settle.RefundRequest) { r.Amount = settle.MaxAmount + 1 }, false},
		{"bad metadata", func(r *settle.RefundRequest) { r.Metadata = map[string]string{"a b": "v"} }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := valid
			tc.edit(&r)
			err := r.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, settle.ErrInvalidRequest) {
				t.Errorf("error %v does not match ErrInvalidRequest", err)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	base := validRequest()
	tests := []struct {
		name string
		edit func(*settle.SettleRequest)
		want bool
	}{
		{"identical", func(*settle.SettleRequest) {}, true},
		{"other metadata", func(r *settle.SettleRequest) { r.Metadata = map[string]string{"x": "y"} }, true},
		{"other key", func(r *settle.SettleRequest) { r.Key += "x" }, false},
		{"other payee", func(r *settle.SettleRequest) { r.Payee += "x" }, false},
		{"other amount", func(r *settle.SettleRequest) { r.Amount++ }, false},
		{"other currency", func(r *settle.SettleRequest) { r.Currency = "EUR" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := validRequest()
			tc.edit(&o)
			if got := base.Matches(o); got != tc.want {
				t.Errorf("Matches = %v, want %v", got, tc.want)
			}
		})
	}

	rb := settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 5}
	for _, tc := range []struct {
		o    settle.RefundRequest
		want bool
	}{
		{settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 5, Metadata: map[string]string{"a": "b"}}, true},
		{settle.RefundRequest{RefundID: "rf", Key: "k", Amount: 6}, false},
		{settle.RefundRequest{RefundID: "rf", Key: "j", Amount: 5}, false},
		{settle.RefundRequest{RefundID: "rg", Key: "k", Amount: 5}, false},
	} {
		if got := rb.Matches(tc.o); got != tc.want {
			t.Errorf("%+v.Matches(%+v) = %v, want %v", rb, tc.o, got, tc.want)
		}
	}
}

func TestValidateName(t *testing.T) {
	for _, name := range []string{"sandbox-card", "a", "card2", "x.y_z", strings.Repeat("a", 64)} {
		if err := settle.ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	for _, name := range []string{"", "-card", "Card", "sandbox card", "a/b", "é", strings.Repeat("a", 65)} {
		if err := settle.ValidateName(name); err == nil {
			t.Errorf("ValidateName(%q) = nil", name)
		}
	}
}

func TestDeclineError(t *testing.T) {
	var err error = fmt.Errorf("rail x: %w", &settle.DeclineError{Code: "insufficient_funds", Message: "not enough"})
	if !errors.Is(err, settle.ErrDeclined) {
		t.Error("DeclineError does not match ErrDeclined")
	}
	for _, other := range []error{settle.ErrUnknownOutcome, settle.ErrUnavailable, settle.ErrKeyReuse} {
		if errors.Is(err, other) {
			t.Errorf("DeclineError matches %v", other)
		}
	}
	var de *settle.DeclineError
	if !errors.As(err, &de) || de.Code != "insufficient_funds" {
		t.Fatalf("errors.As: %v %+v", err, de)
	}
	for _, tc := range []struct {
		e    settle.DeclineError
		want string
	}{
		{settle.DeclineError{Code: "c", Message: "m"}, "settle: declined (c): m"},
		{settle.DeclineError{Code: "c"}, "settle: declined (c)"},
		{settle.DeclineError{}, "settle: declined"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// The sentinels are distinct: no outcome error matches another.
func TestSentinelsDistinct(t *testing.T) {
	all := []error{
		settle.ErrDeclined, settle.ErrUnknownOutcome, settle.ErrUnavailable, settle.ErrInvalidRequest,
		settle.ErrKeyReuse, settle.ErrUnknownKey, settle.ErrIrreversible, settle.ErrRefundExceeds,
		settle.ErrNotSettled, settle.ErrUnknownRail, settle.ErrDuplicateRail, settle.ErrAuthorizationClosed,
	}
	for i, a := range all {
		if !strings.HasPrefix(a.Error(), "settle: ") {
			t.Errorf("%q lacks the package prefix", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v matches %v", a, b)
			}
		}
	}
}

// stubRail is the least a Rail can be, for registry tests.
type stubRail struct {
	name  string
	facts settle.Facts
}

func (s stubRail) Name() string        { return s.name }
func (s stubRail) Facts() settle.Facts { return s.facts }
func (stubRail) Settle(context.Context, settle.SettleRequest) (settle.Settlement, error) {
	return settle.Settlement{}, settle.ErrUnavailable
}
func (stubRail) Refund(context.Context, settle.RefundRequest) (settle.RefundResult, error) {
	return settle.RefundResult{}, settle.ErrUnavailable
}
func (stubRail) Lookup(context.Context, string) (settle.Settlement, error) {
	return settle.Settlement{}, settle.ErrUnavailable
}

var instant = settle.Facts{Reversibility: settle.Reversible, Finality: settle.Instant}

func TestRegistry(t *testing.T) {
	var reg settle.Registry
	if got := reg.Names(); len(got) != 0 {
		t.Fatalf("empty registry has names %v", got)
	}
	for _, name := range []string{"zeta", "alpha", "mid"} {
		if err := reg.Register(stubRail{name, instant}); err != nil {
			t.Fatalf("Register(%s): %v", name, err)
		}
	}
	if got, want := reg.Names(), []string{"alpha", "mid", "zeta"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	r, err := reg.Get("mid")
	if err != nil || r.Name() != "mid" {
		t.Errorf("Get(mid) = %v, %v", r, err)
	}
	if _, err := reg.Get("nope"); !errors.Is(err, settle.ErrUnknownRail) {
		t.Errorf("Get(nope) = %v, want ErrUnknownRail", err)
	}

	bad := []struct {
		name string
		rail settle.Rail
		is   error
	}{
		{"duplicate", stubRail{"alpha", instant}, settle.ErrDuplicateRail},
		{"nil", nil, nil},
		{"bad name", stubRail{"Bad Name", instant}, nil},
		{"bad facts", stubRail{"ok", settle.Facts{}}, nil},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := reg.Register(tc.rail)
			if err == nil {
				t.Fatal("Register succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Register = %v, want %v", err, tc.is)
			}
		})
	}
	if got := len(reg.Names()); got != 3 {
		t.Errorf("failed registrations changed the registry: %d names", got)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	var reg settle.Registry
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Go(func() {
			// Two goroutines race for each name; exactly one wins.
			errs <- reg.Register(stubRail{fmt.Sprintf("rail-%d", i/2), instant})
		})
		wg.Go(func() {
			_, _ = reg.Get(fmt.Sprintf("rail-%d", i/2))
			_ = reg.Names()
		})
	}
	wg.Wait()
	close(errs)
	var dups int
	for err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, settle.ErrDuplicateRail):
			dups++
		default:
			t.Error(err)
		}
	}
	if dups != 10 || len(reg.Names()) != 10 {
		t.Errorf("dups = %d, names = %d; want 10, 10", dups, len(reg.Names()))
	}
}

func FuzzSettleRequestValidate(f *testing.F) {
	f.Add("int_01JD5Z8Q7K6W2V3N4M5P6R7S8T", "acct:seller.example", int64(1250), "USD", "purpose", "invoice 1182")
	f.Add("", "", int64(0), "", "", "")
	f.Add("k", "p\x00", int64(-1), "U SD", "a b", "\xff")
	f.Fuzz(func(t *testing.T, key, payee string, amount int64, currency, mk, mv string) {
		r := settle.SettleRequest{Key: key, Payee: payee, Amount: amount, Currency: currency}
		if mk != "" {
			r.Metadata = map[string]string{mk: mv}
		}
		err := r.Validate()
		if err != nil {
			if !errors.Is(err, settle.ErrInvalidRequest) {
				t.Fatalf("error %v does not match ErrInvalidRequest", err)
			}
			return
		}
		// Whatever passes is safe to store under a key and to log.
		if key == "" || len(key) > 255 || strings.ContainsFunc(key, func(c rune) bool { return c <= ' ' || c > '~' }) {
			t.Fatalf("accepted key %q", key)
		}
		if amount < 1 || amount > settle.MaxAmount {
			t.Fatalf("accepted amount %d", amount)
		}
		if payee == "" || strings.ContainsAny(payee, "\x00\n\r\t\x7f") {
			t.Fatalf("accepted payee %q", payee)
		}
		if settle.ValidateKey(key) != nil {
			t.Fatalf("ValidateKey rejects accepted key %q", key)
		}
	})
}
