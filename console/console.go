// Package console serves the operator console: a page an operator opens in
// a browser to judge and decide held payments, read and check the record,
// refund, flip the kill switch, reset the breaker and manage webhook
// endpoints.
//
// The page is static (HTML, CSS and three JavaScript modules, embedded in
// the binary) and holds no secret. The operator imports a private JWK into
// the page, which turns it into a non-extractable WebCrypto key and signs
// every request's Svc-Operator header itself, byte for byte as the Go
// signer does (package operator): the server sees signatures only, and
// the console's requests are the operator API's, authorised exactly as the
// CLI's. Entries of the record are checked in the page against the signed
// checkpoint with the record's verifier key.
//
// Since a page that signs with the operator's key is only as safe as the
// scripts it runs, every answer carries a Content-Security-Policy that
// allows scripts, styles and connections from this origin only, no
// inline script or style, no framing, and no form submission; the page
// loads nothing from any other host.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// CSP is the Content-Security-Policy of every answer.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Config is what the page needs to know of the deployment.
type Config struct {
	// BaseURL is the server's public base URL: what operator signatures
	// cover (the servers URL of /openapi.json). Required.
	BaseURL string
	// RecordKey is the record's note verifier key (the line of
	// record.pub), which the page checks entries with. Required.
	RecordKey string
	// Sandbox is shown in the page's header.
	Sandbox bool
}

// pageConfig is config.json.
type pageConfig struct {
	BaseURL   string `json:"baseURL"`
	RecordKey string `json:"recordKey"`
	Sandbox   bool   `json:"sandbox"`
}

// Beside routes /console and every path under Prefix to page (a
// Handler), and every other path to api, untouched: a path test rather
// than a ServeMux, whose path cleaning would redirect API requests the
// API's own router answers.
func Beside(page, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == strings.TrimSuffix(Prefix, "/") || strings.HasPrefix(p, Prefix) {
			page.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

type handler struct {
	files  map[string]file
	config []byte
}

type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler returns the console's handler. It answers GET and HEAD for
// /console (redirected to /console/), /console/ and the page's files; it
// is meant to be routed every path under [Prefix] and /console itself.
func Handler(cfg Config) (http.Handler, error) {
	u, err := url.Parse(cfg.BaseURL)
	if cfg.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("console: base URL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	if _, err := note.NewVerifier(cfg.RecordKey); err != nil {
		return nil, fmt.Errorf("console: the record verifier key: %w", err)
	}
	conf, err := json.Marshal(pageConfig{BaseURL: strings.TrimRight(cfg.BaseURL, "/"), RecordKey: cfg.RecordKey, Sandbox: cfg.Sandbox})
	if err != nil {
		return nil, err
	}
	h := &handler{files: map[string]file{}, config: conf}
	err = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files[strings.TrimPrefix(p, "assets/")] = file{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console: embedded assets: %w", err)
	}
	return h, nil
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return "application/octet-stream"
}

// modTime is the time every file is served as modified: the assets are
// compiled in, so the binary's files never change under a running server.
var modTime = time.Unix(0, 0)

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	// Always revalidated: a page that signs must not run a stale script.
	hd.Set("Cache-Control", "no-cache")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "the console's files are read with GET", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		// Relative, so that it stays right behind a proxy that strips
		// a prefix (http.Redirect would make it absolute).
		hd.Set("Location", "console/")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	if name == "config.json" {
		hd.Set("Content-Type", "application/json")
		http.ServeContent(w, r, name, modTime, bytes.NewReader(h.config))
		return
	}
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hd.Set("Content-Type", f.ctype)
	hd.Set("ETag", f.etag)
	http.ServeContent(w, r, name, modTime, bytes.NewReader(f.body))
}
