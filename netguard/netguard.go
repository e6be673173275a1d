// Package netguard keeps the server's outbound HTTP inside the public
// internet: one policy, checked when a URL is accepted and again at every
// connection.
//
// Countersign makes requests to places other people name: webhook
// endpoints an operator registers, merchants (ACP base URLs, UCP profiles
// and the endpoints those profiles declare), counterparties' disclosure
// URLs. Any of them could name the server's own network instead: the cloud
// metadata service at 169.254.169.254, an admin port on 127.0.0.1, a
// database on 10.0.0.5. A [Policy] refuses them twice:
//
//   - [Policy.CheckURL], when a URL is accepted (registration, configuration,
//     a profile's declared endpoint): scheme, user info, fragment, port,
//     host syntax, and every literal address in any of its spellings
//     (IPv4-mapped IPv6, NAT64, 6to4, and the decimal, octal and hex forms
//     such as 2852039166 or 0x7f.1 that some resolvers read as addresses).
//     A refusal is an [*Error] with a stable [Reason]; the caller wraps it in
//     its own coded error, which the HTTP layer answers with 400.
//   - [Policy.DialContext], when connecting: it resolves the host itself,
//     refuses the connection if any address is forbidden, and dials the
//     address it checked, never the name, so a DNS answer that changes
//     between the check and the connection (DNS rebinding) cannot steer a
//     request inside the network. [Policy.Transport] and [Policy.Client]
//     install it (no proxy, no custom TLS dialer, and for Client no
//     redirects); [Policy.Control] checks the same addresses for a
//     [net.Dialer] built elsewhere.
//
// The package is exported, not internal, because the library's merchant
// and counterparty clients take an *http.Client from their caller
// (acp.Options.HTTPClient, ucp.Options.HTTPClient,
// identity.Options.HTTPClient, commerce.Options.Connect): a program that
// embeds them builds that client with [Policy.Client] or [Policy.Transport]
// and gets the same guard as the reference server.
//
// # What is refused
//
// Unspecified (0.0.0.0, ::), loopback (127/8, ::1, localhost), private
// (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16,
// fe80::/10), multicast, and the reserved ranges no public service has:
// 0/8, CGNAT (100.64/10), 192.0.0/24, the TEST-NETs, 198.18/15, 240/4
// (broadcast included), IPv4-compatible IPv6, 100::/64, Teredo, 2001:db8::/32,
// site-local; and IPv6 forms of a refused IPv4 address (::ffff:10.0.0.1,
// 64:ff9b::a00:1, 2002:a00:1::1). A name that resolves to several
// addresses is refused if any one of them is forbidden.
//
// # Sandbox and tests
//
// The zero Policy is the production policy: https only, public addresses
// only. Two explicit switches, both off by default, exist for sandbox
// mode and for tests against httptest servers on 127.0.0.1:
// AllowLoopback admits loopback destinations (and http:// to them: the
// bytes never leave the host), and AllowHTTP admits http:// to any allowed
// destination. Neither ever admits a private or link-local address.
package netguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MaxURLLength bounds a URL CheckURL accepts, in bytes.
const MaxURLLength = 2048

// Policy is the one guard for outbound HTTP: what CheckURL accepts and
// what DialContext connects to. The zero value is the production policy.
// A Policy is a value; it is safe for concurrent use.
type Policy struct {
	// AllowLoopback admits loopback destinations (127.0.0.0/8, ::1,
	// localhost), and http:// URLs to them: sandbox mode and tests
	// against httptest servers. Default false.
	AllowLoopback bool
	// AllowHTTP admits http:// URLs to every allowed destination, not only
	// loopback: sandbox mode. Default false: https only.
	AllowHTTP bool
	// Resolver resolves host names at connection time. Default
	// net.DefaultResolver; tests pass a fake.
	Resolver Resolver
	// Dialer connects to a checked address. Default a net.Dialer with a
	// 30 s timeout and 30 s keep-alive. Its Control, if any, still runs.
	Dialer *net.Dialer
}

// Resolver resolves host names for the connection-time check.
// *net.Resolver implements it. LookupNetIP is called with network "ip"
// and must return every address of host.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Reason is the stable, machine-readable reason of a refusal. Its values
// never change meaning.
type Reason string

