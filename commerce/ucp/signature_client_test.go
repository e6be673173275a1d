package ucp_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
)

// stripper sits in front of the fake: it removes the signature of the
// answers to paths with suffix, or answers them 503 unsigned.
type stripper struct {
	mu          sync.Mutex
	suffix      string
	unavailable bool
}

func (s *stripper) set(suffix string, unavailable bool) {
	s.mu.Lock()
	s.suffix, s.unavailable = suffix, unavailable
	s.mu.Unlock()
}

func (s *stripper) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		suffix, unavailable := s.suffix, s.unavailable
		s.mu.Unlock()
		if suffix == "" || !strings.HasSuffix(r.URL.Path, suffix) {
			next.ServeHTTP(w, r)
			return
		}
		if unavailable {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			if k != "Signature" && k != "Signature-Input" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func pin(keys ...ucp.SigningKey) func(*ucp.Options) {
	return func(o *ucp.Options) { o.SigningKeys = keys }
}

// TestResponseSignatures drives the signature policy against the fake
// merchant, which signs every 2026-04-08 checkout answer with its own key.
func TestResponseSignatures(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, nil, ucp.V20260111, ucp.V20260408)
	fakeKey := ucp.SigningKey(e.m.SigningJWK())
	otherPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherKey, _ := ucp.SigningKeyOf("someone-else", &otherPriv.PublicKey)
	ctx := t.Context()

	// Every operation, verified against the profile's key and against the
	// pinned one.
	for name, mod := range map[string]func(*ucp.Options){"profile key": nil, "pinned key": pin(fakeKey)} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, e, mod)
			if c.Version() != ucp.V20260408 || len(c.Profile().SigningKeys) != 1 {
				t.Fatalf("version %s, profile keys %+v", c.Version(), c.Profile().SigningKeys)
			}
			k := create(t, c, "sku-mug", 1)
			if _, err := c.Update(ctx, k.ID, ucp.UpdateRequest{Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 2}}, Currency: "USD"}); err != nil {
				t.Fatal(err)
			}
			g, err := c.Get(ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Complete(ctx, k.ID, pay(g, "intent-"+name)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Cancel(ctx, create(t, c, "sku-book", 1).ID); err != nil {
				t.Fatal(err)
			}
			// A signed error answer is verified, then mapped.
			if _, err := c.Get(ctx, "cs_nope"); !errors.Is(err, cart.ErrNotFound) {
				t.Fatalf("Get of an unknown session: %v", err)
			}
		})
	}
	e.rec.mu.Lock()
	signed := 0
	for _, x := range e.rec.ex {
		if strings.Contains(x.path, "/2026-04-08/checkout-sessions") && x.status != 0 {
			signed++
		}
	}
	e.rec.mu.Unlock()
	if signed < 10 {
		t.Fatalf("only %d checkout answers seen", signed)
	}

	t.Run("pinned key vs the profile's key", func(t *testing.T) {
		c := newClient(t, e, pin(otherKey))
		_, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-mug", Quantity: 1}}})
		if !errors.Is(err, ucp.ErrSignature) || !errors.Is(err, cart.ErrInvalidResponse) || !strings.Contains(err.Error(), "not a pinned key") {
			t.Fatalf("Create: %v, want a refusal: the profile's key is not pinned", err)
		}
	})
	t.Run("bad-signature scenario", func(t *testing.T) {
		for name, mod := range map[string]func(*ucp.Options){"profile key": nil, "pinned key": pin(fakeKey)} {
			c := newClient(t, e, mod)
			_, err := c.Create(ctx, cart.CreateRequest{Currency: "USD", Lines: []cart.LineRequest{{ID: "sku-badsig", Quantity: 1}}})
			if !errors.Is(err, ucp.ErrSignature) || !strings.Contains(err.Error(), "does not verify") {
				t.Errorf("%s: Create: %v, want the signature refused", name, err)
			}
		}
	})
	t.Run("completion answer badly signed", func(t *testing.T) {
		c := newClient(t, e, pin(fakeKey))
		k := create(t, c, "sku-badsig-complete", 1)
		_, err := c.Complete(ctx, k.ID, pay(k, "intent-badsig"))
		// Neither an order nor a decline: the outcome is unknown.
		if !errors.Is(err, cart.ErrUnknownOutcome) || !errors.Is(err, ucp.ErrSignature) || errors.Is(err, cart.ErrDeclined) || errors.Is(err, cart.ErrNotReady) {
			t.Fatalf("Complete: %v, want ErrUnknownOutcome (and ErrSignature)", err)
		}
		// The merchant did place it; asking again under the same key
		// answers the order, signed properly this time.
		if g, err := c.Get(ctx, k.ID); err != nil || g.Status != cart.StatusCompleted {
			t.Fatalf("Get = %+v, %v", g, err)
		}
		if o, err := c.Complete(ctx, k.ID, pay(k, "intent-badsig")); err != nil || o.ID == "" {
			t.Fatalf("Complete again = %+v, %v", o, err)
		}
	})
	t.Run("2026-01-11 with pinned keys", func(t *testing.T) {
		_, err := ucp.New(ctx, ucp.Options{ProfileURL: e.base + "/.well-known/ucp", HTTPClient: e.client(),
			Versions: []string{ucp.V20260111}, SigningKeys: []ucp.SigningKey{fakeKey}})
		if !errors.Is(err, ucp.ErrSignaturesUnsupported) {
			t.Fatalf("New: %v, want ErrSignaturesUnsupported", err)
		}
		// Without pinned keys 2026-01-11 answers are not checked.
		c := newClient(t, e, func(o *ucp.Options) { o.Versions = []string{ucp.V20260111} })
		create(t, c, "sku-badsig", 1)
	})
	t.Run("malformed pinned key", func(t *testing.T) {
		bad := fakeKey
		bad.Y = bad.X
		_, err := ucp.New(ctx, ucp.Options{ProfileURL: e.base + "/.well-known/ucp", HTTPClient: e.client(), SigningKeys: []ucp.SigningKey{bad}})
		if err == nil || !strings.Contains(err.Error(), "Options.SigningKeys") {
			t.Fatalf("New: %v", err)
		}
	})
}

