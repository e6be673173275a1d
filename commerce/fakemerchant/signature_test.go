package fakemerchant_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/yaronf/httpsign"

	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp"
)

// verify checks an answer's Content-Digest and signature "sig1" with
// httpsign, by key.
func verify(t *testing.T, key fakemerchant.JWK, resp *http.Response, body []byte) (digestErr, sigErr error) {
	t.Helper()
	pub, err := ucp.SigningKey(key).PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	rc := io.NopCloser(bytes.NewReader(body))
	digestErr = httpsign.ValidateContentDigestHeader(resp.Header.Values("Content-Digest"), &rc, []string{httpsign.DigestSha256})
	cfg := httpsign.NewVerifyConfig().SetVerifyCreated(false).SetKeyID(key.Kid)
	fields := httpsign.Headers("@status", "content-digest", "content-type")
	newVerifier := httpsign.NewP256Verifier
	if key.Crv == "P-384" {
		newVerifier = httpsign.NewP384Verifier
	}
	v, err := newVerifier(*pub, cfg, fields)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return digestErr, httpsign.VerifyResponse("sig1", *v, resp, nil)
}

func TestUCPSignsAnswers(t *testing.T) {
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, o := range map[string]fakemerchant.Options{"P-256 (default)": {}, "P-384": {SigningKey: p384, SigningKeyID: "k384"}} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(nil)
			o.BaseURL = "http://" + srv.Listener.Addr().String()
			m := fakemerchant.New(&o)
			srv.Config.Handler = m.UCPHandler()
			srv.Start()
			defer srv.Close()
			key := m.SigningJWK()
			if (name == "P-384") != (key.Crv == "P-384" && key.Alg == "ES384" && key.Kid == "k384") || key.Kty != "EC" || key.Use != "sig" {
				t.Fatalf("JWK %+v", key)
			}
			send := func(method, path, body string, header ...string) (*http.Response, []byte) {
				req, _ := http.NewRequest(method, o.BaseURL+path, strings.NewReader(body))
				req.Header.Set("UCP-Agent", agent)
				req.Header.Set("Request-Id", rid)
				req.Header.Set("Idempotency-Key", "0b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp, b
			}
			// The 2026-04-08 profile publishes the key; 2026-01-11's does not.
			_, b := send("GET", "/ucp/2026-04-08/profile", "")
			var prof struct {
				SigningKeys []fakemerchant.JWK `json:"signing_keys"`
			}
			if err := json.Unmarshal(b, &prof); err != nil || len(prof.SigningKeys) != 1 || prof.SigningKeys[0] != key {
				t.Fatalf("profile signing_keys %+v %v", prof.SigningKeys, err)
			}
			if _, b := send("GET", "/ucp/2026-01-11/profile", ""); bytes.Contains(b, []byte("signing_keys")) {
				t.Fatalf("2026-01-11 profile publishes signing keys: %s", b)
			}

			ep := "/ucp/2026-04-08/checkout-sessions"
			resp, b := send("POST", ep, createBody(fakemerchant.UCP20260408, "sku-mug"))
			if de, se := verify(t, key, resp, b); resp.StatusCode != 201 || de != nil || se != nil ||
				strings.Contains(resp.Header.Get("Signature-Input"), "alg=") {
				t.Fatalf("create: %d digest %v signature %v input %s", resp.StatusCode, de, se, resp.Header.Get("Signature-Input"))
			}
			id := field(t, b, "id")
			for _, p := range []string{ep + "/" + id, ep + "/cs_nope"} {
				resp, b := send("GET", p, "")
				if de, se := verify(t, key, resp, b); de != nil || se != nil {
					t.Fatalf("GET %s (%d): digest %v signature %v", p, resp.StatusCode, de, se)
				}
			}
			// Errors of the binding's headers are signed too.
			resp, b = send("POST", ep, createBody(fakemerchant.UCP20260408, "sku-mug"), "Request-Id", "nope")
			if de, se := verify(t, key, resp, b); resp.StatusCode != 400 || de != nil || se != nil {
				t.Fatalf("400: digest %v signature %v", de, se)
			}
			// bad-signature: by SKU, for every answer about the session, or
			// by header for one answer; the digest matches, the signature
			// does not.
			resp, b = send("POST", ep, createBody(fakemerchant.UCP20260408, "sku-badsig"), "Idempotency-Key", "1b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			bad := field(t, b, "id")
			if de, se := verify(t, key, resp, b); de != nil || se == nil {
				t.Fatalf("sku-badsig create: digest %v signature %v", de, se)
			}
			resp, b = send("GET", ep+"/"+bad, "")
			if de, se := verify(t, key, resp, b); de != nil || se == nil || field(t, b, "status") != "ready_for_complete" {
				t.Fatalf("sku-badsig get: digest %v signature %v", de, se)
			}
			resp, b = send("GET", ep+"/"+id, "", "X-Fake-Scenario", "bad-signature")
			if de, se := verify(t, key, resp, b); de != nil || se == nil {
				t.Fatalf("X-Fake-Scenario: bad-signature: digest %v signature %v", de, se)
			}
			// 2026-01-11 answers are not signed.
			resp, _ = send("POST", "/ucp/2026-01-11/checkout-sessions", createBody(fakemerchant.UCP20260111, "sku-mug"), "Idempotency-Key", "2b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			if resp.StatusCode != 201 || resp.Header.Get("Signature") != "" || resp.Header.Get("Content-Digest") != "" {
				t.Fatalf("2026-01-11 create: %d %v", resp.StatusCode, resp.Header)
			}
		})
	}
}