// The reasons of a refusal.
const (
	ReasonMalformed   Reason = "malformed"    // empty, too long, control or non-ASCII bytes, does not parse
	ReasonScheme      Reason = "scheme"       // not https (or http where the policy allows it)
	ReasonUserInfo    Reason = "userinfo"     // user:password@ in the authority
	ReasonFragment    Reason = "fragment"     // a #fragment
	ReasonHost        Reason = "host"         // no host, or not a valid host name
	ReasonPort        Reason = "port"         // not 1-65535 in canonical decimal
	ReasonNumericHost Reason = "numeric_host" // a host some resolvers read as an IPv4 address (2852039166, 0x7f.1, 010.0.0.1)
	ReasonZone        Reason = "zone"         // an IPv6 address with a zone (fe80::1%eth0)
	ReasonUnspecified Reason = "unspecified"  // 0.0.0.0, ::
	ReasonLoopback    Reason = "loopback"     // 127/8, ::1, localhost (unless AllowLoopback)
	ReasonPrivate     Reason = "private"      // 10/8, 172.16/12, 192.168/16, fc00::/7
	ReasonLinkLocal   Reason = "link_local"   // 169.254/16 (cloud metadata), fe80::/10
	ReasonMulticast   Reason = "multicast"    // 224/4, ff00::/8
	ReasonReserved    Reason = "reserved"     // CGNAT, TEST-NETs, 240/4, ... (see the package doc)
)

// Address reports whether r refuses the destination address itself rather
// than the URL's form: such refusals also match [ErrForbiddenAddress].
func (r Reason) Address() bool {
	switch r {
	case ReasonNumericHost, ReasonZone, ReasonUnspecified, ReasonLoopback, ReasonPrivate,
		ReasonLinkLocal, ReasonMulticast, ReasonReserved:
		return true
	}
	return false
}

// ErrForbiddenAddress matches every refusal of a destination address, at
// acceptance and at connection time. Check with errors.Is.
var ErrForbiddenAddress = errors.New("netguard: destination address not allowed")

// Error is a refusal: by CheckURL, CheckAddr, DialContext or Control. Its
// message says what was refused for people; Reason is for programs. It
// never holds the URL's path, query or user info, which may carry secrets.
type Error struct {
	// Reason is the stable reason.
	Reason Reason
	// Host is the refused host as given, when there is one.
	Host string
	// Addr is the refused address (a host name's resolved address), when
	// there is one.
	Addr netip.Addr
	// Detail says what was refused, for people.
	Detail string
}

// Error returns the detail. It has no package prefix: the acceptance
// points wrap it in their own error ("commerce: invalid merchant
// registration: baseUrl: ...").
func (e *Error) Error() string { return e.Detail }

// Is reports whether target is ErrForbiddenAddress and the refusal is of
// an address.
func (e *Error) Is(target error) bool { return target == ErrForbiddenAddress && e.Reason.Address() }

func refuse(r Reason, host, detail string) *Error {
	return &Error{Reason: r, Host: host, Detail: detail}
}

// CheckURL checks raw, a URL accepted from outside, against the policy and
// returns it parsed, scheme and host in lower case (u.String() is the form
// to store). It needs no network: a host name is checked for its syntax
// here and for its addresses at every connection by DialContext. A refusal
// is an [*Error].
func (p Policy) CheckURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, refuse(ReasonMalformed, "", "url is required")
	}
	if len(raw) > MaxURLLength {
		return nil, refuse(ReasonMalformed, "", "url is longer than "+strconv.Itoa(MaxURLLength)+" bytes")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= ' ' || raw[i] >= 0x7f {
			return nil, refuse(ReasonMalformed, "", "url contains a space, control or non-ASCII character (percent-encode it)")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, refuse(ReasonMalformed, "", "url does not parse")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, refuse(ReasonScheme, "", "url scheme must be https")
	case u.Opaque != "" || u.Host == "":
		return nil, refuse(ReasonHost, "", "url has no host")
	case u.User != nil || strings.Contains(u.Host, "@"):
		return nil, refuse(ReasonUserInfo, "", "url must not carry user info")
	case u.Fragment != "" || u.RawFragment != "" || strings.Contains(raw, "#"):
		return nil, refuse(ReasonFragment, "", "url must not have a fragment")
	}
	host := strings.ToLower(u.Hostname())
	if port := u.Port(); port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return nil, refuse(ReasonPort, host, "url has an invalid port")
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return nil, refuse(ReasonPort, host, "url has an empty port")
	}
	loopback, gerr := p.checkHost(host)
	if gerr != nil {
		return nil, gerr
	}
	if u.Scheme == "http" && !p.AllowHTTP && !loopback {
		detail := "url scheme must be https"
		if p.AllowLoopback {
			detail += " (http is accepted only to loopback)"
		}
		return nil, refuse(ReasonScheme, host, detail)
	}
	u.Host = strings.ToLower(u.Host)
	return u, nil
}

