package x402

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// PaymentRequiredFrom reads a 402 answer's offer: the PAYMENT-REQUIRED
// header, given once. Without it, a body that is a version 1
// PaymentRequired ({"x402Version":1,...}, version 1 carried its offer in
// the body) is ErrVersion1; anything else is ErrMissingRequired. Only the
// first 64 KiB of body are looked at.
func PaymentRequiredFrom(h http.Header, body []byte) (PaymentRequired, error) {
	switch vs := h.Values(HeaderPaymentRequired); len(vs) {
	case 1:
		return DecodePaymentRequired(vs[0])
	case 0:
	default:
		return PaymentRequired{}, fmt.Errorf("%w: %s given %d times", ErrMalformed, HeaderPaymentRequired, len(vs))
	}
	if len(body) > 64<<10 {
		body = body[:64<<10]
	}
	var v1 struct {
		X402Version json.RawMessage `json:"x402Version"`
	}
	if json.Unmarshal(body, &v1) == nil && string(v1.X402Version) == "1" {
		return PaymentRequired{}, ErrVersion1
	}
	return PaymentRequired{}, fmt.Errorf("%w: the answer has no %s header", ErrMissingRequired, HeaderPaymentRequired)
}

// SettlementFrom reads an answer's PAYMENT-RESPONSE header, given once;
// ok is false when there is none.
func SettlementFrom(h http.Header) (s SettlementResponse, ok bool, err error) {
	switch vs := h.Values(HeaderPaymentResponse); len(vs) {
	case 0:
		return s, false, nil
	case 1:
		s, err = DecodeSettlementResponse(vs[0])
		return s, err == nil, err
	default:
		return s, false, fmt.Errorf("%w: %s given %d times", ErrMalformed, HeaderPaymentResponse, len(vs))
	}
}

// SameOrigin reports whether resourceURL (an offer's resource.url) is on
// the origin of requested (the URL the client asked for): same scheme,
// host (ASCII case folded) and port, a scheme's default port written or
// not. An offer for another origin asks to pay for something else.
func SameOrigin(resourceURL string, requested *url.URL) bool {
	u, err := url.Parse(resourceURL)
	if err != nil || requested == nil || !u.IsAbs() || u.Opaque != "" || u.User != nil {
		return false
	}
	return origin(u) == origin(requested)
}

func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
