package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

// expectIDs returns the event ids entries yield for an endpoint
// subscribed to kinds, sorted like receiver.delivered.
func expectIDs(entries []audit.Entry, kinds ...string) []string {
	type ev struct {
		seq  uint64
		kind string
	}
	var evs []ev
	for _, e := range entries {
		for _, k := range deriveKinds(e) {
			if slices.Contains(kinds, AllEvents) || slices.Contains(kinds, k) {
				evs = append(evs, ev{e.Seq, k})
			}
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].seq != evs[j].seq {
			return evs[i].seq < evs[j].seq
		}
		return evs[i].kind < evs[j].kind
	})
	out := []string{}
	for _, e := range evs {
		out = append(out, EventID(e.seq, e.kind))
	}
	return out
}

// TestRetriesUntilDelivered: a receiver that fails the first three
// attempts of every event gets every event, validly signed, on the fourth,
// as the fake clock walks the schedule.
func TestRetriesUntilDelivered(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, func(ev Event, n int) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	c := e.create(rc.url("/hook"), "*")
	rc.setSecrets(c.Secret)
	var entries []audit.Entry
	entries = append(entries, e.append("gate.decision", `{"outcome":"deny"}`))
	entries = append(entries, e.append("payment.settled", `{"amount":"12"}`))
	entries = append(entries, e.append("gate.decision", `{"outcome":"confirm"}`))

	want := expectIDs(entries, "*")
	if n := e.tick(); n != len(want) {
		t.Fatalf("first tick made %d attempts, want %d", n, len(want))
	}
	for i, delay := range DefaultSchedule()[:3] {
		// Not yet due: nothing happens.
		e.clock.Advance(delay / 2)
		if n := e.tick(); n != 0 {
			t.Fatalf("retry %d: %d attempts before due", i+1, n)
		}
		e.clock.Advance(delay - delay/2)
		if n := e.tick(); n != len(want) {
			t.Fatalf("retry %d: %d attempts, want %d", i+1, n, len(want))
		}
	}
	if got := rc.delivered(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v\nwant %v", got, want)
	}
	for _, g := range rc.requests() {
		if g.VerifyErr != nil {
			t.Fatalf("delivery %s: %v", g.Event.ID, g.VerifyErr)
		}
		h := g.Header
		if h.Get("Content-Type") != "application/json" || h.Get(EventIDHeader) != g.Event.ID ||
			h.Get(EventTypeHeader) != g.Event.Type || h.Get("User-Agent") != DefaultUserAgent {
			t.Fatalf("headers %v", h)
		}
	}
	for _, dl := range e.deliveries(c.ID) {
		if dl.State != StateDelivered || dl.Attempts != 4 || dl.LastStatus != 200 || dl.LastError != "" || dl.NextAttempt != nil || dl.CompletedAt == nil {
			t.Fatalf("delivery %+v", dl)
		}
	}
	if n := e.tick(); n != 0 {
		t.Fatalf("%d attempts after everything was delivered", n)
	}
}

// TestScheduleExhausted: a receiver that always fails gets
// len(Schedule)+1 attempts, then the delivery is failed and listed.
func TestScheduleExhausted(t *testing.T) {
	sched := []time.Duration{time.Minute, time.Hour}
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Schedule: sched, Jitter: -1}})
	rc := newReceiver(t, e.clock, func(Event, int) int { return http.StatusServiceUnavailable })
	c := e.create(rc.url("/"), EventPaymentSettled)
	e.append("payment.settled", `{}`)
	e.tick()
	p, _ := e.d.Deliveries(context.Background(), c.ID, "", 0)
	if d := p.Data[0]; d.State != StatePending || d.NextAttempt == nil || !d.NextAttempt.Equal(e.clock.Now().Add(time.Minute)) ||
		d.LastStatus != 503 || !strings.Contains(d.LastError, "503") {
		t.Fatalf("after one attempt: %+v", d)
	}
	for _, s := range sched {
		e.clock.Advance(s)
		if n := e.tick(); n != 1 {
			t.Fatalf("%d attempts", n)
		}
	}
	dl := e.deliveries(c.ID)[0]
	if dl.State != StateFailed || dl.Attempts != 3 || dl.NextAttempt != nil {
		t.Fatalf("after the schedule: %+v", dl)
	}
	e.clock.Advance(1000 * time.Hour)
	if n := e.tick(); n != 0 {
		t.Fatalf("%d attempts after failure", n)
	}
}

