package fetch

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
)

// fixture is a money path with the x402 rail, and a fake x402 resource
// server on loopback behind a counter of the payments it was sent.
type fixture struct {
	t       testing.TB
	log     *audit.Log
	svc     *Service
	pay     *pay.Service
	fake    *fakex402.Server
	srv     *httptest.Server
	signed  atomic.Int64 // requests that carried PAYMENT-SIGNATURE
	agent   ed25519.PrivateKey
	caller  pay.Caller
	mandate string

	mu    sync.Mutex
	clock time.Time
}

func (f *fixture) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.clock }

func (f *fixture) advance(d time.Duration) { f.mu.Lock(); f.clock = f.clock.Add(d); f.mu.Unlock() }

// USDC on Base Sepolia, as the fake offers it.
var usdc = x402.Asset{Network: fakex402.DefaultNetwork, Address: mustAddr(fakex402.DefaultAsset), Name: "USDC", Version: "2",
	Decimals: 6, Currency: "USD", MinorDigits: 2}

func mustAddr(s string) evm.Address {
	a, err := evm.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

type fixtureOptions struct {
	fake     *fakex402.Options
	payees   []string
	noChain  bool
	confirm  int64 // mandate's confirmAbove (minor); default 100
	handler  func(fake http.Handler) http.Handler
	maxTimer time.Duration // the policy's timeout cap; default DefaultMaxTimeout
	maxBody  int64         // Options.MaxBody; default its default (1 MiB)
	skew     time.Duration // Options.ClockSkew; default x402.DefaultClockSkew
}

func newFixture(t testing.TB, fo fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
	st := memstore.New(&memstore.Options{RetryRate: 0.05})
	quiet := slog.New(slog.DiscardHandler)
	_, recKey, _ := ed25519.GenerateKey(rand.Reader)
	var err error
	if f.log, err = audit.Open(t.Context(), st, recKey, &audit.Options{Now: f.now, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	fopts := fakex402.Options{}
	if fo.fake != nil {
		fopts = *fo.fake
	}
	fopts.Now = f.now
	f.fake = fakex402.New(&fopts)
	var h http.Handler = f.fake.Handler()
	if fo.handler != nil {
		h = fo.handler(h)
	}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(x402.HeaderPaymentSignature) != "" {
			f.signed.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	wallet, err := evm.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: st, Log: f.log, Wallet: wallet, Policy: x402.Policy{Assets: []x402.Asset{usdc}, MaxTimeout: fo.maxTimer},
		URLs: netguard.Policy{AllowLoopback: true, AllowHTTP: true}, Now: f.now, Logger: quiet, Timeout: 5 * time.Second,
		MaxBody: fo.maxBody, ClockSkew: fo.skew}
	if !fo.noChain {
		o.Chain = f.fake
	}
	if f.svc, err = New(o); err != nil {
		t.Fatal(err)
	}
	opPub, opKey, _ := ed25519.GenerateKey(rand.Reader)
	mv, err := pay.NewMandateVerifier([]pay.OperatorKey{{KeyID: "op", Public: opPub}}, &pay.MandateVerifierOptions{Now: f.now})
	if err != nil {
		t.Fatal(err)
	}
	if f.pay, err = pay.New(pay.Options{Store: st, Log: f.log, Rails: &settle.Registry{}, Mandates: mv, Now: f.now, Logger: quiet,
		Extensions: []pay.Extension{f.svc}}); err != nil {
		t.Fatal(err)
	}
	pub, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	f.agent = agentKey
	agent := hex.EncodeToString(pub)
	f.caller = pay.Caller{KeyID: "ak_1", Agents: []string{agent}, Credential: gate.CredentialAPIKey}
	payees := fo.payees
	if payees == nil {
		payees = []string{"eip155:84532:" + fakex402.DefaultPayTo.String()}
	}
	confirm := fo.confirm
	if confirm == 0 {
		confirm = 100
	}
	f.mandate, err = pay.SignMandate(pay.MandateClaims{ID: "mdt-x402", Agent: agent,
		IssuedAt: f.now().Add(-time.Hour), ExpiresAt: f.now().Add(24 * time.Hour),
		Payees: payees, Currency: "USD", PerTxCapMinor: 50_000, PerPeriodCapMinor: gate.MaxMinor, Period: gate.Day,
		Rails: []string{RailName}, ConfirmAboveMinor: confirm, IrreversibleConfirmAboveMinor: confirm,
	}, opKey, "op")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) request(key, path string, maxMinor int64) Request {
	f.t.Helper()
	r := Request{Method: http.MethodGet, URL: f.srv.URL + path, MaxAmount: pay.Amount{Minor: maxMinor, Currency: "USD"},
		IdempotencyKey: key, Purpose: "market data for the report",
		Terms: pay.Terms{Rail: RailName, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: pay.Envelope{Mandate: f.mandate}}
	if err := Sign(&r, f.agent); err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fixture) fetch(r Request) (*Result, error) {
	return f.svc.Fetch(f.t.Context(), f.caller, r, "", "req_1")
}

func (f *fixture) types() []string {
	var out []string
	for e, err := range f.log.Entries(f.t.Context(), 1, 0) {
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, e.Type)
	}
	return out
}

// entries returns the record's entries of type typ, each verified with
// its inclusion proof against a signed checkpoint.
func (f *fixture) entries(typ string) []map[string]any {
	f.t.Helper()
	var out []map[string]any
	for e, err := range f.log.Entries(f.t.Context(), 1, 0) {
		if err != nil {
			f.t.Fatal(err)
		}
		if e.Type != typ {
			continue
		}
		p, err := f.log.Inclusion(f.t.Context(), e.Seq, 0)
		if err != nil {
			f.t.Fatal(err)
		}
		if err := audit.VerifyInclusion(f.log.VerifierKey(), e, p); err != nil {
			f.t.Fatalf("entry %d (%s): %v", e.Seq, typ, err)
		}
		var d map[string]any
		if err := json.Unmarshal(e.Data, &d); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func (f *fixture) approve(h *pay.Held) (*pay.Result, error) {
	return f.pay.Approve(f.t.Context(), pay.ApproveRequest{IntentID: h.IntentID, Challenge: h.Challenge, MandateID: h.MandateID,
		Rationale: "the report needs the data", Acknowledged: true}, pay.OperatorCall{Operator: "op", RequestID: "req_op", Rationale: "the report needs the data"})
}

func TestFetchPaid(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	r := f.request("k-1", "/paid", 5)
	res, err := f.fetch(r)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Fetched
	if res.Outcome != pay.OutcomeSettled || got == nil || !got.Paid || !got.Delivered || got.Status != 200 || got.Receipt == nil {
		t.Fatalf("result %+v fetched %+v", res.Result, got)
	}
	body, _ := base64.StdEncoding.DecodeString(got.Body)
	if !strings.Contains(string(body), "/paid") {
		t.Errorf("body %q", body)
	}
	st := f.fake.Settlements()
	if len(st) != 1 || f.signed.Load() != 1 {
		t.Fatalf("%d settlements, %d signed requests", len(st), f.signed.Load())
	}
	nonce := x402.NonceFromID(res.IntentID)
	if st[0].Authorization.Nonce != nonce || st[0].Authorization.From != f.svc.Address() {
		t.Errorf("settled authorization %+v", st[0].Authorization)
	}
	if got.Payment == nil || got.Payment.Transaction != st[0].Transaction || got.Receipt.Reference != st[0].Transaction ||
		got.Receipt.Amount != (pay.Amount{Minor: 1, Currency: "USD"}) || got.Receipt.Payee != "eip155:84532:"+fakex402.DefaultPayTo.String() {
		t.Errorf("payment %+v receipt %+v", got.Payment, got.Receipt)
	}
	want := []string{"gate.decision", EntryAuthorization, EntryPaid, "payment.settled"}
	if got := f.types(); !slices.Equal(got, want) {
		t.Fatalf("record %v, want %v", got, want)
	}
	hexNonce := "0x" + hex.EncodeToString(nonce[:])
	if a := f.entries(EntryAuthorization); len(a) != 1 || a[0]["nonce"] != hexNonce || a[0]["validBefore"] == nil {
		t.Errorf("authorization entry %v", a)
	}
	if p := f.entries(EntryPaid); len(p) != 1 || p[0]["transaction"] != st[0].Transaction || p[0]["nonce"] != hexNonce {
		t.Errorf("paid entry %v", p)
	}
	f.entries("payment.settled")
	// A replay answers the same resource and asks the resource nothing.
	before := f.fake.Requests("/paid")
	again, err := f.fetch(f.request("k-1", "/paid", 5))
	if err != nil || !again.Replayed || again.Fetched == nil || again.Fetched.Body != got.Body || again.IntentID != res.IntentID {
		t.Fatalf("replay %v %+v", err, again)
	}
	if f.fake.Requests("/paid") != before || len(f.fake.Settlements()) != 1 {
		t.Errorf("the replay reached the resource")
	}
	// The same key for another request is a conflict.
	if _, err := f.fetch(f.request("k-1", "/slow", 5)); !errors.Is(err, pay.ErrIdempotencyConflict) {
		t.Errorf("conflict: %v", err)
	}
}

func TestFetchUnpaidIsRelayed(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	res, err := f.fetch(f.request("k-free", "/not-priced", 5))
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != nil || res.Fetched == nil || res.Fetched.Paid || res.Fetched.Status != http.StatusNotFound {
		t.Fatalf("%+v", res)
	}
	if f.signed.Load() != 0 || len(f.types()) != 0 {
		t.Errorf("signed %d, record %v", f.signed.Load(), f.types())
	}
}

// TestFetchRefusals: every offer the deployment cannot honour is refused
// with the check that refused it, and nothing is signed.
func TestFetchRefusals(t *testing.T) {
	otherPayTo := evm.Address{1, 2, 3}
	v1 := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusPaymentRequired)
			_, _ = w.Write([]byte(`{"x402Version":1,"error":"X-PAYMENT header is required","accepts":[]}`))
		})
	}
	for _, tc := range []struct {
		name   string
		fo     fixtureOptions
		max    int64
		code   string // the problem's code
		check  string // the refusal's check, for x402.no_offer
		denial string // the gate's reason, for a denial
	}{
		{name: "network", fo: fixtureOptions{fake: &fakex402.Options{Network: "eip155:1"}}, max: 5, code: CodeNoOffer, check: "asset"},
		{name: "asset", fo: fixtureOptions{fake: &fakex402.Options{Asset: evm.Address{9}}}, max: 5, code: CodeNoOffer, check: "asset"},
		{name: "token domain", fo: fixtureOptions{fake: &fakex402.Options{TokenName: "USD Coin"}}, max: 5, code: CodeNoOffer, check: "extra.name"},
		{name: "payTo", fo: fixtureOptions{fake: &fakex402.Options{PayTo: otherPayTo}}, max: 5, code: CodeNoOffer, check: "payTo"},
		{name: "over the signed maximum", fo: fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/paid", Amount: "50000"}}}},
			max: 4, code: CodeNoOffer, check: "amount"},
		{name: "timeout cap", fo: fixtureOptions{fake: &fakex402.Options{MaxTimeoutSeconds: 3600}}, max: 5, code: CodeNoOffer, check: "maxTimeoutSeconds"},
		{name: "other origin", fo: fixtureOptions{fake: &fakex402.Options{BaseURL: "https://elsewhere.example"}}, max: 5, code: CodeNoOffer, check: "resource.url"},
		{name: "version 1", fo: fixtureOptions{handler: v1}, max: 5, code: CodeInvalidOffer},
		{name: "over the mandate", fo: fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/paid", Amount: "600000000"}}}},
			max: 100_000, code: pay.CodeDenied, denial: gate.CodePerTxCap},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.fo)
			res, err := f.fetch(f.request("k-"+strings.ReplaceAll(tc.name, " ", "-"), "/paid", tc.max))
			if tc.denial != "" {
				if err != nil || res.Outcome != pay.OutcomeDenied || !(gate.Decision{Reasons: res.Denial.Reasons}).Has(tc.denial) {
					t.Fatalf("want a denial %s: %v %+v", tc.denial, err, res)
				}
			} else {
				var coded interface{ Code() string }
				if !errors.As(err, &coded) || coded.Code() != tc.code {
					t.Fatalf("want %s: %v", tc.code, err)
				}
				var noe *NoOfferError
				if tc.check != "" && (!errors.As(err, &noe) || len(noe.Refusals) != 1 || noe.Refusals[0].Check != tc.check) {
					t.Fatalf("want a refusal of %s: %v", tc.check, err)
				}
			}
			if f.signed.Load() != 0 || len(f.fake.Settlements()) != 0 {
				t.Errorf("a payment was sent: %d", f.signed.Load())
			}
			if tc.check != "" {
				if e := f.entries(EntryNoOffer); len(e) != 1 {
					t.Errorf("no x402.no_offer entry: %v", f.types())
				}
			}
		})
	}
}

