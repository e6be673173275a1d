package fetch

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

// Agent is who pays through a [Transport]: the agent's credential, its
// key (it signs every request, as an agent calling /x402/fetch does), its
// mandate, and what it signs for every request.
type Agent struct {
	// Caller is the agent key's identity on the money path (its key id
	// and the agent ids it may act for).
	Caller pay.Caller
	// Key is the agent's Ed25519 private key.
	Key ed25519.PrivateKey
	// Mandate is the compact JWS of the mandate the operator issued.
	Mandate string
	// MaxAmount is the most one request pays.
	MaxAmount pay.Amount
	// Purpose is shown to the person who approves a held fetch.
	Purpose string
	// Terms default to the x402 rail's (irreversible, instant), an
	// api-key credential, the payer's capital, delegated.
	Terms pay.Terms
}

// Transport is an http.RoundTripper that pays through the gate: each
// request becomes a signed fetch ([Request]) under the agent's mandate,
// with the same instruction, decision, record and settlement as POST
// /x402/fetch. A resource that does not ask for payment is answered as
// is; one paid for is answered with its response, carrying the intent in
// the Countersign-Intent header and the settlement transaction in
// Countersign-Transaction. A body cut at the deployment's cap (1 MiB by
// default), paid for or not, comes with Countersign-Truncated: true, as
// POST /x402/fetch answers truncated: true: the body is only the first
// bytes of the resource's. A fetch held for a person, denied, declined
// or of unknown outcome is an error ([*OutcomeError], or the money
// path's error), which http.Client returns wrapped in a *url.Error.
//
// The idempotency key is the request's Idempotency-Key header when it has
// one (send the same key again to learn what came of a held fetch or of
// a lost answer), else a fresh one: without it, a retry by the caller is
// a new payment.
type Transport struct {
	s *Service
	a Agent
}

// Transport returns a RoundTripper that pays as agent a.
func (s *Service) Transport(a Agent) *Transport {
	if a.Terms == (pay.Terms{}) {
		a.Terms = pay.Terms{Rail: RailName, Reversibility: gate.Irreversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}
	}
	return &Transport{s: s, a: a}
}

// Headers the Transport adds to an answer: the intent and transaction of
// a paid one, and whether the body was cut.
const (
	HeaderIntent      = "Countersign-Intent"
	HeaderTransaction = "Countersign-Transaction"
	// HeaderTruncated is "true" when the resource's body was longer than
	// the deployment keeps (Fetched.Truncated) and the answer's body is
	// only its first bytes; absent otherwise.
	HeaderTruncated = "Countersign-Truncated"
)

// OutcomeError is a fetch that did not answer a resource: held for a
// person (Result.Held), denied (Result.Denial) or declined
// (Result.Failure).
type OutcomeError struct{ Result *pay.Result }

func (e *OutcomeError) Error() string {
	r := e.Result
	switch r.Outcome {
	case pay.OutcomeHeld:
		return fmt.Sprintf("x402 fetch: held for an operator's approval (intent %s); send the same Idempotency-Key again once approved", r.IntentID)
	case pay.OutcomeDenied:
		codes := make([]string, len(r.Denial.Reasons))
		for i, rs := range r.Denial.Reasons {
			codes[i] = rs.Code
		}
		return "x402 fetch: the gate denied the payment: " + strings.Join(codes, ", ")
	case pay.OutcomeFailed:
		return "x402 fetch: the payment was declined: " + r.Failure.DeclineCode + ": " + r.Failure.Message
	}
	return "x402 fetch: " + string(r.Outcome)
}

// RoundTrip fetches req through the gate.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		defer req.Body.Close()
		b, err := io.ReadAll(io.LimitReader(req.Body, MaxBody+1))
		if err != nil {
			return nil, fmt.Errorf("x402 fetch: reading the request body: %w", err)
		}
		if len(b) > MaxBody {
			return nil, fmt.Errorf("x402 fetch: the request body is over %d bytes", MaxBody)
		}
		body = b
	}
	key := req.Header.Get("Idempotency-Key")
	if key == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		key = "rt-" + hex.EncodeToString(b[:])
	}
	headers := map[string]string{}
	for k, vs := range req.Header {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if forbiddenHeaders[ck] || ck == "Idempotency-Key" {
			continue
		}
		headers[ck] = strings.Join(vs, ", ")
	}
	if len(headers) == 0 {
		headers = nil
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	r := Request{Method: method, URL: req.URL.String(), Headers: headers, MaxAmount: t.a.MaxAmount,
		IdempotencyKey: key, Purpose: t.a.Purpose, Terms: t.a.Terms, Envelope: pay.Envelope{Mandate: t.a.Mandate}}
	r.SetBody(body)
	if err := Sign(&r, t.a.Key); err != nil {
		return nil, err
	}
	res, err := t.s.Fetch(req.Context(), t.a.Caller, r, "", "")
	if err != nil {
		return nil, err
	}
	f := res.Fetched
	if f == nil {
		return nil, &OutcomeError{Result: res.Result}
	}
	if !f.Delivered {
		return nil, fmt.Errorf("x402 fetch: paid (intent %s, proven on chain) but the resource's answer was lost", f.IntentID)
	}
	b, err := base64.StdEncoding.DecodeString(f.Body)
	if err != nil {
		return nil, errors.New("x402 fetch: the stored answer is not base64")
	}
	h := http.Header{}
	for k, vs := range f.Headers {
		h[k] = append([]string(nil), vs...)
	}
	// The Transport's own headers say only what the Transport knows: the
	// resource's copies of them are dropped, so a free resource cannot
	// pass for a paid one, nor claim a cut it did not suffer.
	for _, k := range []string{HeaderIntent, HeaderTransaction, HeaderTruncated} {
		h.Del(k)
	}
	if f.Paid {
		h.Set(HeaderIntent, f.IntentID)
		if f.Payment != nil && f.Payment.Transaction != "" {
			h.Set(HeaderTransaction, f.Payment.Transaction)
		}
	}
	// A cut body read as the whole of it would be a paid resource silently
	// corrupted: the caller is told, as POST /x402/fetch tells it.
	if f.Truncated {
		h.Set(HeaderTruncated, "true")
	}
	// The resource's Content-Length is its full body's, not the one relayed.
	h.Del("Content-Length")
	return &http.Response{Status: fmt.Sprintf("%d %s", f.Status, http.StatusText(f.Status)), StatusCode: f.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), Request: req}, nil
}
