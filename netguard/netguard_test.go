package netguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	prod    = Policy{}
	sandbox = Policy{AllowLoopback: true, AllowHTTP: true}
	hooks   = Policy{AllowLoopback: true} // the webhook sandbox: http only to loopback
)

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name   string
		p      Policy
		url    string
		reason Reason // "" = accepted
		want   string // the accepted form, when not the input
	}{
		{"public name", prod, "https://merchant.example.com/.well-known/ucp", "", ""},
		{"public name with port, query", prod, "https://shop.example:8443/api?v=1", "", ""},
		{"public IPv4", prod, "https://93.184.216.34/", "", ""},
		{"public IPv6", prod, "https://[2606:4700:4700::1111]/", "", ""},
		{"mapped public", prod, "https://[::ffff:8.8.8.8]/", "", ""},
		{"trailing dot", prod, "https://shop.example./", "", ""},
		{"underscore label", prod, "https://a_b.example/", "", ""},
		{"case folded", prod, "HTTPS://Shop.EXAMPLE.com/Path", "", "https://shop.example.com/Path"},
		{"metadata", sandbox, "http://169.254.169.254/latest/meta-data/", ReasonLinkLocal, ""},
		{"10/8", sandbox, "https://10.0.0.1/", ReasonPrivate, ""},
		{"192.168/16", sandbox, "http://192.168.1.1/", ReasonPrivate, ""},
		{"172.16/12", sandbox, "https://172.16.5.4/", ReasonPrivate, ""},
		{"172.31", sandbox, "https://172.31.255.255/", ReasonPrivate, ""},
		{"172.32 is public", prod, "https://172.32.0.1/", "", ""},
		{"CGNAT", sandbox, "https://100.64.1.2/", ReasonReserved, ""},
		{"0.0.0.0", sandbox, "https://0.0.0.0/", ReasonUnspecified, ""},
		{"0/8", sandbox, "https://0.1.2.3/", ReasonReserved, ""},
		{"broadcast", sandbox, "https://255.255.255.255/", ReasonReserved, ""},
		{"multicast", sandbox, "https://224.0.0.1/", ReasonMulticast, ""},
		{"loopback", prod, "https://127.0.0.1/", ReasonLoopback, ""},
		{"loopback 127/8", prod, "https://127.8.9.10/", ReasonLoopback, ""},
		{"[::1]", prod, "https://[::1]/", ReasonLoopback, ""},
		{"[::]", sandbox, "https://[::]/", ReasonUnspecified, ""},
		{"[fe80::1]", sandbox, "https://[fe80::1]/", ReasonLinkLocal, ""},
		{"[fe80::1] with zone", sandbox, "https://[fe80::1%25eth0]/", ReasonZone, ""},
		{"[fc00::1]", sandbox, "https://[fc00::1]/", ReasonPrivate, ""},
		{"[fd12::1]", sandbox, "https://[fd12:3456::1]/", ReasonPrivate, ""},
		{"mapped private", sandbox, "https://[::ffff:10.0.0.1]/", ReasonPrivate, ""},
		{"mapped metadata", sandbox, "https://[::ffff:a9fe:a9fe]/", ReasonLinkLocal, ""},
		{"mapped loopback", prod, "https://[::ffff:127.0.0.1]/", ReasonLoopback, ""},
		{"NAT64 private", sandbox, "https://[64:ff9b::a00:1]/", ReasonPrivate, ""},
		{"6to4 private", sandbox, "https://[2002:a00:1::1]/", ReasonPrivate, ""},
		{"IPv4-compatible", sandbox, "https://[::a00:1]/", ReasonReserved, ""},
		{"decimal metadata", sandbox, "http://2852039166/", ReasonLinkLocal, ""},
		{"decimal loopback", prod, "http://2130706433/", ReasonLoopback, ""},
		{"hex loopback", prod, "https://0x7f.1/", ReasonLoopback, ""},
		{"hex whole", sandbox, "https://0x7f000001/", ReasonNumericHost, ""}, // loopback allowed, the form is not
		{"octal private", sandbox, "https://012.0.0.1/", ReasonPrivate, ""},
		{"short form", sandbox, "https://10.1/", ReasonPrivate, ""},
		{"leading-zero public", prod, "https://08.8.8.8/", ReasonNumericHost, ""},
		{"decimal public", prod, "https://134744072/", ReasonNumericHost, ""},
		{"numeric last label", prod, "https://shop.example.123/", ReasonNumericHost, ""},
		{"hex last label", prod, "https://shop.0x1f/", ReasonNumericHost, ""},
		{"five parts", prod, "https://1.2.3.4.5/", ReasonNumericHost, ""},
		{"localhost", prod, "https://localhost/", ReasonLoopback, ""},
		{"localhost.", prod, "https://localhost./", ReasonLoopback, ""},
		{"sub.localhost", prod, "https://api.localhost:8443/", ReasonLoopback, ""},
		{"LOCALHOST", prod, "https://LOCALHOST/", ReasonLoopback, ""},
		{"userinfo", prod, "https://user:pass@shop.example/", ReasonUserInfo, ""},
		{"userinfo name only", prod, "https://user@shop.example/", ReasonUserInfo, ""},
		{"userinfo hiding private", sandbox, "https://shop.example@10.0.0.1/", ReasonUserInfo, ""},
		{"fragment", prod, "https://shop.example/#x", ReasonFragment, ""},
		{"empty fragment", prod, "https://shop.example/#", ReasonFragment, ""},
		{"ftp", prod, "ftp://shop.example/", ReasonScheme, ""},
		{"file", sandbox, "file:///etc/passwd", ReasonScheme, ""},
		{"gopher", sandbox, "gopher://shop.example:70/", ReasonScheme, ""},
		{"javascript", sandbox, "javascript:alert(1)", ReasonScheme, ""},
		{"no scheme", prod, "shop.example/path", ReasonScheme, ""},
		{"relative", prod, "/hook", ReasonScheme, ""},
		{"http in production", prod, "http://shop.example/", ReasonScheme, ""},
		{"http to public, loopback only", hooks, "http://shop.example/", ReasonScheme, ""},
		{"http in sandbox", sandbox, "http://shop.example/", "", ""},
		{"http to loopback, loopback only", hooks, "http://127.0.0.1:8080/hook", "", ""},
		{"http to localhost, loopback only", hooks, "http://localhost:8080/hook", "", ""},
		{"http to [::1], loopback only", hooks, "http://[::1]:8080/hook", "", ""},
		{"loopback in sandbox", sandbox, "https://127.0.0.1:9000/", "", ""},
		{"private even in sandbox", hooks, "http://10.0.0.1/", ReasonPrivate, ""},
		{"no host", prod, "https:///path", ReasonHost, ""},
		{"opaque", prod, "https:shop.example", ReasonHost, ""},
		{"bad host", prod, "https://-bad-.example/", ReasonHost, ""},
		{"backslash", prod, `https://shop.example\@10.0.0.1/`, ReasonMalformed, ""},
		{"bad port", prod, "https://shop.example:99999/", ReasonPort, ""},
		{"zero port", prod, "https://shop.example:0/", ReasonPort, ""},
		{"padded port", prod, "https://shop.example:0443/", ReasonPort, ""},
		{"empty port", prod, "https://shop.example:/", ReasonPort, ""},
		{"space", prod, "https://shop.example/a b", ReasonMalformed, ""},
		{"newline", prod, "https://shop.example/\r\nX: y", ReasonMalformed, ""},
		{"non-ASCII", prod, "https://shöp.example/", ReasonMalformed, ""},
		{"empty", prod, "", ReasonMalformed, ""},
		{"too long", prod, "https://shop.example/" + strings.Repeat("a", MaxURLLength), ReasonMalformed, ""},
		{"bad escape", prod, "https://shop.example/%zz", ReasonMalformed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := tt.p.CheckURL(tt.url)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want accepted", tt.url, err)
				}
				want := tt.want
				if want == "" {
					want = tt.url
				}
				if u.String() != want {
					t.Fatalf("CheckURL(%q) = %q, want %q", tt.url, u, want)
				}
				return
			}
			var ge *Error
			if !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("CheckURL(%q) = %v (%+v), want reason %q", tt.url, err, ge, tt.reason)
			}
			if errors.Is(err, ErrForbiddenAddress) != tt.reason.Address() {
				t.Fatalf("errors.Is(%v, ErrForbiddenAddress) = %v for reason %q", err, !tt.reason.Address(), tt.reason)
			}
			if u != nil {
				t.Fatalf("a refusal returned a URL %q", u)
			}
			if strings.Contains(err.Error(), "pass") {
				t.Fatalf("the refusal shows the user info: %v", err)
			}
		})
	}
}

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr     string
		loopback bool
		ok       bool
	}{
		{"93.184.216.34", false, true},
		{"8.8.8.8", false, true},
		{"2606:4700:4700::1111", false, true},
		{"10.0.0.1", false, false},
		{"10.255.255.255", true, false},
		{"172.16.0.1", false, false},
		{"172.31.255.255", false, false},
		{"172.32.0.1", false, true},
		{"192.168.1.1", false, false},
		{"127.0.0.1", false, false},
		{"127.8.9.10", false, false},
		{"127.0.0.1", true, true},
		{"::1", false, false},
		{"::1", true, true},
		{"169.254.169.254", true, false},
		{"fe80::1", false, false},
		{"fe80::1%eth0", true, false},
		{"fc00::1", false, false},
		{"fdff::1", false, false},
		{"100.64.0.1", false, false},
		{"100.127.255.255", false, false},
		{"100.128.0.1", false, true},
		{"0.0.0.0", true, false},
		{"::", true, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		{"255.255.255.255", false, false},
		{"::ffff:10.0.0.1", false, false},
		{"::ffff:127.0.0.1", true, true},
		{"::ffff:8.8.8.8", false, true},
		{"64:ff9b::a00:1", false, false},  // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", false, true}, // NAT64 of 8.8.8.8
		{"64:ff9b:1::1", false, false},    // NAT64 local use
		{"2002:a00:1::1", false, false},   // 6to4 of 10.0.0.1
		{"2002:808:808::1", false, true},  // 6to4 of 8.8.8.8
		{"2001:db8::1", false, false},
		{"2001::1", false, false}, // Teredo
		{"fec0::1", false, false},
		{"198.18.0.1", false, false},
		{"192.0.0.8", false, false},
		{"192.0.2.1", false, false},
		{"240.0.0.1", false, false},
	}
	for _, tt := range tests {
		err := Policy{AllowLoopback: tt.loopback}.CheckAddr(netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%s, loopback %v) = %v, want allowed %v", tt.addr, tt.loopback, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("CheckAddr(%s) = %v, not ErrForbiddenAddress", tt.addr, err)
		}
	}
	if err := prod.CheckAddr(netip.Addr{}); err == nil {
		t.Error("the zero Addr is allowed")
	}
}

func TestLooseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"2852039166":       "169.254.169.254",
		"0x7f.1":           "127.0.0.1",
		"0x7f000001":       "127.0.0.1",
		"012.0.0.1":        "10.0.0.1",
		"10.1":             "10.0.0.1",
		"192.168.257":      "192.168.1.1",
		"0xA9.0xFE.0xa9fe": "169.254.169.254",
		"4294967295":       "255.255.255.255",
	} {
		if a, ok := looseIPv4(in); !ok || a.String() != want {
			t.Errorf("looseIPv4(%q) = %v, %v, want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"4294967296", "1.2.3.4.5", "1.256.1.1", "08.1.1.1", "1..2", "1.2.3.256", "a.1"} {
		if a, ok := looseIPv4(in); ok {
			t.Errorf("looseIPv4(%q) = %v, want no address", in, a)
		}
	}
}

// fakeResolver answers from a map and counts lookups. No test sends a
// packet anywhere but loopback: a name resolved to any other address is
// refused before a socket exists, and the only listeners are on 127.0.0.1.
type fakeResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	calls []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, host)
	if a, ok := r.hosts[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// refusingDialer fails the test if anything is dialed.
func refusingDialer(t *testing.T) *net.Dialer {
	return &net.Dialer{ControlContext: func(_ context.Context, network, address string, _ syscall.RawConn) error {
		t.Errorf("dialed %s %s", network, address)
		return errors.New("test: no dial allowed")
	}}
}

func TestDialRefusesForbiddenResolution(t *testing.T) {
	res := &fakeResolver{hosts: map[string][]netip.Addr{
		"metadata.example": {netip.MustParseAddr("169.254.169.254")},
		"rebind.example":   {netip.MustParseAddr("10.0.0.1")},
		"mixed.example":    {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")},
		"mapped.example":   {netip.MustParseAddr("::ffff:10.0.0.1")},
		"ula.example":      {netip.MustParseAddr("fc00::1")},
		"cgnat.example":    {netip.MustParseAddr("100.64.0.1")},
		"local.example":    {netip.MustParseAddr("127.0.0.1")},
	}}
	p := Policy{Resolver: res, Dialer: refusingDialer(t)}
	for host, want := range map[string]Reason{
		"metadata.example": ReasonLinkLocal, "rebind.example": ReasonPrivate, "mixed.example": ReasonPrivate,
		"mapped.example": ReasonPrivate, "ula.example": ReasonPrivate, "cgnat.example": ReasonReserved,
		"local.example": ReasonLoopback,
		// Literals are checked without a lookup.
		"10.1.1.1": ReasonPrivate, "169.254.169.254": ReasonLinkLocal, "::1": ReasonLoopback, "fe80::1": ReasonLinkLocal,
		"0.0.0.0": ReasonUnspecified, "255.255.255.255": ReasonReserved, "fe80::1%lo": ReasonZone,
	} {
		c, err := p.DialContext(t.Context(), "tcp", net.JoinHostPort(host, "443"))
		var ge *Error
		if err == nil {
			c.Close()
		}
		if !errors.As(err, &ge) || ge.Reason != want || !errors.Is(err, ErrForbiddenAddress) ||
			!strings.Contains(err.Error(), "not allowed") || !strings.Contains(err.Error(), strings.Split(host, "%")[0]) {
			t.Errorf("dial %s: %v, want reason %s", host, err, want)
		}
	}
	if _, err := p.DialContext(t.Context(), "tcp", "nowhere.example:443"); err == nil || errors.Is(err, ErrForbiddenAddress) {
		t.Errorf("an unknown name: %v", err)
	}
}

// TestDialConnectsToTheCheckedAddress: a name is resolved once, by the
// guard, and that address is dialed; TLS still verifies the name
// (httptest's certificate is for example.com and 127.0.0.1).
func TestDialConnectsToTheCheckedAddress(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &fakeResolver{hosts: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}}}
	p := Policy{AllowLoopback: true, Resolver: res}
	c := srv.Client()
	c.Transport = p.Transport(srv.Client().Transport.(*http.Transport))
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(body), "example.com") || len(res.calls) != 1 {
		t.Fatalf("body %q, lookups %v", body, res.calls)
	}
	// The same policy without AllowLoopback refuses the same name.
	p.AllowLoopback = false
	c.Transport = p.Transport(srv.Client().Transport.(*http.Transport))
	if _, err := c.Get(fmt.Sprintf("https://example.com:%d/", port)); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("without AllowLoopback: %v", err)
	}
}

