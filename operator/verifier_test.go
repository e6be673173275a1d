package operator_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/store/pebblestore"
)

const body = `{"intentId":"int_01","rationale":"customer asked twice"}`

func TestRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	hsm := hsmSigner{f.bob} // a crypto.Signer that is not *ecdsa.PrivateKey
	tests := []struct {
		name   string
		key    crypto.Signer
		kid    string
		method string
		target string
		body   []byte
	}{
		{"EdDSA POST", f.alice, "op-alice", "POST", "/operator/approve", []byte(body)},
		{"ES256 POST", f.bob, "op-bob", "POST", "/operator/approve", []byte(body)},
		{"EdDSA GET no body", f.alice, "op-alice", "GET", "/operator/agents", nil},
		{"ES256 DELETE empty body", f.bob, "op-bob", "DELETE", "/webhooks/we_1", []byte{}},
		{"query", f.alice, "op-alice", "GET", "/usage?since=2025-01-01T00:00:00Z&tags=a%3Db", nil},
		{"escaped path", f.bob, "op-bob", "POST", "/memory/a%2Fb/forget", []byte(body)},
		{"ES256 through a crypto.Signer", hsm, "op-bob", "POST", "/operator/kill-switch", []byte(body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := f.signer(t, tt.key, tt.kid, testBase)
			r := signed(t, s, tt.method, tt.target, "operator.approve", tt.body)
			id, err := f.v.Verify(r, "operator.approve", tt.body)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if id.KeyID != tt.kid {
				t.Errorf("KeyID = %q, want %q", id.KeyID, tt.kid)
			}
		})
	}
	if _, n := f.lastRefusal(); n != 0 {
		t.Errorf("OnRefused called %d times on success", n)
	}
}

// hsmSigner hides the concrete key type, as a hardware token would.
type hsmSigner struct{ k *ecdsa.PrivateKey }

