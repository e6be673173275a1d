package gate

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	agentA = strings.Repeat("a1", 32)
	agentB = strings.Repeat("b2", 32)
)

// base returns an input that is allowed, with room on every limit: amount
// 1000 against a per-tx cap of 5000, a confirmation threshold of 10000 and
// an irreversible threshold of 2000.
func base() Input {
	return Input{
		Agent:    agentA,
		Payee:    "acct:shop.example.com",
		Amount:   1000,
		Currency: "USD",
		Terms: Terms{
			Rail: "card", Reversibility: Reversible, Finality: FinalityInstant,
			Credential: CredentialAPIKey, CapitalSource: CapitalPayer, Presence: PresenceDelegated,
		},
		Credential: CredentialAPIKey,
		Mandate: Mandate{
			ID: "mdt_1", Agent: agentA,
			Payees:   []string{"*.example.com", "acct:exact.example"},
			Currency: "USD", PerTxCapMinor: 5000, PerPeriodCapMinor: 20000, Period: Day,
			Rails:             []string{"card", "chain", "bank"},
			ConfirmAboveMinor: 10000, IrreversibleConfirmAboveMinor: 2000,
			Velocity: Velocity{Count: 3, Seconds: 60},
		},
		Counters: Counters{PeriodMinor: 4000, VelocityCount: 1},
		Policy: Policy{
			Rails: map[string]RailFacts{
				"card":  {Reversibility: Reversible, Finality: FinalityInstant},
				"chain": {Reversibility: Irreversible, Finality: FinalityInstant, CapitalSources: []CapitalSource{CapitalPayer}},
				"bank":  {Reversibility: Reversible, Finality: FinalityDeferred, Presences: []Presence{PresenceDelegated}},
				"other": {Reversibility: Reversible, Finality: FinalityInstant},
			},
			DenyPayees: []string{"acct:bad.example.com", "*.evil.example.com"},
			DenyAgents: []string{agentB},
		},
	}
}

func codes(d Decision) []string {
	out := []string{}
	for _, r := range d.Reasons {
		out = append(out, r.Code)
	}
	return out
}

func TestDecideAllow(t *testing.T) {
	d := Decide(base())
	if d.Outcome != Allow || len(d.Reasons) != 0 || d.Reasons == nil || d.MandateID != "mdt_1" || d.TripBreaker {
		t.Errorf("decision = %+v", d)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"outcome":"allow","reasons":[],"mandateId":"mdt_1"}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
}

