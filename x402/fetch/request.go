package fetch

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402"
)

// Type is the "typ" header of an agent's signature of a fetch, so that it
// can never pass for a payment instruction's or a purchase's, and back.
const Type = "svc-x402-fetch+jws"

// Route is the idempotency namespace of fetches.
const Route pay.Route = "x402"

// RailName is the rail fetches settle on: a mandate must list it.
const RailName = "x402"

// Limits of a request.
const (
	MaxURLLen     = 2048
	MaxHeaders    = 32
	MaxHeaderLen  = 4096
	MaxBody       = 256 << 10 // bytes, before base64
	maxBodyBase64 = (MaxBody + 2) / 3 * 4
)

// Request is the body of POST /x402/fetch: what the agent wants fetched
// and the most it will pay, never a price it has not seen. The agent
// signs it (typ svc-x402-fetch+jws, detached, over [SigningBytes]); the
// body travels beside the signature and is bound by bodyDigest.
type Request struct {
	Method         string            `json:"method" validate:"required,oneof=GET HEAD POST PUT PATCH DELETE" doc:"The HTTP method of the request to make."`
	URL            string            `json:"url" validate:"required,max=2048" doc:"The absolute http(s) URL of the resource; the deployment's outbound URL policy applies."`
	Headers        map[string]string `json:"headers,omitempty" validate:"max=32" doc:"Request headers to send (at most 32; not hop-by-hop headers, Host, Content-Length or the x402 headers, which the server sets)."`
	BodyDigest     string            `json:"bodyDigest,omitempty" validate:"omitempty,len=43" doc:"SHA-256 of the request body, base64url without padding; required exactly when body is not empty."`
	MaxAmount      pay.Amount        `json:"maxAmount" doc:"The most the agent will pay, in minor units of a currency the deployment's x402 assets are worth (USDC: USD)."`
	IdempotencyKey string            `json:"idempotencyKey" validate:"required,max=255,printascii" doc:"Unique per agent key on /x402/fetch (a namespace of its own)."`
	Purpose        string            `json:"purpose" validate:"required,max=500" doc:"Why, shown to the person who approves."`
	Terms          pay.Terms         `json:"terms" doc:"How the money moves; terms.rail is x402 (irreversible, instant)."`
	Envelope       pay.Envelope      `json:"envelope" doc:"Agent, mandate, and the agent's signature (typ svc-x402-fetch+jws) over the RFC 8785 form of this request without body and envelope.signature."`
	Body           string            `json:"body,omitempty" validate:"omitempty,max=349528" doc:"The request body, standard base64 (at most 256 KiB decoded); not signed itself, bound by bodyDigest."`
}

// signingView is a request without its signature and its body.
type signingView struct {
	Method         string            `json:"method"`
	URL            string            `json:"url"`
	Headers        map[string]string `json:"headers,omitempty"`
	BodyDigest     string            `json:"bodyDigest,omitempty"`
	MaxAmount      pay.Amount        `json:"maxAmount"`
	IdempotencyKey string            `json:"idempotencyKey"`
	Purpose        string            `json:"purpose"`
	Terms          pay.Terms         `json:"terms"`
	Envelope       struct {
		Agent   string `json:"agent"`
		Mandate string `json:"mandate"`
	} `json:"envelope"`
}

// SigningBytes returns what a fetch signature covers: the RFC 8785
// canonical JSON of the request without body and envelope.signature.
func SigningBytes(r *Request) ([]byte, error) {
	v := signingView{Method: r.Method, URL: r.URL, Headers: r.Headers, BodyDigest: r.BodyDigest,
		MaxAmount: r.MaxAmount, IdempotencyKey: r.IdempotencyKey, Purpose: r.Purpose, Terms: r.Terms}
	v.Envelope.Agent, v.Envelope.Mandate = r.Envelope.Agent, r.Envelope.Mandate
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("x402 fetch: signing bytes: %w", err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, fmt.Errorf("x402 fetch: signing bytes: %w", err)
	}
	return c, nil
}