func (h hsmSigner) Public() crypto.PublicKey { return h.k.Public() }
func (h hsmSigner) Sign(r io.Reader, d []byte, o crypto.SignerOpts) ([]byte, error) {
	return h.k.Sign(r, d, o)
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	bob := f.signer(t, f.bob, "op-bob", testBase)
	const op = "operator.approve"
	b := []byte(body)

	// mallory signs with a key the server does not trust, claiming alice.
	mallory := f.signer(t, edKey(9), "op-alice", testBase)
	// stranger names a key the server does not know.
	stranger := f.signer(t, edKey(9), "op-mallory", testBase)

	tests := []struct {
		name   string
		req    func() *http.Request
		op     string
		body   []byte
		at     time.Duration // server clock offset from signing time
		reason operator.Reason
		kid    string // keyid OnRefused sees
		detail string // part of the error message
	}{
		{name: "missing header", reason: operator.ReasonMissingHeader, detail: "no Svc-Operator header",
			req: func() *http.Request { return httptestReq("POST", "/operator/approve") }},
		{name: "empty header", reason: operator.ReasonMissingHeader,
			req: func() *http.Request {
				r := httptestReq("POST", "/operator/approve")
				r.Header.Set(operator.HeaderName, " ")
				return r
			}},
		{name: "garbage header", reason: operator.ReasonMalformedHeader, detail: "not an RFC 8941 dictionary",
			req: func() *http.Request {
				r := httptestReq("POST", "/operator/approve")
				r.Header.Set(operator.HeaderName, "Bearer abc")
				return r
			}},
		{name: "unknown member", reason: operator.ReasonMalformedHeader, detail: `unknown member "alg"`,
			req: func() *http.Request {
				r := signed(t, alice, "POST", "/operator/approve", op, b)
				r.Header.Set(operator.HeaderName, r.Header.Get(operator.HeaderName)+", alg=ES256")
				return r
			}},
		{name: "two headers with the same members", reason: operator.ReasonMalformedHeader, detail: "given twice",
			req: func() *http.Request {
				r := signed(t, alice, "POST", "/operator/approve", op, b)
				r2 := signed(t, alice, "POST", "/operator/approve", op, b)
				r.Header.Add(operator.HeaderName, r2.Header.Get(operator.HeaderName))
				return r
			}},
		{name: "unknown key", reason: operator.ReasonUnknownKey, kid: "op-mallory", detail: `"op-mallory" names no trusted`,
			req: func() *http.Request { return signed(t, stranger, "POST", "/operator/approve", op, b) }},
		{name: "stale", at: 301 * time.Second, reason: operator.ReasonStaleTimestamp, kid: "op-alice",
			detail: "301 s before the server's clock; at most 300 s",
			req:    func() *http.Request { return signed(t, alice, "POST", "/operator/approve", op, b) }},
		{name: "stale by a fraction", at: 300*time.Second + time.Millisecond, reason: operator.ReasonStaleTimestamp, kid: "op-alice",
			detail: "301 s before",
			req:    func() *http.Request { return signed(t, alice, "POST", "/operator/approve", op, b) }},
		{name: "future", at: -301 * time.Second, reason: operator.ReasonFutureTimestamp, kid: "op-bob",
			detail: "301 s after the server's clock",
			req:    func() *http.Request { return signed(t, bob, "POST", "/operator/approve", op, b) }},
		{name: "far future ts", reason: operator.ReasonFutureTimestamp, kid: "op-alice",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Timestamp = 999999999999999 })
			}},
		{name: "ts zero", reason: operator.ReasonStaleTimestamp, kid: "op-alice",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Timestamp = 0 })
			}},
		{name: "ES256 in ASN.1 DER", reason: operator.ReasonAlgMismatch, kid: "op-bob", detail: "not ASN.1 DER",
			req: func() *http.Request {
				r := signed(t, bob, "POST", "/operator/approve", op, b)
				return withHeader(t, r, func(h *operator.Header) {
					d := sha256.Sum256([]byte("anything"))
					der, err := f.bob.Sign(nil, d[:], crypto.SHA256)
					if err != nil {
						t.Fatal(err)
					}
					h.Signature = der
				})
			}},
		{name: "short EdDSA sig", reason: operator.ReasonAlgMismatch, kid: "op-alice", detail: "EdDSA, whose signatures are 64 bytes, but sig has 63",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Signature = h.Signature[:63] })
			}},
		{name: "other operation", op: "webhooks.create", reason: operator.ReasonBadSignature, kid: "op-alice",
			detail: "does not verify over operation webhooks.create, POST https://pay.example.com/operator/approve",
			req:    func() *http.Request { return signed(t, alice, "POST", "/operator/approve", op, b) }},
		{name: "tampered body", body: []byte(strings.Replace(body, "twice", "once.", 1)), reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request { return signed(t, alice, "POST", "/operator/approve", op, b) }},
		{name: "body dropped", body: []byte{}, reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request { return signed(t, bob, "POST", "/operator/approve", op, b) }},
		{name: "tampered path", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request {
				return retarget(signed(t, alice, "POST", "/operator/intents/int_1/approve", op, b), "/operator/intents/int_2/approve")
			}},
		{name: "path re-escaped", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request {
				return retarget(signed(t, alice, "POST", "/memory/a%2Fb/forget", op, b), "/memory/a/b/forget")
			}},
		{name: "tampered query", reason: operator.ReasonBadSignature, kid: "op-bob", detail: "(with its query)",
			req: func() *http.Request {
				return retarget(signed(t, bob, "GET", "/usage?tags=a", op, b), "/usage?tags=b")
			}},
		{name: "query added", reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request { return retarget(signed(t, bob, "GET", "/usage", op, b), "/usage?x=1") }},
		{name: "query dropped", reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request { return retarget(signed(t, bob, "GET", "/usage?x=1", op, b), "/usage") }},
		{name: "tampered method", reason: operator.ReasonBadSignature, kid: "op-alice", detail: "DELETE https://pay.example.com/webhooks/we_1",
			req: func() *http.Request {
				r := signed(t, alice, "POST", "/webhooks/we_1", op, b)
				r.Method = "DELETE"
				return r
			}},
		{name: "signed for another base URL", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request {
				return signed(t, f.signer(t, f.alice, "op-alice", "https://staging.example.com"), "POST", "/operator/approve", op, b)
			}},
		{name: "signed by an untrusted key claiming a trusted kid", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request { return signed(t, mallory, "POST", "/operator/approve", op, b) }},
		{name: "keyid swapped to another operator", reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.KeyID = "op-bob" })
			}},
		{name: "ts changed", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Timestamp++ })
			}},
		{name: "nonce changed", reason: operator.ReasonBadSignature, kid: "op-alice",
			req: func() *http.Request {
				return withHeader(t, signed(t, alice, "POST", "/operator/approve", op, b), func(h *operator.Header) {
					h.Nonce = base64.RawURLEncoding.EncodeToString([]byte("another 16 bytes"))
				})
			}},
		{name: "flipped bit", reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request {
				return withHeader(t, signed(t, bob, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Signature[5] ^= 1 })
			}},
		{name: "ES256 r and s zero", reason: operator.ReasonBadSignature, kid: "op-bob",
			req: func() *http.Request {
				return withHeader(t, signed(t, bob, "POST", "/operator/approve", op, b), func(h *operator.Header) { h.Signature = make([]byte, 64) })
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.clock.Set(t0)
			r := tt.req()
			f.clock.Set(t0.Add(tt.at))
			opID, bd := op, b
			if tt.op != "" {
				opID = tt.op
			}
			if tt.body != nil {
				bd = tt.body
			}
			_, before := f.lastRefusal()
			id, err := f.v.Verify(r, opID, bd)
			var ue *operator.UnauthorizedError
			if !errors.As(err, &ue) {
				t.Fatalf("Verify = %+v, %v; want *UnauthorizedError", id, err)
			}
			if ue.Reason != tt.reason || !errors.Is(err, operator.ErrUnauthorized) || ue.Code() != "operator.unauthorized" {
				t.Errorf("Verify = %v (reason %s); want reason %s", err, ue.Reason, tt.reason)
			}
			if ue.ProblemExtensions()["reason"] != string(tt.reason) {
				t.Errorf("ProblemExtensions = %v", ue.ProblemExtensions())
			}
			want := "operator: unauthorized: " + string(tt.reason)
			if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("message %q; want prefix %q and %q", err, want, tt.detail)
			}
			got, after := f.lastRefusal()
			if after != before+1 {
				t.Fatalf("OnRefused called %d times, want once", after-before)
			}
			if w := (refusal{op: opID, reason: tt.reason, keyID: tt.kid, path: r.URL.Path}); got != w {
				t.Errorf("OnRefused saw %+v, want %+v", got, w)
			}
		})
	}
}