func TestFetchHeldSignsNothingUntilApproved(t *testing.T) {
	// 2 USDC: above the mandate's confirmation threshold of 1 USD.
	f2 := newFixture(t, fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/paid", Amount: "2000000"}}}})
	res, err := f2.fetch(f2.request("k-held", "/paid", 500))
	if err != nil || res.Outcome != pay.OutcomeHeld || res.Held == nil {
		t.Fatalf("want held: %v %+v", err, res)
	}
	if f2.signed.Load() != 0 || f2.fake.Requests("/paid") != 1 {
		t.Fatalf("before approval: %d signed, %d requests", f2.signed.Load(), f2.fake.Requests("/paid"))
	}
	// A replay while held answers the hold again and asks nothing.
	again, err := f2.fetch(f2.request("k-held", "/paid", 500))
	if err != nil || again.Outcome != pay.OutcomeHeld || f2.fake.Requests("/paid") != 1 {
		t.Fatalf("replay while held: %v %+v", err, again)
	}
	out, err := f2.approve(res.Held)
	if err != nil || out.Outcome != pay.OutcomeSettled {
		t.Fatalf("approve: %v %+v", err, out)
	}
	// Asked again (unpaid), then paid once.
	if f2.signed.Load() != 1 || f2.fake.Requests("/paid") != 3 || len(f2.fake.Settlements()) != 1 {
		t.Fatalf("after approval: %d signed, %d requests, %d settled", f2.signed.Load(), f2.fake.Requests("/paid"), len(f2.fake.Settlements()))
	}
	if a := f2.entries(EntryAuthorization); len(a) != 1 || a[0]["refetched"] != true {
		t.Errorf("authorization %v", a)
	}
	// The agent's retry now answers the resource.
	done, err := f2.fetch(f2.request("k-held", "/paid", 500))
	if err != nil || done.Fetched == nil || !done.Fetched.Delivered || done.Fetched.Status != 200 {
		t.Fatalf("after approval: %v %+v", err, done)
	}
}

func TestFetchHeldThenKillSwitch(t *testing.T) {
	f := newFixture(t, fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/paid", Amount: "2000000"}}}})
	res, err := f.fetch(f.request("k-frozen", "/paid", 500))
	if err != nil || res.Outcome != pay.OutcomeHeld {
		t.Fatalf("want held: %v %+v", err, res)
	}
	if _, err := f.pay.SetKillSwitch(t.Context(), true, pay.OperatorCall{Operator: "op", Rationale: "stop everything now"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.approve(res.Held); !errors.Is(err, pay.ErrFrozen) {
		t.Fatalf("approve under the kill switch: %v", err)
	}
	if _, err := f.pay.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if f.signed.Load() != 0 || len(f.fake.Settlements()) != 0 {
		t.Fatalf("signed %d under the kill switch", f.signed.Load())
	}
	// A new fetch is refused too, and signs nothing.
	if _, err := f.fetch(f.request("k-frozen-2", "/paid", 500)); !errors.Is(err, pay.ErrFrozen) {
		t.Fatalf("fetch under the kill switch: %v", err)
	}
	if f.signed.Load() != 0 {
		t.Fatal("signed under the kill switch")
	}
}

// TestKillSwitchBeforeSigning: a freeze that lands between the decision
// and the signature stops the signature (the rail checks it in the
// transaction that stores the attempt).
func TestKillSwitchBeforeSigning(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	rl := &rail{s: f.svc}
	res, err := f.fetch(f.request("k-race", "/paid", 5))
	if err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatal(err)
	}
	// A second intent, decided but not yet settled: built by hand.
	rec, err := f.svc.load(t.Context(), res.IntentID)
	if err != nil {
		t.Fatal(err)
	}
	rec.IntentID, rec.Attempt, rec.Outcome = "int_second", nil, nil
	if err := f.svc.st.Update(t.Context(), func(txn store.Txn) error { return putRecord(txn, rec) }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pay.SetKillSwitch(t.Context(), true, pay.OperatorCall{Operator: "op", Rationale: "stop everything now"}); err != nil {
		t.Fatal(err)
	}
	_, err = rl.Settle(t.Context(), settle.SettleRequest{Key: "int_second", Payee: rec.PayTo, Amount: rec.Minor, Currency: rec.Currency})
	if !errors.Is(err, settle.ErrUnavailable) || f.signed.Load() != 1 {
		t.Fatalf("settle under the kill switch: %v, %d signed", err, f.signed.Load())
	}
	if _, err := rl.Lookup(t.Context(), "int_second"); !errors.Is(err, settle.ErrUnknownKey) {
		t.Fatalf("lookup of an attempt never signed: %v", err)
	}
}

// TestKillSwitchStopsResend: an attempt stored and sent, whose answer
// was lost, is not sent again while the kill switch is engaged (by the
// agent's retry or by the reconciler); once released, the same header is
// resent and the payment resolves.
func TestKillSwitchStopsResend(t *testing.T) {
	f := newFixture(t, fixtureOptions{fake: &fakex402.Options{ReplaySettled: true, Resources: []fakex402.Resource{
		{Path: "/drop", Scenario: fakex402.ScenarioSettleThenDrop}}}})
	r := f.request("k-drop-frozen", "/drop", 5)
	if _, err := f.fetch(r); !errors.Is(err, pay.ErrRailUnavailable) {
		t.Fatalf("first answer lost: %v", err)
	}
	sent := f.fake.Requests("/drop")
	op := pay.OperatorCall{Operator: "op", Rationale: "stop everything now"}
	if _, err := f.pay.SetKillSwitch(t.Context(), true, op); err != nil {
		t.Fatal(err)
	}
	if res, err := f.fetch(r); err == nil && res.Outcome == pay.OutcomeSettled {
		t.Fatalf("the retry under the kill switch settled: %+v", res)
	}
	if _, err := f.pay.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := f.fake.Requests("/drop"); n != sent {
		t.Fatalf("%d requests reached the resource under the kill switch", n-sent)
	}
	if _, err := f.pay.SetKillSwitch(t.Context(), false, op); err != nil {
		t.Fatal(err)
	}
	res, err := f.fetch(r)
	if err != nil || res.Outcome != pay.OutcomeSettled {
		t.Fatalf("after release: %v %+v", err, res)
	}
	if len(f.fake.Settlements()) != 1 || len(f.entries(EntryAuthorization)) != 1 {
		t.Fatalf("%d settlements, %d signatures", len(f.fake.Settlements()), len(f.entries(EntryAuthorization)))
	}
}

// TestApprovalSurvivesABlip: asked again for its offer on approval, a
// resource that answers 503 does not decline the payment (a person's
// approval is not thrown away): it stays settling, signs nothing, and is
// paid once the resource answers its 402 again.
func TestApprovalSurvivesABlip(t *testing.T) {
	var down atomic.Bool
	f := newFixture(t, fixtureOptions{
		fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/paid", Amount: "2000000"}}},
		handler: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if down.Load() {
					http.Error(w, "try later", http.StatusServiceUnavailable)
					return
				}
				h.ServeHTTP(w, r)
			})
		},
	})
	r := f.request("k-blip", "/paid", 500)
	res, err := f.fetch(r)
	if err != nil || res.Outcome != pay.OutcomeHeld {
		t.Fatalf("want held: %v %+v", err, res)
	}
	down.Store(true)
	if out, err := f.approve(res.Held); err == nil && out.Outcome == pay.OutcomeSettled {
		t.Fatalf("settled while the resource was down: %+v", out)
	}
	in, err := f.pay.OperatorIntent(t.Context(), res.IntentID)
	if err != nil || in.Status != pay.StatusSettling || f.signed.Load() != 0 {
		t.Fatalf("after a 503 on approval: %v, status %s, %d signed", err, in.Status, f.signed.Load())
	}
	down.Store(false)
	f.advance(time.Minute)
	if _, err := f.pay.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := f.settledStatus(r); st != pay.StatusSettled || len(f.fake.Settlements()) != 1 || f.signed.Load() != 1 {
		t.Fatalf("after the blip: status %s, %d settled, %d signed", st, len(f.fake.Settlements()), f.signed.Load())
	}
}

func TestPriceChangedOnApproval(t *testing.T) {
	f := newFixture(t, fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{
		{Path: "/p", Amount: "2000000", Scenario: fakex402.ScenarioPriceChanged}}}})
	res, err := f.fetch(f.request("k-price", "/p", 5000))
	if err != nil || res.Outcome != pay.OutcomeHeld {
		t.Fatalf("want held: %v %+v", err, res)
	}
	out, err := f.approve(res.Held)
	if err == nil && out.Outcome == pay.OutcomeSettled {
		t.Fatal("paid a changed price")
	}
	in, ierr := f.pay.OperatorIntent(t.Context(), res.IntentID)
	if ierr != nil || in.Status != pay.StatusFailed || in.Failure == nil || in.Failure.DeclineCode != DeclinePriceChanged {
		t.Fatalf("intent %+v (%v), approve %v %+v", in, ierr, err, out)
	}
	if f.signed.Load() != 0 {
		t.Fatal("signed at a changed price")
	}
}

