package x402

import (
	"encoding/base64"
	"strings"
	"testing"
)

// The decoders' fuzz property: any document, sent as a header, is refused
// or read; what is read encodes, and the encoding reads back to the same
// message. FuzzDecodeBase64 covers the header layer under the JSON.

func FuzzDecodePaymentRequired(f *testing.F) {
	f.Add(string(b64(f, specExamples(f)["payment-required"])))
	f.Add(required(offerJSON))
	f.Add(`{"x402Version":1,"accepts":[]}`)
	f.Fuzz(func(t *testing.T, doc string) {
		h := enc(doc)
		v, err := DecodePaymentRequired(h)
		if err != nil {
			return
		}
		again, err := EncodePaymentRequired(v)
		if err != nil {
			if len(h) > MaxHeaderBytes*3/4 {
				return // re-encoding may grow past the cap
			}
			t.Fatalf("encode: %v", err)
		}
		w, err := DecodePaymentRequired(again)
		if err != nil {
			t.Fatalf("re-decode %q: %v", again, err)
		}
		if !jsonEqual(t, v, w) {
			t.Fatalf("%+v != %+v", v, w)
		}
	})
}

func FuzzDecodePaymentPayload(f *testing.F) {
	f.Add(string(b64(f, specExamples(f)["payment-signature"])))
	f.Add(`{"x402Version":2,"accepted":` + offerJSON + `,"payload":{}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		h := enc(doc)
		v, err := DecodePaymentPayload(h)
		if err != nil {
			return
		}
		again, err := EncodePaymentPayload(v)
		if err != nil {
			if len(h) > MaxHeaderBytes*3/4 {
				return
			}
			t.Fatalf("encode: %v", err)
		}
		w, err := DecodePaymentPayload(again)
		if err != nil {
			t.Fatalf("re-decode %q: %v", again, err)
		}
		if !jsonEqual(t, v, w) {
			t.Fatalf("%+v != %+v", v, w)
		}
		if _, err := v.Payload.Authorization.Parse(); err != nil {
			t.Fatalf("decoded an authorization that does not parse: %v", err)
		}
	})
}

func FuzzDecodeSettlementResponse(f *testing.F) {
	ex := specExamples(f)
	f.Add(string(b64(f, ex["payment-response-success"])))
	f.Add(string(b64(f, ex["payment-response-failure"])))
	f.Fuzz(func(t *testing.T, doc string) {
		h := enc(doc)
		v, err := DecodeSettlementResponse(h)
		if err != nil {
			return
		}
		again, err := EncodeSettlementResponse(v)
		if err != nil {
			if len(h) > MaxHeaderBytes*3/4 {
				return
			}
			t.Fatalf("encode: %v", err)
		}
		w, err := DecodeSettlementResponse(again)
		if err != nil {
			t.Fatalf("re-decode %q: %v", again, err)
		}
		if !jsonEqual(t, v, w) {
			t.Fatalf("%+v != %+v", v, w)
		}
	})
}

// FuzzParseUint256: what is read prints back as it was written.
func FuzzParseUint256(f *testing.F) {
	for _, s := range []string{"0", "10000", "01", "-1", "1e3", "115792089237316195423570985008687907853269984665640564039457584007913129639936"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseUint256(s)
		if err == nil && n.String() != s {
			t.Fatalf("%q read as %s", s, n)
		}
	})
}

// FuzzDecodeBase64: a header value is read only if it is the standard
// encoding of what it decodes to, with or without its padding.
func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"eyJ4IjoxfQ==", "eyJ4IjoxfQ", "eyJ4IjoxfR==", "e-_x", "ab\ncd", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := decodeBase64(s)
		if err != nil {
			return
		}
		if std := base64.StdEncoding.EncodeToString(b); std != s && strings.TrimRight(std, "=") != s {
			t.Fatalf("%q read as %q, which encodes as %q", s, b, std)
		}
	})
}
