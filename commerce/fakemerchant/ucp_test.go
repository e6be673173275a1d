package fakemerchant_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp/ucptest"
)

type ucpServer struct {
	t    *testing.T
	base string
	sch  *ucptest.Schemas
}

func newUCPServer(t *testing.T, versions ...string) *ucpServer {
	return newUCPServerWith(t, fakemerchant.Options{}, versions...)
}

func newUCPServerWith(t *testing.T, o fakemerchant.Options, versions ...string) *ucpServer {
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	o.BaseURL, o.SlowDelay = base, time.Millisecond
	m := fakemerchant.New(&o)
	srv.Config.Handler = m.UCPHandler(versions...)
	srv.Start()
	t.Cleanup(srv.Close)
	return &ucpServer{t: t, base: base, sch: ucptest.New(t)}
}

const (
	agent = `profile="https://agent.test/.well-known/ucp"`
	rid   = "6f1c2b7e-3a4d-4e5f-8a9b-0c1d2e3f4a5b"
)

// do sends a request; headers: "k", "v" pairs replacing the defaults.
func (s *ucpServer) do(method, path, body string, headers ...string) (int, []byte) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("UCP-Agent", agent)
	req.Header.Set("Request-Id", rid)
	req.Header.Set("Idempotency-Key", "0b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func field(t *testing.T, b []byte, k string) string {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	s, _ := m[k].(string)
	return s
}

func createBody(version, sku string) string {
	if version == fakemerchant.UCP20260111 {
		return `{"line_items":[{"item":{"id":"` + sku + `"},"quantity":1}],"currency":"USD","payment":{}}`
	}
	return `{"line_items":[{"item":{"id":"` + sku + `"},"quantity":1}],"context":{"currency":"USD"}}`
}

func TestUCPProfiles(t *testing.T) {
	for _, tc := range []struct {
		offered []string
		newest  string
	}{
		{nil, fakemerchant.UCP20260408},
		{[]string{fakemerchant.UCP20260111}, fakemerchant.UCP20260111},
		{[]string{fakemerchant.UCP20260408}, fakemerchant.UCP20260408},
	} {
		s := newUCPServer(t, tc.offered...)
		code, b := s.do("GET", "/.well-known/ucp", "")
		if code != 200 {
			t.Fatalf("GET /.well-known/ucp = %d", code)
		}
		if err := s.sch.Profile(t, tc.newest, b); err != nil {
			t.Errorf("profile %s: %v\n%s", tc.newest, err, ucptest.Pretty(b))
		}
		var p struct {
			UCP struct {
				Version           string            `json:"version"`
				SupportedVersions map[string]string `json:"supported_versions"`
			} `json:"ucp"`
		}
		_ = json.Unmarshal(b, &p)
		if p.UCP.Version != tc.newest {
			t.Errorf("profile version %s, want %s", p.UCP.Version, tc.newest)
		}
		for v, u := range p.UCP.SupportedVersions {
			code, b := s.do("GET", strings.TrimPrefix(u, s.base), "")
			if code != 200 {
				t.Fatalf("GET %s = %d", u, code)
			}
			if err := s.sch.Profile(t, v, b); err != nil {
				t.Errorf("profile %s: %v", v, err)
			}
		}
	}
}