// checkHost checks a URL's host (brackets removed, lower case) and reports
// whether it is a loopback destination the policy allows.
func (p Policy) checkHost(host string) (loopback bool, err *Error) {
	if a, perr := netip.ParseAddr(host); perr == nil {
		if a.Zone() != "" {
			return false, refuse(ReasonZone, host, "destination "+host+" is an address with a zone")
		}
		if e := p.checkAddr(a); e != nil {
			e.Host = host
			e.Detail = "destination " + host + " is " + e.Detail
			return false, e
		}
		return a.Unmap().IsLoopback(), nil
	}
	if numericHost(host) {
		// Not a canonical address, but a resolver may read it as one
		// (inet_aton does; browsers do): refused whatever it decodes to.
		if a, ok := looseIPv4(host); ok {
			detail := "url host " + host + " is the address " + a.String() + " written in a non-standard form"
			if e := p.checkAddr(a); e != nil {
				e.Host, e.Detail = host, "destination "+host+" is "+a.String()+", "+e.Detail
				return false, e
			}
			return false, &Error{Reason: ReasonNumericHost, Host: host, Addr: a, Detail: detail}
		}
		return false, refuse(ReasonNumericHost, host, "url host "+host+" ends in a number; write an address in dotted decimal, or use a name")
	}
	if !validHostname(host) {
		return false, refuse(ReasonHost, host, "url host is not a valid host name (an IDN must be given in punycode)")
	}
	if name := strings.TrimSuffix(host, "."); name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if !p.AllowLoopback {
			return false, refuse(ReasonLoopback, host, "destination "+host+" is loopback")
		}
		return true, nil
	}
	return false, nil
}

// CheckAddr checks one destination address: nil when the policy allows
// connecting to it, an [*Error] matching [ErrForbiddenAddress] when not.
func (p Policy) CheckAddr(a netip.Addr) error {
	if e := p.checkAddr(a); e != nil {
		e.Detail = a.String() + " is " + e.Detail
		return e
	}
	return nil
}

// checkAddr returns the refusal of a, its Detail the bare description
// ("private", "link-local", ...), or nil.
func (p Policy) checkAddr(a netip.Addr) *Error {
	r, why := forbidden(a, p.AllowLoopback)
	if r == "" {
		return nil
	}
	return &Error{Reason: r, Addr: a.Unmap(), Detail: why}
}

// Address ranges refused beyond what netip's predicates cover. None holds
// a destination a public service can legitimately have.
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

// forbidden returns why a may not be connected to, or "" when it may.
// Loopback is allowed only with allowLoopback.
func forbidden(a netip.Addr, allowLoopback bool) (Reason, string) {
	if !a.IsValid() {
		return ReasonMalformed, "not a valid address"
	}
	if a.Zone() != "" {
		return ReasonZone, "an address with a zone"
	}
	a = a.Unmap() // ::ffff:10.0.0.1 is 10.0.0.1
	switch {
	case a.IsUnspecified():
		return ReasonUnspecified, "unspecified"
	case a.IsLoopback():
		if allowLoopback {
			return "", ""
		}
		return ReasonLoopback, "loopback"
	case a.IsPrivate():
		return ReasonPrivate, "private"
	case a.IsLinkLocalUnicast():
		return ReasonLinkLocal, "link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return ReasonMulticast, "multicast"
	}
	for _, r := range reservedPrefixes {
		if r.p.Contains(a) {
			return ReasonReserved, r.reason
		}
	}
	if a.Is6() {
		b := a.As16()
		var v4 [4]byte
		switch {
		case nat64Prefix.Contains(a):
			copy(v4[:], b[12:])
		case nat64LocalPrefix.Contains(a):
			return ReasonReserved, "NAT64 local-use (64:ff9b:1::/48)"
		case sixToFourPrefix.Contains(a):
			copy(v4[:], b[2:6])
		default:
			return "", ""
		}
		if r, why := forbidden(netip.AddrFrom4(v4), allowLoopback); r != "" {
			return r, "an IPv6 form of a " + why + " IPv4 address"
		}
	}
	return "", ""
}

// numericHost reports whether host's last label is a number (decimal, or
// hex after 0x): the WHATWG URL standard parses such a host as an IPv4
// address, and so does inet_aton, which getaddrinfo consults first.
func numericHost(host string) bool {
	h := strings.TrimSuffix(host, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return strings.Trim(last[2:], "0123456789abcdefABCDEF") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// looseIPv4 parses host as inet_aton does: one to four parts, each
// decimal, octal (leading 0) or hex (0x), the last filling the remaining
// bytes.
func looseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(host, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals []uint64
	for _, s := range parts {
		base := 10
		switch {
		case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
			s, base = s[2:], 16
			if s == "" {
				s = "0"
			}
		case len(s) > 1 && s[0] == '0':
			s, base = s[1:], 8
		}
		v, err := strconv.ParseUint(s, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals = append(vals, v)
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// validHostname accepts LDH labels (and '_', which real deployments use),
// 1-63 characters each, at most 253 in all, one trailing dot allowed.
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// defaultDialer is the Dialer of a Policy without one.
var defaultDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
