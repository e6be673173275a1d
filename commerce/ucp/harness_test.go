package ucp_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/commerce/fakemerchant"
	"github.com/countersign/countersign/commerce/ucp/ucptest"
)

// clock is a settable clock shared by the fake merchant and the client.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type exchange struct {
	method, path string
	header       http.Header
	reqBody      []byte
	status       int
	respBody     []byte
}

// recorder keeps every exchange between the client and the merchant.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	ex   []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	e := exchange{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), reqBody: body}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		rb, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			err = rerr
			resp = nil
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(rb))
			e.status, e.respBody = resp.StatusCode, rb
		}
	}
	r.mu.Lock()
	r.ex = append(r.ex, e)
	r.mu.Unlock()
	return resp, err
}

type env struct {
	srv   *httptest.Server
	m     *fakemerchant.Merchant
	clock *clock
	rec   *recorder
	base  string
}

// newEnv serves a fake merchant speaking versions; every exchange is
// validated against the schemas when the test ends. wrap, when set, sits
// in front of the fake.
func newEnv(t *testing.T, fo fakemerchant.Options, wrap func(http.Handler) http.Handler, versions ...string) *env {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	e := &env{srv: srv, clock: &clock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}, base: "http://" + srv.Listener.Addr().String()}
	fo.BaseURL, fo.Now = e.base, e.clock.Now
	e.m = fakemerchant.New(&fo)
	var h http.Handler = e.m.UCPHandler(versions...)
	if wrap != nil {
		h = wrap(h)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	e.rec = &recorder{next: srv.Client().Transport}
	sch := ucptest.New(t)
	t.Cleanup(func() { checkExchanges(t, sch, e.rec, wrap == nil) })
	return e
}

func (e *env) client() *http.Client { return &http.Client{Transport: e.rec} }

var (
	pathRE = regexp.MustCompile(`^/ucp/(\d{4}-\d{2}-\d{2})/checkout-sessions(?:/([^/]+))?(/complete|/cancel)?$`)
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// checkExchanges validates every request the client sent, and (when
// responses is set, i.e. nothing tampered with them) every answer the
// fake gave, against the version's schemas.
func checkExchanges(t *testing.T, sch *ucptest.Schemas, rec *recorder, responses bool) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, e := range rec.ex {
		switch {
		case e.path == "/.well-known/ucp" || strings.HasSuffix(e.path, "/profile"):
			if e.status == 200 && responses {
				var p struct {
					UCP struct {
						Version string `json:"version"`
					} `json:"ucp"`
				}
				_ = json.Unmarshal(e.respBody, &p)
				if err := sch.Profile(t, p.UCP.Version, e.respBody); err != nil {
					t.Errorf("profile %s: %v\n%s", e.path, err, ucptest.Pretty(e.respBody))
				}
			}
		case e.path == "/ucp/tokenize":
			if err := sch.Tokenize(t, true, e.reqBody); err != nil {
				t.Errorf("tokenize request: %v\n%s", err, ucptest.Pretty(e.reqBody))
			}
			if e.status == 200 && responses {
				if err := sch.Tokenize(t, false, e.respBody); err != nil {
					t.Errorf("tokenize answer: %v\n%s", err, ucptest.Pretty(e.respBody))
				}
			}
		default:
			m := pathRE.FindStringSubmatch(e.path)
			if m == nil {
				t.Errorf("unexpected request %s %s", e.method, e.path)
				continue
			}
			version, id, tail := m[1], m[2], m[3]
			op := map[string]string{"POST": ucptest.Create, "GET": ucptest.Get, "PUT": ucptest.Update}[e.method]
			switch tail {
			case "/complete":
				op = ucptest.Complete
			case "/cancel":
				op = ucptest.Cancel
			}
			if (op == ucptest.Create) != (id == "") {
				t.Errorf("unexpected request %s %s", e.method, e.path)
			}
			if !strings.HasPrefix(e.header.Get("UCP-Agent"), `profile="`) || !uuidRE.MatchString(e.header.Get("Request-Id")) {
				t.Errorf("%s %s: missing UCP-Agent or Request-Id: %v", e.method, e.path, e.header)
			}
			if op != ucptest.Get && !uuidRE.MatchString(e.header.Get("Idempotency-Key")) {
				t.Errorf("%s %s: Idempotency-Key %q is not a UUID", e.method, e.path, e.header.Get("Idempotency-Key"))
			}
			switch op {
			case ucptest.Create, ucptest.Update, ucptest.Complete:
				if err := sch.Request(t, version, op, e.reqBody); err != nil {
					t.Errorf("%s request (%s): %v\n%s", op, version, err, ucptest.Pretty(e.reqBody))
				}
			default:
				if len(e.reqBody) != 0 {
					t.Errorf("%s request (%s) has a body", op, version)
				}
			}
			if responses && (e.status == 200 || e.status == 201) {
				if err := sch.Response(t, version, op, e.respBody); err != nil {
					t.Errorf("%s answer (%s): %v\n%s", op, version, err, ucptest.Pretty(e.respBody))
				}
			}
		}
	}
}