// TestOutOfOrderArrival: when an event's first attempt fails, later events
// arrive before it; sequence restores the record's order.
func TestOutOfOrderArrival(t *testing.T) {
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Workers: 1, PerEndpoint: 1}})
	var slowSeq uint64
	rc := newReceiver(t, e.clock, func(ev Event, n int) int {
		if ev.Sequence == slowSeq && n == 0 {
			return http.StatusBadGateway
		}
		return http.StatusNoContent
	})
	c := e.create(rc.url("/"), EventPaymentSettled)
	rc.setSecrets(c.Secret)
	var entries []audit.Entry
	for i := range 5 {
		entries = append(entries, e.append("payment.settled", fmt.Sprintf(`{"n":%d}`, i)))
	}
	slowSeq = entries[1].Seq
	e.tick()
	e.clock.Advance(time.Minute)
	e.tick()

	var arrival []uint64
	for _, g := range rc.requests() {
		if g.Status < 300 {
			arrival = append(arrival, g.Event.Sequence)
		}
	}
	if slices.IsSorted(arrival) || len(arrival) != 5 {
		t.Fatalf("arrival order %v: expected the retried event last", arrival)
	}
	slices.Sort(arrival)
	for i := range arrival {
		if arrival[i] != entries[i].Seq {
			t.Fatalf("sorted by sequence %v, want the record's order", arrival)
		}
	}
}

// TestFiltering: each endpoint gets exactly the kinds it asked for, and
// only entries after its creation.
func TestFiltering(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, nil)
	before := e.append("payment.settled", `{}`) // before any endpoint: never delivered
	settled := e.create(rc.url("/settled"), EventPaymentSettled)
	outcomes := e.create(rc.url("/outcomes"), EventIntentDenied, EventApprovalPending)
	var entries []audit.Entry
	entries = append(entries, e.append("gate.decision", `{"outcome":"deny"}`))
	all := e.create(rc.url("/all"), AllEvents)
	entries = append(entries, e.append("gate.decision", `{"outcome":"confirm"}`))
	entries = append(entries, e.append("gate.decision", `{"outcome":"allow"}`))
	entries = append(entries, e.append("payment.settled", `{}`))
	entries = append(entries, e.append("memory.erased", `{}`))
	e.tick()

	for _, g := range rc.requests() {
		if g.Event.Sequence == before.Seq {
			t.Fatalf("entry %d, recorded before every endpoint, was delivered", before.Seq)
		}
	}
	got := func(ep string) []string {
		var ids []string
		for _, dl := range e.deliveries(ep) {
			ids = append(ids, dl.EventID)
		}
		sort.Strings(ids)
		return ids
	}
	sorted := func(s []string) []string { s = slices.Clone(s); sort.Strings(s); return s }

	// The "all" endpoint was created after entries[0] and after the
	// creation entries: it gets entries[1:] and nothing earlier.
	allWant := expectIDs(entries[1:], AllEvents)
	if g := got(all.ID); !slices.Equal(g, sorted(allWant)) {
		t.Errorf("all: %v\nwant %v", g, sorted(allWant))
	}
	// The others also see the creation entry of "all" (an
	// audit.appended they did not ask for, so nothing).
	if g, w := got(settled.ID), sorted(expectIDs(entries, EventPaymentSettled)); !slices.Equal(g, w) {
		t.Errorf("settled: %v, want %v", g, w)
	}
	if g, w := got(outcomes.ID), sorted(expectIDs(entries, EventIntentDenied, EventApprovalPending)); !slices.Equal(g, w) {
		t.Errorf("outcomes: %v, want %v", g, w)
	}
	if len(rc.requests()) != len(allWant)+len(expectIDs(entries, EventPaymentSettled))+len(expectIDs(entries, EventIntentDenied, EventApprovalPending)) {
		t.Errorf("%d requests", len(rc.requests()))
	}
}

// TestGone: a 410 deactivates the endpoint, in the record, and nothing
// more is sent to it.
func TestGone(t *testing.T) {
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Workers: 1, PerEndpoint: 1}})
	rc := newReceiver(t, e.clock, func(Event, int) int { return http.StatusGone })
	other := newReceiver(t, e.clock, nil)
	c := e.create(rc.url("/"), EventPaymentSettled)
	o := e.create(other.url("/"), EventPaymentSettled)
	e.append("payment.settled", `{}`)
	e.append("payment.settled", `{}`)
	e.tick()

	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests to the gone endpoint, want 1", n)
	}
	ep, err := e.eps.Get(context.Background(), c.ID)
	if err != nil || ep.Active || ep.DisabledReason != "gone" {
		t.Fatalf("endpoint %+v, %v", ep, err)
	}
	var found bool
	for ent, err := range e.log.Entries(context.Background(), 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if ent.Type == EntryEndpointUpdated && ent.Actor == dispatcherActor && strings.Contains(string(ent.Data), c.ID) {
			found = true
		}
	}
	if !found {
		t.Fatal("no endpoint_updated entry for the deactivation")
	}
	dls := e.deliveries(c.ID)
	if len(dls) != 2 {
		t.Fatalf("%d deliveries", len(dls))
	}
	for _, dl := range dls {
		if dl.State != StateFailed {
			t.Fatalf("delivery %+v", dl)
		}
	}
	// The other endpoint is unaffected; later entries skip the gone one.
	e.append("payment.settled", `{}`)
	e.clock.Advance(time.Hour)
	e.tick()
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests to the gone endpoint", n)
	}
	if n := len(e.deliveries(o.ID)); n != 3 || len(other.delivered()) != 3 {
		t.Fatalf("other endpoint: %d deliveries, %d delivered", n, len(other.delivered()))
	}
	// Retry needs the endpoint active again.
	if _, err := e.d.Retry(context.Background(), c.ID, dls[0].EventID, operator, "", "try again please"); !errors.Is(err, ErrInactive) {
		t.Fatalf("Retry on inactive = %v", err)
	}
}

