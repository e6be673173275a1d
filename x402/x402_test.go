package x402

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/x402/evm"
)

// specExamples reads testdata/spec-examples.txt: the header values of
// transports-v2/http.md.
func specExamples(t testing.TB) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/spec-examples.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, v, _ := strings.Cut(line, " ")
		out[name] = v
	}
	return out
}

func TestSpecExamples(t *testing.T) {
	ex := specExamples(t)
	pr, err := DecodePaymentRequired(ex["payment-required"])
	if err != nil {
		t.Fatal(err)
	}
	if pr.X402Version != 2 || pr.Error != "PAYMENT-SIGNATURE header is required" ||
		pr.Resource.URL != "https://api.example.com/premium-data" || pr.Resource.MimeType != "application/json" ||
		len(pr.Accepts) != 1 {
		t.Fatalf("PaymentRequired = %+v", pr)
	}
	x, err := ParseExactEVM(pr.Accepts[0])
	if err != nil {
		t.Fatal(err)
	}
	if x.ChainID.Int64() != 84532 || x.Amount.Int64() != 10000 || x.Domain.Name != "USDC" || x.Domain.Version != "2" ||
		x.Asset.String() != "0x036CbD53842c5426634e7929541eC2318f3dCF7e" || x.PayTo.String() != "0x209693Bc6afc0C5328bA36FaF03C514EF312287C" ||
		x.MaxTimeout != time.Minute {
		t.Fatalf("ExactEVM = %+v", x)
	}

	pp, err := DecodePaymentPayload(ex["payment-signature"])
	if err != nil {
		t.Fatal(err)
	}
	a := pp.Payload.Authorization
	if a.From != "0x857b06519E91e3A54538791bDbb0E22373e36b66" || a.Value != "10000" || a.ValidAfter != "1740672089" ||
		a.ValidBefore != "1740672154" || pp.Resource == nil || pp.Accepted.Amount != "10000" {
		t.Fatalf("PaymentPayload = %+v", pp)
	}

	ok, err := DecodeSettlementResponse(ex["payment-response-success"])
	if err != nil || !ok.Success || ok.Network != "eip155:84532" || ok.Payer != a.From ||
		ok.Transaction != "0x1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef" {
		t.Fatalf("success = %+v, %v", ok, err)
	}
	bad, err := DecodeSettlementResponse(ex["payment-response-failure"])
	if err != nil || bad.Success || bad.ErrorReason != "insufficient_funds" || bad.Transaction != "" {
		t.Fatalf("failure = %+v, %v", bad, err)
	}
}

