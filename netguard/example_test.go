package netguard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/countersign/countersign/netguard"
)

// Registration checks a URL before anything is stored: the refusal has a
// stable reason for programs and a detail for people.
func ExamplePolicy_CheckURL() {
	var production netguard.Policy // the zero Policy: https, public addresses only
	for _, raw := range []string{
		"https://Merchant.Example/.well-known/ucp",
		"http://169.254.169.254/latest/meta-data/",
		"https://2852039166/",
		"https://[::ffff:10.0.0.1]/",
		"https://user:secret@merchant.example/",
	} {
		u, err := production.CheckURL(raw)
		var refused *netguard.Error
		if errors.As(err, &refused) {
			fmt.Printf("refused (%s): %v\n", refused.Reason, err)
			continue
		}
		fmt.Println("accepted:", u)
	}
	// Output:
	// accepted: https://merchant.example/.well-known/ucp
	// refused (link_local): destination 169.254.169.254 is link-local
	// refused (link_local): destination 2852039166 is 169.254.169.254, link-local
	// refused (private): destination ::ffff:10.0.0.1 is private
	// refused (userinfo): url must not carry user info
}

// Sandbox mode admits loopback, so tests can use httptest servers; never
// private or link-local addresses.
func ExamplePolicy_CheckURL_sandbox() {
	sandbox := netguard.Policy{AllowLoopback: true, AllowHTTP: true}
	for _, raw := range []string{"http://127.0.0.1:8080/hook", "http://localhost:9000/", "http://192.168.1.1/"} {
		_, err := sandbox.CheckURL(raw)
		fmt.Println(raw, err == nil)
	}
	// Output:
	// http://127.0.0.1:8080/hook true
	// http://localhost:9000/ true
	// http://192.168.1.1/ false
}

func ExamplePolicy_CheckAddr() {
	var p netguard.Policy
	for _, a := range []string{"93.184.216.34", "100.64.0.1", "64:ff9b::a00:1"} {
		err := p.CheckAddr(netip.MustParseAddr(a))
		fmt.Println(a, err == nil, errors.Is(err, netguard.ErrForbiddenAddress))
	}
	// Output:
	// 93.184.216.34 true false
	// 100.64.0.1 false true
	// 64:ff9b::a00:1 false true
}

// staticResolver stands in for DNS: the name an attacker controls
// resolves inside the network.
type staticResolver map[string][]netip.Addr

func (r staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return r[host], nil
}

// DialContext resolves the name itself and refuses before connecting, so
// a name that passed CheckURL but resolves (or later rebinds) to a private
// address is still refused.
func ExamplePolicy_DialContext() {
	p := netguard.Policy{Resolver: staticResolver{"rebind.example": {netip.MustParseAddr("10.0.0.7")}}}
	_, err := p.DialContext(context.Background(), "tcp", "rebind.example:443")
	fmt.Println(err)
	// Output:
	// netguard: dial rebind.example:443: destination not allowed: rebind.example resolves to 10.0.0.7, which is private
}

// Control guards a net.Dialer built elsewhere; it runs before the socket
// connects.
func ExamplePolicy_Control() {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: netguard.Policy{}.Control}
	_ = d // a library's own dialer
	err := netguard.Policy{}.Control("tcp4", "169.254.169.254:80", nil)
	fmt.Println(err)
	// Output:
	// destination not allowed: 169.254.169.254 is link-local
}

// A program embedding the merchant clients gives them a guarded transport,
// keeping its own TLS and pool settings.
func ExamplePolicy_Transport() {
	base := &http.Transport{MaxIdleConnsPerHost: 16, TLSHandshakeTimeout: 5 * time.Second}
	client := &http.Client{Transport: netguard.Policy{}.Transport(base), Timeout: 10 * time.Second}
	_, err := client.Get("https://169.254.169.254/latest/meta-data/")
	fmt.Println(errors.Is(err, netguard.ErrForbiddenAddress))
	// Output:
	// true
}

// Client is what the reference server hands its merchant and counterparty
// clients: guarded, no proxy, no redirects.
func ExamplePolicy_Client() {
	client := netguard.Policy{}.Client(10 * time.Second)
	_, err := client.Get("https://[fd00::1]/")
	var refused *netguard.Error
	fmt.Println(errors.As(err, &refused), refused.Reason)
	// Output:
	// true private
}

// CheckRedirect lets a client follow redirects, each to a URL the policy
// accepts.
func ExamplePolicy_CheckRedirect() {
	client := netguard.Policy{}.Client(10 * time.Second)
	client.CheckRedirect = netguard.Policy{}.CheckRedirect
	req, _ := http.NewRequest(http.MethodGet, "http://merchant.example/", nil)
	fmt.Println(client.CheckRedirect(req, nil))
	// Output:
	// netguard: redirect refused: url scheme must be https
}

func ExampleReason_Address() {
	fmt.Println(netguard.ReasonPrivate.Address(), netguard.ReasonScheme.Address())
	// Output:
	// true false
}