// BodyDigest returns the bodyDigest of body: SHA-256, base64url without
// padding. An empty body has none.
func BodyDigest(body []byte) string {
	if len(body) == 0 {
		return ""
	}
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// SetBody sets the request's body and its digest.
func (r *Request) SetBody(body []byte) {
	r.Body, r.BodyDigest = "", BodyDigest(body)
	if len(body) > 0 {
		r.Body = base64.StdEncoding.EncodeToString(body)
	}
}

// Sign signs r with the agent's key: it sets envelope.agent (when empty)
// and envelope.signature.
func Sign(r *Request, agentKey ed25519.PrivateKey) error {
	if err := pay.SignEnvelope(&r.Envelope, agentKey, Type, func() ([]byte, error) { return SigningBytes(r) }); err != nil {
		return fmt.Errorf("x402 fetch: sign: %w", err)
	}
	return nil
}

// digest is the idempotency digest of a fetch as the agent sent it (the
// body is bound by bodyDigest).
func digest(signed []byte, r *Request) string { return pay.SignedDigest(signed, r.Envelope.Signature) }

// forbiddenHeaders are set by the server or the transport, or would make
// one request two: never taken from the agent.
var forbiddenHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Proxy-Authorization": true, "Te": true, "Trailer": true, "Upgrade": true,
	"Expect": true,
	textproto.CanonicalMIMEHeaderKey(x402.HeaderPaymentSignature): true,
	textproto.CanonicalMIMEHeaderKey(x402.HeaderPaymentRequired):  true,
	textproto.CanonicalMIMEHeaderKey(x402.HeaderPaymentResponse):  true,
	"X-Payment": true, "X-Payment-Response": true,
}

// check validates what the validator tags cannot say and returns the
// parsed URL, the header to send and the body. Every problem is listed.
func (r *Request) check() (*url.URL, http.Header, []byte, error) {
	var fields []pay.FieldError
	bad := func(field, rule, msg string) {
		fields = append(fields, pay.FieldError{Field: field, Rule: rule, Message: msg})
	}
	u, err := url.Parse(r.URL)
	switch {
	case len(r.URL) > MaxURLLen:
		bad("url", "max", fmt.Sprintf("at most %d bytes", MaxURLLen))
	case err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Opaque != "":
		bad("url", "url", "an absolute http or https URL with a host and no user information")
	case u.Fragment != "":
		bad("url", "url", "no fragment: it is never sent")
	}
	h := http.Header{}
	if len(r.Headers) > MaxHeaders {
		bad("headers", "max", fmt.Sprintf("at most %d headers", MaxHeaders))
	}
	for k, v := range r.Headers {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		switch {
		case !validToken(k):
			bad("headers", "header", fmt.Sprintf("%.64q is not a header name", k))
		case forbiddenHeaders[ck]:
			bad("headers", "header", fmt.Sprintf("%s is set by the server, never by the agent", ck))
		case len(v) > MaxHeaderLen || strings.ContainsAny(v, "\r\n\x00"):
			bad("headers", "header", fmt.Sprintf("the value of %s must be at most %d bytes on one line", ck, MaxHeaderLen))
		default:
			h.Set(ck, v)
		}
	}
	body, err := base64.StdEncoding.Strict().DecodeString(r.Body)
	switch {
	case err != nil:
		bad("body", "base64", "standard base64 with padding")
	case len(body) > MaxBody:
		bad("body", "max", fmt.Sprintf("at most %d bytes decoded", MaxBody))
	case BodyDigest(body) != r.BodyDigest:
		bad("bodyDigest", "digest", "must be the SHA-256 of the decoded body, base64url without padding (absent for no body)")
	}
	if len(body) > 0 && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		bad("body", "method", r.Method+" carries no body")
	}
	if r.Terms.Rail != RailName {
		bad("terms.rail", "oneof", "a fetch settles on the x402 rail")
	}
	if len(fields) > 0 {
		return nil, nil, nil, &pay.MalformedError{Fields: fields}
	}
	return u, h, body, nil
}

// validToken reports whether s is an RFC 9110 token (a header name).
func validToken(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