// TestSettleThenDrop: the resource settles and drops the connection. The
// payment stays settling; resends are refused as a used nonce; after
// validBefore the chain says it was used: settled, once.
func TestSettleThenDrop(t *testing.T) {
	for _, replay := range []bool{false, true} {
		name := map[bool]string{false: "resend refused", true: "resend answered"}[replay]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{fake: &fakex402.Options{ReplaySettled: replay, Resources: []fakex402.Resource{
				{Path: "/drop", Scenario: fakex402.ScenarioSettleThenDrop}}}})
			r := f.request("k-drop", "/drop", 5)
			if _, err := f.fetch(r); !errors.Is(err, pay.ErrRailUnavailable) {
				t.Fatalf("first answer lost: %v", err)
			}
			// The retry resends the same header, and asks the resource
			// nothing unpaid: its answer could be relayed while the payment's
			// outcome is unknown.
			res, err := f.fetch(r)
			if n := f.fake.Requests("/drop"); n != 3 {
				t.Fatalf("%d requests after the retry, want the unpaid one and two copies of the payment", n)
			}
			if replay {
				if err != nil || res.Outcome != pay.OutcomeSettled || !res.Fetched.Delivered {
					t.Fatalf("resend answered: %v %+v", err, res)
				}
			} else {
				if !errors.Is(err, pay.ErrRailUnavailable) {
					t.Fatalf("resend refused: %v %+v", err, res)
				}
				f.advance(10 * time.Minute)
				if _, err := f.pay.Reconcile(t.Context()); err != nil {
					t.Fatal(err)
				}
				if res, err = f.fetch(r); err != nil || res.Outcome != pay.OutcomeSettled || res.Fetched.Delivered {
					t.Fatalf("after expiry: %v %+v", err, res)
				}
			}
			if len(f.fake.Settlements()) != 1 || f.signed.Load() != 2 {
				t.Fatalf("%d settlements, %d sends", len(f.fake.Settlements()), f.signed.Load())
			}
			var payments []string
			for _, a := range f.entries(EntryAuthorization) {
				payments = append(payments, a["nonce"].(string))
			}
			if len(payments) != 1 {
				t.Fatalf("signed %d times", len(payments))
			}
		})
	}
}

