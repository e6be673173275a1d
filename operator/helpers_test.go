package operator_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// t0 is the tests' wall clock start: 2025-11-22T08:26:40Z.
var t0 = time.Unix(1763800000, 0)

const testBase = "https://pay.example.com"

// fakeClock is a settable clock, safe for concurrent use.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *fakeClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// edKey returns a deterministic Ed25519 key.
func edKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// refusal is what OnRefused saw.
type refusal struct {
	op     string
	reason operator.Reason
	keyID  string
	path   string
}

// fixture is a verifier with two trusted keys (op-alice Ed25519, op-bob
// P-256) and signers for both, all on one fake clock.
type fixture struct {
	clock    *fakeClock
	st       store.Store
	alice    ed25519.PrivateKey
	bob      *ecdsa.PrivateKey
	keys     []operator.PublicKey
	v        *operator.Verifier
	mu       sync.Mutex
	refusals []refusal
}

func newFixture(t testing.TB, st store.Store) *fixture {
	t.Helper()
	if st == nil {
		st = memstore.New(nil)
	}
	f := &fixture{clock: newClock(t0), st: st, alice: edKey(1), bob: ecKey(t)}
	f.keys = []operator.PublicKey{
		{KeyID: "op-alice", Public: f.alice.Public()},
		{KeyID: "op-bob", Public: f.bob.Public()},
	}
	f.v = f.verifier(t, testBase)
	return f
}

func (f *fixture) verifier(t testing.TB, base string) *operator.Verifier {
	t.Helper()
	v, err := operator.NewVerifier(f.st, f.keys, base, &operator.VerifierOptions{
		Now: f.clock.Now,
		OnRefused: func(_ context.Context, r *http.Request, op string, reason operator.Reason, keyID string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.refusals = append(f.refusals, refusal{op: op, reason: reason, keyID: keyID, path: r.URL.Path})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (f *fixture) lastRefusal() (refusal, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.refusals) == 0 {
		return refusal{}, 0
	}
	return f.refusals[len(f.refusals)-1], len(f.refusals)
}

func (f *fixture) signer(t testing.TB, key crypto.Signer, kid, base string) *operator.Signer {
	t.Helper()
	s, err := operator.NewSigner(key, kid, base, &operator.SignerOptions{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// request builds a server-side request for target (a path with optional
// query), signs it with s, and returns it with its body.
func signed(t testing.TB, s *operator.Signer, method, target, op string, body []byte) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	if err := s.Sign(r, op, body); err != nil {
		t.Fatal(err)
	}
	return r
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
