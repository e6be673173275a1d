package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAuditVerifyURL runs "audit verify --url" against a running server
// and against a proxy in front of it that changes one entry of the pages
// it serves.
func TestAuditVerifyURL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "countersign-data")
	h, base, _ := doctorServe(t, dir)
	pub := filepath.Join(dir, recordPubFile)
	cred := filepath.Join(dir, sandboxDirName, sandboxCredential)

	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if r.URL.Path == "/audit" {
			body = bytes.Replace(body, []byte(`"type":"system.started"`), []byte(`"type":"system.stopped"`), 1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	defer lying.Close()

	verify := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"audit", "verify"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := verify("--url", base, "--key", pub, "--credential", cred, "--signatures")
	if code != 0 || !regexp.MustCompile(`^ok: \d+ entries verified, depth full \(canonical form, signatures\), root [A-Za-z0-9+/]{43}=, `).MatchString(out) {
		t.Fatalf("audit verify --url: exit %d: %s%s", code, out, errOut)
	}
	code, out, errOut = verify("--url", lying.URL, "--key", pub, "--credential", cred)
	if code == 0 || !strings.Contains(errOut, "record tampered at seq ") {
		t.Fatalf("audit verify --url against a lying server: exit %d: %s%s", code, out, errOut)
	}
	t.Log(strings.TrimSpace(errOut))
	code, out, errOut = verify("--url", base, "--key", pub)
	if code == 0 || !strings.Contains(errOut, "/audit/checkpoint: 401 ") {
		t.Fatalf("audit verify --url without a credential: exit %d: %s%s", code, out, errOut)
	}
}
