package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex>[,v1=<hex>...]".
	SignatureHeader = "Svc-Signature"
	// EventIDHeader carries the event id, so a receiver can drop a
	// duplicate before reading the body.
	EventIDHeader = "Svc-Event-Id"
	// EventTypeHeader carries the event kind.
	EventTypeHeader = "Svc-Event-Type"
)

// DefaultTolerance is how far a delivery's signed timestamp may be from the
// receiver's clock, either way, when Verify is given a tolerance ≤ 0. It
// is Stripe's default too.
const DefaultTolerance = 300 * time.Second

// Limits of the signature header parser. A header longer than
// maxHeaderLen, or with more than maxSignatures v1 values, is refused
// before any HMAC is computed, so a hostile header cannot make Verify do
// unbounded work.
const (
	maxHeaderLen  = 4096
	maxSignatures = 16
)

// Errors returned by Verify. Check with errors.Is.
var (
	// ErrNoSignature: the header is empty or carries no v1 signature.
	ErrNoSignature = errors.New("webhook: no signature")
	// ErrBadHeader: the header is not of the form
	// "t=<unix seconds>,v1=<64 hex digits>[,...]".
	ErrBadHeader = errors.New("webhook: malformed signature header")
	// ErrTimestamp: the signature is genuine, but its timestamp is further
	// than the tolerance from now, in the past (a replay, or a delivery
	// held too long) or in the future (a clock problem).
	ErrTimestamp = errors.New("webhook: signature timestamp outside tolerance")
	// ErrMismatch: no v1 value matches the body under any of the secrets:
	// the body was altered, or the secret is wrong.
	ErrMismatch = errors.New("webhook: signature mismatch")
)

// Sign returns the Svc-Signature header value for body, sent at t:
//
//	t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// with one v1 value per secret, in order. The HMAC key is the whole secret
// string, "whsec_" prefix included (as Stripe does, so existing verifiers
// work). body must be the exact bytes sent. During a secret rotation the
// dispatcher signs with both the new and the previous secret, so
// receivers can switch at their own pace.
func Sign(body []byte, secrets []string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	var b strings.Builder
	b.Grow(len("t=") + len(ts) + len(secrets)*(len(",v1=")+2*sha256.Size))
	b.WriteString("t=")
	b.WriteString(ts)
	for _, s := range secrets {
		b.WriteString(",v1=")
		b.WriteString(hex.EncodeToString(mac(s, ts, body)))
	}
	return b.String()
}

