package httpserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/auth"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
)

// AgentAuthenticator checks agent credentials: "Authorization: Bearer
// svc_ak_..." for ordinary keys, and "Authorization: DPoP svc_ak_..." plus
// a DPoP proof header (RFC 9449) for keys bound to a proof-of-possession
// key. A bound key is refused as a bearer token, and an unbound key is
// refused with the DPoP scheme, so the two kinds cannot be confused.
type AgentAuthenticator struct {
	Keys *auth.Keys
	// DPoP verifies proofs; nil refuses every DPoP-bound key.
	DPoP *auth.DPoPVerifier
	// BaseURL is the server's public base URL: a proof's htu is BaseURL
	// plus the request path.
	BaseURL string
}

// AuthenticateAgent implements Authenticator.
func (a AgentAuthenticator) AuthenticateAgent(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, auth.ErrMissing
	}
	scheme, cred, ok := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	if !ok || cred == "" {
		return Principal{}, fmt.Errorf("%w: use Authorization: Bearer <credential> (or DPoP <credential> with a DPoP proof)", auth.ErrInvalid)
	}
	k, err := a.Keys.Authenticate(r.Context(), cred)
	if err != nil {
		return Principal{}, err
	}
	p := Principal{KeyID: k.ID, Agents: k.AgentIDs, RateLimit: k.RateLimit}
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		if k.JKT != "" {
			// A DPoP-bound key is useless as a bearer token (RFC 9449 §7.1).
			return Principal{}, &auth.DPoPError{Reason: auth.DPoPMissingProof,
				Err: fmt.Errorf("this key is bound to a DPoP key: send Authorization: DPoP <credential> and a DPoP proof")}
		}
		return p, nil
	case strings.EqualFold(scheme, "DPoP"):
		if k.JKT == "" {
			return Principal{}, fmt.Errorf("%w: this key is not bound to a DPoP key; use the Bearer scheme", auth.ErrInvalid)
		}
		if a.DPoP == nil {
			return Principal{}, fmt.Errorf("%w: this server does not accept DPoP proofs", auth.ErrInvalid)
		}
		proofs := r.Header.Values("DPoP")
		if len(proofs) != 1 {
			return Principal{}, &auth.DPoPError{Reason: auth.DPoPMissingProof,
				Err: fmt.Errorf("exactly one DPoP header is required, got %d", len(proofs))}
		}
		htu := strings.TrimRight(a.BaseURL, "/") + r.URL.EscapedPath()
		if err := a.DPoP.Verify(r.Context(), proofs[0], r.Method, htu, cred, k.JKT); err != nil {
			return Principal{}, err
		}
		p.DPoP = true
		return p, nil
	}
	return Principal{}, fmt.Errorf("%w: unknown authorization scheme %q", auth.ErrInvalid, scheme)
}

// errRateLimited answers a request over its bucket.
type errRateLimited struct{ retryAfter time.Duration }

func (e errRateLimited) Error() string {
	return "httpserver: rate limited; retry after " + e.retryAfter.String()
}
func (e errRateLimited) Code() string              { return contract.CodeRateLimited }
func (e errRateLimited) RetryAfter() time.Duration { return e.retryAfter }
func (e errRateLimited) Unwrap() error             { return errRateLimitedCode }

var errRateLimitedCode = errcode.New(contract.CodeRateLimited, "httpserver: rate limited")

// take spends one token of key's bucket, sets the X-RateLimit-* headers
// (on every response whose request consumed a token, refused or not) and
// refuses a request over the limit.
func (s *server) take(w http.ResponseWriter, l *auth.Limiter, key string, override *auth.Limit) error {
	if l == nil {
		return nil
	}
	d := l.Take(key, override)
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
	if !d.Allowed {
		return errRateLimited{retryAfter: d.RetryAfter}
	}
	return nil
}

// clientAddr is the rate-limit key of an unauthenticated caller: its IP
// address (an IPv6 address by its /64, where one host usually has many).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// reqState is filled in while an operation runs and read when it ends,
// for usage counting: who called, and the problem code it came to.
type reqState struct {
	principal *Principal
	code      string
	tags      []string // X-Svc-Tags, parsed once
}

type reqStateKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(reqStateKey{}).(*reqState)
	return st
}

// countUsage records one authenticated call for GET /usage: its operation,
// its outcome ("ok" or the problem code) and the caller's X-Svc-Tags
// (malformed tags are dropped, never an error).
func (s *server) countUsage(r *http.Request, op contract.Operation, st *reqState) {
	if s.usage == nil || st.principal == nil {
		return
	}
	outcome := st.code
	if outcome == "" {
		outcome = "ok"
	}
	s.usage.Count(st.principal.KeyID, op.ID, outcome, st.tags, s.now())
}

func (s *server) usageGet(ctx context.Context, p *auth.UsageParams, _ *noBody) (auth.Report, error) {
	if s.usage == nil {
		return auth.Report{}, errNoOperations
	}
	st := stateFrom(ctx)
	if st == nil || st.principal == nil {
		return auth.Report{}, auth.ErrMissing
	}
	return s.usage.Report(ctx, st.principal.KeyID, p.Since, p.Until, p.Tags)
}