func httptestReq(method, target string) *http.Request {
	return httptest.NewRequest(method, target, nil)
}

// withHeader re-parses r's Svc-Operator header, edits it, and writes it
// back.
func withHeader(t *testing.T, r *http.Request, edit func(*operator.Header)) *http.Request {
	t.Helper()
	h, err := operator.ParseHeader(r.Header.Get(operator.HeaderName))
	if err != nil {
		t.Fatal(err)
	}
	edit(&h)
	b, err := h.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(operator.HeaderName, string(b))
	return r
}

// retarget moves the signed header of r onto a request for another target.
func retarget(r *http.Request, target string) *http.Request {
	r2 := httptest.NewRequest(r.Method, target, nil)
	r2.Header = r.Header.Clone()
	return r2
}

func TestWindowEdges(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	for _, at := range []time.Duration{-300 * time.Second, 0, 300 * time.Second} {
		f.clock.Set(t0)
		r := signed(t, alice, "POST", "/operator/approve", "operator.approve", nil)
		f.clock.Set(t0.Add(at))
		if _, err := f.v.Verify(r, "operator.approve", nil); err != nil {
			t.Errorf("at %v: %v", at, err)
		}
	}

	// A custom window.
	v, err := operator.NewVerifier(f.st, f.keys, testBase, &operator.VerifierOptions{Now: f.clock.Now, Window: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Set(t0)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", nil)
	f.clock.Set(t0.Add(6 * time.Second))
	var ue *operator.UnauthorizedError
	if _, err := v.Verify(r, "operator.approve", nil); !errors.As(err, &ue) || ue.Reason != operator.ReasonStaleTimestamp {
		t.Errorf("6 s with a 5 s window: %v", err)
	}
}

func TestReplay(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", []byte(body))
	if _, err := f.v.Verify(r, "operator.approve", []byte(body)); err != nil {
		t.Fatal(err)
	}
	// Replayed at once, and just before the ts leaves the window.
	for _, at := range []time.Duration{0, 300 * time.Second} {
		f.clock.Set(t0.Add(at))
		var ue *operator.UnauthorizedError
		_, err := f.v.Verify(r, "operator.approve", []byte(body))
		if !errors.As(err, &ue) || ue.Reason != operator.ReasonReplayedNonce || ue.KeyID != "op-alice" {
			t.Fatalf("replay at +%v: %v", at, err)
		}
	}
	// The same nonce from another operator is refused too: nonces are
	// global, because keyid is not signed.
	bob := f.signer(t, f.bob, "op-bob", testBase)
	r2 := signed(t, bob, "POST", "/operator/approve", "operator.approve", nil)
	h, _ := operator.ParseHeader(r.Header.Get(operator.HeaderName))
	r2 = withHeader(t, r2, func(h2 *operator.Header) { h2.Nonce = h.Nonce })
	if _, err := f.v.Verify(r2, "operator.approve", nil); err == nil {
		t.Error("a second use of a nonce under another key was accepted")
	}
	// A fresh signature of the same request is accepted.
	r3 := signed(t, alice, "POST", "/operator/approve", "operator.approve", []byte(body))
	if _, err := f.v.Verify(r3, "operator.approve", []byte(body)); err != nil {
		t.Errorf("fresh signature: %v", err)
	}
}

// TestNonceNotSpentOnRefusal: a request refused for any reason before the
// signature verifies leaves no nonce behind, so it cannot burn a nonce.
func TestNonceNotSpentOnRefusal(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", []byte(body))
	if _, err := f.v.Verify(r, "operator.approve", []byte("tampered")); err == nil {
		t.Fatal("tampered body accepted")
	}
	if _, err := f.v.Verify(r, "operator.approve", []byte(body)); err != nil {
		t.Fatalf("the genuine request after a forged one: %v", err)
	}
	if n := countNonces(t, f.st); n != 1 {
		t.Errorf("%d nonce records, want 1", n)
	}
}

func countNonces(t *testing.T, st store.Store) int {
	t.Helper()
	n := 0
	err := st.View(t.Context(), func(r store.Reader) error {
		it := r.Iterate([]byte(operator.NoncePrefix), store.PrefixEnd([]byte(operator.NoncePrefix)), false)
		for it.Next() {
			n++
		}
		return it.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReplayAfterRestart: a spent nonce is durable; closing and reopening
// the store does not make the request acceptable again.
func TestReplayAfterRestart(t *testing.T) {
	dir := t.TempDir()
	st, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, st)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", []byte(body))
	if _, err := f.v.Verify(r, "operator.approve", []byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2, err := pebblestore.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	f.st = st2
	f.clock.Add(299 * time.Second)
	v := f.verifier(t, testBase)
	if n, err := v.SweepNonces(t.Context()); err != nil || n != 0 {
		t.Fatalf("SweepNonces inside the retention = %d, %v", n, err)
	}
	var ue *operator.UnauthorizedError
	if _, err := v.Verify(r, "operator.approve", []byte(body)); !errors.As(err, &ue) || ue.Reason != operator.ReasonReplayedNonce {
		t.Fatalf("replay after restart: %v", err)
	}
}

// TestConcurrentReplay: 50 goroutines send one signed request at once;
// exactly one is accepted, on every driver.
func TestConcurrentReplay(t *testing.T) {
	drivers := map[string]func(t *testing.T) store.Store{
		"memstore": func(*testing.T) store.Store { return memstore.New(nil) },
		"pebblestore": func(t *testing.T) store.Store {
			st, err := pebblestore.Open(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, open(t))
			alice := f.signer(t, f.alice, "op-alice", testBase)
			orig := signed(t, alice, "POST", "/operator/approve", "operator.approve", []byte(body))
			const n = 50
			var (
				wg              sync.WaitGroup
				mu              sync.Mutex
				accepted, other int
				replayed        int
			)
			start := make(chan struct{})
			for range n {
				r := orig.Clone(t.Context())
				wg.Go(func() {
					<-start
					_, err := f.v.Verify(r, "operator.approve", []byte(body))
					var ue *operator.UnauthorizedError
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						accepted++
					case errors.As(err, &ue) && ue.Reason == operator.ReasonReplayedNonce:
						replayed++
					default:
						other++
						t.Errorf("Verify: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			if accepted != 1 || replayed != n-1 {
				t.Errorf("accepted %d, replayed %d, other %d; want 1, %d, 0", accepted, replayed, other, n-1)
			}
		})
	}
}

func TestSweepNonces(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	// Three nonces spent at t0, t0+100 s and t0+200 s.
	var reqs []*http.Request
	for i := range 3 {
		f.clock.Set(t0.Add(time.Duration(i) * 100 * time.Second))
		r := signed(t, alice, "POST", "/operator/approve", "operator.approve", nil)
		if _, err := f.v.Verify(r, "operator.approve", nil); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	// The record says when it expires and who spent it.
	h, _ := operator.ParseHeader(reqs[0].Header.Get(operator.HeaderName))
	var rec []byte
	err := f.st.View(t.Context(), func(r store.Reader) (err error) {
		rec, err = r.Get([]byte(operator.NoncePrefix + h.Nonce))
		return err
	})
	if want := fmt.Sprintf("%d op-alice", t0.Add(600*time.Second).Unix()); err != nil || string(rec) != want {
		t.Fatalf("record = %q, %v; want %q", rec, err, want)
	}

	steps := []struct {
		at      time.Duration
		deleted int
		left    int
	}{
		{600 * time.Second, 0, 3},  // the first expires at t0+600: not yet
		{601 * time.Second, 1, 2},  // now it has
		{750 * time.Second, 1, 1},  // the second
		{2000 * time.Second, 1, 0}, // the third
		{3000 * time.Second, 0, 0},
	}
	for _, s := range steps {
		f.clock.Set(t0.Add(s.at))
		n, err := f.v.SweepNonces(t.Context())
		if err != nil || n != s.deleted {
			t.Fatalf("at +%v: SweepNonces = %d, %v; want %d", s.at, n, err, s.deleted)
		}
		if got := countNonces(t, f.st); got != s.left {
			t.Fatalf("at +%v: %d records left, want %d", s.at, got, s.left)
		}
	}
	// A swept nonce is still refused: its ts is stale.
	var ue *operator.UnauthorizedError
	if _, err := f.v.Verify(reqs[2], "operator.approve", nil); !errors.As(err, &ue) || ue.Reason != operator.ReasonStaleTimestamp {
		t.Errorf("swept nonce: %v", err)
	}
}

// TestSweepNoncesBatches: more records than one sweep transaction visits,
// and an unreadable record that is kept.
func TestSweepNoncesBatches(t *testing.T) {
	f := newFixture(t, nil)
	const n = 2500
	err := f.st.Update(t.Context(), func(tx store.Txn) error {
		for i := range n {
			if err := tx.Set(fmt.Appendf(nil, "%s%06d", operator.NoncePrefix, i), []byte("1 op-alice")); err != nil {
				return err
			}
		}
		if err := tx.Set([]byte(operator.NoncePrefix+"zzcorrupt"), []byte("garbage")); err != nil {
			return err
		}
		// A neighbour outside the prefix is not touched.
		return tx.Set([]byte("operator/noncf"), []byte("1 x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	v, err := operator.NewVerifier(f.st, f.keys, testBase, &operator.VerifierOptions{
		Now: f.clock.Now, Logger: newTextLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.SweepNonces(t.Context())
	if err != nil || got != n {
		t.Fatalf("SweepNonces = %d, %v; want %d", got, err, n)
	}
	if left := countNonces(t, f.st); left != 1 {
		t.Errorf("%d records left, want the corrupt one", left)
	}
	if !strings.Contains(logs.String(), "unreadable nonce records kept") {
		t.Errorf("log: %q", logs.String())
	}
	err = f.st.View(t.Context(), func(r store.Reader) error {
		_, err := r.Get([]byte("operator/noncf"))
		return err
	})
	if err != nil {
		t.Errorf("a key outside the prefix: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := v.SweepNonces(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sweep: %v", err)
	}
}

func TestVerifyFaults(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", nil)
	for _, op := range []string{"", "a\nb"} {
		_, err := f.v.Verify(r, op, nil)
		var ue *operator.UnauthorizedError
		if err == nil || errors.As(err, &ue) {
			t.Errorf("operation %q: %v; want a fault, not a refusal", op, err)
		}
	}
	// A closed store is a fault too, and not reported to OnRefused.
	if err := f.st.Close(); err != nil {
		t.Fatal(err)
	}
	_, before := f.lastRefusal()
	if _, err := f.v.Verify(r, "operator.approve", nil); !errors.Is(err, store.ErrClosed) || errors.Is(err, operator.ErrUnauthorized) {
		t.Errorf("closed store: %v", err)
	}
	if _, after := f.lastRefusal(); after != before {
		t.Error("OnRefused called for a fault")
	}
}

// TestMultipleFieldLines: RFC 8941 joins field lines, so a header split in
// two is one header.
func TestMultipleFieldLines(t *testing.T) {
	f := newFixture(t, nil)
	alice := f.signer(t, f.alice, "op-alice", testBase)
	r := signed(t, alice, "POST", "/operator/approve", "operator.approve", nil)
	v := r.Header.Get(operator.HeaderName)
	i := strings.Index(v, ", nonce=")
	r.Header[operator.HeaderName] = []string{v[:i], "", v[i+2:]}
	if _, err := f.v.Verify(r, "operator.approve", nil); err != nil {
		t.Fatal(err)
	}
}

// TestBasePath: a base URL with a path (a proxy strips the prefix). The
// client addresses base+route; the server receives the route.
func TestBasePath(t *testing.T) {
	f := newFixture(t, nil)
	const base = "https://example.com/countersign/"
	v := f.verifier(t, base)
	s := f.signer(t, f.alice, "op-alice", base)
	for _, clientTarget := range []string{"/countersign/operator/approve?x=1", "/operator/approve?x=1"} {
		r := signed(t, s, "POST", clientTarget, "operator.approve", nil)
		server := retarget(r, "/operator/approve?x=1")
		if _, err := v.Verify(server, "operator.approve", nil); err != nil {
			t.Errorf("client target %s: %v", clientTarget, err)
		}
	}
}

// TestOverHTTP sends signed requests through a real client and server, so
// the path and query are the ones net/http puts on the wire.
func TestOverHTTP(t *testing.T) {
	f := newFixture(t, nil)
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		id, err := f.v.Verify(r, "operator.approve", b)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			got = append(got, err.Error())
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		got = append(got, "ok "+id.KeyID)
	}))
	defer srv.Close()
	// The verifier's base URL is the public one; the client reaches the
	// server at the test address and signs with the public base URL.
	s := f.signer(t, f.bob, "op-bob", testBase)
	for _, target := range []string{"/operator/approve", "/memory/a%2Fb/forget?q=%C3%A9&x=a+b", "/a;b/c@d!$&'()*+,=:"} {
		req, err := http.NewRequestWithContext(t.Context(), "POST", srv.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(req, "operator.approve", []byte(body)); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			mu.Lock()
			t.Errorf("%s: %d %v", target, resp.StatusCode, got[len(got)-1])
			mu.Unlock()
		}
	}
}

func TestNewVerifierRefuses(t *testing.T) {
	st := memstore.New(nil)
	a, b := edKey(1), edKey(2)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	good := []operator.PublicKey{{KeyID: "a", Public: a.Public()}}
	tests := []struct {
		name  string
		st    store.Store
		keys  []operator.PublicKey
		base  string
		opts  *operator.VerifierOptions
		error string
	}{
		{"nil store", nil, good, testBase, nil, "no store"},
		{"no keys", st, nil, testBase, nil, "no operator keys"},
		{"empty kid", st, []operator.PublicKey{{KeyID: "", Public: a.Public()}}, testBase, nil, "kid must be"},
		{"kid with space", st, []operator.PublicKey{{KeyID: "a b", Public: a.Public()}}, testBase, nil, "kid must be"},
		{"duplicate kid", st, []operator.PublicKey{{KeyID: "a", Public: a.Public()}, {KeyID: "a", Public: b.Public()}}, testBase, nil, "given twice"},
		{"one key, two kids", st, []operator.PublicKey{{KeyID: "a", Public: a.Public()}, {KeyID: "b", Public: a.Public()}}, testBase, nil, "same key"},
		{"RSA", st, []operator.PublicKey{{KeyID: "a", Public: rsaKey.Public()}}, testBase, nil, "Ed25519 or P-256"},
		{"private key", st, []operator.PublicKey{{KeyID: "a", Public: a}}, testBase, nil, "Ed25519 or P-256"},
		{"relative base", st, good, "/api", nil, "base URL"},
		{"ftp base", st, good, "ftp://example.com", nil, "base URL"},
		{"base with query", st, good, "https://example.com/?a=1", nil, "base URL"},
		{"base with fragment", st, good, "https://example.com/#x", nil, "base URL"},
		{"base with user", st, good, "https://u:p@example.com", nil, "base URL"},
		{"window too short", st, good, testBase, &operator.VerifierOptions{Window: time.Millisecond}, "shorter than one second"},
		{"negative window", st, good, testBase, &operator.VerifierOptions{Window: -time.Second}, "shorter than one second"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := operator.NewVerifier(tt.st, tt.keys, tt.base, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.error) || !strings.HasPrefix(err.Error(), "operator: ") {
				t.Errorf("NewVerifier = %v, %v; want an error with %q", v, err, tt.error)
			}
		})
	}
}

func TestNewSignerRefuses(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		key   crypto.Signer
		kid   string
		base  string
		error string
	}{
		{"no key", nil, "k", testBase, "no key"},
		{"RSA", rsaKey, "k", testBase, "Ed25519 or P-256"},
		{"empty kid", edKey(1), "", testBase, "key id"},
		{"long kid", edKey(1), strings.Repeat("k", 129), testBase, "key id"},
		{"bad base", edKey(1), "k", "example.com", "base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := operator.NewSigner(tt.key, tt.kid, tt.base, nil)
			if err == nil || !strings.Contains(err.Error(), tt.error) {
				t.Errorf("NewSigner = %v, %v; want an error with %q", s, err, tt.error)
			}
		})
	}

	s, err := operator.NewSigner(edKey(1), "k", testBase, &operator.SignerOptions{Rand: strings.NewReader("short")})
	if err != nil {
		t.Fatal(err)
	}
	if s.KeyID() != "k" {
		t.Errorf("KeyID = %q", s.KeyID())
	}
	r := httptestReq("POST", "/x")
	if err := s.Sign(r, "op", nil); err == nil || !strings.Contains(err.Error(), "nonce") {
		t.Errorf("Sign with an exhausted Rand: %v", err)
	}
	for _, op := range []string{"", "a\nb"} {
		if err := s.Sign(r, op, nil); err == nil {
			t.Errorf("Sign(op %q) accepted", op)
		}
	}
	if err := s.Sign(&http.Request{}, "op", nil); err == nil {
		t.Error("Sign without a URL accepted")
	}
	opaque := httptestReq("GET", "/x")
	opaque.URL.Opaque = "//other/x"
	if err := s.Sign(opaque, "op", nil); err == nil || !strings.Contains(err.Error(), "opaque") {
		t.Errorf("Sign(opaque URL) = %v", err)
	}
}

// TestSignFreshNonce: every Sign draws a new nonce and sets (not adds) the
// header.
func TestSignFreshNonce(t *testing.T) {
	s, err := operator.NewSigner(edKey(1), "k", testBase, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httptestReq("POST", "/x")
	seen := map[string]bool{}
	for range 20 {
		if err := s.Sign(r, "op", nil); err != nil {
			t.Fatal(err)
		}
		if n := len(r.Header.Values(operator.HeaderName)); n != 1 {
			t.Fatalf("%d header lines", n)
		}
		h, err := operator.ParseHeader(r.Header.Get(operator.HeaderName))
		if err != nil {
			t.Fatal(err)
		}
		if seen[h.Nonce] {
			t.Fatalf("nonce %s drawn twice", h.Nonce)
		}
		seen[h.Nonce] = true
	}
	// A request built by hand, without a Header map.
	if err := s.Sign(&http.Request{Method: "GET", URL: r.URL}, "op", nil); err != nil {
		t.Errorf("Sign(nil Header): %v", err)
	}
}

func TestCodesMatchContract(t *testing.T) {
	if operator.CodeUnauthorized != contract.CodeOperatorUnauthorized ||
		operator.CodeRationaleTooShort != contract.CodeOperatorRationaleTooShort {
		t.Error("the codes differ from the contract's problem registry")
	}
}
