package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Header names the contract declares on every operation.
const (
	HeaderRequestID  = "X-Request-Id"
	HeaderRetryAfter = "Retry-After"
	HeaderSignature  = "Svc-Signature"
	HeaderOperator   = "Svc-Operator"
	HeaderSvcTags    = "X-Svc-Tags"
)

// Security scheme names in the OpenAPI document.
const (
	SchemeAgent    = "agentBearer"
	SchemeOperator = "operatorSignature"
)

// OpenAPI returns the OpenAPI 3.1.0 document of the model for a server at
// baseURL (absolute http or https, no query; a trailing slash is dropped).
// The output is deterministic: the same model and baseURL give the same
// bytes, with object keys sorted.
//
// Besides the standard objects it carries, per operation, x-credential
// (none, agent or operator) and x-problem-codes (every code the operation
// can answer with), and at the top level x-problems: the problem registry.
// Event kinds are described as webhooks: the POST each subscribed endpoint
// receives.
func (m *Model) OpenAPI(baseURL string) ([]byte, error) {
	base, err := cleanBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"info": map[string]any{
			"title":       m.title,
			"version":     m.version,
			"description": m.description,
		},
		"servers":    []any{map[string]any{"url": base}},
		"paths":      m.paths(),
		"webhooks":   m.webhooks(),
		"components": m.components(),
		"tags":       m.tags(),
		"x-problems": m.problemRegistry(base),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("contract: encode OpenAPI document: %w", err)
	}
	return buf.Bytes(), nil
}

func cleanBaseURL(s string) (string, error) {
	s = strings.TrimRight(s, "/")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("contract: base URL %q is not an absolute http(s) URL without query", s)
	}
	return s, nil
}

func (m *Model) tags() []any {
	seen := make(map[string]bool)
	var names []string
	for _, op := range m.ops {
		t := opTag(op.ID)
		if !seen[t] {
			seen[t] = true
			names = append(names, t)
		}
	}
	sort.Strings(names)
	out := make([]any, 0, len(names)+1)
	for _, n := range names {
		out = append(out, map[string]any{"name": n})
	}
	if len(m.events) > 0 {
		out = append(out, map[string]any{"name": "events",
			"description": "Outbound webhook deliveries, derived from the signed record."})
	}
	return out
}

func opTag(id string) string {
	t, _, _ := strings.Cut(id, ".")
	return t
}

func ref(kind, name string) map[string]any {
	return map[string]any{"$ref": "#/components/" + kind + "/" + name}
}

func (m *Model) paths() map[string]any {
	paths := make(map[string]any)
	for _, op := range m.ops {
		item, _ := paths[op.Path].(map[string]any)
		if item == nil {
			item = make(map[string]any)
			paths[op.Path] = item
		}
		item[strings.ToLower(op.Method)] = m.operation(op)
	}
	return paths
}

func (m *Model) operation(op Operation) map[string]any {
	docs := m.opDocs[op.ID]
	params := []any{ref("parameters", "RequestId")}
	for _, p := range docs.params {
		pm := map[string]any{"name": p.name, "in": p.in, "schema": p.schema}
		if p.required {
			pm["required"] = true
		}
		if p.description != "" {
			pm["description"] = p.description
		}
		params = append(params, pm)
	}
	codes := m.ProblemCodes(op)
	o := map[string]any{
		"operationId":     op.ID,
		"summary":         op.Summary,
		"tags":            []any{opTag(op.ID)},
		"parameters":      params,
		"responses":       m.responses(op, docs, codes),
		"x-credential":    op.Credential.String(),
		"x-problem-codes": codes,
	}
	if op.Description != "" {
		o["description"] = op.Description
	}
	switch op.Credential {
	case CredentialNone:
		o["security"] = []any{} // explicitly none
	case CredentialAgent:
		o["security"] = []any{map[string]any{SchemeAgent: []any{}}}
	case CredentialOperator:
		o["security"] = []any{map[string]any{SchemeOperator: []any{}}}
	}
	if op.Body != nil {
		o["requestBody"] = map[string]any{
			"required":    true,
			"description": "JSON, at most the server's body limit (1 MiB by default). Unknown members are refused.",
			"content":     map[string]any{MediaJSON: map[string]any{"schema": docs.body}},
		}
	}
	return o
}

