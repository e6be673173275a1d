package operator_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign/operator"
	"github.com/google/go-cmp/cmp"
)

// A signature-shaped byte sequence and a 16-byte nonce for header tests.
var (
	sig64    = bytes.Repeat([]byte{0xab}, 64)
	sig64b64 = base64.StdEncoding.EncodeToString(sig64)
	nonce16  = base64.RawURLEncoding.EncodeToString([]byte("0123456789abcdef")) // MDEyMzQ1Njc4OWFiY2RlZg
)

func TestParseHeader(t *testing.T) {
	want := operator.Header{KeyID: "op-alice", Timestamp: 1763800000, Nonce: nonce16, Signature: sig64}
	tests := []struct {
		name string
		in   string
		want operator.Header
	}{
		{"canonical", `keyid="op-alice", ts=1763800000, nonce="` + nonce16 + `", sig=:` + sig64b64 + `:`, want},
		{"any order", `sig=:` + sig64b64 + `:, nonce="` + nonce16 + `", ts=1763800000, keyid="op-alice"`, want},
		{"no spaces", `keyid="op-alice",ts=1763800000,nonce="` + nonce16 + `",sig=:` + sig64b64 + `:`, want},
		{"tabs and spaces", "  keyid=\"op-alice\"\t,\t ts=1763800000 , nonce=\"" + nonce16 + "\",sig=:" + sig64b64 + ":\t ", want},
		{"leading zeros in ts", `keyid="op-alice", ts=0001763800000, nonce="` + nonce16 + `", sig=:` + sig64b64 + `:`, want},
		{"escaped keyid", `keyid="op\"q\\", ts=1, nonce="` + nonce16 + `", sig=:` + sig64b64 + `:`,
			operator.Header{KeyID: `op"q\`, Timestamp: 1, Nonce: nonce16, Signature: sig64}},
		{"negative ts (stale, not malformed)", `keyid="k", ts=-5, nonce="` + nonce16 + `", sig=:AA==:`,
			operator.Header{KeyID: "k", Timestamp: -5, Nonce: nonce16, Signature: []byte{0}}},
		{"largest ts", `keyid="k", ts=999999999999999, nonce="` + nonce16 + `", sig=:AA==:`,
			operator.Header{KeyID: "k", Timestamp: 999999999999999, Nonce: nonce16, Signature: []byte{0}}},
		{"64-byte nonce", `keyid="k", ts=1, nonce="` + strings.Repeat("A", 85) + `Q", sig=:AA==:`,
			operator.Header{KeyID: "k", Timestamp: 1, Nonce: strings.Repeat("A", 85) + "Q", Signature: []byte{0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := operator.ParseHeader(tt.in)
			if err != nil {
				t.Fatalf("ParseHeader: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseHeader (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	ok := map[string]string{
		"keyid": `keyid="op-alice"`,
		"ts":    `ts=1763800000`,
		"nonce": `nonce="` + nonce16 + `"`,
		"sig":   `sig=:` + sig64b64 + `:`,
	}
	// with returns a header of the four good members, member k replaced by
	// v ("" drops it), plus any extra members.
	with := func(k, v string, extra ...string) string {
		var ms []string
		for _, name := range []string{"keyid", "ts", "nonce", "sig"} {
			switch {
			case name != k:
				ms = append(ms, ok[name])
			case v != "":
				ms = append(ms, v)
			}
		}
		return strings.Join(append(ms, extra...), ", ")
	}
	tests := []struct {
		name, in, msg string
	}{
		{"empty", "", "keyid is missing"},
		{"not a dictionary", "Signature keyId=x", "not an RFC 8941 dictionary"},
		{"missing keyid", with("keyid", ""), "keyid is missing"},
		{"missing ts", with("ts", ""), "ts is missing"},
		{"missing nonce", with("nonce", ""), "nonce is missing"},
		{"missing sig", with("sig", ""), "sig is missing"},
		{"unknown member", with("", "", "alg=ed25519"), `unknown member "alg"`},
		{"unknown bare member", with("", "", "x"), `unknown member "x"`},
		{"duplicate member", with("", "", `keyid="op-bob"`), "given twice"},
		{"duplicate identical member", with("", "", `ts=1763800000`), "given twice"},
		{"parameter on sig", with("sig", `sig=:`+sig64b64+`:;alg=x`), "parameters"},
		{"keyid as token", with("keyid", `keyid=op-alice`), "keyid must be a string, not a token"},
		{"keyid empty", with("keyid", `keyid=""`), "keyid must be 1 to 128"},
		{"keyid with space", with("keyid", `keyid="op alice"`), "visible ASCII"},
		{"keyid too long", with("keyid", `keyid="`+strings.Repeat("k", 129)+`"`), "keyid must be 1 to 128"},
		{"ts as string", with("ts", `ts="1763800000"`), "ts must be an integer, not a string"},
		{"ts decimal", with("ts", `ts=1763800000.5`), "decimals"},
		{"ts 16 digits", with("ts", `ts=1000000000000000`), "more than 15 digits"},
		{"ts boolean", with("ts", `ts`), "ts must be an integer, not a boolean"},
		{"nonce as bytes", with("nonce", `nonce=:`+base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))+`:`), "nonce must be a string"},
		{"nonce padded", with("nonce", `nonce="`+nonce16+`=="`), "canonical base64url"},
		{"nonce standard alphabet", with("nonce", `nonce="ab+/ab+/ab+/ab+/ab+/ab"`), "canonical base64url"},
		{"nonce non-zero pad bits", with("nonce", `nonce="MDEyMzQ1Njc4OWFiY2RlZh"`), "canonical base64url"},
		{"nonce 15 bytes", with("nonce", `nonce="`+base64.RawURLEncoding.EncodeToString(make([]byte, 15))+`"`), "not 15"},
		{"nonce 65 bytes", with("nonce", `nonce="`+base64.RawURLEncoding.EncodeToString(make([]byte, 65))+`"`), "nonce must encode 16 to 64"},
		{"nonce huge", with("nonce", `nonce="`+strings.Repeat("A", 2000)+`"`), "nonce must encode 16 to 64"},
		{"sig as string", with("sig", `sig="`+sig64b64+`"`), "sig must be a byte sequence"},
		{"sig empty", with("sig", `sig=::`), "sig must be 1 to 512"},
		{"sig too long", with("sig", `sig=:`+base64.StdEncoding.EncodeToString(make([]byte, 513))+`:`), "sig must be 1 to 512"},
		{"sig base64url", with("sig", `sig=:q6ur-_:`), "outside base64"},
		{"sig unpadded", with("sig", `sig=:AA:`), "canonical"},
		{"longer than the cap", with("", "", "x=\""+strings.Repeat("a", operator.MaxHeaderLen)+"\""), "longer than 4096"},
		{"trailing comma", with("", "") + ",", "trailing comma"},
		{"non-ASCII", with("keyid", `keyid="öp"`), "outside ASCII"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := operator.ParseHeader(tt.in)
			if err == nil {
				t.Fatalf("ParseHeader(%q) = %+v, want an error", tt.in, h)
			}
			if !errors.Is(err, operator.ErrMalformedHeader) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParseHeader(%.80q) = %v\nwant ErrMalformedHeader with %q", tt.in, err, tt.msg)
			}
		})
	}
}

func TestHeaderMarshalText(t *testing.T) {
	h := operator.Header{KeyID: `op-"alice"`, Timestamp: 1763800000, Nonce: nonce16, Signature: []byte("hi")}
	b, err := h.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	const want = `keyid="op-\"alice\"", ts=1763800000, nonce="MDEyMzQ1Njc4OWFiY2RlZg", sig=:aGk=:`
	if string(b) != want {
		t.Errorf("MarshalText = %s\nwant          %s", b, want)
	}
	var back operator.Header
	if err := back.UnmarshalText(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if err := back.UnmarshalText([]byte("ts=1")); !errors.Is(err, operator.ErrMalformedHeader) {
		t.Errorf("UnmarshalText(bad) = %v", err)
	}

	for name, bad := range map[string]operator.Header{
		"no keyid":       {Timestamp: 1, Nonce: nonce16, Signature: sig64},
		"keyid with tab": {KeyID: "a\tb", Timestamp: 1, Nonce: nonce16, Signature: sig64},
		"ts too large":   {KeyID: "k", Timestamp: 1e15, Nonce: nonce16, Signature: sig64},
		"short nonce":    {KeyID: "k", Timestamp: 1, Nonce: "AAAA", Signature: sig64},
		"nonce with \n":  {KeyID: "k", Timestamp: 1, Nonce: nonce16 + "\n", Signature: sig64},
		"no sig":         {KeyID: "k", Timestamp: 1, Nonce: nonce16},
	} {
		if b, err := bad.MarshalText(); !errors.Is(err, operator.ErrMalformedHeader) {
			t.Errorf("%s: MarshalText = %q, %v; want ErrMalformedHeader", name, b, err)
		}
	}
}

// FuzzParseHeader: ParseHeader never panics, and any header it accepts
// marshals to text that parses back to the same Header.
func FuzzParseHeader(f *testing.F) {
	f.Add(`keyid="op-alice", ts=1763800000, nonce="` + nonce16 + `", sig=:` + sig64b64 + `:`)
	f.Add(`sig=:AA==:,nonce="` + nonce16 + `",ts=-0,keyid="a\"b"`)
	f.Add(`keyid="k", ts=1, nonce="x", sig=:AA==:;a=1`)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := operator.ParseHeader(s)
		if err != nil {
			if !errors.Is(err, operator.ErrMalformedHeader) {
				t.Fatalf("ParseHeader(%q) = %v, not ErrMalformedHeader", s, err)
			}
			return
		}
		b, err := h.MarshalText()
		if err != nil {
			t.Fatalf("ParseHeader(%q) = %+v, which does not marshal: %v", s, h, err)
		}
		back, err := operator.ParseHeader(string(b))
		if err != nil {
			t.Fatalf("%q → %q does not parse: %v", s, b, err)
		}
		if diff := cmp.Diff(h, back); diff != "" {
			t.Fatalf("%q → %q changed the header (-first +second):\n%s", s, b, diff)
		}
	})
}
