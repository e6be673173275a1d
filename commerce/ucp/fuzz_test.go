package ucp

import (
	"bytes"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/cart"
	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp/ucptest"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz seeds from the fake merchant")

// fuzzSchemas is the independent validator, when the schemas are present.
func fuzzSchemas(f *testing.F) *ucptest.Schemas {
	if _, err := os.Stat(filepath.Join("testdata", "conformance", "ucp")); err != nil {
		f.Log("no schema copy: fuzzing without the independent validator")
		return nil
	}
	return ucptest.New(f)
}

// FuzzDecodeCheckout: no input panics; an accepted answer re-encodes to
// one accepted again with the same content, and the independent validator
// accepts it too when we ignored nothing (ours is never looser than the
// schema about what the client uses; parts it never uses are tolerated
// and reported in Ignored).
func FuzzDecodeCheckout(f *testing.F) {
	sch := fuzzSchemas(f)
	f.Add(uint8(0), []byte(`{}`))
	f.Fuzz(func(t *testing.T, sel uint8, raw []byte) {
		version := Versions()[int(sel)%2]
		d, err := decodeCheckout(version, raw)
		if err != nil {
			return
		}
		if sch != nil && len(d.Ignored) == 0 {
			if err := sch.Response(t, version, ucptest.Get, raw); err != nil {
				t.Fatalf("we accept what the schema refuses: %v\n%s", err, raw)
			}
		}
		var again []byte
		if d.Checkout != nil {
			again, err = json.Marshal(d.Checkout)
		} else {
			again, err = json.Marshal(d.Error)
		}
		if err != nil {
			t.Fatal(err)
		}
		d2, err := decodeCheckout(version, again)
		if err != nil {
			t.Fatalf("re-encoded answer refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(canon(t, d), canon(t, d2)) {
			t.Fatalf("round trip changed the answer:\n%s\n%s", raw, again)
		}
	})
}

// canon compares decoded answers by their encoding (raw members may be
// re-indented).
func canon(t *testing.T, d decoded) any {
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	_ = json.Unmarshal(b, &v)
	return v
}

// FuzzDiscoverProfile: the same for discovery profiles.
func FuzzDiscoverProfile(f *testing.F) {
	sch := fuzzSchemas(f)
	f.Add([]byte(`{"ucp":{"version":"2026-04-08"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := decodeProfile(raw)
		if err != nil {
			return
		}
		if sch != nil && len(p.Ignored) == 0 && (p.Version == V20260111 || p.Version == V20260408) {
			if err := sch.Profile(t, p.Version, raw); err != nil {
				t.Fatalf("we accept what the schema refuses: %v\n%s", err, raw)
			}
		}
		doc, err := parseJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := decodeProfile(again)
		if err != nil {
			t.Fatalf("re-encoded profile refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(sortProfile(p), sortProfile(p2)) {
			t.Fatalf("round trip changed the profile: %+v vs %+v", p, p2)
		}
	})
}

// sortProfile orders what map iteration may have ordered differently.
func sortProfile(p Profile) Profile {
	key := func(s ...string) string { return strings.Join(s, "\x00") }
	caps := map[string]Capability{}
	for _, c := range p.Capabilities {
		caps[key(c.Name, c.Version)] = c
	}
	hs := map[string]PaymentHandler{}
	for _, h := range p.PaymentHandlers {
		hs[key(h.Name, h.ID, h.Version, h.TokenizeURL)] = h
	}
	return Profile{Version: p.Version, SupportedVersions: p.SupportedVersions, Endpoint: p.Endpoint,
		Capabilities: nil, PaymentHandlers: nil, SigningKeys: p.SigningKeys, Ignored: p.Ignored, URL: fmt.Sprint(len(caps), len(hs), caps, hs)}
}

// The keys of FuzzVerifyResponse: its seeds are answers the fake merchant
// signed with them.
func fuzzKeys(t testing.TB) (p256, p384 fakemerchant.Options, ring keyRing) {
	k256, k384 := testKey(t, elliptic.P256(), "fuzz p256"), testKey(t, elliptic.P384(), "fuzz p384")
	ring = profileRing([]SigningKey{jwkOf(t, "fuzz-p256", k256), jwkOf(t, "fuzz-p384", k384)}, slog.New(slog.DiscardHandler), "fuzz")
	return fakemerchant.Options{SigningKey: k256, SigningKeyID: "fuzz-p256"},
		fakemerchant.Options{SigningKey: k384, SigningKeyID: "fuzz-p384"}, ring
}

// FuzzVerifyResponse: no answer panics the verifier (httpsign included);
// every refusal matches ErrSignature and cart.ErrInvalidResponse; an
// unsigned answer passes exactly when no signature is required; a signed
// answer that passes stops passing when its status or body changes.
func FuzzVerifyResponse(f *testing.F) {
	_, _, ring := fuzzKeys(f)
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Add(false, 200, `sig1=("@status");keyid="fuzz-p256"`, `sig1=:AAAA:`, "", "", []byte(nil))
	f.Fuzz(func(t *testing.T, required bool, status int, sigInput, sig, digest, ctype string, body []byte) {
		h := http.Header{}
		for _, kv := range [][2]string{{"Signature-Input", sigInput}, {"Signature", sig}, {"Content-Digest", digest}, {"Content-Type", ctype}} {
			if kv[1] != "" {
				h[kv[0]] = strings.Split(kv[1], "\n")
			}
		}
		err := verifyResponse(ring, required, now, status, h, body)
		switch {
		case errors.Is(err, errVerifierPanic):
			t.Fatalf("the verifier panicked: %v", err)
		case err != nil:
			if !errors.Is(err, ErrSignature) || !errors.Is(err, cart.ErrInvalidResponse) {
				t.Fatalf("refusal %v does not match ErrSignature and ErrInvalidResponse", err)
			}
			return
		case sigInput == "" && sig == "":
			if required {
				t.Fatal("an unsigned answer passed though a signature is required")
			}
			return
		}
		if verifyResponse(ring, required, now, status+1, h, body) == nil {
			t.Fatalf("the answer still verifies with status %d instead of %d", status+1, status)
		}
		if verifyResponse(ring, required, now, status, h, append(slices.Clone(body), '.')) == nil {
			t.Fatal("the answer still verifies with one byte more")
		}
	})
}

// TestFuzzSeeds checks the seed corpus decodes, and with -update-seeds
// rewrites it from the fake merchant's answers.
func TestFuzzSeeds(t *testing.T) {
	if *updateSeeds {
		writeSeeds(t)
	}
	for _, name := range []string{"FuzzDecodeCheckout", "FuzzDiscoverProfile", "FuzzVerifyResponse"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", name, "*"))
		if len(files) < 4 {
			t.Errorf("%s: only %d seeds", name, len(files))
		}
	}
}

func writeSeeds(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	m := fakemerchant.New(&fakemerchant.Options{BaseURL: base})
	srv.Config.Handler = m.UCPHandler()
	srv.Start()
	defer srv.Close()
	get := func(method, path, body string) []byte {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("UCP-Agent", `profile="https://agent.test/.well-known/ucp"`)
		req.Header.Set("Request-Id", newUUID())
		req.Header.Set("Idempotency-Key", newUUID())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return b
	}
	write := func(name string, i int, args ...any) {
		var buf bytes.Buffer
		buf.WriteString("go test fuzz v1\n")
		for _, a := range args {
			switch x := a.(type) {
			case uint8:
				fmt.Fprintf(&buf, "byte(%q)\n", x)
			case []byte:
				fmt.Fprintf(&buf, "[]byte(%q)\n", x)
			case bool:
				fmt.Fprintf(&buf, "bool(%v)\n", x)
			case int:
				fmt.Fprintf(&buf, "int(%d)\n", x)
			case string:
				fmt.Fprintf(&buf, "string(%q)\n", x)
			}
		}
		dir := filepath.Join("testdata", "fuzz", name)
		_ = os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, p := range []string{"/.well-known/ucp", "/ucp/2026-01-11/profile", "/ucp/2026-04-08/profile"} {
		write("FuzzDiscoverProfile", n, get("GET", p, ""))
		n++
	}
	write("FuzzDiscoverProfile", n, []byte(`{"ucp":{"version":"2027-01-01","supported_versions":{"2026-04-08":"https://m.example/ucp/2026-04-08/profile"}}}`))
	n = 0
	for sel, v := range Versions() {
		for _, sku := range []string{"sku-mug", "sku-soldout", "sku-3ds", "sku-nope"} {
			body := fmt.Sprintf(`{"line_items":[{"item":{"id":%q},"quantity":1}],"currency":"USD","payment":{}}`, sku)
			write("FuzzDecodeCheckout", n, uint8(sel), get("POST", "/ucp/"+v+"/checkout-sessions", body))
			n++
		}
	}
	writeVerifySeeds(t, write)
}

// writeVerifySeeds records answers of fake merchants signing with the fuzz
// keys: signed properly (P-256, P-384), badly, errors, and unsigned.
func writeVerifySeeds(t *testing.T, write func(name string, i int, args ...any)) {
	o256, o384, _ := fuzzKeys(t)
	n := 0
	seed := func(required bool, resp *http.Response, body []byte) {
		h := resp.Header
		write("FuzzVerifyResponse", n, required, resp.StatusCode, strings.Join(h.Values("Signature-Input"), "\n"),
			strings.Join(h.Values("Signature"), "\n"), strings.Join(h.Values("Content-Digest"), "\n"), h.Get("Content-Type"), body)
		n++
	}
	for _, o := range []fakemerchant.Options{o256, o384} {
		srv := httptest.NewUnstartedServer(nil)
		o.BaseURL = "http://" + srv.Listener.Addr().String()
		srv.Config.Handler = fakemerchant.New(&o).UCPHandler()
		srv.Start()
		do := func(method, path, body string) (*http.Response, []byte) {
			req, _ := http.NewRequest(method, o.BaseURL+path, strings.NewReader(body))
			req.Header.Set("UCP-Agent", `profile="https://agent.test/.well-known/ucp"`)
			req.Header.Set("Request-Id", newUUID())
			req.Header.Set("Idempotency-Key", newUUID())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp, b
		}
		ep := "/ucp/2026-04-08/checkout-sessions"
		for _, sku := range []string{"sku-mug", "sku-badsig"} {
			resp, b := do("POST", ep, fmt.Sprintf(`{"line_items":[{"item":{"id":%q},"quantity":1}]}`, sku))
			seed(o.SigningKeyID == "fuzz-p256", resp, b)
		}
		resp, b := do("GET", ep+"/cs_nope", "")
		seed(true, resp, b)
		srv.Close()
	}
	seed(false, &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}, []byte(`{}`))
}