func TestDecideSingleRules(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Input)
		want Outcome
		code string
	}{
		{"agent mismatch", func(in *Input) { in.Agent = agentB; in.Policy.DenyAgents = nil }, Deny, CodeAgentMismatch},
		{"currency", func(in *Input) { in.Currency = "EUR" }, Deny, CodeCurrencyNotAllowed},
		{"currency case", func(in *Input) { in.Currency = "usd" }, Deny, CodeCurrencyNotAllowed},
		{"payee", func(in *Input) { in.Payee = "acct:shop.example.org" }, Deny, CodePayeeNotAllowed},
		{"payee bare domain", func(in *Input) { in.Payee = "acct:example.com" }, Deny, CodePayeeNotAllowed},
		{"payee glued", func(in *Input) { in.Payee = "acct:badexample.com" }, Deny, CodePayeeNotAllowed},
		{"payee case", func(in *Input) { in.Payee = "acct:Exact.example" }, Deny, CodePayeeNotAllowed},
		{"rail not in mandate", func(in *Input) { in.Terms.Rail = "other" }, Deny, CodeRailNotAllowed},
		{"rail unknown", func(in *Input) { in.Mandate.Rails = append(in.Mandate.Rails, "ghost"); in.Terms.Rail = "ghost" }, Deny, CodeRailUnknown},
		{"reversibility", func(in *Input) { in.Terms.Reversibility = Irreversible }, Deny, CodeTermsMismatch},
		{"finality", func(in *Input) { in.Terms.Finality = FinalityDeferred }, Deny, CodeTermsMismatch},
		{"capital source", func(in *Input) {
			in.Terms.Rail, in.Terms.Reversibility, in.Terms.CapitalSource = "chain", Irreversible, CapitalCredit
			in.Amount = 100
		}, Deny, CodeTermsMismatch},
		{"presence", func(in *Input) {
			in.Terms.Rail, in.Terms.Finality, in.Terms.Presence = "bank", FinalityDeferred, PresencePresent
		}, Deny, CodeTermsMismatch},
		{"credential", func(in *Input) { in.Credential = CredentialDPoP }, Deny, CodeTermsMismatch},
		{"per-tx cap", func(in *Input) { in.Amount = 5001; in.Counters.PeriodMinor = 0 }, Deny, CodePerTxCap},
		{"period cap", func(in *Input) { in.Counters.PeriodMinor = 19001 }, Deny, CodePeriodCap},
		{"velocity", func(in *Input) { in.Counters.VelocityCount = 3 }, Deny, CodeVelocity},
		{"deny payee exact", func(in *Input) { in.Payee = "acct:bad.example.com" }, Deny, CodeDenyListed},
		{"deny payee case", func(in *Input) { in.Payee = "acct:BAD.example.com" }, Deny, CodeDenyListed},
		{"deny payee pattern", func(in *Input) { in.Payee = "acct:x.evil.example.com" }, Deny, CodeDenyListed},
		{"deny payee pattern case", func(in *Input) { in.Payee = "acct:X.EVIL.example.com" }, Deny, CodeDenyListed},
		{"deny agent", func(in *Input) { in.Mandate.Agent = agentB; in.Agent = agentB }, Deny, CodeDenyListed},
		{"deny agent case", func(in *Input) {
			in.Policy.DenyAgents = []string{strings.ToUpper(agentA)}
		}, Deny, CodeDenyListed},
		{"confirm threshold", func(in *Input) { in.Mandate.ConfirmAboveMinor = 1000 }, Confirm, CodeConfirmThreshold},
		{"irreversible threshold", func(in *Input) {
			in.Terms.Rail, in.Terms.Reversibility = "chain", Irreversible
			in.Amount = 2000
		}, Confirm, CodeIrreversibleThreshold},
		{"breaker open", func(in *Input) { in.BreakerOpen = true }, Confirm, CodeBreakerOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(&in)
			d := Decide(in)
			if d.Outcome != tt.want {
				t.Fatalf("outcome = %s (%v), want %s", d.Outcome, d.Reasons, tt.want)
			}
			if diff := cmp.Diff([]string{tt.code}, codes(d)); diff != "" {
				t.Fatalf("codes (-want +got):\n%s\n%v", diff, d.Reasons)
			}
			if d.Reasons[0].Message == "" {
				t.Error("no message")
			}
			if d.MandateID != "mdt_1" {
				t.Errorf("mandate id %q", d.MandateID)
			}
		})
	}
}

