package commerce

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store"
)

var sandboxURLs = netguard.Policy{AllowLoopback: true, AllowHTTP: true}

// problemStatus is the HTTP status the contract declares for code.
func problemStatus(t *testing.T, code string) int {
	t.Helper()
	for _, p := range Contract().Problems {
		if p.Code == code {
			return p.Status
		}
	}
	t.Fatalf("no problem %s in the contract", code)
	return 0
}

// wrote reports the record's size and the number of stored registrations.
func wrote(t *testing.T, f *fixture, s *Service) (uint64, int) {
	t.Helper()
	size, err := f.log.Size(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = f.st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate([]byte(keyMerchant), store.PrefixEnd([]byte(keyMerchant)), false)
		for it.Next() {
			n++
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return size, n
}

// refusedURL checks that err is a 400 commerce.invalid_merchant carrying
// the guard's reason.
func refusedURL(t *testing.T, what string, err error, reason netguard.Reason) {
	t.Helper()
	var ge *netguard.Error
	var coded interface{ Code() string }
	switch {
	case !errors.Is(err, ErrInvalidMerchant) || !errors.As(err, &ge) || ge.Reason != reason:
		t.Errorf("%s: %v, want %v with reason %s", what, err, ErrInvalidMerchant, reason)
	case !errors.As(err, &coded) || coded.Code() != CodeInvalidMerchant || problemStatus(t, coded.Code()) != 400:
		t.Errorf("%s: %v is not a 400 %s", what, err, CodeInvalidMerchant)
	}
}

// TestRegisterMerchantRefusesInternalURLs: every merchant URL passes the
// shared guard; an internal one is refused with 400
// commerce.invalid_merchant before the server connects, and nothing is
// written.
func TestRegisterMerchantRefusesInternalURLs(t *testing.T) {
	f := newFixture(t)
	connects := 0
	connect := func(context.Context, MerchantSpec) (cart.Merchant, error) {
		connects++
		return nil, errors.New("test: no connection expected")
	}
	open := func(urls netguard.Policy) *Service {
		s, err := New(Options{Store: f.st, Log: f.log, Now: f.now, Connect: connect, URLs: urls, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	prod, sandbox := open(netguard.Policy{}), open(sandboxURLs)
	call := pay.OperatorCall{Operator: "op", Rationale: "a new supplier"}
	for _, tc := range []struct {
		svc    *Service
		spec   MerchantSpec
		reason netguard.Reason
	}{
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "http://169.254.169.254"}, netguard.ReasonLinkLocal},
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "http://10.0.0.1/api"}, netguard.ReasonPrivate},
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://shop.example", PSPURL: "http://192.168.1.1"}, netguard.ReasonPrivate},
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://172.16.4.4"}, netguard.ReasonPrivate},
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://100.64.0.1"}, netguard.ReasonReserved},
		{sandbox, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://[fe80::1]/.well-known/ucp"}, netguard.ReasonLinkLocal},
		{sandbox, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://[fc00::1]/.well-known/ucp"}, netguard.ReasonPrivate},
		{sandbox, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://[::ffff:10.0.0.1]/.well-known/ucp"}, netguard.ReasonPrivate},
		{sandbox, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "http://2852039166/.well-known/ucp"}, netguard.ReasonLinkLocal},
		{sandbox, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://0.0.0.0"}, netguard.ReasonUnspecified},
		{prod, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://127.0.0.1:8443"}, netguard.ReasonLoopback},
		{prod, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://0x7f.1"}, netguard.ReasonLoopback},
		{prod, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://localhost/.well-known/ucp"}, netguard.ReasonLoopback},
		{prod, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "https://[::1]/.well-known/ucp"}, netguard.ReasonLoopback},
		{prod, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "https://key:secret@shop.example"}, netguard.ReasonUserInfo},
		{prod, MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "http://shop.example"}, netguard.ReasonScheme},
		{prod, MerchantSpec{ID: "m", Protocol: "ucp", ProfileURL: "file:///etc/passwd"}, netguard.ReasonScheme},
	} {
		size, n := wrote(t, f, tc.svc)
		_, err := tc.svc.RegisterMerchant(t.Context(), tc.spec, call)
		refusedURL(t, tc.spec.BaseURL+tc.spec.PSPURL+tc.spec.ProfileURL, err, tc.reason)
		if size2, n2 := wrote(t, f, tc.svc); size2 != size || n2 != n {
			t.Errorf("%+v: the refusal wrote", tc.spec)
		}
	}
	if connects != 0 {
		t.Fatalf("refused registrations connected %d times", connects)
	}
	// The same check, for merchants a program configures itself.
	if err := (MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "http://127.0.0.1:9000"}).Check(sandboxURLs); err != nil {
		t.Errorf("loopback in sandbox: %v", err)
	}
	refusedURL(t, "Check", MerchantSpec{ID: "m", Protocol: "acp", BaseURL: "http://10.9.9.9"}.Check(sandboxURLs), netguard.ReasonPrivate)
}

// fakeDNS resolves names for the guard; nothing is ever sent to the
// addresses it returns.
type fakeDNS map[string][]netip.Addr

func (r fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestRegisterMerchantRefusesInternalDestinations: what the URLs lead to
// is checked too. A UCP profile (served on loopback) that declares its
// endpoint at a private address, and a profile name that resolves to one,
// are refused with 400 and nothing is written; the second never leaves
// the guard's dialer.
func TestRegisterMerchantRefusesInternalDestinations(t *testing.T) {
	f := newFixture(t)
	shop := newUCPShop(t, f)
	// The same fake merchant, declaring its REST endpoint at 10.0.0.9.
	shop.fm = fakemerchant.New(&fakemerchant.Options{BaseURL: "http://10.0.0.9:8080", Now: f.now})
	shop.srv.Config.Handler = shop.fm.UCPHandler()
	urls := sandboxURLs
	urls.Resolver = fakeDNS{"shop.example": {netip.MustParseAddr("10.0.0.1")}}
	client := urls.Client(5 * time.Second)
	svc, err := New(Options{Store: f.st, Log: f.log, Now: f.now, URLs: urls, Logger: slog.New(slog.DiscardHandler),
		Connect: func(ctx context.Context, sp MerchantSpec) (cart.Merchant, error) {
			return ucp.New(ctx, ucp.Options{ProfileURL: sp.ProfileURL, MerchantID: sp.ID, HTTPClient: client, Now: f.now,
				Logger: slog.New(slog.DiscardHandler)})
		}})
	if err != nil {
		t.Fatal(err)
	}
	call := pay.OperatorCall{Operator: "op", Rationale: "a new supplier"}
	size, n := wrote(t, f, svc)
	_, err = svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "ucpshop", Protocol: "ucp", ProfileURL: shop.srv.URL + "/.well-known/ucp"}, call)
	refusedURL(t, "declared endpoint", err, netguard.ReasonPrivate)
	_, err = svc.RegisterMerchant(t.Context(), MerchantSpec{ID: "named", Protocol: "ucp", ProfileURL: "https://shop.example/.well-known/ucp"}, call)
	refusedURL(t, "name resolving to 10.0.0.1", err, netguard.ReasonPrivate)
	if !errors.Is(err, netguard.ErrForbiddenAddress) {
		t.Errorf("name resolving to 10.0.0.1: %v", err)
	}
	if size2, n2 := wrote(t, f, svc); size2 != size || n2 != n {
		t.Errorf("the refusals wrote")
	}
}

// TestStoredInternalMerchantIsNeverCalled: a registration stored before
// the guard refused its URL stays listed, but is never connected to.
func TestStoredInternalMerchantIsNeverCalled(t *testing.T) {
	f := newFixture(t)
	row := storedMerchant{MerchantView: MerchantView{ID: "old", Protocol: "acp", BaseURL: "http://169.254.169.254", Source: "operator"}}
	b, _ := json.Marshal(row)
	if err := f.st.Update(t.Context(), func(txn store.Txn) error { return txn.Set([]byte(keyMerchant+"old"), b) }); err != nil {
		t.Fatal(err)
	}
	connects := 0
	svc, err := New(Options{Store: f.st, Log: f.log, Now: f.now, URLs: sandboxURLs, Logger: slog.New(slog.DiscardHandler),
		Connect: func(context.Context, MerchantSpec) (cart.Merchant, error) {
			connects++
			return nil, errors.New("test: connected")
		}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := svc.Merchant("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(t.Context(), "cs_1"); !errors.Is(err, cart.ErrUnavailable) || !errors.Is(err, netguard.ErrForbiddenAddress) || connects != 0 {
		t.Fatalf("Get = %v after %d connects", err, connects)
	}
}
