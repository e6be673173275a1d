package ucp

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

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
// accepts it too (ours is never looser than the schema).
func FuzzDecodeCheckout(f *testing.F) {
	sch := fuzzSchemas(f)
	f.Add(uint8(0), []byte(`{}`))
	f.Fuzz(func(t *testing.T, sel uint8, raw []byte) {
		version := Versions()[int(sel)%2]
		d, err := decodeCheckout(version, raw)
		if err != nil {
			return
		}
		if sch != nil {
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
		if sch != nil && (p.Version == V20260111 || p.Version == V20260408) {
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
		Capabilities: nil, PaymentHandlers: nil, URL: fmt.Sprint(len(caps), len(hs), caps, hs)}
}

// TestFuzzSeeds checks the seed corpus decodes, and with -update-seeds
// rewrites it from the fake merchant's answers.
func TestFuzzSeeds(t *testing.T) {
	if *updateSeeds {
		writeSeeds(t)
	}
	for _, name := range []string{"FuzzDecodeCheckout", "FuzzDiscoverProfile"} {
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
}