func TestDecideAllReasons(t *testing.T) {
	in := base()
	in.Agent = agentB // mismatch, and deny-listed
	in.Currency = "EUR"
	in.Payee = "acct:x.evil.example.org" // not allowed; not deny-listed (.org)
	in.Policy.DenyPayees = append(in.Policy.DenyPayees, "*.example.org")
	in.Terms.Rail = "other"              // known, not in the mandate
	in.Terms.Finality = FinalityDeferred // the rail is instant
	in.Terms.Credential = CredentialDPoP // the request carried an api key
	in.Amount = 6000                     // above 5000
	in.Counters.PeriodMinor = 15000      // 21000 > 20000
	in.Counters.VelocityCount = 5        // limit 3
	in.BreakerOpen = true                // ignored: deny wins
	in.Mandate.ConfirmAboveMinor = 1     // ignored: deny wins
	in.Mandate.IrreversibleConfirmAboveMinor = 0
	d := Decide(in)
	want := []string{CodeAgentMismatch, CodeCurrencyNotAllowed, CodePayeeNotAllowed, CodeRailNotAllowed,
		CodeTermsMismatch, CodePerTxCap, CodePeriodCap, CodeVelocity, CodeDenyListed}
	if d.Outcome != Deny {
		t.Fatalf("outcome %s", d.Outcome)
	}
	if diff := cmp.Diff(want, codes(d)); diff != "" {
		t.Fatalf("codes (-want +got):\n%s", diff)
	}
	msg := func(code string) string {
		for _, r := range d.Reasons {
			if r.Code == code {
				return r.Message
			}
		}
		return ""
	}
	for _, s := range []string{"finality is deferred", "credential is dpop"} {
		if !strings.Contains(msg(CodeTermsMismatch), s) {
			t.Errorf("terms message %q lacks %q", msg(CodeTermsMismatch), s)
		}
	}
	if m := msg(CodeDenyListed); !strings.Contains(m, "the payee and the agent") {
		t.Errorf("deny message %q", m)
	}
	// The order is stable: deciding again gives the same reasons.
	if diff := cmp.Diff(d, Decide(in)); diff != "" {
		t.Errorf("not deterministic:\n%s", diff)
	}
}

func TestDecideAllConfirmReasons(t *testing.T) {
	in := base()
	in.Terms.Rail, in.Terms.Reversibility = "chain", Irreversible
	in.Mandate.ConfirmAboveMinor = 1000
	in.Mandate.IrreversibleConfirmAboveMinor = 1000
	in.BreakerOpen = true
	d := Decide(in)
	want := []string{CodeConfirmThreshold, CodeIrreversibleThreshold, CodeBreakerOpen}
	if d.Outcome != Confirm || !cmp.Equal(want, codes(d)) {
		t.Fatalf("decision %s %v, want confirm %v", d.Outcome, codes(d), want)
	}
	if d.TripBreaker {
		t.Error("a confirm trips the breaker")
	}
}

func TestDecideBoundaries(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Input)
		want []string
	}{
		{"per-tx cap reached", func(in *Input) { in.Amount = 5000; in.Counters.PeriodMinor = 0 }, nil},
		{"per-tx cap passed", func(in *Input) { in.Amount = 5001; in.Counters.PeriodMinor = 0 }, []string{CodePerTxCap}},
		{"period cap reached", func(in *Input) { in.Counters.PeriodMinor = 19000 }, nil},
		{"period cap passed", func(in *Input) { in.Counters.PeriodMinor = 19001 }, []string{CodePeriodCap}},
		{"period cap already over", func(in *Input) { in.Counters.PeriodMinor = 30000 }, []string{CodePeriodCap}},
		{"period sum overflows", func(in *Input) {
			in.Counters.PeriodMinor = math.MaxInt64 - 10
			in.Mandate.PerPeriodCapMinor = MaxMinor
		}, []string{CodePeriodCap}},
		{"largest values", func(in *Input) {
			in.Amount, in.Mandate.PerTxCapMinor, in.Mandate.PerPeriodCapMinor = MaxMinor, MaxMinor, MaxMinor
			in.Mandate.ConfirmAboveMinor = MaxMinor
			in.Counters.PeriodMinor = 0
		}, []string{CodeConfirmThreshold}},
		{"velocity one left", func(in *Input) { in.Counters.VelocityCount = 2 }, nil},
		{"velocity used up", func(in *Input) { in.Counters.VelocityCount = 3 }, []string{CodeVelocity}},
		{"no velocity limit", func(in *Input) { in.Mandate.Velocity = Velocity{}; in.Counters.VelocityCount = 1 << 40 }, nil},
		{"confirm threshold equal", func(in *Input) { in.Mandate.ConfirmAboveMinor = 1000 }, []string{CodeConfirmThreshold}},
		{"confirm threshold one above", func(in *Input) { in.Mandate.ConfirmAboveMinor = 1001 }, nil},
		{"confirm threshold zero", func(in *Input) { in.Mandate.ConfirmAboveMinor = 0; in.Amount = 1 }, []string{CodeConfirmThreshold}},
		{"irreversible equal", func(in *Input) {
			in.Terms.Rail, in.Terms.Reversibility, in.Amount = "chain", Irreversible, 2000
		}, []string{CodeIrreversibleThreshold}},
		{"irreversible one below", func(in *Input) {
			in.Terms.Rail, in.Terms.Reversibility, in.Amount = "chain", Irreversible, 1999
		}, nil},
		{"reversible over the irreversible threshold", func(in *Input) { in.Amount = 4000 }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			tt.edit(&in)
			d := Decide(in)
			got := codes(d)
			want := tt.want
			if want == nil {
				want = []string{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("codes (-want +got):\n%s\n%v", diff, d.Reasons)
			}
		})
	}
}