func (m *Model) responses(op Operation, docs opSchemas, codes []string) map[string]any {
	out := make(map[string]any)
	for i, r := range op.Responses {
		resp := map[string]any{
			"description": r.Description,
			"headers":     map[string]any{HeaderRequestID: ref("headers", "X-Request-Id")},
		}
		if len(r.Content) > 0 {
			content := make(map[string]any)
			for j, c := range r.Content {
				content[c.MediaType] = map[string]any{"schema": docs.response[i][j]}
			}
			resp["content"] = content
		}
		out[strconv.Itoa(r.Status)] = resp
	}
	// Group problem codes by status: one response object per status, its
	// schema narrowing code to the codes that status carries.
	byStatus := make(map[int][]string)
	for _, c := range codes {
		p := m.problems[c]
		byStatus[p.Status] = append(byStatus[p.Status], c)
	}
	for status, cs := range byStatus {
		headers := map[string]any{HeaderRequestID: ref("headers", "X-Request-Id")}
		enum := make([]any, len(cs))
		var titles []string
		for i, c := range cs {
			enum[i] = c
			p := m.problems[c]
			titles = append(titles, fmt.Sprintf("%s (%s)", c, p.Title))
			if p.Action == ActionRetryAsIs {
				headers[HeaderRetryAfter] = ref("headers", "Retry-After")
			}
		}
		schema := ref("schemas", "Problem")
		schema["properties"] = map[string]any{"code": map[string]any{"enum": enum}}
		out[strconv.Itoa(status)] = map[string]any{
			"description": "Problem: " + strings.Join(titles, ", "),
			"headers":     headers,
			"content":     map[string]any{MediaProblem: map[string]any{"schema": schema}},
		}
	}
	return out
}

func (m *Model) components() map[string]any {
	schemas := make(map[string]any, len(m.gen.components))
	for name, s := range m.gen.components {
		schemas[name] = s
	}
	return map[string]any{
		"schemas": schemas,
		"securitySchemes": map[string]any{
			SchemeAgent: map[string]any{
				"type": "http", "scheme": "bearer",
				"description": "The agent credential: Authorization: Bearer <credential>.",
			},
			SchemeOperator: map[string]any{
				"type": "apiKey", "in": "header", "name": HeaderOperator,
				"description": "A person's detached signature over the operation id, method, URL, timestamp, " +
					"nonce and body digest (RFC 8941 dictionary: keyid, ts, nonce, sig).",
			},
		},
		"parameters": map[string]any{
			"RequestId": map[string]any{
				"name": HeaderRequestID, "in": "header",
				"description": "Caller's request id: 1 to 128 visible ASCII characters. Echoed on the response; " +
					"one is minted (req_ + ULID) when absent or invalid.",
				"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": 128, "pattern": `^[\x21-\x7E]+$`},
			},
		},
		"headers": map[string]any{
			"X-Request-Id": map[string]any{
				"description": "The request id: the caller's value when valid, else a minted req_ + ULID.",
				"schema":      map[string]any{"type": "string"},
			},
			"Retry-After": map[string]any{
				"description": "Seconds to wait before sending the same request again; present whenever the problem's action is retry-as-is.",
				"schema":      map[string]any{"type": "integer", "minimum": 1},
			},
		},
	}
}

func (m *Model) webhooks() map[string]any {
	out := make(map[string]any)
	for _, ev := range m.events {
		schema := maps.Clone(m.eventDocs[ev.Name])
		if _, isRef := schema["$ref"]; isRef {
			schema["properties"] = map[string]any{"type": map[string]any{"const": ev.Name}}
		}
		out[ev.Name] = map[string]any{
			"post": map[string]any{
				"operationId": "event." + ev.Name,
				"summary":     ev.Description,
				"tags":        []any{"events"},
				"description": "Delivered at least once to every active endpoint subscribed to " + ev.Name +
					". Verify Svc-Signature over the raw body before parsing it; deduplicate on id.",
				"parameters": []any{map[string]any{
					"name": HeaderSignature, "in": "header", "required": true,
					"description": "t=<unix seconds>,v1=<hex HMAC-SHA256 of \"{t}.{raw body}\" keyed by the endpoint secret>; " +
						"several v1 values during secret rotation.",
					"schema": map[string]any{"type": "string", "pattern": `^t=[0-9]+(,v1=[0-9a-f]{64})+$`},
				}},
				"requestBody": map[string]any{
					"required": true,
					"content":  map[string]any{MediaJSON: map[string]any{"schema": schema}},
				},
				"responses": map[string]any{
					"2XX": map[string]any{"description": "Received; delivery of this event ends."},
					"410": map[string]any{"description": "Gone: the endpoint is deactivated and receives no more deliveries."},
				},
			},
		}
	}
	return out
}

func (m *Model) problemRegistry(base string) map[string]any {
	out := make(map[string]any, len(m.codes))
	for _, c := range m.codes {
		p := m.problems[c]
		e := map[string]any{
			"type":        base + "/problems/" + c,
			"status":      p.Status,
			"title":       p.Title,
			"action":      string(p.Action),
			"description": p.Description,
		}
		if p.RetryAfter > 0 {
			e["retryAfter"] = p.RetryAfter
		}
		out[c] = e
	}
	return out
}
