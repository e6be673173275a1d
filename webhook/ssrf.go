package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// ErrForbiddenAddress is the error of a delivery attempt whose destination
// resolves to an address the dispatcher refuses to connect to: private,
// loopback (unless allowed), link-local, multicast, unspecified, shared
// (CGNAT) or reserved. The attempt counts as failed and is retried on the
// schedule, since DNS may be corrected. Check with errors.Is.
var ErrForbiddenAddress = errors.New("webhook: destination address not allowed")

// Resolver resolves host names for the dispatcher's SSRF check.
// *net.Resolver implements it; tests pass a fake. LookupNetIP is called
// with network "ip" and must return every address of host.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Address ranges refused beyond what netip's predicates cover. Each embeds
// no destination a public webhook receiver can legitimately have.
var reservedPrefixes = []struct {
	p      netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network" (0.0.0.0/8)`},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT, 100.64.0.0/10)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments (192.0.0.0/24)"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking (198.18.0.0/15)"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (240.0.0.0/4, broadcast included)"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible IPv6 (deprecated)"},
	{netip.MustParsePrefix("100::/64"), "discard-only (100::/64)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (2001::/32)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation (2001:db8::/32)"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (fec0::/10)"},
}

// Prefixes that embed an IPv4 address, which is checked in turn: NAT64
// (RFC 6052, RFC 8215) and 6to4 (RFC 3056).
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFourPrefix  = netip.MustParsePrefix("2002::/16")
)

// forbiddenAddr returns why a delivery may not connect to a, or "" when it
// may. Loopback is allowed only with allowLoopback (sandbox mode).
func forbiddenAddr(a netip.Addr, allowLoopback bool) string {
	if !a.IsValid() {
		return "not a valid address"
	}
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		if allowLoopback {
			return ""
		}
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range reservedPrefixes {
		if r.p.Contains(a) {
			return r.reason
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 [4]byte
		switch {
		case nat64Prefix.Contains(a):
			copy(v4[:], b[12:])
		case nat64LocalPrefix.Contains(a):
			return "NAT64 local-use (64:ff9b:1::/48)"
		case sixToFourPrefix.Contains(a):
			copy(v4[:], b[2:6])
		default:
			return ""
		}
		if why := forbiddenAddr(netip.AddrFrom4(v4), allowLoopback); why != "" {
			return "an IPv6 form of a " + why + " IPv4 address"
		}
	}
	return ""
}

// guard is the dispatcher's dialer. It resolves the host itself, refuses
// the connection if any address is forbidden, and then dials the checked
// address, never the name: the address that was checked is the address
// connected to, so a DNS answer that changes between check and connect
// (DNS rebinding) cannot steer a delivery inside the network. TLS is
// layered on top by the transport, still verified against the url's host
// name.
type guard struct {
	resolver      Resolver
	allowLoopback bool
	dialer        *net.Dialer
}

// DialContext has the signature of http.Transport.DialContext.
func (g *guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("webhook: dial %s: %w", address, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("webhook: dial %s: bad port", address)
	}
	addrs, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// resolve returns the addresses of host, all of them allowed, or an error
// matching ErrForbiddenAddress if any is not: a name that resolves partly
// inside the network is refused outright rather than trusted for its
// public addresses.
func (g *guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return nil, fmt.Errorf("%w: %s has a zone", ErrForbiddenAddress, host)
		}
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("webhook: resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("webhook: resolve %s: no addresses", host)
		}
	}
	for _, a := range addrs {
		if why := forbiddenAddr(a, g.allowLoopback); why != "" {
			if a.String() == host {
				return nil, fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, a, why)
			}
			return nil, fmt.Errorf("%w: %s resolves to %s, which is %s", ErrForbiddenAddress, host, a.Unmap(), why)
		}
	}
	return addrs, nil
}

// GuardedClient returns an HTTP client behind the dispatcher's SSRF guard,
// for the server's other outbound calls to parties an operator configured
// (counterparties' disclosures, merchants): it resolves host names itself,
// refuses private, loopback (unless allowLoopback), link-local and reserved
// destinations, dials the address it checked, uses no proxy, follows no
// redirect, and gives up after timeout (default DefaultAttemptTimeout). A
// nil resolver means net.DefaultResolver.
func GuardedClient(allowLoopback bool, resolver Resolver, timeout time.Duration) *http.Client {
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	c, err := newClient(&DispatcherOptions{AllowLoopback: allowLoopback, Resolver: resolver,
		AttemptTimeout: timeout, HTTPClient: &http.Client{Timeout: timeout}})
	if err != nil {
		// newClient fails only for a caller-supplied transport, and this
		// one supplies none.
		panic(err)
	}
	return c
}
