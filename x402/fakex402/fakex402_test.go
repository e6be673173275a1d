package fakex402

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// clock is a fake clock: Now is set by the test; After fires when the
// test releases it.
type clock struct {
	mu     sync.Mutex
	now    time.Time
	waits  []time.Duration
	waited chan chan time.Time
}

func newClock() *clock {
	return &clock{now: time.Unix(1_800_000_000, 0), waited: make(chan chan time.Time, 8)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	c.waited <- ch
	return ch
}

type fixture struct {
	t     *testing.T
	clock *clock
	fake  *Server
	srv   *httptest.Server
	key   *evm.Key
}

func newFixture(t *testing.T, opts *Options) *fixture {
	t.Helper()
	c := newClock()
	if opts == nil {
		opts = &Options{}
	}
	opts.Now, opts.After = c.Now, c.After
	f := &fixture{t: t, clock: c, fake: New(opts)}
	f.srv = httptest.NewServer(f.fake.Handler()) // 127.0.0.1
	t.Cleanup(f.srv.Close)
	var err error
	if f.key, err = evm.ParseKey("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d"); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) do(path, payment string) *http.Response {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+path, nil)
	if payment != "" {
		req.Header.Set(x402.HeaderPaymentSignature, payment)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// offer asks for path unpaid and returns its 402.
func (f *fixture) offer(path string) x402.PaymentRequired {
	f.t.Helper()
	resp := f.do(path, "")
	if resp.StatusCode != http.StatusPaymentRequired {
		f.t.Fatalf("unpaid %s: %s", path, resp.Status)
	}
	pr, err := x402.DecodePaymentRequired(resp.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		f.t.Fatal(err)
	}
	return pr
}

// sign pays pr's first offer as a client would: valid from ten minutes
// ago to maxTimeoutSeconds from now.
func (f *fixture) sign(pr x402.PaymentRequired, id string) string {
	f.t.Helper()
	now := f.clock.Now()
	r := pr.Accepts[0]
	p, err := x402.SignExactEVM(r, &pr.Resource, f.key, x402.NonceFromID(id), now.Add(-10*time.Minute),
		now.Add(time.Duration(r.MaxTimeoutSeconds)*time.Second))
	if err != nil {
		f.t.Fatal(err)
	}
	h, err := x402.EncodePaymentPayload(p)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

func (f *fixture) state(id string) bool {
	f.t.Helper()
	used, err := f.fake.AuthorizationState(context.Background(), f.fake.Network(), f.fake.Asset(), f.key.Address(), x402.NonceFromID(id))
	if err != nil {
		f.t.Fatal(err)
	}
	cc := &ChainClient{BaseURL: f.srv.URL, HTTP: f.srv.Client()}
	overHTTP, err := cc.AuthorizationState(context.Background(), f.fake.Network(), f.fake.Asset(), f.key.Address(), x402.NonceFromID(id))
	if err != nil || overHTTP != used {
		f.t.Fatalf("over HTTP: %v, %v; in Go: %v", overHTTP, err, used)
	}
	return used
}

func settlementOf(t *testing.T, resp *http.Response) x402.SettlementResponse {
	t.Helper()
	s, err := x402.DecodeSettlementResponse(resp.Header.Get(x402.HeaderPaymentResponse))
	if err != nil {
		t.Fatalf("PAYMENT-RESPONSE: %v", err)
	}
	return s
}

func requiredOf(t *testing.T, resp *http.Response) x402.PaymentRequired {
	t.Helper()
	pr, err := x402.DecodePaymentRequired(resp.Header.Get(x402.HeaderPaymentRequired))
	if err != nil {
		t.Fatalf("PAYMENT-REQUIRED: %v", err)
	}
	return pr
}

func TestPaid(t *testing.T) {
	f := newFixture(t, nil)
	pr := f.offer("/paid")
	r := pr.Accepts[0]
	name, _ := r.ExtraString("name")
	version, _ := r.ExtraString("version")
	if pr.X402Version != 2 || pr.Resource.URL != f.srv.URL+"/paid" || r.Scheme != "exact" || r.Network != DefaultNetwork ||
		r.Asset != DefaultAsset || r.PayTo != DefaultPayTo.String() || r.Amount != DefaultAmount ||
		r.MaxTimeoutSeconds != 60 || name != "USDC" || version != "2" {
		t.Fatalf("402 = %+v", pr)
	}
	if _, err := x402.ParseExactEVM(r); err != nil {
		t.Fatal(err)
	}
	h := f.sign(pr, "int_paid")
	resp := f.do("/paid", h)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"paid":true`)) {
		t.Fatalf("paid: %s %s", resp.Status, body)
	}
	s := settlementOf(t, resp)
	if !s.Success || s.Payer != f.key.Address().String() || s.Network != DefaultNetwork || len(s.Transaction) != 66 || s.Amount != "10000" {
		t.Fatalf("PAYMENT-RESPONSE = %+v", s)
	}
	st := f.fake.Settlements()
	if len(st) != 1 || st[0].Transaction != s.Transaction || st[0].Path != "/paid" || st[0].Authorization.Value.Int64() != 10000 {
		t.Fatalf("settlements = %+v", st)
	}
	if !f.state("int_paid") || f.state("int_other") {
		t.Fatal("authorizationState wrong")
	}

	// Resent byte for byte: the token contract refuses a used nonce.
	again := f.do("/paid", h)
	if again.StatusCode != http.StatusPaymentRequired || settlementOf(t, again).ErrorReason != ReasonUsed ||
		requiredOf(t, again).Error != ReasonUsed {
		t.Fatalf("resend: %s %+v", again.Status, settlementOf(t, again))
	}
	if n := len(f.fake.Settlements()); n != 1 {
		t.Fatalf("%d settlements after a resend", n)
	}
	if f.fake.Requests("/paid") != 3 {
		t.Fatalf("requests = %d", f.fake.Requests("/paid"))
	}
}

func TestReplaySettled(t *testing.T) {
	f := newFixture(t, &Options{ReplaySettled: true})
	h := f.sign(f.offer("/paid"), "int_replay")
	first := settlementOf(t, f.do("/paid", h))
	resp := f.do("/paid", h)
	if resp.StatusCode != http.StatusOK || settlementOf(t, resp).Transaction != first.Transaction {
		t.Fatalf("replay: %s %+v", resp.Status, settlementOf(t, resp))
	}
	if n := len(f.fake.Settlements()); n != 1 {
		t.Fatalf("%d settlements", n)
	}
}

// TestConcurrentResendsSettleOnce: the same payment sent many times at
// once settles once.
func TestConcurrentResendsSettleOnce(t *testing.T) {
	f := newFixture(t, &Options{ReplaySettled: true})
	h := f.sign(f.offer("/paid"), "int_burst")
	var wg sync.WaitGroup
	codes := make(chan int, 16)
	for range 16 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/paid", nil)
			req.Header.Set(x402.HeaderPaymentSignature, h)
			resp, err := f.srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("status %d", c)
		}
	}
	if n := len(f.fake.Settlements()); n != 1 {
		t.Fatalf("%d settlements", n)
	}
}

func TestRefused(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do("/refused", f.sign(f.offer("/refused"), "int_refused"))
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("status %s", resp.Status)
	}
	if s := settlementOf(t, resp); s.Success || s.ErrorReason != "insufficient_funds" || s.Transaction != "" {
		t.Fatalf("PAYMENT-RESPONSE = %+v", s)
	}
	if pr := requiredOf(t, resp); pr.Error != "insufficient_funds" || len(pr.Accepts) != 1 {
		t.Fatalf("PAYMENT-REQUIRED = %+v", pr)
	}
	if len(f.fake.Settlements()) != 0 || f.state("int_refused") {
		t.Fatal("a refused payment settled")
	}
}

func TestPriceChanged(t *testing.T) {
	f := newFixture(t, nil)
	old := f.offer("/price-changed")
	if old.Accepts[0].Amount != "10000" {
		t.Fatalf("first price %s", old.Accepts[0].Amount)
	}
	resp := f.do("/price-changed", f.sign(old, "int_price_1"))
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("old price paid: %s", resp.Status)
	}
	pr := requiredOf(t, resp)
	if pr.Accepts[0].Amount != "20000" || pr.Error != x402.ReasonValueMismatch {
		t.Fatalf("new requirements %+v", pr)
	}
	if len(f.fake.Settlements()) != 0 || f.state("int_price_1") {
		t.Fatal("settled at the old price")
	}
	// Signed anew at the new price (a new payment, a new nonce): paid.
	resp = f.do("/price-changed", f.sign(pr, "int_price_2"))
	if resp.StatusCode != http.StatusOK || settlementOf(t, resp).Amount != "20000" {
		t.Fatalf("new price: %s", resp.Status)
	}
	if len(f.fake.Settlements()) != 1 {
		t.Fatal("not settled once")
	}
}

func TestSettleThenDrop(t *testing.T) {
	f := newFixture(t, nil)
	h := f.sign(f.offer("/settle-then-drop"), "int_drop")
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/settle-then-drop", nil)
	req.Header.Set(x402.HeaderPaymentSignature, h)
	resp, err := f.srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("answered %s", resp.Status)
	}
	if len(f.fake.Settlements()) != 1 || !f.state("int_drop") {
		t.Fatal("not settled before the drop")
	}
	// The answer was lost; resent byte for byte, the nonce is used.
	if again := f.do("/settle-then-drop", h); settlementOf(t, again).ErrorReason != ReasonUsed {
		t.Fatalf("resend: %s", again.Status)
	}
	if len(f.fake.Settlements()) != 1 {
		t.Fatal("settled twice")
	}
}

func TestSlow(t *testing.T) {
	f := newFixture(t, &Options{SlowDelay: 3 * time.Second})
	done := make(chan *http.Response)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/slow", nil)
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	fire := <-f.clock.waited
	select {
	case <-done:
		t.Fatal("answered before the delay")
	default:
	}
	fire <- f.clock.Now()
	resp := <-done
	if resp == nil {
		t.FailNow()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPaymentRequired {
		t.Fatalf("slow 402: %s", resp.Status)
	}
	f.clock.mu.Lock()
	waits := f.clock.waits
	f.clock.mu.Unlock()
	if len(waits) != 1 || waits[0] != 3*time.Second {
		t.Fatalf("waits %v", waits)
	}
	// Paid, after the same wait.
	pr := requiredOf(t, resp)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/slow", nil)
		req.Header.Set(x402.HeaderPaymentSignature, f.sign(pr, "int_slow"))
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	(<-f.clock.waited) <- f.clock.Now()
	if resp := <-done; resp == nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("slow paid: %v", resp)
	} else {
		resp.Body.Close()
	}
}

func TestUnknownOutcome(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do("/unknown-outcome", f.sign(f.offer("/unknown-outcome"), "int_unknown"))
	if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get(x402.HeaderPaymentResponse) != "" {
		t.Fatalf("status %s", resp.Status)
	}
	if len(f.fake.Settlements()) != 1 || !f.state("int_unknown") {
		t.Fatal("unknown-outcome did not settle")
	}
}

func TestErrorUnsettled(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do("/error-unsettled", f.sign(f.offer("/error-unsettled"), "int_unsettled"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get(x402.HeaderPaymentResponse) != "" {
		t.Fatalf("status %s", resp.Status)
	}
	if len(f.fake.Settlements()) != 0 || f.state("int_unsettled") {
		t.Fatal("error-unsettled settled")
	}
}

func TestVerificationRefusals(t *testing.T) {
	f := newFixture(t, nil)
	pr := f.offer("/paid")

	// Expired: the clock passes validBefore.
	h := f.sign(pr, "int_late")
	f.clock.Advance(61 * time.Second)
	if resp := f.do("/paid", h); requiredOf(t, resp).Error != x402.ReasonValidBefore {
		t.Fatalf("expired: %s %q", resp.Status, requiredOf(t, resp).Error)
	}

	// Signed by another key than from.
	p, _ := x402.DecodePaymentPayload(f.sign(pr, "int_forged"))
	other, _ := evm.GenerateKey()
	p.Payload.Authorization.From = other.Address().String()
	forged, _ := x402.EncodePaymentPayload(p)
	if resp := f.do("/paid", forged); requiredOf(t, resp).Error != x402.ReasonSignature {
		t.Fatalf("forged: %q", requiredOf(t, resp).Error)
	}

	// To another payee than the offer's.
	r := pr.Accepts[0]
	r.PayTo = other.Address().String()
	p, _ = x402.SignExactEVM(r, nil, f.key, x402.NonceFromID("int_elsewhere"), f.clock.Now().Add(-time.Minute), f.clock.Now().Add(time.Minute))
	elsewhere, _ := x402.EncodePaymentPayload(p)
	if resp := f.do("/paid", elsewhere); requiredOf(t, resp).Error != x402.ReasonRecipientMismatch {
		t.Fatalf("elsewhere: %q", requiredOf(t, resp).Error)
	}

	// Not a payload at all: 400.
	if resp := f.do("/paid", "bm90IGpzb24="); resp.StatusCode != http.StatusBadRequest ||
		!strings.HasPrefix(requiredOf(t, resp).Error, x402.ReasonInvalidPayload) {
		t.Fatalf("garbage: %s", resp.Status)
	}
	if len(f.fake.Settlements()) != 0 {
		t.Fatal("a refused payment settled")
	}
	if resp := f.do("/nowhere", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %s", resp.Status)
	}
}

func TestFacilitatorAPI(t *testing.T) {
	f := newFixture(t, nil)
	pr := f.offer("/paid")
	p, _ := x402.DecodePaymentPayload(f.sign(pr, "int_facilitator"))
	body, _ := json.Marshal(x402.FacilitatorRequest{X402Version: 2, PaymentPayload: p, PaymentRequirements: pr.Accepts[0]})
	post := func(path string, out any) {
		t.Helper()
		resp, err := f.srv.Client().Post(f.srv.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var v x402.VerifyResponse
	post("/facilitator/verify", &v)
	if !v.IsValid || v.Payer != f.key.Address().String() {
		t.Fatalf("verify %+v", v)
	}
	var s x402.SettlementResponse
	post("/facilitator/settle", &s)
	if !s.Success || s.Transaction == "" {
		t.Fatalf("settle %+v", s)
	}
	post("/facilitator/settle", &s)
	if s.Success || s.ErrorReason != ReasonUsed {
		t.Fatalf("second settle %+v", s)
	}
	post("/facilitator/verify", &v)
	if v.IsValid || v.InvalidReason != ReasonUsed {
		t.Fatalf("verify after settle %+v", v)
	}
	if st := f.fake.Settlements(); len(st) != 1 || st[0].Path != "" {
		t.Fatalf("settlements %+v", st)
	}
	resp, err := f.srv.Client().Get(f.srv.URL + "/facilitator/supported")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`"network":"eip155:84532"`)) {
		t.Fatalf("supported %s", b)
	}
}

func TestChainClientRefusesBadQuery(t *testing.T) {
	f := newFixture(t, nil)
	resp, err := f.srv.Client().Get(f.srv.URL + "/chain/authorization-state?network=eip155:1&asset=0x1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %s", resp.Status)
	}
	cc := &ChainClient{BaseURL: f.srv.URL + "/nowhere"}
	if _, err := cc.AuthorizationState(context.Background(), "eip155:1", evm.Address{}, evm.Address{}, [32]byte{}); err == nil {
		t.Fatal("a 404 read as an answer")
	}
}

func TestNewRefusesBadResources(t *testing.T) {
	for _, rs := range [][]Resource{
		{{Path: "/a", Amount: "1.5"}},
		{{Path: "/a", Scenario: "bogus"}},
		{{Path: "/a"}, {Path: "/a"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%+v: no panic", rs)
				}
			}()
			New(&Options{Resources: rs})
		}()
	}
}

// TestSettleThenDropOnReusedConnection records a fact the gate must know:
// on a reused keep-alive connection that breaks before any answer byte,
// Go's http.Transport resends a GET by itself. The fake settled the first
// copy and refuses the second as a used nonce, so the client sees 402 —
// not an error — although the money moved, once. A 402 after a signature
// left proves nothing; only the chain reader does.
func TestSettleThenDropOnReusedConnection(t *testing.T) {
	f := newFixture(t, nil)
	resp := f.do("/settle-then-drop", "")
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the connection goes back to the pool
	h := f.sign(requiredOf(t, resp), "int_reuse")
	paid := f.do("/settle-then-drop", h)
	if paid.StatusCode != http.StatusPaymentRequired || settlementOf(t, paid).ErrorReason != ReasonUsed {
		t.Fatalf("status %s, %+v", paid.Status, settlementOf(t, paid))
	}
	if n := f.fake.Requests("/settle-then-drop"); n != 3 {
		t.Fatalf("%d requests reached the fake, want 3 (the transport's resend included)", n)
	}
	if len(f.fake.Settlements()) != 1 || !f.state("int_reuse") {
		t.Fatal("not settled exactly once")
	}
}
