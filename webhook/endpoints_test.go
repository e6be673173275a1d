package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

func codeOf(err error) string {
	var c interface{ Code() string }
	if errors.As(err, &c) {
		return c.Code()
	}
	return ""
}

func TestCreateValidation(t *testing.T) {
	sandbox := newEnv(t, envOptions{})
	prod := newEnv(t, envOptions{eps: &Options{SealKey: testSealKey()}})
	ctx := context.Background()
	tests := []struct {
		name    string
		e       *env
		url     string
		events  []string
		code    string // "" = accepted
		wantURL string
		wantEv  []string
	}{
		{"https", prod, "https://hooks.example.com/countersign?x=1", []string{"payment.settled"}, "", "https://hooks.example.com/countersign?x=1", []string{"payment.settled"}},
		{"host lower-cased", prod, "HTTPS://Hooks.Example.COM:8443/P", []string{"*"}, "", "https://hooks.example.com:8443/P", []string{"*"}},
		{"star wins", prod, "https://a.example/", []string{"gate.decision", "*"}, "", "https://a.example/", []string{"*"}},
		{"duplicates dropped", prod, "https://a.example/", []string{"gate.decision", "intent.denied", "gate.decision"}, "", "https://a.example/", []string{"gate.decision", "intent.denied"}},
		{"public IP literal", prod, "https://93.184.216.34/hook", []string{"*"}, "", "https://93.184.216.34/hook", []string{"*"}},
		{"http to public", prod, "http://hooks.example.com/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"http to loopback in production", prod, "http://127.0.0.1:8080/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"https to loopback in production", prod, "https://127.0.0.1/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"localhost in production", prod, "https://localhost/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"http to loopback in sandbox", sandbox, "http://127.0.0.1:8080/hook", []string{"*"}, "", "http://127.0.0.1:8080/hook", []string{"*"}},
		{"http to localhost in sandbox", sandbox, "http://localhost:8080/hook", []string{"*"}, "", "http://localhost:8080/hook", []string{"*"}},
		{"http to [::1] in sandbox", sandbox, "http://[::1]:8080/hook", []string{"*"}, "", "http://[::1]:8080/hook", []string{"*"}},
		{"http to public in sandbox", sandbox, "http://hooks.example.com/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"private 10/8", sandbox, "https://10.1.2.3/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"private 172.16/12", sandbox, "https://172.16.0.1/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"private 192.168/16", sandbox, "https://192.168.1.1/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"metadata 169.254.169.254", sandbox, "https://169.254.169.254/latest", []string{"*"}, "webhook.invalid_url", "", nil},
		{"CGNAT", sandbox, "https://100.64.0.1/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"ULA", sandbox, "https://[fd00::1]/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"mapped private", sandbox, "https://[::ffff:10.0.0.1]/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"user info", prod, "https://user:pass@hooks.example.com/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"fragment", prod, "https://hooks.example.com/#x", []string{"*"}, "webhook.invalid_url", "", nil},
		{"ftp", prod, "ftp://hooks.example.com/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"no host", prod, "https:///path", []string{"*"}, "webhook.invalid_url", "", nil},
		{"relative", prod, "/hook", []string{"*"}, "webhook.invalid_url", "", nil},
		{"empty", prod, "", []string{"*"}, "webhook.invalid_url", "", nil},
		{"bad port", prod, "https://hooks.example.com:99999/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"zero port", prod, "https://hooks.example.com:0/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"space", prod, "https://hooks.example.com/a b", []string{"*"}, "webhook.invalid_url", "", nil},
		{"bad host", prod, "https://-bad-.example/", []string{"*"}, "webhook.invalid_url", "", nil},
		{"too long", prod, "https://hooks.example.com/" + strings.Repeat("a", 2048), []string{"*"}, "webhook.invalid_url", "", nil},
		{"no events", prod, "https://hooks.example.com/", nil, "webhook.invalid_events", "", nil},
		{"unknown kind", prod, "https://hooks.example.com/", []string{"payment.failed"}, "webhook.invalid_events", "", nil},
		{"empty kind", prod, "https://hooks.example.com/", []string{""}, "webhook.invalid_events", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.e.eps.Create(ctx, CreateRequest{URL: tt.url, Events: tt.events}, operator, "req_1", "a test endpoint")
			if tt.code != "" {
				if code := codeOf(err); code != tt.code {
					t.Fatalf("Create = %v (code %q), want code %q", err, code, tt.code)
				}
				if tt.code == "webhook.invalid_events" && !strings.Contains(err.Error(), "payment.settled, audit.appended") {
					t.Fatalf("message does not list the valid kinds: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.URL != tt.wantURL || !slices.Equal(c.Events, tt.wantEv) || !c.Active {
				t.Fatalf("created %+v", c.Endpoint)
			}
		})
	}
}

func TestEndpointLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	inactive := false
	c, err := e.eps.Create(ctx, CreateRequest{URL: "https://a.example/hook", Events: []string{"payment.settled"}, Active: &inactive}, operator, "req_1", "first endpoint")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "we_") || len(c.Secret) != len("whsec_")+43 || !strings.HasPrefix(c.Secret, "whsec_") || c.Active {
		t.Fatalf("created %+v", c)
	}
	secrets := []string{c.Secret}
	var ids []string
	ids = append(ids, c.ID)
	for range 4 {
		c := e.create("https://b.example/hook", "*")
		ids = append(ids, c.ID)
		secrets = append(secrets, c.Secret)
	}

	got, err := e.eps.Get(ctx, ids[0])
	if err != nil || got.ID != ids[0] || got.Active {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := e.eps.Get(ctx, "we_01JNOTANENDPOINTATALL00000"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get unknown = %v", err)
	}
	if _, err := e.eps.Get(ctx, "../../audit/head"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get malformed = %v", err)
	}

	// Pages of 2: oldest first, cursors chain, the last has no cursor.
	var listed []string
	cursor := ""
	for {
		p, err := e.eps.List(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, ep := range p.Data {
			listed = append(listed, ep.ID)
		}
		if !p.HasMore {
			if p.NextCursor != nil {
				t.Fatal("cursor on the last page")
			}
			break
		}
		cursor = *p.NextCursor
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("listed %v, want %v", listed, ids)
	}
	for _, bad := range []struct {
		cursor string
		limit  int
		want   error
	}{
		{"!!", 0, ErrBadCursor}, {"d2VfMQ", 0, ErrBadCursor}, {"", 101, ErrBadLimit}, {"", -1, ErrBadLimit},
		{"d2VfMDFKQUJDREVGR0hKS01OUFFSU1RWV1hZWjA", 0, ErrBadCursor}, // base64url("we_01JABCDEFGHJKMNPQRSTVWXYZ0"): id-ordered
	} {
		if _, err := e.eps.List(ctx, bad.cursor, bad.limit); !errors.Is(err, bad.want) {
			t.Errorf("List(%q, %d) = %v, want %v", bad.cursor, bad.limit, err, bad.want)
		}
	}

	// Update: each change recorded with what changed; no-op records nothing.
	on := true
	u, err := e.eps.Update(ctx, ids[0], UpdateRequest{Active: &on, Events: &[]string{"gate.decision"}}, operator, "req_2", "turn it on")
	if err != nil || !u.Active || !slices.Equal(u.Events, []string{"gate.decision"}) || u.Secret != "" {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	size0, _ := e.log.Size(ctx)
	if _, err := e.eps.Update(ctx, ids[0], UpdateRequest{Active: &on}, operator, "req_3", "no change at all"); err != nil {
		t.Fatal(err)
	}
	if size, _ := e.log.Size(ctx); size != size0 {
		t.Fatal("a no-op update was recorded")
	}
	bad := "http://hooks.example.com/"
	if _, err := e.eps.Update(ctx, ids[0], UpdateRequest{URL: &bad}, operator, "req_4", "bad url"); codeOf(err) != "webhook.invalid_url" {
		t.Fatalf("Update bad url = %v", err)
	}
	if _, err := e.eps.Update(ctx, ids[0], UpdateRequest{Events: &[]string{}}, operator, "req_4", "no events"); codeOf(err) != "webhook.invalid_events" {
		t.Fatalf("Update no events = %v", err)
	}

	// Rotation returns a new secret once and shows the overlap.
	r, err := e.eps.Update(ctx, ids[0], UpdateRequest{RotateSecret: true}, operator, "req_5", "rotate the secret")
	if err != nil || !strings.HasPrefix(r.Secret, "whsec_") || r.Secret == c.Secret || r.PreviousSecretExpiresAt == nil ||
		!r.PreviousSecretExpiresAt.Equal(e.clock.Now().Add(24*time.Hour)) {
		t.Fatalf("rotate = %+v, %v", r, err)
	}
	secrets = append(secrets, r.Secret)
	e.clock.Advance(24 * time.Hour)
	if got, _ := e.eps.Get(ctx, ids[0]); got.PreviousSecretExpiresAt != nil {
		t.Fatal("expired overlap still shown")
	}

	if err := e.eps.Delete(ctx, ids[1], operator, "req_6", "remove endpoint b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eps.Get(ctx, ids[1]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get deleted = %v", err)
	}
	if err := e.eps.Delete(ctx, ids[1], operator, "req_6", "remove endpoint b"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete twice = %v", err)
	}
	if _, err := e.eps.Update(ctx, ids[1], UpdateRequest{Active: &on}, operator, "req_6", "update deleted"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Update deleted = %v", err)
	}
	p, _ := e.eps.List(ctx, "", 100)
	if len(p.Data) != 4 {
		t.Fatalf("%d endpoints listed after delete", len(p.Data))
	}

	// The record names every change, and holds no secret.
	var types []string
	for ent, err := range e.log.Entries(ctx, 0, 0) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ent.Type)
		b, _ := json.Marshal(ent)
		for _, s := range secrets {
			if bytes.Contains(b, []byte(s)) || bytes.Contains(b, []byte(strings.TrimPrefix(s, "whsec_"))) {
				t.Fatalf("entry %d contains a secret", ent.Seq)
			}
		}
		if ent.Type == EntryEndpointUpdated && ent.RequestID == "req_5" {
			var ch endpointChange
			if err := json.Unmarshal(ent.Data, &ch); err != nil || !slices.Equal(ch.Changed, []string{"secret"}) || ent.Rationale != "rotate the secret" {
				t.Fatalf("rotation entry %s", ent.Data)
			}
		}
	}
	want := []string{EntryEndpointCreated, EntryEndpointCreated, EntryEndpointCreated, EntryEndpointCreated, EntryEndpointCreated,
		EntryEndpointUpdated, EntryEndpointUpdated, EntryEndpointDeleted}
	if !slices.Equal(types, want) {
		t.Fatalf("record %v, want %v", types, want)
	}
	// Reads hold no secret either.
	b, _ := json.Marshal(p)
	g, _ := e.eps.Get(ctx, ids[0])
	gb, _ := json.Marshal(g)
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) || bytes.Contains(gb, []byte(s)) {
			t.Fatal("a read shows a secret")
		}
	}
	if strings.Contains(e.logs.String(), "whsec_") {
		t.Fatal("a secret was logged")
	}
}

func TestMaxEndpoints(t *testing.T) {
	e := newEnv(t, envOptions{eps: &Options{SealKey: testSealKey(), MaxEndpoints: 2}})
	a := e.create("https://a.example/", "*")
	e.create("https://b.example/", "*")
	_, err := e.eps.Create(context.Background(), CreateRequest{URL: "https://c.example/", Events: []string{"*"}}, operator, "", "one too many")
	if !errors.Is(err, ErrTooManyEndpoints) || codeOf(err) != "webhook.too_many_endpoints" {
		t.Fatalf("third = %v", err)
	}
	if err := e.eps.Delete(context.Background(), a.ID, operator, "", "make room please"); err != nil {
		t.Fatal(err)
	}
	e.create("https://c.example/", "*")
}

func TestSecretsAtRest(t *testing.T) {
	t.Run("sealed", func(t *testing.T) {
		e := newEnv(t, envOptions{})
		c := e.create("https://a.example/", "*")
		raw := rawStore(t, e.st, "")
		for k, v := range raw {
			if bytes.Contains(v, []byte(c.Secret)) || bytes.Contains(v, []byte(strings.TrimPrefix(c.Secret, "whsec_"))) {
				t.Fatalf("secret in the clear under %q", k)
			}
		}
		if !bytes.Contains(raw[string(endpointKey(c.ID))], []byte(`"secret":"s1.`)) {
			t.Fatalf("stored endpoint %s", raw[string(endpointKey(c.ID))])
		}
	})
	t.Run("clear with warning", func(t *testing.T) {
		e := newEnv(t, envOptions{eps: &Options{AllowLoopbackHTTP: true}})
		if !strings.Contains(e.logs.String(), "UNENCRYPTED") || !strings.Contains(e.logs.String(), "level=WARN") {
			t.Fatalf("no warning: %s", e.logs.String())
		}
		c := e.create("https://a.example/", "*")
		raw := rawStore(t, e.st, string(endpointKey(c.ID)))
		if !bytes.Contains(raw[string(endpointKey(c.ID))], []byte(`"secret":"c1.`+c.Secret)) {
			t.Fatal("clear secret not stored as documented")
		}
	})
	t.Run("bad key size", func(t *testing.T) {
		var st memstore.Store
		l, err := audit.Open(context.Background(), &st, testKey(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewEndpoints(&st, l, &Options{SealKey: []byte("short")}); err == nil {
			t.Fatal("short seal key accepted")
		}
	})
}

func TestSealRotation(t *testing.T) {
	oldKey, newKey := testSealKey(), bytes.Repeat([]byte{0x33}, SealKeySize)
	var st memstore.Store
	ctx := context.Background()
	l, err := audit.Open(ctx, &st, testKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e1, err := NewEndpoints(&st, l, &Options{SealKey: oldKey, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e1.Create(ctx, CreateRequest{URL: "https://a.example/", Events: []string{"*"}}, operator, "", "an endpoint to rotate")
	if err != nil {
		t.Fatal(err)
	}
	get := func(eps *Endpoints) ([]string, error) {
		var se storedEndpoint
		if err := st.View(ctx, func(r store.Reader) error {
			var err error
			se, err = getEndpoint(r, c.ID)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return eps.signingSecrets(&se, time.Now())
	}
	// A new key alone cannot open the old secret...
	e2, _ := NewEndpoints(&st, l, &Options{SealKey: newKey, Logger: quiet})
	if _, err := get(e2); !errors.Is(err, ErrUnseal) {
		t.Fatalf("open under the wrong key = %v", err)
	}
	// ... with the old key listed it can, and the next write re-seals.
	e3, _ := NewEndpoints(&st, l, &Options{SealKey: newKey, OldSealKeys: [][]byte{oldKey}, Logger: quiet})
	if s, err := get(e3); err != nil || s[0] != c.Secret {
		t.Fatalf("open with OldSealKeys = %v, %v", s, err)
	}
	off := false
	if _, err := e3.Update(ctx, c.ID, UpdateRequest{Active: &off}, operator, "", "re-seal by writing"); err != nil {
		t.Fatal(err)
	}
	if s, err := get(e2); err != nil || s[0] != c.Secret {
		t.Fatalf("after re-seal, new key alone = %v, %v", s, err)
	}
	// A sealed secret copied onto another endpoint does not open there.
	s, _ := newSealer(newKey, nil)
	sealed, _ := s.seal(c.ID, c.Secret, bytes.NewReader(make([]byte, 64)))
	if _, err := s.open("we_01JOTHER0000000000000000000", sealed); !errors.Is(err, ErrUnseal) {
		t.Fatalf("open under another id = %v", err)
	}
}
