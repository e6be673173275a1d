package webhook_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/webhook"
)

var operator = audit.Actor{Kind: "operator", ID: "op_alice"}

// setup opens a record and the endpoint service on an in-memory store,
// in sandbox mode (loopback receivers allowed).
func setup(now func() time.Time) (*memstore.Store, *audit.Log, *webhook.Endpoints) {
	st := memstore.New(nil)
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	l, err := audit.Open(context.Background(), st, key, &audit.Options{Now: now})
	if err != nil {
		log.Fatal(err)
	}
	eps, err := webhook.NewEndpoints(st, l, &webhook.Options{
		SealKey:           bytes.Repeat([]byte{1}, webhook.SealKeySize), // a real deployment: webhook.NewSealKey(), kept in a file
		AllowLoopbackHTTP: true,
		Now:               now,
	})
	if err != nil {
		log.Fatal(err)
	}
	return st, l, eps
}

func record(l *audit.Log, typ, data string) {
	err := l.Update(context.Background(), func(txn store.Txn) error {
		_, err := l.Append(txn, audit.Record{Type: typ, Actor: audit.Actor{Kind: "agent", ID: "ak_1"}, Data: json.RawMessage(data)})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleSign() {
	body := []byte(`{"id":"evt_1_audit.appended"}`)
	fmt.Println(webhook.Sign(body, []string{"whsec_example"}, time.Unix(1763805600, 0)))
	// Output:
	// t=1763805600,v1=fccbedfd7731165bab386607ac7b891f3159c56e2fe83017a16abc543f156d69
}

func ExampleVerify() {
	now := time.Unix(1763805600, 0)
	body := []byte(`{"id":"evt_1_audit.appended"}`)
	header := webhook.Sign(body, []string{"whsec_example"}, now)

	// During a rotation, pass both secrets.
	fmt.Println(webhook.Verify(body, header, []string{"whsec_new", "whsec_example"}, 0, now))

	err := webhook.Verify([]byte(`{"id":"evt_2_audit.appended"}`), header, []string{"whsec_example"}, 0, now)
	fmt.Println(errors.Is(err, webhook.ErrMismatch))

	err = webhook.Verify(body, header, []string{"whsec_example"}, 0, now.Add(10*time.Minute))
	fmt.Println(errors.Is(err, webhook.ErrTimestamp))

	err = webhook.Verify(body, "", []string{"whsec_example"}, 0, now)
	fmt.Println(errors.Is(err, webhook.ErrNoSignature))
	// Output:
	// <nil>
	// true
	// true
	// true
}

// A receiver's test feeds it a signed payload.
func ExampleSignedTestPayload() {
	now := time.Now()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(body, r.Header.Get(webhook.SignatureHeader), []string{"whsec_test"}, 0, time.Now()); err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		fmt.Println("accepted", r.Header.Get(webhook.EventIDHeader))
	})

	p := webhook.SignedTestPayload([]byte(`{"id":"evt_7_payment.settled","type":"payment.settled"}`), "whsec_test", now)
	req, err := p.Request("http://receiver.test/hooks")
	if err != nil {
		log.Fatal(err)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// accepted evt_7_payment.settled
	// 200
}

func ExampleDerive() {
	_, l, _ := setup(func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) })
	record(l, "gate.decision", `{"outcome":"deny","reasons":[{"code":"over_cap"}]}`)
	e, err := l.Get(context.Background(), 1)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range webhook.Derive(e) {
		fmt.Println(ev.ID, ev.Sequence, ev.CreatedAt.Format(time.RFC3339), string(ev.Data) == string(e.Data))
	}
	// Output:
	// evt_1_gate.decision 1 2026-11-22T10:00:00Z true
	// evt_1_intent.denied 1 2026-11-22T10:00:00Z true
	// evt_1_audit.appended 1 2026-11-22T10:00:00Z true
}