// TestRetryAndListing covers Retry and the Deliveries listing.
func TestRetryAndListing(t *testing.T) {
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Schedule: []time.Duration{time.Minute}}})
	fail := true
	var mu sync.Mutex
	rc := newReceiver(t, e.clock, func(Event, int) int {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return 500
		}
		return 200
	})
	c := e.create(rc.url("/"), EventAuditAppended)
	var last audit.Entry
	for range 5 {
		last = e.append("agent.created", `{}`)
	}
	e.tick()
	e.clock.Advance(time.Minute)
	e.tick()
	dls := e.deliveries(c.ID)
	if len(dls) != 5 || dls[0].Sequence != last.Seq {
		t.Fatalf("listing %+v", dls)
	}
	for i, dl := range dls {
		if dl.State != StateFailed || dl.Attempts != 2 {
			t.Fatalf("delivery %+v", dl)
		}
		if i > 0 && dl.Sequence >= dls[i-1].Sequence {
			t.Fatal("not newest first")
		}
	}
	// Pages of 2.
	p1, err := e.d.Deliveries(context.Background(), c.ID, "", 2)
	if err != nil || len(p1.Data) != 2 || !p1.HasMore {
		t.Fatalf("page 1 %+v %v", p1, err)
	}
	p2, err := e.d.Deliveries(context.Background(), c.ID, *p1.NextCursor, 2)
	if err != nil || len(p2.Data) != 2 || p2.Data[0].Sequence >= p1.Data[1].Sequence {
		t.Fatalf("page 2 %+v %v", p2, err)
	}
	for _, bad := range []string{"!", "AAAA", "AAAAAAAAAAAAAAAAAAA"} {
		if _, err := e.d.Deliveries(context.Background(), c.ID, bad, 0); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: %v", bad, err)
		}
	}
	if _, err := e.d.Deliveries(context.Background(), "we_01JNOSUCHENDPOINT000000000", "", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown endpoint: %v", err)
	}

	// Retry a failed delivery: one more attempt, which now succeeds.
	mu.Lock()
	fail = false
	mu.Unlock()
	id := dls[2].EventID
	dl, err := e.d.Retry(context.Background(), c.ID, id, operator, "req_r", "the receiver is fixed")
	if err != nil || dl.State != StatePending || dl.NextAttempt == nil || !dl.NextAttempt.Equal(e.clock.Now()) {
		t.Fatalf("Retry = %+v, %v", dl, err)
	}
	// Its own entry (webhook.delivery_retried) yields an audit.appended.
	if n := e.tick(); n != 2 {
		t.Fatalf("%d attempts after Retry, want 2", n)
	}
	for _, dl := range e.deliveries(c.ID) {
		if dl.EventID == id && (dl.State != StateDelivered || dl.Attempts != 3) {
			t.Fatalf("retried delivery %+v", dl)
		}
	}
	for _, tc := range []struct {
		ep, ev string
		want   error
	}{
		{c.ID, "evt_999_audit.appended", ErrDeliveryNotFound},
		{c.ID, "nonsense", ErrDeliveryNotFound},
		{c.ID, EventID(last.Seq, EventPaymentSettled), ErrDeliveryNotFound},
		{"we_01JNOSUCHENDPOINT000000000", id, ErrNotFound},
	} {
		if _, err := e.d.Retry(context.Background(), tc.ep, tc.ev, operator, "", "retry something"); !errors.Is(err, tc.want) {
			t.Errorf("Retry(%s, %s) = %v, want %v", tc.ep, tc.ev, err, tc.want)
		}
	}
}