// TestExpiryResolvedByChain: a resource that answers 503 settles nothing;
// after validBefore the chain reader says the nonce is unused: the
// payment fails, nothing paid, but only once the local clock is past
// validBefore by finality and the clock skew margin (a used nonce settles
// as soon as the chain's answer is final).
func TestExpiryResolvedByChain(t *testing.T) {
	for _, tc := range []struct {
		scenario fakex402.Scenario
		skew     time.Duration // Options.ClockSkew; 0 for the default
		status   pay.Status
	}{
		{fakex402.ScenarioErrorUnsettled, 0, pay.StatusFailed},
		{fakex402.ScenarioUnknownOutcome, 0, pay.StatusSettled},
		{fakex402.ScenarioRefused, 0, pay.StatusFailed},
		{fakex402.ScenarioErrorUnsettled, 3 * time.Minute, pay.StatusFailed},
		{fakex402.ScenarioErrorUnsettled, time.Hour, pay.StatusFailed},
	} {
		skew := tc.skew
		if skew == 0 {
			skew = x402.DefaultClockSkew
		}
		t.Run(fmt.Sprintf("%s/skew=%s", tc.scenario, skew), func(t *testing.T) {
			f := newFixture(t, fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/x", Scenario: tc.scenario}}},
				skew: tc.skew})
			r := f.request("k-x", "/x", 5)
			if _, err := f.fetch(r); !errors.Is(err, pay.ErrRailUnavailable) {
				t.Fatalf("first: %v", err)
			}
			res, pending, err := f.svc.books.Prior(t.Context(), Route, f.caller, r.IdempotencyKey, digest(mustSigning(t, &r), &r))
			if err != nil || res != nil || pending == "" {
				t.Fatalf("settling has no outcome yet: %v %+v", err, res)
			}
			// Expired and final by the local clock, which may be ahead of
			// the chain's: an unused authorization is not declined while
			// the deployment's margin lasts.
			f.advance(fakex402.DefaultMaxTimeout*time.Second + DefaultFinality + skew - time.Second)
			if _, err := f.pay.Reconcile(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st, want := f.settledStatus(r), map[bool]pay.Status{true: pay.StatusSettled, false: pay.StatusSettling}[tc.status == pay.StatusSettled]; st != want {
				t.Fatalf("within the clock skew margin: status %s, want %s", st, want)
			}
			f.advance(time.Second)
			if _, err := f.pay.Reconcile(t.Context()); err != nil {
				t.Fatal(err)
			}
			st := f.settledStatus(r)
			if st != tc.status {
				t.Fatalf("status %s, want %s", st, tc.status)
			}
			if a := f.entries(EntryAuthorization); len(a) != 1 {
				t.Fatalf("signed %d times", len(a))
			}
		})
	}
}

