package netguard

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzCheckURL: CheckURL never panics, and whatever it accepts is a URL
// the guard would connect to: an http(s) URL the policy allows, without
// user info or fragment, whose literal host (if any) is an allowed
// address in canonical form, and which CheckURL accepts again unchanged.
// The seeds are in testdata/fuzz/FuzzCheckURL.
func FuzzCheckURL(f *testing.F) {
	f.Add("https://shop.example/.well-known/ucp", false, false)
	f.Add("http://169.254.169.254/latest/meta-data/", true, true)
	f.Fuzz(func(t *testing.T, raw string, allowLoopback, allowHTTP bool) {
		p := Policy{AllowLoopback: allowLoopback, AllowHTTP: allowHTTP}
		u, err := p.CheckURL(raw)
		if err != nil {
			if u != nil {
				t.Fatalf("refused with a URL: %q", u)
			}
			ge, ok := err.(*Error)
			if !ok || ge.Reason == "" || ge.Detail == "" {
				t.Fatalf("refusal %T %v is not an *Error with a reason", err, err)
			}
			return
		}
		switch {
		case u.Scheme != "https" && u.Scheme != "http":
			t.Fatalf("accepted scheme %q", u.Scheme)
		case u.User != nil || u.Fragment != "" || u.Host == "" || u.Opaque != "":
			t.Fatalf("accepted %q", raw)
		case len(raw) > MaxURLLength:
			t.Fatalf("accepted %d bytes", len(raw))
		}
		host := u.Hostname()
		loopback := false
		if a, err := netip.ParseAddr(host); err == nil {
			if err := p.CheckAddr(a); err != nil {
				t.Fatalf("accepted %q, whose address %v is refused: %v", raw, a, err)
			}
			loopback = a.Unmap().IsLoopback()
		} else {
			if _, ok := looseIPv4(host); ok {
				t.Fatalf("accepted %q, whose host a resolver reads as an address", raw)
			}
			if !validHostname(host) || host != strings.ToLower(host) {
				t.Fatalf("accepted host %q", host)
			}
			name := strings.TrimSuffix(host, ".")
			loopback = name == "localhost" || strings.HasSuffix(name, ".localhost")
			if loopback && !allowLoopback {
				t.Fatalf("accepted %q without AllowLoopback", raw)
			}
		}
		if u.Scheme == "http" && !allowHTTP && !(allowLoopback && loopback) {
			t.Fatalf("accepted http %q", raw)
		}
		again, err := p.CheckURL(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("%q accepted as %q, which is then %v %v", raw, u, again, err)
		}
	})
}