func ExampleKinds() {
	for _, k := range webhook.Kinds() {
		fmt.Printf("%-20s %s\n", k.Name, k.Payload)
	}
	// Output:
	// gate.decision        webhook.Event
	// intent.denied        webhook.Event
	// approval.pending     webhook.Event
	// payment.settled      webhook.Event
	// audit.appended       webhook.Event
	// memory.recorded      webhook.Event
	// memory.consolidated  webhook.Event
	// memory.erased        webhook.Event
	// memory.tainted       webhook.Event
	// protocol.dispute.open webhook.Event
	// protocol.dispute.resolve webhook.Event
	// protocol.obligation.expire webhook.Event
}

func ExampleEventID() {
	id := webhook.EventID(42, webhook.EventPaymentSettled)
	seq, kind, ok := webhook.ParseEventID(id)
	fmt.Println(id, seq, kind, ok)
	_, _, ok = webhook.ParseEventID("evt_042_payment.settled")
	fmt.Println(ok)
	// Output:
	// evt_42_payment.settled 42 payment.settled true
	// false
}

func ExampleDefaultSchedule() {
	var total time.Duration
	for _, d := range webhook.DefaultSchedule() {
		total += d
	}
	fmt.Println(len(webhook.DefaultSchedule())+1, "attempts over", total)
	// Output:
	// 15 attempts over 65h3m0s
}

func ExampleNewSealKey() {
	fmt.Println(len(webhook.NewSealKey()) == webhook.SealKeySize)
	// Output:
	// true
}

// Create, read, rotate and delete an endpoint. Every change is in the
// record; no secret is.
func ExampleEndpoints() {
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC) }
	_, l, eps := setup(now)

	c, err := eps.Create(ctx, webhook.CreateRequest{
		URL:    "https://hooks.example.com/countersign",
		Events: []string{webhook.EventPaymentSettled, webhook.EventIntentDenied},
	}, operator, "req_1", "notify the finance system")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(c.ID, "we_"), c.Active, c.Events, strings.HasPrefix(c.Secret, "whsec_"), len(c.Secret))

	got, _ := eps.Get(ctx, c.ID)
	b, _ := json.Marshal(got)
	fmt.Println("secret in read:", strings.Contains(string(b), c.Secret))

	u, err := eps.Update(ctx, c.ID, webhook.UpdateRequest{RotateSecret: true}, operator, "req_2", "quarterly secret rotation")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("old secret signs until", u.PreviousSecretExpiresAt.Format(time.RFC3339))

	_, err = eps.Create(ctx, webhook.CreateRequest{URL: "https://10.0.0.8/hook", Events: []string{"*"}}, operator, "req_3", "an internal host")
	fmt.Println(err)

	if err := eps.Delete(ctx, c.ID, operator, "req_4", "finance system retired"); err != nil {
		log.Fatal(err)
	}
	_, err = eps.Get(ctx, c.ID)
	fmt.Println(errors.Is(err, webhook.ErrNotFound))

	for e, err := range l.Entries(ctx, 0, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Seq, e.Type, e.Rationale, strings.Contains(string(e.Data), "whsec_"))
	}
	// Output:
	// true true [payment.settled intent.denied] true 49
	// secret in read: false
	// old secret signs until 2026-11-23T10:00:00Z
	// webhook: invalid endpoint url: destination 10.0.0.8 is private
	// true
	// 1 webhook.endpoint_created notify the finance system false
	// 2 webhook.endpoint_updated quarterly secret rotation false
	// 3 webhook.endpoint_deleted finance system retired false
}