// TestRoundTrip: what the encoders write, the decoders read back equal,
// and re-encoding gives the same header.
func TestRoundTrip(t *testing.T) {
	ex := specExamples(t)
	for _, name := range []string{"payment-required", "payment-signature", "payment-response-success", "payment-response-failure"} {
		h := ex[name]
		var again string
		var err error
		switch {
		case strings.HasPrefix(name, "payment-required"):
			v, _ := DecodePaymentRequired(h)
			again, err = EncodePaymentRequired(v)
			if err == nil {
				var w PaymentRequired
				w, err = DecodePaymentRequired(again)
				if err == nil && !jsonEqual(t, v, w) {
					t.Errorf("%s: %+v != %+v", name, v, w)
				}
			}
		case strings.HasPrefix(name, "payment-signature"):
			v, _ := DecodePaymentPayload(h)
			again, err = EncodePaymentPayload(v)
			if err == nil {
				var w PaymentPayload
				w, err = DecodePaymentPayload(again)
				if err == nil && !jsonEqual(t, v, w) {
					t.Errorf("%s: %+v != %+v", name, v, w)
				}
			}
		default:
			v, _ := DecodeSettlementResponse(h)
			again, err = EncodeSettlementResponse(v)
			if err == nil {
				var w SettlementResponse
				w, err = DecodeSettlementResponse(again)
				if err == nil && !jsonEqual(t, v, w) {
					t.Errorf("%s: %+v != %+v", name, v, w)
				}
			}
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// The same JSON document, whatever the member order.
		if !jsonEqual(t, b64(t, h), b64(t, again)) {
			t.Errorf("%s: re-encoded JSON differs:\n%s\n%s", name, b64(t, h), b64(t, again))
		}
	}
}

func b64(t testing.TB, s string) json.RawMessage {
	b, err := decodeBase64(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonEqual(t testing.TB, a, b any) bool {
	t.Helper()
	norm := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var x any
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(x)
		return string(b)
	}
	return norm(a) == norm(b)
}

func enc(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

const offerJSON = `{"scheme":"exact","network":"eip155:84532","amount":"10000","asset":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","payTo":"0x209693Bc6afc0C5328bA36FaF03C514EF312287C","maxTimeoutSeconds":60,"extra":{"name":"USDC","version":"2"}}`

func required(offer string) string {
	return `{"x402Version":2,"resource":{"url":"https://api.example.com/x"},"accepts":[` + offer + `]}`
}

func TestDecodePaymentRequiredRefuses(t *testing.T) {
	long := strings.Repeat("A", MaxHeaderBytes+4)
	cases := []struct {
		name, header string
		want         error
		contains     string
	}{
		{"empty", "", ErrHeaderEncoding, "empty"},
		{"too large", long, ErrHeaderTooLarge, ""},
		{"url alphabet", strings.NewReplacer("+", "-", "/", "_").Replace(enc(required(offerJSON) + "??>>")), ErrHeaderEncoding, "alphabet"},
		{"line break", enc(required(offerJSON))[:40] + "\n" + enc(required(offerJSON))[40:], ErrHeaderEncoding, "alphabet"},
		{"not json", enc("{"), ErrMalformed, "not JSON"},
		{"not object", enc(`[1]`), ErrMalformed, "not a JSON object"},
		{"bad utf8", enc("{\"x402Version\":2,\"error\":\"\xff\"}"), ErrMalformed, "UTF-8"},
		{"duplicate member", enc(`{"x402Version":2,"x402Version":1,"resource":{"url":"u"},"accepts":[]}`), ErrMalformed, "appears twice"},
		{"version 1", enc(`{"x402Version":1,"accepts":[]}`), ErrVersion1, "version 1"},
		{"version 3", enc(`{"x402Version":3,"resource":{"url":"u"},"accepts":[]}`), ErrVersion, "3"},
		{"version 2.0", enc(`{"x402Version":2.0,"resource":{"url":"u"},"accepts":[]}`), ErrMalformed, "x402Version"},
		{"version string", enc(`{"x402Version":"2","resource":{"url":"u"},"accepts":[]}`), ErrMalformed, "x402Version"},
		{"no version", enc(`{"resource":{"url":"u"},"accepts":[]}`), ErrMissingRequired, "x402Version"},
		{"no resource", enc(`{"x402Version":2,"accepts":[]}`), ErrMissingRequired, "resource"},
		{"empty url", enc(`{"x402Version":2,"resource":{"url":""},"accepts":[]}`), ErrMalformed, "resource.url"},
		{"no accepts", enc(`{"x402Version":2,"resource":{"url":"u"}}`), ErrMissingRequired, "accepts"},
		{"accepts null", enc(`{"x402Version":2,"resource":{"url":"u"},"accepts":null}`), ErrMalformed, "accepts"},
		{"amount signed", enc(required(strings.Replace(offerJSON, `"10000"`, `"+10000"`, 1))), ErrMalformed, "accepts[0].amount"},
		{"amount leading zero", enc(required(strings.Replace(offerJSON, `"10000"`, `"010000"`, 1))), ErrMalformed, "amount"},
		{"amount exponent", enc(required(strings.Replace(offerJSON, `"10000"`, `"1e4"`, 1))), ErrMalformed, "amount"},
		{"amount number", enc(required(strings.Replace(offerJSON, `"10000"`, `10000`, 1))), ErrMalformed, "amount"},
		{"amount over uint256", enc(required(strings.Replace(offerJSON, `"10000"`, `"115792089237316195423570985008687907853269984665640564039457584007913129639936"`, 1))), ErrMalformed, "2^256"},
		{"amount empty", enc(required(strings.Replace(offerJSON, `"10000"`, `""`, 1))), ErrMalformed, "amount"},
		{"network not caip2", enc(required(strings.Replace(offerJSON, `"eip155:84532"`, `"base-sepolia"`, 1))), ErrMalformed, "network"},
		{"timeout negative", enc(required(strings.Replace(offerJSON, `:60`, `:-60`, 1))), ErrMalformed, "maxTimeoutSeconds"},
		{"timeout fraction", enc(required(strings.Replace(offerJSON, `:60`, `:60.5`, 1))), ErrMalformed, "maxTimeoutSeconds"},
		{"no payTo", enc(required(strings.Replace(offerJSON, `"payTo"`, `"pay_to"`, 1))), ErrMissingRequired, "payTo"},
		{"extra not object", enc(required(strings.Replace(offerJSON, `{"name":"USDC","version":"2"}`, `"USDC"`, 1))), ErrMalformed, "extra"},
		{"too deep", enc(`{"x402Version":2,"resource":{"url":"u"},"accepts":[],"extensions":` + strings.Repeat(`{"a":`, 20) + `1` + strings.Repeat(`}`, 20) + `}`), ErrMalformed, "deep"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodePaymentRequired(c.header)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.contains) {
				t.Fatalf("err = %v, want %v containing %q", err, c.want, c.contains)
			}
		})
	}
}

func TestDecodeBase64Forms(t *testing.T) {
	doc := required(offerJSON) + " " // 1 byte more, so padding is needed
	padded := enc(doc)
	if !strings.HasSuffix(padded, "=") {
		t.Fatal("test document needs padding")
	}
	for _, h := range []string{padded, strings.TrimRight(padded, "=")} {
		if _, err := DecodePaymentRequired(h); err != nil {
			t.Errorf("%q…: %v", h[len(h)-8:], err)
		}
	}
	// Non-canonical trailing bits are refused: one header, one meaning.
	nc := []byte(strings.TrimRight(padded, "="))
	nc[len(nc)-1]++
	if _, err := DecodePaymentRequired(string(nc)); !errors.Is(err, ErrHeaderEncoding) {
		t.Errorf("non-canonical: %v", err)
	}
}

func TestParseExactEVMRefuses(t *testing.T) {
	base := func() PaymentRequirements {
		var r PaymentRequirements
		if err := json.Unmarshal([]byte(offerJSON), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	cases := []struct {
		check string
		edit  func(*PaymentRequirements)
	}{
		{"scheme", func(r *PaymentRequirements) { r.Scheme = "upto" }},
		{"network", func(r *PaymentRequirements) { r.Network = "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp" }},
		{"network", func(r *PaymentRequirements) { r.Network = "eip155:0" }},
		{"asset", func(r *PaymentRequirements) { r.Asset = "0x036CbD53842c5426634e7929541eC2318f3dCF7E" }}, // checksum
		{"payTo", func(r *PaymentRequirements) { r.PayTo = "merchant" }},
		{"amount", func(r *PaymentRequirements) { r.Amount = "0" }},
		{"maxTimeoutSeconds", func(r *PaymentRequirements) { r.MaxTimeoutSeconds = 0 }},
		{"extra.name", func(r *PaymentRequirements) { delete(r.Extra, "name") }},
		{"extra.version", func(r *PaymentRequirements) { r.Extra["version"] = json.RawMessage(`2`) }},
		{"extra.assetTransferMethod", func(r *PaymentRequirements) { r.Extra["assetTransferMethod"] = json.RawMessage(`"permit2"`) }},
		{"other", func(r *PaymentRequirements) { r.Other = map[string]json.RawMessage{"fee": json.RawMessage(`"1"`)} }},
	}
	for _, c := range cases {
		r := base()
		c.edit(&r)
		_, err := ParseExactEVM(r)
		var oe *OfferError
		if !errors.As(err, &oe) || oe.Check != c.check {
			t.Errorf("%s: err = %v", c.check, err)
		}
	}
	r := base()
	r.Extra["assetTransferMethod"] = json.RawMessage(`"eip3009"`)
	if _, err := ParseExactEVM(r); err != nil {
		t.Errorf("eip3009 method: %v", err)
	}
}

// TestOtherMembersEchoed: an offer's members the specification does not
// define survive decode and encode, so a payload echoes what was offered.
func TestOtherMembersEchoed(t *testing.T) {
	offer := strings.Replace(offerJSON, `"scheme"`, `"note":{"k":[1,2]},"scheme"`, 1)
	offer = strings.Replace(offer, `"version":"2"`, `"version":"2","assetTransferMethod":"eip3009","x":null`, 1)
	pr, err := DecodePaymentRequired(enc(required(offer)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(pr.Accepts[0])
	if !jsonEqual(t, json.RawMessage(b), json.RawMessage(offer)) {
		t.Fatalf("echo %s, offered %s", b, offer)
	}
}

func testKey(t testing.TB) *evm.Key {
	k, err := evm.ParseKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSignVerifyExactEVM(t *testing.T) {
	var r PaymentRequirements
	if err := json.Unmarshal([]byte(offerJSON), &r); err != nil {
		t.Fatal(err)
	}
	key := testKey(t)
	now := time.Unix(1_800_000_000, 0)
	nonce := NonceFromID("int_01J0000000000000000000000")
	p, err := SignExactEVM(r, &ResourceInfo{URL: "https://api.example.com/x"}, key, nonce, now.Add(-10*time.Minute), now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	h, err := EncodePaymentPayload(p)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := SignExactEVM(r, &ResourceInfo{URL: "https://api.example.com/x"}, key, nonce, now.Add(-10*time.Minute), now.Add(time.Minute))
	if h2, _ := EncodePaymentPayload(p2); h2 != h {
		t.Fatal("signing twice gave different bytes")
	}
	got, err := DecodePaymentPayload(h)
	if err != nil {
		t.Fatal(err)
	}
	payer, auth, err := VerifyExactEVM(got, r, now)
	if err != nil {
		t.Fatal(err)
	}
	if payer != key.Address() || auth.Nonce != nonce || auth.Value.Int64() != 10000 {
		t.Fatalf("payer %s auth %+v", payer, auth)
	}

	other, _ := evm.GenerateKey()
	cases := []struct {
		reason string
		edit   func(p *PaymentPayload, r *PaymentRequirements, now *time.Time)
	}{
		{ReasonValidAfter, func(_ *PaymentPayload, _ *PaymentRequirements, n *time.Time) { *n = now.Add(-10 * time.Minute) }},
		{ReasonValidBefore, func(_ *PaymentPayload, _ *PaymentRequirements, n *time.Time) { *n = now.Add(time.Minute) }},
		{ReasonValidBefore, func(_ *PaymentPayload, r *PaymentRequirements, _ *time.Time) {
			// The offer now allows 30 s; the signed window is 60 s from now.
			r.MaxTimeoutSeconds = 30
		}},
		{ReasonValueMismatch, func(_ *PaymentPayload, r *PaymentRequirements, _ *time.Time) { r.Amount = "20000" }},
		{ReasonSignature, func(p *PaymentPayload, _ *PaymentRequirements, _ *time.Time) { p.Payload.Authorization.Value = "9999" }},
		{ReasonRecipientMismatch, func(_ *PaymentPayload, r *PaymentRequirements, _ *time.Time) { r.PayTo = other.Address().String() }},
		{ReasonSignature, func(p *PaymentPayload, _ *PaymentRequirements, _ *time.Time) {
			p.Payload.Authorization.From = other.Address().String()
		}},
		{ReasonSignature, func(p *PaymentPayload, _ *PaymentRequirements, _ *time.Time) {
			p.Payload.Authorization.Nonce = "0x" + strings.Repeat("00", 32)
		}},
		{ReasonInvalidPayload, func(_ *PaymentPayload, r *PaymentRequirements, _ *time.Time) {
			r.Extra = map[string]json.RawMessage{"name": json.RawMessage(`"USD Coin"`), "version": json.RawMessage(`"2"`)}
		}},
		{ReasonInvalidNetwork, func(_ *PaymentPayload, r *PaymentRequirements, _ *time.Time) { r.Network = "eip155:8453" }},
	}
	for i, c := range cases {
		p := got
		p.Accepted.Extra = map[string]json.RawMessage{}
		for k, v := range got.Accepted.Extra {
			p.Accepted.Extra[k] = v
		}
		rr := r
		n := now
		c.edit(&p, &rr, &n)
		_, _, err := VerifyExactEVM(p, rr, n)
		var ve *VerifyError
		if !errors.As(err, &ve) || ve.Reason != c.reason {
			t.Errorf("case %d: err = %v, want %s", i, err, c.reason)
		}
	}
}

func TestDecodePaymentPayloadRefuses(t *testing.T) {
	ex := specExamples(t)
	doc := string(b64(t, ex["payment-signature"]))
	cases := []struct{ name, from, to, contains string }{
		{"permit2 shape", `"authorization"`, `"permit2Authorization"`, "permit2Authorization"},
		{"short nonce", `"0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"`, `"0xf374"`, "nonce"},
		{"nonce not hex", `"0xf3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"`, `"0xg3746613c2d920b5fdabc0856f2aeb2d4f88ee6037b8cc5d04a71a4462f13480"`, "nonce"},
		{"bad checksum", `0x857b06519E91e3A54538791bDbb0E22373e36b66`, `0x857b06519E91e3A54538791bDbb0E22373e36B66`, "checksum"},
		{"value signed", `"value":"10000"`, `"value":"-10000"`, "value"},
		{"short signature", `"signature":"0x2d6a`, `"signature":"0x2d`, "signature"},
		{"unknown payload member", `"signature":`, `"v":27,"signature":`, "payload.v"},
		{"version 1", `{"x402Version":2`, `{"x402Version":1`, "version 1"},
	}
	for _, c := range cases {
		if !strings.Contains(doc, c.from) {
			t.Fatalf("%s: %q not in the example", c.name, c.from)
		}
		_, err := DecodePaymentPayload(enc(strings.Replace(doc, c.from, c.to, 1)))
		if err == nil || !strings.Contains(err.Error(), c.contains) {
			t.Errorf("%s: err = %v, want it to mention %q", c.name, err, c.contains)
		}
	}
}

func TestDecodeSettlementResponseRefuses(t *testing.T) {
	for _, doc := range []string{
		`{"transaction":"","network":"eip155:1"}`,
		`{"success":"true","transaction":"","network":"eip155:1"}`,
		`{"success":null,"transaction":"","network":"eip155:1"}`,
		`{"success":true,"network":"eip155:1"}`,
		`{"success":true,"transaction":"0x1"}`,
		`{"success":true,"transaction":"0x1","network":"eip155:1","amount":"1.5"}`,
	} {
		if _, err := DecodeSettlementResponse(enc(doc)); err == nil {
			t.Errorf("%s: accepted", doc)
		}
	}
}

func TestAuthorizationStateCalldata(t *testing.T) {
	a, _ := evm.ParseAddress("0x857b06519E91e3A54538791bDbb0E22373e36b66")
	var n [32]byte
	n[31] = 7
	c := AuthorizationStateCalldata(a, n)
	if len(c) != 68 || c[0] != 0xe9 || c[1] != 0x4a || c[2] != 0x01 || c[3] != 0x02 || c[16] != 0x85 || c[67] != 7 {
		t.Fatalf("calldata %x", c)
	}
}

func TestNonceFromID(t *testing.T) {
	a, again := NonceFromID("a"), NonceFromID("a")
	if a == NonceFromID("b") || a != again {
		t.Fatal("nonces are not a function of the id")
	}
}

func TestParseUint256(t *testing.T) {
	for s, ok := range map[string]bool{"0": true, "1": true, "00": false, "01": false, "-1": false, "+1": false,
		"1e3": false, " 1": false, "": false, "0x1": false,
		"115792089237316195423570985008687907853269984665640564039457584007913129639935": true,
		"115792089237316195423570985008687907853269984665640564039457584007913129639936": false} {
		n, err := ParseUint256(s)
		if (err == nil) != ok {
			t.Errorf("%q: %v", s, err)
		}
		if ok && n.Cmp(new(big.Int).SetBytes(nil)) < 0 {
			t.Errorf("%q negative", s)
		}
	}
}

func TestEncodersWriteVersion2Only(t *testing.T) {
	if _, err := EncodePaymentRequired(PaymentRequired{X402Version: 1, Resource: ResourceInfo{URL: "u"}}); !errors.Is(err, ErrVersion) {
		t.Errorf("PaymentRequired v1: %v", err)
	}
	if _, err := EncodePaymentPayload(PaymentPayload{X402Version: 3}); !errors.Is(err, ErrVersion) {
		t.Errorf("PaymentPayload v3: %v", err)
	}
}

func TestPaymentRequiredFrom(t *testing.T) {
	ex := specExamples(t)
	h := http.Header{}
	h.Set(HeaderPaymentRequired, ex["payment-required"])
	if pr, err := PaymentRequiredFrom(h, nil); err != nil || len(pr.Accepts) != 1 {
		t.Fatalf("header: %v", err)
	}
	h.Add(HeaderPaymentRequired, ex["payment-required"])
	if _, err := PaymentRequiredFrom(h, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("twice: %v", err)
	}
	v1 := `{"x402Version":1,"error":"X-PAYMENT header is required","accepts":[{"scheme":"exact","network":"base-sepolia"}]}`
	if _, err := PaymentRequiredFrom(http.Header{}, []byte(v1)); !errors.Is(err, ErrVersion1) {
		t.Errorf("v1 body: %v", err)
	}
	if _, err := PaymentRequiredFrom(http.Header{}, []byte(`{}`)); !errors.Is(err, ErrMissingRequired) {
		t.Errorf("nothing: %v", err)
	}
}

func TestSettlementFrom(t *testing.T) {
	ex := specExamples(t)
	if _, ok, err := SettlementFrom(http.Header{}); ok || err != nil {
		t.Errorf("none: %v %v", ok, err)
	}
	h := http.Header{}
	h.Set(HeaderPaymentResponse, ex["payment-response-success"])
	if s, ok, err := SettlementFrom(h); !ok || err != nil || !s.Success {
		t.Errorf("one: %v %v", ok, err)
	}
	h.Add(HeaderPaymentResponse, ex["payment-response-failure"])
	if _, ok, err := SettlementFrom(h); ok || !errors.Is(err, ErrMalformed) {
		t.Errorf("two: %v %v", ok, err)
	}
}

func TestSameOrigin(t *testing.T) {
	asked, _ := url.Parse("https://api.example.com/premium-data?q=1")
	for u, want := range map[string]bool{
		"https://api.example.com/premium-data":      true,
		"https://API.example.com:443/other":         true,
		"https://api.example.com:8443/premium-data": false,
		"http://api.example.com/premium-data":       false,
		"https://api.example.com.evil/premium-data": false,
		"https://user@api.example.com/premium-data": false,
		"/premium-data":   false,
		"mailto:a@b":      false,
		"https://[::1]/x": false,
		"":                false,
	} {
		if got := SameOrigin(u, asked); got != want {
			t.Errorf("%q: %v", u, got)
		}
	}
}
