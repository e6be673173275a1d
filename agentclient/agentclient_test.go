package agentclient

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/pay"
)

func TestFillTerms(t *testing.T) {
	for _, tc := range []struct {
		in   pay.Terms
		cred gate.Credential
		want pay.Terms
	}{
		{pay.Terms{Rail: "sandbox-card"}, gate.CredentialAPIKey,
			pay.Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant, Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}},
		{pay.Terms{Rail: "sandbox-chain"}, gate.CredentialDPoP,
			pay.Terms{Rail: "sandbox-chain", Reversibility: gate.Irreversible, Finality: gate.FinalityInstant, Credential: gate.CredentialDPoP, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}},
		{pay.Terms{Rail: "somebank", Finality: gate.FinalityDeferred, Presence: gate.PresencePresent}, gate.CredentialAPIKey,
			pay.Terms{Rail: "somebank", Reversibility: gate.Reversible, Finality: gate.FinalityDeferred, Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresencePresent}},
		{pay.Terms{Rail: "ucp"}, gate.CredentialAPIKey,
			pay.Terms{Rail: "ucp", Reversibility: gate.Irreversible, Finality: gate.FinalityInstant, Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated}},
	} {
		got := tc.in
		FillTerms(&got, tc.cred)
		if got != tc.want {
			t.Errorf("FillTerms(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// A DPoP-bound agent sends the DPoP scheme and a proof for the request's
// method and URL without query, and declares dpop in its terms.
func TestDoDPoP(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var got http.Header
	var gotURL string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotURL = r.Header.Clone(), r.URL.String()
		w.WriteHeader(http.StatusNoContent)
	})
	a := &Agent{BaseURL: "http://countersign.local/", Credential: "svc_ak_a_b", DPoPKey: key, Tags: "team=a",
		HTTPClient: &http.Client{Transport: HandlerTransport(h)}}
	resp, err := a.Do(context.Background(), Request{Method: "POST", Path: "/pay", IdempotencyKey: "k1", Body: []byte(`{}`), Query: map[string][]string{"x": {"1"}}})
	if err != nil || resp.Status != http.StatusNoContent {
		t.Fatalf("Do: %v %+v", err, resp)
	}
	if got.Get("Authorization") != "DPoP svc_ak_a_b" || got.Get("DPoP") == "" || got.Get("Idempotency-Key") != "k1" ||
		got.Get("X-Svc-Tags") != "team=a" || got.Get("Content-Type") != "application/json" || gotURL != "/pay?x=1" {
		t.Errorf("headers %v, url %s", got, gotURL)
	}
	if a.CredentialKind() != gate.CredentialDPoP {
		t.Errorf("credential kind %s", a.CredentialKind())
	}
}

// The transport streams: each flush reaches the reader while the handler
// still runs, and cancelling the request ends the handler.
func TestHandlerTransportStreams(t *testing.T) {
	next := make(chan int)
	ended := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(ended)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for {
			select {
			case n := <-next:
				fmt.Fprintf(w, "data: %d\n", n)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	a := &Agent{BaseURL: "http://x", HTTPClient: &http.Client{Transport: HandlerTransport(h)}}
	resp, err := a.Open(ctx, Request{Method: "GET", Path: "/audit/stream"})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for i := range 3 {
		next <- i
		if !sc.Scan() || sc.Text() != fmt.Sprintf("data: %d", i) {
			t.Fatalf("line %d: %q %v", i, sc.Text(), sc.Err())
		}
	}
	cancel()
	<-ended
}

func TestHandlerTransportPanics(t *testing.T) {
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })
	a := &Agent{BaseURL: "http://x", HTTPClient: &http.Client{Transport: HandlerTransport(h)}}
	_, err := a.Do(context.Background(), Request{Method: "GET", Path: "/"})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("err = %v", err)
	}
}
