package countersign_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/settle"
	"github.com/countersign/countersign/settle/fake"
	"github.com/countersign/countersign/store/memstore"
)

func key(b byte) ed25519.PrivateKey {
	s := make([]byte, ed25519.SeedSize)
	s[0] = b
	return ed25519.NewKeyFromSeed(s)
}

func options(t testing.TB, st *memstore.Store) *countersign.Options {
	t.Helper()
	card, err := fake.New(fake.SandboxCard, &fake.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return &countersign.Options{
		RecordKey:    key(1),
		OperatorKeys: []operator.PublicKey{{KeyID: "op-alice", Public: key(2).Public()}},
		Rails:        []settle.Rail{card},
		SealKey:      make([]byte, 32),
		Logger:       slog.New(slog.DiscardHandler),
	}
}

func TestOpenRefusesWhatItCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*countersign.Options)
		want string
	}{
		{"no record key", func(o *countersign.Options) { o.RecordKey = nil }, "RecordKey"},
		{"short record key", func(o *countersign.Options) { o.RecordKey = o.RecordKey[:10] }, "RecordKey"},
		{"no operator keys", func(o *countersign.Options) { o.OperatorKeys = nil }, "OperatorKeys"},
		{"a provisioning that fails", func(o *countersign.Options) {
			o.Provision = func(context.Context, *auth.Keys) error { return errors.New("no agents today") }
		}, "no agents today"},
		{"two rails of one name", func(o *countersign.Options) { o.Rails = append(o.Rails, o.Rails[0]) }, "rails"},
		{"a seal key of the wrong size", func(o *countersign.Options) { o.SealKey = []byte("short") }, "SealKey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := memstore.New(nil)
			defer st.Close()
			o := options(t, st)
			tc.edit(o)
			n, err := countersign.Open(t.Context(), st, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, %v; want an error naming %s", n, err, tc.want)
			}
			// What the failed Open acquired is released: the store is the
			// caller's, still open, and a correct Open on it works.
			n, err = countersign.Open(t.Context(), st, options(t, st))
			if err != nil {
				t.Fatalf("Open after a failed Open: %v", err)
			}
			if err := n.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
	if _, err := countersign.Open(t.Context(), nil, &countersign.Options{}); err == nil {
		t.Error("Open without a store succeeded")
	}
}

// TestNodeServesAndCloses: the handler is the whole surface; Close is
// idempotent, leaves the store open, and a node reopened on it continues
// the same record, which verifies.
func TestNodeServesAndCloses(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	o := options(t, st)
	o.StartData = map[string]any{"version": "test"}
	n, err := countersign.Open(t.Context(), st, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{{"/openapi.json", 200}, {"/healthz", 200}, {"/audit", 401}, {"/operator/approvals", 401},
		// The operator console, beside the API: its page needs no
		// credential (it holds none), the API behind it does.
		{"/console", 301}, {"/console/", 200}, {"/console/config.json", 200}, {"/console/nope", 404}, {"/consoles", 404}} {
		w := httptest.NewRecorder()
		n.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if w.Code != tc.status {
			t.Errorf("GET %s: %d, want %d", tc.path, w.Code, tc.status)
		}
	}
	for name, got := range map[string]bool{
		"Pay": n.Pay() != nil, "Commerce": n.Commerce() != nil, "Protocol": n.Protocol() != nil,
		"Identity": n.Identity() != nil, "Memory": n.Memory() != nil, "Webhooks": n.Webhooks() != nil,
		"AgentKeys": n.AgentKeys() != nil, "Record": n.Record() != nil, "Stream": n.Stream() != nil,
		"Operators": n.Operators() != nil, "Refusals": n.Refusals() != nil, "Store": n.Store() == st,
	} {
		if !got {
			t.Errorf("node.%s() is not the node's", name)
		}
	}
	if n.Pay().PolicyHash() == "" {
		t.Error("decisions record no policy hash")
	}
	if d, _ := n.Identity().PolicyDigest(t.Context()); d != n.Pay().PolicyHash() {
		t.Errorf("the money path records policy %q, the identity discloses %q", n.Pay().PolicyHash(), d)
	}
	size1, _ := n.Record().Size(t.Context())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	n2, err := countersign.Open(t.Context(), st, options(t, st))
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer n2.Close(t.Context())
	size2, err := n2.Record().Size(t.Context())
	if err != nil || size2 <= size1 {
		t.Fatalf("reopened record has %d entries (%v), want more than %d", size2, err, size1)
	}
	if err := n2.Record().Verify(t.Context(), 1, size2, audit.Full, nil); err != nil {
		t.Errorf("the record of two opens does not verify: %v", err)
	}
}

// TestOptionsLogNoSecret: logging the options shows no key material.
func TestOptionsLogNoSecret(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	o := options(t, st)
	o.SealKey = []byte(strings.Repeat("S", 32))
	o.Identity.Keys = []ed25519.PrivateKey{key(9)}
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("options", slog.Any("opts", *o))
	out := b.String()
	for _, secret := range [][]byte{o.RecordKey.Seed(), o.SealKey, o.Identity.Keys[0].Seed()} {
		for _, enc := range []string{string(secret), fmt.Sprintf("%x", secret), base64.StdEncoding.EncodeToString(secret)} {
			if strings.Contains(out, enc) {
				t.Fatalf("the logged options hold a secret: %s", out)
			}
		}
	}
	if !strings.Contains(out, `"operatorKeys":["op-alice"]`) {
		t.Errorf("the logged options say too little: %s", out)
	}
}

// TestOpenOnAnotherRecord: a store that holds the record of another key
// is refused with what to do, not only what failed.
func TestOpenOnAnotherRecord(t *testing.T) {
	st := memstore.New(nil)
	defer st.Close()
	n, err := countersign.Open(t.Context(), st, options(t, st))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	o := options(t, st)
	o.RecordKey = key(9)
	_, err = countersign.Open(t.Context(), st, o)
	if !errors.Is(err, audit.ErrKeyMismatch) || !strings.Contains(err.Error(), "record key it was created with") {
		t.Fatalf("Open with another record key = %v", err)
	}
}