// TestRotationSignatures: after a rotation deliveries carry two v1 values
// for 24 h, then one.
func TestRotationSignatures(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, nil)
	c := e.create(rc.url("/"), EventPaymentSettled)
	oldSecret := c.Secret
	e.append("payment.settled", `{}`)
	e.tick()
	u, err := e.eps.Update(context.Background(), c.ID, UpdateRequest{RotateSecret: true}, operator, "", "rotate the secret")
	if err != nil {
		t.Fatal(err)
	}
	newSecret := u.Secret
	e.append("payment.settled", `{}`)
	e.tick()
	e.clock.Advance(24*time.Hour - time.Second)
	e.append("payment.settled", `{}`)
	e.tick()
	e.clock.Advance(time.Second)
	e.append("payment.settled", `{}`)
	e.tick()

	reqs := rc.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	wantV1 := []int{1, 2, 2, 1}
	for i, g := range reqs {
		h := g.Header.Get(SignatureHeader)
		if n := strings.Count(h, "v1="); n != wantV1[i] {
			t.Errorf("delivery %d: %d v1 values, want %d (%s)", i, n, wantV1[i], h)
		}
		now := e.clock.Now()
		errOld := Verify(g.Body, h, []string{oldSecret}, time.Hour*25, now)
		errNew := Verify(g.Body, h, []string{newSecret}, time.Hour*25, now)
		switch i {
		case 0:
			if errOld != nil || !errors.Is(errNew, ErrMismatch) {
				t.Errorf("before rotation: old %v, new %v", errOld, errNew)
			}
		case 1, 2:
			if errOld != nil || errNew != nil {
				t.Errorf("during overlap: old %v, new %v", errOld, errNew)
			}
		case 3:
			if !errors.Is(errOld, ErrMismatch) || errNew != nil {
				t.Errorf("after overlap: old %v, new %v", errOld, errNew)
			}
		}
	}
}

// TestSecretNeverLogged runs a full lifecycle with debug logging and
// failures, and checks that no secret reaches the log, the record or a
// read.
func TestSecretNeverLogged(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, func(_ Event, n int) int {
		if n == 0 {
			return 500
		}
		return 200
	})
	ctx := context.Background()
	c := e.create(rc.url("/?token=abc"), AllEvents)
	u, err := e.eps.Update(ctx, c.ID, UpdateRequest{RotateSecret: true}, operator, "", "rotate the secret")
	if err != nil {
		t.Fatal(err)
	}
	e.append("gate.decision", `{"outcome":"deny"}`)
	e.tick()
	e.clock.Advance(time.Minute)
	e.tick()
	// Log the values a careless caller might log.
	logger := e.d.logger
	logger.InfoContext(ctx, "created", slog.Any("endpoint", c))
	logger.InfoContext(ctx, "updated", slog.Any("endpoint", u))
	logger.InfoContext(ctx, "options", slog.Any("options", Options{SealKey: testSealKey()}))
	logs := e.logs.String()
	for _, s := range []string{c.Secret, u.Secret, strings.TrimPrefix(c.Secret, "whsec_"), "whsec_", string(testSealKey())} {
		if strings.Contains(logs, s) {
			t.Fatalf("log contains a secret %q:\n%s", s, logs)
		}
	}
	if !strings.Contains(logs, "REDACTED") || !strings.Contains(logs, "delivery attempt failed") {
		t.Fatalf("expected redacted values and debug lines:\n%s", logs)
	}
	for ent, err := range e.log.Entries(ctx, 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if b := fmt.Sprint(ent); strings.Contains(b, "whsec_") || strings.Contains(b, strings.TrimPrefix(u.Secret, "whsec_")) {
			t.Fatalf("entry %d holds a secret", ent.Seq)
		}
	}
	for _, dl := range e.deliveries(c.ID) {
		if strings.Contains(dl.LastError, "token") {
			t.Fatalf("lastError leaks the url: %q", dl.LastError)
		}
	}
}

// TestSlowEndpointDoesNotDelayOthers: while one endpoint hangs, holding
// its per-endpoint slots, another endpoint's deliveries all go through.
func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Workers: 4, PerEndpoint: 2}})
	release := make(chan struct{})
	var hung sync.WaitGroup
	hung.Add(2)
	var once [2]sync.Once
	var mu sync.Mutex
	n := 0
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		i := n
		n++
		mu.Unlock()
		if i < 2 {
			once[i].Do(hung.Done)
		}
		<-release
	}))
	defer slow.Close()
	fast := newReceiver(t, e.clock, nil)
	e.create(slow.URL+"/", EventAuditAppended)
	fc := e.create(fast.url("/"), EventAuditAppended)
	var entries []audit.Entry
	for range 20 {
		entries = append(entries, e.append("agent.created", `{}`))
	}
	done := make(chan error, 1)
	go func() { _, err := e.d.Tick(context.Background()); done <- err }()
	hung.Wait() // the slow endpoint holds two workers
	want := expectIDs(entries, EventAuditAppended)
	for len(fast.delivered()) < len(want) {
		select {
		case <-fast.arrived:
		case err := <-done:
			t.Fatalf("tick ended early: %v", err)
		case <-t.Context().Done():
			t.Fatal("test deadline")
		}
	}
	if got := fast.delivered(); !slices.Equal(got, want) {
		t.Fatalf("fast endpoint got %v", got)
	}
	mu.Lock()
	slowN := n
	mu.Unlock()
	if slowN != 2 {
		t.Fatalf("slow endpoint got %d concurrent requests, want PerEndpoint=2", slowN)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if dls := e.deliveries(fc.ID); len(dls) != len(want) {
		t.Fatalf("%d delivery records for the fast endpoint", len(dls))
	}
}

