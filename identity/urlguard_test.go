package identity

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/store"
)

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

// TestRegisterRefusesInternalBaseURLs: a base URL naming an internal
// address, in any spelling, is refused with identity.invalid_counterparty
// (400) and the reason of the shared guard, and nothing is written.
func TestRegisterRefusesInternalBaseURLs(t *testing.T) {
	prod := newDeployment(t, nil)
	sandbox := newDeployment(t, func(o *Options) { o.URLs = netguard.Policy{AllowLoopback: true, AllowHTTP: true} })
	call := OperatorCall{Operator: "op", Rationale: "partners"}
	agent := DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{3}, 32)))
	for _, tc := range []struct {
		d      *deployment
		url    string
		reason netguard.Reason
	}{
		{sandbox, "http://169.254.169.254", netguard.ReasonLinkLocal},
		{sandbox, "http://10.0.0.1", netguard.ReasonPrivate},
		{sandbox, "http://192.168.1.1:8080", netguard.ReasonPrivate},
		{sandbox, "https://172.16.0.9", netguard.ReasonPrivate},
		{sandbox, "https://100.64.0.1", netguard.ReasonReserved},
		{sandbox, "https://[fe80::1]", netguard.ReasonLinkLocal},
		{sandbox, "https://[fc00::1]", netguard.ReasonPrivate},
		{sandbox, "https://[::ffff:10.0.0.1]", netguard.ReasonPrivate},
		{sandbox, "http://2852039166", netguard.ReasonLinkLocal},
		{prod, "https://127.0.0.1", netguard.ReasonLoopback},
		{prod, "https://localhost", netguard.ReasonLoopback},
		{prod, "https://0x7f.1", netguard.ReasonLoopback},
		{prod, "https://[::1]", netguard.ReasonLoopback},
		{prod, "https://user:pw@agent.example", netguard.ReasonUserInfo},
		{prod, "http://agent.example", netguard.ReasonScheme},
		{prod, "ftp://agent.example", netguard.ReasonScheme},
	} {
		before, err := tc.d.log.Size(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, err = tc.d.svc.Register(t.Context(), Registration{ID: "partner", BaseURL: tc.url, AgentID: agent}, call)
		var ge *netguard.Error
		if !errors.Is(err, ErrInvalidCounterparty) || !errors.As(err, &ge) || ge.Reason != tc.reason {
			t.Errorf("%s: %v, want %v with reason %s", tc.url, err, ErrInvalidCounterparty, tc.reason)
			continue
		}
		var coded interface{ Code() string }
		if !errors.As(err, &coded) || coded.Code() != CodeInvalidParty || problemStatus(t, coded.Code()) != 400 {
			t.Errorf("%s: %v is not a 400 %s", tc.url, err, CodeInvalidParty)
		}
		after, _ := tc.d.log.Size(t.Context())
		page, _ := tc.d.svc.Counterparties(t.Context(), "", 100)
		if after != before || len(page.Data) != 0 {
			t.Errorf("%s: the refusal wrote (record %d → %d, %d registrations)", tc.url, before, after, len(page.Data))
		}
	}
	// Sandbox mode admits loopback, which tests serve on; production a
	// public name.
	if _, err := sandbox.svc.Register(t.Context(), Registration{ID: "local", BaseURL: "http://127.0.0.1:8080/", AgentID: agent}, call); err != nil {
		t.Errorf("loopback in sandbox: %v", err)
	}
	if r, err := prod.svc.Register(t.Context(), Registration{ID: "public", BaseURL: "https://Agent.Example/adp/", AgentID: agent}, call); err != nil ||
		r.BaseURL != "https://agent.example/adp" {
		t.Errorf("public: %+v %v", r, err)
	}
	if _, err := prod.svc.Register(t.Context(), Registration{ID: "query", BaseURL: "https://agent.example/?x=1", AgentID: agent}, call); !errors.Is(err, ErrInvalidCounterparty) {
		t.Errorf("a query: %v", err)
	}
}

// failTransport fails the test on any request.
type failTransport struct{ t *testing.T }

func (f failTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("fetched %s", r.URL)
	return nil, errors.New("test: no request allowed")
}

// TestVerifyRefusesAStoredInternalBaseURL: a registration stored before
// the guard refused its URL is never fetched; the verification records a
// refusal, as for an unreachable counterparty.
func TestVerifyRefusesAStoredInternalBaseURL(t *testing.T) {
	d := newDeployment(t, func(o *Options) { o.HTTPClient = &http.Client{Transport: failTransport{t}} })
	agent := DIDKey(ed25519.PublicKey(bytes.Repeat([]byte{4}, 32)))
	reg := Registration{ID: "old", Kind: "agent", BaseURL: "http://169.254.169.254", AgentID: agent, CreatedAt: d.clock.Now()}
	b, _ := json.Marshal(reg)
	k, _ := PublicKeyOf(agent)
	if err := d.st.Update(t.Context(), func(txn store.Txn) error {
		if err := txn.Set([]byte(keyParty+reg.ID), b); err != nil {
			return err
		}
		return txn.Set([]byte(keyPartyAgent+keyHex(k)), []byte(reg.ID))
	}); err != nil {
		t.Fatal(err)
	}
	c, err := d.svc.Resolve(t.Context(), "old", ResolveOptions{Verify: true}, audit.Actor{Kind: "agent", ID: "ak"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Trust == nil || c.Trust.Outcome != OutcomeRefuse || !slices.Contains(c.Trust.Failed, "reachable") {
		t.Fatalf("trust %+v", c.Trust)
	}
}
