package fetch

import (
	"encoding/json"
	"testing"
)

// FuzzRequestCheck feeds untrusted request bodies, as the HTTP surface
// decodes them, to the request checks: they never panic, and a request
// they accept has a URL and headers that can be sent as they are and a
// body that matches its digest.
func FuzzRequestCheck(f *testing.F) {
	for _, s := range []string{
		`{"method":"GET","url":"https://data.example/r","maxAmount":{"minor":5,"currency":"USD"},"terms":{"rail":"x402"}}`,
		`{"method":"POST","url":"https://data.example/q","headers":{"Content-Type":"application/json"},"body":"eyJxIjoxfQ==","bodyDigest":"` + BodyDigest([]byte(`{"q":1}`)) + `","terms":{"rail":"x402"}}`,
		`{"method":"GET","url":"http://[::1]:80/x#frag","headers":{"Host":"evil"},"terms":{"rail":"x402"}}`,
		`{"method":"GET","url":"https://user:pw@data.example/","body":"!!","terms":{"rail":"x402"}}`,
		`{"method":"GET","url":"https://data.example/","headers":{"X-A":"a\r\nB: c","a b":"x"},"terms":{"rail":"acp"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Request
		if json.Unmarshal(b, &r) != nil {
			return
		}
		u, h, body, err := r.check()
		if err != nil {
			return
		}
		if u == nil || !u.IsAbs() || u.User != nil || u.Fragment != "" {
			t.Fatalf("accepted URL %q", r.URL)
		}
		for k, vs := range h {
			if forbiddenHeaders[k] || !validToken(k) {
				t.Fatalf("accepted header %q", k)
			}
			for _, v := range vs {
				for i := 0; i < len(v); i++ {
					if v[i] == '\r' || v[i] == '\n' || v[i] == 0 {
						t.Fatalf("accepted header value %q", v)
					}
				}
			}
		}
		if BodyDigest(body) != r.BodyDigest || len(body) > MaxBody {
			t.Fatalf("accepted body of %d bytes with digest %q", len(body), r.BodyDigest)
		}
	})
}
