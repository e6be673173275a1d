package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// refMAC computes the signature independently of the package.
func refMAC(secret string, t int64, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10) + "." + body))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignFormat(t *testing.T) {
	at := time.Unix(1763805600, 999_000_000)
	body := `{"id":"evt_1_audit.appended"}`
	got := Sign([]byte(body), []string{"whsec_a", "whsec_b"}, at)
	want := "t=1763805600,v1=" + refMAC("whsec_a", 1763805600, body) + ",v1=" + refMAC("whsec_b", 1763805600, body)
	if got != want {
		t.Fatalf("Sign = %q\nwant %q", got, want)
	}
	if got := Sign([]byte(body), nil, at); got != "t=1763805600" {
		t.Fatalf("Sign with no secrets = %q", got)
	}
}

func TestVerify(t *testing.T) {
	now := time.Unix(1763805600, 0)
	body := []byte(`{"id":"evt_7_payment.settled","type":"payment.settled"}`)
	sig := func(at time.Time, secrets ...string) string { return Sign(body, secrets, at) }
	tests := []struct {
		name    string
		body    []byte
		header  string
		secrets []string
		tol     time.Duration
		now     time.Time
		want    error
	}{
		{"valid", body, sig(now, "whsec_1"), []string{"whsec_1"}, 0, now, nil},
		{"one of several secrets", body, sig(now, "whsec_new"), []string{"whsec_old", "whsec_new"}, 0, now, nil},
		{"one of several v1 values", body, sig(now, "whsec_x", "whsec_1"), []string{"whsec_1"}, 0, now, nil},
		{"tampered body", []byte(strings.Replace(string(body), "7", "8", 1)), sig(now, "whsec_1"), []string{"whsec_1"}, 0, now, ErrMismatch},
		{"body with trailing newline", append(append([]byte(nil), body...), '\n'), sig(now, "whsec_1"), []string{"whsec_1"}, 0, now, ErrMismatch},
		{"wrong secret", body, sig(now, "whsec_1"), []string{"whsec_2"}, 0, now, ErrMismatch},
		{"no secrets", body, sig(now, "whsec_1"), nil, 0, now, ErrMismatch},
		{"at the stale edge", body, sig(now.Add(-300*time.Second), "whsec_1"), []string{"whsec_1"}, 0, now, nil},
		{"stale", body, sig(now.Add(-301*time.Second), "whsec_1"), []string{"whsec_1"}, 0, now, ErrTimestamp},
		{"at the future edge", body, sig(now.Add(300*time.Second), "whsec_1"), []string{"whsec_1"}, 0, now, nil},
		{"future", body, sig(now.Add(301*time.Second), "whsec_1"), []string{"whsec_1"}, 0, now, ErrTimestamp},
		{"custom tolerance", body, sig(now.Add(-61*time.Second), "whsec_1"), []string{"whsec_1"}, time.Minute, now, ErrTimestamp},
		{"stale and wrong: mismatch first", body, sig(now.Add(-time.Hour), "whsec_1"), []string{"whsec_2"}, 0, now, ErrMismatch},
		{"empty header", body, "", []string{"whsec_1"}, 0, now, ErrNoSignature},
		{"no v1", body, "t=1763805600", []string{"whsec_1"}, 0, now, ErrNoSignature},
		{"only unknown scheme", body, "t=1763805600,v0=abc", []string{"whsec_1"}, 0, now, ErrNoSignature},
		{"unknown scheme beside v1", body, "t=1763805600,v0=abc," + strings.TrimPrefix(sig(now, "whsec_1"), "t=1763805600,"), []string{"whsec_1"}, 0, now, nil},
		{"no t", body, "v1=" + refMAC("whsec_1", now.Unix(), string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"two t", body, "t=1,t=1763805600,v1=" + refMAC("whsec_1", now.Unix(), string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"space", body, "t=1763805600, v1=" + refMAC("whsec_1", now.Unix(), string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"negative t", body, "t=-1,v1=" + refMAC("whsec_1", -1, string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"leading zero t", body, "t=01763805600,v1=" + refMAC("whsec_1", now.Unix(), string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"huge t", body, "t=99999999999999999999,v1=" + strings.Repeat("0", 64), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"short v1", body, "t=1763805600,v1=abcd", []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"non-hex v1", body, "t=1763805600,v1=" + strings.Repeat("z", 64), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"empty element", body, "t=1763805600,,v1=" + refMAC("whsec_1", now.Unix(), string(body)), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"no equals", body, "t=1763805600,v1", []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"too many v1", body, "t=1763805600" + strings.Repeat(",v1="+strings.Repeat("0", 64), 17), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"too long", body, "t=1763805600,x=" + strings.Repeat("a", 5000), []string{"whsec_1"}, 0, now, ErrBadHeader},
		{"uppercase keys", body, strings.ToUpper(sig(now, "whsec_1")), []string{"whsec_1"}, 0, now, ErrBadHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.body, tt.header, tt.secrets, tt.tol, tt.now)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestVerifyUppercaseHex(t *testing.T) {
	now := time.Unix(1763805600, 0)
	body := []byte(`{}`)
	h := "t=1763805600,v1=" + strings.ToUpper(refMAC("whsec_1", now.Unix(), string(body)))
	if err := Verify(body, h, []string{"whsec_1"}, 0, now); err != nil {
		t.Fatalf("uppercase hex: %v", err)
	}
}

func TestSignedTestPayload(t *testing.T) {
	now := time.Unix(1763805600, 0)
	body := []byte(`{"id":"evt_3_gate.decision","type":"gate.decision"}`)
	p := SignedTestPayload(body, "whsec_test", now)
	if err := Verify(p.Body, p.Header, []string{"whsec_test"}, 0, now); err != nil {
		t.Fatal(err)
	}
	req, err := p.Request("http://127.0.0.1:1/hook")
	if err != nil {
		t.Fatal(err)
	}
	if req.Header.Get(EventIDHeader) != "evt_3_gate.decision" || req.Header.Get(EventTypeHeader) != "gate.decision" ||
		req.Header.Get(SignatureHeader) != p.Header || req.Method != "POST" {
		t.Fatalf("request headers %v", req.Header)
	}
}

// FuzzParseSignatureHeader checks that parsing never panics, that Verify
// never panics, and that whatever parses re-formats to a header that
// parses to the same values.
func FuzzParseSignatureHeader(f *testing.F) {
	now := time.Unix(1763805600, 0)
	f.Add(Sign([]byte("{}"), []string{"whsec_1"}, now))
	f.Add(Sign([]byte("{}"), []string{"whsec_1", "whsec_2"}, now))
	f.Add("t=1763805600,v0=abc,v1=" + strings.Repeat("ab", 32))
	f.Add("")
	f.Add("t=,v1=")
	f.Add("t=1,t=2")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parseHeader(s)
		_ = Verify([]byte("{}"), s, []string{"whsec_1"}, 0, now)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) && !errors.Is(err, ErrNoSignature) {
				t.Fatalf("parseHeader(%q) = %v: not a documented error", s, err)
			}
			return
		}
		if h.t < 0 || h.t > maxTimestamp || len(h.v1) == 0 || len(h.v1) > maxSignatures {
			t.Fatalf("parseHeader(%q) = %+v: out of bounds", s, h)
		}
		re := "t=" + strconv.FormatInt(h.t, 10)
		for _, v := range h.v1 {
			if len(v) != sha256.Size {
				t.Fatalf("v1 of %d bytes", len(v))
			}
			re += ",v1=" + hex.EncodeToString(v)
		}
		h2, err := parseHeader(re)
		if err != nil || h2.t != h.t || len(h2.v1) != len(h.v1) {
			t.Fatalf("round trip of %q via %q: %+v, %v", s, re, h2, err)
		}
		for i := range h.v1 {
			if !hmac.Equal(h.v1[i], h2.v1[i]) {
				t.Fatalf("round trip changed v1[%d]", i)
			}
		}
	})
}
