package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/keyfile"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store/pebblestore"
	"github.com/countersign/countersign/webhook"
)

// receiver is a webhook receiver that refuses the first three attempts of
// every event, verifies every delivery's signature over the raw body, and
// keeps each event once, with the order of arrival.
type receiver struct {
	mu       sync.Mutex
	secret   string
	attempts map[string]int
	got      map[string]webhook.Event
	arrival  []uint64
	badSig   int
	want     map[string]bool // when set, done closes once all of them arrived
	done     chan struct{}
	closed   bool
}

// checkDone closes done once every wanted event arrived; rc.mu is held.
func (rc *receiver) checkDone() {
	if rc.want == nil || rc.closed {
		return
	}
	for id := range rc.want {
		if _, ok := rc.got[id]; !ok {
			return
		}
	}
	rc.closed = true
	close(rc.done)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := webhook.Verify(body, r.Header.Get("Svc-Signature"), []string{rc.secret}, webhook.DefaultTolerance, time.Now()); err != nil {
		rc.badSig++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.attempts[ev.ID]++
	if rc.attempts[ev.ID] <= 3 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if _, dup := rc.got[ev.ID]; !dup {
		rc.got[ev.ID] = ev
		rc.arrival = append(rc.arrival, ev.Sequence)
	}
	rc.checkDone()
	w.WriteHeader(http.StatusOK)
}

// TestWebhooksSurviveSIGKILL registers an endpoint whose receiver refuses
// every event three times, makes payments, SIGKILLs the server while
// deliveries are being retried, restarts it, and checks that every event
// derived from the record after the endpoint's creation arrives, signed,
// exactly as derived — nothing lost — and that sequence restores the order
// that retries scrambled.
func TestWebhooksSurviveSIGKILL(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	flags := []string{"--webhook-schedule", "50ms,50ms,50ms,50ms,50ms,50ms", "--sandbox-latency", "off",
		"--agent-rate", "100000", "--agent-burst", "100000"}
	srv := startProc(t, bin, dir, flags...)
	defer func() { srv.kill() }()
	sandbox := filepath.Join(dir, "sandbox")

	rc := &receiver{attempts: map[string]int{}, got: map[string]webhook.Event{}, done: make(chan struct{})}
	hook := httptest.NewServer(rc)
	defer hook.Close()

	// The operator registers the endpoint (sandbox mode allows loopback http).
	op, err := keyfile.Read(filepath.Join(sandbox, sandboxOperatorKey))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := operator.NewSigner(op.Signer, op.KeyID, srv.base, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"url": hook.URL + "/hook", "events": []string{"*"}, "rationale": "crash test receiver"})
	req, _ := http.NewRequest(http.MethodPost, srv.base+"/webhooks/endpoints", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := signer.Sign(req, "webhooks.create", body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var created webhook.Created
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || json.Unmarshal(b, &created) != nil || !strings.HasPrefix(created.Secret, "whsec_") {
		t.Fatalf("create endpoint: %d %s", resp.StatusCode, b)
	}
	rc.mu.Lock()
	rc.secret = created.Secret
	rc.mu.Unlock()

	pay := func(key, amount string) {
		t.Helper()
		if r := cli(t, "pay", "--url", srv.base, "--agent-key", filepath.Join(sandbox, sandboxAgentKey),
			"--credential", filepath.Join(sandbox, sandboxCredential), "--mandate", filepath.Join(sandbox, sandboxMandate),
			"--payee", "acct:seller.example", "--amount", amount, "--rail", "sandbox-card", "--idempotency-key", key); r.status == 0 {
			t.Fatalf("pay: %s", r.out)
		}
	}
	for i, amount := range []string{"100", "200", "60000", "25000", "300"} { // settled, settled, denied, held, settled
		pay("wh-"+string(rune('a'+i)), amount)
	}
	// Kill while the receiver is refusing first attempts.
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.attempts) > 0 })
	srv.kill()
	srv = startProc(t, bin, dir, flags...)
	pay("wh-after", "400")

	// Every event derived from entries after the endpoint's creation.
	expected := func() map[string]bool {
		srv.term()
		st, err := pebblestore.Open(filepath.Join(dir, storeDir), &pebblestore.Options{Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		lg := recordReader(t, dir, st)
		want := map[string]bool{}
		after := false
		for e, err := range lg.Entries(context.Background(), 1, 0) {
			if err != nil {
				t.Fatal(err)
			}
			if after {
				for _, ev := range webhook.Derive(e) {
					want[ev.ID] = true
				}
			}
			if e.Type == "webhook.endpoint_created" {
				after = true
			}
		}
		return want
	}()
	srv = startProc(t, bin, dir, flags...)
	var maxSeq uint64
	for id := range expected {
		if seq, _, ok := webhook.ParseEventID(id); ok && seq > maxSeq {
			maxSeq = seq
		}
	}
	rc.mu.Lock()
	rc.want = expected
	rc.checkDone()
	rc.mu.Unlock()
	select {
	case <-rc.done:
	case <-time.After(60 * time.Second):
		rc.mu.Lock()
		t.Fatalf("after 60 s %d of %d events delivered", len(rc.got), len(expected))
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for id := range expected {
		if _, ok := rc.got[id]; !ok {
			t.Errorf("event %s was never delivered", id)
		}
	}
	for id, ev := range rc.got {
		if !expected[id] && ev.Sequence <= maxSeq {
			// Entries after maxSeq (the last start's system.started) were
			// appended after expected was read; those are fine.
			t.Errorf("delivered %s, which the record does not derive", id)
		}
		if rc.attempts[id] < 4 {
			t.Errorf("%s delivered after %d attempts; the receiver refuses 3", id, rc.attempts[id])
		}
		if ev.Entry.Seq != ev.Sequence {
			t.Errorf("%s: sequence %d, entry seq %d", id, ev.Sequence, ev.Entry.Seq)
		}
	}
	if rc.badSig > 0 {
		t.Errorf("%d deliveries with a bad signature", rc.badSig)
	}
	sorted := sort.SliceIsSorted(rc.arrival, func(i, j int) bool { return rc.arrival[i] < rc.arrival[j] })
	t.Logf("%d events delivered after a SIGKILL during retries; arrival order sorted by sequence: %v", len(rc.got), sorted)
}

// waitFor waits, up to 30 s, for cond; it polls a condition that another
// process makes true (a subprocess cannot signal a channel).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