func TestDecideTerms(t *testing.T) {
	t.Run("no credential known", func(t *testing.T) {
		in := base()
		in.Credential = ""
		in.Terms.Credential = CredentialDPoP
		if d := Decide(in); d.Outcome != Allow {
			t.Errorf("%s %v", d.Outcome, d.Reasons)
		}
	})
	t.Run("unknown rail skips the facts", func(t *testing.T) {
		in := base()
		in.Terms.Rail = "ghost"
		in.Terms.Reversibility = Irreversible
		d := Decide(in)
		if diff := cmp.Diff([]string{CodeRailNotAllowed, CodeRailUnknown}, codes(d)); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("accepted sets", func(t *testing.T) {
		in := base()
		in.Terms.Rail, in.Terms.Finality, in.Terms.Presence, in.Terms.CapitalSource = "bank", FinalityDeferred, PresenceDelegated, CapitalEscrow
		if d := Decide(in); d.Outcome != Allow {
			t.Errorf("%s %v", d.Outcome, d.Reasons)
		}
	})
	t.Run("several mismatches, one reason", func(t *testing.T) {
		in := base()
		in.Terms.Reversibility, in.Terms.Finality = Irreversible, FinalityDeferred
		d := Decide(in)
		if diff := cmp.Diff([]string{CodeTermsMismatch}, codes(d)); diff != "" {
			t.Fatal(diff)
		}
		if m := d.Reasons[0].Message; !strings.Contains(m, "reversibility") || !strings.Contains(m, "finality") {
			t.Errorf("message %q", m)
		}
	})
}

func TestDecideInputInvalid(t *testing.T) {
	for name, edit := range map[string]func(*Input){
		"zero amount":         func(in *Input) { in.Amount = 0 },
		"negative amount":     func(in *Input) { in.Amount = -1 },
		"amount 2^53":         func(in *Input) { in.Amount = MaxMinor + 1 },
		"no agent":            func(in *Input) { in.Agent = "" },
		"no currency":         func(in *Input) { in.Currency = "" },
		"bad payee":           func(in *Input) { in.Payee = "shop" },
		"no rail":             func(in *Input) { in.Terms.Rail = "" },
		"bad reversibility":   func(in *Input) { in.Terms.Reversibility = "" },
		"bad finality":        func(in *Input) { in.Terms.Finality = "x" },
		"bad credential":      func(in *Input) { in.Terms.Credential = "x" },
		"bad capital":         func(in *Input) { in.Terms.CapitalSource = "x" },
		"bad presence":        func(in *Input) { in.Terms.Presence = "x" },
		"bad actual cred":     func(in *Input) { in.Credential = "x" },
		"no mandate id":       func(in *Input) { in.Mandate.ID = "" },
		"no mandate agent":    func(in *Input) { in.Mandate.Agent = "" },
		"no payees":           func(in *Input) { in.Mandate.Payees = nil },
		"no mandate currency": func(in *Input) { in.Mandate.Currency = "" },
		"zero tx cap":         func(in *Input) { in.Mandate.PerTxCapMinor = 0 },
		"zero period cap":     func(in *Input) { in.Mandate.PerPeriodCapMinor = 0 },
		"huge period cap":     func(in *Input) { in.Mandate.PerPeriodCapMinor = math.MaxInt64 },
		"bad period":          func(in *Input) { in.Mandate.Period = "year" },
		"no rails":            func(in *Input) { in.Mandate.Rails = nil },
		"negative confirm":    func(in *Input) { in.Mandate.ConfirmAboveMinor = -1 },
		"negative irrev":      func(in *Input) { in.Mandate.IrreversibleConfirmAboveMinor = -1 },
		"half velocity":       func(in *Input) { in.Mandate.Velocity = Velocity{Count: 1} },
		"long velocity":       func(in *Input) { in.Mandate.Velocity = Velocity{Count: 1, Seconds: MaxVelocitySeconds + 1} },
		"negative counter":    func(in *Input) { in.Counters.PeriodMinor = -1 },
		"negative denials":    func(in *Input) { in.Counters.ConsecutiveDenials = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			in := base()
			edit(&in)
			d := Decide(in)
			if d.Outcome != Deny || !cmp.Equal([]string{CodeInputInvalid}, codes(d)) {
				t.Fatalf("decision %s %v", d.Outcome, d.Reasons)
			}
		})
	}
	if d := Decide(Input{}); d.Outcome != Deny || d.Reasons[0].Code != CodeInputInvalid {
		t.Errorf("zero Input: %+v", d)
	}
}

func TestDecideTripBreaker(t *testing.T) {
	deny := func(in *Input) { in.Currency = "EUR" }
	tests := []struct {
		name   string
		after  int64
		prior  int64
		open   bool
		edit   func(*Input)
		tripps bool
	}{
		{"default, 3 before", 0, 3, false, deny, false},
		{"default, 4 before", 0, 4, false, deny, true},
		{"default, 9 before", 0, 9, false, deny, true},
		{"already open", 0, 4, true, deny, false},
		{"after 1", 1, 0, false, deny, true},
		{"never", -1, 100, false, deny, false},
		{"allow never trips", 1, 100, false, func(*Input) {}, false},
		{"invalid input counts", 1, 0, false, func(in *Input) { in.Amount = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			in.Policy.BreakerAfter = tt.after
			in.Counters.ConsecutiveDenials = tt.prior
			in.BreakerOpen = tt.open
			tt.edit(&in)
			if got := Decide(in).TripBreaker; got != tt.tripps {
				t.Errorf("TripBreaker = %v, want %v", got, tt.tripps)
			}
		})
	}
}

func TestDecisionJSONOmitsTrip(t *testing.T) {
	in := base()
	in.Currency = "EUR"
	in.Policy.BreakerAfter = 1
	d := Decide(in)
	b, _ := json.Marshal(d)
	if !d.TripBreaker || strings.Contains(string(b), "rip") || !strings.Contains(string(b), `"outcome":"deny"`) {
		t.Errorf("JSON %s (trip %v)", b, d.TripBreaker)
	}
	if !d.Has(CodeCurrencyNotAllowed) || d.Has(CodePayeeNotAllowed) {
		t.Error("Has")
	}
}

func TestDecideDoesNotModifyInput(t *testing.T) {
	in := base()
	in.Policy.DenyPayees = []string{"acct:BAD.example"}
	before := base()
	before.Policy.DenyPayees = []string{"acct:BAD.example"}
	Decide(in)
	if diff := cmp.Diff(before, in); diff != "" {
		t.Error(diff)
	}
}

func BenchmarkDecide(b *testing.B) {
	in := base()
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(in); d.Outcome != Allow {
			b.Fatal(d)
		}
	}
}

func BenchmarkDecideDenyAll(b *testing.B) {
	in := base()
	in.Currency, in.Amount, in.Counters.VelocityCount = "EUR", 6000, 9
	b.ReportAllocs()
	for b.Loop() {
		if d := Decide(in); d.Outcome != Deny {
			b.Fatal(d)
		}
	}
}
