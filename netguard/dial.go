package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// DialContext has the signature of http.Transport.DialContext. It
// resolves address's host itself (a literal address is taken as is),
// refuses the connection with an [*Error] matching [ErrForbiddenAddress]
// if any address is forbidden, and then dials the addresses it checked,
// never the name: the address checked is the address connected to, so a
// DNS answer that changes between check and connection (DNS rebinding)
// cannot reach inside the network. Nothing is sent anywhere before the
// check passes. TLS, layered on top by the transport, still verifies the
// URL's host name.
func (p Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: bad port", address)
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("netguard: dial %s: %w", address, err)
	}
	d := p.Dialer
	if d == nil {
		d = defaultDialer
	}
	var lastErr error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Unmap().Is4()) || (network == "tcp6" && a.Unmap().Is4()) {
			continue
		}
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("netguard: dial %s: no %s address", address, network)
	}
	return nil, lastErr
}

// resolve returns the addresses of host, all allowed, or an [*Error] if
// any is not: a name that resolves partly inside the network is refused
// outright rather than trusted for its public addresses.
func (p Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if e := p.checkAddr(a); e != nil {
			e.Host = host
			e.Detail = "destination not allowed: " + host + " is " + e.Detail
			return nil, e
		}
		return []netip.Addr{a}, nil
	}
	r := p.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	for _, a := range addrs {
		if e := p.checkAddr(a); e != nil {
			e.Host = host
			e.Detail = "destination not allowed: " + host + " resolves to " + a.Unmap().String() + ", which is " + e.Detail
			return nil, e
		}
	}
	return addrs, nil
}

// Control has the signature of net.Dialer.Control: it refuses a
// connection to a forbidden address just before the socket connects, with
// the address the dialer resolved. It is for dialers built elsewhere (a
// library's own client); DialContext does not need it. With a proxy the
// address checked is the proxy's, so use it without one.
func (p Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: connect %s: %w", address, err)
	}
	if e := p.checkAddr(ap.Addr()); e != nil {
		e.Detail = "destination not allowed: " + ap.Addr().String() + " is " + e.Detail
		return e
	}
	return nil
}

// Transport returns a copy of base (nil: a transport with
// http.DefaultTransport's settings) that connects only through
// DialContext: no proxy (the proxy would be the address checked), no
// custom TLS dialer (it would bypass the check).
func (p Policy) Transport(base *http.Transport) *http.Transport {
	var t *http.Transport
	if base != nil {
		t = base.Clone()
	} else {
		t = &http.Transport{
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		}
	}
	t.Proxy = nil
	t.DialContext = p.DialContext
	//lint:ignore SA1019 cleared: a deprecated dialer left set would bypass DialContext
	t.Dial = nil
	t.DialTLSContext = nil
	//lint:ignore SA1019 cleared: used when DialTLSContext is nil, it would bypass DialContext
	t.DialTLS = nil
	return t
}

// Client returns an HTTP client behind the guard: Transport(nil), a
// timeout for each request (0: none), and no redirects followed (a 3xx is
// returned as it is). To follow redirects, set CheckRedirect to
// [Policy.CheckRedirect].
func (p Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: p.Transport(nil),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// CheckRedirect has the signature of http.Client.CheckRedirect: it
// follows at most 10 redirects, each only to a URL CheckURL accepts (no
// downgrade to http, no literal private address; the connection is
// checked anyway).
func (p Policy) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("netguard: stopped after 10 redirects")
	}
	if _, err := p.CheckURL(req.URL.String()); err != nil {
		return fmt.Errorf("netguard: redirect refused: %w", err)
	}
	return nil
}
