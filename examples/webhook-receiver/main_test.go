package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

// Example runs the receiver in-process against a real dispatcher: the
// events of two record entries arrive verified, a re-sent event is
// recognised as a duplicate, and a tampered body is refused.
func Example() {
	ctx := context.Background()
	st := memstore.New(nil)
	l, err := audit.Open(ctx, st, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), nil)
	if err != nil {
		panic(err)
	}
	eps, err := webhook.NewEndpoints(st, l, &webhook.Options{SealKey: webhook.NewSealKey(), AllowLoopbackHTTP: true})
	if err != nil {
		panic(err)
	}
	rc := newReceiver(nil, os.Stdout, time.Now)
	srv := httptest.NewServer(rc)
	defer srv.Close()

	c, err := eps.Create(ctx, webhook.CreateRequest{URL: srv.URL + "/hooks", Events: []string{webhook.EventIntentDenied, webhook.EventPaymentSettled}},
		audit.Actor{Kind: "operator", ID: "op_1"}, "req_1", "example receiver")
	if err != nil {
		panic(err)
	}
	rc.setSecrets([]string{c.Secret})
	// One worker, so this example's output has a fixed order.
	d, err := webhook.NewDispatcher(st, l, eps, &webhook.DispatcherOptions{AllowLoopback: true, Workers: 1})
	if err != nil {
		panic(err)
	}
	defer d.Close(ctx)

	for _, r := range []audit.Record{
		{Type: "gate.decision", Actor: audit.Actor{Kind: "agent", ID: "ak_1"}, Data: json.RawMessage(`{"outcome":"deny"}`)},
		{Type: "payment.settled", Actor: audit.Actor{Kind: "system", ID: "settle"}, Data: json.RawMessage(`{"amount":"12.50"}`)},
	} {
		if err := l.Update(ctx, func(txn store.Txn) error { _, err := l.Append(txn, r); return err }); err != nil {
			panic(err)
		}
	}
	if _, err := d.Tick(ctx); err != nil {
		panic(err)
	}

	// The operator re-sends an event: the receiver answers 200 and
	// handles it once.
	if _, err := d.Retry(ctx, c.ID, "evt_3_payment.settled", audit.Actor{Kind: "operator", ID: "op_1"}, "req_2", "re-send for the example"); err != nil {
		panic(err)
	}
	if _, err := d.Tick(ctx); err != nil {
		panic(err)
	}

	// A body altered after signing is refused before it is parsed.
	p := webhook.SignedTestPayload([]byte(`{"id":"evt_9_payment.settled","type":"payment.settled"}`), c.Secret, time.Now())
	tampered := bytes.Replace(p.Body, []byte("evt_9"), []byte("evt_8"), 1)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks", bytes.NewReader(tampered))
	req.Header.Set(webhook.SignatureHeader, p.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("tampered:", resp.Status)

	// Output:
	// intent.denied #2 evt_2_intent.denied data={"outcome":"deny"}
	// payment.settled #3 evt_3_payment.settled data={"amount":"12.50"}
	// duplicate evt_3_payment.settled
	// tampered: 400 Bad Request
}

func TestReceiver(t *testing.T) {
	now := time.Unix(1763805600, 0)
	body := []byte(`{"id":"evt_5_payment.settled","type":"payment.settled","sequence":5,"data":{}}`)
	tests := []struct {
		name   string
		body   []byte
		header string
		status int
		out    string
	}{
		{"valid", body, webhook.Sign(body, []string{"whsec_new"}, now), 200, "payment.settled #5"},
		{"old secret during rotation", body, webhook.Sign(body, []string{"whsec_old"}, now), 200, "duplicate"},
		{"no signature", body, "", 400, ""},
		{"wrong secret", body, webhook.Sign(body, []string{"whsec_other"}, now), 400, ""},
		{"stale", body, webhook.Sign(body, []string{"whsec_new"}, now.Add(-time.Hour)), 401, ""},
		{"signed garbage", []byte("not json"), webhook.Sign([]byte("not json"), []string{"whsec_new"}, now), 400, ""},
	}
	var out bytes.Buffer
	rc := newReceiver([]string{"whsec_new", "whsec_old"}, &out, func() time.Time { return now })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out.Reset()
			req := httptest.NewRequest(http.MethodPost, "/hooks", bytes.NewReader(tt.body))
			req.Header.Set(webhook.SignatureHeader, tt.header)
			w := httptest.NewRecorder()
			rc.ServeHTTP(w, req)
			if w.Code != tt.status || !strings.Contains(out.String(), tt.out) || (tt.out == "" && out.Len() > 0) {
				t.Fatalf("status %d, output %q", w.Code, out.String())
			}
		})
	}
}

func TestRememberIsBounded(t *testing.T) {
	rc := newReceiver(nil, &bytes.Buffer{}, time.Now)
	for i := range maxRemembered + 10 {
		rc.remember(fmt.Sprint("evt_", i))
	}
	if len(rc.seen) != maxRemembered || rc.seen["evt_0"] || !rc.seen[fmt.Sprint("evt_", maxRemembered+9)] {
		t.Fatalf("%d remembered", len(rc.seen))
	}
}
