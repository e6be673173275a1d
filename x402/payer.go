package x402

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Payer makes the two requests of an x402 exchange for a client that
// must know, of every paid attempt, whether it paid: the unpaid request,
// whose 402 carries the offers, and the paid one, which carries
// PAYMENT-SIGNATURE.
//
// A paid attempt has exactly two outcomes. Paid: a 2xx answer with a
// successful PAYMENT-RESPONSE, the server's word that it settled. Unknown:
// everything else, a 402 included. A 402 after the signature has left
// proves nothing (docs/design/x402.md, question 4: the server may have
// settled a copy and refuse this one as a used nonce), and no answer at
// all may follow a settlement. An unknown attempt is resent byte for byte
// (the same header: the nonce lets the token move the money once) or
// resolved by a ChainReader once the authorization's validBefore has
// passed; never signed again.
//
// The paid request goes out on a connection of its own, never reused, so
// net/http cannot resend it by itself on a broken keep-alive connection:
// every copy that leaves is one the caller sent and can count.
type Payer struct {
	// Transport is cloned for every request; nil means
	// http.DefaultTransport. A deployment passes one whose dialer applies
	// its outbound policy. Its MaxResponseHeaderBytes is lowered to
	// [MaxResponseHeaderBytes] when unset or above it.
	Transport *http.Transport
	// Timeout bounds each request, answer body included; 0 means 30 s.
	Timeout time.Duration
	// MaxBody caps the answer body kept; 0 means 1 MiB. A longer body is
	// cut and Response.Truncated set.
	MaxBody int64
}

// MaxResponseHeaderBytes caps the header block of every answer a [Payer]
// reads (64 KiB). net/http's default is 10 MiB, read and held before the
// body is looked at, from a resource that may be hostile and that the
// agent, not the deployment, chose. An x402 answer needs room for one
// x402 header at its own cap ([MaxHeaderBytes]) and ordinary headers
// beside it: four times that. An answer over the cap is no answer (the
// request fails with net/http's "server response headers exceeded"
// error): unpaid, nothing is signed; paid, the attempt is Unknown, as for
// any lost answer.
const MaxResponseHeaderBytes = 4 * MaxHeaderBytes

// Response is an answer as relayed to the agent.
type Response struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool
}

// Outcome is what a paid attempt came to.
type Outcome int

const (
	// Unknown: the money may or may not have moved.
	Unknown Outcome = iota
	// Paid: the server answered 2xx with a successful PAYMENT-RESPONSE.
	Paid
)

func (o Outcome) String() string {
	if o == Paid {
		return "paid"
	}
	return "unknown"
}

// PaidResult is the outcome of a paid attempt: Response is the answer when
// one arrived, Settlement the server's PAYMENT-RESPONSE when Paid, Reason
// why it is Unknown.
type PaidResult struct {
	Outcome    Outcome
	Response   *Response
	Settlement SettlementResponse
	Reason     string
}

func (p *Payer) client(fresh bool) *http.Client {
	base := p.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	if t.MaxResponseHeaderBytes <= 0 || t.MaxResponseHeaderBytes > MaxResponseHeaderBytes {
		t.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	}
	if fresh {
		t.DisableKeepAlives = true
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return &http.Client{
		Transport: t,
		Timeout:   timeout,
		// A redirect would send the request, or the payment, somewhere
		// the agent did not name: the 3xx is relayed instead.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// request builds a request: the caller's headers, and payment, when not
// empty, as the only PAYMENT-SIGNATURE.
func request(ctx context.Context, method, url string, header http.Header, body []byte, payment string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("x402: request: %w", err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	// Nothing lets net/http replay the body by itself.
	req.GetBody = nil
	for k, vs := range header {
		if strings.EqualFold(k, HeaderPaymentSignature) {
			continue // only the payment given is sent
		}
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if payment != "" {
		req.Header.Set(HeaderPaymentSignature, payment)
	}
	return req, nil
}

// send makes the request and reads its answer, up to the body cap.
func (p *Payer) send(req *http.Request, fresh bool) (*Response, error) {
	c := p.client(fresh)
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	max := p.MaxBody
	if max <= 0 {
		max = 1 << 20
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("x402: reading the answer: %w", err)
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header.Clone(), Body: b}
	if int64(len(b)) > max {
		r.Body, r.Truncated = b[:max], true
	}
	return r, nil
}

// Fetch makes the unpaid request. Its answer is relayed as is; a 402's
// offers are read from it with PaymentRequiredFrom.
func (p *Payer) Fetch(ctx context.Context, method, url string, header http.Header, body []byte) (*Response, error) {
	for k := range header {
		if strings.EqualFold(k, HeaderPaymentSignature) {
			return nil, errors.New("x402: an unpaid request carries no PAYMENT-SIGNATURE")
		}
	}
	req, err := request(ctx, method, url, header, body, "")
	if err != nil {
		return nil, err
	}
	return p.send(req, false)
}

// FetchPaid sends the request with the PAYMENT-SIGNATURE header payment
// (EncodePaymentPayload's output, stored before the first attempt and
// sent again unchanged on every later one) and says what it came to. The
// error is only for a request that could not be made at all (a bad URL);
// a request that left and failed is Unknown with its reason.
func (p *Payer) FetchPaid(ctx context.Context, method, url string, header http.Header, body []byte, payment string) (PaidResult, error) {
	if payment == "" {
		return PaidResult{}, errors.New("x402: a paid request needs its PAYMENT-SIGNATURE")
	}
	req, err := request(ctx, method, url, header, body, payment)
	if err != nil {
		return PaidResult{}, err
	}
	r, err := p.send(req, true)
	if err != nil {
		return PaidResult{Outcome: Unknown, Reason: fmt.Sprintf("no answer: %v", err)}, nil
	}
	res := PaidResult{Outcome: Unknown, Response: r}
	s, ok, serr := SettlementFrom(r.Header)
	switch {
	case serr != nil:
		res.Reason = fmt.Sprintf("%d with an unreadable %s: %v", r.Status, HeaderPaymentResponse, serr)
	case r.Status == http.StatusPaymentRequired:
		res.Reason = "402 after the signature left: the payment may have been settled from another copy"
	case r.Status < 200 || r.Status > 299:
		res.Reason = fmt.Sprintf("answered %d", r.Status)
	case !ok:
		res.Reason = fmt.Sprintf("answered %d without %s", r.Status, HeaderPaymentResponse)
	case !s.Success:
		res.Reason = fmt.Sprintf("answered %d with an unsuccessful %s (%s)", r.Status, HeaderPaymentResponse, s.ErrorReason)
	default:
		res.Outcome, res.Settlement = Paid, s
	}
	return res, nil
}