// mac computes HMAC-SHA256(secret, ts + "." + body).
func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery: header is the Svc-Signature value, body the
// raw request body, exactly as received and before any parsing. It
// accepts the delivery when some v1 value is the HMAC of the body under
// some secret in secrets (pass the old and the new secret while rotating)
// and the signed timestamp is within tolerance of now in either direction.
// A tolerance ≤ 0 means [DefaultTolerance]. now is a parameter so that the
// tolerance edge can be tested; pass time.Now().
//
// Comparisons are constant-time (hmac.Equal). The timestamp is judged only
// after a signature matched, so [ErrTimestamp] always means a genuine
// delivery that is too old or from the future.
//
// The error matches (errors.Is) ErrNoSignature, ErrBadHeader, ErrMismatch
// or ErrTimestamp.
func Verify(body []byte, header string, secrets []string, tolerance time.Duration, now time.Time) error {
	h, err := parseHeader(header)
	if err != nil {
		return err
	}
	if len(secrets) == 0 {
		return fmt.Errorf("%w: no secret to check against", ErrMismatch)
	}
	ts := strconv.FormatInt(h.t, 10)
	matched := false
	for _, s := range secrets {
		want := mac(s, ts, body)
		for _, got := range h.v1 {
			// No early exit: the time taken does not depend on which
			// (if any) value matched.
			if hmac.Equal(got, want) {
				matched = true
			}
		}
	}
	if !matched {
		return ErrMismatch
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare in seconds: t has one-second resolution. Durations between
	// int64 Unix seconds cannot overflow the comparison below because both
	// sides are bounded by parseHeader and by now.Unix().
	age := now.Unix() - h.t
	tol := int64(tolerance / time.Second)
	switch {
	case age > tol:
		return fmt.Errorf("%w: signed %ds ago, tolerance %ds", ErrTimestamp, age, tol)
	case -age > tol:
		return fmt.Errorf("%w: signed %ds in the future, tolerance %ds", ErrTimestamp, -age, tol)
	}
	return nil
}

// sigHeader is a parsed Svc-Signature value.
type sigHeader struct {
	t  int64    // unix seconds
	v1 [][]byte // each sha256.Size bytes
}

// maxTimestamp bounds t so that now.Unix() - t cannot overflow: year 2^39
// is far beyond any real clock, and far inside int64.
const maxTimestamp = 1 << 39

// parseHeader parses "t=<digits>,v1=<64 hex>[,v1=...]" strictly: no
// spaces, no empty elements, exactly one t (decimal, no sign, no leading
// zero), at least one and at most maxSignatures v1 values of 64 hex
// digits. Elements with other keys (lowercase letters and digits, as
// Stripe's "v0") are skipped so that a later scheme can be added beside
// v1 without breaking this verifier; they must still be well formed.
func parseHeader(s string) (sigHeader, error) {
	var h sigHeader
	if s == "" {
		return h, ErrNoSignature
	}
	if len(s) > maxHeaderLen {
		return h, fmt.Errorf("%w: longer than %d bytes", ErrBadHeader, maxHeaderLen)
	}
	haveT := false
	for elem := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(elem, "=")
		if !ok || !validKey(key) || val == "" {
			return sigHeader{}, fmt.Errorf("%w: element %q is not key=value", ErrBadHeader, clip(elem))
		}
		switch key {
		case "t":
			if haveT {
				return sigHeader{}, fmt.Errorf("%w: more than one t", ErrBadHeader)
			}
			t, ok := parseTimestamp(val)
			if !ok {
				return sigHeader{}, fmt.Errorf("%w: t is not unix seconds", ErrBadHeader)
			}
			h.t, haveT = t, true
		case "v1":
			if len(h.v1) == maxSignatures {
				return sigHeader{}, fmt.Errorf("%w: more than %d v1 values", ErrBadHeader, maxSignatures)
			}
			if len(val) != 2*sha256.Size {
				return sigHeader{}, fmt.Errorf("%w: v1 is not 64 hex digits", ErrBadHeader)
			}
			b, err := hex.DecodeString(val)
			if err != nil {
				return sigHeader{}, fmt.Errorf("%w: v1 is not 64 hex digits", ErrBadHeader)
			}
			h.v1 = append(h.v1, b)
		default:
			if !printableValue(val) {
				return sigHeader{}, fmt.Errorf("%w: element %q has a bad value", ErrBadHeader, key)
			}
		}
	}
	if !haveT {
		return sigHeader{}, fmt.Errorf("%w: no t", ErrBadHeader)
	}
	if len(h.v1) == 0 {
		return sigHeader{}, fmt.Errorf("%w: no v1 value", ErrNoSignature)
	}
	return h, nil
}

func validKey(k string) bool {
	if k == "" || len(k) > 16 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// printableValue reports whether v is visible ASCII (no spaces, no
// control characters, no '=' or ',').
func printableValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == '=' || c == ',' {
			return false
		}
	}
	return true
}

func parseTimestamp(v string) (int64, bool) {
	if len(v) > 12 || (len(v) > 1 && v[0] == '0') {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, n <= maxTimestamp
}

// clip shortens untrusted text quoted in an error message.
func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// TestPayload is a signed delivery body made by [SignedTestPayload], for
// testing a receiver without a dispatcher.
type TestPayload struct {
	Body   []byte // the raw body
	Header string // the Svc-Signature value for Body
}

// SignedTestPayload signs body with secret at now, as a delivery would be
// signed. It is a helper for receivers' tests: feed Body and Header to the
// handler under test, or build a request with [TestPayload.Request].
func SignedTestPayload(body []byte, secret string, now time.Time) TestPayload {
	return TestPayload{Body: bytes.Clone(body), Header: Sign(body, []string{secret}, now)}
}

// Request returns a POST of the payload to url with the headers a delivery
// carries. When Body is an [Event], Svc-Event-Id and Svc-Event-Type are
// taken from it.
func (p TestPayload) Request(url string) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(p.Body))
	if err != nil {
		return nil, fmt.Errorf("webhook: test request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, p.Header)
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	if json.Unmarshal(p.Body, &ev) == nil {
		if ev.ID != "" {
			req.Header.Set(EventIDHeader, ev.ID)
		}
		if ev.Type != "" {
			req.Header.Set(EventTypeHeader, ev.Type)
		}
	}
	return req, nil
}