func TestControl(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// Refused before the socket connects.
	d := &net.Dialer{Control: prod.Control}
	if _, err := d.DialContext(t.Context(), "tcp", ln.Addr().String()); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("loopback in production: %v", err)
	}
	d.Control = Policy{AllowLoopback: true}.Control
	c, err := d.DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("loopback allowed: %v", err)
	}
	c.Close()
	// Called directly, as a dialer would call it: nothing is dialed.
	for _, a := range []string{"10.0.0.1:443", "169.254.169.254:80", "[fc00::1]:443", "[::ffff:192.168.1.1]:443"} {
		if err := sandbox.Control("tcp", a, nil); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("Control(%s) = %v", a, err)
		}
	}
	if err := prod.Control("tcp", "93.184.216.34:443", nil); err != nil {
		t.Errorf("Control(public) = %v", err)
	}
}

func TestClientRefusesRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	defer srv.Close()
	c := Policy{AllowLoopback: true}.Client(0)
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("status %d: the redirect was followed", resp.StatusCode)
	}
	// Following redirects through CheckRedirect refuses the private one.
	c.CheckRedirect = Policy{AllowLoopback: true}.CheckRedirect
	if _, err := c.Get(srv.URL); !errors.Is(err, ErrForbiddenAddress) {
		t.Fatalf("followed: %v", err)
	}
}
