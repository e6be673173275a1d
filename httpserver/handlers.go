package httpserver

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/contract"
	"github.com/countersign/countersign/internal/errcode"
	"github.com/countersign/countersign/product"
)

var errNoSuchProblem = errcode.New(contract.CodeRouteNotFound, "httpserver: no problem type has the code")

// endpoints binds every operation of the release to its handler. A new
// operation of product.Definition needs an entry here, and New fails until
// it has one.
func (s *server) endpoints() map[string]endpoint {
	eps := map[string]endpoint{
		"audit.list":        jsonEndpoint(s.auditList),
		"audit.checkpoint":  rawEndpoint(s.auditCheckpoint),
		"audit.entry":       jsonEndpoint(s.auditEntry),
		"audit.consistency": jsonEndpoint(s.auditConsistency),
		"audit.stream":      rawEndpoint(s.auditStream),
		"pay.create":        rawEndpoint(s.payCreate),
		"intents.get":       jsonEndpoint(s.intentGet),
		"intents.events":    jsonEndpoint(s.intentEvents),
		"usage.get":         jsonEndpoint(s.usageGet),

		"operator.approve":       rawEndpoint(s.opApprove),
		"operator.decline":       jsonEndpoint(s.opDecline),
		"operator.refund":        jsonEndpoint(s.opRefund),
		"operator.kill_switch":   jsonEndpoint(s.opKillSwitch),
		"operator.breaker_reset": jsonEndpoint(s.opBreakerReset),
		"operator.approvals":     jsonEndpoint(s.opApprovals),
		"operator.settling":      jsonEndpoint(s.opSettling),
		"operator.agents.create": rawEndpoint(s.opAgentsCreate),
		"operator.agents.list":   jsonEndpoint(s.opAgentsList),
		"operator.agents.revoke": jsonEndpoint(s.opAgentsRevoke),

		"webhooks.create":     rawEndpoint(s.whCreate),
		"webhooks.list":       jsonEndpoint(s.whList),
		"webhooks.get":        jsonEndpoint(s.whGet),
		"webhooks.update":     rawEndpoint(s.whUpdate),
		"webhooks.delete":     rawEndpoint(s.whDelete),
		"webhooks.deliveries": jsonEndpoint(s.whDeliveries),
		"webhooks.retry":      jsonEndpoint(s.whRetry),

		"commerce.quote": jsonEndpoint(s.quote),
		"commerce.buy":   rawEndpoint(s.buy),

		"commerce.merchants.create": rawEndpoint(s.merchantCreate),
		"commerce.merchants.list":   jsonEndpoint(s.merchantList),

		"x402.fetch": rawEndpoint(s.x402Fetch),

		"identity.disclose":              rawEndpoint(s.disclose),
		"identity.well_known":            rawEndpoint(s.disclose),
		"identity.respond":               jsonEndpoint(s.respond),
		"identity.challenge":             rawEndpoint(s.challenge),
		"identity.verify":                rawEndpoint(s.verifyRoute),
		"identity.resolve":               jsonEndpoint(s.resolve),
		"identity.counterparties.create": rawEndpoint(s.counterpartyCreate),
		"identity.counterparties.list":   jsonEndpoint(s.counterpartyList),
		"identity.revoke":                rawEndpoint(s.identityRevoke),
		"identity.rotate":                jsonEndpoint(s.identityRotate),

		"memory.remember": rawEndpoint(s.memRemember),
		"memory.recall":   jsonEndpoint(s.memRecall),
		"memory.assemble": jsonEndpoint(s.memAssemble),
		"memory.verify":   jsonEndpoint(s.memVerify),
		"memory.forget":   jsonEndpoint(s.memForget),
		"memory.taint":    jsonEndpoint(s.memTaint),

		"openapi.get":  rawEndpoint(s.openAPI),
		"asyncapi.get": rawEndpoint(s.asyncAPI),
		"health.get":   jsonEndpoint(s.health),
		"problems.get": rawEndpoint(s.problemPage),
	}
	s.protocolEndpoints(eps)
	return eps
}