// Drive a dispatcher step by step with Tick (as tests do with a fake
// clock): a receiver that fails once gets the event on the retry.
func ExampleDispatcher_Tick() {
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	st, l, eps := setup(now)

	var secret string
	var got []string
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(body, r.Header.Get(webhook.SignatureHeader), []string{secret}, 0, now()); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 1 {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		got = append(got, r.Header.Get(webhook.EventIDHeader))
	}))
	defer srv.Close()

	c, err := eps.Create(ctx, webhook.CreateRequest{URL: srv.URL + "/hooks", Events: []string{webhook.EventPaymentSettled}},
		operator, "req_1", "local test receiver")
	if err != nil {
		log.Fatal(err)
	}
	secret = c.Secret

	d, err := webhook.NewDispatcher(st, l, eps, &webhook.DispatcherOptions{
		AllowLoopback: true,
		Now:           now,
		Rand:          func() float64 { return 0 }, // no jitter draw: the first retry is exactly 1 minute later
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close(ctx)

	record(l, "payment.settled", `{"amount":"12.50"}`)
	n, _ := d.Tick(ctx)
	p, _ := d.Deliveries(ctx, c.ID, "", 0)
	fmt.Println(n, "attempt:", p.Data[0].State, p.Data[0].LastStatus, p.Data[0].NextAttempt.Sub(now()))

	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	n, _ = d.Tick(ctx)
	p, _ = d.Deliveries(ctx, c.ID, "", 0)
	fmt.Println(n, "attempt:", p.Data[0].State, p.Data[0].Attempts, got)
	// Output:
	// 1 attempt: pending 503 1m0s
	// 1 attempt: delivered 2 [evt_2_payment.settled]
}

// Run a dispatcher in the background; Close drains it.
func ExampleDispatcher_Start() {
	ctx := context.Background()
	st, l, eps := setup(time.Now)

	arrived := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get(webhook.EventIDHeader)
	}))
	defer srv.Close()
	if _, err := eps.Create(ctx, webhook.CreateRequest{URL: srv.URL, Events: []string{"*"}}, operator, "req_1", "local test receiver"); err != nil {
		log.Fatal(err)
	}
	d, err := webhook.NewDispatcher(st, l, eps, &webhook.DispatcherOptions{AllowLoopback: true})
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		log.Fatal(err)
	}
	record(l, "gate.decision", `{"outcome":"confirm"}`)

	var ids []string
	for range 3 {
		ids = append(ids, <-arrived)
	}
	slices.Sort(ids) // arrival order is not the sequence
	fmt.Println(ids)
	if err := d.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [evt_2_approval.pending evt_2_audit.appended evt_2_gate.decision]
}

// An operator re-sends a failed delivery once the receiver is fixed.
func ExampleDispatcher_Retry() {
	ctx := context.Background()
	var mu sync.Mutex
	clock := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	st, l, eps := setup(now)

	status := http.StatusInternalServerError
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
	}))
	defer srv.Close()
	c, _ := eps.Create(ctx, webhook.CreateRequest{URL: srv.URL, Events: []string{webhook.EventPaymentSettled}}, operator, "req_1", "local test receiver")
	// No retries: one failed attempt fails the delivery.
	d, _ := webhook.NewDispatcher(st, l, eps, &webhook.DispatcherOptions{AllowLoopback: true, Now: now, Schedule: []time.Duration{}})
	defer d.Close(ctx)

	record(l, "payment.settled", `{}`)
	d.Tick(ctx)
	p, _ := d.Deliveries(ctx, c.ID, "", 0)
	fmt.Println(p.Data[0].EventID, p.Data[0].State, p.Data[0].LastError)

	mu.Lock()
	status = http.StatusOK
	mu.Unlock()
	if _, err := d.Retry(ctx, c.ID, p.Data[0].EventID, operator, "req_2", "receiver fixed, resend"); err != nil {
		log.Fatal(err)
	}
	d.Tick(ctx)
	p, _ = d.Deliveries(ctx, c.ID, "", 0)
	fmt.Println(p.Data[0].EventID, p.Data[0].State, p.Data[0].Attempts)
	// Output:
	// evt_2_payment.settled failed the receiver answered 500 Internal Server Error
	// evt_2_payment.settled delivered 2
}