// TestRestartDurability: close a dispatcher (and the store) in the middle
// of retries, reopen everything over the same Pebble directory, and every
// event is still delivered, none queued twice.
func TestRestartDurability(t *testing.T) {
	dir := t.TempDir()
	clock := newClock()
	var failing sync.Mutex
	failUntil := 3
	rc := newReceiver(t, clock, func(_ Event, n int) int {
		failing.Lock()
		defer failing.Unlock()
		if n < failUntil {
			return 500
		}
		return 200
	})
	open := func() (*env, func()) {
		st, err := pebblestore.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{st: st, clock: clock})
		return e, func() {
			if err := e.d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			e.log.Close()
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	e, closeAll := open()
	c := e.create(rc.url("/"), AllEvents)
	rc.setSecrets(c.Secret)
	var entries []audit.Entry
	for i := range 10 {
		entries = append(entries, e.append("gate.decision", fmt.Sprintf(`{"outcome":"deny","n":%d}`, i)))
	}
	e.tick()                                                                // attempt 1 of each fails
	entries = append(entries, e.append("payment.settled", `{"late":true}`)) // recorded but not tailed yet
	closeAll()

	e, closeAll = open()
	defer closeAll()
	entries = append(entries, e.append("payment.settled", `{"after":"restart"}`))
	for _, d := range DefaultSchedule()[:4] {
		e.tick()
		clock.Advance(d)
	}
	e.tick()
	if got, want := rc.delivered(), expectIDs(entries, AllEvents); !slices.Equal(got, want) {
		t.Fatalf("delivered %v\nwant %v", got, want)
	}
	for _, g := range rc.requests() {
		if g.VerifyErr != nil {
			t.Fatal(g.VerifyErr)
		}
	}
	// Exactly one delivery record per event: nothing queued twice.
	dls := e.deliveries(c.ID)
	seen := map[string]bool{}
	for _, dl := range dls {
		if seen[dl.EventID] || dl.State != StateDelivered {
			t.Fatalf("delivery %+v (seen %v)", dl, seen[dl.EventID])
		}
		seen[dl.EventID] = true
	}
	if len(dls) != len(expectIDs(entries, AllEvents)) {
		t.Fatalf("%d delivery records", len(dls))
	}
	if out := rawStore(t, e.st, string(outboxPrefix)); len(out) != 0 {
		t.Fatalf("%d outbox keys left", len(out))
	}
}

// TestSSRF: destinations that resolve inside the network are refused
// before any connection, and the refusal is recorded in the delivery.
func TestSSRF(t *testing.T) {
	rc := newReceiver(t, newClock(), nil)
	port := rc.srv.Listener.Addr().(*net.TCPAddr).Port
	hosts := map[string]string{
		"ten.example":        "10.0.0.5",
		"172.example":        "172.16.3.4",
		"192.example":        "192.168.0.10",
		"loop.example":       "127.0.0.1",
		"metadata.example":   "169.254.169.254",
		"v6loop.example":     "::1",
		"cgnat.example":      "100.64.1.1",
		"ula.example":        "fd12::1",
		"linklocal6.example": "fe80::1",
		"mapped.example":     "::ffff:192.168.1.1",
		"nat64.example":      "64:ff9b::a00:1",
		"zero.example":       "0.0.0.0",
		"mcast.example":      "224.0.0.1",
	}
	res := &fakeResolver{hosts: map[string][]netip.Addr{}}
	for h, a := range hosts {
		res.hosts[h] = []netip.Addr{netip.MustParseAddr(a)}
	}
	// A name with one public and one private address is refused outright.
	res.hosts["mixed.example"] = []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.1")}
	hosts["mixed.example"] = "10.0.0.1"

	e := newEnv(t, envOptions{
		eps:      &Options{SealKey: testSealKey()},
		dispatch: &DispatcherOptions{Resolver: res, Schedule: []time.Duration{time.Minute}},
	})
	ids := map[string]string{}
	for h := range hosts {
		c := e.create(fmt.Sprintf("https://%s:%d/hook", h, port), EventPaymentSettled)
		ids[c.ID] = h
	}
	e.append("payment.settled", `{}`)
	if n := e.tick(); n != len(hosts) {
		t.Fatalf("%d attempts, want %d", n, len(hosts))
	}
	for id, h := range ids {
		dl := e.deliveries(id)[0]
		if dl.State != StatePending || dl.LastStatus != 0 || !strings.Contains(dl.LastError, "not allowed") ||
			!strings.Contains(dl.LastError, h) || !strings.Contains(dl.LastError, netip.MustParseAddr(hosts[h]).Unmap().String()) {
			t.Errorf("%s: %+v", h, dl)
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}

	// The dispatcher's client refuses address literals too, including the
	// ones Create would refuse anyway, before any connection.
	client, err := newClient(&DispatcherOptions{Resolver: res, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"10.1.1.1:443", "172.16.0.1:443", "192.168.1.1:443", "127.0.0.1:443", "169.254.169.254:80", "[::1]:443", "[fe80::1]:443", "[fc00::1]:443", "100.64.0.1:443", "0.0.0.0:80", "255.255.255.255:80"} {
		if _, err := client.Get("https://" + addr + "/"); !errors.Is(err, ErrForbiddenAddress) {
			t.Errorf("dial %s: %v", addr, err)
		}
	}
}

// TestPinnedDial: a host name is resolved by the dispatcher, the address
// is checked, and that address is dialed, while TLS still verifies the
// name (httptest's certificate is for example.com and 127.0.0.1).
func TestPinnedDial(t *testing.T) {
	clock := newClock()
	var got sync.Mutex
	hits := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Lock()
		hits++
		got.Unlock()
		if r.Host == "" || !strings.HasPrefix(r.Host, "example.com") {
			t.Errorf("Host %q", r.Host)
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	res := &fakeResolver{hosts: map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}}}
	e := newEnv(t, envOptions{clock: clock, dispatch: &DispatcherOptions{
		AllowLoopback: true, Resolver: res, HTTPClient: srv.Client(),
	}})
	c := e.create(fmt.Sprintf("https://example.com:%d/hook", port), EventPaymentSettled)
	e.append("payment.settled", `{}`)
	e.tick()
	if dl := e.deliveries(c.ID)[0]; dl.State != StateDelivered {
		t.Fatalf("delivery %+v", dl)
	}
	if hits != 1 || !slices.Contains(res.calls, "example.com") {
		t.Fatalf("hits %d, resolver calls %v", hits, res.calls)
	}
	// Without AllowLoopback the same name is refused.
	e2 := newEnv(t, envOptions{clock: clock, dispatch: &DispatcherOptions{Resolver: res, HTTPClient: srv.Client()}})
	c2 := e2.create(fmt.Sprintf("https://example.com:%d/hook", port), EventPaymentSettled)
	e2.append("payment.settled", `{}`)
	e2.tick()
	if dl := e2.deliveries(c2.ID)[0]; dl.State != StatePending || !strings.Contains(dl.LastError, "loopback") {
		t.Fatalf("delivery %+v", dl)
	}
}

// TestDeletePurges: deleting an endpoint drops its pending deliveries;
// the sweep then erases every key it had.
func TestDeletePurges(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, func(Event, int) int { return 500 })
	c := e.create(rc.url("/"), AllEvents)
	keep := e.create(rc.url("/keep"), EventPaymentSettled)
	for range 5 {
		e.append("payment.settled", `{}`)
	}
	e.tick()
	if err := e.eps.Delete(context.Background(), c.ID, operator, "", "remove this one"); err != nil {
		t.Fatal(err)
	}
	before := len(rc.requests())
	e.clock.Advance(time.Hour)
	e.tick()
	for _, g := range rc.requests()[before:] {
		if g.Header.Get(EventTypeHeader) != EventPaymentSettled {
			t.Fatalf("a deleted endpoint got %s", g.Event.ID)
		}
	}
	for _, p := range []string{"webhook/outbox/" + c.ID, "webhook/dlv/" + c.ID, "webhook/ep/" + c.ID} {
		if kv := rawStore(t, e.st, p); len(kv) != 0 {
			t.Fatalf("%d keys left under %s", len(kv), p)
		}
	}
	if kv := rawStore(t, e.st, "webhook/dlv/"+keep.ID); len(kv) != 5 {
		t.Fatalf("%d records of the kept endpoint", len(kv))
	}
}

// TestRetention: finished deliveries are swept after Retention.
func TestRetention(t *testing.T) {
	e := newEnv(t, envOptions{dispatch: &DispatcherOptions{AllowLoopback: true, Retention: 48 * time.Hour}})
	rc := newReceiver(t, e.clock, nil)
	c := e.create(rc.url("/"), EventPaymentSettled)
	e.append("payment.settled", `{}`)
	e.tick()
	e.clock.Advance(24 * time.Hour)
	e.append("payment.settled", `{}`)
	e.tick()
	if n := len(e.deliveries(c.ID)); n != 2 {
		t.Fatalf("%d deliveries", n)
	}
	e.clock.Advance(24 * time.Hour)
	e.tick()
	if n := len(e.deliveries(c.ID)); n != 1 {
		t.Fatalf("%d deliveries after the first expired", n)
	}
	if kv := rawStore(t, e.st, string(expirePrefix)); len(kv) != 1 {
		t.Fatalf("%d expire keys", len(kv))
	}
}

// TestInactiveEndpoint: entries recorded while an endpoint is inactive
// are not queued for it, and activating it does not replay them.
func TestInactiveEndpoint(t *testing.T) {
	e := newEnv(t, envOptions{})
	rc := newReceiver(t, e.clock, nil)
	c := e.create(rc.url("/"), EventPaymentSettled)
	off, on := false, true
	if _, err := e.eps.Update(context.Background(), c.ID, UpdateRequest{Active: &off}, operator, "", "pause deliveries"); err != nil {
		t.Fatal(err)
	}
	e.append("payment.settled", `{}`)
	e.tick()
	if _, err := e.eps.Update(context.Background(), c.ID, UpdateRequest{Active: &on}, operator, "", "resume deliveries"); err != nil {
		t.Fatal(err)
	}
	last := e.append("payment.settled", `{}`)
	e.tick()
	if got := rc.delivered(); !slices.Equal(got, []string{EventID(last.Seq, EventPaymentSettled)}) {
		t.Fatalf("delivered %v", got)
	}
}

// TestStartClose runs the background loops with the real clock: entries
// appended after Start are delivered without any Tick.
func TestStartClose(t *testing.T) {
	clock := newClock()
	e := newEnv(t, envOptions{clock: clock})
	rc := newReceiver(t, clock, nil)
	c := e.create(rc.url("/"), AllEvents)
	rc.setSecrets(c.Secret)
	ctx := t.Context()
	if err := e.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Start(ctx); err == nil {
		t.Fatal("second Start succeeded")
	}
	var entries []audit.Entry
	for i := range 10 {
		entries = append(entries, e.append("gate.decision", fmt.Sprintf(`{"outcome":"confirm","n":%d}`, i)))
	}
	want := expectIDs(entries, AllEvents)
	for len(rc.delivered()) < len(want) {
		select {
		case <-rc.arrived:
		case <-ctx.Done():
			t.Fatalf("delivered %d of %d", len(rc.delivered()), len(want))
		}
	}
	if got := rc.delivered(); !slices.Equal(got, want) {
		t.Fatalf("delivered %v", got)
	}
	if err := e.d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Close(ctx); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := e.d.Tick(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Tick after Close = %v", err)
	}
	if err := e.d.Start(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v", err)
	}
}

// TestCloseCancelsStuckAttempts: Close with an expired context cancels an
// attempt that hangs; the delivery stays due and is not counted.
func TestCloseCancelsStuckAttempts(t *testing.T) {
	e := newEnv(t, envOptions{})
	entered := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client going away
		close(entered)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := e.create(srv.URL+"/", EventPaymentSettled)
	e.append("payment.settled", `{}`)
	done := make(chan error, 1)
	go func() { _, err := e.d.Tick(context.Background()); done <- err }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.d.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v", err)
	}
	<-done
	dl := e.deliveries(c.ID)[0]
	if dl.State != StatePending || dl.Attempts != 0 {
		t.Fatalf("delivery %+v", dl)
	}
}