func TestUCPOperations(t *testing.T) {
	for _, v := range []string{fakemerchant.UCP20260111, fakemerchant.UCP20260408} {
		t.Run(v, func(t *testing.T) {
			s := newUCPServer(t)
			ep := "/ucp/" + v + "/checkout-sessions"
			check := func(op string, code int, b []byte, want int) {
				t.Helper()
				if code != want {
					t.Fatalf("%s = %d, want %d: %s", op, code, want, b)
				}
				if err := s.sch.Response(t, v, op, b); err != nil {
					t.Fatalf("%s answer: %v\n%s", op, err, ucptest.Pretty(b))
				}
			}
			body := createBody(v, "sku-mug")
			if err := s.sch.Request(t, v, ucptest.Create, []byte(body)); err != nil {
				t.Fatalf("our create body: %v", err)
			}
			code, b := s.do("POST", ep, body)
			check(ucptest.Create, code, b, 201)
			id := field(t, b, "id")
			if field(t, b, "status") != "ready_for_complete" {
				t.Fatalf("status %s", b)
			}
			// Same Idempotency-Key: the same session.
			if _, again := s.do("POST", ep, body); field(t, again, "id") != id {
				t.Fatalf("replayed create made another session: %s", again)
			}
			code, b = s.do("GET", ep+"/"+id, "")
			check(ucptest.Get, code, b, 200)

			upd := `{"line_items":[{"item":{"id":"sku-book"},"quantity":2}],"buyer":{"email":"a@b.example"}}`
			if v == fakemerchant.UCP20260111 {
				upd = `{"id":"` + id + `","line_items":[{"item":{"id":"sku-book"},"quantity":2}],"currency":"USD","payment":{},"buyer":{"email":"a@b.example"}}`
			}
			if err := s.sch.Request(t, v, ucptest.Update, []byte(upd)); err != nil {
				t.Fatalf("our update body: %v", err)
			}
			code, b = s.do("PUT", ep+"/"+id, upd, "Idempotency-Key", "1b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			check(ucptest.Update, code, b, 200)

			tok := `{"credential":{"type":"spend_allowance","amount":100000,"currency":"USD"},"binding":{"checkout_id":"` + id + `"}}`
			if err := s.sch.Tokenize(t, true, []byte(tok)); err != nil {
				t.Fatalf("our tokenize body: %v", err)
			}
			code, b = s.do("POST", "/ucp/tokenize", tok)
			if code != 200 || s.sch.Tokenize(t, false, b) != nil {
				t.Fatalf("tokenize = %d %s", code, b)
			}
			token := field(t, b, "token")
			comp := `{"payment":{"instruments":[{"id":"pi_1","handler_id":"allowance","type":"card","selected":true,"credential":{"type":"token","token":"` + token + `"}}]}}`
			if v == fakemerchant.UCP20260111 {
				comp = `{"payment_data":{"id":"pi_1","handler_id":"allowance","type":"card","brand":"x","last_digits":"1234","credential":{"type":"token","token":"` + token + `"}}}`
			}
			if err := s.sch.Request(t, v, ucptest.Complete, []byte(comp)); err != nil {
				t.Fatalf("our complete body: %v", err)
			}
			code, b = s.do("POST", ep+"/"+id+"/complete", comp, "Idempotency-Key", "2b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			check(ucptest.Complete, code, b, 200)
			if field(t, b, "status") != "completed" {
				t.Fatalf("complete: %s", b)
			}

			code, b = s.do("POST", ep, createBody(v, "sku-book"), "Idempotency-Key", "3b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			check(ucptest.Create, code, b, 201)
			code, b = s.do("POST", ep+"/"+field(t, b, "id")+"/cancel", "", "Idempotency-Key", "4b9f8e7d-6c5b-4a39-8271-605f4e3d2c1b")
			check(ucptest.Cancel, code, b, 200)
			if field(t, b, "status") != "canceled" {
				t.Fatalf("cancel: %s", b)
			}

			// Every scenario renders a valid session.
			for i, it := range fakemerchant.Catalogue {
				key := "5b9f8e7d-6c5b-4a39-8271-60" + strings.Repeat("0", 8) + string(rune('a'+i%6)) + string(rune('a'+i/6))
				code, b := s.do("POST", ep, createBody(v, it.SKU), "Idempotency-Key", key)
				check(ucptest.Create, code, b, 201)
			}
		})
	}
}

func TestUCPScenarioHeaderAndErrors(t *testing.T) {
	for _, v := range []string{fakemerchant.UCP20260111, fakemerchant.UCP20260408} {
		t.Run(v, func(t *testing.T) {
			s := newUCPServer(t)
			ep := "/ucp/" + v + "/checkout-sessions"
			code, b := s.do("POST", ep, createBody(v, "sku-mug"), "X-Fake-Scenario", "requires_escalation")
			if code != 201 || field(t, b, "status") != "requires_escalation" || field(t, b, "continue_url") == "" {
				t.Fatalf("X-Fake-Scenario ignored: %d %s", code, b)
			}
			if err := s.sch.Response(t, v, ucptest.Create, b); err != nil {
				t.Fatal(err)
			}
			for _, h := range [][]string{{"UCP-Agent", ""}, {"Request-Id", "nope"}, {"Idempotency-Key", ""}} {
				if code, _ := s.do("POST", ep, createBody(v, "sku-mug"), h...); code != 400 {
					t.Errorf("without a valid %s: %d, want 400", h[0], code)
				}
			}
			code, b = s.do("GET", ep+"/cs_nope", "")
			if code != 404 {
				t.Fatalf("unknown session: %d %s", code, b)
			}
			if code, _ := s.do("GET", "/ucp/2025-01-01/checkout-sessions/x", ""); code != 404 {
				t.Fatalf("unknown version: %d", code)
			}
		})
	}
}

// TestUCPCredentialShapes: UCPPaymentCredential declares a handler that
// takes a token credential at complete (no tokenization endpoint) and one
// with an undated version it never accepts; sku-never-ready never reports
// ready, without a message, and completes all the same (as the public
// sample merchant does); sku-needs-phone stays incomplete with an error
// message and does not complete. The rows are completions of one session
// each.
func TestUCPCredentialShapes(t *testing.T) {
	for _, v := range []string{fakemerchant.UCP20260111, fakemerchant.UCP20260408} {
		t.Run(v, func(t *testing.T) {
			s := newUCPServerWith(t, fakemerchant.Options{UCPPayment: fakemerchant.UCPPaymentCredential}, v)
			code, b := s.do("GET", "/ucp/"+v+"/profile", "")
			if code != 200 {
				t.Fatalf("profile = %d %s", code, b)
			}
			if err := s.sch.Profile(t, v, b); err == nil || !strings.Contains(string(b), `"version":"1.0"`) ||
				strings.Contains(string(b), "/ucp/tokenize") || !strings.Contains(string(b), `"`+fakemerchant.UCPWalletID+`"`) {
				t.Fatalf("profile (schema: %v):\n%s", err, b)
			}
			ep := "/ucp/" + v + "/checkout-sessions"
			instrument := func(handler, token string) string {
				if v == fakemerchant.UCP20260111 {
					return `{"payment_data":{"id":"pi_1","handler_id":"` + handler + `","type":"card","brand":"token","last_digits":"1234","credential":{"type":"token","token":"` + token + `"}}}`
				}
				return `{"payment":{"instruments":[{"id":"pi_1","handler_id":"` + handler + `","type":"card","selected":true,"credential":{"type":"token","token":"` + token + `"}}]}}`
			}
			for i, tc := range []struct {
				name, sku, handler, token string
				created, message          string // the created session's status and error code ("": no message)
				code                      int
				status                    string
			}{
				{"wallet token", "sku-mug", fakemerchant.UCPWalletID, fakemerchant.UCPWalletToken, "ready_for_complete", "", 200, "completed"},
				{"wallet decline", "sku-mug", fakemerchant.UCPWalletID, fakemerchant.UCPWalletDeclineToken, "ready_for_complete", "", 200, "ready_for_complete"},
				{"unknown token", "sku-mug", fakemerchant.UCPWalletID, "nope", "ready_for_complete", "", 200, "ready_for_complete"},
				{"unused handler", "sku-mug", fakemerchant.UCPUnusedHandlerID, fakemerchant.UCPWalletToken, "ready_for_complete", "", 400, ""},
				{"never ready", "sku-never-ready", fakemerchant.UCPWalletID, fakemerchant.UCPWalletToken, "incomplete", "", 200, "completed"},
				{"never ready, declined", "sku-never-ready", fakemerchant.UCPWalletID, fakemerchant.UCPWalletDeclineToken, "incomplete", "", 200, "incomplete"},
				{"missing information", "sku-needs-phone", fakemerchant.UCPWalletID, fakemerchant.UCPWalletToken, "incomplete", "missing", 200, "incomplete"},
				{"out of stock", "sku-soldout", fakemerchant.UCPWalletID, fakemerchant.UCPWalletToken, "incomplete", "out_of_stock", 200, "incomplete"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := func(n int) string { return fmt.Sprintf("%08d-6c5b-4a39-8271-605f4e3d2c1b", 10*i+n) }
					code, b := s.do("POST", ep, createBody(v, tc.sku), "Idempotency-Key", key(1))
					if code != 201 || s.sch.Response(t, v, ucptest.Create, b) == nil {
						// The answers carry the profile's handlers, outside the schema too.
						t.Fatalf("create = %d %s", code, b)
					}
					if got := errorCodes(t, b); field(t, b, "status") != tc.created || got != tc.message {
						t.Fatalf("created session: status %q, error codes %q; want %q, %q: %s", field(t, b, "status"), got, tc.created, tc.message, b)
					}
					body := instrument(tc.handler, tc.token)
					if err := s.sch.Request(t, v, ucptest.Complete, []byte(body)); err != nil {
						t.Fatalf("complete body: %v", err)
					}
					code, b = s.do("POST", ep+"/"+field(t, b, "id")+"/complete", body, "Idempotency-Key", key(2))
					if code != tc.code || (tc.status != "" && field(t, b, "status") != tc.status) {
						t.Fatalf("complete = %d %s, want %d %s", code, b, tc.code, tc.status)
					}
					if tc.status == "incomplete" && strings.Contains(string(b), `"order"`) {
						t.Fatalf("a refused completion placed an order: %s", b)
					}
				})
			}
		})
	}
}

// errorCodes lists the codes of a session's error messages, joined by
// ",".
func errorCodes(t *testing.T, b []byte) string {
	t.Helper()
	var m struct {
		Messages []struct {
			Type string `json:"type"`
			Code string `json:"code"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	var codes []string
	for _, msg := range m.Messages {
		if msg.Type == "error" {
			codes = append(codes, msg.Code)
		}
	}
	return strings.Join(codes, ",")
}
