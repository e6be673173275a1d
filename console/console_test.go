package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign/console"
)

const recordKey = "countersign.local/record/5fc35ea3+cdf07af3+Ab2RUZxcGGZSz2bbOFgvhYel8qwjMYREdiPWDK3aER4U"

func newHandler(t *testing.T) http.Handler {
	t.Helper()
	h, err := console.Handler(console.Config{BaseURL: "https://pay.example.com/", RecordKey: recordKey})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestServe(t *testing.T) {
	h := newHandler(t)
	tests := []struct {
		method, path string
		status       int
		ctype, body  string // body: a substring
		location     string
	}{
		{"GET", "/console", http.StatusMovedPermanently, "", "", "console/"},
		{"GET", "/console/", 200, "text/html; charset=utf-8", `<script type="module" src="app.js">`, ""},
		{"HEAD", "/console/", 200, "text/html; charset=utf-8", "", ""},
		{"GET", "/console/index.html", 200, "text/html; charset=utf-8", "operator console", ""},
		{"GET", "/console/app.js", 200, "text/javascript; charset=utf-8", "import { importOperatorKey", ""},
		{"GET", "/console/sign.js", 200, "text/javascript; charset=utf-8", "svc-operator-v1", ""},
		{"GET", "/console/verify.js", 200, "text/javascript; charset=utf-8", "rootFromInclusion", ""},
		{"GET", "/console/style.css", 200, "text/css; charset=utf-8", ":focus-visible", ""},
		{"GET", "/console/config.json", 200, "application/json",
			`{"baseURL":"https://pay.example.com","recordKey":"` + recordKey + `","sandbox":false}`, ""},
		{"GET", "/console/nope.js", 404, "", "", ""},
		{"GET", "/console/../operator/approvals", 404, "", "", ""},
		{"POST", "/console/", 405, "", "", ""},
		{"GET", "/elsewhere", 404, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			res := rec.Result()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, b)
			}
			// Every answer, errors included, carries the policy.
			if got := res.Header.Get("Content-Security-Policy"); got != console.CSP {
				t.Errorf("CSP %q", got)
			}
			for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
				if res.Header.Get(k) != v {
					t.Errorf("%s: %q, want %q", k, res.Header.Get(k), v)
				}
			}
			if tt.ctype != "" && res.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type %q, want %q", res.Header.Get("Content-Type"), tt.ctype)
			}
			if tt.body != "" && !strings.Contains(string(b), tt.body) {
				t.Errorf("body lacks %q:\n%.300s", tt.body, b)
			}
			if tt.location != "" && res.Header.Get("Location") != tt.location {
				t.Errorf("Location %q, want %q", res.Header.Get("Location"), tt.location)
			}
		})
	}
}

// TestPolicy pins what the CSP forbids: inline code, other origins,
// framing and form submission.
func TestPolicy(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
		"frame-ancestors 'none'", "form-action 'none'", "base-uri 'none'"} {
		if !strings.Contains(console.CSP, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
	if strings.Contains(console.CSP, "unsafe") {
		t.Errorf("CSP allows something unsafe: %s", console.CSP)
	}
}

// TestNoExternalLoads checks the page's files: nothing from another
// origin, no inline script or style the policy would refuse anyway, and
// no HTML built from strings (text from the server is set as text).
func TestNoExternalLoads(t *testing.T) {
	h := newHandler(t)
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import`)
	for _, name := range []string{"index.html", "app.js", "sign.js", "verify.js", "style.css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/"+name, nil))
		body := rec.Body.String()
		if m := external.FindString(body); m != "" {
			t.Errorf("%s loads from another origin: %q", name, m)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", " style=", "<style", "onclick="} {
			if strings.Contains(body, bad) {
				t.Errorf("%s uses %q", name, bad)
			}
		}
		if name == "index.html" && regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]`).MatchString(body) {
			t.Errorf("index.html has an inline script")
		}
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []console.Config{
		{BaseURL: "", RecordKey: recordKey},
		{BaseURL: "ftp://x", RecordKey: recordKey},
		{BaseURL: "https://pay.example.com", RecordKey: ""},
		{BaseURL: "https://pay.example.com", RecordKey: "origin+zzzz+AAAA"},
	} {
		if _, err := console.Handler(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