func TestNewDispatcherOptions(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, o := range []DispatcherOptions{
		{Schedule: []time.Duration{time.Minute, 0}},
		{Jitter: 0.95},
		{Workers: -1},
		{HTTPClient: &http.Client{Transport: roundTripperFunc(nil)}},
	} {
		if _, err := NewDispatcher(e.st, e.log, e.eps, &o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestDefaultSchedule(t *testing.T) {
	s := DefaultSchedule()
	var total time.Duration
	for _, d := range s {
		total += d
	}
	if len(s) != 14 || s[0] != time.Minute || s[9] != 512*time.Minute || s[13] != 12*time.Hour ||
		total != 65*time.Hour+3*time.Minute || total > 72*time.Hour {
		t.Fatalf("schedule %v, total %v", s, total)
	}
}

// TestTailExactlyOnce: under a store that re-runs half of all
// transactions, tailing queues each delivery exactly once, skips the
// entries no endpoint can receive, and a second pass changes nothing.
func TestTailExactlyOnce(t *testing.T) {
	ms := memstore.New(&memstore.Options{RetryRate: 0.5, Rand: rand.New(rand.NewPCG(3, 4))})
	t.Cleanup(func() { ms.Close() })
	e := newEnv(t, envOptions{st: ms})
	for range 50 { // before any endpoint: skipped without being read
		e.append("agent.created", `{}`)
	}
	a := e.create("https://a.example/", AllEvents)
	var entries []audit.Entry
	for range 150 {
		entries = append(entries, e.append("gate.decision", `{"outcome":"deny"}`))
	}
	b := e.create("https://b.example/", EventPaymentSettled)
	var later []audit.Entry
	for range 150 {
		later = append(later, e.append("payment.settled", `{}`))
	}
	ctx := context.Background()
	tailToEnd(t, e)
	// a also gets b's creation entry (an audit.appended).
	bCreated, _ := e.log.Get(ctx, entries[len(entries)-1].Seq+1)
	wantA := len(expectIDs(append(append(slices.Clone(entries), bCreated), later...), AllEvents))
	wantB := len(expectIDs(later, EventPaymentSettled))
	countKeys := func() (int, int, int) {
		return len(rawStore(t, e.st, "webhook/dlv/"+a.ID)), len(rawStore(t, e.st, "webhook/dlv/"+b.ID)), len(rawStore(t, e.st, string(outboxPrefix)))
	}
	na, nb, nout := countKeys()
	if na != wantA || nb != wantB || nout != wantA+wantB {
		t.Fatalf("records a=%d b=%d outbox=%d, want %d %d %d", na, nb, nout, wantA, wantB, wantA+wantB)
	}
	if _, err := e.d.tail(ctx); err != nil {
		t.Fatal(err)
	}
	if na2, nb2, nout2 := countKeys(); na2 != na || nb2 != nb || nout2 != nout {
		t.Fatal("a second tail changed the outbox")
	}
}

// tailToEnd tails once and checks that the cursor reached the record's end.
func tailToEnd(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	cursor, err := e.d.tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := e.log.Size(ctx); cursor != size {
		t.Fatalf("cursor %d, size %d", cursor, size)
	}
}

// cursorWrites wraps a store and counts the commits that moved the
// dispatcher's cursor, by whether they waited for durability (Update) or
// were deferred (store.Deferrer).
type cursorWrites struct {
	store.Store
	mu               sync.Mutex
	waited, deferred int
}

func (s *cursorWrites) Update(ctx context.Context, fn func(store.Txn) error) error {
	return s.Store.Update(ctx, s.count(fn, &s.waited))
}

func (s *cursorWrites) UpdateDeferred(ctx context.Context, fn func(store.Txn) error) error {
	return s.Store.Update(ctx, s.count(fn, &s.deferred))
}

func (s *cursorWrites) count(fn func(store.Txn) error, n *int) func(store.Txn) error {
	return func(txn store.Txn) error {
		ct := &cursorTxn{Txn: txn}
		if err := fn(ct); err != nil {
			return err
		}
		if ct.moved {
			s.mu.Lock()
			*n++
			s.mu.Unlock()
		}
		return nil
	}
}

func (s *cursorWrites) counts() (waited, deferred int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waited, s.deferred
}

type cursorTxn struct {
	store.Txn
	moved bool
}

func (t *cursorTxn) Set(k, v []byte) error {
	if string(k) == string(cursorKey) {
		t.moved = true
	}
	return t.Txn.Set(k, v)
}

// TestTailSkipIsDeferred: while no endpoint can receive the entries, the
// tailer only moves its cursor, and does it in a deferred commit, which
// rides in the next group rather than waiting for (and forcing) an fsync
// of its own; once an endpoint exists, deliveries are written with the
// cursor in a commit that waits, as before.
func TestTailSkipIsDeferred(t *testing.T) {
	ms := memstore.New(&memstore.Options{Rand: rand.New(rand.NewPCG(5, 6))})
	t.Cleanup(func() { ms.Close() })
	st := &cursorWrites{Store: ms}
	e := newEnv(t, envOptions{st: st})
	ctx := context.Background()
	for range 20 {
		e.append("gate.decision", `{"outcome":"deny"}`)
	}
	tailToEnd(t, e)
	if w, d := st.counts(); w != 0 || d == 0 {
		t.Fatalf("with no endpoint: %d waiting and %d deferred cursor commits, want 0 and some", w, d)
	}
	a := e.create("https://a.example/", AllEvents)
	var later []audit.Entry
	for range 5 {
		later = append(later, e.append("payment.settled", `{}`))
	}
	w0, _ := st.counts()
	if _, err := e.d.tail(ctx); err != nil {
		t.Fatal(err)
	}
	if w, _ := st.counts(); w != w0+1 {
		t.Fatalf("with an endpoint: waiting cursor commits %d → %d, want one more (the skip up to the endpoint's creation may be deferred)", w0, w)
	}
	if got, want := len(rawStore(t, e.st, "webhook/dlv/"+a.ID)), len(expectIDs(later, AllEvents)); got != want {
		t.Fatalf("%d delivery records, want %d", got, want)
	}
}