// TestUnsignedAnswers: an unsigned answer passes only when nothing is
// pinned; an unsigned 5xx is "try later" either way.
func TestUnsignedAnswers(t *testing.T) {
	st := &stripper{}
	e := newEnv(t, fakemerchant.Options{}, st.wrap, ucp.V20260408)
	ctx := t.Context()
	open := newClient(t, e, nil)
	pinned := newClient(t, e, pin(ucp.SigningKey(e.m.SigningJWK())))
	k := create(t, pinned, "sku-mug", 1)

	st.set("/"+k.ID, false)
	if _, err := open.Get(ctx, k.ID); err != nil {
		t.Fatalf("unsigned answer, nothing pinned: %v", err)
	}
	if _, err := pinned.Get(ctx, k.ID); !errors.Is(err, ucp.ErrSignature) || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("unsigned answer, key pinned: %v", err)
	}
	st.set("/cs_nope", false)
	if _, err := pinned.Get(ctx, "cs_nope"); !errors.Is(err, ucp.ErrSignature) || errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("unsigned 404, key pinned: %v, want refused, not ErrNotFound", err)
	}
	st.set("/complete", false)
	if _, err := pinned.Complete(ctx, k.ID, pay(k, "intent-unsigned")); !errors.Is(err, cart.ErrUnknownOutcome) || !errors.Is(err, ucp.ErrSignature) {
		t.Fatalf("unsigned completion answer, key pinned: %v, want ErrUnknownOutcome", err)
	}
	st.set("/"+k.ID, true)
	if _, err := pinned.Get(ctx, k.ID); !errors.Is(err, cart.ErrUnavailable) || errors.Is(err, cart.ErrInvalidResponse) {
		t.Fatalf("unsigned 503, key pinned: %v, want ErrUnavailable", err)
	}
}

// TestKeyRotation: a merchant rotating its key publishes the new one
// first; a client that trusts the profile reads it again when a signature
// names an unknown keyid (at most once a minute), a client with pinned
// keys does not.
func TestKeyRotation(t *testing.T) {
	e := newEnv(t, fakemerchant.Options{}, nil, ucp.V20260408)
	ctx := t.Context()
	open := newClient(t, e, nil)
	pinned := newClient(t, e, pin(ucp.SigningKey(e.m.SigningJWK())))
	k := create(t, open, "sku-mug", 1)

	next, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	e.m.RotateSigningKey(next, "rotated-1")
	// The keys were read less than a minute ago: not read again yet.
	if _, err := open.Get(ctx, k.ID); !errors.Is(err, ucp.ErrSignature) || !strings.Contains(err.Error(), `keyid "rotated-1"`) {
		t.Fatalf("Get right after the rotation: %v", err)
	}
	e.clock.Add(2 * time.Minute)
	if _, err := open.Get(ctx, k.ID); err != nil {
		t.Fatalf("Get after the profile could be read again: %v", err)
	}
	if _, err := pinned.Get(ctx, k.ID); !errors.Is(err, ucp.ErrSignature) || !strings.Contains(err.Error(), "not a pinned key") {
		t.Fatalf("pinned client after the rotation: %v", err)
	}
	profiles := 0
	e.rec.mu.Lock()
	for _, x := range e.rec.ex {
		if x.path == "/.well-known/ucp" {
			profiles++
		}
	}
	e.rec.mu.Unlock()
	if profiles != 3 { // two clients' discovery, one re-read
		t.Fatalf("the profile was read %d times, want 3", profiles)
	}
}