func (s *server) auditList(ctx context.Context, p *audit.AuditListParams, _ *noBody) (audit.Page, error) {
	page, err := s.audit.Page(ctx, p.Cursor, p.Limit)
	if err != nil {
		return audit.Page{}, err
	}
	if page.Data == nil {
		page.Data = []audit.Entry{} // a list is always an array on the wire, never null
	}
	return page, nil
}

func (s *server) auditCheckpoint(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	c, err := s.audit.Checkpoint(r.Context())
	if err != nil {
		return err
	}
	w.Header().Add("Vary", "Accept")
	if negotiate(r.Header.Get("Accept"), contract.MediaJSON, contract.MediaText) == contract.MediaText {
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(c.Note)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(c.Note))
		return nil
	}
	return s.writeJSON(w, http.StatusOK, c)
}

func (s *server) auditEntry(ctx context.Context, p *audit.AuditEntryParams, _ *noBody) (audit.AuditEntryWithProof, error) {
	e, err := s.audit.Get(ctx, p.Seq)
	if err != nil {
		return audit.AuditEntryWithProof{}, err
	}
	proof, err := s.audit.Inclusion(ctx, p.Seq, p.TreeSize)
	if err != nil {
		return audit.AuditEntryWithProof{}, err
	}
	if proof.Hashes == nil {
		proof.Hashes = []string{}
	}
	return audit.AuditEntryWithProof{Entry: e, Proof: proof}, nil
}

func (s *server) auditConsistency(ctx context.Context, p *audit.AuditConsistencyParams, _ *noBody) (audit.ConsistencyProof, error) {
	proof, err := s.audit.Consistency(ctx, *p.From, p.To)
	if err != nil {
		return audit.ConsistencyProof{}, err
	}
	if proof.Hashes == nil {
		proof.Hashes = []string{}
	}
	return proof, nil
}

func (s *server) auditStream(w http.ResponseWriter, r *http.Request, p *audit.AuditStreamParams) error {
	after, err := resumePoint(p.LastEventID, p.After)
	if err != nil {
		return err
	}
	return serveAuditStream(w, r, s.auditHub, after, streamOptions{Logger: s.log})
}

func (s *server) openAPI(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	h := w.Header()
	h.Set("ETag", s.etag)
	h.Set("Cache-Control", "no-cache")
	if r.Header.Get("If-None-Match") == s.etag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	h.Set("Content-Type", contract.MediaJSON)
	h.Set("Content-Length", strconv.Itoa(len(s.openapi)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.openapi)
	return nil
}

func (s *server) asyncAPI(w http.ResponseWriter, r *http.Request, _ *noParams) error {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", contract.MediaJSON)
	h.Set("Content-Length", strconv.Itoa(len(s.asyncapi)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.asyncapi)
	return nil
}

func (s *server) health(context.Context, *noParams, *noBody) (product.Health, error) {
	return product.Health{Status: "ok"}, nil
}

func (s *server) problemPage(w http.ResponseWriter, r *http.Request, p *product.ProblemPageParams) error {
	pt, ok := s.model.Problem(p.Code)
	if !ok {
		return fmt.Errorf("%w: %q", errNoSuchProblem, p.Code)
	}
	var buf bytes.Buffer
	if err := s.pageTmpl.Execute(&buf, problemPage{ProblemType: pt, Type: s.baseURL + "/problems/" + pt.Code, BaseURL: s.baseURL}); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}

type problemPage struct {
	contract.ProblemType
	Type, BaseURL string
}

const problemPageHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Code}}: {{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:0 .25em}dt{font-weight:600}dd{margin:0 0 .75rem}</style>
</head>
<body>
<h1>{{.Title}}</h1>
<dl>
<dt>Code</dt><dd><code>{{.Code}}</code></dd>
<dt>HTTP status</dt><dd>{{.Status}}</dd>
<dt>Action</dt><dd><code>{{.Action}}</code>{{if .RetryAfter}} (Retry-After {{.RetryAfter}} s by default){{end}}</dd>
<dt>Type</dt><dd><code>{{.Type}}</code></dd>
</dl>
<p>{{.Description}}</p>
<p>Every problem is sent as <code>application/problem+json</code> with this code and action.
The full contract is at <a href="{{.BaseURL}}/openapi.json">/openapi.json</a>.</p>
</body>
</html>
`
