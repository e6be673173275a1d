// Command webhook-receiver is a minimal, correct receiver of Countersign
// webhooks. It verifies each delivery's Svc-Signature over the raw body
// before parsing anything, drops deliveries it has already handled (by
// event id: delivery is at least once), and prints each event.
//
//	WEBHOOK_SECRET=whsec_... go run ./examples/webhook-receiver -addr 127.0.0.1:8787
//
// WEBHOOK_SECRET may list several secrets separated by commas, which is how
// a receiver follows a secret rotation: add the new secret, and remove the
// old one once the service's overlap (24 hours) is over.
//
// Register it with the reference server in sandbox mode (http to loopback
// is accepted there) as http://127.0.0.1:8787/hooks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/countersign/countersign/webhook"
)

// maxBody bounds a delivery: an event carries one record entry (at most
// 1 MiB) twice, as data and inside entry.
const maxBody = 4 << 20

// maxRemembered bounds the duplicate filter. A production receiver keeps
// handled event ids in its database, in the same transaction as the
// handling, for as long as deliveries are retried (3 days).
const maxRemembered = 10000

func main() {
	addr := flag.String("addr", "127.0.0.1:8787", "listen `address` (keep it on loopback unless behind TLS)")
	flag.Parse()
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRET"), ",")
	if secrets[0] == "" {
		log.Fatal("webhook-receiver: set WEBHOOK_SECRET to the endpoint's signing secret (whsec_...)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	mux := http.NewServeMux()
	mux.Handle("POST /hooks", newReceiver(secrets, os.Stdout, time.Now))
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	fmt.Fprintf(os.Stderr, "webhook-receiver: listening on http://%s/hooks\n", *addr)
	select {
	case err := <-errc:
		log.Fatal(err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Fatal(err)
	}
}

// receiver handles deliveries. It is safe for concurrent use.
type receiver struct {
	out io.Writer
	now func() time.Time

	mu      sync.Mutex // guards secrets, seen, ring, next and writes to out
	secrets []string
	seen    map[string]bool
	ring    []string
	next    int
}

func newReceiver(secrets []string, out io.Writer, now func() time.Time) *receiver {
	return &receiver{secrets: secrets, out: out, now: now, seen: map[string]bool{}, ring: make([]string, maxRemembered)}
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// 1. The raw bytes, exactly as sent: the signature covers them.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusBadRequest)
		return
	}
	// 2. Verify before parsing: nothing unauthenticated reaches the JSON
	// decoder or the business logic.
	rc.mu.Lock()
	secrets := rc.secrets
	rc.mu.Unlock()
	if err := webhook.Verify(body, r.Header.Get(webhook.SignatureHeader), secrets, 0, rc.now()); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, webhook.ErrTimestamp) {
			// Genuine but too old (or from the future): a replay, or a
			// clock problem on one side.
			status = http.StatusUnauthorized
		}
		http.Error(w, "invalid signature", status)
		return
	}
	var ev webhook.Event
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		http.Error(w, "not an event", http.StatusBadRequest)
		return
	}
	// 3. At least once: the same event may come again. Answer 2xx so the
	// service stops retrying, but handle it once.
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.seen[ev.ID] {
		fmt.Fprintf(rc.out, "duplicate %s\n", ev.ID)
		w.WriteHeader(http.StatusOK)
		return
	}
	// 4. Handle it. Arrival order is not record order: sort by Sequence
	// where order matters.
	fmt.Fprintf(rc.out, "%s #%d %s data=%s\n", ev.Type, ev.Sequence, ev.ID, ev.Data)
	rc.remember(ev.ID)
	w.WriteHeader(http.StatusOK)
}

// setSecrets replaces the accepted secrets (a rotation).
func (rc *receiver) setSecrets(s []string) {
	rc.mu.Lock()
	rc.secrets = s
	rc.mu.Unlock()
}

// remember adds id to the duplicate filter, forgetting the oldest id when
// full. rc.mu must be held.
func (rc *receiver) remember(id string) {
	if old := rc.ring[rc.next]; old != "" {
		delete(rc.seen, old)
	}
	rc.ring[rc.next] = id
	rc.seen[id] = true
	rc.next = (rc.next + 1) % len(rc.ring)
}