func TestExpiryWithoutChainWaitsForAPerson(t *testing.T) {
	f := newFixture(t, fixtureOptions{noChain: true, fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/x", Scenario: fakex402.ScenarioErrorUnsettled}}}})
	r := f.request("k-x", "/x", 5)
	if _, err := f.fetch(r); !errors.Is(err, pay.ErrRailUnavailable) {
		t.Fatalf("first: %v", err)
	}
	f.advance(time.Hour)
	if _, err := f.pay.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := f.settledStatus(r); st != pay.StatusSettling {
		t.Fatalf("status %s", st)
	}
	page, err := f.pay.Settling(t.Context(), "", 10)
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("settling list %v %+v", err, page)
	}
}

func (f *fixture) settledStatus(r Request) pay.Status {
	f.t.Helper()
	var id string
	for e, err := range f.log.Entries(f.t.Context(), 1, 0) {
		if err != nil {
			f.t.Fatal(err)
		}
		var d struct {
			IdempotencyKey string `json:"idempotencyKey"`
		}
		if e.Type == "gate.decision" && json.Unmarshal(e.Data, &d) == nil && d.IdempotencyKey == r.IdempotencyKey {
			id = e.IntentID
		}
	}
	in, err := f.pay.OperatorIntent(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return in.Status
}

func mustSigning(t *testing.T, r *Request) []byte {
	b, err := SigningBytes(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRequestChecks(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, tc := range []struct {
		name  string
		edit  func(*Request)
		field string
	}{
		{"relative url", func(r *Request) { r.URL = "/paid" }, "url"},
		{"ftp url", func(r *Request) { r.URL = "ftp://127.0.0.1/x" }, "url"},
		{"fragment", func(r *Request) { r.URL += "#x" }, "url"},
		{"payment header", func(r *Request) { r.Headers = map[string]string{"Payment-Signature": "x"} }, "headers"},
		{"host header", func(r *Request) { r.Headers = map[string]string{"host": "x"} }, "headers"},
		{"bad header name", func(r *Request) { r.Headers = map[string]string{"a b": "x"} }, "headers"},
		{"newline in value", func(r *Request) { r.Headers = map[string]string{"X-A": "a\r\nb: c"} }, "headers"},
		{"body on GET", func(r *Request) { r.SetBody([]byte("x")) }, "body"},
		{"digest without body", func(r *Request) { r.BodyDigest = BodyDigest([]byte("x")) }, "bodyDigest"},
		{"other rail", func(r *Request) { r.Terms.Rail = "sandbox-card" }, "terms.rail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.request("k-check", "/paid", 5)
			tc.edit(&r)
			_ = Sign(&r, f.agent)
			_, err := f.fetch(r)
			var me *pay.MalformedError
			if !errors.As(err, &me) || me.Fields[0].Field != tc.field {
				t.Fatalf("want malformed %s: %v", tc.field, err)
			}
		})
	}
	// A request someone else signed is refused before anything is sent.
	r := f.request("k-forged", "/paid", 5)
	r.URL = f.srv.URL + "/slow"
	if _, err := f.fetch(r); !errors.Is(err, pay.ErrUnauthorized) {
		t.Fatalf("forged: %v", err)
	}
	if f.fake.Requests("/slow") != 0 || f.fake.Requests("/paid") != 0 {
		t.Fatal("a request nobody signed was sent")
	}
	// The outbound policy refuses a URL the deployment may not reach.
	g := newFixture(t, fixtureOptions{})
	g.svc.urls = netguard.Policy{}
	if _, err := g.fetch(g.request("k-guard", "/paid", 5)); !errors.As(err, new(*InvalidURLError)) {
		t.Fatalf("guarded: %v", err)
	}
	if g.fake.Requests("/paid") != 0 {
		t.Fatal("a refused URL was fetched")
	}
}

func TestTransport(t *testing.T) {
	f := newFixture(t, fixtureOptions{fake: &fakex402.Options{Resources: []fakex402.Resource{
		{Path: "/paid", Body: []byte(`{"price":42}`)}, {Path: "/dear", Amount: "2000000"}}}})
	c := &http.Client{Transport: f.svc.Transport(Agent{Caller: f.caller, Key: f.agent, Mandate: f.mandate,
		MaxAmount: pay.Amount{Minor: 500, Currency: "USD"}, Purpose: "prices for the report"})}
	get := func(path, key string) (*http.Response, string, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+path, nil)
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b), nil
	}
	resp, body, err := get("/paid", "rt-1")
	if err != nil || resp.StatusCode != 200 || body != `{"price":42}` || resp.Header.Get(HeaderIntent) == "" ||
		resp.Header.Get(HeaderTransaction) != f.fake.Settlements()[0].Transaction {
		t.Fatalf("paid: %v %+v %q", err, resp, body)
	}
	// The same key again: the same answer, nothing paid or asked again.
	if again, body2, err := get("/paid", "rt-1"); err != nil || body2 != body || again.Header.Get(HeaderIntent) != resp.Header.Get(HeaderIntent) {
		t.Fatalf("replay: %v %q", err, body2)
	}
	if len(f.fake.Settlements()) != 1 || f.fake.Requests("/paid") != 2 {
		t.Fatalf("%d settlements, %d requests", len(f.fake.Settlements()), f.fake.Requests("/paid"))
	}
	// Not priced: relayed.
	if resp, _, err := get("/nothing", ""); err != nil || resp.StatusCode != 404 || resp.Header.Get(HeaderIntent) != "" {
		t.Fatalf("unpriced: %v %+v", err, resp)
	}
	// Held: an error carrying the hold; nothing signed.
	_, _, err = get("/dear", "rt-2")
	var oe *OutcomeError
	if !errors.As(err, &oe) || oe.Result.Outcome != pay.OutcomeHeld || oe.Result.Held == nil || f.signed.Load() != 1 {
		t.Fatalf("held: %v", err)
	}
	if _, err := f.approve(oe.Result.Held); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := get("/dear", "rt-2"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after approval: %v", err)
	}
}

// TestTransportTruncated: a body over the deployment's cap comes through
// the RoundTripper cut, with Countersign-Truncated: true, exactly when
// POST /x402/fetch answers truncated: true (paid or relayed); a body
// within the cap has no such header, and a resource can set none of the
// Transport's headers (a free resource cannot pass for a paid one).
func TestTransportTruncated(t *testing.T) {
	long := []byte(`{"prices":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}`)
	f := newFixture(t, fixtureOptions{maxBody: 16,
		fake: &fakex402.Options{Resources: []fakex402.Resource{{Path: "/long", Body: long}, {Path: "/short", Body: []byte(`{"p":1}`)}}},
		handler: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/liar" {
					w.Header().Set(HeaderTruncated, "true")
					w.Header().Set(HeaderIntent, "int_forged")
					w.Header().Set(HeaderTransaction, "0xforged")
					_, _ = w.Write([]byte("short"))
					return
				}
				h.ServeHTTP(w, r)
			})
		}})
	c := &http.Client{Transport: f.svc.Transport(Agent{Caller: f.caller, Key: f.agent, Mandate: f.mandate,
		MaxAmount: pay.Amount{Minor: 500, Currency: "USD"}, Purpose: "prices for the report"})}
	for _, tc := range []struct {
		path      string
		paid      bool
		body      string
		truncated bool
	}{
		{"/long", true, string(long[:16]), true},
		{"/short", true, `{"p":1}`, false},
		{"/nothing", false, "404 page not fou", true}, // relayed: http.NotFound's 19 bytes, cut
		{"/liar", false, "short", false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			key := "rt-trunc" + strings.ReplaceAll(tc.path, "/", "-")
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+tc.path, nil)
			req.Header.Set("Idempotency-Key", key)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tc.body || (resp.Header.Get(HeaderIntent) != "") != tc.paid {
				t.Fatalf("body %q, intent %q", b, resp.Header.Get(HeaderIntent))
			}
			if !tc.paid && len(resp.Header.Values(HeaderTransaction)) != 0 {
				t.Errorf("unpaid answer carries %s %q", HeaderTransaction, resp.Header.Values(HeaderTransaction))
			}
			want := []string(nil)
			if tc.truncated {
				want = []string{"true"}
			}
			if got := resp.Header.Values(HeaderTruncated); !slices.Equal(got, want) {
				t.Errorf("%s: %q, want %q", HeaderTruncated, got, want)
			}
			// A fetch of the same resource through Service.Fetch (POST
			// /x402/fetch) says the same in its answer.
			direct, err := f.fetch(f.request("post"+key, tc.path, 500))
			if err != nil || direct.Fetched == nil || direct.Fetched.Paid != tc.paid || direct.Fetched.Truncated != tc.truncated {
				t.Errorf("Service.Fetch answered %v %+v", err, direct)
			}
		})
	}
}

// TestFetchOversizedHeaders: a resource whose 402 carries a valid offer
// under more headers than x402.MaxResponseHeaderBytes gets no payment:
// the unpaid request fails (x402.resource_unavailable, naming the cap),
// nothing is signed, sent or recorded.
func TestFetchOversizedHeaders(t *testing.T) {
	f := newFixture(t, fixtureOptions{handler: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for i := range 2 * x402.MaxResponseHeaderBytes / (4 << 10) {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 4<<10))
			}
			h.ServeHTTP(w, r) // the fake's 402 and its offer
		})
	}})
	_, err := f.fetch(f.request("k-headers", "/paid", 5))
	if !errors.Is(err, ErrResourceUnavailable) || !strings.Contains(err.Error(), fmt.Sprint(x402.MaxResponseHeaderBytes)) {
		t.Fatalf("want %v naming the cap: %v", ErrResourceUnavailable, err)
	}
	t.Log(err)
	if f.fake.Requests("/paid") != 1 || f.signed.Load() != 0 || len(f.fake.Settlements()) != 0 || len(f.types()) != 0 {
		t.Fatalf("%d requests, %d signed, %d settled, record %v", f.fake.Requests("/paid"), f.signed.Load(), len(f.fake.Settlements()), f.types())
	}
}
